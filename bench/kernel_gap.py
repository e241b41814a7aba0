#!/usr/bin/env python3
"""Where ptopt's --tune file and OpenVINO differ: kernel time or time between kernels.

    taskset -c 1 env OMP_NUM_THREADS=1 .venv/bin/python bench/kernel_gap.py \
        [--ptopt build-torch2/tools/ptopt] [--ptopt-args="-O3 --tune"] [--ptopt-file MODEL=PATH ...] \
        [--models mobilenet_v2,efficientnet_b0,ghostnet_100,levit_128s | all] \
        [--openvino-precision match|default|f32] [--runs 200] [--label NAME] [--work DIR] \
        [--out bench/results/kernel_gap]
    .venv/bin/python bench/kernel_gap.py --compare BEFORE.json AFTER.json [--out DIR/compare]

Models: any of bench/peers.py's nine (resnet50, mobilenet_v2, efficientnet_b0,
convnext_tiny, vit_b_16, bert_base, gpt2_small, levit_128s, ghostnet_100; `all`
for every one), each built as bench/peers.py builds it: random weights, the
same inputs (1x3x224x224 images; the text models take 1x128 token ids, BERT
an attention mask too), OpenVINO's CPU plugin on the ONNX export.

ptopt's side is, per model, one of:
  --ptopt-file MODEL=PATH   a file made already (repeatable); its precision is
                            read from PATH.json (ptopt --report's) when there
                            is one, else from the bf16 tensors in its graph
  --ptopt-args="ARGS"      the --ptopt binary's output with these arguments
                            (default "-O3 --tune"; at 1 thread, with a fresh
                            --tuning-cache unless ARGS names one)
and --label names the run (default: the binary and its arguments, or "files"),
so that a "before" and an "after" run, with two binaries or two sets of
files, can be put side by side: --compare A.json B.json prints per model
each run's latency, kernel time, time outside the kernels, op count and the
time outside the kernels per op.

OpenVINO runs, with --openvino-precision match (the default), at ptopt's
precision: its default (bf16 on a CPU with bf16 instructions) where ptopt's
file computes in bf16, INFERENCE_PRECISION_HINT=f32 where it computes in
fp32 (as under scripts/avx2-cap.sh, where OpenVINO's default does not
compile). A model OpenVINO cannot run is timed for ptopt alone.

It measures, at 1 thread:

  latency        CPU time per inference (median of --runs, after warm-up),
                 each runtime on its own, interleaved in blocks of 10 runs
  kernel time    ptopt's file: the oneDNN primitives' own execution times
                 (oneDNN's verbose mode, `exec` lines) plus MKL's GEMMs'
                 (MKL's verbose mode: the fp32 linears and matmuls ATen runs
                 in MKL, not oneDNN), summed per inference; OpenVINO: its
                 per-node performance counters (real time, summed; every
                 node, fused ones included)
  outside        latency - kernel time: for ptopt, ATen's own kernels (cat,
                 elementwise ops, softmax: neither oneDNN primitives nor MKL
                 calls) and the cost of calling each op (TorchScript's
                 interpreter, the dispatcher, PyTorch's oneDNN glue, which
                 creates a primitive descriptor on every call, allocation);
                 for OpenVINO, its graph executor
  ops            ptopt: the TorchScript ops one inference runs (profiler
                 events at the top level), and the oneDNN primitives and
                 MKL calls among them; OpenVINO: the nodes it executed

so that "ptopt is 1.3x slower than OpenVINO" splits into how much of it is
the kernels (the same oneDNN family in both) and how much the cost of
calling them. Prints markdown and writes OUT.md and OUT.json.
"""
import argparse
import ctypes
import json
import os
import re
import shlex
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

DEFAULT_MODELS = "mobilenet_v2,efficientnet_b0,ghostnet_100,levit_128s"
EXEC_LINE = re.compile(r"^onednn_verbose,(?:v1,)?(?:[^,]*,)*?exec,cpu,([^,]+),([^,]+),.*,([0-9.]+)\s*$")
# MKL_VERBOSE SGEMM(T,N,768,128,768,...) 1.07ms CNR:OFF Dyn:0 FastMM:1 TID:0  NThr:1
MKL_LINE = re.compile(r"^MKL_VERBOSE\s+([A-Z0-9_]+)\(.*\)\s+([0-9.]+)(ns|us|ms|s)\s")
MKL_UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


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


def _fflush():
    """Flushes C stdio (MKL writes its verbose lines through printf)."""
    try:
        ctypes.CDLL(None).fflush(None)
    except Exception:  # noqa: BLE001
        pass


def kernels(fn):
    """One call of fn under oneDNN's and MKL's verbose modes (both written to
    the process's stdout by the libraries: captured through the file
    descriptor). Returns {"onednn": (primitives, ms, by kind), "mkl": (calls,
    ms, by function)}."""
    sys.stdout.flush()
    _fflush()
    saved = os.dup(1)
    mkl = getattr(getattr(torch._C, "_verbose", None), "mkl_set_verbose", None)
    with tempfile.TemporaryFile(mode="w+") as tmp:
        os.dup2(tmp.fileno(), 1)
        try:
            if mkl:
                mkl(1)
            with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                fn()
        finally:
            if mkl:
                mkl(0)
            sys.stdout.flush()
            _fflush()
            os.dup2(saved, 1)
            os.close(saved)
        tmp.seek(0)
        lines = tmp.read().splitlines()
    out = {"onednn": [0, 0.0, {}], "mkl": [0, 0.0, {}]}
    for line in lines:
        m = EXEC_LINE.match(line)
        if m:
            key, kind, ms = "onednn", m.group(1), float(m.group(3))
        else:
            m = MKL_LINE.match(line)
            if not m:
                continue
            key, kind, ms = "mkl", m.group(1), float(m.group(2)) * MKL_UNIT_MS[m.group(3)]
        entry = out[key]
        entry[0] += 1
        entry[1] += ms
        entry[2][kind] = entry[2].get(kind, 0.0) + ms
    return {k: tuple(v) for k, v in out.items()}


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


def file_precision(module, path):
    """bf16 or fp32 for a TorchScript file made elsewhere: its ptopt report
    (PATH.json) when there is one, else whether its graph holds bf16 tensors
    (constants, parameters) or casts to bf16."""
    report = path + ".json"
    if os.path.exists(report):
        try:
            with open(report) as fh:
                return peers.report_info(json.load(fh))["precision_chosen"], "ptopt's report"
        except Exception:  # noqa: BLE001 - not a ptopt report: look at the graph
            pass
    dtypes = {t.dtype for t in module.state_dict().values() if isinstance(t, torch.Tensor)}

    def walk(block):
        for n in block.nodes():
            if n.kind() == "prim::Constant" and n.hasAttribute("value") and n.kindOf("value") == "t":
                dtypes.add(n.t("value").dtype)
            if n.kind() in ("aten::to", "aten::type_as", "aten::_to_copy"):
                for i in n.inputs():
                    if i.node().kind() == "prim::Constant" and i.toIValue() == 15:  # ScalarType BFloat16
                        dtypes.add(torch.bfloat16)
            for b in n.blocks():
                walk(b)

    for method in ("forward",):
        try:
            walk(getattr(module, method).graph)
        except Exception:  # noqa: BLE001
            pass
    return ("bf16" if torch.bfloat16 in dtypes else "fp32"), "the file's tensors"


def ptopt_module(args, ctx, spec):
    """(module, info) of ptopt's side for one model: --ptopt-file's, or the
    binary's output with --ptopt-args."""
    given = args.ptopt_files.get(spec.name)
    if given:
        module = torch.jit.load(given).eval()
        precision, source = file_precision(module, given)
        return module, {"source": "file %s" % given, "precision": precision, "precision_from": source}
    extra = shlex.split(args.ptopt_args)
    if "--tune" in extra and "--tuning-cache" not in extra and not any(a.startswith("--tuning-cache=") for a in extra):
        cache = os.path.join(ctx.work, "%s.%s.tuning.json" % (spec.name, safe(args.label)))
        if os.path.exists(cache):
            os.remove(cache)  # a fresh cache: no decision from an earlier run
        extra += ["--tuning-cache", cache]
    path, info = peers.make_ptopt_file(ctx, "kernel-gap-%s" % safe(args.label), args=extra)
    return torch.jit.load(path).eval(), {
        "source": "%s %s (%s, %.0f s)" % (os.path.relpath(args.ptopt, ROOT) if args.ptopt.startswith(ROOT)
                                         else args.ptopt, args.ptopt_args, info["outcome"], info["seconds"]),
        "precision": info["precision_chosen"], "precision_from": "ptopt's report", "seconds": info["seconds"]}


def safe(label):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", label).strip("_")[:60] or "run"


def openvino_model(args, ctx, ptopt_precision):
    """(compiled, compiled with PERF_COUNT, precision it runs) or raises."""
    ov = peers.optional("openvino")
    core = ov.Core()
    config = {"INFERENCE_NUM_THREADS": 1, "PERFORMANCE_HINT": "LATENCY"}
    want = args.openvino_precision
    if want == "match":
        want = "f32" if ptopt_precision == "fp32" else "default"
    if want != "default":
        config["INFERENCE_PRECISION_HINT"] = want
    compiled = core.compile_model(core.read_model(ctx.onnx_path()), "CPU", config)
    precision = peers.openvino_precision(compiled.get_property("INFERENCE_PRECISION_HINT"))
    perf = core.compile_model(core.read_model(ctx.onnx_path()), "CPU", dict(config, PERF_COUNT=True))
    return compiled, perf, precision


def run_model(args, spec, work):
    ctx = peers.Context(types.SimpleNamespace(ptopt=args.ptopt, ptopt_timeout=args.ptopt_timeout,
                                              build_timeout=args.ptopt_timeout), spec, work)
    module, info = ptopt_module(args, ctx, spec)
    inputs = ctx.inputs

    def ptopt_call():
        with torch.no_grad():
            module(*inputs)

    ov_call, ov_error = None, None
    try:
        compiled, perf, ov_precision = openvino_model(args, ctx, info["precision"])
        request = compiled.create_infer_request()
        feeds = ctx.feeds(inputs)

        def ov_call():
            request.infer(feeds)
    except Exception as e:  # noqa: BLE001 - ptopt's side is still measured
        ov_error = peers.first_line(e)
        print("kernel_gap: %s: OpenVINO left out: %s" % (spec.name, ov_error), file=sys.stderr)

    for _ in range(20):
        ptopt_call()
        if ov_call:
            ov_call()
    if ov_call:
        ptopt_ms, ov_ms = interleaved_latency(ptopt_call, ov_call, args.runs)
    else:
        ptopt_ms, ov_ms = cpu_ms(ptopt_call, args.runs), None
    samples = [kernels(ptopt_call) for _ in range(5)]
    primitives, _, kinds = samples[0]["onednn"]
    mkl_calls, _, mkl_kinds = samples[0]["mkl"]
    onednn_ms = statistics.median(s["onednn"][1] for s in samples)
    mkl_ms = statistics.median(s["mkl"][1] for s in samples)
    ops = torchscript_ops(ptopt_call)
    outside = ptopt_ms - onednn_ms - mkl_ms
    row = {
        "model": spec.name, "label": args.label, "ptopt": info["source"], "ptopt_precision": info["precision"],
        "ptopt_ms": ptopt_ms, "ptopt_kernels_ms": onednn_ms + mkl_ms, "ptopt_onednn_ms": onednn_ms,
        "ptopt_mkl_ms": mkl_ms, "ptopt_outside_ms": outside, "ptopt_ops": ops, "ptopt_primitives": primitives,
        "ptopt_mkl_calls": mkl_calls, "ptopt_outside_per_op_us": 1e3 * outside / max(1, ops),
        "ptopt_kernels_by_kind": {k: round(v, 3) for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])},
        "ptopt_mkl_by_function": {k: round(v, 3) for k, v in sorted(mkl_kinds.items(), key=lambda kv: -kv[1])},
    }
    if info.get("seconds") is not None:
        row["tune_seconds"] = info["seconds"]
    if ov_call:
        nodes, ov_kernels, ov_kinds = openvino_counters(perf, feeds, min(args.runs, 50))
        row.update({
            "openvino_ms": ov_ms, "openvino_kernels_ms": ov_kernels, "openvino_nodes": nodes,
            "openvino_precision": ov_precision,
            "openvino_by_node_type": {k: round(v, 3) for k, v in sorted(ov_kinds.items(), key=lambda kv: -kv[1])[:8]},
        })
    else:
        row["openvino_error"] = ov_error
    return row


def fmt(value, spec="%.2f"):
    return "—" if value is None else spec % value


def render(rows, meta):
    out = ["# %s and OpenVINO: kernel time and the time between kernels (%s)" % (
               "ptopt `%s`" % meta["label"], meta["date"]), "",
           "%s; %s; %s. 1 thread, CPU time per inference; ptopt's kernels: oneDNN primitives + MKL GEMMs; "
           "generated by `bench/kernel_gap.py`." % (meta["machine"], meta["versions"], meta.get("cap", "native ISA")),
           "",
           "| model | precision (ptopt / OpenVINO) | ptopt ms | OpenVINO ms | ratio | ptopt kernels ms "
           "(oneDNN + MKL) | OpenVINO nodes ms | ptopt outside kernels ms | OpenVINO outside nodes ms "
           "| ptopt ops (oneDNN primitives, MKL calls) | OpenVINO nodes | ptopt outside kernels per op µs |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ov = r.get("openvino_ms")
        out.append(("| %s | %s / %s | %.2f | %s | %s | %.2f (%.2f + %.2f) | %s | %.2f | %s | %d (%d, %d) | %s "
                    "| %.1f |") % (
            r["model"], r.get("ptopt_precision", "?"), r.get("openvino_precision", "—"), r["ptopt_ms"], fmt(ov),
            "%.2fx" % (r["ptopt_ms"] / ov) if ov else "—", r["ptopt_kernels_ms"], r["ptopt_onednn_ms"],
            r["ptopt_mkl_ms"], fmt(r.get("openvino_kernels_ms")), r["ptopt_outside_ms"],
            fmt(ov - r["openvino_kernels_ms"] if ov else None), r["ptopt_ops"], r["ptopt_primitives"],
            r["ptopt_mkl_calls"], fmt(r.get("openvino_nodes"), "%d"), r["ptopt_outside_per_op_us"]))
    out += ["", "ptopt's side: %s." % "; ".join(sorted({r["ptopt"] for r in rows})) if rows else "", ""]
    out += ["Kernel time by kind (ms per inference):", ""]
    for r in rows:
        ptopt_kinds = list(r["ptopt_kernels_by_kind"].items()) + [
            ("MKL " + k, v) for k, v in r.get("ptopt_mkl_by_function", {}).items()]
        out.append("- %s: ptopt %s; OpenVINO %s" % (
            r["model"], ", ".join("%s %.2f" % kv for kv in ptopt_kinds) or "none",
            ", ".join("%s %.2f" % kv for kv in r["openvino_by_node_type"].items())
            if "openvino_by_node_type" in r else "not run (%s)" % r.get("openvino_error")))
    return "\n".join(out) + "\n"


def compare(paths):
    """Per model, run A's and run B's per-op cost side by side."""
    runs = []
    for p in paths:
        with open(p) as fh:
            data = json.load(fh)
        label = data.get("meta", {}).get("label") or os.path.splitext(os.path.basename(p))[0]
        runs.append((label, {r["model"]: r for r in data.get("rows", [])}, data.get("meta", {})))
    (la, a, ma), (lb, b, mb) = runs
    if la == lb:
        la, lb = la + " (A)", lb + " (B)"
    models = list(a) + [m for m in b if m not in a]

    def outside(r):
        if r is None:
            return None
        return r.get("ptopt_outside_ms", r["ptopt_ms"] - r["ptopt_kernels_ms"])

    def per_op(r):
        return None if r is None else 1e3 * outside(r) / max(1, r["ptopt_ops"])

    def vs_ov(r):
        return None if r is None or not r.get("openvino_ms") else r["ptopt_ms"] / r["openvino_ms"]

    def pair(f, spec="%.2f"):
        return "%s | %s" % (fmt(f(ra), spec), fmt(f(rb), spec))

    out = ["# kernel_gap: A = %s, B = %s" % (la, lb), "",
           "A: %s, %s, %s. B: %s, %s, %s. 1 thread, CPU time per inference; outside = latency - (oneDNN + MKL) "
           "kernel time; per op = outside / TorchScript ops. B / A < 1: B spends less." % (
               ma.get("date", "?"), ma.get("machine", "?"), ma.get("cap", "native ISA"),
               mb.get("date", "?"), mb.get("machine", "?"), mb.get("cap", "native ISA")), "",
           "| model | ptopt ms A | B | kernels ms A | B | outside ms A | B | ops A | B | outside per op µs A | B "
           "| per op B / A | / OpenVINO A | B |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for m in models:
        ra, rb = a.get(m), b.get(m)
        pa, pb = per_op(ra), per_op(rb)
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            m, pair(lambda r: r and r["ptopt_ms"]), pair(lambda r: r and r["ptopt_kernels_ms"]), pair(outside),
            pair(lambda r: r and r["ptopt_ops"], "%d"), pair(per_op, "%.1f"),
            "%.2fx" % (pb / pa) if pa and pb is not None else "—", pair(vs_ov, "%.2fx")))
    return "\n".join(out) + "\n"


def parse_files(items, ap):
    files = {}
    for item in items or []:
        model, sep, path = item.partition("=")
        if not sep or not model or not path:
            ap.error("--ptopt-file wants MODEL=PATH, not %r" % item)
        if not os.path.exists(path):
            ap.error("--ptopt-file %s: no such file" % path)
        files[model] = os.path.abspath(path)
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ptopt", default=os.path.join(ROOT, "build-torch2", "tools", "ptopt"))
    ap.add_argument("--ptopt-args", default="-O3 --tune",
                    help='the binary\'s arguments (default "-O3 --tune"; a fresh --tuning-cache is added)')
    ap.add_argument("--ptopt-file", action="append", metavar="MODEL=PATH",
                    help="measure this file for MODEL instead of running the binary (repeatable)")
    ap.add_argument("--label", default=None, help="names the run in the output (for --compare)")
    ap.add_argument("--models", default=DEFAULT_MODELS,
                    help="comma-separated, or all (%s)" % ",".join(peers.ALL_MODELS))
    ap.add_argument("--openvino-precision", choices=["match", "default", "f32", "bf16"], default="match",
                    help="match: OpenVINO at ptopt's precision (default); default: OpenVINO's own choice")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--ptopt-timeout", type=int, default=900)
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", default=None, help="OUT.md and OUT.json (default bench/results/kernel_gap; "
                                                "with --compare: print only, unless given)")
    ap.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"),
                    help="print two runs' per-op costs side by side, and measure nothing")
    args = ap.parse_args()
    if args.compare:
        markdown = compare(args.compare)
        if args.out:
            with open(args.out + ".md", "w") as fh:
                fh.write(markdown)
        print(markdown)
        return 0
    args.out = args.out or os.path.join(ROOT, "bench", "results", "kernel_gap")
    args.ptopt = os.path.abspath(args.ptopt)
    args.ptopt_files = parse_files(args.ptopt_file, ap)
    torch.set_num_threads(1)
    table = peers.specs()
    models = list(peers.ALL_MODELS) if args.models == "all" else [m for m in args.models.split(",") if m]
    unknown = [m for m in models + list(args.ptopt_files) if m not in table]
    if unknown:
        ap.error("unknown models %s (known: %s)" % (", ".join(unknown), ", ".join(table)))
    for m in args.ptopt_files:
        if m not in models:
            models.append(m)
    if args.label is None:
        binary = "%s %s" % (os.path.relpath(args.ptopt, ROOT), args.ptopt_args)
        given = [m for m in models if m in args.ptopt_files]
        args.label = "files" if len(given) == len(models) else binary + (" and files" if given else "")
    versions = peers.versions()
    cap = ("CPU capped: ATEN_CPU_CAPABILITY=%s ONEDNN_MAX_CPU_ISA=%s" % (
        os.environ.get("ATEN_CPU_CAPABILITY"), os.environ.get("ONEDNN_MAX_CPU_ISA"))
           if os.environ.get("ONEDNN_MAX_CPU_ISA") else "native ISA")
    meta = {"date": time.strftime("%Y-%m-%d"), "machine": peers.machine(), "label": args.label, "cap": cap,
            "native_bf16": peers.native_bf16()[1],
            "versions": ", ".join("%s %s" % (k, versions[k]) for k in ("torch", "openvino", "transformers", "timm")
                                  if k in versions)}
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
            with open(args.out + ".json", "w") as fh:  # after every model: a run cut short keeps what it measured
                json.dump({"meta": meta, "rows": rows}, fh, indent=1)
    markdown = render(rows, meta)
    with open(args.out + ".md", "w") as fh:
        fh.write(markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
