#!/usr/bin/env bash
# Times the zip pre-check on a 100 MB TorchScript model (a scripted
# Linear(5000, 5000)) and on the small conv model of the bad-input corpus.
# Usage: bench/archive_check.sh [BUILD_DIR] [RUNS]
set -euo pipefail
build=${1:-build}
runs=${2:-5}
cmake --build "$build" --target archive_check_bench >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 - "$tmp" <<'PY'
import sys, torch
out = sys.argv[1]
torch.jit.script(torch.nn.Sequential(torch.nn.Linear(5000, 5000), torch.nn.ReLU())).save(out + "/linear_100mb.pt")
torch.jit.script(torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8))).save(out + "/small.pt")
PY
"$build/tests/archive_check_bench" --runs "$runs" "$tmp/linear_100mb.pt" "$tmp/small.pt"
