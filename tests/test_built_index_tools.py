"""Every kind of built program is indexed by its emitter's record, never by importing its module
(issue 44 step 3), and the tools that walk the index give the right values.

The programs hold what their modules write otherwise than the builder made them: a tuple carried
into a loop, branches taking and returning tuples, a computation called twice (written in place),
a tuple-shaped parameter, a host callback (written with its index), a dynamic parameter (as is,
and padded with its size by the static interface), sharded parameters (results written
replicated), a loop inside a branch. Each goes through the tools that read its index (the
instruction views, the reference evaluator, ``compare`` and its op bisection, ``input_ranges``,
``with_outputs``) while importing a built program's module fails the test.

Oracles: numpy (each value computed in f32 as the program does), the counts written out by hand
from each program's definition, and the module's text (what the emitter wrote).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.test_built_index import _branches
from xlasdk import ops
from xlasdk.inputs import input_ranges
from xlasdk.program import graph_import
from xlasdk.program.origin import Built, Origin
from xlasdk.program.static_interface import static_interface

F32 = np.float32


def _shape(dt: Any, dims: tuple[int, ...]) -> xs.Shape:
    return xs.Shape.array_shape(dt, dims)


@pytest.fixture(autouse=True)
def built_modules_are_not_imported(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Importing the module of a built program (the old road: emit, parse, import, pair) fails the
    test; the modules of programs edited from it (``with_outputs``) may be imported. Yields the
    names of the modules imported."""
    built: dict[int, Any] = {}  # id -> the module (kept: the id of a module gone could name another)
    imported: list[str] = []
    module, import_graph = Origin.module, graph_import.import_graph

    def built_module(self: Origin, name: str) -> Any:
        got = module(self, name)
        if isinstance(self, Built):
            built[id(got)] = got
        return got

    def guarded(mod: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        if id(mod) in built:
            raise AssertionError(f"the module of built program {name!r} was imported")
        imported.append(name)
        return import_graph(mod, name, *args, **kwargs)

    monkeypatch.setattr(Origin, "module", built_module)
    monkeypatch.setattr(graph_import, "import_graph", guarded)
    yield imported


def _opcodes(comp: xs.XlaComputation) -> list[str]:
    return [i.opcode for i in comp.instructions()]


def test_a_tuple_carry() -> None:
    b = xs.XlaBuilder("loop")
    x = ops.Parameter(b, 0, _shape(F32, (3,)), "x")
    carry = ops.Tuple(b, [ops.Constant(b, np.int32(0)), x])
    loop = ops.While(lambda i, a: ops.Lt(i, 3), lambda i, a: [ops.Add(i, 1), ops.Mul(a, 2.0)], carry)
    scaled = ops.GetTupleElement(loop, 1)
    comp = b.build(ops.Neg(scaled))
    assert _opcodes(comp) == ["parameter", "stablehlo.constant", "stablehlo.while", "stablehlo.negate"]
    (w,) = [i for i in comp.instructions() if i.opcode == "stablehlo.while"]
    assert len(w.operands) == 2 and len(w.op.regions[1].params) == 2  # the carry as its two elements
    xv = np.array([1, -2, 0.5], F32)
    np.testing.assert_array_equal(xs.evaluate(comp, xv)[0], -8 * xv)  # three doublings
    assert xs.compare(comp, [xv]).ok
    got = xs.evaluate(comp.with_outputs([scaled, x]), xv)
    np.testing.assert_array_equal(got[0], 8 * xv)
    np.testing.assert_array_equal(got[1], xv)
    assert comp.instruction_graph().instruction_of(scaled) is w


@pytest.mark.parametrize(("flag", "idx"), [(True, 0), (False, 1), (True, 5)])
def test_branches_taking_and_returning_tuples(flag: bool, idx: int) -> None:
    comp = _branches()  # both forms of conditional, a tuple operand, branches returning tuples
    assert _opcodes(comp).count("stablehlo.case") + _opcodes(comp).count("stablehlo.if") == 2
    xv = np.array([0.5, -2], F32)
    args = [xv, np.bool_(flag), np.int32(idx)]
    want = [-xv if flag else xv + -xv, np.exp(xv) if idx == 0 else xv, xv]  # an index out of range: the last branch
    got = xs.evaluate(comp, *args)
    assert len(got) == 3
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    assert xs.compare(comp, args).ok


def test_a_computation_called_twice() -> None:
    sub = xs.XlaBuilder("fn")
    u = ops.Parameter(sub, 0, _shape(F32, (2,)), "u")
    v = ops.Parameter(sub, 1, _shape(F32, (2,)), "v")
    fn = sub.build(ops.Tuple(sub, [ops.Add(u, v), ops.Mul(u, ops.Constant(sub, np.float32(3)))]))
    b = xs.XlaBuilder("calls")
    x = ops.Parameter(b, 0, _shape(F32, (2,)), "x")
    y = ops.Parameter(b, 1, _shape(F32, (2,)), "y")
    r1 = ops.Call(b, fn, [x, y])
    r2 = ops.Call(b, fn, [ops.GetTupleElement(r1, 0), y])
    first = ops.GetTupleElement(r1, 1)
    comp = b.build(ops.Sub(ops.GetTupleElement(r2, 1), first))
    # each call written in place: its add, constant and multiply twice, then the subtract
    assert _opcodes(comp)[2:] == ["stablehlo.add", "stablehlo.constant", "stablehlo.multiply"] * 2 + [
        "stablehlo.subtract"]
    xv, yv = np.array([1, -2], F32), np.array([3, 0.25], F32)
    three = F32(3)
    np.testing.assert_array_equal(xs.evaluate(comp, xv, yv)[0], three * (xv + yv) - three * xv)
    assert xs.compare(comp, [xv, yv]).ok
    assert comp.instruction_graph().instruction_of(first).opcode == "stablehlo.multiply"  # the first call's
    np.testing.assert_array_equal(xs.evaluate(comp.with_outputs([first]), xv, yv)[0], three * xv)


def test_a_tuple_parameter() -> None:
    b = xs.XlaBuilder("tuple_param")
    t = ops.Parameter(b, 0, xs.Shape.tuple_shape([_shape(F32, (2,)), _shape(np.int32, ())]), "t")
    y = ops.Parameter(b, 1, _shape(F32, (2,)), "y")
    scale = ops.ConvertElementType(ops.GetTupleElement(t, 1), F32)
    comp = b.build(ops.Add(ops.GetTupleElement(t, 0), ops.Mul(y, scale)))
    instrs = comp.instructions()
    assert [i.name for i in instrs[:2]] == ["t", "y"] and instrs[0].shape.is_tuple()
    gtes = [i for i in instrs if i.opcode == "stablehlo.get_tuple_element"]  # the module unpacks it
    assert sorted(i.attributes["index"] for i in gtes) == [0, 1] and all(i.operands == (instrs[0],) for i in gtes)
    assert comp.instruction_graph().instruction_of(scale).operands[0] in gtes
    assert len(input_ranges(comp)) == 2


def test_a_host_callback() -> None:
    b = xs.XlaBuilder("host_callback")
    x = ops.Parameter(b, 0, _shape(F32, (2,)), "x")
    cb = ops.HostCallback(lambda a: a * 2, [x], x.shape)
    comp = b.build(ops.Add(cb, x))
    (call,) = [i for i in comp.instructions() if i.opcode == "stablehlo.custom_call"]
    assert call.attributes["backend_config"] == {"index": 0}  # the index the module was compiled with
    assert "index = 0 : ui64" in call.attribute_text["backend_config"]
    assert comp.instruction_graph().instruction_of(cb) is call
    xv = np.array([1, -2], F32)
    np.testing.assert_array_equal(xs.compile(comp)(xv).to_numpy(), 3 * xv)
    assert len(input_ranges(comp)) == 1


def _dynamic() -> xs.XlaComputation:
    b = xs.XlaBuilder("dynamic")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(F32, (5,), dynamic_dimensions=[True]), "x")
    return b.build(ops.Add(x, x))


def test_a_dynamic_parameter() -> None:
    comp = _dynamic()
    assert [(i.name, str(i.shape)) for i in comp.instructions()] == [("x", "f32[<=5]"), ("add.1", "f32[<=5]")]
    np.testing.assert_array_equal(xs.compile(comp)(np.array([1, 2], F32)).to_numpy(), [2, 4])


def test_a_dynamic_parameter_padded_with_its_size() -> None:
    comp = static_interface(_dynamic()).computation
    assert [(i.name, i.opcode, str(i.shape)) for i in comp.instructions()] == [
        ("x", "parameter", "f32[5]"), ("x_size0", "parameter", "s32[]"),
        ("set_dimension_size.2", "stablehlo.set_dimension_size", "f32[<=5]"),
        ("add.3", "stablehlo.add", "f32[<=5]"),
        ("get_dimension_size.4", "stablehlo.get_dimension_size", "s32[]")]  # the result's size, an output
    ranges = input_ranges(comp)
    assert ranges[1].index_max == 5 and ranges[0].index_max is None  # the size: at most the bound
    out, size = xs.compile(comp)(np.array([1, 2, 0, 0, 0], F32), np.int32(2))
    assert int(size.to_numpy()) == 2
    np.testing.assert_array_equal(out.to_numpy()[:2], [2, 4])


def test_sharded_parameters_and_replicated_results() -> None:
    b = xs.XlaBuilder("sharded")
    b.set_sharding(xs.OpSharding(type=xs.OpSharding.Type.OTHER, tile_assignment_dimensions=[2, 1],
                                 tile_assignment_devices=[0, 1]))
    x = ops.Parameter(b, 0, _shape(F32, (4, 2)), "x")
    b.clear_sharding()
    comp = b.build(ops.Neg(x))
    part = comp.partitioning()
    assert part.parameter_shardings == ("{devices=[2,1]0,1}",)
    assert part.result_shardings == ("{replicated}",)  # as the module writes them
    assert "mhlo.sharding = \"{replicated}\"" in comp.as_stablehlo_text()
    xv = np.arange(8, dtype=F32).reshape(4, 2)
    np.testing.assert_array_equal(xs.evaluate(comp, xv)[0], -xv)


@pytest.mark.parametrize("flag", [True, False])
def test_a_loop_in_a_branch(flag: bool) -> None:
    b = xs.XlaBuilder("nested")
    x = ops.Parameter(b, 0, _shape(F32, (3,)), "x")
    f = ops.Parameter(b, 1, _shape(np.bool_, ()), "flag")

    def branch(a: xs.XlaOp) -> xs.XlaOp:
        carry = ops.Tuple(a.builder, [ops.Constant(a.builder, np.int32(0)), a])
        loop = ops.While(lambda i, c: ops.Lt(i, 3), lambda i, c: [ops.Add(i, 1), ops.Add(c, c)], carry)
        return ops.GetTupleElement(loop, 1)

    comp = b.build(ops.Conditional(f, x, branch, x, lambda a: ops.Neg(a)))
    xv = np.array([1, -2, 0.25], F32)
    np.testing.assert_array_equal(xs.evaluate(comp, xv, np.bool_(flag))[0], 8 * xv if flag else -xv)
    assert xs.compare(comp, [xv, np.bool_(flag)]).ok


def test_bisect_ops_through_a_call_and_a_tuple_carry() -> None:
    """log(exp(p)) (XLA:CPU's algebraic simplifier folds it to p, which is wrong where exp
    overflows) written in place from a called computation, beside a loop with a tuple carry."""
    sub = xs.XlaBuilder("log_exp")
    u = ops.Parameter(sub, 0, _shape(F32, (3,)), "u")
    fn = sub.build(ops.Log(ops.Exp(u)))  # the culprit's line
    b = xs.XlaBuilder("called")
    p = ops.Parameter(b, 0, _shape(F32, (3,)), "p")
    carry = ops.Tuple(b, [ops.Constant(b, np.int32(0)), p])
    loop = ops.While(lambda i, a: ops.Lt(i, 2), lambda i, a: [ops.Add(i, 1), ops.Neg(a)], carry)
    pair = ops.Tuple(b, [p, ops.Neg(p)])
    comp = b.build(ops.Tuple(b, [ops.Call(b, fn, [ops.GetTupleElement(pair, 0)]), ops.GetTupleElement(loop, 1)]))
    a = np.array([1, 100, -200], F32)
    with np.errstate(all="ignore"):  # numpy, each op rounded to f32: exp(100) is inf, exp(-200) is 0
        want = np.log(np.exp(a.astype(np.float64)).astype(F32).astype(np.float64)).astype(F32)
    got = xs.evaluate(comp, a)
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], a)  # negated twice
    report = xs.compare(comp, [a], bisect="ops")
    if report.ok:  # an XLA that computes it right
        return
    bo = report.bisect_ops
    (log,) = [i for i in comp.instructions() if i.opcode == "stablehlo.log"]
    assert bo.status == "localised" and bo.culprit is not None and bo.culprit.name == log.name, str(bo)
    assert bo.culprit.source.endswith(f"test_built_index_tools.py:{_line_of('the culprit')}"), bo.culprit.source


def _line_of(text: str) -> int:
    with open(__file__, encoding="utf-8") as f:
        return next(i for i, ln in enumerate(f, 1) if text in ln and "sub.build" in ln)


def test_the_guard_fails_a_built_programs_import() -> None:
    """The guard of this module's tests can fail: importing a built program's module is refused."""
    b = xs.XlaBuilder("guarded")
    comp = b.build(ops.Neg(ops.Parameter(b, 0, _shape(F32, (2,)), "x")))
    with pytest.raises(AssertionError, match="module of built program 'guarded' was imported"):
        graph_import.import_graph(comp.compiler_ir(), comp.name)
