"""Reading and writing computations in every XLA file format.

=============================  ==============================  ===================================
suffix                         format                          written by
=============================  ==============================  ===================================
``.hlo``, ``.hlo.txt``,        HLO text                        ``comp.as_hlo_text()``, XLA dumps
``.txt``                                                       (``*.before_optimizations.txt``)
``.mlir``                      StableHLO text (MLIR)           ``comp.as_stablehlo_text()``
``.mlirbc``                    StableHLO portable artifact     ``comp.serialize_portable_artifact()``
                               (MLIR bytecode also loads)
``.pb``, ``.hlo.pb``           ``HloModuleProto`` (XLA dumps'  ``comp.as_serialized_hlo_module_proto()``
                               ``HloProto`` / ``HloSnapshot``
                               wrappers also load)
=============================  ==============================  ===================================

:func:`load_computation` picks the format from the suffix; for ``.txt`` and unknown suffixes it
recognises the format from the content. Whatever the input, a bad file raises
:class:`~xlasdk.FormatError` naming the file and what was wrong, never a crash: XLA's HLO text
parser and its HLO -> StableHLO importer abort the process on some inconsistent modules
(a ``reshape`` that changes the element count, a ``get-tuple-element`` out of range, a
``conditional`` branch of the wrong arity...), so HLO is first checked here, in Python, for the
inconsistencies known to crash XLA; everything loaded is then verified by the MLIR verifier.
MLIR's bytecode reader can crash on corrupt bytes, so bytecode this process did not write itself
is decoded in a child process first (about 0.3 s per file).

Optimized HLO (XLA's ``*after_optimizations*`` dumps) loads too: for the StableHLO import,
``fusion`` instructions become calls of their fused computations and ``bitcast`` instructions
become reshapes/transposes; ``as_hlo_text()`` still prints the module as it was loaded.
"""

from __future__ import annotations

import bisect
import enum
import hashlib
import os
import re
import tempfile
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ._jaxlib import mlir as _mlir
from .errors import FormatError
from .shape import ProgramShape, Shape
from .types import etype_from_mlir

if TYPE_CHECKING:
    from .computation import XlaComputation

__all__ = [
    "Format",
    "load_computation",
    "save_computation",
    "computation_bytes",
    "format_from_suffix",
    "sniff_format",
    "computation_from_hlo_text",
    "computation_from_stablehlo",
    "computation_from_hlo_proto",
    "portable_artifact_version",
    "serialize_portable_artifact",
    "check_hlo_text",
    "hlo_opcode_counts",
    "PathLike",
]

PathLike = str | os.PathLike[str]


class Format(enum.Enum):
    """The file formats of a computation."""

    HLO_TEXT = "hlo"
    STABLEHLO_TEXT = "mlir"
    PORTABLE_ARTIFACT = "mlirbc"
    HLO_PROTO = "pb"

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self]


_DESCRIPTIONS: Final = {
    Format.HLO_TEXT: "HLO text",
    Format.STABLEHLO_TEXT: "StableHLO text",
    Format.PORTABLE_ARTIFACT: "StableHLO portable artifact",
    Format.HLO_PROTO: "HLO module proto",
}

# Longest suffixes first: ".hlo.txt" before ".txt".
_SUFFIXES: Final = (
    (".hlo.txt", Format.HLO_TEXT),
    (".hlo.pb", Format.HLO_PROTO),
    (".hlo", Format.HLO_TEXT),
    (".mlirbc", Format.PORTABLE_ARTIFACT),
    (".mlir", Format.STABLEHLO_TEXT),
    (".pb", Format.HLO_PROTO),
)
_SUFFIX_LIST: Final = ".hlo, .hlo.txt, .txt, .mlir, .mlirbc, .pb"

_BYTECODE_MAGIC: Final = b"ML\xefR"


def format_from_suffix(path: PathLike) -> Format | None:
    """The format a file name's suffix stands for (None for ``.txt`` and unknown suffixes)."""
    name = os.path.basename(os.fspath(path)).lower()
    for suffix, fmt in _SUFFIXES:
        if name.endswith(suffix):
            return fmt
    return None


def _parse_format(value: Format | str) -> Format:
    if isinstance(value, Format):
        return value
    v = str(value).lower().lstrip(".")
    for f in Format:
        if v in (f.value, f.name.lower()):
            return f
    aliases = {"stablehlo": Format.STABLEHLO_TEXT, "artifact": Format.PORTABLE_ARTIFACT, "proto": Format.HLO_PROTO,
               "hlo.txt": Format.HLO_TEXT, "txt": Format.HLO_TEXT, "hlo.pb": Format.HLO_PROTO}
    if v in aliases:
        return aliases[v]
    raise FormatError(f"unknown format {value!r}: use one of hlo, mlir, mlirbc, pb")


# -- sniffing -------------------------------------------------------------------------------------
_MLIR_START: Final = re.compile(r"(module\b|func\.func\b|#loc|\"builtin\.module\"|\"func\.func\"|#\w+\s*=|!\w+\s*=)")


def _strip_leading_comments(text: str) -> str:
    t = text.lstrip()
    while t.startswith("//") or t.startswith("/*"):
        if t.startswith("//"):
            nl = t.find("\n")
            t = "" if nl < 0 else t[nl + 1 :].lstrip()
        else:
            end = t.find("*/")
            t = "" if end < 0 else t[end + 2 :].lstrip()
    return t


def _as_text(data: bytes) -> str | None:
    if b"\x00" in data[:4096]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def sniff_format(data: bytes) -> Format | None:
    """The format of ``data`` from its content, or None when it is none of the formats.

    MLIR bytecode (``ML\\xefR``) is a portable artifact or plain bytecode; text starting with
    ``HloModule`` is HLO text; text starting like an MLIR module is StableHLO text; binary data
    holding an ``HloModuleProto`` (possibly wrapped as XLA dumps write it) is a proto.
    """
    if data.startswith(_BYTECODE_MAGIC):
        return Format.PORTABLE_ARTIFACT
    text = _as_text(data)
    if text is not None:
        head = _strip_leading_comments(text)
        if head.startswith("HloModule"):
            return Format.HLO_TEXT
        if _MLIR_START.match(head):
            return Format.STABLEHLO_TEXT
    try:
        if _find_module_proto(data) is not None:
            return Format.HLO_PROTO
    except ValueError:
        pass
    return None


# -- protobuf wire format (just enough to unwrap XLA's dump protos) --------------------------------
def _varint(b: bytes, i: int) -> tuple[int, int]:
    r = 0
    shift = 0
    while True:
        if i >= len(b):
            raise ValueError("truncated varint")
        c = b[i]
        i += 1
        r |= (c & 0x7F) << shift
        if not c & 0x80:
            return r, i
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _proto_fields(b: bytes) -> list[tuple[int, int, Any]]:
    """Top-level ``(field number, wire type, value)`` of a protobuf message; ValueError if malformed."""
    out: list[tuple[int, int, Any]] = []
    i = 0
    n = len(b)
    while i < n:
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if num == 0:
            raise ValueError("field number 0")
        v: Any
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 1:
            v, i = b[i : i + 8], i + 8
        elif wt == 2:
            ln, i = _varint(b, i)
            v, i = b[i : i + ln], i + ln
        elif wt == 5:
            v, i = b[i : i + 4], i + 4
        else:
            raise ValueError(f"unsupported wire type {wt}")
        if i > n:
            raise ValueError("truncated message")
        out.append((num, wt, v))
    return out


def _printable_utf8(v: bytes) -> bool:
    try:
        s = v.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return s.isprintable()


def _find_module_proto(data: bytes) -> bytes | None:
    """The ``HloModuleProto`` bytes inside ``data``, or None; ValueError if ``data`` is no proto.

    Accepts an ``HloModuleProto`` itself (field 1 = name, field 3 = computations), or the
    wrappers XLA's dump flags write: ``HloProto`` (``*.hlo.pb``: field 1 = the module) and
    ``HloSnapshot`` (field 1 = an ``HloProto``).
    """
    msg = data
    for _ in range(3):
        fs = _proto_fields(msg)
        if not fs:
            return None
        f1 = [v for num, wt, v in fs if num == 1 and wt == 2]
        has_comps = any(num == 3 and wt == 2 for num, wt, _ in fs)
        if f1 and _printable_utf8(f1[0]) and has_comps:
            return msg
        if f1 and not _printable_utf8(f1[0]):
            msg = f1[0]
            continue
        return None
    return None


# -- HLO text pre-check -----------------------------------------------------------------------------
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


@dataclass(frozen=True)
class _Tok:
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


_ARRAY_ETYPE_RE: Final = re.compile(r"^(pred|[suf]\d+|bf16|c64|c128|f8e\w+|f4e\w+|tf32)$")


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        toks: list[_Tok] = []
        pos = 0
        n = len(text)
        while pos < n:
            m = _TOKEN_RE.match(text, pos)
            if m is None:
                raise _Unparsed(f"unexpected character {text[pos]!r}")
            kind = m.lastgroup or ""
            if kind != "skip":
                toks.append(_Tok(kind, m.group(), pos))
            pos = m.end()
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
        else:
            self.next()
        end_tok = self.toks[self.i - 1]
        return self.text[start : end_tok.pos + len(end_tok.text)]

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
            layout = tuple(m2m) if len(m2m) == len(dims) else None  # may be invalid: see _valid_layout
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
        comps: list[_Comp] = []
        while self.peek() is not None:
            comps.append(self.computation())
        starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        return _HloModuleText(name, attrs, comps, self.text, starts)


def _parse_hlo_text(text: str) -> _HloModuleText | None:
    try:
        return _Parser(text).module()
    except _Unparsed:
        return None


def _int_attr(ins: _Instr, key: str) -> int | None:
    v = ins.attrs.get(key)
    if v is None:
        return None
    try:
        return int(v)
    except ValueError:
        return None


def _comp_list(value: str) -> list[str]:
    v = value.strip()
    if v.startswith("{") and v.endswith("}"):
        v = v[1:-1]
    return [x.strip().lstrip("%") for x in v.split(",") if x.strip()]


def _same_shape(a: _HShape, b: _HShape) -> bool:
    if a.etype != b.etype:
        return False
    if a.is_tuple:
        return len(a.elems) == len(b.elems) and all(_same_shape(x, y) for x, y in zip(a.elems, b.elems, strict=True))
    return a.dims == b.dims


def _entry_layout_params(value: str) -> int | None:
    """Number of parameters in ``entry_computation_layout={(p0, p1)->r}`` (None if not understood)."""
    try:
        p = _Parser(value.strip()[1:-1] if value.strip().startswith("{") else value)
        p.expect("(")
        n = 0
        if not p.accept(")"):
            while True:
                p.shape()
                n += 1
                if p.accept(")"):
                    break
                p.expect(",")
        return n
    except _Unparsed:
        return None


def _check_module(mod: _HloModuleText) -> list[tuple[int, str]]:
    """Problems XLA's HLO parser / importer would crash on, as ``(position, message)``."""
    problems: list[tuple[int, str]] = []

    def bad(pos: int, msg: str) -> None:
        problems.append((pos, msg))

    def operand_shape(comp: _Comp, ins: _Instr, k: int) -> _HShape | None:
        if ins.operands is None or k >= len(ins.operands):
            return None
        src = comp.by_name.get(ins.operands[k])
        return None if src is None else src.shape

    def check_called(ins: _Instr, callee_ref: str, arg_shapes: list[_HShape | None], role: str) -> None:
        callee = mod.comp(callee_ref)
        if callee is None:
            return  # XLA's parser reports unknown computations cleanly
        params = callee.params()
        if len(params) != len(arg_shapes):
            bad(ins.pos, f"{ins.opcode} {ins.name!r}: {role} computation {callee.name!r} takes {len(params)} "
                         f"parameter(s), but {len(arg_shapes)} value(s) are passed to it")
            return
        for p in params:
            k = p.number
            if k is None or k >= len(arg_shapes):
                continue
            want = arg_shapes[k]
            if want is not None and p.shape is not None and not _same_shape(p.shape, want):
                bad(ins.pos, f"{ins.opcode} {ins.name!r}: parameter {k} of {role} computation {callee.name!r} is "
                             f"{p.shape}, but the value passed is {want}")

    entry = None
    for comp in mod.comps:
        if comp.entry:
            entry = comp
        # parameter numbers: 0..N-1, each once (XLA's parser CHECK-fails on gaps)
        nums = [p.number for p in comp.params() if p.number is not None]
        if len(nums) == len(comp.params()) and sorted(nums) != list(range(len(nums))):
            bad(comp.pos, f"computation {comp.name!r}: parameter numbers must be 0..{len(nums) - 1} with each "
                          f"used once, got {sorted(nums)}")
        for ins in comp.instrs:
            op = ins.opcode
            if op in ("reshape", "dynamic-reshape"):
                src = operand_shape(comp, ins, 0)
                if src is None or ins.shape is None:
                    continue
                if not src.is_array or not ins.shape.is_array:
                    bad(ins.pos, f"{op} {ins.name!r}: reshape needs an array operand and result, got {src} -> "
                                 f"{ins.shape}")
                elif src.count() != ins.shape.count():
                    bad(ins.pos, f"{op} {ins.name!r} cannot turn {src} ({src.count()} elements) into "
                                 f"{ins.shape} ({ins.shape.count()} elements)")
            elif op == "get-tuple-element":
                src = operand_shape(comp, ins, 0)
                idx = _int_attr(ins, "index")
                if src is None or idx is None:
                    continue
                if not src.is_tuple:
                    bad(ins.pos, f"get-tuple-element {ins.name!r}: operand {ins.operands[0]!r} is {src}, "  # type: ignore[index]
                                 "not a tuple")
                elif not 0 <= idx < len(src.elems):
                    bad(ins.pos, f"get-tuple-element {ins.name!r}: index {idx} is out of range for {src} "
                                 f"({len(src.elems)} elements)")
            elif op == "conditional" and ins.operands is not None:
                if "branch_computations" in ins.attrs:
                    branches = _comp_list(ins.attrs["branch_computations"])
                else:
                    branches = [ins.attrs[k] for k in ("true_computation", "false_computation") if k in ins.attrs]
                if len(ins.operands) != len(branches) + 1:
                    bad(ins.pos, f"conditional {ins.name!r}: {len(branches)} branch computation(s) need "
                                 f"{len(branches) + 1} operands, got {len(ins.operands)}")
                    continue
                for k, br in enumerate(branches):
                    check_called(ins, br, [operand_shape(comp, ins, k + 1)], f"branch {k}")
            elif op in ("call", "fusion") and ins.operands is not None:
                ref = ins.attrs.get("to_apply" if op == "call" else "calls")
                if ref is not None and not ref.strip().startswith("{"):
                    check_called(ins, ref, [operand_shape(comp, ins, k) for k in range(len(ins.operands))],
                                 "called")
            elif op == "while" and ins.operands is not None and len(ins.operands) == 1:
                for role in ("condition", "body"):
                    if role in ins.attrs:
                        check_called(ins, ins.attrs[role], [operand_shape(comp, ins, 0)], role)
            elif op == "bitcast":
                src = operand_shape(comp, ins, 0)
                dst = ins.shape
                if src is None or dst is None or not (src.is_array and dst.is_array):
                    continue
                sb, db = _element_bits(src.etype), _element_bits(dst.etype)
                if sb is not None and db is not None and src.count() * sb != dst.count() * db:
                    bad(ins.pos, f"bitcast {ins.name!r} cannot turn {src} ({src.count() * sb // 8} bytes) into "
                                 f"{dst} ({dst.count() * db // 8} bytes)")
            elif op == "topk" and ins.shape is not None:
                if not (ins.shape.is_tuple and len(ins.shape.elems) == 2):
                    bad(ins.pos, f"topk {ins.name!r}: the result must be a (values, indices) tuple, got {ins.shape}")
    if entry is not None and "entry_computation_layout" in mod.attrs:
        n = _entry_layout_params(mod.attrs["entry_computation_layout"])
        if n is not None and n != len(entry.params()):
            bad(0, f"entry_computation_layout lists {n} parameter(s), but the ENTRY computation "
                   f"{entry.name!r} has {len(entry.params())}")
    return problems


def _valid_layout(s: _HShape) -> bool:
    return s.layout is None or sorted(s.layout) == list(range(len(s.dims)))


def _default_layout(s: _HShape) -> bool:
    return s.layout is None or s.layout == tuple(range(len(s.dims) - 1, -1, -1))


_BITS_RE: Final = re.compile(r"^[a-z]+?(\d+)")


def _element_bits(etype: str) -> int | None:
    if etype == "pred":
        return 8
    m = _BITS_RE.match(etype)
    return int(m.group(1)) if m else None


def _hlo_shape_text(s: _HShape) -> str:
    if s.is_tuple:
        return "(" + ", ".join(_hlo_shape_text(e) for e in s.elems) + ")"
    return f"{s.etype}[{','.join(map(str, s.dims))}]"


def _bitcast_as_ops(ins: _Instr, src: _HShape, operand: str) -> str | None:
    """HLO lines computing ``bitcast`` without one: transpose to physical order, reshape, transpose back.

    None when the bitcast changes the element type or a layout is unknown.
    """
    dst = ins.shape
    if dst is None or not (src.is_array and dst.is_array) or src.etype != dst.etype or src.count() != dst.count():
        return None
    if not (_valid_layout(src) and _valid_layout(dst)):
        return None

    def default(s: _HShape) -> tuple[int, ...]:
        return tuple(range(len(s.dims) - 1, -1, -1))

    ls = src.layout if src.layout is not None else default(src)
    ld = dst.layout if dst.layout is not None else default(dst)
    major_src = list(reversed(ls))  # physical order, major to minor
    major_dst = list(reversed(ld))
    et = src.etype
    t1 = f"{ins.name}.xlasdk_t"
    r = f"{ins.name}.xlasdk_r"
    dims1 = [src.dims[i] for i in major_src]
    dims_r = [dst.dims[i] for i in major_dst]
    perm_back = [major_dst.index(j) for j in range(len(dst.dims))]
    root = "ROOT " if ins.root else ""
    return (
        f"{t1} = {et}[{','.join(map(str, dims1))}] transpose({operand}), "
        f"dimensions={{{','.join(map(str, major_src))}}}\n  "
        f"{r} = {et}[{','.join(map(str, dims_r))}] reshape({t1})\n  "
        f"{root}{ins.name} = {_hlo_shape_text(dst)} transpose({r}), dimensions={{{','.join(map(str, perm_back))}}}"
    )


def _importable_hlo(text: str) -> str | None:
    """Optimized HLO (XLA's ``*after_optimizations*`` dumps) rewritten so it imports as StableHLO.

    ``fusion`` instructions become calls of their fused computations, and ``bitcast`` instructions
    become ``reshape`` (between default layouts) or transpose/reshape/transpose (otherwise):
    the same values, in ops that StableHLO has. None when nothing needs rewriting.
    """
    if "fusion(" not in text and "bitcast(" not in text:
        return None
    mod = _parse_hlo_text(text)
    if mod is None:
        return None
    edits: list[tuple[int, int, str]] = []
    for comp in mod.comps:
        for ins in comp.instrs:
            if ins.opcode == "fusion" and "calls" in ins.attrs and ins.operands is not None:
                callee = ins.attrs["calls"].strip()
                if callee.startswith("{"):
                    continue
                o0, o1 = ins.spans["operands"]
                keep = "".join(f", {k}={ins.attrs[k]}" for k in ("metadata", "sharding") if k in ins.attrs)
                start = ins.spans["opcode"][0]
                edits.append((start, ins.spans["all"][1], f"call{text[o0:o1]}, to_apply={callee}{keep}"))
            elif ins.opcode == "bitcast" and ins.operands is not None and len(ins.operands) == 1:
                src_ins = comp.by_name.get(ins.operands[0])
                if src_ins is None or src_ins.shape is None or ins.shape is None:
                    continue
                src, dst = src_ins.shape, ins.shape
                if (src.is_array and dst.is_array and src.etype == dst.etype and src.count() == dst.count()
                        and _default_layout(src) and _default_layout(dst)):
                    o = ins.spans["opcode"]
                    edits.append((o[0], o[1], "reshape"))
                    continue
                lines = _bitcast_as_ops(ins, src, ins.operands[0])
                if lines is not None:
                    a, b = ins.spans["all"]
                    edits.append((a, b, lines))
    if not edits:
        return None
    out = text
    for a, b, rep in sorted(edits, reverse=True):
        out = out[:a] + rep + out[b:]
    return out


def check_hlo_text(text: str, what: str = "HLO text") -> None:
    """Reject HLO text that XLA's parser or importer would crash on, with a FormatError.

    Checks (in Python, before XLA sees the text): element counts of ``reshape``; operands and
    indices of ``get-tuple-element``; parameter numbering; the arity and parameter shapes of
    computations called by ``call``, ``fusion``, ``while`` and ``conditional``; ``topk`` results;
    the parameter count of ``entry_computation_layout``. Text this checker cannot follow is
    left to XLA's parser (which reports syntax errors cleanly).

    Raises
    ------
    FormatError
        Naming ``what``, the line and the problem.
    """
    mod = _parse_hlo_text(text)
    if mod is None:
        return
    problems = _check_module(mod)
    if problems:
        pos, msg = problems[0]
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise FormatError(f"{what}: line {mod.line(pos)}: {msg}{more}")


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


# -- MLIR types -> Shape -------------------------------------------------------------------------
def _split_top(s: str) -> list[str]:
    out: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in s:
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


_TENSOR_RE: Final = re.compile(r"^((?:(?:\d+|\?)x)*)(.+)$")


def _shape_from_mlir_type(t: str) -> Shape:
    t = t.strip()
    if t == "!stablehlo.token" or t == "!mhlo.token":
        return Shape.token_shape()
    if t.startswith("tuple<") and t.endswith(">"):
        return Shape.tuple_shape(_shape_from_mlir_type(x) for x in _split_top(t[6:-1]))
    if t.startswith("tensor<") and t.endswith(">"):
        parts = _split_top(t[7:-1])
        m = _TENSOR_RE.match(parts[0])
        if m is None or parts[0].startswith("*"):
            raise ValueError(f"unsupported type {t}")
        dims_s = [d for d in m.group(1).split("x") if d]
        try:
            etype = etype_from_mlir(m.group(2))
        except KeyError:
            raise ValueError(f"unsupported element type {m.group(2)!r} in {t}") from None
        bounds: list[str] = []
        if len(parts) > 1:
            bm = re.search(r"bounds<([^>]*)>", parts[1])
            if bm is not None:
                bounds = [b.strip() for b in bm.group(1).split(",")]
        dims: list[int] = []
        dyn: list[bool] = []
        for k, d in enumerate(dims_s):
            if d == "?":
                b = bounds[k] if k < len(bounds) else "?"
                if not b.isdigit():
                    raise ValueError(f"dimension {k} of {t} is dynamic without a bound")
                dims.append(int(b))
                dyn.append(True)
            else:
                dims.append(int(d))
                dyn.append(False)
        return Shape.array_shape(etype, dims, dynamic_dimensions=dyn if any(dyn) else None)
    raise ValueError(f"unsupported type {t}")


def _program_shape(module: Any, what: str) -> ProgramShape:
    sig = _mlir.main_signature(module)
    if sig is None:
        raise FormatError(f"{what}: the module has no 'main' function (func.func @main)")
    args, names, results = sig
    try:
        params = [_shape_from_mlir_type(a) for a in args]
        outs = [_shape_from_mlir_type(r) for r in results]
    except ValueError as e:
        raise FormatError(f"{what}: main function: {e}") from None
    result = outs[0] if len(outs) == 1 else Shape.tuple_shape(outs)
    pnames = [n if n else f"p{i}" for i, n in enumerate(names)]
    if len(set(pnames)) != len(pnames):  # HLO tuple parameters flatten into several arguments
        seen: Counter[str] = Counter()
        renamed = []
        for n in pnames:
            renamed.append(f"{n}.{seen[n]}" if pnames.count(n) > 1 else n)
            seen[n] += 1
        pnames = renamed
    return ProgramShape(params, result, pnames)


# -- error messages ------------------------------------------------------------------------------
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


# -- loading ---------------------------------------------------------------------------------------
def _loaded(
    module: Any,
    what: str,
    *,
    fmt: Format,
    xla: Any = None,
    name: str | None = None,
) -> XlaComputation:
    from .computation import XlaComputation

    program_shape = _program_shape(module, what)
    mname = name or _mlir.module_name(module) or "main"
    text = _mlir.module_to_text(module, debug_info=True)
    return XlaComputation._from_loaded(mname, program_shape, module, text, xla=xla, source_format=fmt.value)


def _verify_converted(data: bytes, what: str) -> Any:
    try:
        return _mlir.parse_module(data)
    except Exception as e:
        raise FormatError(f"{what}: the module is inconsistent: {_mlir_problem(e, 'hlo')}") from None


def _from_hlo_module(hm: Any, what: str, checked_text: str | None, fmt: Format) -> XlaComputation:
    text = checked_text if checked_text is not None else _mlir.hlo_module_to_text(hm)
    if checked_text is None:
        check_hlo_text(text, what)
    proto = _mlir.hlo_module_to_proto(hm)
    import_proto = proto
    try:
        rewritten = _importable_hlo(text)
    except Exception:  # pragma: no cover - a rewriter bug must not hide the module
        rewritten = None
    if rewritten is not None:  # an optimized module: fusions and bitcasts in StableHLO terms
        check_hlo_text(rewritten, what)
        try:
            import_proto = _mlir.hlo_module_to_proto(_mlir.hlo_module_from_text(rewritten))
        except Exception as e:  # pragma: no cover - the rewrite keeps the module valid
            raise FormatError(f"{what}: cannot import the optimized HLO: {_xla_text_problem(e)}") from None
    try:
        bc = _mlir.hlo_proto_to_stablehlo(import_proto)
    except Exception as e:
        raise FormatError(f"{what}: XLA could not import the HLO module: {_one_line(e)}") from None
    module = _verify_converted(bc, what)
    try:
        xla = _mlir.xla_computation_from_proto(proto)
    except Exception as e:  # pragma: no cover - the proto came from XLA itself
        raise FormatError(f"{what}: {_one_line(e)}") from None
    return _loaded(module, what, fmt=fmt, xla=xla, name=str(hm.name))


def computation_from_hlo_text(text: str, what: str = "from_hlo_text") -> XlaComputation:
    """An :class:`~xlasdk.XlaComputation` from HLO text (``HloModule ...``).

    The text is pre-checked for the inconsistencies that crash XLA, parsed by XLA, imported as
    StableHLO and verified.

    Raises
    ------
    FormatError
        For syntax errors and inconsistent modules, naming ``what``, the line and the problem.
    """
    if not isinstance(text, str):
        raise FormatError(f"{what}: expected HLO text (str), got {type(text).__name__}")
    if not text.strip():
        raise FormatError(f"{what}: the HLO text is empty")
    head = _strip_leading_comments(text)
    if not head.startswith("HloModule"):
        found = sniff_format(text.encode("utf-8", "replace"))
        hint = f" (it looks like {found.description})" if found not in (None, Format.HLO_TEXT) else ""
        raise FormatError(f"{what}: not HLO text: it does not start with 'HloModule'{hint}")
    check_hlo_text(text, what)
    try:
        hm = _mlir.hlo_module_from_text(text)
    except Exception as e:
        raise FormatError(f"{what}: HLO syntax error: {_xla_text_problem(e)}") from None
    return _from_hlo_module(hm, what, text, Format.HLO_TEXT)


def computation_from_hlo_proto(data: bytes, what: str = "from_hlo_proto") -> XlaComputation:
    """An :class:`~xlasdk.XlaComputation` from a serialized ``HloModuleProto``.

    Also accepts the ``HloProto`` and ``HloSnapshot`` wrappers of XLA's ``*.hlo.pb`` dumps.

    Raises
    ------
    FormatError
        For empty, truncated or corrupt data and inconsistent modules.
    """
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if not isinstance(data, bytes):
        raise FormatError(f"{what}: expected bytes of an HloModuleProto, got {type(data).__name__}")
    if not data:
        raise FormatError(f"{what}: the data is empty")
    found = sniff_format(data)
    if found is not None and found is not Format.HLO_PROTO:
        raise FormatError(f"{what}: not an HLO module proto: it holds {found.description}")
    try:
        inner = _find_module_proto(data)
    except ValueError as e:
        raise FormatError(f"{what}: not a valid protobuf message (truncated or corrupt): {e}") from None
    if inner is None:
        raise FormatError(f"{what}: the protobuf message is not an HloModuleProto (no name and computations)")
    try:
        hm = _mlir.hlo_module_from_proto(inner)
    except Exception as e:
        raise FormatError(f"{what}: corrupt HloModuleProto: {_one_line(e)}") from None
    return _from_hlo_module(hm, what, None, Format.HLO_PROTO)


def computation_from_stablehlo(data: str | bytes, what: str = "from_stablehlo") -> XlaComputation:
    """An :class:`~xlasdk.XlaComputation` from StableHLO text, MLIR bytecode or a portable artifact.

    Raises
    ------
    FormatError
        For syntax errors, modules that fail MLIR verification, corrupt bytecode or a module
        without a ``main`` function.
    """
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if isinstance(data, bytes):
        if not data:
            raise FormatError(f"{what}: the data is empty")
        if data.startswith(_BYTECODE_MAGIC):
            return _from_bytecode(data, what)
        text = _as_text(data)
        if text is None:
            raise FormatError(f"{what}: neither StableHLO text nor MLIR bytecode (binary data without the "
                              "'ML\\xefR' bytecode header)")
        data = text
    if not isinstance(data, str):
        raise FormatError(f"{what}: expected StableHLO text (str) or bytecode (bytes), got {type(data).__name__}")
    if not data.strip():
        raise FormatError(f"{what}: the StableHLO text is empty")
    if _strip_leading_comments(data).startswith("HloModule"):
        raise FormatError(f"{what}: not StableHLO: it holds HLO text (use from_hlo_text or a .hlo suffix)")
    try:
        module = _mlir.parse_module(data)
    except Exception as e:
        raise FormatError(f"{what}: invalid StableHLO: {_mlir_problem(e, 'text')}") from None
    return _loaded(module, what, fmt=Format.STABLEHLO_TEXT)


# sha256 of bytecode this process wrote itself (safe to decode in-process); the rest is decoded
# in a child process first, because MLIR's bytecode reader can crash on corrupt input.
_TRUSTED_BYTECODE: OrderedDict[bytes, None] = OrderedDict()
_TRUSTED_MAX: Final = 1024


def _trust(data: bytes) -> None:
    _TRUSTED_BYTECODE[hashlib.sha256(data).digest()] = None
    while len(_TRUSTED_BYTECODE) > _TRUSTED_MAX:
        _TRUSTED_BYTECODE.popitem(last=False)


def _from_bytecode(data: bytes, what: str) -> XlaComputation:
    version = portable_artifact_version(data)
    kind = f"StableHLO portable artifact (v{version})" if version else "MLIR bytecode"
    if hashlib.sha256(data).digest() in _TRUSTED_BYTECODE:
        try:
            module = _mlir.deserialize_portable_artifact(data) if version else _mlir.parse_module(data)
        except Exception as e:  # pragma: no cover - bytes this process wrote
            raise FormatError(f"{what}: corrupt or truncated {kind}: {_one_line(e)}") from None
        return _loaded(module, what, fmt=Format.PORTABLE_ARTIFACT)
    try:
        text = _mlir.bytecode_to_text_isolated(data, artifact=version is not None)
    except ValueError as e:
        raise FormatError(f"{what}: corrupt or truncated {kind}: {_one_line(e)}") from None
    try:
        module = _mlir.parse_module(text)
    except Exception as e:
        raise FormatError(f"{what}: invalid StableHLO in the {kind}: {_mlir_problem(e, 'bytecode')}") from None
    return _loaded(module, what, fmt=Format.PORTABLE_ARTIFACT)


def portable_artifact_version(data: bytes) -> str | None:
    """The StableHLO version a portable artifact was written for (``"1.9.0"``), or None.

    Read from the bytecode header's producer string (``StableHLO_v1.9.0``); None for plain MLIR
    bytecode and anything else.
    """
    if not data.startswith(_BYTECODE_MAGIC):
        return None
    m = re.match(rb"StableHLO_v(\d+\.\d+\.\d+)\x00", data[5:40])
    return m.group(1).decode() if m else None


def _read(path: PathLike, what: str) -> bytes:
    spath = os.fspath(path)
    if os.path.isdir(spath):
        raise FormatError(f"{what}: is a directory, not a file")
    try:
        with open(spath, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise FormatError(f"{what}: no such file") from None
    except OSError as e:
        raise FormatError(f"{what}: cannot read the file: {e.strerror or e}") from None


def load_computation(path: PathLike, format: Format | str | None = None) -> XlaComputation:
    """Load a computation from a file, choosing the format by the suffix.

    Parameters
    ----------
    path:
        ``.hlo`` / ``.hlo.txt`` (HLO text), ``.mlir`` (StableHLO text), ``.mlirbc`` (StableHLO
        portable artifact or MLIR bytecode), ``.pb`` (``HloModuleProto``, or the ``HloProto``
        XLA's dumps write). For ``.txt`` and any other suffix the format is recognised from the
        content, so XLA dump files such as ``module_0000.main.before_optimizations.txt`` load as
        they are.
    format:
        Force a format (``"hlo"``, ``"mlir"``, ``"mlirbc"``, ``"pb"`` or a :class:`Format`).

    Returns
    -------
    XlaComputation
        Compiles, runs, prints and saves like a built one; its program shape comes from the
        module's ``main`` function (HLO tuple parameters and results are flattened).

    Raises
    ------
    FormatError
        If the file is missing, empty, truncated, corrupt, of another format than its suffix
        says, or holds an inconsistent module; the message names the file and the problem.
    """
    spath = os.fspath(path)
    what = spath
    data = _read(spath, what)
    if not data:
        raise FormatError(f"{what}: the file is empty")
    fmt = _parse_format(format) if format is not None else format_from_suffix(spath)
    sniffed = sniff_format(data)
    if fmt is None:
        if sniffed is None:
            raise FormatError(
                f"{what}: not a recognised computation format (expected HLO text, StableHLO text, a "
                f"portable artifact or an HloModuleProto; suffixes {_SUFFIX_LIST})"
            )
        fmt = sniffed
    elif sniffed is not None and sniffed is not fmt:
        raise FormatError(
            f"{what}: the suffix says {fmt.description}, but the file holds {sniffed.description}"
        )
    if fmt is Format.HLO_TEXT:
        text = _as_text(data)
        if text is None:
            raise FormatError(f"{what}: not HLO text (binary data, or not UTF-8)")
        return computation_from_hlo_text(text, what)
    if fmt is Format.STABLEHLO_TEXT:
        text = _as_text(data)
        if text is None:
            raise FormatError(f"{what}: not StableHLO text (binary data, or not UTF-8)")
        return computation_from_stablehlo(text, what)
    if fmt is Format.PORTABLE_ARTIFACT:
        if not data.startswith(_BYTECODE_MAGIC):
            raise FormatError(f"{what}: not a StableHLO portable artifact (no 'ML\\xefR' bytecode header)")
        return _from_bytecode(data, what)
    return computation_from_hlo_proto(data, what)


# -- saving ------------------------------------------------------------------------------------------
def _atomic_write(path: str, data: bytes) -> None:
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".xlasdk-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def computation_bytes(
    comp: XlaComputation, fmt: Format, *, target_version: str | None = None, what: str = "save"
) -> bytes:
    """``comp`` in the given format, as the bytes a file of that format holds."""
    if fmt is Format.HLO_TEXT:
        return comp.as_hlo_text().encode("utf-8")
    if fmt is Format.STABLEHLO_TEXT:
        return _mlir.module_to_text(comp._mlir_module(), debug_info=True).encode("utf-8")
    if fmt is Format.PORTABLE_ARTIFACT:
        return serialize_portable_artifact(comp, target_version, what=what)
    return comp.as_serialized_hlo_module_proto()


def save_computation(
    comp: XlaComputation, path: PathLike, format: Format | str | None = None, *, target_version: str | None = None
) -> None:
    """Write ``comp`` to ``path`` in the format of its suffix (see :func:`load_computation`).

    The file is written to a temporary name and renamed, so readers never see half a file.

    Raises
    ------
    FormatError
        For an unknown suffix, a module the format cannot hold (``mhlo`` ops in a portable
        artifact, a too-old ``target_version``) or a directory that cannot be written.
    """
    spath = os.fspath(path)
    if format is not None:
        fmt = _parse_format(format)
    else:
        found = format_from_suffix(spath)
        if found is None and spath.lower().endswith(".txt"):
            found = Format.HLO_TEXT
        if found is None:
            raise FormatError(f"save({spath!r}): unknown suffix; use one of {_SUFFIX_LIST}, or pass format=")
        fmt = found
    if target_version is not None and fmt is not Format.PORTABLE_ARTIFACT:
        raise FormatError(f"save({spath!r}): target_version applies only to .mlirbc portable artifacts")
    data = computation_bytes(comp, fmt, target_version=target_version, what=f"save({spath!r})")
    try:
        _atomic_write(spath, data)
    except OSError as e:
        raise FormatError(f"save({spath!r}): cannot write the file: {e.strerror or e}") from None


# -- portable artifacts ---------------------------------------------------------------------------
_VERSION_RE: Final = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
_REQUIREMENTS: Final = ("NONE", "WEEK_4", "WEEK_12", "MAX")


def _vtuple(v: str) -> tuple[int, int, int]:
    m = _VERSION_RE.match(v)
    assert m is not None
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def _candidate_versions(lo: str, hi: str) -> list[str]:
    """Every version string between ``lo`` and ``hi`` on a grid wide enough to hold real releases."""
    lo_t, hi_t = _vtuple(lo), _vtuple(hi)
    out: list[str] = []
    for major in range(lo_t[0], hi_t[0] + 1):
        for minor in range(100):
            for patch in range(50):
                v = (major, minor, patch)
                if lo_t <= v <= hi_t:
                    out.append(f"{major}.{minor}.{patch}")
    return out


def _try_serialize(module: Any, version: str) -> bytes | None:
    try:
        return _mlir.serialize_portable_artifact(module, version)
    except Exception:
        return None


def _foreign_ops(module: Any) -> list[str]:
    text = _mlir.module_to_text(module, debug_info=False, generic=True)
    return sorted(set(re.findall(r'"((?:mhlo|sdy|mpmd)\.[\w.]+)"', text)))


def serialize_portable_artifact(
    comp: XlaComputation, target_version: str | None = None, *, what: str = "serialize_portable_artifact"
) -> bytes:
    """The computation as a StableHLO portable artifact (see ``XlaComputation`` for the contract)."""
    data = _serialize_portable_artifact(comp, target_version, what)
    _trust(data)
    return data


def _serialize_portable_artifact(comp: XlaComputation, target_version: str | None, what: str) -> bytes:
    module = comp._mlir_module()
    current = _mlir.stablehlo_current_version()
    minimum = _mlir.stablehlo_minimum_version()
    if target_version is None:
        data = _try_serialize(module, minimum)
        if data is not None:
            return data
        full = _try_serialize(module, current)
        if full is None:
            raise FormatError(f"{what}: {_cannot_serialize(module, current)}")
        cands = _candidate_versions(minimum, current)
        lo, hi = 0, len(cands) - 1  # cands[hi] works (current), cands[0] does not
        best = full
        while hi - lo > 1:
            mid = (lo + hi) // 2
            got = _try_serialize(module, cands[mid])
            if got is not None:
                hi, best = mid, got
            else:
                lo = mid
        return best
    if not isinstance(target_version, str):
        raise FormatError(f"{what}: target_version must be a string like '1.9.0', got {target_version!r}")
    v = target_version.strip()
    if v.upper() in _REQUIREMENTS:
        v = _mlir.stablehlo_version_for(v.upper())
    elif v.lower() == "current":
        v = current
    elif v.lower() in ("minimum", "oldest"):
        v = minimum
    if not _VERSION_RE.match(v):
        raise FormatError(
            f"{what}: {target_version!r} is not a StableHLO version; use MAJOR.MINOR.PATCH between {minimum} "
            f"and {current} (or WEEK_4, WEEK_12, MAX, current)"
        )
    if _vtuple(v) < _vtuple(minimum):
        raise FormatError(f"{what}: StableHLO {v} is older than the oldest version this jaxlib writes ({minimum})")
    if _vtuple(v) > _vtuple(current):
        raise FormatError(f"{what}: StableHLO {v} is newer than this jaxlib's current version ({current})")
    try:
        return _mlir.serialize_portable_artifact(module, v)
    except Exception as e:
        err = str(e)
    if _try_serialize(module, current) is None:
        raise FormatError(f"{what}: {_cannot_serialize(module, current)}")
    m = re.search(r"failed to legalize operation '([\w.]+)'", err)
    op = f" ({m.group(1)} is newer)" if m else ""
    oldest = _oldest_version(module, v, current)
    raise FormatError(
        f"{what}: StableHLO {v} cannot hold every op of this module{op}; the oldest version that can is {oldest}"
    )


def _oldest_version(module: Any, lo: str, hi: str) -> str:
    cands = _candidate_versions(lo, hi)
    a, b = 0, len(cands) - 1
    while b - a > 1:
        mid = (a + b) // 2
        if _try_serialize(module, cands[mid]) is not None:
            b = mid
        else:
            a = mid
    return cands[b]


def _cannot_serialize(module: Any, current: str) -> str:
    foreign = _foreign_ops(module)
    if foreign:
        return (
            f"the module uses ops that are not StableHLO ({', '.join(foreign[:5])}), which a portable artifact "
            "cannot hold; save it as .mlir, .hlo or .pb instead"
        )
    return f"the module cannot be serialized as a StableHLO {current} portable artifact"
