#!/usr/bin/env bash
# End-to-end checks of numerics verification (issue 5): inputs, metrics,
# tolerances, --verify-each blame, `ptopt verify`, --report.
# Usage: verify_test.sh PTOPT FIXTURES_DIR PYTHON
set -u
ptopt=$1; fx=$2; py=$3
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
img=(--input-shape 1,3,64,64)

# A correct pipeline passes, with the metrics of every output under -v.
expect 0 "passed within tolerance \(3 seeded runs" -- "$ptopt" "$fx/resnet18_script.pt" "$work/a.pt" -O1 "${img[@]}"
expect 0 "out: ok max_abs=.* top1=" -- "$ptopt" "$fx/resnet18_script.pt" "$work/a2.pt" -O1 "${img[@]}" -v
# Both models run with the JIT optimizer off unless asked (the report says
# which); the optimizing executor gives the same verdict on the CPU.
expect 0 "" -- "$ptopt" "$fx/resnet18_script.pt" "$work/a3.pt" -O1 "${img[@]}" \
  --report "$work/a3.json" --overwrite -q
grep -qE '"executor": ?"plain"' "$work/a3.json" || fail "the report does not name the plain executor"
expect 0 "passed .*JIT optimizing executor" -- "$ptopt" "$fx/resnet18_script.pt" "$work/a4.pt" -O1 "${img[@]}" \
  --verify-executor optimizing
expect 2 "plain, optimizing|optimizing" -- "$ptopt" "$fx/resnet18_script.pt" "$work/a5.pt" -O1 "${img[@]}" \
  --verify-executor fast
# Dict and tuple outputs are compared leaf by leaf.
expect 0 "out.logits\[0\]: ok" -- "$ptopt" "$fx/dict_output.pt" "$work/d.pt" -O1 --input-shape 2,3,16,16 -v
expect 0 "out1: (ok|bitwise)" -- "$ptopt" "$fx/control_flow.pt" "$work/cf.pt" -O1 \
  --input-shape 3,8 --input-shape 3,8 --input-shape int:3 -v

# A rule that changes the math is caught, blamed on the rules pass with
# --verify-each, and nothing is written.
cat > "$work/bad.rules" <<'RULES'
rule relu-is-not-sigmoid
  pattern
    graph(%x : Tensor):
      %y : Tensor = aten::relu_(%x)
      output(%y)
  replacement
    graph(%x : Tensor):
      %y : Tensor = aten::sigmoid_(%x)
      output(%y)
RULES
expect 3 "pass 'rules \(execution 2" -- "$ptopt" "$fx/resnet18_script.pt" "$work/bad.pt" \
  --passes "canonicalize,rules{file=$work/bad.rules},fixpoint(cse,dce)" --verify-each "${img[@]}"
[ ! -e "$work/bad.pt" ] || fail "output written after a failed verification"
# Without --verify-each: the per-output block (worst element, histogram), exit 3.
expect 3 "worst +at \[" -- "$ptopt" "$fx/resnet18_script.pt" "$work/bad.pt" -O1 --rules "$work/bad.rules" "${img[@]}"
expect 3 "\|a-b\|" -- "$ptopt" "$fx/resnet18_script.pt" "$work/bad.pt" -O1 --rules "$work/bad.rules" "${img[@]}"
[ ! -e "$work/bad.pt" ] || fail "output written after a failed verification"
# --force writes it anyway (and still exits 3); that file is the perturbed model.
expect 3 "FAILED \(written with --force\)" -- "$ptopt" "$fx/resnet18_script.pt" "$work/perturbed.pt" -O1 \
  --rules "$work/bad.rules" "${img[@]}" --force
[ -s "$work/perturbed.pt" ] || fail "--force did not write the output"
[ -z "$(ls -A "$work" | grep ptopt-tmp)" ] || fail "temporary files left: $(ls -A "$work")"

# ptopt verify: equivalent models pass, a perturbed one fails.
expect 0 "^PASSED" -- "$ptopt" verify "$fx/resnet18_script.pt" "$work/a.pt" "${img[@]}"
expect 3 "^FAILED" -- "$ptopt" verify "$fx/resnet18_script.pt" "$work/perturbed.pt" "${img[@]}"
expect 0 "^PASSED" -- "$ptopt" verify "$fx/resnet18_script.pt" "$work/perturbed.pt" "${img[@]}" --atol 100 --rtol 100
# The fp32 criterion's terms are printed; --scale-tol sets its own (0: plain
# elementwise), the report carries the error relative to the bound.
expect 0 "rtol 0.0001, atol 1e-05, scale-tol 1e-05 x rms; worst error .*% of its bound" -- \
  "$ptopt" verify "$fx/resnet18_script.pt" "$work/a.pt" "${img[@]}"
expect 0 "rtol 0.0001, atol 1e-05; worst error" -- "$ptopt" verify "$fx/resnet18_script.pt" "$work/a.pt" "${img[@]}" \
  --scale-tol 0 --report "$work/plain.json"
grep -qE '"max_error_to_bound": ?[0-9]' "$work/plain.json" || fail "the report has no max_error_to_bound"
grep -qE '"rms_reference": ?[0-9]' "$work/plain.json" || fail "the report has no rms_reference"
expect 2 "--scale-tol '-1'" -- "$ptopt" verify "$fx/resnet18_script.pt" "$work/a.pt" "${img[@]}" --scale-tol -1
# A per-output tolerance for an output that does not exist is named.
expect 0 "unknown output\(s\) out9" -- "$ptopt" verify "$fx/resnet18_script.pt" "$work/a.pt" "${img[@]}" --atol out9:1

# A bf16 B is judged by the bf16 criterion (its precision read from its
# constants and conversions, and said), not refused by fp32's; the flags'
# terms still apply over it. mobilenet_v2, not resnet18: without native bf16
# (an AVX2 CPU), LibTorch 1.13's bf16 resnet18 misses the bf16 criterion
# (122% of its bound on an AVX2 EPYC; mobilenet_v2 29%), and is refused.
expect 0 "passed" -- "$ptopt" "$fx/mobilenet_v2_script.pt" "$work/bf16.pt" --passes "-O1,cast{dtype=bf16}" "${img[@]}"
expect 0 "computes in bf16 .*judged by that precision's criterion" -- \
  "$ptopt" verify "$fx/mobilenet_v2_script.pt" "$work/bf16.pt" "${img[@]}"
expect 3 "^FAILED" -- "$ptopt" verify "$fx/mobilenet_v2_script.pt" "$work/bf16.pt" "${img[@]}" --atol 1e-9 --rtol 1e-9
# An fp32 B says nothing about precision.
"$ptopt" verify "$fx/resnet18_script.pt" "$work/a.pt" "${img[@]}" | grep -q "computes in" &&
  fail "an fp32 B was said to compute in a lower precision"

# Integer inputs: --int-range; a range the embedding cannot take is bad input naming the input.
expect 0 "passed" -- "$ptopt" "$fx/embedding_int64.pt" "$work/e.pt" -O1 --input-shape 2,7:int64 --int-range 0,50
expect 2 "fails on the given inputs \(idx=2,7:int64\)" -- "$ptopt" "$fx/embedding_int64.pt" "$work/e2.pt" -O1 \
  --input-shape 2,7:int64 --int-range 0,100000
expect 2 "bad --int-range" -- "$ptopt" "$fx/embedding_int64.pt" "$work/e3.pt" --input-shape 2,7:int64 --int-range 5,1

# Shapes that do not fit name the inputs.
expect 2 "takes 3 input\(s\) \(x, y, n\).*missing y, n" -- "$ptopt" "$fx/control_flow.pt" "$work/c.pt" --input-shape 3,8
expect 2 "fails on the given inputs \(x=1,5,64,64\)" -- "$ptopt" "$fx/resnet18_script.pt" "$work/s.pt" --input-shape 1,5,64,64
[ ! -e "$work/s.pt" ] || fail "output written despite a bad shape"

# Inputs saved from Python: a tensor, a tuple, a TorchScript holder; a dict by name.
for f in image_tensor image_tuple image_module; do
  expect 0 "passed.*1 run on 1 input\(s\) from --inputs" -- "$ptopt" "$fx/resnet18_script.pt" "$work/i_$f.pt" -O1 \
    --inputs "$fx/inputs/$f.pt"
done
expect 0 "passed.*1 run on 3 input\(s\) from --inputs" -- "$ptopt" "$fx/control_flow.pt" "$work/i_cf.pt" -O1 \
  --inputs "$fx/inputs/control_flow_dict.pt"
# A one-element list: read by LibTorch 2.x; 1.13 cannot, and says what to save instead.
if "$ptopt" --version | grep -q "LibTorch 1\."; then
  expect 2 "save the tensor itself or a tuple" -- "$ptopt" "$fx/resnet18_script.pt" "$work/i1.pt" --inputs "$fx/inputs/image_list1.pt"
else
  expect 0 "passed.*1 run on 1 input\(s\) from --inputs" -- "$ptopt" "$fx/resnet18_script.pt" "$work/i1.pt" -O1 \
    --inputs "$fx/inputs/image_list1.pt"
fi
expect 2 "holds 2 value\(s\), the model takes 1" -- "$ptopt" "$fx/resnet18_script.pt" "$work/i2.pt" --inputs "$fx/inputs/two_images.pt"
expect 2 "holds neither" -- "$ptopt" "$fx/resnet18_script.pt" "$work/i3.pt" --inputs "$fx/bad/not_a_zip.pt"

# No shape: inferred from the first conv (and said so), or skipped with a hint.
expect 0 "assumed input x = 1,3,224,224 \(the first op is aten::conv2d with 3 input channels\)" -- \
  "$ptopt" "$fx/resnet18_script.pt" "$work/n.pt" -O1 --verify-iters 1
expect 0 "verification skipped: the input shapes of \(x, y, n\) cannot be inferred" -- \
  "$ptopt" "$fx/control_flow.pt" "$work/n2.pt" -O1
expect 2 "cannot be inferred" -- "$ptopt" "$fx/control_flow.pt" "$work/n3.pt" -O1 --verify

# Devices: CUDA runs when present, otherwise it is refused clearly.
if "$py" -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  expect 0 "on cuda" -- "$ptopt" "$fx/resnet18_script.pt" "$work/g.pt" -O1 "${img[@]}" --device cuda
else
  echo "SKIPPED: CUDA verification (no CUDA device here)"
  expect 2 "CUDA is not available" -- "$ptopt" "$fx/resnet18_script.pt" "$work/g.pt" -O1 "${img[@]}" --device cuda
fi

# --report: a JSON record with the pipeline, passes, ops and metrics per output.
expect 0 "PASSED" -- "$ptopt" "$fx/dict_output.pt" "$work/r.pt" -O1 --input-shape 2,3,16,16 --report "$work/r.json"
"$py" - "$work/r.json" <<'PY' || fail "report content"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["outcome"] == "passed" and r["exit_code"] == 0, r["outcome"]
assert r["pipeline"].startswith("canonicalize,remove-dropout"), r["pipeline"]
assert any(p["pass"] == "fold-conv-bn" and p["counters"].get("folded") == 1 for p in r["passes"]), r["passes"]
assert r["ops_before"]["aten::batch_norm"] == 1 and "aten::batch_norm" not in r["ops_after"]
outs = {o["output"] for o in r["verification"]["iterations"][0]["outputs"]}
assert outs == {"out.features[0]", "out.features[1]", "out.logits[0]", "out.logits[1]"}, outs
assert r["versions"]["libtorch"] and r["device"] == "cpu"
PY
expect 3 "" -- "$ptopt" "$fx/resnet18_script.pt" "$work/bad.pt" -O1 --rules "$work/bad.rules" "${img[@]}" \
  --report "$work/bad.json" --verify-each
"$py" - "$work/bad.json" <<'PY' || fail "failure report content"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["outcome"] == "failed" and r["exit_code"] == 3
assert r["verification"]["first_failing_pass"].startswith("rules"), r["verification"]
assert r["verification"]["iterations"][0]["outputs"][0]["passed"] is False
PY

# The float64 reference (verify/runner.h): an ill-conditioned ResNet-18 (the
# classifier reads features with a large common component through rows that
# sum to zero: its fp32 run is ~1e-3 from float64) misses the fp32 criterion
# when right; the float64 reference decides, the verdict and the report say
# so, a wrong rewrite still fails, and a well-conditioned model never runs it.
"$py" - "$work/ill.pt" <<'PY' || fail "making the ill-conditioned model"
import sys, torch, torchvision
torch.manual_seed(0)
m = torchvision.models.resnet18()
with torch.no_grad():
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            c = mod.num_features
            mod.running_mean.copy_(torch.randn(c) * 0.1)
            mod.running_var.copy_(torch.empty(c).uniform_(0.5, 1.5))
            mod.weight.copy_(torch.empty(c).uniform_(0.5, 1.5))
    m.layer4[-1].bn2.bias.add_(1000.0)
    m.fc.weight.sub_(m.fc.weight.mean(1, keepdim=True))
torch.jit.script(m.eval()).save(sys.argv[1])
PY
for preset in -O1 -O2; do
  expect 0 "passed against the float64 reference.*rounding amplified ~[0-9.e+]+x.*float64 runs [0-9]+ ms" -- \
    "$ptopt" "$work/ill.pt" "$work/ill$preset.pt" $preset "${img[@]}" --report "$work/ill$preset.json"
  "$py" - "$work/ill$preset.json" <<'PY' || fail "ill-conditioned report ($preset)"
import json, sys
v = json.load(open(sys.argv[1]))["verification"]
assert v["passed"] and v["reference"] == "fp64", v.get("reference")
f = v["fp64_reference"]
assert f["amplification"] > 100 and f["ms"] > 0 and f["kept_fp32"] == [] and f["margin"] == 2, f
out = [o for o in f["outputs"] if not o["passed_fp32"]]
# The rewrite itself, in float64, is as close as rounding weights to float32 puts it; OUT in fp32 within 4x.
assert out and all(o["passed"] and o["rewrite_in_fp64_exact"] and
                   o["rewrite_relative_l2"] <= 2 * o["weight_rounding_relative_l2"] + 2**-24 and
                   o["result_relative_l2"] <= 4 * o["original_relative_l2"] + 2**-24 for o in out), out
PY
done
# --verify-each blames with the same reference: no pass is blamed.
expect 0 "passed against the float64 reference" -- "$ptopt" "$work/ill.pt" "$work/ill-each.pt" -O1 "${img[@]}" \
  --verify-each
# A wrong rewrite on the ill-conditioned model still fails, against float64 too.
expect 3 "out: FAIL OUT .*fp32 original" -- "$ptopt" "$work/ill.pt" "$work/ill-bad.pt" -O1 \
  --rules "$work/bad.rules" "${img[@]}"
[ ! -e "$work/ill-bad.pt" ] || fail "output written after a failed verification"
# ptopt verify judges the same way.
expect 0 "passed against the float64 reference" -- "$ptopt" verify "$work/ill.pt" "$work/ill-O1.pt" "${img[@]}"
# A well-conditioned model that passes the fp32 criterion never runs it.
"$py" - "$work/a3.json" <<'PY' || fail "the float64 reference ran on a model that passed the fp32 criterion"
import json, sys
v = json.load(open(sys.argv[1]))["verification"]
assert v["reference"] == "fp32" and "fp64_reference" not in v, v.keys()
PY

if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "all verification CLI checks passed"
