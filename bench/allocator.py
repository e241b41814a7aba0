#!/usr/bin/env python3
"""What the memory allocator costs a ptopt file: glibc's malloc against jemalloc and tcmalloc.

    .venv/bin/python bench/allocator.py --work PEERS_WORK_DIR [--models mobilenet_v2,...]
        [--variants ptopt-tune,ptopt-int8-tune] [--threads 1,2] [--alternations 7] [--runs 60]
        [--out bench/results/allocator_DATE]

PyTorch allocates every op's result, and oneDNN its descriptors and scratch
memory, through the process's malloc; on a small convnet at 1 thread perf
puts a third of a oneDNN op's per-call cost in glibc's malloc and free
(`_int_malloc`, `malloc_consolidate`). ONNX Runtime and OpenVINO run from
arenas of their own. jemalloc and tcmalloc (PyTorch's performance-tuning
guide recommends either, preloaded) take that cost away without changing
the file: `LD_PRELOAD=libjemalloc.so.2 python serve.py`.

Each ptopt file of a bench/peers.py work directory (`--work`, the
directory it made per model: MODEL.ptopt-tune.pt, MODEL.inputs.pt, ...)
is timed in child processes, one per allocator, run back to back in
alternating order, --alternations times; each child loads the file, warms
it up and reports the median of --runs calls (wall time, pinned to one
core at 1 thread). The peers' files in the same directory run the same
way with the default allocator (OpenVINO's, MODEL.openvino.xml; ONNX
Runtime's int8, MODEL.int8.onnx): with jemalloc preloaded beside PyTorch,
OpenVINO's process aborts ("free(): invalid size"), and both run from
their own arenas anyway. Ratios are per alternation (processes run next to
each other), then the median and the range over alternations: an
allocator against glibc for the same file, and ptopt under each allocator
against the peer at the same precision (bf16 or fp32 files: OpenVINO at
its default precision, as bench/peers.py's `openvino`; int8 files: ONNX
Runtime's int8). A missing allocator library (Debian: libjemalloc2,
libtcmalloc-minimal4) is reported and skipped. Prints markdown; --out
writes OUT.md and OUT.json.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ALLOCATORS = {
    "glibc": None,
    "jemalloc": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    "tcmalloc": "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
}
# The peer each ptopt variant is compared with, by the file bench/peers.py
# leaves in the model's work directory.
PEER_OF = {"ptopt-tune": ("openvino", "openvino.xml"), "ptopt-O3": ("openvino", "openvino.xml"),
           "ptopt-tune-n": ("openvino", "openvino.xml"),
           "ptopt-int8": ("ort-int8", "int8.onnx"), "ptopt-int8-tune": ("ort-int8", "int8.onnx")}


def child(kind, path, inputs, threads, runs):
    """Runs in the child: load, warm up, time `runs` calls; prints JSON."""
    import time
    import warnings
    warnings.filterwarnings("ignore")
    import torch
    torch.set_num_threads(threads)
    x = torch.load(inputs)
    args = tuple(x) if isinstance(x, (list, tuple)) else (x,)
    if kind == "torchscript":
        m = torch.jit.load(path)
        call = lambda: m(*args)  # noqa: E731
    elif kind == "openvino":
        import openvino as ov
        compiled = ov.Core().compile_model(path, "CPU", {"INFERENCE_NUM_THREADS": threads})
        req = compiled.create_infer_request()
        feeds = [a.numpy() for a in args]
        call = lambda: req.infer(feeds)  # noqa: E731
    else:  # onnx
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        feeds = {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)}
        call = lambda: sess.run(None, feeds)  # noqa: E731
    with torch.no_grad():
        for _ in range(max(5, runs // 5)):
            call()
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            call()
            times.append((time.perf_counter() - t) * 1e3)
    print(json.dumps({"median_ms": statistics.median(times)}))


def run_child(kind, path, inputs, threads, runs, preload):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, path, inputs, str(threads), str(runs)]
    if threads == 1:
        cmd = ["taskset", "-c", "1"] + cmd
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)["median_ms"], None
    tail = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
    return None, tail


def summary(ratios):
    if not ratios:
        return None
    return {"median": statistics.median(ratios), "low": min(ratios), "high": max(ratios), "n": len(ratios)}


def cell(s):
    return "—" if not s else "%.3f [%.3f, %.3f]" % (s["median"], s["low"], s["high"])


def measure(args, model_dir, model, variant, threads, allocators):
    path = os.path.join(model_dir, "%s.%s.pt" % (model, variant))
    inputs = os.path.join(model_dir, "%s.inputs.pt" % model)
    peer_name, peer_suffix = PEER_OF[variant]
    peer = os.path.join(model_dir, "%s.%s" % (model, peer_suffix))
    peer_kind = "openvino" if peer_suffix.endswith(".xml") else "onnx"
    ms = {a: [] for a in allocators}
    ms[peer_name] = []
    errors = {}
    for i in range(args.alternations):
        order = list(allocators) if i % 2 == 0 else list(reversed(allocators))
        for a in order:
            t, err = run_child("torchscript", path, inputs, threads, args.runs, ALLOCATORS[a])
            ms[a].append(t)
            if err:
                errors[a] = err
        if os.path.exists(peer):
            t, err = run_child(peer_kind, peer, inputs, threads, args.runs, None)
            ms[peer_name].append(t)
            if err:
                errors[peer_name] = err

    def paired(a, b):
        return summary([x / y for x, y in zip(ms[a], ms[b]) if x and y])

    row = {"model": model, "variant": variant, "threads": threads, "peer": peer_name, "ms": ms, "errors": errors,
           "vs_glibc": {a: paired(a, "glibc") for a in allocators if a != "glibc"},
           "vs_peer": {a: paired(a, peer_name) for a in allocators}}
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=5, metavar=("KIND", "PATH", "INPUTS", "THREADS", "RUNS"), help=argparse.SUPPRESS)
    ap.add_argument("--work", help="a bench/peers.py --work directory (its peers-MODEL-* folders)")
    ap.add_argument("--models", default=None, help="comma-separated (default: every model in --work)")
    ap.add_argument("--variants", default="ptopt-tune,ptopt-int8-tune")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--alternations", type=int, default=7)
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.child:
        kind, path, inputs, threads, runs = args.child
        return child(kind, path, inputs, int(threads), int(runs))
    if not args.work:
        ap.error("--work is required")
    from peers import machine
    allocators = [a for a, lib in ALLOCATORS.items() if lib is None or os.path.exists(lib)]
    missing = [a for a in ALLOCATORS if a not in allocators]
    dirs = {}
    for d in sorted(glob.glob(os.path.join(args.work, "peers-*"))):
        model = os.path.basename(d)[len("peers-"):].rsplit("-", 1)[0]
        dirs[model] = d
    models = args.models.split(",") if args.models else list(dirs)
    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        for model in models:
            for variant in args.variants.split(","):
                if model not in dirs or not os.path.exists(os.path.join(dirs[model], "%s.%s.pt" % (model, variant))):
                    continue
                print("allocator: %s %s, %d thread(s)" % (model, variant, threads), file=sys.stderr, flush=True)
                rows.append(measure(args, dirs[model], model, variant, threads, allocators))
    lines = ["# ptopt's files under glibc's malloc, jemalloc and tcmalloc", "",
             "%s; %d alternations of one child process per allocator and peer, each the median of %d calls "
             "(wall time; 1 thread pinned to one core). `x / glibc`: the file's time under that allocator over "
             "its time under glibc's malloc; `x / peer`: ptopt under that allocator over the peer (default "
             "allocator) at the file's precision; median and range of the per-alternation ratios. "
             "Generated by `bench/allocator.py`." % (machine(), args.alternations, args.runs), ""]
    if missing:
        lines += ["Not installed (skipped): %s." % ", ".join(missing), ""]
    others = [a for a in allocators if a != "glibc"]
    lines += ["| model | file | threads | peer | " + " | ".join("%s / glibc" % a for a in others) + " | " +
              " | ".join("%s / peer" % a for a in allocators) + " |",
              "|---|---|---:|---|" + "---:|" * (len(others) + len(allocators))]
    for r in rows:
        lines.append("| %s | %s | %d | %s | %s | %s |" % (
            r["model"], r["variant"], r["threads"], r["peer"],
            " | ".join(cell(r["vs_glibc"].get(a)) for a in others),
            " | ".join(cell(r["vs_peer"].get(a)) for a in allocators)))
    errs = [(r["model"], r["variant"], r["threads"], k, v) for r in rows for k, v in r["errors"].items()]
    if errs:
        lines += ["", "Runs that failed:", ""] + ["- %s %s, %d thread(s), %s: %s" % e for e in errs]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out + ".md", "w") as fh:
            fh.write(text)
        with open(args.out + ".json", "w") as fh:
            json.dump({"cpu": machine(), "allocators": {a: ALLOCATORS[a] for a in allocators},
                       "alternations": args.alternations, "runs": args.runs, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
