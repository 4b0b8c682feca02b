""":func:`~xlasdk.compare` of an optimized per-partition dump (one partition's program of an SPMD
program, :mod:`xlasdk.runtime.per_partition`), as ``xlasdk compare`` does it.

The program's global inputs are split by the parameters' shardings, each partition runs the
optimized module on its own pieces and the outputs are put together by the results' shardings.
What they are compared with is the program's *global* meaning:

- ``against="reference"``: the reference evaluator on the plan's before_optimizations module (the
  per-partition module's collectives are not evaluated per partition);
- a second :class:`~xlasdk.XlaComputation` (the before_optimizations module): run on the global
  inputs on one device; it is the plan's before module too (its shardings split the inputs);
- a list of arrays: the program's global outputs recorded elsewhere.

Judged by the error models of the single-device path: the device's, the one ``device_kind`` names
and, for a TPU-optimized module's CPU meaning, the TPU's (its kept bf16 converts are the TPU's
DEFAULT precision).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import CompareArgumentError
from ..runtime.per_partition import PerPartitionPlan
from ._precision import device_kind_of
from ._report import STRICT_PRECISION, CompareReport, compare_one
from ._runners import (
    GivenOutputs,
    ReferenceEvaluator,
    SecondModule,
    both_models,
    evaluate_as,
    given_outputs,
    module_kinds,
    run_on,
)

if TYPE_CHECKING:
    from ..program.computation import XlaComputation
    from ._runners import Reference
    from ._settings import CompareSettings

__all__ = ["compare_per_partition"]


def compare_per_partition(plan: PerPartitionPlan, args: Sequence[Any], runner: Reference, settings: CompareSettings,
                          *, pieces: Sequence[Sequence[Any]] | None = None) -> CompareReport:
    """The report of ``plan``'s program run from its global inputs ``args`` against ``runner`` (see
    the module's docstring). ``pieces``: each partition's arguments as given (default: ``args``
    split by the plan); ``args`` are then their global arrays (:meth:`PerPartitionPlan.join`).

    Raises
    ------
    CompareArgumentError
        What cannot be judged so: against another device, recorded ``outputs=``, ``precision=``;
        the reference without a before_optimizations module; a module that is not the program's
        before_optimizations module; outputs of another number, shape or element type.
    UnsupportedOpError
        The reference evaluator cannot evaluate the before_optimizations module.
    ShapeError, DTypeError
        Global inputs that do not fit, or shardings that are unknown.
    """
    comp, n = plan.computation, plan.num_partitions
    what = f"{comp.name!r} is an optimized per-partition dump ({n} partitions)"
    if settings.outputs is not None:
        raise CompareArgumentError(f"compare: outputs=: {what}; compare its before_optimizations module with "
                                   "outputs= (the global outputs), or give them as against=[...]")
    if settings.precision is not None:
        raise CompareArgumentError(f"compare: precision=: {what}; its precision is what XLA optimized into it "
                                   "(give precision= with the before_optimizations module)")
    if not isinstance(runner, (ReferenceEvaluator, SecondModule, GivenOutputs)):
        raise CompareArgumentError(f"compare: against={runner.label}: {what}; compare it against the reference, its "
                                   "before_optimizations module or recorded global outputs")
    n_out = plan.num_results
    before: XlaComputation | None = None
    if isinstance(runner, SecondModule):
        before = runner.module
        before_label = f"module {before.name!r}"
    elif isinstance(runner, ReferenceEvaluator):
        if plan.before is None:
            raise CompareArgumentError(
                f"compare: against='reference': {what}; the reference evaluates the program's global module, and "
                "the plan has no before_optimizations module: give it (PerPartitionPlan.of(comp, before=...), or "
                "against= the module)")
        before = plan.before
        before_label = plan.before_path if plan.before_path is not None else f"module {before.name!r}"
    if before is not None:
        bps = before.program_shape()
        n_before = len(_leaves(bps.result_shape()))
        dims = [tuple(s.dimensions()) for s in plan.global_parameter_shapes]
        if [tuple(s.dimensions()) for s in bps.parameter_shapes()] != dims or n_before != n_out:
            raise CompareArgumentError(
                f"compare: {before_label}: takes {', '.join(str(s) for s in bps.parameter_shapes())} and gives "
                f"{n_before} output(s); {comp.name!r}'s global program takes "
                f"{', '.join(str(s) for s in plan.global_parameter_shapes)} and gives {n_out}: not the "
                "before_optimizations module of this dump")
    if plan.result_shardings is None:
        raise CompareArgumentError(f"compare: {comp.name!r}: {plan.result_source}; the outputs cannot be put together "
                                   "into the global outputs compare judges: give the before_optimizations module "
                                   "(against=, or PerPartitionPlan.of(comp, before=...))")
    global_ins = plan.check_global(args)
    per_device = [list(p) for p in pieces] if pieces is not None else plan.split(global_ins)
    dev = plan.device_for(settings.device)
    kind = settings.device_kind if settings.device_kind is not None else device_kind_of(dev)
    flags: dict[str, Any] = {}
    if isinstance(runner, ReferenceEvaluator):
        flags = dict(STRICT_PRECISION) if not settings.excess_precision else {k: True for k, _ in STRICT_PRECISION}
    flags.update(settings.xla_flags)
    from ..runtime import CompileOptions

    options = CompileOptions(env_option_overrides=flags or None)
    exe = plan.compile(dev, options=options)
    got = plan.put_together(plan.execute(exe, per_device))
    if isinstance(runner, ReferenceEvaluator):
        assert before is not None
        want = [np.asarray(w) for w in evaluate_as(before, global_ins, kind, None, emulated=False)[0]]
        named = os.path.basename(plan.before_path) if plan.before_path is not None else repr(before.name)
        label = (f"reference evaluator on {named}'s global program (XLA "
                 f"{'with' if settings.excess_precision else 'without'} excess precision)")
    elif isinstance(runner, SecondModule):
        assert before is not None
        want = run_on(before, global_ins, dev, CompileOptions(env_option_overrides=flags or None))
        label = f"module {before.name!r} on global inputs on one device"
    else:
        label = runner.label
        want = given_outputs(got, runner.outputs, label)
    if len(want) != n_out:
        raise CompareArgumentError(f"compare: {comp.name!r}: the program has {n_out} outputs, {label} gave {len(want)}")
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.shape != w.shape or g.dtype != w.dtype:
            raise CompareArgumentError(f"compare: {comp.name!r}: output {i} put together is {g.dtype}{list(g.shape)}, "
                                       f"{label} gives {w.dtype}{list(w.shape)}")
    scales: list[Any] = [0.0] * n_out
    if before is not None:  # the device's (and named) model, and the TPU's for a TPU-optimized module
        # (the default tolerances where the reference cannot read the before module, as on one device)
        scales = both_models(before, global_ins, module_kinds(comp, kind, dev), None, n_out)
    s = settings
    report = CompareReport(comp.name, label, [compare_one(i, g, w, s.rtol, s.atol, sc, s.ulps)
                                              for i, (g, w, sc) in enumerate(zip(got, want, scales, strict=True))])
    report.device_kind = kind.name
    return report


def _leaves(shape: Any) -> list[Any]:
    return [x for e in shape.tuple_shapes() for x in _leaves(e)] if shape.is_tuple() else [shape]


def compare_if_per_partition(computation: XlaComputation | PerPartitionPlan, args: Sequence[Any], against: Any,
                             settings: CompareSettings, *, bisect: str | None,
                             find_nonfinite: bool) -> CompareReport | None:
    """:func:`~xlasdk.compare`'s report when ``computation`` is an optimized per-partition dump (or its
    :class:`~xlasdk.runtime.per_partition.PerPartitionPlan`), else None (compare's own path). A second
    module compared against is the plan's before_optimizations module too.

    Raises
    ------
    CompareArgumentError
        ``bisect`` or ``find_nonfinite`` (bisect the before_optimizations module), and as
        :func:`compare_per_partition`.
    """
    from ..runtime.per_partition import per_partition_count
    from ._runners import reference_for

    if not isinstance(computation, PerPartitionPlan) and per_partition_count(computation) is None:
        return None
    runner = reference_for(against, excess_precision=settings.excess_precision)
    plan = computation if isinstance(computation, PerPartitionPlan) else PerPartitionPlan.of(
        computation, before=runner.module if isinstance(runner, SecondModule) else None)
    if bisect is not None or find_nonfinite:
        what = f"bisect={bisect!r}" if bisect is not None else "find_nonfinite=True"
        raise CompareArgumentError(
            f"compare: {what}: {plan.computation.name!r} is an optimized per-partition dump ({plan.num_partitions} "
            f"partitions); bisect its before_optimizations module (compare(before, global_args, {what}))")
    return compare_per_partition(plan, args, runner, settings)
