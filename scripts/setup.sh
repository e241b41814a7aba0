#!/usr/bin/env bash
# Installs every Debian package ptopt needs to build, test and run. Idempotent:
# packages already present are skipped, so a second run does nothing.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config
  libtorch-dev                 # LibTorch 1.13 (CPU), found with find_package(Torch)
  libopenblas0-openmp          # without it LibTorch uses the reference BLAS (~10x slower convs)
  python3-torch python3-torchvision   # fixtures and reload checks in stock PyTorch
  python3-torchaudio python3-torchtext  # the speech-and-text corpus (tests/corpus/run_speech_text.py)
  libboost-graph-dev           # Boost.Graph adaptor over the IR
  libgraphviz-dev              # optional in-process SVG/PNG rendering
  catch2 libcli11-dev nlohmann-json3-dev libfmt-dev
  zlib1g-dev                   # inflates deflated entries in the zip pre-check
  libcpuinfo-dev               # the AVX2 world of scripts/avx2-cap.sh (caps cpuinfo for 1.13)
  clang libclang-rt-14-dev     # libFuzzer and the sanitizers (scripts/fuzz.sh)
  python3-matplotlib           # the PNG plot of bench/harness.py
  python3-dev pybind11-dev     # the Python package (python/: pybind11 against libtorch_python)
  python3-venv                 # the PyTorch 2.x world (scripts/setup-torch2.sh: .venv with PyPI torch)
  python3-pytest               # its tests (tests/python/test_*.py, run by ctest)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
