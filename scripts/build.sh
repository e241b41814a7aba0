#!/usr/bin/env bash
# Configures and builds ptopt (Ninja, RelWithDebInfo) in one of two worlds:
#   scripts/build.sh [--world debian]   Debian's LibTorch 1.13 (CPU) in build/
#   scripts/build.sh --world torch2     the PyPI PyTorch 2.x of .venv (its CUDA
#                                       LibTorch, CUDA compiled in) in build-torch2/
# Any other PyTorch install: cmake -S . -B DIR -G Ninja -DPTOPT_PYTHON=/path/to/venv/bin/python
# (LibTorch is then the one inside that Python's torch). Extra arguments are
# passed to `cmake --build` (e.g. --target ptopt).
set -euo pipefail
cd "$(dirname "$0")/.."
world=debian
if [ "${1:-}" = "--world" ]; then world=${2:?--world debian|torch2}; shift 2; fi
case "$world" in
  debian) dir=build; python=/usr/bin/python3 ;;
  torch2) dir=build-torch2; python=$PWD/${PTOPT_VENV:-.venv}/bin/python ;;
  *) echo "build.sh: unknown world '$world' (debian or torch2)" >&2; exit 2 ;;
esac
if [ ! -f "$dir/build.ninja" ]; then
  # -g1: line tables only (backtraces and profiles keep file:line); full -g
  # makes every object several times larger and a 2-core build much slower.
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
    -DPTOPT_BUILD_TESTS=ON -DPTOPT_PYTHON="$python"
fi
cmake --build "$dir" -j "$(nproc)" "$@"
