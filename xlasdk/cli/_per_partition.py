"""``xlasdk run`` of an optimized per-partition dump (XLA's ``*after_optimizations*`` module of a program
its SPMD partitioner split over several devices: one partition's program).

The same ``--inputs`` file serves the before- and the after-optimizations files: the program's
*global* arrays are split by each parameter's sharding (the ``sharding={...}`` the dump keeps on
its parameters; XLA of jaxlib 0.12 keeps none, and they are then the before file's, below), as
JAX splits its inputs, each partition runs the program on its own pieces
(``Executable.execute_replicated``), and the outputs are put together by the result shardings,
which the optimized module does not keep: they are read from the ``before_optimizations`` file XLA
wrote beside it (``module_0000.jit_f.before_optimizations.txt`` for
``module_0000.jit_f.cpu_after_optimizations.txt``). Without it, or with per-partition inputs, each
output is written per partition (a leading axis of one entry per partition). Shardings in every
notation XLA writes are read (``{devices=[4,1]<=[4]}``, ``{mesh['x'=4], [{'x'}, {}]}``, Shardy's).

Per-partition inputs stay possible: one partition's array (every partition gets it), or the
arrays of every partition stacked on a leading axis (partition ``k`` gets entry ``k``).

The plan (shardings, splitting, putting together) is the library's
(:class:`xlasdk.runtime.per_partition.PerPartitionPlan`); this module reads the input files and
writes what the command prints.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import IO, Any

import numpy as np

from xlasdk.errors import FormatError, ShapeError, XlaRuntimeError
from xlasdk.runtime.per_partition import OWN_PARAMETER_SHARDINGS, PerPartitionPlan, per_partition_count

from ._arrays import _describe_array, _gather_inputs, _npz_entries, _summary
from ._common import EXIT_OK, UsageError, _human_time, _npz_path, _stage


class _ShapesOf:
    """What ``_gather_inputs`` reads of a program shape: names and shapes."""

    def __init__(self, names: Any, shapes: Any) -> None:
        self._names, self._shapes = list(names), list(shapes)

    def parameter_names(self) -> list[str]:
        return self._names

    def parameter_shapes(self) -> list[Any]:
        return self._shapes


def per_partition_devices_of(comp: Any) -> int | None:
    """The device count of ``comp`` when it is an optimized per-partition dump, else None."""
    return per_partition_count(comp)


def plan_for(path: str, comp: Any, devices: int, before: str | None = None) -> PerPartitionPlan:
    """The library's plan (:class:`~xlasdk.runtime.per_partition.PerPartitionPlan`) of the
    per-partition program ``comp`` loaded from ``path``: the before_optimizations file ``before``
    (given) or those beside ``path`` say what the dump does not; a sharding that cannot be read
    is a usage error naming the file."""
    try:
        return PerPartitionPlan.of(comp, path=path, before=before, num_partitions=devices)
    except FormatError as e:
        raise UsageError(f"--against {before}: cannot load it as a module: {e}") from None
    except ShapeError as e:
        raise UsageError(str(e)) from None


def put_together(plan: PerPartitionPlan, per_device: list[list[np.ndarray[Any, Any]]]) -> list[np.ndarray[Any, Any]]:
    """:meth:`PerPartitionPlan.put_together`, a disagreement of the partitions a usage error."""
    try:
        return plan.put_together(per_device)
    except XlaRuntimeError as e:
        raise UsageError(str(e)) from None


def gather(args: argparse.Namespace, comp: Any, plan: PerPartitionPlan, seed: int | None = None
           ) -> tuple[list[list[np.ndarray[Any, Any]]], str]:
    """(each partition's arguments, ``"global"`` or ``"per-partition"``) from the inputs given."""
    first: UsageError | None = None
    if plan.parameter_source is not None:  # the parameters' shardings are known: global arrays first
        try:
            values = _gather_inputs(args, _ShapesOf(plan.parameter_names, plan.global_parameter_shapes), None, comp,
                                    seed=seed)
        except UsageError as e:
            if "must be" not in str(e):
                raise
            first = e
        else:
            return plan.split(values), "global"
    import xlasdk as xs

    stacked = [xs.Shape.array_shape(s.numpy_dtype(), (plan.num_partitions, *s.dimensions()))
               for s in plan.parameter_shapes]
    for shapes, each in ((plan.parameter_shapes, False), (stacked, True)):
        try:
            values = _gather_inputs(args, _ShapesOf(plan.parameter_names, shapes), None, comp, seed=seed)
        except UsageError as e:
            if "must be" not in str(e):
                raise
            first = first or e
            continue
        return [[np.ascontiguousarray(v[k]) if each else v for v in values] for k in range(plan.num_partitions)], \
            "per-partition"
    local = ", ".join(str(s) for s in plan.parameter_shapes)
    per_partition = (f"per-partition arrays: one partition's ({local}; every partition gets it) "
                     f"or {plan.num_partitions} of them stacked on a leading axis")
    if plan.parameter_source is None:
        raise UsageError(
            f"{first}; {comp.name!r} is an optimized per-partition dump (one partition's program of "
            f"{plan.num_partitions}) "
            "whose parameters carry no sharding (XLA of jaxlib 0.12 writes none into an optimized module) and no "
            "before_optimizations file beside it says how the program's global arrays are split: give "
            f"{per_partition}, or put the program's before_optimizations file beside it (module.before_optimizations"
            ".txt for module.cpu_after_optimizations.txt) to give its global arrays") from None
    want = ", ".join(f"{n}: {g}" for n, g in zip(plan.parameter_names, plan.global_parameter_shapes, strict=True))
    raise UsageError(
        f"{first}; {comp.name!r} is an optimized per-partition dump (one partition's program of "
        f"{plan.num_partitions}): "
        f"give the program's global arrays ({want}), as for its before_optimizations file (split by "
        f"{plan.parameter_source}), or {per_partition}") from None


def run_per_partition(args: argparse.Namespace, comp: Any, devices: int, out: IO[str], *,
                      expected_of: Callable[..., tuple[list[Any], str]], report: Callable[..., bool],
                      device_of: Callable[[argparse.Namespace, int], Any], exit_divergence: int) -> int:
    """``xlasdk run`` of an optimized per-partition dump (see the module's docstring). ``cli._run``,
    which imports this module, hands over its ``--expect`` steps and device choice."""
    from xlasdk._atomic import atomic_write

    EXIT_DIVERGENCE, _expect_report, _expected, _spmd_device = (  # noqa: N806
        exit_divergence, report, expected_of, device_of)

    if args.record is not None:
        raise UsageError(f"--record: {args.file} is an optimized per-partition dump; record its "
                         "before_optimizations file instead")
    if (args.replicas or 1) != 1 or (args.partitions is not None and args.partitions != devices):
        raise UsageError(f"{args.file} is an optimized per-partition dump of {devices} partitions: it runs on "
                         f"{devices} partitions of 1 replica")
    plan = plan_for(args.file, comp, devices)
    per_device, mode = gather(args, comp, plan)
    n_out = plan.num_results
    expected = _expected(args, None, n_out) if args.expect is not None else None
    dev = _spmd_device(args, devices)
    _stage("compiling")
    t0 = time.perf_counter()
    exe = plan.compile(dev)
    compile_s = time.perf_counter() - t0
    _stage("running")
    gathered = mode == "global" and plan.result_shardings is not None

    def call(per_dev: list[list[np.ndarray[Any, Any]]]) -> list[np.ndarray[Any, Any]]:
        host = plan.execute(exe, per_dev)
        if gathered:
            return put_together(plan, host)
        return [np.stack([h[i] for h in host]) for i in range(n_out)]

    host = call(per_device)
    npz = None
    if args.output is not None:
        _stage("writing")
        npz = _npz_path(args.output)
        entries = _npz_entries(host)
        savez: Any = np.savez
        try:
            atomic_write(npz, lambda f: savez(f, **entries))
        except OSError as e:
            raise UsageError(f"--output {args.output}: cannot write: {e.strerror or e}") from None
    how = ("global inputs split by the parameters' shardings" if mode == "global" else "per-partition inputs")
    if mode == "global" and plan.parameter_source != OWN_PARAMETER_SHARDINGS:
        how += f" ({plan.parameter_source})"
    out.write(f"{comp.name} (an optimized per-partition dump) on {devices} {dev.platform} devices (1 replica x "
              f"{devices} partitions), each partition on its own arguments: {len(plan.parameter_names)} input(s), "
              f"{how}; {n_out} output(s); compiled in {_human_time(compile_s)}\n")
    from xlasdk.formats.tpu_meaning import tpu_note

    if (note := tpu_note(comp)) is not None:
        out.write(f"  ran {note}\n")
    if gathered:
        out.write(f"  outputs put together by {plan.result_source}\n")
    else:
        why = "the inputs were per-partition" if mode != "global" else plan.result_source
        out.write(f"  outputs per partition (a leading axis of {devices}): {why}\n")
    for i, a in enumerate(host):
        shardings = plan.result_shardings
        sharding = f"  sharding {shardings[i]}" if gathered and shardings is not None else ""
        out.write(f"  output {i}: {_describe_array(a):<16} {_summary(a)}{sharding}\n")
    ok = _expect_report(args, comp, host, expected, out) if expected is not None else True
    for it in range(1, args.iterations):
        per_device, _ = gather(args, comp, plan, seed=args.seed + it)
        host = call(per_device)
        out.write(f"iteration {it} (seed {args.seed + it}):\n")
        for i, a in enumerate(host):
            out.write(f"  output {i}: {_describe_array(a):<16} {_summary(a)}\n")
        if expected is not None:
            ok = _expect_report(args, comp, host, expected, out) and ok
    if args.repeat > 1:
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            for r in exe.execute_replicated(per_device):
                for o in r if isinstance(r, (tuple, list)) else (r,):
                    o.block_until_ready()
            times.append(time.perf_counter() - t)
        out.write(f"  time per run over {args.repeat} runs: min {_human_time(min(times))}, "
                  f"median {_human_time(statistics.median(times))}\n")
    if npz is not None:
        out.write(f"  wrote {npz}\n")
    return EXIT_OK if ok else EXIT_DIVERGENCE
