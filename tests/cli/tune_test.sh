#!/usr/bin/env bash
# End-to-end checks of --tune (issue 20): a real tuning run on a small
# fixture with a small budget, its decisions in the summary and --report,
# the tuning cache (reused by a second run, `ptopt tuning show|clear`), the
# usage errors, and the output reloading in stock PyTorch with the
# original's numerics. Timing is real here but nothing asserts a speed: only
# that the run stays within its budget and the second run times nothing.
# Usage: tune_test.sh PTOPT FIXTURES_DIR PYTHON
set -u
ptopt=$1; fx=$2; py=$3
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
img=(--input-shape 1,3,64,64)
cache="$work/cache/tuning.json"
export OMP_NUM_THREADS=1

# A real --tune of -O2 with a 4-second budget.
start=$(date +%s)
expect 0 "PASSED" -- "$ptopt" "$fx/resnet18_script.pt" "$work/t.pt" -O2 --tune --tune-budget 4 "${img[@]}" \
  --tuning-cache "$cache" --report "$work/t.json"
end=$(date +%s)
grep -qE "tune: [0-9]+ decisions \([0-9]+ measured" <<<"$last_output" || fail "no tune summary:"$'\n'"$last_output"
grep -qE "tune \[ *1\]" <<<"$last_output" || fail "no progress line per decision"
grep -qE "channels-last %[^ ]+: " <<<"$last_output" || fail "no per-region layout decision"
# The budget bounds the timing: 4 s plus the run's own work (load, passes, verify).
[ $((end - start)) -le 60 ] || fail "--tune-budget 4 took $((end - start)) s"
[ -s "$cache" ] || fail "no tuning cache written at $cache"
"$py" - "$work/t.json" <<'PY' || fail "the report lacks the tuning record"
import json, sys
r = json.load(open(sys.argv[1]))
t = r["tuning"]
assert t["decisions"], t
assert {"conv-kernel", "channels-last"} <= {d["kind"] for d in t["decisions"]}, t["decisions"]
assert all(d["source"] in ("measured", "cached", "skipped") for d in t["decisions"])
assert r["pipeline"] == t["pipeline"], (r["pipeline"], t["pipeline"])
assert "tune" in r["stage_ms"]
PY

# The output is ordinary TorchScript: it reloads in stock PyTorch and matches
# the original (fp32 pipeline: 1e-4 / 1e-5).
"$py" - "$fx/resnet18_script.pt" "$work/t.pt" <<'PY' || fail "the tuned model does not reload or match in PyTorch"
import sys, torch
a = torch.jit.load(sys.argv[1]).eval(); b = torch.jit.load(sys.argv[2])
x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(3))
with torch.no_grad():
    ya, yb = a(x), b(x)
assert torch.allclose(ya, yb, rtol=1e-4, atol=1e-5), (ya - yb).abs().max()
print("reload ok", b.graph.str().count("mkldnn_convolution"), "mkldnn convs")
PY

# The second run reuses every decision: nothing is measured. Nor is the
# never-slower verdict: the same IN gives the same OUT bytes, whose verdict the
# first run cached (tools/measure_cache.h); verification still runs.
expect 0 "tune: [0-9]+ decisions \(0 measured, [0-9]+ cached" -- "$ptopt" "$fx/resnet18_script.pt" "$work/t2.pt" -O2 \
  --tune --tune-budget 4 "${img[@]}" --tuning-cache "$cache" --report "$work/t2.json"
grep -qF "(measured in an earlier run, cached in $cache)" <<<"$last_output" || fail "the warm run timed OUT again:"$'\n'"$last_output"
grep -qE "^verification: passed" <<<"$last_output" || fail "the warm run did not verify:"$'\n'"$last_output"
cmp -s "$work/t.pt" "$work/t2.pt" || fail "two runs of the same --tune wrote different bytes"
"$py" - "$work/t.json" "$work/t2.json" "$cache" <<'PY' || fail "the warm run's report does not carry the cached verdict"
import json, sys
cold, warm = (json.load(open(p))["measurement"] for p in sys.argv[1:3])
assert cold["source"] == "measured", cold
assert warm["source"] == "cached" and warm["cache"] == sys.argv[3], warm
assert warm["note"] == "measured in an earlier run, cached in " + sys.argv[3], warm
for k in ("ratio", "ci95", "verdict", "written", "candidates"):
    assert warm[k] == cold[k], (k, warm[k], cold[k])
assert json.load(open(sys.argv[2]))["verification"]["passed"], "not verified"
PY
# Another timing thread count, another OUT (-O1) or no --tune: timed again.
expect 0 "speed: OUT/IN" -- "$ptopt" "$fx/resnet18_script.pt" "$work/t5.pt" -O2 --tune --tune-budget 4 "${img[@]}" \
  --tuning-cache "$cache" --measure-threads 2
grep -q "measured in an earlier run" <<<"$last_output" && fail "--measure-threads 2 reused the 1-thread verdict"
expect 0 "speed: OUT/IN" -- "$ptopt" "$fx/resnet18_script.pt" "$work/t6.pt" -O1 --tune --tune-budget 4 "${img[@]}" \
  --tuning-cache "$cache"
# (Unless --tune made -O1's OUT the same bytes as -O2's, as where channels-last
# measures slower: then the cached verdict is that OUT's own.)
if ! cmp -s "$work/t6.pt" "$work/t.pt"; then
  grep -q "measured in an earlier run" <<<"$last_output" && fail "another OUT (-O1) reused the -O2 verdict"
fi
expect 0 "speed: OUT/IN" -- "$ptopt" "$fx/resnet18_script.pt" "$work/t7.pt" -O2 "${img[@]}"
grep -q "measured in an earlier run" <<<"$last_output" && fail "a run without --tune reused a cached verdict"
# The same model at another thread count is tuned again.
expect 0 "tune: [0-9]+ decisions \([1-9][0-9]* measured" -- env OMP_NUM_THREADS=2 "$ptopt" "$fx/resnet18_script.pt" \
  "$work/t3.pt" -O1 --tune --tune-budget 2 "${img[@]}" --tuning-cache "$cache"

# ptopt tuning show | clear.
expect 0 "decisions in 2 contexts" -- "$ptopt" tuning show --tuning-cache "$cache"
grep -q "1 threads" <<<"$last_output" || fail "tuning show does not name the context"
expect 0 "removed" -- "$ptopt" tuning clear --tuning-cache "$cache"
[ ! -e "$cache" ] || fail "tuning clear left the cache"
expect 0 "0 decisions" -- "$ptopt" tuning show --tuning-cache "$cache"
expect 2 "" -- "$ptopt" tuning frobnicate --tuning-cache "$cache"

# Usage errors: no input shapes; a bad budget; a damaged cache is named and replaced.
expect 2 "--input-shape" -- "$ptopt" "$fx/resnet18_script.pt" "$work/u.pt" -O2 --tune --tuning-cache "$cache"
[ ! -e "$work/u.pt" ] || fail "a usage error wrote OUT"
expect 2 "" -- "$ptopt" "$fx/resnet18_script.pt" "$work/u.pt" -O2 --tune --tune-budget -1 "${img[@]}"
# --tune-threads: tuned once with each count first (per-op decisions timed
# there, each whole-model choice that keeps a rewrite timed again at the
# other, recorded per decision, the cache context naming both); the orders'
# models compared unless they are the same. Bad counts are usage errors.
expect 0 "PASSED" -- "$ptopt" "$fx/resnet18_script.pt" "$work/th.pt" -O2 --tune --tune-budget 12 --tune-threads 1,2 \
  "${img[@]}" --tuning-cache "$work/threads.json" --report "$work/th.json"
grep -qE "tune:   [* ] 2,1: [0-9]+ decisions" <<<"$last_output" || fail "no line for the order 2,1:"$'\n'"$last_output"
"$py" - "$work/th.json" <<'PY' || fail "--tune-threads 1,2: the report does not show both orders and the checks at the other count"
import json, sys
t = json.load(open(sys.argv[1]))["tuning"]
orders = t["orders"]
assert [o["threads"] for o in orders] == [[1, 2], [2, 1]], orders
chosen = [o for o in orders if o["chosen"]]
assert len(chosen) == 1, orders
first, other = chosen[0]["threads"]
assert t["context"].endswith(f"| {first} threads, confirmed at {other} threads"), t["context"]
assert all("tuning" in o for o in orders if not o["chosen"]), orders  # the other order's decisions are kept
whole = [d for d in t["decisions"] if d["node"] == "model" and d["source"] == "measured" and d["kind"] != "thread-order"]
assert whole, t["decisions"]
for d in t["decisions"]:
    checks = d.get("at_threads", [])
    if d["kind"] == "thread-order":
        assert {c["threads"] for c in checks} <= {1, 2}, d
        continue
    assert all(c["threads"] == other for c in checks), d
    if d["node"] != "model":
        assert not checks, d  # per-op decisions are timed at the first count only
    elif d["choice"] != d["candidates"][0] and d["source"] == "measured":
        assert checks and not checks[-1]["slower"], d  # a kept rewrite held at the other count
compared = [d for d in t["decisions"] if d["kind"] == "thread-order"]
assert compared or "the same model" in orders[1].get("note", ""), (orders, compared)
print(len(whole), "whole-model decisions,", sum(bool(d.get("at_threads")) for d in whole), "checked at the other count;",
      "orders compared:", [d["choice"] for d in compared] or orders[1]["note"])
# The never-slower verdict is timed at the first count too.
m = json.load(open(sys.argv[1]))["measurement"]
assert m["threads"] == 1, m
PY
# Tuned for 2 threads alone: judged at 2 (where its choices were made), unless
# --measure-threads says otherwise.
for given in "" "1"; do
  expect 0 "PASSED" -- "$ptopt" "$fx/resnet18_script.pt" "$work/th2.pt" -O2 --tune --tune-budget 2 --tune-threads 2 \
    "${img[@]}" --tuning-cache "$work/threads.json" --report "$work/th2.json" --overwrite \
    ${given:+--measure-threads "$given"}
  "$py" - "$work/th2.json" "${given:-2}" <<'PY' || fail "--tune-threads 2: the never-slower timing ran at another count"
import json, sys
m = json.load(open(sys.argv[1]))["measurement"]
assert m["threads"] == int(sys.argv[2]), (m, sys.argv[2])
PY
done
expect 2 "tune_threads: expected thread counts" -- "$ptopt" "$fx/resnet18_script.pt" "$work/u.pt" -O2 --tune \
  --tune-threads 1,0 "${img[@]}"
expect 2 "tune_threads: expected thread counts" -- "$ptopt" "$fx/resnet18_script.pt" "$work/u.pt" -O2 --tune \
  --tune-threads 1,many "${img[@]}"
expect 2 "--tune-threads is for --tune" -- "$ptopt" "$fx/resnet18_script.pt" "$work/u.pt" -O2 --tune-threads 1,2 "${img[@]}"
[ ! -e "$work/u.pt" ] || fail "a usage error wrote OUT"
echo "{ damaged" > "$cache"
expect 0 "not valid JSON" -- "$ptopt" "$fx/resnet18_script.pt" "$work/t4.pt" -O1 --tune --tune-budget 2 "${img[@]}" \
  --tuning-cache "$cache"
expect 0 "decisions in 1 contexts" -- "$ptopt" tuning show --tuning-cache "$cache"

# onednn-blocked (what --tune adds where it wins): the weights are packed when
# the model loads, by the holder's __setstate__; the file holds dense tensors,
# stock PyTorch loads it, recomputes the packed weights and matches. These
# runs check the structure of OUT, so they write it whatever it measures
# (--no-measure): on a CPU where the blocked model is slower, the never-slower
# stage would rightly write a fallback instead.
expect 0 "PASSED" -- "$ptopt" "$fx/resnet18_script.pt" "$work/b.pt" --passes '-O2,onednn-blocked' "${img[@]}" --explain \
  --no-measure
grep -qE "onednn-blocked: region from %[^ ]+ \(conv1\): 20 convs" <<<"$last_output" || fail "no region explained:"$'\n'"$last_output"
"$py" - "$fx/resnet18_script.pt" "$work/b.pt" <<'PY' || fail "the onednn-blocked model does not reload or match in PyTorch"
import sys, torch
a = torch.jit.load(sys.argv[1]).eval(); b = torch.jit.load(sys.argv[2])
holder = b.ptopt_load_time
assert holder.v0.is_mkldnn and not holder.s0.is_mkldnn, "the packed weights were not recomputed at load"
x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(3))
with torch.no_grad():
    ya, yb = a(x), b(x)
assert torch.allclose(ya, yb, rtol=1e-4, atol=1e-5), (ya - yb).abs().max()
b.save(sys.argv[2] + ".again.pt")  # saving it again stores the dense weights, not the packed ones
c = torch.jit.load(sys.argv[2] + ".again.pt")
with torch.no_grad():
    assert torch.equal(c(x), yb)
PY
# ptopt imports its own packed output again (the holder's __setstate__ becomes
# the reorder chain it was, and the import undoes the regions: passes see
# dense convs), optimizes it and, with onednn-blocked, packs it again; without
# it the output is dense and has no holder.
expect 0 "PASSED" -- "$ptopt" "$work/b.pt" "$work/b2.pt" --passes '-O1,onednn-blocked' "${img[@]}" --no-measure
expect 0 "PASSED" -- "$ptopt" "$work/b.pt" "$work/b3.pt" -O1 "${img[@]}" --no-measure
"$py" - "$work/b3.pt" <<'PY' || fail "the re-optimized model without onednn-blocked still runs on oneDNN tensors"
import sys, torch
b = torch.jit.load(sys.argv[1])
assert not hasattr(b, "ptopt_load_time") and "to_mkldnn" not in b.code, b.code
PY
"$py" - "$fx/resnet18_script.pt" "$work/b2.pt" <<'PY' || fail "the re-optimized packed model does not reload or match"
import sys, torch
a = torch.jit.load(sys.argv[1]).eval(); b = torch.jit.load(sys.argv[2])
assert b.ptopt_load_time.v0.is_mkldnn
x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(4))
with torch.no_grad():
    assert torch.allclose(a(x), b(x), rtol=1e-4, atol=1e-5)
PY

# Prepacked convs (what --tune adds per conv outside oneDNN regions, and per
# linear, run as a 1x1 conv): each weight is packed when the model loads, on
# dense tensors; stock
# PyTorch loads the file, packs, matches, and saves it again; ptopt imports it
# back as plain convs.
if "$py" -c 'import torch, sys; sys.exit(0 if hasattr(torch.ops.mkldnn_prepacked, "conv2d_prepack") else 1)' 2>/dev/null; then
  expect 0 "PASSED" -- "$ptopt" "$fx/mobilenet_v2_script.pt" "$work/p.pt" --passes '-O3,tuned-kernels{prepacked=*}' "${img[@]}" -v --no-measure
  grep -qE "tuned-kernels.*prepacked=52" <<<"$last_output" || fail "not every conv was packed:"$'\n'"$last_output"
  grep -qE "tuned-kernels.*prepacked-linear=1" <<<"$last_output" || fail "the classifier was not packed:"$'\n'"$last_output"
  "$py" - "$fx/mobilenet_v2_script.pt" "$work/p.pt" <<'PY' || fail "the prepacked model does not reload or match in PyTorch"
import sys, torch
a = torch.jit.load(sys.argv[1]).eval(); b = torch.jit.load(sys.argv[2])
holder = b.ptopt_load_time
assert isinstance(holder.v0, torch.ScriptObject) and not holder.s0.is_mkldnn, "the convs were not packed at load"
assert "conv2d_prepack" not in b.code and "conv2d_run" in b.code
for shape in [(1, 3, 64, 64), (3, 3, 48, 80)]:  # packed for 1x3x64x64; other shapes run too
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        ya, yb = a(x), b(x)
    assert torch.nn.functional.cosine_similarity(ya.flatten(), yb.float().flatten(), 0) > 0.99, shape
b.save(sys.argv[2] + ".again.pt")
c = torch.jit.load(sys.argv[2] + ".again.pt")
with torch.no_grad():
    assert torch.equal(c(x), yb)
PY
  expect 0 "PASSED" -- "$ptopt" "$work/p.pt" "$work/p2.pt" -O1 "${img[@]}" --no-measure
fi

[ "$failures" = 0 ] && echo "tune_test: all passed" || { echo "tune_test: $failures failure(s)"; exit 1; }
