#!/usr/bin/python3
"""Legitimate fp32 error of ptopt's -O1/-O2 against the verification bound.

Usage:
    /usr/bin/python3 bench/fp32_margins.py PTOPT WORKDIR [--models resnet18,resnet50,...]
        [--modes script,trace] [--levels -O1,-O2] [--isa native,avx2] [--iters 2] [--json OUT.json]

For each torchvision model (random weights, eval mode, BatchNorm statistics
randomized so that folding changes the weights: gamma U(0.5, 1.5), beta and
mean N(0, 0.1), var U(0.5, 1.5)), scripted and traced, runs
`ptopt IN OUT <level> --input-shape 1,3,224,224 --report R.json --force`
natively and with the CPU capped to AVX2 (ATEN_CPU_CAPABILITY=avx2
ONEDNN_MAX_CPU_ISA=AVX2), and prints, per run, the largest error relative to
the default fp32 bound (`max_error_to_bound` of the report: max over elements
of |a-b| / (atol + rtol*|b| + scale_tol*rms(b))), the max abs error, the
reference's max |b| and RMS, and what the plain elementwise bound
(atol + rtol*|b|) would have said. A markdown table goes to stdout.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torchvision

SHAPE = (1, 3, 224, 224)


def randomize_bn(model: nn.Module) -> None:
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                c = m.num_features
                m.running_mean.copy_(torch.randn(c) * 0.1)
                m.running_var.copy_(torch.empty(c).uniform_(0.5, 1.5))
                m.weight.copy_(torch.empty(c).uniform_(0.5, 1.5))
                m.bias.copy_(torch.randn(c) * 0.1)


def make(name: str, mode: str, workdir: str) -> str:
    path = os.path.join(workdir, "%s_%s.pt" % (name, mode))
    if os.path.exists(path):
        return path
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)()
    randomize_bn(model)
    model.eval()
    with torch.no_grad():
        m = torch.jit.script(model) if mode == "script" else torch.jit.trace(model, torch.randn(*SHAPE))
    m.save(path)
    return path


def run(ptopt: str, model: str, level: str, isa: str, iters: int, workdir: str) -> dict:
    env = dict(os.environ)
    if isa == "avx2":
        env["ATEN_CPU_CAPABILITY"] = "avx2"
        env["ONEDNN_MAX_CPU_ISA"] = "AVX2"
    base = os.path.splitext(os.path.basename(model))[0]
    out = os.path.join(workdir, "%s%s_%s.out.pt" % (base, level, isa))
    report = out + ".json"
    cmd = [ptopt, model, out, level, "--input-shape", ",".join(map(str, SHAPE)), "--verify-iters", str(iters),
           "--report", report, "--overwrite", "--force", "-q"]
    t0 = time.time()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    with open(report) as f:
        r = json.load(f)
    v = r["verification"]
    row = {"model": base, "level": level, "isa": isa, "exit": p.returncode, "passed": v.get("passed"),
           "seconds": round(time.time() - t0, 1), "error_to_bound": v.get("max_error_to_bound")}
    worst = None
    for it in v.get("iterations", []):
        for o in it["outputs"]:
            if o.get("bitwise_equal") or "max_abs" not in o:
                continue
            if worst is None or (o.get("error_to_bound") or 0) > (worst.get("error_to_bound") or 0):
                worst = o
    if worst:
        row.update({"max_abs": worst["max_abs"], "max_abs_reference": worst["max_abs_reference"],
                    "rms_reference": worst["rms_reference"], "error_over_rms": worst["max_abs"] / worst["rms_reference"]})
    # What the plain elementwise (rtol 1e-4, atol 1e-5) criterion said: rerun
    # `ptopt verify` with --scale-tol 0 on the written output.
    q = subprocess.run([ptopt, "verify", model, out, "--input-shape", ",".join(map(str, SHAPE)), "--verify-iters",
                        str(iters), "--scale-tol", "0", "--report", report + ".plain.json"],
                       env=env, capture_output=True, text=True)
    with open(report + ".plain.json") as f:
        row["plain_error_to_bound"] = json.load(f)["verification"].get("max_error_to_bound")
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ptopt")
    ap.add_argument("workdir")
    ap.add_argument("--models", default="resnet18,resnet50,mobilenet_v2,densenet121,convnext_tiny")
    ap.add_argument("--modes", default="script,trace")
    ap.add_argument("--levels", default="-O1,-O2")
    ap.add_argument("--isa", default="native,avx2")
    ap.add_argument("--iters", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    rows = []
    for name in args.models.split(","):
        for mode in args.modes.split(","):
            try:
                model = make(name, mode, args.workdir)
            except Exception as e:  # a model TorchScript does not accept
                print("skip %s %s: %s" % (name, mode, str(e).splitlines()[0]), file=sys.stderr)
                continue
            for level in args.levels.split(","):
                for isa in args.isa.split(","):
                    row = run(args.ptopt, model, level, isa, args.iters, args.workdir)
                    print(json.dumps(row), file=sys.stderr, flush=True)
                    rows.append(row)
    print("| model | level | ISA | err/bound | max abs | max abs / rms(b) | rms(b) | max abs(b) | plain elementwise err/bound | verdict |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print("| %s | %s | %s | %.3g | %.3g | %.3g | %.3g | %.3g | %.3g | %s |" % (
            r["model"], r["level"], r["isa"], r["error_to_bound"] or 0, r.get("max_abs", 0),
            r.get("error_over_rms", 0), r.get("rms_reference", 0), r.get("max_abs_reference", 0),
            r.get("plain_error_to_bound") or 0, "passed" if r["passed"] else "FAILED"))
    worst = max(rows, key=lambda r: r["error_to_bound"] or 0)
    print("\nlargest legitimate err/bound: %.3g (%s %s %s)" % (worst["error_to_bound"], worst["model"],
                                                              worst["level"], worst["isa"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
