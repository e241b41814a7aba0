#!/usr/bin/env bash
# `ptopt --quantize int8` end to end on the int8 fixtures
# (tests/fixtures/make_quant_fixtures.py): the result is written, reloads in
# stock PyTorch (Python), and agrees with the original on held-out batches
# (cosine >= 0.99, top-1 >= 90%); --report holds the per-op SQNR; the
# sensitive fixture keeps its one sensitive conv fp32; bad calibration files
# (wrong shape, NaN, empty) exit 2 with a clear error and write nothing.
#
# Usage: quantize_test.sh PTOPT QUANT_FIXTURES_DIR PYTHON
set -uo pipefail
ptopt=$1
fx=$2
py=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
check() { if ! eval "$2"; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }

"$ptopt" "$fx/quant_cnn.pt" "$work/cnn.int8.pt" -O2 --quantize int8 --input-shape 4,3,32,32 \
  --calibration "$fx/quant_cnn_calib.pt" --report "$work/cnn.json" >"$work/cnn.out" 2>&1
rc=$?
cat "$work/cnn.out"
check "quant_cnn: exit 0" "[ $rc -eq 0 ]"
check "quant_cnn: written" "[ -f '$work/cnn.int8.pt' ]"
check "quant_cnn: summary shows the held-out cosine" "grep -q 'held-out vs fp32: worst cosine' '$work/cnn.out'"
"$py" - "$fx" "$work" <<'PY'
import json, sys, torch
fx, work = sys.argv[1], sys.argv[2]
orig = torch.jit.load(f"{fx}/quant_cnn.pt").eval()
q = torch.jit.load(f"{work}/cnn.int8.pt")
code = q.code
assert "quantized.conv2d" in code and "quantized.linear" in code, code
worst, agree, rows = 1.0, 0, 0
with torch.no_grad():
    for x in torch.load(f"{fx}/quant_cnn_heldout.pt"):
        a, b = orig(x), q(x)
        worst = min(worst, torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0).item())
        agree += (a.argmax(1) == b.argmax(1)).sum().item()
        rows += a.shape[0]
print(f"python reload: worst cosine {worst:.5f}, top-1 agreement {agree}/{rows}")
assert worst >= 0.99 and agree >= 0.9 * rows
rep = json.load(open(f"{work}/cnn.json"))["quantize"]
assert rep["applied"] and rep["held_out_cosine"] >= 0.99 and len(rep["ops"]) == 8, rep
assert all(op["sqnr_db"] is not None for op in rep["ops"]), rep
PY
check "quant_cnn: reloads in Python and agrees on held-out data; --report has per-op SQNR" "[ $? -eq 0 ]"

"$ptopt" "$fx/quant_sensitive.pt" "$work/sens.int8.pt" -O1 --quantize int8 --input-shape 4,3,32,32 \
  --calibration "$fx/quant_cnn_calib.pt" --report "$work/sens.json" >"$work/sens.out" 2>&1
rc=$?
check "quant_sensitive: exit 0" "[ $rc -eq 0 ]"
"$py" - "$work" <<'PY'
import json, sys
rep = json.load(open(f"{sys.argv[1]}/sens.json"))["quantize"]
kept = [op for op in rep["ops"] if op["fp32"]]
assert len(kept) == 1 and "conv2d" in kept[0]["op"], rep
PY
check "quant_sensitive: exactly one conv kept fp32 by the fallback" "[ $? -eq 0 ]"

for bad in bad_calib_shape bad_calib_nan bad_calib_empty; do
  "$ptopt" "$fx/quant_cnn.pt" "$work/$bad.pt" --quantize int8 --input-shape 4,3,32,32 \
    --calibration "$fx/$bad.pt" >"$work/$bad.out" 2>"$work/$bad.err"
  rc=$?
  cat "$work/$bad.err"
  check "$bad: exit 2" "[ $rc -eq 2 ]"
  check "$bad: error names --calibration" "grep -q 'ptopt: error: --calibration' '$work/$bad.err'"
  check "$bad: nothing written" "[ -z \"\$(ls -A '$work' | grep '^$bad.pt\\|ptopt-tmp')\" ]"
done

"$ptopt" "$fx/quant_cnn.pt" "$work/random.pt" --quantize int8 --input-shape 4,3,32,32 >"$work/random.out" 2>"$work/random.err"
check "no --calibration: loud warning" "grep -q 'WARNING: quantize: no --calibration data' '$work/random.err'"

exit $fail
