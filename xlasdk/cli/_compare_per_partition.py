"""``xlasdk compare`` of an optimized per-partition dump (one partition's program of an SPMD program,
see :mod:`xlasdk.cli._per_partition`).

The program's global inputs are split by the parameters' shardings, each partition runs the
optimized module on its own pieces and the outputs are put together by the result shardings (as
``xlasdk run`` does). What they are compared with is the program's *global* meaning:

- ``--against reference`` (the default): the reference evaluator on the before-optimizations file's
  global program (the per-partition module's collectives are not evaluated per partition);
- ``--against BEFORE.hlo``: that module run on the global inputs on one device;
- ``--against OUT.npz``: the program's global outputs recorded elsewhere.

Judged by the error models as the single-device path: the device's, the one ``--device-kind`` names
and, for a TPU-optimized module's CPU meaning, the TPU's (its kept bf16 converts are the TPU's DEFAULT
precision). Per-partition inputs are put together into the global arrays by the same shardings
(pieces of a replicated parameter must agree).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import IO, Any

import numpy as np

from ._arrays import _expected_outputs, _gather_inputs
from ._common import EXIT_OK, UsageError, _device, _stage
from ._per_partition import _leaves, _Plan, _ShapesOf, before_files, gather, plan_for, put_together


def _refuse(args: argparse.Namespace, devices: int) -> None:
    """The options a per-partition comparison cannot honour: a clear error naming what to use instead."""
    f = args.file
    if args.bisect or args.find_nonfinite:
        what = f"--bisect {args.bisect}" if args.bisect else "--find-nonfinite"
        raise UsageError(f"{what}: {f} is an optimized per-partition dump ({devices} partitions); bisect its "
                         "before_optimizations file (xlasdk compare BEFORE.hlo " + (
                             f"--bisect {args.bisect})" if args.bisect else "--find-nonfinite)"))
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


def _global_inputs(name: str, per_device: list[list[np.ndarray[Any, Any]]], plan: _Plan
                   ) -> list[np.ndarray[Any, Any]]:
    """The global arrays whose pieces ``per_device`` holds (per-partition inputs)."""
    as_out = dataclasses.replace(plan, out_shardings=plan.shardings,
                                 out_dims=[tuple(s.dimensions()) if s.is_array() else () for s in plan.global_shapes])
    try:
        return put_together(name, per_device, as_out)
    except UsageError as e:
        raise UsageError(f"per-partition inputs of {name}: the partitions' pieces of a parameter disagree where "
                         f"its sharding gives them the same tile ({str(e).split(': ', 2)[-1]}); compare needs the "
                         "pieces of one global array: give the program's global inputs") from None


def compare_per_partition(args: argparse.Namespace, comp: Any, devices: int, out: IO[str], *,
                          device_of: Any, exit_divergence: int, exit_cannot_judge: int) -> int:
    """``xlasdk compare`` of an optimized per-partition dump (see the module's docstring)."""
    import xlasdk as xs
    from xlasdk.errors import XlaSdkError
    from xlasdk.reference._evaluator import run_reference
    from xlasdk.reference._orders import verdict
    from xlasdk.reference._precision import device_kind, device_kind_of
    from xlasdk.reference._report import STRICT_PRECISION, CompareReport, compare_one
    from xlasdk.reference._runners import both_models, module_kinds

    _refuse(args, devices)
    against: str = args.against
    module_path = against if against != "reference" and not against.endswith(".npz") else None
    plan = plan_for(args.file, comp, devices, before=module_path)
    if plan.out_shardings is None:
        raise UsageError(f"{args.file}: {plan.out_source}; the outputs cannot be put together into the global "
                         "outputs compare judges: give --against BEFORE.hlo (its result shardings), or run it "
                         "with xlasdk run (outputs per partition)")
    per_device, mode = gather(args, comp, plan)
    ins = [[np.asarray(v) for v in row] for row in per_device]
    if mode == "global":  # the same arrays gather split (a random input comes from the same seed)
        global_ins = _gather_inputs(args, _ShapesOf(plan.names, plan.global_shapes), None, comp)
    else:
        global_ins = _global_inputs(args.file, ins, plan)
    n_out = len(_leaves(comp.program_shape().result_shape()))

    # the other side's program: the before file (given, or beside the dump for the reference)
    before: Any = None
    before_path = module_path
    if module_path is not None:
        try:
            before = xs.load_computation(module_path)
        except XlaSdkError as e:
            raise UsageError(f"--against {module_path}: cannot load it as a module: {e}") from None
    elif against == "reference":
        for c in before_files(args.file):
            try:
                before, before_path = xs.load_computation(c), c
                break
            except XlaSdkError:
                continue
        if before is None:
            raise UsageError(f"--against reference: {args.file} is one partition's program of {devices}; the "
                             "reference evaluates the program's global module, and no before_optimizations file "
                             "lies beside it: give --against BEFORE.hlo")
    if before is not None:
        bps = before.program_shape()
        want_shapes = [tuple(s.dimensions()) for s in bps.parameter_shapes()]
        have = [tuple(np.shape(v)) for v in global_ins]
        if want_shapes != have or len(_leaves(bps.result_shape())) != n_out:
            raise UsageError(f"{before_path}: takes {', '.join(str(s) for s in bps.parameter_shapes())} and "
                             f"gives {len(_leaves(bps.result_shape()))} output(s); {args.file}'s global program "
                             f"takes {', '.join(str(s) for s in plan.global_shapes)} and gives {n_out}: not the "
                             "before_optimizations file of this dump")

    sp_args = argparse.Namespace(**{**vars(args), "devices": None})
    dev = device_of(sp_args, devices)
    kind = device_kind(args.device_kind) if getattr(args, "device_kind", None) is not None else device_kind_of(dev)
    flags: dict[str, Any] = {}
    if against == "reference":
        flags = (dict(STRICT_PRECISION) if not args.excess_precision
                 else {k: True for k, _ in STRICT_PRECISION})
    from ._common import _xla_flags

    flags.update(_xla_flags(args.xla_flags))
    _stage("compiling")
    options = xs.CompileOptions(num_replicas=1, num_partitions=devices, env_option_overrides=flags or None)
    exe = xs.compile(comp, dev, options=options)
    _stage("running")
    pieces = [[np.asarray(o.to_numpy()) for o in (r if isinstance(r, (tuple, list)) else (r,))]
              for r in exe.execute_replicated(per_device)]
    got = put_together(comp.name, pieces, plan)
    _stage("comparing")
    if against == "reference":
        try:
            want, _ = run_reference(before, global_ins, model=(kind, None, False))
        except XlaSdkError:
            raise
        except Exception as e:  # noqa: BLE001 - a value the evaluator cannot read: never a divergence
            raise UsageError(f"cannot check {args.file}: the reference evaluator could not evaluate {before_path} "
                             f"({type(e).__name__}: {str(e):.200})") from None
        want = [np.asarray(w) for w in want]
        label = (f"reference evaluator on {os.path.basename(str(before_path))}'s global program (XLA "
                 f"{'with' if args.excess_precision else 'without'} excess precision)")
    elif module_path is not None:
        other = xs.compile(before, _device(args), options=xs.CompileOptions(env_option_overrides=flags or None)
                           )(*global_ins)
        want = [np.asarray(o) for o in (other if isinstance(other, (list, tuple)) else [other])]
        label = f"module {before.name!r} on global inputs on one device"
    else:
        want = _expected_outputs(against, n_out, "--against")
        label = f"the outputs in {against}"
    if len(want) != n_out:
        raise UsageError(f"{args.file}: the program has {n_out} outputs, {label} gave {len(want)}")
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.shape != np.shape(w) or g.dtype != np.asarray(w).dtype:
            raise UsageError(f"{args.file}: output {i} put together is {g.dtype}{list(g.shape)}, {label} gives "
                             f"{np.asarray(w).dtype}{list(np.shape(w))}")
    scales: list[Any] = [0.0] * n_out
    if before is not None:  # the device's (and named) model, and the TPU's for a TPU-optimized module
        # (the default tolerances where the reference cannot read the before file, as on one device)
        scales = both_models(before, global_ins, module_kinds(comp, kind, dev), None, n_out)
    report = CompareReport(comp.name, label, [compare_one(i, g, np.asarray(w), args.rtol, args.atol, sc, args.ulps)
                                              for i, (g, w, sc) in enumerate(zip(got, want, scales, strict=True))])
    report.device_kind = kind.name
    out.write(str(report) + "\n")
    how = "global inputs split by the parameters' shardings" if mode == "global" else (
        "per-partition inputs (put together into the global inputs by the parameters' shardings)")
    out.write(f"  ran as one partition's program of {devices} on {devices} {dev.platform} devices: {how}; outputs "
              f"put together by {plan.out_source}\n")
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

