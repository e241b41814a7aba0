// ptopt's version: one definition, CMake's project(VERSION), for --version,
// --report, the Python package and the tuning cache's context (a newer ptopt
// may rewrite differently, so it re-tunes rather than reuse an older one's
// decisions).
#pragma once

namespace ptopt {

const char* ptoptVersion();  // "0.1.0"

}  // namespace ptopt
