// ptopt's version: one definition, CMake's project(VERSION), for --version,
// --report, the Python package and the tuning cache's context (a newer ptopt
// may rewrite differently, so it re-tunes rather than reuse an older one's
// decisions).
#pragma once

namespace ptopt {

const char* ptoptVersion();  // "0.1.0"

// What this build was compiled against, for --version and the Python
// package: "LibTorch 2.15.0, CUDA 13.0 compiled in" or "LibTorch 1.13.0, CPU only: no
// CUDA compiled in".
const char* builtAgainst();

}  // namespace ptopt
