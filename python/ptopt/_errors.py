"""ptopt's exceptions. Each carries the command line's message (``str(e)``).

Error
├── PipelineError (ValueError)      bad pipeline text: caret message, nearest pass name
├── RulesError (ValueError)         bad rule text: caret message
├── InputError (ValueError)         bad input
│   ├── NotTorchScriptError         a file that is not a TorchScript archive
│   ├── UnknownOperatorError        an operator no loaded library registers (load_ops=[...])
│   └── InputShapeError             example inputs that do not fit the model
├── VerificationError               the result is not within tolerance (.report: per-output metrics)
└── PassError (RuntimeError)        a pass failed (a ptopt bug)
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


class Error(Exception):
    """Base class of every ptopt error."""

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.message = message


class _TextError(Error, ValueError):
    """An error at a place in text the user wrote (line, column, caret)."""

    def __init__(self, message: str, line: int = 0, column: int = 0, detail: str = "", **extra: Any) -> None:
        super().__init__(message)
        #: 1-based line and column of the error in the text.
        self.line = line
        self.column = column
        #: The message without the place and the caret.
        self.detail = detail or message


class PipelineError(_TextError):
    """Pipeline text that does not parse, or an unknown pass or option.

    ``str(e)`` is ``source:line:column: message``, the offending line and a
    caret under the column, as the command line prints it. ``suggestion`` is
    the nearest pass name for an unknown pass (or None).
    """

    def __init__(self, message: str, line: int = 0, column: int = 0, detail: str = "", **extra: Any) -> None:
        super().__init__(message, line, column, detail)
        m = re.search(r"did you mean '([^']+)'", message)
        #: The nearest registered pass name, for an unknown pass.
        self.suggestion: Optional[str] = m.group(1) if m else None


class RulesError(_TextError):
    """Rule text (``rules="..."``) that does not parse: a caret message."""


class InputError(Error, ValueError):
    """Bad input: the command line's exit code 2."""


class NotTorchScriptError(InputError):
    """A file that is not a TorchScript archive (a state_dict, a pickle, a damaged file...)."""


class UnknownOperatorError(InputError):
    """The model calls an operator that no loaded library registers.

    Load the library first: ``ptopt.optimize(path, load_ops=["LIB.so"])``, or
    import the Python package that registers it (``import torchvision``).
    """

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        m = re.search(r"calls operator '([^']+)'", message)
        #: The qualified name of the missing operator ("torchvision::nms").
        self.operator: Optional[str] = m.group(1) if m else None


class InputShapeError(InputError):
    """Example inputs that do not fit the model: a shape or dtype it fails
    on, too many or too few inputs, or a name it does not have."""


class PassError(Error, RuntimeError):
    """A pass failed (a ptopt bug: please report it with the model)."""


def _worst(a: Dict[str, Any], b: Dict[str, Any]) -> Dict[str, Any]:
    def key(m: Dict[str, Any]) -> float:
        if not m.get("passed", True):
            return math.inf
        e = m.get("error_to_bound", 0.0)
        return math.inf if e is None else float(e)

    return b if key(b) > key(a) else a


@dataclass
class VerificationReport:
    """The comparison of a model's outputs with a reference's (``ptopt verify``).

    ``metrics`` maps each output (``out``, ``out[0]``, ``out["boxes"]``) to its
    metrics: ``max_abs``, ``max_rel``, ``cosine``, ``error_to_bound`` (<= 1 is
    within tolerance), ``mismatch_percent``, ``rtol``, ``atol``, ``criterion``,
    ``passed``, ``bitwise_equal``... from the first failing run when the check
    failed, else the worst run for that output. ``iterations`` holds every
    run's metrics (the ``--report`` JSON). ``str(report)`` is the command
    line's text; ``bool(report)`` is ``passed``.
    """

    passed: bool
    bitwise_equal: bool
    metrics: Dict[str, Dict[str, Any]]
    verdict: str
    text: str
    device: str = ""
    inputs: str = ""
    notes: List[str] = field(default_factory=list)
    iterations: List[Dict[str, Any]] = field(default_factory=list)
    max_error_to_bound: Optional[float] = None

    @classmethod
    def _from_native(cls, report_json: str, verdict: str, failure_report: str, summary: str = "") -> "VerificationReport":
        j = json.loads(report_json)
        metrics: Dict[str, Dict[str, Any]] = {}
        failing = next((it for it in j["iterations"] if not it["passed"]), None)
        for it in [failing] if failing else j["iterations"]:
            for out in it["outputs"]:
                name = out["output"]
                metrics[name] = _worst(metrics[name], out) if name in metrics else out
        text = verdict + ("\n" + failure_report if failure_report else ("\n" + summary if summary else ""))
        return cls(passed=j["passed"], bitwise_equal=j["bitwise_equal"], metrics=metrics, verdict=verdict,
                   text=text.rstrip("\n"), device=j.get("device", ""), inputs=j.get("inputs", ""),
                   notes=list(j.get("notes", [])), iterations=j["iterations"],
                   max_error_to_bound=j.get("max_error_to_bound"))

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        return self.text


class VerificationError(Error):
    """The optimized model is not within tolerance of the original: nothing
    is returned. ``report`` is the VerificationReport (``report.metrics``:
    per-output metrics); ``str(e)`` the command line's verdict and
    per-output failure report."""

    def __init__(self, message: str, report_json: str = "", verdict: str = "", failure_report: str = "",
                 **extra: Any) -> None:
        super().__init__(message)
        self.report: Optional[VerificationReport] = (
            VerificationReport._from_native(report_json, verdict, failure_report) if report_json else None)

    @property
    def metrics(self) -> Dict[str, Dict[str, Any]]:
        """Per-output metrics of the failing run (``report.metrics``)."""
        return self.report.metrics if self.report is not None else {}
