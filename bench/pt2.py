#!/usr/bin/env python3
"""torch.export programs through ptopt, measured (PyTorch 2.x world).

For each torchvision model (eval mode, random weights, batch 1, 224x224):
  - export it (training IR, and run_decompositions()'s inference IR), save
    it with torch.export.save, run `ptopt IN.pt2 OUT.pt2` at each preset
    asked (default -O1 and -O3 --tune) and record what was folded (BatchNorm
    and dropout nodes before and after), and `OUT.module()`'s latency against
    `IN.module()`'s, interleaved in this process (median of per-round ratios,
    fp32 vs whatever the preset chose, --threads intra-op threads);
  - try AOTInductor on OUT (aoti_compile_and_package, then load and time it
    against IN.module()); a torch that cannot load AOTInductor packages is
    recorded as such;
  - time ptopt on the .pt2 against ptopt on the same model's TorchScript file
    (torch.jit.trace), -O1 both;
  - TorchScript -> .pt2: the scripted model through `ptopt m.pt m.pt2
    --passes ''` against torch._export.converter.TS2EPConverter, success and
    call counts.
Writes JSON (--json) and prints a Markdown table. Example:
  .venv/bin/python bench/pt2.py --ptopt build-torch2/tools/ptopt --models resnet18,mobilenet_v2 \
      --json bench/results/pt2.json
"""
import argparse
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

# The PyPI torch 2.15 wheel builds AOTInductor packages that resolve
# aoti_torch_* from torch's libraries loaded globally; without this they
# compile but do not load ("undefined symbol: aoti_torch_dtype_float32").
# It must be set before torch is imported.
os.environ.setdefault("TORCH_USE_RTLD_GLOBAL", "YES")

import torch  # noqa: E402
import torchvision  # noqa: E402

warnings.filterwarnings("ignore")

DEFAULT_MODELS = "resnet18,resnet50,mobilenet_v2,mobilenet_v3_large,efficientnet_b0,regnet_y_400mf,convnext_tiny"


def call_targets(ep):
    return [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]


def count_like(targets, words):
    return sum(1 for t in targets if any(w in t for w in words))


def ratio(a, b, x, rounds, per_round):
    """Median over rounds of (time of b / time of a), runs interleaved."""
    with torch.no_grad():
        for _ in range(3):
            a(x), b(x)
        ratios = []
        for _ in range(rounds):
            ta = tb = 0.0
            for _ in range(per_round):
                t0 = time.perf_counter(); a(x); t1 = time.perf_counter(); b(x); t2 = time.perf_counter()
                ta += t1 - t0
                tb += t2 - t1
            ratios.append(tb / ta)
    return statistics.median(ratios)


def run(cmd):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, time.perf_counter() - t0, p.stdout + p.stderr


def aoti(ep, x, where):
    try:
        pkg = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(where, "aoti.pt2"))
    except Exception as e:  # noqa: BLE001
        return None, f"compile failed: {str(e).splitlines()[0][:100]}"
    try:
        return torch._inductor.aoti_load_package(pkg), "compiled"
    except Exception as e:  # noqa: BLE001
        return None, f"compiled; does not load in this torch ({str(e).split(':')[-1].strip()[:60]})"


def ts_to_pt2(ptopt, model, x, where):
    out = {}
    try:
        scripted = torch.jit.script(model)
    except Exception as e:  # noqa: BLE001
        return {"scripted": False, "why": str(e).splitlines()[0][:100]}
    ts = os.path.join(where, "m.pt")
    scripted.save(ts)
    dst = os.path.join(where, "ts.pt2")
    rc, _, text = run([ptopt, ts, dst, "--passes", "", "--no-measure", "--input-shape", ",".join(map(str, x.shape))])
    out["ptopt"] = rc == 0
    if rc == 0:
        ep = torch.export.load(dst)
        out["ptopt_calls"] = len(call_targets(ep))
        first = lambda o: o if isinstance(o, torch.Tensor) else o[0]  # noqa: E731 (GoogLeNet's NamedTuple)
        out["ptopt_bitwise"] = bool(torch.equal(first(ep.module()(x)), first(scripted(x))))
    else:
        out["ptopt_why"] = [l for l in text.splitlines() if "error" in l][:1]
    try:
        from torch._export.converter import TS2EPConverter
        ep = TS2EPConverter(scripted, (x,)).convert()
        out["ts2ep"] = True
        out["ts2ep_calls"] = len(call_targets(ep))
    except Exception as e:  # noqa: BLE001
        out["ts2ep"] = False
        out["ts2ep_why"] = str(e).splitlines()[0][:100] if str(e) else type(e).__name__
    return out


def bench_model(args, name):
    model = getattr(torchvision.models, name)().eval()
    x = torch.randn(1, 3, 224, 224)
    row = {"model": name}
    with tempfile.TemporaryDirectory() as d:
        ep = torch.export.export(model, (x,))
        programs = {"training": ep, "inference": ep.run_decompositions()}
        if args.aoti:  # AOTInductor on IN itself: what OUT's compiled time compares with
            os.makedirs(os.path.join(d, "in_aoti"))
            compiled, status = aoti(ep, x, os.path.join(d, "in_aoti"))
            row["aoti_in"] = status
            if compiled is not None:
                row["aoti_in_ratio"] = round(ratio(ep.module(), compiled, x, args.rounds, args.per_round), 3)
        for ir, program in programs.items():
            src = os.path.join(d, f"{ir}.pt2")
            torch.export.save(program, src)
            before = call_targets(program)
            original = torch.export.load(src).module()
            for preset in args.presets:
                key = f"{ir} {preset}"
                dst = os.path.join(d, f"{ir}_{preset.replace(' ', '_').replace('-', '')}.pt2")
                rc, secs, text = run([args.ptopt, src, dst, *preset.split(), "--measure-threads", str(args.threads)])
                r = {"exit": rc, "ptopt_s": round(secs, 2)}
                if rc == 0:
                    out = torch.export.load(dst)
                    after = call_targets(out)
                    r.update(calls_before=len(before), calls_after=len(after),
                             bn_before=count_like(before, ["batch_norm"]), bn_after=count_like(after, ["batch_norm"]),
                             dropout_before=count_like(before, ["dropout"]),
                             dropout_after=count_like(after, ["dropout"]),
                             module_ratio=round(ratio(original, out.module(), x, args.rounds, args.per_round), 3))
                    if args.aoti and ir == "training" and preset == args.presets[-1]:
                        compiled, status = aoti(out, x, d)
                        r["aoti"] = status
                        if compiled is not None:
                            r["aoti_ratio"] = round(ratio(original, compiled, x, args.rounds, args.per_round), 3)
                else:
                    r["error"] = [l for l in text.splitlines() if "error" in l][:1]
                row[key] = r
        # ptopt's cost on a .pt2 against the same model's TorchScript file.
        ts = os.path.join(d, "traced.pt")
        torch.jit.trace(model, (x,)).save(ts)
        _, ts_secs, _ = run([args.ptopt, ts, os.path.join(d, "t.pt"), "-O1", "--no-measure"])
        _, pt2_secs, _ = run([args.ptopt, os.path.join(d, "training.pt2"), os.path.join(d, "t.pt2"), "-O1",
                              "--no-measure"])
        row["cost"] = {"torchscript_s": round(ts_secs, 2), "pt2_s": round(pt2_secs, 2),
                       "ratio": round(pt2_secs / ts_secs, 2)}
        row["ts_to_pt2"] = ts_to_pt2(args.ptopt, model, x, d)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ptopt", required=True)
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--presets", default="-O1;-O3 --tune", help="';'-separated ptopt arguments")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--per-round", type=int, default=5)
    ap.add_argument("--no-aoti", dest="aoti", action="store_false")
    ap.add_argument("--json")
    args = ap.parse_args()
    args.presets = [p.strip() for p in args.presets.split(";") if p.strip()]
    torch.set_num_threads(args.threads)
    rows = []
    for name in args.models.split(","):
        print(f"# {name}", file=sys.stderr, flush=True)
        rows.append(bench_model(args, name))
    result = {"machine": platform.processor() or platform.machine(), "torch": torch.__version__,
              "threads": args.threads, "presets": args.presets, "rows": rows}
    try:
        result["cpu"] = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    print(f"torch {torch.__version__}, {result.get('cpu', '')}, {args.threads} thread(s); "
          "ratios: OUT.module() time / IN.module() time (lower is faster)\n")
    print("| model | IR | preset | BN before→after | dropout before→after | calls before→after | OUT.module() / IN | AOTI(OUT) / IN (AOTI(IN) / IN) |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        for key, r in row.items():
            if not isinstance(r, dict) or "exit" not in r:
                continue
            ir, preset = key.split(" ", 1)
            if r["exit"] != 0:
                print(f"| {row['model']} | {ir} | {preset} | failed: {r.get('error')} | | | | |")
                continue
            aoti_cell = r.get("aoti_ratio", r.get("aoti", ""))
            if aoti_cell != "" and ir == "training":
                aoti_cell = f"{aoti_cell} (IN: {row.get('aoti_in_ratio', row.get('aoti_in', '?'))})"
            print(f"| {row['model']} | {ir} | `{preset}` | {r['bn_before']}→{r['bn_after']} | "
                  f"{r['dropout_before']}→{r['dropout_after']} | {r['calls_before']}→{r['calls_after']} | "
                  f"{r['module_ratio']} | {aoti_cell} |")
    print("\n| model | ptopt -O1 on .pt2 / on TorchScript (s) | TorchScript→.pt2: ptopt | TS2EPConverter |")
    print("|---|---|---|---|")
    for row in rows:
        c, t = row["cost"], row["ts_to_pt2"]
        mine = (f"yes ({t['ptopt_calls']} calls{', bitwise' if t.get('ptopt_bitwise') else ''})" if t.get("ptopt")
                else f"no: {t.get('ptopt_why', t.get('why'))}")
        theirs = f"yes ({t['ts2ep_calls']} calls)" if t.get("ts2ep") else f"no: {t.get('ts2ep_why', t.get('why'))}"
        print(f"| {row['model']} | {c['pt2_s']} / {c['torchscript_s']} = {c['ratio']}x | {mine} | {theirs} |")


if __name__ == "__main__":
    main()
