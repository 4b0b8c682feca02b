"""``xlasdk compare`` of an optimized per-partition dump (one partition's program of an SPMD program,
see :mod:`xlasdk.cli._per_partition`).

The program's global inputs are split by the parameters' shardings, each partition runs the
optimized module on its own pieces and the outputs are put together by the result shardings (as
``xlasdk run`` does). What they are compared with is the program's *global* meaning:

- ``--against reference`` (the default): the reference evaluator on the before-optimizations file's
  global program (the per-partition module's collectives are not evaluated per partition);
- ``--against BEFORE.hlo``: that module run on the global inputs on one device;
- ``--against OUT.npz``: the program's global outputs recorded elsewhere;
- ``--against GOOD.hlo`` where GOOD is a per-partition module of the same program (one that
  computes it right): run per partition on the same pieces.

``--bisect ops`` bisects the per-partition module itself: the reference evaluator runs it (or, with
``--against GOOD.hlo``, the good per-partition module, instructions paired by name) on every
partition at once (collectives simulated), each cut runs on every partition's device, and the
report names the first instruction that introduces a divergence and the partitions in which it
departs (:mod:`xlasdk.reference._bisect_partitions`).

Judged by the error models as the single-device path: the device's, the one ``--device-kind`` names
and, for a TPU-optimized module's CPU meaning, the TPU's (its kept bf16 converts are the TPU's DEFAULT
precision). Per-partition inputs are put together into the global arrays by the same shardings
(pieces of a replicated parameter must agree).

The comparison is the library's (``xs.compare`` of a per-partition dump,
:func:`xlasdk.reference._per_partition.compare_per_partition`); this module reads the files, makes
the settings and writes what the command prints.
"""

from __future__ import annotations

import argparse
import os
from typing import IO, Any

import numpy as np

from xlasdk.errors import ShapeError
from xlasdk.runtime.per_partition import PerPartitionPlan

from ._arrays import _expected_outputs, _gather_inputs
from ._common import EXIT_OK, UsageError, _stage
from ._per_partition import _ShapesOf, gather, plan_for


def _refuse(args: argparse.Namespace, devices: int) -> None:
    """The options a per-partition comparison cannot honour: a clear error naming what to use instead."""
    f = args.file
    if (args.bisect and args.bisect != "ops") or args.find_nonfinite:
        what = f"--bisect {args.bisect}" if args.bisect else "--find-nonfinite"
        raise UsageError(f"{what}: {f} is an optimized per-partition dump ({devices} partitions); bisect its "
                         "before_optimizations file (xlasdk compare BEFORE.hlo " + (
                             f"--bisect {args.bisect})" if args.bisect else "--find-nonfinite)") +
                         ", or its ops with --bisect ops")
    if args.bisect == "ops" and args.against.endswith(".npz"):
        raise UsageError(f"--bisect ops --against {args.against}: {f} is an optimized per-partition dump ({devices} "
                         "partitions); its ops are bisected against the reference evaluator on the module itself "
                         "(leave out --against) or on a per-partition module of the same program that computes it "
                         "right (--against GOOD.hlo), every partition simulated")
    if getattr(args, "outputs", None):
        raise UsageError(f"--outputs: {f} is an optimized per-partition dump; compare the before_optimizations "
                         "file with --outputs (the global outputs), or give them as --against OUT.npz")
    if getattr(args, "precision", None) is not None:
        raise UsageError(f"--precision: {f} is an optimized per-partition dump; its precision is what XLA "
                         "optimized into it (give --precision with the before_optimizations file)")
    if getattr(args, "html", None):
        raise UsageError(f"--html: {f} is an optimized per-partition dump; give --json, or --html with its "
                         "before_optimizations file")
    against = args.against
    if against == "recorded":
        raise UsageError(f"--against recorded: {f} is not a snapshot; give --against OUT.npz")
    if against != "reference" and not against.endswith(".npz") and not os.path.isfile(against):
        raise UsageError(f"--against {against}: {f} is an optimized per-partition dump ({devices} partitions); "
                         "compare it against the reference, its before_optimizations file (--against BEFORE.hlo) "
                         "or recorded global outputs (--against OUT.npz)")


def _per_partition_module(path: str) -> Any:
    """The module ``--against`` names when it is a per-partition module itself (another optimized
    dump of the program, compared piece by piece), else None (the before_optimizations file)."""
    from xlasdk.errors import FormatError
    from xlasdk.formats.load import load_computation
    from xlasdk.runtime.per_partition import per_partition_count

    try:
        loaded = load_computation(path)
    except FormatError as e:
        raise UsageError(f"--against {path}: cannot load it as a module: {e}") from None
    return loaded if per_partition_count(loaded) is not None else None


def _global_inputs(plan: PerPartitionPlan, per_device: list[list[np.ndarray[Any, Any]]]
                   ) -> list[np.ndarray[Any, Any]]:
    """The global arrays whose pieces ``per_device`` holds (per-partition inputs)."""
    try:
        return plan.join(per_device)
    except ShapeError as e:
        raise UsageError(f"per-partition inputs of {plan.computation.name}: the partitions' pieces of a parameter "
                         f"disagree where its sharding gives them the same tile ({str(e).split(': ', 2)[-1]}); "
                         "compare needs the pieces of one global array: give the program's global inputs") from None


def compare_per_partition(args: argparse.Namespace, comp: Any, devices: int, out: IO[str], *,
                          device_of: Any, exit_divergence: int, exit_cannot_judge: int) -> int:
    """``xlasdk compare`` of an optimized per-partition dump (see the module's docstring)."""
    from xlasdk.reference._orders import verdict
    from xlasdk.reference._per_partition import compare_per_partition as compare_plan
    from xlasdk.reference._runners import GivenOutputs, ReferenceEvaluator, SecondModule
    from xlasdk.reference._settings import CompareSettings

    from ._common import _xla_flags

    _refuse(args, devices)
    against: str = args.against
    module_path = against if against != "reference" and not against.endswith(".npz") else None
    good = _per_partition_module(module_path) if module_path is not None else None
    plan = plan_for(args.file, comp, devices, before=module_path if good is None else None)
    # nothing says what the global program is: the module as written, judged partition by partition
    as_written = against == "reference" and (plan.before is None or plan.result_shardings is None)
    if plan.result_shardings is None and not as_written:
        raise UsageError(f"{args.file}: {plan.result_source}; the outputs cannot be put together into the global "
                         "outputs compare judges: give --against BEFORE.hlo (its result shardings), or run it "
                         "with xlasdk run (outputs per partition)")
    per_device, mode = gather(args, comp, plan)
    ins = [[np.asarray(v) for v in row] for row in per_device]
    if as_written:
        global_ins: list[np.ndarray[Any, Any]] = []  # each partition's own arguments are judged
    elif mode == "global":  # the same arrays gather split (a random input comes from the same seed)
        global_ins = _gather_inputs(args, _ShapesOf(plan.parameter_names, plan.global_parameter_shapes), None, comp)
    else:
        global_ins = _global_inputs(plan, ins)
    runner: Any
    if good is not None:
        runner = SecondModule(good)
    elif module_path is not None:
        assert plan.before is not None  # plan_for loaded it (or said it cannot)
        runner = SecondModule(plan.before)
    elif against == "reference":
        runner = ReferenceEvaluator(args.excess_precision)
    else:
        runner = GivenOutputs(_expected_outputs(against, plan.num_results, "--against"), f"the outputs in {against}")
    sp_args = argparse.Namespace(**{**vars(args), "devices": None})
    dev = device_of(sp_args, devices)
    settings = CompareSettings(device=dev, rtol=args.rtol, atol=args.atol, ulps=args.ulps,
                               excess_precision=args.excess_precision, xla_flags=_xla_flags(args.xla_flags),
                               device_kind=getattr(args, "device_kind", None))
    _stage("compiling")
    report = compare_plan(plan, global_ins, runner, settings, pieces=ins, bisect_ops=args.bisect == "ops")
    out.write(str(report) + "\n")
    how = "global inputs split by the parameters' shardings" if mode == "global" else (
        "per-partition inputs" if as_written else
        "per-partition inputs (put together into the global inputs by the parameters' shardings)")
    if as_written:
        out.write(f"  ran as one partition's program of {devices} on {devices} {dev.platform} devices: {how}; no "
                  "before_optimizations module says what the global program is, so each partition is judged "
                  "against the module as written (give --against BEFORE.hlo to judge the module itself)\n")
    else:
        out.write(f"  ran as one partition's program of {devices} on {devices} {dev.platform} devices: {how}; "
                  f"outputs put together by {plan.result_source}\n")
    from xlasdk.formats.tpu_meaning import tpu_note

    if (note := tpu_note(comp)) is not None:
        out.write(f"  ran {note}\n")
    if args.json:
        import json

        from xlasdk._atomic import atomic_write

        try:
            atomic_write(args.json, json.dumps(report.as_dict(), indent=2).encode() + b"\n")
        except OSError as e:
            raise UsageError(f"--json {args.json}: cannot write: {e.strerror or e}") from None
    if report.ok:
        return EXIT_OK
    return exit_cannot_judge if verdict(report) == "CANNOT JUDGE" else exit_divergence
