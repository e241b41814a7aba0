#!/usr/bin/env bash
# The peers of bench/peers.py, pinned, into the PyTorch 2.x world's .venv
# (scripts/setup-torch2.sh first): ONNX Runtime and the exporters it needs,
# OpenVINO, the model zoos for the transformer and timm models, torchao (its
# x86 int8 passes let Inductor compile an int8 .pt2: bench/pt2_int8.py); and
# matplotlib, with which bench/chart.py draws the charts of docs/benchmarks.md.
# Optional: bench/peers.py reports a missing one as "not installed". The
# pins are the versions docs/benchmarks.md's peers tables were measured with.
# Idempotent: a venv that has every pin is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup-torch2.sh
venv=${PTOPT_VENV:-.venv}
pins=(onnx==1.23.2 onnxscript==0.7.2 onnxruntime==1.32.0 openvino==2026.4.1 transformers==5.25.0 timm==1.0.31
      matplotlib==3.11.2 torchao==0.18.0)
if "$venv/bin/python" - "${pins[@]}" <<'PY' 2>/dev/null; then
import sys, importlib.metadata as md
for pin in sys.argv[1:]:
    name, version = pin.split("==")
    assert md.version(name) == version, name
PY
  echo "setup-peers: $venv has every pin"
  exit 0
fi
# --no-deps for nothing: their dependencies come along, but torch, torchvision
# and numpy stay at scripts/requirements-torch2.txt's pins (-c).
"$venv/bin/pip" install -q --disable-pip-version-check -c scripts/requirements-torch2.txt "${pins[@]}"
echo "setup-peers: installed ${pins[*]}"
