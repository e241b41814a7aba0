"""The package's results equal the command line's, byte for byte, on the fixtures.

"Byte for byte" means two things, both checked:
  1. the archive the library produced for ptopt.optimize (the bytes it
     verified and loaded the returned module from) is the file `ptopt IN OUT`
     writes for the same model, pipeline and input shapes;
  2. the returned module, saved with torch.jit.save, gives the same bytes as
     the CLI's file loaded with torch.jit.load and saved the same way (what a
     user sees of either).
Run by ctest (python.package_matches_cli) with PTOPT_CLI (the ptopt binary)
and PTOPT_FIXTURES_DIR.
"""

import io
import json
import os
import pathlib
import subprocess
import tempfile

import pytest
import torch

import ptopt
from ptopt import _C

FIXTURES = os.environ.get("PTOPT_FIXTURES_DIR", "build/fixtures")
QUANT_FIXTURES = os.environ.get("PTOPT_QUANT_FIXTURES_DIR", "build/quant_fixtures")
CLI = os.environ.get("PTOPT_CLI", "build/tools/ptopt")

CASES = [
    ("resnet18_script", "-O1"),
    ("resnet18_trace", "-O1"),
    ("mobilenet_v2_script", "-O1"),
    ("conv1d_bn", "-O1"),
    ("linear_bn1d", "remove-dropout,bn-inference,fixpoint{max-iter=3}(fold-linear-bn,cse,dce)"),
    ("dict_output", "-O1"),
    ("control_flow", "-O1"),
]


def manifest():
    with open(os.path.join(FIXTURES, "fixtures.json")) as f:
        j = json.load(f)
    return {e["name"]: e for e in j["fixtures"]}


def shape_spec(i):
    if i["type"] == "int":
        return f"int:{i['value']}"
    if i["type"] != "tensor":
        return None
    spec = ",".join(str(d) for d in i["shape"])
    return spec if i.get("dtype", "float32") == "float32" else f"{spec}:{i['dtype']}"


def saved(module):
    buf = io.BytesIO()
    torch.jit.save(module, buf)
    return buf.getvalue()


@pytest.mark.parametrize("name,pipeline", CASES)
def test_package_equals_cli(name, pipeline, tmp_path):
    entry = manifest().get(name)
    if entry is None:
        pytest.skip(f"fixture {name} not generated")
    specs = [shape_spec(i) for i in entry["inputs"]]
    if None in specs or any(i.get("dtype") == "int64" for i in entry["inputs"]):
        pytest.skip(f"{name}: inputs an --input-shape cannot give")
    path = os.path.join(FIXTURES, entry["file"])
    out = tmp_path / "cli.pt"
    cmd = [CLI, path, str(out), "-q"] + (["--passes", pipeline] if not pipeline.startswith("-O") else [pipeline])
    for s in specs:
        cmd += ["--input-shape", s]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    cli_bytes = out.read_bytes()

    # 1. The library's archive for the package's call is the CLI's file.
    module = torch.jit.load(path)
    # By the driver's option table (driver/request_options.h), as the package
    # calls it: only what is given; every other option is driver::Request's default.
    raw = _C.optimize(module._c, "", json.dumps({"pipeline": pipeline, "input_shapes": specs}), None, None, None)
    assert raw["bytes"] == cli_bytes

    # 2. The public result saves like the CLI's file.
    fast = ptopt.optimize(module, pipeline, input_shapes=specs)
    assert saved(fast) == saved(torch.jit.load(str(out)))


def quant_fixture(name):
    path = os.path.join(QUANT_FIXTURES, name)
    if not os.path.exists(path):
        pytest.skip("quant fixtures not generated")
    return path


def test_calibration_is_one_policy(tmp_path):
    """int8 with calibration data: the CLI (--calibration FILE) and the package
    (calibration=[...]) check the data the same way, hold out its last batch to
    verify on when no inputs are given, and write the same bytes."""
    path = quant_fixture("quant_cnn.pt")
    calib_file = quant_fixture("quant_cnn_calib.pt")
    out = tmp_path / "cli.pt"
    r = subprocess.run([CLI, path, str(out), "--quantize", "int8", "--calibration", calib_file,
                        "--input-shape", "4,3,32,32"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "verification runs on the last --calibration batch (held out from calibration)" in r.stdout
    assert "WARNING" not in r.stderr  # real data: no random-calibration warning

    report = {}
    calib = torch.load(calib_file)
    fast = ptopt.optimize(path, "-O1", input_shapes=["4,3,32,32"], quantize="int8", calibration=calib,
                          report=report)
    assert saved(fast) == saved(torch.jit.load(str(out)))
    assert report["quantize"]["calibration"] == "calibration=", report["quantize"]

    # The same bad data is refused by both, with the same reason.
    bad = [c.clone() for c in calib[:3]]
    bad[1][0, 0, 0, 0] = float("nan")
    bad_file = tmp_path / "bad_calib.pt"
    torch.save(bad, str(bad_file))
    r = subprocess.run([CLI, path, str(tmp_path / "bad.pt"), "--quantize", "int8", "--calibration", str(bad_file),
                        "--input-shape", "4,3,32,32"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr
    assert not (tmp_path / "bad.pt").exists()
    with pytest.raises(ptopt.InputError) as err:
        ptopt.optimize(path, "-O1", input_shapes=["4,3,32,32"], quantize="int8", calibration=bad)
    reason = str(err.value).split("'calibration=': ", 1)[1]  # after the name of the data's source
    assert "NaN" in reason and reason in r.stdout + r.stderr, (reason, r.stdout + r.stderr)


def test_random_calibration_warns_from_both(tmp_path):
    """No calibration data: both faces warn that int8 is calibrated on random inputs."""
    path = quant_fixture("quant_cnn.pt")
    out = tmp_path / "cli.pt"
    r = subprocess.run([CLI, path, str(out), "-q", "--quantize", "int8", "--input-shape", "4,3,32,32"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ptopt: WARNING: quantize: no --calibration data" in r.stderr
    with pytest.warns(UserWarning, match="quantize: no --calibration data"):
        fast = ptopt.optimize(path, "-O1", input_shapes=["4,3,32,32"], quantize="int8")
    assert saved(fast) == saved(torch.jit.load(str(out)))


INT8_RUNS = [
    ("calibration file", ["--calibration", "quant_cnn_calib.pt"]),
    ("random calibration", []),
]


@pytest.mark.parametrize("label,extra", INT8_RUNS)
def test_int8_bytes_do_not_depend_on_thread_count(label, extra, tmp_path):
    """int8 calibration runs at one intra-op thread (rewriters::PassEffects::
    computesFromData): the CLI at OMP_NUM_THREADS 1 and 2 and the package at
    torch.set_num_threads 1 and 2 write the same bytes. (At the process's own
    count, ATen's conv reductions rounded differently, a calibrated scale
    moved by one float32 ulp, and the two faces, which run at different
    counts by default, wrote different files.)"""
    path = quant_fixture("quant_cnn.pt")
    extra = [quant_fixture(a) if a.endswith(".pt") else a for a in extra]
    files = {}
    for threads in (1, 2):
        out = tmp_path / f"cli{threads}.pt"
        r = subprocess.run([CLI, path, str(out), "-q", "--quantize", "int8", *extra, "--input-shape", "4,3,32,32"],
                           capture_output=True, text=True, timeout=300,
                           env={**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)})
        assert r.returncode == 0, r.stdout + r.stderr
        files[f"cli OMP_NUM_THREADS={threads}"] = out.read_bytes()
    calib = torch.load(extra[1]) if extra else None
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            module = torch.jit.load(path)
            report = {}
            options = {"pipeline": _C.extend_pipeline("-O1", "quantize{dtype=int8}"), "input_shapes": ["4,3,32,32"]}
            raw = _C.optimize(module._c, "", json.dumps(options), None, None, calib)
            files[f"package torch.set_num_threads({threads})"] = raw["bytes"]
            assert json.loads(raw["record_json"])["quantize"]["threads"] == 1
    finally:
        torch.set_num_threads(before)
    first = next(iter(files.values()))
    differ = [k for k, v in files.items() if v != first]
    assert not differ, f"{label}: {differ} differ from {next(iter(files))}"


# ---- One request, one policy (driver/request.h): the same request gives the
# same bytes and the same errors from both faces.

class _ConvThenFixedLinear(torch.nn.Module):
    """A conv first (so 1x3x224x224 is assumed), then a linear that only
    fits 8x8 inputs: the assumed shape does not fit."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.fc = torch.nn.Linear(4 * 6 * 6, 2)

    def forward(self, x):
        return self.fc(torch.flatten(self.conv(x), 1))


def cli(*args):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=300)


def test_assumed_shape_that_does_not_fit_is_one_policy(tmp_path):
    path = tmp_path / "fixed.pt"
    torch.jit.script(_ConvThenFixedLinear().eval()).save(str(path))
    # Verification required (the CLI's --verify, Python's default): an error
    # naming the assumption, nothing written.
    r = cli(path, tmp_path / "req.pt", "-O1", "--verify")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "the input shape was assumed" in r.stderr, r.stderr
    assert not (tmp_path / "req.pt").exists()
    with pytest.raises(ptopt.InputShapeError) as err:
        ptopt.optimize(str(path), "-O1")
    cli_message = r.stderr.split("ptopt: error: ", 1)[1].strip()
    assert str(err.value).strip() == cli_message, (str(err.value), cli_message)
    # Verification when possible (the CLI's default): written unverified, with
    # the warning; the same bytes as Python's verify=False.
    r = cli(path, tmp_path / "when.pt", "-O1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "verification skipped: the assumed input shape does not fit the model" in r.stderr, r.stderr
    raw = ptopt.optimize(str(path), "-O1", verify=False)
    assert saved(raw) == saved(torch.jit.load(str(tmp_path / "when.pt")))


def test_no_inputs_to_verify_with_is_one_policy(tmp_path):
    class Add(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a + b

    path = tmp_path / "add.pt"
    torch.jit.script(Add()).save(str(path))
    r = cli(path, tmp_path / "out.pt", "--passes", "dce", "--verify")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "cannot be inferred" in r.stderr, r.stderr
    with pytest.raises(ptopt.InputError, match="cannot be inferred"):
        ptopt.optimize(str(path), "dce")


def test_bad_pipeline_is_the_same_error(tmp_path):
    fx = os.path.join(FIXTURES, manifest()["resnet18_script"]["file"])
    r = cli(fx, tmp_path / "out.pt", "--passes", "cse,no-such-pass")
    assert r.returncode == 2, r.stdout + r.stderr
    with pytest.raises(ptopt.PipelineError) as err:
        ptopt.optimize(fx, "cse,no-such-pass", input_shapes=["1,3,64,64"])
    assert str(err.value).splitlines()[0] in r.stderr, (str(err.value), r.stderr)


RELU_TO_SIGMOID = """rule relu-is-not-sigmoid
  pattern
    graph(%x : Tensor):
      %y : Tensor = aten::relu_(%x)
      output(%y)
  replacement
    graph(%x : Tensor):
      %y : Tensor = aten::sigmoid_(%x)
      output(%y)
"""


def test_rules_in_memory_and_force_are_one_policy(tmp_path):
    """Rule text in memory (rules=...) and a rule file (--rules) rewrite alike,
    without a temporary file; a result that fails verification is refused by
    both, and kept by both with force."""
    fx = os.path.join(FIXTURES, manifest()["resnet18_script"]["file"])
    rules = tmp_path / "bad.rules"
    rules.write_text(RELU_TO_SIGMOID)
    shape = ["--input-shape", "1,3,64,64"]
    r = cli(fx, tmp_path / "bad.pt", "-O1", "--rules", rules, *shape)
    assert r.returncode == 3 and not (tmp_path / "bad.pt").exists(), r.stdout + r.stderr
    with pytest.raises(ptopt.VerificationError):
        ptopt.optimize(fx, "-O1", input_shapes=["1,3,64,64"], rules=RELU_TO_SIGMOID)
    r = cli(fx, tmp_path / "forced.pt", "-O1", "--rules", rules, *shape, "--force")
    assert r.returncode == 3 and "FAILED (written with --force)" in r.stdout, r.stdout + r.stderr
    with pytest.warns(UserWarning, match="verification FAILED"):
        forced = ptopt.optimize(fx, "-O1", input_shapes=["1,3,64,64"], rules=RELU_TO_SIGMOID, force=True)
    assert saved(forced) == saved(torch.jit.load(str(tmp_path / "forced.pt")))
    assert not any(p.name.startswith("ptopt-rules-") for p in pathlib.Path(tempfile.gettempdir()).iterdir())


@pytest.mark.parametrize("isa", ["avx2", "avx512_bf16"])
def test_one_option_table_same_bytes(isa, tmp_path):
    """The options both faces set by the one table's names (driver/
    request_options.h): --assume-isa, --target, --measure-threads and
    --verify-iters against assume_isa=, target=, measure_threads=,
    iterations=; the same -O3 decision (fp32 on avx2, bf16 with native bf16),
    the same bytes, and for each a second call without the option decides by
    this CPU again (no process-wide state)."""
    fx = os.path.join(FIXTURES, manifest()["resnet18_script"]["file"])
    out = tmp_path / "cli.pt"
    r = cli(fx, out, "-O3", "--input-shape", "1,3,64,64", "--assume-isa", isa, "--target", "cpu",
            "--measure-threads", "1", "--verify-iters", "2", "--no-measure")
    assert r.returncode == 0, r.stdout + r.stderr
    report = {}
    got = ptopt.optimize(torch.jit.load(fx), "-O3", input_shapes=["1,3,64,64"], assume_isa=isa, target="cpu",
                         measure_threads=1, iterations=2, measure=False, report=report)
    assert saved(got) == saved(torch.jit.load(str(out)))
    assert report["target"]["assumed"] is True and report["target"]["isa"] == isa
    again = {}
    ptopt.optimize(torch.jit.load(fx), "-O1", input_shapes=["1,3,64,64"], measure=False, report=again)
    assert again["target"]["assumed"] is False


def test_an_unknown_option_is_named(tmp_path):
    """The table refuses a name it does not have, naming the closest."""
    fx = os.path.join(FIXTURES, manifest()["resnet18_script"]["file"])
    with pytest.raises(ptopt.InputError, match="unknown option 'measure_budjet'.*'measure_budget'"):
        _C.optimize(None, fx, json.dumps({"measure_budjet": 1.0}), None, None, None)


def test_quantize_request_is_one_route(tmp_path):
    """--quantize and quantize= add the asked precision the same way: after
    the rule files (the driver's quant::addRequestedPrecision for both), into
    the pipeline's own cast when it has one; the same pipeline, the same bytes.
    mobilenet_v2: without native bf16, LibTorch 1.13's bf16 resnet18 misses
    the bf16 criterion and is refused (an AVX2 CPU)."""
    path = os.path.join(FIXTURES, "mobilenet_v2_script.pt")
    rules = tmp_path / "noop.rules"
    rules.write_text("# no rules\n")
    for pipeline, dtype in [("-O1", "bf16"), ("-O3", "bf16")]:
        out = tmp_path / f"cli{pipeline}.pt"
        cli_report = tmp_path / f"cli{pipeline}.json"
        r = subprocess.run([CLI, path, str(out), pipeline, "--quantize", dtype, "--rules", str(rules), "--no-measure",
                            "--input-shape", "1,3,64,64", "--report", str(cli_report), "--target", "cpu"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        cli_pipeline = json.loads(cli_report.read_text())["pipeline"]
        assert cli_pipeline.count("cast{") == 1, cli_pipeline
        assert f"dtype={dtype}" in cli_pipeline, cli_pipeline
        if pipeline == "-O1":  # added: after the rules; -O3's own cast stays where the preset has it
            assert cli_pipeline.index("rules{") < cli_pipeline.index("cast{"), cli_pipeline
        report = {}
        fast = ptopt.optimize(path, pipeline, input_shapes=["1,3,64,64"], quantize=dtype, rule_files=[rules],
                              measure=False, target="cpu", report=report)
        assert report["pipeline"] == cli_pipeline
        assert saved(fast) == saved(torch.jit.load(str(out)))
    with pytest.raises(ValueError, match="quantize='int4'"):
        ptopt.optimize(path, "-O1", input_shapes=["1,3,64,64"], quantize="int4")
    r = subprocess.run([CLI, path, str(tmp_path / "x.pt"), "--quantize", "int4"], capture_output=True, text=True)
    assert r.returncode == 2 and not (tmp_path / "x.pt").exists()
