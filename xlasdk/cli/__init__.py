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
import contextlib
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import IO, NoReturn, TextIO

from . import _common, _verbs
from ._common import EXIT_OK, EXIT_USAGE
from ._verbs import build_parser as build_parser

# The parser and the verb table come from the light _verbs: the verbs' modules (numpy, and through
# them jaxlib) are imported when a verb runs, so --help, version and the usage errors import neither.

__all__ = ["main", "build_parser"]


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
    except KeyboardInterrupt:  # before the verb's own handler (reading the command line)
        err.write("xlasdk: interrupted\n")
        return 130


def _main(argv: Sequence[str] | None, out: IO[str], err: IO[str], own_process: bool = False) -> int:
    parser = build_parser()
    try:
        # argparse writes its usage errors (a number that is not of its xlasdk._numbers kind among
        # them) to sys.stderr: they go to ``err``, as every other usage error, when main() is given one
        with contextlib.redirect_stderr(err):
            args = _parse(parser, argv)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2), already printed
        return int(e.code) if isinstance(e.code, int) else EXIT_USAGE
    if not hasattr(args, "debug"):
        args.debug = False
    with warnings.catch_warnings():
        warnings.showwarning = _plain_warnings(args.command, err)
        return _run_command(args, argv, out, err, own_process)


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line's namespace; SystemExit after --help or a usage error (printed)."""
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
    return args


def _plain_warnings(command: str, err: IO[str]) -> Callable[..., None]:
    """``warnings.showwarning`` for a command: xlasdk's own warnings (a cache that is off...) as one
    line ``xlasdk VERB: warning: ...``, not Python's form with xlasdk's file and source line."""
    previous = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        if f"{os.sep}xlasdk{os.sep}" in filename:
            err.write(f"xlasdk {command}: warning: {message}\n")
        else:
            previous(message, category, filename, lineno, file, line)

    return show


def _run_command(args: argparse.Namespace, argv: Sequence[str] | None, out: IO[str], err: IO[str],
                 own_process: bool) -> int:
    try:
        _common._ERR_STREAM[:] = [err]
        if args.command == "version" and own_process:
            from ._system import _one_blas_thread

            _one_blas_thread()
        if args.command not in _common._SUPERVISED:  # _supervisor would say so; its imports are not needed
            return _verbs.COMMANDS[args.command](args, out)
        from . import _supervisor

        mode = _supervisor._supervision(args, own_process)
        if mode is not None:
            child_argv = list(argv) if argv is not None else sys.argv[1:]
            return _supervisor._supervise(args, child_argv, out, err, fork=mode == "fork", entry=main)
        return _verbs.COMMANDS[args.command](args, out)
    except KeyboardInterrupt:
        err.write("xlasdk: interrupted\n")
        return 130
    except BrokenPipeError:
        raise
    except BaseException as e:
        if isinstance(e, SystemExit):
            raise
        code, kind = _common.error_kind(args.command, e)
        if args.debug:
            traceback.print_exception(type(e), e, e.__traceback__, file=err)
        err.write(f"xlasdk {args.command}: {kind}: {_common._error_line(e)}\n")
        return code
