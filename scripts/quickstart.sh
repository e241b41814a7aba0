#!/usr/bin/env bash
# README command (a): install what is missing, build ptopt, and optimize the
# bundled default model (a ResNet-18 with random weights, scripted by
# Debian's torchvision on first run) into out/resnet18.opt.pt.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh --target ptopt
# The Python package (when pybind11 and the Python headers are there), made
# importable for /usr/bin/python3 (scripts/link-python.sh).
if grep -q "ptopt_python" build/build.ninja 2>/dev/null; then
  ./scripts/build.sh --target ptopt_python
  ./scripts/link-python.sh
fi
model=models/resnet18.pt
if [ ! -f "$model" ]; then
  echo "== scripting a ResNet-18 with random weights into $model"
  /usr/bin/python3 scripts/make_default_model.py "$model"
fi
mkdir -p out
echo "== ptopt $model out/resnet18.opt.pt ${PTOPT_ARGS:--O1}"
./build/tools/ptopt "$model" out/resnet18.opt.pt ${PTOPT_ARGS:--O1} \
  --input-shape 1,3,224,224 --overwrite
