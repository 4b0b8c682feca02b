"""Optimized HLO rewritten so it imports as StableHLO (``fusion`` -> ``call``, ``bitcast`` -> reshapes)."""

from __future__ import annotations

from .hlo_text import _HShape, _Instr, _parse_hlo_text


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
