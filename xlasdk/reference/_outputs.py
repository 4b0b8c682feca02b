"""Running a program on a device and comparing its outputs with the reference evaluator, another
device or recorded outputs (:func:`run_and_compare`, :func:`compare_outputs`): per output the
largest absolute, relative and ulp error, the elements outside the tolerance and the first of them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import XlaSdkError
from ._evaluator import run_reference
from ._report import STRICT_PRECISION, CompareReport, compare_one
from ._walk import UnsupportedOpError

if TYPE_CHECKING:
    from ..program.computation import XlaComputation

__all__ = ["Comparison", "run_and_compare", "compare_outputs", "both_models"]


@dataclass
class Comparison:
    """What :func:`run_and_compare` found: the report, the device's outputs, the values compared
    against with the evaluator's carried error scales, and the options XLA compiled with."""

    report: CompareReport
    got: list[np.ndarray[Any, Any]]
    want: list[np.ndarray[Any, Any]]
    scales: list[Any]
    options: Any


def run_and_compare(
    computation: XlaComputation,
    args: Sequence[Any],
    *,
    device: Any = None,
    against: Any = "reference",
    rtol: float | None = None,
    atol: float | None = None,
    excess_precision: bool = False,
    ulps: float | None = None,
    xla_flags: Mapping[str, Any] | None = None,
    device_kind: Any = None,
    precision: str | None = None,
    outputs: Sequence[Any] | None = None,
) -> Comparison:
    """:func:`xlasdk.reference.compare` without the bisections: the report, with the outputs and
    options the bisections start from (:class:`Comparison`). Same parameters and errors."""
    from ..errors import ShapeError
    from ..runtime import CompileOptions
    from ..runtime import compile as _compile
    from . import _precision, _precision_notes

    kind = _precision.device_kind(device_kind) if device_kind is not None else None
    if precision is not None:
        computation = _precision.set_precision(computation, precision)
    if outputs is not None:  # values a device recorded elsewhere: the reference computes as that device does
        return _recorded(computation, args, outputs, kind or _precision.device_kind(None), precision, rtol, atol,
                         ulps)
    if kind is None:
        from ..runtime.device import _resolve_device, default_device

        dev = default_device() if device is None else _resolve_device(device) if isinstance(device, str) else device
        kind = _precision.device_kind_of(dev)

    if isinstance(rtol, (int, float)) and rtol < 0 or isinstance(atol, (int, float)) and atol < 0:
        raise ShapeError(f"compare: tolerances must be >= 0, got rtol={rtol}, atol={atol}")
    if ulps is not None and (isinstance(ulps, bool) or not isinstance(ulps, (int, float)) or not ulps >= 0):
        raise ShapeError(f"compare: ulps must be a number >= 0, got {ulps!r}")
    reference = isinstance(against, str) and against == "reference"
    # excess_precision: XLA's default said outright (an optimized dump would otherwise compile without it)
    overrides = (dict(STRICT_PRECISION) if not excess_precision else {k: True for k, _ in STRICT_PRECISION}
                 ) if reference else {}
    overrides.update(xla_flags or {})
    options = CompileOptions(env_option_overrides=overrides) if overrides else None
    out = _compile(computation, device, options=options)(*args)
    got = [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]
    scales = [0.0] * len(got)
    if reference:
        try:
            want, scales = run_reference(computation, args, model=(kind, precision, False))
        except XlaSdkError:
            raise
        except Exception as e:  # a value the evaluator cannot read: never a divergence
            raise UnsupportedOpError(
                f"reference evaluator: could not evaluate this program ({type(e).__name__}: {str(e):.200}); it "
                "cannot check it"
            ) from None
        label = "reference evaluator" + (" (XLA with excess precision)" if excess_precision else
                                         " (XLA without excess precision)")
    elif isinstance(against, (list, tuple)):
        want = _given_outputs(got, against)
        label = "given outputs"
    elif hasattr(against, "instruction_graph"):  # a second module that computes what this one should
        other = _compile(against, device, options=options)(*args)
        want = _given_outputs(got, [np.asarray(o) for o in (other if isinstance(other, (list, tuple)) else [other])],
                              f"module {against.name!r}")
        label = f"module {against.name!r}"
        scales = both_models(against, args, _module_kinds(computation, kind, device), precision, len(want))
    else:
        other = _compile(computation, against)(*args)
        want = [np.asarray(o) for o in (other if isinstance(other, (list, tuple)) else [other])]
        label = str(against)
        try:
            from ..runtime.device import _resolve_device

            other_kind = _precision.device_kind_of(_resolve_device(against) if isinstance(against, str) else against)
        except Exception:  # noqa: BLE001 - compiled and ran on it above: its kind only decides the bounds
            other_kind = kind
        scales = both_models(computation, args, [kind, other_kind], precision, len(want))
    if len(want) != len(got):
        raise XlaSdkError(f"compare: the program has {len(got)} outputs, {label} gave {len(want)}")
    report = CompareReport(computation.name, label, [
        compare_one(i, g, w, rtol, atol, sc, ulps) for i, (g, w, sc) in enumerate(zip(got, want, scales,
                                                                                        strict=True))])
    report.device_kind = kind.name
    if reference:
        report.precision_notes = _precision_notes.precision_notes(computation, kind, precision)
    return Comparison(report, got, want, scales, options)


def _module_kinds(computation: XlaComputation, kind: Any, device: Any) -> list[Any]:
    """The error models a module is judged by against a second module that computes what it should:
    the device both ran on, the kind the user named, and a TPU's where ``computation`` is the CPU
    meaning of a TPU-optimized module (its kept bf16 converts are the TPU's DEFAULT precision)."""
    from ..runtime.device import _resolve_device, default_device
    from . import _precision

    dev = default_device() if device is None else _resolve_device(device) if isinstance(device, str) else device
    kinds = [kind, _precision.device_kind_of(dev)]
    if getattr(computation, "_tpu_meaning", None) is not None:
        kinds.append(_precision.device_kind("tpu"))
    return kinds


def both_models(computation: XlaComputation, args: Sequence[Any], kinds: Sequence[Any], precision: str | None,
                n: int) -> list[Any]:
    """Per output, the bounds of the error models of the devices of ``kinds`` added (``--against
    cpu:0`` from a TPU: each may be that far from the exact value), or no bounds (the default
    tolerances) where the reference cannot evaluate the program."""
    from ._bounds import OutputScale

    try:
        per_kind = [run_reference(computation, args, model=(k, precision, False))[1]
                    for k in dict.fromkeys(getattr(k, "name", k) for k in kinds)]
    except Exception:  # noqa: BLE001 - a program the reference cannot read: the default tolerances
        return [0.0] * n
    out: list[Any] = []
    for parts in zip(*per_kind, strict=True):
        bounds: list[np.ndarray[Any, Any]] = [b for b in (getattr(p, "bound", None) for p in parts) if b is not None]
        total = np.asarray(np.sum(bounds, axis=0)) if len(bounds) == len(parts) else None  # 0-d stays an array
        out.append(OutputScale(max(float(p) for p in parts), total, all(getattr(p, "modeled", False) for p in parts)))
    return out


def _recorded(computation: XlaComputation, args: Sequence[Any], outputs: Sequence[Any], kind: Any,
              precision: str | None, rtol: float | None, atol: float | None, ulps: float | None) -> Comparison:
    """Outputs recorded on a device of ``kind`` against the reference computing as that device does
    (a TPU's DEFAULT-precision f32 dot/convolution operands rounded to bf16) with the rest of its bounds."""
    from . import _precision_notes

    try:
        want, scales = run_reference(computation, args, model=(kind, precision, True))
    except XlaSdkError:
        raise
    except Exception as e:  # noqa: BLE001 - a value the evaluator cannot read: never a divergence
        raise UnsupportedOpError(f"reference evaluator: could not evaluate this program ({type(e).__name__}: "
                                 f"{str(e):.200}); it cannot check it") from None
    got = _given_outputs(want, outputs, "the recorded outputs")
    label = f"reference evaluator computing as {kind.label} does"
    report = CompareReport(computation.name, label, [
        compare_one(i, g, w, rtol, atol, sc, ulps) for i, (g, w, sc) in enumerate(zip(got, want, scales,
                                                                                        strict=True))])
    report.device_kind = kind.name
    report.precision_notes = _precision_notes.precision_notes(computation, kind, precision, emulated=True)
    return Comparison(report, got, want, scales, None)

def _given_outputs(got: Sequence[np.ndarray[Any, Any]], want: Sequence[Any],
                   label: str | None = None) -> list[np.ndarray[Any, Any]]:
    """``want`` as arrays of ``got``'s shapes and types (raw bytes of the element's size, as numpy
    saves bf16, read as the output's type), or an XlaSdkError naming ``label`` (None: "given")."""
    w_list = [np.asarray(w) for w in want]
    if len(w_list) != len(got):
        held = f"{len(w_list)} were given" if label is None else f"{label} hold {len(w_list)}"
        raise XlaSdkError(f"compare: the program has {len(got)} outputs, {held}")
    for k, (g_, w_) in enumerate(zip(got, w_list, strict=True)):
        if w_.dtype != g_.dtype and w_.dtype.kind == "V" and w_.dtype.itemsize == g_.dtype.itemsize:
            w_list[k] = w_ = w_.view(g_.dtype)
        if w_.shape != g_.shape or w_.dtype != g_.dtype:
            where = "given " if label is None else f"{label}: "
            raise XlaSdkError(f"compare: {where}output {k} is {w_.dtype}{list(w_.shape)}, the program's output {k} "
                              f"is {g_.dtype}{list(g_.shape)}")
    return w_list


def compare_outputs(
    got: Sequence[Any],
    want: Sequence[Any],
    *,
    name: str = "outputs",
    against: str = "expected outputs",
    rtol: float | None = None,
    atol: float | None = None,
    scales: Sequence[Any] | None = None,
) -> CompareReport:
    """Compare outputs already computed (``got``) with expected ones (``want``, e.g. a snapshot's
    recorded result or another run's ``--output``), element by element with :func:`compare`'s
    rule and default tolerances (the magnitude of each output stands for the terms of the op that
    made it, which are unknown here). ``scales``: per output, the error bounds of the devices'
    models (:func:`both_models`), as ``xlasdk run --expect OUT.npz --expect-device-kind KIND`` gives them.

    Raises
    ------
    ShapeError
        A negative tolerance.
    XlaSdkError
        Another number of outputs, or an output of another shape or element type (raw-byte arrays
        of the element's size, as numpy saves bf16, are read as the output's type).
    """
    from ..errors import ShapeError

    if isinstance(rtol, (int, float)) and rtol < 0 or isinstance(atol, (int, float)) and atol < 0:
        raise ShapeError(f"compare: tolerances must be >= 0, got rtol={rtol}, atol={atol}")
    g_list = [np.asarray(g) for g in got]
    w_list = _given_outputs(g_list, want, against)
    sc = list(scales) if scales is not None and len(scales) == len(g_list) else [0.0] * len(g_list)
    return CompareReport(name, against, [compare_one(i, g, w, rtol, atol, s)
                                         for i, (g, w, s) in enumerate(zip(g_list, w_list, sc, strict=True))])

