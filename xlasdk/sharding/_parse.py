"""The parser of XLA's sharding notation (``HloSharding.parse``).

It reads the text into a :class:`ParsedSharding`, the notation's fields as written, and knows
nothing of :class:`~xlasdk.sharding.HloSharding`, which builds (and checks) the sharding from
them: the parser sits below the value it parses.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from ..errors import ShapeError
from ._fields import _SIMPLE, _SUBGROUP_ORDER, _subgroup_kinds

_TOKEN_RE: Final = re.compile(r'\s*(?:(<=)|([{}\[\](),=])|(-?\d+)|([A-Za-z_][A-Za-z0-9_.\-]*)|("(?:[^"\\]|\\.)*"))')


class ParsedSharding(NamedTuple):
    """One sharding as the text wrote it, not yet checked."""

    kind: str  # "replicated", "manual", "unknown", "unreduced", "maximal", "tiled" or "tuple"
    device: int = -1  # maximal
    dims: tuple[int, ...] = ()  # tiled: the tile assignment dimensions
    devices: tuple[int, ...] | None = None  # tiled: the device list, or None with an iota
    iota: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # tiled: (reshape dims, transpose perm)
    subgroups: tuple[str, ...] = ()  # tiled: the kinds of the trailing subgroup dimensions
    shard_group: tuple[str, int] | None = None  # tiled: ("as" or "like", group id)
    elements: tuple[ParsedSharding, ...] = ()  # tuple


def parse_sharding(text: str) -> ParsedSharding:
    """The fields of ``text`` in XLA's sharding notation.

    Raises
    ------
    ShapeError
        For text that is not a sharding, naming the column and what was expected.
    """
    return _Parser(text).parse()


class _Parser:
    """Recursive descent over XLA's sharding grammar (``HloParser::ParseSharding``)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.toks: list[tuple[str, str, int]] = []  # (kind, text, column)
        pos = 0
        n = len(text)
        while True:
            while pos < n and text[pos].isspace():
                pos += 1
            if pos >= n:
                break
            m = _TOKEN_RE.match(text, pos)
            if m is None or m.end() == pos:
                raise self._error_at(pos, "unexpected character " + repr(text[pos]))
            kind = "op" if m.group(1) or m.group(2) else "int" if m.group(3) else "word" if m.group(4) else "str"
            self.toks.append((kind, m.group(m.lastindex or 0), m.start(m.lastindex or 0)))
            pos = m.end()
        self.i = 0

    def _error_at(self, col: int, what: str) -> ShapeError:
        shown = self.text if len(self.text) <= 200 else self.text[:200] + "..."
        return ShapeError(
            f"HloSharding.parse: {what} at column {col + 1} of {shown!r} (XLA's sharding notation looks like "
            "{devices=[2,1]0,1}, {replicated} or {maximal device=0})"
        )

    def _error(self, what: str) -> ShapeError:
        col = self.toks[self.i][2] if self.i < len(self.toks) else len(self.text)
        return self._error_at(col, what)

    def _peek(self) -> str | None:
        return self.toks[self.i][1] if self.i < len(self.toks) else None

    def _next(self, what: str) -> tuple[str, str, int]:
        if self.i >= len(self.toks):
            raise self._error(f"expected {what}, got the end of the text")
        t = self.toks[self.i]
        self.i += 1
        return t

    def _expect(self, text: str) -> None:
        t = self._next(repr(text))
        if t[1] != text:
            self.i -= 1
            raise self._error(f"expected {text!r}, got {t[1]!r}")

    def _int(self) -> int:
        t = self._next("a number")
        if t[0] != "int":
            self.i -= 1
            raise self._error(f"expected a number, got {t[1]!r}")
        if t[1].startswith("-"):
            self.i -= 1
            raise self._error(f"expected a number >= 0, got {t[1]}")
        return int(t[1])

    def _int_list(self, close: str) -> tuple[int, ...]:
        out = [self._int()]
        while self._peek() == ",":
            self.i += 1
            out.append(self._int())
        self._expect(close)
        return tuple(out)

    def parse(self) -> ParsedSharding:
        if not self.toks:
            raise self._error_at(0, "expected a sharding, got empty text")
        s = self._sharding(top=True)
        if self.i != len(self.toks):
            raise self._error(f"unexpected {self._peek()!r} after the sharding")
        return s

    def _sharding(self, top: bool) -> ParsedSharding:
        self._expect("{")
        if self._peek() == "}":
            self.i += 1
            return ParsedSharding("tuple") if top else self._fail_empty()
        if self._peek() == "{":
            if not top:
                raise self._error("tuple shardings cannot nest")
            elems = [self._sharding(top=False)]
            while self._peek() == ",":
                self.i += 1
                elems.append(self._sharding(top=False))
            self._expect("}")
            return ParsedSharding("tuple", elements=tuple(elems))
        return self._single()

    def _fail_empty(self) -> ParsedSharding:
        self.i -= 1
        raise self._error("expected a sharding inside '{}'")

    def _single(self) -> ParsedSharding:
        kind: str | None = None
        device: int | None = None
        dims: tuple[int, ...] | None = None
        devices: tuple[int, ...] | None = None
        iota: tuple[tuple[int, ...], tuple[int, ...]] | None = None
        subgroups: list[str] = []
        replicate_last = False
        shard_group: tuple[str, int] | None = None
        while self._peek() != "}":
            t = self._next("'}'")
            word = t[1]
            if t[0] != "word":
                self.i -= 1
                raise self._error(f"unexpected {word!r}")
            if word in (*_SIMPLE, "maximal"):
                if kind is not None:
                    self.i -= 1
                    raise self._error(f"{word!r} after {kind!r}")
                kind = word
            elif word == "device":
                self._expect("=")
                device = self._int()
            elif word == "devices":
                self._expect("=")
                self._expect("[")
                dims = self._int_list("]")
                if self._peek() == "<=":
                    self.i += 1
                    self._expect("[")
                    reshape = self._int_list("]")
                    perm = tuple(range(len(reshape)))
                    if self._peek() == "T":
                        self.i += 1
                        self._expect("(")
                        perm = self._int_list(")")
                    iota = (reshape, perm)
                else:
                    devs = [self._int()]
                    while self._peek() == ",":
                        self.i += 1
                        devs.append(self._int())
                    devices = tuple(devs)
            elif word == "last_tile_dim_replicate":
                replicate_last = True
            elif word == "last_tile_dims":
                self._expect("=")
                self._expect("{")
                while True:
                    k = self._next("a subgroup kind")
                    if k[0] != "word" or k[1] not in _SUBGROUP_ORDER:
                        self.i -= 1
                        raise self._error(
                            f"unknown last_tile_dims kind {k[1]!r}; expected one of {', '.join(_SUBGROUP_ORDER)}"
                        )
                    subgroups.append(k[1])
                    if self._peek() != ",":
                        break
                    self.i += 1
                self._expect("}")
            elif word == "metadata":
                self._expect("=")
                self._skip_group()
            elif word in ("shard_as", "shard_like"):
                shard_group = (word[6:], self._int())
            else:
                self.i -= 1
                raise self._error(f"unknown sharding attribute {word!r}")
        self._expect("}")
        if kind == "maximal":
            if device is None:
                raise self._error("'maximal' needs 'device=N'")
            return ParsedSharding("maximal", device=device)
        if kind is not None:
            if dims is not None or device is not None:
                raise self._error(f"'{kind}' takes no devices")
            return ParsedSharding(kind)
        if dims is None:
            raise self._error("expected 'replicated', 'manual', 'maximal device=N' or 'devices=[...]'")
        if device is not None:
            raise self._error("'device=' belongs to 'maximal'")
        kinds = _subgroup_kinds(subgroups, replicate_last)
        return ParsedSharding("tiled", dims=dims, devices=None if iota is not None else devices, iota=iota,
                              subgroups=kinds, shard_group=shard_group)

    def _skip_group(self) -> None:
        """Skip a balanced ``{...}`` (metadata)."""
        self._expect("{")
        depth = 1
        while depth:
            t = self._next("'}'")
            if t[1] == "{":
                depth += 1
            elif t[1] == "}":
                depth -= 1

