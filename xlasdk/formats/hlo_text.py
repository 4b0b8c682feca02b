"""A small parser for HLO text (``HloModule ...``) and the opcode counts built on it.

It understands enough of the grammar (shapes with layouts, instructions, operand lists,
attributes, computations) to check a module before XLA sees it (:mod:`.hlo_check`) and to
rewrite optimized HLO for the StableHLO import (:mod:`.hlo_rewrite`). Text it cannot follow
raises :class:`_Unparsed`, and the callers then leave the text to XLA's own parser.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Final, NamedTuple

_TOKEN_RE: Final = re.compile(
    r"""(?P<skip>\s+|/\*.*?\*/|//[^\n]*)
      |(?P<str>"(?:[^"\\\n]|\\.)*")
      |(?P<arrow>->)
      |(?P<punct>[(){}\[\],=:;])
      |(?P<word>(?:<=)?[^\s(){}\[\],=:;"]+)""",
    re.S | re.X,
)


class _Unparsed(Exception):
    """The pre-check's parser did not understand the text (XLA's parser then has the last word)."""


class _Tok(NamedTuple):  # a tuple: hundreds of thousands are made for a large module
    kind: str
    text: str
    pos: int


@dataclass(frozen=True)
class _HShape:
    """A shape as written in HLO text: an array (etype, dims), a tuple, or a token."""

    etype: str  # "tuple" for tuples
    dims: tuple[int, ...] = ()
    elems: tuple[_HShape, ...] = ()
    layout: tuple[int, ...] | None = None  # minor_to_major, when written
    # the layout as written, tiles and memory space included ("{1,0:T(8,128)S(1)}")
    layout_text: str | None = field(default=None, compare=False)

    @property
    def is_tuple(self) -> bool:
        return self.etype == "tuple"

    @property
    def is_array(self) -> bool:
        return self.etype not in ("tuple", "token")

    def count(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    def __str__(self) -> str:
        if self.is_tuple:
            return "(" + ", ".join(str(e) for e in self.elems) + ")"
        return f"{self.etype}[{','.join(map(str, self.dims))}]"


@dataclass
class _Instr:
    name: str
    shape: _HShape | None
    opcode: str
    operands: list[str] | None  # None when the operand list was not understood
    attrs: dict[str, str]
    pos: int
    root: bool = False
    number: int | None = None  # parameter(N)
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)  # source spans: "opcode", "operands", "all"


@dataclass
class _Comp:
    name: str
    entry: bool
    pos: int
    instrs: list[_Instr] = field(default_factory=list)
    by_name: dict[str, _Instr] = field(default_factory=dict)

    def params(self) -> list[_Instr]:
        return [i for i in self.instrs if i.opcode == "parameter"]


@dataclass
class _HloModuleText:
    name: str
    attrs: dict[str, str]
    comps: list[_Comp]
    text: str
    line_starts: list[int]

    def line(self, pos: int) -> int:
        return bisect.bisect_right(self.line_starts, pos)

    def comp(self, ref: str) -> _Comp | None:
        ref = ref.strip().lstrip("%")
        for c in self.comps:
            if c.name == ref:
                return c
        return None


_STACK_FRAME_TABLES: Final = frozenset({"FileNames", "FunctionNames", "FileLocations", "StackFrames"})
_ARRAY_ETYPE_RE: Final = re.compile(r"^(pred|[suf]\d+|bf16|c64|c128|f8e\w+|f4e\w+|tf32)$")


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        toks: list[_Tok] = []
        append = toks.append
        pos = 0
        for m in _TOKEN_RE.finditer(text):
            if m.start() != pos:  # finditer skipped text no token matches
                raise _Unparsed(f"unexpected character {text[pos]!r}")
            kind = m.lastgroup or ""
            if kind != "skip":
                append(_Tok(kind, m.group(), pos))
            pos = m.end()
        if pos != len(text):
            raise _Unparsed(f"unexpected character {text[pos]!r}")
        self.toks = toks
        self.i = 0

    # token helpers
    def peek(self, k: int = 0) -> _Tok | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def next(self) -> _Tok:
        t = self.peek()
        if t is None:
            raise _Unparsed("unexpected end of text")
        self.i += 1
        return t

    def accept(self, text: str) -> bool:
        t = self.peek()
        if t is not None and t.text == text and t.kind != "str":
            self.i += 1
            return True
        return False

    def expect(self, text: str) -> _Tok:
        t = self.next()
        if t.text != text or t.kind == "str":
            raise _Unparsed(f"expected {text!r}, got {t.text!r}")
        return t

    def word(self) -> str:
        t = self.next()
        if t.kind not in ("word", "str"):
            raise _Unparsed(f"expected a name, got {t.text!r}")
        return t.text.strip('"') if t.kind == "str" else t.text

    def skip_group(self) -> None:
        """Skip a balanced (), {} or [] group starting at the current token."""
        pairs = {"(": ")", "{": "}", "[": "]"}
        stack: list[str] = []
        while True:
            t = self.next()
            if t.kind == "punct" and t.text in pairs:
                stack.append(pairs[t.text])
            elif t.kind == "punct" and t.text in ")}]":
                if not stack or stack.pop() != t.text:
                    raise _Unparsed(f"unbalanced {t.text!r}")
                if not stack:
                    return

    def value(self) -> str:
        """An attribute value (a balanced group or one token); returns its source text."""
        t = self.peek()
        if t is None:
            raise _Unparsed("missing attribute value")
        start = t.pos
        if t.kind == "punct" and t.text in "({[":
            self.skip_group()
            if t.text == "[":  # iota replica groups: [2,2]<=[4] or [2,2]<=[2,2]T(1,0)
                self._iota_tail()
        else:
            self.next()
            if t.text == "mesh" and (n := self.peek()) is not None and n.text == "[":  # mesh['x'=4] {'x'}
                self.skip_group()
                n, n1, n2 = self.peek(), self.peek(1), self.peek(2)  # , device_ids=([2,2]T(1,0))
                if n is not None and n.text == "," and n1 is not None and n1.text == "device_ids" \
                        and n2 is not None and n2.text == "=":
                    self.i += 3
                    self.skip_group()
                if (n := self.peek()) is not None and n.text == "{":
                    self.skip_group()
        end_tok = self.toks[self.i - 1]
        return self.text[start : end_tok.pos + len(end_tok.text)]

    def _iota_tail(self) -> None:
        """Skip ``<=[dims]`` and an optional ``T(perm)`` after an iota's ``[dims]`` (the tokens
        ``<``, ``=``, ``[...]``, ``T``, ``(...)``)."""
        t, t1, t2 = self.peek(), self.peek(1), self.peek(2)
        if t is None or t.text != "<" or t1 is None or t1.text != "=" or t2 is None or t2.text != "[":
            return
        self.i += 2
        self.skip_group()
        t, t1 = self.peek(), self.peek(1)
        if t is not None and t.text == "T" and t1 is not None and t1.text == "(":
            self.i += 1
            self.skip_group()

    # grammar
    def shape(self) -> _HShape:
        if self.accept("("):
            elems: list[_HShape] = []
            if not self.accept(")"):
                while True:
                    elems.append(self.shape())
                    if self.accept(")"):
                        break
                    self.expect(",")
            return _HShape("tuple", (), tuple(elems))
        et = self.word()
        if et != "token" and not _ARRAY_ETYPE_RE.match(et):
            raise _Unparsed(f"not a shape: {et!r}")
        self.expect("[")
        dims: list[int] = []
        if not self.accept("]"):
            while True:
                d = self.word()
                d = d[2:] if d.startswith("<=") else d
                if not d.isdigit():
                    raise _Unparsed(f"dimension {d!r}")
                dims.append(int(d))
                if self.accept("]"):
                    break
                self.expect(",")
        t = self.peek()
        layout = None
        t1 = self.peek(1)
        if (t is not None and t.kind == "punct" and t.text == "{" and t1 is not None
                and (t1.text.isdigit() or t1.text in ("}", ":"))):  # layout: {1,0} or {1,0:T(8,128)...}
            start = self.i
            self.skip_group()
            inner = self.toks[start + 1 : self.i - 1]
            m2m: list[int] = []
            for tok in inner:
                if tok.kind == "punct" and tok.text == ":":
                    break
                if tok.kind == "word":
                    if not tok.text.isdigit():
                        m2m = []
                        break
                    m2m.append(int(tok.text))
            layout = tuple(m2m) if len(m2m) == len(dims) else None  # may be invalid: see hlo_rewrite._valid_layout
            written = self.text[self.toks[start].pos : self.toks[self.i - 1].pos + 1]
            return _HShape(et, tuple(dims), (), layout, written)
        return _HShape(et, tuple(dims), (), layout)

    def operands(self, opcode: str) -> list[str] | None:
        """Operand names of ``opcode(...)``; the current token is ``(``."""
        start = self.i
        self.skip_group()
        inner = self.toks[start + 1 : self.i - 1]
        if opcode in ("parameter", "constant", "iota", "rng-get-and-update-state", "partition-id", "replica-id"):
            return []
        names: list[str] = []
        item: list[_Tok] = []
        depth = 0
        for t in inner + [_Tok("punct", ",", -1)]:
            if t.kind == "punct" and t.text in "({[":
                depth += 1
            elif t.kind == "punct" and t.text in ")}]":
                depth -= 1
            if depth == 0 and t.kind == "punct" and t.text == ",":
                if not item:
                    return None if names or t.pos != -1 else []
                last = item[-1]
                if last.kind != "word" or any(x.kind == "punct" and x.text == "(" for x in item[1:]):
                    return None  # a nested instruction or a literal: not understood
                names.append(last.text.lstrip("%"))
                item = []
            else:
                item.append(t)
        return names

    def instruction(self) -> _Instr:
        root = False
        t0 = self.peek()
        if t0 is not None and t0.text == "ROOT" and (self.peek(1) or t0).text != "=":
            self.next()
            root = True
        name_tok = self.next()
        if name_tok.kind != "word":
            raise _Unparsed(f"expected an instruction name, got {name_tok.text!r}")
        self.expect("=")
        shape = self.shape()
        op_tok = self.peek()
        opcode = self.word()
        t = self.peek()
        if t is None or t.text != "(" or op_tok is None:
            raise _Unparsed(f"expected '(' after {opcode!r}")
        number = None
        if opcode == "parameter":
            t1, t2 = self.peek(1), self.peek(2)
            if t1 is not None and t2 is not None and t1.text.isdigit() and t2.text == ")":
                number = int(t1.text)
        operands = self.operands(opcode)
        close = self.toks[self.i - 1]
        attrs: dict[str, str] = {}
        while self.accept(","):
            key = self.word()
            self.expect("=")
            attrs[key] = self.value()
        last = self.toks[self.i - 1]
        spans = {
            "opcode": (op_tok.pos, op_tok.pos + len(op_tok.text)),
            "operands": (t.pos, close.pos + 1),
            "all": ((t0.pos if root and t0 is not None else name_tok.pos), last.pos + len(last.text)),
        }
        return _Instr(name_tok.text.lstrip("%"), shape, opcode, operands, attrs, name_tok.pos, root, number, spans)

    def computation(self) -> _Comp:
        entry = self.accept("ENTRY")
        name_tok = self.next()
        if name_tok.kind not in ("word", "str"):
            raise _Unparsed(f"expected a computation name, got {name_tok.text!r}")
        if self.peek() is not None and self.peek().text == "(":  # type: ignore[union-attr]
            self.skip_group()
            self.expect("->")
            self.shape()
        self.expect("{")
        comp = _Comp(name_tok.text.strip('"').lstrip("%"), entry, name_tok.pos)
        while not self.accept("}"):
            ins = self.instruction()
            comp.instrs.append(ins)
            comp.by_name[ins.name] = ins
        return comp

    def stack_frame_tables(self) -> None:
        """Skip the ``FileNames`` / ``FunctionNames`` / ``FileLocations`` / ``StackFrames`` blocks
        that XLA writes between the module header and the first computation (every JAX dump has
        them; instructions refer to them by ``stack_frame_id`` in their metadata)."""
        while True:
            t, t1 = self.peek(), self.peek(1)
            if t is None or t.text not in _STACK_FRAME_TABLES or t1 is None or not t1.text.isdigit():
                return
            self.next()
            while (n := self.peek()) is not None and n.kind == "word" and n.text.isdigit():
                self.next()
                self.value()

    def module(self) -> _HloModuleText:
        t = self.next()
        if t.text != "HloModule":
            raise _Unparsed("the text does not start with 'HloModule'")
        name = self.word()
        attrs: dict[str, str] = {}
        while self.accept(","):
            key = self.word()
            self.expect("=")
            attrs[key] = self.value()
        self.stack_frame_tables()
        comps: list[_Comp] = []
        while self.peek() is not None:
            comps.append(self.computation())
        starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        return _HloModuleText(name, attrs, comps, self.text, starts)


def _parse_hlo_text(text: str) -> _HloModuleText | None:
    try:
        return _Parser(text).module()
    except (_Unparsed, RecursionError):
        return None


def hlo_opcode_counts(text: str) -> Counter[str]:
    """Instruction counts by HLO opcode over every computation of an HLO module's text."""
    mod = _parse_hlo_text(text)
    counts: Counter[str] = Counter()
    if mod is None:
        for m in re.finditer(r"=\s*(?:\([^=]*?\)|[\w\[\]<=,{}:]+)\s+([a-z][\w-]*)\(", text):
            counts[m.group(1)] += 1
        return counts
    for comp in mod.comps:
        for ins in comp.instrs:
            counts[ins.opcode] += 1
    return counts
