"""Shared pieces of the ``xlasdk`` command: exit codes, errors, the argparse parser class, the child's
status link (``_stage``, muted XLA start-up logs), devices, loading and small formatting helpers.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, NoReturn

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_USAGE = 2

#: The verbs that start XLA: run in a supervised child process (see ``_supervisor``; the other verbs
#: do not import it).
_SUPERVISED = frozenset({"devices", "inspect", "convert", "run", "compare"})


def failure_exit(command: str | None) -> int:
    """The exit code of ``command`` when it fails (an error, a timeout, a crash of XLA).

    ``compare`` keeps exit code 1 for a divergence and nothing else, so a script never reads a
    program that XLA refused to compile, or a device that failed, as "XLA computed it wrong": every
    failure of ``compare`` is 2 (its message says which). The other commands: 1."""
    return EXIT_USAGE if command == "compare" else EXIT_RUNTIME


class UsageError(Exception):
    """A bad command line or input file (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``xlasdk VERB: error: ... (see --help)``), exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


# -- small helpers ---------------------------------------------------------------------------------
def _api() -> Any:
    """The public API module: ``xlasdk`` once it exports the runtime, else ``xlasdk.runtime``."""
    import xlasdk

    if hasattr(xlasdk, "compile"):
        return xlasdk
    from xlasdk import runtime

    return runtime


@contextmanager
def _quiet_native_logs(enabled: bool) -> Iterator[None]:
    """Silence XLA's C++ log lines (fd 2) while a client starts, unless ``--debug``.

    In a supervised child the lines go to a file the parent reads if XLA ends the process there
    (an unknown flag in ``XLA_FLAGS`` does), so that its message is not lost."""
    if not enabled:
        yield
        return
    saved = None
    try:
        sys.stderr.flush()
        saved = os.dup(2)
        if _CHILD is not None:
            os.dup2(_CHILD.quiet_fd, 2)
        else:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            os.close(devnull)
    except OSError:  # pragma: no cover - no fd 2
        saved = None
    try:
        yield
    finally:
        if saved is not None:
            os.dup2(saved, 2)
            os.close(saved)


# -- the child's link to its supervising parent (see _supervisor) -----------------------------------
class _ChildLink:
    """The child's end: it reports stages and its exit code on ``status_fd``; XLA's muted start-up
    log goes to ``quiet_fd``."""

    def __init__(self, status_fd: int, quiet_fd: int) -> None:
        self.status_fd = status_fd
        self.quiet_fd = quiet_fd

    def send(self, line: str) -> None:
        try:
            os.write(self.status_fd, (line + "\n").encode())
        except OSError:  # the parent is gone
            pass


_CHILD: _ChildLink | None = None  # set in a supervised child (_supervisor._forked_child / _spawned_child)


def _stage(name: str) -> None:
    """Tell the supervising parent what the command does now (for its timeout / crash messages)."""
    if _CHILD is not None:
        _CHILD.send(f"stage {name}")


class CheckFailed(Exception):
    """What ``convert`` wrote does not load back or compile (exit code 1; nothing is written)."""


def error_kind(command: str | None, e: BaseException) -> tuple[int, str]:
    """``(exit code, "error" or "internal error (Type)")`` of the command that failed with ``e``."""
    from xlasdk.errors import CompileError, DTypeError, FormatError, ShapeError, XlaRuntimeError, XlaSdkError

    unknown_device = type(e).__name__ == "UnknownDeviceError" and type(e).__module__.startswith("xlasdk.")
    if isinstance(e, (UsageError, FormatError, ShapeError, DTypeError)) or unknown_device:
        return EXIT_USAGE, "error"
    if isinstance(e, (CheckFailed, CompileError, XlaRuntimeError, XlaSdkError)):
        return failure_exit(command), "error"
    return failure_exit(command), f"internal error ({type(e).__name__})"


def _error_line(e: BaseException) -> str:
    msg = " ".join(str(e).split()) or type(e).__name__
    return msg


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def _human_time(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1:
        return f"{s * 1e3:.3f} ms"
    return f"{s:.3f} s"


def _table(rows: list[list[str]], out: IO[str]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


def _device(args: argparse.Namespace) -> Any:
    rt = _api()
    from xlasdk.runtime.device import UnknownDeviceError, _resolve_device

    _stage("client")
    with _quiet_native_logs(not args.debug):
        if args.device is None:
            return rt.devices()[0]
        try:
            return _resolve_device(args.device)
        except UnknownDeviceError:
            # The API's message points at xs.client(...) / xs.load_pjrt_plugin(...); say it in CLI terms.
            raise UsageError(_unknown_device_message(args.device)) from None


def _topology_device(args: argparse.Namespace) -> Any:
    """The first compile-only device of ``--topology NAME`` (a TPU slice without a chip), None without
    the option; a name libtpu does not know (or no libtpu) is a usage error."""
    if args.topology is None:
        return None
    import xlasdk as xs

    try:
        return xs.topology(args.topology).devices[0]
    except (xs.UnknownDeviceError, xs.PluginError) as e:
        raise UsageError(f"--topology {args.topology}: {str(e).split(' — at ')[0].removeprefix('topology: ')}"
                         ) from None


def _unknown_device_message(spec: str, option: str = "--device") -> str:
    """Why ``--device SPEC`` (or ``option SPEC``) names no device, the devices there are, and how to
    get more CPU devices."""
    from xlasdk.runtime.device import UnknownDeviceError

    rt = _api()
    known = ", ".join(str(d) for d in rt.devices())
    more = (
        " (for more CPU devices set XLA_FLAGS=--xla_force_host_platform_device_count=N; "
        "see 'xlasdk devices')"
    )
    m = re.match(r"^\s*([A-Za-z_]\w*)\s*(?::\s*(\d+))?\s*$", spec)
    if m is None:
        return f"{option} {spec!r}: expected PLATFORM:ID such as cpu:0; the devices are {known} (see 'xlasdk devices')"
    platform = m.group(1)
    try:
        devs = rt.devices(platform)
    except UnknownDeviceError:
        return f"{option} {spec}: no platform {platform!r}; the devices are {known} (see 'xlasdk devices')"
    names = ", ".join(str(d) for d in devs)
    count = f"{len(devs)} device{'s' if len(devs) != 1 else ''}"
    hint = more if devs and devs[0].platform == "cpu" else " (see 'xlasdk devices')"
    return f"{option} {spec}: no such device; the {platform} platform has {count}: {names}{hint}"


def _check_exists(path: str) -> None:
    """A missing ``path`` as the loaders report it (``FormatError``, exit code 2), before any of them
    (and with them numpy and jaxlib) is imported."""
    if not os.path.lexists(path):
        from xlasdk.errors import FormatError

        raise FormatError(f"{path}: no such file")


def _load(path: str, fmt: str | None = None, option: str = "--format") -> Any:
    """``load_computation(path, fmt)``; errors about the forced format name ``option`` (``--from``...).

    A missing file is reported before the loaders (and with them jaxlib) are imported."""
    from xlasdk.errors import FormatError

    _check_exists(path)
    from xlasdk._jaxlib import isolated

    isolated.prestart()  # the worker imports jaxlib while this process does
    from xlasdk.formats import load_computation

    try:
        return load_computation(path, fmt)
    except FormatError as e:
        msg = str(e)
        if fmt is not None and msg.startswith("unknown format "):
            raise UsageError(f"{option} {fmt}: {msg}") from None
        said = f": format={fmt!r} says "  # the API's name for its format= argument
        if fmt is not None and said in msg:
            said_here = f": {option} {fmt} says "
            raise UsageError(msg.replace(said, said_here, 1) + f"; drop {option} to detect it") from None
        raise


def _load_program(args: argparse.Namespace) -> tuple[Any, Any]:
    """``(computation, snapshot or None)``: an ``HloSnapshot`` file (by its content, binary or text
    proto) is read whole, with its recorded arguments and result; any other file is loaded as a module.
    A missing file is reported first, as :func:`_load` reports it."""
    _check_exists(args.file)
    binary = args.format in (None, "pb", "proto", "hlo.pb") and not args.file.endswith((".hlo", ".txt", ".mlir",
                                                                                         ".mlirbc"))
    text = args.format is None and not args.file.endswith((".hlo", ".mlir", ".mlirbc"))
    if binary or text:
        head = b""
        if os.path.isfile(args.file):  # a FIFO would block open(); _load says what it is
            from xlasdk._jaxlib import isolated

            isolated.prestart()  # a snapshot, or _load's file: the worker imports jaxlib while this does
            try:
                with open(args.file, "rb") as f:
                    head = f.read(4096)
            except OSError:
                pass
        from xlasdk.formats.sniff import text_snapshot_kind

        # field 1, length-delimited: how every binary snapshot starts
        if (binary and head[:1] == b"\n") or (text and text_snapshot_kind(head) is not None):
            from xlasdk._atomic import read_regular_file
            from xlasdk.formats.snapshot import read_snapshot, snapshot_kind

            try:
                data = read_regular_file(args.file)
            except OSError:
                data = b""
            if data and (snapshot_kind(data) is not None or text_snapshot_kind(data) is not None):
                snap = read_snapshot(data, args.file)
                return snap.computation, snap
    return _load(args.file, args.format), None


def _check_writable(path: str, label: str) -> None:
    """Reject an output ``path`` that cannot be written (missing directory...) before any work is done.

    ``label`` starts the message, e.g. ``--output out.npz``.
    """
    full = os.path.abspath(path)
    parent = os.path.dirname(full)
    if os.path.isdir(full):
        raise UsageError(f"{label}: cannot write: it is a directory")
    if not os.path.exists(parent):
        raise UsageError(f"{label}: cannot write: directory {parent} does not exist")
    if not os.path.isdir(parent):
        raise UsageError(f"{label}: cannot write: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK) or (os.path.exists(full) and not os.access(full, os.W_OK)):
        raise UsageError(f"{label}: cannot write: permission denied")


def _npz_path(output: str) -> str:
    return output if output.endswith(".npz") else output + ".npz"  # the name np.savez would give


_ERR_STREAM: list[IO[str]] = []  # the error stream of the running main() (launch copies stderr there)


def _xla_flags(text: str | None) -> dict[str, Any]:
    """``--xla-flags "--xla_a=1 --xla_b"`` as DebugOptions overrides: ``{"xla_a": 1, "xla_b": True}``
    (true/false as booleans, numbers as numbers, anything else as text)."""
    out: dict[str, Any] = {}
    for item in (text or "").split():
        name, eq, raw = item.removeprefix("--").partition("=")
        if not re.fullmatch(r"xla_\w+", name):
            raise UsageError(f"--xla-flags: {item!r} is not an XLA flag (expected --xla_NAME=VALUE)")
        value: Any = True if not eq else raw
        if eq and raw.lower() in ("true", "false"):
            value = raw.lower() == "true"
        elif eq and re.fullmatch(r"-?\d+", raw):
            value = int(raw)
        elif eq and re.fullmatch(r"-?\d*\.\d+(e-?\d+)?", raw):
            value = float(raw)
        out[name] = value
    return out


def dump_options(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """The XLA options the dump file ``args.file`` was compiled with (its ``debug_options`` file's
    that change values: :func:`xlasdk.formats.debug_options.dump_debug_options`) and a line naming
    them for the report; ``({}, "")`` with ``--no-debug-options`` or when the file has none."""
    from xlasdk.formats.debug_options import debug_options_path, dump_debug_options

    if getattr(args, "no_debug_options", False) or (found := debug_options_path(args.file)) is None:
        return {}, ""
    opts = dump_debug_options(args.file)
    if not opts:
        return {}, ""
    shown = " ".join(f"--{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in opts.items())
    return opts, f"XLA options of the dump ({found.name}; --no-debug-options to leave them out): {shown}\n"
