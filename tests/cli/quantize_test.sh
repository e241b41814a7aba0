#!/usr/bin/env bash
# `ptopt --quantize int8` end to end on the int8 fixtures
# (tests/fixtures/make_quant_fixtures.py): the result is written, reloads in
# stock PyTorch (Python), and agrees with the original on held-out batches
# (cosine >= 0.99, top-1 >= 90%); --report holds the per-op SQNR; the
# sensitive fixture keeps its one sensitive conv fp32; bad calibration files
# (wrong shape, NaN, empty) exit 2 with a clear error and write nothing;
# an LSTM (static --quantize int8) and a traced GRU (mode=dynamic) become
# dynamic int8 RNN ops that reload in Python and agree on held-out batches;
# --quantize int8 --tune offers fuse-int8-activations on a conv + silu net
# (a whole-model decision, or, in 1.13, a note why nothing was timed), and
# the pass named in --passes writes a file stock PyTorch reloads and runs.
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

# LSTM / GRU: dynamic int8 in both modes (quantized_lstm / quantized_gru over
# CellParamsBase attributes), reloaded by stock PyTorch. --no-measure: on
# these tiny test models (hidden 32) dynamic int8 is slower than fp32, and
# the never-slower rule would write the input instead (bench/int8_rnn.py
# measures real sizes).
"$ptopt" "$fx/quant_lstm.pt" "$work/lstm.int8.pt" -O2 --quantize int8 --input-shape 4,12,8 --no-measure \
  --calibration "$fx/quant_lstm_calib.pt" --report "$work/lstm.json" >"$work/lstm.out" 2>&1
rc=$?
cat "$work/lstm.out"
check "quant_lstm (--quantize int8): exit 0" "[ $rc -eq 0 ]"
"$ptopt" "$fx/quant_gru_traced.pt" "$work/gru.int8.pt" --passes 'quantize{mode=dynamic}' --input-shape 12,4,8 --no-measure \
  --calibration "$fx/quant_gru_calib.pt" --report "$work/gru.json" >"$work/gru.out" 2>&1
rc=$?
cat "$work/gru.out"
check "quant_gru_traced (mode=dynamic): exit 0" "[ $rc -eq 0 ]"
"$py" - "$fx" "$work" <<'PY'
import json, sys, torch
fx, work = sys.argv[1], sys.argv[2]
for name, calib, op in [("lstm", "quant_lstm_calib.pt", "quantized_lstm"), ("gru", "quant_gru_calib.pt", "quantized_gru")]:
    orig = torch.jit.load(f"{fx}/quant_{name}{'' if name == 'lstm' else '_traced'}.pt").eval()
    q = torch.jit.load(f"{work}/{name}.int8.pt")
    code = q.code
    assert op in code and "cell_params" in code and "torch.lstm" not in code and "torch.gru" not in code, code
    worst, agree, steps = 1.0, 0, 0
    with torch.no_grad():
        for x in torch.load(f"{fx}/{calib}"):
            a, b = orig(x), q(x)
            worst = min(worst, torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0).item())
            agree += (a.argmax(-1) == b.argmax(-1)).sum().item()
            steps += a.numel() // a.shape[-1]
    print(f"{name}: python reload: worst cosine {worst:.5f}, per-step agreement {agree}/{steps}")
    assert worst >= 0.99 and agree >= 0.9 * steps
    rep = json.load(open(f"{work}/{name}.json"))["quantize"]
    kinds = [op["kind"] for op in rep["ops"]]
    assert rep["applied"] and f"{name}_dynamic" in kinds, rep
    assert all(op["sqnr_db"] is not None and not op["fp32"] for op in rep["ops"]), rep
PY
check "quant_lstm / quant_gru_traced: reload in Python, agree on held-out data, RNN op in --report" "[ $? -eq 0 ]"

# conv + silu/hardswish chains: offered to --tune; named, fused, reloaded.
"$ptopt" "$fx/quant_silu_cnn.pt" "$work/silu.tuned.pt" --quantize int8 --tune --tune-budget 20 \
  --tuning-cache "$work/tc.json" --input-shape 4,3,32,32 --calibration "$fx/quant_cnn_calib.pt" >"$work/silu.out" 2>&1
rc=$?
cat "$work/silu.out"
check "quant_silu_cnn --tune: exit 0" "[ $rc -eq 0 ]"
check "quant_silu_cnn --tune: fuse-int8-activations offered (decided, or why not timed)" \
  "grep -q -e 'int8-activations (whole model)' -e 'fuse-int8-activations: not timed' '$work/silu.out'"
"$ptopt" "$fx/quant_silu_cnn.pt" "$work/silu.fused.pt" --passes '-O1,quantize{dtype=int8},fuse-int8-activations' \
  --input-shape 4,3,32,32 --calibration "$fx/quant_cnn_calib.pt" --explain >"$work/silu.fused.out" 2>&1
rc=$?
cat "$work/silu.fused.out"
check "quant_silu_cnn fused: exit 0" "[ $rc -eq 0 ]"
if grep -q 'fuse-int8-activations: fused=4' "$work/silu.fused.out"; then
  "$py" - "$fx" "$work" <<'PY'
import sys, torch
fx, work = sys.argv[1], sys.argv[2]
orig = torch.jit.load(f"{fx}/quant_silu_cnn.pt").eval()
q = torch.jit.load(f"{work}/silu.fused.pt")
assert "onednn.qconv2d_pointwise" in q.code, q.code
with torch.no_grad():
    for x in torch.load(f"{fx}/quant_cnn_heldout.pt"):
        c = torch.nn.functional.cosine_similarity(orig(x).flatten(), q(x).flatten(), dim=0).item()
        assert c >= 0.99, c
print("python reload of the fused int8 file: ok")
PY
  check "quant_silu_cnn fused: reloads in Python and agrees on held-out data" "[ $? -eq 0 ]"
else
  check "quant_silu_cnn fused: declined with the reason (no oneDNN int8 conv here)" \
    "grep -q -e 'no onednn::qconv2d_pointwise' -e 'does not run onednn::qconv2d_pointwise' '$work/silu.fused.out'"
fi

# linear + gelu chains (a transformer's MLP, traced): named, fused, reloaded in
# Python (--no-measure: the never-slower stage may keep the unfused file on
# this tiny model, and this checks the fused one).
"$ptopt" "$fx/quant_gelu_mlp.pt" "$work/gelu.fused.pt" --passes '-O1,quantize{dtype=int8},fuse-int8-activations' \
  --input-shape 4,8,64 --calibration "$fx/quant_gelu_mlp_calib.pt" --no-measure --explain >"$work/gelu.fused.out" 2>&1
rc=$?
cat "$work/gelu.fused.out"
check "quant_gelu_mlp fused: exit 0" "[ $rc -eq 0 ]"
if grep -q 'fuse-int8-activations: fused-linear=3' "$work/gelu.fused.out"; then
  "$py" - "$fx" "$work" <<'PY'
import sys, torch
fx, work = sys.argv[1], sys.argv[2]
orig = torch.jit.load(f"{fx}/quant_gelu_mlp.pt").eval()
q = torch.jit.load(f"{work}/gelu.fused.pt")
assert "onednn.qlinear_pointwise" in q.code, q.code
with torch.no_grad():
    for x in torch.load(f"{fx}/quant_gelu_mlp_heldout.pt"):
        c = torch.nn.functional.cosine_similarity(orig(x).flatten(), q(x).flatten(), dim=0).item()
        assert c >= 0.99, c
print("python reload of the fused int8 linears: ok")
PY
  check "quant_gelu_mlp fused: reloads in Python and agrees on held-out data" "[ $? -eq 0 ]"
else
  check "quant_gelu_mlp fused: declined with the reason (no oneDNN int8 kernels here)" \
    "grep -q -e 'no onednn::q' -e 'does not run onednn::qconv2d_pointwise' '$work/gelu.fused.out'"
fi

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
