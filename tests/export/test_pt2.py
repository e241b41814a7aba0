"""torch.export programs (.pt2) through ptopt, end to end (PyTorch 2.x world).

Every fixture is made here, at test time, with torch.export.export (both the
training IR it gives and run_decompositions()'s inference IR) or
torch.jit.script, and written with torch.export.save / torch.jit.save. Each
result is read back by stock PyTorch (torch.export.load) and run with
``ep.module()`` against the original program:

- ``--passes ''``: the program round-trips, outputs bitwise equal;
- ``-O1``: BatchNorm folded and dropout gone from both IRs (the passes
  fired: no batch_norm or dropout left, fewer nodes), outputs within the
  fp32 criterion; a BatchNorm with no conv or linear before it is not folded
  into anything (must not fire);
- ``-O2``/``-O3``/``--tune`` (reproducible clock): reload and match;
- TorchScript in, .pt2 out (``ptopt m.pt m.pt2``);
- ``ptopt.optimize(ep)`` returns an ExportedProgram; ``ptopt.show(ep)``;
- AOTInductor compiles and runs a result;
- ``--quantize int8``: written in PT2E's Q/DQ form (int8 weights through
  dequantize_per_channel), matching within the int8 criterion, read back
  bitwise as a program and as TorchScript; AOTInductor (with torchao, when
  installed) compiles its convs into int8 kernels; dynamic int8 refused;
  the same from ``ptopt.optimize(..., quantize="int8")``;
- programs exported with ``dynamic_shapes=``: written dynamic (the same
  ranges, symbolic input sizes), verified at other sizes, matching the
  original at sizes other than the export's; derived sizes (``2*n``) kept;
  symbolic floats refused;
- bad .pt2 files: exit 2, one line naming the problem, nothing written.
"""
import io
import json
import os
import subprocess
import sys
import typing
import warnings
import zipfile

import pytest
import torch
import torchvision

CLI = os.environ["PTOPT_CLI"]


def run_ptopt(*args, expect=0):
    p = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)
    assert p.returncode == expect, f"exit {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return p.stdout + p.stderr


class ConvBnNet(torch.nn.Module):
    """conv+BN+relu, dropout, linear; and a BN after an add (no producer to fold into)."""

    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.c2 = torch.nn.Conv2d(8, 8, 1)
        self.bn_after_add = torch.nn.BatchNorm2d(8)
        self.drop = torch.nn.Dropout(0.2)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.bn(self.c(x)))
        z = self.bn_after_add(y + self.c2(y))
        return self.fc(self.drop(z.mean((2, 3))))


class ConvTransposeLinearBn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ct = torch.nn.ConvTranspose2d(4, 6, 3, stride=2)
        self.bn = torch.nn.BatchNorm2d(6)
        self.fc = torch.nn.Linear(6, 5)
        self.bn1d = torch.nn.BatchNorm1d(5)

    def forward(self, x):
        return self.bn1d(self.fc(self.bn(self.ct(x)).mean((2, 3))))


def randomize_bn(model):
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.running_mean.copy_(torch.rand(m.running_mean.shape, generator=g) - 0.5)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
    return model.eval()


def corpus():
    torch.manual_seed(0)
    yield "convbn", randomize_bn(ConvBnNet()), (torch.randn(2, 3, 16, 16),)
    yield "convT_linear_bn", randomize_bn(ConvTransposeLinearBn()), (torch.randn(2, 4, 8, 8),)
    yield "resnet18", randomize_bn(torchvision.models.resnet18()), (torch.randn(1, 3, 64, 64),)
    yield "mobilenet_v3_small", randomize_bn(torchvision.models.mobilenet_v3_small()), (torch.randn(1, 3, 64, 64),)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
    yield "transformer_encoder", torch.nn.TransformerEncoder(layer, 2).eval(), (torch.randn(2, 10, 32),)
    # The model zoos when installed (scripts/setup-peers.sh): a timm CNN and a
    # transformers BERT (a ModelOutput dataclass out, int64 token ids in).
    try:
        import timm
        yield "timm_mobilenetv3", timm.create_model("mobilenetv3_small_050").eval(), (torch.randn(1, 3, 64, 64),)
    except ImportError:
        pass
    try:
        import transformers
        config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                         intermediate_size=64, max_position_embeddings=64)
        yield "bert", transformers.BertModel(config).eval(), (torch.randint(0, 100, (2, 12)),)
    except ImportError:
        pass


CORPUS = {name: (model, inputs) for name, model, inputs in corpus()}
IRS = ["training", "inference"]


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """name -> (path of the .pt2, inputs), exported now, in both IRs."""
    d = tmp_path_factory.mktemp("pt2")
    out = {}
    for name, (model, inputs) in CORPUS.items():
        ep = torch.export.export(model, inputs, strict=False)
        for ir in IRS:
            program = ep if ir == "training" else ep.run_decompositions()
            path = d / f"{name}_{ir}.pt2"
            torch.export.save(program, str(path))
            out[(name, ir)] = (path, inputs)
    return out


def call_targets(ep):
    return [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]


def outputs(ep, inputs):
    """The tensors a program returns (a tensor, a tuple, a ModelOutput)."""
    return [t for t in torch.utils._pytree.tree_leaves(ep.module()(*inputs)) if isinstance(t, torch.Tensor)]


@pytest.mark.parametrize("ir", IRS)
@pytest.mark.parametrize("name", list(CORPUS))
def test_round_trip_is_bitwise(programs, tmp_path, name, ir):
    path, inputs = programs[(name, ir)]
    out = tmp_path / "out.pt2"
    run_ptopt(path, out, "--passes", "", "--no-measure")
    original, result = torch.export.load(str(path)), torch.export.load(str(out))
    for a, b in zip(outputs(original, inputs), outputs(result, inputs)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("ir", IRS)
@pytest.mark.parametrize("name", list(CORPUS))
def test_o1_folds_batchnorm_and_drops_dropout(programs, tmp_path, name, ir):
    path, inputs = programs[(name, ir)]
    out, report = tmp_path / "out.pt2", tmp_path / "report.json"
    run_ptopt(path, out, "-O1", "--no-measure", "--report", report)
    original, result = torch.export.load(str(path)), torch.export.load(str(out))
    before, after = call_targets(original), call_targets(result)
    # convbn's BN after an add has no conv to fold into; bn-to-affine may
    # still rewrite it, but never into a conv.
    left = [t for t in after if "batch_norm" in t or "dropout" in t]
    if name != "convbn":
        assert not left, left
    assert len(after) < len(before)
    assert not [t for t in after if t.startswith("quantized")]  # int8 only when asked for
    fired = {p["pass"] for p in json.loads(report.read_text())["passes"] if p["changed"]}
    if any("batch_norm" in t for t in before):
        assert fired & {"fold-conv-bn", "fold-linear-bn"}, fired
    for a, b in zip(outputs(original, inputs), outputs(result, inputs)):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
    assert result.module()(*inputs) is not None  # reloads and runs again


def test_o1_gives_the_decomposed_hardswish_and_hardsigmoid_back_their_kernels(programs, tmp_path):
    """MobileNetV3's inference IR spells hardswish and hardsigmoid out (add 3,
    two clamps, div 6, mul x): -O1 makes each one op again, as in the
    training IR, and the result matches."""
    path, inputs = programs[("mobilenet_v3_small", "inference")]
    training = call_targets(torch.export.load(str(programs[("mobilenet_v3_small", "training")][0])))
    out, report = tmp_path / "out.pt2", tmp_path / "report.json"
    run_ptopt(path, out, "-O1", "--no-measure", "--report", report)
    original, result = torch.export.load(str(path)), torch.export.load(str(out))
    before, after = call_targets(original), call_targets(result)
    assert not [t for t in before if "hardswish" in t or "hardsigmoid" in t]
    swishes = sum("hardswish" in t for t in training)
    sigmoids = sum("hardsigmoid" in t for t in training)
    assert sum(t == "aten.hardswish.default" for t in after) == swishes, after
    assert sum(t == "aten.hardsigmoid.default" for t in after) == sigmoids, after
    assert not [t for t in after if "clamp" in t], after
    fired = {p["pass"] for p in json.loads(report.read_text())["passes"] if p["changed"]}
    assert "fuse-hardswish" in fired, fired
    for a, b in zip(outputs(original, inputs), outputs(result, inputs)):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)


def test_bn_without_producer_is_not_folded(programs, tmp_path):
    path, inputs = programs[("convbn", "training")]
    out = tmp_path / "out.pt2"
    run_ptopt(path, out, "--passes", "fold-conv-bn", "--no-measure")
    result = torch.export.load(str(out))
    targets = call_targets(result)
    # The first BN folds into conv c; the one after the add stays a BatchNorm.
    assert targets.count("aten.batch_norm.default") == 1, targets
    sd = result.state_dict
    assert "bn_after_add.running_mean" in sd and "bn.running_mean" not in sd


@pytest.mark.parametrize("level", ["-O2", "-O3"])
def test_higher_levels_reload(programs, tmp_path, level):
    path, inputs = programs[("resnet18", "training")]
    out = tmp_path / "out.pt2"
    run_ptopt(path, out, level, "--force", "--no-measure")
    result = torch.export.load(str(out))
    ref = torch.export.load(str(path)).module()(*inputs)
    got = result.module()(*inputs).float()
    assert torch.nn.functional.cosine_similarity(got.flatten(), ref.flatten(), dim=0) > 0.99


def test_tune_result_reloads(programs, tmp_path):
    path, inputs = programs[("resnet18", "inference")]
    out = tmp_path / "out.pt2"
    run_ptopt(path, out, "-O3", "--tune", "--reproducible-clock", "--tuning-cache", tmp_path / "cache.json", "--force")
    result = torch.export.load(str(out))
    ref = torch.export.load(str(path)).module()(*inputs)
    got = result.module()(*inputs).float()
    assert torch.nn.functional.cosine_similarity(got.flatten(), ref.flatten(), dim=0) > 0.99


def test_torchscript_to_pt2(tmp_path):
    model, inputs = CORPUS["convT_linear_bn"]
    ts = tmp_path / "m.pt"
    torch.jit.script(model).save(str(ts))
    out = tmp_path / "m.pt2"
    run_ptopt(ts, out, "-O1", "--input-shape", ",".join(map(str, inputs[0].shape)), "--no-measure")
    ep = torch.export.load(str(out))
    assert not [t for t in call_targets(ep) if "batch_norm" in t]
    torch.testing.assert_close(ep.module()(*inputs), model(*inputs), rtol=1e-4, atol=1e-5)
    # --to names the format whatever the extension.
    out2 = tmp_path / "m_to.bin"
    run_ptopt(ts, out2, "--passes", "", "--to", "pt2", "--input-shape", ",".join(map(str, inputs[0].shape)),
              "--no-measure")
    assert torch.equal(torch.export.load(io.BytesIO(out2.read_bytes())).module()(*inputs), model(*inputs))


class Outputs(typing.NamedTuple):
    logits: torch.Tensor
    aux: typing.Optional[torch.Tensor]


class ScriptedHabits(torch.nn.Module):
    """What scripted torchvision models do that a program has no form for:
    a list grown by append and read in between (DenseNet), a shape check,
    a warning on every call and a NamedTuple taken apart (GoogLeNet)."""

    def __init__(self):
        super().__init__()
        self.convs = torch.nn.ModuleList([torch.nn.Conv2d(3 + 4 * i, 4, 3, padding=1) for i in range(3)])
        self.bn = torch.nn.BatchNorm2d(15)

    def forward(self, x):
        features = [x]
        for conv in self.convs:
            features.append(torch.relu(conv(torch.cat(features, 1))))
        y = self.bn(torch.cat(features, 1))
        if y.dim() != 4:
            raise ValueError("expected 4-D")
        out = Outputs(y.mean((2, 3)), None)
        logits, aux = out
        warnings.warn("scripted model: always a tuple")
        return Outputs(logits, aux)


def test_torchscript_habits_convert(tmp_path):
    model = randomize_bn(ScriptedHabits())
    x = torch.randn(2, 3, 8, 8)
    scripted = torch.jit.script(model)
    ts = tmp_path / "m.pt"
    scripted.save(str(ts))
    out = tmp_path / "m.pt2"
    text = run_ptopt(ts, out, "-O1", "--input-shape", "2,3,8,8", "--no-measure")
    assert "specialized to the inputs" in text and "3 changes" in text, text
    ep = torch.export.load(str(out))
    targets = call_targets(ep)
    assert not [t for t in targets if "append" in t or "warn" in t or t == "aten.dim.default"], targets
    assert targets.count("aten.cat.default") == 4, targets  # each cat read the features appended so far
    torch.testing.assert_close(ep.module()(x)[0], scripted(x)[0], rtol=1e-4, atol=1e-5)


def test_python_optimize_takes_and_returns_programs(programs):
    import ptopt

    model, inputs = CORPUS["convbn"]
    ep = torch.export.export(model, inputs)
    result = ptopt.optimize(ep, "-O1", inputs, measure=False)
    assert isinstance(result, torch.export.ExportedProgram)
    assert not [t for t in call_targets(result) if t == "aten.batch_norm.default"][1:]
    torch.testing.assert_close(result.module()(*inputs), model(*inputs), rtol=1e-4, atol=1e-5)
    # A path in, the same; to="torchscript" converts.
    path, _ = programs[("convbn", "training")]
    assert isinstance(ptopt.optimize(str(path), "-O1", measure=False), torch.export.ExportedProgram)
    ts = ptopt.optimize(ep, "-O1", inputs, measure=False, to="torchscript")
    assert isinstance(ts, torch.jit.ScriptModule)
    assert "aten::conv2d" in ptopt.show(ep).op_counts


def test_python_load_gives_the_program(programs, tmp_path):
    import ptopt

    path, inputs = programs[("convbn", "inference")]
    loaded = ptopt.load(str(path))
    assert isinstance(loaded, torch.export.ExportedProgram)
    torch.testing.assert_close(loaded.module()(*inputs), torch.export.load(str(path)).module()(*inputs))
    damaged = tmp_path / "damaged.pt2"
    damaged.write_bytes(path.read_bytes()[:2000])
    with pytest.raises(ptopt.Error):
        ptopt.load(str(damaged))


AOTI_SCRIPT = """
import sys, torch
out, original, package = sys.argv[1:4]
inputs = tuple(torch.load(sys.argv[4]))
compiled = torch._inductor.aoti_load_package(
    torch._inductor.aoti_compile_and_package(torch.export.load(out), package_path=package))
torch.testing.assert_close(compiled(*inputs), torch.export.load(original).module()(*inputs), rtol=1e-4, atol=1e-5)
print("aoti ok")
"""


def test_aoti_compiles_a_result(programs, tmp_path):
    """AOTInductor compiles ptopt's program, and the package runs and matches
    the original. Run in a process of its own with TORCH_USE_RTLD_GLOBAL=YES:
    the PyPI torch 2.15 wheel builds packages whose code resolves
    aoti_torch_* from torch's libraries as loaded globally, and fails to
    load them otherwise ("undefined symbol: aoti_torch_dtype_float32")."""
    path, inputs = programs[("convT_linear_bn", "training")]
    out = tmp_path / "out.pt2"
    run_ptopt(path, out, "-O1", "--no-measure")
    torch.save(list(inputs), str(tmp_path / "inputs.pt"))
    env = dict(os.environ, TORCH_USE_RTLD_GLOBAL="YES")
    p = subprocess.run([sys.executable, "-c", AOTI_SCRIPT, str(out), str(path), str(tmp_path / "aoti.pt2"),
                        str(tmp_path / "inputs.pt")], capture_output=True, text=True, env=env)
    if p.returncode != 0 and "undefined symbol: aoti_torch" in p.stderr:
        pytest.skip("this torch cannot load AOTInductor packages even with TORCH_USE_RTLD_GLOBAL=YES "
                    f"({p.stderr.strip().splitlines()[-1][-90:]}); ptopt's program compiled")
    assert p.returncode == 0 and "aoti ok" in p.stdout, p.stdout + p.stderr


QDQ = "quantized_decomposed"


@pytest.mark.parametrize("ir", IRS)
def test_int8_is_written_in_pt2e_qdq_form(programs, tmp_path, ir):
    """--quantize int8 to a .pt2 writes PT2E's Q/DQ form: every conv and the
    linear read an int8 weight through dequantize_per_channel, activations
    go through quantize/dequantize_per_tensor, no TorchScript quantized op or
    packed weight is left; OUT matches the original within the int8
    criterion, is not timed (and says why), and reads back bitwise, as a
    program (--passes '') and as TorchScript (its Q/DQ ops as ATen ops)."""
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (torch.export.load needs the Q/DQ ops)

    path, inputs = programs[("resnet18", ir)]
    out = tmp_path / "int8.pt2"
    log = run_ptopt(path, out, "-O1", "--quantize", "int8")
    assert "OUT is an int8 program in PT2E's Q/DQ form" in log, log
    assert "import torch.ao.quantization.fx._decomposed" in log
    ep = torch.export.load(str(out))
    targets = call_targets(ep)
    convs = sum(t in ("aten.conv2d.default", "aten.convolution.default") for t in targets)
    linears = sum(t in ("aten.linear.default", "aten.addmm.default") for t in targets)
    assert (convs, linears) == (20, 1), targets
    assert targets.count(f"{QDQ}.dequantize_per_channel.default") == convs + linears
    assert targets.count(f"{QDQ}.quantize_per_tensor.default") >= convs
    assert not [t for t in targets if t.startswith("quantized.") or "batch_norm" in t]
    tensors = {**ep.state_dict, **ep.constants}
    assert sum(t.dtype == torch.int8 for t in tensors.values()) == convs + linears
    original = torch.export.load(str(path))
    a, b = outputs(original, inputs)[0], outputs(ep, inputs)[0]
    assert torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0) > 0.99
    # ptopt verify judges the Q/DQ program by the int8 criterion, as an int8 TorchScript file.
    assert "computes in int8" in run_ptopt("verify", path, out)
    again, script = tmp_path / "again.pt2", tmp_path / "int8.pt"
    run_ptopt(out, again, "--passes", "", "--no-measure")
    assert torch.equal(outputs(torch.export.load(str(again)), inputs)[0], b)
    run_ptopt(out, script, "--passes", "", "--no-measure", "--to", "torchscript")
    assert torch.equal(torch.jit.load(str(script))(*inputs), b)


AOTI_INT8_SCRIPT = """
import sys, torch
try:
    import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer  # registers Inductor's x86 int8 passes
except ImportError:
    print("no torchao"); sys.exit(0)
import torch.ao.quantization.fx._decomposed
from torch._dynamo.utils import counters
out, package = sys.argv[1:3]
inputs = tuple(torch.load(sys.argv[3]))
ep = torch.export.load(out)
with torch.no_grad():  # Inductor freezes (and lowers int8) only without autograd
    path = torch._inductor.aoti_compile_and_package(ep, package_path=package, inductor_configs={"freezing": True})
lowered = counters["inductor"]["qconv_unary_lower_count"] + counters["inductor"]["qconv_binary_lower_count"]
compiled = torch._inductor.aoti_load_package(path)
a, b = compiled(*inputs), ep.module()(*inputs)
cosine = torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0).item()
print(f"lowered {lowered} cosine {cosine:.4f}")
"""


def test_aoti_compiles_int8_into_int8_kernels(programs, tmp_path):
    """AOTInductor, with torchao's x86 passes, turns ptopt's Q/DQ convs into
    oneDNN int8 kernels (its counters say how many), and the package matches
    the program. Skipped without torchao (scripts/setup-peers.sh)."""
    path, inputs = programs[("convbn", "training")]
    out = tmp_path / "int8.pt2"
    run_ptopt(path, out, "-O1", "--quantize", "int8")
    torch.save(list(inputs), str(tmp_path / "inputs.pt"))
    env = dict(os.environ, TORCH_USE_RTLD_GLOBAL="YES")
    p = subprocess.run([sys.executable, "-c", AOTI_INT8_SCRIPT, str(out), str(tmp_path / "aoti.pt2"),
                        str(tmp_path / "inputs.pt")], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    if "no torchao" in p.stdout:
        pytest.skip("torchao is not installed (scripts/setup-peers.sh)")
    words = p.stdout.split()
    assert int(words[words.index("lowered") + 1]) == 2, p.stdout  # convbn's two convs
    assert float(words[words.index("cosine") + 1]) > 0.99, p.stdout


class GateCatNet(torch.nn.Module):
    """The int8 ops past convs and adds: max pooling, cat, and a squeeze-excite
    gate (mean, conv, hardsigmoid, mul), as GhostNet and MobileNetV3 have them."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.a = torch.nn.Conv2d(8, 8, 1)
        self.b = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.se = torch.nn.Conv2d(16, 16, 1)
        self.head = torch.nn.Conv2d(16, 4, 1)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.stem(x)), 2)
        z = torch.cat([torch.relu(self.a(y)), torch.relu(self.b(y))], 1)
        gate = torch.nn.functional.hardsigmoid(self.se(z.mean((2, 3), keepdim=True)))
        return self.head(z * gate)


def test_int8_cat_and_gates_in_qdq_form(tmp_path):
    """cat, mul and ops run on int8 tensors are each their float op between
    dequantize and quantize; hardsigmoid's output gets the int8 kernel's
    fixed quantization (1/256, 0). Quantized with the fallback off, so that
    every op is int8 on random weights."""
    import torch.ao.quantization.fx._decomposed  # noqa: F401

    torch.manual_seed(0)
    model, inputs = GateCatNet().eval(), (torch.rand(2, 3, 32, 32),)
    path, out = tmp_path / "gatecat.pt2", tmp_path / "int8.pt2"
    torch.export.save(torch.export.export(model, inputs), str(path))
    log = run_ptopt(path, out, "--passes", "-O1,quantize{dtype=int8,fallback=false}")
    assert "cat-shared=2" in log, log  # the cat's two convs write in its quantization
    ep = torch.export.load(str(out))
    nodes = {n.name: n for n in ep.graph.nodes}
    by_target = lambda t: [n for n in ep.graph.nodes if str(n.target) == t]  # noqa: E731
    dq = f"{QDQ}.dequantize_per_tensor.default"
    for target in ("aten.cat.default", "aten.mul.Tensor", "aten.max_pool2d.default", "aten.mean.dim"):
        (node,) = by_target(target)
        tensors = node.args[0] if target == "aten.cat.default" else node.args[:2 if target == "aten.mul.Tensor" else 1]
        assert all(str(nodes[t.name].target) == dq for t in tensors), (target, node.args)
        assert [str(u.target) for u in node.users] == [f"{QDQ}.quantize_per_tensor.default"], target
    (hardsigmoid,) = by_target("aten.hardsigmoid.default")
    (q,) = hardsigmoid.users
    assert q.args[1:3] == (1.0 / 256, 0)
    assert targets_count(ep, f"{QDQ}.dequantize_per_channel.default") == 5
    a, b = model(*inputs), ep.module()(*inputs)
    assert torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0) > 0.99
    again = tmp_path / "again.pt2"
    run_ptopt(out, again, "--passes", "", "--no-measure")
    assert torch.equal(torch.export.load(str(again)).module()(*inputs), b)


class SiluHardswishNet(torch.nn.Module):
    """EfficientNet's conv + SiLU and MobileNetV3's conv + hardswish."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.b = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.c = torch.nn.Conv2d(16, 8, 1)

    def forward(self, x):
        return self.c(torch.nn.functional.hardswish(self.b(torch.nn.functional.silu(self.a(x)))))


@pytest.mark.parametrize("ir", ["training", "inference"])
def test_int8_conv_activations_fused_from_a_program(tmp_path, ir):
    """fuse-int8-activations on a .pt2 IN written as TorchScript: the silu
    and hardswish chains are both fused, from either IR (the inference IR's
    x * sigmoid(x) is read as silu by canonicalize, its clamp/add/mul/div as
    hardswish by fuse-hardswish). A .pt2 OUT is declined: it holds no packed
    oneDNN weight."""
    torch.manual_seed(0)
    model, inputs = SiluHardswishNet().eval(), (torch.rand(2, 3, 32, 32),)
    ep = torch.export.export(model, inputs)
    if ir == "inference":
        ep = ep.run_decompositions()
    path, out = tmp_path / "silu.pt2", tmp_path / "int8.pt"
    torch.export.save(ep, str(path))
    passes = "-O1,quantize{dtype=int8,fallback=false},fuse-int8-activations"
    log = run_ptopt(path, out, "--passes", passes, "--explain")
    assert "fused=2" in log, log
    fused = torch.jit.load(str(out))
    assert "onednn.qconv2d_pointwise" in fused.code
    a, b = model(*inputs), fused(*inputs)
    assert torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0) > 0.99
    log = run_ptopt(path, tmp_path / "int8.pt2", "--passes", passes, "--explain")
    assert "holds no packed oneDNN weight" in log, log


class FusedQkv(torch.nn.Module):
    """GPT-2's attention input: one linear split into q, k and v."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.d, self.heads = d, heads
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)

    def forward(self, x):
        b, t = x.shape[0], x.shape[1]
        q, k, v = (p.view(b, t, self.heads, -1).transpose(1, 2) for p in self.qkv(x).split(self.d, dim=2))
        att = torch.softmax(q @ k.transpose(-2, -1) * 0.25, dim=-1)
        return x + self.proj((att @ v).transpose(1, 2).reshape(b, t, -1))


@pytest.mark.parametrize("ir", ["training", "inference"])
def test_cast_keeps_the_pieces_of_a_split_in_bf16(tmp_path, ir):
    """cast on a program (aten.split and getitem): the pieces stay bf16, so
    no conversion reads them (before, the whole linear result went up to
    fp32 for the split and each piece back down); the result reloads and
    matches within bf16's reach."""
    torch.manual_seed(0)
    model, inputs = FusedQkv().eval(), (torch.randn(1, 8, 32),)
    ep = torch.export.export(model, inputs)
    if ir == "inference":
        ep = ep.run_decompositions()
    path, out, report = tmp_path / "qkv.pt2", tmp_path / "bf16.pt2", tmp_path / "report.json"
    torch.export.save(ep, str(path))
    run_ptopt(path, out, "--passes", "-O1,cast{dtype=bf16}", "--force", "--report", report)
    (cast,) = [p for p in json.loads(report.read_text())["passes"] if p["pass"] == "cast"]
    assert cast["counters"].get("lists-kept") == 1, cast
    result = torch.export.load(str(out))
    (split,) = [n for n in result.graph.nodes if "split" in str(n.target)]
    conversions = ("aten._to_copy.default", "aten.to.dtype", "aten._to_dtype_copy.default")
    assert str(split.args[0].target) not in conversions, split.args[0].target
    # x down, the scores up for softmax and its result down, proj's result up
    # for the residual add (8 before: qkv's result up, q, k and v down)
    assert sum(str(n.target) in conversions for n in result.graph.nodes) == 4
    a, b = model(*inputs), result.module()(*inputs)
    assert torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0) > 0.99


class Conv1dNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv1d(4, 8, 3, stride=2, padding=1)
        self.b = torch.nn.Conv1d(8, 8, 3, padding=2, dilation=2, groups=2)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def test_int8_conv1d_in_qdq_form(tmp_path):
    """quantized::conv1d keeps 2-d packed parameters; written back as
    aten.conv1d with the original's stride, padding, dilation and groups
    and a 3-d int8 weight."""
    import torch.ao.quantization.fx._decomposed  # noqa: F401

    torch.manual_seed(0)
    model, inputs = Conv1dNet().eval(), (torch.rand(2, 4, 32),)
    path, out = tmp_path / "conv1d.pt2", tmp_path / "int8.pt2"
    torch.export.save(torch.export.export(model, inputs), str(path))
    run_ptopt(path, out, "--passes", "-O1,quantize{dtype=int8,fallback=false}")
    ep = torch.export.load(str(out))
    convs = [n for n in ep.graph.nodes if str(n.target) == "aten.conv1d.default"]
    assert [tuple(n.args[3:]) for n in convs] == [([2], [1], [1], 1), ([1], [2], [2], 2)]
    for n in convs:
        assert str(n.args[1].target) == f"{QDQ}.dequantize_per_channel.default"
    assert sorted(tuple(t.shape) for t in {**ep.state_dict, **ep.constants}.values() if t.dtype == torch.int8) == \
        [(8, 4, 3), (8, 4, 3)]
    a, b = model(*inputs), ep.module()(*inputs)
    assert torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0) > 0.99


class SharedHeadNet(torch.nn.Module):
    """One module called at two places: quantize packs its weight once."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.a = torch.nn.Conv2d(8, 8, 1)
        self.head = torch.nn.Conv2d(8, 4, 1)

    def forward(self, x):
        y = torch.relu(self.stem(x))
        return self.head(torch.relu(self.a(y))) + self.head(y)


def test_int8_shared_module_writes_one_weight(tmp_path):
    """A module called at two places reads one packed weight in TorchScript
    (packed-shared), and one int8 weight, scale and bias in the program."""
    import torch.ao.quantization.fx._decomposed  # noqa: F401

    torch.manual_seed(0)
    model, inputs = SharedHeadNet().eval(), (torch.rand(2, 3, 16, 16),)
    path, out = tmp_path / "shared.pt2", tmp_path / "int8.pt2"
    torch.export.save(torch.export.export(model, inputs), str(path))
    log = run_ptopt(path, out, "--passes", "-O1,quantize{dtype=int8,fallback=false}")
    assert "packed-shared=1" in log, log
    ep = torch.export.load(str(out))
    assert targets_count(ep, f"{QDQ}.dequantize_per_channel.default") == 4
    tensors = {**ep.state_dict, **ep.constants}.values()
    assert sorted(tuple(t.shape) for t in tensors if t.dtype == torch.int8) == [(4, 8, 1, 1), (8, 3, 3, 3), (8, 8, 1, 1)]
    a, b = model(*inputs), ep.module()(*inputs)
    assert torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0) > 0.99


def targets_count(ep, target):
    return call_targets(ep).count(target)


def test_int8_without_a_qdq_form_is_refused(programs, tmp_path):
    """Dynamic int8 (quantized::linear_dynamic) has no Q/DQ form here: exit 2,
    one line naming the op and what to do, nothing written."""
    path, _ = programs[("transformer_encoder", "training")]
    out = tmp_path / "out.pt2"
    p = subprocess.run([CLI, str(path), str(out), "--passes", "-O1,quantize{mode=dynamic}"], capture_output=True,
                       text=True)
    assert p.returncode == 2, p.stdout + p.stderr
    error = [line for line in p.stderr.splitlines() if line.startswith("ptopt: error")]
    assert len(error) == 1 and "quantized::linear_dynamic" in error[0] and "TorchScript" in error[0], p.stderr
    assert not out.exists() and not list(tmp_path.iterdir())


def test_python_optimize_gives_an_int8_program(programs):
    import ptopt

    path, inputs = programs[("resnet18", "training")]
    result = ptopt.optimize(str(path), "-O1", inputs, quantize="int8", measure=False)
    assert isinstance(result, torch.export.ExportedProgram)
    assert f"{QDQ}.dequantize_per_channel.default" in call_targets(result)
    a, b = outputs(torch.export.load(str(path)), inputs)[0], outputs(result, inputs)[0]
    assert torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0) > 0.99


def test_verify_runs_a_program_at_its_shapes(programs, tmp_path):
    """`ptopt verify A.pt2 B.pt2` and ptopt.verify(ep_a, ep_b) run at the
    shapes A was exported at (not an assumption from the first op, which a
    transformer's has none of)."""
    path, inputs = programs[("transformer_encoder", "training")]
    out = tmp_path / "out.pt2"
    run_ptopt(path, out, "-O1", "--no-measure")
    text = run_ptopt("verify", path, out)
    assert "passed" in text and "2,10,32" in text, text
    # ptopt.verify(ep, ...) runs at the program's own example inputs.
    import ptopt
    report = ptopt.verify(torch.export.load(str(path)), torch.export.load(str(out)))
    assert report.passed, str(report)  # without them: "cannot be inferred safely"


# ---- dynamic shapes: a program exported with dynamic_shapes= stays dynamic


def dynamic_cases():
    """name -> (model, inputs, dynamic_shapes, inputs of other sizes)."""
    batch = torch.export.Dim("batch", min=1, max=16)
    seq = torch.export.Dim("seq", min=2, max=32)
    h, w = torch.export.Dim("h", min=64, max=256), torch.export.Dim("w", min=64, max=256)
    return {
        "convbn_batch": (CORPUS["convbn"][0], (torch.randn(2, 3, 16, 16),), ({0: batch},),
                         [(torch.randn(5, 3, 16, 16),)]),
        # Conv output sizes are floor divisions of H and W; channels-last
        # (-O2) strides are channels times them.
        "resnet18_batch_hw": (CORPUS["resnet18"][0], (torch.randn(2, 3, 64, 64),), ({0: batch, 2: h, 3: w},),
                              [(torch.randn(3, 3, 80, 104),)]),
        # Batch times sequence in the attention's reshapes.
        "transformer_batch_seq": (CORPUS["transformer_encoder"][0], (torch.randn(2, 10, 32),),
                                  ({0: batch, 1: seq},), [(torch.randn(3, 7, 32),), (torch.randn(1, 31, 32),)]),
    }


DYNAMIC = dynamic_cases()


def user_input_sizes(ep):
    names = set(ep.graph_signature.user_inputs)
    return [n.meta["val"].shape for n in ep.graph.nodes if n.op == "placeholder" and n.name in names]


@pytest.mark.parametrize("ir", IRS)
@pytest.mark.parametrize("name", list(DYNAMIC))
def test_dynamic_program_stays_dynamic(tmp_path, name, ir):
    model, inputs, dynamic_shapes, others = DYNAMIC[name]
    ep = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes, strict=False)
    if ir == "inference":
        ep = ep.run_decompositions()
    path, out, report = tmp_path / "in.pt2", tmp_path / "out.pt2", tmp_path / "report.json"
    torch.export.save(ep, str(path))
    text = run_ptopt(path, out, "-O2", "--no-measure", "--report", report)
    # Verified at the export sizes and at others within the ranges.
    verification = next(line for line in text.splitlines() if line.startswith("verification:"))
    assert "passed" in verification and " | " in verification, verification
    original, result = torch.export.load(str(path)), torch.export.load(str(out))
    assert {str(k): str(v) for k, v in result.range_constraints.items()} == \
        {str(k): str(v) for k, v in original.range_constraints.items()}
    assert [[isinstance(d, torch.SymInt) for d in s] for s in user_input_sizes(result)] == \
        [[isinstance(d, torch.SymInt) for d in s] for s in user_input_sizes(original)]
    fired = {p["pass"] for p in json.loads(report.read_text())["passes"] if p["changed"]}
    norms = [len([t for t in call_targets(p) if "batch_norm" in t]) for p in (original, result)]
    if norms[0]:  # folded (convbn's BN after an add has no conv to fold into)
        assert "fold-conv-bn" in fired and norms[1] < norms[0], (fired, norms)
    for args in [inputs, *others]:
        with torch.no_grad():
            for a, b in zip(outputs(original, args), outputs(result, args)):
                assert a.shape == b.shape
                torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
    # Outside the ranges the program refuses, as the original does.
    with pytest.raises(Exception):
        result.module()(torch.randn(17, *inputs[0].shape[1:]))


def test_dynamic_program_keeps_derived_sizes(tmp_path):
    """A size given as 2*n (a derived Dim): the input's expression and both
    ranges stay; the view's floor division is computed at run time."""
    class Halves(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x.view(x.shape[0] // 2, -1))

    n = torch.export.Dim("n", min=2, max=64)
    ep = torch.export.export(Halves(), (torch.randn(4, 8),), dynamic_shapes=({0: 2 * n},))
    path, out = tmp_path / "in.pt2", tmp_path / "out.pt2"
    torch.export.save(ep, str(path))
    run_ptopt(path, out, "--passes", "", "--no-measure")
    result = torch.export.load(str(out))
    assert len(result.range_constraints) == 2
    x = torch.randn(10, 8)
    assert torch.equal(result.module()(x), ep.module()(x))
    # `ptopt verify` runs a dynamic program at other sizes too (2*n moved).
    text = run_ptopt("verify", path, out)
    verification = next(line for line in text.splitlines() if line.startswith("verification:"))
    assert "passed" in verification and "x:4,8 | x:6,8 | x:10,8" in verification, verification


def test_dynamic_symbolic_float_is_refused(tmp_path):
    class Scaled(torch.nn.Module):
        def forward(self, x):
            return x * (x.shape[1] ** -0.5)

    ep = torch.export.export(Scaled(), (torch.randn(2, 8),),
                             dynamic_shapes=({1: torch.export.Dim("n", min=2, max=64)},))
    path, out = tmp_path / "in.pt2", tmp_path / "out.pt2"
    torch.export.save(ep, str(path))
    text = run_ptopt(path, out, "-O1", "--no-measure", expect=2)
    errors = [line for line in text.splitlines() if line.startswith("ptopt: error")]
    assert len(errors) == 1 and "symbolic floats" in errors[0], text
    assert not out.exists()


# ---- bad input: exit 2, one line, nothing written


def rewrite_archive(src, dst, edit):
    """Copies the zip `src` to `dst`, entry by entry through edit(name, data)
    (None drops the entry)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = edit(info.filename, zin.read(info.filename))
            if data is not None:
                zout.writestr(info.filename, data)


def edit_json(suffix, change):
    def edit(name, data):
        if not name.endswith(suffix):
            return data
        doc = json.loads(data)
        change(doc)
        return json.dumps(doc).encode()
    return edit


def schema_99(doc):
    doc["schema_version"]["major"] = 99


def pickled_weight(doc):
    next(iter(doc["config"].values()))["use_pickle"] = True


def unknown_op(doc):
    doc["graph_module"]["graph"]["nodes"][0]["target"] = "torch.ops.aten.no_such_op.default"


def higher_order(doc):
    doc["graph_module"]["graph"]["nodes"][0]["target"] = "torch.ops.higher_order.cond"


BAD = {
    "truncated": (None, "damaged"),
    "schema_version": (edit_json("models/model.json", schema_99), "export schema 99"),
    "missing_weight": (lambda n, d: None if n.endswith("weights/weight_0") else d, "weight_0"),
    "pickled_weight": (edit_json("model_weights_config.json", pickled_weight), "never unpickles"),
    "unknown_op": (edit_json("models/model.json", unknown_op), "no_such_op"),
    "higher_order_op": (edit_json("models/model.json", higher_order), "higher-order op"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_pt2_is_refused_with_one_line(programs, tmp_path, case):
    path, _ = programs[("convbn", "training")]
    bad = tmp_path / f"{case}.pt2"
    edit, expected = BAD[case]
    if edit is None:
        data = path.read_bytes()
        bad.write_bytes(data[: len(data) * 2 // 3])
    else:
        rewrite_archive(path, bad, edit)
    out = tmp_path / "out.pt2"
    text = run_ptopt(bad, out, "-O1", "--no-measure", expect=2)
    errors = [line for line in text.splitlines() if line.startswith("ptopt: error")]
    assert len(errors) == 1 and expected in errors[0], text
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [bad.name]
