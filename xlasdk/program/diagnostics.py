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
        more = ""
        if len(diags) > 1:
            names = [n.group(1) for n in (re.match(r'loc\("([^"]*)"\)$', str(o.location)) for o in diags[1:])
                     if n is not None and kind == "hlo"]
            shown = ", ".join(repr(n) for n in names[:5]) + (", ..." if len(names) > 5 else "")
            more = f" (and {len(diags) - 1} more error(s){', at instruction ' + shown if names else ''})"
        return where + str(d.message).splitlines()[0] + more
    msg = str(e)
    lines = [ln.strip() for ln in msg.splitlines() if ln.strip().startswith("error:")]
    return lines[0][6:].strip() if lines else _one_line(e)


def _xla_text_problem(e: BaseException) -> str:
    """XLA's parser message: 'INVALID_ARGUMENT: Syntax error ...\\nwas parsing 4:26: error: ...'."""
    msg = str(e)
    found = re.findall(r"was parsing (\d+):(\d+): error: ([^\n]*)", msg)
    if found:
        line, col, _ = found[0]
        # XLA stacks several messages for one place; the second often names the cause
        # ("cannot parse as an instruction name ...:" then "instruction does not exist: b").
        detail = [m.strip().rstrip(":") for ln, c, m in found if (ln, c) == (line, col)]
        text = detail[0] + (f" ({detail[1]})" if len(detail) > 1 and detail[1] != detail[0] else "")
        return f"line {line}, column {col}: {text}"
    line = re.sub(r"^[A-Z_]+: ", "", _one_line(e)).strip().rstrip(":")
    if line == "Syntax error when trying to parse the text as a HloModule":
        return "XLA's parser rejected it without saying where (look for impossible shapes, e.g. f32[-3])"
    return line
