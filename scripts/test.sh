#!/usr/bin/env bash
# README command (b): install what is missing, build, run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
./scripts/link-python.sh  # `import ptopt` for /usr/bin/python3
cd build
ctest --output-on-failure -j "$(nproc)" "$@"
