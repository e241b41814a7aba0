"""The functions of the ptopt package: thin wrappers over the C++ library
(ptopt._C, session/session.h), which does the work the command line does."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import tempfile
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch

from . import _C
from ._errors import InputShapeError, PipelineError, VerificationReport

PathLike = Union[str, "os.PathLike[str]"]
ModuleOrPath = Union[torch.jit.ScriptModule, PathLike]
#: A tuple (or list) of inputs in order, a dict from input name to value,
#: or a single tensor for a one-input model.
ExampleInputs = Union[torch.Tensor, Sequence[Any], Mapping[str, Any]]
Tolerance = Union[float, Mapping[str, float]]


# ---------------------------------------------------------------------------
# Pipelines


class Pipeline:
    """A pass pipeline, parsed and printed canonically.

    >>> p = ptopt.Pipeline("remove-dropout, fixpoint{max-iter=3}(fold-conv-bn,dce)")
    >>> str(p)
    'remove-dropout,fixpoint{max-iter=3}(fold-conv-bn,dce)'

    ``text`` is pipeline text (``ptopt passes`` lists the passes), a preset
    (``"-O1"``, optionally followed by more passes: ``"-O1,channels-last"``),
    or a list of steps (strings, Pipelines, ``Pipeline.step(...)``,
    ``Pipeline.fixpoint(...)``). Bad text raises :class:`ptopt.PipelineError`
    (a ValueError) with the caret message and the nearest pass name.
    """

    def __init__(self, text: Union[str, "Pipeline", Sequence[Union[str, "Pipeline"]]] = "") -> None:
        if isinstance(text, Pipeline):
            self._text: str = text._text
            return
        if not isinstance(text, str):
            text = ",".join(str(s) for s in text if str(s))
        self._text = _C.parse_pipeline(text)

    @classmethod
    def preset(cls, level: int) -> "Pipeline":
        """The preset -O<level> (0..3)."""
        if level not in (0, 1, 2, 3):
            raise ValueError(f"presets are -O0..-O3, not -O{level}")
        return cls(f"-O{level}")

    @staticmethod
    def step(name: str, **options: Any) -> str:
        """One pass with options as pipeline text: ``step("cast", dtype="bf16", keep_io=False)``
        gives ``cast{dtype=bf16,keep-io=false}`` (``_`` in option names becomes ``-``)."""
        if not options:
            return name
        def value(v: Any) -> str:
            if isinstance(v, bool):
                return "true" if v else "false"
            s = str(v)
            return f'"{s}"' if any(c in s for c in ',{}() "') else s
        return name + "{" + ",".join(f"{k.replace('_', '-')}={value(v)}" for k, v in options.items()) + "}"

    @staticmethod
    def fixpoint(*steps: Union[str, "Pipeline"], max_iter: int = 4) -> str:
        """``fixpoint{max-iter=N}(steps...)``: repeat the steps until none changes the graph."""
        return f"fixpoint{{max-iter={max_iter}}}(" + ",".join(str(s) for s in steps) + ")"

    def then(self, *steps: Union[str, "Pipeline"]) -> "Pipeline":
        """This pipeline with more passes, placed as ``-O1,more`` and ``--rules`` place them:
        after the rewrites, before a closing device lowering (fuse-cudnn)."""
        extra = ",".join(str(s) for s in steps if str(s))
        return Pipeline(_C.extend_pipeline(self._text, extra)) if extra else Pipeline(self)

    @property
    def text(self) -> str:
        """The canonical text (``ptopt --print-pipeline``)."""
        return self._text

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Pipeline({self._text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pipeline) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)


@dataclass
class PassOption:
    """One option of a pass (``name=value`` inside ``pass{...}``)."""

    name: str
    kind: str  # bool, int, float, string, enum
    default: str
    help: str
    choices: List[str] = field(default_factory=list)
    min: Optional[float] = None
    max: Optional[float] = None


@dataclass
class PassInfo:
    """A registered pass: its name, one-line description, options and contract."""

    name: str
    description: str
    contract: str
    options: List[PassOption]


def passes(name: Optional[str] = None) -> Union[List[PassInfo], PassInfo]:
    """Every registered pass (sorted by name), or the one named ``name``
    (``ptopt passes [NAME]``). An unknown name raises PipelineError with the
    nearest name."""
    infos = [PassInfo(p["name"], p["description"], p["contract"], [PassOption(**o) for o in p["options"]])
             for p in _C.passes()]
    if name is None:
        return infos
    for info in infos:
        if info.name == name:
            return info
    hint = _C.suggest_pass(name)
    raise PipelineError(f"unknown pass '{name}'" + (f" (did you mean '{hint}'?)" if hint else " (see ptopt.passes())"),
                        detail=f"unknown pass '{name}'")


def presets() -> Dict[str, str]:
    """The presets -O0..-O3 as canonical pipeline text."""
    return {f"-O{i}": text for i, text in enumerate(_C.presets())}


# ---------------------------------------------------------------------------
# Arguments


def _is_exported_program(m: Any) -> bool:
    ep = getattr(getattr(torch, "export", None), "ExportedProgram", None)
    return ep is not None and isinstance(m, ep)


@contextlib.contextmanager
def _saved_program(ep: Any):
    """The path of ``ep`` saved with torch.export.save in a private folder
    (removed afterwards): what ptopt reads an ExportedProgram from."""
    with tempfile.TemporaryDirectory(prefix="ptopt-") as d:
        path = os.path.join(d, "program.pt2")
        torch.export.save(ep, path)
        yield path


def _load_program(data: bytes) -> Any:
    """An ExportedProgram from the bytes of a .pt2."""
    if b"quantized_decomposed" in data:
        # int8 in PT2E's Q/DQ form: its ops are defined by this module (Python only).
        importlib.import_module("torch.ao.quantization.fx._decomposed")
    return torch.export.load(io.BytesIO(data))


def _script_module(m: Any, what: str) -> Any:
    """The torch._C.ScriptModule behind a scripted or traced module; for an
    ExportedProgram, the TorchScript rendering ptopt runs it as (the same
    ATen calls on the same weights)."""
    if isinstance(m, torch.jit.ScriptModule):
        return m._c
    if _is_exported_program(m):
        with _saved_program(m) as path:
            return _C.load(path)
    if isinstance(m, torch.nn.Module):
        raise TypeError(f"{what}: ptopt optimizes TorchScript and torch.export programs; pass "
                        f"torch.export.export(model, example_inputs) (or torch.jit.script(model)), not an eager "
                        f"{type(m).__name__}")
    raise TypeError(f"{what}: expected a torch.export.ExportedProgram, a torch.jit.ScriptModule or a path, "
                    f"not {type(m).__name__}")


def _input_names(m: Any) -> Optional[List[str]]:
    try:
        return [a.name for a in m.forward.schema.arguments[1:]]
    except Exception:
        return None


def _inputs(example_inputs: Optional[ExampleInputs], module: Any = None) -> Tuple[Optional[List[str]], Optional[list]]:
    """(names, values) for the library: names "" for inputs given in order."""
    if example_inputs is None:
        return None, None
    if isinstance(example_inputs, torch.Tensor):
        return [""], [example_inputs]
    if isinstance(example_inputs, Mapping):
        names = [str(k) for k in example_inputs]
        known = _input_names(module) if module is not None else None
        if known is not None:
            unknown = [n for n in names if n not in known]
            if unknown:
                raise InputShapeError(f"example_inputs names {', '.join(unknown)}, which the model does not take "
                                      f"(its inputs: {', '.join(known)})")
        return names, list(example_inputs.values())
    if isinstance(example_inputs, (tuple, list)):
        return [""] * len(example_inputs), list(example_inputs)
    raise TypeError("example_inputs: expected a tuple of inputs, a dict by input name, or a tensor, "
                    f"not {type(example_inputs).__name__}")


def _tolerance(t: Optional[Tolerance], what: str) -> Tuple[Optional[float], Dict[str, float]]:
    if t is None:
        return None, {}
    if isinstance(t, Mapping):
        per = {str(k): float(v) for k, v in t.items()}
        if any(v < 0 for v in per.values()):
            raise ValueError(f"{what}: tolerances must not be negative")
        return per.pop("", None), per
    if float(t) < 0:
        raise ValueError(f"{what}: must not be negative")
    return float(t), {}


def _env_switch(name: str) -> bool:
    """An environment switch the front ends read (set, and not "0")."""
    value = os.environ.get(name, "")
    return bool(value) and value != "0"


def _wrap(c_module: Any) -> torch.jit.ScriptModule:
    return torch.jit._recursive.wrap_cpp_module(c_module)


# ---------------------------------------------------------------------------
# optimize


def optimize(module_or_path: ModuleOrPath, pipeline: Union[str, Pipeline] = "-O1",
             example_inputs: Optional[ExampleInputs] = None, *, verify: bool = True,
             rtol: Optional[Tolerance] = None, atol: Optional[Tolerance] = None, tune: bool = False,
             quantize: Optional[str] = None, report: Union[None, PathLike, Dict[str, Any]] = None,
             calibration: Optional[Sequence[Any]] = None, tune_budget: Optional[float] = None,
             tuning_cache: Optional[PathLike] = None, tune_threads: Union[None, str, Sequence[Any]] = None,
             measure: bool = True, force: bool = False,
             measure_budget: Optional[float] = None, measure_threads: Optional[int] = None,
             rules: Union[None, str, Sequence[str]] = None, rule_files: Sequence[PathLike] = (),
             input_shapes: Optional[Sequence[str]] = None, seed: Optional[int] = None,
             iterations: Optional[int] = None, device: Optional[str] = None, target: Optional[str] = None,
             prefer_bf16: bool = False, keep_training: bool = False, preserve_methods: Sequence[str] = (),
             load_ops: Sequence[PathLike] = (), assume_isa: Optional[str] = None,
             reproducible_clock: bool = False, to: Optional[str] = None) -> Any:
    """Optimizes a torch.export program or a TorchScript model and returns
    the result, verified, in memory.

    What ``ptopt IN OUT`` does, without files: the model is imported, the
    pipeline runs, the result is serialized and loaded back (the returned
    module is loaded from exactly the bytes the command line would write),
    and that module is checked against the original.

    Args:
        module_or_path: a ``torch.export.ExportedProgram`` (torch.export.export
            or torch.export.load; PyTorch 2.x), a scripted or traced module
            (torch.jit.script / torch.jit.trace / torch.jit.load), or the
            path of a .pt2 or TorchScript file. Never modified.
        pipeline: pipeline text, a preset ("-O0".."-O3", "-O1,channels-last")
            or a :class:`Pipeline`.
        example_inputs: the inputs to verify with (and to propagate shapes
            from): a tuple in order, a dict by input name, or one tensor.
            Inputs with defaults may be left out. Without them, ``input_shapes``
            gives seeded random inputs (``--input-shape``), else the inputs are
            assumed when the model's first op makes that safe.
        verify: check the result (default). With verify=True and no inputs to
            check with, :class:`ptopt.InputError` is raised, and assumed
            shapes that do not fit raise :class:`ptopt.InputShapeError` (the
            CLI's ``--verify``); verify=False skips the check (given inputs
            are still run once on the original).
        rtol, atol: tolerance terms (default: the pipeline's precision's),
            a number or a dict by output name (``{"out[0]": 1e-3}``).
        tune: decide the pipeline's machine-dependent rewrites (conv kernel,
            precision per op, channels-last, bn-to-affine, cuDNN fusion) by
            timing them on this device with the example inputs' shapes
            (``--tune``); needs inputs. Decisions are cached in
            ``tuning_cache`` (default: ``$XDG_CACHE_HOME/ptopt/tuning.json``)
            and recorded in ``report["tuning"]``.
        tune_budget: seconds the tuning may take (``--tune-budget``,
            default 90 per ``tune_threads`` count).
        tuning_cache: the tuning cache file (``--tuning-cache``).
        tune_threads: the intra-op thread counts the result will run at
            (``--tune-threads``): ``[1, "all"]`` or ``"1,all"`` ("all": the
            physical cores). Tuned once with each count first (decisions
            timed there; a whole-model choice that keeps a rewrite is timed
            again at the others and dropped where it is slower there); the
            first count's result is kept unless another's is faster at one
            count and slower at none (``report["tuning"]["orders"]``).
            Default: the current count.
        measure: time the result against the input after verification, as
            ``ptopt IN OUT`` does (interleaved runs, ``measure_budget``
            seconds, default 2, at ``measure_threads`` intra-op threads,
            default the first of ``tune_threads`` when tuning, else 1).
            When the result is measurably slower (the 95% interval of the
            latency ratio lies above 1.02), the first verified candidate
            that is not is returned instead: the pipeline without its
            precision and layout passes, else the input itself (a warning
            says so). The verdict is in ``report["measurement"]`` (speedup,
            ratio, ci95, verdict, written, candidates). With tune=True it is
            cached in the tuning cache and reused by a later call that
            produces the same bytes from the same input. measure=False (or
            the environment variable PTOPT_NO_MEASURE=1) skips it
            (``--no-measure``).
        force: return the result even when it is measurably slower or
            fails verification (``--force``; a warning says so).
        quantize: "int8" adds ``quantize{dtype=int8}`` (``--quantize int8``:
            static post-training quantization, calibrated on ``calibration``,
            else on seeded random inputs with a warning that accuracy needs
            real data); "bf16", "fp16" or "auto" add ``cast{dtype=...}``, or
            set the pipeline's cast to it when it has one. Either goes
            after the pipeline's rewrites and rules (as
            ``-O1,quantize{dtype=int8}``; ``--quantize`` the same way).
        calibration: for quantize="int8", the calibration batches
            (``--calibration``): a list whose items are each one call's
            inputs (a tensor for a one-input model, else a tuple).
        report: a path to write the ``--report`` JSON record to, or a dict to
            fill with it.
        rules: rewrite rules in the rule-file syntax (a string, or several),
            applied after the pipeline's rewrites like ``--rules FILE``.
        rule_files: rule files (``--rules``).
        input_shapes: ``--input-shape`` specs ("1,3,224,224", "x:2,7:int64"):
            ``iterations`` seeded random inputs (default 3) from ``seed``
            (default 0).
        device: where verification runs ("auto", the default, "cpu", "cuda").
        target: the device the result is for ("auto", the default: the
            verification device).
        prefer_bf16, keep_training, preserve_methods: ``--prefer-bf16``,
            ``--keep-training``, ``--preserve-methods``.
        assume_isa: decide as on a CPU of this level ("avx2", "avx512",
            "avx512_bf16", "avx512_fp16", "amx"; ``--assume-isa``), for this
            call only.
        reproducible_clock: tune=True decides on times that depend on the
            candidates' names only, nothing cached (``--reproducible-clock``,
            or the environment variable PTOPT_REPRODUCIBLE_CLOCK=1): the
            output depends on the request alone.
        load_ops: shared libraries registering custom operators to load first
            (``--load-ops``), for a path whose model calls them.
        to: the result's format, "pt2" (an ExportedProgram) or
            "torchscript" (``--to``); default: the input's.

    Options left at None take the defaults of the one request every face
    uses (driver::Request, driver/request_options.h), so the command line
    and this function cannot drift apart.

    Returns:
        The optimized model in the format asked for: a
        ``torch.export.ExportedProgram`` (save it with torch.export.save) or
        a ``torch.jit.ScriptModule`` (torch.jit.save). With measure, a
        faster verified candidate when the result was measurably slower.

    Raises:
        PipelineError, RulesError: bad pipeline or rule text (caret message).
        NotTorchScriptError: the path is not a TorchScript archive.
        UnknownOperatorError: the model calls an operator no loaded library
            registers (pass ``load_ops``).
        InputShapeError: the inputs do not fit the model.
        VerificationError: the result is not within tolerance (``e.report``:
            per-output metrics). Nothing is returned.
    """
    if (tune_budget is not None or tuning_cache is not None or tune_threads is not None) and not tune:
        raise ValueError("tune_budget=, tuning_cache= and tune_threads= are for tune=True")
    if measure_budget is not None and float(measure_budget) < 0:
        raise ValueError("measure_budget= must not be negative")
    if measure_threads is not None and int(measure_threads) < 1:
        raise ValueError("measure_threads= must be at least 1")
    pipeline_text = str(Pipeline(pipeline)) if isinstance(pipeline, Pipeline) else str(pipeline)
    Pipeline(pipeline_text)  # PipelineError before anything is loaded
    # The precision asked for joins the pipeline in the driver, as --quantize
    # does (quant::addRequestedPrecision: after the rules, the one route).
    if quantize is not None and quantize not in ("int8", "bf16", "fp16", "auto"):
        raise ValueError(f"quantize={quantize!r}: expected 'int8', 'bf16', 'fp16' or 'auto'")
    if calibration is not None and quantize != "int8":
        raise ValueError("calibration= is for quantize='int8'")
    rule_texts = [rules] if isinstance(rules, str) else list(rules or [])
    for i, text in enumerate(rule_texts):
        _C.check_rules(text, "rules" if len(rule_texts) == 1 else f"rules[{i}]")
    for lib in load_ops:
        _C.load_ops(os.fspath(lib))
    if input_shapes is not None and example_inputs is not None:
        raise ValueError("give either example_inputs or input_shapes, not both")

    if to is not None and to not in ("pt2", "torchscript"):
        raise ValueError(f"to={to!r}: expected 'pt2' or 'torchscript'")
    saved = contextlib.ExitStack()  # an ExportedProgram's .pt2, while it is read
    given_program = _is_exported_program(module_or_path)
    if given_program:
        module_or_path = saved.enter_context(_saved_program(module_or_path))
    module, path = None, ""
    if isinstance(module_or_path, (str, os.PathLike)):
        path = os.fspath(module_or_path)
        if not os.path.exists(path):
            raise FileNotFoundError(f"'{path}' does not exist")
    else:
        module = _script_module(module_or_path, "module_or_path")
    names, values = _inputs(example_inputs, module_or_path if module is not None else None)
    rtol_base, rtol_for = _tolerance(rtol, "rtol")
    atol_base, atol_for = _tolerance(atol, "atol")
    # The request's options by the names of the driver's one table
    # (driver/request_options.h; the CLI's flags are the same options): only
    # what was given, so each default is stated once, in driver::Request.
    options = {
        "pipeline": pipeline_text, "rule_texts": rule_texts, "rule_files": [os.fspath(f) for f in rule_files],
        "input_shapes": list(input_shapes) if input_shapes is not None else None, "verify": bool(verify),
        "rtol": rtol_base, "atol": atol_base, "rtol_for": rtol_for or None, "atol_for": atol_for or None,
        "device": device, "target": target, "prefer_bf16": bool(prefer_bf16), "assume_isa": assume_isa,
        "keep_training": bool(keep_training), "preserve_methods": list(preserve_methods),
        "seed": None if seed is None else int(seed), "iterations": None if iterations is None else int(iterations),
        "tune": bool(tune), "tune_budget": None if tune_budget is None else float(tune_budget),
        "tuning_cache": os.fspath(tuning_cache) if tuning_cache is not None else None,
        "tune_threads": tune_threads if tune_threads is None or isinstance(tune_threads, str) else list(tune_threads),
        "reproducible_clock": bool(reproducible_clock) or _env_switch("PTOPT_REPRODUCIBLE_CLOCK"),
        "measure": bool(measure) and not _env_switch("PTOPT_NO_MEASURE"), "force": bool(force),
        "measure_budget": None if measure_budget is None else float(measure_budget),
        "measure_threads": None if measure_threads is None else int(measure_threads), "to": to,
        "quantize": quantize,
    }
    with saved:
        r = _C.optimize(module, path, json.dumps(options), names, values,
                        list(calibration) if calibration is not None else None)
    for note in r["notes"]:
        warnings.warn(f"ptopt: {note}", stacklevel=2)
    if r["nodes_after"] > 20000:
        warnings.warn(f"ptopt: {r['nodes_after']} nodes in one graph: LibTorch's executor recurses about once per "
                      "node on a graph's first run; run the model on a thread with a larger stack "
                      "(threading.stack_size(1 << 30))", stacklevel=2)
    if report is not None:
        record = json.loads(r["record_json"])
        record["input"] = None if given_program else (path or None)
        if isinstance(report, dict):
            report.update(record)
        else:
            with open(report, "w") as f:
                json.dump(record, f, indent=2)
                f.write("\n")
    if r["format"] == "pt2":
        return _load_program(r["bytes"])
    return _wrap(r["module"])


# ---------------------------------------------------------------------------
# verify, bench


def verify(a: torch.jit.ScriptModule, b: torch.jit.ScriptModule, example_inputs: Optional[ExampleInputs] = None, *,
           rtol: Optional[Tolerance] = None, atol: Optional[Tolerance] = None,
           input_shapes: Optional[Sequence[str]] = None, seed: int = 0, iterations: int = 3,
           device: str = "auto") -> VerificationReport:
    """Compares ``b``'s outputs with the reference ``a``'s on the same inputs
    (``ptopt verify A B``) and returns the report; it does not raise when
    they differ (check ``report.passed``).

    Inputs as for :func:`optimize` (``example_inputs``, ``input_shapes``, an
    ExportedProgram ``a``'s own example inputs, or assumed when safe).
    Tolerance: the criterion of the lowest precision
    ``b`` computes in (fp32: rtol 1e-4, atol 1e-5 plus a scale term; a bf16,
    fp16 or int8 ``b`` is judged by that precision's criterion, and the
    report's notes say so), with ``rtol``/``atol`` over it when given, a
    number or a dict by output name.

    Raises InputShapeError when the reference fails on the inputs.
    """
    if input_shapes is not None and example_inputs is not None:
        raise ValueError("give either example_inputs or input_shapes, not both")
    if example_inputs is None and input_shapes is None and _is_exported_program(a):
        # A program keeps the inputs it was exported with: run there.
        recorded = getattr(a, "example_inputs", None)
        if recorded and not recorded[1]:
            example_inputs = tuple(recorded[0])
    ca, cb = _script_module(a, "a"), _script_module(b, "b")
    names, values = _inputs(example_inputs, a)
    rtol_base, rtol_for = _tolerance(rtol, "rtol")
    atol_base, atol_for = _tolerance(atol, "atol")
    r = _C.verify(ca, cb, names, values, list(input_shapes) if input_shapes is not None else None,
                  rtol_base, atol_base, rtol_for, atol_for, device, seed, iterations)
    return VerificationReport._from_native(r["json"], r["verdict"], r["failure_report"], r["summary"])


@dataclass
class BenchResult:
    """Latency statistics (``ptopt bench``), in milliseconds.

    ``a`` and ``b`` hold runs, min_ms, median_ms, mean_ms, p90_ms, p99_ms and
    cv; ``ratio`` is median(b) / median(a) with its 95% bootstrap interval
    ``ci95`` (the runs were interleaved A B A B).
    """

    a: Dict[str, float]
    b: Optional[Dict[str, float]]
    ratio: Optional[float]
    ci95: Optional[Tuple[float, float]]
    noisy: bool
    device: str
    threads: int
    timing: str
    samples_a: List[float] = field(default_factory=list, repr=False)
    samples_b: List[float] = field(default_factory=list, repr=False)

    @property
    def median_a_ms(self) -> float:
        return self.a["median_ms"]

    @property
    def median_b_ms(self) -> Optional[float]:
        return self.b["median_ms"] if self.b else None

    def __str__(self) -> str:
        line = f"A median {self.a['median_ms']:.3f} ms ({self.a['runs']} runs, CV {100 * self.a['cv']:.1f}%)"
        if self.b is not None and self.ratio is not None and self.ci95 is not None:
            line += (f"; B median {self.b['median_ms']:.3f} ms; B/A {self.ratio:.3f}x "
                     f"(95% CI {self.ci95[0]:.3f}-{self.ci95[1]:.3f})")
        return line + (" [noisy]" if self.noisy else "")


def bench(a: torch.jit.ScriptModule, b: Optional[torch.jit.ScriptModule] = None,
          example_inputs: Optional[ExampleInputs] = None, threads: Optional[int] = 1, *,
          input_shapes: Optional[Sequence[str]] = None, warmup: float = 1.0, min_time: float = 2.0,
          min_iters: int = 10, iters: Optional[int] = None, device: str = "cpu", seed: int = 0) -> BenchResult:
    """Times ``a`` (and ``b``, interleaved) as ``ptopt bench A [--vs B]`` does:
    a time-based warm-up, then runs until ``min_time`` seconds per model and
    ``min_iters`` runs (or exactly ``iters``).

    ``threads``: intra-op threads during the measurement (None: LibTorch's
    current setting; restored afterwards). The modules are not changed
    (copies are timed when they must be moved to eval mode or a device).
    """
    if input_shapes is not None and example_inputs is not None:
        raise ValueError("give either example_inputs or input_shapes, not both")
    if threads is not None and threads < 1:
        raise ValueError("threads must be at least 1")
    ca = _script_module(a, "a")
    cb = _script_module(b, "b") if b is not None else None
    names, values = _inputs(example_inputs, a)
    r = _C.bench(ca, cb, names, values, list(input_shapes) if input_shapes is not None else None, threads, device,
                 warmup, min_time, min_iters, iters, seed)
    return BenchResult(**r)


# ---------------------------------------------------------------------------
# show, draw


@dataclass
class MethodText:
    """One method's IR text and op counts."""

    name: str
    text: str
    op_counts: Dict[str, int]
    nodes: int
    constants: int
    table: str = field(default="", repr=False)  # the op-count table as ``ptopt show`` prints it


@dataclass
class ModelText:
    """What ``ptopt show`` prints: ``text`` (every method's IR and op-count
    table), ``op_counts`` (forward's), and each method in ``methods``."""

    text: str
    op_counts: Dict[str, int]
    methods: Dict[str, MethodText]

    def __str__(self) -> str:
        return self.text


def repack(module: torch.jit.ScriptModule) -> bool:
    """Packs a ptopt file's oneDNN weights again for the current thread count.

    A file ptopt wrote packs its oneDNN weights (``tuned-kernels``,
    ``onednn-blocked``) when it loads, for the intra-op thread count then in
    effect: oneDNN blocks a packed weight per thread count, and a conv given a
    weight packed for another count reorders it on every call (mobilenet_v2
    loaded at 2 threads and run at 1: 9x slower). Set the thread count before
    ``torch.jit.load``, or call this after ``torch.set_num_threads``. Returns
    whether the module had anything to pack (False for files ptopt did not
    pack). The module is changed in place; its outputs are not.
    """
    return _C.repack(_script_module(module, "module"))


def show(module: ModuleOrPath, preserve_methods: Sequence[str] = ()) -> ModelText:
    """The IR text of ``module``'s methods (forward, and ``preserve_methods``) and their op counts."""
    if isinstance(module, (str, os.PathLike)):
        module = load(module)
    c = _script_module(module, "module")
    methods = {m["name"]: MethodText(**m) for m in _C.show(c, list(preserve_methods))}
    text = ""
    for m in methods.values():
        text += f"# method {m.name}\n{m.text}\n"
        text += f"# op counts ({m.name}, {m.nodes} nodes, {m.constants} constants)\n" + m.table
    return ModelText(text=text, op_counts=dict(methods["forward"].op_counts), methods=methods)


@dataclass
class Drawing:
    """A drawing written by :func:`draw`: its path, its DOT text and, for a
    diff, the counts of added, changed and removed nodes."""

    path: str
    dot: str = field(repr=False)
    added: int = 0
    changed: int = 0
    removed: int = 0


def draw(module: torch.jit.ScriptModule, path: PathLike, diff: Optional[torch.jit.ScriptModule] = None,
         depth: Optional[int] = None, *, input_shapes: Optional[Sequence[str]] = None, max_nodes: int = 500,
         show_constants: bool = False, color_by: str = "op", clusters: bool = True, legend: bool = True,
         method: str = "forward", title: Optional[str] = None) -> Drawing:
    """Draws ``module``'s graph to ``path`` (.svg, .png, .pdf or .dot/.gv),
    as ``ptopt dot`` does; with ``diff``, the difference from ``module`` to
    ``diff`` (``ptopt dot A --diff B``: added green, changed yellow, removed
    dashed). ``depth`` collapses module scopes deeper than N into one box.
    SVG/PNG need a build with GraphViz (``ptopt._C.graphviz_available()``).
    """
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".svg", ".png", ".pdf", ".dot", ".gv"):
        raise ValueError(f"draw: '{path}': give a .svg, .png, .pdf, .dot or .gv path")
    if ext not in (".dot", ".gv") and not _C.graphviz_available():
        raise ValueError(f"draw: this ptopt was built without GraphViz, so it cannot write {ext}; write .dot")
    if depth is not None and depth < 1:
        raise ValueError("depth must be at least 1")
    a = _script_module(module, "module")
    b = _script_module(diff, "diff") if diff is not None else None
    if title is None:
        title = getattr(module, "original_name", "model")
        if diff is not None:
            title += " → " + getattr(diff, "original_name", "model")
    r = _C.draw(a, b, path, -1 if depth is None else depth, max_nodes, show_constants, color_by, clusters, legend,
                title, method, list(input_shapes or []))
    return Drawing(path=path, dot=r["dot"], added=r["added"], changed=r["changed"], removed=r["removed"])


# ---------------------------------------------------------------------------
# Loading


def _is_pt2_file(path: str) -> bool:
    """Whether `path` is a torch.export archive (a zip whose archive_format says pt2)."""
    import zipfile
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            if name.rsplit("/", 1)[-1] == "archive_format":
                return z.read(name).strip() == b"pt2"
    return False


def load(path: PathLike, load_ops: Sequence[PathLike] = ()) -> Any:
    """Loads a model file with ptopt's checks and clear errors:
    NotTorchScriptError for a state_dict, a pickle or a damaged file;
    UnknownOperatorError when an operator is missing (``load_ops``).

    A TorchScript file gives a ScriptModule (``torch.jit.load``); a
    torch.export ``.pt2`` gives its ExportedProgram (``torch.export.load``),
    once ptopt has read it without unpickling anything."""
    for lib in load_ops:
        _C.load_ops(os.fspath(lib))
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"'{path}' does not exist")
    module = _C.load(path)  # the checks, for either format
    if _is_pt2_file(path):
        with open(path, "rb") as f:
            return _load_program(f.read())
    return _wrap(module)
