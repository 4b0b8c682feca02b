"""Comparing an output with the reference and the report (split from
:mod:`xlasdk.reference._evaluator`, which re-exports the public ones): :func:`default_tolerance`,
:func:`compare_one`, :class:`OutputComparison`, :class:`CompareReport`."""


from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import ml_dtypes as _ml_dtypes
import numpy as np

from ._bounds import BOUND_MARGIN, type_eps
from ._orders import _scaled, judge_order, outputs_verdict, reach, unjudged_lines, vacuous, verdict
from ._walk import is_float, is_ml_float, widened

ml_dtypes: Any = _ml_dtypes  # untyped functions (finfo)

__all__: list[str] = ["CompareReport", "OutputComparison", "default_tolerance"]


# -- comparing ---------------------------------------------------------------------------------------------------
def default_tolerance(dtype: np.dtype[Any]) -> tuple[float, float]:
    """``(rtol, atol_fraction)`` for an output of ``dtype``: an element matches when
    ``|got - want| <= atol_fraction * max|want| + rtol * |want|`` (integers, bool: exactly)."""
    dt = np.dtype(dtype)
    if dt.kind in "iub":
        return 0.0, 0.0
    name = dt.name
    if name in ("float64", "complex128"):
        return 1e-12, 1e-13
    if name in ("float32", "complex64"):
        return 1e-5, 1e-6
    if name == "float16":
        return 2.0**-9, 2.0**-9
    if name == "bfloat16":
        return 2.0**-6, 2.0**-6
    return 2.0**-2, 2.0**-3  # the fp8 types: 1-2 ulp of their 2-3 mantissa bits


@dataclass
class OutputComparison:
    """How one output of the program compares (see :func:`compare`)."""

    index: int
    shape: tuple[int, ...]
    dtype: str
    max_abs: float
    max_rel: float
    max_ulp: float
    mismatches: int
    first_mismatch: tuple[int, ...] | None
    got: Any = field(repr=False, default=None)
    want: Any = field(repr=False, default=None)
    #: mismatches where one side is NaN or infinite and the other is not (or is the other
    #: infinity): the max columns, taken over finite differences, do not show them
    nonfinite_mismatches: int = 0
    #: the largest absolute error relative to the output's scale (its largest finite magnitude):
    #: unlike ``max_rel``, not dominated by elements near zero
    max_scaled: float = 0.0
    #: elements whose carried bound is too loose to judge them (:func:`._orders.vacuous`), the loosest
    unjudged: int = 0
    loosest: float = 0.0

    @property
    def ok(self) -> bool:
        return self.mismatches == 0

    def summaries(self) -> tuple[Any, Any]:
        """The device's value and the one compared against, each summarized
        (:class:`~xlasdk.reference._summaries.ValueSummary`: min, max, mean, checksum); None for a
        side not kept."""
        from ._summaries import summarize

        return (None if self.got is None else summarize(self.got), None if self.want is None else summarize(self.want))


@dataclass
class CompareReport:
    """The result of :func:`compare`: one :class:`OutputComparison` per output, and ``ok``."""

    name: str
    against: str
    outputs: list[OutputComparison]
    #: ``bisect="ops"``: :class:`xlasdk.bisect.OpsBisection`; ``bisect="passes"``:
    #: :class:`xlasdk.bisect.PassBisection`; ``find_nonfinite=True``: :class:`xlasdk.bisect.NonFinite`.
    bisect_ops: Any = None
    bisect_passes: Any = None
    nonfinite: Any = None
    #: the device kind whose error model judged the values (``"cpu"``, ``"tpu-v5e"``...)
    device_kind: str = "cpu"
    #: the precision-limited ops of the program and the bound each is judged by
    #: (``"convolution.3: TPU v5e DEFAULT precision (bf16 inputs; bound 7.8e-3 of |A|·|B|)"``)
    precision_notes: list[str] = field(default_factory=list)
    #: where the outputs' carried bounds are too loose to judge them (CANNOT JUDGE), against the
    #: reference: the program judged op by op on the device's own operands
    #: (:class:`xlasdk.reference._per_op.OpByOp`), whose verdict is then the report's
    judged_op_by_op: Any = None
    #: outputs recorded on another device (``outputs=``): what model judged them and, on a
    #: DIVERGENCE, which outputs left which bounds (:func:`._per_op_runners.recorded_why`)
    judged_by: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return verdict(self) == "MATCH"

    def score_histogram(self) -> dict[str, dict[str, int]]:
        """How many compared values fall in each decade of score (their largest error over their
        largest magnitude; :data:`~xlasdk.reference._summaries.SCORE_BUCKETS`): the outputs, and the
        instructions the op-by-op step judged (each against its rule on its operands) where it ran."""
        from ._summaries import score_histogram

        out = {"outputs": score_histogram((o.max_scaled, o.nonfinite_mismatches > 0) for o in self.outputs)}
        per_op = self.judged_op_by_op
        if per_op is not None and getattr(per_op, "scores", None):
            out["op_by_op"] = score_histogram(per_op.scores.values())
        return out

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready values (what ``xlasdk compare --json`` writes)."""
        doc: dict[str, Any] = {"name": self.name, "against": self.against, "match": self.ok, "verdict": verdict(self),
                               "outputs": [
            {"index": o.index, "shape": list(o.shape), "dtype": o.dtype, "max_abs": o.max_abs, "max_rel": o.max_rel,
             "max_ulp": o.max_ulp, "max_scaled": o.max_scaled, "mismatches": o.mismatches,
             "nonfinite_mismatches": o.nonfinite_mismatches, "unjudged": o.unjudged,
             "first_mismatch": None if o.first_mismatch is None else list(o.first_mismatch)}
            for o in self.outputs], "device_kind": self.device_kind, "precision_notes": list(self.precision_notes),
            "outputs_verdict": outputs_verdict(self),
            "judged_op_by_op": None if self.judged_op_by_op is None else self.judged_op_by_op.as_dict(),
            "judged_by": list(self.judged_by), "summaries": [_summary_dict(o) for o in self.outputs],
            "score_histogram": self.score_histogram()}
        for key, part in (("bisect_ops", self.bisect_ops), ("bisect_passes", self.bisect_passes),
                          ("nonfinite", self.nonfinite)):
            if part is not None:
                doc[key] = part.as_dict()
        return doc

    def __str__(self) -> str:
        head = f"{self.name}: device vs {self.against}: {verdict(self)}"
        rows = [f"  {'output':<7}{'shape':<18}{'dtype':<10}{'max abs':>12}{'max rel':>12}{'max ulp':>10}"
                f"{'mismatches':>12}  first"]
        for o in self.outputs:
            rows.append(
                f"  {o.index:<7}{str(list(o.shape)):<18}{o.dtype:<10}{o.max_abs:>12.3g}{o.max_rel:>12.3g}"
                f"{o.max_ulp:>10.3g}{o.mismatches:>12}  {'' if o.first_mismatch is None else list(o.first_mismatch)}"
                + (f"  ({o.nonfinite_mismatches} NaN/Inf against a different value)" if o.nonfinite_mismatches else "")
            )
        scaled = [f"  output {o.index}: largest error {o.max_scaled:.3g} of the output's scale" for o in self.outputs
                  if o.max_scaled > 0 and o.max_rel > 10 * o.max_scaled]  # where near-zero elements dominate max rel
        notes = ([f"  precision-limited ops on {self.device_kind} (each within its bound):"]
                 + [f"    {n}" for n in self.precision_notes]) if self.precision_notes else []
        extra = [str(x) for x in (self.bisect_ops, self.bisect_passes, self.nonfinite) if x is not None]
        per_op = [] if self.judged_op_by_op is None else self.judged_op_by_op.lines()
        judged_by = [f"  {ln}" for ln in self.judged_by]
        return "\n".join([head, *rows, *scaled, *unjudged_lines(self.outputs), *per_op, *judged_by, *notes, *extra,
                          *summary_lines(self)])


def _summary_dict(o: OutputComparison) -> dict[str, Any]:
    got, want = o.summaries()
    return {"index": o.index, "score": o.max_scaled, "got": None if got is None else got.as_dict(),
            "want": None if want is None else want.as_dict()}


def summary_lines(report: CompareReport) -> list[str]:
    """The report's short text form of the per-value summaries: per output, each side's min, max,
    mean and checksum (one line when both sides are bit-identical), and the score histogram."""
    from ._summaries import histogram_line

    out = ["  values (min, max, mean, crc32 of the bytes):"]
    for o in report.outputs:
        got, want = o.summaries()
        if got is None or want is None:
            continue
        if got.checksum == want.checksum:
            out.append(f"    output {o.index}: {got} (both)")
        else:
            out.append(f"    output {o.index}: device {got}")
            out.append(f"    {'':>{len(str(o.index)) + 7}}  expected {want}")
    hist = report.score_histogram()
    out.append("  scores (largest error over largest magnitude): outputs: " + histogram_line(hist["outputs"])
               + (f"; op by op: {histogram_line(hist['op_by_op'])}" if "op_by_op" in hist else ""))
    return out if len(out) > 2 else out[-1:]


def ulps_apart(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    dt = want.dtype
    if not is_float(dt) or dt.kind == "c":
        if dt.kind == "b":
            return np.asarray(got != want, dtype=np.float64)
        return np.asarray(np.abs(widened(got).astype(np.complex128) - widened(want).astype(np.complex128)).real)
    eps = float(ml_dtypes.finfo(dt).eps) if is_ml_float(dt) else float(np.finfo(dt).eps)
    w = widened(want)
    with np.errstate(all="ignore"):  # the spacing of the type at |want| (its subnormal spacing below the normals)
        _, e = np.frexp(np.maximum(np.abs(w), _tiny(dt)))
        spacing = np.ldexp(eps, e - 1)
    return np.asarray(np.abs(widened(got) - w) / spacing)


def _tiny(dt: np.dtype[Any]) -> float:
    """The smallest normal number of a float type (0 for others)."""
    if dt.kind == "c":
        return float(np.finfo(dt).tiny)
    if not is_float(dt):
        return 0.0
    return float(ml_dtypes.finfo(dt).smallest_normal) if is_ml_float(dt) else float(np.finfo(dt).tiny)


def compare_one(i: int, got: np.ndarray[Any, Any], want: np.ndarray[Any, Any], rtol: float | None,
                 atol: float | None, scale: float = 0.0, ulps: float | None = None) -> OutputComparison:
    """How output ``i`` compares. An element matches when ``|got - want| <= tol_abs + rtol * |want|``
    with ``tol_abs = atol`` or, by default, the type's fraction of the larger of the output's largest
    magnitude and ``scale`` (the terms the op that made it added), and never below the type's
    smallest normal number (XLA:CPU flushes subnormal results to zero); with ``ulps``, a float
    element also matches when it is at most ``ulps`` units in the last place of ``want`` away (the
    spacing of the output's type at ``|want|``; the report's ``max_ulp``)."""
    d_rtol, d_atol = default_tolerance(want.dtype)
    rtol = d_rtol if rtol is None else rtol
    w, g = widened(want), widened(got)
    with np.errstate(all="ignore"):
        if want.dtype.kind in "iub":
            bad, loose = judge_order(got, want, getattr(scale, "order", None), BOUND_MARGIN)
            diff = np.abs(g.astype(np.float64) - w.astype(np.float64)) if want.dtype.kind != "b" else bad.astype(float)
            rel = diff / np.maximum(np.abs(w.astype(np.float64)), 1) if want.dtype.kind != "b" else diff
        else:
            finite_w = np.isfinite(w)
            big = float(np.max(np.abs(w[finite_w]), initial=0.0))
            tol_abs = max(d_atol * max(big, scale), _tiny(want.dtype)) if atol is None else atol
            nan_g, nan_w = np.isnan(g), np.isnan(w)
            same = (nan_g & nan_w) | (np.isinf(w) & (g == w))
            diff = np.where(same, 0.0, np.abs(np.where(nan_g | nan_w, np.inf, g - w)))
            rel = np.where(np.abs(w) > 0, diff / np.where(np.abs(w) > 0, np.abs(w), 1.0), np.where(diff > 0, np.inf, 0))
            carried = getattr(scale, "bound", None) if atol is None else None
            if carried is not None and carried.shape == w.shape and getattr(scale, "modeled", False) and (
                    rtol == d_rtol and is_float(want.dtype) and want.dtype.kind != "c"):
                # a dot's value: its model's bound (relative to |A|·|B|, with what it carries in) and one
                # ulp, not a fraction of the output's scale, which a wrong value hides under
                tol_abs, rtol = _tiny(want.dtype), 0.0 if getattr(scale, "exact", False) else type_eps(want.dtype)
            if carried is not None and carried.shape == w.shape:
                tol_abs = tol_abs + BOUND_MARGIN * carried  # the rounding the ops before it may have moved it by
            bad = ~same & ~(diff <= (tol := tol_abs + rtol * np.abs(np.where(finite_w, w, 0))))
            loose = vacuous(carried, same | (diff == 0), tol, w, finite_w, max(big, scale, reach(scale)))
        ulp = ulps_apart(got, want) if want.size else np.zeros(0)
        ulp = np.where(np.isfinite(ulp), ulp, np.inf)
        if ulps is not None and is_float(want.dtype) and want.dtype.kind != "c":
            bad = bad & ~(ulp <= ulps)
    idx = np.argwhere(bad)
    finite = np.isfinite(np.real(diff))
    return OutputComparison(
        i, tuple(want.shape), str(want.dtype),
        float(np.max(np.real(diff), initial=0.0, where=finite)) if bad.any() or finite.any() else 0.0,
        float(np.max(np.real(rel), initial=0.0, where=np.isfinite(np.real(rel)))),
        float(np.max(ulp, initial=0.0, where=np.isfinite(ulp))), int(bad.sum()),
        tuple(int(k) for k in idx[0]) if len(idx) else None, got, want,
        int(np.count_nonzero(bad & ~finite)), _scaled(diff, w, finite), *loose)


#: What the device side of a comparison against the reference compiles with: XLA may otherwise keep
#: values of bf16/f16 ops in f32 between ops (``xla_allow_excess_precision``, on by default), which
#: the per-op rounding of the reference does not do.
STRICT_PRECISION = (("xla_allow_excess_precision", False),)
