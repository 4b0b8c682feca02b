"""Running a program on a device and comparing its outputs with the reference evaluator, another
device or recorded outputs (:func:`run_and_compare`, :func:`compare_outputs`): per output the
largest absolute, relative and ulp error, the elements outside the tolerance and the first of them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._numbers import tolerances
from ..errors import CompareArgumentError
from ._report import CompareReport, compare_one
from ._runners import both_models, evaluate_as, given_outputs, reference_for

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
    options the bisections start from (:class:`Comparison`). Same parameters and errors; ``against``
    is read by :func:`~xlasdk.reference._runners.reference_for` (a runner is taken as is)."""
    from ..runtime import CompileOptions
    from ..runtime import compile as _compile
    from . import _precision, _precision_notes

    rtol, atol, ulps = tolerances("compare", rtol, atol, ulps)
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

    runner = reference_for(against, excess_precision=excess_precision)
    overrides = runner.device_overrides()
    overrides.update(xla_flags or {})
    options = CompileOptions(env_option_overrides=overrides) if overrides else None
    out = _compile(computation, device, options=options)(*args)
    got = [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]
    want, scales = runner.expected(computation, args, got, device=device, options=options, kind=kind,
                                   precision=precision)
    if len(want) != len(got):
        raise CompareArgumentError(f"compare: the program has {len(got)} outputs, {runner.label} gave {len(want)}")
    report = CompareReport(computation.name, runner.label, [
        compare_one(i, g, w, rtol, atol, sc, ulps) for i, (g, w, sc) in enumerate(zip(got, want, scales,
                                                                                       strict=True))])
    report.device_kind = kind.name
    if runner.evaluates:
        report.precision_notes = _precision_notes.precision_notes(computation, kind, precision)
    return Comparison(report, got, want, scales, options)


def _recorded(computation: XlaComputation, args: Sequence[Any], outputs: Sequence[Any], kind: Any,
              precision: str | None, rtol: float | None, atol: float | None, ulps: float | None) -> Comparison:
    """Outputs recorded on a device of ``kind`` against the reference computing as that device does
    (a TPU's DEFAULT-precision f32 dot/convolution operands rounded to bf16) with the rest of its bounds."""
    from . import _precision_notes

    want, scales = evaluate_as(computation, args, kind, precision, emulated=True)
    got = given_outputs(want, outputs, "the recorded outputs")
    label = f"reference evaluator computing as {kind.label} does"
    report = CompareReport(computation.name, label, [
        compare_one(i, g, w, rtol, atol, sc, ulps) for i, (g, w, sc) in enumerate(zip(got, want, scales,
                                                                                        strict=True))])
    report.device_kind = kind.name
    report.precision_notes = _precision_notes.precision_notes(computation, kind, precision, emulated=True)
    return Comparison(report, got, want, scales, None)


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
    ToleranceError
        A tolerance that is not a finite number >= 0 (a ShapeError).
    CompareArgumentError
        Another number of outputs, or an output of another shape or element type (raw-byte arrays
        of the element's size, as numpy saves bf16, are read as the output's type).
    """
    rtol, atol, _ = tolerances("compare", rtol, atol)
    g_list = [np.asarray(g) for g in got]
    w_list = given_outputs(g_list, want, against)
    sc = list(scales) if scales is not None and len(scales) == len(g_list) else [0.0] * len(g_list)
    return CompareReport(name, against, [compare_one(i, g, w, rtol, atol, s)
                                         for i, (g, w, s) in enumerate(zip(g_list, w_list, sc, strict=True))])

