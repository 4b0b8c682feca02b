"""The HLO text pre-check: rejects, in Python, modules that XLA's parser or importer abort on."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Final

from ..errors import FormatError, XlaSdkError
from .hlo_rewrite import explicit_replica_groups
from .hlo_text import _Comp, _HloModuleText, _HShape, _Instr, _parse_hlo_text, _Parser, _Unparsed


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


_BITS_RE: Final = re.compile(r"^[a-z]+?(\d+)")


def _element_bits(etype: str) -> int | None:
    if etype == "pred":
        return 8
    m = _BITS_RE.match(etype)
    return int(m.group(1)) if m else None


_ELIDED_CONSTANT = re.compile(r"^[^\n\"]*\bconstant\(\{\.\.\.\}\)", re.MULTILINE)


def check_hlo_text(text: str, what: str = "HLO text") -> None:
    """Reject HLO text that XLA's parser or importer would crash on, with a FormatError.

    Checks (in Python, before XLA sees the text): constants elided as ``{...}`` (XLA reads them
    as garbage); element counts of ``reshape``; operands and
    indices of ``get-tuple-element``; parameter numbering; the arity and parameter shapes of
    computations called by ``call``, ``fusion``, ``while`` and ``conditional``; ``topk`` results;
    the parameter count of ``entry_computation_layout``; replica groups over mesh axes that name
    no groups of their mesh (XLA of jaxlib 0.10 aborts on an unknown axis); first, in linear time,
    the size claims of :func:`check_hlo_claims` (the rest takes time and memory that grow with
    them). Text this checker cannot follow is left to XLA's parser (which reports syntax errors
    cleanly).

    Raises
    ------
    FormatError
        Naming ``what``, the line and the problem.
    XlaSdkError
        An ``XLASDK_MAX_*`` override that is not a whole number >= 0.
    """
    check_hlo_claims(text, what)
    check_elided_constants(text, what)
    try:
        explicit_replica_groups(text)
    except FormatError as e:
        raise FormatError(f"{what}: {e}") from None
    mod = _parse_hlo_text(text)
    if mod is None:
        return
    try:
        problems = _check_module(mod)
    except RecursionError:  # nested too deeply for Python: XLA's own message stands
        return
    if problems:
        pos, msg = problems[0]
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise FormatError(f"{what}: line {mod.line(pos)}: {msg}{more}")


def check_elided_constants(text: str, what: str) -> None:
    """Reject HLO text whose constants are elided as ``{...}`` (XLA's parser reads garbage)."""
    if "({...})" not in text:  # the common case, at memchr speed (the regex costs ~0.3x XLA's parse)
        return
    elided = _ELIDED_CONSTANT.search(text)
    if elided is not None:  # XLA's parser accepts it and fills the constant with garbage
        line = text.count("\n", 0, elided.start()) + 1
        raise FormatError(
            f"{what}: line {line}: a constant's value is elided as {{...}}, so XLA would read garbage "
            "values. XLA's dumps elide constants of more than 10 elements unless --xla_dump_large_constants "
            "is set: load the .hlo.pb or the snapshot beside it, or dump again with XLA_FLAGS="
            "--xla_dump_large_constants; text printed by code needs print_large_constants=True"
        )


# -- claims a file makes about sizes, checked before XLA allocates for them ---------------------------
#: The most elements one tuple of HLO text (a tuple shape, an instruction's operand list) may have;
#: ``XLASDK_MAX_TUPLE_ELEMENTS`` overrides it (0: no limit). XLA:CPU's compile time grows about
#: x16 per x4 elements of a tuple (4,000: 1 s; 16,000: 15 s; 100,000: more than 150 s), and its
#: parser takes 4.5 GiB and 28 s for a 10 MB tuple of 10^6 scalars.
MAX_TUPLE_ELEMENTS: Final = 32_768
#: The most bytes one constant of HLO text may claim; ``XLASDK_MAX_CONSTANT_BYTES`` overrides it
#: (0: no limit). XLA:CPU takes about 15 times a constant's bytes and 2 minutes a GiB to load and
#: compile it (``f32[268435456] constant(1)``, 60 bytes of text: 14.5 GiB, 57 s + 150 s).
MAX_CONSTANT_BYTES: Final = 128 << 20

_BRACKET_RE: Final = re.compile(r'"(?:[^"\\\n]|\\.)*"|[(){}\[\]]')
_CONSTANT_RE: Final = re.compile(r"[ \t]constant\(")
_CONSTANT_HEAD_RE: Final = re.compile(r"[ \t]*(?:ROOT[ \t]+)?%?(?P<name>[^\s=]+)[ \t]*=[ \t]*(?P<shape>[^=]*)")
_ARRAY_SHAPE_RE: Final = re.compile(r"\b([a-z][a-z0-9]*)\[([^\]]*)\]")
_CLOSE: Final = {")": "(", "}": "{", "]": "["}


def size_limit(name: str, default: int) -> int:
    """The limit the environment variable ``name`` sets (a whole number; 0: none), else ``default``.

    Raises
    ------
    XlaSdkError
        When the variable holds something else.
    """
    env = os.environ.get(name, "").strip().replace("_", "")
    if not env:
        return default
    try:
        value = int(env)
    except ValueError:
        value = -1
    if value < 0:
        raise XlaSdkError(f"{name} must be a whole number >= 0 (0: no limit), got {os.environ[name]!r}")
    return value


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,} bytes"


def check_hlo_claims(text: str, what: str = "HLO text") -> None:
    """Refuse HLO text whose size claims would cost more than a budget, before XLA reads it.

    XLA's parser builds what a file claims before it checks it: a tuple of 10^6 scalars (10 MB
    of text) takes it 4.5 GiB and 28 s, then the compile grows with the square of the arity;
    ``f32[268435456] constant({1, 2, 3})`` (97 bytes) has it allocate 1 GiB before it counts the
    three values. Checked here, in Python, in time linear in the text:

    - a tuple (a tuple shape or an instruction's operand list) may have at most
      :data:`MAX_TUPLE_ELEMENTS` elements (``XLASDK_MAX_TUPLE_ELEMENTS``);
    - a constant may claim at most :data:`MAX_CONSTANT_BYTES` (``XLASDK_MAX_CONSTANT_BYTES``), and
      one written as a list of values may not claim more values than the rest of the text can
      spell (two characters each);
    - an array constant of several elements must list them: XLA's parser reads
      ``f32[4] constant(1)`` as ``{1, 0, 0, 0}`` (a wrong value, silently).

    Raises
    ------
    FormatError
        Naming ``what``, the line, the claim and the limit.
    XlaSdkError
        An environment override that is not a whole number >= 0.
    """
    _check_tuple_sizes(text, what, size_limit("XLASDK_MAX_TUPLE_ELEMENTS", MAX_TUPLE_ELEMENTS))
    _check_constant_sizes(text, what, size_limit("XLASDK_MAX_CONSTANT_BYTES", MAX_CONSTANT_BYTES))


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _check_tuple_sizes(text: str, what: str, limit: int) -> None:
    if limit <= 0 or text.count(",") < limit:  # a tuple of limit + 1 elements has limit commas
        return
    # Only a line of 2 * limit characters can hold such a tuple (an element and its comma: 2 or more).
    if max(map(len, text.split("\n"))) < 2 * limit:  # none (a C-speed look before the regex's walk)
        return
    for line in re.finditer(rf"^[^\n]{{{2 * limit},}}", text, re.MULTILINE):
        _check_line_tuples(text, line.start(), line.end(), what, limit)


def _check_line_tuples(text: str, start: int, end: int, what: str, limit: int) -> None:
    """Elements of each ``( ... )`` group in ``text[start:end]``: its commas outside nested brackets and strings."""
    stack: list[list[int]] = []  # [opening char, its position, commas inside nested groups and strings]
    for m in _BRACKET_RE.finditer(text, start, end):
        c = m.group()
        if c[0] == '"':
            if stack:
                stack[-1][2] += c.count(",")
        elif c in "({[":
            stack.append([ord(c), m.start(), 0])
        else:
            if not stack or stack[-1][0] != ord(_CLOSE[c]):
                return  # unbalanced: XLA's parser reports it
            kind, pos, nested = stack.pop()
            commas = text.count(",", pos, m.start())
            if kind == ord("(") and commas - nested >= limit:
                raise FormatError(_tuple_problem(text, start, pos, commas - nested + 1, what, limit))
            if stack:
                stack[-1][2] += commas
    # a group left open: XLA's parser reports it


_INSTR_HEAD_RE: Final = re.compile(r"[ \t]*(?:ROOT[ \t]+)?%?([^\s=(){}]+)[ \t]*=")


def _tuple_problem(text: str, line_start: int, pos: int, n: int, what: str, limit: int) -> str:
    head = _INSTR_HEAD_RE.match(text, line_start, pos)
    before = text[max(line_start, pos - 64) : pos].rstrip()
    if head is None:
        claim = f"a tuple of {n:,} elements"
    elif before[-1:].isalnum() or before[-1:] in "-_":
        claim = f"instruction {head.group(1)!r} has {n:,} operands"
    else:
        claim = f"instruction {head.group(1)!r} has a tuple shape of {n:,} elements"
    return (f"{what}: line {_line_of(text, pos)}: {claim}, more than the limit of {limit:,} "
            "(XLASDK_MAX_TUPLE_ELEMENTS raises it; XLA's parse and compile take time and memory that grow with it)")


def _constants(text: str) -> Iterator[re.Match[str]]:
    """The matches of :data:`_CONSTANT_RE` in ``text``, found from the literal ``constant(`` at C
    speed (the regex alone tries its leading character class at every position of a large file)."""
    pos = text.find("constant(", 1)
    while pos > 0:
        m = _CONSTANT_RE.match(text, pos - 1)
        if m is not None:
            yield m
        pos = text.find("constant(", pos + 9)


def _check_constant_sizes(text: str, what: str, limit: int) -> None:
    for c in _constants(text):
        line_start = text.rfind("\n", 0, c.start()) + 1
        m = _CONSTANT_HEAD_RE.fullmatch(text, line_start, c.start())
        if m is None:
            continue
        count, nbytes, arrays = 0, 0, 0
        for sm in _ARRAY_SHAPE_RE.finditer(m.group("shape")):
            bits = _element_bits(sm.group(1))
            if bits is None or sm.group(1) == "token":
                continue
            n = 1
            for d in sm.group(2).split(","):
                d = d.strip().removeprefix("<=")
                if d.isdigit():
                    n *= int(d)
            arrays += 1
            count += n
            nbytes += (n * bits + 7) // 8
        if arrays == 0:
            continue
        shape = m.group("shape").strip()
        name = m.group("name")
        line = _line_of(text, m.start("shape"))
        value = text[c.end() : c.end() + 64].lstrip()
        if value.startswith("{...}"):
            continue  # elided: check_elided_constants says so
        listed = value.startswith("{")
        if arrays == 1 and not shape.startswith("(") and count > 1 and not listed:
            # XLA's parser takes `f32[4] constant(1)` as {1, 0, 0, 0}: a wrong value, not a fill
            raise FormatError(
                f"{what}: line {line}: constant {name!r} is {shape} ({count:,} elements) but its value is one number; "
                f"XLA's parser would set the first element to it and the other {count - 1:,} to zero: write every "
                "value in braces, or broadcast a scalar constant"
            )
        if limit > 0 and nbytes > limit:
            raise FormatError(
                f"{what}: line {line}: constant {name!r} claims {shape} ({count:,} elements, {_bytes(nbytes)}), more "
                f"than the limit of {_bytes(limit)} for one constant (XLASDK_MAX_CONSTANT_BYTES raises it)"
            )
        rest = len(text) - c.end()
        if arrays == 1 and not shape.startswith("(") and listed:
            room = rest // 2 + 1  # each value takes a character and a separator
            if count > room:
                raise FormatError(
                    f"{what}: line {line}: constant {name!r} claims {shape} ({count:,} elements), but the {rest:,} "
                    f"characters of text after it can spell at most {room:,} values"
                )
