"""The :class:`~xlasdk.ProgramShape` of a loaded module, from the MLIR types of its ``main`` function."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .._jaxlib import mlir as _mlir
from ..errors import FormatError
from ..shape import ProgramShape, Shape
from ..types import etype_from_mlir


def _shape_from_type(t: _mlir.TypeInfo) -> Shape:
    """The Shape of one ``main`` argument or result type (ValueError for types XLA has no shape for)."""
    kind = t[0]
    if kind == "token":
        return Shape.token_shape()
    if kind == "tuple":
        return Shape.tuple_shape(_shape_from_type(x) for x in t[1])
    if kind != "tensor":
        raise ValueError(f"unsupported type {t[1]}")
    _, element, dims, bounds = t
    try:
        etype = etype_from_mlir(element)
    except KeyError:
        raise ValueError(f"unsupported element type {element!r}") from None
    sizes: list[int] = []
    dyn: list[bool] = []
    for k, d in enumerate(dims):
        if d is None:
            b = bounds[k] if bounds is not None and k < len(bounds) else None
            if b is None:
                raise ValueError(f"dimension {k} of a {element} tensor is dynamic without a bound")
            sizes.append(b)
            dyn.append(True)
        else:
            sizes.append(d)
            dyn.append(False)
    return Shape.array_shape(etype, sizes, dynamic_dimensions=dyn if any(dyn) else None)


def _program_shape(module: Any, what: str) -> ProgramShape:
    sig = _mlir.main_signature(module)
    if sig is None:
        raise FormatError(f"{what}: the module has no 'main' function (func.func @main)")
    args, names, results = sig
    try:
        params = [_shape_from_type(a) for a in args]
        outs = [_shape_from_type(r) for r in results]
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
