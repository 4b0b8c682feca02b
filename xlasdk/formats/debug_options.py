"""The compiler options an XLA dump was made with: ``module_NNNN.NAME.debug_options``.

XLA writes, beside each module it dumps (``XLA_FLAGS=--xla_dump_to=DIR``, jaxlib 0.10.2 on), the
``DebugOptions`` it compiled that module with, as a text proto of the fields that differ from
XLA's defaults (``xla_cpu_enable_fast_min_max: false``, which JAX sets, changes what ``max`` gives
for NaN). XLA's ``run_hlo_module --debug_options_file`` replays a dump with them; so can xlasdk:
:func:`dump_debug_options` finds and reads the file of a dump file, and gives the options that
change what the compiled program computes, ready for ``compile(..., xla_flags=...)`` /
``compare(..., xla_flags=...)`` / ``--xla-flags``. Options that only say where and what to dump or
log (``xla_dump_*``, ``xla_detailed_logging``...) are left out: a replay writes no dump of its own.

The file is read strictly: a line that is not ``name: value`` (a bool, a number, a quoted string, an
enum name), or a nested message (a map option such as ``xla_backend_extra_options``), is a
:class:`~xlasdk.errors.FormatError` naming the file and line, never skipped.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Final, Union

from .._atomic import read_regular_file
from ..errors import FormatError

__all__ = ["dump_debug_options", "debug_options_path", "read_debug_options", "NOT_REPLAYED"]

Value = Union[bool, int, float, str]

#: Options of a dump's file that a replay leaves out: where and what XLA dumps and logs.
NOT_REPLAYED: Final = re.compile(r"xla_dump_\w*|xla_enable_dumping|xla_detailed_logging|xla_log_\w*")

_LINE: Final = re.compile(r"\s*(xla_\w+)\s*:\s*(.*?)\s*")
_DUMP_FILE: Final = re.compile(r"(module_\d+\.[^/]+?)\.(?:before_optimizations|\w+_after_optimizations|ir-|"
                               r"\d+\.\w+\.after_)")


def debug_options_path(dump_file: str | Path) -> Path | None:
    """The ``module_NNNN.NAME.debug_options`` file beside ``dump_file`` (a file of an XLA dump:
    ``module_0002.jit_f.before_optimizations.txt``, ``...cpu_after_optimizations.hlo.pb``), or None
    when the name is not a dump file's or the dump holds no such file."""
    path = Path(dump_file)
    m = _DUMP_FILE.match(path.name)
    if m is None:
        return None
    found = path.with_name(f"{m.group(1)}.debug_options")
    return found if found.is_file() else None


def _value(raw: str) -> Value | None:
    if raw in ("true", "false"):
        return raw == "true"
    if re.fullmatch(r"-?\d+", raw):
        return int(raw)
    if re.fullmatch(r"-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?|-?inf|nan", raw):
        return float(raw)
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", raw):  # an enum value's name
        return raw
    if re.fullmatch(r"\"(?:[^\"\\]|\\.)*\"", raw):
        text = ast.literal_eval(raw)
        return text if isinstance(text, str) else None
    return None


def read_debug_options(path: str | Path) -> dict[str, Value | list[Value]]:
    """Every option of a ``debug_options`` file, in file order (a repeated field: a list).

    Raises
    ------
    FormatError
        A line that is not ``xla_NAME: VALUE`` with a scalar value (a nested message, a field of
        another name, an unreadable value), naming the file and line; a file that is not UTF-8.
    """
    data = read_regular_file(path, 1 << 20)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(f"{path}: a debug_options file is UTF-8 text, got bytes that are not ({e.reason} at "
                          f"byte {e.start})") from None
    out: dict[str, Value | list[Value]] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _LINE.fullmatch(line)
        value = _value(m.group(2)) if m is not None else None
        if m is None or value is None:
            raise FormatError(f"{path}:{n}: expected 'xla_NAME: VALUE' (a bool, number, quoted string or enum "
                              f"name), got {line.strip()[:80]!r}; nested options (maps) cannot be replayed")
        name = m.group(1)
        if name in out:
            prev = out[name]
            out[name] = [*prev, value] if isinstance(prev, list) else [prev, value]
        else:
            out[name] = value
    return out


def dump_debug_options(dump_file: str | Path) -> dict[str, Value]:
    """The options an XLA dump file was compiled with that change what it computes: the
    ``debug_options`` file beside it (:func:`debug_options_path`) without :data:`NOT_REPLAYED`'s,
    a repeated option's values joined by commas as ``XLA_FLAGS`` spells them; {} when there is no
    such file.

    Pass them on to replay the dump as it ran:
    ``xs.compile(comp, options=xs.CompileOptions(env_option_overrides=opts))``,
    ``xs.compare(comp, args, xla_flags=opts)``; XLA refuses an option it does not know (a dump of
    another release) when the program is compiled.

    Raises
    ------
    FormatError
        The file cannot be read (:func:`read_debug_options`).
    """
    path = debug_options_path(dump_file)
    if path is None:
        return {}
    return {k: ",".join(str(x).lower() if isinstance(x, bool) else str(x) for x in v) if isinstance(v, list) else v
            for k, v in read_debug_options(path).items() if not NOT_REPLAYED.fullmatch(k)}
