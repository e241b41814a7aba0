#!/usr/bin/python3
"""Digests of what ptopt writes for every test fixture at -O0..-O3, with
--quantize int8 (int8 calibrated on the seeded random inputs) and with
--tune.

A refactor that promises "no change in behaviour" runs this before and after
and compares: the saved models must be byte-identical, and the text of
--print-changed and --explain (the IR diffs and the declines) the same.

    scripts/output_digests.py build/tools/ptopt build/fixtures OUT.json
    scripts/output_digests.py --compare BEFORE.json AFTER.json

Timing lines are left out of the text digests; everything else counts.
The never-slower stage is off (PTOPT_NO_MEASURE=1): which candidate it
writes depends on the machine's timing, not on the passes. --tune decides on
the reproducible clock (PTOPT_REPRODUCIBLE_CLOCK=1, measure/reproducible_clock.h:
times that depend on the candidates' names only, no tuning cache), so its
outputs compare too.
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

LEVELS = ["-O0", "-O1", "-O2", "-O3", "-O1 --quantize int8", "--tune"]
# Lines whose content depends on the clock or on temporary paths.
# Also: the model's own warnings as LibTorch logs them ("W1205 20:25:20..."
# in 1.13, "[W1205 20:25:20..." in 2.x: timestamped, and as
# many as the measure stage ran the model) and the measure stage's verdict.
VOLATILE = re.compile(r"(\d+(\.\d+)?\s*(ms|s|us|%)|/tmp/|wall|elapsed|speed|^\[?W\d{4,8} |measurably slower)", re.I)


def input_args(spec):
    args = []
    for inp in spec:
        if inp["type"] == "tensor":
            shape = ",".join(map(str, inp["shape"]))
            dtype = inp.get("dtype", "float32")
            args.append(shape if dtype == "float32" else "%s:%s" % (shape, dtype))
        elif inp["type"] == "int":
            args.append("int:%d" % inp["value"])
        else:
            return None
    return ["--input-shape"] + args if args else []


def digest(ptopt, fixtures_dir):
    manifest = json.load(open(os.path.join(fixtures_dir, "fixtures.json")))
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        for fx in manifest["fixtures"]:
            inputs = input_args(fx.get("inputs", []))
            if inputs is None:
                continue
            src = os.path.join(fixtures_dir, fx["file"])
            for level in LEVELS:
                out = os.path.join(tmp, "out.pt")
                cmd = [ptopt, src, out] + level.split() + ["--force", "--overwrite", "--print-changed",
                       "--explain", "--seed", "7"] + inputs
                run = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PTOPT_NO_MEASURE="1", PTOPT_REPRODUCIBLE_CLOCK="1"))
                text = "\n".join(l for l in (run.stdout + run.stderr).splitlines() if not VOLATILE.search(l))
                model = hashlib.sha256(open(out, "rb").read()).hexdigest() if os.path.exists(out) else None
                result["%s %s" % (fx["name"], level)] = {
                    "rc": run.returncode, "model": model,
                    "text": hashlib.sha256(text.encode()).hexdigest(), "text_lines": text.count("\n") + 1}
                if os.path.exists(out):
                    os.remove(out)
                print("%-28s %s rc=%d %s" % (fx["name"], level, run.returncode, (model or "-")[:12]), flush=True)
    return result


def compare(before_path, after_path):
    before, after = json.load(open(before_path)), json.load(open(after_path))
    bad = 0
    for key in sorted(set(before) | set(after)):
        b, a = before.get(key), after.get(key)
        if b is None or a is None:
            print("only in %s: %s" % ("after" if b is None else "before", key))
            bad += 1
            continue
        for what in ("rc", "model", "text"):
            if b[what] != a[what]:
                print("%s: %s differs" % (key, what))
                bad += 1
    print("%d runs compared, %d differences" % (len(before), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    json.dump(digest(sys.argv[1], sys.argv[2]), open(sys.argv[3], "w"), indent=1, sort_keys=True)
