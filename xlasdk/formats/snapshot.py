"""XLA's ``HloSnapshot`` files: a module with the arguments it ran on and the result it gave.

XLA writes two kinds (``--xla_dump_hlo_snapshots`` / ``--xla_dump_hlo_unoptimized_snapshots``, or
the same ``DebugOptions`` fields through :class:`xlasdk.CompileOptions`' ``env_option_overrides``):

- ``module_NNNN.NAME.snapshot.ID.pb``, an ``HloSnapshot``: the module *after* XLA's
  optimizations (field 1, an ``HloProto``), one ``LiteralProto`` per argument (field 2), the
  result (field 3, a tuple literal for a tuple result) and the platform (field 4);
- ``module_NNNN.NAME.execution_NNNN.hlo_unoptimized_snapshot.pb``, an ``HloUnoptimizedSnapshot``:
  the module *before* optimizations (field 1, an ``HloModuleProto``) and, per partition, its
  arguments (field 2, ``HloInputs``); no result.

:func:`load_snapshot` reads both into a :class:`Snapshot`, binary or text proto. With
``--xla_dump_hlo_as_text`` XLA writes the unoptimized kind as text
(``module_NNNN.NAME.execution_NNNN.hlo_unoptimized_snapshot.txt``; the optimized kind stays binary,
checked on jaxlib 0.10.2 and 0.12.0.1), and ``protoc --decode`` or protobuf's ``text_format`` write
either kind as text. A text snapshot is parsed by the ``protobuf`` package (an optional
dependency: ``pip install "xlasdk[snapshots]"``) with the schema the installed jaxlib embeds
(:mod:`xlasdk.formats.text_proto`), serialized, and decoded as the binary file would be, so both
give the same arguments and result. Text spells every NaN ``nan``: a NaN's sign and payload bits
are not in the text (they read back as the quiet NaN; everything else is bit-exact).

:func:`write_snapshot` writes an ``HloSnapshot`` that XLA's tools
(``run_hlo_module``, ``hlo_bisect``) read, with the module as the computation gives it (before
optimizations), the arguments and, when known, the result.

``LiteralProto`` data, by element type (what XLA itself writes, checked against XLA:CPU's files for
every type in ``tests/test_snapshot.py``): ``pred`` as packed varint booleans; ``s32``/``s64``/
``u32``/``u64`` as packed varints; ``f32``/``c64`` as packed little-endian 32-bit floats (complex as
(real, imaginary) pairs), ``f64``/``c128`` as 64-bit ones; ``s8``/``u8``, ``s16``/``u16``, ``f16``,
``bf16``, the fp8 types, ``f4e2m1fn`` and ``s4``/``u4``/``s2``/``u2`` as little-endian bytes, the
sub-byte types one element per byte (its low bits, as ml_dtypes stores it). The elements are in the
order of the shape's layout (``minor_to_major``; default: row-major); tiled layouts and dynamic
dimensions are refused.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from typing import Any, Final, Literal

import numpy as np

from .._atomic import atomic_write
from ..errors import FormatError
from ..program.computation import XlaComputation
from ..types import PrimitiveType, dtype_to_etype, etype_to_dtype
from .loaders import _path_name, _read, hlo_proto_program
from .protobuf import _proto_fields
from .sniff import PathLike, _as_text, text_snapshot_kind
from .text_proto import binary_from_text

__all__ = [
    "Snapshot", "load_snapshot", "read_snapshot", "write_snapshot", "snapshot_kind", "new_snapshot_path",
    "literal_from_proto", "literal_to_proto",
]

Array = np.ndarray[Any, Any]
Value = Array | tuple[Any, ...]
"""A literal's value: an array, or a tuple of values for a tuple literal."""

_P = PrimitiveType
# element type -> (LiteralProto field number, how the elements are stored)
_FIELDS: Final[dict[PrimitiveType, tuple[int, str]]] = {
    _P.PRED: (2, "bool"),
    _P.S32: (4, "varint"), _P.S64: (5, "varint"), _P.U32: (6, "varint"), _P.U64: (7, "varint"),
    _P.F32: (8, "fixed"), _P.F64: (9, "fixed"), _P.C64: (12, "fixed"), _P.C128: (18, "fixed"),
    _P.S8: (15, "bytes"), _P.U8: (3, "bytes"), _P.S16: (17, "bytes"), _P.U16: (16, "bytes"),
    _P.F16: (11, "bytes"), _P.BF16: (13, "bytes"),
    _P.S4: (21, "bytes"), _P.U4: (22, "bytes"), _P.S2: (26, "bytes"), _P.U2: (27, "bytes"),
    _P.F8E5M2: (19, "bytes"), _P.F8E4M3FN: (20, "bytes"), _P.F8E4M3B11FNUZ: (23, "bytes"),
    _P.F8E5M2FNUZ: (24, "bytes"), _P.F8E4M3FNUZ: (25, "bytes"), _P.F8E4M3: (28, "bytes"),
    _P.F8E3M4: (29, "bytes"), _P.F4E2M1FN: (32, "bytes"), _P.F8E8M0FNU: (33, "bytes"),
}
_MAX_DEPTH: Final = 64  # tuple nesting of a literal
_TAIL_PADDING_1: Final = b"\x80\x01\x01"  # LayoutProto field 16 (tail_padding_alignment_in_elements) = 1, as XLA writes

# ShapeProto: element_type 2, dimensions 3, tuple_shapes 4, layout 5, is_dynamic_dimension 6.
# LayoutProto: minor_to_major 1, tiles 6.  LiteralProto: shape 1, tuple_literals 10.


def _fields_of(data: bytes, what: str) -> list[tuple[int, int, Any]]:
    try:
        return _proto_fields(data)
    except ValueError as e:
        raise FormatError(f"{what}: not a valid protobuf message (truncated or corrupt): {e}") from None


def _varints(data: bytes, what: str) -> np.ndarray[Any, np.dtype[np.uint64]]:
    """The packed varints of ``data`` as uint64 (vectorized)."""
    b = np.frombuffer(data, np.uint8)
    if b.size == 0:
        return np.zeros(0, np.uint64)
    ends = np.flatnonzero(b < 0x80)
    if ends.size == 0 or ends[-1] != b.size - 1:
        raise FormatError(f"{what}: a packed varint field is truncated")
    starts = np.concatenate(([0], ends[:-1] + 1))
    lengths = ends - starts + 1
    if lengths.max() > 10:
        raise FormatError(f"{what}: a varint is longer than 10 bytes")
    out = np.zeros(ends.size, np.uint64)
    for k in range(int(lengths.max())):
        has = lengths > k
        out[has] |= (b[starts[has] + k] & 0x7F).astype(np.uint64) << np.uint64(7 * k)
    return out


def _encode_varints(values: np.ndarray[Any, np.dtype[np.uint64]]) -> bytes:
    """``values`` (uint64) as packed varints (vectorized)."""
    v = values.astype(np.uint64, copy=False).ravel()
    if v.size == 0:
        return b""
    nbytes = np.ones(v.size, np.int64)
    for k in range(1, 10):
        nbytes += (v >= np.uint64(1) << np.uint64(7 * k)).astype(np.int64)
    offsets = np.concatenate(([0], np.cumsum(nbytes)[:-1]))
    out = np.zeros(int(nbytes.sum()), np.uint8)
    for k in range(10):
        has = nbytes > k
        if not has.any():
            break
        byte = ((v[has] >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        more = (nbytes[has] > k + 1).astype(np.uint8) << 7
        out[offsets[has] + k] = byte | more
    return out.tobytes()


def _key(field: int, wire: int) -> bytes:
    return _encode_varints(np.array([field << 3 | wire], np.uint64))


def _len_field(field: int, payload: bytes) -> bytes:
    return _key(field, 2) + _encode_varints(np.array([len(payload)], np.uint64)) + payload


# -- shapes --------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _ShapeProto:
    etype: int
    dims: tuple[int, ...]
    tuple_shapes: tuple[_ShapeProto, ...]
    minor_to_major: tuple[int, ...] | None


def _parse_shape(data: bytes, what: str, depth: int = 0) -> _ShapeProto:
    if depth > _MAX_DEPTH:
        raise FormatError(f"{what}: a shape nested more than {_MAX_DEPTH} tuples deep")
    etype, m2m = 0, None
    dims: list[int] = []
    tuples: list[_ShapeProto] = []
    for num, wt, v in _fields_of(data, what):
        if num == 2 and wt == 0:
            etype = int(v)
        elif num == 3:
            dims.extend(int(x) for x in (_varints(v, what) if wt == 2 else [v]))
        elif num == 4 and wt == 2:
            tuples.append(_parse_shape(v, what, depth + 1))
        elif num == 5 and wt == 2:
            m2m = _parse_layout(v, what)
        elif num == 6:
            flags = _varints(v, what) if wt == 2 else np.array([v], np.uint64)
            if flags.any():
                raise FormatError(f"{what}: a literal with dynamic dimensions is not supported")
    signed = tuple(d - (1 << 64) if d >= 1 << 63 else d for d in dims)
    if any(d < 0 for d in signed):
        raise FormatError(f"{what}: a literal's shape has a negative dimension {signed}")
    return _ShapeProto(etype, signed, tuple(tuples), m2m)


def _parse_layout(data: bytes, what: str) -> tuple[int, ...] | None:
    m2m: list[int] = []
    for num, wt, v in _fields_of(data, what):
        if num == 1:
            m2m.extend(int(x) for x in (_varints(v, what) if wt == 2 else [v]))
        elif num == 6:
            raise FormatError(f"{what}: a literal with a tiled layout is not supported (its element order is "
                              "the device's)")
    return tuple(m2m) if m2m else None


# -- literals ------------------------------------------------------------------------------------
def literal_from_proto(data: bytes, what: str = "LiteralProto") -> Value:
    """The value of a serialized ``xla.LiteralProto``: a numpy array of the literal's shape and
    dtype (ml_dtypes for bf16, fp8, int4, ...), or a tuple of values for a tuple literal.

    Raises :class:`~xlasdk.errors.FormatError` for corrupt data, a data length that does not match
    the shape, an element type without array data (token, opaque), a tiled layout or dynamic
    dimensions.
    """
    return _literal(data, what, 0)


def _literal(data: bytes, what: str, depth: int) -> Value:
    if depth > _MAX_DEPTH:
        raise FormatError(f"{what}: a literal nested more than {_MAX_DEPTH} tuples deep")
    fields = _fields_of(data, what)
    shape_bytes = next((v for num, wt, v in fields if num == 1 and wt == 2), None)
    if shape_bytes is None:
        raise FormatError(f"{what}: a LiteralProto without a shape")
    shape = _parse_shape(shape_bytes, what)
    if shape.etype == _P.TUPLE:
        elements = [v for num, wt, v in fields if num == 10 and wt == 2]
        if len(elements) != len(shape.tuple_shapes):
            raise FormatError(f"{what}: a tuple literal of {len(shape.tuple_shapes)} elements holds "
                              f"{len(elements)}")
        return tuple(_literal(e, f"{what}[{i}]", depth + 1) for i, e in enumerate(elements))
    try:
        etype = PrimitiveType(shape.etype)
    except ValueError:
        raise FormatError(f"{what}: unknown element type number {shape.etype}") from None
    if etype not in _FIELDS:
        raise FormatError(f"{what}: a literal of element type {etype.name} holds no array data")
    dtype = etype_to_dtype(etype)
    field, kind = _FIELDS[etype]
    count = 1
    for d in shape.dims:
        count *= d
    parts = [(wt, v) for num, wt, v in fields if num == field]
    flat = _elements(parts, kind, etype, dtype, count, what)
    if flat.size != count:
        raise FormatError(f"{what}: a {etype.name}{list(shape.dims)} literal needs {count} elements, the data "
                          f"holds {flat.size}")
    out = _logical(flat, shape, what)
    return out if out.flags.writeable else out.copy()


def _elements(parts: list[tuple[int, Any]], kind: str, etype: PrimitiveType, dtype: np.dtype[Any], count: int,
              what: str) -> Array:
    """The elements of one data field (packed, or repeated one by one), in storage order."""
    if kind in ("bool", "varint"):
        chunks = []
        for wt, v in parts:
            if wt == 2:
                chunks.append(_varints(v, what))
            elif wt == 0:
                chunks.append(np.array([v], np.uint64))
            else:
                raise FormatError(f"{what}: {etype.name} data of wire type {wt}")
        raw = np.concatenate(chunks) if chunks else np.zeros(0, np.uint64)
        if kind == "bool":
            return np.asarray(raw != 0)
        bits = {_P.S32: np.int32, _P.S64: np.int64, _P.U32: np.uint32, _P.U64: np.uint64}[etype]
        # int32 values are written sign-extended to 64 bits; the low bits are the value
        return raw.view(np.int64).astype(bits) if etype in (_P.S32, _P.S64) else raw.astype(bits)
    if kind == "fixed":
        width = 4 if etype in (_P.F32, _P.C64) else 8
        base = np.dtype(f"<f{width}")
        buf = b"".join(v for wt, v in parts if wt in (1, 2, 5))
        if len(buf) % width:
            raise FormatError(f"{what}: {etype.name} data of {len(buf)} bytes is not a whole number of elements")
        vals = np.frombuffer(buf, base).astype(base.newbyteorder("="))
        if etype in (_P.C64, _P.C128):
            if vals.size % 2:
                raise FormatError(f"{what}: {etype.name} data holds an odd number of floats")
            return np.ascontiguousarray(vals).view(dtype)  # (real, imaginary) pairs; keeps -0.0 and NaN bits
        return vals
    buf = b"".join(v for wt, v in parts if wt == 2)
    width = dtype.itemsize
    if len(buf) % width:
        raise FormatError(f"{what}: {etype.name} data of {len(buf)} bytes is not a whole number of elements")
    if width == 1:
        return np.frombuffer(buf, np.uint8).view(dtype)
    return np.frombuffer(buf, np.dtype(f"<u{width}")).astype(np.dtype(f"=u{width}")).view(dtype)


def _logical(flat: Array, shape: _ShapeProto, what: str) -> Array:
    """The elements (in the layout's order) as an array of the logical shape."""
    rank = len(shape.dims)
    m2m = shape.minor_to_major
    if m2m is None or m2m == tuple(range(rank - 1, -1, -1)):
        out = flat.reshape(shape.dims)
    else:
        if sorted(m2m) != list(range(rank)):
            raise FormatError(f"{what}: layout minor_to_major {list(m2m)} is not a permutation of the {rank} "
                              "dimensions")
        major_to_minor = m2m[::-1]
        physical = flat.reshape([shape.dims[d] for d in major_to_minor])
        out = physical.transpose(np.argsort(major_to_minor))
    return out if out.flags.c_contiguous else out.copy()  # (ascontiguousarray makes a scalar 1-d)


def literal_to_proto(value: Value | Any) -> bytes:
    """A serialized ``xla.LiteralProto`` of ``value`` (a numpy array of an XLA element type,
    ml_dtypes included, or a tuple of them), written as XLA writes it: row-major layout, the
    field and encoding of its element type (see the module docstring).

    Raises :class:`~xlasdk.errors.DTypeError` for a dtype that is no XLA element type."""
    if isinstance(value, tuple):
        elements = [literal_to_proto(v) for v in value]
        return _len_field(1, _shape_proto(value)) + b"".join(_len_field(10, e) for e in elements)
    a = np.asarray(value)
    etype = dtype_to_etype(a.dtype)
    field, kind = _FIELDS[etype]
    flat = np.ascontiguousarray(a).ravel()
    data = b""
    if flat.size:
        if kind == "bool":
            data = flat.astype(np.uint8).tobytes()
        elif kind == "varint":
            signed = etype in (_P.S32, _P.S64)
            data = _encode_varints(flat.astype(np.int64).view(np.uint64) if signed else flat.astype(np.uint64))
        elif kind == "fixed":
            width = 4 if etype in (_P.F32, _P.C64) else 8
            data = flat.view(np.dtype(f"f{width}")).astype(f"<f{width}").tobytes()
        elif a.dtype.itemsize == 1:
            data = flat.view(np.uint8).tobytes()
        else:
            data = flat.view(np.dtype(f"u{a.dtype.itemsize}")).astype(f"<u{a.dtype.itemsize}").tobytes()
    return _len_field(1, _shape_proto(a)) + (_len_field(field, data) if data else b"")


def _shape_proto(value: Value) -> bytes:
    """The ``ShapeProto`` of a value, as XLA writes a literal's: row-major layout, static dimensions."""
    if isinstance(value, tuple):
        return _key(2, 0) + _encode_varints(np.array([int(_P.TUPLE)], np.uint64)) + b"".join(
            _len_field(4, _shape_proto(v)) for v in value)
    etype = dtype_to_etype(value.dtype)
    rank = value.ndim
    out = _key(2, 0) + _encode_varints(np.array([int(etype)], np.uint64))
    if rank:
        out += _len_field(3, _encode_varints(np.array(value.shape, np.uint64)))
    layout = _len_field(1, _encode_varints(np.arange(rank - 1, -1, -1).astype(np.uint64))) if rank else b""
    out += _len_field(5, layout + _TAIL_PADDING_1)
    if rank:
        out += _len_field(6, b"\x00" * rank)
    return out


# -- snapshots -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, repr=False)
class Snapshot:
    """What an ``HloSnapshot`` file holds.

    Attributes
    ----------
    computation:
        The module, loaded (and verified) like any other file: after XLA's optimizations for an
        ``HloSnapshot`` that XLA wrote, before them for an unoptimized snapshot or one xlasdk wrote.
    arguments:
        The recorded arguments, one numpy array per parameter (of partition 0 for an unoptimized
        snapshot of a partitioned program; the others are in ``partitions``).
    result:
        The recorded result: an array, a tuple of values for a tuple result, or None when the
        file records none (unoptimized snapshots never do).
    kind:
        ``"snapshot"`` (``HloSnapshot``) or ``"unoptimized_snapshot"`` (``HloUnoptimizedSnapshot``).
    execution_platform:
        The platform it ran on when the file says (``HloSnapshot`` field 4), else None.
    partitions:
        Each partition's arguments (an unoptimized snapshot); ``(arguments,)`` for an ``HloSnapshot``.
    path:
        The file it was read from, or None.
    """

    computation: XlaComputation
    arguments: tuple[Array, ...]
    result: Value | None
    kind: Literal["snapshot", "unoptimized_snapshot"]
    execution_platform: str | None = None
    partitions: tuple[tuple[Array, ...], ...] = ()
    path: str | None = None

    def __repr__(self) -> str:
        def shapes(values: Sequence[Array]) -> str:
            return "[" + ", ".join(f"{a.dtype}{list(a.shape)}" for a in values) + "]"

        result = "None" if self.result is None else shapes(_leaves(self.result))
        parts = f", partitions={len(self.partitions)}" if len(self.partitions) > 1 else ""
        return (f"Snapshot(kind={self.kind!r}, computation={self.computation.name!r}, "
                f"arguments={shapes(self.arguments)}, result={result}{parts}, "
                f"execution_platform={self.execution_platform!r}, path={self.path!r})")

    def outputs(self) -> list[Array] | None:
        """The recorded result flattened in the order ``exe(*args)`` returns outputs (the leaves of
        a tuple result), or None when nothing was recorded."""
        if self.result is None:
            return None
        return _leaves(self.result)


def _leaves(v: Value) -> list[Array]:
    return [x for e in v for x in _leaves(e)] if isinstance(v, tuple) else [v]


def read_snapshot(data: bytes, what: str = "snapshot") -> Snapshot:
    """A :class:`Snapshot` from the bytes of an ``HloSnapshot`` or ``HloUnoptimizedSnapshot``.

    ``data`` may be the binary proto or its text format (see the module docstring). Raises
    :class:`~xlasdk.errors.FormatError` naming ``what`` for anything else: a bare module (no
    arguments), corrupt literals, arguments that do not match the module's parameters in count,
    shape or dtype, or text that does not parse (``what:LINE:COLUMN: ...``), or a text snapshot
    when the ``protobuf`` package is missing (the message says ``pip install "xlasdk[snapshots]"``)
    or jaxlib's schema cannot be found.
    """
    if not data:
        raise FormatError(f"{what}: the file is empty")
    text_kind = text_snapshot_kind(data)
    if text_kind is not None:
        data = binary_from_text(data, _TEXT_MESSAGES[text_kind], what)
    elif _as_text(data[:4096]) is not None:
        raise FormatError(f"{what}: text, but not a text-format HloSnapshot or HloUnoptimizedSnapshot (one starts "
                          "'hlo {' or 'hlo_module {'), nor a binary snapshot proto")
    fields = _fields_of(data, what)
    found = snapshot_kind(data)
    if found is None:
        raise FormatError(f"{what}: not an HloSnapshot or HloUnoptimizedSnapshot (a module with its recorded "
                          "arguments); a module file loads with xs.load_computation")
    f1 = next(v for num, wt, v in fields if num == 1 and wt == 2)
    unoptimized = found == "unoptimized_snapshot"
    platform: str | None = None
    if unoptimized:
        module = f1
        partitions = []
        for i, (_, wt, v) in enumerate(x for x in fields if x[0] == 2):
            if wt != 2:
                raise FormatError(f"{what}: field 2 of an HloUnoptimizedSnapshot is not HloInputs")
            args = [_literal(a, f"{what}: partition {i}, argument {j}", 0)
                    for j, a in enumerate(v2 for n2, w2, v2 in _fields_of(v, what) if n2 == 1 and w2 == 2)]
            partitions.append(tuple(_array(a, what) for a in args))
        result: Value | None = None
        kind: Literal["snapshot", "unoptimized_snapshot"] = "unoptimized_snapshot"
    else:
        module = next(v for num, wt, v in _fields_of(f1, what) if num == 1 and wt == 2)  # HloProto.hlo_module
        args = [_literal(v, f"{what}: argument {i}", 0)
                for i, v in enumerate(v for num, wt, v in fields if num == 2 and wt == 2)]
        partitions = [tuple(_array(a, what) for a in args)]
        res = [v for num, wt, v in fields if num == 3 and wt == 2]
        result = _literal(res[0], f"{what}: result", 0) if res else None
        plat = [v for num, wt, v in fields if num == 4 and wt == 2]
        platform = plat[0].decode("utf-8", "replace") if plat else None
        kind = "snapshot"
    comp = XlaComputation(*hlo_proto_program(module, what))
    arguments = partitions[0] if partitions else ()
    _check_arguments(comp, arguments, what)
    if result is not None:
        _check_result(comp, result, what)
    return Snapshot(comp, arguments, result, kind, platform, tuple(partitions))


_TEXT_MESSAGES: Final = {"snapshot": "xla.HloSnapshot", "unoptimized_snapshot": "xla.HloUnoptimizedSnapshot"}


def _is_name(b: bytes) -> bool:
    try:
        return b.decode("utf-8").isprintable()
    except UnicodeDecodeError:
        return False


def _array(v: Value, what: str) -> Array:
    if isinstance(v, tuple):
        raise FormatError(f"{what}: a tuple argument; xlasdk passes arrays only (flatten the parameter)")
    return v


def _check_arguments(comp: XlaComputation, args: Sequence[Array], what: str) -> None:
    ps = comp.program_shape()
    shapes = ps.parameter_shapes()
    if len(args) != len(shapes):
        raise FormatError(f"{what}: the snapshot records {len(args)} argument(s), but its module "
                          f"{comp.name!r} has {len(shapes)} parameter(s)")
    for i, (a, s) in enumerate(zip(args, shapes, strict=True)):
        if s.is_tuple() or tuple(s.dimensions()) != a.shape or s.element_type() != dtype_to_etype(a.dtype):
            raise FormatError(f"{what}: argument {i} is {a.dtype}{list(a.shape)}, but parameter {i} of "
                              f"{comp.name!r} is {s}")


def _check_result(comp: XlaComputation, result: Value, what: str) -> None:
    rs = comp.program_shape().result_shape()
    want = [x for x in rs.tuple_shapes()] if rs.is_tuple() else [rs]
    got = _leaves(result)
    if len(got) != len(want) or any(
        w.is_tuple() or tuple(w.dimensions()) != g.shape or w.element_type() != dtype_to_etype(g.dtype)
        for g, w in zip(got, want, strict=False)
    ):
        shown = ", ".join(f"{g.dtype}{list(g.shape)}" for g in got)
        raise FormatError(f"{what}: the recorded result ({shown}) does not match the result {rs} of module "
                          f"{comp.name!r}")


def load_snapshot(path: PathLike) -> Snapshot:
    """Read an ``HloSnapshot`` file: XLA's ``*.snapshot.ID.pb`` (module after optimizations,
    arguments, result), its ``*.hlo_unoptimized_snapshot.pb`` (module before optimizations, the
    arguments of each partition), their text format (``*.hlo_unoptimized_snapshot.txt``, which XLA
    writes with ``--xla_dump_hlo_as_text``; needs the ``protobuf`` package), or one
    :func:`write_snapshot` wrote.

    Returns
    -------
    Snapshot
        ``computation`` (compiles and runs like any loaded module), ``arguments`` (numpy arrays,
        one per parameter, in their dtypes: ml_dtypes for bf16, fp8, int4), ``result`` (or None).

    Raises
    ------
    FormatError
        When the file is missing, not a regular file, not a snapshot proto (binary or text), or
        corrupt, or its arguments do not match the module's parameters; the message names the file
        (and the line and column of a text file's mistake).
    """
    what = _path_name(path, "load_snapshot")
    data = _read(path, what)
    snap = read_snapshot(data, what)
    return dataclasses.replace(snap, path=what)


def write_snapshot(
    path: PathLike,
    computation: XlaComputation,
    arguments: Sequence[Any],
    result: Value | Sequence[Any] | None = None,
    *,
    execution_platform: str | None = None,
) -> None:
    """Write an ``HloSnapshot`` (binary proto) of ``computation`` with ``arguments`` and, when
    given, ``result``: what XLA's ``run_hlo_module`` and :func:`load_snapshot` replay.

    Parameters
    ----------
    computation:
        Any :class:`~xlasdk.XlaComputation`; its module is written as
        :meth:`~xlasdk.XlaComputation.as_serialized_hlo_module_proto` gives it (before XLA's
        optimizations), inside an ``HloProto``.
    arguments:
        One array per parameter (numpy, ml_dtypes, DeviceArray or anything ``np.asarray`` takes),
        of exactly the parameter's shape and dtype.
    result:
        The outputs: one array, or a sequence of arrays for a tuple result (written as a tuple
        literal, as XLA records a tuple result), or None.
    execution_platform:
        Recorded in field 4 (e.g. ``"cpu"``).

    Raises
    ------
    ShapeError / DTypeError
        Through :class:`FormatError`'s sibling checks: an argument that does not match its parameter.
    OSError
        When the file cannot be written (the old file, if any, is kept).
    """
    from ..errors import ShapeError

    args = [np.asarray(a) for a in arguments]
    try:
        _check_arguments(computation, args, "write_snapshot")
    except FormatError as e:
        raise ShapeError(str(e)) from None
    module = computation.as_serialized_hlo_module_proto()
    body = _len_field(1, _len_field(1, module))
    body += b"".join(_len_field(2, literal_to_proto(a)) for a in args)
    if result is not None:
        res: Value = (tuple(np.asarray(r) for r in result) if isinstance(result, (list, tuple))
                      else np.asarray(result))
        body += _len_field(3, literal_to_proto(res))
    if execution_platform:
        body += _len_field(4, execution_platform.encode())
    atomic_write(os.fspath(path), body)



def new_snapshot_path(directory: PathLike, name: str) -> str:
    """A new file ``DIRECTORY/NAME.snapshot.K.pb`` for a recording: ``K`` the first unused number, the
    file created empty with ``O_EXCL`` (two recorders in one directory never take the same name), the
    directory made if missing. ``NAME`` keeps the characters of XLA's dump names ([A-Za-z0-9_.-])."""
    os.makedirs(directory, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:100].lstrip(".") or "module"
    for k in range(1_000_000):
        path = os.path.join(os.fspath(directory), f"{safe}.snapshot.{k}.pb")
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return path
    raise OSError(f"{directory}: no free snapshot file name for {safe}")  # pragma: no cover


def snapshot_kind(data: bytes) -> Literal["snapshot", "unoptimized_snapshot"] | None:
    """Which snapshot ``data`` holds, from its top-level fields only (no literal is decoded): an
    ``HloSnapshot`` (field 1 an ``HloProto`` around the module), an ``HloUnoptimizedSnapshot``
    (field 1 the module, field 2 the inputs), or None (a bare module, an ``HloProto``, anything else)."""
    try:
        fields = _proto_fields(data)
        f1 = [v for num, wt, v in fields if num == 1 and wt == 2]
        if len(f1) != 1:
            return None
        inner = _proto_fields(f1[0])
    except ValueError:
        return None
    name = next((v for num, wt, v in inner if num == 1 and wt == 2), None)
    if name is None:
        return None
    if _is_name(name):  # field 1 is the module itself: an HloProto, or an unoptimized snapshot
        return "unoptimized_snapshot" if any(num == 2 and wt == 2 for num, wt, _ in fields) else None
    try:
        module_fields = _proto_fields(name)
    except ValueError:
        return None
    module_name = next((v for num, wt, v in module_fields if num == 1 and wt == 2), None)
    if module_name is None or not _is_name(module_name):
        return None
    if any(num in (2, 3, 4) for num, _, _ in fields):
        return "snapshot"
    return None
