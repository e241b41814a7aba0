#!/usr/bin/python3
"""Dynamic int8 LSTM/GRU: ptopt quantize{mode=dynamic} vs torch.ao quantize_dynamic.

    taskset -c 1 /usr/bin/python3 bench/int8_rnn.py [--ptopt build/tools/ptopt]
        [--models lstm,gru] [--batches 1,8] [--reps 15] [--train-steps 60] [--out bench/results]

Models: a 2-layer nn.LSTM / nn.GRU (input 64, hidden 512, sequence-first)
with a linear head (512 -> 4), run on sequences of 50 steps. The weights
compute something meaningful: each model is trained --train-steps Adam steps
(batch 16) on a synthetic sequence task (at each step, which of the first 4
features has the largest running sum), which takes a minute or two at 1
thread. Then, per batch size:

  original  torch.jit.script(model.eval()) (fp32)
  torch.ao  torch.ao.quantization.quantize_dynamic(model, {nn.LSTM, nn.GRU,
            nn.Linear}, dtype=qint8) (per-tensor weights), then torch.jit.script
  ptopt     `ptopt original.pt out.pt --passes '<-O2>,quantize{mode=dynamic}'`
            (rnn-weights=auto: per-tensor unless a row would use under 16
            levels; the held-out batches as --calibration, for its accuracy
            guard)

Latency is the CPU time of this process at 1 thread (torch.set_num_threads(1);
pin it with taskset), median of --reps interleaved runs after a warm-up, as a
ratio to the original. Accuracy is the cosine of the outputs against fp32
and the per-step argmax agreement on 4 held-out batches. Writes
OUT/int8_rnn.md and OUT/int8_rnn.json.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import agreement, measure  # noqa: E402  (bench/timing.py)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FEATURES, HIDDEN, STEPS = 64, 512, 50


def seq_batch(n, gen, steps=STEPS):
    x = torch.randn(steps, n, FEATURES, generator=gen)
    y = x[:, :, :4].cumsum(0).argmax(2)
    return x, y


class Seq(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(FEATURES, HIDDEN, num_layers=2)
        self.head = nn.Linear(HIDDEN, 4)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y)


def make_model(kind, steps, gen):
    torch.manual_seed(0)
    model = Seq(nn.LSTM if kind == "lstm" else nn.GRU)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    for _ in range(steps):
        x, y = seq_batch(16, gen)
        loss = F.cross_entropy(model(x).reshape(-1, 4), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        x, y = seq_batch(64, gen)
        acc = (model(x).argmax(-1) == y).float().mean().item()
    return model, acc


def o2_pipeline(ptopt):
    out = subprocess.run([ptopt, "-O2", "--print-pipeline"], capture_output=True, text=True, check=True).stdout
    return out.strip().splitlines()[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ptopt", default=os.path.join(ROOT, "build", "tools", "ptopt"))
    ap.add_argument("--models", default="lstm,gru")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--train-steps", type=int, default=60)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    engine = torch.backends.quantized.engine
    pipeline = o2_pipeline(args.ptopt) + ",quantize{mode=dynamic}"
    rows = []
    work = tempfile.mkdtemp()
    for kind in args.models.split(","):
        gen = torch.Generator().manual_seed(1)
        model, acc = make_model(kind, args.train_steps, gen)
        print(f"{kind}: trained, per-step accuracy {acc:.3f}", flush=True)
        scripted = torch.jit.script(model)
        ao = torch.jit.script(torch.ao.quantization.quantize_dynamic(model, {nn.LSTM, nn.GRU, nn.Linear},
                                                                     dtype=torch.qint8))
        orig_path = os.path.join(work, f"{kind}.pt")
        torch.jit.save(scripted, orig_path)
        for batch in [int(b) for b in args.batches.split(",")]:
            held = [seq_batch(batch, gen)[0] for _ in range(4)]
            calib_path = os.path.join(work, f"{kind}_{batch}_calib.pt")
            torch.save(held, calib_path)
            out_path = os.path.join(work, f"{kind}_{batch}.int8.pt")
            rep_path = os.path.join(work, f"{kind}_{batch}.json")
            t = time.time()
            proc = subprocess.run([args.ptopt, orig_path, out_path, "--passes", pipeline, "--input-shape",
                                   f"{STEPS},{batch},{FEATURES}", "--calibration", calib_path, "--report", rep_path,
                                   "-q"], capture_output=True, text=True)
            tool_s = time.time() - t
            if proc.returncode != 0 or not os.path.exists(out_path):
                print(f"{kind}: ptopt failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}", file=sys.stderr)
                continue
            report = json.load(open(rep_path)).get("quantize", {})
            q = torch.jit.load(out_path)
            code = q.code
            assert f"quantized_{kind}" in code, code
            x = held[0]
            fns = {"original": lambda: scripted(x), "ao": lambda: ao(x), "ptopt": lambda: q(x)}
            with torch.no_grad():
                med = measure(fns, args.reps)
            ao_cos, ao_top1 = agreement(scripted, ao, held)
            pt_cos, pt_top1 = agreement(scripted, q, held)
            row = {"model": f"{kind} 2x{HIDDEN}", "batch": batch, "seq": STEPS, "engine": engine,
                   "original_ms": med["original"] * 1e3, "ao_ratio": med["ao"] / med["original"],
                   "ptopt_ratio": med["ptopt"] / med["original"], "ao_cosine": ao_cos, "ao_top1": ao_top1,
                   "ptopt_cosine": pt_cos, "ptopt_top1": pt_top1,
                   "ptopt_rnn_sqnr_db": next((op["sqnr_db"] for op in report.get("ops", [])
                                              if op.get("kind", "").endswith("_dynamic") and "linear" not in op["kind"]),
                                             None),
                   "ptopt_tool_s": tool_s}
            rows.append(row)
            print(json.dumps(row), flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "int8_rnn.json"), "w") as f:
        json.dump(rows, f, indent=1)
    lines = ["| model | batch x seq | original ms (1 thread) | torch.ao ratio | torch.ao cosine / agree | "
             "ptopt ratio | ptopt cosine / agree |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['batch']}x{r['seq']} | {r['original_ms']:.1f} | {r['ao_ratio']:.2f} | "
                     f"{r['ao_cosine']:.5f} / {100 * r['ao_top1']:.1f}% | {r['ptopt_ratio']:.2f} | "
                     f"{r['ptopt_cosine']:.5f} / {100 * r['ptopt_top1']:.1f}% |")
    with open(os.path.join(args.out, "int8_rnn.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
