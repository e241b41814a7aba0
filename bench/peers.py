#!/usr/bin/env python3
"""ptopt beside what deployment engineers pick instead (issue 34): torch.compile,
ONNX Runtime and OpenVINO on the same models, timed in the same process.

    .venv/bin/python bench/peers.py [--ptopt build-torch2/tools/ptopt]
        [--models resnet50,mobilenet_v2,...] [--threads 1,all] [--rounds 15]
        [--variants original,eager,...] [--work DIR] [--out bench/results/peers]

Needs the PyTorch 2.x world (.venv, scripts/setup-torch2.sh); the peers are
optional (`scripts/setup-peers.sh` installs them into .venv) and each missing
one is reported as "not installed": onnx + onnxruntime, openvino,
transformers (BERT, GPT-2), timm.

Models (random weights, no download; eval mode):
  torchvision  resnet50, mobilenet_v2, efficientnet_b0, convnext_tiny, vit_b_16
               (scripted; 1x3x224x224; BatchNorm statistics randomized as
               bench/harness.py does, so that folds are not identities)
  transformers bert_base (BertModel, BertConfig's defaults: 12 layers, 768
               wide) and gpt2_small (GPT2Model, GPT2Config's defaults), traced
               with torchscript=True, 1x128 tokens (BERT with an attention
               mask whose last 16 positions are padding)
  timm         levit_128s (attention with BatchNorm'd linears, hardswish) and
               ghostnet_100 (ghost modules, hard-sigmoid SE), traced

Variants, per model (a variant that cannot be built says why in the tables):
  original     the TorchScript file (torch.jit.load), the denominator
  eager        the PyTorch module itself
  freeze       torch.jit.freeze of the original
  ofi          torch.jit.optimize_for_inference of it
  compile      torch.compile(eager), Inductor with freezing=True (default mode)
  compile-max  the same with mode="max-autotune"
  compile-bf16 torch.compile of the eager model run under
               torch.autocast("cpu", dtype=torch.bfloat16), otherwise as
               compile; built only on a CPU with native bf16 (below)
  ort          ONNX Runtime, CPU EP, ORT_ENABLE_ALL, from torch.onnx.export of
               the eager model
  ort-int8     ONNX Runtime on its own int8 model: quantize_static (QDQ,
               per-channel s8 weights, u8 activations, 16 calibration batches
               drawn like the inputs) for the vision models, quantize_dynamic
               for the text models
  openvino     OpenVINO's CPU plugin on the ONNX file, at its default inference
               precision (bf16 on a CPU with bf16 instructions; the notes
               give the compiled model's INFERENCE_PRECISION_HINT)
  openvino-fp32  the same with INFERENCE_PRECISION_HINT=f32, built where
               OpenVINO's default is not f32
  openvino-int8  OpenVINO on ORT's QDQ int8 file (OpenVINO's own int8 needs
               NNCF, a separate training-tools package)
  ptopt-O2, ptopt-O3, ptopt-tune (-O3 --tune with --tune-threads naming
               every count of the run, so that one file serves them all: tuned
               once with each count first, the run's first count's file kept
               unless another's is faster at one count and slower at none; a
               fresh cache), ptopt-tune-desc (the same with the counts from
               the most threads down, so that the most threads' file is the
               one kept unless another wins), ptopt-tune-n
               (the same tuned for the one count it runs at, --tune-threads N:
               a file per count, as a deployment that knows its count makes
               it; its never-slower verdict timed there too), ptopt-int8 (--quantize int8 with the same calibration
               batches for the vision models; -O1,quantize{mode=dynamic} for
               the text models), ptopt-int8-tune (the same with --tune, as
               ptopt-tune tunes: the int8 candidates, such as oneDNN's int8
               conv with its activation fused, decided on this machine):
               the ptopt CLI's output files, verified by ptopt and loaded
               with torch.jit.load

Timing: for each thread count (1, and all of this machine's cores) every
variant is built for that count (ORT and OpenVINO sessions, torch.compile's
code, whose OpenMP thread count is fixed when it compiles), warmed up 3
times, then all variants run once per round, in a shuffled order, for
--rounds rounds. The ratio of a round is the variant's time over the
original's in that round (1 thread: CPU time of the process, which counts
every runtime's threads; all threads: wall time); the table gives the median
ratio and its 95% confidence interval (order statistics of the rounds'
ratios). ORT's intra-op threads do not spin between runs at all threads
(allow_spinning=0), so that one runtime's spinning threads do not slow the
next variant in the round.

Precision, like with like: a CPU has native bf16 when /proc/cpuinfo lists
avx512_bf16 or amx_bf16 and oneDNN is not capped below them
(ONEDNN_MAX_CPU_ISA, which scripts/avx2-cap.sh sets to AVX2). ptopt -O3
computes in bf16 there and in fp32 elsewhere; the precision it chose is read
from its report (a `--tune` that kept every op in fp32, or a written
fallback, counts as fp32). Two columns per thread count compare ptopt with
peers at its own precision:
  tune / best peer   ptopt-tune's ratio over the fastest peer that ran at
                     ptopt-tune's precision: bf16: openvino (when it ran
                     bf16), compile-bf16; fp32: ort, openvino-fp32,
                     openvino (when it ran f32); the cell names the precision
                     and the peer, and gives ptopt-tune-n's (`for N`) where
                     it ran
  int8 / ORT int8    ptopt-int8's ratio over ort-int8's, and beside it
                     (`tune`) ptopt-int8-tune's where it ran; not counted
                     (the cell says why) where ORT's int8 outputs have a
                     cosine below 0.99 against the original's
and a line under each table counts the models within 1.15x on each. Under a
CPU cap (scripts/avx2-cap.sh) ONNX Runtime, whose kernels pick their
instructions by CPUID, is not an AVX2 CPU's figure: it is left out of both
columns (its int8 ratio is shown, uncounted). The JSON
carries them per model (`comparisons`, by thread count) and as a `summary`.

Numerics: every variant's outputs on the first input against the original's
(max abs error, cosine of all outputs flattened). Files: whether the variant
is a file, and whether it reloads (stock PyTorch for TorchScript, ORT for
.onnx, OpenVINO for its IR).

Writes OUT.md and OUT.json; prints the markdown.
"""
import argparse
import json
import math
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

warnings.filterwarnings("ignore")  # torch.jit's deprecation warnings, exporters' chatter

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))

VISION = ["resnet50", "mobilenet_v2", "efficientnet_b0", "convnext_tiny", "vit_b_16"]
TEXT = ["bert_base", "gpt2_small"]
TIMM = ["levit_128s", "ghostnet_100"]
ALL_MODELS = VISION + TEXT + TIMM
VARIANTS = ["original", "eager", "freeze", "ofi", "compile", "compile-max", "compile-bf16", "ort", "ort-int8",
            "openvino", "openvino-fp32", "openvino-int8", "ptopt-O2", "ptopt-O3", "ptopt-tune", "ptopt-tune-desc",
            "ptopt-tune-n", "ptopt-int8", "ptopt-int8-tune"]
PEERS = ["eager", "freeze", "ofi", "compile", "compile-max", "compile-bf16", "ort", "ort-int8", "openvino",
         "openvino-fp32", "openvino-int8"]
# The peers `tune / best peer` may compare with: those whose precision (the
# variant's "precision" in the JSON) is ptopt-tune's.
SAME_PRECISION_PEERS = ["ort", "openvino", "openvino-fp32", "compile-bf16"]
# Each variant's precision where it is fixed; openvino, openvino-fp32 and
# ptopt's -O2/-O3/--tune record what they ran (the compiled model's
# INFERENCE_PRECISION_HINT, ptopt's report).
FIXED_PRECISION = {"original": "fp32", "eager": "fp32", "freeze": "fp32", "ofi": "fp32", "compile": "fp32",
                   "compile-max": "fp32", "compile-bf16": "bf16", "ort": "fp32", "ort-int8": "int8",
                   "openvino-int8": "int8", "ptopt-int8": "int8", "ptopt-int8-tune": "int8"}
WITHIN = 1.15       # the target: within this factor of the peer
MIN_COSINE = 0.99   # an int8 peer whose outputs are further from the original's does not count
SEQ = 128


class Unavailable(Exception):
    """A variant that cannot be built here; the message says why."""


def optional(module):
    try:
        return __import__(module)
    except ImportError:
        raise Unavailable("%s not installed (scripts/setup-peers.sh)" % module)


def first_line(text):
    lines = [l for l in str(text).strip().splitlines() if l.strip()]
    return (lines[0] if lines else "").strip()[:160]


# Values of ONEDNN_MAX_CPU_ISA below bf16 instructions (oneDNN's names).
ISA_WITHOUT_BF16 = {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI"}


def native_bf16():
    """(True or False, why): does this CPU compute bf16 natively, as oneDNN
    sees it? avx512_bf16 or amx_bf16 in /proc/cpuinfo, and oneDNN not capped
    below them (scripts/avx2-cap.sh sets ONEDNN_MAX_CPU_ISA=AVX2)."""
    try:
        with open("/proc/cpuinfo") as fh:
            flags = set()
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        flags = set()
    have = [f for f in ("avx512_bf16", "amx_bf16") if f in flags]
    if not have:
        return False, "no native bf16 on this CPU (neither avx512_bf16 nor amx_bf16 in /proc/cpuinfo)"
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    if cap in ISA_WITHOUT_BF16:
        return False, "no native bf16 on this CPU as capped (ONEDNN_MAX_CPU_ISA=%s; the CPU has %s)" % (
            cap, ", ".join(have))
    return True, "native bf16 (%s)" % ", ".join(have)


# ---------------------------------------------------------------- models ---

class Spec:
    def __init__(self, name, family, mode, build, make_inputs, text=False):
        self.name, self.family, self.mode, self.build, self.make_inputs, self.text = (
            name, family, mode, build, make_inputs, text)


def image_inputs(gen):
    return (torch.randn(1, 3, 224, 224, generator=gen),)


def bert_inputs(gen):
    ids = torch.randint(0, 30522, (1, SEQ), generator=gen)
    mask = torch.ones(1, SEQ, dtype=torch.long)
    mask[:, -16:] = 0
    return ids, mask


def gpt2_inputs(gen):
    return (torch.randint(0, 50257, (1, SEQ), generator=gen),)


def torchvision_model(name):
    import torchvision
    from make_fixtures import randomize_bn
    model = randomize_bn(getattr(torchvision.models, name)(weights=None)).eval()
    # Layers initialized to zero (ViT's head) get random weights: with them
    # every output is 0 and no comparison of numerics says anything.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Linear) and not m.weight.any():
                torch.nn.init.normal_(m.weight, std=0.02)
    return model


def bert_model():
    transformers = optional("transformers")
    # torchscript=True unties the embeddings for tracing; return_dict=False
    # gives tuples (transformers 5 returns dicts unless told, which trace refuses).
    config = transformers.BertConfig(torchscript=True, return_dict=False)
    return transformers.BertModel(config, add_pooling_layer=True).eval()


def gpt2_model():
    transformers = optional("transformers")
    config = transformers.GPT2Config(torchscript=True, use_cache=False, return_dict=False)
    return transformers.GPT2Model(config).eval()


def timm_model(name):
    timm = optional("timm")
    from make_fixtures import randomize_bn
    return randomize_bn(timm.create_model(name, pretrained=False)).eval()


def specs():
    out = {n: Spec(n, "torchvision", "script", lambda n=n: torchvision_model(n), image_inputs) for n in VISION}
    out["bert_base"] = Spec("bert_base", "transformers", "trace", bert_model, bert_inputs, text=True)
    out["gpt2_small"] = Spec("gpt2_small", "transformers", "trace", gpt2_model, gpt2_inputs, text=True)
    for n in TIMM:
        out[n] = Spec(n, "timm", "trace", lambda n=n: timm_model(n), image_inputs)
    return out


def flat_outputs(out):
    """Every tensor of a model's output, in order (tuples, lists, dicts, ModelOutputs)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in flat_outputs(v)]
    if isinstance(out, (tuple, list)):
        return [t for v in out for t in flat_outputs(v)]
    if hasattr(out, "to_tuple"):
        return flat_outputs(out.to_tuple())
    import numpy as np
    if isinstance(out, np.ndarray):
        return [torch.from_numpy(out)]
    return []


def numerics(ref, got):
    a = torch.cat([t.detach().double().flatten() for t in ref])
    b = torch.cat([t.detach().double().flatten() for t in got])
    if a.numel() != b.numel():
        return {"error": "outputs differ in size (%d vs %d values)" % (a.numel(), b.numel())}
    cos = float(torch.dot(a, b) / (a.norm() * b.norm()).clamp_min(1e-300))
    return {"max_abs": float((a - b).abs().max()), "cosine": cos}


# -------------------------------------------------------------- variants ---

class Context:
    """What the builders share for one model: the eager model, its inputs, the
    original file, calibration batches, and files made once (ONNX, QDQ)."""

    def __init__(self, args, spec, work):
        self.args, self.spec, self.work = args, spec, work
        gen = torch.Generator().manual_seed(0)
        torch.manual_seed(0)
        self.eager = spec.build()
        self.inputs = spec.make_inputs(gen)
        self.calibration = [spec.make_inputs(gen) for _ in range(16)]
        self.original_path = os.path.join(work, spec.name + ".pt")
        with torch.no_grad():
            if spec.mode == "script":
                scripted = torch.jit.script(self.eager)
            else:
                scripted = torch.jit.trace(self.eager, self.inputs, check_trace=False)
        scripted.save(self.original_path)
        self.inputs_path = os.path.join(work, spec.name + ".inputs.pt")
        torch.save(self.inputs if len(self.inputs) > 1 else self.inputs[0], self.inputs_path)
        self.calibration_path = os.path.join(work, spec.name + ".calibration.pt")
        torch.save([c if len(c) > 1 else c[0] for c in self.calibration], self.calibration_path)
        self.input_names = ["input_ids", "attention_mask"][:len(self.inputs)] if spec.text else ["x"]
        self._onnx = self._qdq = None
        self.ptopt_files = {}

    def onnx_path(self):
        if self._onnx is None:
            optional("onnx")
            path = os.path.join(self.work, self.spec.name + ".onnx")
            errors = []
            for dynamo in (False, True):
                try:
                    with torch.no_grad():
                        torch.onnx.export(self.eager, self.inputs, path, input_names=self.input_names,
                                          opset_version=17, dynamo=dynamo)
                    self._onnx = path
                    break
                except Exception as e:  # noqa: BLE001 - try the other exporter, then report both
                    errors.append("dynamo=%s: %s" % (dynamo, first_line(e)))
            if self._onnx is None:
                raise Unavailable("torch.onnx.export failed (%s)" % "; ".join(errors))
        return self._onnx

    def feeds(self, inputs):
        return {n: t.numpy() for n, t in zip(self.input_names, inputs)}

    def qdq_path(self):
        if self._qdq is None:
            optional("onnxruntime")
            from onnxruntime import quantization as q
            src = self.onnx_path()
            path = os.path.join(self.work, self.spec.name + ".int8.onnx")
            if self.spec.text:
                q.quantize_dynamic(src, path, weight_type=q.QuantType.QInt8)
            else:
                batches = iter([self.feeds(c) for c in self.calibration])

                class Reader(q.CalibrationDataReader):
                    def get_next(self):
                        return next(batches, None)

                pre = os.path.join(self.work, self.spec.name + ".pre.onnx")
                try:
                    q.quant_pre_process(src, pre)
                except Exception:  # noqa: BLE001 - the pre-processing is an optimization only
                    pre = src
                q.quantize_static(pre, path, Reader(), quant_format=q.QuantFormat.QDQ, per_channel=True,
                                  activation_type=q.QuantType.QUInt8, weight_type=q.QuantType.QInt8)
            self._qdq = path
        return self._qdq


def torch_runner(module):
    def run(inputs):
        with torch.no_grad():
            return module(*inputs)
    return run


def saved_reloads(module, work, name):
    path = os.path.join(work, name + ".reload.pt")
    try:
        torch.jit.save(module, path)
        torch.jit.load(path)
        return "reloads"
    except Exception as e:  # noqa: BLE001
        return "does not reload (%s)" % first_line(e)
    finally:
        if os.path.exists(path):
            os.remove(path)


def build_torchscript(ctx, name, threads):
    original = torch.jit.load(ctx.original_path).eval()
    if name == "original":
        return torch_runner(original), "TorchScript file, reloads"
    frozen = torch.jit.freeze(original)
    if name == "freeze":
        return torch_runner(frozen), "TorchScript, " + saved_reloads(frozen, ctx.work, "freeze")
    ofi = torch.jit.optimize_for_inference(frozen)
    return torch_runner(ofi), "TorchScript, " + saved_reloads(ofi, ctx.work, "ofi")


class AutocastBf16(torch.nn.Module):
    """The eager model run under torch.autocast("cpu", bf16): compile-bf16."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *inputs):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return self.model(*inputs)


def build_compile(ctx, name, threads):
    if name == "compile-bf16":
        ok, why = native_bf16()
        if not ok:
            raise Unavailable("not built: " + why)
    import torch._dynamo
    import torch._inductor.config as inductor_config
    torch._dynamo.reset()
    inductor_config.freezing = True
    mode = "max-autotune" if name == "compile-max" else None
    compiled = torch.compile(AutocastBf16(ctx.eager).eval() if name == "compile-bf16" else ctx.eager, mode=mode)
    run = torch_runner(compiled)
    t0 = time.perf_counter()
    run(ctx.inputs)  # compiles now, for this thread count
    return run, "no file (compiled in the process, %.0f s)" % (time.perf_counter() - t0)


def ort_session(path, threads):
    ort = optional("onnxruntime")
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if threads > 1:
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def build_ort(ctx, name, threads):
    path = ctx.qdq_path() if name == "ort-int8" else ctx.onnx_path()
    sess = ort_session(path, threads)
    run = lambda inputs: sess.run(None, ctx.feeds(inputs))  # noqa: E731
    return run, "ONNX file, reloads in ONNX Runtime"


OPENVINO_CANARY = r'''
import json, sys, numpy as np, openvino as ov
path, npz, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
extra = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
core = ov.Core()
compiled = core.compile_model(core.read_model(path), "CPU",
                              dict({"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"}, **extra))
compiled.create_infer_request().infer(dict(np.load(npz)))
'''


def survives_in_a_child(ctx, name, code, path, threads, *extra):
    """Compiles and runs `path` once in a child process first: a runtime that
    crashes the process (OpenVINO's int8 GhostNet: SIGSEGV) would otherwise
    end the whole benchmark. Raises Unavailable, naming the signal."""
    npz = os.path.join(ctx.work, "%s.feeds.npz" % ctx.spec.name)
    if not os.path.exists(npz):
        import numpy as np
        np.savez(npz, **ctx.feeds(ctx.inputs))
    proc = subprocess.run([sys.executable, "-c", code, path, npz, str(threads)] + list(extra), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=ctx.args.build_timeout or None)
    if proc.returncode < 0:
        import signal
        raise Unavailable("%s crashed the process (%s) compiling or running %s; left out (checked in a child "
                          "process)" % (name, signal.Signals(-proc.returncode).name, os.path.basename(path)))
    if proc.returncode != 0:
        lines = [l for l in proc.stdout.splitlines() if l.strip()]
        raise Unavailable("%s failed in a child process: %s" % (name, lines[-1] if lines else "exit %d" % proc.returncode))


def openvino_precision(value):
    """OpenVINO's element type (INFERENCE_PRECISION_HINT) as this file names
    precisions: bf16, fp32, fp16."""
    name = value.get_type_name() if hasattr(value, "get_type_name") else str(value)
    return {"f32": "fp32", "bf16": "bf16", "f16": "fp16"}.get(name, name)


def openvino_default_precision():
    ov = optional("openvino")
    return openvino_precision(ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT"))


def build_openvino(ctx, name, threads):
    ov = optional("openvino")
    path = ctx.qdq_path() if name == "openvino-int8" else ctx.onnx_path()
    config = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"}
    extra = {}
    if name == "openvino-fp32":
        default = openvino_default_precision()
        if default == "fp32":
            raise Unavailable("not built: OpenVINO's default is f32 here (the openvino column)")
        extra = {"INFERENCE_PRECISION_HINT": "f32"}
    try:
        survives_in_a_child(ctx, name, OPENVINO_CANARY, path, threads, json.dumps(extra))
    except Unavailable as e:
        cap = os.environ.get("ONEDNN_MAX_CPU_ISA")
        if cap and name != "openvino-fp32":
            # OpenVINO reads CPUID itself: under the cap it still picks bf16, which its capped oneDNN cannot
            # build. On a CPU that really has only AVX2 its default is f32: openvino-fp32 stands for it.
            raise Unavailable("%s (default precision %s, ONEDNN_MAX_CPU_ISA=%s; openvino-fp32 stands for OpenVINO "
                              "on such a CPU)" % (e, openvino_default_precision(), cap))
        raise
    core = ov.Core()
    model = core.read_model(path)
    compiled = core.compile_model(model, "CPU", dict(config, **extra))
    precision = openvino_precision(compiled.get_property("INFERENCE_PRECISION_HINT"))
    if name == "openvino-int8":
        precision = "int8"  # QDQ; what is not quantized runs at `precision`
    request = compiled.create_infer_request()

    def run(inputs):
        request.infer(ctx.feeds(inputs))
        return [request.get_output_tensor(i).data.copy() for i in range(len(compiled.outputs))]

    ir_path = os.path.join(ctx.work, "%s.%s.xml" % (ctx.spec.name, name))
    try:
        ov.save_model(model, ir_path)
        core.read_model(ir_path)
        file = "OpenVINO IR file, reloads in OpenVINO"
    except Exception as e:  # noqa: BLE001
        file = "OpenVINO IR does not reload (%s)" % first_line(e)
    return run, file, precision


def shared_tune_args(ctx, cache, descending=False):
    """--tune for one file serving every thread count of the run: a fresh
    cache, and --tune-threads naming the counts (tuned with each first; the
    first count's file kept unless another's wins); `descending` puts the
    most threads first."""
    counts = sorted(getattr(ctx.args, "threads_list", None) or [1], reverse=True) if descending else \
        (getattr(ctx.args, "threads_list", None) or [1])
    extra = ["--tune-threads", ",".join(str(n) for n in counts)] if len(counts) > 1 else []
    return ["--tune", "--tuning-cache", os.path.join(ctx.work, ctx.spec.name + cache)] + extra


def ptopt_args(ctx, name, threads=None):
    if name == "ptopt-O2":
        return ["-O2"]
    if name == "ptopt-O3":
        return ["-O3"]
    if name == "ptopt-tune":
        return ["-O3"] + shared_tune_args(ctx, ".tuning.json")
    if name == "ptopt-tune-desc":
        # Per-op choices timed at the most threads, confirmed at the fewer (--tune-threads 2,1).
        return ["-O3"] + shared_tune_args(ctx, ".tuning-desc.json", descending=True)
    if name == "ptopt-tune-n":
        # Tuned for this count alone (decisions timed there, the never-slower
        # verdict too: --measure-threads follows the first --tune-threads).
        return ["-O3", "--tune", "--tune-threads", str(threads), "--tuning-cache",
                os.path.join(ctx.work, "%s.tuning-%d.json" % (ctx.spec.name, threads))]
    int8 = (["--passes", "-O1,quantize{mode=dynamic}"] if ctx.spec.text
            else ["--quantize", "int8", "--calibration", ctx.calibration_path])
    if name == "ptopt-int8-tune":
        return int8 + shared_tune_args(ctx, ".int8-tuning.json")
    return int8


TUNED_DTYPES = {"fp32": "fp32", "float32": "fp32", "bfloat16": "bf16", "bf16": "bf16", "float16": "fp16",
                "half": "fp16", "fp16": "fp16"}


def ptopt_precision(info):
    """The precision a ptopt file computes in, from what make_ptopt_file
    kept of its report: bf16, fp16 or fp32 (int8 for --quantize's files is
    FIXED_PRECISION's). The file written is a fallback (never slower:
    "input", "fp32 structure"): fp32. --tune chose op by op over the
    preset's precision (its whole-model "precision" decision): the lowest
    precision any op it timed kept (the file's numerics are that
    precision's, as ptopt's own criterion has it; a GhostNet with 19 of 96
    ops in bf16 is compared with bf16 peers). Otherwise -O3's cast decision
    (`precision`: "bf16 (cast{dtype=auto}): ...", "fp32 kept ...")."""
    if not info:
        return None
    written = (info.get("measurement") or {}).get("written")
    if written in ("input", "fp32 structure"):
        return "fp32"
    # The pipeline that ran: --tune writes the cast it kept with its dtype
    # spelled out (no dtype=auto note then), and drops it when every op
    # stayed fp32 (a --quantize file's int8 is FIXED_PRECISION's).
    cast = re.search(r"(?:^|,)cast\{[^}]*dtype=(bf16|fp16|bfloat16|float16)", info.get("pipeline") or "")
    if cast:
        return TUNED_DTYPES[cast.group(1)]
    if info.get("pipeline") and not re.search(r"(?:^|,)cast\b", info["pipeline"]):
        return "fp32"
    note = (info.get("precision") or "").strip()
    word = note.split()[0].rstrip(":;,") if note else "fp32"
    if word not in ("bf16", "fp16", "fp32"):
        word = "fp32"
    ops = info.get("precision_ops") or {}
    model = info.get("precision_model")
    if ops and (model or "").startswith("op-by-op"):
        kept = {TUNED_DTYPES.get(choice, choice) for choice, n in ops.items() if n}
        for d in ("fp16", "bf16"):
            if d in kept:
                return d
        return "fp32"
    return word


# Variants whose file is made for each thread count of the run.
PER_COUNT = {"ptopt-tune-n"}


def make_ptopt_file(ctx, name, args=None, threads=None):
    """Runs the ptopt CLI once per model and variant (at 1 thread, as the
    README's `--tune` does on a 1-thread target; a PER_COUNT variant once
    per thread count, `threads`); its verdict is kept. `args` replaces the
    variant's arguments (bench/kernel_gap.py's --ptopt-args)."""
    key = "%s@%d" % (name, threads) if name in PER_COUNT else name
    if key in ctx.ptopt_files:
        return ctx.ptopt_files[key]
    if not ctx.args.ptopt or not os.path.exists(ctx.args.ptopt):
        raise Unavailable("no ptopt binary (--ptopt)")
    out = os.path.join(ctx.work, "%s.%s.pt" % (ctx.spec.name, key.replace("@", "-")))
    report = out + ".json"
    cmd = [ctx.args.ptopt, ctx.original_path, out] + (ptopt_args(ctx, name, threads) if args is None else list(args)) + [
        "--inputs", ctx.inputs_path, "--overwrite", "-q", "--report", report]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=ctx.args.ptopt_timeout)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0 or not os.path.exists(out):
        lines = [l for l in proc.stdout.splitlines() if "error" in l.lower() or "fail" in l.lower()]
        raise Unavailable("ptopt exit %d: %s" % (proc.returncode, first_line(lines[0] if lines else proc.stdout)))
    with open(report) as fh:
        rep = json.load(fh)
    info = report_info(rep)
    info["seconds"] = round(seconds, 1)
    ctx.ptopt_files[key] = (out, info)
    return out, info


def report_info(rep):
    """What the tables keep of a ptopt report (--report): outcome, the cast
    decision, the never-slower measurement, how many ops --tune kept in each
    precision, and the precision the file computes in."""
    ops, model = {}, None
    for d in (rep.get("tuning") or {}).get("decisions") or []:
        if d.get("kind") != "precision" or not d.get("choice"):
            continue
        if d.get("node") == "model":  # the whole model: the preset's precision or op by op
            model = d["choice"]
        else:
            ops[d["choice"]] = ops.get(d["choice"], 0) + 1
    info = {"outcome": rep.get("outcome"), "precision": rep.get("precision"), "measurement": rep.get("measurement"),
            "pipeline": rep.get("pipeline")}
    if ops:
        info["precision_ops"] = ops
    if model:
        info["precision_model"] = model
    info["precision_chosen"] = ptopt_precision(info)
    return info


def build_ptopt(ctx, name, threads):
    out, info = make_ptopt_file(ctx, name, threads=threads)
    module = torch.jit.load(out).eval()  # stock PyTorch reloads it, or this throws
    precision = FIXED_PRECISION.get(name) or info.get("precision_chosen") or ptopt_precision(info)
    return (torch_runner(module), "TorchScript file, reloads (ptopt %s, %.0f s)" % (info["outcome"], info["seconds"]),
            precision)


BUILDERS = {"original": build_torchscript, "freeze": build_torchscript, "ofi": build_torchscript,
            "eager": lambda ctx, name, threads: (torch_runner(ctx.eager), "no file (the Python module)"),
            "compile": build_compile, "compile-max": build_compile, "compile-bf16": build_compile,
            "ort": build_ort, "ort-int8": build_ort, "openvino": build_openvino, "openvino-fp32": build_openvino,
            "openvino-int8": build_openvino,
            "ptopt-O2": build_ptopt, "ptopt-O3": build_ptopt, "ptopt-tune": build_ptopt, "ptopt-tune-desc": build_ptopt,
            "ptopt-tune-n": build_ptopt,
            "ptopt-int8": build_ptopt, "ptopt-int8-tune": build_ptopt}


# ---------------------------------------------------------------- timing ---

def median_ci(values, z=1.96):
    """The median and a distribution-free 95% interval: order statistics
    n/2 -+ z*sqrt(n)/2 (the binomial's normal approximation)."""
    v = sorted(values)
    n = len(v)
    lo = max(0, int(math.floor(n / 2 - z * math.sqrt(n) / 2)))
    hi = min(n - 1, int(math.ceil(n / 2 + z * math.sqrt(n) / 2)) - 1)
    return statistics.median(v), v[lo], v[hi]


class build_deadline:
    """Gives up on a variant that does not build within `seconds` (a
    max-autotune compile can take many minutes on a small CPU): SIGALRM
    interrupts it, and the table says so."""

    def __init__(self, seconds, name):
        self.seconds, self.name = int(seconds), name

    def _expired(self, signum, frame):
        raise Unavailable("did not build within %d s (--build-timeout)" % self.seconds)

    def __enter__(self):
        if self.seconds > 0:
            import signal
            self._old = signal.signal(signal.SIGALRM, self._expired)
            signal.alarm(self.seconds)
        return self

    def __exit__(self, *exc):
        if self.seconds > 0:
            import signal
            signal.alarm(0)
            signal.signal(signal.SIGALRM, self._old)
        return False


def time_variants(runners, inputs, rounds, threads, seed):
    clock = time.process_time if threads == 1 else time.perf_counter
    names = list(runners)
    for name in names:
        for _ in range(3):
            runners[name](inputs)
    times = {n: [] for n in names}
    order = list(names)
    rng = random.Random(seed)
    for _ in range(rounds):
        rng.shuffle(order)
        for name in order:
            start = clock()
            runners[name](inputs)
            times[name].append(clock() - start)
    return times


def run_model(args, spec, threads_list):
    work = tempfile.mkdtemp(prefix="peers-%s-" % spec.name, dir=args.work)
    result = {"model": spec.name, "family": spec.family, "mode": spec.mode, "variants": {}}
    try:
        ctx = Context(args, spec, work)
    except Unavailable as e:
        result["skip"] = str(e)
        return result
    except Exception as e:  # noqa: BLE001
        result["skip"] = "cannot build or %s it: %s" % (spec.mode, first_line(e))
        return result
    result["params_m"] = round(sum(p.numel() for p in ctx.eager.parameters()) / 1e6, 1)
    torch.set_num_threads(1)
    with torch.no_grad():
        reference = flat_outputs(torch.jit.load(ctx.original_path)(*ctx.inputs))
    for threads in threads_list:
        torch.set_num_threads(threads)
        runners = {}
        for name in args.variants:
            entry = result["variants"].setdefault(name, {})
            try:
                with build_deadline(args.build_timeout, name):
                    built = BUILDERS[name](ctx, name, threads)
                run, file = built[0], built[1]
                got = flat_outputs(run(ctx.inputs))
                entry.setdefault("numerics", numerics(reference, got))
                entry["file"] = file
                entry["precision"] = built[2] if len(built) > 2 else FIXED_PRECISION.get(name)
                if name in PER_COUNT:  # a file per count, each with its precision
                    entry.setdefault("precision_at", {})[str(threads)] = entry["precision"]
                runners[name] = run
            except Exception as e:  # noqa: BLE001 - a variant that fails here is reported, not fatal
                entry["error"] = first_line(e) if isinstance(e, Unavailable) else "%s: %s" % (
                    type(e).__name__, first_line(e))
        if "original" not in runners:
            result["skip"] = "the original does not run: %s" % result["variants"]["original"].get("error")
            return result
        print("  %s: timing %d variants at %d thread(s)" % (spec.name, len(runners), threads), file=sys.stderr)
        times = time_variants(runners, ctx.inputs, args.rounds, threads, seed=threads)
        for name, ts in times.items():
            ratios = [t / o for t, o in zip(ts, times["original"])]
            med, lo, hi = median_ci(ratios)
            result["variants"][name].setdefault("timing", {})[str(threads)] = {
                "ms": statistics.median(ts) * 1e3, "ratio": med, "ci": [lo, hi]}
        del runners
    for key, (_, info) in ctx.ptopt_files.items():
        name, _, count = key.partition("@")
        if count:
            result["variants"][name].setdefault("ptopt_at", {})[count] = info
        else:
            result["variants"][name]["ptopt"] = info
    return result


# ---------------------------------------------------------------- report ---

def machine():
    cpu = platform.processor() or "unknown CPU"
    flags = ""
    try:
        with open("/proc/cpuinfo") as fh:
            text = fh.read()
        for line in text.splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        flags = ", ".join(f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16")
                          if " %s" % f in text)
    except OSError:
        pass
    return "%s (%d cores; %s)" % (cpu, os.cpu_count(), flags)


def versions():
    out = {"python": platform.python_version(), "torch": torch.__version__}
    for mod in ("torchvision", "onnx", "onnxruntime", "openvino", "transformers", "timm"):
        try:
            m = __import__(mod)
            out[mod] = getattr(m, "__version__", None) or getattr(getattr(m, "runtime", None), "get_version",
                                                                 lambda: "?")()
        except ImportError:
            out[mod] = "not installed"
    return out


def cell(entry, threads):
    if "error" in entry and "timing" not in entry:
        return "—"
    t = entry.get("timing", {}).get(str(threads))
    if not t:
        return "—"
    return "%.3f <sub>[%.2f, %.2f]</sub>" % (t["ratio"], t["ci"][0], t["ci"][1])


def timing(res, name, threads):
    return res["variants"].get(name, {}).get("timing", {}).get(str(threads))


def variant_precision(res, name, threads=None):
    """What the variant computed in (at `threads`, for a variant built per
    count): recorded when it was built; for a JSON from before that, ptopt's
    report or the fixed ones (openvino's: unknown)."""
    entry = res["variants"].get(name, {})
    if threads is not None and str(threads) in entry.get("precision_at", {}):
        return entry["precision_at"][str(threads)]
    if entry.get("precision"):
        return entry["precision"]
    if name in FIXED_PRECISION:
        return FIXED_PRECISION[name]
    info = entry.get("ptopt") or {}
    if name.startswith("ptopt-") and ("precision_chosen" in info or info.get("precision")):
        return info.get("precision_chosen") or ptopt_precision(info)
    return None  # a JSON from before precisions were recorded


# Peers whose kernels a capped run (scripts/avx2-cap.sh) does not cap: their
# times there are not an AVX2 CPU's, so they are not compared with.
UNCAPPED = {"ort": "ONNX Runtime picks its kernels by CPUID, uncapped",
            "ort-int8": "ONNX Runtime picks its kernels by CPUID, uncapped"}


def uncapped_peers(meta):
    """The peers a run's cap does not reach (none on a native run)."""
    return UNCAPPED if (meta or {}).get("cap", "native ISA") != "native ISA" else {}


def same_precision_peers(res, threads, prec, uncapped):
    """The peers timed at `threads` that ran at `prec`, (name, ratio), and
    those left out as uncapped (name: why)."""
    peers = [(n, timing(res, n, threads)["ratio"]) for n in SAME_PRECISION_PEERS
             if timing(res, n, threads) and prec != "unknown" and variant_precision(res, n) == prec]
    excluded = {n: uncapped[n] for n, _ in peers if n in uncapped}
    return [p for p in peers if p[0] not in uncapped], excluded


def comparisons(res, threads, uncapped=None):
    """The two like-with-like columns of one model at one thread count:
    ptopt-tune over the fastest peer at its precision, ptopt-int8 over
    ort-int8 (counted only where ORT's int8 cosine is >= MIN_COSINE), and
    ptopt-int8-tune over ort-int8 beside it where it ran. Under a CPU cap,
    the peers in `uncapped` are left out (recorded as excluded)."""
    uncapped = uncapped or {}
    tune = timing(res, "ptopt-tune", threads)
    prec = variant_precision(res, "ptopt-tune") or "unknown"
    c = {"precision": prec}
    if not tune:
        c["missing"] = "no ptopt-tune timing (%s)" % res["variants"].get("ptopt-tune", {}).get("error", "not run")
    else:
        peers, excluded = same_precision_peers(res, threads, prec, uncapped)
        if excluded:
            c["excluded"] = excluded
        c["peers"] = [n for n, _ in peers]
        if not peers:
            c["missing"] = "no %s peer timed" % prec
        else:
            best = min(peers, key=lambda p: p[1])
            c.update({"peer": best[0], "peer_ratio": best[1], "tune_ratio": tune["ratio"],
                      "ratio": tune["ratio"] / best[1]})
            c["within"] = c["ratio"] <= WITHIN
    # The file tuned for this count alone, over the fastest peer at its precision.
    each = timing(res, "ptopt-tune-n", threads)
    each_prec = variant_precision(res, "ptopt-tune-n", threads)
    if each and each_prec:
        peers, _ = same_precision_peers(res, threads, each_prec, uncapped)
        if peers:
            best = min(peers, key=lambda p: p[1])
            c.update({"each_precision": each_prec, "each_peer": best[0], "each_tune_ratio": each["ratio"],
                      "each_ratio": each["ratio"] / best[1]})
            c["each_within"] = c["each_ratio"] <= WITHIN
    int8, ort8 = timing(res, "ptopt-int8", threads), timing(res, "ort-int8", threads)
    d = {}
    if not int8 or not ort8:
        d["missing"] = "no %s timing" % " and ".join(
            n for n, t in (("ptopt-int8", int8), ("ort-int8", ort8)) if not t)
    else:
        cos = res["variants"]["ort-int8"].get("numerics", {}).get("cosine")
        d.update({"int8_ratio": int8["ratio"], "ort_int8_ratio": ort8["ratio"], "ratio": int8["ratio"] / ort8["ratio"],
                  "ort_int8_cosine": cos, "counts": cos is not None and cos >= MIN_COSINE})
        if "ort-int8" in uncapped:
            d.update({"counts": False, "why": uncapped["ort-int8"]})
        d["within"] = d["counts"] and d["ratio"] <= WITHIN
        tuned = timing(res, "ptopt-int8-tune", threads)
        if tuned:
            d.update({"int8_tune_ratio": tuned["ratio"], "tune_ratio": tuned["ratio"] / ort8["ratio"]})
            d["tune_within"] = d["counts"] and d["tune_ratio"] <= WITHIN
    return {"tune_vs_best_peer": c, "int8_vs_ort_int8": d}


def summary(results, threads):
    """Per thread count: how many models are within WITHIN on each column."""
    comps = [r.get("comparisons", {}).get(str(threads)) or comparisons(r, threads)
             for r in results if not r.get("skip")]
    tune = [c["tune_vs_best_peer"] for c in comps if "ratio" in c["tune_vs_best_peer"]]
    int8 = [c["int8_vs_ort_int8"] for c in comps if "ratio" in c["int8_vs_ort_int8"]]
    by_prec = {}
    for c in tune:
        p = by_prec.setdefault(c["precision"], {"models": 0, "within": 0, "peers": []})
        p["models"] += 1
        p["within"] += c["within"]
        p["peers"] += [n for n in c["peers"] if n not in p["peers"]]
    counted = [c for c in int8 if c["counts"]]
    tuned = [c for c in counted if "tune_ratio" in c]
    each = [c for c in comps if "each_ratio" in c["tune_vs_best_peer"]]
    return {"tune_vs_best_peer": {"within": sum(c["within"] for c in tune), "of": len(tune),
                                  "by_precision": by_prec,
                                  "each_within": sum(c["tune_vs_best_peer"]["each_within"] for c in each),
                                  "each_of": len(each)},
            "int8_vs_ort_int8": {"within": sum(c["within"] for c in counted), "of": len(counted),
                                 "not_counted": len(int8) - len(counted),
                                 "tune_within": sum(c["tune_within"] for c in tuned), "tune_of": len(tuned)}}


def tune_cell(c):
    if "ratio" in c:
        text = (("**%.2fx**" if c["within"] else "%.2fx") + " (%s: %s)") % (c["ratio"], c["precision"], c["peer"])
        if "each_ratio" in c:
            same = (c["each_precision"], c["each_peer"]) == (c["precision"], c["peer"])
            text += ("; for N " + ("**%.2fx**" if c["each_within"] else "%.2fx")) % c["each_ratio"] + (
                "" if same else " (%s: %s)" % (c["each_precision"], c["each_peer"]))
        return text
    if c["precision"] == "unknown":
        return "— (precision not recorded)"
    if c.get("missing", "").startswith("no ") and c.get("missing", "").endswith(" peer timed"):
        return "— (no %s peer)" % c["precision"]
    return "—"


def int8_cell(d):
    if "ratio" not in d:
        return "—"
    if not d["counts"] and d.get("why"):
        return "— (%.2fx; ORT not capped)" % d["ratio"]
    if not d["counts"]:
        return "— (ORT int8 cos %s)" % ("%.2f" % d["ort_int8_cosine"] if d["ort_int8_cosine"] is not None else "?")
    text = ("**%.2fx**" if d["within"] else "%.2fx") % d["ratio"]
    if "tune_ratio" in d:
        text += (" (tune **%.2fx**)" if d["tune_within"] else " (tune %.2fx)") % d["tune_ratio"]
    return text


def summary_line(s, threads):
    t, i = s["tune_vs_best_peer"], s["int8_vs_ort_int8"]
    precs = "; ".join("%s on %d, against %s" % (p, v["models"], ", ".join(v["peers"]) or "none")
                      for p, v in sorted(t["by_precision"].items()))
    tuned = (", ptopt-int8-tune on %d of %d" % (i["tune_within"], i["tune_of"])) if i.get("tune_of") else ""
    each = (", tuned for this count (ptopt-tune-n) on %d of %d" % (t["each_within"], t["each_of"])
            if t.get("each_of") else "")
    return ("Within %.2fx at %d thread%s: `tune / best peer` on %d of %d models%s%s; "
            "`int8 / ORT int8` on %d of %d%s%s." % (
        WITHIN, threads, "" if threads == 1 else "s", t["within"], t["of"], " (%s)" % precs if precs else "", each,
        i["within"], i["of"], tuned, " (%d more not counted: ORT int8's cosine below %.2f, or ORT not capped)" % (
            i["not_counted"], MIN_COSINE) if i["not_counted"] else ""))


def fastest(res, threads, names):
    best = None
    for n in names:
        t = res["variants"].get(n, {}).get("timing", {}).get(str(threads))
        if t and (best is None or t["ratio"] < best[1]):
            best = (n, t["ratio"])
    return best


def render(results, args, threads_list, meta):
    lines = ["# ptopt and its peers (%s)" % meta["date"], "",
             "%s; %s; %s. Latency ratios to the original TorchScript file (lower is faster), "
             "median of %d interleaved rounds with its 95%% interval; 1 thread: CPU time, all threads: "
             "wall time. Generated by `bench/peers.py`." % (
                 meta["machine"], ", ".join("%s %s" % kv for kv in meta["versions"].items()),
                 meta["cap"], args.rounds), ""]
    variants = [v for v in args.variants if v != "original"]
    lines += ["`tune / best peer`: ptopt-tune's ratio over the fastest peer that ran at ptopt-tune's precision "
              "(bf16: openvino where it ran bf16, compile-bf16; fp32: ort, openvino-fp32, openvino where it ran "
              "f32); each cell names the precision and the peer, and `for N` gives ptopt-tune-n's (tuned for "
              "this count alone, a file per count) where it ran. `int8 / ORT int8`: ptopt-int8's ratio over "
              "ort-int8's (and ptopt-int8-tune's, `tune`, where it ran), not counted where ORT's int8 cosine "
              "to the original is below %.2f. Bold: within %.2fx. `fastest peer`: "
              "the fastest of all peers, at any precision. This CPU: %s." % (
                  MIN_COSINE, WITHIN, meta.get("native_bf16", "?")), ""]
    if uncapped_peers(meta):
        lines += ["Under this cap, %s: they are not compared with (`int8 / ORT int8` shows the ratio, uncounted), "
                  "and `openvino-fp32` stands for an AVX2 CPU's fp32 peer." % "; ".join(
                      sorted({"%s (%s)" % (why, "ort, ort-int8") for why in uncapped_peers(meta).values()})), ""]
    for threads in threads_list:
        comps = {r["model"]: r.get("comparisons", {}).get(str(threads)) or comparisons(r, threads)
                 for r in results if not r.get("skip")}
        precs = sorted({c["tune_vs_best_peer"]["precision"] for c in comps.values()
                        if "ratio" in c["tune_vs_best_peer"]})
        lines += ["## %d thread%s" % (threads, "" if threads == 1 else "s"), "",
                  "| model | original (ms) | " + " | ".join(variants) + " | fastest peer | ptopt-tune vs it "
                  "| tune / best peer (%s: peer) | int8 / ORT int8 |" % ("/".join(precs) or "precision"),
                  "|---|---:|" + "---:|" * len(variants) + "---|---:|---:|---:|"]
        for r in results:
            if r.get("skip"):
                lines.append("| %s | %s |" % (r["model"], "skipped: " + r["skip"]))
                continue
            orig = r["variants"]["original"]["timing"][str(threads)]["ms"]
            best = fastest(r, threads, PEERS)
            tune = r["variants"].get("ptopt-tune", {}).get("timing", {}).get(str(threads))
            vs = "%.2fx" % (tune["ratio"] / best[1]) if best and tune else "—"
            c = comps[r["model"]]
            lines.append("| %s | %.1f | %s | %s | %s | %s | %s |" % (
                r["model"], orig, " | ".join(cell(r["variants"].get(v, {}), threads) for v in variants),
                "%s %.3f" % best if best else "—", vs, tune_cell(c["tune_vs_best_peer"]),
                int8_cell(c["int8_vs_ort_int8"])))
        lines += ["", summary_line(summary(results, threads), threads), ""]
    lines += ["## Numerics against the original (max abs error / cosine) and files", "",
              "| model | " + " | ".join(variants) + " |", "|---|" + "---|" * len(variants)]
    for r in results:
        if r.get("skip"):
            continue
        cells = []
        for v in variants:
            n = r["variants"].get(v, {}).get("numerics", {})
            cells.append("%.1e / %.5f" % (n["max_abs"], n["cosine"]) if "max_abs" in n else "—")
        lines.append("| %s | %s |" % (r["model"], " | ".join(cells)))
    lines += ["", "Files: does the result reload?", ""]
    for v in variants:
        lines.append("- **%s**: %s" % (v, files_line([r["variants"].get(v, {}).get("file", "")
                                                       for r in results if not r.get("skip")])))
    lines += ["", "Precision each variant ran (%s; OpenVINO's default INFERENCE_PRECISION_HINT here: %s):" % (
        meta.get("native_bf16", "?"), meta.get("openvino_default_precision", "?")), ""]
    for v in variants:
        lines.append("- **%s**: %s" % (v, precision_line(results, v)))
    errors = [(r["model"], v, r["variants"][v]["error"]) for r in results if not r.get("skip")
              for v in variants if "error" in r["variants"].get(v, {})]
    if errors:
        lines += ["", "Variants that could not be built or run:", ""]
        lines += ["- %s %s: %s" % e for e in errors]
    lines += ["", "## Beside the fastest peer at any precision (not a target)", "",
              "ptopt-tune (a float file) over the fastest peer at 1 thread whatever its precision, int8 "
              "included: how far the float file is from the fastest thing a user could deploy. The targets "
              "compare like with like: the `tune / best peer` and `int8 / ORT int8` columns above.", ""]
    lines += fastest_at_any_precision(results)
    return "\n".join(lines) + "\n"


def precision_line(results, v):
    """'bf16 on resnet50, mobilenet_v2; fp32 on gpt2_small', from each model's
    recorded precision (openvino: the compiled model's
    INFERENCE_PRECISION_HINT; ptopt: its report, with --tune's op counts)."""
    by = {}
    for r in results:
        if r.get("skip") or v not in r["variants"] or "timing" not in r["variants"][v]:
            continue
        p = variant_precision(r, v) or "unknown"
        label = r["model"]
        at = r["variants"][v].get("precision_at") or {}
        if len(set(at.values())) > 1:  # a file per count, not all at one precision
            label += " (%s)" % ", ".join("%s at %s thread%s" % (prec, n, "" if n == "1" else "s")
                                         for n, prec in sorted(at.items(), key=lambda kv: int(kv[0])))
        info = r["variants"][v].get("ptopt") or {}
        ops, model = info.get("precision_ops"), info.get("precision_model")
        written = (info.get("measurement") or {}).get("written")
        if written and written != "output":
            label += " (written: %s)" % written
        elif model == "preset":
            label += " (--tune: the preset's precision won over op by op)"
        elif model and ops:
            label += " (--tune %s: %s)" % (model, ", ".join(
                "%d ops %s" % (n, TUNED_DTYPES.get(c, c)) for c, n in sorted(ops.items())))
        by.setdefault(p, []).append(label)
    if not by:
        return "not built"
    if v in FIXED_PRECISION:
        return FIXED_PRECISION[v] + (" (QDQ; the rest at the runtime's precision)" if v == "openvino-int8" else "")
    return "; ".join("%s on %s" % (p, ", ".join(models)) for p, models in sorted(by.items()))


def files_line(files):
    """One line for a variant's files over all models. Builds that took time
    say so per model ("TorchScript file, reloads (ptopt passed, 3 s)", "no
    file (compiled in the process, 11 s)"): summed up as each outcome's
    count and the range of seconds."""
    files = [f for f in files if f]
    if not files:
        return "not built"
    runs = [re.match(r"^(.*) \((.+), (\d+) s\)$", f) for f in files]
    if not all(runs):
        return "; ".join(sorted(set(files)))
    kinds = sorted({m.group(1) for m in runs})
    outcomes = [m.group(2) for m in runs]
    counted = ", ".join("%s on %d" % (o, outcomes.count(o)) for o in sorted(set(outcomes)))
    seconds = [int(m.group(3)) for m in runs]
    return "%s (%s of %d models; %d-%d s each)" % (
        "; ".join(kinds), counted, len(runs), min(seconds), max(seconds))


def fastest_at_any_precision(results):
    out = []
    within, ahead, counted, compiled = 0, 0, 0, 0
    for r in results:
        if r.get("skip"):
            continue
        best = fastest(r, 1, PEERS)
        tune = r["variants"].get("ptopt-tune", {}).get("timing", {}).get("1")
        comp = r["variants"].get("compile", {}).get("timing", {}).get("1")
        if not best or not tune:
            out.append("- %s: no ptopt-tune timing (%s)" % (
                r["model"], r["variants"].get("ptopt-tune", {}).get("error", "not run")))
            continue
        counted += 1
        gap = tune["ratio"] / best[1]
        within += gap <= 1.15
        if comp:
            compiled += 1
            ahead += tune["ratio"] < comp["ratio"]
        out.append("- %s: ptopt-tune %.3f, fastest peer %s %.3f (%.2fx)%s%s" % (
            r["model"], tune["ratio"], best[0], best[1], gap, "" if gap <= 1.15 else " (beyond 1.15x)",
            "; torch.compile %.3f" % comp["ratio"] if comp else ""))
    out.append("")
    out.append("Within 1.15x of the fastest peer at 1 thread: %d of %d models; ahead of torch.compile's "
               "default mode: %s." % (within, counted, "%d of %d" % (ahead, compiled) if compiled else "not run"))
    return out


def merge(args):
    runs = [json.load(open(path)) for path in args.merge]
    meta = dict(runs[0]["meta"])
    meta["runs"] = len(runs)
    results = [r for run in runs for r in run["results"]]
    threads_list = runs[0]["threads"]
    variants = []
    for r in results:
        for v in r.get("variants", {}):
            if v not in variants:
                variants.append(v)
    args.variants = ["original"] + [v for v in VARIANTS if v in variants and v != "original"]
    args.rounds = args.rounds if not runs[0].get("rounds") else runs[0]["rounds"]
    write_outputs(args, meta, threads_list, results, markdown=True)
    return 0


def write_outputs(args, meta, threads_list, results, markdown):
    """OUT.json (after every model, so a run cut short keeps what it timed);
    with markdown, OUT.md too, printed."""
    for r in results:
        if not r.get("skip"):
            r["comparisons"] = {str(t): comparisons(r, t, uncapped_peers(meta)) for t in threads_list
                                if timing(r, "original", t)}
    summaries = {str(t): summary(results, t) for t in threads_list}
    with open(args.out + ".json", "w") as fh:
        json.dump({"meta": meta, "threads": threads_list, "results": results, "rounds": args.rounds,
                   "summary": summaries}, fh, indent=1)
    if markdown:
        text = render(results, args, threads_list, meta)
        with open(args.out + ".md", "w") as fh:
            fh.write(text)
        print(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ptopt", default=os.path.join(ROOT, "build-torch2", "tools", "ptopt"))
    ap.add_argument("--models", default=",".join(ALL_MODELS))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--threads", default="1,all")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--ptopt-timeout", type=int, default=900)
    ap.add_argument("--build-timeout", type=int, default=900, help="seconds a variant may take to build (0: no limit)")
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "peers"))
    ap.add_argument("--merge", nargs="+", metavar="JSON",
                    help="render one table from the JSON of several runs (e.g. two processes pinned to one core "
                         "each, at 1 thread) into --out, and time nothing")
    args = ap.parse_args()
    if args.merge:
        return merge(args)
    args.variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in args.variants if v not in BUILDERS]
    if unknown:
        ap.error("unknown variants %s (known: %s)" % (", ".join(unknown), ", ".join(VARIANTS)))
    if "original" not in args.variants:
        args.variants.insert(0, "original")
    models = [m for m in args.models.split(",") if m]
    table = specs()
    unknown = [m for m in models if m not in table]
    if unknown:
        ap.error("unknown models %s (known: %s)" % (", ".join(unknown), ", ".join(ALL_MODELS)))
    threads_list = []
    for t in args.threads.split(","):
        n = os.cpu_count() if t == "all" else int(t)
        if n not in threads_list:
            threads_list.append(n)
    args.threads_list = threads_list
    cap = ("CPU capped: ATEN_CPU_CAPABILITY=%s ONEDNN_MAX_CPU_ISA=%s" % (
        os.environ.get("ATEN_CPU_CAPABILITY"), os.environ.get("ONEDNN_MAX_CPU_ISA"))
           if os.environ.get("ATEN_CPU_CAPABILITY") else "native ISA")
    meta = {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "versions": versions(), "cap": cap,
            "native_bf16": native_bf16()[1]}
    try:
        meta["openvino_default_precision"] = openvino_default_precision()
    except Exception as e:  # noqa: BLE001 - not installed, or no CPU plugin
        meta["openvino_default_precision"] = "unknown (%s)" % first_line(e)
    results = []
    for m in models:
        print("peers: %s" % m, file=sys.stderr)
        results.append(run_model(args, table[m], threads_list))
        write_outputs(args, meta, threads_list, results, markdown=False)
    write_outputs(args, meta, threads_list, results, markdown=True)


if __name__ == "__main__":
    sys.exit(main())
