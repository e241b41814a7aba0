"""Latency of ptopt -O2 (-O1 + channels-last{mode=auto}) against -O1 and the original.

For resnet50, mobilenet_v2, efficientnet_b0 and convnext_tiny (torchvision,
random weights, input 1x3x224x224): the original scripted module, the
reference point "eager module converted to channels-last" (model.to(
memory_format=torch.channels_last), scripted, input converted per call),
ptopt -O1 and ptopt -O2 are timed in one process, 1 thread, interleaved
(A B C D A B C D ...), median of --reps runs; ratios are printed against the
original, with the geomean over the models.

With --fixtures DIR (the test fixtures, e.g. build/fixtures) it also times
every fixture's -O1 output (= channels-last mode=off) against its -O2 output
(mode=auto), to show that auto never makes a fixture slower than off.

Usage: /usr/bin/python3 bench/channels_last.py [--ptopt build/tools/ptopt] [--reps 15]
                                               [--only resnet50,...] [--fixtures build/fixtures]
"""
import argparse
import json
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
MODELS = ["resnet50", "mobilenet_v2", "efficientnet_b0", "convnext_tiny"]


def build_model(name):
    from make_fixtures import randomize_bn  # noqa: E402
    torch.manual_seed(0)
    return randomize_bn(getattr(torchvision.models, name)(weights=None)).eval()


def median_times(fns, inputs, reps):
    times = [[] for _ in fns]
    with torch.no_grad():
        for f in fns:  # warm-up (the profiling executor needs a few runs)
            for _ in range(3):
                f(*inputs)
        for _ in range(reps):
            for i, f in enumerate(fns):
                start = time.perf_counter()
                f(*inputs)
                times[i].append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def ptopt(binary, src, out, preset, shapes):
    cmd = [binary, src, out, preset, "--no-verify", "-q", "--overwrite"]
    for s in shapes:
        cmd += ["--input-shape", s]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return torch.jit.load(out).eval()


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def bench_models(args, work):
    rows = []
    names = args.only.split(",") if args.only else MODELS
    for name in names:
        model = build_model(name)
        src = os.path.join(work, name + ".pt")
        torch.jit.script(model).save(src)
        shape = "1,3,224,224"
        o1 = ptopt(args.ptopt, src, os.path.join(work, name + ".o1.pt"), "-O1", [shape])
        o2 = ptopt(args.ptopt, src, os.path.join(work, name + ".o2.pt"), "-O2", [shape])
        original = torch.jit.load(src).eval()
        eager_cl = torch.jit.script(build_model(name).to(memory_format=torch.channels_last)).eval()

        def reference(x, m=eager_cl):
            return m(x.contiguous(memory_format=torch.channels_last))

        x = torch.randn(1, 3, 224, 224)
        with torch.no_grad():
            err = (o2(x) - original(x)).abs().max().item()
        t_orig, t_ref, t_o1, t_o2 = median_times([original, reference, o1, o2], [x], args.reps)
        rows.append((t_ref / t_orig, t_o1 / t_orig, t_o2 / t_orig))
        print("%-16s original %8.2f ms  eager-channels-last %.3fx  -O1 %.3fx  -O2 %.3fx  (-O2/-O1 %.3f, max|diff| %.1e)"
              % (name, t_orig * 1e3, t_ref / t_orig, t_o1 / t_orig, t_o2 / t_orig, t_o2 / t_o1, err), flush=True)
    print("geomean vs original: eager-channels-last %.3fx  -O1 %.3fx  -O2 %.3fx  (1 thread, median of %d)"
          % (geomean([r[0] for r in rows]), geomean([r[1] for r in rows]), geomean([r[2] for r in rows]), args.reps))


def bench_fixtures(args, work):
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
    from check_reload import build_inputs  # noqa: E402
    with open(os.path.join(args.fixtures, "fixtures.json")) as fh:
        fixtures = json.load(fh)["fixtures"]
    print("fixtures: -O2 (channels-last mode=auto) / -O1 (= mode=off)")
    for fx in fixtures:
        if fx["name"] in ("train_mode_trace",):
            continue
        shapes = []
        for spec in fx["inputs"]:
            if spec["type"] == "tensor":
                shapes.append(",".join(map(str, spec["shape"])) + (":int64" if spec["dtype"] == "int64" else ""))
            else:
                shapes.append("%s:%s" % (spec["type"], spec["value"]))
        src = os.path.join(args.fixtures, fx["file"])
        try:
            o1 = ptopt(args.ptopt, src, os.path.join(work, fx["name"] + ".o1.pt"), "-O1", shapes)
            o2 = ptopt(args.ptopt, src, os.path.join(work, fx["name"] + ".o2.pt"), "-O2", shapes)
        except subprocess.CalledProcessError as e:
            print("%-24s skipped (%s)" % (fx["name"], e))
            continue
        torch.manual_seed(1234)
        inputs = build_inputs(fx["inputs"])
        t1, t2 = median_times([o1, o2], inputs, args.reps)
        same = "same graph" if str(o1.graph) == str(o2.graph) else "channels-last"
        print("%-24s -O1 %8.3f ms  -O2 %.3fx  (%s)" % (fx["name"], t1 * 1e3, t2 / t1, same), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ptopt", default=os.path.join(HERE, "..", "build", "tools", "ptopt"))
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--only", default=None, help="comma-separated subset of " + ",".join(MODELS))
    ap.add_argument("--fixtures", default=None, help="also compare -O2 with -O1 on the fixtures in DIR")
    ap.add_argument("--no-models", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    work = tempfile.mkdtemp()
    if not args.no_models:
        bench_models(args, work)
    if args.fixtures:
        bench_fixtures(args, work)


if __name__ == "__main__":
    main()
