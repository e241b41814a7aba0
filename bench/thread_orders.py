#!/usr/bin/env python3
"""What tuning in every order of --tune-threads buys (tune/thread_orders.h).

For each model (bench/peers.py's specs: torchvision scripted, timm and
transformers traced, random weights, batch 1), `ptopt IN OUT -O3 --tune
--tune-threads 1,2` with a fresh cache tunes once with 1 thread first and
once with 2 first and keeps the first order's file unless the other's is
faster at one count and slower at none. The file the first order alone
would have written (what --tune did before) is rebuilt from the report's
`orders[0].pipeline` (`ptopt IN OUT --passes PIPELINE`, no timing), and the
two files are timed against each other with `ptopt bench --vs` at each count
(interleaved, in one process): ratio kept / first-order file, below 1 is
faster. When --tune kept the first order, both files are the same and no
timing is needed.

    .venv/bin/python bench/thread_orders.py --ptopt build-torch2/tools/ptopt \\
        --models mobilenet_v2,efficientnet_b0,levit_128s,ghostnet_100 --out bench/results/thread_orders_<machine>_<date>.md

Run it under scripts/avx2-cap.sh for the AVX2 view. Nothing else should run
on the machine meanwhile.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers  # noqa: E402  (the model specs and their files)
import torch  # noqa: E402


def run(cmd, **kw):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1"), **kw)
    if proc.returncode != 0:
        raise RuntimeError("exit %d: %s\n%s" % (proc.returncode, " ".join(cmd), proc.stdout[-2000:]))
    return proc.stdout


def bench_ratio(ptopt, a, b, inputs, threads, min_time):
    """`ptopt bench A --vs B` at `threads`: (median ratio B/A, low, high, verdict)."""
    out = run([ptopt, "bench", a, "--vs", b, "--inputs", inputs, "--threads", str(threads), "--min-time",
               str(min_time)])
    m = re.search(r"median ratio ([0-9.]+)x \(95% CI ([0-9.]+)-([0-9.]+),[^\n]*: (B is faster|B is slower|"
                  r"no clear difference)", out)
    if not m:
        raise RuntimeError("no ratio in ptopt bench's output:\n" + out[-1500:])
    return float(m.group(1)), float(m.group(2)), float(m.group(3)), m.group(4).replace("B is ", "")


def machine():
    """The CPU and any cap of this process (scripts/avx2-cap.sh sets them)."""
    caps = ", ".join("%s=%s" % (k, os.environ[k]) for k in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")
                     if os.environ.get(k))
    return peers.machine() + (" capped: " + caps if caps else "")


class Args:
    """What peers.Context reads of its arguments."""
    threads_list = [1, 2]


def one_model(args, spec, work):
    ctx = peers.Context(Args(), spec, work)
    counts = ",".join(str(n) for n in args.threads)
    tuned = os.path.join(work, spec.name + ".tuned.pt")
    report = tuned + ".json"
    t0 = time.perf_counter()
    run([args.ptopt, ctx.original_path, tuned, "-O3", "--tune", "--tune-threads", counts, "--tuning-cache",
         os.path.join(work, "tuning.json"), "--inputs", ctx.inputs_path, "-q", "--report", report])
    seconds = time.perf_counter() - t0
    tuning = json.load(open(report))["tuning"]
    orders = tuning["orders"]
    row = {"model": spec.name, "tune_seconds": round(seconds, 1),
           "orders": [{"threads": o["threads"], "chosen": o["chosen"], "note": o.get("note", ""),
                       "seconds": o["seconds"]} for o in orders],
           "comparison": [d for d in tuning["decisions"] if d["kind"] == "thread-order"]}
    chosen = next(o for o in orders if o["chosen"])
    if chosen is orders[0]:
        row["kept"] = "first"
        return row
    row["kept"] = ",".join(str(n) for n in chosen["threads"])
    first = os.path.join(work, spec.name + ".first.pt")
    run([args.ptopt, ctx.original_path, first, "--passes", orders[0]["pipeline"], "--inputs", ctx.inputs_path,
         "-q", "--no-measure"])
    row["ab"] = {}
    for n in args.threads:
        row["ab"][str(n)] = bench_ratio(args.ptopt, first, tuned, ctx.inputs_path, n, args.min_time)
    return row


def markdown(rows, args):
    lines = ["# Tuning in every order of --tune-threads %s" % ",".join(map(str, args.threads)), "",
             "`bench/thread_orders.py`, %s, PyTorch %s, %s. `ptopt -O3 --tune --tune-threads %s` with a fresh "
             "cache; kept: the order whose file --tune kept (first: the order given). Where another order's "
             "file was kept, it is timed against the file the first order alone makes (`ptopt bench --vs`, "
             "interleaved, %g s per count): below 1 is faster." % (
                 time.strftime("%Y-%m-%d"), torch.__version__, machine(),
                 ",".join(map(str, args.threads)), args.min_time), "",
             "| model | kept | orders (* kept) | the orders' models compared by --tune | %s | tune s |" % " | ".join(
                 "kept / first, %d thread%s" % (n, "" if n == 1 else "s") for n in args.threads),
             "|---|---|---|---|" + "---:|" * len(args.threads) + "---:|"]
    for r in rows:
        if "error" in r:
            lines.append("| %s | error: %s |" % (r["model"], r["error"]) + " |" * (len(args.threads) + 3))
            continue
        orders = "; ".join("%s%s%s" % ("*" if o["chosen"] else "", ",".join(map(str, o["threads"])),
                                        " (%s)" % o["note"] if o["note"] else "") for o in r["orders"])
        comp = "; ".join("%s over %s: %s" % (d["candidates"][1][len("tuned-"):], d["candidates"][0][len("tuned-"):],
                                              ", ".join("%.2fx [%.2f, %.2f] at %d" % (c["ratio"], c["low"], c["high"],
                                                                                    c["threads"])
                                                        for c in d.get("at_threads", [])) or d.get("note", ""))
                         for d in r["comparison"]) or "—"
        cells = []
        for n in args.threads:
            ab = r.get("ab", {}).get(str(n))
            cells.append("%.3fx [%.3f, %.3f] %s" % ab if ab else "same file")
        lines.append("| %s | %s | %s | %s | %s | %.0f |" % (r["model"], r["kept"], orders, comp, " | ".join(cells),
                                                          r["tune_seconds"]))
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ptopt", required=True)
    p.add_argument("--models", default="mobilenet_v2,efficientnet_b0,levit_128s,ghostnet_100")
    p.add_argument("--threads", default="1,2", help="the --tune-threads counts (default 1,2)")
    p.add_argument("--min-time", type=float, default=6.0, help="seconds of ptopt bench per count")
    p.add_argument("--work", default=None)
    p.add_argument("--out", default=None, help="a .md file (its .json beside it)")
    args = p.parse_args()
    args.threads = [int(n) for n in args.threads.split(",")]
    specs = peers.specs()
    unknown = [m for m in args.models.split(",") if m not in specs]
    if unknown:
        p.error("unknown model(s) %s; known: %s" % (", ".join(unknown), ", ".join(sorted(specs))))
    work = args.work or tempfile.mkdtemp(prefix="thread-orders-")
    rows = []
    for name in args.models.split(","):
        print("thread_orders: %s" % name, file=sys.stderr)
        model_work = os.path.join(work, name)
        os.makedirs(model_work, exist_ok=True)
        try:
            rows.append(one_model(args, specs[name], model_work))
        except Exception as e:  # noqa: BLE001 - one model's failure is reported, not fatal
            rows.append({"model": name, "error": str(e).splitlines()[0]})
        print(markdown(rows[-1:], args).splitlines()[-1], file=sys.stderr)
    text = markdown(rows, args)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
        with open(os.path.splitext(args.out)[0] + ".json", "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
