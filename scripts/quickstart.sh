#!/usr/bin/env bash
# README command (a): install what is missing, build ptopt, and optimize the
# bundled default model (a ResNet-18 with random weights, scripted on first
# run) into out/resnet18.opt.pt.
#   scripts/quickstart.sh                  Debian's PyTorch 1.13 (apt only: the
#                                          fastest start, no 4 GB download)
#   scripts/quickstart.sh --world torch2   PyPI's PyTorch 2.x in .venv (what
#                                          users run; downloads PyTorch, about
#                                          4 GB, and builds against it)
# PTOPT_ARGS replaces the preset (default -O1).
set -euo pipefail
cd "$(dirname "$0")/.."
world=debian
if [ "${1:-}" = "--world" ]; then world=${2:?--world debian|torch2}; shift 2; fi
case "$world" in
  debian) ./scripts/setup.sh; dir=build; python=/usr/bin/python3 ;;
  torch2) ./scripts/setup-torch2.sh; dir=build-torch2; python=$PWD/${PTOPT_VENV:-.venv}/bin/python ;;
  *) echo "quickstart.sh: unknown world '$world' (debian or torch2)" >&2; exit 2 ;;
esac
./scripts/build.sh --world "$world" --target ptopt
# The Python package (when pybind11 and the Python headers are there): made
# importable for /usr/bin/python3 in the Debian world (scripts/link-python.sh);
# in the torch2 world `pip install --no-build-isolation .` puts it in a venv.
if grep -q "ptopt_python" "$dir/build.ninja" 2>/dev/null; then
  ./scripts/build.sh --world "$world" --target ptopt_python
  [ "$world" = debian ] && ./scripts/link-python.sh
fi
model=models/resnet18.pt
if [ ! -f "$model" ]; then
  echo "== scripting a ResNet-18 with random weights into $model"
  "$python" -W ignore scripts/make_default_model.py "$model"
fi
mkdir -p out
echo "== ptopt $model out/resnet18.opt.pt ${PTOPT_ARGS:--O1} ($world world)"
"./$dir/tools/ptopt" "$model" out/resnet18.opt.pt ${PTOPT_ARGS:--O1} \
  --input-shape 1,3,224,224 --overwrite
