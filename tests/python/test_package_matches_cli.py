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
import subprocess

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
    raw = _C.optimize(module._c, "", pipeline, [], [], None, None, specs, True, None, None, {}, {}, "auto", "auto",
                      False, False, [], 0, 3, None, False, 0.0, "", True, False, 2.0, 1)
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
