#!/usr/bin/python3
"""Runs torchvision's real models through the ptopt CLI and tabulates the results.

Usage:
    /usr/bin/python3 tests/corpus/run_corpus.py --ptopt build/tools/ptopt --work DIR
        [--subset | --models a,b,...] [--modes script,trace] [--levels O0,O1,O2,O3]
        [--max-params N] [--verify-iters N] [--timeout S]
        [--table RESULTS.md] [--json RESULTS.json] [--list]

For every model (tests/corpus/models.py: every classification and segmentation
builder of the installed torchvision, random weights, eval mode, smallest
first) and mode (scripted with torch.jit.script, traced with torch.jit.trace;
all scripted models run before the traced ones), the model is saved to DIR and
optimized by `ptopt IN OUT <level> --input-shape 1,3,S,S --force --report R`
at each level:

  O0  `--passes ''`: import and export only; ptopt must say "bitwise equal" and
      the reloaded output must equal the original bit for bit.
  O1, O2  fp32 pipelines: ptopt's verification must pass (exit 0), and the
      reloaded output must be within 1e-5 + 1e-4 * max|reference| of the
      original's, per output tensor (a scale-aware check of its own), with
      4-D/5-D outputs in the contiguous format.
  O3  -O2 plus cast{dtype=auto}: on a CPU with bf16 (avx512_bf16 / AMX) it runs
      the compute-heavy ops in bf16 and is judged by the bf16 criterion
      (cosine >= 0.99 and max|a-b| <= 1e-2 + 5e-2 * max|reference|); where the
      cast policy keeps fp32 it is judged like O1.
  O2B, O3B  -O2 / -O3 plus onednn-blocked (conv regions on oneDNN tensors, the
      weights packed when the file loads): judged like O2 / O3; not in the
      default --levels.
  O2P  -O2 plus tuned-kernels{prepacked=*}: every conv outside a region and
      every linear on [N, C], [N, T, C] or [N, H, W, C] runs on oneDNN with its
      weight packed when the file loads (what --tune picks per op): judged
      like O2; not in the default --levels.
  tune  -O3 --tune --tune-budget 20 with a tuning cache per model: judged like
      O3 (bf16 or fp32, as the report says); not in the default --levels.

"Reloaded" means the output file is loaded by stock PyTorch (torch.jit.load in
this process, with no ptopt library) and run on 2 seeded inputs next to the
original file. --force makes ptopt write OUT even when its verification fails,
so that a failure can be classified:

  PASS   exit 0 and the reload check passes
  PASS*  exit 3 under the fp32 elementwise criterion (rtol 1e-4, atol 1e-5),
         while the error is within 1e-4 of the output's scale: the known false
         failure of deep nets with large outputs (issue 18, part 2), not a bug
  FAIL   exit 3 otherwise, or the reload check fails
  ERROR  any other exit code (the message is shown), or a timeout
  SKIP   not scriptable/traceable by this torchvision, or over --max-params

The exit status is 1 when any run is FAIL or ERROR, 0 otherwise. The table
(markdown) and the JSON are rewritten after every model, so a long run can be
watched and an interrupted run still has its results.
"""

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models as corpus  # noqa: E402

# The documented CI subset (ctest corpus.subset): one model of each family of
# graph shapes that ptopt's passes treat differently, small enough to run
# every level of both modes in a few minutes on 2 cores: residual convs + BN
# (resnet18), depthwise convs, hardswish and squeeze-excitation
# (mobilenet_v3_small), channel shuffle through view/transpose
# (shufflenet_v2_x0_5), a dict output with upsampling (lraspp), and attention
# (vit_b_32: nn.MultiheadAttention's fast path returns an undefined tensor,
# the cause of the vit_b_16 shape-prop failure).
SUBSET = [
    ("resnet18", "script"), ("resnet18", "trace"),
    ("mobilenet_v3_small", "script"),
    ("shufflenet_v2_x0_5", "trace"),
    ("lraspp_mobilenet_v3_large", "script"),
    ("vit_b_32", "script"),
]

LEVELS = {"O0": ["--passes", ""], "O1": ["-O1"], "O2": ["-O2"], "O3": ["-O3"],
          # conv regions on oneDNN tensors, weights packed at load (fp32 and bf16)
          "O2B": ["--passes", "-O2,onednn-blocked"], "O3B": ["--passes", "-O3,onednn-blocked"],
          # every conv and linear prepacked (fp32)
          "O2P": ["--passes", "-O2,tuned-kernels{prepacked=*}"],
          # -O3 --tune with a short budget and a cache per model (run_level adds it)
          "tune": ["-O3", "--tune", "--tune-budget", "20"]}
FP32 = (1e-4, 1e-5)
BF16 = (5e-2, 1e-2, 0.99)
RELOAD_SEEDS = 2


def cpu_has_bf16():
    try:
        with open("/proc/cpuinfo") as fh:
            flags = fh.read()
    except OSError:
        return False
    return bool(re.search(r"\b(avx512_bf16|amx_bf16)\b", flags))


# ---------------------------------------------------------------------------
# Output comparison (the reload check)

def flatten(x, path, out):
    """(path, leaf) pairs of a model output: tensors, tuples, lists, dicts."""
    if isinstance(x, torch.Tensor):
        out.append((path, x))
    elif isinstance(x, (tuple, list)):
        out.append((path, "%s[%d]" % (type(x).__name__, len(x))))
        for i, e in enumerate(x):
            flatten(e, "%s[%d]" % (path, i), out)
    elif isinstance(x, dict):
        out.append((path, "dict%r" % (sorted(map(str, x.keys())),)))
        for k in x:
            flatten(x[k], "%s[%r]" % (path, k), out)
    else:
        out.append((path, repr(x)))
    return out


def compare_leaf(path, ref, got, criterion):
    """None when `got` matches `ref` under criterion 'bitwise' | 'fp32' | 'bf16'."""
    if ref.dtype != got.dtype or ref.shape != got.shape:
        return "%s: %s%s vs %s%s" % (path, ref.dtype, list(ref.shape), got.dtype, list(got.shape))
    if torch.equal(ref, got):
        return None
    if criterion == "bitwise" or not ref.is_floating_point():
        nan_r, nan_g = torch.isnan(ref), torch.isnan(got)
        if ref.is_floating_point() and torch.equal(nan_r, nan_g) and torch.equal(ref[~nan_r], got[~nan_g]):
            return None
        return "%s: not bitwise equal (max abs diff %.3g)" % (path, (ref.double() - got.double()).abs().max().item())
    r, g = ref.double().flatten(), got.double().flatten()
    if not torch.isfinite(g).eq(torch.isfinite(r)).all():
        return "%s: NaN/Inf where the reference has none (or the reverse)" % path
    finite = torch.isfinite(r)
    r, g = r[finite], g[finite]
    if r.numel() == 0:
        return None
    max_abs = (r - g).abs().max().item()
    scale = r.abs().max().item()
    if criterion == "fp32":
        allowed = FP32[1] + FP32[0] * scale
        if max_abs <= allowed:
            return None
        return "%s: max abs diff %.3g > %.3g (1e-5 + 1e-4 * max|ref| %.3g)" % (path, max_abs, allowed, scale)
    rtol, atol, min_cos = BF16
    allowed = atol + rtol * scale
    nr, ng = r.norm().item(), g.norm().item()
    cos = 1.0 if nr == 0 and ng == 0 else (0.0 if nr == 0 or ng == 0 else (r @ g).item() / (nr * ng))
    if max_abs <= allowed and cos >= min_cos:
        return None
    return "%s: cosine %.5f (min %g), max abs diff %.3g (allowed %.3g)" % (path, cos, min_cos, max_abs, allowed)


def compare_outputs(ref, got, criterion, want_contiguous):
    a, b = flatten(ref, "out", []), flatten(got, "out", [])
    if [p for p, _ in a] != [p for p, _ in b]:
        return "output structure differs: %s vs %s" % ([p for p, _ in a], [p for p, _ in b])
    for (path, x), (_, y) in zip(a, b):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return "%s: %r vs %r" % (path, x, y)
        if not isinstance(x, torch.Tensor):
            if x != y:
                return "%s: %s vs %s" % (path, x, y)
            continue
        why = compare_leaf(path, x, y, criterion)
        if why:
            return why
        if want_contiguous and y.dim() in (4, 5) and not y.is_contiguous():
            return "%s: strides %s are not contiguous" % (path, list(y.stride()))
    return None


def reference_outputs(path, shape):
    model = torch.jit.load(path, map_location="cpu").eval()
    outs = []
    for s in range(RELOAD_SEEDS):
        torch.manual_seed(1234 + s)
        x = torch.randn(shape)
        with torch.no_grad():
            outs.append((x, model(x.clone())))
    return outs


def reload_check(out_path, refs, criterion, want_contiguous):
    try:
        model = torch.jit.load(out_path, map_location="cpu").eval()
    except Exception as e:  # noqa: BLE001
        return "stock PyTorch cannot load the output: %s" % first_line(str(e))
    for s, (x, ref) in enumerate(refs):
        try:
            with torch.no_grad():
                got = model(x.clone())
        except Exception as e:  # noqa: BLE001
            return "the reloaded output fails to run: %s" % torch_error(str(e))
        why = compare_outputs(ref, got, criterion, want_contiguous)
        if why:
            return "reload check, seed %d: %s" % (s, why)
    return None


# ---------------------------------------------------------------------------
# One ptopt run

def first_line(text):
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def torch_error(text):
    """The message of a TorchScript error: its last 'XxxError: ...' line
    (the first line is only 'The following operation failed ...')."""
    found = [l.strip() for l in text.splitlines() if re.match(r"\s*\w*(Error|Exception): ", l)]
    return found[-1][:300] if found else first_line(text)


def error_line(text):
    """The line of ptopt's output that says what went wrong."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    for pat in (r"^(error|ptopt: error)", r"failed", r"^FAILED"):
        for l in lines:
            if re.search(pat, l, re.IGNORECASE) and not l.startswith("PASSED"):
                return l[:400]
    return lines[-1][:400] if lines else ""


def report_criteria(report):
    """The criteria ptopt judged the outputs by ({'elementwise'}, {'global'})."""
    found = set()
    for it in report.get("verification", {}).get("iterations", []):
        for o in it.get("outputs", []):
            if "criterion" in o:
                found.add(o["criterion"])
    return found


def run_level(args, level, in_path, shape, refs, work):
    out_path = os.path.join(work, "out.%s.pt" % level)
    rep_path = os.path.join(work, "report.%s.json" % level)
    for p in (out_path, rep_path):
        if os.path.exists(p):
            os.remove(p)
    extra = ["--tuning-cache", os.path.join(work, "tuning.json")] if level == "tune" else []
    cmd = [args.ptopt, in_path, out_path] + LEVELS[level] + extra + [
        "--input-shape", ",".join(map(str, shape)), "--force", "--overwrite", "-q",
        "--verify-iters", str(args.verify_iters), "--report", rep_path]
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=args.timeout,
                              universal_newlines=True)
        rc, text = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired:
        return {"status": "ERROR", "rc": None, "seconds": round(time.time() - t0, 1),
                "detail": "timed out after %d s" % args.timeout}
    seconds = round(time.time() - t0, 1)
    result = {"rc": rc, "seconds": seconds}
    report = {}
    if os.path.exists(rep_path):
        try:
            with open(rep_path) as fh:
                report = json.load(fh)
        except ValueError:
            pass
    criteria = report_criteria(report)
    lowp = "global" in criteria
    if level in ("O3", "O3B", "tune"):
        result["precision"] = "bf16" if lowp else "fp32"
    if rc not in (0, 3):
        result.update(status="ERROR", detail="exit %d: %s" % (rc, error_line(text)))
        return result
    if not os.path.exists(out_path):
        result.update(status="FAIL", detail="exit %d but no output written (--force)" % rc)
        return result
    criterion = "bitwise" if level == "O0" else ("bf16" if lowp else "fp32")
    why = reload_check(out_path, refs, criterion, want_contiguous=level != "O0" and level != "O1")
    if level == "O0" and rc == 0 and not report.get("verification", {}).get("bitwise_equal", False):
        why = why or "ptopt's verification did not find the outputs bitwise equal"
    if rc == 0:
        result.update(status="FAIL", detail=why) if why else result.update(status="PASS")
    elif why is None and criterion == "fp32" and criteria == {"elementwise"}:
        # ptopt refused it elementwise; the output is within 1e-4 of its scale.
        scale = max((t.abs().max().item() for _, out in refs for _, t in flatten(out, "out", [])
                     if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()), default=0.0)
        result.update(status="PASS*", detail="ptopt's elementwise check: %s; max|reference| %.3g"
                      % (verify_summary(report) or error_line(text), scale))
    else:
        result.update(status="FAIL", detail="exit 3: %s%s" % (verify_summary(report) or error_line(text),
                                                               "; " + why if why else ""))
    os.remove(out_path)
    return result


def verify_summary(report):
    """The first failing output of ptopt's report, in one line."""
    for it in report.get("verification", {}).get("iterations", []):
        if it.get("run_error"):
            return "the optimized model fails to run: " + torch_error(it["run_error"])
        for o in it.get("outputs", []):
            if not o.get("passed", True):
                if "problem" in o:
                    return "%s: %s" % (o["output"], o["problem"])
                return "%s: max abs %.3g, max rel %.3g, cosine %.6f (%s)" % (
                    o["output"], o.get("max_abs", 0), o.get("max_rel", 0), o.get("cosine", 0),
                    o.get("criterion", ""))
    return ""


# ---------------------------------------------------------------------------
# The table

def fmt_cell(r):
    if r is None:
        return ""
    s = r["status"]
    if r.get("note"):
        s += "<sup>%s</sup>" % r["note"]
    if r.get("precision") == "bf16":
        s += " bf16"
    if r.get("seconds") is not None:
        s += " %.0fs" % r["seconds"]
    return s


def summary_table(args, rows):
    """Per mode and level: how many models got each status."""
    lines = ["| mode | models | " + " | ".join("-" + l for l in args.levels) + " |",
             "|---|---:|" + "---|" * len(args.levels)]
    for mode in [m for m in ("script", "trace") if any(r["mode"] == m for r in rows)]:
        mine = [r for r in rows if r["mode"] == mode]
        cells = []
        for l in args.levels:
            c = {}
            for r in mine:
                st = r["levels"].get(l, {}).get("status") if r["levels"] else "SKIP"
                if st:
                    c[st] = c.get(st, 0) + 1
            cells.append(", ".join("%d %s" % (n, st) for st, n in sorted(c.items())))
        lines.append("| %s | %d | %s |" % (mode, len(mine), " | ".join(cells)))
    return lines + [""]


def write_outputs(args, rows, meta):
    notes = []
    for row in rows:
        for lvl in args.levels:
            r = row["levels"].get(lvl)
            if r and r.get("detail") and r["status"] not in ("PASS", "PASS*"):  # PASS*: see the legend
                notes.append("%s %s %s: %s" % (row["model"], row["mode"], lvl, r["detail"]))
                r["note"] = str(len(notes))
        if row.get("detail"):
            notes.append("%s %s: %s" % (row["model"], row["mode"], row["detail"]))
            row["note"] = str(len(notes))
    counts = {}
    for row in rows:
        for r in row["levels"].values():
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        if not row["levels"]:
            counts["SKIP"] = counts.get("SKIP", 0) + 1
    lines = ["# ptopt real-model corpus", "",
             "torchvision %s, PyTorch %s, %s, %s; bf16 on this CPU: %s. Random weights, eval mode, batch 1."
             % (meta["torchvision"], meta["torch"], meta["cpu"], meta["date"], "yes" if meta["bf16"] else "no"),
             "Run: `%s`" % meta["command"], "",
             "Totals: " + ", ".join("%s %d" % kv for kv in sorted(counts.items())), ""] + summary_table(args, rows) + [
             "| model | mode | input | params | build s | " + " | ".join("-" + l for l in args.levels) + " |",
             "|---|---|---|---:|---:|" + "---|" * len(args.levels)]
    for row in rows:
        cells = [fmt_cell(row["levels"].get(l)) for l in args.levels]
        if not row["levels"]:
            cells = ["SKIP<sup>%s</sup>" % row.get("note", "")] + [""] * (len(args.levels) - 1)
        lines.append("| %s | %s | %s | %.1fM | %s | %s |" % (
            row["model"], row["mode"], row["input"], row["params"] / 1e6,
            "" if row.get("build_seconds") is None else "%.0f" % row["build_seconds"], " | ".join(cells)))
    lines += ["", "PASS* = ptopt's elementwise fp32 check (rtol 1e-4, atol 1e-5) refused a result whose error is "
              "within 1e-4 of the output's scale (the known false failure of issue 18, part 2); the reload "
              "check passed. Times are ptopt's wall time per run (load, passes, export, verification, save).", ""]
    if notes:
        lines += ["Notes:", ""] + ["%d. %s" % (i + 1, n.replace("|", "\\|")) for i, n in enumerate(notes)] + [""]
    if args.table:
        tmp = args.table + ".tmp"
        with open(tmp, "w") as fh:
            fh.write("\n".join(lines))
        os.replace(tmp, args.table)
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as fh:
            json.dump({"meta": meta, "rows": rows}, fh, indent=1)
        os.replace(tmp, args.json)
    return counts


# ---------------------------------------------------------------------------

def select(args):
    entries = corpus.all_entries()
    by_name = {e.name: e for e in entries}
    if args.subset:
        pairs = SUBSET
    else:
        names = [n.strip() for n in args.models.split(",") if n.strip()] if args.models else [e.name for e in entries]
        unknown = [n for n in names if n not in by_name]
        if unknown:
            sys.exit("unknown model(s): %s (see --list)" % ", ".join(unknown))
        order = {e.name: i for i, e in enumerate(entries)}
        names.sort(key=order.get)
        pairs = [(n, m) for m in args.modes for n in names]
    missing = [n for n, _ in pairs if n not in by_name]
    if missing:
        sys.exit("the subset names models this torchvision lacks: %s" % ", ".join(missing))
    return [(by_name[n], m) for n, m in pairs if m in args.modes]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ptopt", help="the ptopt executable")
    ap.add_argument("--work", help="scratch folder for the models (emptied per model)")
    ap.add_argument("--subset", action="store_true", help="the documented CI subset")
    ap.add_argument("--models", help="comma-separated model names (default: all)")
    ap.add_argument("--modes", default="script,trace")
    ap.add_argument("--levels", default="O0,O1,O2,O3")
    ap.add_argument("--max-params", type=float, default=None, help="skip models with more parameters")
    ap.add_argument("--verify-iters", type=int, default=1, help="ptopt's seeded input sets (default 1)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per ptopt run")
    ap.add_argument("--table", help="write the markdown table here")
    ap.add_argument("--json", help="write the results as JSON here")
    ap.add_argument("--list", action="store_true", help="list the corpus and exit")
    ap.add_argument("--render", help="comma-separated JSON files of earlier runs: write their rows as one "
                    "table (--table) and exit")
    args = ap.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    args.levels = [l.strip() for l in args.levels.split(",") if l.strip()]
    bad = [l for l in args.levels if l not in LEVELS] + [m for m in args.modes if m not in ("script", "trace")]
    if bad:
        sys.exit("unknown level/mode: %s" % ", ".join(bad))

    if args.render:
        rows, meta, commands = [], None, []
        for path in args.render.split(","):
            with open(path) as fh:
                saved = json.load(fh)
            rows += saved["rows"]
            meta = meta or saved["meta"]
            commands.append(saved["meta"]["command"])
        meta["command"] = "`, then `".join(commands)
        # A model run again (e.g. one skipped by --max-params, then run on its
        # own) keeps its last row that has results, in the first row's place.
        merged = {}
        for row in rows:
            key = (row["model"], row["mode"])
            if key not in merged or row["levels"]:
                merged[key] = row
        order = {"script": 0, "trace": 1}
        rows = sorted(merged.values(), key=lambda r: (order.get(r["mode"], 2), r["params"], r["model"]))
        for row in rows:
            for r in row["levels"].values():
                r.pop("note", None)
            row.pop("note", None)
        write_outputs(args, rows, meta)
        return 0
    if args.list:
        for e in corpus.all_entries():
            print("%-32s %-14s %s %6.1fM %s" % (e.name, e.task, "x".join(map(str, e.input_shape)),
                                               e.num_params / 1e6, e.describe_kwargs()))
        return 0
    if not args.ptopt or not args.work:
        ap.error("--ptopt and --work are required")
    args.ptopt = os.path.abspath(args.ptopt)
    torch.set_num_threads(max(1, min(torch.get_num_threads(), os.cpu_count() or 1)))

    meta = {"torchvision": torchvision.__version__, "torch": torch.__version__,
            "cpu": platform.processor() or platform.machine(), "bf16": cpu_has_bf16(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "command": " ".join(["run_corpus.py"] + (argv if argv is not None else sys.argv[1:]))}
    try:
        with open("/proc/cpuinfo") as fh:
            m = re.search(r"model name\s*:\s*(.*)", fh.read())
            if m:
                meta["cpu"] = m.group(1).strip()
    except OSError:
        pass

    rows = []
    for entry, mode in select(args):
        row = {"model": entry.name, "mode": mode, "task": entry.task, "params": entry.num_params,
               "input": "x".join(map(str, entry.input_shape)) + (
                   " (%s)" % entry.describe_kwargs() if entry.describe_kwargs() else ""), "levels": {}}
        rows.append(row)
        if args.max_params is not None and entry.num_params > args.max_params:
            row["detail"] = "skipped: %.0fM parameters, over --max-params" % (entry.num_params / 1e6)
            write_outputs(args, rows, meta)
            continue
        work = os.path.join(args.work, "%s.%s" % (entry.name, mode))
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        in_path = os.path.join(work, "model.pt")
        print("== %s %s %s" % (entry.name, mode, row["input"]), flush=True)
        t0 = time.time()
        try:
            model = entry.build()
            sm = corpus.script(model) if mode == "script" else corpus.trace(model, entry.input_shape)
            sm.save(in_path)
            del sm, model
            refs = reference_outputs(in_path, entry.input_shape)
        except Exception as e:  # noqa: BLE001
            row["detail"] = "skipped: torch.jit.%s fails: %s" % (mode, first_line(str(e)))
            print("   " + row["detail"], flush=True)
            shutil.rmtree(work, ignore_errors=True)
            write_outputs(args, rows, meta)
            continue
        row["build_seconds"] = round(time.time() - t0, 1)
        for level in args.levels:
            r = run_level(args, level, in_path, entry.input_shape, refs, work)
            row["levels"][level] = r
            print("   -%s %s %ss%s" % (level, r["status"], r.get("seconds"),
                                     ": " + r["detail"] if r.get("detail") else ""), flush=True)
            write_outputs(args, rows, meta)
        shutil.rmtree(work, ignore_errors=True)
        write_outputs(args, rows, meta)

    counts = write_outputs(args, rows, meta)
    print("totals: " + ", ".join("%s %d" % kv for kv in sorted(counts.items())))
    return 1 if counts.get("FAIL") or counts.get("ERROR") else 0


if __name__ == "__main__":
    sys.exit(main())
