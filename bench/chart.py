#!/usr/bin/env python3
"""Charts of the benchmark JSON that bench/ writes, drawn with matplotlib.

    .venv/bin/python bench/chart.py bench/results/peers_1thread_2026-12-04.json \\
        -o docs/img/peers.svg
    .venv/bin/python bench/chart.py bench/results/tune_4nets_2x_2026-12-04.json \\
        --world native -o docs/img/tune.svg

Reads either kind of file and tells them apart by their keys:

  bench/peers.py's JSON  ({"meta", "threads", "results"}): ptopt beside
      torch.compile, ONNX Runtime and OpenVINO. Default variants:
      ptopt-tune, compile, ort, openvino (a variant the file lacks is left
      out of the legend; one that failed on a model is marked "failed").
  bench/harness.py's JSON ({"date", "machine", "models"}, "worlds" when it
      ran in several): ptopt's presets beside torch.jit.freeze and
      optimize_for_inference. Default variants: ofi, -O2, -O3, tune.

One horizontal bar per model and variant: the variant's median latency over
the original TorchScript file's (lower is faster; the dashed line at 1 is
the original), with the geometric mean over the models where every charted
variant has a number. The title names the CPU, the thread count, the
precision and the PyTorch version, all from the JSON.

--variants picks and orders the bars (the names the JSON uses, e.g.
ptopt-int8,openvino-int8 or -O1,freeze); --threads picks a thread count of
a peers file (default: its first); --world a world of a harness file
(default: native). Writes SVG (text kept as text: small, and greppable) or
PNG by the extension of -o; the output is deterministic for a given input.
Needs matplotlib (scripts/setup-peers.sh installs it into .venv; Debian's
python3-matplotlib works for /usr/bin/python3).
"""
import argparse
import json
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# What a variant is called on the chart, and its colour (ptopt's in blue).
LABELS = {
    "ptopt-tune": "ptopt -O3 --tune",
    "ptopt-O3": "ptopt -O3",
    "ptopt-O2": "ptopt -O2",
    "ptopt-int8": "ptopt --quantize int8",
    "compile": "torch.compile (Inductor)",
    "compile-max": "torch.compile max-autotune",
    "compile-bf16": "torch.compile under autocast bf16",
    "ort": "ONNX Runtime",
    "ort-int8": "ONNX Runtime int8",
    "openvino": "OpenVINO",
    "openvino-fp32": "OpenVINO f32",
    "openvino-int8": "OpenVINO int8",
    "freeze": "torch.jit.freeze",
    "ofi": "optimize_for_inference",
    "eager": "eager PyTorch",
    "-O1": "ptopt -O1",
    "-O2": "ptopt -O2",
    "-O3": "ptopt -O3",
    "tune": "ptopt -O3 --tune",
}
COLORS = {
    "ptopt-tune": "#1f5fbf", "tune": "#1f5fbf",
    "ptopt-O3": "#5b8fd9", "-O3": "#5b8fd9",
    "ptopt-O2": "#9dbbe8", "-O2": "#9dbbe8", "-O1": "#c9daf3",
    "ptopt-int8": "#0b3a80",
    "compile": "#e07b39", "compile-max": "#f2a772", "compile-bf16": "#b85a1f",
    "ort": "#7a7a7a", "ort-int8": "#b0b0b0",
    "openvino": "#3b9c5a", "openvino-fp32": "#2a6e40", "openvino-int8": "#8ccc9e",
    "freeze": "#b8860b", "ofi": "#c0504d", "eager": "#999999",
}
# Models in this order (then any others, as the file lists them).
ORDER = ["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "convnext_tiny", "vit_b_16", "bert_base",
         "gpt2_small", "levit_128s", "ghostnet_100", "deep_stack_500"]
PEERS_DEFAULT = ["ptopt-tune", "compile", "ort", "openvino"]
HARNESS_DEFAULT = ["ofi", "-O2", "-O3", "tune"]


def ordered(rows):
    rank = {m: i for i, m in enumerate(ORDER)}
    return sorted(rows, key=lambda r: (rank.get(r["model"], len(ORDER)), rows.index(r)))


def load(path):
    with open(path) as fh:
        data = json.load(fh)
    if "results" in data and "meta" in data:
        return "peers", data
    if "models" in data and "machine" in data:
        return "harness", data
    raise SystemExit(f"chart.py: {path} is neither bench/peers.py's nor bench/harness.py's JSON")


def short_cpu(machine):
    """'Intel(R) Xeon(R) Processor (2 cores; avx2, ..., amx_bf16), 24 GiB ...' ->
    'Intel Xeon, 2 cores, AVX-512 with AMX-BF16'."""
    name = re.sub(r"\((R|TM)\)", "", machine).split("(", 1)[0].split(",", 1)[0]
    name = re.sub(r"\s+", " ", name.replace(" Processor", "")).strip()
    cores = re.search(r"(\d+) cores?", machine)
    flags = set(re.findall(r"[a-z0-9_]+", machine.lower()))
    if "amx_bf16" in flags:
        isa = "AVX-512 with AMX-BF16"
    elif "avx512_bf16" in flags:
        isa = "AVX-512 with AVX512_BF16, no AMX"
    elif "avx512f" in flags:
        isa = "AVX-512, no bf16"
    elif "avx2" in flags:
        isa = "AVX2"
    else:
        isa = ""
    return ", ".join(x for x in (name, cores and f"{cores.group(1)} cores", isa) if x)


def native_bf16(machine):
    return "avx512_bf16" in machine or "amx_bf16" in machine


def torch_version(text):
    m = re.search(r"(\d+\.\d+\.\d+)", text or "")
    return m.group(1) if m else "?"


def peers_table(data, variants, threads):
    """(title lines, models, {variant: [ratio or None per model]}, labels)."""
    meta = data["meta"]
    threads = str(threads or data.get("threads", [1])[0])
    models, table = [], {v: [] for v in variants}
    present = set()
    for row in ordered(data["results"]):
        name = row["model"]
        models.append(name)
        for v in variants:
            entry = row.get("variants", {}).get(v, {})
            t = entry.get("timing", {}).get(threads)
            table[v].append(t["ratio"] if t else None)
            if entry:
                present.add(v)
    variants = [v for v in variants if v in present]
    table = {v: table[v] for v in variants}
    machine = meta.get("machine", "")
    bf16 = native_bf16(machine)
    # ptopt's precision as its own report gives it (-O3's cast decision).
    ptopt_prec = None
    for row in data["results"]:
        for v in ("ptopt-tune", "ptopt-O3"):
            p = (row.get("variants", {}).get(v, {}).get("ptopt") or {}).get("precision")
            if p:
                ptopt_prec = p.split()[0]
                break
        if ptopt_prec:
            break
    precision_of = {
        "ptopt-tune": ptopt_prec or "fp32", "ptopt-O3": ptopt_prec or "fp32", "ptopt-O2": "fp32",
        "compile": "fp32", "compile-max": "fp32", "ort": "fp32", "eager": "fp32",
        "freeze": "fp32", "ofi": "fp32",
        "openvino": "bf16" if bf16 else "fp32",  # its default inference precision on this CPU
        "ptopt-int8": "int8", "ort-int8": "int8", "openvino-int8": "int8",
        "compile-bf16": "bf16", "openvino-fp32": "fp32",
    }
    # What each variant recorded it ran (bench/peers.py since the precision
    # columns: openvino's compiled INFERENCE_PRECISION_HINT, ptopt's report).
    for v in variants:
        recorded = {row.get("variants", {}).get(v, {}).get("precision") for row in data["results"]} - {None}
        if recorded:
            precision_of[v] = "/".join(sorted(recorded))
    labels = {v: f"{LABELS.get(v, v)} ({precision_of.get(v, '?')})" for v in variants}
    precs = sorted({precision_of.get(v, "?") for v in variants})
    tv = torch_version(meta.get("versions", {}).get("torch"))
    thread_words = "1 thread" if threads == "1" else f"{threads} threads"
    title = ["Latency vs the original TorchScript file (lower is faster)",
             f"{short_cpu(machine)}; {thread_words}; batch 1",
             f"precision: {' and '.join(precs)} (each tool's default, in the legend); "
             f"PyTorch {tv}; {meta.get('date', '')}"]
    return title, models, table, labels


def harness_table(data, variants, world):
    rows = data.get("worlds", {}).get(world) if data.get("worlds") else data["models"]
    if rows is None:
        raise SystemExit(f"chart.py: no world '{world}' in this file (it has {', '.join(data['worlds'])})")
    models, table = [], {v: [] for v in variants}
    present = set()
    for row in ordered(rows):
        models.append(row["model"])
        for v in variants:
            entry = row["variants"].get(v)
            table[v].append(entry.get("ratio_1t") if entry else None)
            if entry:
                present.add(v)
    variants = [v for v in variants if v in present]
    table = {v: table[v] for v in variants}
    machine = data["machine"]
    tv = torch_version(machine.split("PyTorch")[-1]) if "PyTorch" in machine else "?"
    bf16 = native_bf16(machine) and world == "native"
    labels = {v: LABELS.get(v, v) for v in variants}
    cpu = short_cpu(machine) + (" capped to AVX2" if world == "avx2" else "")
    title = ["Latency vs the original TorchScript file (lower is faster)",
             f"{cpu}; 1 thread; batch 1",
             f"precision: fp32; -O3 {'bf16 (native here)' if bf16 else 'fp32 (no native bf16)'}; "
             f"PyTorch {tv}; {data.get('date', '')}"]
    return title, models, table, labels


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def draw(title, models, table, labels, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "ptopt", "font.size": 9,
                         "font.family": "DejaVu Sans"})
    variants = list(table)
    complete = [i for i in range(len(models)) if all(table[v][i] is not None for v in variants)]
    rows = list(models)
    if len(complete) > 1:
        rows.append(f"geomean ({len(complete)} models)" if len(complete) < len(models) else "geomean")
        for v in variants:
            table[v] = table[v] + [geomean([table[v][i] for i in complete])]
    n, k = len(rows), len(variants)
    bar = 0.8 / k
    fig, ax = plt.subplots(figsize=(8.0, n * (0.13 * k + 0.14) + 1.9))
    top = max(v for col in table.values() for v in col if v is not None)
    for j, v in enumerate(variants):
        ys = [i + (j - (k - 1) / 2) * bar for i in range(n)]
        xs = [x if x is not None else 0 for x in table[v]]
        ax.barh(ys, xs, height=bar * 0.92, color=COLORS.get(v, None), label=labels[v])
        for y, x in zip(ys, table[v]):
            text = f"{x:.2f}" if x is not None else "failed"
            ax.text((x or 0) + top * 0.008, y, text, va="center", fontsize=7,
                    color="#333333" if x is not None else "#c0504d")
    ax.axvline(1.0, color="#444444", linestyle="--", linewidth=0.8)
    ax.text(1.0, -0.7, " original = 1", fontsize=7, color="#444444", va="center")
    ax.set_yticks(range(n))
    ax.set_yticklabels(rows)
    if len(complete) > 1:
        ax.get_yticklabels()[-1].set_fontweight("bold")
        ax.axhline(n - 1.5, color="#cccccc", linewidth=0.8)
    ax.invert_yaxis()
    ax.set_ylim(n - 0.5, -1.0)
    ax.set_xlim(0, max(1.05, top * 1.12))
    ax.set_xlabel("latency / original's latency (median of interleaved runs)")
    ncol = 2 if k <= 4 else 3
    rows_of_legend = math.ceil(k / ncol)
    ax.set_title("\n".join(title), fontsize=9, loc="left", pad=10 + 12 * rows_of_legend)
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=ncol, fontsize=8, frameon=False,
              borderaxespad=0.2)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fig.savefig(out, metadata={"Date": None} if out.endswith(".svg") else {"Software": None}, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="a JSON file written by bench/peers.py or bench/harness.py")
    ap.add_argument("-o", "--out", help="the chart (.svg or .png; default docs/img/<json name>.svg)")
    ap.add_argument("--variants", help="comma-separated variants, in order (default: see above)")
    ap.add_argument("--threads", help="peers file: the thread count to chart (default: its first)")
    ap.add_argument("--world", default="native", help="harness file: native or avx2 (default native)")
    args = ap.parse_args(argv)
    kind, data = load(args.json)
    variants = args.variants.split(",") if args.variants else (PEERS_DEFAULT if kind == "peers" else HARNESS_DEFAULT)
    if kind == "peers":
        title, models, table, labels = peers_table(data, variants, args.threads)
    else:
        title, models, table, labels = harness_table(data, variants, args.world)
    if not table:
        raise SystemExit(f"chart.py: none of {', '.join(variants)} is in {args.json}")
    out = args.out or os.path.join(ROOT, "docs", "img", os.path.splitext(os.path.basename(args.json))[0] + ".svg")
    draw(title, models, table, labels, out)
    print(f"chart.py: wrote {out} ({', '.join(table)}; {len(models)} models)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
