#!/usr/bin/python3
"""int8 post-training quantization: ptopt --quantize int8 vs torch.ao FX PTQ.

    taskset -c 1 /usr/bin/python3 bench/int8.py [--ptopt build/tools/ptopt]
        [--models resnet18,resnet50,mobilenet_v2] [--reps 15] [--out bench/results]

For each torchvision model (1x3x224x224) the benchmark makes the weights
compute something meaningful: the BatchNorm statistics are calibrated on
data (a few forward passes in train mode over synthetic images: smooth
random fields plus colored blobs, no gradient steps), so activations have
realistic ranges and the logits are not degenerate; the last BatchNorm scale
of every residual branch is halved (random deep nets are chaotic: rounding
the input to 8 bits alone moved mobilenet_v2's logits to cosine 0.97; trained
nets' residual updates are small). Then:

  original  torch.jit.script(model.eval()) (fp32)
  fx        torch.ao FX graph-mode PTQ (get_default_qconfig_mapping for the
            default engine, prepare_fx, calibration on the same batches,
            convert_fx), then torch.jit.script + freeze
  ptopt     `ptopt original.pt out.pt -O2 --quantize int8 --calibration C`

Latency is the CPU time of this process at 1 thread (torch.set_num_threads(1);
pin the process with taskset for steadier numbers), median of --reps
interleaved runs after a warm-up, as a ratio to the original. Accuracy is
the cosine of the logits against fp32 and the top-1 agreement, on held-out
batches drawn like the calibration batches. Writes OUT/int8.md and OUT/int8.json.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import agreement, measure  # noqa: E402  (bench/timing.py)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def images(n, gen):
    """Smooth random fields with colored blobs, normalized like ImageNet inputs."""
    x = F.interpolate(torch.randn(n, 3, 14, 14, generator=gen), size=224, mode="bilinear", align_corners=False)
    for i in range(n):
        for _ in range(3):
            r, c = torch.randint(0, 160, (2,), generator=gen).tolist()
            x[i, :, r:r + 64, c:c + 64] += torch.randn(3, 1, 1, generator=gen) * 1.5
    return x


def make_model(name, gen):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)()
    # BatchNorm statistics from data (momentum None: a cumulative average).
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(8):
            model(images(8, gen))
        # Random deep nets are chaotic (1-LSB noise on the input alone gave
        # mobilenet_v2 a logit cosine of 0.97): halve the last BN scale of
        # every residual branch, as trained nets' residual updates are small.
        for m in model.modules():
            if isinstance(m, torchvision.models.resnet.Bottleneck):
                m.bn3.weight.mul_(0.5)
            if isinstance(m, torchvision.models.resnet.BasicBlock):
                m.bn2.weight.mul_(0.5)
            if isinstance(m, torchvision.models.mobilenetv2.InvertedResidual) and m.use_res_connect:
                m.conv[-1].weight.mul_(0.5)
    return model.eval()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ptopt", default=os.path.join(ROOT, "build", "tools", "ptopt"))
    ap.add_argument("--models", default="resnet18,resnet50,mobilenet_v2")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--calibration-batches", type=int, default=16)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    engine = torch.backends.quantized.engine
    rows = []
    work = tempfile.mkdtemp()
    for name in args.models.split(","):
        gen = torch.Generator().manual_seed(1)
        model = make_model(name, gen)
        calib = [images(1, gen) for _ in range(args.calibration_batches)]
        held = [images(1, gen) for _ in range(8)]
        scripted = torch.jit.script(model)
        orig_path = os.path.join(work, f"{name}.pt")
        torch.jit.save(scripted, orig_path)
        calib_path = os.path.join(work, f"{name}_calib.pt")
        torch.save(calib, calib_path)

        qmap = get_default_qconfig_mapping(engine)
        prepared = prepare_fx(model, qmap, (calib[0],))
        with torch.no_grad():
            for x in calib:
                prepared(x)
        fx = torch.jit.freeze(torch.jit.script(convert_fx(prepared)))

        out_path = os.path.join(work, f"{name}.int8.pt")
        rep_path = os.path.join(work, f"{name}.json")
        t = time.time()
        proc = subprocess.run([args.ptopt, orig_path, out_path, "-O2", "--quantize", "int8", "--input-shape",
                               "1,3,224,224", "--calibration", calib_path, "--report", rep_path, "-q"],
                              capture_output=True, text=True)
        tool_s = time.time() - t
        if proc.returncode != 0 or not os.path.exists(out_path):
            print(f"{name}: ptopt failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}", file=sys.stderr)
            continue
        report = json.load(open(rep_path)).get("quantize", {})
        q = torch.jit.load(out_path)
        x = torch.randn(1, 3, 224, 224)
        fns = {"original": lambda: scripted(x), "fx": lambda: fx(x), "ptopt": lambda: q(x)}
        with torch.no_grad():
            med = measure(fns, args.reps)
        fx_cos, fx_top1 = agreement(scripted, fx, held)
        pt_cos, pt_top1 = agreement(scripted, q, held)
        kept = [op["op"] for op in report.get("ops", []) if op.get("fp32")]
        row = {"model": name, "engine": engine, "original_ms": med["original"] * 1e3,
               "fx_ratio": med["fx"] / med["original"], "ptopt_ratio": med["ptopt"] / med["original"],
               "fx_cosine": fx_cos, "fx_top1": fx_top1, "ptopt_cosine": pt_cos, "ptopt_top1": pt_top1,
               "ptopt_fp32_ops": len(kept), "ptopt_tool_s": tool_s}
        rows.append(row)
        print(json.dumps(row), flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "int8.json"), "w") as f:
        json.dump(rows, f, indent=1)
    lines = ["| model | original ms (1 thread) | FX PTQ ratio | FX cosine / top-1 | ptopt ratio | ptopt cosine / top-1 | ops kept fp32 |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['original_ms']:.1f} | {r['fx_ratio']:.2f} | {r['fx_cosine']:.4f} / "
                     f"{100 * r['fx_top1']:.0f}% | {r['ptopt_ratio']:.2f} | {r['ptopt_cosine']:.4f} / "
                     f"{100 * r['ptopt_top1']:.0f}% | {r['ptopt_fp32_ops']} |")
    with open(os.path.join(args.out, "int8.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
