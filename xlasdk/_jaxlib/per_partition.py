"""XLA's optimized dumps made compilable again: ``mhlo.fusion`` inlined, per-partition programs marked manual.

An ``*after_optimizations*`` HLO module imported as StableHLO can keep XLA's fusions as
``mhlo.fusion`` ops (when the text rewrite of :mod:`xlasdk.formats.hlo_rewrite` did not apply);
XLA:CPU then stops at ``RET_CHECK ... Fusion must have backend config`` (the import drops the
CPU backend's fusion configs). A fusion computes its body once on its operands, so the body
inlined in its place gives the same values (:func:`inline_fusions`).

The optimized dump of a program compiled for several partitions is one partition's program: XLA's
SPMD partitioner ran before it was written (parameters and results hold one device's shard, and
collectives such as the ``all-reduce`` of a global sum join the devices). Compiled again with
``num_partitions > 1``, the partitioner would split it a second time: its tiled shardings
(``{devices=[4,1]<=[4]}`` on an already split ``f32[4,8]``) are read as global, and its
collectives are refused or misread. :func:`per_partition_facts` recognizes such a module and
:func:`mark_manual` gives every parameter and result the ``{manual}`` sharding, so the
partitioner keeps the program as it is on every device (as for the body of ``shard_map``): each
device runs it on its own arguments (``Executable.execute_replicated``), as it ran in JAX.

Run in xlasdk's worker process (:mod:`xlasdk.runtime.isolated_compile`), on the module's
text; every function takes and returns plain values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from jaxlib.mlir import ir as _ir

from . import mlir as _mlir

_MESH_AXIS: Final = re.compile(r'"[^"]*"\s*=\s*(\d+)')

#: The module attribute xlasdk's HLO loader gives one partition's program (the entry computation
#: of XLA's HLO is named ``<name>_spmd``, as its SPMD partitioner names it): the partition count,
#: 0 when the module does not say (:func:`xlasdk.sharding._spmd.spmd_partitions`). XLA of jaxlib
#: 0.10 marks no collective of such a module, and the HLO loader's rewrites leave it no fusion.
SPMD_PARTITIONS: Final = "xlasdk.spmd_partitions"
_SPMD_PARTITIONS_ATTR: Final = re.compile(r"\bxlasdk\.spmd_partitions\s*=\s*(\d+)")


@dataclass(frozen=True)
class PerPartitionFacts:
    """What a loaded module says about itself.

    Attributes
    ----------
    fusions: how many ``mhlo.fusion`` ops it holds (XLA's fusions: an optimized dump).
    spmd_collectives: how many collectives XLA's SPMD partitioner wrote (an ``is_spmd_generated``
        frontend attribute, or replica groups given as mesh axes, which only the partitioner
        writes), plus 1 when the loader marked the module :data:`SPMD_PARTITIONS`: the module
        is one partition's program.
    mesh_devices: the device count of its ``sdy.mesh`` (the largest, when several), else the
        partition count of :data:`SPMD_PARTITIONS`, or None.
    """

    fusions: int
    spmd_collectives: int
    mesh_devices: int | None

    def per_partition(self, num_partitions: int) -> bool:
        """Whether the module is a per-partition program when compiled for ``num_partitions``:
        it holds collectives of the partitioner, or it is optimized (fusions) and compiled for
        several partitions (XLA partitions a program before it fuses it)."""
        return self.spmd_collectives > 0 or (self.fusions > 0 and num_partitions > 1)


def _walk(op: Any, out: list[Any]) -> None:
    """Every operation nested in ``op`` (not ``op`` itself), parents before their children."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                o = inner.operation
                out.append(o)
                _walk(o, out)


def _ops(module: Any) -> list[Any]:
    out: list[Any] = []
    _walk(module.operation, out)
    return out


def mesh_devices(attr_text: str) -> int:
    """The device count of a Shardy mesh's text (``#sdy.mesh<["x"=2, "y"=2]>``: 4)."""
    n = 1
    for size in _MESH_AXIS.findall(attr_text):
        n *= int(size)
    return n


def _facts(module: Any, ops: list[Any]) -> PerPartitionFacts:
    fusions = spmd = 0
    mesh: int | None = None
    marked = module.operation.attributes[SPMD_PARTITIONS] if SPMD_PARTITIONS in module.operation.attributes else None
    for o in ops:
        name = o.name
        if name == "mhlo.fusion":
            fusions += 1
        elif name == "sdy.mesh" and "mesh" in o.attributes:
            n = mesh_devices(str(o.attributes["mesh"]))
            mesh = n if mesh is None else max(mesh, n)
        attrs = o.attributes
        if "replica_groups" in attrs and "replica_group_mesh_axes" in str(attrs["replica_groups"]):
            spmd += 1
        elif "mhlo.frontend_attributes" in attrs and "is_spmd_generated" in str(attrs["mhlo.frontend_attributes"]):
            spmd += 1
    if marked is not None:
        spmd += 1
        n = _ir.IntegerAttr(marked).value
        if mesh is None and n > 1:
            mesh = n
    return PerPartitionFacts(fusions, spmd, mesh)


def per_partition_facts(module_text: str) -> PerPartitionFacts:
    """:class:`PerPartitionFacts` of a module's text (MLIR generic or pretty syntax)."""
    if "mhlo.fusion" not in module_text and "replica_group_mesh_axes" not in module_text \
            and "is_spmd_generated" not in module_text and SPMD_PARTITIONS not in module_text:
        return PerPartitionFacts(0, 0, None)  # nothing to look for: no parse
    with _mlir.context():
        module = _mlir.parse_module(module_text, verify=False)
        return _facts(module, _ops(module))


def marked_partitions(module_text: str) -> int | None:
    """The :data:`SPMD_PARTITIONS` mark of a module's text (read without parsing it): the
    partition count, 0 when unknown; None when the module has no mark."""
    m = _SPMD_PARTITIONS_ATTR.search(module_text)
    return int(m.group(1)) if m is not None else None


def _inline_fusion(fusion: Any) -> None:
    """Replace one ``mhlo.fusion`` by its body: block arguments become the operands, the
    results the ``mhlo.return`` operands."""
    block = fusion.regions[0].blocks[0]
    for arg, operand in zip(block.arguments, fusion.operands, strict=True):
        arg.replace_all_uses_with(operand)
    body = [o.operation for o in block.operations]
    ret = body[-1]
    if ret.name != "mhlo.return" or len(ret.operands) != len(fusion.results):
        raise ValueError(f"an mhlo.fusion ends with {ret.name} of {len(ret.operands)} values "
                         f"for its {len(fusion.results)} results")
    for o in body[:-1]:
        o.move_before(fusion)
    for res, value in zip(fusion.results, ret.operands, strict=True):
        res.replace_all_uses_with(value)
    fusion.erase()


def inline_fusions(module: Any) -> int:
    """Inline every ``mhlo.fusion`` of a parsed module (in place); how many there were."""
    n = 0
    while True:  # fusions nested in fusions' bodies come out with the body: walk again
        fusions = [o for o in _ops(module) if o.name == "mhlo.fusion"]
        if not fusions:
            return n
        outer = [f for f in fusions if not _inside_fusion(f)]
        for f in outer:
            _inline_fusion(f)
        n += len(outer)


def _parents(op: Any) -> list[Any]:
    out = []
    p = op.parent
    while p is not None:
        out.append(p)
        p = p.parent
    return out


def _inside_fusion(op: Any) -> bool:
    return any(p.name == "mhlo.fusion" for p in _parents(op))


_MANUAL: Final = "{manual}"


def _manual_list(attr_list: Any, count: int) -> Any:
    """A func's ``arg_attrs`` / ``res_attrs`` with ``mhlo.sharding = "{manual}"`` in each
    dictionary and any Shardy sharding dropped."""
    ir = _ir
    dicts = []
    for i in range(count):
        entries: dict[str, Any] = {}
        if attr_list is not None:
            d = attr_list[i]
            for j in range(len(d)):
                named = d[j]
                if named.name not in ("mhlo.sharding", "sdy.sharding"):
                    entries[named.name] = named.attr
        entries["mhlo.sharding"] = ir.StringAttr.get(_MANUAL)
        dicts.append(ir.DictAttr.get(entries))
    return ir.ArrayAttr.get(dicts)


def _without_shardings(attr_list: Any) -> Any:
    """A func's ``arg_attrs`` / ``res_attrs`` without ``mhlo.sharding`` / ``sdy.sharding`` entries."""
    ir = _ir
    dicts = []
    for i in range(len(attr_list)):
        d = attr_list[i]
        dicts.append(ir.DictAttr.get({d[j].name: d[j].attr for j in range(len(d))
                                      if d[j].name not in ("mhlo.sharding", "sdy.sharding")}))
    return ir.ArrayAttr.get(dicts)


def mark_manual(module: Any) -> None:
    """Give ``main``'s parameters and results the ``{manual}`` sharding and drop the
    shardings of the ops inside and of the other functions' parameters and results (a
    per-partition program: the partitioner keeps it as it is; an instruction of XLA's fused
    computations that kept its sharding is the result of a called function once the fusion is
    a call)."""
    ir = _ir
    main = None
    funcs = []
    for o in module.body.operations:
        op = o.operation
        if op.name == "func.func" and "sym_name" in op.attributes:
            if _mlir.string_value(op.attributes["sym_name"]) == "main":
                main = op
            else:
                funcs.append(op)
    if main is None:
        raise ValueError("the module has no main function")
    ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    attrs = main.attributes
    attrs["arg_attrs"] = _manual_list(attrs["arg_attrs"] if "arg_attrs" in attrs else None, len(ftype.inputs))
    attrs["res_attrs"] = _manual_list(attrs["res_attrs"] if "res_attrs" in attrs else None, len(ftype.results))
    for f in funcs:
        for key in ("arg_attrs", "res_attrs"):
            if key in f.attributes:
                f.attributes[key] = _without_shardings(f.attributes[key])
    for o in _ops(module):
        for key in ("mhlo.sharding", "sdy.sharding", "sdy.sharding_rule"):
            if key in o.attributes:
                del o.attributes[key]


def rewrite_for_compile(module_text: str, *, manual: bool) -> str:
    """The module's text (generic syntax, locations kept) with its fusions inlined and, when
    ``manual``, its parameters and results marked ``{manual}`` (:func:`mark_manual`)."""
    with _mlir.context():
        module = _mlir.parse_module(module_text, verify=False)
        inline_fusions(module)
        if manual:
            mark_manual(module)
        if not module.operation.verify():  # pragma: no cover - verify raises instead
            raise ValueError("the rewritten module does not verify")
    return _mlir.module_to_text(module, debug_info=True, generic=True)
