"""Shardings in programs: the sharding an op of a shape carries, the checks of a built
computation's shardings, and the replica/partition counts a module records."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from .._mlir_attrs import mlir_unescape as _mlir_unescape
from .._optable import TUPLE
from .._where import PKG_DIR, where
from ..errors import CompileError, ShapeError
from ._hlo_sharding import _REPLICATED, HloSharding
from ._parse import parse_replica_groups

if TYPE_CHECKING:
    from ..builder import XlaOp
    from ..shape import Shape


def iter_shardings(value: HloSharding) -> Iterator[HloSharding]:
    """``value`` itself, or the elements of a tuple sharding."""
    if value._kind == "tuple":
        yield from value._elements
    else:
        yield value


def sharding_for_shape(sharding: HloSharding, shape: Shape, opcode: str) -> HloSharding | None:
    """The sharding an op of result ``shape`` built under ``sharding`` carries, or None.

    A tiled sharding leaves scalars (and tokens) unannotated; a non-tuple sharding applies to
    every result of a tuple-shaped op (a tuple sharding of as many elements is made).

    Raises
    ------
    ShapeError
        At the op, when a tiled sharding's rank or a tuple sharding's length does not fit.
    """
    if shape.is_token():
        return None
    if not shape.is_tuple():
        if sharding._kind == "tuple":
            if len(sharding._elements) == 1:
                return sharding_for_shape(sharding._elements[0], shape, opcode)
            raise _op_error(opcode, f"the tuple sharding {sharding} does not fit the result {shape}")
        if sharding._kind == "tiled":
            rank = len(shape.dimensions())
            if rank == 0:
                return None
            if sharding.tiled_data_rank != rank:
                raise _op_error(
                    opcode,
                    f"sharding {sharding} splits {sharding.tiled_data_rank} dimension"
                    f"{'s' if sharding.tiled_data_rank != 1 else ''}, but the result {shape} has rank {rank}",
                )
        return sharding
    elems = shape.tuple_shapes()
    if sharding._kind == "tuple":
        if len(sharding._elements) != len(elems):
            raise _op_error(
                opcode,
                f"the tuple sharding {sharding} has {len(sharding._elements)} elements, but the result {shape} "
                f"has {len(elems)}",
            )
        parts = [sharding_for_shape(e, s, opcode) for e, s in zip(sharding._elements, elems, strict=True)]
    else:
        parts = [sharding_for_shape(sharding, s, opcode) for s in elems]
    if all(p is None for p in parts):
        return None
    return HloSharding.tuple_sharding([_REPLICATED if p is None else p for p in parts])


def _op_error(opcode: str, what: str) -> ShapeError:
    """The error of an op built under a sharding that does not fit it, named as the user called it
    (the outermost xlasdk function on the stack: ``Neg``, ``Parameter``...)."""

    name = opcode.rsplit(".", 1)[-1]
    f: Any = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(PKG_DIR):
        if not f.f_code.co_name.startswith("_") and f.f_code.co_name[:1].isupper():
            name = f.f_code.co_name
        f = f.f_back
    return ShapeError(f"{name}: {what}{where()}")


def _result_shardings(root: XlaOp, n: int) -> list[Any] | None:
    """The sharding of each of the ``n`` results of a computation whose root is ``root`` (None
    where a result has none), or None when no result has one: a tuple root's elements, or the
    root op's own sharding (one per result of a tuple-shaped op)."""
    if root.sharding is not None:
        sh = root.sharding
        elems = list(sh.tuple_elements) if sh.is_tuple else [sh]
        return elems if len(elems) == n else None
    if root.opdef is TUPLE and len(root.operands) == n:
        found = [x.sharding if not x.shape.is_tuple() else None for x in root.operands]
        return found if any(f is not None for f in found) else None
    return None


def check_computation_shardings(computation: Any, num_partitions: int, num_replicas: int = 1) -> None:
    """Check every sharding of a built computation against ``num_partitions`` (what XLA's
    verifier checks at compile time, said in xlasdk's terms). Loaded computations are left to XLA.

    Raises
    ------
    ShapeError
        Naming the computation, the parameter or op, its sharding and what does not fit.
    CompileError
        For a tiled parameter or result sharding with ``num_replicas > 1``: jaxlib 0.10.2's
        runtime aborts the process on those (it checks the tile count against every device of
        all replicas).
    """
    if computation.source_format is not None:
        return
    graph = computation.graph()
    root = graph.root
    if not root.builder._op_shardings:
        return
    name = computation.name
    params = list(graph.parameters)
    if num_replicas > 1:
        n_results = len(root.shape.tuple_shapes()) if root.shape.is_tuple() else 1
        outer = [(f"parameter {p.extra[0]}", p.sharding) for p in params]
        outer += [(f"result {i}", s) for i, s in enumerate(_result_shardings(root, n_results) or ())]
        for what, s in outer:
            if s is not None and any(e.is_tiled for e in iter_shardings(s)):
                raise CompileError(
                    f"compile: {name!r}: {what} has the tiled sharding {s}, but num_replicas={num_replicas}: "
                    "jaxlib runs tiled parameters and results only with num_replicas=1 (it aborts otherwise); "
                    "tile them over partitions alone, or replicate them (shardings of inner ops are fine)"
                )
    seen: set[int] = set()
    stack = [root, *graph.side_effects, *params]
    while stack:
        op = stack.pop()
        if op.id in seen:
            continue
        seen.add(op.id)
        stack.extend(op.operands)
        for r in op.regions:
            stack.extend(r.bindings or ())
        if op.sharding is None:
            continue
        try:
            op.sharding.validate(num_partitions, op.shape)
        except ShapeError as e:
            if op.opcode == "parameter":
                what = f"parameter {op.extra[0]} ({op.extra[1] or 'p' + str(op.extra[0])!r})"
            else:
                what = f"the {op.opcode.rsplit('.', 1)[-1]} op of shape {op.shape}"
            raise ShapeError(
                f"compile: {name!r}: {what}: {e} (num_partitions={num_partitions})"
            ) from None


_HLO_HEADER_INT: Final = re.compile(r"\b(num_partitions|replica_count)=(\d{1,9})\b")


def hlo_header_counts(hlo_text: str) -> dict[str, int]:
    """``{"num_partitions": N, "replica_count": R}``, as far as the ``HloModule`` header line of
    ``hlo_text`` gives them (XLA's dumps of SPMD programs write them)."""
    start = hlo_text.find("HloModule")
    if start < 0:
        return {}
    end = hlo_text.find("\n", start)
    return {key: int(value) for key, value in _HLO_HEADER_INT.findall(hlo_text[start : end if end >= 0 else None])}


_ENTRY_NAME: Final = re.compile(r"^ENTRY\s+%?([^\s(]+)", re.M)
#: a ``replica_groups=`` value in any notation: mesh axes, an iota, or explicit groups
REPLICA_GROUPS: Final = re.compile(
    r"replica_groups=(mesh\[[^\]]*\](?:,\s*device_ids=\((?:[^()]|\([^()]*\))*\))?\s*\{[^}]*\}"
    r"|\[[\d,]*\]<=\[[\d,]*\](?:T\([\d,]*\))?|\{(?:\{[\d,]*\},?)*\})")


def spmd_partitions(hlo_text: str) -> int | None:
    """For the HLO text of one partition's program (XLA's optimized dump of a program its SPMD
    partitioner split: the partitioner renames the entry computation ``<name>_spmd``), its
    partition count: the header's ``num_partitions``, else the devices its collectives' groups
    name (a ``.hlo.pb`` has no header), else 0 (it does not say). None for any other module."""
    m = _ENTRY_NAME.search(hlo_text)
    if m is None or not m.group(1).endswith("_spmd"):
        return None
    n = hlo_header_counts(hlo_text).get("num_partitions")
    if n is not None:
        return n
    most = 0
    for value in REPLICA_GROUPS.findall(hlo_text):
        try:
            groups = parse_replica_groups(value)
        except ShapeError:
            continue
        most = max([most, *(d + 1 for g in groups for d in g)])
    return most
_MODULE_ATTR_INT: Final = re.compile(r"\bmhlo\.(num_partitions|num_replicas)\s*=\s*(\d+)\s*:\s*i\d+")
_SHARDING_ATTR: Final = re.compile(r'mhlo\.sharding\s*=\s*"((?:[^"\\]|\\.)*)"')


def module_spmd_counts(
    computation: Any, hlo_text: str | None = None, module_text: str | None = None
) -> tuple[int | None, int | None]:
    """``(num_replicas, num_partitions)`` a module records for itself, None where it says nothing.

    In order: the HLO module header (``replica_count=``, ``num_partitions=``: XLA's dumps of SPMD
    programs write them) when ``hlo_text`` is the module's HLO text; the StableHLO module
    attributes ``mhlo.num_replicas`` / ``mhlo.num_partitions`` (JAX's lowerings carry them); else
    the partition count its shardings need: the device count of its tile assignments, or its
    highest maximal device + 1 (replicated-only modules say nothing). ``module_text``: the
    module's StableHLO text when the caller has it (``compile_request(comp).module_text``; else
    it is printed, which parses a loaded module first).
    """
    replicas: int | None = None
    partitions: int | None = None
    if hlo_text is not None:
        header = hlo_header_counts(hlo_text)
        partitions, replicas = header.get("num_partitions"), header.get("replica_count")
    text = module_text if module_text is not None else computation.as_stablehlo_text()
    for key, value in _MODULE_ATTR_INT.findall(text):  # module attributes (at the end in generic form)
        if key == "num_partitions" and partitions is None:
            partitions = int(value)
        elif key == "num_replicas" and replicas is None:
            replicas = int(value)
    if partitions is None:
        need = 0
        for raw in set(_SHARDING_ATTR.findall(text)):
            try:
                s = HloSharding.parse(_mlir_unescape(raw))
            except ShapeError:
                continue
            for e in iter_shardings(s):
                if e.is_tiled:
                    need = max(need, e.num_devices)
                elif e.is_maximal:
                    need = max(need, e.device + 1)
        partitions = need or None
    return replicas, partitions
