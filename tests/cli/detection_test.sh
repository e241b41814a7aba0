#!/usr/bin/env bash
# A real detection model with custom operators (issue 12): torchvision's
# fasterrcnn_mobilenet_v3_large_320_fpn (random weights, scripted; calls
# torchvision::nms and torchvision::roi_align; forward takes List[Tensor]).
# Without --load-ops it fails to load with a message naming the operator;
# with torchvision's ops library it round-trips bitwise with an empty
# pipeline and matches after -O1, where BatchNorm folds into the backbone's
# convs while the head's control flow, lists and dicts stay; both outputs
# reload in Python. Exits 77 (skipped) when torchvision's library is absent.
# Usage: detection_test.sh PTOPT DETECTION_FIXTURES_DIR PYTHON
set -u
ptopt=$1; dir=$2; py=$3
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
field() { "$py" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]] or '')" "$dir/detection.json" "$1"; }

# 0. Inputs that are not plain tensors (List, Optional, Tuple, Dict; no torchvision needed).
cm=$dir/container_inputs.pt
expect 0 "cannot build input 'xs' \(List\[Tensor\]\), 'bias' \(Optional\[Tensor\]\), 'pair' \(Tuple\[Tensor, Tensor\]\), 'named' \(Dict\[str, Tensor\]\)" -- \
  "$ptopt" "$cm" "$work/c_nov.pt" -O1
grep -qF "torch.save(([torch.rand(3, 224, 224)], torch.rand(1, 3, 224, 224), (torch.rand(1, 3, 224, 224), torch.rand(1, 3, 224, 224)), {'text': torch.rand(1, 3, 224, 224)}), 'inputs.pt')" <<<"$last_output" \
  || fail "no example torch.save line: $last_output"
expect 0 "bitwise" -- "$ptopt" "$cm" "$work/c0.pt" --passes '' --inputs "$dir/container_inputs.inputs.pt"
expect 0 "bitwise" -- "$ptopt" "$cm" "$work/c0n.pt" --passes '' --inputs "$dir/container_inputs.none.pt"
expect 0 "passed" -- "$ptopt" "$cm" "$work/c1.pt" -O1 --inputs "$dir/container_inputs.inputs.pt" --report "$work/c1.json"
"$py" -c "import json,sys; r=json.load(open(sys.argv[1])); assert sum(p['counters'].get('folded',0) for p in r['passes'] if p['pass']=='fold-conv-bn')==1" "$work/c1.json" \
  || fail "container model: fold-conv-bn did not fold the conv in the loop"
expect 0 "^PASSED" -- "$ptopt" verify "$cm" "$work/c1.pt" --inputs "$dir/container_inputs.none.pt"
"$py" - "$cm" "$work/c0.pt" "$work/c1.pt" "$dir/container_inputs.inputs.pt" <<'PY' || fail "container model: python reload"
import sys, torch
orig, o0, o1 = (torch.jit.load(p) for p in sys.argv[1:4])
args = torch.load(sys.argv[4])
(ra, rb), (a, b), (c, d) = orig(*args), o0(*args), o1(*args)
assert all(torch.equal(x, y) for x, y in zip(ra, a)) and torch.equal(rb, b)
assert all(torch.allclose(x, y, rtol=1e-4, atol=1e-5) for x, y in zip(ra, c)) and torch.allclose(rb, d)
PY

skip=$(field skip)
if [ -n "$skip" ]; then echo "SKIPPED: $skip"; exit 77; fi
model=$(field model); inputs=$(field inputs); lib=$(field ops_library)
echo "model $model, ops library $lib"

# 1. No --load-ops: exit 2, the operator named, --load-ops suggested, where torchvision's library is.
expect 2 "torchvision::(nms|roi_align)" -- "$ptopt" show "$model"
grep -q -- "--load-ops" <<<"$last_output" || fail "no --load-ops hint: $last_output"
grep -q "torchvision's C++ ops library" <<<"$last_output" || fail "no torchvision hint: $last_output"
# A library that cannot be loaded: exit 2 with the loader's message.
expect 2 "cannot load '$work/missing.so': .*No such file" -- "$ptopt" --load-ops "$work/missing.so" show "$model"

# 2. --load-ops before or after the subcommand; the IR keeps the opaque calls.
expect 0 "torchvision::nms" -- "$ptopt" --load-ops "$lib" show "$model"
expect 0 "torchvision::roi_align" -- "$ptopt" show "$model" --load-ops "$lib"

# 3. List[Tensor] input: no shape can describe it; --inputs FILE can.
expect 0 "cannot build input 'images' \(List\[Tensor\]\).*--inputs" -- \
  "$ptopt" "$model" "$work/noverify.pt" -O1 --load-ops "$lib"
expect 2 "cannot build input 'images'" -- \
  "$ptopt" "$model" "$work/shape.pt" -O1 --load-ops "$lib" --input-shape 1,3,320,320
expect 2 "cannot build input 'images'.*--inputs" -- "$ptopt" verify "$model" "$model" --load-ops "$lib"

# 4. Empty pipeline: bitwise equal on the saved images.
expect 0 "bitwise" -- "$ptopt" "$model" "$work/o0.pt" --passes '' --load-ops "$lib" --inputs "$inputs" \
  --report "$work/o0.json"
"$py" - "$work/o0.json" <<'PY' || fail "O0 report"
import json, sys
r = json.load(open(sys.argv[1]))
v = r["verification"]
assert v.get("passed") and v.get("bitwise_equal"), v
PY

# 5. -O1: matches; BatchNorm folded; control flow, lists, dicts and the opaque ops intact.
expect 0 "passed" -- "$ptopt" "$model" "$work/o1.pt" -O1 --load-ops "$lib" --inputs "$inputs" \
  --report "$work/o1.json"
"$py" - "$work/o1.json" <<'PY' || fail "O1 report"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["verification"].get("passed"), r["verification"]
folded = sum(p["counters"].get("folded", 0) for p in r["passes"] if p["pass"] == "fold-conv-bn")
assert folded > 0, "fold-conv-bn folded nothing"
after = r["ops_after"]
print("fold-conv-bn folded", folded, "| ops after:", {k: after.get(k) for k in sorted(after) if "::" in k and
      any(s in k for s in ("If", "Loop", "Dict", "List", "torchvision", "batch_norm"))})
for op in ("prim::If", "prim::Loop", "prim::DictConstruct", "prim::ListConstruct", "torchvision::nms",
           "torchvision::roi_align"):
    assert after.get(op, 0) > 0, op + " is gone after -O1"
assert after.get("aten::batch_norm", 0) < r["ops_before"].get("aten::batch_norm", 0), "no BatchNorm removed"
PY
expect 0 "^PASSED" -- "$ptopt" verify "$model" "$work/o1.pt" --inputs "$inputs" --load-ops "$lib"

# 6. Both outputs reload in stock PyTorch (with torchvision imported) and match the original.
"$py" - "$model" "$work/o0.pt" "$work/o1.pt" "$inputs" <<'PY' || fail "python reload"
import sys, torch, torchvision  # noqa: F401 - torchvision registers its ops
orig, o0, o1 = (torch.jit.load(p) for p in sys.argv[1:4])
(images,) = torch.load(sys.argv[4])
with torch.no_grad():
    ref, a, b = orig(images)[1], o0(images)[1], o1(images)[1]
assert len(ref) == len(a) == len(b) == len(images)
for r, x, y in zip(ref, a, b):
    assert r["boxes"].shape[0] > 0, "no detections: the comparison would be empty"
    for k in ("boxes", "scores", "labels"):
        assert torch.equal(r[k], x[k]), "O0 " + k
        assert r[k].shape == y[k].shape, "O1 " + k
        assert torch.allclose(r[k].float(), y[k].float(), rtol=1e-4, atol=1e-4), "O1 " + k
print("reloaded in Python:", [tuple(r["boxes"].shape) for r in ref], "detections")
PY

[ "$failures" = 0 ] && echo "detection: all checks passed"
exit $([ "$failures" = 0 ] && echo 0 || echo 1)
