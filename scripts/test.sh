#!/usr/bin/env bash
# README command (b): install what is missing, build, and run the whole
# suite through ctest, in both PyTorch worlds:
#   debian  Debian's LibTorch 1.13 (CPU) in build/, fixtures by /usr/bin/python3
#   torch2  PyPI PyTorch 2.x in .venv (its CUDA LibTorch: CUDA compiled in,
#           CUDA tests skip without a GPU) in build-torch2/, fixtures by .venv's torch
#   scripts/test.sh                    both worlds
#   scripts/test.sh --world torch2     one world
#   scripts/test.sh --avx2 ...         with the CPU capped to AVX2 (scripts/avx2-cap.sh)
# Further arguments go to ctest (e.g. -R tune_tests).
set -euo pipefail
cd "$(dirname "$0")/.."
worlds=(debian torch2)
cap=()
while [ $# -gt 0 ]; do
  case "$1" in
    --world) worlds=("${2:?--world debian|torch2}"); shift 2 ;;
    --avx2) cap=(./scripts/avx2-cap.sh); shift ;;
    *) break ;;
  esac
done
for world in "${worlds[@]}"; do
  case "$world" in
    debian) ./scripts/setup.sh; dir=build ;;
    torch2) ./scripts/setup-torch2.sh; dir=build-torch2 ;;
    *) echo "test.sh: unknown world '$world' (debian or torch2)" >&2; exit 2 ;;
  esac
  ./scripts/build.sh --world "$world"
  [ "$world" = debian ] && ./scripts/link-python.sh  # `import ptopt` for /usr/bin/python3
  echo "== test.sh: the $world world (${dir}/)${cap:+, CPU capped to AVX2}"
  "${cap[@]}" ${cap:+--world "$world"} ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" "$@"
done
