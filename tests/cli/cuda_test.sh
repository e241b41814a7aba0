#!/usr/bin/env bash
# The CUDA half of ptopt on a machine with a GPU (issue 36); prints SKIPPED
# and passes elsewhere (ctest reports it as skipped). Label `cuda`: the GPU
# check (scripts/gpu-check.sh) runs it with `ctest -L cuda`.
# On resnet18 and resnet50 (torchvision, random weights, randomized
# BatchNorm statistics; resnet50 scripted and traced):
#   - verification on CUDA at -O1, -O2 and -O3 (fp16), TF32 off for the
#     reference; -O3's cuDNN fusions counted (conv+relu, conv+add+relu);
#   - the -O3 file reloads in stock PyTorch, records that it needs CUDA, and
#     agrees with the original on the GPU; `ptopt verify --device cuda` passes;
#   - the never-slower stage and `ptopt bench` time on CUDA with CUDA events;
#   - -O3 --tune on CUDA: its decisions (cuDNN fusion, precision, layout)
#     timed on the GPU, the tuning cache keyed by the GPU, a second run timing
#     nothing; the result verified and reloaded;
#   - the Python package with CUDA tensors (tests/python/cuda_check.py).
# Usage: cuda_test.sh PTOPT PYTHON [PYTHONPATH_OF_THE_PACKAGE]
set -u
ptopt=$1; py=$2; pkg=${3:-}
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
if ! "$py" -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "SKIPPED: the CUDA checks need a CUDA device (none here)"
  exit 0
fi
if ! "$ptopt" --version | grep -q "CUDA .* compiled in"; then
  fail "this ptopt has no CUDA compiled in: $("$ptopt" --version)"
  exit 1
fi
"$py" - "$work" <<'PY' || { echo "FAIL: cannot make the models"; exit 1; }
import sys, warnings
warnings.filterwarnings("ignore")
import torch, torchvision
out = sys.argv[1]
for name in ("resnet18", "resnet50"):
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(weights=None).eval()
    with torch.no_grad():
        for bn in m.modules():
            if isinstance(bn, torch.nn.BatchNorm2d):
                bn.running_mean.normal_(0, 0.1); bn.running_var.uniform_(0.5, 1.5)
                bn.weight.uniform_(0.5, 1.5); bn.bias.normal_(0, 0.1)
    torch.jit.script(m).save(f"{out}/{name}_script.pt")
    if name == "resnet50":
        torch.jit.trace(m, torch.randn(1, 3, 224, 224)).save(f"{out}/{name}_trace.pt")
PY
shape=(--input-shape 1,3,224,224)

# The -O3 file on the GPU against the original: fp16 criterion (cosine and
# relative max error), the same top-1, and the CUDA-needed marker.
check_on_gpu() {
  "$py" - "$1" "$2" <<'PY'
import sys, warnings
warnings.filterwarnings("ignore")
import torch
torch.backends.cudnn.allow_tf32 = False
a = torch.jit.load(sys.argv[1], map_location="cuda").eval()
b = torch.jit.load(sys.argv[2], map_location="cuda").eval()
assert getattr(b, "ptopt_requires_cuda", False), "the file does not record that it needs CUDA"
x = torch.randn(4, 3, 224, 224, generator=torch.Generator().manual_seed(7)).cuda()
with torch.no_grad():
    ya, yb = a(x).float(), b(x).float()
cos = torch.nn.functional.cosine_similarity(ya.flatten(), yb.flatten(), dim=0).item()
rel = ((ya - yb).abs().max() / ya.abs().max()).item()
assert cos > 0.999 and rel < 0.05, (cos, rel)
assert torch.equal(ya.argmax(1), yb.argmax(1)), "top-1 differs"
print("on the GPU: cosine %.6f, max error %.2e of the largest output" % (cos, rel))
PY
}

# -O1 and -O2 on resnet18 (bench/gpu.py verifies resnet50's -O2 on the GPU);
# -O3 on all three.
for level in -O1 -O2; do
  expect 0 "on cuda" -- "$ptopt" "$work/resnet18_script.pt" "$work/r18$level.pt" $level "${shape[@]}" \
    --device cuda --no-measure
done
declare -A fused=([resnet18_script]="relu=9 add-relu=8" [resnet50_script]="relu=33 add-relu=16"
                  [resnet50_trace]="relu=33 add-relu=16")
for m in resnet18_script resnet50_script resnet50_trace; do
  in=$work/$m.pt
  expect 0 "fuse-cudnn: ${fused[$m]}" -- "$ptopt" "$in" "$work/$m.O3.pt" -O3 "${shape[@]}" --device cuda \
    --no-measure --report "$work/$m.O3.json"
  grep -qE "on cuda" <<<"$last_output" || fail "$m -O3: not verified on cuda: $last_output"
  "$py" -c "import json,sys; r=json.load(open(sys.argv[1])); p=json.dumps(r.get('precision')); assert 'fp16' in p, p" \
    "$work/$m.O3.json" || fail "$m -O3 on CUDA is not fp16"
  check_on_gpu "$in" "$work/$m.O3.pt" || fail "$m -O3: the reloaded file disagrees on the GPU"
  expect 0 "PASSED" -- "$ptopt" verify "$in" "$work/$m.O3.pt" "${shape[@]}" --device cuda
done

# The never-slower stage times on the GPU with CUDA events.
expect 0 "PASSED" -- "$ptopt" "$work/resnet18_script.pt" "$work/r18.measured.pt" -O2 "${shape[@]}" --device cuda \
  --report "$work/measured.json"
"$py" - "$work/measured.json" <<'PY' || fail "the never-slower stage did not time on CUDA: $(cat "$work/measured.json")"
import json, sys
m = json.load(open(sys.argv[1]))["measurement"]
text = json.dumps(m)
assert "CUDA events" in text, text
assert m.get("verdict"), text
PY

# ptopt bench on CUDA: interleaved, two batch sizes, CUDA events.
expect 0 "CUDA events" -- "$ptopt" bench "$work/resnet18_script.pt" --vs "$work/resnet18_script.O3.pt" --device cuda \
  "${shape[@]}" --batch 1,8 --min-time 0.3 --json "$work/bench.json"
"$py" - "$work/bench.json" <<'PY' || fail "ptopt bench --device cuda: $(cat "$work/bench.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["timing"] == "CUDA events" and r["cudnn_benchmark"] is True, r
assert len(r["results"]) == 2, r["results"]
for x in r["results"]:
    assert x["ratio"] > 0, x
PY

# --tune on CUDA: decisions timed on the GPU, cached under the GPU's name;
# a second run measures nothing new (bench/gpu.py tunes the larger models).
for m in resnet18_script; do
  expect 0 "on cuda" -- "$ptopt" "$work/$m.pt" "$work/$m.tune.pt" -O3 --tune --tune-budget 30 "${shape[@]}" \
    --device cuda --tuning-cache "$work/tuning.json" --report "$work/$m.tune.json"
  "$py" - "$work/$m.tune.json" <<'PY' || fail "$m --tune on CUDA: $(head -c 2000 "$work/$m.tune.json")"
import json, sys, torch
t = json.load(open(sys.argv[1]))["tuning"]
text = json.dumps(t)
assert "cuda" in json.dumps(t["context"]).lower(), t["context"]
assert torch.cuda.get_device_name(0) in text, "the GPU's name is not in the tuning context"
assert t["measured"] > 0 or t["cached"] > 0, t
assert "fuse-cudnn" in text, "no cuDNN-fusion decision"
print("tuned on CUDA:", t["measured"], "measured,", t["cached"], "cached,", t["seconds"], "s")
PY
  "$py" -c "import torch,sys; m=torch.jit.load(sys.argv[1], map_location='cuda'); m(torch.randn(2,3,224,224).cuda())" \
    "$work/$m.tune.pt" || fail "$m --tune: the output does not run on CUDA after a reload"
done
expect 0 "PASSED" -- "$ptopt" "$work/resnet18_script.pt" "$work/again.pt" -O3 --tune --tune-budget 10 "${shape[@]}" \
  --device cuda --tuning-cache "$work/tuning.json" --report "$work/again.json"
"$py" - "$work/resnet18_script.tune.json" "$work/again.json" <<'PY' || fail "a second --tune on CUDA measured again: $(head -c 1500 "$work/again.json")"
import json, sys
first, again = (json.load(open(p))["tuning"] for p in sys.argv[1:])
assert again["cached"] > 0, again
# Everything the first run decided comes from the cache (a first run that
# spent its budget left some decisions for this one).
assert again["measured"] == 0 or first["budget_spent"], (first, again)
PY
expect 0 "cuda" -- "$ptopt" tuning show --tuning-cache "$work/tuning.json"

# The Python package with CUDA tensors.
if [ -n "$pkg" ]; then
  PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}" "$py" "$(dirname "$0")/../python/cuda_check.py" "$work/resnet18_script.pt" \
    || fail "the Python package on CUDA"
else
  echo "note: no package folder given: the Python package's CUDA checks are not run"
fi

[ "$failures" = 0 ] && echo "CUDA: verification, fuse-cudnn, timing, --tune and the package pass on $("$py" -c 'import torch; print(torch.cuda.get_device_name(0))')"
exit $((failures > 0))
