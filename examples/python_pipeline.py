#!/usr/bin/python3
"""A custom pipeline: optimize, verify, benchmark and draw the diff (docs/python.md).
Usage: examples/python_pipeline.py [IMAGE_SIZE]   (writes resnet18_diff.svg, or .dot without GraphViz)"""
import sys
import torch, torchvision, ptopt

size = int(sys.argv[1]) if len(sys.argv) > 1 else 224
model = torch.jit.script(torchvision.models.resnet18().eval())
x = (torch.randn(1, 3, size, size),)
fold = ptopt.Pipeline.fixpoint("fold-conv-bn", "drop-zero-bias", max_iter=4)
pipeline = ptopt.Pipeline(["canonicalize", "bn-inference", fold, "fuse-add-relu"]).then("cse", "dce")
print("pipeline:", pipeline)
fast = ptopt.optimize(model, pipeline, x)                  # verified on x, or VerificationError
report = ptopt.verify(model, fast, input_shapes=[f"1,3,{size},{size}"], iterations=3)
print("verify:", report.verdict, "| max |a-b|:", report.metrics["out"]["max_abs"])
timing = ptopt.bench(model, fast, x, threads=1, min_time=0.5 if size < 224 else 2.0)
print(f"latency {timing.median_a_ms:.2f} -> {timing.median_b_ms:.2f} ms: {timing.ratio:.3f}x "
      f"(95% CI {timing.ci95[0]:.3f}-{timing.ci95[1]:.3f})")
path = "resnet18_diff.svg" if ptopt._C.graphviz_available() else "resnet18_diff.dot"
d = ptopt.draw(model, path, diff=fast, depth=1)
print(f"wrote {d.path}: {d.added} added, {d.changed} changed, {d.removed} removed")
