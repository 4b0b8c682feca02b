"""Optimized HLO rewritten so it imports as StableHLO (``fusion`` -> ``call``, ``bitcast`` -> reshapes,
replica groups over mesh axes -> the groups they name)."""

from __future__ import annotations

import re
from typing import Final

from ..errors import FormatError, ShapeError
from ..sharding._mesh import format_groups
from ..sharding._parse import parse_replica_groups
from .hlo_text import _Comp, _HShape, _Instr, _parse_hlo_text


def _valid_layout(s: _HShape) -> bool:
    return s.layout is None or sorted(s.layout) == list(range(len(s.dims)))


def _default_layout(s: _HShape) -> bool:
    return s.layout is None or s.layout == tuple(range(len(s.dims) - 1, -1, -1))


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


def _bitcast_convert_as_ops(ins: _Instr, src: _HShape, operand: str) -> str | None:
    """HLO lines for a ``bitcast`` that changes the element type (``s32[] bitcast(f32[])``, as XLA
    writes for ``jnp.sort``'s total-order comparator): a ``bitcast-convert`` of the same width,
    followed by the layout-aware reshape of :func:`_bitcast_as_ops` when the dimensions change too.

    None when the element widths differ or a layout is unknown (the import then reports it).
    """
    dst = ins.shape
    if dst is None or not (src.is_array and dst.is_array):
        return None
    sb, db = _ELEMENT_BITS.get(src.etype), _ELEMENT_BITS.get(dst.etype)
    if sb is None or sb != db or src.count() != dst.count():
        return None
    root = "ROOT " if ins.root else ""
    if src.dims == dst.dims and _default_layout(src) and _default_layout(dst):
        return f"{root}{ins.name} = {_hlo_shape_text(dst)} bitcast-convert({operand})"
    mid = _HShape(dst.etype, src.dims, (), src.layout)
    mid_name = f"{ins.name}.xlasdk_bc"
    rest = _bitcast_as_ops(_Instr(ins.name, dst, "bitcast", [mid_name], {}, ins.pos, ins.root), mid, mid_name)
    if rest is None:
        return None
    return f"{mid_name} = {_hlo_shape_text(mid)} bitcast-convert({operand})\n  {rest}"


_ELEMENT_BITS: Final = {
    "pred": 8, "s2": 2, "u2": 2, "s4": 4, "u4": 4, "s8": 8, "u8": 8, "s16": 16, "u16": 16, "s32": 32, "u32": 32,
    "s64": 64, "u64": 64, "f16": 16, "bf16": 16, "f32": 32, "f64": 64, "c64": 64, "c128": 128, "f8e5m2": 8,
    "f8e4m3fn": 8, "f8e4m3b11fnuz": 8, "f8e5m2fnuz": 8, "f8e4m3fnuz": 8, "f8e4m3": 8, "f8e3m4": 8, "f8e8m0fnu": 8,
    "f4e2m1fn": 4,
}


def _async_pair_as_op(
    done: _Instr, start: _Instr | None, users: dict[str, int], text: str
) -> tuple[tuple[int, int], tuple[int, int, str]] | None:
    """``copy-start``/``copy-done`` as one ``copy``, ``async-start``/``async-done`` as one ``call``
    of the wrapped computation (XLA:CPU runs neither pair; GPU dumps have both): the span of the
    start instruction to delete and the edit of the done instruction. None when the start is not
    this done's alone (an ``async-update`` or another user in between) or is not understood."""
    if start is None or start.opcode != done.opcode.replace("-done", "-start") or start.operands is None:
        return None
    if users.get(start.name, 0) != 1 or start.root:
        return None
    o0, o1 = start.spans["operands"]
    if done.opcode == "copy-done":
        op = f"copy{text[o0:o1]}"
    else:
        callee = start.attrs.get("calls", "").strip()
        if not callee or callee.startswith("{"):
            return None
        op = f"call{text[o0:o1]}, to_apply={callee}"
    keep = "".join(f", {k}={done.attrs[k]}" for k in ("metadata", "sharding") if k in done.attrs)
    return start.spans["all"], (done.spans["opcode"][0], done.spans["all"][1], op + keep)


def _operand_shape(comp: _Comp, ref: str) -> _HShape | None:
    """The shape of operand ``ref``: an instruction's name, or ``name#k`` (element ``k`` of a
    tuple-shaped instruction, as XLA of jaxlib 0.12 writes it)."""
    base, sep, idx = ref.partition("#")
    ins = comp.by_name.get(base)
    if ins is None or ins.shape is None:
        return None
    if not sep:
        return ins.shape
    if not idx.isdigit() or not ins.shape.is_tuple or int(idx) >= len(ins.shape.elems):
        return None
    return ins.shape.elems[int(idx)]


def _importable_hlo(text: str) -> str | None:
    """Optimized HLO (XLA's ``*after_optimizations*`` dumps) rewritten so it imports as StableHLO.

    ``fusion`` instructions become calls of their fused computations, ``bitcast`` instructions
    become ``reshape`` (between default layouts), transpose/reshape/transpose (otherwise) or
    ``bitcast-convert`` (a change of element type), and ``copy-start``/``copy-done`` and
    ``async-start``/``async-done`` pairs become ``copy`` and ``call``: the same values, in ops that
    StableHLO has and XLA:CPU runs. None when nothing needs rewriting.
    """
    if not any(k in text for k in ("fusion(", "bitcast(", "copy-start(", "async-start(")):
        return None
    mod = _parse_hlo_text(text)
    if mod is None:
        return None
    edits: list[tuple[int, int, str]] = []
    for comp in mod.comps:
        users: dict[str, int] = {}
        for ins in comp.instrs:
            for used in ins.operands or ():
                users[used] = users.get(used, 0) + 1
        for ins in comp.instrs:
            if ins.opcode in ("copy-done", "async-done") and ins.operands is not None and len(ins.operands) == 1:
                pair = _async_pair_as_op(ins, comp.by_name.get(ins.operands[0]), users, text)
                if pair is not None:
                    (s0, s1), done_edit = pair
                    edits.append((s0, s1, ""))
                    edits.append(done_edit)
                continue
            if ins.opcode == "fusion" and "calls" in ins.attrs and ins.operands is not None:
                callee = ins.attrs["calls"].strip()
                if callee.startswith("{"):
                    continue
                o0, o1 = ins.spans["operands"]
                keep = "".join(f", {k}={ins.attrs[k]}" for k in ("metadata", "sharding") if k in ins.attrs)
                start = ins.spans["opcode"][0]
                edits.append((start, ins.spans["all"][1], f"call{text[o0:o1]}, to_apply={callee}{keep}"))
            elif ins.opcode == "bitcast" and ins.operands is not None and len(ins.operands) == 1:
                src_shape = _operand_shape(comp, ins.operands[0])
                if src_shape is None or ins.shape is None:
                    continue
                src, dst = src_shape, ins.shape
                if (src.is_array and dst.is_array and src.etype == dst.etype and src.count() == dst.count()
                        and _default_layout(src) and _default_layout(dst)):
                    o = ins.spans["opcode"]
                    edits.append((o[0], o[1], "reshape"))
                    continue
                if src.is_array and dst.is_array and src.etype != dst.etype:
                    lines = _bitcast_convert_as_ops(ins, src, ins.operands[0])
                else:
                    lines = _bitcast_as_ops(ins, src, ins.operands[0])
                if lines is not None:
                    a, b = ins.spans["all"]
                    edits.append((a, b, lines))
    return _apply_edits(text, edits)


def _apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str | None:
    """``text`` with each ``(start, end, replacement)`` applied (spans never overlap), or None
    when there are none."""
    if not edits:
        return None
    out = text
    for a, b, rep in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        out = out[:a] + rep + out[b:]
    return out


def _backported_hlo_text(text: str) -> str | None:
    """HLO text written by a newer XLA, in the syntax of the XLA that jaxlib 0.10.x carries.

    XLA of jaxlib 0.12 writes two things the older parser refuses:

    * ``%t#k`` as an operand: element ``k`` of the tuple-shaped ``%t`` (multi-output instructions).
      Each becomes a ``get-tuple-element(%t), index=k`` instruction, written on the line of
      ``%t``'s definition (line numbers of errors stay the file's own).
    * ``is_stable=`` on ``topk``: older XLA's TopK is stable already (ties keep the lower index
      first, as ``jax.lax.top_k`` documents), so the attribute is dropped.
    * ``order=TOTAL`` / ``order=PARTIAL`` on ``compare``: older XLA spells them ``type=TOTALORDER``
      and (for floats, the default) ``type=FLOAT``.

    The same values in both spellings. None when nothing needs rewriting (or the text is not
    understood: XLA's parser then reports it).
    """
    if "#" not in text and "is_stable=" not in text and "order=" not in text:
        return None
    mod = _parse_hlo_text(text)
    if mod is None:
        return None
    edits: list[tuple[int, int, str]] = []
    for comp in mod.comps:
        made: set[str] = set()
        for ins in comp.instrs:
            # attribute edits cover only the attribute's own characters (after the operand list)
            a, b = ins.spans["all"]
            tail_from = ins.spans["operands"][1] if "operands" in ins.spans else a
            if ins.opcode == "topk" and "is_stable" in ins.attrs:
                for m in _IS_STABLE_RE.finditer(text, tail_from, b):
                    edits.append((m.start(), m.end(), ""))
            if ins.opcode == "compare" and "order" in ins.attrs and "type" not in ins.attrs:
                for m in _ORDER_RE.finditer(text, tail_from, b):
                    edits.append((m.start(), m.end(), ", type=TOTALORDER" if m.group(1) == "TOTAL" else ""))
            if not ins.operands or not any("#" in o for o in ins.operands):
                continue
            o0, o1 = ins.spans["operands"]
            ops_text = text[o0:o1]
            for ref in ins.operands:
                base, sep, idx = ref.partition("#")
                if not sep:
                    continue
                producer = comp.by_name.get(base) or comp.by_name.get(base.lstrip("%"))
                shape = None if producer is None else producer.shape
                why = ("its index is not a number" if not idx.isdigit()
                       else f"computation {comp.name!r} has no instruction {base!r}" if producer is None
                       else f"{base!r} has no tuple shape" if shape is None or not shape.is_tuple
                       else f"{base!r} has {len(shape.elems)} elements" if int(idx) >= len(shape.elems)
                       else "")
                if why:  # fail closed: never guess which value an operand names
                    raise FormatError(
                        f"line {mod.line(a)}: operand {ref!r} of {ins.name!r} ({ins.opcode}) reads element {idx} of "
                        f"a tuple (the 'name#k' operands of jaxlib 0.12's XLA, which this jaxlib's parser lacks), "
                        f"but {why}")
                assert producer is not None and producer.shape is not None
                k = int(idx)
                name = f"{base.lstrip('%')}.gte{k}"
                new_ref = ("%" if ref.startswith("%") else "") + name
                ops_text = re.sub(re.escape(ref) + r"(?![\w.\-#])", new_ref, ops_text)
                if name not in made:
                    made.add(name)
                    elem = _shape_with_layout(producer.shape.elems[k])
                    end = producer.spans["all"][1]
                    edits.append((end, end, f" %{name} = {elem} get-tuple-element(%{base.lstrip('%')}), index={k}"))
            edits.append((o0, o1, ops_text))
    return _apply_edits(text, edits)


def _shape_with_layout(s: _HShape) -> str:
    """HLO text of ``s`` with its layout as the file wrote it (tiles and memory space included:
    ``s32[]{:T(128)}``, which the older parser reads); a layout of no dimensions written alone as
    ``{}`` is left out (the older parser refuses ``s32[]{}``: "expects opcode"; a scalar has that
    layout only)."""
    if s.is_tuple:
        return "(" + ", ".join(_shape_with_layout(e) for e in s.elems) + ")"
    if s.etype == "token":
        return "token[]"
    if s.layout_text is not None and s.layout_text.replace(" ", "") != "{}":
        lay = s.layout_text
    else:
        lay = "" if s.layout is None or not s.dims else "{" + ",".join(map(str, s.layout)) + "}"
    return f"{s.etype}[{','.join(map(str, s.dims))}]{lay}"


_IS_STABLE_RE: Final = re.compile(r",\s*is_stable=(?:true|false)")
_ORDER_RE: Final = re.compile(r",\s*order=(TOTAL|PARTIAL)\b")


_MESH_GROUPS: Final = re.compile(
    r"(?<=replica_groups=)(mesh\[[^\]]*\](?:,\s*device_ids=\((?:[^()]|\([^()]*\))*\))?\s*\{[^}]*\})")


def explicit_replica_groups(text: str) -> str | None:
    """HLO text with every ``replica_groups=`` written over mesh axes (``mesh['x'=2,'y'=2] {'x'}``,
    what XLA's SPMD partitioner writes) written as the device groups it names (``{{0,2},{1,3}}``):
    the same collective, in the notation every XLA reads and every importer takes (XLA imports
    mesh axes as a ``replica_group_mesh_axes`` over an ``sdy.mesh`` that its ``all_to_all`` and the
    TPU's compile path do not take). None when there are none.

    Raises
    ------
    FormatError
        For replica groups over mesh axes that do not name groups of the mesh (an unknown axis,
        a sub-axis that does not divide its axis), naming the line.
    """
    if "replica_groups=mesh[" not in text:
        return None

    def groups(m: re.Match[str]) -> str:
        try:
            return format_groups(parse_replica_groups(m.group(1)))
        except ShapeError as e:
            line = text.count("\n", 0, m.start()) + 1
            raise FormatError(f"line {line}: {e}") from None

    return _MESH_GROUPS.sub(groups, text)
