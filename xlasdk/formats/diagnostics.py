"""One-line descriptions of MLIR and XLA errors, for the messages of :class:`~xlasdk.FormatError`."""

from __future__ import annotations

import re


def _one_line(e: BaseException) -> str:
    """The first line of an exception message, without an absl status prefix (``INVALID_ARGUMENT: ``)."""
    for line in str(e).splitlines():
        line = line.strip()
        if line:
            return re.sub(r"^[A-Z_]{4,}: ", "", line)
    return type(e).__name__


def _mlir_problem(e: BaseException, kind: str) -> str:
    """A one-line description of an MLIR parse/verify error."""
    diags = getattr(e, "error_diagnostics", None) or []
    if diags:
        d = diags[0]
        loc = str(d.location)
        m = re.match(r'loc\("(.*)":(\d+):(\d+)\)$', loc)
        where = ""
        if m is not None and m.group(2) != "0":
            where = f"line {m.group(2)}: " if kind == "text" else ""
        else:
            m2 = re.match(r'loc\("([^"]*)"\)$', loc)
            if m2 is not None and kind == "hlo":
                where = f"instruction {m2.group(1)!r}: "
        more = f" (and {len(diags) - 1} more error(s))" if len(diags) > 1 else ""
        return where + str(d.message).splitlines()[0] + more
    msg = str(e)
    lines = [ln.strip() for ln in msg.splitlines() if ln.strip().startswith("error:")]
    return lines[0][6:].strip() if lines else _one_line(e)


def _xla_text_problem(e: BaseException) -> str:
    """XLA's parser message: 'INVALID_ARGUMENT: Syntax error ...\\nwas parsing 4:26: error: ...'."""
    msg = str(e)
    m = re.search(r"was parsing (\d+):(\d+): error: ([^\n]*)", msg)
    if m is not None:
        return f"line {m.group(1)}, column {m.group(2)}: {m.group(3).strip()}"
    line = _one_line(e)
    return re.sub(r"^[A-Z_]+: ", "", line)
