#include "ir/version.h"

namespace ptopt {

// PTOPT_VERSION comes from ir/CMakeLists.txt (for this file only, so that a
// new version recompiles one file).
const char* ptoptVersion() { return PTOPT_VERSION; }

}  // namespace ptopt
