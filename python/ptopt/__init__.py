"""ptopt: optimize TorchScript models for inference, with proof of numerics.

    import torch, torchvision, ptopt
    scripted = torch.jit.script(torchvision.models.resnet18().eval())
    fast = ptopt.optimize(scripted, "-O1", (torch.randn(1, 3, 224, 224),))
    torch.jit.save(fast, "resnet18.opt.pt")

The functions are those of the ``ptopt`` command line, in memory:
:func:`optimize` (``ptopt IN OUT``), :func:`verify` (``ptopt verify``),
:func:`bench` (``ptopt bench``), :func:`passes` (``ptopt passes``),
:class:`Pipeline` (``--passes`` / ``--print-pipeline``), :func:`draw`
(``ptopt dot``), :func:`show` (``ptopt show``) and :func:`load`. They call
ptopt's C++ library (``ptopt._C``, built with pybind11 against LibTorch's
``libtorch_python``), which does the work the command line does.
"""

import torch  # noqa: F401  (LibTorch's Python types must be registered before ptopt._C loads)

from ._errors import (Error, InputError, InputShapeError, NotTorchScriptError, PassError, PipelineError,
                      RulesError, UnknownOperatorError, VerificationError, VerificationReport)
from ._api import (BenchResult, Drawing, MethodText, ModelText, PassInfo, PassOption, Pipeline, bench, draw, load,
                   optimize, passes, presets, repack, show, verify)

from ._C import __version__, built_against  # noqa: E402  (CMake's project VERSION and the LibTorch, as `ptopt --version`)


def _check_torch_matches_build():
    # ptopt._C is linked against one LibTorch; run under another torch it
    # would crash on the first module that crosses. Say so at import instead.
    built = built_against.split()[1]  # "LibTorch 2.15.0, ..." -> "2.15.0"
    running = torch.__version__.split("+")[0]
    if built.split(".")[:2] != running.split(".")[:2]:
        raise ImportError(f"ptopt was built against LibTorch {built}, but this Python runs torch {torch.__version__}: "
                          f"rebuild ptopt with -DPTOPT_PYTHON={__import__('sys').executable} (README, Getting started)")


_check_torch_matches_build()


def _pass_on_torchscript_deprecation():
    # From 2.10 on, every torch.jit.script/trace/save/load/freeze call warns
    # (FutureWarning "`torch.jit.X` is deprecated ..."): a script that
    # optimizes a few models gets dozens. ptopt's inputs and outputs are
    # TorchScript, which this torch still loads and runs (docs/pytorch-worlds.md, "PyTorch
    # worlds"): say that once, here, and let torch's per-call warnings go.
    # PTOPT_TORCHSCRIPT_WARNINGS=all keeps them.
    import os
    import sys
    import warnings
    major, minor = (int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    if (major, minor) < (2, 10) or os.environ.get("PTOPT_TORCHSCRIPT_WARNINGS") == "all":
        return
    # `python -m ptopt ...` imports the package only to run __main__.py, which
    # becomes the command line: no TorchScript call from Python to speak of.
    argv = list(getattr(sys, "orig_argv", ()))
    if sys.argv[:1] == ["-m"] and ("-mptopt" in argv or any(a == "-m" and b == "ptopt" for a, b in zip(argv, argv[1:]))):
        return
    warnings.warn(f"torch {torch.__version__} deprecates TorchScript (torch.jit.script, trace, save, load and "
                  f"freeze warn on every call); it still works, and ptopt reads and writes it. Said once by ptopt, "
                  f"which hides torch's per-call warnings (PTOPT_TORCHSCRIPT_WARNINGS=all keeps them).",
                  FutureWarning, stacklevel=3)
    warnings.filterwarnings("ignore", message=r"`torch\.jit\.", category=FutureWarning)


_pass_on_torchscript_deprecation()

__all__ = [
    "optimize", "verify", "bench", "repack", "passes", "presets", "Pipeline", "draw", "show", "load",
    "VerificationReport", "BenchResult", "PassInfo", "PassOption", "ModelText", "MethodText", "Drawing",
    "Error", "PipelineError", "RulesError", "InputError", "NotTorchScriptError", "UnknownOperatorError",
    "InputShapeError", "VerificationError", "PassError",
]
