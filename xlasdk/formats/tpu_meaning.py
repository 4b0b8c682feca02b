"""The CPU meaning of XLA's TPU-optimized HLO: what a TPU ``after_optimizations`` dump computes,
written in HLO that XLA:CPU runs.

XLA's TPU compiler writes, in the module it hands to its backend, things that say *where* and *how*
the TPU holds values, not *what* it computes, and a few TPU-only forms of ordinary ops:

* layouts with tiles and memory spaces (``f32[5,6]{1,0:T(8,128)S(1)}``): tiles and memory spaces
  dropped first (the dimension order, ``{1,0}``, stays while a ``bitcast`` reads it), then, once
  every bitcast is an op, the layouts themselves (:func:`~.untrusted.importable_text`);
* ``bitcast`` instructions that read the tiled bytes (``s32[1]{0:T(128)} bitcast(s32[8]{0:T(128)})``
  takes the first element of the tile): each becomes the slice or gather of the elements its
  result reads in the tiled layouts (:func:`tiled_offsets`), when that differs from what the
  untiled layouts say;
* ``copy-start`` / ``copy-done`` pairs (prefetches between memory spaces): one ``copy``; a ``copy``
  that changes the element type (the TPU's ``f32`` -> ``bf16`` copy): a ``convert``;
* the custom calls ``AllocateBuffer`` (an uninitialized buffer: zeros here) and
  ``AssumeGatherIndicesInBound``, ``MoveToHost``, ``MoveToDevice`` (the identity: a ``copy``);
* XLA:TPU's linear-algebra and indexing custom calls, in the forms its modules hold (one f32 operand of
  the result's shape; any other form refused): ``Cholesky`` (an HLO ``cholesky``, lower; the other
  triangle, which XLA:TPU leaves unspecified and its modules never read, NaN),
  ``InvertDiagBlocksLowerTriangular`` / ``...UpperTriangular`` (the inverse of each triangular block
  ``[..., k, k]``: a ``triangular-solve`` against the identity) and ``GatherScatterIndicesBitpacked`` (its
  integer indices, which the module packed into one ``s32`` and unpacked before the call: a ``copy``),
  each established on XLA:TPU's own modules (tests/test_tpu_meaning_linalg.py);
* mixed-precision ops the TPU's HLO allows and XLA's shape rules do not: a ``pad`` whose padding
  value has another float type than its operand (the value converted to the operand's type, as
  the TPU does), a ``reduce`` / ``reduce-window`` over a ``bf16`` operand with an ``f32`` initial
  value and reducer (the operand widened, the reduction done in the reducer's type and its result
  rounded to the result's type), an element-wise op whose float operands and result differ in type
  (computed in the widest, its result rounded);
* a ``convolution`` with ``rhs_reversal`` (the TPU's transposed convolution): a ``reverse`` of the
  kernel and the convolution without it; a ``sort`` that is not stable: the stable one (the order
  of equal keys is the compiler's choice, and xlasdk's reference evaluator refuses to guess it);
* the TPU backend's ``backend_config`` of every instruction: dropped by XLA's printer.

Fusions become calls, bitcasts between untiled layouts reshapes, as for any optimized dump
(:mod:`.hlo_rewrite`). What has no CPU meaning (a Mosaic ``tpu_custom_call`` kernel, another TPU
custom call, a ``bitcast`` that reads tile padding) is refused with the instruction named
(:class:`NoCpuMeaning`).

Everything here runs in the worker process (:mod:`xlasdk._jaxlib.isolated`), on text XLA's parser
has read: the rewrite reads the text with :mod:`.hlo_text`'s parser, edits instructions at the
spans it gives, and has XLA's parser read the result again (and XLA's printer drop the backend
configs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np

from .._jaxlib import mlir as _mlir
from .hlo_rewrite import _ELEMENT_BITS, _apply_edits, _async_pair_as_op
from .hlo_text import _TOKEN_RE, _Comp, _HShape, _Instr, _parse_hlo_text

if TYPE_CHECKING:
    from ..program.computation import XlaComputation

#: custom calls of TPU modules whose value is their operand's
IDENTITY_CALLS: Final = frozenset({"AssumeGatherIndicesInBound", "MoveToHost", "MoveToDevice"})
#: custom calls of TPU modules that make an uninitialized buffer of their shape
ALLOCATION_CALLS: Final = frozenset({"AllocateBuffer"})
#: custom calls of TPU modules whose value is their operand's, as long as the result has the operand's
#: shape: XLA:TPU's mark on the index operand of a gather or scatter whose indices it packed into one
#: ``s32`` and unpacked again (``concatenate(and(x, 63) >> 0, and(x, 8128) >> 6)``) right before the call
INDEX_MARK_CALLS: Final = frozenset({"GatherScatterIndicesBitpacked"})
#: XLA:TPU's Cholesky of each matrix of its operand (the lower triangle read, the lower factor written)
CHOLESKY_CALLS: Final = frozenset({"Cholesky"})
#: XLA:TPU's triangular-solve helper: the inverse of each (lower / upper) triangular diagonal block
#: ``[..., blocks, k, k]`` of its operand (XLA's TriangularSolveExpander's ``InvertDiagonalBlocks``)
INVERT_DIAG_BLOCKS_CALLS: Final = {"InvertDiagBlocksLowerTriangular": True, "InvertDiagBlocksUpperTriangular": False}
#: custom calls only the TPU runs, and what they are
NO_CPU_MEANING_CALLS: Final = {
    "tpu_custom_call": "a Mosaic kernel (Pallas) compiled for the TPU",
}
#: bitcasts of tiled layouts are worked out element by element up to this many elements
MAX_TILED_BITCAST: Final = 1 << 24
#: a bitcast that picks elements other than a prefix becomes a gather of at most this many indices
MAX_GATHER_BITCAST: Final = 1 << 20
_FLOATS: Final = frozenset({"f16", "bf16", "f32", "f64"})
_SHAPE_LAYOUT_RE: Final = re.compile(r"\{([\d,]*)(?::([^{}]*))?\}\s*$")
# backend_config keys that only XLA's TPU backend writes
_TPU_BACKEND_KEYS: Final = ('"scoped_memory_configs"', '"used_scoped_memory_configs"', '"flag_configs"')


class NoCpuMeaning(Exception):
    """An instruction of a TPU-optimized module that XLA:CPU cannot compute (the message names it)."""


@dataclass(frozen=True)
class TpuSigns:
    """What marks a module as XLA's TPU-optimized HLO.

    Attributes
    ----------
    tiled: instructions whose layout has tiles (``T(8,128)``).
    memory_spaces: instructions whose layout names a memory space other than the default (``S(1)``).
    tpu_custom_calls: custom calls with a TPU target (``AllocateBuffer``, ``tpu_custom_call``...).
    tpu_backend_configs: instructions with a TPU backend's ``backend_config``.
    """

    tiled: int
    memory_spaces: int
    tpu_custom_calls: int
    tpu_backend_configs: int

    def __bool__(self) -> bool:
        # TPU custom calls and the TPU backend's configs are the TPU's own; memory spaces alone are
        # not (XLA:GPU's host offloading writes S(5)), nor tiles alone (sub-byte types on any backend)
        return bool(self.tpu_custom_calls or self.tpu_backend_configs or (self.tiled and self.memory_spaces))

    def describe(self) -> str:
        parts = [(self.tiled, "tiled layouts"), (self.memory_spaces, "memory spaces"),
                 (self.tpu_custom_calls, "TPU custom calls"), (self.tpu_backend_configs, "TPU backend configs")]
        return ", ".join(f"{what} ({n})" for n, what in parts if n)


@dataclass(frozen=True)
class CpuMeaning:
    """The CPU meaning of a TPU-optimized module: its HLO ``text`` (layouts untiled, no backend
    configs; fusions and plain bitcasts left to :func:`~.hlo_rewrite._importable_hlo`), how many
    instructions were ``rewritten`` (replaced by other instructions, or removed), and the ``signs``."""

    text: str
    rewritten: int
    signs: TpuSigns


# -- layouts ----------------------------------------------------------------------------------
def _laid(s: _HShape) -> str:
    """HLO text of ``s`` with its layout where it has one (``bf16[1,32,8]{1,2,0}``): an instruction a
    rewrite writes keeps the layout of the one it replaces, which a later ``bitcast`` reads."""
    if s.is_tuple:
        return "(" + ", ".join(_laid(e) for e in s.elems) + ")"
    dims = f"{s.etype}[{','.join(map(str, s.dims))}]"
    return dims + ("{" + ",".join(map(str, s.layout)) + "}" if s.layout is not None and s.dims else "")


def _shape_text(text: str, ins: _Instr) -> str:
    """The source text of ``ins``'s result shape (between ``=`` and its opcode)."""
    start = text.index("=", ins.pos) + 1
    return text[start:ins.spans["opcode"][0]].strip()


def _tiles(shape_text: str) -> tuple[tuple[int, ...], ...] | None:
    """The tiles of an array shape's layout text (``f32[5,6]{1,0:T(8,128)(2,1)S(1)}``:
    ``((8, 128), (2, 1))``); None when a tile is not understood (``*``, an empty tile)."""
    m = _SHAPE_LAYOUT_RE.search(shape_text)
    if m is None or not m.group(2):
        return ()
    spec = m.group(2)
    t = spec.find("T(")
    if t < 0:
        return ()
    tiles: list[tuple[int, ...]] = []
    pos = t + 1
    while pos < len(spec) and spec[pos] == "(":
        end = spec.index(")", pos)
        body = spec[pos + 1:end]
        if not body or not all(p.isdigit() for p in body.split(",")):
            return None
        tiles.append(tuple(int(p) for p in body.split(",")))
        pos = end + 1
    return tuple(tiles)


def tiled_offsets(dims: tuple[int, ...], minor_to_major: tuple[int, ...],
                  tiles: tuple[tuple[int, ...], ...]) -> tuple[np.ndarray, int]:
    """The physical position of each element (row-major order of the logical index) of an array
    of ``dims`` in a layout of ``minor_to_major`` and ``tiles`` (XLA's tiling: each tile tiles the
    minor dimensions of the shape the tiles before it made), and the positions there are, tile
    padding included."""
    order = list(reversed(minor_to_major))  # physical order, major to minor
    n = int(np.prod(dims, dtype=np.int64)) if dims else 1
    grids = np.indices(dims, dtype=np.int64).reshape(len(dims), n) if dims else np.zeros((0, 1), np.int64)
    idx = [grids[d] for d in order]
    shape = [dims[d] for d in order]
    for tile in tiles:
        k = len(tile)
        if k > len(shape):  # a tile of more dimensions than the shape: leading 1s
            pad = k - len(shape)
            shape = [1] * pad + shape
            idx = [np.zeros(n, np.int64)] * pad + idx
        head_s, tail_s = shape[:-k], shape[-k:]
        head_i, tail_i = idx[:-k], idx[-k:]
        shape = head_s + [-(-s // t) for s, t in zip(tail_s, tile, strict=True)] + list(tile)
        pairs = list(zip(tail_i, tile, strict=True))
        idx = head_i + [i // t for i, t in pairs] + [i % t for i, t in pairs]
    offsets = np.zeros(n, np.int64)
    for i, s in zip(idx, shape, strict=True):
        offsets = offsets * s + i
    return offsets, int(np.prod(shape, dtype=np.int64)) if shape else 1


def _bitcast_source_index(src: _HShape, src_tiles: tuple[tuple[int, ...], ...],
                          dst: _HShape, dst_tiles: tuple[tuple[int, ...], ...]) -> np.ndarray | None:
    """For each element of ``dst`` (row-major), the row-major index of the element of ``src`` a
    bitcast reads in the tiled layouts; None when one reads tile padding."""
    assert src.layout is not None and dst.layout is not None
    s_off, s_size = tiled_offsets(src.dims, src.layout, src_tiles)
    d_off, _ = tiled_offsets(dst.dims, dst.layout, dst_tiles)
    where = np.full(max(s_size, int(d_off.max(initial=0)) + 1), -1, np.int64)
    where[s_off] = np.arange(s_off.size, dtype=np.int64)
    got = where[d_off]
    return None if (got < 0).any() else got


def _tiled_bitcast(text: str, comp: _Comp, ins: _Instr) -> str | None:
    """HLO lines for a ``bitcast`` between tiled layouts whose elements are not those the untiled
    layouts give (a slice of the first elements, or a gather); None when the untiled layouts give
    the same elements (:func:`~.hlo_rewrite._importable_hlo` then rewrites it)."""
    if ins.operands is None or len(ins.operands) != 1:
        return None
    prod = comp.by_name.get(ins.operands[0])
    src, dst = (prod.shape if prod is not None else None), ins.shape
    if prod is None or src is None or dst is None or not (src.is_array and dst.is_array):
        return None
    src_tiles, dst_tiles = _tiles(_shape_text(text, prod)), _tiles(_shape_text(text, ins))
    if not src_tiles and not dst_tiles:
        return None
    where = f"instruction {ins.name!r} (bitcast of {src} to {dst})"
    if src_tiles is None or dst_tiles is None or src.layout is None or dst.layout is None:
        raise NoCpuMeaning(f"{where}: its tiled layouts are not understood")
    if _ELEMENT_BITS.get(src.etype) != _ELEMENT_BITS.get(dst.etype):
        raise NoCpuMeaning(f"{where}: it changes the element width in tiled layouts")
    if max(src.count(), dst.count()) > MAX_TILED_BITCAST:
        raise NoCpuMeaning(f"{where}: over {MAX_TILED_BITCAST} elements in tiled layouts")
    got = _bitcast_source_index(src, src_tiles, dst, dst_tiles)
    if got is None:
        raise NoCpuMeaning(f"{where}: it reads the padding of the TPU's tiles, whose values only the TPU knows")
    if src.count() == dst.count():
        plain = _bitcast_source_index(src, (), dst, ())
        if plain is not None and np.array_equal(plain, got):
            return None
    et = src.etype
    n, m = src.count(), dst.count()
    base = f"{ins.name}.xlasdk_tpu"
    lines = [f"{base}_flat = {et}[{n}] reshape({ins.operands[0]})"]
    if np.array_equal(got, np.arange(m)):
        lines.append(f"{base}_pick = {et}[{m}] slice({base}_flat), slice={{[0:{m}]}}")
    elif m > MAX_GATHER_BITCAST:
        raise NoCpuMeaning(f"{where}: it reorders elements in tiled layouts, and over {MAX_GATHER_BITCAST} of them")
    else:
        values = ", ".join(f"{{{v}}}" for v in got.tolist())
        lines.append(f"{base}_idx = s32[{m},1] constant({{ {values} }})")
        lines.append(f"{base}_pick = {et}[{m}] gather({base}_flat, {base}_idx), offset_dims={{}}, "
                     "collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1}")
    mid = _HShape(et, dst.dims, (), dst.layout)
    root = "ROOT " if ins.root else ""
    if dst.etype == et:
        lines.append(f"{root}{ins.name} = {_laid(dst)} reshape({base}_pick)")
    else:
        lines.append(f"{base}_shaped = {_laid(mid)} reshape({base}_pick)")
        lines.append(f"{root}{ins.name} = {_laid(dst)} bitcast-convert({base}_shaped)")
    return "\n  ".join(lines)


def untiled_layouts(text: str, *, whole: bool = False) -> str:
    """``text`` with every layout's tiles, memory space and other physical annotations dropped
    (``{1,0:T(8,128)S(1)}`` -> ``{1,0}``), or with every layout dropped when ``whole``: a walk over
    the HLO tokens that edits only the layout of a shape (a ``{`` right after a shape's ``]``)."""
    edits: list[tuple[int, int, str]] = []
    prev: tuple[str, str, int] | None = None
    depth = 0
    colon = opened = -1
    for m in _TOKEN_RE.finditer(text):
        kind = m.lastgroup or ""
        if kind == "skip":
            if depth == 0:
                prev = None
            continue
        tok = m.group()
        if depth:
            if kind == "punct" and tok == "{":
                depth += 1
            elif kind == "punct" and tok == "}":
                depth -= 1
                if depth == 0 and whole:
                    edits.append((opened, m.end(), ""))
                elif depth == 0 and colon >= 0:  # a scalar's "{:T(128)}" goes whole: "{}" does not parse
                    edits.append((opened, m.end(), "") if colon == opened + 1 else (colon, m.start(), ""))
            elif kind == "punct" and tok == ":" and depth == 1 and colon < 0:
                colon = m.start()
            continue
        if kind == "punct" and tok == "{" and prev is not None and prev[1] == "]" and prev[2] == m.start():
            depth, colon, opened = 1, -1, m.start()
        prev = (kind, tok, m.end())
    return _apply_edits(text, edits) or text


# -- recognition ------------------------------------------------------------------------------
def _layout_spec(shape_text: str) -> str:
    """The physical part of every layout of a shape's text (after the ``:``), joined."""
    return " ".join(m.group(2) or "" for m in re.finditer(r"\{([\d,]*)(?::([^{}]*))?\}", shape_text))


def _target(ins: _Instr) -> str:
    return ins.attrs.get("custom_call_target", "").strip().strip('"')


def tpu_signs(text: str) -> TpuSigns | None:
    """The :class:`TpuSigns` of HLO text, or None when it shows none (or is not understood)."""
    if ":T(" not in text and "S(" not in text and "scoped_memory_configs" not in text:
        return None
    mod = _parse_hlo_text(text)
    if mod is None:
        return None
    tiled = spaces = calls = configs = 0
    tpu_targets = (IDENTITY_CALLS | ALLOCATION_CALLS | INDEX_MARK_CALLS | CHOLESKY_CALLS
                   | frozenset(INVERT_DIAG_BLOCKS_CALLS) | frozenset(NO_CPU_MEANING_CALLS))
    for comp in mod.comps:
        for ins in comp.instrs:
            spec = _layout_spec(_shape_text(text, ins))
            tiled += "T(" in spec
            spaces += bool(re.search(r"S\([1-9]\d*\)", spec))
            calls += ins.opcode == "custom-call" and _target(ins) in tpu_targets
            config = ins.attrs.get("backend_config", "")
            configs += any(k in config for k in _TPU_BACKEND_KEYS)
    signs = TpuSigns(tiled, spaces, calls, configs)
    return signs if signs else None


# -- the rewrite ------------------------------------------------------------------------------
def _tail(text: str, ins: _Instr) -> str:
    """The attributes of ``ins`` as written after its operand list (``, dimensions={1}, ...``)."""
    return text[ins.spans["operands"][1]:ins.spans["all"][1]]


def _keep(ins: _Instr) -> str:
    return "".join(f", {k}={ins.attrs[k]}" for k in ("metadata", "sharding") if k in ins.attrs)


def _custom_call(comp: _Comp, ins: _Instr) -> str:
    """The CPU meaning of a TPU custom call (:class:`NoCpuMeaning` for one without)."""
    target = _target(ins)
    root = "ROOT " if ins.root else ""
    shape = ins.shape
    if target in NO_CPU_MEANING_CALLS:
        raise NoCpuMeaning(f"instruction {ins.name!r} (custom-call {target!r}) is {NO_CPU_MEANING_CALLS[target]}; "
                           "it has no CPU meaning")
    if target in IDENTITY_CALLS:
        if ins.operands is None or len(ins.operands) != 1 or shape is None:
            raise NoCpuMeaning(f"instruction {ins.name!r} (custom-call {target!r}) takes one operand")
        return f"{root}{ins.name} = {_laid(shape)} copy({ins.operands[0]}){_keep(ins)}"
    if target in INDEX_MARK_CALLS | CHOLESKY_CALLS or target in INVERT_DIAG_BLOCKS_CALLS:
        prod = comp.by_name.get(ins.operands[0]) if ins.operands is not None and len(ins.operands) == 1 else None
        return _linalg_or_index_call(ins, target, prod.shape if prod is not None else None)
    if target in ALLOCATION_CALLS:
        if shape is None or not shape.is_array or ins.operands:
            raise NoCpuMeaning(f"instruction {ins.name!r} (custom-call {target!r}) is not an array allocation")
        zero = "false" if shape.etype == "pred" else "0"
        return (f"{ins.name}.xlasdk_tpu_zero = {shape.etype}[] constant({zero})\n  "
                f"{root}{ins.name} = {_laid(shape)} broadcast({ins.name}.xlasdk_tpu_zero), "
                f"dimensions={{}}{_keep(ins)}")
    # a custom call of a TPU module is the TPU's: XLA:CPU has no implementation of it
    raise NoCpuMeaning(f"instruction {ins.name!r} (custom-call {target!r}) is a custom call of the TPU module "
                       "whose meaning xlasdk does not know; it has no CPU meaning here")


def _one_operand_same_shape(ins: _Instr, target: str, operand: _HShape | None) -> _HShape:
    """The result shape of a custom call that takes one array operand of its own result's shape."""
    shape = ins.shape
    if (ins.operands is None or len(ins.operands) != 1 or shape is None or operand is None
            or not shape.is_array or not operand.is_array or operand.etype != shape.etype
            or tuple(operand.dims) != tuple(shape.dims)):
        raise NoCpuMeaning(f"instruction {ins.name!r} (custom-call {target!r}): xlasdk knows its meaning for one "
                           f"array operand of the result's shape, and it has {ins.operands} of {operand} -> {shape}")
    return shape


def _linalg_or_index_call(ins: _Instr, target: str, operand: _HShape | None = None) -> str:
    """The CPU meaning of XLA:TPU's ``GatherScatterIndicesBitpacked`` (a ``copy``), ``Cholesky`` (an HLO
    ``cholesky``, lower) and ``InvertDiagBlocks{Lower,Upper}Triangular`` (a ``triangular-solve`` of each
    block against the identity), each for the operand and result shapes seen in XLA:TPU's modules
    (tests/test_tpu_meaning_linalg.py checks each on modules XLA:TPU wrote: the module run with its
    meaning gives the values of the program it was compiled from); any other form is refused."""
    shape = _one_operand_same_shape(ins, target, operand)
    root = "ROOT " if ins.root else ""
    src = ins.operands[0] if ins.operands else ""
    if target in INDEX_MARK_CALLS:
        if shape.etype not in ("s32", "u32", "s64", "u64", "s16", "u16", "s8", "u8"):
            raise NoCpuMeaning(f"instruction {ins.name!r} (custom-call {target!r}) marks {shape.etype} values, "
                               "not integer indices")
        return f"{root}{ins.name} = {_laid(shape)} copy({src}){_keep(ins)}"
    dims = tuple(shape.dims)
    if shape.etype != "f32" or len(dims) < 2 or dims[-1] != dims[-2]:
        raise NoCpuMeaning(f"instruction {ins.name!r} (custom-call {target!r}) of {shape}: xlasdk knows its meaning "
                           "for f32 arrays of square matrices [..., n, n] only (as XLA:TPU writes it)")
    base = f"{ins.name}.xlasdk_tpu"
    if target in CHOLESKY_CALLS:
        # the lower factor; the other triangle, which XLA:TPU leaves unspecified and its modules never
        # read (every use selects the lower triangle: the modules give the same values with NaN there),
        # is NaN here: a module that read it would show NaN, not a guess
        return (f"{base}_factor = {_laid(shape)} cholesky({src}), lower=true\n  "
                + _triangle(base, shape, lower=True, value=f"{base}_factor", root=f"{root}{ins.name}", keep=_keep(ins)))
    lower = INVERT_DIAG_BLOCKS_CALLS[target]
    plain = _HShape(shape.etype, shape.dims, (), None)
    return (_where_row_col(base, shape, "diag", "EQ")
            + f"{base}_eye = {_laid(plain)} convert({base}_diag)\n  "
            f"{root}{ins.name} = {_laid(shape)} triangular-solve({src}, {base}_eye), left_side=true, "
            f"lower={'true' if lower else 'false'}, transpose_a=NO_TRANSPOSE{_keep(ins)}")


def _where_row_col(base: str, shape: _HShape, mask: str, direction: str) -> str:
    """HLO lines of ``{base}_{mask}``: a ``pred`` array of ``shape``'s dimensions, true where the row
    index compares to the column index (the two minor dimensions) by ``direction`` (``EQ``, ``GE``...)."""
    n = len(shape.dims)
    idx = _HShape("s32", shape.dims, (), None)
    flags = _HShape("pred", shape.dims, (), None)
    return (f"{base}_r = {_laid(idx)} iota(), iota_dimension={n - 2}\n  "
            f"{base}_c = {_laid(idx)} iota(), iota_dimension={n - 1}\n  "
            f"{base}_{mask} = {_laid(flags)} compare({base}_r, {base}_c), direction={direction}\n  ")


def _triangle(base: str, shape: _HShape, *, lower: bool, value: str, root: str, keep: str) -> str:
    """HLO lines keeping the lower (upper) triangle, diagonal included, of ``value`` and NaN elsewhere."""
    return (_where_row_col(base, shape, "keep", "GE" if lower else "LE")
            + f"{base}_unknown = {shape.etype}[] constant(nan)\n  "
            f"{base}_unknowns = {_laid(_HShape(shape.etype, shape.dims, (), None))} "
            f"broadcast({base}_unknown), dimensions={{}}\n  "
            f"{root} = {_laid(shape)} select({base}_keep, {value}, {base}_unknowns){keep}")


def _operand_etype(comp: _Comp, ref: str) -> str | None:
    prod = comp.by_name.get(ref)
    return prod.shape.etype if prod is not None and prod.shape is not None and prod.shape.is_array else None


_ELEMENTWISE: Final = frozenset({
    "abs", "add", "atan2", "cbrt", "ceil", "clamp", "compare", "cosine", "divide", "erf", "exponential",
    "exponential-minus-one", "floor", "is-finite", "log", "log-plus-one", "logistic", "maximum", "minimum",
    "multiply", "negate", "power", "remainder", "round-nearest-afz", "round-nearest-even", "rsqrt", "select",
    "sign", "sine", "sqrt", "subtract", "tan", "tanh",
})
_WIDTH: Final = {"f16": 1, "bf16": 1, "f32": 2, "f64": 3}


def _wider(types: list[str]) -> str:
    """The float type the TPU computes ``types`` in: the widest (f32 for f16 with bf16)."""
    best = max(types, key=lambda t: _WIDTH[t])
    return "f32" if _WIDTH[best] == 1 and len(set(types)) > 1 else best


def _floats_as(comp: _Comp, ops: list[str], kinds: list[str | None], etype: str,
               base: str) -> tuple[list[str], list[str]]:
    """The lines converting each float operand of another type than ``etype`` to it (named
    ``{base}_in{i}``, in its own layout), and the operands to use in their place."""
    lines: list[str] = []
    args: list[str] = []
    for i, (ref, k) in enumerate(zip(ops, kinds, strict=True)):
        if k in _FLOATS and k != etype:
            src = comp.by_name[ref].shape
            assert src is not None
            lines.append(f"{base}_in{i} = {_laid(_HShape(etype, src.dims, (), src.layout))} convert({ref})")
            args.append(f"{base}_in{i}")
        else:
            args.append(ref)
    return lines, args


def _mixed_elementwise(text: str, comp: _Comp, ins: _Instr) -> str | None:
    """An element-wise op whose float operands and result do not all have one type (the TPU's
    HLO lets an op round its result to another type, ``bf16 select(pred, f32, f32)``): the
    operands converted to the widest of the types, the op computed there and its result converted
    to the result's type. None when the types agree."""
    ops, shape = ins.operands, ins.shape
    if ops is None or shape is None or not shape.is_array:
        return None
    kinds = [_operand_etype(comp, o) for o in ops]
    if any(k is None for k in kinds):
        return None
    floats = [k for k in kinds if k in _FLOATS]
    out_float = shape.etype in _FLOATS
    every = floats + ([shape.etype] if out_float else [])
    if len(set(every)) <= 1:
        return None
    wide = _wider(every)
    base = f"{ins.name}.xlasdk_tpu"
    lines, args = _floats_as(comp, ops, kinds, wide, base)
    root = "ROOT " if ins.root else ""
    call = f"{ins.opcode}({', '.join(args)}){_tail(text, ins)}"
    if out_float and shape.etype != wide:
        lines.append(f"{base}_result = {_laid(_HShape(wide, shape.dims, (), shape.layout))} {call}")
        lines.append(f"{root}{ins.name} = {_laid(shape)} convert({base}_result){_keep(ins)}")
    else:
        lines.append(f"{root}{ins.name} = {_laid(shape)} {call}")
    return "\n  ".join(lines)


#: ops that only move elements: the TPU's HLO lets one round what it moves to another float type
_MOVEMENT: Final = frozenset({
    "slice", "reshape", "transpose", "broadcast", "reverse", "concatenate", "dynamic-slice",
    "dynamic-update-slice", "gather",
})


def _mixed_movement(text: str, comp: _Comp, ins: _Instr) -> str | None:
    """An op that only moves elements whose float result has another type than a float operand it
    moves (``bf16[1,32,8] slice(f32[4,32,8])``): those operands converted to the result's type
    first (rounding each element commutes with moving it). None when the types agree."""
    ops, shape = ins.operands, ins.shape
    if ops is None or shape is None or not shape.is_array or shape.etype not in _FLOATS:
        return None
    kinds = [_operand_etype(comp, o) for o in ops]
    if not any(k in _FLOATS and k != shape.etype for k in kinds):
        return None
    lines, args = _floats_as(comp, ops, kinds, shape.etype, f"{ins.name}.xlasdk_tpu")
    root = "ROOT " if ins.root else ""
    lines.append(f"{root}{ins.name} = {_laid(shape)} {ins.opcode}({', '.join(args)}){_tail(text, ins)}")
    return "\n  ".join(lines)


def _mixed_precision(text: str, comp: _Comp, ins: _Instr) -> str | None:
    """A ``pad`` with a padding value of another float type than its operand, or a ``reduce`` /
    ``reduce-window`` whose inputs, initial values (the reducer's types) and results do not have
    the same float types, in XLA's terms (None when the types agree)."""
    ops, shape = ins.operands, ins.shape
    if ops is None or len(ops) % 2 or not ops or shape is None:
        return None
    kinds = [_operand_etype(comp, o) for o in ops]
    n = len(ops) // 2
    outs = list(shape.elems) if shape.is_tuple else [shape]
    if any(k is None for k in kinds) or len(outs) != (1 if ins.opcode == "pad" else n):
        return None
    ins_t, init_t = kinds[:n], kinds[n:]
    root = "ROOT " if ins.root else ""
    base = f"{ins.name}.xlasdk_tpu"
    if ins.opcode == "pad":  # the TPU pads with the value rounded to the operand's type
        a, v = kinds
        if a == v or a not in _FLOATS or v not in _FLOATS:
            return None
        return (f"{base}_value = {a}[] convert({ops[1]})\n  "
                f"{root}{ins.name} = {_laid(shape)} pad({ops[0]}, {base}_value){_tail(text, ins)}")
    if all(a == v == o.etype for a, v, o in zip(ins_t, init_t, outs, strict=True)):
        return None
    lines: list[str] = []
    args: list[str] = []
    for i, (ref, a, v) in enumerate(zip(ops[:n], ins_t, init_t, strict=True)):
        if a == v:
            args.append(ref)
            continue
        if a not in _FLOATS or v not in _FLOATS:
            raise NoCpuMeaning(f"instruction {ins.name!r} ({ins.opcode}) reduces {a} values with a {v} reducer")
        src = comp.by_name[ref].shape
        assert src is not None
        lines.append(f"{base}_in{i} = {_laid(_HShape(str(v), src.dims, (), src.layout))} convert({ref})")
        args.append(f"{base}_in{i}")
    wide = [_HShape(str(v), o.dims, (), o.layout) for v, o in zip(init_t, outs, strict=True)]
    wide_shape = _HShape("tuple", (), tuple(wide)) if shape.is_tuple else wide[0]
    call = f"{ins.opcode}({', '.join(args + ops[n:])}){_tail(text, ins)}"
    lines.append(f"{base}_result = {_laid(wide_shape)} {call}")
    if not shape.is_tuple:
        lines.append(f"{root}{ins.name} = {_laid(shape)} convert({base}_result){_keep(ins)}")
        return "\n  ".join(lines)
    parts = []
    for i, (w, o) in enumerate(zip(wide, outs, strict=True)):
        lines.append(f"{base}_gte{i} = {_laid(w)} get-tuple-element({base}_result), index={i}")
        if w.etype != o.etype:
            lines.append(f"{base}_out{i} = {_laid(o)} convert({base}_gte{i})")
            parts.append(f"{base}_out{i}")
        else:
            parts.append(f"{base}_gte{i}")
    lines.append(f"{root}{ins.name} = {_laid(shape)} tuple({', '.join(parts)})")
    return "\n  ".join(lines)


def _unreversed_convolution(text: str, comp: _Comp, ins: _Instr) -> str | None:
    """A ``convolution`` whose window reverses the kernel (``rhs_reversal=1x1``, which the TPU's
    compiler writes for the transposed convolution of a backward pass): the kernel reversed
    along those spatial dimensions by a ``reverse``, and the convolution without the flag."""
    window = ins.attrs.get("window", "")
    m = re.search(r"\s*rhs_reversal=([\dx]+)", window)
    labels = re.fullmatch(r"\s*(\w+)_(\w+)->(\w+)\s*", ins.attrs.get("dim_labels", ""))
    if m is None:
        return None
    if labels is None or ins.operands is None or len(ins.operands) != 2 or ins.shape is None:
        raise NoCpuMeaning(f"instruction {ins.name!r} (convolution with rhs_reversal) is not understood")
    flags = [int(f) for f in m.group(1).split("x")]
    rhs_labels = labels.group(2)
    rhs = comp.by_name.get(ins.operands[1])
    if rhs is None or rhs.shape is None or any(str(i) not in rhs_labels for i in range(len(flags))):
        raise NoCpuMeaning(f"instruction {ins.name!r} (convolution with rhs_reversal) is not understood")
    dims = [rhs_labels.index(str(i)) for i, f in enumerate(flags) if f]
    if not dims:
        return None
    w0 = ins.attrs["window"]
    new_window = w0.replace(m.group(0), "", 1)
    flipped = f"{ins.name}.xlasdk_tpu_flipped"
    a, b = ins.spans["all"]
    line = text[a:b]
    o0, o1 = (x - a for x in ins.spans["operands"])
    operands = f"({ins.operands[0]}, {flipped})"
    tail = line[o1:].replace(f"window={w0}", f"window={new_window}", 1)
    reverse = f"reverse({ins.operands[1]}), dimensions={{{','.join(map(str, dims))}}}"
    return f"{flipped} = {_laid(rhs.shape)} {reverse}\n  {line[:o0]}{operands}{tail}"


def _rewrite(text: str) -> tuple[str, int]:
    """``text`` with every TPU-only instruction replaced by its CPU meaning, and how many were."""
    mod = _parse_hlo_text(text)
    if mod is None:
        raise NoCpuMeaning("xlasdk cannot read the module's text to rewrite it")
    edits: list[tuple[int, int, str]] = []
    count = 0
    for comp in mod.comps:
        users: dict[str, int] = {}
        for ins in comp.instrs:
            for used in ins.operands or ():
                users[used] = users.get(used, 0) + 1
        for ins in comp.instrs:
            new: str | None = None
            op = ins.opcode
            if op == "custom-call":
                new = _custom_call(comp, ins)
            elif op == "copy-done" and ins.operands is not None and len(ins.operands) == 1:
                pair = _async_pair_as_op(ins, comp.by_name.get(ins.operands[0]), users, text)
                if pair is None:
                    raise NoCpuMeaning(f"instruction {ins.name!r} (copy-done) does not end a copy-start of its own")
                (s0, s1), done_edit = pair
                edits.extend([(s0, s1, ""), done_edit])
                count += 2
                continue
            elif op == "copy-start":
                if users.get(ins.name, 0) != 1:
                    raise NoCpuMeaning(f"instruction {ins.name!r} (copy-start) has users besides its copy-done")
                continue  # with its copy-done
            elif op == "copy" and ins.operands is not None and len(ins.operands) == 1:
                e = _operand_etype(comp, ins.operands[0])
                if e is not None and ins.shape is not None and ins.shape.is_array and e != ins.shape.etype:
                    new = (f"{'ROOT ' if ins.root else ''}{ins.name} = {_laid(ins.shape)} "
                           f"convert({ins.operands[0]}){_keep(ins)}")
            elif op in ("pad", "reduce", "reduce-window"):
                new = _mixed_precision(text, comp, ins)
            elif op == "bitcast":
                new = _tiled_bitcast(text, comp, ins)
            elif op == "convolution":
                new = _unreversed_convolution(text, comp, ins)
            elif op == "sort" and ins.operands is not None and len(ins.operands) > 1 and "is_stable" not in ins.attrs:
                # the order of equal keys is the compiler's choice: the CPU meaning takes the stable one
                a, b = ins.spans["all"]
                new = text[a:b] + ", is_stable=true"
            elif op in _ELEMENTWISE:
                new = _mixed_elementwise(text, comp, ins)
            elif op in _MOVEMENT:
                new = _mixed_movement(text, comp, ins)
            if new is not None:
                edits.append((*ins.spans["all"], new))
                count += 1
    return _apply_edits(text, edits) or text, count


def cpu_meaning(text: str) -> CpuMeaning | None:
    """The :class:`CpuMeaning` of HLO text (XLA's print of a parsed module), or None when it is
    not TPU-optimized. Runs in the worker.

    Raises
    ------
    NoCpuMeaning
        An instruction XLA:CPU cannot compute (named), or the rewritten module does not parse.
    """
    signs = tpu_signs(text)
    if signs is None:
        return None
    rewritten, count = _rewrite(text)
    rewritten = untiled_layouts(rewritten)
    try:
        hm = _mlir.hlo_module_from_text(rewritten)
    except Exception as e:  # a rewrite XLA does not take: a bug here, said plainly
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise NoCpuMeaning(f"the rewritten module does not parse ({first[:300]})") from None
    return CpuMeaning(_mlir.hlo_module_to_text(hm, metadata=True, backend_config=False), count, signs)


# -- the user's process -----------------------------------------------------------------------
def tpu_note(computation: XlaComputation) -> str | None:
    """The line ``run``, ``compare`` and ``inspect`` print for a computation loaded from
    TPU-optimized HLO (``ran the CPU meaning of a TPU-optimized module: 12 instructions
    rewritten``), or None for any other computation."""
    info = computation.tpu_rewrite
    if info is None:
        return None
    rewritten, _ = info
    return (f"the CPU meaning of a TPU-optimized module: {rewritten} instruction{'s' if rewritten != 1 else ''} "
            "rewritten (tiles, memory spaces and backend configs dropped)")


def comp_env_beside(path: str) -> str | None:
    """The ``tpu_comp_env.txt`` XLA writes beside a TPU dump (``module_0001.jit_f.cl_123.tpu_comp_env.txt``
    beside ``module_0001.jit_f.cl_123.after_optimizations.txt``), when there is one."""
    import os

    folder, base = os.path.split(path)
    for kind in (".after_optimizations", ".before_optimizations"):
        if kind in base:
            candidate = os.path.join(folder, base[:base.index(kind)] + ".tpu_comp_env.txt")
            return candidate if os.path.isfile(candidate) else None
    return None
