"""Typed attribute values of graph nodes and their StableHLO (MLIR) spelling.

An op of the graph (:class:`xlasdk.builder.XlaOp`) keeps its attributes as a dict of Python
values, ``{"dimensions": (0, 1)}``, never as text. This module is the one place that spells
those values in MLIR's attribute syntax (used by :mod:`xlasdk._emit`); the HLO printer
(:mod:`xlasdk._hlo_emit`) reads the same values and spells them its own way (each op's
``hlo_attrs`` in its family module, and ``to_hlo()`` on the attribute classes of
:mod:`xlasdk.attrs`).

Value kinds and their spelling:

==============================  ====================================================
``bool``                        ``true`` / ``false``
``int``                         ``3 : i64``
``I32(3)`` / ``UI64(3)``        ``3 : i32`` / ``3 : ui64``
``F32(1e-3)``                   ``1.000000047e-03 : f32`` (rounded to f32; hex bits if not finite)
``tuple`` of ints               ``array<i64: 1, 2>`` (DenseI64ArrayAttr)
``BoolArray((True, False))``    ``array<i1: true, false>``
``I64Elements(array)``          ``dense<[[0, 1]]> : tensor<1x2xi64>`` (replica groups, padding)
``DenseElements(array, shape)`` ``dense<"0x...."> : tensor<...>`` (constants)
``IndexLayout((1, 0))``         ``dense<[1, 0]> : tensor<2xindex>`` (custom-call layouts)
``IntArray((1, 0))``            ``[1, 0]`` (an infeed's layouts)
``AttrList([...])``             ``[a, b]`` of any of these
``DictAttr({...})``             ``{key = value, ...}``
``str`` / ``bytes``             a quoted MLIR string
:data:`UNIT`                    the name alone (a unit attribute)
anything with ``to_mlir()``     its own spelling (enums, dimension numbers, shardings)
==============================  ====================================================

Leaf module: it imports nothing from xlasdk but :mod:`xlasdk.shape` types for annotations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .shape import Shape

__all__ = [
    "UNIT", "I32", "UI64", "F32", "BoolArray", "I64Elements", "DenseElements", "IndexLayout", "IntArray", "AttrList",
    "DictAttr", "SpelledAttr",
    "mlir_str", "mlir_bytes", "mlir_unescape", "render", "render_attrs", "symbol_name",
]


class SpelledAttr:
    """An attribute value kept as a module spelled it (a loaded op's:
    :class:`xlasdk.program.attr_kinds.MlirAttr`): written back as spelled (``to_mlir()``), read
    as a typed value with :meth:`typed`, which :meth:`XlaOp.attr <xlasdk.builder.XlaOp.attr>`
    calls."""

    __slots__ = ()

    def to_mlir(self) -> str:
        raise NotImplementedError

    def typed(self, op: Any, name: str) -> Any:
        """The value of attribute ``name`` of ``op`` (this one) as a built op would hold it."""
        raise NotImplementedError


class _Unit:
    """A unit attribute: present or absent, no value (``use_global_device_ids``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNIT"


UNIT = _Unit()


class I32(int):
    """An integer attribute of MLIR type ``i32`` (``api_version``, ``exponent_bits``)."""

    __slots__ = ()


class UI64(int):
    """An integer attribute of MLIR type ``ui64`` (a host callback's index)."""

    __slots__ = ()


class F32(float):
    """A float attribute of MLIR type ``f32`` (a batch norm's ``epsilon``): the value is rounded
    to the nearest f32 when made (``F32(0.1) == float(np.float32(0.1))``)."""

    __slots__ = ()

    def __new__(cls, value: float) -> F32:
        with np.errstate(over="ignore"):  # beyond the f32 range: inf, as a C float cast gives
            return super().__new__(cls, float(np.float32(value)))


class BoolArray(tuple[bool, ...]):
    """``array<i1: ...>`` (DenseBoolArrayAttr: a convolution's ``window_reversal``)."""

    __slots__ = ()


class I64Elements:
    """``dense<...> : tensor<...xi64>``: an int64 array attribute of any rank (``padding``,
    ``replica_groups``, ``source_target_pairs``). ``values`` is kept as an int64 numpy array."""

    __slots__ = ("values",)

    def __init__(self, values: Any) -> None:
        self.values: np.ndarray[Any, Any] = np.asarray(values, dtype=np.int64)

    def to_mlir(self) -> str:
        arr = self.values
        dims = "".join(f"{d}x" for d in arr.shape)
        if arr.size == 0:
            return f"dense<> : tensor<{dims}i64>"
        return f"dense<{arr.tolist()}> : tensor<{dims}i64>".replace("'", "")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, I64Elements) and np.array_equal(self.values, other.values)

    def __hash__(self) -> int:
        return hash((self.values.shape, self.values.tobytes()))


class DenseElements:
    """The elements of a constant: ``dense<"0xHEX"> : tensor<...>``; a one-element ``array`` is a
    splat of ``shape``. ``array`` holds the values in the shape's numpy dtype (pred as bool)."""

    __slots__ = ("array", "shape")

    def __init__(self, array: np.ndarray[Any, Any], shape: Shape) -> None:
        self.array = array
        self.shape = shape

    def to_mlir(self) -> str:
        if self.array.size == 0:
            return f"dense<> : {self.shape.mlir_type()}"
        return f'dense<"0x{self.array.tobytes().hex().upper()}"> : {self.shape.mlir_type()}'

    def value(self) -> np.ndarray[Any, Any]:
        """The full array, or a 0-d array for a splat."""
        a = self.array
        return a.reshape(()) if a.size == 1 else a.reshape(self.shape.dimensions())


class IndexLayout(tuple[int, ...]):
    """A custom call's operand or result layout, minor to major: ``dense<[1, 0]> : tensor<2xindex>``."""

    __slots__ = ()

    def to_mlir(self) -> str:
        if not self:
            return "dense<> : tensor<0xindex>"
        return f"dense<[{', '.join(map(str, self))}]> : tensor<{len(self)}xindex>"


class IntArray(tuple[int, ...]):
    """An array attribute of integers, ``[1, 0]`` (an infeed's ``layout`` entries)."""

    __slots__ = ()

    def to_mlir(self) -> str:
        return "[" + ", ".join(map(str, self)) + "]"


class AttrList(tuple[Any, ...]):
    """An array attribute ``[a, b]`` of other attribute values."""

    __slots__ = ()

    def to_mlir(self) -> str:
        return "[" + ", ".join(render(v) for v in self) + "]"


class DictAttr(dict[str, Any]):
    """A dictionary attribute ``{key = value, ...}`` (a typed-FFI custom call's backend_config)."""

    def to_mlir(self) -> str:
        return "{" + ", ".join(_entry(k, v) for k, v in self.items()) + "}"


def mlir_str(s: str) -> str:
    """``s`` as an MLIR string literal."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def mlir_bytes(data: str | bytes | bytearray) -> str:
    """An MLIR string literal holding ``data`` exactly: printable ASCII as it is, every other
    byte as ``\\XX`` (so any bytes, UTF-8 or not, survive the round trip)."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    out = []
    for byte in raw:
        if 0x20 <= byte < 0x7F and byte not in (0x22, 0x5C):
            out.append(chr(byte))
        else:
            out.append(f"\\{byte:02X}")
    return '"' + "".join(out) + '"'


def mlir_unescape(s: str) -> str:
    """The inverse of :func:`mlir_str` and of MLIR's own string printing: an MLIR string literal's
    contents, from ``\\XX`` hex bytes (UTF-8), ``\\\\``, ``\\"``, ``\\n``, ``\\t``."""
    if "\\" not in s:
        return s
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            nxt = s[i + 1]
            if nxt in "\\\"":
                out += nxt.encode()
                i += 2
                continue
            if nxt in "nt":
                out += b"\n" if nxt == "n" else b"\t"
                i += 2
                continue
            h = s[i + 1 : i + 3]
            if len(h) == 2 and all(ch in "0123456789abcdefABCDEF" for ch in h):
                out.append(int(h, 16))
                i += 3
                continue
        out += c.encode()
        i += 1
    return out.decode("utf-8", "replace")


def symbol_name(ref: object) -> str:
    """The name a symbol reference attribute names: ``@main`` -> ``main``, ``@"fused.1"`` ->
    ``fused.1`` (a ``func.call``'s ``callee``, a composite's ``decomposition``)."""
    name = str(ref)
    name = name[1:] if name.startswith("@") else name
    return name[1:-1] if name.startswith('"') and name.endswith('"') else name


def render(value: Any) -> str:
    """The MLIR spelling of one attribute value (see the table in the module docstring)."""
    t = type(value)
    if t is tuple:
        return "array<i64: " + ", ".join(map(str, value)) + ">" if value else "array<i64>"
    if t is bool:
        return "true" if value else "false"
    if t is int:
        return f"{value} : i64"
    if t is I32:
        return f"{int(value)} : i32"
    if t is UI64:
        return f"{int(value)} : ui64"
    if t is F32:
        if np.isfinite(value):  # 9 significant digits name every f32 exactly
            return f"{value:.9e} : f32"
        return f"0x{np.float32(value).view(np.uint32):08X} : f32"
    if t is str:
        return mlir_str(value)
    if t is bytes or t is bytearray:
        return mlir_bytes(value)
    if t is BoolArray:
        return "array<i1: " + ", ".join("true" if v else "false" for v in value) + ">" if value else "array<i1>"
    to_mlir = getattr(value, "to_mlir", None)
    if to_mlir is None:
        raise TypeError(f"no MLIR spelling for an attribute value of type {t.__name__}")
    return str(to_mlir())


def _entry(name: str, value: Any) -> str:
    return name if value is UNIT else f"{name} = {render(value)}"


def render_attrs(attrs: Mapping[str, Any]) -> str:
    """``a = 1 : i64, b = array<i64: 1>``: an op's attribute dictionary without its braces."""
    return ", ".join([_entry(k, v) for k, v in attrs.items()])
