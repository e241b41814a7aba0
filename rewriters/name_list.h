// Lists of IR value names in pass options: `nodes=a;b`, `regions=a;b`,
// `mkldnn=a;b` (the form `--tune` writes and users may type).
#pragma once

#include <set>
#include <string>

namespace ptopt::rewriters {

// "a; b;;%c" -> {a, b, c}: ';'-separated, blanks around items, empty items
// and a leading '%' (as --explain prints names) dropped.
std::set<std::string> parseNameList(const std::string& text);
// {b, a} -> "a;b" (sorted).
std::string joinNameList(const std::set<std::string>& names);

}  // namespace ptopt::rewriters
