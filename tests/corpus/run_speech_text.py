#!/usr/bin/python3
"""The speech-and-text corpus (issue 37): torchaudio's models, a transform
chain and text encoders with padding masks (tests/corpus/speech_text_models.py),
scripted and traced, through the ptopt CLI at every level, each output
reloaded in stock PyTorch and compared with the original.

Usage:
    /usr/bin/python3 tests/corpus/run_speech_text.py --ptopt build/tools/ptopt --work DIR
        [--size small|full] [--models a,b,...] [--modes script,trace]
        [--levels O0,O1,O2,O3,int8] [--timeout S] [--table T.md] [--json T.json]

Each model is saved by torch.jit.script (and torch.jit.trace: tensor outputs
only, as users trace such models) with its seeded example inputs
(torch.save'd list, ptopt's --inputs), and optimized by
`ptopt IN OUT <level> --inputs INPUTS --force --no-measure --report R`:

  O0    `--passes ''`: ptopt must say bitwise equal, and so must the reload.
  O1, O2  fp32 pipelines: ptopt's verification passes and the reloaded
        outputs are within 1e-5 + 1e-4 * max|reference| of the original's.
  O3    -O3: judged by the bf16 criterion where ptopt's report says it
        lowered precision (cosine >= 0.99, max|a-b| <= 1e-2 + 5e-2 max|ref|),
        else like O1.
  int8  the model's int8 mode: `--quantize int8` (static, calibrated on the
        example inputs) for the conv nets, `-O1,quantize{mode=dynamic}` for
        the linear and RNN models (LSTM/GRU are dynamic in both); ptopt's own
        int8 criterion must pass, and the reload must agree with ptopt's
        verified output (cosine >= 0.99 against the original).

Statuses as in tests/corpus/run_corpus.py: PASS, PASS* (the fp32
elementwise check's known false failure within 1e-4 of the scale), FAIL,
ERROR, SKIP (not scriptable/traceable here, or its package is missing: the
reason is shown). Exit 1 when any run is FAIL or ERROR.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time
import warnings

warnings.filterwarnings("ignore")  # torch.jit's deprecation, nested tensors' prototype warning

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_corpus as rc  # noqa: E402  (the comparison and report helpers)
import speech_text_models as stm  # noqa: E402

LEVELS = ["O0", "O1", "O2", "O3", "int8"]
INT8_COSINE = 0.99


class TensorOutputs(torch.nn.Module):
    """For tracing: the model's tensor outputs as a flat tuple (a traced
    function cannot return lengths=None or a list of states)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *args):
        out = rc.flatten(self.model(*args), "out", [])
        tensors = tuple(t for _, t in out if isinstance(t, torch.Tensor))
        return tensors[0] if len(tensors) == 1 else tensors


def level_args(entry, level):
    if level == "O0":
        return ["--passes", ""]
    if level == "int8":
        return ["--quantize", "int8"] if entry.quantize == "static" else ["--passes", "-O1,quantize{mode=dynamic}"]
    return ["-" + level]


def save_model(entry, mode, size, work):
    """(model path, inputs path, reference outputs), or a reason to skip."""
    model = entry.build(size)
    inputs = entry.inputs(size)
    path = os.path.join(work, "%s_%s.pt" % (entry.name, mode))
    try:
        with torch.no_grad():
            if mode == "script":
                saved = torch.jit.script(model)
            else:
                # As torch.jit.script does (torchaudio's wav2vec2 drops its
                # positional conv's weight_norm there): tracing cannot follow
                # the weight-norm hook.
                for m in model.modules():
                    if hasattr(m, "__prepare_scriptable__") and m is not model:
                        m.__prepare_scriptable__()
                saved = torch.jit.trace(TensorOutputs(model), tuple(inputs), check_trace=False)
        saved.save(path)
        loaded = torch.jit.load(path).eval()
        with torch.no_grad():
            ref = loaded(*[x.clone() for x in inputs])
    except Exception as e:  # noqa: BLE001
        return None, "not %s here: %s" % ("scriptable" if mode == "script" else "traceable",
                                          rc.torch_error(str(e)) or type(e).__name__)
    inputs_path = os.path.join(work, "%s_inputs.pt" % entry.name)
    torch.save(tuple(inputs), inputs_path)
    params = sum(p.numel() for p in model.parameters())
    return (path, inputs_path, inputs, ref, params), ""


def cosine(ref, got):
    a = [t for _, t in rc.flatten(ref, "out", []) if isinstance(t, torch.Tensor) and t.is_floating_point()]
    b = [t for _, t in rc.flatten(got, "out", []) if isinstance(t, torch.Tensor) and t.is_floating_point()]
    if not a or len(a) != len(b):
        return 1.0 if not a and not b else 0.0
    r = torch.cat([t.double().flatten() for t in a])
    g = torch.cat([t.double().flatten() for t in b])
    nr, ng = r.norm().item(), g.norm().item()
    return 1.0 if nr == ng == 0 else (0.0 if nr == 0 or ng == 0 else (r @ g).item() / (nr * ng))


def reload_check(out_path, inputs, ref, criterion):
    try:
        model = torch.jit.load(out_path, map_location="cpu").eval()
    except Exception as e:  # noqa: BLE001
        return "stock PyTorch cannot load the output: %s" % rc.first_line(str(e))
    try:
        with torch.no_grad():
            got = model(*[x.clone() for x in inputs])
    except Exception as e:  # noqa: BLE001
        return "the reloaded output fails to run: %s" % rc.torch_error(str(e))
    if criterion == "int8":
        c = cosine(ref, got)
        return None if c >= INT8_COSINE else "reload check: cosine %.4f < %g" % (c, INT8_COSINE)
    why = rc.compare_outputs(ref, got, criterion, want_contiguous=False)
    return "reload check: %s" % why if why else None


def run_level(args, entry, level, saved, work):
    in_path, inputs_path, inputs, ref, _ = saved
    out_path = os.path.join(work, "out.%s.pt" % level)
    rep_path = os.path.join(work, "report.%s.json" % level)
    for p in (out_path, rep_path):
        if os.path.exists(p):
            os.remove(p)
    cmd = [args.ptopt, in_path, out_path] + level_args(entry, level) + [
        "--inputs", inputs_path, "--force", "--overwrite", "-q", "--no-measure", "--report", rep_path]
    if level == "int8" and entry.quantize == "static":
        cmd += ["--calibration", os.path.join(work, "%s_calibration.pt" % entry.name)]
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=args.timeout,
                              universal_newlines=True)
    except subprocess.TimeoutExpired:
        return {"status": "ERROR", "seconds": round(time.time() - t0, 1), "detail": "timed out after %d s" % args.timeout}
    result = {"rc": proc.returncode, "seconds": round(time.time() - t0, 1)}
    report = {}
    if os.path.exists(rep_path):
        try:
            with open(rep_path) as fh:
                report = json.load(fh)
        except ValueError:
            pass
    criteria = rc.report_criteria(report)
    lowp = "global" in criteria
    if level == "O3":
        result["precision"] = "bf16" if lowp else "fp32"
    if proc.returncode not in (0, 3):
        result.update(status="ERROR", detail="exit %d: %s" % (proc.returncode, rc.error_line(proc.stdout)))
        return result
    if not os.path.exists(out_path):
        result.update(status="FAIL", detail="exit %d but no output written (--force)" % proc.returncode)
        return result
    criterion = "int8" if level == "int8" else ("bitwise" if level == "O0" else ("bf16" if lowp else "fp32"))
    why = reload_check(out_path, inputs, ref, criterion)
    if level == "O0" and proc.returncode == 0 and not report.get("verification", {}).get("bitwise_equal", False):
        why = why or "ptopt's verification did not find the outputs bitwise equal"
    if proc.returncode == 0:
        result.update(status="FAIL", detail=why) if why else result.update(status="PASS")
    elif why is None and criterion == "fp32" and criteria == {"elementwise"}:
        result.update(status="PASS*", detail="ptopt's elementwise check: %s" % (rc.verify_summary(report)
                                                                                  or rc.error_line(proc.stdout)))
    else:
        result.update(status="FAIL", detail="exit 3: %s%s" % (rc.verify_summary(report) or rc.error_line(proc.stdout),
                                                               "; " + why if why else ""))
    if level == "int8":
        # How many ops became int8 (statically or dynamically), from the report.
        result["int8"] = sum(e.get("counters", {}).get("quantized", 0) + e.get("counters", {}).get("dynamic", 0)
                             for e in report.get("passes", []) if e.get("pass") == "quantize")
    os.remove(out_path)
    return result


def write_table(path, results, args):
    lines = ["# Speech and text corpus (%s size)" % args.size, "",
             "%s; PyTorch %s; %s." % (platform.processor() or platform.machine(), torch.__version__,
                                      time.strftime("%Y-%m-%d")), "",
             "| model | family | mode | params | " + " | ".join(args.levels) + " |",
             "|---|---|---|---|" + "---|" * len(args.levels)]
    notes = []
    for r in results:
        if r.get("skip"):
            notes.append("- %s (%s): %s" % (r["model"], r["mode"], r["skip"]))
            cells = ["SKIP"] * len(args.levels)
        else:
            cells = []
            for lv in args.levels:
                x = r["levels"].get(lv)
                cells.append("" if x is None else x["status"] + (" bf16" if x.get("precision") == "bf16" else "")
                             + (" (%d int8)" % x["int8"] if x.get("int8") is not None else "")
                             + " %.0fs" % x["seconds"])
                if x and x["status"] not in ("PASS",):
                    notes.append("- %s (%s) %s: %s" % (r["model"], r["mode"], lv, x.get("detail", "")))
        lines.append("| %s | %s | %s | %s | %s |" % (r["model"], r["family"], r["mode"],
                                                     "%.2fM" % (r["params"] / 1e6) if r.get("params") else "",
                                                     " | ".join(cells)))
    if notes:
        lines += ["", "Notes:", ""] + notes
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ptopt", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--size", choices=["small", "full"], default="small")
    ap.add_argument("--models", default="")
    ap.add_argument("--modes", default="script,trace")
    ap.add_argument("--levels", default=",".join(LEVELS))
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--table")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    args.levels = [lv for lv in args.levels.split(",") if lv]
    for lv in args.levels:
        if lv not in LEVELS:
            ap.error("unknown level %r (known: %s)" % (lv, ",".join(LEVELS)))
    os.makedirs(args.work, exist_ok=True)
    wanted = set(filter(None, args.models.split(",")))
    results, bad = [], 0
    for entry in stm.entries():
        if wanted and entry.name not in wanted:
            continue
        for mode in args.modes.split(","):
            row = {"model": entry.name, "family": entry.family, "mode": mode, "levels": {}}
            results.append(row)
            if entry._build is None:
                row["skip"] = entry.note
            elif mode == "trace" and not entry.trace:
                row["skip"] = entry.note or "not traced"
            else:
                saved, why = save_model(entry, mode, args.size, args.work)
                if not saved:
                    row["skip"] = why
                else:
                    row["params"] = saved[4]
                    if "int8" in args.levels and entry.quantize == "static":
                        batches = [tuple(entry.inputs(args.size, seed)) for seed in range(2, 6)]
                        torch.save(batches, os.path.join(args.work, "%s_calibration.pt" % entry.name))
                    for lv in args.levels:
                        r = run_level(args, entry, lv, saved, args.work)
                        row["levels"][lv] = r
                        bad += r["status"] in ("FAIL", "ERROR")
                        print("%-28s %-6s %-5s %-6s %5.1fs %s" % (entry.name, mode, lv, r["status"], r["seconds"],
                                                                r.get("detail") or ""), flush=True)
            if row.get("skip"):
                print("%-28s %-6s SKIP  %s" % (entry.name, mode, row["skip"]), flush=True)
            if args.table:
                write_table(args.table, results, args)
            if args.json:
                with open(args.json, "w") as fh:
                    json.dump(results, fh, indent=1)
    runs = sum(len(r["levels"]) for r in results)
    print("speech_text: %d runs, %d FAIL/ERROR, %d model/mode pairs skipped" %
          (runs, bad, sum(1 for r in results if r.get("skip"))))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
