#!/usr/bin/env bash
# Configures and builds ptopt in build/ (Ninja, RelWithDebInfo). Extra
# arguments are passed to `cmake --build` (e.g. --target ptopt).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPTOPT_BUILD_TESTS=ON
fi
cmake --build build -j "$(nproc)" "$@"
