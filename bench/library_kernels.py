#!/usr/bin/env python3
"""What the libraries' kernels cost at the models' shapes: the part of the gap to
ONNX Runtime and OpenVINO that no graph rewrite reaches.

    taskset -c 1 .venv/bin/python bench/library_kernels.py [--threads 1] [--rounds 7]
        [--only gemm,activation,int8] [--out bench/results/library_kernels_DATE]

bench/kernel_gap.py splits a model's time into kernels and the time between
them; bench/call_cost.py prices one call. This times the kernels themselves,
one form against another, at shapes the nine peers models run (bench/peers.py),
so that a remaining gap can be put down to a library rather than to ptopt's
graph:

  gemm        an fp32 linear y = x W^T + b (M rows, K in, N out) as PyTorch
              can run it: `linear` (ATen: MKL's SGEMM), MKL's packed weight
              (`mkl::_mkl_linear`), oneDNN's linear (`mkldnn::_linear_pointwise`,
              weight packed), and, where onnxruntime is installed, ONNX
              Runtime's MatMul + Add (its MLAS SGEMM, the kernel its peers
              column runs). Shapes: ConvNeXt-T's MLP linears (3136 and 49
              rows), BERT-base's (128 rows), LeViT-128S's (196, 49 and 16
              rows). Ratios to `linear`.
  activation  the exp/erf activations after a GEMM or conv: GELU alone
              (contiguous input: ATen hands it to oneDNN's eltwise; strided:
              ATen's own kernel), a linear followed by GELU against oneDNN's
              linear with GELU as its post-op, and a conv followed by SiLU
              against oneDNN's conv with swish as its post-op. Ratios to the
              form ptopt writes by default.
  int8        an int8 1x1 conv and a 3x3 depthwise conv (u8 activations, s8
              per-channel weights) on FBGEMM (`quantized::conv2d`, the x86
              engine) and on oneDNN (`onednn::qconv2d_pointwise`), without an
              activation and with swish fused (u8 and fp32 output), and the
              conversions between the two kinds of tensor those ops take
              (`int_repr`: quint8 -> uint8; `_make_per_tensor_quantized_tensor`:
              uint8 -> quint8). Ratios to FBGEMM's conv.

Every form is called from Python (a few µs a call, small beside these
kernels), warmed up, then timed in --rounds rounds of a fixed number of calls,
the forms interleaved; the median µs per call is printed with its ratio. A
form this LibTorch lacks says why. Prints markdown; --out writes OUT.md and
OUT.json.
"""
import argparse
import json
import os
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import machine  # noqa: E402

GEMM_SHAPES = [("ConvNeXt-T stage 1 MLP", 3136, 96, 384), ("ConvNeXt-T stage 4 MLP", 49, 768, 3072),
               ("BERT-base MLP", 128, 768, 3072), ("BERT-base attention output", 128, 768, 768),
               ("LeViT-128S stage 1", 196, 128, 256), ("LeViT-128S stage 2", 49, 256, 512),
               ("LeViT-128S stage 3", 16, 384, 768)]


def attempt(forms, missing, name, build):
    """Adds forms[name] = build(), or records why this LibTorch cannot."""
    try:
        forms[name] = build()
    except (AttributeError, RuntimeError, ImportError) as e:
        missing[name] = str(e).strip().splitlines()[-1][:160]


def ort_linear(x, w, b, threads):
    """ONNX Runtime's MatMul + Add on x, as a callable (its MLAS SGEMM)."""
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    m, k = x.shape
    n = w.shape[0]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])], "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
        [numpy_helper.from_array(w.t().contiguous().numpy(), "w"), numpy_helper.from_array(b.numpy(), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    # Its pool's threads would otherwise spin after each run and slow the
    # form timed next (as in bench/peers.py).
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    feed = {"x": np.ascontiguousarray(x.numpy())}
    return lambda: sess.run(None, feed)


def gemm_cases(threads):
    cases = []
    for title, m, k, n in GEMM_SHAPES:
        x, w, b = torch.randn(m, k), torch.randn(n, k), torch.randn(n)
        forms, missing = {"linear": lambda x=x, w=w, b=b: torch.nn.functional.linear(x, w, b)}, {}

        def mkl(x=x, w=w, b=b, m=m):
            packed = torch.ops.mkl._mkl_reorder_linear_weight(w, m)
            return lambda: torch.ops.mkl._mkl_linear(x, packed, w, b, m)

        def onednn(x=x, w=w, b=b, m=m):
            packed = torch.ops.mkldnn._reorder_linear_weight(w, m)
            return lambda: torch.ops.mkldnn._linear_pointwise(x, packed, b, "none", [], "")

        attempt(forms, missing, "mkl_linear (packed)", mkl)
        attempt(forms, missing, "onednn linear", onednn)
        attempt(forms, missing, "onnxruntime MatMul+Add", lambda x=x, w=w, b=b: ort_linear(x, w, b, threads))
        flops = 2.0 * m * k * n
        cases.append({"section": "gemm", "case": "%s: %d x %d x %d (M x K x N)" % (title, m, k, n), "base": "linear",
                      "forms": forms, "missing": missing, "gflops": flops})
    return cases


def conv_operands(cin, cout, hw, depthwise, make=torch.randn):
    """A channels-last image and the conv's weight and bias: a 1x1 conv, or a
    3x3 depthwise one (padding 1); with its groups, padding and unit strides,
    and a title naming the case."""
    groups, k = (cin, 3) if depthwise else (1, 1)
    x = make(1, cin, hw, hw).contiguous(memory_format=torch.channels_last)
    title = "%s conv %d -> %d at %dx%d" % ("3x3 depthwise" if depthwise else "1x1", cin, cout, hw, hw)
    return x, torch.randn(cout, cin // groups, k, k), torch.randn(cout), groups, [k // 2] * 2, [1, 1], title


def activation_cases():
    cases = []
    h = torch.randn(3136, 384)
    strided = torch.randn(384, 3136).t()
    cases.append({"section": "activation", "case": "GELU on 3136 x 384 (1.2M elements)", "base": "gelu (contiguous)",
                  "forms": {"gelu (contiguous)": lambda: torch.nn.functional.gelu(h),
                            "gelu (strided: ATen's kernel)": lambda: torch.nn.functional.gelu(strided),
                            "gelu tanh approximation": lambda: torch.nn.functional.gelu(h, approximate="tanh")},
                  "missing": {}})
    for m, k, n in [(3136, 96, 384), (128, 768, 3072)]:
        x, w, b = torch.randn(m, k), torch.randn(n, k), torch.randn(n)
        forms, missing = {"linear, gelu": lambda x=x, w=w, b=b: torch.nn.functional.gelu(torch.nn.functional.linear(x, w, b))}, {}

        def fused(attr, x=x, w=w, b=b, m=m):
            packed = torch.ops.mkldnn._reorder_linear_weight(w, m)
            alg = "none" if attr == "gelu" else ""
            return lambda: torch.ops.mkldnn._linear_pointwise(x, packed, b, attr, [], alg)

        attempt(forms, missing, "onednn linear", lambda: fused("none"))
        attempt(forms, missing, "onednn linear + gelu post-op", lambda: fused("gelu"))
        cases.append({"section": "activation", "case": "linear %d x %d x %d with GELU" % (m, k, n),
                      "base": "linear, gelu", "forms": forms, "missing": missing})
    for cin, cout, hw, depthwise in [(16, 96, 112, False), (96, 96, 56, True)]:
        x, w, b, groups, pad, one, title = conv_operands(cin, cout, hw, depthwise)
        forms, missing = {}, {}

        def conv(attr, then_silu, x=x, w=w, b=b, groups=groups, pad=pad, one=one):
            packed = torch.ops.mkldnn._reorder_convolution_weight(w, pad, one, one, groups, list(x.shape))
            run = lambda: torch.ops.mkldnn._convolution_pointwise(x, packed, b, pad, one, one, groups, attr, [], "")
            return (lambda: torch.nn.functional.silu(run(), inplace=True)) if then_silu else run

        attempt(forms, missing, "onednn conv, silu", lambda: conv("none", True))
        attempt(forms, missing, "onednn conv", lambda: conv("none", False))
        attempt(forms, missing, "onednn conv + swish post-op", lambda: conv("swish", False))
        cases.append({"section": "activation", "case": title + " with SiLU", "base": "onednn conv, silu", "forms": forms,
                      "missing": missing})
    return cases


def int8_cases():
    cases = []
    xs, xz = 0.02, 3
    for cin, cout, hw, depthwise in [(16, 96, 112, False), (24, 144, 56, False), (144, 144, 56, True)]:
        x, w, b, groups, pad, one, title = conv_operands(cin, cout, hw, depthwise, make=torch.rand)
        ws = w.abs().amax(dim=(1, 2, 3)) / 127
        qx = torch.quantize_per_tensor(x, xs, xz, torch.quint8)
        qw = torch.quantize_per_channel(w, ws, torch.zeros(cout, dtype=torch.long), 0, torch.qint8)
        forms, missing = {}, {}

        def fbgemm(qx=qx, qw=qw, b=b, groups=groups, pad=pad, one=one):
            packed = torch.ops.quantized.conv2d_prepack(qw, b, one, pad, one, groups)
            return lambda: torch.ops.quantized.conv2d(qx, packed, 0.05, 0)

        def onednn(attr, fp32_out, qx=qx, qw=qw, ws=ws, b=b, groups=groups, pad=pad, one=one, cout=cout):
            u8 = qx.int_repr()
            packed = torch.ops.onednn.qconv_prepack(qw.int_repr(), ws, xs, xz, one, pad, one, groups, list(qx.shape))
            zeros = torch.zeros(cout, dtype=torch.long)
            out_scale, out_dtype = (1.0, torch.float32) if fp32_out else (0.05, None)
            return lambda: torch.ops.onednn.qconv2d_pointwise(u8, xs, xz, packed, ws, zeros, b, one, pad, one, groups,
                                                              out_scale, 0, out_dtype, attr, [], None)

        attempt(forms, missing, "fbgemm quantized::conv2d", fbgemm)
        attempt(forms, missing, "onednn qconv, u8 out", lambda: onednn("none", False))
        attempt(forms, missing, "onednn qconv + swish, u8 out", lambda: onednn("swish", False))
        attempt(forms, missing, "onednn qconv + swish, fp32 out", lambda: onednn("swish", True))
        cases.append({"section": "int8", "case": "int8 " + title, "base": "fbgemm quantized::conv2d", "forms": forms,
                      "missing": missing})
    q = torch.quantize_per_tensor(torch.rand(1, 96, 112, 112).contiguous(memory_format=torch.channels_last), 0.01, 0,
                                  torch.quint8)
    u = q.int_repr()
    cases.append({"section": "int8", "case": "quint8 <-> uint8, 1 x 96 x 112 x 112 (1.2M elements)",
                  "base": "_make_per_tensor_quantized_tensor",
                  "forms": {"_make_per_tensor_quantized_tensor": lambda: torch._make_per_tensor_quantized_tensor(u, 0.01, 0),
                            "int_repr": lambda: q.int_repr()},
                  "missing": {}})
    return cases


def time_forms(forms, rounds, budget_s=0.25):
    """Median µs per call of each form, the forms interleaved round by round;
    each round runs as many calls as fit about budget_s."""
    calls = {}
    for name, fn in forms.items():
        for _ in range(3):  # warm up: primitive caches, MKL's and ORT's buffers
            fn()
        start = time.perf_counter()
        fn()
        calls[name] = max(3, int(budget_s / max(time.perf_counter() - start, 1e-6)))
    runs = {name: [] for name in forms}
    for _ in range(rounds):
        for name, fn in forms.items():
            start = time.perf_counter()
            for _ in range(calls[name]):
                fn()
            runs[name].append((time.perf_counter() - start) / calls[name] * 1e6)
    return {name: statistics.median(v) for name, v in runs.items()}


TITLES = {"gemm": "fp32 GEMMs", "activation": "Activations after a GEMM or conv", "int8": "int8 convs"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", default="gemm,activation,int8")
    ap.add_argument("--out")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    builders = {"gemm": lambda: gemm_cases(args.threads), "activation": activation_cases, "int8": int8_cases}
    wanted = [s for s in args.only.split(",") if s]
    unknown = [s for s in wanted if s not in builders]
    if unknown:
        ap.error("unknown section(s) %s; choose from %s" % (",".join(unknown), ",".join(builders)))
    lines = ["# The libraries' kernels at the models' shapes", "",
             "%s, %d thread(s), torch %s; median µs per call of %d interleaved rounds (calls from Python); the "
             "ratio is to each case's first row. Generated by `bench/library_kernels.py`." % (
                 machine(), args.threads, torch.__version__, args.rounds), ""]
    results = []
    with torch.no_grad():
        for section in wanted:
            lines += ["## %s" % TITLES[section], ""]
            for case in builders[section]():
                us = time_forms(case["forms"], args.rounds)
                base = us[case["base"]]
                head = "| form | µs per call | ratio |%s" % (" GFLOP/s |" if "gflops" in case else "")
                lines += ["### %s" % case["case"], "", head, "|---|---:|---:|%s" % ("---:|" if "gflops" in case else "")]
                for name, t in us.items():
                    rate = " %.1f |" % (case["gflops"] / t / 1e3) if "gflops" in case else ""
                    lines.append("| %s | %.1f | %.2fx |%s" % (name, t, t / base, rate))
                lines += ["| %s | — (%s) | |%s" % (name, why, " |" if "gflops" in case else "")
                          for name, why in case["missing"].items()]
                lines.append("")
                print("\n".join(lines[-(len(us) + len(case["missing"]) + 5):]), flush=True)
                results.append({"section": section, "case": case["case"], "base": case["base"], "us": us,
                                "missing": case["missing"]})
    text = "\n".join(lines)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out + ".md", "w") as fh:
            fh.write(text)
        with open(args.out + ".json", "w") as fh:
            json.dump({"cpu": machine(), "threads": args.threads, "torch": torch.__version__, "rounds": args.rounds,
                       "results": results}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
