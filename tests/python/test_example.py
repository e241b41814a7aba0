"""examples/python_pipeline.py (the README's 20-line script) runs and does what it says."""

import os
import subprocess
import sys

import pytest

SOURCE = os.environ.get("PTOPT_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def test_python_pipeline_example(tmp_path):
    pytest.importorskip("torchvision")
    script = os.path.join(SOURCE, "examples", "python_pipeline.py")
    with open(script) as f:
        assert len(f.read().splitlines()) <= 22  # "a 20-line script" (plus its docstring lines)
    r = subprocess.run([sys.executable, script, "64"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "pipeline: canonicalize,bn-inference,fixpoint{max-iter=4}(fold-conv-bn,drop-zero-bias)" in out
    assert "verify: passed" in out and "latency" in out and "95% CI" in out
    drawn = [p for p in os.listdir(tmp_path) if p.startswith("resnet18_diff.")]
    assert drawn and os.path.getsize(tmp_path / drawn[0]) > 1000
    assert " removed" in out.splitlines()[-1]
