""":func:`~xlasdk.compare` of an optimized per-partition dump that says nothing of its global program
(no before_optimizations module beside it, or no result shardings): the module *as written*, each
partition's outputs judged against the reference evaluator on the module itself, every partition
simulated (its collectives meeting, ``partition-id`` each its own), as ``compare --bisect ops`` of
such a dump judges its cuts (:mod:`._bisect_partitions`). What ``xlasdk reduce --until diverge``
writes of such a dump (``MIN.hlo`` and its stacked per-partition ``MIN.npz``) is judged so.

It finds a partition that computes otherwise than the module says (a miscompiled collective, a
partition's program run wrong); a module whose text is itself wrong (XLA's partitioning) is the
global comparison's to find, with the program's before_optimizations module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .._where import where
from ..errors import CompareArgumentError, ShapeError
from ._precision import device_kind_of
from ._report import STRICT_PRECISION, CompareReport, OutputComparison

if TYPE_CHECKING:
    from ..runtime.per_partition import PerPartitionPlan
    from ._settings import CompareSettings

__all__ = ["compare_as_written"]


def _pieces(plan: PerPartitionPlan, args: Sequence[Any]) -> list[list[np.ndarray[Any, Any]]]:
    """Each partition's arguments: ``args`` split by the parameters' shardings when they are the
    program's global arrays, else taken as each parameter's per-partition arrays stacked on a leading
    axis of ``num_partitions`` entries."""
    n, local = plan.num_partitions, plan.parameter_shapes
    arrays = [np.asarray(a) for a in args]
    if len(arrays) == len(local) and all(a.shape == (n, *s.dimensions()) for a, s in zip(arrays, local, strict=True)):
        return [[np.ascontiguousarray(a[k]) for a in arrays] for k in range(n)]
    want = ", ".join(f"{n}x{s}" for s in local)
    got = ", ".join(f"{a.dtype}{list(a.shape)}" for a in arrays)
    if plan.parameter_source is not None:
        try:
            return [list(p) for p in plan.split(plan.check_global(arrays))]
        except ShapeError as e:
            raise CompareArgumentError(f"compare: {e}; or give each parameter's {n} per-partition arrays stacked on "
                                       f"a leading axis ({want}){where()}") from None
    raise CompareArgumentError(f"compare: {plan.computation.name!r} is an optimized per-partition dump of {n} "
                               f"partitions whose parameters carry no sharding: give each parameter's {n} "
                               f"per-partition arrays stacked on a leading axis ({want}); got {got}{where()}")


def compare_as_written(plan: PerPartitionPlan, args: Sequence[Any], settings: CompareSettings, *,
                       pieces: Sequence[Sequence[Any]] | None = None, bisect_ops: bool = False) -> CompareReport:
    """The report of ``plan``'s module run on its ``num_partitions`` devices, each partition's outputs
    against the reference evaluator on the module itself, every partition simulated (see the
    module's docstring). ``pieces``: each partition's arguments; else ``args`` (global arrays split
    by the parameters' shardings, or per-partition arrays stacked on a leading axis). An output's
    row is its worst partition's; ``judged_by`` names the partitions that depart.

    Raises
    ------
    CompareArgumentError
        Arguments that are neither; ``outputs=`` or ``precision=``.
    """
    from ..runtime import CompileOptions
    from ._bisect_core import _CutFailed
    from ._bisect_partitions import _Partitioned, bisect_ops_per_partition

    comp, n = plan.computation, plan.num_partitions
    if settings.outputs is not None or settings.precision is not None:
        raise CompareArgumentError(f"compare: {comp.name!r} is an optimized per-partition dump judged as written: "
                                   f"outputs= and precision= need its before_optimizations module{where()}")
    rows = [list(p) for p in pieces] if pieces is not None else _pieces(plan, args)
    dev = plan.device_for(settings.device)
    s = replace(settings, device=dev) if settings.device_kind is not None else replace(
        settings, device=dev, device_kind=device_kind_of(dev))
    flags: dict[str, Any] = dict(STRICT_PRECISION) if not s.excess_precision else {k: True for k, _ in STRICT_PRECISION}
    flags.update(s.xla_flags)
    options = CompileOptions(env_option_overrides=flags)
    part = _Partitioned(comp, n, dev, rows, s, options, None)
    outs = [o for o in part.base.graph.outputs if o.shape.is_array()]
    try:
        got = part.run(outs)
    except _CutFailed as e:
        raise CompareArgumentError(f"compare: {comp.name!r} did not compile or run on {n} partitions: {e}{where()}"
                                   ) from None
    outputs: list[OutputComparison] = []
    lines = [f"judged partition by partition: each of the {n} partitions' outputs against the reference evaluator "
             "on the module as written, every partition simulated (collectives meeting, partition-id its own); the "
             "program's before_optimizations module judges the module itself"]
    for i, node in enumerate(outs):
        each = [part.progs[k].check(node, got[k][i], part.progs[k].ref[id(node)]) for k in range(n)]
        departs = [k for k, c in enumerate(each) if not c.ok]
        worst = max(range(n), key=lambda k: (not each[k].ok, each[k].max_scaled, each[k].max_abs))
        row = replace(each[worst], index=i, mismatches=sum(c.mismatches for c in each),
                      nonfinite_mismatches=sum(c.nonfinite_mismatches for c in each))
        outputs.append(row)
        if departs:
            lines.append(f"output {i}: partition{'s' if len(departs) > 1 else ''} {departs} depart "
                         f"(the row is partition {worst}'s)")
    report = CompareReport(comp.name, f"reference evaluator on the module as written, each of {n} partitions "
                                      "simulated", outputs)
    report.device_kind = s.kind.name
    report.judged_by = lines
    if bisect_ops:
        report.bisect_ops = bisect_ops_per_partition(plan, rows, s, options)
    return report
