#!/usr/bin/env python3
"""What one call of each conv and linear form costs, apart from its arithmetic.

    taskset -c 1 .venv/bin/python bench/call_cost.py [--threads 1] [--calls 2000] [--rounds 7]
        [--out bench/results/call_cost_DATE]

The small convnets' gap to OpenVINO (bench/kernel_gap.py: "outside kernels
per op") is the time PyTorch spends calling each op, not the kernels. This
times every form of a conv and a linear that ptopt writes (and that --tune
chooses between) on operands so small that the arithmetic is negligible: a
1x1 conv of 16 channels on a 4x4 channels-last image, a 3x3 depthwise conv
of 16 channels on a 4x4 image, and a 16x16 linear on one row. What is left
is the cost of one call: the TorchScript-free Python call (a few µs, the
same for every form: the `aten` row shows it), the dispatcher, PyTorch's
glue around the library (oneDNN's descriptors, allocation of the output and
scratch memory) and the library's own dispatch.

Forms (each where this LibTorch has it; a missing one says why):
  conv2d              aten::conv2d, ATen's choice (at 1 thread a 1x1 conv
                      goes to its own GEMM path)
  mkldnn_convolution  aten::mkldnn_convolution (tuned-kernels mkldnn=)
  pointwise           mkldnn::_convolution_pointwise with the weight packed
                      (tuned-kernels fused=)
  prepacked           mkldnn_prepacked::conv2d_run (tuned-kernels prepacked=)
  linear              aten::linear (MKL, or the BLAS)
  linear_pointwise    mkldnn::_linear_pointwise with the weight packed
                      (tuned-kernels fused= on a linear)
  mkl_linear          mkl::_mkl_linear with MKL's packed weight

Each form runs --calls times per round, the forms interleaved, --rounds
rounds; the median per call is printed, with the ratio to `conv2d` (convs)
or `linear`. Prints markdown; --out writes OUT.md and OUT.json.
"""
import argparse
import json
import os
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import machine  # noqa: E402


def conv_forms(groups):
    """The conv forms on a 16-channel 4x4 channels-last image: a 1x1 conv
    (groups=1) or a 3x3 depthwise conv (groups=16)."""
    c, k = 16, 1 if groups == 1 else 3
    pad = [k // 2, k // 2]
    x = torch.randn(1, c, 4, 4).contiguous(memory_format=torch.channels_last)
    w, b = torch.randn(c, c // groups, k, k), torch.randn(c)
    one = [1, 1]
    forms = {"conv2d": lambda: torch.nn.functional.conv2d(x, w, b, 1, pad, 1, groups),
             "mkldnn_convolution": lambda: torch.mkldnn_convolution(x, w, b, pad, one, one, groups)}
    missing = {}
    try:
        wp = torch.ops.mkldnn._reorder_convolution_weight(w, pad, one, one, groups, list(x.shape))
        forms["pointwise"] = lambda: torch.ops.mkldnn._convolution_pointwise(
            x, wp, b, pad, one, one, groups, "none", [], "")
    except (AttributeError, RuntimeError) as e:
        missing["pointwise"] = str(e).splitlines()[0]
    try:
        ctx = torch.ops.mkldnn_prepacked.conv2d_prepack(w, b, one, pad, one, groups, list(x.shape), "none")
        forms["prepacked"] = lambda: torch.ops.mkldnn_prepacked.conv2d_run(x, ctx)
    except (AttributeError, RuntimeError) as e:
        missing["prepacked"] = str(e).splitlines()[0]
    return forms, missing


def linear_forms():
    x, w, b = torch.randn(1, 16), torch.randn(16, 16), torch.randn(16)
    forms = {"linear": lambda: torch.nn.functional.linear(x, w, b)}
    missing = {}
    try:
        wp = torch.ops.mkldnn._reorder_linear_weight(w, 1)
        forms["linear_pointwise"] = lambda: torch.ops.mkldnn._linear_pointwise(x, wp, b, "none", [], "")
    except (AttributeError, RuntimeError) as e:
        missing["linear_pointwise"] = str(e).splitlines()[0]
    try:
        mp = torch.ops.mkl._mkl_reorder_linear_weight(w, 1)
        forms["mkl_linear"] = lambda: torch.ops.mkl._mkl_linear(x, mp, w, b, 1)
    except (AttributeError, RuntimeError) as e:
        missing["mkl_linear"] = str(e).splitlines()[0]
    return forms, missing


def per_call_us(fn, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def time_forms(forms, calls, rounds):
    for fn in forms.values():  # warm up: oneDNN's primitive cache, MKL's buffers
        for _ in range(50):
            fn()
    runs = {name: [] for name in forms}
    for _ in range(rounds):
        for name, fn in forms.items():
            runs[name].append(per_call_us(fn, calls))
    return {name: statistics.median(v) for name, v in runs.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cases = [("1x1 conv, 16 channels, 4x4", "conv2d", conv_forms(1)),
             ("3x3 depthwise conv, 16 channels, 4x4", "conv2d", conv_forms(16)),
             ("linear 16x16, one row", "linear", linear_forms())]
    results = []
    with torch.no_grad():
        for title, base, (forms, missing) in cases:
            results.append({"case": title, "base": base, "us": time_forms(forms, args.calls, args.rounds),
                            "missing": missing})
    lines = ["# The cost of one call, by form", "",
             "%s, %d thread(s), torch %s; median µs per call of %d rounds of %d calls; ratio to the "
             "case's `%s`/`%s` row. Generated by `bench/call_cost.py`." % (
                 machine(), args.threads, torch.__version__, args.rounds, args.calls, "conv2d", "linear"), ""]
    for r in results:
        lines += ["## %s" % r["case"], "", "| form | µs per call | ratio |", "|---|---:|---:|"]
        base = r["us"][r["base"]]
        lines += ["| %s | %.1f | %.2fx |" % (name, us, us / base) for name, us in r["us"].items()]
        lines += ["| %s | — (%s) | |" % (name, why) for name, why in r["missing"].items()]
        lines.append("")
    text = "\n".join(lines)
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out + ".md", "w") as fh:
            fh.write(text)
        with open(args.out + ".json", "w") as fh:
            json.dump({"cpu": machine(), "threads": args.threads, "torch": torch.__version__,
                       "calls": args.calls, "rounds": args.rounds, "results": results}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
