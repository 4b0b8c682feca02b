"""Shardy's attributes as XLA's HLO exporter reads them from a module's frontend attributes.

A module that Shardy exported for XLA (JAX's sharded programs, dumped as HLO) keeps each sharding
as a *string*: the result of the entry function is the result of an ``xla.sdy.FuncResultSharding``
custom call whose frontend attribute ``xla.sdy.sharding`` spells a ``#sdy.sharding_per_value``,
and the module's frontend attribute ``xla.sdy.meshes`` spells the dictionary of the meshes it
names. XLA undoes the string's C escapes (``absl::CUnescape``) and parses it; what does not read
makes it abort (``CHECK``) or crash. These functions read the same strings through the bindings'
Shardy dialect (:mod:`jaxlib.mlir.dialects.sdy`), into plain Python values, for the loader's rule
check (:mod:`xlasdk.formats.rule_check`).
"""

from __future__ import annotations

from typing import Any

from jaxlib.mlir import ir as _ir
from jaxlib.mlir.dialects import sdy as _sdy

from .mlir import context, string_value

__all__ = ["c_unescape", "frontend_attributes", "module_meshes", "sharding_per_value"]

_SIMPLE = {ord(k): v for k, v in {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92,
                                  "'": 39, '"': 34, "?": 63}.items()}
_HEX = b"0123456789abcdefABCDEF"


def c_unescape(data: bytes) -> str | None:
    """``data`` with its C escapes undone as ``absl::CUnescape`` does (``\\n``, ``\\"``, octal
    ``\\101``, hex ``\\x41``, ``\\u00e9``...), as UTF-8 text; None where CUnescape fails (a trailing
    backslash, an unknown escape, a value over 0xff) or the result is not UTF-8."""
    out = bytearray()
    i, n = 0, len(data)
    while i < n:
        c = data[i]
        if c != 92:
            out.append(c)
            i += 1
            continue
        if i + 1 >= n:
            return None
        e = data[i + 1]
        if e in _SIMPLE:
            out.append(_SIMPLE[e])
            i += 2
        elif 48 <= e <= 55:  # up to three octal digits
            j = i + 1
            while j < min(i + 4, n) and 48 <= data[j] <= 55:
                j += 1
            v = int(data[i + 1 : j], 8)
            if v > 0xFF:
                return None
            out.append(v)
            i = j
        elif e in (120, 88):  # \x: every hex digit that follows
            j = i + 2
            while j < n and data[j] in _HEX:
                j += 1
            if j == i + 2 or int(data[i + 2 : j], 16) > 0xFF:
                return None
            out.append(int(data[i + 2 : j], 16))
            i = j
        elif e in (117, 85):  # \uXXXX, \UXXXXXXXX
            k = 4 if e == 117 else 8
            digits = data[i + 2 : i + 2 + k]
            if len(digits) != k or any(d not in _HEX for d in digits):
                return None
            v = int(digits, 16)
            if v > 0x10FFFF or 0xD800 <= v <= 0xDFFF:
                return None
            out += chr(v).encode("utf-8")
            i += 2 + k
        else:
            return None
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        return None


def frontend_attributes(attributes: Any) -> dict[str, str | None] | None:
    """An op's ``mhlo.frontend_attributes`` (``attributes``: its ``OpAttributeMap``) as XLA reads
    them, name to string: None when it has none, or they are not a dictionary; an entry that is
    not a string, or not UTF-8, reads None (XLA casts each to a string)."""
    if "mhlo.frontend_attributes" not in attributes:
        return None
    d = _downcast(attributes["mhlo.frontend_attributes"])
    if not isinstance(d, _ir.DictAttr):
        return None
    out: dict[str, str | None] = {}
    for i in range(len(d)):
        named = d[i]
        a = _downcast(named.attr)
        try:
            out[named.name] = bytes(a.value_bytes).decode("utf-8") if isinstance(a, _ir.StringAttr) else None
        except UnicodeDecodeError:
            out[named.name] = None
    return out


def _downcast(a: Any) -> Any:
    """The attribute as its own class (``StringAttr``, ``DictAttr``...), where the bindings name it."""
    try:
        return a.maybe_downcast()
    except TypeError:  # a kind the bindings cannot name
        return a


def _mesh_axes(attr: Any) -> tuple[str, ...] | None:
    """The axis names of a ``#sdy.mesh`` attribute, None for another attribute."""
    if not _sdy.MeshAttr.isinstance(attr):
        return None
    return tuple(str(_sdy.MeshAxisAttr(a).name) for a in _sdy.MeshAttr(attr).axes)


def module_meshes(module: Any) -> dict[str, tuple[str, ...] | None] | None:
    """The meshes a sharding's ``@name`` resolves against when XLA exports ``module`` (a parsed
    ``ir.Module``) on every jaxlib xlasdk supports, name to axis names: the dictionary the module's
    frontend attribute ``xla.sdy.meshes`` spells (jaxlib 0.12.1 reads only it) and, where the
    module has ``sdy.mesh`` ops, only the names those define with the same axes (jaxlib 0.10.2
    reads the ops instead); an entry that is not a ``#sdy.mesh``, or that the ops define otherwise,
    reads None. ``{}`` when there is no ``xla.sdy.meshes``; None when it does not read as a
    dictionary (not a string, escapes CUnescape refuses, not a dictionary)."""
    with context():
        ops: dict[str, tuple[str, ...] | None] = {}
        for op in module.body.operations:
            o = op.operation
            if o.name == "sdy.mesh" and "sym_name" in o.attributes and "mesh" in o.attributes:
                ops[string_value(o.attributes["sym_name"])] = _mesh_axes(o.attributes["mesh"])
        fa = frontend_attributes(module.operation.attributes) or {}
        if "xla.sdy.meshes" not in fa:
            return {}
        spelled = fa["xla.sdy.meshes"]
        text = None if spelled is None else c_unescape(spelled.encode("utf-8"))
        if text is None:
            return None
        try:
            d = _downcast(_ir.Attribute.parse(text))
        except Exception:  # MLIRError: not an attribute (of the dialects this context has)
            return None
        if not isinstance(d, _ir.DictAttr):
            return None
        meshes = {d[i].name: _mesh_axes(d[i].attr) for i in range(len(d))}
        if ops:
            meshes = {k: v if ops.get(k, ()) == v else None for k, v in meshes.items()}
        return meshes


def sharding_per_value(spelled: str) -> list[tuple[str | None, tuple[str, ...], tuple[str, ...]]] | None:
    """Each sharding of the ``#sdy.sharding_per_value`` a frontend attribute's string spells (C
    escapes undone, as XLA reads it): ``(mesh name, inline mesh axes, axes)``, the mesh name None
    for an inline mesh (whose axis names come next; ``()`` for a named one) and ``axes`` the axis
    names its dimension shardings and unreduced axes use. None when the string is not one."""
    text = c_unescape(spelled.encode("utf-8"))
    if text is None:
        return None
    with context():
        try:
            a = _ir.Attribute.parse(text)
        except Exception:  # MLIRError: not an attribute (of the dialects this context has)
            return None
        if not _sdy.TensorShardingPerValueAttr.isinstance(a):
            return None
        out: list[tuple[str | None, tuple[str, ...], tuple[str, ...]]] = []
        for s in _sdy.TensorShardingPerValueAttr(a).shardings:
            t = _sdy.TensorShardingAttr(s)
            used = [_sdy.AxisRefAttr(r).name for d in t.dimension_shardings for r in _sdy.DimensionShardingAttr(d).axes]
            used += [_sdy.AxisRefAttr(r).name for r in t.unreduced_axes]
            ref = t.mesh_or_ref
            inline = _mesh_axes(ref)
            name = None if inline is not None else str(_ir.FlatSymbolRefAttr(ref).value)
            out.append((name, inline or (), tuple(str(u) for u in used)))
        return out
