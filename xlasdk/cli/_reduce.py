"""``xlasdk reduce``: shrink a module to the smallest one that still shows a problem
(:func:`xlasdk.reduce`)."""

from __future__ import annotations

import argparse
import os
from typing import IO, Any

from ._arrays import _gather_inputs
from ._common import EXIT_OK, UsageError, _load_program, _stage, _topology_device
from ._run import _recorded_arguments
from ._verbs import _REDUCE_DESCRIPTION as _REDUCE_DESCRIPTION  # the parser lives in the light _verbs
from ._verbs import add_reduce_parser, check_reduce_flags

add_parser = add_reduce_parser  # its name before the parser moved to _verbs


def _snapshot_path(output: str) -> str:
    stem, ext = os.path.splitext(output)
    return (stem if ext else output) + ".snapshot.pb"


def _shown_result(comp: Any, arguments: list[Any]) -> Any:
    """XLA's outputs of the reduced module on its arguments: the values ``--until diverge`` showed
    differ from the reference, recorded in MIN.snapshot.pb (an array, a tuple of arrays for several
    outputs, as the module's result; None when they cannot be had again)."""
    import xlasdk as xs

    try:
        out = xs.compile(comp, "cpu:0")(*arguments)
    except xs.XlaSdkError:
        return None
    return tuple(o.to_numpy() for o in out) if isinstance(out, tuple) else out.to_numpy()


def _cmd_reduce(args: argparse.Namespace, out: IO[str]) -> int:
    check_reduce_flags(args)
    _stage("loading")
    from xlasdk.errors import FormatError

    try:
        comp, snap = _load_program(args)  # a snapshot's recorded arguments are the inputs
    except FormatError as e:
        if args.until != "crash" and args.script is None:
            if "XLA aborted while loading" in str(e):
                raise UsageError(f"{str(e).split(' — at ')[0]}; XLA dies loading it: only --until crash or --script "
                                 "can reduce such a module (as text)") from None
            raise
        comp, snap = args.file, None  # reduce() cuts a module XLA's loader dies on as text, or says why not
    inputs = None
    if not isinstance(comp, str) and snap is None:
        from ._per_partition import per_partition_devices_of

        if (parts := per_partition_devices_of(comp)) is not None:  # one partition's program of an SPMD program
            return _reduce_per_partition(args, comp, parts, out)
    if not isinstance(comp, str):
        recorded = _recorded_arguments(args, snap)
        given = args.input or args.inputs is not None or args.random_inputs or recorded is not None
        inputs = (_gather_inputs(args, comp.program_shape(), recorded, comp)
                  if given or args.until == "diverge" or args.against is not None else None)
    if args.against is not None:
        return _reduce_against(args, comp, inputs, out)
    _stage("reducing")
    from xlasdk.errors import XlaSdkError
    from xlasdk.reducer import NotReproducedError, ReduceStep, reduce

    def progress(step: ReduceStep) -> None:
        plural = "" if step.instructions == 1 else "s"
        out.write(f"step {step.step}: {step.strategy}: {step.instructions} instruction{plural} ({step.candidates} "
                  f"candidates, {step.compiles} compiles, {step.elapsed_s:.1f} s)\n")
        out.flush()

    device = _topology_device(args)
    try:
        res = reduce(comp, args.until, script=args.script, arguments=inputs, max_time=args.max_time,
                     check_timeout=args.check_timeout, rtol=args.rtol, atol=args.atol,
                     excess_precision=args.excess_precision, progress=progress, device=device)
    except NotReproducedError as e:
        msg = str(e).split(" — at ")[0].removeprefix("reduce: ")
        raise UsageError(msg if msg.startswith(args.file) else f"{args.file}: {msg}") from None
    except FormatError:
        raise  # the file cannot be loaded, and XLA does not die loading it: the loader's message
    except XlaSdkError as e:
        if not str(e).startswith("reduce:"):
            raise
        msg = str(e).split(" — at ")[0].removeprefix("reduce: ")
        raise UsageError(msg if msg.startswith(args.file) else f"{args.file}: {msg}") from None
    from xlasdk._atomic import atomic_write

    try:
        atomic_write(args.output, res.hlo_text.encode())
    except OSError as e:
        raise UsageError(f"--output {args.output}: cannot write: {e.strerror or e}") from None
    out.write(f"{res}\nwrote {args.output}\n")
    if res.arguments and res.computation is not None:
        snap = _snapshot_path(args.output)
        from xlasdk.formats.snapshot import write_snapshot

        shown = _shown_result(res.computation, res.arguments) if args.until == "diverge" else None
        try:
            write_snapshot(snap, res.computation, res.arguments, shown)
        except OSError as e:
            raise UsageError(f"{snap}: cannot write: {e.strerror or e}") from None
        out.write(f"wrote {snap} (the module with its {len(res.arguments)} argument"
                  f"{'s' if len(res.arguments) != 1 else ''}"
                  f"{' and the result XLA gave, for run --expect recorded' if shown is not None else ''})\n")
    return EXIT_OK


def _write_inputs(path: str, arrays: list[Any]) -> None:
    """``arg0``, ``arg1``... as ``xlasdk run --inputs`` reads them (ml_dtypes arrays as raw bytes and a
    ``__dtypes__`` manifest, as ``run --output`` writes them)."""
    import io

    import numpy as np

    from xlasdk._atomic import atomic_write

    from ._arrays import _npz_entries

    entries: dict[str, Any] = {k.replace("output_", "arg"): v for k, v in _npz_entries(arrays).items()}
    if "__dtypes__" in entries:
        import json

        manifest = json.loads(str(entries["__dtypes__"]))
        entries["__dtypes__"] = np.array(json.dumps({k.replace("output_", "arg"): v for k, v in manifest.items()},
                                                    sort_keys=True))
    buf = io.BytesIO()
    np.savez(buf, **entries)
    atomic_write(path, buf.getvalue())


def _reduce_against(args: argparse.Namespace, comp: Any, inputs: Any, out: IO[str]) -> int:
    """``reduce FILE --against GOOD``: MIN.hlo, MIN.good.hlo, MIN.npz and MIN.snapshot.pb."""
    import xlasdk as xs
    from xlasdk.errors import FormatError, XlaSdkError
    from xlasdk.reducer import NotReproducedError, ReduceStep, reduce

    if isinstance(comp, str):
        raise UsageError(f"{comp}: cannot be loaded; --against compares two modules that load")
    try:
        good = xs.load_computation(args.against)
    except FormatError as e:
        raise UsageError(f"--against {args.against}: cannot load it as a module: {str(e).split(' — at ')[0]}") from None
    _stage("reducing")

    def progress(step: ReduceStep) -> None:
        out.write(f"step {step.step}: {step.strategy}: {step.instructions} instruction"
                  f"{'' if step.instructions == 1 else 's'} ({step.elapsed_s:.1f} s)\n")
        out.flush()

    try:
        res = reduce(comp, against=good, arguments=inputs, max_time=args.max_time, rtol=args.rtol, atol=args.atol,
                     device=args.device, progress=progress)
    except NotReproducedError as e:
        msg = str(e).split(" — at ")[0].removeprefix("reduce: ")
        raise UsageError(f"{args.file} --against {args.against}: {msg}") from None
    except XlaSdkError as e:
        if not str(e).startswith("reduce:"):
            raise
        raise UsageError(f"{args.file}: {str(e).split(' — at ')[0].removeprefix('reduce: ')}") from None
    write_repro(res, args.output, out)
    return EXIT_OK


def repro_paths(output: str) -> tuple[str, str]:
    """Where a repro of ``reduce --against`` beside MIN.hlo (``output``) goes: GOOD's cut
    (MIN.good.hlo) and the inputs (MIN.npz; MIN.inputs.npz when ``output`` is itself an .npz)."""
    stem, ext = os.path.splitext(output)
    return f"{stem}.good{ext}", f"{stem}{'.inputs' if ext == '.npz' else ''}.npz"


def write_repro(res: Any, output: str, out: IO[str]) -> None:
    """A repro (a :class:`~xlasdk.ReduceResult` of ``reduce(BAD, against=GOOD)``) written as
    ``xlasdk reduce --against`` writes it: ``output`` (BAD's cut, HLO text), its
    :func:`repro_paths` (GOOD's matching cut; the inputs, ``arg0``... as ``run --inputs`` reads
    them) and MIN.snapshot.pb (the cut with its inputs); a line per file to ``out``, and the
    command that shows the difference."""
    from xlasdk._atomic import atomic_write

    good_path, inputs_path = repro_paths(output)
    try:
        atomic_write(output, res.hlo_text.encode())
        atomic_write(good_path, (res.good_hlo_text or "").encode())
        _write_inputs(inputs_path, list(res.arguments or []))
    except OSError as e:
        raise UsageError(f"--output {output}: cannot write: {e.strerror or e}") from None
    out.write(f"{res}\nwrote {output} (FILE's cut), {good_path} (GOOD's matching cut) and {inputs_path} (their "
              "inputs: the good run's values)\n")
    if res.arguments and res.computation is not None:
        snap = _snapshot_path(output)
        from xlasdk.formats.snapshot import write_snapshot

        try:
            write_snapshot(snap, res.computation, res.arguments, None)
        except OSError as e:
            raise UsageError(f"{snap}: cannot write: {e.strerror or e}") from None
        out.write(f"wrote {snap} (the cut with its inputs)\n")
    out.write(f"see the difference: xlasdk compare {output} --inputs {inputs_path} --against {good_path}\n")


def _reduce_per_partition(args: argparse.Namespace, comp: Any, parts: int, out: IO[str]) -> int:
    """``reduce FILE --until diverge`` of an optimized per-partition dump: every cut run on all
    ``parts`` partitions (:mod:`xlasdk._reduce_partitions`); MIN.hlo and MIN.npz (each parameter's
    per-partition arguments stacked on a leading axis, as ``run --inputs`` reads them)."""
    import numpy as np

    f = args.file
    what = f"{f} is an optimized per-partition dump (one partition's program of {parts})"
    if args.against is not None:
        raise UsageError(f"--against {args.against}: {what}; localize the difference per partition with xlasdk "
                         f"compare {f} --against {args.against} --bisect ops, or reduce it with --until diverge "
                         f"(each cut run on all {parts} partitions)")
    if args.script is None and args.until != "diverge":
        raise UsageError(f"--until {args.until}: {what}, which compiled for one device is another program; reduce "
                         f"it with --until diverge (each cut run on all {parts} partitions) or --script, localize a "
                         "divergence with xlasdk compare --bisect ops")
    from ._per_partition import gather, plan_for

    plan = plan_for(f, comp, parts)
    inputs = None
    if args.until == "diverge" or args.input or args.inputs is not None or args.random_inputs:
        pieces, _ = gather(args, comp, plan)
        inputs = [np.stack([np.asarray(row[i]) for row in pieces]) for i in range(len(plan.parameter_names))]
    _stage("reducing")
    from xlasdk.errors import XlaSdkError
    from xlasdk.reducer import ReduceStep, reduce

    def progress(step: ReduceStep) -> None:
        out.write(f"step {step.step}: {step.strategy}: {step.instructions} instruction"
                  f"{'' if step.instructions == 1 else 's'} ({step.candidates} candidates, {step.compiles} compiles, "
                  f"{step.elapsed_s:.1f} s)\n")
        out.flush()

    try:
        res = reduce(plan, args.until, script=args.script, arguments=inputs, max_time=args.max_time,
                     check_timeout=args.check_timeout, rtol=args.rtol, atol=args.atol,
                     excess_precision=args.excess_precision, progress=progress, device=args.device)
    except XlaSdkError as e:
        if not str(e).startswith("reduce:"):
            raise
        msg = str(e).split(" — at ")[0].removeprefix("reduce: ")
        raise UsageError(msg if msg.startswith(f) else f"{f}: {msg}") from None
    from xlasdk._atomic import atomic_write

    try:
        atomic_write(args.output, res.hlo_text.encode())
    except OSError as e:
        raise UsageError(f"--output {args.output}: cannot write: {e.strerror or e}") from None
    out.write(f"{res}\nwrote {args.output} (one partition's program of {parts})\n")
    if res.arguments:
        inputs_path = repro_paths(args.output)[1]
        try:
            _write_inputs(inputs_path, list(res.arguments))
        except OSError as e:
            raise UsageError(f"{inputs_path}: cannot write: {e.strerror or e}") from None
        out.write(f"wrote {inputs_path} (its arguments: each parameter's {parts} per-partition arrays stacked on a "
                  "leading axis, as xlasdk run --inputs reads them)\n")
        out.write(f"run it on every partition: xlasdk run {args.output} --inputs {inputs_path}\n"
                  f"judge each partition against the module as written: xlasdk compare {args.output} --inputs "
                  f"{inputs_path} [--bisect ops]\n")
    return EXIT_OK
