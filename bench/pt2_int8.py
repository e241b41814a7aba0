#!/usr/bin/env python3
"""int8 .pt2 programs from ptopt, compiled by Inductor (PyTorch 2.x world).

`ptopt IN.pt2 OUT.pt2 -O1 --quantize int8` writes PT2E's Q/DQ form
(docs/formats.md, "int8 in a .pt2"). Its int8 speed is what Inductor makes of
it: with freezing on and torchao's x86 int8 passes imported, every
dequantize -> conv/linear -> quantize becomes one oneDNN int8 kernel. For
each torchvision model (random weights, batch 1, 224x224, training IR):
  - ptopt -O1 (fp32) and -O1 --quantize int8 (calibrated on seeded random
    inputs: the accuracy is not the point here, the kernels are);
  - torch.compile (freezing on) of IN.module(), of the -O1 OUT's and of the
    int8 OUT's, and AOTInductor packages (freezing on, compiled under
    torch.no_grad()) of IN and of the int8 OUT, timed interleaved in this
    process (median of per-round ratios to compiled IN, --threads intra-op
    threads);
  - how many int8 convs and linears Inductor lowered, and the cosine of the
    compiled int8 output to IN's.
Needs torchao (scripts/setup-peers.sh). Writes JSON (--json) and prints a
Markdown table. Example:
  .venv/bin/python bench/pt2_int8.py --ptopt build-torch2/tools/ptopt --models resnet18,resnet50
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

# The PyPI torch 2.15 wheel loads AOTInductor packages only with torch's
# libraries loaded globally (set before torch is imported).
os.environ.setdefault("TORCH_USE_RTLD_GLOBAL", "YES")

import torch  # noqa: E402
import torchvision  # noqa: E402

warnings.filterwarnings("ignore")


def interleaved(fns, x, rounds, per_round):
    """name -> median over rounds of (its time / the first's), runs interleaved."""
    with torch.no_grad():
        for f in fns.values():
            for _ in range(3):
                f(x)
        times = {k: [] for k in fns}
        for _ in range(rounds):
            for k, f in fns.items():
                t = time.perf_counter()
                for _ in range(per_round):
                    f(x)
                times[k].append((time.perf_counter() - t) / per_round)
    first = next(iter(fns))
    return {k: statistics.median(a / b for a, b in zip(v, times[first])) for k, v in times.items()}, \
        {k: statistics.median(v) * 1e3 for k, v in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ptopt", required=True)
    ap.add_argument("--models", default="resnet18,resnet50,mobilenet_v2")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--per-round", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    try:
        import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer  # noqa: F401  (registers the passes)
    except ImportError:
        sys.exit("pt2_int8.py: torchao is not installed (scripts/setup-peers.sh)")
    import torch.ao.quantization.fx._decomposed  # noqa: F401
    import torch._inductor.config as inductor_config
    from torch._dynamo.utils import counters
    inductor_config.freezing = True
    torch.set_num_threads(args.threads)
    rows = []
    with tempfile.TemporaryDirectory(prefix="pt2_int8-") as d:
        for name in args.models.split(","):
            torch.manual_seed(0)
            model = getattr(torchvision.models, name)().eval()
            x = torch.randn(1, 3, 224, 224)
            src = os.path.join(d, f"{name}.pt2")
            torch.export.save(torch.export.export(model, (x,)), src)
            row = {"model": name}
            paths = {"IN": src}
            for label, extra in (("O1", []), ("int8", ["--quantize", "int8"])):
                out = os.path.join(d, f"{name}.{label}.pt2")
                p = subprocess.run([args.ptopt, src, out, "-O1", "--measure-threads", str(args.threads), *extra],
                                   capture_output=True, text=True)
                if p.returncode != 0:
                    row[f"{label}_error"] = (p.stdout + p.stderr).strip().splitlines()[-1][:200]
                    continue
                paths[label] = out
                for line in (p.stdout + p.stderr).splitlines():
                    if line.strip().startswith("quantize:"):
                        row["quantize"] = line.strip()
            compiled = {}
            for label, path in paths.items():
                counters.clear()
                torch._dynamo.reset()
                c = torch.compile(torch.export.load(path).module())
                with torch.no_grad():
                    y = c(x)
                compiled[label] = c
                if label == "int8":
                    lowered = counters["inductor"]
                    row["int8_convs"] = lowered.get("qconv_unary_lower_count", 0) + \
                        lowered.get("qconv_binary_lower_count", 0) + lowered.get("qconv2d_unary_lower_count", 0)
                    row["int8_linears"] = lowered.get("qlinear_unary_lower_count", 0) + \
                        lowered.get("qlinear_binary_lower_count", 0)
                    with torch.no_grad():
                        ref = model(x)
                    row["cosine"] = torch.nn.functional.cosine_similarity(y.flatten(), ref.flatten(), dim=0).item()
            for label in ("IN", "int8"):
                if label not in paths:
                    continue
                counters.clear()
                with torch.no_grad():  # Inductor freezes (and lowers int8) only without autograd
                    package = torch._inductor.aoti_compile_and_package(
                        torch.export.load(paths[label]), package_path=os.path.join(d, f"{name}.{label}.aoti.pt2"))
                compiled[f"aoti_{label}"] = torch._inductor.aoti_load_package(package)
                if label == "int8":
                    row["aoti_int8_convs"] = counters["inductor"].get("qconv_unary_lower_count", 0) + \
                        counters["inductor"].get("qconv_binary_lower_count", 0)
            ratios, ms = interleaved(compiled, x, args.rounds, args.per_round)
            row.update({f"{k}_ratio": v for k, v in ratios.items()})
            row.update({f"{k}_ms": v for k, v in ms.items()})
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    meta = {"torch": torch.__version__, "threads": args.threads, "cpu": platform.processor() or platform.machine()}
    try:
        import torchao
        meta["torchao"] = torchao.__version__
    except ImportError:
        pass
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    print(f"torch.compile (freezing) of each, {args.threads} thread(s), ratios to compiled IN (fp32); "
          f"torch {meta['torch']}, torchao {meta.get('torchao')}\n")
    print("| model | compiled IN, ms | -O1 OUT | int8 OUT | int8 convs+linears lowered | cosine int8 / IN "
          "| AOTI(IN) | AOTI(int8 OUT) |")
    print("|---|---|---|---|---|---|---|---|")
    nan = float("nan")
    for r in rows:
        print(f"| {r['model']} | {r.get('IN_ms', nan):.2f} | {r.get('O1_ratio', nan):.3f} | "
              f"{r.get('int8_ratio', nan):.3f} | {r.get('int8_convs', 0)}+{r.get('int8_linears', 0)} | "
              f"{r.get('cosine', nan):.4f} | {r.get('aoti_IN_ratio', nan):.3f} | {r.get('aoti_int8_ratio', nan):.3f} |")


if __name__ == "__main__":
    main()
