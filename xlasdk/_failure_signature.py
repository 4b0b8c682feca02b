"""What kind of failure XLA had: the signature :func:`xlasdk.triage` (:mod:`xlasdk._triage`) groups modules by and
:func:`xlasdk.reduce` keeps while it shrinks a module (the same error, not the same words).

An abort is known by its check's location (``xprecision_rewriter.cc:2101`` of XLA's
``F0000 ... file.cc:NNN] ...`` line, ``Check failed`` and ``RET_CHECK failure (file.cc:NNN)`` /
``LLO_CHECK failure (...)`` included); a clean failure by its status code and its message with what
is particular to one module blanked: sizes and layouts of shapes (``f64[6005]{0}`` is ``f64[_]``: the
element type stays), instruction names (``%reduce-precision.11`` is ``%_``, a quoted
``"get-tuple-element.36"`` is ``"get-tuple-element"``), numbers, addresses and paths (a source
file's base name stays); XLA's fixed words stay (``X{64|128}``, ``c128``, ``custom_call_target``'s
quoted target), and the message is cut before any ``metadata=`` (which the reducer drops).

Where the message shows the instruction that failed (``%x = f64[4] reduce-precision(...)``, a
quoted ``"concatenate.9"``) or names its opcode in XLA's words (``Unsupported CVT`` is a convert,
``HandleDynamicSlice`` a dynamic-slice), the opcode follows the signature's head in parentheses:
``UNIMPLEMENTED (reduce-precision): While rewriting ...``, ``abort at xprecision_rewriter.cc:2101
(convert)``.
"""

from __future__ import annotations

import re
from typing import Final

_CHECK: Final = re.compile(r"\b[A-Z]+_CHECK failure \(([^():\s]+):(\d+)\)")
_LOCATION: Final = re.compile(r"(?:^|[\s(])([\w./-]+\.(?:cc|cpp|c|h|hpp|td)):(\d+)\]")
_SIGNAL: Final = re.compile(r"\b(SIG[A-Z]+)\b")
_CODE: Final = re.compile(r"\b(UNIMPLEMENTED|INVALID_ARGUMENT|INTERNAL|FAILED_PRECONDITION|RESOURCE_EXHAUSTED|"
                          r"OUT_OF_RANGE|UNKNOWN|UNAVAILABLE|NOT_FOUND|ALREADY_EXISTS|ABORTED|"
                          r"DEADLINE_EXCEEDED|PERMISSION_DENIED|DATA_LOSS|CANCELLED):\s*")
#: an array shape: element type, dimensions (``?`` and ``<=N`` of dynamic ones), and its layout if printed
_SHAPE: Final = re.compile(r"\b([a-z][a-z0-9]*)\[[\d,?<=\s]*\](?:\{[^{}]*\})?")
#: XLA's words for a family of element types (``X{64|128}``): not numbers to blank
_FAMILY: Final = re.compile(r"\b[A-Z]\{\d+(?:\|\d+)*\}")
_PATH: Final = re.compile(r"(?<![\w.])/?(?:[\w.+-]+/)+([\w.+-]+)")
_SOURCE: Final = re.compile(r"\.(?:cc|cpp|c|h|hpp|td|py)$")
_NORMALISE: Final = (
    (re.compile(r"%[\w.-]+"), "%_"),  # an instruction's or computation's name
    (re.compile(r"\b([a-z][a-z0-9_-]*)\.\d+\b"), r"\1"),  # a generated name's numeric suffix: add.12
    (re.compile(r"0x[0-9a-fA-F]+"), "N"),
    (re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w])"), "N"),
    (re.compile(r"\s+"), " "),
)
#: the failing instruction as XLA prints it in a message: ``%name = SHAPE opcode(``
_INSTRUCTION: Final = re.compile(r"%?[\w.-]+ = (?:\([^=]*?\)|[a-z][a-z0-9]*\[[^\]]*\](?:\{[^{}]*\})?) "
                                 r"([a-z][a-z0-9-]*)\(")
_QUOTED_NAME: Final = re.compile(r"\"([a-z][a-z-]*[a-z])\.\d+\"")
_HANDLER: Final = re.compile(r"\bHandle([A-Z][A-Za-z]+)\b")
#: XLA's words for an opcode in its messages
_WORDS: Final = ((re.compile(r"\bCVT\b"), "convert"), (re.compile(r"\bfor FFT\b"), "fft"))
_MAX: Final = 400


def location(text: str, *, log_first: bool = False) -> str | None:
    """``file.cc:NNN`` (the file's base name) of XLA's check in ``text``: a RET_CHECK's (or
    LLO_CHECK's), else a log line's ``file.cc:NNN]`` (the log line's first when ``log_first``: the
    check that aborted, whose message may quote a RET_CHECK); None when it names none."""
    first, second = (_LOCATION, _CHECK) if log_first else (_CHECK, _LOCATION)
    m = first.search(text)
    if m is None:
        m = second.search(text)
    if m is None:
        return None
    return f"{m.group(1).rsplit('/', 1)[-1]}:{m.group(2)}"


def opcode(message: str) -> str | None:
    """The opcode of the instruction XLA's ``message`` says failed: the instruction it prints
    (``%x = f64[4]{0} reduce-precision(...)``), else the first generated name it quotes
    (``"get-tuple-element.36"``), else XLA's word for one (``CVT``, ``for FFT``,
    ``HandleDynamicSlice``); None when it names none."""
    text = message.split("metadata=", 1)[0]
    if (m := _INSTRUCTION.search(text)) is not None:
        return m.group(1)
    if (m := _QUOTED_NAME.search(text)) is not None:
        return m.group(1)
    for pattern, name in _WORDS:
        if pattern.search(text):
            return name
    if (m := _HANDLER.search(text)) is not None:
        return re.sub(r"(?<!^)([A-Z])", r"-\1", m.group(1)).lower()
    return None


def _path(m: re.Match[str]) -> str:
    base = m.group(1)
    return base if _SOURCE.search(base.split(":", 1)[0]) else "PATH"


def normalised(message: str) -> str:
    """``message`` with what is particular to one module blanked (shapes' sizes and layouts,
    names' numbers, numbers, addresses, paths), cut before ``metadata=`` and at 400 characters;
    element types and XLA's fixed words kept."""
    text = message.split("metadata=", 1)[0]
    text = _PATH.sub(_path, text)
    text = _SHAPE.sub(r"\1[_]", text)
    families = iter(_FAMILY.findall(text))
    text = _FAMILY.sub("\x00", text)  # kept aside from the numbers' blanking, put back in order
    for pattern, repl in _NORMALISE:
        text = pattern.sub(repl, text)
    text = re.sub("\x00", lambda _: next(families), text)
    text = text.strip(" ,;:")
    return text[:_MAX].rstrip()


def signature(message: str, *, died: bool) -> str:
    """The failure's signature: ``abort at FILE:LINE`` (``died``: the process died; the signal when
    XLA named no check), else ``CODE at FILE:LINE`` for a RET_CHECK (or LLO_CHECK), else ``CODE:
    normalised message`` (``error: ...`` without a status code); the failing instruction's opcode,
    where the message names one, in parentheses after the head."""
    where = location(message, log_first=died)
    op = opcode(message)
    tag = "" if op is None else f" ({op})"
    if died:
        if where is not None:
            return f"abort at {where}{tag}"
        sig = _SIGNAL.search(message)
        return (f"died ({sig.group(1)})" if sig else "died") + tag
    m = _CODE.search(message)
    code = m.group(1) if m else "error"
    if where is not None and _CHECK.search(message) is not None:
        return f"{code} at {where}{tag}"
    rest = message[m.end():] if m else message
    return f"{code}{tag}: {normalised(rest)}"
