"""The ``xlasdk`` command: list devices, inspect, convert and run XLA computations.

A thin argparse layer over the public API. Verbs: ``devices``, ``version``, ``inspect``,
``convert``, ``run``, ``cache info|clear``, ``launch``; ``xlasdk VERB --help`` documents each.

Exit codes: 0 success; 1 runtime failure (compilation or execution, XLA aborting, ``--timeout``);
2 usage or input error (bad arguments, unreadable or invalid files, inputs that do not match the
program). Run as the ``xlasdk`` command, the verbs that start XLA work in a supervised child
process (see ``xlasdk.cli._supervisor``), so that an abort in XLA is an error line, not a crash. Errors are
one line on stderr, ``xlasdk VERB: error: ...``; ``--debug`` adds the Python traceback and XLA's own
log output. Output piped into a reader that leaves early (``xlasdk inspect f.hlo | head -1``) ends
the command quietly with exit code 0.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from typing import IO, NoReturn

from . import _common, _compare, _inspect, _reduce, _run, _supervisor, _system
from ._arrays import add_input_arguments
from ._common import EXIT_OK, EXIT_USAGE, UsageError, failure_exit
from ._inspect import CheckFailed

__all__ = ["main", "build_parser"]


# -- parser -------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the ``xlasdk`` command."""
    common = _common._Parser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show Python tracebacks and XLA's log output on errors")
    p = _common._Parser(
        prog="xlasdk",
        description="Build, inspect, convert and run XLA computations.",
        epilog="Exit codes: 0 success, 1 runtime failure, 2 usage or input error.",
        parents=[common],
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="VERB", parser_class=_common._Parser)

    s = sub.add_parser("devices", parents=[common], help="list the devices of a platform",
                       description="A table of the devices of a platform (default: the default platform).")
    s.add_argument("--platform", default=None, help="platform name, e.g. cpu, cuda (default: the default platform)")
    s.set_defaults(verb_parser=s)

    s = sub.add_parser("version", parents=[common], help="print the xlasdk, jaxlib and StableHLO versions",
                       description="Print the xlasdk, jaxlib, StableHLO and Python versions.")
    s.set_defaults(verb_parser=s)

    fmt_help = "force the input format: hlo, mlir, mlirbc or pb (default: by suffix, then by content)"
    timeout_help = "stop when compiling takes more than S seconds (exit code 1)"
    s = sub.add_parser(
        "inspect", parents=[common], help="program shape, op counts, cost and memory of a module",
        description="Print a module's program shape, HLO op counts by opcode, XLA's cost analysis and memory "
                    "figures (compiled for --device), and optionally its HLO, StableHLO or optimized HLO. "
                    "FILE is HLO text, StableHLO text, a portable artifact or an HLO proto, including XLA dump files.",
    )
    s.add_argument("file", metavar="FILE", help="the module file")
    s.add_argument("--format", default=None, help=fmt_help)
    s.add_argument("--device", default=None, help="device to compile for, e.g. cpu:0 (default: the first device)")
    s.add_argument("--optimized", action="store_true", help="print the optimized HLO XLA compiled")
    s.add_argument("--hlo", action="store_true", help="print the (unoptimized) HLO text")
    s.add_argument("--stablehlo", action="store_true", help="print the StableHLO text")
    s.add_argument("--no-compile", action="store_true", help="skip compiling (no cost or memory figures)")
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s.add_argument("--timeout", type=float, default=None, metavar="S", help=timeout_help)
    s.set_defaults(verb_parser=s)

    s = sub.add_parser(
        "convert", parents=[common], help="convert a module between file formats",
        description="Convert a module between HLO text (.hlo, .hlo.txt, .txt), StableHLO text (.mlir), StableHLO "
                    "portable artifacts (.mlirbc) and HLO module protos (.pb). Formats follow the suffixes. The "
                    "file is written under a temporary name, loaded back and, when IN compiles, compiled; only "
                    "then is it renamed to OUT (a file that fails the check is removed, exit code 1, and an "
                    "existing OUT is left as it was).",
    )
    s.add_argument("input", metavar="IN", help="the module to read")
    s.add_argument("output", metavar="OUT", help="the file to write (format from its suffix)")
    s.add_argument("--target-version", default=None,
                   help="StableHLO version of a .mlirbc artifact, e.g. 1.9.0, or WEEK_4, WEEK_12, MAX, current "
                        "(default: the oldest version that holds every op)")
    s.add_argument("--from", dest="from_format", default=None, help=fmt_help)
    s.add_argument("--to", dest="to_format", default=None, help="force the output format: hlo, mlir, mlirbc or pb")
    s.add_argument("--no-compile", action="store_true", help="load the written file back, but do not compile it")
    s.add_argument("--no-check", action="store_true", help="do not load the written file back (nor compile it)")
    s.add_argument("--timeout", type=float, default=None, metavar="S", help=timeout_help)
    s.set_defaults(verb_parser=s)

    s = sub.add_parser(
        "run", parents=[common], help="run a module on a device and summarize its outputs",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=_run._RUN_DESCRIPTION,
        epilog=_run._RUN_EPILOG,
    )
    s.add_argument("file", metavar="FILE", help="the module file")
    s.add_argument("--format", default=None, help=fmt_help)
    s.add_argument("--device", default=None, help="device to run on, e.g. cpu:0 (default: the first device)")
    add_input_arguments(s)
    s.add_argument("--iterations", type=int, default=1, metavar="K",
                   help="run K times, each with fresh random inputs (seed, seed+1, ...), as run_hlo_module does")
    s.add_argument("--output", metavar="OUT.npz", default=None,
                   help="save the outputs as output_0, output_1, ... (written atomically; see below for bf16, "
                        "fp8, int4)")
    s.add_argument("--repeat", type=int, default=1, metavar="N", help="run N times and report min/median time")
    s.add_argument("--expect", default=None, metavar="recorded|OUT.npz",
                   help="compare the outputs with a snapshot's recorded result or an .npz of outputs, as xlasdk "
                        "compare does (per-type tolerances, --rtol / --atol); exit code 1 when they differ")
    s.add_argument("--rtol", type=float, default=None, help="relative tolerance of --expect (default: by element type)")
    s.add_argument("--atol", type=float, default=None, help="absolute tolerance of --expect (default: by element type)")
    s.add_argument("--record", default=None, metavar="DIR",
                   help="write the run (module, inputs, outputs) as an HloSnapshot DIR/NAME.snapshot.K.pb, which "
                        "xlasdk run and XLA's run_hlo_module replay")
    s.add_argument("--devices", type=int, default=None, metavar="N",
                   help="run on a CPU client of N devices (default: replicas x partitions when that is above 1)")
    s.add_argument("--replicas", type=int, default=None, metavar="R",
                   help="number of replicas (default: the module's replica_count / mhlo.num_replicas, else 1)")
    s.add_argument("--partitions", type=int, default=None, metavar="P",
                   help="number of SPMD partitions (default: the module's num_partitions / mhlo.num_partitions, "
                        "else the device count of its shardings, else 1)")
    s.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="stop when compiling and running take more than S seconds, with exit code 1: a While whose "
                        "condition stays true, or a Sort whose comparator is not a strict weak order, never ends")
    s.set_defaults(verb_parser=s)

    from ._compare import add_parser as add_compare

    add_compare(sub, common, fmt_help)

    from ._reduce import add_parser as add_reduce

    add_reduce(sub, common, fmt_help)

    s = sub.add_parser("cache", parents=[common], help="inspect or clear the compile cache",
                       description="The on-disk compile cache (XLASDK_CACHE_DIR, default ~/.cache/xlasdk).")
    csub = s.add_subparsers(dest="cache_command", required=True, metavar="ACTION", parser_class=_common._Parser)
    for name, hlp in (("info", "entry count and size (--list: every entry)"), ("clear", "delete every entry")):
        c = csub.add_parser(name, parents=[common], help=hlp, description=hlp[0].upper() + hlp[1:] + ".")
        c.add_argument("--dir", default=None,
                       help="the cache directory (default: $XLASDK_CACHE_DIR or ~/.cache/xlasdk)")
        if name == "info":
            c.add_argument("--list", action="store_true", help="list the entries, most recently used first")
        c.set_defaults(verb_parser=c)

    from xlasdk.launch import build_parser as launch_options

    s = sub.add_parser(
        "launch", parents=[common], help="run a Python script in N local processes of one xs.distributed job",
        usage="xlasdk launch -n N [OPTIONS] (SCRIPT | -m MODULE) [ARGS...]",
        description="Run 'python SCRIPT ARGS' (or 'python -m MODULE ARGS') in N local processes with "
                    "XLASDK_COORDINATOR, XLASDK_NUM_PROCESSES and XLASDK_PROCESS_ID set, so that "
                    "xs.distributed.initialize() joins them; the same as 'python -m xlasdk.launch'. Output lines "
                    "are prefixed with [i]; when a process fails the others are stopped.",
    )
    launch_options(s)
    s.set_defaults(verb_parser=s)
    return p


_COMMANDS = {
    "devices": _system._cmd_devices,
    "version": _system._cmd_version,
    "inspect": _inspect._cmd_inspect,
    "convert": _inspect._cmd_convert,
    "run": _run._cmd_run,
    "compare": _compare._cmd_compare,
    "reduce": _reduce._cmd_reduce,
    "cache": _system._cmd_cache,
    "launch": _system._cmd_launch,
}


def _unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace, extras: list[str]) -> NoReturn:
    """Report arguments no parser took as the verb's usage error (``xlasdk run: error: ...``)."""
    verb_parser: argparse.ArgumentParser = getattr(args, "verb_parser", parser)
    msg = f"unrecognized arguments: {' '.join(extras)}"
    bad = [spec for spec in getattr(args, "input", None) or [] if "=" not in spec]
    if bad:
        msg += f"; --input takes NAME=FILE.npy as one argument, e.g. --input {bad[0]}={extras[0]}"
    verb_parser.error(msg)


def _joined_values(raw: list[str], option: str) -> list[str]:
    """``[option, VALUE]`` as ``[option=VALUE]`` (for values that start with ``--``)."""
    out: list[str] = []
    i = 0
    while i < len(raw):
        if raw[i] == option and i + 1 < len(raw):
            out.append(f"{option}={raw[i + 1]}")
            i += 2
            continue
        out.append(raw[i])
        i += 1
    return out


def _silence_stdout(*streams: IO[str]) -> None:
    """After a BrokenPipeError: point the streams' file descriptors at /dev/null so that nothing more,
    not even the interpreter's final flush, writes into the closed pipe (Python docs, "Note on SIGPIPE")."""
    fds = set()
    for stream in streams:
        try:
            fds.add(stream.fileno())
        except (AttributeError, OSError, ValueError):
            continue
    for fd in fds:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
        except OSError:  # pragma: no cover
            pass


def main(argv: Sequence[str] | None = None, *, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    """Entry point of the ``xlasdk`` console script; returns the exit code.

    ``stdout`` / ``stderr`` default to the process streams (tests pass buffers). When the reader
    of stdout goes away (``xlasdk inspect f.hlo | head -1``) the command stops quietly, exit code 0.
    Called with no arguments (as the console script is), the verbs that start XLA run in a child
    process that this one supervises (see ``xlasdk.cli._supervisor``); called from Python with ``argv``
    they run in this process, except with ``--timeout``.
    """
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    own_process = argv is None and stdout is None and stderr is None
    try:
        code = _main(argv, out, err, own_process)
        out.flush()
        return code
    except BrokenPipeError:
        _silence_stdout(out)
        return EXIT_OK


def _main(argv: Sequence[str] | None, out: IO[str], err: IO[str], own_process: bool = False) -> int:
    parser = build_parser()
    try:
        raw = list(argv) if argv is not None else sys.argv[1:]
        verb_at = next((i for i, t in enumerate(raw) if not t.startswith("-")), None)
        launch_program: tuple[str | None, str | None, list[str]] | None = None
        if verb_at is not None and raw[verb_at] == "launch":  # the program's arguments are not ours
            from xlasdk.launch import split_argv

            opts, module, script, rest = split_argv(raw[verb_at + 1 :])
            raw = raw[: verb_at + 1] + opts
            launch_program = (module, script, rest)
        raw = _joined_values(raw, "--xla-flags")  # its value starts with "--": argparse would take it for an option
        args, extras = parser.parse_known_args(raw)
        if launch_program is not None:
            args.launch_module, args.launch_script, args.launch_args = launch_program
        if extras:
            _unrecognized(parser, args, extras)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2), already printed
        return int(e.code) if isinstance(e.code, int) else EXIT_USAGE
    if not hasattr(args, "debug"):
        args.debug = False
    from xlasdk.errors import CompileError, DTypeError, FormatError, ShapeError, XlaRuntimeError, XlaSdkError

    try:
        timeout = getattr(args, "timeout", None)
        if timeout is not None and not timeout > 0:
            raise UsageError(f"--timeout must be > 0 seconds, got {timeout:g}")
        _common._ERR_STREAM[:] = [err]
        mode = _supervisor._supervision(args, own_process)
        if mode is not None:
            child_argv = list(argv) if argv is not None else sys.argv[1:]
            return _supervisor._supervise(args, child_argv, out, err, fork=mode == "fork", entry=main)
        return _COMMANDS[args.command](args, out)
    except KeyboardInterrupt:
        err.write("xlasdk: interrupted\n")
        return 130
    except BrokenPipeError:
        raise
    except BaseException as e:
        if isinstance(e, SystemExit):
            raise
        unknown_device = type(e).__name__ == "UnknownDeviceError" and type(e).__module__.startswith("xlasdk.")
        if isinstance(e, (UsageError, FormatError, ShapeError, DTypeError)) or unknown_device:
            code, kind = EXIT_USAGE, "error"
        elif isinstance(e, (CheckFailed, CompileError, XlaRuntimeError, XlaSdkError)):
            code, kind = failure_exit(args.command), "error"
        else:
            code, kind = failure_exit(args.command), f"internal error ({type(e).__name__})"
        if args.debug:
            traceback.print_exception(type(e), e, e.__traceback__, file=err)
        err.write(f"xlasdk {args.command}: {kind}: {_common._error_line(e)}\n")
        return code
