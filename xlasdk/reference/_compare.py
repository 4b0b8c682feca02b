"""Comparing a device's results against the reference evaluator, another device or recorded
outputs (:func:`compare`), with the bisections of :mod:`xlasdk.reference.bisect` on request."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from ..errors import CompareArgumentError
from ._report import CompareReport
from ._runners import reference_for, run_against
from ._settings import CompareSettings, refuse_both

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..program.computation import XlaComputation
    from ..runtime import CompileOptions
    from ..runtime.per_partition import PerPartitionPlan
    from ._settings import DeviceLike

__all__ = ["compare"]


def compare(
    computation: XlaComputation | PerPartitionPlan,
    args: Sequence[Any],
    *,
    against: Any = "reference",
    settings: CompareSettings | None = None,
    bisect: str | None = None,
    find_nonfinite: bool = False,
    device: DeviceLike = None,
    rtol: float | None = None,
    atol: float | None = None,
    excess_precision: bool = False,
    ulps: float | None = None,
    progress: Callable[[str], None] | None = None,
    xla_flags: Mapping[str, Any] | None = None,
    device_kind: str | None = None,
    precision: str | None = None,
    outputs: Sequence[ArrayLike] | None = None,
) -> CompareReport:
    """Run ``computation`` on ``device`` (XLA) and compare its outputs with ``against``.

    Parameters
    ----------
    computation: built or loaded. An optimized per-partition dump (one partition's program of an
        SPMD program, or its :class:`~xlasdk.runtime.per_partition.PerPartitionPlan`) runs from the
        program's global arrays as ``xlasdk compare`` runs it: split by the parameters' shardings,
        each partition on its own device, the outputs put together, compared with the program's
        global meaning (the reference on the plan's before_optimizations module, a second module:
        the before_optimizations module, or recorded global outputs); ``bisect="ops"`` (against the
        reference, or another per-partition module of the program that computes it right) bisects
        the per-partition module's ops, every partition simulated, and names the partitions where
        the culprit departs; no other bisection.
    args: one array per parameter (the program's global arrays for a per-partition dump).
    settings: every setting below from ``device`` to ``outputs`` as one record
        (:class:`~xlasdk.CompareSettings`, checked when it was made); the keywords make one when
        it is not given, and are refused beside it.
    device: where XLA runs it (default: the default device), resolved once.
    against: ``"reference"`` (:func:`evaluate`), a device or ``"cpu:0"``-style name (XLA on it;
        each output within both devices' bounds together, where the reference can evaluate it),
        a list of arrays (recorded outputs, of the program's output shapes and element types), or
        a second :class:`~xlasdk.XlaComputation` that computes what this one should (run on the
        same device; ``bisect="ops"`` matches their instructions by name, then by structure, and
        names the first one that departs on agreeing values).
    rtol, atol: an element matches when ``|got - want| <= atol + rtol * |want|``. By default per
        element type (:func:`default_tolerance`), ``atol`` a fraction of the larger of the output's
        largest magnitude and the terms the op that made it added (a sum that cancels to 0 may
        round to 8 in another order), never below the type's smallest normal number; integers and
        bool must be equal; NaN matches NaN only.
    excess_precision: against the reference, XLA compiles with ``xla_allow_excess_precision=false``
        (each bf16/f16 op rounded, as the reference rounds it) unless this is true.
    ulps: a float element also matches when ``|got - want|`` is at most ``ulps`` units in the last
        place of ``want`` in the output's type (the type's spacing at ``|want|``, its subnormal
        spacing below the smallest normal; the report's ``max_ulp``), whatever rtol/atol say
        (``rtol=0, atol=0, ulps=N``: ulps alone). Complex outputs: rtol/atol only.
    bisect: ``"ops"``: when the outputs diverge, the first instruction that introduces the
        divergence (``report.bisect_ops``, :class:`xlasdk.bisect.OpsBisection`); ``"passes"``: the
        XLA passes whose disabling removes it (``report.bisect_passes``). Against the reference only.
    find_nonfinite: the first instruction whose device value has a NaN/Inf while its operands have
        none (``report.nonfinite``, :class:`xlasdk.bisect.NonFinite`).
    progress: called with a line of text per step of a bisection or of the op-by-op judgment.
    xla_flags: XLA ``DebugOptions`` fields for the device side's compile (``{"xla_disable_hlo_passes":
        "algsimp"}``, as ``XLA_FLAGS`` names them without the ``--``), over xlasdk's own.
    device_kind: whose error model judges each op (``"cpu"``, ``"gpu"``, ``"tpu-v5e"``, ...;
        :mod:`xlasdk.reference._precision`): by default the kind of ``device``. A TPU's f32 dots
        at DEFAULT precision are bf16 products, its ``tanh`` within 1365.5 ulp...
    precision: ``"highest"`` (or ``"high"``, ``"default"``): every dot and convolution compiled,
        and judged, at that precision (to tell the device's precision from a bug).
    outputs: outputs recorded on a device of ``device_kind`` (no local run): compared with the
        reference computing as that device does (a TPU's DEFAULT-precision f32 dot/convolution
        operands rounded to bf16) and the rest of its bounds.

    Where the outputs' error bounds, carried through every op before them, are too loose to judge
    them (``CANNOT JUDGE``: a deep model), against any runner the op-by-op step settles it where it
    applies (:mod:`xlasdk.reference._per_op_runners`: against another device both runs, against a
    second module its run and both modules in the reference evaluator; recorded outputs say why
    not, and ``report.judged_by`` what model judged them). Against the reference the program is judged op by op
    (``report.judged_op_by_op``, :mod:`xlasdk.reference._per_op`): one compile with every value
    exposed, each instruction against its own bound on the device's own operand values, valid
    only where that compile's outputs are bit-identical to the original's; its verdict becomes the
    report's.

    Raises
    ------
    UnsupportedOpError
        ``against="reference"`` and an op has no evaluation rule, or the evaluator cannot read a
        value of the program (it never guesses).
    CompareArgumentError
        ``against``, ``bisect`` or ``outputs`` that do not fit the program or each other (recorded
        outputs of another number, shape or element type than the program's...); ``settings``
        given with one of the keywords it holds; an unknown ``device_kind`` or ``precision``.
    ToleranceError
        A tolerance that is not a finite number >= 0 (NaN and infinities included: a NaN tolerance
        matched no element).
    """
    from . import bisect as _bisect  # the bisections evaluate and compare: they sit above those modules

    refuse_both("compare", settings, device=device, rtol=rtol, atol=atol, excess_precision=excess_precision,
                ulps=ulps, progress=progress, xla_flags=xla_flags, device_kind=device_kind, precision=precision,
                outputs=outputs)
    s = settings if settings is not None else CompareSettings(
        device=device, rtol=rtol, atol=atol, excess_precision=excess_precision, ulps=ulps, progress=progress,
        xla_flags=xla_flags, device_kind=device_kind, precision=precision, outputs=outputs)
    from ._per_partition import compare_if_per_partition  # one partition's program: run from global arrays

    if (pp := compare_if_per_partition(computation, args, against, s, bisect=bisect,
                                       find_nonfinite=find_nonfinite)) is not None:
        return pp
    computation = cast("XlaComputation", computation)  # a plan was compared above
    runner = reference_for(against, excess_precision=s.excess_precision)
    if s.outputs is not None and (bisect is not None or find_nonfinite or not runner.evaluates):
        raise CompareArgumentError("compare: outputs= (recorded elsewhere) are compared with the reference alone, "
                                   "without bisect or find_nonfinite (they need the device)")
    if bisect is not None and bisect not in runner.bisect_modes:
        raise CompareArgumentError(
            f"compare: bisect={bisect!r}: expected 'ops' or 'passes', against the reference ('ops' against a "
            "second module or device too)" + ("" if runner.evaluates else f" (not against {runner.source!r})"))
    c = run_against(computation, args, s, runner)
    report, computation = c.report, c.computation  # the program as it ran (at the settings' precision)
    from ._orders import outputs_verdict

    judged = outputs_verdict(report)
    if runner.evaluates and s.outputs is None and (
            judged == "CANNOT JUDGE" or judged == "DIVERGENCE" and bisect == "ops"):
        # on a divergence, --bisect ops gets a second witness: each op on the device's own operands
        from ._per_op import judge_op_by_op  # settles what the outputs' carried bounds cannot

        report.judged_op_by_op = judge_op_by_op(computation, args, c.got, settings=s, options=c.options)
    else:  # against a device, a module or recorded outputs: the op-by-op step where it applies (issue 42)
        from ._per_op_runners import settle

        settle(report, runner, computation, args, c, s)
    if bisect == "ops":
        report.bisect_ops = runner.bisect_ops(_OpsBisector(computation, args, report, s, c.options))
    elif bisect == "passes":
        report.bisect_passes = (_bisect.PassBisection("no divergence") if report.ok else runner.bisect_passes(
            _OpsBisector(computation, args, report, s, c.options), c.want, c.scales))
    if find_nonfinite:
        report.nonfinite = _bisect.find_nonfinite(computation, args, options=c.options, outputs=c.got, settings=s)
    return report


@dataclass
class _OpsBisector:
    """compare's ``bisect="ops"`` strategies (:class:`~xlasdk.reference._runners.OpsBisector`), on the
    comparison already made (``report``, the options the device side compiled with); the runner
    compared against picks one."""

    computation: XlaComputation
    args: Sequence[Any]
    report: CompareReport
    settings: CompareSettings
    options: CompileOptions | None

    def against_evaluator(self) -> Any:
        from . import bisect as _bisect

        r = self.report
        b = _bisect.bisect_ops(self.computation, self.args, options=self.options, diverged=not r.ok,
                               settings=self.settings)
        r.bisect_ops = b
        _second_witness(r)
        return b

    def against_device(self, label: str) -> Any:  # each device's ops are judged by its own model
        from ..runtime import CompileOptions
        from . import bisect as _bisect
        from ._report import STRICT_PRECISION

        r, s = self.report, self.settings
        if r.ok:
            return _bisect.OpsBisection("no divergence")
        strict = CompileOptions(env_option_overrides={
            **({} if s.excess_precision else dict(STRICT_PRECISION)), **s.xla_flags})
        b = _bisect.bisect_ops(self.computation, self.args, options=strict, settings=s)
        b.note = (f"{b.note}; " if b.note else "") + (
            "bisected against the reference evaluator on this device, each op judged by "
            f"{r.device_kind}'s error model ({label}'s values are not needed to find the op that leaves its bound)")
        return b

    def against_module(self, module: XlaComputation) -> Any:
        from . import bisect as _bisect
        from ._against import compare_modules

        if self.report.ok:
            return _bisect.OpsBisection("no divergence")
        return compare_modules(self.computation, module, self.args, self.settings, self.options)


def _second_witness(report: CompareReport) -> None:
    """Where the op-by-op judgment (one compile with the values exposed, bit-identical outputs) names
    another first departing instruction than the bisection's cuts, the bisection's note says so: the
    cuts judge each cut's values by the bounds carried to them, which a deep program can make too
    loose to see a wrong value (a zeroed layer) while an index output further on is compared bit for
    bit."""
    b, per_op = report.bisect_ops, report.judged_op_by_op
    if b is None or per_op is None or per_op.verdict != "DIVERGENCE" or per_op.first is None:
        return
    named = b.culprit.name if b.culprit is not None else None
    if named == per_op.first:
        return
    b.note = (f"{b.note}; " if b.note else "") + (
        f"judged op by op on the device's own operands, {per_op.first} ({per_op.opcode}) departs from its own bound "
        f"first ({per_op.departing} instruction{'s depart' if per_op.departing != 1 else ' departs'}): look there first"
        + (f" (the cuts named {named}, judged by the bounds carried to it)" if named else ""))
