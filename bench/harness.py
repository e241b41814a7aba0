#!/usr/bin/python3
"""The ptopt benchmark suite: one command, one run, all numbers.

    /usr/bin/python3 bench/harness.py [--ptopt build/tools/ptopt] [--quick]
                                      [--update-docs] [--out bench/results]
                                      [--models resnet18,mobilenet_v2] [--worlds native,avx2]
                                      [--no-scaling]

For each benchmark model (torchvision's resnet18, resnet50, mobilenet_v2,
efficientnet_b0 and convnext_tiny at 1x3x224x224, plus the 500-layer
conv-bn-relu stack of the test fixtures) it builds these variants of the
scripted model:

  original   torch.jit.script(model.eval())
  freeze     torch.jit.freeze (Debian's python3-torch)
  ofi        torch.jit.optimize_for_inference (timed in-process; whether its
             saved file reloads is recorded, since often it does not)
  -O1 -O2 -O3  ptopt's presets (run through the CLI with --report; ptopt's
             own never-slower stage is on, as users get it: what it wrote
             instead of OUT, if anything, is recorded)
  tune       -O3 --tune, when this ptopt has --tune (`ptopt --help`), with a
             fresh tuning cache; run a second time with the warm cache to
             report the tuning time of both runs

Worlds (--worlds): `native` is this CPU as it is; `avx2` reruns every model
in a child process with ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2,
so one AVX-512 / AMX machine shows the AVX2 world as well (ptopt's probe
sees the cap: -O3 stays fp32 there). A summary checks the targets of
issue 20: no preset slower than its input, -O3 within 3% of -O2 on AVX2,
the --tune geomeans, and the warm-cache tuning time.

Each model's variants are built once (in a child process per world) and then
timed in --processes fresh processes (default 3; the reported ratios are the
medians over those, since one process to the next moved a model's time by up
to 1.5x here), each of which measures, interleaved (A B C ... A B C ...):
  * latency at 1 thread (CPU time of the process: steadier than wall time on
    a shared machine) and with all threads (wall time), median of --reps
    runs after a warm-up, as ratios to the original;
  * numerics of each variant against the original (max abs error, cosine);
  * whether each saved output reloads in stock PyTorch.

Tool speed: the time of every ptopt stage (load, import, passes, verify,
save; from --report) and its peak memory (the child's max RSS from wait4),
and a scaling run on conv-bn-relu stacks of 100 to 20,000 layers that prints
the cost per layer, by stage and by pass (with one graph walk as the baseline).

Writes OUT/results.md (markdown tables, with the machine described),
OUT/results.json, and OUT/ratios.png (matplotlib from Debian's
python3-matplotlib, else gnuplot, else skipped with a note). --update-docs
(or --update-readme) replaces the block of docs/benchmarks.md between the
`results:begin` and `results:end` markers with results.md, so the docs'
numbers are the harness's.
"""
import argparse
import datetime
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))

PRESETS = ["-O1", "-O2", "-O3"]
# The AVX2 world on an AVX-512 / AMX CPU (docs/pytorch-worlds.md).
# The BLAS libraries too: Debian's OpenBLAS (1.13's BLAS, which runs the 1x1
# convs ATen sends to _slow_conv2d_forward and every linear) picks its
# kernels by CPUID, as MKL (the PyPI wheels' BLAS) does.
AVX2_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "OPENBLAS_CORETYPE": "Haswell",
            "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
# glibc's malloc with its defaults maps every block over 128 KiB afresh and
# raises that threshold only as blocks are freed, so whether a model's
# activations page-fault on every call depended on what the process had run
# before (a model's own time varied 1.6x: mobilenet_v2's original 19 vs 12
# ms). Fixed here for every measuring process and the ptopt runs they start:
# blocks up to 32 MiB come from the heap, which is kept, as in a long-running
# server (or with jemalloc/tcmalloc, which PyTorch's CPU tuning guide advises).
ALLOCATOR_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}


def ptopt_has_tune(ptopt):
    try:
        out = subprocess.run([ptopt, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout.decode()
    except OSError:
        return False
    return "--tune" in out


def benchmark_models(quick, only=None):
    from make_fixtures import make_stack, randomize_bn  # noqa: E402
    torch.manual_seed(0)
    names = ["resnet18", "mobilenet_v2"] if quick else [
        "resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "convnext_tiny"]
    if only:
        names = [n for n in only if n != "deep_stack_500"]
    for name in names:
        model = getattr(torchvision.models, name)(weights=None)
        yield name, randomize_bn(model).eval(), (1, 3, 224, 224)
    if not only or "deep_stack_500" in only:
        yield "deep_stack_500", randomize_bn(make_stack(500)).eval(), (1, 8, 32, 32)


# A small launcher between this process and the child.  On Linux a child's
# ru_maxrss (from wait4) starts from the high-water mark of the memory image it
# was forked from: subprocess forks (vfork) this Python process, which holds
# torch and several models, so every ptopt run would read as this process's own
# peak (~600 MiB).  The launcher is a fresh interpreter without site packages
# (~10 MiB, the floor of the measurement); the ptopt it forks starts from that,
# and wait4 on that one pid gives ptopt's own peak RSS (KiB on Linux).
_LAUNCHER = r"""
import os, resource, sys
out, stack, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
pid = os.fork()
if pid == 0:
    try:
        if stack == "unlimited":
            hard = resource.getrlimit(resource.RLIMIT_STACK)[1]
            resource.setrlimit(resource.RLIMIT_STACK, (hard, hard))
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(out, "w") as fh:
    fh.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def run_child(cmd, unlimited_stack=False, env=None):
    """Runs cmd; returns (exit code, output, peak RSS of that process in MiB).
    unlimited_stack: raise the stack limit to the hard limit (ulimit -s unlimited)."""
    fd, rss_file = tempfile.mkstemp(prefix="ptopt-rss-")
    os.close(fd)
    try:
        proc = subprocess.run([sys.executable, "-S", "-E", "-c", _LAUNCHER, rss_file,
                               "unlimited" if unlimited_stack else "default"] + list(cmd),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        with open(rss_file) as fh:
            text = fh.read().strip()
        rss = int(text) / 1024.0 if text else float("nan")
    finally:
        os.unlink(rss_file)
    return proc.returncode, proc.stdout.decode(errors="replace"), rss


def describe_exit(code):
    import signal
    if code > 128:
        try:
            return "exit %d: killed by %s" % (code, signal.Signals(code - 128).name)
        except ValueError:
            pass
    return "exit %d" % code


def reloads(path):
    try:
        torch.jit.load(path)
        return True
    except Exception:  # noqa: BLE001 - any failure means "does not reload"
        return False


def numerics(fn, reference_out, x):
    with torch.no_grad():
        out = fn(x)
    a, b = out.double().flatten(), reference_out.double().flatten()
    cos = float(torch.dot(a, b) / (a.norm() * b.norm()).clamp_min(1e-300))
    return float((a - b).abs().max()), cos


def median_latency(fns, x, reps, threads, cpu_time):
    torch.set_num_threads(threads)
    clock = time.process_time if cpu_time else time.perf_counter
    times = [[] for _ in fns]
    with torch.no_grad():
        for f in fns:  # warm-up: the profiling executor specializes over the first runs
            for _ in range(3):
                f(x)
        for _ in range(reps):
            for i, f in enumerate(fns):
                start = clock()
                f(x)
                times[i].append(clock() - start)
    return [statistics.median(t) for t in times]


def machine_description():
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    flags = ""
    try:
        with open("/proc/cpuinfo") as fh:
            text = fh.read()
        isa = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile") if " %s" % f in text]
        flags = ", ".join(isa)
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return "%s (%d cores%s), %.0f GiB RAM, %s, PyTorch %s" % (
        cpu, os.cpu_count(), "; " + flags if flags else "", mem, platform.platform(terse=True), torch.__version__)


def pinning_note():
    """Says which CPUs this process (and every ptopt it runs) may use, when not all."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return ""
    if len(allowed) >= (os.cpu_count() or 1):
        return ""
    note = "all processes pinned to CPU %s of %d (taskset)" % (",".join(map(str, allowed)), os.cpu_count())
    note += ("; the all-threads runs put %d threads on those %d CPU(s), so they are oversubscribed and measure "
             "contention, not scaling" % (os.cpu_count(), len(allowed)))
    return note


def variant_args(preset, work, name):
    """ptopt's arguments for a variant: a preset, or "tune" (-O3 --tune with its own cache)."""
    if preset == "tune":
        return ["-O3", "--tune", "--tuning-cache", os.path.join(work, name + ".tuning.json")]
    return [preset]


def optimize_model(ptopt, name, src, preset, work, shape, threads=1):
    out = os.path.join(work, "%s%s.pt" % (name, preset))
    report = out + ".json"
    # A run whose verification fails (exit 3) writes nothing; the verdict is
    # recorded. (--force would also switch off ptopt's never-slower choice,
    # which is part of what a user gets, so it is not passed.)
    cmd = [ptopt, src, out] + variant_args(preset, work, name) + [
        "--overwrite", "-q", "--report", report, "--input-shape", ",".join(map(str, shape)), "--verify-iters", "1"]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads)) if preset == "tune" else None
    code, text, rss = run_child(cmd, env=env)
    if code not in (0, 3) or not os.path.exists(out):
        return None, {"error": text.strip().splitlines()[-1] if text.strip() else describe_exit(code)}
    with open(report) as fh:
        rep = json.load(fh)
    info = {"stage_ms": rep["stage_ms"], "peak_rss_mib": rss, "verified": rep["outcome"], "exit_code": code,
            "measurement": rep.get("measurement"), "precision": rep.get("precision"),
            "target": (rep.get("target") or {}).get("identity")}
    if preset == "tune":
        # The same run again with the warm cache: its tuning time.
        code2, _, _ = run_child(cmd, env=env)
        if code2 in (0, 3):
            with open(report) as fh:
                info["warm_stage_ms"] = json.load(fh)["stage_ms"]
    return out, info


def build_variants(args, name, model, shape, work):
    """Scripts the model into work/NAME.pt and runs ptopt's variants on it; returns
    {"shape", "outputs": {variant: path}, "tool": {variant: info}} (also written to
    work/NAME.variants.json for the timing processes)."""
    src = os.path.join(work, name + ".pt")
    torch.jit.script(model).save(src)
    built = {"model": name, "shape": list(shape), "src": src, "outputs": {}, "tool": {}}
    for preset in args.variants:
        path, info = optimize_model(args.ptopt, name, src, preset, work, shape)
        built["tool"][preset] = info
        if path:
            built["outputs"][preset] = path
    with open(os.path.join(work, name + ".variants.json"), "w") as fh:
        json.dump(built, fh)
    return built


def load_variants(args, built, check_reloads=True):
    """The variants as this process's thread count packs them: ptopt's files
    pack their oneDNN weights when they load, and freeze/optimize_for_inference
    when they run, for the thread count then in effect (oneDNN blocks a packed
    weight per thread count; a pack made at 2 threads and run at 1 reorders
    every weight on every call). Returns {name: module} and {name: reloads}
    (empty without check_reloads: the files are saved and reloaded once)."""
    name, src = built["model"], built["src"]
    work = os.path.dirname(src)
    modules = {"original": torch.jit.load(src).eval()}
    reloads_ok = {"original": True}
    modules["freeze"] = torch.jit.freeze(torch.jit.load(src).eval())
    if check_reloads:
        fpath = os.path.join(work, name + ".freeze.pt")
        modules["freeze"].save(fpath)
        reloads_ok["freeze"] = reloads(fpath)
    try:
        modules["ofi"] = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.load(src).eval()))
        if check_reloads:
            opath = os.path.join(work, name + ".ofi.pt")
            modules["ofi"].save(opath)
            reloads_ok["ofi"] = reloads(opath)
    except Exception as e:  # noqa: BLE001
        print("  optimize_for_inference failed: %s" % str(e).splitlines()[0])
    for preset in args.variants:
        if preset in built["outputs"]:
            path = built["outputs"][preset]
            modules[preset] = torch.jit.load(path).eval()
            if check_reloads:
                reloads_ok[preset] = reloads(path)
    return modules, reloads_ok


def time_variants(args, built):
    """Loads what build_variants wrote (plus freeze and optimize_for_inference, made
    here since the latter's file often does not reload) and times them all,
    interleaved, in this process, each thread count on variants loaded at it;
    returns the row of one timing process."""
    name, shape = built["model"], built["shape"]
    torch.manual_seed(1)
    x = torch.randn(*shape)
    torch.set_num_threads(1)
    modules, reloads_ok = load_variants(args, built)
    with torch.no_grad():
        ref = modules["original"](x)
    names = list(modules)
    fns = [modules[n] for n in names]
    row = {"model": name, "shape": list(shape), "variants": {}, "tool": built["tool"]}
    lat1 = median_latency(fns, x, args.reps, 1, cpu_time=True)
    numerics_of = {n: numerics(modules[n], ref, x) for n in names}
    latn = lat1
    if not args.one_thread_only:
        torch.set_num_threads(os.cpu_count())
        modules, _ = load_variants(args, built, check_reloads=False)
        latn = median_latency([modules[n] for n in names], x, args.reps, os.cpu_count(), cpu_time=False)
    for i, n in enumerate(names):
        err, cos = numerics_of[n]
        row["variants"][n] = {"ms_1t": lat1[i] * 1e3, "ms_nt": latn[i] * 1e3,
                              "ratio_1t": lat1[i] / lat1[0], "ratio_nt": latn[i] / latn[0],
                              "max_abs": err, "cosine": cos, "reloads": reloads_ok[n]}
    print("  " + "  ".join("%s %.3fx" % (n, row["variants"][n]["ratio_1t"]) for n in names), flush=True)
    return row


def combine_processes(rows):
    """One row from the rows of several timing processes of one model: each
    variant's median ratio (and median time) over the processes, with every
    process's ratio kept (ratio_1t_runs) to show the spread."""
    if len(rows) == 1:
        return rows[0]
    out = json.loads(json.dumps(rows[0]))
    for n, v in out["variants"].items():
        runs = [r["variants"][n] for r in rows if n in r["variants"]]
        for key in ("ms_1t", "ms_nt", "ratio_1t", "ratio_nt"):
            v[key] = statistics.median(x[key] for x in runs)
        v["ratio_1t_runs"] = [x["ratio_1t"] for x in runs]
    return out


def scaling(args, work):
    rows = []
    # 20,000 shows the trend past 10,000: a quadratic stage doubles its
    # per-layer cost from 10,000 to 20,000, a memory-bound linear one does not.
    sizes = [100, 1000] if args.quick else [100, 1000, 3000, 10000, 20000]
    for n in sizes:
        src = os.path.join(work, "stack%d.pt" % n)
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "fixtures", "make_fixtures.py"),
                        "--stack", str(n), src], check=True, stdout=subprocess.DEVNULL)
        out = os.path.join(work, "stack%d.o1.pt" % n)
        report = out + ".json"
        cmd = [args.ptopt, src, out, "-O1", "--overwrite", "-q", "--force", "--report", report,
               "--input-shape", "1,8,8,8", "--verify-iters", "1"]
        code, text, rss = run_child(cmd)
        note = None
        if code == 128 + 11:
            # A deep flat graph can overflow the default 8 MiB stack (recursion
            # in LibTorch's interpreter); record that, then measure it anyway.
            note = "SIGSEGV with the default stack; measured with `ulimit -s unlimited`"
            print("  stack %d: %s" % (n, note), flush=True)
            code, text, rss = run_child(cmd, unlimited_stack=True)
        if code == 3:
            print("  stack %d: verification failed (timed anyway): %s" % (n, text.strip()[-300:]))
        elif code != 0:
            why = describe_exit(code)
            print("  stack %d failed (%s): %s" % (n, why, text.strip()[-300:]))
            rows.append({"layers": n, "failed": why + ("; " + note if note else "")})
            continue
        with open(report) as fh:
            rep = json.load(fh)
        stages = rep["stage_ms"]
        pass_ms = {}
        for p in rep.get("passes", []):
            pass_ms[p["pass"]] = pass_ms.get(p["pass"], 0) + p.get("ms", 0)
        total = sum(stages.values())
        rows.append({"layers": n, "stage_ms": stages, "pass_ms": pass_ms, "total_ms": total,
                     "us_per_layer": total * 1e3 / n, "peak_rss_mib": rss, "note": note})
        print("  stack %5d: %.0f ms total, %.0f us/layer (%s), peak %.0f MiB" % (
            n, total, total * 1e3 / n, ", ".join("%s %.0f" % (st, stage_ms(stages, st) * 1e3 / n)
                                                  for st in SCALING_STAGES), rss), flush=True)
    return rows


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def world_rows(results):
    """[(world, rows)]: the worlds measured (older results: native only)."""
    worlds = results.get("worlds")
    return list(worlds.items()) if worlds else [("native", results["models"])]


def targets_markdown(results):
    """The targets of issue 20, checked on these numbers."""
    lines = ["", "**Targets (issue 20), 1 thread**", ""]
    for world, rows in world_rows(results):
        slower = ["%s %s %.3fx" % (r["model"], c, r["variants"][c]["ratio_1t"]) for r in rows
                  for c in results.get("variants", PRESETS) if c in r["variants"] and
                  r["variants"][c]["ratio_1t"] > 1.0]
        lines.append("- %s: %s" % (world, "no preset output is slower than its input" if not slower else
                                   "slower than the input: " + ", ".join(slower)))
        both = [r for r in rows if "-O2" in r["variants"] and "-O3" in r["variants"]]
        if both:
            rel = [r["variants"]["-O3"]["ratio_1t"] / r["variants"]["-O2"]["ratio_1t"] for r in both]
            lines.append("  - -O3 / -O2: %s (geomean %.3f; target on AVX2: within 3%%)" % (
                ", ".join("%s %.3f" % (r["model"], x) for r, x in zip(both, rel)), geomean(rel)))
        tuned = [r["variants"]["tune"] for r in rows if "tune" in r["variants"]]
        if tuned:
            runs = [t.get("ratio_1t_runs", [t["ratio_1t"]]) for t in tuned]
            per_process = [geomean([r[k] for r in runs]) for k in range(min(len(r) for r in runs))]
            lines.append("  - --tune geomean %.3f of the original (targets: <= 0.72 on AVX2, <= 0.42 with native bf16)%s"
                         % (geomean([t["ratio_1t"] for t in tuned]),
                            "; the timing processes' own geomeans: " + ", ".join("%.3f" % g for g in per_process)
                            if len(per_process) > 1 else ""))
        for r in rows:
            info = r["tool"].get("tune") or {}
            cold, warm = (info.get("stage_ms") or {}).get("tune"), (info.get("warm_stage_ms") or {}).get("tune")
            if cold:
                lines.append("  - %s: tuning %.1f s cold, %s warm%s" % (
                    r["model"], cold / 1e3, "%.1f s" % (warm / 1e3) if warm is not None else "n/a",
                    " (%.0f%% of cold; target <= 30%%)" % (100 * warm / cold) if warm is not None else ""))
        for r in rows:
            for c, info in r["tool"].items():
                m = info.get("measurement") or {}
                if m.get("written") not in (None, "output"):
                    lines.append("  - %s %s: ptopt measured OUT at %.3fx of IN and wrote %s instead" % (
                        r["model"], c, m.get("ratio", float("nan")), m["written"]))
    return lines


def render_markdown(results):
    cols = ["freeze", "ofi"] + results.get("variants", PRESETS)
    pinning = results.get("pinning")
    lines = ["_Generated by `bench/harness.py` on %s: %s%s. Latency ratios are the variant's median time over the "
             "original's (lower is faster), the median over %d fresh timing processes per model (glibc malloc with a "
             "32 MiB mmap threshold: bench/harness.py, ALLOCATOR_ENV), in each interleaved, %d runs each after "
             "warm-up; "
             "1 thread is CPU time, all threads is wall time. ptopt's peak RSS is that process's own "
             "(wait4 on its pid, started from a small launcher so it does not inherit the harness's memory)._"
             % (results["date"], results["machine"], "; " + pinning if pinning else "", results.get("processes", 1),
                results["reps"]),
             ""]
    tables = []
    for world, rows in world_rows(results):
        label = "" if world == "native" else ", %s world (%s)" % (
            world, " ".join("%s=%s" % kv for kv in sorted(AVX2_ENV.items())))
        tables.append((world, rows, "ratio_1t", "1 thread" + label))
        if world == "native" and not results.get("one_thread_only"):
            tables.append((world, rows, "ratio_nt", "all %d threads" % results["threads"]))
    for world, rows, key, title in tables:
        lines += ["**Latency vs the original, %s**" % title, "",
                  "| model | original (ms) | " + " | ".join(cols) + " |",
                  "|---|---:|" + "---:|" * len(cols)]
        for row in rows:
            v = row["variants"]
            ms = v["original"]["ms_1t" if key == "ratio_1t" else "ms_nt"]
            cells = ["%.3fx" % v[c][key] if c in v else "n/a" for c in cols]
            lines.append("| %s | %.2f | %s |" % (row["model"], ms, " | ".join(cells)))
        gm = [geomean([r["variants"][c][key] for r in rows if c in r["variants"]]) for c in cols]
        lines.append("| geomean | | %s |" % " | ".join("%.3fx" % g for g in gm))
        lines.append("")
    lines += ["**Numerics (max abs error vs the original / cosine) and whether the saved file reloads**", "",
              "| model | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for row in results["models"]:
        v = row["variants"]
        cells = []
        for c in cols:
            if c not in v:
                cells.append("n/a")
                continue
            cells.append("%.1e / %.5f / %s" % (v[c]["max_abs"], v[c]["cosine"], "reloads" if v[c]["reloads"] else
                                              "**does not reload**"))
        lines.append("| %s | %s |" % (row["model"], " | ".join(cells)))
    lines += ["", "**ptopt's own time (ms) and peak memory per model**", "",
              "| model | preset | load | import | passes | export | verify | measure | save | peak RSS | ptopt's verification | ptopt's OUT/IN (95% CI) |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for row in results["models"]:
        for preset, info in row["tool"].items():
            if "stage_ms" not in info:
                lines.append("| %s | %s | %s | | | | | | | | | |" % (row["model"], preset, info.get("error", "failed")))
                continue
            s = info["stage_ms"]
            verdict = info.get("verified", "")
            if info.get("exit_code") == 3:
                verdict = "**FAILED** (exit 3; file written with --force and timed)"
            m = info.get("measurement") or {}
            speed = ("%.3fx (%.3f-%.3f)%s" % (m["ratio"], m["ci95"][0], m["ci95"][1],
                                              "" if m.get("written") in (None, "output") else
                                              "; wrote %s" % m["written"])) if "ratio" in m else m.get("skipped", "")
            lines.append("| %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f MiB | %s | %s |" % (
                row["model"], preset, s.get("load", 0), s.get("import", 0), s.get("passes", 0), s.get("export", 0),
                s.get("verify", 0) + s.get("reference", 0), s.get("measure", 0), s.get("save", 0),
                info["peak_rss_mib"], verdict, speed))
    lines += targets_markdown(results)
    if results.get("scaling"):
        lines += scaling_markdown(results["scaling"])
    lines.append("")
    return "\n".join(lines)


# "reference" is verification's first half: running the original model on the
# verification inputs (LibTorch's JIT profiles and optimizes it on those runs).
SCALING_STAGES = ["load", "import", "passes", "export", "reference", "verify", "save"]


def stage_ms(stages, name):
    return stages.get(name, 0)


def stage_growth(a, b):
    """(per-layer cost ratio b/a, stage, difference in us per layer), largest ratio first."""
    growth = []
    for st in SCALING_STAGES:
        pa = stage_ms(a["stage_ms"], st) / a["layers"]
        pb = stage_ms(b["stage_ms"], st) / b["layers"]
        if pa > 0:
            growth.append((pb / pa, st, pb * 1e3 - pa * 1e3))
    return sorted(growth, reverse=True)


def scaling_markdown(rows):
    lines = ["", "**Scaling: -O1 on conv-bn-relu stacks, cost per layer by stage (us per layer; flat = linear)**", "",
             "| layers | total (ms) | per layer | " + " | ".join(SCALING_STAGES) + " | peak RSS |",
             "|---:|---:|---:|" + "---:|" * len(SCALING_STAGES) + "---:|"]
    failed = [r for r in rows if "failed" in r]
    rows = [r for r in rows if "failed" not in r]
    for r in rows:
        per = ["%.0f" % (stage_ms(r["stage_ms"], st) * 1e3 / r["layers"]) for st in SCALING_STAGES]
        lines.append("| %d%s | %.0f | %.0f | %s | %.0f MiB |" % (r["layers"], " (*)" if r.get("note") else "",
                                                                r["total_ms"], r["us_per_layer"], " | ".join(per),
                                                                r["peak_rss_mib"]))
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        growth = stage_growth(a, b)
        lines += ["", "From %d to %d layers the cost per layer changes by %s (total %.2fx)." % (
            a["layers"], b["layers"], ", ".join("%s %.2fx" % (st, g) for g, st, _ in growth),
            b["us_per_layer"] / a["us_per_layer"])]
        # The last doubling tells an algorithm's growth from the caches': a
        # quadratic stage doubles its per-layer cost there.
        c, d = rows[-2], rows[-1]
        if d["layers"] >= 2 * c["layers"]:
            last = stage_growth(c, d)
            lines.append("From %d to %d layers (%.0fx the graph): %s (total %.2fx); a quadratic stage would "
                         "grow %.0fx." % (c["layers"], d["layers"], d["layers"] / c["layers"],
                                          ", ".join("%s %.2fx" % (st, g) for g, st, _ in last),
                                          d["us_per_layer"] / c["us_per_layer"], d["layers"] / c["layers"]))
            grown = [st for g, st, dd in last if g > 1.5 and dd > 50]
            lines.append("Not linear: %s (per-layer cost grew more than 1.5x over the last doubling)." %
                         ", ".join(grown) if grown else
                         "No stage grew more than 1.5x per layer over the last doubling.")
    lines += pass_scaling_markdown(rows)
    for r in rows:
        if r.get("note"):
            lines += ["", "(*) %d layers: **%s**." % (r["layers"], r["note"])]
    for r in failed:
        lines += ["", "**%d layers: ptopt failed (%s).**" % (r["layers"], r["failed"])]
    return lines


# The passes of -O1 that do work on the stacks, and the baseline.
SCALING_PASSES = ["canonicalize", "shape-prop", "fold-conv-bn", "drop-zero-bias", "const-fold", "cse", "dce"]
WALK_BASELINE = "remove-dropout"


def pass_scaling_markdown(rows):
    rows = [r for r in rows if r.get("pass_ms")]
    if len(rows) < 2:
        return []
    cols = [WALK_BASELINE] + SCALING_PASSES
    lines = ["", "**Scaling of each -O1 pass (us per layer).** `%s` finds no dropout in these stacks: its time is "
             "one walk over the graph, the least any pass can do, so its growth is the memory hierarchy's (the "
             "graph outgrows the CPU caches), not an algorithm's. A pass that grows like it is linear." %
             WALK_BASELINE, "",
             "| layers | " + " | ".join("%s%s" % (c, " (one walk)" if c == WALK_BASELINE else "") for c in cols) + " |",
             "|---:|" + "---:|" * len(cols)]
    for r in rows:
        lines.append("| %d | %s |" % (r["layers"], " | ".join("%.1f" % (r["pass_ms"].get(c, 0) * 1e3 / r["layers"])
                                                              for c in cols)))
    a, b = rows[0], rows[-1]
    ratio = lambda c: (b["pass_ms"].get(c, 0) / b["layers"]) / max(a["pass_ms"].get(c, 0) / a["layers"], 1e-9)
    lines += ["", "Per-layer growth from %d to %d layers: %s." % (
        a["layers"], b["layers"], ", ".join("%s %.1fx" % (c, ratio(c)) for c in cols))]
    return lines


def plot(results, path):
    cols = ["freeze", "ofi"] + results.get("variants", PRESETS)
    models = [r["model"] for r in results["models"]]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        plt = None
    if plt is not None:
        fig, ax = plt.subplots(figsize=(10, 4.5))
        width = 0.8 / len(cols)
        for i, c in enumerate(cols):
            ys = [r["variants"][c]["ratio_1t"] if c in r["variants"] else 0 for r in results["models"]]
            ax.bar([k + i * width for k in range(len(models))], ys, width, label=c)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks([k + 0.4 - width / 2 for k in range(len(models))])
        ax.set_xticklabels(models, rotation=15)
        ax.set_ylabel("latency / original (1 thread, lower is faster)")
        ax.legend(ncol=len(cols), fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        return "matplotlib"
    if shutil.which("gnuplot"):
        data = path + ".dat"
        with open(data, "w") as fh:
            for r in results["models"]:
                fh.write(r["model"] + " " + " ".join(
                    "%.4f" % (r["variants"][c]["ratio_1t"] if c in r["variants"] else 0) for c in cols) + "\n")
        script = ("set terminal pngcairo size 1000,450; set output '%s'; set style data histograms; "
                  "set style fill solid; set ylabel 'latency / original (1 thread)'; "
                  "plot " % path + ", ".join("'%s' using %d:xtic(1) title '%s'" % (data, i + 2, c)
                                             for i, c in enumerate(cols)))
        subprocess.run(["gnuplot", "-e", script], check=False)
        return "gnuplot"
    return None


DOCS_PAGE = os.path.join(ROOT, "docs", "benchmarks.md")


def update_readme(markdown, png):
    """The results block of docs/benchmarks.md; `png` (a path) linked relative to it."""
    readme = DOCS_PAGE
    png_rel = os.path.relpath(png, os.path.dirname(DOCS_PAGE)) if png else None
    with open(readme) as fh:
        text = fh.read()
    begin, end = "<!-- results:begin -->", "<!-- results:end -->"
    if begin not in text or end not in text:
        raise SystemExit("docs/benchmarks.md lacks the %s ... %s markers" % (begin, end))
    block = begin + "\n" + markdown + ("\n![latency ratios](%s)\n" % png_rel if png_rel else "") + end
    text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
    with open(readme, "w") as fh:
        fh.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ptopt", default=os.path.join(ROOT, "build", "tools", "ptopt"))
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="two models, short scaling run")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--update-docs", "--update-readme", dest="update_readme", action="store_true",
                    help="write the results into docs/benchmarks.md between its results markers")
    ap.add_argument("--from-json", metavar="FILE", help="measure nothing: render FILE (a results.json) again")
    ap.add_argument("--models", help="comma-separated subset, e.g. resnet18,mobilenet_v2 (deep_stack_500 too)")
    ap.add_argument("--worlds", default="native,avx2",
                    help="native (this CPU) and/or avx2 (capped by ATEN_CPU_CAPABILITY/ONEDNN_MAX_CPU_ISA)")
    ap.add_argument("--no-scaling", action="store_true", help="skip the scaling run")
    ap.add_argument("--one-thread-only", action="store_true", help="skip the all-threads timing")
    ap.add_argument("--processes", type=int, default=3,
                    help="fresh timing processes per model and world; ratios are their medians (default 3)")
    ap.add_argument("--world", help=argparse.SUPPRESS)      # child: measure in this world only
    ap.add_argument("--phase", choices=["build", "time"], help=argparse.SUPPRESS)  # child: what to do
    ap.add_argument("--work", help=argparse.SUPPRESS)       # child: the model's work folder
    ap.add_argument("--json-out", help=argparse.SUPPRESS)   # child: where to write its rows
    args = ap.parse_args()
    args.models = args.models.split(",") if args.models else None
    if args.from_json:
        with open(args.from_json) as fh:
            results = json.load(fh)
        markdown = render_markdown(results)
        png = os.path.join(args.out, "ratios.png")
        with open(os.path.join(args.out, "results.md"), "w") as fh:
            fh.write(markdown)
        print(markdown)
        if args.update_readme:
            update_readme(markdown, png if os.path.exists(png) else None)
            print("docs/benchmarks.md updated")
        return
    if not os.path.exists(args.ptopt):
        raise SystemExit("no ptopt at %s: build it first (./scripts/build.sh)" % args.ptopt)
    args.variants = PRESETS + (["tune"] if ptopt_has_tune(args.ptopt) else [])
    if args.world:  # a child in one world: builds the variants of one model, or times them
        if args.phase == "build":
            [(name, model, shape)] = list(benchmark_models(args.quick, args.models))
            build_variants(args, name, model, shape, args.work)
        else:
            with open(os.path.join(args.work, args.models[0] + ".variants.json")) as fh:
                row = time_variants(args, json.load(fh))
            with open(args.json_out, "w") as fh:
                json.dump(row, fh)
        return
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="ptopt-bench-")
    results = {"date": datetime.date.today().isoformat(), "machine": machine_description(), "reps": args.reps,
               "processes": args.processes, "threads": os.cpu_count(), "pinning": pinning_note(), "models": [],
               "scaling": [], "variants": args.variants, "worlds": {}, "one_thread_only": args.one_thread_only}
    try:
        names = [name for name, _, _ in benchmark_models(args.quick, args.models)]
        for world in args.worlds.split(","):
            print("== world: %s" % world, flush=True)
            if world not in ("native", "avx2"):
                raise SystemExit("unknown world %r (native, avx2)" % world)
            # Every model in fresh processes, with glibc's allocator fixed
            # (ALLOCATOR_ENV): what one model leaves behind in a process
            # changed the next model's original by up to 1.7x (mobilenet_v2
            # after resnet50: 19.4 -> 11.2 ms), and so every ratio after it.
            # Even so, one fresh process to the next moved an original by up
            # to 1.5x on this shared 2-core VM (mobilenet_v2: 17 -> 27 ms,
            # its optimized output with it), so the variants are built once
            # and timed in --processes fresh processes: the ratios reported
            # are the medians over those, each process's kept (ratio_1t_runs).
            rows = []
            for name in names:
                print(name, flush=True)
                model_work = os.path.join(work, world, name)
                os.makedirs(model_work)
                base = [sys.executable, os.path.abspath(__file__), "--ptopt", args.ptopt, "--reps", str(args.reps),
                        "--world", world, "--models", name, "--work", model_work]
                if args.quick:
                    base.append("--quick")
                if args.one_thread_only or world != "native":
                    base.append("--one-thread-only")
                env = dict(os.environ, **ALLOCATOR_ENV)
                if world == "avx2":
                    env.update(AVX2_ENV)
                subprocess.run(base + ["--phase", "build"], check=True, env=env)
                timed = []
                for k in range(args.processes):
                    out = os.path.join(model_work, "timing-%d.json" % k)
                    subprocess.run(base + ["--phase", "time", "--json-out", out], check=True, env=env)
                    with open(out) as fh:
                        timed.append(json.load(fh))
                rows.append(combine_processes(timed))
            results["worlds"][world] = rows
        results["models"] = next(iter(results["worlds"].values()), [])
        if not args.no_scaling:
            print("scaling", flush=True)
            results["scaling"] = scaling(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with open(os.path.join(args.out, "results.json"), "w") as fh:
        json.dump(results, fh, indent=1)
    markdown = render_markdown(results)
    with open(os.path.join(args.out, "results.md"), "w") as fh:
        fh.write(markdown)
    png = os.path.join(args.out, "ratios.png")
    how = plot(results, png)
    if not how:
        print("no plot: install python3-matplotlib (or gnuplot) from Debian")
    print(markdown)
    if args.update_readme:
        update_readme(markdown, png if how else None)
        print("docs/benchmarks.md updated")


if __name__ == "__main__":
    main()
