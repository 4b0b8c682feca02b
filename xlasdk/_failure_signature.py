"""What kind of failure XLA had: the signature :func:`xlasdk.triage` (:mod:`xlasdk._triage`) groups modules by and
:func:`xlasdk.reduce` keeps while it shrinks a module (the same error, not the same words).

An abort is known by its check's location (``xprecision_rewriter.cc:2101`` of XLA's
``F0000 ... file.cc:NNN] ...`` line, ``Check failed`` and ``RET_CHECK failure (file.cc:NNN)``
included); a clean failure by its status code and its message with the names, numbers, shapes,
layouts and quoted strings replaced (``%reduce-precision.11 = f64[6005]{0}`` and
``%reduce-precision.3 = f64[1]{0}`` are the same), cut before any ``metadata=`` (which the reducer
drops).
"""

from __future__ import annotations

import re
from typing import Final

_RET_CHECK: Final = re.compile(r"RET_CHECK failure \(([^():\s]+):(\d+)\)")
_LOCATION: Final = re.compile(r"(?:^|[\s(])([\w./-]+\.(?:cc|cpp|c|h|hpp|td)):(\d+)\]")
_SIGNAL: Final = re.compile(r"\b(SIG[A-Z]+)\b")
_CODE: Final = re.compile(r"\b(UNIMPLEMENTED|INVALID_ARGUMENT|INTERNAL|FAILED_PRECONDITION|RESOURCE_EXHAUSTED|"
                          r"OUT_OF_RANGE|UNKNOWN|UNAVAILABLE|NOT_FOUND|ALREADY_EXISTS|ABORTED|"
                          r"DEADLINE_EXCEEDED|PERMISSION_DENIED|DATA_LOSS|CANCELLED):\s*")
_NORMALISE: Final = (
    (re.compile(r'"(?:[^"\\]|\\.)*"'), '""'),
    (re.compile(r"'(?:[^'\\]|\\.)*'"), "''"),
    (re.compile(r"\[[^\[\]]*\]"), "[]"),
    (re.compile(r"\{[^{}]*\}"), "{}"),
    (re.compile(r"%[\w.-]+"), "%_"),
    (re.compile(r"\b[a-z][\w-]*\.\d+\b"), "_"),  # an instruction's name: add.12
    (re.compile(r"0x[0-9a-fA-F]+"), "N"),
    (re.compile(r"\d+"), "N"),
    (re.compile(r"\s+"), " "),
)
_MAX: Final = 160


def location(text: str, *, log_first: bool = False) -> str | None:
    """``file.cc:NNN`` (the file's base name) of XLA's check in ``text``: a RET_CHECK's, else a
    log line's ``file.cc:NNN]`` (the log line's first when ``log_first``: the check that aborted,
    whose message may quote a RET_CHECK); None when it names none."""
    first, second = (_LOCATION, _RET_CHECK) if log_first else (_RET_CHECK, _LOCATION)
    m = first.search(text)
    if m is None:
        m = second.search(text)
    if m is None:
        return None
    return f"{m.group(1).rsplit('/', 1)[-1]}:{m.group(2)}"


def normalised(message: str) -> str:
    """``message`` with names, numbers, shapes, layouts and quoted strings replaced, cut before
    ``metadata=`` and at 160 characters."""
    text = message.split("metadata=", 1)[0]
    for _ in range(3):  # nested brackets, innermost first
        for pattern, repl in _NORMALISE[2:4]:
            text = pattern.sub(repl, text)
    for pattern, repl in _NORMALISE[:2] + _NORMALISE[4:]:
        text = pattern.sub(repl, text)
    text = text.strip(" ,;:")
    return text[:_MAX].rstrip()


def signature(message: str, *, died: bool) -> str:
    """The failure's signature: ``abort at FILE:LINE`` (``died``: the process died; the signal when
    XLA named no check), else ``CODE at FILE:LINE`` for a RET_CHECK, else ``CODE: normalised
    message`` (``error: ...`` without a status code)."""
    where = location(message, log_first=died)
    if died:
        if where is not None:
            return f"abort at {where}"
        sig = _SIGNAL.search(message)
        return f"died ({sig.group(1)})" if sig else "died"
    m = _CODE.search(message)
    code = m.group(1) if m else "error"
    if where is not None and "RET_CHECK" in message:
        return f"{code} at {where}"
    rest = message[m.end():] if m else message
    return f"{code}: {normalised(rest)}"
