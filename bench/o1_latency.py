"""Latency of ptopt -O1 against the original and torch.jit.freeze.

CPU time (time.process_time, 1 thread: steadier than wall time on a shared machine).
For each model: the original scripted module, torch.jit.freeze of it (Debian's
python3-torch), and ptopt -O1's output are timed in one process, 1 thread,
interleaved (A B C A B C ...), median of repeated runs; ratios are printed
against the original. Also records whether each output reloads.
Usage: /usr/bin/python3 bench/o1_latency.py [--ptopt build/tools/ptopt] [--reps 15]
"""
import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "fixtures"))


def models():
    torch.manual_seed(0)
    from make_fixtures import make_stack, randomize_bn  # noqa: E402
    yield "resnet18", randomize_bn(torchvision.models.resnet18(weights=None)).eval(), (1, 3, 224, 224)
    yield "resnet50", randomize_bn(torchvision.models.resnet50(weights=None)).eval(), (1, 3, 224, 224)
    yield "mobilenet_v2", randomize_bn(torchvision.models.mobilenet_v2(weights=None)).eval(), (1, 3, 224, 224)
    yield "deep_stack_500", randomize_bn(make_stack(500)).eval(), (1, 8, 32, 32)


def median_times(fns, x, reps):
    times = [[] for _ in fns]
    with torch.no_grad():
        for f in fns:  # warm-up (profiling executor needs a few runs)
            for _ in range(3):
                f(x)
        for _ in range(reps):
            for i, f in enumerate(fns):
                start = time.process_time()
                f(x)
                times[i].append(time.process_time() - start)
    return [statistics.median(t) for t in times]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ptopt", default=os.path.join(HERE, "..", "build", "tools", "ptopt"))
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    torch.set_num_threads(1)
    work = tempfile.mkdtemp()
    rows = []
    for name, model, shape in models():
        src = os.path.join(work, name + ".pt")
        torch.jit.script(model).save(src)
        out = os.path.join(work, name + ".o1.pt")
        subprocess.run([args.ptopt, src, out, "-O1", "--no-verify", "-q", "--overwrite"], check=True,
                       stdout=subprocess.DEVNULL)
        original = torch.jit.load(src).eval()
        frozen = torch.jit.freeze(torch.jit.load(src).eval())
        frozen_path = os.path.join(work, name + ".frozen.pt")
        frozen.save(frozen_path)
        try:
            torch.jit.load(frozen_path)
            frozen_reloads = "yes"
        except Exception:  # noqa: BLE001
            frozen_reloads = "no"
        optimized = torch.jit.load(out).eval()
        x = torch.randn(*shape)
        t_orig, t_freeze, t_o1 = median_times([original, frozen, optimized], x, args.reps)
        rows.append((name, t_orig, t_freeze / t_orig, t_o1 / t_orig, frozen_reloads))
        print("%-16s original %8.2f ms  freeze %.3fx  ptopt -O1 %.3fx  (freeze reloads: %s)"
              % (name, t_orig * 1e3, t_freeze / t_orig, t_o1 / t_orig, frozen_reloads), flush=True)
    gf = math.exp(sum(math.log(r[2]) for r in rows) / len(rows))
    go = math.exp(sum(math.log(r[3]) for r in rows) / len(rows))
    print("geomean ratio vs original: freeze %.3fx, ptopt -O1 %.3fx (1 thread, median of %d)" % (gf, go, args.reps))


if __name__ == "__main__":
    main()
