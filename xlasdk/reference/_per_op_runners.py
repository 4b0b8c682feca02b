"""The op-by-op step against every runner (issue 42): where the outputs' carried bounds are too loose
to judge them (``CANNOT JUDGE``), what settles the verdict, and in words why a verdict is what it is.

- against the reference: :func:`._per_op.judge_op_by_op` on the device's run (each instruction
  within its own bound on the device's own operand values);
- against another device (:class:`._runners.OtherDevice`): both runs judged op by op, each on its
  own device by its own kind's model: when both are right, they differ only by each device's
  rounding;
- against a second module (:class:`._runners.SecondModule`): this module's run judged op by op, and
  the two modules evaluated by the reference on the same inputs, compared by the outputs' bounds
  (bit-identical values, as an optimized module and its before file give, need none): a program
  that computes something else is a DIVERGENCE, whatever its run;
- against recorded outputs (``outputs=``): nothing before the outputs was recorded, so nothing is
  judged op by op; the verdict keeps its CANNOT JUDGE and says so (:func:`recorded_why` says what
  model judged and, on a DIVERGENCE, which outputs left which bounds).

Each step's result is an :class:`~._per_op.OpByOp`; :func:`combined` makes the report's one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import XlaSdkError
from ._per_op import OpByOp, judge_op_by_op
from ._precision import DEVICE_KINDS

if TYPE_CHECKING:
    from ..program.computation import XlaComputation
    from ._report import CompareReport
    from ._runners import Comparison
    from ._settings import CompareSettings

__all__ = ["judge_against", "combined", "recorded_why"]


def judge_against(runner: Any, computation: XlaComputation, args: Sequence[Any], c: Comparison,
                  settings: CompareSettings) -> OpByOp:
    """The op-by-op step of a comparison ``c`` against ``runner`` (see the module's docstring)."""
    from ._runners import GivenOutputs, OtherDevice, SecondModule

    s = settings
    if s.outputs is not None or isinstance(runner, GivenOutputs):
        return OpByOp("CANNOT JUDGE", why="outputs recorded elsewhere hold no values of the instructions before "
                      "them, so nothing can be judged op by op; compare on the device that recorded them (against "
                      "the reference) to judge each op on its own operand values")
    own = _guarded(lambda: judge_op_by_op(computation, args, c.got, settings=s, options=c.options),
                   "this device's run")
    if isinstance(runner, OtherDevice):
        try:
            other_kind = runner.models(computation, s)[-1]
            other = dataclasses.replace(s, device=runner.resolved, device_kind=other_kind, xla_flags={})
        except XlaSdkError as e:
            return combined([("this device's run", own), (runner.label, OpByOp("CANNOT JUDGE", why=str(e)))])
        theirs = _guarded(lambda: judge_op_by_op(computation, args, c.want, settings=other, options=None),
                          f"{runner.label}'s run")
        return combined([("this device's run", own), (f"{runner.label}'s run ({other_kind.label}'s model)", theirs)])
    if isinstance(runner, SecondModule):
        same = _guarded(lambda: same_program(computation, runner.module, args, c.scales, s),
                        "the two modules in the reference evaluator")
        return combined([("this module's run", own), ("the two modules in the reference evaluator", same)])
    return own


def _guarded(step: Any, what: str) -> OpByOp:
    """``step()``, or CANNOT JUDGE saying why it could not be taken (an op without a rule...)."""
    try:
        return step()  # type: ignore[no-any-return]
    except XlaSdkError as e:
        return OpByOp("CANNOT JUDGE", why=f"{what} could not be judged ({type(e).__name__}: {str(e)[:200]})")


def same_program(bad: XlaComputation, good: XlaComputation, args: Sequence[Any], scales: Sequence[Any],
                 s: CompareSettings) -> OpByOp:
    """``bad`` and ``good`` evaluated by the reference on ``args``, output by output: MATCH where
    every output is bit-identical or within the bound ``scales`` give it (the comparison's own),
    DIVERGENCE where one leaves it (``first``: ``output k``), CANNOT JUDGE where they differ within a
    bound too loose to judge by."""
    from ._report import compare_one
    from ._runners import evaluate_as

    how = "both modules evaluated by the reference on the same inputs"

    want_b, _ = evaluate_as(bad, args, s.kind, s.precision, emulated=False)
    want_g, _ = evaluate_as(good, args, s.kind, s.precision, emulated=False)
    if len(want_b) != len(want_g):
        return OpByOp("DIVERGENCE", first="outputs", why=f"{len(want_b)} outputs against {len(want_g)}")
    identical = 0
    loose: list[str] = []
    for k, (b, g, sc) in enumerate(zip(want_b, want_g, scales, strict=True)):
        b, g = np.asarray(b), np.asarray(g)
        if b.shape == g.shape and b.dtype == g.dtype and b.tobytes() == g.tobytes():
            identical += 1
            continue
        if b.shape != g.shape or b.dtype != g.dtype:
            return OpByOp("DIVERGENCE", first=f"output {k}", why=f"{b.dtype}{list(b.shape)} against "
                          f"{g.dtype}{list(g.shape)}")
        r = compare_one(k, b, g, s.rtol, s.atol, sc, s.ulps)
        if not r.ok:
            return OpByOp("DIVERGENCE", len(want_b), f"output {k}", "", r.mismatches, r,
                          why="the reference evaluator computes another value from this module than from the one "
                              "compared against: the programs differ (--bisect ops names the instruction)")
        if r.unjudged:
            loose.append(f"output {k} (max {r.max_ulp:.3g} ulp apart, bound up to {r.loosest:.3g})")
    if loose:
        return OpByOp("CANNOT JUDGE", len(want_b), method=how, why="the reference evaluator's values of the two "
                      f"modules differ within a bound too loose to judge them: {', '.join(loose)}")
    same = "bit-identical" if identical == len(want_b) else "within their bounds"
    return OpByOp("MATCH", len(want_b), method=how, why=f"the reference evaluator computes {same} outputs from both "
                  "modules")


def combined(parts: Sequence[tuple[str, OpByOp]]) -> OpByOp:
    """One judgment of several steps: DIVERGENCE where one diverges (its fields, ``why`` naming the
    step), MATCH where all match, else CANNOT JUDGE with every step's reason; ``parts`` keeps them."""
    named = [(what, p) for what, p in parts]
    bad = next(((w, p) for w, p in named if p.verdict == "DIVERGENCE"), None)
    if bad is not None:
        w, p = bad
        out = dataclasses.replace(p, why=f"{w}: {p.why}" if p.why else w)
    elif all(p.verdict == "MATCH" for _, p in named):
        out = OpByOp("MATCH", sum(p.instructions for _, p in named), hidden=sum(p.hidden for _, p in named))
    else:
        out = OpByOp("CANNOT JUDGE", why="; ".join(f"{w}: {p.why or p.verdict}" for w, p in named
                                                   if p.verdict != "MATCH"))
    out.parts = list(named)
    return out


def _number(v: Any) -> str:
    """An element as a report writes it (a complex one with both parts)."""
    return f"{complex(v):.6g}" if np.iscomplexobj(v) else f"{float(v):.6g}"


#: How each platform's DEFAULT-precision f32 dots and convolutions take their operands, as the
#: reference evaluator computing as that device does takes them.
_DOT_INPUTS = {"tpu": " (its DEFAULT-precision f32 dots and convolutions from bf16-rounded operands, as a TPU's "
                      "matrix unit takes them)",
               "gpu": " (its DEFAULT-precision f32 dots and convolutions from TF32-rounded operands)"}


def recorded_why(report: CompareReport, scales: Sequence[Any]) -> list[str]:
    """For outputs recorded on another device: what model judged them, and on a DIVERGENCE, per
    diverging output, how far it is off against the bound it was judged by."""
    kind = DEVICE_KINDS.get(str(report.device_kind))
    lines = [f"judged by the reference evaluator computing as {report.device_kind} does"
             f"{_DOT_INPUTS.get(kind.platform, '') if kind is not None else ''}, each element within the error "
             "that kind's model carries to it through every op before it"]
    for o, sc in zip(report.outputs, scales, strict=False):
        if o.ok or o.got is None or o.want is None:
            continue
        bound = getattr(sc, "bound", None)
        idx = o.first_mismatch or ()
        b = float(np.asarray(bound)[idx]) if bound is not None and np.shape(bound) == tuple(o.shape) else None
        at = list(idx)
        g, w = np.asarray(o.got)[idx], np.asarray(o.want)[idx]
        lines.append(f"output {o.index}: {o.mismatches} element{'s' if o.mismatches != 1 else ''} outside the bound; "
                     f"at {at} got {_number(g)}, the model's value {_number(w)}"
                     + (f", carried bound {b:.3g}" if b is not None else ", default tolerance (no carried bound)"))
    if report.precision_notes:
        lines.append("the precision-limited ops the model applied: " + "; ".join(report.precision_notes[:6])
                     + (" ..." if len(report.precision_notes) > 6 else ""))
    else:
        lines.append(f"no op of the program is precision-limited on {report.device_kind}: an output off by more "
                     "than the model's bound is not the device's rounding (a wrong device kind, other inputs, or "
                     "another program)")
    return lines


def settle(report: CompareReport, runner: Any, computation: XlaComputation, args: Sequence[Any], c: Comparison,
           settings: CompareSettings) -> None:
    """compare's op-by-op step against a runner other than the reference on the device's run:
    where the outputs cannot be judged, :func:`judge_against` becomes ``report.judged_op_by_op``;
    outputs recorded on another device get ``report.judged_by`` (:func:`recorded_why`)."""
    from ._orders import outputs_verdict

    if settings.outputs is not None:
        report.judged_by = recorded_why(report, c.scales)
    if outputs_verdict(report) == "CANNOT JUDGE":
        settings.say("the outputs cannot be judged by their carried bounds: the op-by-op step")
        report.judged_op_by_op = judge_against(runner, computation, args, c, settings)
