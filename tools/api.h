// The C++ API's installed include path: `#include <tools/api.h>` (what
// programs built with find_package(ptopt) include). The API is api/api.h.
#pragma once

#include "api/api.h"
