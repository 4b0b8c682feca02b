"""Text-format protos of XLA's messages (``HloSnapshot`` and kin) to their binary form.

The ``protobuf`` package parses the text (``text_format``, an optional dependency:
``pip install "xlasdk[snapshots]"``) with the schema the installed jaxlib embeds
(:mod:`xlasdk._jaxlib.protodesc`); the message is then serialized, so that the binary decoders of
xlasdk read one form only.

Guards, since the text runs through the user's process:

- a line that is not UTF-8: :class:`~xlasdk.errors.FormatError` at its line and column;
- message nesting deeper than 128: refused (protobuf's own limit where it has one, else Python's
  recursion limit, caught);
- long quoted strings (a bf16 argument of 8 M elements is one 30 MB ``bf16s: "..."`` line):
  protobuf's tokenizer matches a string token with a regular expression whose memory grows about
  100 bytes per escaped character (2.8 GB for 26 MB of text). A ``name: "..."`` line longer than
  64 KiB is therefore written as adjacent pieces on the same line (``name: "..." "..."``, which the
  text format concatenates), each cut just before an escape, so line numbers stay right; a longer
  line of another shape that holds a quote is refused.
"""

from __future__ import annotations

import inspect
import io
import re
from collections.abc import Iterator
from typing import Any, Final

from ..errors import FormatError

__all__ = ["binary_from_text"]

_MAX_DEPTH: Final = 128  # message nesting (a 64-deep tuple shape, the binary decoder's limit, is about 70)
_PIECE: Final = 1 << 16  # characters of one string token
_MAX_QUOTED_LINE: Final = 1 << 20  # a line with quotes that cannot be cut into pieces
_STRING_FIELD: Final = re.compile(r"\s*[A-Za-z_][A-Za-z0-9_]*\s*:\s*([\"'])")


def _escaped(s: str, i: int, floor: int = 0) -> bool:
    """Whether ``s[i]`` is escaped: an odd number of backslashes right before it (back to ``floor``)."""
    j = i
    while j > floor and s[j - 1] == "\\":
        j -= 1
    return (i - j) % 2 == 1


def _pieces(inner: str) -> list[str]:
    """``inner`` (a string token's content) cut into pieces of at most ``_PIECE`` characters, each
    cut just before a backslash that begins an escape (an escape holds no backslash after its first
    character, so it ends before the next one), or inside a stretch with no backslash."""
    out: list[str] = []
    start = 0  # a backslash that begins an escape, or the content's start
    while len(inner) - start > _PIECE:
        limit = start + _PIECE
        c = inner.rfind("\\", start + 1, limit + 1)
        r = c
        while r > start and inner[r - 1] == "\\":  # the run of backslashes ending at c starts at r
            r -= 1
        # escapes begin at r, r + 2, ... (r follows a non-backslash, or is start); with none after start,
        # (start, limit] holds no backslash but an escaped one at start + 1: an escape at start has ended
        cut = r + 2 * ((c - r) // 2) if c >= 0 else limit
        if cut <= start:
            cut = limit
        out.append(inner[start:cut])
        start = cut
    out.append(inner[start:])
    return out


def _split_line(line: str) -> str | None:
    """A long ``name: "..."`` line as ``name: "p1" "p2" ...`` (same line), or None for another shape."""
    m = _STRING_FIELD.match(line)
    if m is None:
        return None
    quote = m.group(1)
    body = line[m.end():]
    stripped = body.rstrip()
    end = len(stripped) - 1
    if end < 0 or stripped[end] != quote or _escaped(stripped, end):
        return None  # the closing quote must end the line
    inner = stripped[:end]
    at = inner.find(quote)
    while at >= 0:  # every other quote escaped: one string token
        if not _escaped(inner, at):
            return None
        at = inner.find(quote, at + 1)
    pieces = _pieces(inner)
    return line[: m.end() - 1] + " ".join(quote + p + quote for p in pieces) + body[len(stripped):]


def _lines(data: bytes, what: str) -> Iterator[str]:
    for number, raw in enumerate(io.BytesIO(data), 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise FormatError(f"{what}:{number}:{e.start + 1}: not UTF-8 text (byte {raw[e.start]:#04x})") from None
        if len(line) > _PIECE and ('"' in line or "'" in line):
            split = _split_line(line)
            if split is None and len(line) > _MAX_QUOTED_LINE:
                raise FormatError(f"{what}:{number}: a line of {len(line)} characters with quotes that is not one "
                                  f"'name: \"string\"' field (xlasdk reads such lines up to {_MAX_QUOTED_LINE})")
            line = split if split is not None else line
        yield line


def binary_from_text(data: bytes, message: str, what: str) -> bytes:
    """The binary form of ``data``, the text format of XLA's ``message`` (e.g. ``"xla.HloSnapshot"``).

    Raises
    ------
    FormatError
        Naming ``what``: the ``protobuf`` package is missing (the message says how to install it)
        or jaxlib's schema cannot be found; the text does not parse (``what:LINE:COLUMN: ...``), is
        not UTF-8, nests deeper than 128, or has a long line of an unknown shape.
    """
    from .._jaxlib.protodesc import SchemaUnavailable, message_class

    short = message.removeprefix("xla.")
    try:
        cls = message_class(message)
    except SchemaUnavailable as e:
        raise FormatError(f"{what}: a text-format {short}, which xlasdk cannot read here: {e}. Or dump again "
                          "without --xla_dump_hlo_as_text (XLA then writes the binary .pb file)") from None
    from google.protobuf import message as pb_message
    from google.protobuf import text_format

    options: dict[str, Any] = {}
    if "max_recursion_depth" in inspect.signature(text_format.ParseLines).parameters:  # protobuf >= 5.29
        options["max_recursion_depth"] = _MAX_DEPTH
    msg = cls()
    try:
        text_format.ParseLines(_lines(data, what), msg, **options)
        return bytes(msg.SerializeToString())
    except text_format.ParseError as e:
        line, column = e.GetLine(), e.GetColumn()
        where = f"{what}:{line}:{column}" if line is not None and column is not None else what
        text = str(e).split(" : ", 1)[1] if line is not None and " : " in str(e) else str(e)
        text = text if len(text) <= 300 else text[:300] + "..."  # a message may quote a whole line
        raise FormatError(f"{where}: not a valid text-format {short}: {text}") from None
    except RecursionError:
        raise FormatError(f"{what}: a text-format {short} nested too deeply") from None
    except pb_message.EncodeError as e:
        raise FormatError(f"{what}: the text-format {short} cannot be encoded: {e}") from None
