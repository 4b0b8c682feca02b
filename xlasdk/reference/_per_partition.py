""":func:`~xlasdk.compare` of an optimized per-partition dump (one partition's program of an SPMD
program, :mod:`xlasdk.runtime.per_partition`), as ``xlasdk compare`` does it.

The program's global inputs are split by the parameters' shardings, each partition runs the
optimized module on its own pieces and the outputs are put together by the results' shardings.
What they are compared with is the program's *global* meaning:

- ``against="reference"``: the reference evaluator on the plan's before_optimizations module (the
  per-partition module's collectives are not evaluated per partition);
- a second :class:`~xlasdk.XlaComputation` (the before_optimizations module): run on the global
  inputs on one device; it is the plan's before module too (its shardings split the inputs);
- another per-partition module of the same program (an optimized dump of as many partitions
  taking and giving the same pieces, one known to be right): run per partition on the same pieces,
  its outputs put together by the same plan;
- a list of arrays: the program's global outputs recorded elsewhere.

Judged by the error models of the single-device path: the device's, the one ``device_kind`` names
and, for a TPU-optimized module's CPU meaning, the TPU's (its kept bf16 converts are the TPU's
DEFAULT precision).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import CompareArgumentError, XlaRuntimeError
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
                          *, pieces: Sequence[Sequence[Any]] | None = None, bisect_ops: bool = False) -> CompareReport:
    """The report of ``plan``'s program run from its global inputs ``args`` against ``runner`` (see
    the module's docstring). ``pieces``: each partition's arguments as given (default: ``args``
    split by the plan); ``args`` are then their global arrays (:meth:`PerPartitionPlan.join`).
    ``bisect_ops``: the report's ``bisect_ops`` is the first instruction of the per-partition
    module that introduces a divergence, and in which partitions
    (:func:`~xlasdk.reference._bisect_partitions.bisect_ops_per_partition`: against the reference
    evaluator on the module itself, every partition simulated); against the reference only.

    Raises
    ------
    CompareArgumentError
        What cannot be judged so: against another device, recorded ``outputs=``, ``precision=``;
        the reference without a before_optimizations module; a module that is not the program's
        before_optimizations module; outputs of another number, shape or element type;
        ``bisect_ops`` against anything but the reference.
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
    if isinstance(runner, ReferenceEvaluator) and (plan.before is None or plan.result_shardings is None):
        from ._per_partition_written import compare_as_written  # the module as written: no global program

        return compare_as_written(plan, args, settings, pieces=pieces, bisect_ops=bisect_ops)
    good = _good_module(runner, plan, what)
    if bisect_ops and not isinstance(runner, ReferenceEvaluator) and good is None:
        raise CompareArgumentError(f"compare: bisect='ops' against={runner.label}: {what}; its ops are bisected "
                                   "against the reference evaluator on the module itself (against='reference') or on "
                                   "a per-partition module of the same program that computes it right, every "
                                   "partition simulated")
    n_out = plan.num_results
    before: XlaComputation | None = None
    if good is not None:
        before = plan.before  # its error model, when the plan has one
        before_label = "its before_optimizations module"
    elif isinstance(runner, SecondModule):
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
    from ..runtime import compile as _compile

    options = CompileOptions(env_option_overrides=flags or None)
    exe = plan.compile(dev, options=options)
    rows = plan.execute(exe, per_device)
    disagree = ""
    try:
        got: list[np.ndarray[Any, Any]] | None = plan.put_together(rows)
    except XlaRuntimeError as e:  # the partitions disagree on a tile: judged by the piece farthest from the expected
        got, disagree = None, str(e).split(": ", 1)[-1].split("; the outputs cannot")[0]
    if isinstance(runner, ReferenceEvaluator):
        assert before is not None
        want = [np.asarray(w) for w in evaluate_as(before, global_ins, kind, None, emulated=False)[0]]
        named = os.path.basename(plan.before_path) if plan.before_path is not None else repr(before.name)
        label = (f"reference evaluator on {named}'s global program (XLA "
                 f"{'with' if settings.excess_precision else 'without'} excess precision)")
    elif good is not None:
        good_exe = _compile(good, dev, options=CompileOptions(num_replicas=1, num_partitions=n,
                                                                  env_option_overrides=flags or None))
        want = plan.put_together(plan.execute(good_exe, per_device))
        label = f"module {good.name!r} run per partition on the same pieces"
    elif isinstance(runner, SecondModule):
        assert before is not None
        want = run_on(before, global_ins, dev, CompileOptions(env_option_overrides=flags or None))
        label = f"module {before.name!r} on global inputs on one device"
    else:
        label = runner.label
        shapes = got if got is not None else [np.zeros(d, r.dtype) for d, r in zip(
            plan.global_result_dims or (), rows[0], strict=False)]  # the outputs' global shapes and types
        want = given_outputs(shapes, runner.outputs, label)
    if got is None:
        if len(want) != n_out:
            raise CompareArgumentError(f"compare: {comp.name!r}: the program has {n_out} outputs, {label} gave "
                                       f"{len(want)}")
        got = _farthest_pieces(plan, rows, want)
        label += (f"; the partitions disagree ({disagree}): each tile is judged by the partition's piece farthest from "
                  "it")
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
    if bisect_ops:
        from ._bisect_partitions import bisect_ops_per_partition

        found = bisect_ops_per_partition(plan, per_device, replace(settings, device=dev), options, good=good)
        if found.status == "no divergence" and not report.ok and good is None:
            found.note = (f"every partition computes what the per-partition module says (the reference evaluator on "
                          f"it, {n} partitions simulated): the divergence from the global program is in the module "
                          "itself (XLA's partitioning or optimization made it); bisect the before_optimizations "
                          "module (bisect='passes' on it names the XLA passes)")
        report.bisect_ops = found
    return report


def _farthest_pieces(plan: PerPartitionPlan, rows: list[list[np.ndarray[Any, Any]]],
                     want: Sequence[np.ndarray[Any, Any]]) -> list[np.ndarray[Any, Any]]:
    """The outputs put together from the partitions' pieces where partitions that hold one tile
    disagree: each tile the piece farthest from ``want``'s (a disagreement is never hidden by the
    piece that happens to be right)."""
    assert plan.result_shardings is not None and plan.global_result_dims is not None
    outs = []
    for i, (sh, dims) in enumerate(zip(plan.result_shardings, plan.global_result_dims, strict=True)):
        w = np.asarray(want[i])
        out = np.zeros(dims, rows[0][i].dtype)
        far: dict[tuple[int, ...], float] = {}
        for k, sl in enumerate(sh.shard_slices(dims, plan.num_partitions)):
            if sl is None:
                continue
            piece = rows[k][i][tuple(slice(0, x.stop - x.start) for x in sl)]
            d = _distance(piece, w[sl]) if w.shape == tuple(dims) else 0.0
            key = tuple(x.start for x in sl)
            if key not in far or d > far[key]:
                far[key] = d
                out[sl] = piece
        outs.append(out)
    return outs


def _distance(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> float:
    """How far ``a`` is from ``b``: -1 for the same bytes, else the largest absolute difference
    (inf where one is NaN and the other not, or the types do not subtract)."""
    if a.dtype == b.dtype and a.tobytes() == b.tobytes():
        return -1.0
    try:
        diff = np.abs(a.astype(np.complex128) - b.astype(np.complex128)) if a.dtype.kind == "c" else np.abs(
            a.astype(np.float64) - b.astype(np.float64))
    except (TypeError, ValueError):
        return float("inf")
    return float(np.max(np.where(np.isnan(diff), np.inf, diff), initial=0.0))


def _good_module(runner: Reference, plan: PerPartitionPlan, what: str) -> XlaComputation | None:
    """The second module compared against when it is a per-partition module of the same program
    (another optimized dump of as many partitions, taking and giving the same pieces), else None.

    Raises
    ------
    CompareArgumentError
        A per-partition module of another partition count, or of other pieces.
    """
    from ..runtime.per_partition import per_partition_count

    if not isinstance(runner, SecondModule):
        return None
    good = runner.module
    count = per_partition_count(good)
    if count is None:
        return None
    mine, theirs = plan.computation.program_shape(), good.program_shape()
    if count != plan.num_partitions or [str(s) for s in mine.parameter_shapes()] != [
            str(s) for s in theirs.parameter_shapes()] or str(mine.result_shape()) != str(theirs.result_shape()):
        raise CompareArgumentError(
            f"compare: module {good.name!r} is one partition's program of {count} taking "
            f"{', '.join(str(s) for s in theirs.parameter_shapes())}; {what} takes "
            f"{', '.join(str(s) for s in mine.parameter_shapes())}: compare it against a per-partition module of as "
            "many partitions and the same pieces, or against its before_optimizations module")
    return good


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
        ``bisect="passes"`` or ``find_nonfinite`` (bisect the before_optimizations module), and as
        :func:`compare_per_partition` (``bisect="ops"``: its ``bisect_ops``).
    """
    from ..runtime.per_partition import per_partition_count
    from ._runners import reference_for

    if not isinstance(computation, PerPartitionPlan) and per_partition_count(computation) is None:
        return None
    runner = reference_for(against, excess_precision=settings.excess_precision)
    second = runner.module if isinstance(runner, SecondModule) else None
    if second is not None and per_partition_count(second) is not None:
        second = None  # another per-partition module of the program, compared against piece by piece
    plan = computation if isinstance(computation, PerPartitionPlan) else PerPartitionPlan.of(computation, before=second)
    if bisect not in (None, "ops") or find_nonfinite:
        what = f"bisect={bisect!r}" if bisect is not None else "find_nonfinite=True"
        raise CompareArgumentError(
            f"compare: {what}: {plan.computation.name!r} is an optimized per-partition dump ({plan.num_partitions} "
            f"partitions); bisect its before_optimizations module (compare(before, global_args, {what})), or its "
            "ops with bisect='ops'")
    return compare_per_partition(plan, args, runner, settings, bisect_ops=bisect == "ops")
