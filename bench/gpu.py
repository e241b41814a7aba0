#!/usr/bin/env python3
"""ptopt on a CUDA GPU beside torch.compile and freeze + optimize_for_inference
(issue 36), in one run that fits a short lease of a GPU machine.

    python3 bench/gpu.py --ptopt BUILD/tools/ptopt --work DIR --out PREFIX
        [--models resnet50,...] [--batches 1,64] [--rounds 15]
        [--deadline EPOCH_SECONDS] [--tune-budget 6]
    python3 bench/gpu.py --warm --work DIR [--models ...] [--batches ...]
    python3 bench/gpu.py --make-only ...   then later   --reuse ...
        (the -O2/-O3 files made while the tests run; tuning and timing in a
        second, quiet call that keeps them)

Models: torchvision's resnet50, mobilenet_v2, efficientnet_b0, convnext_tiny
and vit_b_16, random weights with randomized BatchNorm statistics (as
bench/peers.py and the fixtures), scripted, 3x224x224 images.

Variants, each timed at every batch size:
  original     the TorchScript file (torch.jit.load), fp32: the denominator
  freeze       torch.jit.freeze of it
  ofi          torch.jit.optimize_for_inference of the frozen module
  ptopt-O2     `ptopt IN OUT -O2 --device cuda` (channels-last, cuDNN fusion)
  ptopt-O3     `-O3 --device cuda`: fp16 on the GPU, sensitive ops in fp32
  ptopt-tune   `-O3 --tune --device cuda`, tuned at that batch size (a file
               per batch; where the lease left no time for one, the other
               batch's file, and the table says so)
  compile      torch.compile(eager, dynamic=False), Inductor, freezing=True
  compile-max  the same with mode="max-autotune" (CUDA graphs included)
Every ptopt file is verified by ptopt on the GPU (its report's verdict is in
the JSON) and loaded here by stock PyTorch.

Timing: PyTorch's defaults for precision (cuDNN may use TF32 for convs;
matmuls in full fp32) and cuDNN's benchmark mode on for every variant. Per
model and batch, each variant is warmed up, then the variants run in a
shuffled order per round; a sample is `iters` back-to-back calls between two
CUDA events (the GPU's time, including any gaps the CPU leaves). The ratio
of a round is the variant's time over the original's in that round; the table
gives the median ratio and a 95% interval (order statistics).

Numerics: each variant's outputs against the original's on the same GPU
input (max abs error, cosine).

The lease is short, so the run keeps a deadline: `--warm` compiles the
torch.compile variants in the background earlier (Inductor's on-disk caches
then make the timed process's compiles quick) and marks each one done; the
timed run compiles only what was warmed, or what the time left allows, and
every stage that would end past --deadline is skipped with the reason in the
table. Writes PREFIX.md and PREFIX.json after every model.
"""
import argparse
import copy
import json
import os
import random
import statistics
import subprocess
import sys
import time
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from peers import flat_outputs, median_ci, numerics, torchvision_model, first_line  # noqa: E402

MODELS = ["resnet50", "mobilenet_v2", "efficientnet_b0", "convnext_tiny", "vit_b_16"]
VARIANTS = ["original", "freeze", "ofi", "ptopt-O2", "ptopt-O3", "ptopt-tune", "compile", "compile-max"]
PTOPT_LEVELS = {"ptopt-O2": ["-O2"], "ptopt-O3": ["-O3"]}
COMPILE_MODES = {"compile": None, "compile-max": "max-autotune"}


def log(msg):
    print("[gpu.py %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


class Clock:
    """Seconds left before the lease's deadline."""

    def __init__(self, deadline):
        self.deadline = deadline or float("inf")

    def left(self):
        return self.deadline - time.time()

    def allows(self, seconds):
        return self.left() > seconds


# ---------------------------------------------------------------- models ---

def eager_model(name):
    torch.manual_seed(0)  # the same weights in the warm-up and the timed process
    return torchvision_model(name)


def original_path(work, name):
    return os.path.join(work, name + ".pt")


def make_originals(work, names):
    for name in names:
        path = original_path(work, name)
        if not os.path.exists(path):
            # Whole or not at all: the warm-up and the timed run may both make it.
            partial = "%s.%d.partial" % (path, os.getpid())
            torch.jit.script(eager_model(name)).save(partial)
            os.replace(partial, path)
            log("scripted %s" % name)


def image(batch, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(batch, 3, 224, 224, generator=gen)


# ------------------------------------------------------- torch.compile ---

def compile_marker(work, name, variant, batch):
    return os.path.join(work, "%s.%s.b%d.compiled" % (name, variant, batch))


def compiled_runner(name, variant, batch):
    """torch.compile of a fresh eager copy, compiled now for this batch."""
    import torch._inductor.config as inductor_config
    inductor_config.freezing = True
    model = eager_model(name).cuda()
    compiled = torch.compile(model, mode=COMPILE_MODES[variant], dynamic=False)
    x = image(batch).cuda()
    run = torch_runner(compiled, cudagraphs=variant == "compile-max")
    with torch.no_grad():
        run((x,))
    torch.cuda.synchronize()
    return run


def warm(args):
    """Compiles every torch.compile variant once, filling Inductor's caches;
    marks each one done. Default mode first (all models), then max-autotune."""
    make_originals(args.work, args.models)
    torch.backends.cudnn.benchmark = True
    for variant in ("compile", "compile-max"):
        for name in args.models:
            for batch in sorted(args.batches, reverse=True):  # batch 64 first: the targets
                marker = compile_marker(args.work, name, variant, batch)
                if os.path.exists(marker):
                    continue
                t0 = time.time()
                try:
                    compiled_runner(name, variant, batch)
                    with open(marker, "w") as fh:
                        fh.write("%.1f\n" % (time.time() - t0))
                    log("warm: %s %s batch %d compiled in %.0f s" % (name, variant, batch, time.time() - t0))
                except Exception as e:  # noqa: BLE001 - reported by the timed run, which compiles again
                    log("warm: %s %s batch %d failed: %s: %s" % (name, variant, batch, type(e).__name__,
                                                                 first_line(e)))
                torch._dynamo.reset()
                torch.cuda.empty_cache()


# ---------------------------------------------------------------- ptopt ---

def ptopt_file(work, name, variant, batch=None):
    suffix = variant if batch is None else "%s.b%d" % (variant, batch)
    return os.path.join(work, "%s.%s.pt" % (name, suffix))


def ptopt_command(args, name, variant, batch):
    out = ptopt_file(args.work, name, variant, batch if variant == "ptopt-tune" else None)
    cmd = [args.ptopt, original_path(args.work, name), out, "--device", "cuda", "--overwrite",
           "--input-shape", "%d,3,224,224" % batch, "--report", out + ".json"]
    if variant == "ptopt-tune":
        cmd += ["-O3", "--tune", "--tune-budget", str(args.tune_budget),
                "--tuning-cache", os.path.join(args.work, "tuning.json")]
    else:
        # Made several at once (verification only): their never-slower
        # stages would time each other.
        cmd += PTOPT_LEVELS[variant] + ["--no-measure"]
    return out, cmd


def make_ptopt_files(args, clock):
    """-O2 and -O3 for every model at once, then --tune per model and batch,
    one at a time (it times). Returns {(name, variant, batch|None): info}."""
    made = {}

    def finish(key, out, proc, log_path, t0):
        if proc is None:  # made by an earlier call of this script (--reuse)
            info = {"seconds": None, "exit": 0, "log": os.path.basename(log_path), "reused": True}
        else:
            info = {"seconds": round(time.time() - t0, 1), "exit": proc.returncode, "log": os.path.basename(log_path)}
        try:
            with open(out + ".json") as fh:
                rep = json.load(fh)
            ver = rep.get("verification") or {}
            info.update(outcome=rep.get("outcome"), precision=rep.get("precision"),
                        verification="passed on %s" % ver.get("device") if ver.get("passed") else
                        "NOT passed: %s" % json.dumps(ver)[:300],
                        measurement=rep.get("measurement"), tuning=rep.get("tuning"))
        except (OSError, ValueError):
            pass
        if (proc is not None and proc.returncode != 0) or not os.path.exists(out):
            with open(log_path) as fh:
                lines = [l for l in fh.read().splitlines() if l.strip()]
            info["error"] = "ptopt exit %s: %s" % (info["exit"], " | ".join(lines[-3:])[:300])
        made[key] = info
        log("ptopt %s %s%s: %s" % (key[0], key[1], "" if key[2] is None else " batch %d" % key[2],
                                   "made earlier" if proc is None else
                                   "exit %s in %.0f s" % (proc.returncode, info["seconds"])))

    def reusable(out, log_path):
        return args.reuse and os.path.exists(out + ".json") and os.path.exists(log_path)

    running = []
    for name in args.models:
        for variant in PTOPT_LEVELS:
            out, cmd = ptopt_command(args, name, variant, 1)
            log_path = out + ".log"
            if reusable(out, log_path):
                finish((name, variant, None), out, None, log_path, time.time())
                continue
            running.append(((name, variant, None), out, subprocess.Popen(
                cmd, stdout=open(log_path, "w"), stderr=subprocess.STDOUT), log_path, time.time()))
            while len(running) >= args.parallel:
                running = wait_one(running, finish)
    while running:
        running = wait_one(running, finish)
    if args.make_only:
        return made
    if args.stop_warm_file:
        stop_warm(args.stop_warm_file)
    # --tune per batch size, largest first (the batch-64 targets), one at a time.
    for batch in sorted(args.batches, reverse=True):
        for name in args.models:
            key = (name, "ptopt-tune", batch)
            # Each run: the budget, loading, verification and the final
            # checks; the timing stage keeps its share of what is left.
            if not clock.allows(args.tune_budget + 30 + args.reserve + args.timing_share * len(args.models) *
                                len(args.batches)):
                made[key] = {"error": "not run: the lease's time was kept for the timing"}
                continue
            out, cmd = ptopt_command(args, name, "ptopt-tune", batch)
            log_path = out + ".log"
            if reusable(out, log_path):
                finish(key, out, None, log_path, time.time())
                continue
            t0 = time.time()
            proc = subprocess.Popen(cmd, stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
            proc.wait()
            finish(key, out, proc, log_path, t0)
    return made


def wait_one(running, finish):
    while True:
        for i, (key, out, proc, log_path, t0) in enumerate(running):
            if proc.poll() is not None:
                finish(key, out, proc, log_path, t0)
                return running[:i] + running[i + 1:]
        time.sleep(0.2)


def stop_warm(pid_file):
    """Stops the background compiles before anything is timed."""
    try:
        with open(pid_file) as fh:
            pid = int(fh.read().strip())
        os.kill(pid, 15)
        log("stopped the torch.compile warm-up (pid %d)" % pid)
    except (OSError, ValueError):
        pass


# ---------------------------------------------------------------- timing ---

def torch_runner(module, cudagraphs=False):
    def run(inputs):
        if cudagraphs:
            torch.compiler.cudagraph_mark_step_begin()
        with torch.no_grad():
            return module(*inputs)
    return run


def build_runner(args, name, variant, batch, made, clock, notes):
    if variant in ("original", "freeze", "ofi"):
        module = torch.jit.load(original_path(args.work, name), map_location="cuda").eval()
        if variant == "original":
            return torch_runner(module)
        frozen = torch.jit.freeze(module)
        return torch_runner(frozen if variant == "freeze" else torch.jit.optimize_for_inference(frozen))
    if variant.startswith("ptopt-"):
        key = (name, variant, batch if variant == "ptopt-tune" else None)
        path = ptopt_file(args.work, name, variant, key[2])
        if variant == "ptopt-tune" and not os.path.exists(path):
            other = [b for b in args.batches if b != batch and os.path.exists(ptopt_file(args.work, name, variant, b))]
            if not other:
                raise RuntimeError((made.get(key) or {}).get("error", "no --tune file"))
            path = ptopt_file(args.work, name, variant, other[0])
            notes.append("ptopt-tune at batch %d: the file tuned at batch %d (%s)" % (
                batch, other[0], (made.get(key) or {}).get("error", "none tuned at this batch")))
        elif not os.path.exists(path):
            raise RuntimeError((made.get(key) or {}).get("error", "no ptopt file"))
        return torch_runner(torch.jit.load(path, map_location="cuda").eval())
    # torch.compile: warmed in the background, or compiled now if time allows.
    marker = compile_marker(args.work, name, variant, batch)
    warmed = os.path.exists(marker)
    # A compile here (quick when warmed: Inductor's caches) must leave the
    # models and batches still to time their share of the lease.
    expected = 25 if warmed else 60 if variant == "compile" else 240
    if not clock.allows(expected + args.reserve + args.timing_share * (args.left_to_time - 1)):
        raise RuntimeError("not compiled: %s, and the lease's time left (%.0f s) would not cover a compile" % (
            "warmed earlier" if warmed else "the background warm-up did not reach it", clock.left()))
    t0 = time.time()
    run = compiled_runner(name, variant, batch)
    notes.append("%s batch %d compiled in %.0f s here%s" % (
        variant, batch, time.time() - t0, " (warmed earlier)" if os.path.exists(marker) else ""))
    return run


def time_round_robin(runners, x, rounds, iters, seed):
    names = list(runners)
    inputs = (x,)
    for name in names:
        for _ in range(3):
            runners[name](inputs)
    torch.cuda.synchronize()
    times = {n: [] for n in names}
    rng = random.Random(seed)
    order = list(names)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(rounds):
        rng.shuffle(order)
        for name in order:
            start.record()
            for _ in range(iters):
                runners[name](inputs)
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) / iters)
    return times


def run_model(args, name, made, clock):
    result = {"model": name, "batches": {}}
    for batch in sorted(args.batches, reverse=True):  # batch 64 first: the targets
        entry = result["batches"].setdefault(str(batch), {"variants": {}, "notes": []})
        if not clock.allows(20 + args.reserve):
            entry["skip"] = "not run: the lease's time ran out"
            continue
        x = image(batch).cuda()
        runners = {}
        reference = None
        for variant in args.variants:
            v = entry["variants"].setdefault(variant, {})
            try:
                run = build_runner(args, name, variant, batch, made, clock, entry["notes"])
                out = flat_outputs(run((x,)))
                got = [t.float().cpu() for t in out]
                if variant == "original":
                    reference = got
                v["numerics"] = numerics(reference, got)
                runners[variant] = run
            except Exception as e:  # noqa: BLE001 - a variant that fails is reported, not fatal
                v["error"] = "%s: %s" % (type(e).__name__, first_line(e))
                log("%s batch %d %s: %s" % (name, batch, variant, v["error"]))
            torch.cuda.synchronize()
        if "original" not in runners:
            entry["skip"] = "the original does not run: %s" % entry["variants"]["original"].get("error")
            continue
        iters = 10 if batch == 1 else 3
        # Rounds that fit: estimate a round from one warm call of each.
        rounds = args.rounds
        per_round = sum(one_call_ms(r, x) for r in runners.values()) * iters / 1e3
        affordable = int((clock.left() - args.reserve) / max(per_round, 1e-3) / max(1, args.left_to_time))
        if affordable < rounds:
            rounds = max(5, affordable)
            entry["notes"].append("%d rounds (the lease's time)" % rounds)
        times = time_round_robin(runners, x, rounds, iters, seed=batch)
        args.left_to_time = max(1, args.left_to_time - 1)
        for variant, ts in times.items():
            ratios = [t / o for t, o in zip(ts, times["original"])]
            med, lo, hi = median_ci(ratios)
            entry["variants"][variant]["timing"] = {"ms": statistics.median(ts), "ratio": med, "ci": [lo, hi],
                                                    "rounds": rounds, "iters": iters}
        log("%s batch %d: %s" % (name, batch, ", ".join(
            "%s %.3f" % (v, entry["variants"][v]["timing"]["ratio"]) for v in times)))
        del runners
        torch._dynamo.reset()
        torch.cuda.empty_cache()
    for (model, variant, batch), info in made.items():
        if model == name:
            result.setdefault("ptopt", {})[variant + ("" if batch is None else "@%d" % batch)] = info
    return result


def one_call_ms(run, x):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    run((x,))
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


# ---------------------------------------------------------------- report ---

def meta():
    props = torch.cuda.get_device_properties(0)
    out = {"date": time.strftime("%Y-%m-%d"), "gpu": torch.cuda.get_device_name(0),
           "capability": "%d.%d" % (props.major, props.minor), "memory_gib": round(props.total_memory / 2**30),
           "torch": torch.__version__, "cuda": torch.version.cuda}
    try:
        out["cudnn"] = torch.backends.cudnn.version()
    except Exception as e:  # noqa: BLE001 - the table says so
        out["cudnn"] = "unknown (%s)" % first_line(e)
    try:
        import torchvision
        out["torchvision"] = torchvision.__version__
    except ImportError:
        pass
    try:
        out["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                       stdout=subprocess.PIPE, universal_newlines=True).stdout.strip()
    except OSError:
        pass
    return out


def cell(v):
    t = v.get("timing")
    if not t:
        return "—"
    return "%.3f <sub>[%.2f, %.2f]</sub>" % (t["ratio"], t["ci"][0], t["ci"][1])


def render(results, info, args):
    lines = ["# ptopt on %s (%s)" % (info["gpu"], info["date"]), "",
             "%s (compute capability %s, %d GiB), driver %s; PyTorch %s, CUDA %s, cuDNN %s, torchvision %s. "
             "Latency ratios to the original TorchScript file in fp32 (lower is faster), median of interleaved "
             "rounds with its 95%% interval; CUDA events; cuDNN benchmark mode on. Generated by `bench/gpu.py`." % (
                 info["gpu"], info["capability"], info["memory_gib"], info.get("driver", "?"), info["torch"],
                 info["cuda"], info["cudnn"], info.get("torchvision", "?")), ""]
    variants = [v for v in args.variants if v != "original"]
    for batch in args.batches:
        lines += ["## Batch %d" % batch, "",
                  "| model | original (ms) | " + " | ".join(variants) + " |",
                  "|---|---:|" + "---:|" * len(variants)]
        for r in results:
            e = r["batches"].get(str(batch), {})
            if e.get("skip"):
                lines.append("| %s | %s |" % (r["model"], e["skip"]))
                continue
            orig = e["variants"]["original"].get("timing", {}).get("ms")
            lines.append("| %s | %s | %s |" % (r["model"], "%.2f" % orig if orig else "—",
                                              " | ".join(cell(e["variants"].get(v, {})) for v in variants)))
        lines.append("")
    lines += ["## Numerics against the original (max abs error / cosine), batch %d" % args.batches[0], "",
              "| model | " + " | ".join(variants) + " |", "|---|" + "---|" * len(variants)]
    for r in results:
        e = r["batches"].get(str(args.batches[0]), {})
        cells = []
        for v in variants:
            n = e.get("variants", {}).get(v, {}).get("numerics", {})
            cells.append("%.1e / %.5f" % (n["max_abs"], n["cosine"]) if "max_abs" in n else "—")
        lines.append("| %s | %s |" % (r["model"], " | ".join(cells)))
    lines += ["", "## ptopt's runs (verified by ptopt on the GPU)", ""]
    for r in results:
        for key, p in sorted(r.get("ptopt", {}).items()):
            lines.append("- %s %s: %s" % (r["model"], key, p.get("error") or "%s, %s, %s s" % (
                p.get("verification") or p.get("outcome"), p.get("precision"), p.get("seconds"))))
    problems = [(r["model"], b, v, x["error"]) for r in results for b, e in r["batches"].items()
                for v, x in e.get("variants", {}).items() if "error" in x]
    notes = [(r["model"], b, n) for r in results for b, e in r["batches"].items() for n in e.get("notes", [])]
    if problems:
        lines += ["", "Variants that could not be built or run:", ""]
        lines += ["- %s batch %s %s: %s" % p for p in problems]
    if notes:
        lines += ["", "Notes:", ""] + ["- %s batch %s: %s" % n for n in notes]
    lines += ["", "## Targets (issue 36)", ""] + targets(results, args)
    return "\n".join(lines) + "\n"


def ratio(r, batch, variant):
    t = r["batches"].get(str(batch), {}).get("variants", {}).get(variant, {}).get("timing")
    return t["ratio"] if t else None


def targets(results, args):
    out = []
    for r in results:
        if r["model"] == "resnet50" and 64 in args.batches:
            o3 = ratio(r, 64, "ptopt-O3")
            out.append("- resnet50 -O3 (fp16) at batch 64: %s (target: at least 2.5x faster)" % (
                "%.2fx faster than the fp32 original" % (1 / o3) if o3 else "not measured"))
    for batch in args.batches:
        for r in results:
            tune, cmax = ratio(r, batch, "ptopt-tune"), ratio(r, batch, "compile-max")
            if tune and cmax:
                out.append("- %s batch %d: --tune %.3f, compile max-autotune %.3f: %.2fx of it%s" % (
                    r["model"], batch, tune, cmax, tune / cmax, "" if tune / cmax <= 1.2 else " (beyond 1.2x)"))
            else:
                out.append("- %s batch %d: --tune %s, compile max-autotune %s" % (
                    r["model"], batch, "%.3f" % tune if tune else "not measured",
                    "%.3f" % cmax if cmax else "not measured"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ptopt")
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", default=None)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--tune-budget", type=float, default=6)
    ap.add_argument("--parallel", type=int, default=5, help="ptopt -O2/-O3 runs at once (verification only)")
    ap.add_argument("--deadline", type=float, default=0, help="epoch seconds by which the run must end")
    ap.add_argument("--reserve", type=float, default=15, help="seconds kept back before the deadline")
    ap.add_argument("--timing-share", type=float, default=12,
                    help="seconds kept for timing each model at each batch size when deciding whether to --tune")
    ap.add_argument("--stop-warm-file", default=None, help="pid file of the --warm process, stopped before timing")
    ap.add_argument("--warm", action="store_true", help="only compile the torch.compile variants (fills caches)")
    ap.add_argument("--pid-file", default=None, help="with --warm: where to write this process's id")
    ap.add_argument("--make-only", action="store_true",
                    help="only make the -O2 and -O3 files (verified on the GPU); no tuning, no timing")
    ap.add_argument("--reuse", action="store_true",
                    help="keep the ptopt files (and reports) an earlier call made in --work instead of remaking them")
    args = ap.parse_args()
    args.models = [m for m in args.models.split(",") if m]
    args.variants = [v for v in args.variants.split(",") if v]
    if "original" not in args.variants:
        args.variants.insert(0, "original")
    args.batches = [int(b) for b in args.batches.split(",") if b]
    os.makedirs(args.work, exist_ok=True)
    if not torch.cuda.is_available():
        print("bench/gpu.py: no CUDA device here", file=sys.stderr)
        return 2
    if args.warm:
        if args.pid_file:  # for --stop-warm-file: this process, whatever started it
            with open(args.pid_file, "w") as fh:
                fh.write("%d\n" % os.getpid())
        warm(args)
        return 0
    if args.make_only and args.reuse:
        ap.error("--make-only makes the files; --reuse keeps earlier ones: give one of them")
    if not args.out or not args.ptopt:
        ap.error("--out and --ptopt are needed (except with --warm)")
    clock = Clock(args.deadline)
    torch.backends.cudnn.benchmark = True
    make_originals(args.work, args.models)
    made = make_ptopt_files(args, clock) if any(v.startswith("ptopt-") for v in args.variants) else {}
    if args.make_only:
        with open(args.out + ".made.json", "w") as fh:
            json.dump({"%s %s" % (k[0], k[1]): v for k, v in made.items()}, fh, indent=1)
        return 0
    if args.stop_warm_file:
        stop_warm(args.stop_warm_file)
    info = meta()
    results = []
    for i, name in enumerate(args.models):
        args.left_to_time = (len(args.models) - i) * len(args.batches)
        log("timing %s (%.0f s left)" % (name, clock.left()))
        results.append(run_model(args, name, made, clock))
        with open(args.out + ".json", "w") as fh:
            json.dump({"meta": info, "batches": args.batches, "results": results}, fh, indent=1)
        with open(args.out + ".md", "w") as fh:
            fh.write(render(results, info, args))
    print(render(results, info, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
