"""A built computation is indexed by the record its emitter makes of ``main`` as it writes the
module (:func:`xlasdk.program.origin.index_of_record`), its own nodes wherever the module writes
them as they are.

Oracles: the builder's own nodes (identity: ``instructions()[i].op is`` the node built), and for
every instruction view the module's own import (:func:`xlasdk.program.graph_import.import_graph`
of the emitted, verified module: what ``instructions()`` gave before built programs were indexed
by the emitter), which the record must equal field by field, regions included.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.campaigns import op_calls
from xlasdk import ops
from xlasdk._jaxlib import mlir as _mlir
from xlasdk._jaxlib import mlir_graph as _mg
from xlasdk._mlir_attrs import UNIT, render
from xlasdk._optable import GET_TUPLE_ELEMENT
from xlasdk.attrs import ComparisonDirection, DotDimensionNumbers
from xlasdk.program import graph_import
from xlasdk.program.attr_kinds import MlirAttr
from xlasdk.program.graph_import import InstructionGraph, import_graph, partitioning
from xlasdk.program.origin import Built
from xlasdk.program.static_interface import static_interface
from xlasdk.reference import evaluate

F32 = np.float32


def _shape(dt: Any, dims: tuple[int, ...]) -> xs.Shape:
    return xs.Shape.array_shape(dt, dims)


# -- the programs: each a (builder, what the test builds) pair, with the parameters' arrays -----------------------
def _elementwise() -> xs.XlaComputation:
    b = xs.XlaBuilder("elementwise")
    x = ops.Parameter(b, 0, _shape(F32, (3, 4)), "x")
    y = ops.Parameter(b, 1, _shape(F32, (3, 4)), "y")
    z = ops.Select(ops.Lt(x, y), ops.Exp(x), ops.Tanh(y))
    ops.Add(ops.Mul(z, ops.Constant(b, np.float32(2.5))), ops.Neg(x))
    return b.build()


def _dot_and_reduce() -> xs.XlaComputation:
    b = xs.XlaBuilder("dot_reduce")
    x = ops.Parameter(b, 0, _shape(F32, (2, 3, 4)), "x")
    w = ops.Parameter(b, 1, _shape(F32, (4, 5)), "w")
    d = ops.DotGeneral(x, w, DotDimensionNumbers((2,), (0,), (), ()))
    ops.Reduce(b, d, ops.Constant(b, np.float32(0)), lambda a, c: ops.Add(a, c), [1])
    return b.build()


def _sort_pair() -> xs.XlaComputation:
    """A multi-result op (a sort of keys and values) read through get_tuple_element."""
    b = xs.XlaBuilder("sort_pair")
    k = ops.Parameter(b, 0, _shape(F32, (6,)), "k")
    v = ops.Parameter(b, 1, _shape(np.int32, (6,)), "v")
    s = ops.Sort(b, [k, v], dimension=0, is_stable=True)
    ops.Add(ops.GetTupleElement(s, 1), ops.Constant(b, np.int32(1)))
    return b.build()


def _several_results() -> xs.XlaComputation:
    b = xs.XlaBuilder("several")
    x = ops.Parameter(b, 0, _shape(F32, (4,)), "x")
    ops.Tuple(b, [ops.Sin(x), ops.Cos(x), ops.Iota(b, _shape(np.int32, (4,)), 0)])
    return b.build()


def _constants() -> xs.XlaComputation:
    b = xs.XlaBuilder("constants")
    x = ops.Parameter(b, 0, _shape(np.complex64, (3,)), "x")
    c = ops.Constant(b, np.array([1 + 2j, -3j, 0.5], np.complex64))
    i = ops.Constant(b, np.arange(6, dtype=np.int8).reshape(2, 3))
    ops.Tuple(b, [ops.Mul(x, c), ops.Transpose(i, [1, 0]), ops.Constant(b, np.bool_(True))])
    return b.build()


def _windows_and_indexing() -> xs.XlaComputation:
    b = xs.XlaBuilder("windows")
    x = ops.Parameter(b, 0, _shape(F32, (1, 6, 6, 2)), "x")
    k = ops.Parameter(b, 1, _shape(F32, (3, 3, 2, 4)), "k")
    conv = ops.ConvGeneralDilated(x, k, [1, 1], [(1, 1), (1, 1)], dimension_numbers=("NHWC", "HWIO", "NHWC"))
    pooled = ops.ReduceWindow(conv, ops.Constant(b, np.float32(-np.inf)), lambda a, c: ops.Max(a, c),
                              [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    s = ops.DynamicSlice(pooled, [ops.Constant(b, np.int32(0))] * 4, [1, 2, 2, 4])
    ops.Pad(s, ops.Constant(b, np.float32(0)), [(0, 0, 0), (1, 0, 1), (0, 1, 0), (0, 0, 0)])
    return b.build()


def _multi_result_root() -> xs.XlaComputation:
    """A root of several results (the new state and the bits): its parts are the outputs."""
    b = xs.XlaBuilder("rng_root")
    state = ops.Parameter(b, 0, _shape(np.uint64, (2,)), "state")
    ops.RngBitGenerator("THREE_FRY", state, _shape(np.uint32, (2, 5)))
    return b.build()


#: programs whose module writes every node as the builder made it
PROGRAMS: dict[str, Callable[[], xs.XlaComputation]] = {
    "elementwise": _elementwise, "dot_reduce": _dot_and_reduce, "sort_pair": _sort_pair,
    "several": _several_results, "constants": _constants, "windows": _windows_and_indexing,
    "rng_root": _multi_result_root,
}


# -- programs whose module writes some nodes otherwise than the builder made them ------------------
def _tuple_carry() -> xs.XlaComputation:
    b = xs.XlaBuilder("loop")
    x = ops.Parameter(b, 0, _shape(F32, (2,)), "x")
    init = ops.Tuple(b, [ops.Constant(b, np.int32(0)), x])
    out = ops.While(lambda s: ops.Lt(ops.GetTupleElement(s, 0), 3),
                    lambda s: [ops.Add(ops.GetTupleElement(s, 0), 1), ops.Mul(ops.GetTupleElement(s, 1), 2.0)],
                    init)
    ops.GetTupleElement(out, 1)
    return b.build()


def _branches() -> xs.XlaComputation:
    """Both forms of conditional, a tuple operand and branches returning tuples."""
    b = xs.XlaBuilder("branches")
    x = ops.Parameter(b, 0, _shape(F32, (2,)), "x")
    flag = ops.Parameter(b, 1, _shape(np.bool_, ()), "flag")
    idx = ops.Parameter(b, 2, _shape(np.int32, ()), "idx")
    pair = ops.Tuple(b, [x, ops.Neg(x)])
    c1 = ops.Conditional(flag, x, lambda a: ops.Neg(a), pair,
                         lambda t: ops.Add(ops.GetTupleElement(t, 0), ops.GetTupleElement(t, 1)))
    c2 = ops.Conditional(idx, [lambda a: ops.Tuple(a.builder, [ops.Exp(a), a]),
                               lambda a: ops.Tuple(a.builder, [a, a])], [x, x])
    return b.build(ops.Tuple(b, [c1, ops.GetTupleElement(c2, 0), ops.GetTupleElement(c2, 1)]))


def _calls() -> xs.XlaComputation:
    """One computation called twice (written in place each time), its results a tuple."""
    sub = xs.XlaBuilder("fn")
    u = ops.Parameter(sub, 0, _shape(F32, (2,)), "u")
    v = ops.Parameter(sub, 1, _shape(F32, (2,)), "v")
    fn = sub.build(ops.Tuple(sub, [ops.Add(u, v), ops.Mul(u, ops.Constant(sub, np.float32(3)))]))
    b = xs.XlaBuilder("calls")
    x = ops.Parameter(b, 0, _shape(F32, (2,)), "x")
    y = ops.Parameter(b, 1, _shape(F32, (2,)), "y")
    r1 = ops.Call(b, fn, [x, y])
    r2 = ops.Call(b, fn, [ops.GetTupleElement(r1, 0), y])
    return b.build(ops.Sub(ops.GetTupleElement(r2, 1), ops.GetTupleElement(r1, 1)))


def _tuple_parameter() -> xs.XlaComputation:
    b = xs.XlaBuilder("tuple_param")
    t = ops.Parameter(b, 0, xs.Shape.tuple_shape([_shape(F32, (2,)), _shape(np.int32, ())]), "t")
    y = ops.Parameter(b, 1, _shape(F32, (2,)), "y")
    scale = ops.ConvertElementType(ops.GetTupleElement(t, 1), F32)
    return b.build(ops.Add(ops.GetTupleElement(t, 0), ops.Mul(y, scale)))


def _host_callback() -> xs.XlaComputation:
    b = xs.XlaBuilder("host_callback")
    x = ops.Parameter(b, 0, _shape(F32, (2,)), "x")
    cb = ops.HostCallback(lambda a: a * 2, [x], x.shape)
    return b.build(ops.Add(cb, x))


def _dynamic_parameter() -> xs.XlaComputation:
    b = xs.XlaBuilder("dynamic")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(F32, (5,), dynamic_dimensions=[True]), "x")
    return b.build(ops.Add(x, x))


def _padded_dynamic_parameter() -> xs.XlaComputation:
    """The static interface: the dynamic parameter a padded argument and its size."""
    return static_interface(_dynamic_parameter()).computation


def _sharded_parameter() -> xs.XlaComputation:
    """Sharded parameters and no result sharding: the module says the results are replicated."""
    b = xs.XlaBuilder("sharded")
    b.set_sharding(xs.OpSharding(type=xs.OpSharding.Type.OTHER, tile_assignment_dimensions=[2, 1],
                                 tile_assignment_devices=[0, 1]))
    x = ops.Parameter(b, 0, _shape(F32, (4, 2)), "x")
    b.clear_sharding()
    return b.build(ops.Neg(x))


def _loop_in_a_branch() -> xs.XlaComputation:
    b = xs.XlaBuilder("nested")
    x = ops.Parameter(b, 0, _shape(F32, (3,)), "x")
    flag = ops.Parameter(b, 1, _shape(np.bool_, ()), "flag")

    def branch(a: xs.XlaOp) -> xs.XlaOp:
        carry = ops.Tuple(a.builder, [ops.Constant(a.builder, np.int32(0)), a])
        loop = ops.While(lambda i, c: ops.Lt(i, 3), lambda i, c: [ops.Add(i, 1), ops.Add(c, c)], carry)
        return ops.GetTupleElement(loop, 1)

    return b.build(ops.Conditional(flag, x, branch, x, lambda a: ops.Neg(a)))


def _nested_tuple_parameter() -> xs.XlaComputation:
    """A tuple parameter holding a tuple: its get_tuple_element of the inner tuple is one value, a
    tuple (the record once took it for an op of two results: KeyError)."""
    b = xs.XlaBuilder("nested_tuple_param")
    inner = xs.Shape.tuple_shape([_shape(F32, (3,)), _shape(np.int32, ())])
    t = ops.Parameter(b, 0, xs.Shape.tuple_shape([_shape(F32, (2,)), inner]), "t")
    c = ops.GetTupleElement(ops.GetTupleElement(t, 1), 0)
    return b.build(ops.Tuple(b, [ops.Neg(ops.GetTupleElement(t, 0)), ops.Neg(c)]))


def _tuple_parameter_returned() -> xs.XlaComputation:
    b = xs.XlaBuilder("tuple_root")
    ops.Parameter(b, 0, xs.Shape.tuple_shape([_shape(F32, (2,)), _shape(np.int32, ())]), "t")
    return b.build()


#: programs holding what their module writes otherwise (tuples, calls, host callbacks, dynamic parameters)
WRITTEN_OTHERWISE: dict[str, Callable[[], xs.XlaComputation]] = {
    "tuple_carry": _tuple_carry, "branches": _branches, "calls": _calls, "tuple_param": _tuple_parameter,
    "host_callback": _host_callback, "dynamic": _dynamic_parameter, "padded": _padded_dynamic_parameter,
    "sharded": _sharded_parameter, "loop_in_branch": _loop_in_a_branch, "tuple_root": _tuple_parameter_returned,
    "nested_tuple_param": _nested_tuple_parameter,
}
EVERY = {**PROGRAMS, **WRITTEN_OTHERWISE}


def _imported(comp: xs.XlaComputation) -> InstructionGraph:
    return import_graph(comp.compiler_ir(), comp.name)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.asarray(a).dtype == np.asarray(b).dtype and np.array_equal(a, b, equal_nan=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return bool(a == b)


def _text(v: Any) -> str:
    """An attribute's MLIR text as the bindings print it (a built node's typed value rendered first)."""
    return v.text if isinstance(v, MlirAttr) else _mg.attribute_text("unit" if v is UNIT else render(v))


def _same_node(x: xs.XlaOp, y: xs.XlaOp, pairs: dict[int, int]) -> None:
    """``x`` (the record's) and ``y`` (the import's) are the same op, down through their operands
    and regions (each node of one paired with one node of the other)."""
    if x.id in pairs:
        assert pairs[x.id] == y.id, (x, y)
        return
    pairs[x.id] = y.id
    assert (x.opcode, x.shape, x.opdef.tuple_result) == (y.opcode, y.shape, y.opdef.tuple_result), (x, y)
    assert {k: _text(v) for k, v in x.attrs.items()} == {k: _text(v) for k, v in y.attrs.items()}, (x, y)
    if x.opcode == "parameter":
        assert x.extra[0] == y.extra[0], (x, y)
    if x.opcode == "get_tuple_element":
        assert x.extra == y.extra, (x, y)
    assert len(x.operands) == len(y.operands) and len(x.regions) == len(y.regions), (x, y)
    for a, c in zip(x.operands, y.operands, strict=True):
        _same_node(a, c, pairs)
    for r, q in zip(x.regions, y.regions, strict=True):
        assert r.bindings is None and r.terminator == q.terminator
        for mine, theirs in ((r.params, q.params), (r.captures, q.captures), (r.results, q.results),
                             (r.effects, q.effects)):
            assert len(mine) == len(theirs), (x, r, q)
            for a, c in zip(mine, theirs, strict=True):
                _same_node(a, c, pairs)


@pytest.mark.parametrize("make", EVERY.values(), ids=list(EVERY))
def test_a_built_program_is_indexed_as_its_module_would_be(make: Callable[[], xs.XlaComputation]) -> None:
    _assert_indexed_as_imported(make())


def _assert_indexed_as_imported(comp: xs.XlaComputation) -> None:
    """``comp``'s index (its emitter's record) is its module's import: every instruction view,
    and every node, regions included."""
    direct = comp.instruction_graph()
    ref = _imported(comp)
    assert [i.name for i in direct.instructions] == [i.name for i in ref.instructions]
    for x, y in zip(direct.instructions, ref.instructions, strict=True):
        assert (x.opcode, x.hlo_opcode, x.shape, x.is_opaque) == (y.opcode, y.hlo_opcode, y.shape, y.is_opaque), x
        assert [o.index for o in x.operands] == [o.index for o in y.operands], x
        assert x.operand_indices == y.operand_indices, x
        assert [u.index for u in x.users] == [u.index for u in y.users], x
        assert _same(x.attributes, y.attributes), (x, x.attributes, y.attributes)
        assert x.attribute_text == y.attribute_text, x
        # (a parameter's location is where it was built: the module has its name; an op the emitter
        # adds has none, where the parser gives it the module text's line)
        if x.opcode != "parameter" and x.location != "loc(unknown)":
            assert (x.location, x.metadata) == (y.location, y.metadata), x
        assert (x.op.id in direct.parts) == (y.op.id in ref.parts), x
    assert [direct.instruction_of(o).index for o in direct.outputs] == [ref.instruction_of(o).index
                                                                        for o in ref.outputs]
    assert partitioning(direct) == partitioning(ref)
    pairs: dict[int, int] = {}  # the whole graph, regions included, node for node
    for a, c in zip([*direct.params, *(i.op for i in direct.instructions), *direct.outputs, *direct.effects],
                    [*ref.params, *(i.op for i in ref.instructions), *ref.outputs, *ref.effects], strict=True):
        _same_node(a, c, pairs)
    for i, j in zip(direct.instructions, ref.instructions, strict=True):
        for a, c in zip(direct.parts.get(i.op.id, ()), ref.parts.get(j.op.id, ()), strict=True):
            _same_node(a, c, pairs)


def test_the_comparison_with_the_import_can_fail() -> None:
    """A node changed after its module was written no longer matches the module's import."""
    comp = _elementwise()
    _assert_indexed_as_imported(comp)
    (lt,) = [i.op for i in comp.instructions() if i.opcode == "stablehlo.compare"]
    lt.attrs["comparison_direction"] = ComparisonDirection.GT  # (the module says LT)
    with pytest.raises(AssertionError):
        _assert_indexed_as_imported(comp)


def test_every_public_ops_programs_are_indexed_as_their_modules_would_be() -> None:
    """The op-call campaign's templates (one valid call per public op of ``xlasdk.ops``, four
    draws each): every distinct program's record is its module's import."""
    seen: set[str] = set()
    wrong: list[str] = []
    for name in sorted(op_calls.TEMPLATES):
        for draw in range(4):
            c = op_calls.Ctx(name, random.Random(draw))
            try:
                args, kwargs = op_calls.TEMPLATES[name](c)
                result = getattr(ops, name)(*args, **kwargs)
            except xs.XlaSdkError:  # a draw the op refuses (the campaign's own business)
                continue
            if not op_calls._holds_ops(result):  # a plain function (ApproxTopKReductionOutputSize)
                break
            comp = op_calls._root(result)[0].build(op_calls._root(result)[1])
            text = comp.as_stablehlo_text()
            if text in seen:
                continue
            seen.add(text)
            try:
                _assert_indexed_as_imported(comp)
            except AssertionError as e:
                wrong.append(f"{name} (draw {draw}): {e}")
    assert len(seen) >= 150, len(seen)  # (184 with jaxlib 0.10.2 and 0.12.1)
    assert not wrong, "\n".join(wrong)


@pytest.fixture
def no_module_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parsing or importing a module fails the test: a built program is indexed without either."""
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a module was parsed or imported")

    monkeypatch.setattr(_mlir, "parse_module", refused)
    monkeypatch.setattr(graph_import, "import_graph", refused)


@pytest.mark.parametrize("make", PROGRAMS.values(), ids=list(PROGRAMS))
def test_the_instructions_are_the_nodes_the_builder_made(make: Callable[[], xs.XlaComputation],
                                                         no_module_read: None) -> None:
    comp = make()
    g = comp.graph()
    instrs = comp.instructions()
    outputs = list(g.root.operands) if g.root.opcode == "tuple" else [g.root]
    assert [i.op for i in instrs[: len(g.parameters)]] == list(g.parameters)
    assert all(i.op is p for i, p in zip(instrs, g.parameters, strict=False))
    assert [comp.instruction_graph().instruction_of(o).op for o in outputs] == outputs
    if g.root.opcode != "tuple":
        assert instrs[-1].op is g.root
    assert isinstance(comp.origin, Built) and comp.origin.emitted  # the emitter's record: no module parsed


def test_a_multi_result_ops_get_tuple_elements_are_its_parts() -> None:
    comp = _sort_pair()
    g = comp.graph()
    gte = g.root.operands[0]
    assert gte.opdef is GET_TUPLE_ELEMENT
    sort = comp.instruction_graph().instruction_of(gte)
    assert sort.opcode == "stablehlo.sort" and sort.op is gte.operands[0]
    assert sort.result(1) is gte  # the node the program reads, not a copy
    assert sort.result(0).operands[0] is sort.op and sort.result(0).extra == 0  # the result no node reads
    assert [i.opcode for i in comp.instructions()].count("get_tuple_element") == 0
    assert comp.instructions()[-1].operand_indices == (1, None)


def test_typed_attributes_on_the_nodes_and_the_public_views_unchanged() -> None:
    comp = _dot_and_reduce()
    (dot,) = [i for i in comp.instructions() if i.opcode == "stablehlo.dot_general"]
    assert isinstance(dot.op.attrs["dot_dimension_numbers"], DotDimensionNumbers)  # the value the wrapper stored
    assert dot.attributes["dot_dimension_numbers"]["lhs_contracting_dimensions"] == (2,)
    assert dot.attribute_text["dot_dimension_numbers"].startswith("#stablehlo.dot<")


def test_the_evaluator_walks_the_built_nodes_and_gives_the_same_values(monkeypatch: pytest.MonkeyPatch) -> None:
    comp = _windows_and_indexing()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 6, 6, 2)).astype(F32)
    k = rng.standard_normal((3, 3, 2, 4)).astype(F32)
    with monkeypatch.context() as m:
        m.setattr(graph_import, "import_graph", lambda *a, **k: pytest.fail("the built program's module was imported"))
        got = evaluate(comp, x, k)
    loaded = xs.XlaComputation.from_stablehlo(comp.as_stablehlo_text())  # the same program, indexed by import
    want = evaluate(loaded, x, k)
    assert len(got) == len(want) == 1
    np.testing.assert_array_equal(got[0], want[0])
    # an independent oracle for the padding: rows 0 (low) and 2 (interior) and column 2 (high) are zero
    out = got[0]
    assert out.shape == (1, 4, 3, 4)
    assert np.all(out[0, 0] == 0) and np.all(out[0, 2] == 0) and np.all(out[0, :, 2] == 0)
    assert np.all(out[0, 1, :2] != 0)


def test_a_tuple_carry_is_indexed_as_the_module_writes_it(no_module_read: None) -> None:
    comp = _tuple_carry()
    instrs = comp.instructions()
    assert "tuple" not in [i.opcode for i in instrs]  # the module's instructions: the carry is two operands
    (w,) = [i for i in instrs if i.opcode == "stablehlo.while"]
    assert len(w.operands) == 2
    np.testing.assert_array_equal(evaluate(comp, np.array([1, -2], F32))[0], np.array([8, -16], F32))


def test_a_programs_own_nodes_find_their_instructions_where_its_module_is_indexed() -> None:
    """A loop with a tuple carry is indexed as its module writes it (the carry as two operands);
    the nodes the user built still name its instructions (instruction_of, with_outputs, extract):
    each the op the emitter wrote for it."""
    b = xs.XlaBuilder("loop_nodes")
    x = ops.Parameter(b, 0, _shape(F32, (3,)), "x")
    carry = ops.Tuple(b, [ops.Constant(b, np.int32(0)), x])
    loop = ops.While(lambda i, a: ops.Lt(i, 4), lambda i, a: [ops.Add(i, 1), ops.Mul(a, 2.0)], carry)
    scaled = ops.GetTupleElement(loop, 1)
    root = ops.Neg(scaled)
    comp = b.build()
    g = comp.instruction_graph()
    assert g.instruction_of(root) is comp.instructions()[-1]
    assert g.instruction_of(x).name == "x" and g.instruction_of(loop).opcode == "stablehlo.while"
    assert g.instruction_of(scaled) is g.instruction_of(loop)
    assert g.instruction_of(ops.GetTupleElement(carry, 1)).name == "x"  # a tuple's element
    with pytest.raises(xs.XlaSdkError, match="is a tuple, whose elements are instructions"):
        g.instruction_of(carry)
    edited = comp.with_outputs([root, scaled, x])
    xv = np.array([1, -2, 0.5], F32)
    got = evaluate(edited, xv)
    for k, want in enumerate([-16 * xv, 16 * xv, xv]):  # oracle: four doublings
        np.testing.assert_array_equal(got[k], want.astype(F32))
    with pytest.raises(xs.XlaSdkError, match="has 2 results"):
        comp.with_outputs([loop])


def test_negative_instruction_indices_count_from_the_end() -> None:
    comp = _elementwise()
    assert comp.instruction(-1) is comp.instructions()[-1]
    assert comp.instruction(-len(comp.instructions())).name == "x"
    with pytest.raises(xs.XlaSdkError, match="out of range"):
        comp.instruction(-len(comp.instructions()) - 1)


def test_a_builder_edit_after_build_does_not_change_the_built_program() -> None:
    b = xs.XlaBuilder("edit")
    x = ops.Parameter(b, 0, _shape(F32, (2,)), "x")
    y = ops.Exp(x)
    comp = b.build(y)
    before = [(i.name, i.opcode) for i in comp.instructions()]
    ops.Neg(y)  # the builder goes on; the computation's root stays y
    assert [(i.name, i.opcode) for i in comp.instructions()] == before
    assert [(i.name, i.opcode) for i in b.build(y).instructions()] == before


def test_a_parameter_name_with_quotes_and_backslashes_reads_back_as_given() -> None:
    # the importer once kept MLIR's escapes (in \22q\22) in the names of a loaded module's parameters
    b = xs.XlaBuilder("names")
    name = 'in "q"\\n'
    x = ops.Parameter(b, 0, _shape(F32, (2,)), name)
    built = b.build(ops.Exp(x))
    loaded = xs.XlaComputation.from_stablehlo(built.as_stablehlo_text(debug_info=True))
    for comp in (built, loaded):
        assert comp.instructions()[0].name == name == comp.program_shape().parameter_names()[0]
