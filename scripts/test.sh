#!/usr/bin/env bash
# README command (b): install what is missing, build, run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)" "$@"
