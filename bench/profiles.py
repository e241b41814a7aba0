#!/usr/bin/python3
"""Where the time goes: optimize_for_inference's graph vs ptopt's --tune output.

    /usr/bin/python3 bench/profiles.py [--ptopt build/tools/ptopt] [--models mobilenet_v2,...]
    scripts/avx2-cap.sh /usr/bin/python3 bench/profiles.py ...        (the AVX2 world)
    .venv/bin/python bench/profiles.py --ptopt build-torch2/tools/ptopt (PyTorch 2.x)

For each model (torchvision's, random weights and randomized BatchNorm
statistics, as bench/harness.py builds them, 1x3x224x224) it scripts the
original, makes `torch.jit.optimize_for_inference(freeze(original))` in this
process and ptopt's `-O3 --tune` output (a fresh tuning cache, 1 thread),
and profiles 10 inferences of each at 1 thread with torch.autograd.profiler:
the ops with the most self CPU time, in ms per inference and as a share of
the total. optimize_for_inference's prim:: oneDNN ops (prim::mkldnn_convolution,
prim::MKLDNNHardTanh_ and the like) are not operators the profiler records:
their time shows as the self time of `forward` and is listed as such.
Prints markdown (the "Profiles" tables of docs/benchmarks.md).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))


def profile(fn, x, iters=10, top=6):
    with torch.no_grad():
        for _ in range(3):
            fn(x)
        t0 = time.process_time()
        for _ in range(iters):
            fn(x)
        ms = (time.process_time() - t0) * 1e3 / iters
        with torch.autograd.profiler.profile() as prof:
            for _ in range(iters):
                fn(x)
    rows = []
    total = 0.0
    for e in prof.key_averages():
        self_us = e.self_cpu_time_total
        total += self_us
        rows.append((self_us, e.key, e.count // iters))
    rows.sort(reverse=True)
    out = []
    for self_us, key, calls in rows[:top]:
        name = key if key != "forward" else "forward (prim:: oneDNN ops, not itemized)"
        out.append((name, calls, self_us / iters / 1e3, 100.0 * self_us / total if total else 0.0))
    return ms, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ptopt", default=os.path.join(ROOT, "build", "tools", "ptopt"))
    ap.add_argument("--models", default="resnet50,mobilenet_v2,efficientnet_b0,convnext_tiny")
    args = ap.parse_args()
    from harness import benchmark_models  # noqa: E402
    torch.set_num_threads(1)
    world = "AVX2 cap" if os.environ.get("ONEDNN_MAX_CPU_ISA") == "AVX2" else "native"
    print("Profiles (%s world, torch %s, 1 thread, ms per inference by self CPU time)\n" % (world, torch.__version__))
    work = tempfile.mkdtemp(prefix="ptopt_profiles_")
    for name, model, shape in benchmark_models(False, args.models.split(",")):
        x = torch.randn(*shape)
        src = os.path.join(work, name + ".pt")
        torch.jit.save(torch.jit.script(model), src)
        out = os.path.join(work, name + "_tune.pt")
        env = dict(os.environ, OMP_NUM_THREADS="1")
        proc = subprocess.run([args.ptopt, src, out, "-O3", "--tune", "--input-shape", ",".join(map(str, shape)),
                               "--tuning-cache", os.path.join(work, name + ".tuning.json")],
                              env=env, capture_output=True, text=True)
        original = torch.jit.load(src).eval()
        variants = [("original", original)]
        try:
            variants.append(("optimize_for_inference",
                             torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.load(src).eval()))))
        except Exception as e:  # noqa: BLE001
            print("%s: optimize_for_inference failed: %s" % (name, str(e).splitlines()[0]))
        if proc.returncode == 0 and os.path.exists(out):
            variants.append(("ptopt -O3 --tune", torch.jit.load(out)))
        else:
            print("%s: ptopt failed: %s" % (name, (proc.stderr.strip().splitlines() or ["?"])[-1]))
        results = [(label, profile(fn, x)) for label, fn in variants]
        base = results[0][1][0]
        print("#### %s (%s)\n" % (name, world))
        print("| variant | ms | vs original | top ops by self time: op (calls) ms, share |")
        print("|---|---|---|---|")
        for label, (ms, rows) in results:
            ops = "; ".join("`%s` (%d) %.2f, %.0f%%" % (k, c, t, p) for k, c, t, p in rows)
            print("| %s | %.1f | %.3f | %s |" % (label, ms, ms / base, ops))
        print()
        chosen = [line.split("tune: ", 1)[1] for line in proc.stderr.splitlines()
                  if line.startswith("tune: ") and "network (whole model)" in line]
        for line in chosen:
            print("- --tune's whole-network A/B: %s" % line)
        print()
        sys.stdout.flush()


if __name__ == "__main__":
    main()
