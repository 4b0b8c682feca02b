"""The :class:`~xlasdk.ProgramShape` of a loaded module, from the MLIR types of its ``main`` function."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Final

from .._jaxlib import mlir as _mlir
from ..errors import FormatError
from ..shape import ProgramShape, Shape
from ..types import etype_from_mlir


def _split_top(s: str) -> list[str]:
    out: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in s:
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


_TENSOR_RE: Final = re.compile(r"^((?:(?:\d+|\?)x)*)(.+)$")


def _shape_from_mlir_type(t: str) -> Shape:
    t = t.strip()
    if t == "!stablehlo.token" or t == "!mhlo.token":
        return Shape.token_shape()
    if t.startswith("tuple<") and t.endswith(">"):
        return Shape.tuple_shape(_shape_from_mlir_type(x) for x in _split_top(t[6:-1]))
    if t.startswith("tensor<") and t.endswith(">"):
        parts = _split_top(t[7:-1])
        m = _TENSOR_RE.match(parts[0])
        if m is None or parts[0].startswith("*"):
            raise ValueError(f"unsupported type {t}")
        dims_s = [d for d in m.group(1).split("x") if d]
        try:
            etype = etype_from_mlir(m.group(2))
        except KeyError:
            raise ValueError(f"unsupported element type {m.group(2)!r} in {t}") from None
        bounds: list[str] = []
        if len(parts) > 1:
            bm = re.search(r"bounds<([^>]*)>", parts[1])
            if bm is not None:
                bounds = [b.strip() for b in bm.group(1).split(",")]
        dims: list[int] = []
        dyn: list[bool] = []
        for k, d in enumerate(dims_s):
            if d == "?":
                b = bounds[k] if k < len(bounds) else "?"
                if not b.isdigit():
                    raise ValueError(f"dimension {k} of {t} is dynamic without a bound")
                dims.append(int(b))
                dyn.append(True)
            else:
                dims.append(int(d))
                dyn.append(False)
        return Shape.array_shape(etype, dims, dynamic_dimensions=dyn if any(dyn) else None)
    raise ValueError(f"unsupported type {t}")


def _program_shape(module: Any, what: str) -> ProgramShape:
    sig = _mlir.main_signature(module)
    if sig is None:
        raise FormatError(f"{what}: the module has no 'main' function (func.func @main)")
    args, names, results = sig
    try:
        params = [_shape_from_mlir_type(a) for a in args]
        outs = [_shape_from_mlir_type(r) for r in results]
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
