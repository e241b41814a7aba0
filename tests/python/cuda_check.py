"""The Python package with CUDA tensors (issue 36), run by tests/cli/cuda_test.sh
on a machine with a GPU: a module on the GPU and CUDA example inputs go in,
an optimized, verified module comes out that runs on those inputs; verify
and bench take CUDA tensors too. The caller's module is left as it was.

Usage: cuda_check.py RESNET18_SCRIPT.pt   (with `import ptopt` on PYTHONPATH)
"""
import sys
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402

import ptopt  # noqa: E402


def main(path):
    assert torch.cuda.is_available(), "cuda_check.py needs a CUDA device"
    torch.backends.cudnn.allow_tf32 = False
    original = torch.jit.load(path, map_location="cuda").eval()
    before = {k: v.clone() for k, v in original.state_dict().items()}
    x = torch.randn(2, 3, 224, 224, device="cuda")

    # -O1 of a module on the GPU, CUDA example inputs, verification on CUDA.
    report = {}
    o1 = ptopt.optimize(original, "-O1", example_inputs=x, device="cuda", measure=False, report=report)
    assert report["verification"]["passed"], report["verification"]
    assert report["verification"]["device"].startswith("cuda"), report["verification"]["device"]
    with torch.no_grad():
        y, y1 = original(x), o1.cuda()(x)
    assert torch.allclose(y, y1, rtol=1e-3, atol=1e-3), (y - y1).abs().max().item()

    # -O3: fp16 with cuDNN's fusions, for CUDA, from the same CUDA inputs (device "auto").
    report = {}
    o3 = ptopt.optimize(original, "-O3", example_inputs=(x,), measure=False, report=report)
    assert report["verification"]["device"].startswith("cuda"), report["verification"]
    assert getattr(o3, "ptopt_requires_cuda", False), "the -O3 module does not record that it needs CUDA"
    with torch.no_grad():
        y3 = o3(x).float()
    cos = torch.nn.functional.cosine_similarity(y.flatten(), y3.flatten(), dim=0).item()
    assert cos > 0.999, cos

    # verify and bench with CUDA tensors.
    v = ptopt.verify(original, o1, x, device="cuda")
    assert v.passed and v.device.startswith("cuda"), v
    b = ptopt.bench(original, o3, x, device="cuda", min_time=0.3)
    assert b.timing == "CUDA events" and b.ratio is not None and b.ratio > 0, b
    assert b.device.startswith("cuda"), b.device

    # --tune from Python on the GPU.
    report = {}
    tuned = ptopt.optimize(original, "-O3", example_inputs=x, tune=True, tune_budget=5, measure=False, report=report)
    with torch.no_grad():
        tuned(x)
    assert "cuda" in str(report["tuning"]["context"]).lower(), report["tuning"]["context"]

    # The caller's module: still on the GPU, in eval mode, with its weights.
    for k, v0 in original.state_dict().items():
        assert v0.is_cuda and torch.equal(v0, before[k]), k
    print("package on CUDA: -O1 and -O3 verified on %s, bench ratio %.3f (%s), --tune decided there" % (
        report["verification"]["device"], b.ratio, b.timing))


if __name__ == "__main__":
    main(sys.argv[1])
