#include "ir/version.h"

#include <string>

namespace ptopt {

// PTOPT_VERSION comes from ir/CMakeLists.txt (for this file only, so that a
// new version recompiles one file).
const char* ptoptVersion() { return PTOPT_VERSION; }

const char* builtAgainst() {
  static const std::string text = std::string("LibTorch ") + PTOPT_TORCH_VERSION +
                                  (*PTOPT_TORCH_CUDA ? std::string(", CUDA ") + PTOPT_TORCH_CUDA + " compiled in"
                                                     : std::string(", CPU only: no CUDA compiled in"));
  return text.c_str();
}

}  // namespace ptopt
