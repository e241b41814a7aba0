#include "rewriters/name_list.h"

#include <cctype>

namespace ptopt::rewriters {

std::set<std::string> parseNameList(const std::string& text) {
  std::set<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.pop_back();
    size_t skip = 0;
    while (skip < item.size() && std::isspace(static_cast<unsigned char>(item[skip]))) ++skip;
    if (skip < item.size() && item[skip] == '%') ++skip;
    item.erase(0, skip);
    if (!item.empty()) out.insert(item);
    start = end + 1;
  }
  return out;
}

std::string joinNameList(const std::set<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ";") + n;
  return s;
}

}  // namespace ptopt::rewriters
