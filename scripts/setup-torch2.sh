#!/usr/bin/env bash
# The PyTorch 2.x world: Debian's packages (scripts/setup.sh), then a virtual
# environment in .venv (Debian's python3) with the PyPI PyTorch pinned in
# scripts/requirements-torch2.txt. Its wheel carries a CUDA LibTorch, which
# scripts/build.sh --world torch2 builds against (CUDA compiled in; nvcc and
# cuDNN's headers from /usr/local/cuda when present). Idempotent: a venv that
# already has the pins is left alone. PTOPT_VENV=DIR puts it elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
venv=${PTOPT_VENV:-.venv}
req=scripts/requirements-torch2.txt
if [ ! -x "$venv/bin/python" ]; then
  echo "setup-torch2: creating $venv"
  /usr/bin/python3 -m venv "$venv"
fi
# Every pin already installed? (pip's resolver takes tens of seconds even then.)
if "$venv/bin/python" - "$req" <<'PY' 2>/dev/null; then
import sys, importlib.metadata as md
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, version = line.split("==")
    assert md.version(name).split("+")[0] == version, name
PY
  echo "setup-torch2: $venv has every pin of $req"
  exit 0
fi
echo "setup-torch2: installing $req into $venv (PyTorch with its CUDA libraries: about 4 GB)"
"$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
"$venv/bin/python" -W ignore -c 'import torch, torchvision; print("setup-torch2: torch", torch.__version__, "torchvision", torchvision.__version__)'
