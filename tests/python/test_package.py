"""The Python package `ptopt`: every function and every exception.

Run by ctest (python.package) with PYTHONPATH=build/python; the fixtures
(PTOPT_FIXTURES_DIR) are made by tests/fixtures/make_fixtures.py.
"""

import io
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ptopt

FIXTURES = os.environ.get("PTOPT_FIXTURES_DIR", "build/fixtures")
QUANT_FIXTURES = os.environ.get("PTOPT_QUANT_FIXTURES_DIR", "build/quant_fixtures")


class ConvBnRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 4)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn(self.conv(x)))
        return self.fc(y.mean(dim=(2, 3)))


class Hardtanh(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardtanh(self.conv(x), 0.0, 6.0)


class TwoInputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x)) * scale


@pytest.fixture(scope="module")
def scripted():
    torch.manual_seed(0)
    return torch.jit.script(ConvBnRelu().eval())


X = (torch.randn(2, 3, 16, 16),)


def ops(module):
    return ptopt.show(module).op_counts


# ---------------------------------------------------------------- the torch it runs with


def test_built_against_names_this_torch():
    # "LibTorch 2.15.0, CUDA 13.0 compiled in" / "LibTorch 1.13.0, CPU only ..."
    assert ptopt.built_against.startswith("LibTorch ")
    built = ptopt.built_against.split()[1]
    assert built.split(".")[:2] == torch.__version__.split("+")[0].split(".")[:2]
    assert (", CUDA " in ptopt.built_against) == (torch.version.cuda is not None)


def test_python_m_ptopt_runs_the_command_line():
    # `python -m ptopt` (and a pip install's `ptopt` command) becomes the
    # command line built with this package: the build tree's tools/ptopt here,
    # ptopt/_bin/ptopt in a pip install (scripts/check-pip-install.sh).
    from ptopt.__main__ import executable
    if os.environ.get("PTOPT_CLI"):
        assert os.path.samefile(executable(), os.environ["PTOPT_CLI"])
    out = subprocess.run([sys.executable, "-m", "ptopt", "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"ptopt {ptopt.__version__} ({ptopt.built_against})"
    bad = subprocess.run([sys.executable, "-m", "ptopt", "--no-such-flag"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2, bad.stderr  # the command line's usage error, passed through


def test_torchscript_deprecation_is_said_once():
    # torch 2.10 on warns on every torch.jit call; with ptopt imported the user
    # gets ptopt's one note instead (PTOPT_TORCHSCRIPT_WARNINGS=all keeps torch's).
    code = textwrap.dedent("""
        import warnings, torch
        warnings.simplefilter("default")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import ptopt
            m = torch.jit.script(torch.nn.ReLU())
            for _ in range(3):
                torch.jit.save(m, "/dev/null")
        print(sum("deprecat" in str(w.message) for w in caught))
        print(sum("ptopt" in str(w.message) for w in caught))
    """)
    major_minor = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    for env in ({}, {"PTOPT_TORCHSCRIPT_WARNINGS": "all"}):
        environ = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
        environ.update(env)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, check=True)
        deprecations, from_ptopt = (int(n) for n in out.stdout.split())
        if major_minor < (2, 10):
            assert (deprecations, from_ptopt) == (0, 0), out.stdout  # 1.13 to 2.9: nothing to say
        elif not env:
            assert (deprecations, from_ptopt) == (1, 1), out.stdout  # ptopt's note, and nothing per call
        else:
            assert deprecations >= 4 and from_ptopt == 0, out.stdout  # torch's own, per call


# ---------------------------------------------------------------- optimize


def test_optimize_scripted_in_memory(scripted):
    before = scripted(*X)
    fast = ptopt.optimize(scripted, "-O1", X)
    assert isinstance(fast, torch.jit.ScriptModule)
    assert "aten::batch_norm" in ops(scripted) and "aten::batch_norm" not in ops(fast)
    torch.testing.assert_close(fast(*X), before, rtol=1e-4, atol=1e-5)
    # The caller's module is not changed, and saves and loads like any module.
    torch.testing.assert_close(scripted(*X), before, rtol=0, atol=0)
    buf = io.BytesIO()
    torch.jit.save(fast, buf)
    buf.seek(0)
    torch.testing.assert_close(torch.jit.load(buf)(*X), fast(*X), rtol=0, atol=0)


needs_prepacked = pytest.mark.skipif(not hasattr(torch.ops.mkldnn_prepacked, "conv2d_prepack"),
                                     reason="this PyTorch has no mkldnn_prepacked operators")


def prepacked_hardtanh(seed):
    """Hardtanh's conv on a weight packed when the module loads
    (tuned-kernels{prepacked=*}): the eager model, an input, ptopt's module."""
    torch.manual_seed(seed)
    eager = Hardtanh().eval()
    x = torch.randn(1, 3, 16, 16)
    return eager, x, ptopt.optimize(torch.jit.script(eager), "-O1,tuned-kernels{prepacked=*}", (x,), measure=False)


@needs_prepacked
def test_optimize_prepacked_convs_load_run_copy_and_save():
    # tuned-kernels{prepacked=*}: the conv's weight is packed when the module
    # loads; the module Python gets back runs, deep-copies and saves.
    import copy
    eager, x, fast = prepacked_hardtanh(2)
    graph = str(fast.graph)
    assert "mkldnn_prepacked::conv2d_run" in graph and "aten::conv2d" not in graph
    assert isinstance(fast.ptopt_load_time.v0, torch.ScriptObject)  # packed when it loaded
    assert ops(fast)["aten::conv2d"] == 1  # ptopt reads it back as the conv it was
    torch.testing.assert_close(fast(x), eager(x), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(copy.deepcopy(fast)(x), fast(x), rtol=0, atol=0)
    buf = io.BytesIO()
    torch.jit.save(fast, buf)
    buf.seek(0)
    torch.testing.assert_close(torch.jit.load(buf)(x), fast(x), rtol=0, atol=0)


@needs_prepacked
def test_repack_packs_again_at_the_current_thread_count():
    # A pack follows the thread count at load; ptopt.repack makes it again
    # after torch.set_num_threads, outputs unchanged. Nothing to do for a
    # module ptopt did not pack.
    eager, x, fast = prepacked_hardtanh(3)
    before = fast(x)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1 if threads > 1 else 2)
        assert ptopt.repack(fast) is True
        torch.testing.assert_close(fast(x), before, rtol=1e-6, atol=1e-6)
    finally:
        torch.set_num_threads(threads)
    assert ptopt.repack(torch.jit.script(eager)) is False
    with pytest.raises(TypeError):
        ptopt.repack(eager)


class ChannelsLastMlp(torch.nn.Module):
    """ConvNeXt's MLP on [N, H, W, C], a token linear on [N, T, C] whose
    result is view()ed (which needs it contiguous), a head on [N, C]."""
    def __init__(self):
        super().__init__()
        self.pw1 = torch.nn.Linear(16, 64)
        self.pw2 = torch.nn.Linear(64, 16)
        self.tokens = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 5)

    def forward(self, x):
        y = self.pw2(torch.nn.functional.gelu(self.pw1(x)))
        n, h, w, c = y.shape
        t = self.tokens(y.reshape(n, h * w, c)).view(n, h * w, 2, c // 2)
        return self.head(t.sum(dim=2).mean(dim=1).repeat(1, 2))


@needs_prepacked
def test_optimize_prepacked_linears_run_at_other_shapes_copy_and_save():
    # tuned-kernels{prepacked=*} also packs linears, as 1x1 convs on views of
    # their input: the module runs at other shapes, deep-copies and saves.
    import copy
    torch.manual_seed(3)
    eager = ChannelsLastMlp().eval()
    x = torch.randn(1, 8, 8, 16)
    fast = ptopt.optimize(torch.jit.script(eager), "-O1,tuned-kernels{prepacked=*}", (x,), measure=False)
    graph = str(fast.graph)
    assert graph.count("mkldnn_prepacked::conv2d_run") == 4 and "aten::linear" not in graph
    for shape in [(1, 8, 8, 16), (3, 5, 7, 16)]:
        y = torch.randn(*shape)
        torch.testing.assert_close(fast(y), eager(y), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(copy.deepcopy(fast)(x), fast(x), rtol=0, atol=0)
    buf = io.BytesIO()
    torch.jit.save(fast, buf)
    buf.seek(0)
    torch.testing.assert_close(torch.jit.load(buf)(x), fast(x), rtol=0, atol=0)


def test_optimize_traced_with_inputs_by_name_and_pipeline_object():
    torch.manual_seed(1)
    eager = TwoInputs().eval()
    x, s = torch.randn(1, 3, 10, 10), torch.rand(1)
    traced = torch.jit.trace(eager, (x, s))
    pipeline = ptopt.Pipeline(["bn-inference", ptopt.Pipeline.fixpoint("fold-conv-bn", "dce", max_iter=2)])
    fast = ptopt.optimize(traced, pipeline, {"scale": s, "x": x})
    assert "aten::batch_norm" not in ops(fast)
    torch.testing.assert_close(fast(x, s), eager(x, s), rtol=1e-4, atol=1e-5)


def test_optimize_training_mode_module_is_left_in_training_mode():
    m = torch.jit.script(ConvBnRelu().train())
    fast = ptopt.optimize(m, "-O1", X)
    assert m.training and m.bn.training
    assert "aten::batch_norm" not in ops(fast)


def test_optimize_path_and_input_shapes_and_report(tmp_path):
    path = os.path.join(FIXTURES, "conv1d_bn.pt")
    record = {}
    fast = ptopt.optimize(path, "-O1", input_shapes=["1,4,32"], report=record)
    assert isinstance(fast, torch.jit.ScriptModule)
    assert record["verification"]["passed"] is True and record["input"] == path
    assert record["pipeline"] == str(ptopt.Pipeline("-O1"))
    report_file = tmp_path / "run.json"
    ptopt.optimize(torch.jit.load(path), "-O1", input_shapes=["1,4,32"], report=report_file)
    assert json.loads(report_file.read_text())["outcome"] == "passed"


def test_optimize_inferred_inputs_and_verify_false(scripted):
    # The first op is a conv: 1x3x224x224 is assumed (with a warning note).
    with pytest.warns(UserWarning, match="assum"):
        ptopt.optimize(scripted, "canonicalize")
    # Nothing to verify with: an error unless verify=False.
    class Add(nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a + b
    add = torch.jit.script(Add())
    with pytest.raises(ptopt.InputError, match="example_inputs"):
        ptopt.optimize(add, "dce")
    assert isinstance(ptopt.optimize(add, "dce", verify=False), torch.jit.ScriptModule)


def test_optimize_rules_as_string():
    m = torch.jit.script(Hardtanh().eval())
    rules = textwrap.dedent("""\
        rule hardtanh-to-relu6
          pattern
            graph(%x : Tensor, %lo : Scalar, %hi : Scalar):
              %y : Tensor = aten::hardtanh(%x, %lo, %hi)
              output(%y)
          replacement
            graph(%x : Tensor, %lo : Scalar, %hi : Scalar):
              %y : Tensor = aten::relu6(%x)
              output(%y)
          where %lo in {0.0, 0}
          where %hi in {6.0, 6}
        """)
    x = (torch.randn(1, 3, 8, 8),)
    fast = ptopt.optimize(m, "canonicalize", x, rules=rules)
    assert "aten::relu6" in ops(fast) and "aten::hardtanh" not in ops(fast)
    torch.testing.assert_close(fast(*x), m(*x), rtol=0, atol=0)


def test_optimize_quantize_and_tune_arguments(scripted):
    with pytest.raises(ValueError, match="int8"):
        ptopt.optimize(scripted, "-O1", X, quantize="int4")
    with pytest.raises(ValueError, match="calibration"):
        ptopt.optimize(scripted, "-O1", X, calibration=[X[0]])
    with pytest.raises(TypeError, match="torch.jit.script"):
        ptopt.optimize(ConvBnRelu(), "-O1", X)
    with pytest.raises(FileNotFoundError):
        ptopt.optimize("/nonexistent/model.pt")


def test_optimize_tune_decides_by_measurement_and_caches(scripted, tmp_path):
    """tune=True (--tune): decisions timed on this machine, recorded in report["tuning"], cached in tuning_cache
    (a second call times nothing); the result is verified like any other."""
    cache = tmp_path / "tuning.json"
    before_threads = torch.get_num_threads()
    report = {}
    fast = ptopt.optimize(scripted, "-O2", X, tune=True, tune_budget=5, tuning_cache=cache, report=report)
    torch.testing.assert_close(fast(*X), scripted(*X), rtol=1e-4, atol=1e-4)
    assert report["tuning"]["decisions"], report["tuning"]
    assert cache.exists()
    again = {}
    ptopt.optimize(scripted, "-O2", X, tune=True, tune_budget=5, tuning_cache=cache, report=again)
    assert again["tuning"]["measured"] == 0
    with pytest.raises(ValueError, match="tune=True"):
        ptopt.optimize(scripted, "-O2", X, tune_budget=5)
    # tune_threads= (--tune-threads): tuned with each count first, whole-model choices confirmed at the other
    # count; the kept order's context names both.
    threads = {}
    ptopt.optimize(scripted, "-O2", X, tune=True, tune_budget=5, tuning_cache=cache, tune_threads=[1, 2],
                   report=threads)
    orders = threads["tuning"]["orders"]
    assert [o["threads"] for o in orders] == [[1, 2], [2, 1]], orders
    kept = [o["threads"] for o in orders if o["chosen"]]
    assert len(kept) == 1, orders
    assert threads["tuning"]["context"].endswith("%d threads, confirmed at %d threads" % tuple(kept[0])), \
        threads["tuning"]["context"]
    assert torch.get_num_threads() == before_threads  # the count the caller set is back
    with pytest.raises(ValueError, match="tune=True"):
        ptopt.optimize(scripted, "-O2", X, tune_threads="1,all")
    with pytest.raises(ValueError, match="tune_threads"):
        ptopt.optimize(scripted, "-O2", X, tune=True, tune_threads=[0])


def test_optimize_never_slower_stage_reports_its_verdict(scripted, tmp_path, monkeypatch):
    """measure=True (the default; ctest sets PTOPT_NO_MEASURE=1 for speed, lifted here): the result is timed
    against the input as `ptopt IN OUT` does, and the verdict is in report["measurement"]; with tune=True a second
    call that produces the same bytes reuses it from the tuning cache; force=True keeps the result;
    measure=False skips the stage."""
    monkeypatch.delenv("PTOPT_NO_MEASURE", raising=False)
    report = {}
    fast = ptopt.optimize(scripted, "-O1", X, measure_budget=0.3, report=report)
    torch.testing.assert_close(fast(*X), scripted(*X), rtol=1e-4, atol=1e-5)
    m = report["measurement"]
    assert m["source"] == "measured" and m["budget_s"] == 0.3 and m["threads"] == 1, m
    assert m["verdict"] in ("faster", "no clear difference", "slower"), m
    lo, hi = m["ci95"]
    assert lo <= m["ratio"] <= hi and abs(m["speedup"] * m["ratio"] - 1) < 1e-9, m
    assert m["candidates"][0]["candidate"] == "output" and m["candidates"][0]["pairs"] >= 5, m
    assert m["written"] in ("output", "input"), m  # -O1 has no precision or layout pass to drop
    assert (m["written"] == "output") == (m["verdict"] != "slower"), m
    assert report["outcome"] == ("passed" if m["written"] == "output" else
                                 "passed; wrote the input model (unchanged) (the optimized model was slower)")

    forced = {}
    ptopt.optimize(scripted, "-O1", X, measure_budget=0.3, force=True, report=forced)
    assert forced["measurement"]["written"] == "output" and len(forced["measurement"]["candidates"]) == 1

    cache = tmp_path / "tuning.json"
    cold, warm = {}, {}
    ptopt.optimize(scripted, "-O1", X, measure_budget=0.3, tune=True, tune_budget=2, tuning_cache=cache, report=cold)
    ptopt.optimize(scripted, "-O1", X, measure_budget=0.3, tune=True, tune_budget=2, tuning_cache=cache, report=warm)
    assert cold["measurement"]["source"] == "measured", cold["measurement"]
    assert warm["measurement"]["source"] == "cached" and warm["measurement"]["cache"] == str(cache), warm["measurement"]
    assert warm["measurement"]["ratio"] == cold["measurement"]["ratio"]
    assert warm["verification"]["passed"]  # verification is never cached

    skipped = {}
    ptopt.optimize(scripted, "-O1", X, measure=False, report=skipped)
    assert skipped["measurement"]["skipped"] == "measure=False", skipped["measurement"]


def test_optimize_int8_with_calibration_batches():
    """quantize="int8" with calibration=[...] (the CLI's --quantize int8 --calibration FILE): quantized convs,
    close to fp32 on held-out inputs; bad calibration data is an InputError naming the problem."""
    path = os.path.join(QUANT_FIXTURES, "quant_cnn.pt")
    if not os.path.exists(path):
        pytest.skip("quant fixtures not generated")
    calib = torch.load(os.path.join(QUANT_FIXTURES, "quant_cnn_calib.pt"))
    heldout = torch.load(os.path.join(QUANT_FIXTURES, "quant_cnn_heldout.pt"))
    original = torch.jit.load(path)
    report = {}
    q = ptopt.optimize(path, "-O2", (heldout[0],), quantize="int8", calibration=calib, report=report)
    assert "quantized::conv2d" in str(q.graph) or "quantized::conv2d" in q.code
    for x in heldout:
        a, b = original(x).flatten(), q(x).flatten()
        assert F.cosine_similarity(a, b, dim=0) > 0.99
    assert "quantize" in report
    nan = [c.clone() for c in calib[:3]]
    nan[1][0, 0, 0, 0] = float("nan")
    with pytest.raises(ptopt.InputError, match="calibration"):
        ptopt.optimize(path, "-O2", (heldout[0],), quantize="int8", calibration=nan)


def test_optimize_fp16_quantize_is_verified_by_emulation(scripted):
    fast = ptopt.optimize(scripted, "-O1", X, quantize="fp16")
    assert isinstance(fast, torch.jit.ScriptModule)


# ---------------------------------------------------------------- errors


def test_pipeline_error_has_caret_message_and_nearest_pass(scripted):
    with pytest.raises(ptopt.PipelineError) as e:
        ptopt.optimize(scripted, "canonicalize,fold-conv-nb,dce", X)
    assert isinstance(e.value, ValueError)
    assert e.value.suggestion == "fold-conv-bn"
    text = str(e.value)
    assert "did you mean 'fold-conv-bn'" in text
    assert text.splitlines()[-1].strip() == "^" and e.value.column == 14 and e.value.line == 1
    with pytest.raises(ptopt.PipelineError, match="fixpoint"):
        ptopt.Pipeline("fixpoint{max-iter=3}(cse")


def test_rules_error_has_caret_message(scripted):
    with pytest.raises(ptopt.RulesError) as e:
        ptopt.optimize(scripted, "-O1", X, rules="rule broken\n  pattern\n    nonsense\n")
    assert isinstance(e.value, ValueError) and e.value.line >= 1
    assert str(e.value).startswith("rules:") and "^" in str(e.value)


def test_not_torchscript(tmp_path):
    path = tmp_path / "state_dict.pt"
    torch.save(ConvBnRelu().state_dict(), path)
    with pytest.raises(ptopt.NotTorchScriptError, match="torch.save"):
        ptopt.optimize(path)
    with pytest.raises(ptopt.NotTorchScriptError):
        ptopt.load(path)
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a zip archive at all")
    with pytest.raises(ptopt.NotTorchScriptError, match="not a TorchScript file"):
        ptopt.optimize(garbage)


def test_shape_that_does_not_fit(scripted):
    bad = (torch.randn(1, 5, 16, 16),)  # 5 channels; the conv takes 3
    with pytest.raises(ptopt.InputShapeError) as e:
        ptopt.optimize(scripted, "-O1", bad)
    assert isinstance(e.value, ptopt.InputError) and isinstance(e.value, ValueError)
    with pytest.raises(ptopt.InputShapeError):
        ptopt.optimize(scripted, "-O1", bad, verify=False)
    with pytest.raises(ptopt.InputShapeError, match="takes 1 input"):
        ptopt.optimize(scripted, "-O1", (X[0], X[0]))
    with pytest.raises(ptopt.InputShapeError, match="does not take"):
        ptopt.optimize(scripted, "-O1", {"y": X[0]})
    with pytest.raises(ptopt.InputShapeError):
        ptopt.verify(scripted, scripted, bad)
    with pytest.raises(ptopt.InputShapeError):
        ptopt.bench(scripted, None, bad, iters=2, warmup=0)


WRONG_RULE = textwrap.dedent("""\
    rule relu-to-sigmoid
      pattern
        graph(%x : Tensor):
          %y : Tensor = aten::relu(%x)
          output(%y)
      replacement
        graph(%x : Tensor):
          %y : Tensor = aten::sigmoid(%x)
          output(%y)
    """)


def test_verification_error_carries_per_output_metrics(scripted):
    with pytest.raises(ptopt.VerificationError) as e:
        ptopt.optimize(scripted, "canonicalize", X, rules=WRONG_RULE)
    report = e.value.report
    assert report is not None and not report.passed and not report
    assert set(e.value.metrics) == {"out"}
    m = e.value.metrics["out"]
    assert m["passed"] is False and m["max_abs"] > 1e-3 and "cosine" in m
    assert "FAILED" in str(e.value) or "failed" in str(e.value)


def test_unknown_operator_without_load_ops(tmp_path):
    torchvision = pytest.importorskip("torchvision")

    class Nms(nn.Module):
        def forward(self, boxes: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
            return torchvision.ops.nms(boxes, scores, 0.5)

    path = tmp_path / "nms.pt"
    torch.jit.save(torch.jit.script(Nms()), str(path))
    lib = ptopt._C.torchvision_ops_library()
    # A fresh process without torchvision imported: the operator is unknown.
    script = textwrap.dedent(f"""\
        import sys, torch, ptopt
        assert "torchvision" not in sys.modules
        try:
            ptopt.optimize({str(path)!r}, verify=False)
        except ptopt.UnknownOperatorError as e:
            assert e.operator == "torchvision::nms", e.operator
            assert "load_ops" in str(e)
            print("unknown-op-ok")
        boxes = torch.tensor([[0., 0., 10., 10.], [1., 1., 11., 11.], [50., 50., 60., 60.]])
        scores = torch.tensor([0.9, 0.8, 0.7])
        out = ptopt.optimize({str(path)!r}, "-O1", (boxes, scores), load_ops=[{lib!r}])
        assert out(boxes, scores).tolist() == [0, 2]
        print("load-ops-ok")
        """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "unknown-op-ok" in r.stdout and "load-ops-ok" in r.stdout


# ---------------------------------------------------------------- verify, bench


def test_verify_report(scripted):
    fast = ptopt.optimize(scripted, "-O1", X)
    report = ptopt.verify(scripted, fast, X)
    assert report.passed and bool(report)
    assert set(report.metrics) == {"out"} and report.metrics["out"]["passed"]
    assert "passed" in report.verdict and len(report.iterations) == 1
    seeded = ptopt.verify(scripted, fast, input_shapes=["2,3,16,16"], iterations=2)
    assert seeded.passed and len(seeded.iterations) == 2
    other = torch.jit.script(ConvBnRelu().eval())  # other weights
    differs = ptopt.verify(scripted, other, X)
    assert not differs.passed and differs.metrics["out"]["max_abs"] > 0
    assert "out" in str(differs)
    assert ptopt.verify(scripted, other, X, atol=1e3).passed


def test_verify_judges_b_by_its_own_precision(scripted):
    # A bf16 b is judged by the bf16 criterion (read from its constants and
    # conversions), and the report's notes say so; given terms still apply.
    bf16 = ptopt.optimize(scripted, "-O1,cast{dtype=bf16,min-channels=0}", X)
    report = ptopt.verify(scripted, bf16, X)
    assert report.passed, str(report)
    assert any("computes in bf16" in n for n in report.notes), report.notes
    assert not ptopt.verify(scripted, bf16, X, atol=1e-9, rtol=1e-9).passed
    fp32 = ptopt.optimize(scripted, "-O1", X)
    assert not any("computes in" in n for n in ptopt.verify(scripted, fp32, X).notes)


def test_bench(scripted):
    fast = ptopt.optimize(scripted, "-O1", X)
    threads = torch.get_num_threads()
    r = ptopt.bench(scripted, fast, X, threads=1, warmup=0.05, min_time=0.05, min_iters=5)
    assert torch.get_num_threads() == threads
    assert r.threads == 1 and r.a["runs"] >= 5 and r.b["runs"] == r.a["runs"]
    assert r.ratio > 0 and r.ci95[0] <= r.ratio <= r.ci95[1]
    assert r.median_a_ms > 0 and r.median_b_ms > 0 and "B/A" in str(r)
    one = ptopt.bench(scripted, example_inputs=X, iters=3, warmup=0)
    assert one.b is None and one.ratio is None and one.a["runs"] == 3


# ---------------------------------------------------------------- passes, Pipeline


def test_passes():
    infos = ptopt.passes()
    names = [p.name for p in infos]
    assert "fold-conv-bn" in names and names == sorted(names)
    cast = ptopt.passes("cast")
    assert cast.contract and cast.description
    dtype = next(o for o in cast.options if o.name == "dtype")
    assert dtype.kind == "enum" and "bf16" in dtype.choices and dtype.default == "auto"
    with pytest.raises(ptopt.PipelineError) as e:
        ptopt.passes("fold-conv-b")
    assert e.value.suggestion == "fold-conv-bn"
    assert set(ptopt.presets()) == {"-O0", "-O1", "-O2", "-O3"}


def test_pipeline_canonical_text():
    p = ptopt.Pipeline(" remove-dropout ,\n fixpoint{max-iter=3}( cse , dce ) # comment\n")
    assert str(p) == "remove-dropout,fixpoint{max-iter=3}(cse,dce)"
    assert ptopt.Pipeline(str(p)) == p and repr(p).startswith("Pipeline(")
    assert ptopt.Pipeline.preset(1) == ptopt.Pipeline("-O1")
    o1 = ptopt.Pipeline.preset(1)
    assert str(o1).endswith(",fuse-cudnn")
    # More passes go before the closing device lowering, as in "-O1,more".
    assert o1.then("channels-last") == ptopt.Pipeline("-O1,channels-last")
    assert str(o1.then("channels-last")).endswith("channels-last,fuse-cudnn")
    assert ptopt.Pipeline.step("cast", dtype="bf16", keep_io=False) == "cast{dtype=bf16,keep-io=false}"
    assert str(ptopt.Pipeline(ptopt.Pipeline.step("cast", dtype="fp16"))) == "cast{dtype=fp16}"
    assert str(ptopt.Pipeline("")) == ""


# ---------------------------------------------------------------- show, draw


def test_show(scripted):
    t = ptopt.show(scripted)
    assert t.op_counts["aten::conv2d"] == 1 and t.methods["forward"].nodes > 0
    assert t.text.startswith("# method forward\n") and "# op counts (forward" in t.text
    assert "aten::conv2d" in str(t)
    assert ptopt.show(os.path.join(FIXTURES, "conv1d_bn.pt")).op_counts["aten::conv1d"] >= 1
    loaded = ptopt.load(os.path.join(FIXTURES, "conv1d_bn.pt"))
    assert isinstance(loaded, torch.jit.ScriptModule) and loaded(torch.randn(1, 4, 32)).shape[0] == 1


def test_draw(scripted, tmp_path):
    fast = ptopt.optimize(scripted, "-O1", X)
    d = ptopt.draw(scripted, tmp_path / "g.dot")
    assert d.dot.startswith("digraph") and (tmp_path / "g.dot").read_text() == d.dot
    diff = ptopt.draw(scripted, tmp_path / "diff.dot", diff=fast, depth=1, input_shapes=["2,3,16,16"])
    assert diff.removed >= 1  # the batch_norm
    if ptopt._C.graphviz_available():
        svg = ptopt.draw(scripted, tmp_path / "diff.svg", diff=fast)
        assert (tmp_path / "diff.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
        assert svg.removed == diff.removed
    with pytest.raises(ValueError, match="svg"):
        ptopt.draw(scripted, tmp_path / "g.txt")
