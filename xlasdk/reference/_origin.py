"""XLA's ``origin={...}`` attribute (an instruction's original value): which instruction of the
module before optimizations made each array of an optimized instruction's value, as newer XLA
writes it (``xla/hlo/ir/hlo_original_value.cc``; the ``AddOriginalValue`` pass, which jaxlib 0.12.1's
CPU pipeline does not run: its dumps carry none, but its HLO parser reads and keeps them).

Syntax, one leaf per array of the shape (a tuple's leaves in order), each the name of an original
instruction and, where it is an element of that instruction's tuple value, its shape index::

    origin={{"exponential.3"}}                     an array made by exponential.3
    origin={({"while.4" {0}}, {"while.4" {1}})}    a tuple: elements 0 and 1 of while.4's value
    origin={{}}                                    an array of no known origin
    origin={({"a"}, {}),["call.2"]}                with the call hierarchy it was inlined from

:func:`parse_origin` reads one strictly (a :class:`~xlasdk.errors.FormatError` naming what was
expected on anything else); :func:`origins` reads every instruction's of a computation's entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import FormatError

if TYPE_CHECKING:
    from ..program.computation import XlaComputation

__all__ = ["OriginalArray", "OriginalValue", "parse_origin", "origins"]


@dataclass(frozen=True)
class OriginalArray:
    """The original instruction that made an array, and the array's index in its (tuple) value."""

    instruction: str
    shape_index: tuple[int, ...] = ()


@dataclass(frozen=True)
class OriginalValue:
    """One instruction's ``origin``: per leaf of its shape (in order) an :class:`OriginalArray` or
    None (no known origin); ``tuple``: the value is a tuple; ``call_hierarchy`` as XLA writes it."""

    leaves: tuple[OriginalArray | None, ...]
    tuple: bool = False
    call_hierarchy: str | None = None

    def array(self) -> OriginalArray | None:
        """The origin of an array (non-tuple) value; None for a tuple or an unknown origin."""
        return self.leaves[0] if not self.tuple and len(self.leaves) == 1 else None


class _Reader:
    def __init__(self, text: str) -> None:
        self.text, self.k = text, 0

    def fail(self, expected: str) -> FormatError:
        got = self.text[self.k:self.k + 20] or "the end"
        return FormatError(f"origin={{{self.text}}}: expected {expected} at character {self.k}, got {got!r}")

    def skip(self) -> None:
        while self.k < len(self.text) and self.text[self.k] == " ":
            self.k += 1

    def take(self, s: str) -> bool:
        self.skip()
        if self.text.startswith(s, self.k):
            self.k += len(s)
            return True
        return False

    def need(self, s: str) -> None:
        if not self.take(s):
            raise self.fail(repr(s))

    def string(self) -> str:
        self.need('"')
        end = self.text.find('"', self.k)
        if end < 0:
            raise self.fail('a closing \'"\'')
        s, self.k = self.text[self.k:end], end + 1
        if not s:
            raise self.fail("an instruction name")
        return s

    def index(self) -> tuple[int, ...]:
        self.need("{")
        out: list[int] = []
        if self.take("}"):
            return ()
        while True:
            self.skip()
            start = self.k
            while self.k < len(self.text) and self.text[self.k].isdigit():
                self.k += 1
            if start == self.k:
                raise self.fail("a shape index (digits)")
            out.append(int(self.text[start:self.k]))
            if self.take("}"):
                return tuple(out)
            self.need(",")

    def node(self, leaves: list[OriginalArray | None]) -> None:
        if self.take("("):
            if self.take(")"):
                return
            while True:
                self.node(leaves)
                if self.take(")"):
                    return
                self.need(",")
        self.need("{")
        if self.take("}"):
            leaves.append(None)
            return
        name = self.string()
        self.skip()
        idx = self.index() if self.text.startswith("{", self.k) else ()
        self.need("}")
        leaves.append(OriginalArray(name, idx))


def parse_origin(text: str) -> OriginalValue:
    """The value of an ``origin=`` attribute, without its outer braces (``{"add.1"}``,
    ``({"w" {0}}, {})``, optionally followed by ``,["call hierarchy"]``).

    Raises
    ------
    FormatError
        Text of another form (naming what was expected, and where).
    """
    r = _Reader(text)
    leaves: list[OriginalArray | None] = []
    r.skip()
    is_tuple = r.text.startswith("(", r.k)
    r.node(leaves)
    hierarchy = None
    if r.take(","):
        r.need("[")
        hierarchy = r.string()
        r.need("]")
    r.skip()
    if r.k != len(r.text):
        raise r.fail("the end of the attribute")
    return OriginalValue(tuple(leaves), is_tuple, hierarchy)


def _attribute(line: str) -> str | None:
    """The text inside ``origin={...}`` of one instruction line (outside quoted strings), or None."""
    quoted, depth, k = False, 0, 0
    while k < len(line):
        ch = line[k]
        if ch == '"' and (k == 0 or line[k - 1] != "\\"):
            quoted = not quoted
        elif not quoted:
            if ch in "({[":
                depth += 1
            elif ch in ")}]":
                depth -= 1
            elif depth == 0 and line.startswith(", origin={", k):
                start = k + len(", origin={")
                d, q, j = 1, False, start
                while j < len(line) and d:
                    c = line[j]
                    if c == '"':
                        q = not q
                    elif not q:
                        d += 1 if c == "{" else -1 if c == "}" else 0
                    j += 1
                if d:
                    raise FormatError(f"origin=: no closing '}}' in {line[k:k + 80]!r}")
                return line[start:j - 1]
        k += 1
    return None


def origins(comp: XlaComputation) -> dict[str, OriginalValue]:
    """Each instruction of ``comp``'s entry computation that carries an ``origin``, by its name.

    Raises
    ------
    FormatError
        An ``origin`` attribute that :func:`parse_origin` does not read.
    """
    text = comp.as_hlo_text(print_metadata=False, print_large_constants=False)
    if "origin={" not in text:
        return {}
    entry = text[text.find("\nENTRY"):]
    out: dict[str, OriginalValue] = {}
    for raw in entry.splitlines()[1:]:
        line = raw.strip()
        if line == "}":
            break
        line = line.removeprefix("ROOT ").lstrip()
        name, eq, _ = line.partition(" = ")
        if not eq:
            continue
        attr = _attribute(line)
        if attr is not None:
            out[name.removeprefix("%")] = parse_origin(attr)
    return out
