"""A flat, bounded serialization for the verified-load records (:mod:`.load_cache`).

A record is what the loader's worker hands back: ``None``, ``bool``, ``int`` (64-bit), ``str``,
``bytes``, tuples of them, :class:`~xlasdk.Shape` and :class:`~xlasdk.ProgramShape`. Each value
is a one-byte tag and, for numbers, strings and bytes, a fixed-size field; a tuple is a tag, a
count and its items in order (a tuple of strings, or of k-tuples of strings, as names are: a
tag, counts, the lengths, then the bytes); a shape is a tag and its five fields (element type,
dimensions, tuple shapes, layout, dynamic flags), a program shape a tag and its three.

:func:`decode` reads it in one pass with an explicit stack: no recursion, at most
:data:`MAX_DEPTH` levels of nesting and :data:`MAX_ITEMS` values, no count or length larger than
the bytes left, no references between values (nothing is shared, so nothing can loop or blow up),
every shape checked as :class:`~xlasdk.Shape`'s constructors check it. Anything else, or bytes
left over, raises :class:`RecordError` (a ``ValueError``): the record is then a cache miss.
Unlike a pickle, a record names no class and runs no code.
"""

from __future__ import annotations

import itertools
import struct
from typing import Any, Final

from ..shape import Layout, ProgramShape, Shape
from ..types import PrimitiveType

__all__ = ["MAX_DEPTH", "MAX_ITEMS", "RecordError", "encode", "decode"]

#: the deepest nesting of tuples and shapes in a record
MAX_DEPTH: Final = 64
#: the most values in a record
MAX_ITEMS: Final = 1 << 22

_VERSION: Final = b"\x01"
_I64: Final = struct.Struct("<q")
_U32: Final = struct.Struct("<I")
_U64: Final = struct.Struct("<Q")


class RecordError(ValueError):
    """Bytes that are not a record (or a value that cannot be one)."""


def encode(value: Any) -> bytes:
    """The record of ``value``.

    Raises
    ------
    RecordError
        ``value`` holds another type, an int outside 64 bits, nesting deeper than
        :data:`MAX_DEPTH` or more than :data:`MAX_ITEMS` values.
    """
    out: list[bytes] = [_VERSION]
    count = [0]

    def put(v: Any, depth: int) -> None:
        count[0] += 1
        if depth > MAX_DEPTH or count[0] > MAX_ITEMS:
            raise RecordError("the value is nested too deep or holds too many values for a record")
        if v is None:
            out.append(b"N")
        elif v is True:
            out.append(b"T")
        elif v is False:
            out.append(b"F")
        elif isinstance(v, int):
            try:
                out.append(b"i" + _I64.pack(int(v)))
            except struct.error:
                raise RecordError(f"{v} does not fit in 64 bits") from None
        elif isinstance(v, str):
            data = v.encode("utf-8", "surrogatepass")
            out.append(b"s" + _U64.pack(len(data)) + data)
        elif isinstance(v, (bytes, bytearray, memoryview)):
            data = bytes(v)
            out.append(b"b" + _U64.pack(len(data)) + data)
        elif isinstance(v, tuple) and (arity := _string_run(v)) is not None:  # names: one run, read at once
            flat = v if arity == 0 else [x for row in v for x in row]
            count[0] += len(v) * (arity + 1)
            if depth + 2 > MAX_DEPTH or count[0] > MAX_ITEMS:
                raise RecordError("the value is nested too deep or holds too many values for a record")
            encoded = [x.encode("utf-8", "surrogatepass") for x in flat]
            out.append(b"u" + _U32.pack(len(v)) + _U32.pack(arity)
                       + struct.pack(f"<{len(encoded)}Q", *(len(e) for e in encoded)) + b"".join(encoded))
        elif isinstance(v, tuple):
            out.append(b"t" + _U32.pack(len(v)))
            for item in v:
                put(item, depth + 1)
        elif isinstance(v, Shape):
            out.append(b"S")
            layout = v.layout()
            fields: tuple[Any, ...] = (
                int(v.element_type()), v.dimensions(), v.tuple_shapes() if v.is_tuple() else None,
                None if layout is None else layout.minor_to_major(),
                tuple(v.is_dynamic_dimension(i) for i in range(v.rank())),
            )
            for field in fields:
                put(field, depth + 1)
        elif isinstance(v, ProgramShape):
            out.append(b"P")
            for field in (v.parameter_shapes(), v.result_shape(), v.parameter_names()):
                put(field, depth + 1)
        else:
            raise RecordError(f"a record cannot hold a {type(v).__name__}")

    put(value, 0)
    return b"".join(out)


def decode(data: bytes | memoryview) -> Any:
    """The value of a record (see the module's description for the bounds).

    Raises
    ------
    RecordError
        ``data`` is not a record.
    """
    raw = bytes(data)
    n = len(raw)
    if not raw.startswith(_VERSION):
        raise RecordError("not a record of this version")
    pos = 1
    items = 0
    stack: list[tuple[int, int, list[Any]]] = []  # (tag, values wanted, values so far)
    while True:
        if pos >= n:
            raise RecordError("the record ends early")
        items += 1
        if items > MAX_ITEMS:
            raise RecordError("the record holds too many values")
        tag = raw[pos]
        pos += 1
        value: Any
        if tag == 0x4E:  # N
            value = None
        elif tag == 0x54:  # T
            value = True
        elif tag == 0x46:  # F
            value = False
        elif tag == 0x69:  # i
            if n - pos < 8:
                raise RecordError("the record ends inside a number")
            value = _I64.unpack_from(raw, pos)[0]
            pos += 8
        elif tag in (0x73, 0x62):  # s, b
            if n - pos < 8:
                raise RecordError("the record ends inside a length")
            length = _U64.unpack_from(raw, pos)[0]
            pos += 8
            if length > n - pos:
                raise RecordError("a string or bytes claims more than the record holds")
            chunk = raw[pos : pos + length]
            pos += length
            if tag == 0x62:
                value = chunk
            else:
                try:
                    value = chunk.decode("utf-8", "surrogatepass")
                except UnicodeDecodeError:
                    raise RecordError("a string is not UTF-8") from None
        elif tag == 0x75:  # u: a tuple of strings (arity 0) or of arity-tuples of strings: lengths, then bytes
            if n - pos < 8:
                raise RecordError("the record ends inside a count")
            rows, arity = _U32.unpack_from(raw, pos)[0], _U32.unpack_from(raw, pos + 4)[0]
            pos += 8
            want = rows * max(arity, 1)
            items += rows * (arity + 1)
            if rows == 0 or want > (n - pos) // 8 or items > MAX_ITEMS or len(stack) + 1 >= MAX_DEPTH:
                raise RecordError("a tuple of strings claims more than the record holds")
            lengths = struct.unpack_from(f"<{want}Q", raw, pos)
            pos += 8 * want
            total = sum(lengths)
            if total > n - pos:
                raise RecordError("a tuple of strings claims more than the record holds")
            blob = raw[pos : pos + total]
            ends = list(itertools.accumulate(lengths))
            starts = [0, *ends[:-1]]
            pos += total
            if blob.isascii():  # the usual names: one decode, then slices
                text = blob.decode("ascii")
                strings = [text[a:b] for a, b in zip(starts, ends, strict=True)]
            else:
                try:
                    strings = [blob[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts, ends, strict=True)]
                except UnicodeDecodeError:
                    raise RecordError("a string is not UTF-8") from None
            value = tuple(strings) if arity == 0 else tuple(zip(*[iter(strings)] * arity, strict=True))
        elif tag in (0x74, 0x53, 0x50):  # t, S, P
            if tag == 0x74:
                if n - pos < 4:
                    raise RecordError("the record ends inside a count")
                want = _U32.unpack_from(raw, pos)[0]
                pos += 4
                if want > n - pos:  # each value takes a byte at least
                    raise RecordError("a tuple claims more values than the record holds")
            else:
                want = 5 if tag == 0x53 else 3
            if want == 0:
                value = ()
            else:
                if len(stack) >= MAX_DEPTH:
                    raise RecordError("the record is nested too deep")
                stack.append((tag, want, []))
                continue
        else:
            raise RecordError(f"unknown tag {tag:#04x} at byte {pos - 1}")
        while stack:  # the value completes its container, which may complete its own
            ctag, want, got = stack[-1]
            got.append(value)
            if len(got) < want:
                break
            stack.pop()
            value = tuple(got) if ctag == 0x74 else _shape(got) if ctag == 0x53 else _program_shape(got)
        else:
            if pos != n:
                raise RecordError("bytes follow the record")
            return value


def _string_run(v: tuple[Any, ...]) -> int | None:
    """0 when ``v`` is a tuple of strings, k when a tuple of k-tuples of strings (k >= 1), else None."""
    if not v:
        return None
    if all(type(x) is str for x in v):
        return 0
    first = v[0]
    if type(first) is not tuple or not first:
        return None
    k = len(first)
    if all(type(row) is tuple and len(row) == k and all(type(x) is str for x in row) for row in v):
        return k
    return None


def _ints(v: Any, what: str) -> tuple[int, ...]:
    if not isinstance(v, tuple) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in v):
        raise RecordError(f"a shape's {what} are not sizes")
    return v


def _shape(fields: list[Any]) -> Shape:
    etype, dims, tup, layout, dynamic = fields
    if not isinstance(etype, int) or isinstance(etype, bool):
        raise RecordError("a shape's element type is not a number")
    try:
        et = PrimitiveType(etype)
    except ValueError:
        raise RecordError(f"a shape's element type {etype} is unknown") from None
    d = _ints(dims, "dimensions")
    if et == PrimitiveType.TUPLE:
        if d or not isinstance(tup, tuple) or not all(isinstance(s, Shape) for s in tup):
            raise RecordError("a tuple shape does not hold shapes")
    elif tup is not None:
        raise RecordError("an array shape holds shapes")
    if layout is not None and sorted(_ints(layout, "layout")) != list(range(len(d))):
        raise RecordError("a shape's layout is not a permutation of its dimensions")
    if not isinstance(dynamic, tuple) or len(dynamic) != len(d) or not all(isinstance(f, bool) for f in dynamic):
        raise RecordError("a shape's dynamic flags do not match its dimensions")
    return Shape._make(et, d, tup, None if layout is None else Layout(layout), dynamic)


def _program_shape(fields: list[Any]) -> ProgramShape:
    params, result, names = fields
    if (not isinstance(params, tuple) or not all(isinstance(s, Shape) for s in params)
            or not isinstance(result, Shape) or not isinstance(names, tuple)
            or not all(isinstance(s, str) for s in names) or len(names) not in (0, len(params))):
        raise RecordError("a program shape's fields are not shapes and names")
    return ProgramShape(params, result, names)
