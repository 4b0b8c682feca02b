"""The ``xlasdk`` command: list devices, inspect, convert and run XLA computations.

A thin argparse layer over the public API. Verbs: ``devices``, ``version``, ``inspect``,
``convert``, ``run``, ``cache info|clear``; ``xlasdk VERB --help`` documents each.

Exit codes: 0 success; 1 runtime failure (compilation or execution); 2 usage or input error
(bad arguments, unreadable or invalid files, inputs that do not match the program). Errors are
one line on stderr, ``xlasdk VERB: error: ...``; ``--debug`` adds the Python traceback and XLA's own
log output. Output piped into a reader that leaves early (``xlasdk inspect f.hlo | head -1``) ends
the command quietly with exit code 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
import traceback
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Any, NoReturn

import numpy as np

__all__ = ["main", "build_parser"]

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_USAGE = 2


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
    """Silence XLA's C++ log lines (fd 2) while a client starts, unless ``--debug``."""
    if not enabled:
        yield
        return
    saved = None
    try:
        sys.stderr.flush()
        saved = os.dup(2)
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

    with _quiet_native_logs(not args.debug):
        if args.device is None:
            return rt.devices()[0]
        try:
            return _resolve_device(args.device)
        except UnknownDeviceError:
            # The API's message points at xs.client(...) / xs.load_pjrt_plugin(...); say it in CLI terms.
            raise UsageError(_unknown_device_message(args.device)) from None


def _unknown_device_message(spec: str) -> str:
    """Why ``--device SPEC`` names no device, the devices there are, and how to get more CPU devices."""
    from xlasdk.runtime.device import UnknownDeviceError

    rt = _api()
    known = ", ".join(str(d) for d in rt.devices())
    more = (
        " (for more CPU devices set XLA_FLAGS=--xla_force_host_platform_device_count=N; "
        "see 'xlasdk devices')"
    )
    m = re.match(r"^\s*([A-Za-z_]\w*)\s*(?::\s*(\d+))?\s*$", spec)
    if m is None:
        return f"--device {spec!r}: expected PLATFORM:ID such as cpu:0; the devices are {known} (see 'xlasdk devices')"
    platform = m.group(1)
    try:
        devs = rt.devices(platform)
    except UnknownDeviceError:
        return f"--device {spec}: no platform {platform!r}; the devices are {known} (see 'xlasdk devices')"
    names = ", ".join(str(d) for d in devs)
    count = f"{len(devs)} device{'s' if len(devs) != 1 else ''}"
    hint = more if devs and devs[0].platform == "cpu" else " (see 'xlasdk devices')"
    return f"--device {spec}: no such device; the {platform} platform has {count}: {names}{hint}"


def _load(path: str, fmt: str | None = None, option: str = "--format") -> Any:
    """``load_computation(path, fmt)``; errors about the forced format name ``option`` (``--from``...)."""
    from xlasdk.errors import FormatError
    from xlasdk.formats import load_computation

    try:
        return load_computation(path, fmt)
    except FormatError as e:
        msg = str(e)
        if fmt is not None and msg.startswith("unknown format "):
            raise UsageError(f"{option} {fmt}: {msg}") from None
        if fmt is not None and ": the suffix says " in msg:  # the API's name for its format= argument
            raise UsageError(
                msg.replace(": the suffix says ", f": {option} {fmt} says ", 1) + f"; drop {option} to detect it"
            ) from None
        raise


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


# -- devices / version --------------------------------------------------------------------------------
def _cmd_devices(args: argparse.Namespace, out: IO[str]) -> int:
    rt = _api()
    from xlasdk.runtime.device import UnknownDeviceError

    with _quiet_native_logs(not args.debug):
        try:
            devs = rt.devices(args.platform)
        except UnknownDeviceError:
            known = ", ".join(str(d) for d in rt.devices())
            raise UsageError(f"--platform {args.platform}: no such platform; the devices are {known}") from None
    rows = [["DEVICE", "PLATFORM", "ID", "KIND"]]
    for d in devs:
        rows.append([str(d), str(d.platform), str(d.id), str(d.device_kind)])
    _table(rows, out)
    return EXIT_OK


def _cmd_version(args: argparse.Namespace, out: IO[str]) -> int:
    from xlasdk import __version__
    from xlasdk._jaxlib import mlir

    out.write(
        f"xlasdk {__version__}\njaxlib {mlir.JAXLIB_VERSION}\n"
        f"stablehlo {mlir.stablehlo_current_version()} (writes portable artifacts back to "
        f"{mlir.stablehlo_minimum_version()})\npython {sys.version.split()[0]}\n"
    )
    return EXIT_OK


# -- inspect ------------------------------------------------------------------------------------------
def _format_label(comp: Any, path: str) -> str:
    from xlasdk.formats import Format, portable_artifact_version

    fmt = comp.source_format
    label = Format(fmt).description if fmt else "?"
    if fmt == Format.PORTABLE_ARTIFACT.value:
        try:
            with open(path, "rb") as f:
                v = portable_artifact_version(f.read(64))
        except OSError:
            v = None
        label += f", StableHLO v{v}" if v else " (plain MLIR bytecode)"
    return label


_COMP_HEADER_RE = re.compile(r"^(ENTRY\s+)?%?([^\s(]+)\s*\(.*\{\s*$")


def _op_counts(hlo_text: str) -> tuple[Counter[str], list[tuple[str, Counter[str]]]]:
    """Opcode counts of the entry computation, and ``(name, counts)`` of every other computation.

    Sub-computations are reducer / comparator / loop-body regions the entry computation calls;
    their parameters and instructions are not the program's, so they are counted apart.
    """
    from xlasdk.formats import hlo_opcode_counts
    from xlasdk.formats.hlo_text import _parse_hlo_text

    mod = _parse_hlo_text(hlo_text)
    comps: list[tuple[str, bool, Counter[str]]] = []
    if mod is not None:
        for c in mod.comps:
            comps.append((c.name, c.entry, Counter(i.opcode for i in c.instrs)))
    else:  # text the small parser does not follow: XLA prints one computation block per header line
        name, entry = "", False
        body: list[str] = []
        for line in hlo_text.splitlines():
            m = _COMP_HEADER_RE.match(line)
            if m is not None:
                name, entry, body = m.group(2), m.group(1) is not None, []
            elif line.startswith("}") and name:
                comps.append((name, entry, hlo_opcode_counts("\n".join(body))))
                name = ""
            elif name:
                body.append(line)
    if not comps:
        return hlo_opcode_counts(hlo_text), []
    entry_idx = next((i for i, c in enumerate(comps) if c[1]), len(comps) - 1)  # HLO: ENTRY, else the last
    subs = [(n, c) for i, (n, _, c) in enumerate(comps) if i != entry_idx]
    return comps[entry_idx][2], subs


def _sorted_counts(counts: Counter[str]) -> dict[str, int]:
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _cmd_inspect(args: argparse.Namespace, out: IO[str]) -> int:
    comp = _load(args.file, args.format)
    ps = comp.program_shape()
    counts, subs = _op_counts(comp.as_hlo_text(print_metadata=False))
    sub_counts: Counter[str] = Counter()
    for _, c in subs:
        sub_counts.update(c)
    report: dict[str, Any] = {
        "file": args.file,
        "format": _format_label(comp, args.file),
        "name": comp.name,
        "program_shape": str(ps),
        "parameters": [
            {"index": i, "name": n, "shape": str(s)}
            for i, (n, s) in enumerate(zip(ps.parameter_names(), ps.parameter_shapes(), strict=True))
        ],
        "result": str(ps.result_shape()),
        "op_counts": _sorted_counts(counts),
        "sub_computations": {
            "count": len(subs),
            "names": [n for n, _ in subs],
            "op_counts": _sorted_counts(sub_counts),
        },
    }
    exe = None
    if not args.no_compile:
        dev = _device(args)
        rt = _api()
        exe = rt.compile(comp, dev)
        report["device"] = str(dev)
        report["cost_analysis"] = exe.cost_analysis()
        report["memory"] = exe.memory_stats().as_dict()
    if args.json:
        if args.optimized and exe is not None:
            report["optimized_hlo"] = exe.hlo_text()
        if args.hlo:
            report["hlo"] = comp.as_hlo_text()
        if args.stablehlo:
            report["stablehlo"] = comp.as_stablehlo_text()
        out.write(json.dumps(report, indent=2) + "\n")
        return EXIT_OK
    out.write(f"file:          {args.file} ({report['format']})\n")
    out.write(f"name:          {comp.name}\n")
    out.write(f"program shape: {ps}\n")
    out.write("parameters:\n")
    if not report["parameters"]:
        out.write("  (none)\n")
    for p in report["parameters"]:
        out.write(f"  {p['index']:>3}  {p['name']:<20} {p['shape']}\n")
    out.write(f"result:        {ps.result_shape()}\n")
    out.write(f"ops:           {sum(counts.values())} HLO instructions in the entry computation\n")
    for op, n in report["op_counts"].items():
        out.write(f"  {op:<28} {n}\n")
    if subs:
        label = f"in {len(subs)} sub-computation{'s' if len(subs) != 1 else ''}:"
        shown = ", ".join(n for n, _ in subs[:4]) + (", ..." if len(subs) > 4 else "")
        out.write(f"  {label:<28} {sum(sub_counts.values())} more ({shown})\n")
        for op, n in report["sub_computations"]["op_counts"].items():
            out.write(f"    {op:<26} {n}\n")
    if exe is not None:
        out.write(f"cost analysis ({report['device']}):\n")
        for k, v in sorted(report["cost_analysis"].items()):
            if "{" in k:  # per-operand / per-output breakdowns
                continue
            out.write(f"  {k:<28} {v:,.0f}\n")
        out.write("memory:\n")
        for k, v in report["memory"].items():
            if v or not k.startswith("host_"):
                out.write(f"  {k:<34} {_human_bytes(v)}\n")
    if args.hlo:
        out.write("\nHLO:\n" + comp.as_hlo_text())
    if args.stablehlo:
        out.write("\nStableHLO:\n" + comp.as_stablehlo_text())
    if args.optimized:
        if exe is None:
            raise UsageError("--optimized needs compilation; drop --no-compile")
        out.write("\noptimized HLO:\n" + exe.hlo_text())
    return EXIT_OK


# -- convert ------------------------------------------------------------------------------------------
def _cmd_convert(args: argparse.Namespace, out: IO[str]) -> int:
    from xlasdk.errors import FormatError
    from xlasdk.formats import Format, _parse_format, format_from_suffix, portable_artifact_version, save_computation
    from xlasdk.formats.sniff import _SUFFIX_LIST

    to = args.to_format
    if to is not None:
        try:
            _parse_format(to)
        except FormatError as e:
            raise UsageError(f"--to {to}: {e}") from None
    elif format_from_suffix(args.output) is None and not args.output.lower().endswith(".txt"):
        raise UsageError(
            f"{args.output}: unknown suffix; use one of {_SUFFIX_LIST}, or pass --to FORMAT (hlo, mlir, mlirbc or pb)"
        )
    _check_writable(args.output, args.output)
    comp = _load(args.input, args.from_format, "--from")
    try:
        save_computation(comp, args.output, to, target_version=args.target_version)
    except FormatError as e:  # the API's wording: save('OUT'): ..., format=, target_version
        msg = str(e)
        prefix = f"save({args.output!r}): "
        if msg.startswith(prefix):
            msg = f"{args.output}: " + msg[len(prefix):]
        msg = msg.replace("target_version", "--target-version").replace("pass format=", "pass --to FORMAT")
        raise UsageError(msg) from None
    size = os.path.getsize(args.output)
    fmt = _parse_format(to) if to else (format_from_suffix(args.output) or Format.HLO_TEXT)
    label = fmt.description
    if fmt is Format.PORTABLE_ARTIFACT:
        with open(args.output, "rb") as f:
            v = portable_artifact_version(f.read(64))
        label += f", StableHLO v{v}" if v else ""
    out.write(f"wrote {args.output} ({label}, {size} bytes)\n")
    return EXIT_OK


# -- run ----------------------------------------------------------------------------------------------
def _describe_array(a: np.ndarray[Any, Any]) -> str:
    from xlasdk.types import dtype_to_etype, hlo_element_name

    try:
        et = hlo_element_name(dtype_to_etype(a.dtype))
    except Exception:
        et = str(a.dtype)
    return f"{et}[{','.join(str(d) for d in a.shape)}]"


def _param_index(name: str, names: Sequence[str]) -> int | None:
    if name in names:
        return list(names).index(name)
    for prefix in ("", "p", "arg", "arr_", "param"):
        rest = name[len(prefix) :] if name.startswith(prefix) else None
        if rest is not None and rest.isdigit() and int(rest) < len(names):
            return int(rest)
    return None


def _load_npy(path: str, what: str) -> np.ndarray[Any, Any]:
    try:
        a = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise UsageError(f"{what}: {path}: no such file") from None
    except (OSError, ValueError, EOFError) as e:
        raise UsageError(f"{what}: {path}: not a readable .npy file ({e})") from None
    if not isinstance(a, np.ndarray):
        raise UsageError(f"{what}: {path}: holds several arrays; use --inputs for .npz files")
    return a


def _random_value(shape: Any, rng: np.random.Generator) -> np.ndarray[Any, Any]:
    dt = shape.numpy_dtype()
    dims = tuple(shape.dimensions())
    kind = np.dtype(dt).kind
    if kind == "b":
        return rng.random(dims) < 0.5
    if kind in "iu":
        return rng.integers(0, 10, size=dims).astype(dt)
    if kind == "c":
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(dt)
    return rng.standard_normal(dims).astype(dt)


def _gather_inputs(args: argparse.Namespace, ps: Any) -> list[np.ndarray[Any, Any]]:
    names = list(ps.parameter_names())
    shapes = list(ps.parameter_shapes())
    given: dict[int, tuple[np.ndarray[Any, Any], str]] = {}

    listing = ", ".join(f"{i}:{n}" for i, n in enumerate(names))

    def assign(key: str, arr: np.ndarray[Any, Any], source: str, where: str) -> None:
        idx = _param_index(key, names)
        if idx is None and key.isdigit():
            have = f"{len(names)} parameter{'s' if len(names) != 1 else ''}"
            raise UsageError(
                f"{where}: parameter index {int(key)} is out of range; the program has {have}"
                + (f": {listing}" if names else "")
            )
        if idx is None:
            raise UsageError(f"{where}: no parameter named {key!r}; parameters are {listing or '(none)'}")
        if idx in given:
            raise UsageError(f"{where}: parameter {idx} ({names[idx]!r}) is given twice")
        given[idx] = (arr, source)

    if args.inputs is not None:
        try:
            npz = np.load(args.inputs, allow_pickle=False)
        except FileNotFoundError:
            raise UsageError(f"--inputs: {args.inputs}: no such file") from None
        except (OSError, ValueError, EOFError) as e:
            raise UsageError(f"--inputs: {args.inputs}: not a readable .npz file ({e})") from None
        if isinstance(npz, np.ndarray):
            raise UsageError(f"--inputs: {args.inputs}: a single array; use --input NAME={args.inputs}")
        with npz:
            for key in npz.files:
                assign(key, npz[key], f"{args.inputs}[{key}]", f"--inputs {args.inputs}[{key}]")
    for spec in args.input or []:
        if "=" not in spec:
            raise UsageError(f"--input {spec!r}: expected NAME=FILE.npy")
        key, path = spec.split("=", 1)
        assign(key, _load_npy(path, f"--input {key}"), path, f"--input {spec}")
    rng = np.random.default_rng(args.seed)
    values: list[np.ndarray[Any, Any]] = []
    for i, (n, s) in enumerate(zip(names, shapes, strict=True)):
        if not s.is_array():
            raise UsageError(f"parameter {i} ({n!r}) has shape {s}: only array parameters can be given as inputs")
        if i not in given:
            if not args.random_inputs:
                raise UsageError(
                    f"missing input for parameter {i} ({n!r}, {s}); give --input {n}=FILE.npy, --inputs FILE.npz "
                    "or --random-inputs"
                )
            values.append(_random_value(s, rng))
            continue
        arr, source = given[i]
        want_dt = np.dtype(s.numpy_dtype())
        if tuple(arr.shape) != tuple(s.dimensions()) or arr.dtype != want_dt:
            raise UsageError(f"input for parameter {i} ({n!r}) must be {s}, but {source} holds {_describe_array(arr)}")
        values.append(arr)
    return values


def _summary(a: np.ndarray[Any, Any]) -> str:
    if a.size == 0:
        return "(empty)"
    flat = a.reshape(-1)
    try:
        f = flat.astype(np.float64) if a.dtype.kind not in "bc" else None
    except (TypeError, ValueError):
        f = None
    if f is not None:
        with np.errstate(all="ignore"):
            stats = f"min {np.nanmin(f):.6g}  max {np.nanmax(f):.6g}  mean {np.nanmean(f):.6g}"
        nan = int(np.isnan(f).sum())
        if nan:
            stats += f"  nan {nan}"
    elif a.dtype.kind == "b":
        stats = f"true {int(flat.sum())} of {flat.size}"
    else:
        stats = f"abs max {float(np.abs(flat).max()):.6g}"
    head = np.array2string(flat[:6], max_line_width=sys.maxsize, precision=6, separator=", ", threshold=6)
    if flat.size > 6:
        head = head[:-1] + ", ...]"
    return f"{stats}  {head}"


def _cmd_run(args: argparse.Namespace, out: IO[str]) -> int:
    if args.repeat < 1:
        raise UsageError(f"--repeat must be >= 1, got {args.repeat}")
    if args.output is not None:  # before the (slow) load and compile
        npz = args.output if args.output.endswith(".npz") else args.output + ".npz"  # what np.savez writes
        _check_writable(npz, f"--output {args.output}")
    comp = _load(args.file, args.format)
    ps = comp.program_shape()
    inputs = _gather_inputs(args, ps)
    dev = _device(args)
    rt = _api()
    t0 = time.perf_counter()
    exe = rt.compile(comp, dev)
    compile_s = time.perf_counter() - t0
    result = exe(*inputs)
    outs = list(result) if isinstance(result, tuple) else [result]
    host = [np.asarray(o) for o in outs]
    out.write(
        f"{comp.name} on {dev}: {len(inputs)} input(s), {len(host)} output(s); "
        f"compiled in {_human_time(compile_s)}\n"
    )
    for i, a in enumerate(host):
        out.write(f"  output {i}: {_describe_array(a):<16} {_summary(a)}\n")
    if args.repeat > 1:
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            r = exe(*inputs)
            for o in r if isinstance(r, tuple) else (r,):
                o.block_until_ready()
            times.append(time.perf_counter() - t)
        out.write(
            f"  time per run over {args.repeat} runs: min {_human_time(min(times))}, "
            f"median {_human_time(statistics.median(times))}\n"
        )
    if args.output is not None:
        try:
            savez: Any = np.savez
            savez(args.output, **{f"output_{i}": a for i, a in enumerate(host)})
        except OSError as e:
            raise UsageError(f"--output {args.output}: cannot write: {e.strerror or e}") from None
        out.write(f"  wrote {args.output if args.output.endswith('.npz') else args.output + '.npz'}\n")
    return EXIT_OK


# -- cache --------------------------------------------------------------------------------------------
def _cmd_cache(args: argparse.Namespace, out: IO[str]) -> int:
    from xlasdk.runtime.cache import CompileCache

    cache = CompileCache(args.dir)
    if args.cache_command == "info":
        out.write(str(cache.info()) + "\n")
        if args.list:
            for e in reversed(cache.entries()):
                stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.last_used))
                out.write(f"  {e.key[:16]}  {_human_bytes(e.size):>10}  {stamp}  {e.name}\n")
        return EXIT_OK
    n = cache.clear()
    out.write(f"removed {n} entr{'y' if n == 1 else 'ies'} from {cache.directory}\n")
    return EXIT_OK


# -- parser -------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the ``xlasdk`` command."""
    common = _Parser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show Python tracebacks and XLA's log output on errors")
    p = _Parser(
        prog="xlasdk",
        description="Build, inspect, convert and run XLA computations.",
        epilog="Exit codes: 0 success, 1 runtime failure, 2 usage or input error.",
        parents=[common],
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="VERB", parser_class=_Parser)

    s = sub.add_parser("devices", parents=[common], help="list the devices of a platform",
                       description="A table of the devices of a platform (default: the default platform).")
    s.add_argument("--platform", default=None, help="platform name, e.g. cpu, cuda (default: the default platform)")
    s.set_defaults(verb_parser=s)

    s = sub.add_parser("version", parents=[common], help="print the xlasdk, jaxlib and StableHLO versions",
                       description="Print the xlasdk, jaxlib, StableHLO and Python versions.")
    s.set_defaults(verb_parser=s)

    fmt_help = "force the input format: hlo, mlir, mlirbc or pb (default: by suffix, then by content)"
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
    s.set_defaults(verb_parser=s)

    s = sub.add_parser(
        "convert", parents=[common], help="convert a module between file formats",
        description="Convert a module between HLO text (.hlo, .hlo.txt, .txt), StableHLO text (.mlir), StableHLO "
                    "portable artifacts (.mlirbc) and HLO module protos (.pb). Formats follow the suffixes.",
    )
    s.add_argument("input", metavar="IN", help="the module to read")
    s.add_argument("output", metavar="OUT", help="the file to write (format from its suffix)")
    s.add_argument("--target-version", default=None,
                   help="StableHLO version of a .mlirbc artifact, e.g. 1.9.0, or WEEK_4, WEEK_12, MAX, current "
                        "(default: the oldest version that holds every op)")
    s.add_argument("--from", dest="from_format", default=None, help=fmt_help)
    s.add_argument("--to", dest="to_format", default=None, help="force the output format: hlo, mlir, mlirbc or pb")
    s.set_defaults(verb_parser=s)

    s = sub.add_parser(
        "run", parents=[common], help="run a module on a device and summarize its outputs",
        description="Compile and run a module (any format, XLA dumps included) on a device; print each output's "
                    "shape and a summary of its values, and with --repeat the min/median time per run. Inputs "
                    "come from .npy files (--input NAME=FILE, NAME being a parameter name or index), an .npz "
                    "(--inputs, keyed by parameter names) or random values (--random-inputs).",
    )
    s.add_argument("file", metavar="FILE", help="the module file")
    s.add_argument("--format", default=None, help=fmt_help)
    s.add_argument("--device", default=None, help="device to run on, e.g. cpu:0 (default: the first device)")
    s.add_argument("--input", action="append", metavar="NAME=FILE.npy", help="one parameter's value (repeatable)")
    s.add_argument("--inputs", metavar="FILE.npz", default=None, help="parameter values keyed by parameter name")
    s.add_argument("--random-inputs", action="store_true", help="random values for parameters not given")
    s.add_argument("--seed", type=int, default=0, help="seed of --random-inputs (default 0)")
    s.add_argument("--output", metavar="OUT.npz", default=None, help="save the outputs (output_0, output_1, ...)")
    s.add_argument("--repeat", type=int, default=1, metavar="N", help="run N times and report min/median time")
    s.set_defaults(verb_parser=s)

    s = sub.add_parser("cache", parents=[common], help="inspect or clear the compile cache",
                       description="The on-disk compile cache (XLASDK_CACHE_DIR, default ~/.cache/xlasdk).")
    csub = s.add_subparsers(dest="cache_command", required=True, metavar="ACTION", parser_class=_Parser)
    for name, hlp in (("info", "entry count and size (--list: every entry)"), ("clear", "delete every entry")):
        c = csub.add_parser(name, parents=[common], help=hlp, description=hlp[0].upper() + hlp[1:] + ".")
        c.add_argument("--dir", default=None,
                       help="the cache directory (default: $XLASDK_CACHE_DIR or ~/.cache/xlasdk)")
        if name == "info":
            c.add_argument("--list", action="store_true", help="list the entries, most recently used first")
        c.set_defaults(verb_parser=c)
    return p


_COMMANDS = {
    "devices": _cmd_devices,
    "version": _cmd_version,
    "inspect": _cmd_inspect,
    "convert": _cmd_convert,
    "run": _cmd_run,
    "cache": _cmd_cache,
}


def _error_line(e: BaseException) -> str:
    msg = " ".join(str(e).split()) or type(e).__name__
    return msg


def _unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace, extras: list[str]) -> NoReturn:
    """Report arguments no parser took as the verb's usage error (``xlasdk run: error: ...``)."""
    verb_parser: argparse.ArgumentParser = getattr(args, "verb_parser", parser)
    msg = f"unrecognized arguments: {' '.join(extras)}"
    bad = [spec for spec in getattr(args, "input", None) or [] if "=" not in spec]
    if bad:
        msg += f"; --input takes NAME=FILE.npy as one argument, e.g. --input {bad[0]}={extras[0]}"
    verb_parser.error(msg)


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
    """
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    try:
        code = _main(argv, out, err)
        out.flush()
        return code
    except BrokenPipeError:
        _silence_stdout(out)
        return EXIT_OK


def _main(argv: Sequence[str] | None, out: IO[str], err: IO[str]) -> int:
    parser = build_parser()
    try:
        args, extras = parser.parse_known_args(argv)
        if extras:
            _unrecognized(parser, args, extras)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2), already printed
        return int(e.code) if isinstance(e.code, int) else EXIT_USAGE
    if not hasattr(args, "debug"):
        args.debug = False
    from xlasdk.errors import CompileError, DTypeError, FormatError, ShapeError, XlaRuntimeError, XlaSdkError
    from xlasdk.runtime.device import UnknownDeviceError

    try:
        return _COMMANDS[args.command](args, out)
    except KeyboardInterrupt:
        err.write("xlasdk: interrupted\n")
        return 130
    except BrokenPipeError:
        raise
    except BaseException as e:
        if isinstance(e, SystemExit):
            raise
        if isinstance(e, (UsageError, FormatError, ShapeError, DTypeError, UnknownDeviceError)):
            code, kind = EXIT_USAGE, "error"
        elif isinstance(e, (CompileError, XlaRuntimeError, XlaSdkError)):
            code, kind = EXIT_RUNTIME, "error"
        else:
            code, kind = EXIT_RUNTIME, f"internal error ({type(e).__name__})"
        if args.debug:
            traceback.print_exception(type(e), e, e.__traceback__, file=err)
        err.write(f"xlasdk {args.command}: {kind}: {_error_line(e)}\n")
        return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
