"""The HLO text pre-check: rejects, in Python, modules that XLA's parser or importer abort on."""

from __future__ import annotations

import re
from typing import Final

from ..errors import FormatError
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
    the parameter count of ``entry_computation_layout``. Text this checker cannot follow is
    left to XLA's parser (which reports syntax errors cleanly).

    Raises
    ------
    FormatError
        Naming ``what``, the line and the problem.
    """
    check_elided_constants(text, what)
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
