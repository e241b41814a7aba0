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
                   optimize, passes, presets, show, verify)

from ._C import __version__  # noqa: E402  (CMake's project VERSION, as `ptopt --version`)

__all__ = [
    "optimize", "verify", "bench", "passes", "presets", "Pipeline", "draw", "show", "load",
    "VerificationReport", "BenchResult", "PassInfo", "PassOption", "ModelText", "MethodText", "Drawing",
    "Error", "PipelineError", "RulesError", "InputError", "NotTorchScriptError", "UnknownOperatorError",
    "InputShapeError", "VerificationError", "PassError",
]
