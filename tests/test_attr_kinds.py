"""The op table's declared attribute kinds and the importer's readers (:mod:`xlasdk.program.attr_kinds`).

Oracles: the typed values the builder itself stores on a built program's nodes (the importer's
reading of the emitted module must give them back), and the emitter: every real dump's graph with
its declared attributes read into typed values, emitted again as a module and imported again, gives
equal typed attributes, and the same program (XLA's own HLO text of both is the same).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops
from xlasdk._mlir_attrs import DenseElements
from xlasdk._optable import OPS, AttrKind
from xlasdk.builder import XlaOp
from xlasdk.errors import GraphImportError
from xlasdk.program.attr_kinds import READERS, MlirAttr, typed_attributes
from xlasdk.program.graph_import import import_graph

DATA = Path(__file__).resolve().parent / "data"
CORPORA = ("dumps", "dumps_tpu", "dumps_jax012")
FILES = sorted(
    str(p.relative_to(DATA)) for c in CORPORA for p in (DATA / c).glob("*/*")
    if p.name.endswith((".txt", ".mlir")) and "comp_env" not in p.name
)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, DenseElements) and isinstance(b, DenseElements):
        return a.shape == b.shape and a.array.dtype == b.array.dtype and a.array.tobytes() == b.array.tobytes()
    return type(a) is type(b) and bool(a == b)


def _nodes(roots: list[XlaOp]) -> Iterator[XlaOp]:
    """Every node ``roots`` read, through regions."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        yield o
        stack.extend(o.operands)
        for r in o.regions:
            stack.extend((*r.results, *r.captures, *(r.bindings or ())))


def test_every_declared_kind_has_a_reader() -> None:
    import xlasdk.ops  # noqa: F401  (every family defines its rows)

    assert set(READERS) == set(AttrKind)
    declared = [(d.name, n, k) for d in OPS.values() for n, k in d.attrs]
    assert len(declared) >= 25
    assert all(isinstance(k, AttrKind) for _, _, k in declared)


def _built() -> tuple[xs.XlaComputation, list[XlaOp]]:
    b = xs.XlaBuilder("kinds")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(xs.PrimitiveType.F32, (2, 3)), "x")
    i = ops.Parameter(b, 1, xs.Shape.array_shape(xs.PrimitiveType.S32, (4,)), "i")
    c = ops.Constant(b, np.arange(6, dtype=np.float32).reshape(2, 3))
    lt = ops.Lt(x, c)
    s = ops.Select(lt, x, c)
    t = ops.Transpose(s, (1, 0))
    d = ops.DotGeneral(s, t, xs.DotDimensionNumbers(lhs_contracting_dimensions=[1], rhs_contracting_dimensions=[0]),
                       precision_config=xs.PrecisionConfig(["HIGHEST", "DEFAULT"]))
    sl = ops.Slice(x, (0, 1), (2, 3), (1, 2))
    p = ops.Pad(sl, ops.Constant(b, np.float32(0)), [(1, 0, 1), (0, 2, 0)])
    r = ops.Rev(p, (0,))
    cat = ops.ConcatInDim(b, [x, c], 1)
    red = ops.Reduce(b, [cat], [ops.Constant(b, np.float32(0))], ops.Add, (1,))
    rw = ops.ReduceWindow(x, ops.Constant(b, np.float32(0)), ops.Add, (2, 2), (1, 1), [(1, 0), (0, 1)])
    srt = ops.Sort(b, [i], is_stable=True)
    io = ops.Iota(b, xs.Shape.array_shape(xs.PrimitiveType.S32, (4,)), 0)
    bc = ops.BroadcastInDim(io, (3, 4), (1,))
    rp = ops.ReducePrecision(x, 5, 10)
    ds = ops.DynamicSlice(x, [ops.Constant(b, np.int32(0)), ops.Constant(b, np.int32(1))], (1, 2))
    img = ops.Parameter(b, 2, xs.Shape.array_shape(xs.PrimitiveType.F32, (1, 2, 5, 5)), "img")
    ker = ops.Parameter(b, 3, xs.Shape.array_shape(xs.PrimitiveType.F32, (3, 2, 2, 2)), "ker")
    conv = ops.ConvGeneralDilated(img, ker, (2, 1), [(1, 0), (0, 1)], (1, 1), (1, 2),
                                  xs.make_convolution_dimension_numbers(("NCHW", "OIHW", "NCHW"), 2),
                                  precision_config=xs.PrecisionConfig(["HIGH"]))
    at = ops.Parameter(b, 4, xs.Shape.array_shape(xs.PrimitiveType.S32, (2, 1)), "at")
    ga = ops.Gather(x, at, xs.GatherDimensionNumbers(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                                                     index_vector_dim=1), (1, 3), indices_are_sorted=True)
    sc = ops.Scatter(x, at, ops.Broadcast(ops.Constant(b, np.float32(1)), (2, 3)), ops.Add,
                     xs.ScatterDimensionNumbers(update_window_dims=[1], inserted_window_dims=[0],
                                                scatter_dims_to_operand_dims=[0], index_vector_dim=1),
                     unique_indices=True)
    sq = ops.Parameter(b, 5, xs.Shape.array_shape(xs.PrimitiveType.F32, (3, 3)), "sq")
    ch = ops.Cholesky(sq, lower=False)
    ts = ops.TriangularSolve(sq, x, left_side=False, lower=True, unit_diagonal=True, transpose_a="TRANSPOSE")
    ff = ops.Fft(ops.ConvertElementType(x, xs.PrimitiveType.C64), "IFFT", (3,))
    bn = ops.BatchNormInference(x, *(ops.Constant(b, np.ones(3, np.float32)) for _ in range(4)), 1e-3, 1)
    mp = ops.Map(b, [x, c], ops.Max, (0, 1))
    gd = ops.GetDimensionSize(x, 1)
    st = ops.Parameter(b, 6, xs.Shape.array_shape(xs.PrimitiveType.U64, (2,)), "st")
    rb = ops.RngBitGenerator("PHILOX", st, xs.Shape.array_shape(xs.PrimitiveType.U32, (4,)))
    ru = ops.RngUniform(ops.Constant(b, np.float32(0)), ops.Constant(b, np.float32(1)),
                        xs.Shape.array_shape(xs.PrimitiveType.F32, (2,)))
    tk = ops.TopK(x, 2)
    ag = ops.AllGather(x, 0, 2, [[0, 1]], channel_id=3, use_global_device_ids=True)
    ar = ops.AllReduce(x, ops.Add, [[0, 1]], channel_id=4)
    rs = ops.ReduceScatter(x, ops.Add, 0, 2, [[0, 1]])
    aa = ops.AllToAll(x, 0, 0, 2, [[0, 1]])
    cp = ops.CollectivePermute(x, [(0, 1), (1, 0)], channel_id=5)
    outs = [ag, ar, rs, aa, cp, d, r, red, rw, ops.Add(srt, io), bc, rp, ds, conv, ga, sc, ch, ts, ff, bn, mp, gd,
            ops.GetTupleElement(rb, 1), ru, ops.GetTupleElement(tk, 0)]
    comp = b.build(ops.Tuple(b, outs))
    return comp, outs


def _declared(o: XlaOp, attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attrs.items() if o.opdef.attr_kind(k) is not None}


def _typed(o: XlaOp) -> dict[str, Any]:
    """``o``'s attributes, each one its row declares read as a typed value (:meth:`XlaOp.attr`),
    the others as stored."""
    return {k: o.attr(k) if o.opdef.attr_kind(k) is not None else v for k, v in o.attrs.items()}


_Entries = list[tuple[str, dict[str, Any]]]


def _match(name: str, d: dict[str, Any], entries: _Entries) -> int | None:
    return next((n for n, (name2, d2) in enumerate(entries)
                 if name2 == name and set(d2) == set(d) and all(_same(d[k], d2[k]) for k in d)), None)


def _assert_same_multiset(first: _Entries, second: _Entries) -> None:
    """Each op's declared typed attributes in ``first`` match one op's of ``second`` (and none is left)."""
    assert len(first) == len(second)
    left = list(second)
    for name, d in first:
        j = _match(name, d, left)
        assert j is not None, (name, d)
        left.pop(j)


def _assert_same_entries(first: _Entries, second: _Entries) -> None:
    """Each op's declared typed attributes in either list are those of an op of the other (the
    emitter writes equal constants once)."""
    for a, b in ((first, second), (second, first)):
        for name, d in a:
            assert _match(name, d, b) is not None, (name, d)


def test_a_built_programs_instructions_read_back_the_builders_typed_values() -> None:
    comp, _ = _built()
    built = [(o.opcode, _declared(o, o.attrs)) for o in _nodes([comp.graph().root]) if o.opdef.attrs]
    module_graph = import_graph(comp.compiler_ir(), comp.name)  # the module's import (comp walks its own nodes)
    assert not set(map(id, _nodes(list(module_graph.outputs)))) & set(map(id, _nodes([comp.graph().root])))
    imported = [(o.opcode, _declared(o, _typed(o)))
                for o in _nodes(list(module_graph.outputs)) if o.opdef.attrs]
    assert len({n for n, _ in built}) >= 32, sorted({n for n, _ in built})
    assert sum(len(d) for _, d in built) >= 25
    _assert_same_entries(built, imported)


def test_a_loaded_programs_nodes_read_the_built_nodes_typed_values_of_every_kind() -> None:
    """One attribute form (issue 44): built -> StableHLO text -> loaded, each loaded op's declared
    attributes read with :meth:`XlaOp.attr` equal the typed values the built op holds, for every
    kind (dot and convolution dimension numbers, gather/scatter, comparison direction and type,
    precision config, replica groups, channel handles...); each read once, its spelling kept for
    the emitter."""
    comp, _ = _built()
    built_nodes = [o for o in _nodes([comp.graph().root]) if o.opdef.attrs]
    loaded = xs.XlaComputation.from_stablehlo(comp.as_stablehlo_text())
    loaded_nodes = [o for o in _nodes(list(loaded.instruction_graph().outputs)) if o.opdef.attrs]
    assert not set(map(id, loaded_nodes)) & set(map(id, built_nodes))
    # (StableHLO's printer leaves out a false flag: ``lower = false``; compared where both hold it)
    built = [(o.opcode, {k: o.attr(k) for k in _declared(o, o.attrs) if o.attr(k) is not False}) for o in built_nodes]
    imported = [(o.opcode, {k: o.attr(k) for k in _declared(o, o.attrs) if o.attr(k) is not False})
                for o in loaded_nodes]
    assert all(o.attr(k) is v for o in built_nodes for k, v in _declared(o, o.attrs).items())  # as stored
    assert {o.opdef.attr_kind(k) for o in built_nodes for k in _declared(o, o.attrs)} == set(AttrKind)
    _assert_same_entries(built, imported)
    for o in loaded_nodes:
        for k in _declared(o, o.attrs):
            assert isinstance(o.attrs[k], MlirAttr)  # the module's spelling, which the emitter writes
            assert o.attr(k) is o.attr(k)  # read on first access, kept
        assert typed_attributes(o) == {k: o.attr(k) if k in _declared(o, o.attrs) else v for k, v in o.attrs.items()}
    assert loaded.with_outputs(list(loaded.instructions())[-1:]).as_stablehlo_text()  # (emits as spelled)


def test_no_tool_reads_attributes_through_a_bridge() -> None:
    """Every module outside :mod:`xlasdk.program` reads a node's attributes with :meth:`XlaOp.attr`
    (source scan): no ``typed_attr`` / ``typed_attributes`` / ``read_attribute`` bridge."""
    root = Path(xs.__file__).resolve().parent
    bridge = re.compile(r"\b(typed_attr|typed_attributes|read_attribute)\b")
    found = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                   if p.relative_to(root).parts[0] != "program" and bridge.search(p.read_text()))
    assert found == []
    assert len(list(root.rglob("*.py"))) > 100  # (the scan saw the package)


def test_a_declared_attribute_that_does_not_fit_its_kind_is_an_error() -> None:
    comp, _ = _built()
    cmp = next(i.op for i in comp.instructions() if i.opcode == "stablehlo.compare")

    def spelled(name: str, text: str) -> XlaOp:  # the compare, with attribute ``name`` spelled ``text``
        return XlaOp(cmp.builder, cmp.opdef, cmp.operands, cmp.shape, {**cmp.attrs, name: MlirAttr(text)}, (),
                     cmp.loc, cmp.extra)

    bad = spelled("comparison_direction", "3 : i64")
    for _ in range(2):  # refused again when read again (the refusal is kept, not the value)
        with pytest.raises(GraphImportError, match="stablehlo.compare: attribute comparison_direction"):
            bad.attr("comparison_direction")
    with pytest.raises(GraphImportError, match="not a comparison_type"):
        spelled("compare_type", "#stablehlo<comparison_direction LT>").attr("compare_type")
    # an undeclared attribute reads as the MLIR bindings read it
    assert spelled("mhlo.whatever", '"x"').attr("mhlo.whatever") == "x"
    assert spelled("mhlo.whatever", "[1 : i32, 2 : i32]").attr("mhlo.whatever") == [1, 2]


@pytest.mark.parametrize("fname", FILES)
def test_dumps_round_trip_typed_attributes(fname: str) -> None:
    """import -> typed graph -> emit -> import: equal typed attributes, the same program."""
    comp = xs.load_computation(DATA / fname)
    graph = comp.instruction_graph()
    first: list[tuple[str, dict[str, Any]]] = []
    for o in list(_nodes(list(graph.outputs))):
        typed = _typed(o)
        if o.opdef.attrs:
            first.append((o.opcode, _declared(o, typed)))
        o.attrs = typed  # the graph now holds the builder's typed values
    if not any(d for _, d in first):
        pytest.skip("no declared attribute")
    again = comp.with_outputs(list(graph.outputs))
    second = [(o.opcode, _declared(o, _typed(o)))
              for o in _nodes(list(again.instruction_graph().outputs)) if o.opdef.attrs]
    _assert_same_multiset(first, second)
    # the same program: XLA's HLO text of both modules is the same
    fresh = xs.load_computation(DATA / fname)
    assert again.as_hlo_text() == fresh.with_outputs(list(fresh.instruction_graph().outputs)).as_hlo_text()


def test_the_direct_printer_prints_loaded_gathers_and_scatters_as_xla_does() -> None:
    """Gather, scatter, cholesky, triangular_solve and fft declare every attribute, so the reducer's
    direct printer prints them from
    a loaded module; oracle: XLA's own StableHLO -> HLO converter's program, run on the same inputs."""
    from xlasdk._reduce_graph import direct_hlo_text

    b = xs.XlaBuilder("gs")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(xs.PrimitiveType.F32, (5, 3)), "x")
    at = ops.Parameter(b, 1, xs.Shape.array_shape(xs.PrimitiveType.S32, (2, 1)), "at")
    ga = ops.Gather(x, at, xs.GatherDimensionNumbers(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                                                     index_vector_dim=1), (1, 3))
    sc = ops.Scatter(x, at, ops.Mul(ga, ga), ops.Add,
                     xs.ScatterDimensionNumbers(update_window_dims=[1], inserted_window_dims=[0],
                                                scatter_dims_to_operand_dims=[0], index_vector_dim=1))
    sq = ops.Parameter(b, 2, xs.Shape.array_shape(xs.PrimitiveType.F32, (3, 3)), "sq")
    spd = ops.Add(ops.Mul(sq, sq), ops.Constant(b, np.eye(3, dtype=np.float32) * 3))  # diagonally dominant
    ch = ops.Cholesky(spd, lower=True)
    ts = ops.TriangularSolve(ch, x, left_side=False, lower=True, transpose_a="TRANSPOSE")
    ff = ops.Fft(ops.ConvertElementType(x, xs.PrimitiveType.C64), "FFT", (3,))
    loaded = xs.XlaComputation.from_hlo_text(b.build(ops.Tuple(b, [ga, sc, ch, ts, ff])).as_hlo_text())
    assert any(isinstance(v, MlirAttr) for i in loaded.instructions() for v in i.op.attrs.values())
    text = direct_hlo_text(loaded)
    for hlo in ("gather(", "scatter(", "cholesky(", "triangular-solve(", "fft("):
        assert hlo in text, hlo
    args = [np.arange(15, dtype=np.float32).reshape(5, 3), np.array([[4], [1]], dtype=np.int32),
            np.linspace(-1, 1, 9, dtype=np.float32).reshape(3, 3)]
    got = xs.compile(xs.XlaComputation.from_hlo_text(text))(*args)
    want = xs.compile(loaded)(*args)
    for g, w in zip(got, want, strict=True):
        assert np.asarray(g).tobytes() == np.asarray(w).tobytes()
