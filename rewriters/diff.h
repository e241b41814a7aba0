// Unified diff of two texts, line by line (Myers' O(ND) algorithm), for
// --print-changed.
#pragma once

#include <string>

namespace ptopt::rewriters {

// Empty when the texts are equal.
std::string unifiedDiff(const std::string& before, const std::string& after,
                        const std::string& beforeLabel, const std::string& afterLabel,
                        size_t context = 3);

}  // namespace ptopt::rewriters
