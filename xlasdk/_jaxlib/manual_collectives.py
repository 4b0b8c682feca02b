"""Collectives of a per-partition program rewritten into the forms XLA's SPMD partitioner keeps in
manual partitioning mode.

A per-partition program (XLA's optimized dump of a program its SPMD partitioner split: see
:mod:`.per_partition`) is compiled again with every parameter and result ``{manual}``; the
partitioner then only checks its collectives, and refuses a variadic ``all-reduce``
(``spmd_partitioner.cc ... supports only single-operand allreduce in manual partitioning mode``),
which XLA's all-reduce combiner writes into optimized dumps (``(f32[], f32[3]) all-reduce(a, b)``).
A variadic ``stablehlo.all_reduce`` reduces each operand on its own with the same computation over
the same device groups, so one single-operand ``all_reduce`` per operand (each with its own new
channel id) computes the same values, bit for bit (:func:`split_variadic_all_reduces`).

Runs in xlasdk's worker process, on a parsed module.
"""

from __future__ import annotations

import re
from typing import Any, Final

from jaxlib.mlir import ir as _ir

from .per_partition import _walk

_HANDLE: Final = re.compile(r"handle\s*=\s*(\d+)\s*,\s*type\s*=\s*(\d+)")


def _names(attributes: Any) -> list[str]:
    """The names of an op's attributes (jaxlib's map iterates over names or over named attributes)."""
    return [a if isinstance(a, str) else a.name for a in attributes]


def _copy_region(src: Any, dst: Any) -> None:
    """Copy the single block of region ``src`` into the empty region ``dst`` (operands remapped)."""
    ir = _ir
    sblock = src.blocks[0]
    dblock = ir.Block.create_at_start(dst, [a.type for a in sblock.arguments])
    mapping: dict[Any, Any] = dict(zip(sblock.arguments, dblock.arguments, strict=True))
    ip = ir.InsertionPoint(dblock)
    for inner in sblock.operations:
        o = inner.operation
        if len(o.regions):
            raise ValueError(f"an all_reduce computation holds {o.name}, an op with regions")
        c = o.clone(ip)
        for k, v in enumerate(c.operands):
            if v in mapping:
                c.operands[k] = mapping[v]
        for r0, r1 in zip(o.results, c.results, strict=True):
            mapping[r0] = r1


def split_variadic_all_reduces(module: Any) -> int:
    """Replace every ``stablehlo.all_reduce`` of several operands in ``module`` (parsed, in place) by
    one ``all_reduce`` per operand, each with a new channel id; how many were split."""
    ir = _ir
    ops: list[Any] = []
    _walk(module.operation, ops)
    handles = [int(m.group(1)) for o in ops if "channel_handle" in o.attributes
               for m in [_HANDLE.search(str(o.attributes["channel_handle"]))] if m is not None]
    next_handle = max(handles, default=0) + 1
    n = 0
    for op in [o for o in ops if o.name == "stablehlo.all_reduce" and len(o.operands) > 1]:
        attrs = {name: op.attributes[name] for name in _names(op.attributes)}
        kind = 1
        if "channel_handle" in attrs:
            m = _HANDLE.search(str(attrs["channel_handle"]))
            kind = int(m.group(2)) if m is not None else 1
        with op.location:
            for value, result in zip(list(op.operands), list(op.results), strict=True):
                one = dict(attrs)
                if "channel_handle" in attrs:
                    one["channel_handle"] = ir.Attribute.parse(
                        f"#stablehlo.channel_handle<handle = {next_handle}, type = {kind}>")
                    next_handle += 1
                new = ir.Operation.create("stablehlo.all_reduce", results=[result.type], operands=[value],
                                          attributes=one, regions=1, loc=op.location, ip=ir.InsertionPoint(op))
                _copy_region(op.regions[0], new.regions[0])
                result.replace_all_uses_with(new.results[0])
        op.erase()
        n += 1
    return n


def split_in_text(module_text: str) -> str:
    """``module_text`` (a module's MLIR text) with :func:`split_variadic_all_reduces` applied, as
    generic text with locations; unchanged when it holds no variadic all_reduce."""
    from . import mlir as _mlir

    if "stablehlo.all_reduce" not in module_text:
        return module_text
    with _mlir.context():
        module = _mlir.parse_module(module_text, verify=False)
        if not split_variadic_all_reduces(module):
            return module_text
        if not module.operation.verify():  # pragma: no cover - verify raises instead
            raise ValueError("the module with its all_reduces split does not verify")
        return str(_mlir.module_to_text(module, debug_info=True, generic=True))
