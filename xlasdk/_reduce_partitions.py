"""``xlasdk reduce`` of an optimized per-partition dump (one partition's program of an SPMD program
of N partitions, :mod:`xlasdk.runtime.per_partition`): ``until="diverge"`` with every candidate run
on all N partitions and judged, partition by partition, against the reference evaluator on the
candidate itself, every partition simulated (:class:`DivergePartitions`). The search carries each
parameter's N per-partition arrays stacked on a leading axis (the values an instruction replaced
by a parameter takes are each partition's, from the simulated partitions; a constant replaces an
instruction only where every partition has the same value), split from the program's global
arrays by the plan. Every partition runs the same candidate, so a cut keeps a collective whole or
drops it in every partition alike: never a different program per partition. Conditions that
compile the module for one device (``"crash"``, ``"compile-error"``) are refused (a per-partition
program compiled for one device is another program), as is ``against=`` (``compare(..., against=GOOD,
bisect="ops")`` localizes the difference per partition)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ._reduce_condition import Condition
from ._reduce_graph import _arguments
from ._where import where
from .errors import XlaSdkError

if TYPE_CHECKING:
    from .runtime.device import Device
    from .runtime.per_partition import PerPartitionPlan

__all__ = ["DivergePartitions", "partition_arguments", "plan_of", "refuse_against"]


class DivergePartitions(Condition):
    """``"diverge"`` of an optimized per-partition dump (one partition's program of an SPMD program
    of ``n`` partitions): the candidate compiled for ``1 x n`` partitions and run on ``n`` devices,
    each partition's outputs judged against the reference evaluator on the candidate itself, every
    partition simulated (its collectives meeting, ``partition-id`` each its own), as ``compare
    --bisect ops`` judges a per-partition dump's cuts
    (:mod:`xlasdk.reference._bisect_partitions`). Every partition runs the same candidate, so a cut
    keeps each collective whole or drops it in every partition alike. The arguments are each
    parameter's ``n`` per-partition arrays stacked on a leading axis."""

    needs_arguments = True

    def __init__(self, n: int, device: Device, rtol: float | None, atol: float | None, excess_precision: bool
                 ) -> None:
        from .reference._report import STRICT_PRECISION
        from .reference._settings import CompareSettings
        from .runtime import CompileOptions

        self.n, self.device = n, device
        self.name = f"diverge (each of {n} partitions)"
        self.settings = CompareSettings(device=device, rtol=rtol, atol=atol, excess_precision=excess_precision)
        flags = dict(STRICT_PRECISION) if not excess_precision else {k: True for k, _ in STRICT_PRECISION}
        self.options = CompileOptions(env_option_overrides=flags)

    def holds(self, text: str, args: list[np.ndarray[Any, Any]] | None, timeout: float) -> tuple[bool, str]:
        from .program.computation import XlaComputation
        from .reference._bisect_core import _CutFailed
        from .reference._bisect_partitions import _Partitioned

        assert args is not None
        try:
            comp = XlaComputation.from_hlo_text(text)
        except XlaSdkError as e:
            return False, f"loading: {type(e).__name__}: {e}"
        pieces = [[np.ascontiguousarray(a[k]) for a in args] for k in range(self.n)]
        try:
            p = _Partitioned(comp, self.n, self.device, pieces, self.settings, self.options, None)
            outs = [o for o in p.base.graph.outputs if o.shape.is_array()]
            ks = p.diverging(outs, p.run(outs)) if outs else []
        except (XlaSdkError, _CutFailed) as e:  # cannot tell: never counted as a divergence
            return False, f"no verdict: {type(e).__name__}: {' '.join(str(e).split())[:300]}"
        except Exception as e:  # noqa: BLE001 - a rule that fails on the cut's values: no verdict, never kept
            return False, f"no verdict: the reference failed ({type(e).__name__}: {' '.join(str(e).split())[:300]})"
        if not ks:
            return False, (f"nothing to reduce: every partition of {self.n} computes what the reference gives for the "
                           "module as written (a change written into the module's text is not a divergence here: "
                           "compare it with the program it was compiled from, or with a good per-partition module "
                           "by compare BAD --against GOOD --bisect ops)")
        return True, f"partitions {ks} diverge from the reference"



def plan_of(computation: Any, path: str | None, until: str | None, script: str | None) -> PerPartitionPlan | None:
    """The per-partition plan of ``computation`` when it is an optimized per-partition dump (or
    its plan), else None; refused where the condition would judge it as one device's program."""
    from .program.computation import XlaComputation
    from .runtime.per_partition import PerPartitionPlan, per_partition_count

    if isinstance(computation, PerPartitionPlan):
        plan = computation
    elif isinstance(computation, XlaComputation) and per_partition_count(computation) is not None:
        plan = PerPartitionPlan.of(computation, path=path)
    else:
        return None
    if script is None and until != "diverge":
        raise XlaSdkError(
            f"reduce: until={until!r}: {plan.computation.name!r} is an optimized per-partition dump (one partition's "
            f"program of {plan.num_partitions}), which compiled for one device is another program: reduce it with "
            f"until='diverge' (each cut run on all {plan.num_partitions} partitions) or a script=, localize a "
            f"divergence with compare(..., bisect='ops'){where()}")
    return plan


def partition_arguments(plan: PerPartitionPlan, arguments: Sequence[Any] | None, seed: int
                         ) -> list[np.ndarray[Any, Any]]:
    """Each parameter's per-partition arrays stacked on a leading axis (what the search of a
    per-partition dump carries): from the program's global arrays (split by the plan), from
    arrays already stacked so, or (none given) from :func:`xlasdk.random_inputs` of ``seed`` (the
    before_optimizations program's, split, where the plan has one; else the per-partition module's,
    the same in every partition)."""
    n = plan.num_partitions
    if arguments is None:
        from .inputs import random_inputs

        before = plan.before
        if plan.parameter_source is not None and before is not None and [
                str(s) for s in before.program_shape().parameter_shapes()] == [
                str(s) for s in plan.global_parameter_shapes]:
            rows = plan.split(random_inputs(before, seed))
        else:
            one = random_inputs(plan.computation, seed)
            rows = [one for _ in range(n)]
        return [np.stack([np.asarray(r[i]) for r in rows]) for i in range(len(plan.parameter_names))]
    given = [np.asarray(a) for a in arguments]
    local = [tuple(s.dimensions()) if s.is_array() else () for s in plan.parameter_shapes]
    if len(given) == len(local) and all(a.shape == (n, *d) for a, d in zip(given, local, strict=True)):
        _arguments(plan.computation, [a[0] for a in given])  # the element types
        return given
    try:
        rows = plan.split(given)
    except XlaSdkError as e:
        want = ", ".join(f"{nm}: {s}" for nm, s in zip(plan.parameter_names, plan.global_parameter_shapes, strict=True))
        raise XlaSdkError(
            f"reduce: {' '.join(str(e).split())}; {plan.computation.name!r} is an optimized per-partition dump (one "
            f"partition's program of {n}): give the program's global arrays ({want}) or each parameter's {n} "
            f"per-partition arrays stacked on a leading axis{where()}") from None
    return [np.stack([np.asarray(r[i]) for r in rows]) for i in range(len(local))]


def refuse_against(bad: Any, good: Any) -> None:
    """Refuse ``reduce(BAD, against=GOOD)`` when either is an optimized per-partition dump (the
    repro search runs one device); the message says what works."""
    from .runtime.per_partition import per_partition_count

    for what, comp in (("the module", bad), ("against", good)):
        n = per_partition_count(comp)
        if n is not None:
            raise XlaSdkError(
                f"reduce: against=: {what} {comp.name!r} is an optimized per-partition dump (one partition's program "
                f"of {n}); its difference is localized per partition by compare(BAD, global_args, against=GOOD, "
                f"bisect='ops') (xlasdk compare BAD --against GOOD --bisect ops), and reduce(BAD, 'diverge') runs "
                f"each cut on all {n} partitions{where()}")
