#!/usr/bin/env bash
# End-to-end checks of inputs with defaults (issue 18, part 5): an input with
# a default may be left out (its default is used) in --input-shape, --inputs
# files, `ptopt verify` and `ptopt bench`; `name:none` passes None; a missing
# required input names the optional ones; the saved model keeps the defaults.
# Usage: optional_inputs_test.sh PTOPT PYTHON
set -u
ptopt=$1; py=$2
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
m=$work/m
"$py" "$(dirname "$0")/make_optional_inputs.py" "$m" || { echo "FAIL: cannot make the models"; exit 1; }
ob=$m/optional_bias.pt  # forward(x, bias: Optional[Tensor] = None)
sc=$m/scaled.pt         # forward(x, y, scale: int = 2, bias: Optional[Tensor] = None)

# Left out: the default is used (and named), verification passes (BN folded: not bitwise).
expect 0 "passed within tolerance \(3 seeded runs \(seed 0\) of 1,3,16,16 bias:default\(None\)" -- \
  "$ptopt" "$ob" "$work/ob.pt" -O1 --input-shape 1,3,16,16
expect 0 "of 2,4 2,4 scale:default\(2\) bias:default\(None\)" -- "$ptopt" "$sc" "$work/sc.pt" -O1 \
  --input-shape 2,4 --input-shape 2,4
expect 0 "PASSED" -- "$ptopt" "$ob" "$work/ob2.pt" -O2 --input-shape 1,3,16,16
# Explicit None, by name and by position; an explicit tensor.
expect 0 "of 1,3,16,16 bias:none" -- "$ptopt" "$ob" "$work/ob_none.pt" -O1 --input-shape 1,3,16,16 --input-shape bias:none
expect 0 "of 1,3,16,16 none" -- "$ptopt" "$ob" "$work/ob_none2.pt" -O1 --input-shape 1,3,16,16 --input-shape none
expect 0 "of 1,3,16,16 1,4,16,16" -- "$ptopt" "$ob" "$work/ob_t.pt" -O1 --input-shape 1,3,16,16 --input-shape 1,4,16,16
# A named spec skips the inputs before it (scale keeps its default).
expect 0 "of 2,4 2,4 scale:default\(2\) bias:2,4" -- "$ptopt" "$sc" "$work/sc_b.pt" -O1 \
  --input-shape 2,4 --input-shape 2,4 --input-shape bias:2,4
expect 0 "of 2,4 2,4 int:3 none" -- "$ptopt" "$sc" "$work/sc_3.pt" -O1 \
  --input-shape 2,4 --input-shape 2,4 --input-shape int:3 --input-shape none
# No shape: inferred for x from the first conv; bias keeps its default.
expect 0 "assumed input x = 1,3,224,224 \(the first op is aten::conv2d with 3 input channels; left at their defaults: bias:default\(None\)\)" -- \
  "$ptopt" "$ob" "$work/ob_inferred.pt" -O1 --verify-iters 1

# A required input missing: named with the optional ones, exit 2, nothing written.
expect 2 "the model takes 4 input\(s\) \(x, y, scale, bias\); --input-shape was given 1 time\(s\): missing y \(optional inputs: scale, bias\)" -- \
  "$ptopt" "$sc" "$work/miss.pt" -O1 --input-shape 2,4
[ ! -e "$work/miss.pt" ] || fail "output written despite a missing input"
# None for an input that is not Optional, an unknown name, an input given twice.
expect 2 "input 'x' is Tensor, not Optional: it cannot be None" -- "$ptopt" "$ob" "$work/bad.pt" --input-shape none
expect 2 "names 'z', but the model has no input of that name \(inputs: x, bias\)" -- \
  "$ptopt" "$ob" "$work/bad.pt" --input-shape 1,3,16,16 --input-shape z:1,4,16,16
expect 2 "input 'x' is given twice" -- "$ptopt" "$ob" "$work/bad.pt" --input-shape 1,3,16,16 --input-shape x:1,3,16,16
expect 2 "too many" -- "$ptopt" "$ob" "$work/bad.pt" --input-shape 1,3,16,16 --input-shape none --input-shape none
[ ! -e "$work/bad.pt" ] || fail "output written despite bad inputs"

# --inputs files: a shorter tuple, a dict without the optional keys; a dict without a required one.
expect 0 "passed.*1 run on 2 input\(s\) from --inputs" -- "$ptopt" "$ob" "$work/ob_f.pt" -O1 --inputs "$m/ob_tuple1.pt"
expect 0 "passed.*1 run on 4 input\(s\) from --inputs" -- "$ptopt" "$sc" "$work/sc_f.pt" -O1 --inputs "$m/sc_tuple2.pt"
expect 0 "passed.*1 run on 4 input\(s\) from --inputs" -- "$ptopt" "$sc" "$work/sc_d.pt" -O1 --inputs "$m/sc_dict_xy.pt"
expect 2 "holds 2 value\(s\): missing y \(optional inputs: scale, bias\)" -- \
  "$ptopt" "$sc" "$work/sc_d2.pt" -O1 --inputs "$m/sc_dict_xb.pt"
[ ! -e "$work/sc_d2.pt" ] || fail "output written despite a missing input"

# ptopt verify and ptopt bench with the input left out.
expect 0 "^PASSED" -- "$ptopt" verify "$ob" "$work/ob.pt" --input-shape 1,3,16,16
expect 0 "^PASSED" -- "$ptopt" verify "$sc" "$work/sc.pt" --inputs "$m/sc_dict_xy.pt"
expect 0 "B/A median ratio" -- "$ptopt" bench "$ob" --vs "$work/ob.pt" --input-shape 1,3,16,16 \
  --threads 1 --warmup 0.05 --iters 5 --json "$work/bench.json"
grep -q '"inputs": "1,3,16,16 bias:default(None)"' "$work/bench.json" || fail "bench JSON inputs: $(cat "$work/bench.json")"
expect 0 "runs: min" -- "$ptopt" bench "$sc" --input-shape 2,4 --input-shape 2,4 --threads 1 --warmup 0.05 --iters 5
expect 2 "missing y \(optional inputs: scale, bias\)" -- "$ptopt" bench "$sc" --input-shape 2,4
# ptopt dot: shape labels from the given input, bias at its default.
expect 0 "wrote" -- "$ptopt" dot "$ob" -o "$work/ob.dot" --input-shape 1,3,16,16

# The saved models keep the defaults: the schema says so, and stock PyTorch
# runs them with the inputs left out, giving the original's results.
"$py" - "$m" "$work" <<'PY' || fail "the saved models do not keep their defaults"
import sys, torch
m, work = sys.argv[1], sys.argv[2]
ob, ob_opt = torch.jit.load(m + "/optional_bias.pt"), torch.jit.load(work + "/ob.pt")
assert "x: Tensor,\n    bias: Optional[Tensor]=None" in ob_opt.code, ob_opt.code
assert "Tensor x, Tensor? bias=None" in str(ob_opt.forward.schema), ob_opt.forward.schema
x, b = torch.randn(1, 3, 16, 16), torch.randn(1, 4, 16, 16)
torch.testing.assert_close(ob_opt(x), ob(x), rtol=1e-4, atol=1e-5)
torch.testing.assert_close(ob_opt(x, b), ob(x, b), rtol=1e-4, atol=1e-5)
torch.testing.assert_close(ob_opt(x, bias=b), ob(x, b), rtol=1e-4, atol=1e-5)  # the names are kept
sc, sc_opt = torch.jit.load(m + "/scaled.pt"), torch.jit.load(work + "/sc.pt")
assert "scale: int=2" in sc_opt.code and "bias: Optional[Tensor]=None" in sc_opt.code, sc_opt.code
x, y = torch.randn(2, 4), torch.randn(2, 4)
torch.testing.assert_close(sc_opt(x, y), sc(x, y, 2), rtol=1e-4, atol=1e-5)
torch.testing.assert_close(sc_opt(x, y, 3), sc(x, y, 3), rtol=1e-4, atol=1e-5)
torch.testing.assert_close(sc_opt(x, y=y, bias=x), sc(x, y, 2, x), rtol=1e-4, atol=1e-5)
PY

if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "all optional-input CLI checks passed"
