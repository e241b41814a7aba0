#!/usr/bin/env python3
"""Where ptopt's --tune file and OpenVINO differ: kernel time or time between kernels.

    taskset -c 1 env OMP_NUM_THREADS=1 .venv/bin/python bench/kernel_gap.py \
        [--ptopt build-torch2/tools/ptopt] [--models mobilenet_v2,efficientnet_b0,ghostnet_100,levit_128s] \
        [--runs 200] [--work DIR] [--out bench/results/kernel_gap]

For each model (built as bench/peers.py builds it: random weights, the same
inputs, ptopt's `-O3 --tune` file at 1 thread, OpenVINO's CPU plugin on the
ONNX export) it measures, at 1 thread:

  latency        CPU time per inference (median of --runs, after warm-up),
                 each runtime on its own, interleaved in blocks of 10 runs
  kernel time    ptopt's file: the oneDNN primitives' own execution times
                 (oneDNN's verbose mode, `exec` lines, summed per inference);
                 OpenVINO: its per-node performance counters (real time,
                 summed; every node, fused ones included)
  outside        latency - kernel time: for ptopt, ATen's own kernels (cat,
                 elementwise ops, softmax: not oneDNN primitives) and the
                 cost of calling each op (TorchScript's interpreter, the
                 dispatcher, PyTorch's oneDNN glue, which creates a primitive
                 descriptor on every call, allocation); for OpenVINO, its
                 graph executor
  ops            ptopt: the TorchScript ops one inference runs (profiler
                 events at the top level), and the oneDNN primitives among
                 them; OpenVINO: the nodes it executed

so that "ptopt is 1.3x slower than OpenVINO" splits into how much of it is
the kernels (the same oneDNN family in both) and how much the cost of
calling them. Prints markdown and writes OUT.md and OUT.json.
"""
import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
import types
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))

import peers  # noqa: E402

EXEC_LINE = re.compile(r"^onednn_verbose,(?:v1,)?(?:[^,]*,)*?exec,cpu,([^,]+),([^,]+),.*,([0-9.]+)\s*$")


def cpu_ms(fn, runs):
    """Median CPU milliseconds of one call, over `runs` calls."""
    times = []
    for _ in range(runs):
        t0 = time.process_time()
        fn()
        times.append((time.process_time() - t0) * 1e3)
    return statistics.median(times)


def interleaved_latency(a, b, runs, block=10):
    """Median CPU ms of a and of b, timed in alternating blocks of `block` calls."""
    ta, tb = [], []
    for _ in range(max(1, runs // block)):
        ta += [cpu_ms(a, 1) for _ in range(block)]
        tb += [cpu_ms(b, 1) for _ in range(block)]
    return statistics.median(ta), statistics.median(tb)


def onednn_kernels(fn):
    """(primitives, summed exec ms, by primitive kind) of one call of fn, from
    oneDNN's verbose lines (written to the process's stdout by the library:
    captured through the file descriptor)."""
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile(mode="w+") as tmp:
        os.dup2(tmp.fileno(), 1)
        try:
            with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                fn()
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        tmp.seek(0)
        lines = tmp.read().splitlines()
    count, total, kinds = 0, 0.0, {}
    for line in lines:
        m = EXEC_LINE.match(line)
        if not m:
            continue
        count += 1
        ms = float(m.group(3))
        total += ms
        kinds[m.group(1)] = kinds.get(m.group(1), 0.0) + ms
    return count, total, kinds


def torchscript_ops(fn):
    """The ops one call's graph runs: the profiler's events directly under the
    method's own record (`forward`), or at the top level besides it."""
    with torch.profiler.profile() as prof:
        fn()
    return sum(1 for e in prof.events()
               if (e.cpu_parent is None and e.name != "forward") or
               (e.cpu_parent is not None and e.cpu_parent.name == "forward"))


def openvino_counters(compiled_perf, feeds, runs):
    """(executed nodes, median summed real-time ms, by node type) from OpenVINO's counters."""
    req = compiled_perf.create_infer_request()
    for _ in range(5):
        req.infer(feeds)
    totals, kinds, executed = [], {}, 0
    for _ in range(runs):
        req.infer(feeds)
        info = [p for p in req.profiling_info if p.status.name == "EXECUTED"]
        executed = len(info)
        totals.append(sum(p.real_time.total_seconds() for p in info) * 1e3)
        for p in info:
            kinds[p.node_type] = kinds.get(p.node_type, 0.0) + p.real_time.total_seconds() * 1e3 / runs
    return executed, statistics.median(totals), kinds


def run_model(args, spec, work):
    ov = peers.optional("openvino")
    ctx = peers.Context(types.SimpleNamespace(ptopt=args.ptopt, ptopt_timeout=args.ptopt_timeout), spec, work)
    path, info = peers.make_ptopt_file(ctx, "ptopt-tune")
    module = torch.jit.load(path).eval()
    inputs = ctx.inputs

    def ptopt_call():
        with torch.no_grad():
            module(*inputs)

    core = ov.Core()
    model = core.read_model(ctx.onnx_path())
    config = {"INFERENCE_NUM_THREADS": 1, "PERFORMANCE_HINT": "LATENCY"}
    compiled = core.compile_model(model, "CPU", config)
    request = compiled.create_infer_request()
    feeds = ctx.feeds(inputs)

    def ov_call():
        request.infer(feeds)

    for _ in range(20):
        ptopt_call()
        ov_call()
    ptopt_ms, ov_ms = interleaved_latency(ptopt_call, ov_call, args.runs)
    kernel_counts = [onednn_kernels(ptopt_call) for _ in range(5)]
    primitives, _, kinds = kernel_counts[0]
    ptopt_kernels = statistics.median(k[1] for k in kernel_counts)
    ops = torchscript_ops(ptopt_call)
    perf = core.compile_model(core.read_model(ctx.onnx_path()), "CPU", dict(config, PERF_COUNT=True))
    nodes, ov_kernels, ov_kinds = openvino_counters(perf, feeds, min(args.runs, 50))
    return {
        "model": spec.name, "ptopt_ms": ptopt_ms, "openvino_ms": ov_ms,
        "ptopt_kernels_ms": ptopt_kernels, "openvino_kernels_ms": ov_kernels,
        "ptopt_ops": ops, "ptopt_primitives": primitives, "openvino_nodes": nodes,
        "ptopt_kernels_by_kind": {k: round(v, 3) for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])},
        "openvino_by_node_type": {k: round(v, 3) for k, v in sorted(ov_kinds.items(), key=lambda kv: -kv[1])[:8]},
        "tune_seconds": info["seconds"],
    }


def render(rows, meta):
    out = ["# ptopt --tune and OpenVINO: kernel time and the time between kernels (%s)" % meta["date"], "",
           "%s; %s. 1 thread, CPU time per inference; generated by `bench/kernel_gap.py`." % (
               meta["machine"], meta["versions"]), "",
           "| model | ptopt `--tune` ms | OpenVINO ms | ratio | ptopt oneDNN kernels ms | OpenVINO nodes ms "
           "| ptopt outside oneDNN ms | OpenVINO outside nodes ms | ptopt ops (oneDNN primitives) | OpenVINO nodes "
           "| ptopt outside oneDNN per op µs |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        outside = r["ptopt_ms"] - r["ptopt_kernels_ms"]
        out.append("| %s | %.2f | %.2f | %.2fx | %.2f | %.2f | %.2f | %.2f | %d (%d) | %d | %.1f |" % (
            r["model"], r["ptopt_ms"], r["openvino_ms"], r["ptopt_ms"] / r["openvino_ms"], r["ptopt_kernels_ms"],
            r["openvino_kernels_ms"], outside, r["openvino_ms"] - r["openvino_kernels_ms"], r["ptopt_ops"],
            r["ptopt_primitives"], r["openvino_nodes"], 1e3 * outside / max(1, r["ptopt_ops"])))
    out += ["", "Kernel time by kind (ms per inference):", ""]
    for r in rows:
        out.append("- %s: ptopt %s; OpenVINO %s" % (
            r["model"], ", ".join("%s %.2f" % kv for kv in r["ptopt_kernels_by_kind"].items()),
            ", ".join("%s %.2f" % kv for kv in r["openvino_by_node_type"].items())))
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ptopt", default=os.path.join(ROOT, "build-torch2", "tools", "ptopt"))
    ap.add_argument("--models", default="mobilenet_v2,efficientnet_b0,ghostnet_100,levit_128s")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--ptopt-timeout", type=int, default=900)
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "kernel_gap"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    table = peers.specs()
    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in table]
    if unknown:
        ap.error("unknown models %s (known: %s)" % (", ".join(unknown), ", ".join(table)))
    versions = peers.versions()
    meta = {"date": time.strftime("%Y-%m-%d"), "machine": peers.machine(),
            "versions": ", ".join("%s %s" % (k, versions[k]) for k in ("torch", "openvino", "timm") if k in versions)}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or tmp
        os.makedirs(work, exist_ok=True)
        for name in models:
            print("kernel_gap: %s" % name, file=sys.stderr)
            try:
                rows.append(run_model(args, table[name], work))
            except peers.Unavailable as e:
                print("kernel_gap: %s left out: %s" % (name, e), file=sys.stderr)
    markdown = render(rows, meta)
    with open(args.out + ".json", "w") as fh:
        json.dump({"meta": meta, "rows": rows}, fh, indent=1)
    with open(args.out + ".md", "w") as fh:
        fh.write(markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
