"""Latency of ptopt -O3 (bf16) against -O2 and the original.

For each model (torchvision resnet50, mobilenet_v2, convnext_tiny; random
weights, batch 1, 224x224) this times, in one process, 1 thread, interleaved
(A B C D ... A B C D ...), the median of repeated runs of:
  original       the scripted module
  -O2            ptopt -O2's output
  -O3            ptopt -O3's output (cast{dtype=auto}: bf16 on this CPU)
  -O3 cl-in      the same file fed a channels-last input (what -O3 gains
                 once channels-last propagation runs before the cast)
  eager bf16+cl  the reference: the eager module converted to bf16 and
                 channels-last, fed a bf16 channels-last input
and prints each as a ratio to the original, plus the geomean over the
models. -O3's numerics are checked against the original with the bf16
criterion (cosine >= 0.99, max|a-b| <= 0.01 + 0.05 max|b|).
ptopt runs with --input-shape (as in channels_last.py and harness.py);
--no-input-shape leaves it out, to show what -O3 does without shapes.
Usage: /usr/bin/python3 bench/cast_latency.py [--ptopt build/tools/ptopt] [--reps 15] [--no-input-shape]
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


def models(names):
    # Random BatchNorm statistics, as in channels_last.py and harness.py: with
    # torchvision's default ones (mean 0, var 1) the activations of an untrained
    # network shrink layer by layer (mobilenet_v2's output is ~1e-11), which
    # reaches subnormal floats and makes the fp32 original artificially slow.
    from make_fixtures import randomize_bn  # noqa: E402
    torch.manual_seed(0)
    for name in names:
        ctor = getattr(torchvision.models, name)
        yield name, randomize_bn(ctor(weights=None)).eval(), (1, 3, 224, 224)


def median_times(fns, reps):
    times = [[] for _ in fns]
    with torch.no_grad():
        for f in fns:  # warm-up (the profiling executor needs a few runs)
            for _ in range(3):
                f()
        for _ in range(reps):
            for i, f in enumerate(fns):
                start = time.perf_counter()
                f()
                times[i].append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def bf16_check(actual, expected):
    a, b = actual.double().flatten(), expected.double().flatten()
    cos = (a @ b).item() / (a.norm().item() * b.norm().item())
    max_abs = (a - b).abs().max().item()
    allowed = 1e-2 + 5e-2 * b.abs().max().item()
    return cos, max_abs, allowed, cos >= 0.99 and max_abs <= allowed


def ptopt(binary, src, out, preset, shape):
    cmd = [binary, src, out, preset, "--no-verify", "-q", "--overwrite"]
    if shape:  # as channels_last.py and harness.py do: channels-last{mode=auto} decides from shapes
        cmd += ["--input-shape", ",".join(map(str, shape))]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ptopt", default=os.path.join(HERE, "..", "build", "tools", "ptopt"))
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--models", default="resnet50,mobilenet_v2,convnext_tiny")
    ap.add_argument("--no-input-shape", action="store_true",
                    help="run ptopt without --input-shape (channels-last then has no shape information)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    work = tempfile.mkdtemp()
    labels = ["-O2", "-O3", "-O3 cl-in", "eager bf16+cl"]
    rows = []
    for name, model, shape in models(args.models.split(",")):
        src = os.path.join(work, name + ".pt")
        torch.jit.script(model).save(src)
        o2, o3 = os.path.join(work, name + ".o2.pt"), os.path.join(work, name + ".o3.pt")
        given = None if args.no_input_shape else shape
        ptopt(args.ptopt, src, o2, "-O2", given)
        ptopt(args.ptopt, src, o3, "-O3", given)
        original = torch.jit.load(src).eval()
        m2 = torch.jit.load(o2).eval()
        m3 = torch.jit.load(o3).eval()
        eager = model.to(torch.bfloat16).to(memory_format=torch.channels_last)
        x = torch.randn(*shape)
        x_cl = x.contiguous(memory_format=torch.channels_last)
        x_bf16_cl = x.to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
        with torch.no_grad():
            cos, max_abs, allowed, ok = bf16_check(m3(x), original(x))
        times = median_times([lambda: original(x), lambda: m2(x), lambda: m3(x), lambda: m3(x_cl),
                              lambda: eager(x_bf16_cl)], args.reps)
        ratios = [t / times[0] for t in times[1:]]
        rows.append(ratios)
        print("%-14s original %8.2f ms  " % (name, times[0] * 1e3)
              + "  ".join("%s %.3fx" % (l, r) for l, r in zip(labels, ratios))
              + "  | -O3 bf16 check: cosine %.5f, max|a-b| %.3g (allowed %.3g) %s"
              % (cos, max_abs, allowed, "ok" if ok else "FAILED"), flush=True)
    geo = [math.exp(sum(math.log(r[i]) for r in rows) / len(rows)) for i in range(len(labels))]
    print("geomean ratio vs original (1 thread, median of %d, %s): " % (
        args.reps, "without --input-shape" if args.no_input_shape else "ptopt given --input-shape")
          + "  ".join("%s %.3fx" % (l, g) for l, g in zip(labels, geo)))


if __name__ == "__main__":
    main()
