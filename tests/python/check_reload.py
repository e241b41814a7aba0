#!/usr/bin/python3
"""Check that exported TorchScript models reproduce the originals bit-for-bit.

Usage:
    /usr/bin/python3 tests/python/check_reload.py --manifest fixtures.json \
        --original-dir D1 --exported-dir D2 [--suffix .pt] [--only NAME,...] [--seeds 2]
        [--rtol R --atol A] [--reference NAME=OTHER] [--output-format contiguous|channels_last]

For every fixture in the manifest (restricted by --only) the original
(D1/<file>) and exported (D2/<name><suffix>) models are loaded with
torch.jit.load, put in eval mode and run on inputs built from the manifest
(torch.manual_seed(1234+s) before building inputs, torch.manual_seed(99+s)
right before each model call).  Outputs are compared recursively; tensors must
be equal bitwise (same dtype, shape and values; NaNs are accepted only where
both sides have NaN).  One line per fixture: `OK name` / `FAIL name: reason`.
Exit status 1 if anything failed, 0 otherwise.

With --rtol/--atol, floating-point tensors pass elementwise within
atol + rtol*|b|.  With --lowp bf16|fp16 (models computed in lower precision),
they pass when cosine >= 0.99 and max|a-b| <= atol + rtol*max|b| with the
precision's (rtol, atol): bf16 (5e-2, 1e-2), fp16 (1e-2, 1e-3); the same
criterion as ptopt's own verification (quant/precision_check.h).  On a CPU
without native bf16 (cpu_cap.native_bf16(): PyTorch's bf16 kernels are then
ATen's own, whose matmuls round partial sums to bf16), a bf16 output that misses
the criterion still passes when it is no further from the original's than
STOCK_BF16_FACTOR times stock PyTorch's own bf16 of the original (CPU autocast),
in max error and in 1 - cosine (tests/support/lowp_check.h does the same).
With oneDNN capped below AVX-512, PyTorch's oneDNN use is switched off first
(cpu_cap.follow_cpu_cap()).
"""

import argparse
import json
import os
import sys
import traceback

import torch

import cpu_cap


def build_inputs(specs):
    out = []
    for spec in specs:
        t = spec["type"]
        if t == "tensor":
            shape = tuple(spec["shape"])
            dtype = spec.get("dtype", "float32")
            if dtype == "float32":
                out.append(torch.randn(shape))
            elif dtype == "int64":
                out.append(torch.randint(int(spec["low"]), int(spec["high"]), shape))
            else:
                raise ValueError("unsupported tensor dtype %r" % dtype)
        elif t == "int":
            out.append(int(spec["value"]))
        elif t == "float":
            out.append(float(spec["value"]))
        elif t == "bool":
            out.append(bool(spec["value"]))
        else:
            raise ValueError("unsupported input type %r" % t)
    return out


def _clone_inputs(inputs):
    # Models may mutate their inputs in place; give each model its own copy.
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


# (rtol, atol) when --rtol/--atol are given; bitwise equality otherwise.
TOLERANCE = {}
# (rtol, atol, min cosine) with --lowp.
LOWP_CRITERIA = {"bf16": (5e-2, 1e-2, 0.99), "fp16": (1e-2, 1e-3, 0.99)}
LOWP = {}
# Stock PyTorch's bf16 outputs of the original by path (CPUs without native
# bf16 only), and how much further from the original ptopt's may be.
STOCK = {}
STOCK_BF16_FACTOR = 2.0
NATIVE_BF16 = [True, ""]
NOTES = []  # outputs that passed by the stock bound, per fixture


def _error(a, b):
    """(max abs diff, cosine) of a against b."""
    ad, bd = a.double().flatten(), b.double().flatten()
    max_abs = (ad - bd).abs().max().item()
    na, nb = ad.norm().item(), bd.norm().item()
    cos = 1.0 if na == 0 and nb == 0 else (0.0 if na == 0 or nb == 0 else (ad @ bd).item() / (na * nb))
    return max_abs, cos


def lowp_mismatch(a, b, stock=None):
    """None when a (actual) is within the low-precision criterion of b, or
    (given stock, the stock bf16 output) within the stock bound."""
    rtol, atol, min_cos = LOWP["value"]
    if a.numel() == 0:
        return None
    max_abs, cos = _error(a, b)
    allowed = atol + rtol * b.double().abs().max().item()
    if max_abs <= allowed and cos >= min_cos:
        return None
    why = "cosine %.6f (min %g), max abs diff %.4g (allowed %.4g)" % (cos, min_cos, max_abs, allowed)
    if stock is None:
        return why
    s_abs, s_cos = _error(stock, b)
    new_nan = bool((torch.isnan(a) & ~torch.isnan(b)).any())
    if not new_nan and max_abs <= STOCK_BF16_FACTOR * s_abs + atol \
            and 1 - cos <= STOCK_BF16_FACTOR * (1 - s_cos) + 1e-6:
        NOTES.append("by the stock bound: %s; within %gx stock bf16 (cosine %.6f, max abs diff %.4g)"
                     % (why, STOCK_BF16_FACTOR, s_cos, s_abs))
        return None
    return "%s; stock bf16: cosine %.6f, max abs diff %.4g (allowed %gx)" % (why, s_cos, s_abs, STOCK_BF16_FACTOR)


def flatten(x, path, out):
    """Tensors of x by the paths compare() names them with."""
    if isinstance(x, torch.Tensor):
        out[path] = x
    elif _is_namedtuple(x):
        for name, e in zip(x._fields, x):
            flatten(e, "%s.%s" % (path, name), out)
    elif isinstance(x, (tuple, list)):
        for i, e in enumerate(x):
            flatten(e, "%s[%d]" % (path, i), out)
    elif isinstance(x, dict):
        for k, e in x.items():
            flatten(e, "%s[%r]" % (path, k), out)
    return out


def compare(a, b, path, errors):
    """Append human-readable mismatch descriptions to `errors`."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            errors.append("%s: type %s vs %s" % (path, type(a).__name__, type(b).__name__))
            return
        if a.dtype != b.dtype:
            errors.append("%s: dtype %s vs %s" % (path, a.dtype, b.dtype))
            return
        if a.shape != b.shape:
            errors.append("%s: shape %s vs %s" % (path, list(a.shape), list(b.shape)))
            return
        if a.layout != b.layout or a.is_quantized or b.is_quantized:
            # sparse / quantized: fall back to dense comparison where possible
            a = a.dequantize() if a.is_quantized else a
            b = b.dequantize() if b.is_quantized else b
            if a.layout != torch.strided:
                a = a.to_dense()
            if b.layout != torch.strided:
                b = b.to_dense()
        a = a.detach().cpu()
        b = b.detach().cpu()
        if torch.equal(a, b):
            return
        if LOWP and a.is_floating_point():
            stock = STOCK.get(path)
            why = lowp_mismatch(b, a, stock.detach().cpu() if stock is not None else None)  # a: the original's
            if why:
                errors.append("%s: %s" % (path, why))
            return
        tol = TOLERANCE.get("value")
        if tol and a.is_floating_point() and torch.allclose(a, b, rtol=tol[0], atol=tol[1], equal_nan=True):
            return
        if a.is_floating_point() or a.is_complex():
            nan_a, nan_b = torch.isnan(a), torch.isnan(b)
            if torch.equal(nan_a, nan_b) and torch.equal(a[~nan_a], b[~nan_b]):
                return
            diff = (a.double() - b.double()).abs() if not a.is_complex() else (a - b).abs()
            diff = diff[~(nan_a & nan_b)]
            maxdiff = diff.max().item() if diff.numel() else float("nan")
            nbad = int((a != b).logical_and(~(nan_a & nan_b)).sum().item())
            errors.append("%s: values differ (max abs diff %.6g, %d/%d elements)"
                          % (path, maxdiff, nbad, a.numel()))
        else:
            if a.dtype == torch.bool:
                maxdiff = (a != b).sum().item()
                errors.append("%s: bool values differ (%d elements)" % (path, maxdiff))
            else:
                maxdiff = (a.long() - b.long()).abs().max().item()
                errors.append("%s: values differ (max abs diff %d)" % (path, maxdiff))
        return

    if _is_namedtuple(a) or _is_namedtuple(b):
        if type(a).__name__ != type(b).__name__ and not (isinstance(a, tuple) and isinstance(b, tuple)):
            errors.append("%s: type %s vs %s" % (path, type(a).__name__, type(b).__name__))
            return
        if len(a) != len(b):
            errors.append("%s: length %d vs %d" % (path, len(a), len(b)))
            return
        fields = getattr(a, "_fields", None) or getattr(b, "_fields", None)
        for i, (x, y) in enumerate(zip(a, b)):
            name = fields[i] if fields and i < len(fields) else str(i)
            compare(x, y, "%s.%s" % (path, name), errors)
        return

    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        if type(a) is not type(b):
            errors.append("%s: type %s vs %s" % (path, type(a).__name__, type(b).__name__))
            return
        if len(a) != len(b):
            errors.append("%s: length %d vs %d" % (path, len(a), len(b)))
            return
        for i, (x, y) in enumerate(zip(a, b)):
            compare(x, y, "%s[%d]" % (path, i), errors)
        return

    if isinstance(a, dict) or isinstance(b, dict):
        if not (isinstance(a, dict) and isinstance(b, dict)):
            errors.append("%s: type %s vs %s" % (path, type(a).__name__, type(b).__name__))
            return
        if list(a.keys()) != list(b.keys()):
            if set(a.keys()) != set(b.keys()):
                errors.append("%s: keys %r vs %r" % (path, sorted(map(repr, a.keys())),
                                                     sorted(map(repr, b.keys()))))
                return
            errors.append("%s: key order %r vs %r" % (path, list(a.keys()), list(b.keys())))
            return
        for k in a:
            compare(a[k], b[k], "%s[%r]" % (path, k), errors)
        return

    # scalars / None / strings / devices / dtypes ...
    if type(a) is not type(b):
        errors.append("%s: type %s vs %s (%r vs %r)"
                      % (path, type(a).__name__, type(b).__name__, a, b))
        return
    if isinstance(a, float):
        if a != b and not (a != a and b != b):
            errors.append("%s: %r vs %r (abs diff %.6g)" % (path, a, b, abs(a - b)))
        return
    if a != b:
        errors.append("%s: %r vs %r" % (path, a, b))


def check_format(x, path, fmt, errors):
    """Every 4-D/5-D tensor in `x` must be in memory format `fmt`."""
    if isinstance(x, torch.Tensor):
        if x.dim() in (4, 5):
            want = torch.contiguous_format
            if fmt == "channels_last":
                want = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
            if not x.is_contiguous(memory_format=want):
                errors.append("%s: strides %s are not %s" % (path, list(x.stride()), fmt))
    elif isinstance(x, (tuple, list)):
        for i, e in enumerate(x):
            check_format(e, "%s[%d]" % (path, i), fmt, errors)
    elif isinstance(x, dict):
        for k, e in x.items():
            check_format(e, "%s[%r]" % (path, k), fmt, errors)


def check_fixture(fx, args):
    name = fx["name"]
    fname = fx.get("file", name + ".pt")
    ref = dict(kv.split("=", 1) for kv in args.reference) if args.reference else {}
    if name in ref:
        # A model whose reference is another fixture (e.g. a model traced in
        # training mode is compared with the same weights in eval semantics).
        fname = ref[name] + ".pt"
    orig_path = os.path.join(args.original_dir, fname)
    stem = os.path.splitext(fx.get("file", name + ".pt"))[0]
    exp_path = os.path.join(args.exported_dir, stem + args.suffix)
    if not os.path.exists(orig_path):
        return "original missing: %s" % orig_path
    if not os.path.exists(exp_path):
        return "exported missing: %s" % exp_path

    try:
        orig = torch.jit.load(orig_path, map_location="cpu")
        orig.eval()
    except Exception as e:  # noqa: BLE001
        return "loading original failed: %s" % _exc_msg(e)
    try:
        exp = torch.jit.load(exp_path, map_location="cpu")
        exp.eval()
    except Exception as e:  # noqa: BLE001
        return "loading exported failed: %s" % _exc_msg(e)

    for s in range(args.seeds):
        torch.manual_seed(1234 + s)
        inputs = build_inputs(fx.get("inputs", []))
        try:
            torch.manual_seed(99 + s)
            with torch.no_grad():
                out_o = orig(*_clone_inputs(inputs))
        except Exception as e:  # noqa: BLE001
            return "seed %d: running original failed: %s" % (s, _exc_msg(e))
        try:
            torch.manual_seed(99 + s)
            with torch.no_grad():
                out_e = exp(*_clone_inputs(inputs))
        except Exception as e:  # noqa: BLE001
            return "seed %d: running exported failed: %s" % (s, _exc_msg(e))
        STOCK.clear()
        if args.lowp == "bf16" and not NATIVE_BF16[0]:
            try:
                stock_model = torch.jit.load(orig_path, map_location="cpu")  # fresh: no plan kept from autocast
                stock_model.eval()
                torch.manual_seed(99 + s)
                with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                    flatten(stock_model(*_clone_inputs(inputs)), "out", STOCK)
            except Exception as e:  # noqa: BLE001
                # Stock autocast cannot run some models at all (mha's fast path
                # mixes bf16 and fp32 in one kernel); there is no stock bound
                # then, and ptopt's output must meet the bf16 criterion alone.
                STOCK.clear()
                note = "stock bf16 cannot run the original (%s): judged by the bf16 criterion alone" \
                    % _exc_msg(e).splitlines()[-1].strip()
                if note not in NOTES:
                    NOTES.append(note)
        errors = []
        compare(out_o, out_e, "out", errors)
        if args.output_format:
            check_format(out_e, "out", args.output_format, errors)
        if errors:
            shown = "; ".join(errors[:5])
            if len(errors) > 5:
                shown += "; ... (%d more)" % (len(errors) - 5)
            return "seed %d: %s" % (s, shown)
    return None


def _exc_msg(e):
    msg = "%s: %s" % (type(e).__name__, str(e).strip())
    lines = msg.splitlines()
    if len(lines) > 6:
        msg = "\n    ".join(lines[:3] + ["..."] + lines[-3:])
    else:
        msg = "\n    ".join(lines)
    return msg


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--original-dir", required=True)
    ap.add_argument("--exported-dir", required=True)
    ap.add_argument("--suffix", default=".pt",
                    help="file suffix of exported models (default .pt)")
    ap.add_argument("--only", default=None, help="comma-separated fixture names")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--rtol", type=float, default=None, help="compare within tolerance (default: bitwise)")
    ap.add_argument("--atol", type=float, default=None)
    ap.add_argument("--lowp", choices=sorted(LOWP_CRITERIA), default=None,
                    help="compare floats with the low-precision criterion of this dtype")
    ap.add_argument("--skip", default="", help="comma-separated fixture names not to check")
    ap.add_argument("--reference", action="append", default=[],
                    help="NAME=OTHER: compare NAME's exported model with fixture OTHER")
    ap.add_argument("--output-format", choices=["contiguous", "channels_last"], default=None,
                    help="also require every 4-D/5-D output tensor of the exported model in this memory format")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print tracebacks for exceptions")
    args = ap.parse_args(argv)
    if args.rtol is not None or args.atol is not None:
        TOLERANCE["value"] = (args.rtol or 0.0, args.atol or 0.0)
    if args.lowp:
        LOWP["value"] = LOWP_CRITERIA[args.lowp]
    note = cpu_cap.follow_cpu_cap()
    if note:
        print(note)
    native, why = cpu_cap.native_bf16()
    NATIVE_BF16[:] = [native, why]
    if args.lowp == "bf16" and not native:
        print("no native bf16 (%s): bf16 outputs are also judged against stock PyTorch's bf16" % why)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}

    with open(args.manifest) as fh:
        manifest = json.load(fh)
    fixtures = manifest["fixtures"] if isinstance(manifest, dict) else manifest

    only = None
    if args.only:
        only = [s.strip() for s in args.only.split(",") if s.strip()]
        known = {f["name"] for f in fixtures}
        missing = [n for n in only if n not in known]
    else:
        missing = []

    failed = 0
    checked = 0
    for n in missing:
        print("FAIL %s: not in manifest" % n)
        failed += 1
    for fx in fixtures:
        if only is not None and fx["name"] not in only:
            continue
        if fx["name"] in skip:
            continue
        checked += 1
        NOTES.clear()
        try:
            reason = check_fixture(fx, args)
        except Exception as e:  # noqa: BLE001
            if args.verbose:
                traceback.print_exc()
            reason = "internal error: %s" % _exc_msg(e)
        if reason is None:
            print("OK %s%s" % (fx["name"], "".join("\n    " + n for n in NOTES)))
        else:
            print("FAIL %s: %s" % (fx["name"], reason))
            failed += 1
        sys.stdout.flush()

    print("%d checked, %d failed" % (checked, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
