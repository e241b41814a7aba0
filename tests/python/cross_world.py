"""Both PyTorch worlds on one file (tests/cli/cross_world_test.sh).

  cross_world.py make DIR          models saved by this Python's torch: a
                                   scripted and a traced ResNet-18 (random
                                   weights and BatchNorm statistics) and their
                                   inputs
  cross_world.py check ORIG OPT INPUTS
                                   loads both in this Python's torch, runs them
                                   on the saved inputs, and checks OPT against
                                   ORIG (fp32 -O2 outputs: max error within
                                   1e-3 of the output scale, cosine >= 0.99999)
"""

import os
import sys
import warnings

# TorchScript calls warn once each from torch 2.10 on; they are what is tested.
warnings.filterwarnings("ignore", message=r"`torch\.jit\.", category=FutureWarning)
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import cpu_cap  # noqa: E402


def make(out):
    import torchvision
    torch.manual_seed(0)
    m = torchvision.models.resnet18(weights=None).eval()
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.1, 0.1)
            mod.running_var.uniform_(0.5, 1.5)
    x = torch.randn(2, 3, 64, 64)
    os.makedirs(out, exist_ok=True)
    torch.jit.script(m).save(os.path.join(out, "resnet18_script.pt"))
    torch.jit.trace(m, x).save(os.path.join(out, "resnet18_trace.pt"))
    torch.save({"x": x}, os.path.join(out, "inputs.pt"))
    print(f"made by torch {torch.__version__}")


def check(orig_path, opt_path, inputs_path):
    cpu_cap.follow_cpu_cap()
    x = torch.load(inputs_path)["x"]
    orig, opt = torch.jit.load(orig_path), torch.jit.load(opt_path)
    with torch.no_grad():
        a, b = orig(x), opt(x)
    err = (a - b).abs().max().item()
    scale = a.abs().max().item()
    cos = torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0).item()
    ok = err <= 1e-3 * max(scale, 1.0) and cos >= 0.99999
    print(f"torch {torch.__version__}: {os.path.basename(opt_path)} max error {err:.3g} (output scale {scale:.3g}), "
          f"cosine {cos:.7f}: {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        sys.exit(check(*sys.argv[2:5]))
