#!/usr/bin/env bash
# Models that hold values shape-prop cannot size (issue 37): a text encoder
# whose nn.TransformerEncoder, given a padding mask, runs its fast path on a
# nested tensor. Scripted and traced, each optimizes at -O1, -O2, -O3 and
# --tune with its real inputs, verifies, and reloads in stock PyTorch with
# the same outputs as the original.
# Usage: nested_tensor_test.sh PTOPT PYTHON
set -u
ptopt=$1; py=$2
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
"$py" "$(dirname "$0")/make_text_encoder.py" "$work" || { echo "FAIL: cannot make the models"; exit 1; }
for mode in script trace; do
  in=$work/te_$mode.pt
  for level in -O1 -O2 -O3 --tune; do
    extra=()
    [ "$level" = --tune ] && extra=(-O2 --tune-budget 3 --tuning-cache "$work/cache.json")
    out=$work/te_$mode${level//-/_}.pt
    expect 0 "PASSED" -- "$ptopt" "$in" "$out" "$level" "${extra[@]}" --inputs "$work/te_inputs.pt" --no-measure
    "$py" - "$in" "$out" "$work/te_inputs.pt" <<'PY' || fail "$mode $level: the output does not reload or differs"
import sys, warnings
warnings.filterwarnings("ignore")
import torch
tokens, mask = torch.load(sys.argv[3])
a, b = torch.jit.load(sys.argv[1]), torch.jit.load(sys.argv[2])
with torch.no_grad():
    x, y = a(tokens, mask), b(tokens, mask)
err = (x - y).abs().max().item()
assert err <= 2e-2 * max(1.0, x.abs().max().item()), err  # -O3 may run bf16 where the CPU has it
PY
  done
done
[ "$failures" = 0 ] && echo "nested tensors: every preset optimizes, verifies and reloads"
exit $((failures > 0))
