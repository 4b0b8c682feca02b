"""``xlasdk reduce``: shrink a module to the smallest one that still shows a problem
(:func:`xlasdk.reduce`)."""

from __future__ import annotations

import argparse
import os
from typing import IO, Any

from ._arrays import _gather_inputs, add_input_arguments
from ._common import EXIT_OK, UsageError, _check_writable, _load_program, _stage
from ._run import _recorded_arguments

_REDUCE_DESCRIPTION = """\
Shrink FILE to the smallest module that still shows a problem, and write it as HLO text (what
XLA's tools and `xlasdk run` read). The problem, one of:
  --until crash                XLA aborts or dies compiling the module (checked in xlasdk's
                               worker process: this one never crashes)
  --until compile-error        the compile fails cleanly; compile-error=REGEX: with a message
                               in which REGEX is found
  --until diverge              `xlasdk compare` (against the reference evaluator, with --rtol,
                               --atol, --excess-precision) reports a divergence on the inputs
  --script CMD                 each candidate is written to a file whose path is appended to
                               CMD (run by the shell); exit 0 means "still interesting"
Strategies, as XLA's hlo_bisect and C-Reduce use them: drop outputs, cut the instruction sequence
(bisected), replace instructions by parameters or by constants of their values on the inputs; then
simplify shapes and attributes (shrink dimension sizes, drop metadata and attributes, constants
to splats; an invalid candidate is rejected when loaded, and counted).
Deterministic; one line per accepted step; --max-time bounds the search (the smallest module
found so far is written). With inputs, MIN.snapshot.pb (an HloSnapshot with the arguments the
reduced module shows the problem on) is written beside MIN.hlo. Inputs as `xlasdk run` takes
them; a snapshot's recorded arguments are used for the parameters not given (diverge without
inputs needs --random-inputs). Exit codes: 0 a reduced module was
written, 2 usage or file error, or FILE does not show the problem."""


def add_parser(sub: Any, common: argparse.ArgumentParser, fmt_help: str) -> None:
    s = sub.add_parser("reduce", parents=[common], help="shrink a module that shows a problem",
                       formatter_class=argparse.RawDescriptionHelpFormatter, description=_REDUCE_DESCRIPTION)
    s.add_argument("file", metavar="FILE", help="the module file")
    s.add_argument("--format", default=None, help=fmt_help)
    s.add_argument("--until", default=None, metavar="crash|compile-error[=REGEX]|diverge",
                   help="the problem the reduced module must still show")
    s.add_argument("--script", default=None, metavar="CMD",
                   help="instead of --until: a shell command; the candidate's path is appended, exit 0 = interesting")
    s.add_argument("--output", "-o", required=True, metavar="MIN.hlo", help="where the reduced module is written")
    s.add_argument("--max-time", type=float, default=None, metavar="S",
                   help="stop after S seconds and write the smallest module found so far")
    s.add_argument("--check-timeout", type=float, default=300.0, metavar="S",
                   help="seconds one check may take before it counts as not showing the problem (default 300)")
    add_input_arguments(s)
    s.add_argument("--rtol", type=float, default=None, help="diverge: relative tolerance (default: by element type)")
    s.add_argument("--atol", type=float, default=None, help="diverge: absolute tolerance (default: by element type)")
    s.add_argument("--excess-precision", action="store_true",
                   help="diverge: let XLA keep bf16/f16 values in f32 between ops (its default)")
    s.set_defaults(verb_parser=s)


def _snapshot_path(output: str) -> str:
    stem, ext = os.path.splitext(output)
    return (stem if ext else output) + ".snapshot.pb"


def _cmd_reduce(args: argparse.Namespace, out: IO[str]) -> int:
    if (args.until is None) == (args.script is None):
        raise UsageError("give exactly one of --until crash|compile-error[=REGEX]|diverge and --script CMD")
    if args.until is not None and not (args.until in ("crash", "diverge", "compile-error")
                                       or args.until.startswith("compile-error=")):
        raise UsageError(f"--until {args.until!r}: expected crash, compile-error, compile-error=REGEX or diverge")
    if args.max_time is not None and not args.max_time > 0:
        raise UsageError(f"--max-time must be > 0 seconds, got {args.max_time:g}")
    if not args.check_timeout > 0:
        raise UsageError(f"--check-timeout must be > 0 seconds, got {args.check_timeout:g}")
    _check_writable(args.output, f"--output {args.output}")
    _stage("loading")
    comp, snap = _load_program(args)  # a snapshot's recorded arguments are the inputs
    recorded = _recorded_arguments(args, snap)
    given = args.input or args.inputs is not None or args.random_inputs or recorded is not None
    inputs = (_gather_inputs(args, comp.program_shape(), recorded, comp) if given or args.until == "diverge"
              else None)
    _stage("reducing")
    from xlasdk.errors import XlaSdkError
    from xlasdk.reducer import NotReproducedError, ReduceStep, reduce

    def progress(step: ReduceStep) -> None:
        plural = "" if step.instructions == 1 else "s"
        out.write(f"step {step.step}: {step.strategy}: {step.instructions} instruction{plural} ({step.candidates} "
                  f"candidates, {step.compiles} compiles, {step.elapsed_s:.1f} s)\n")
        out.flush()

    try:
        res = reduce(comp, args.until, script=args.script, arguments=inputs, max_time=args.max_time,
                     check_timeout=args.check_timeout, rtol=args.rtol, atol=args.atol,
                     excess_precision=args.excess_precision, progress=progress)
    except NotReproducedError as e:
        raise UsageError(f"{args.file}: {str(e).split(' — at ')[0].removeprefix('reduce: ')}") from None
    except XlaSdkError as e:
        if not str(e).startswith("reduce:"):
            raise
        raise UsageError(str(e).split(" — at ")[0]) from None
    from xlasdk._atomic import atomic_write

    try:
        atomic_write(args.output, res.hlo_text.encode())
    except OSError as e:
        raise UsageError(f"--output {args.output}: cannot write: {e.strerror or e}") from None
    out.write(f"{res}\nwrote {args.output}\n")
    if res.arguments:
        snap = _snapshot_path(args.output)
        from xlasdk.formats.snapshot import write_snapshot

        try:
            write_snapshot(snap, res.computation, res.arguments)
        except OSError as e:
            raise UsageError(f"{snap}: cannot write: {e.strerror or e}") from None
        out.write(f"wrote {snap} (the module with its {len(res.arguments)} argument"
                  f"{'s' if len(res.arguments) != 1 else ''})\n")
    return EXIT_OK
