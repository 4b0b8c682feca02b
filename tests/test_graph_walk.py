"""The graph walker (:mod:`xlasdk.program.walk`) on small graphs built or loaded here.

Oracle: the node lists written out by hand from the graphs' definitions (which nodes each root
needs, in the order the nodes were made).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops
from xlasdk._optable import PARAMETER
from xlasdk.builder import XlaOp
from xlasdk.program.walk import closure, reachable, users

F32 = xs.Shape.array_shape(np.float32, ())


def _diamond() -> dict[str, XlaOp]:
    """p, q -> a = p + q, n = -a, s = |a|, out = n * s (and a dead node d = -q)."""
    b = xs.XlaBuilder("diamond")
    p = ops.Parameter(b, 0, F32)
    q = ops.Parameter(b, 1, F32)
    a = ops.Add(p, q)
    d = ops.Neg(q)
    n = ops.Neg(a)
    s = ops.Abs(a)
    out = ops.Mul(n, s)
    return {"p": p, "q": q, "a": a, "d": d, "n": n, "s": s, "out": out}


def _names(g: dict[str, XlaOp], nodes: list[XlaOp]) -> list[str]:
    by_id = {o.id: k for k, o in g.items()}
    return [by_id[o.id] for o in nodes]


def test_reachable_lists_what_the_roots_need_in_creation_order() -> None:
    g = _diamond()
    assert _names(g, reachable([g["out"]])) == ["p", "q", "a", "n", "s", "out"]
    # several roots, in any order, each node once; the dead node only when asked for
    assert _names(g, reachable([g["s"], g["d"], g["n"]])) == ["p", "q", "a", "d", "n", "s"]
    assert _names(g, reachable([g["n"], g["n"]])) == ["p", "q", "a", "n"]
    assert reachable([]) == []


def test_reachable_stops_at_what_stop_names() -> None:
    g = _diamond()
    no_params = reachable([g["out"]], stop=lambda o: o.opdef is PARAMETER)
    assert _names(g, no_params) == ["a", "n", "s", "out"]
    # nodes already evaluated: neither listed nor gone past (p and q are not reached through a)
    done = {g["a"].id, g["p"].id}
    assert _names(g, reachable([g["out"], g["d"]], stop=lambda o: o.id in done)) == ["q", "d", "n", "s", "out"]
    # a stopped root is not listed
    assert reachable([g["a"]], stop=lambda o: o.id in done) == []
    # the same with the ids of the nodes done given as such
    assert _names(g, reachable([g["out"], g["d"]], known=done)) == ["q", "d", "n", "s", "out"]
    assert _names(g, reachable([g["out"]], known={g["a"].id: None}, stop=lambda o: o is g["n"])) == ["s", "out"]


def test_reachable_stop_may_refuse_a_node() -> None:
    g = _diamond()

    def known(o: XlaOp) -> bool:
        if o.opdef is PARAMETER:
            raise LookupError(f"parameter {o.extra} has no value")
        return False

    with pytest.raises(LookupError, match="parameter .* has no value"):
        reachable([g["out"]], stop=known)


def test_reachable_walks_a_long_chain_without_recursion() -> None:
    b = xs.XlaBuilder("chain")
    x = ops.Parameter(b, 0, F32)
    chain = [x]
    for _ in range(20000):
        chain.append(ops.Neg(chain[-1]))
    assert reachable([chain[-1]]) == chain


WHILE_MLIR = """\
func.func @main(%arg0: tensor<f32>, %arg1: tensor<i32>) -> tensor<f32> {
  %c = stablehlo.constant dense<2.0> : tensor<f32>
  %m = stablehlo.multiply %arg0, %c : tensor<f32>
  %u = stablehlo.negate %arg0 : tensor<f32>
  %r:2 = stablehlo.while(%i = %arg1, %x = %arg0) : tensor<i32>, tensor<f32>
   cond {
    %k = stablehlo.constant dense<3> : tensor<i32>
    %p = stablehlo.compare LT, %i, %k : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %one : tensor<i32>
    %y = stablehlo.add %x, %m : tensor<f32>
    stablehlo.return %j, %y : tensor<i32>, tensor<f32>
  }
  %o = stablehlo.negate %r#1 : tensor<f32>
  return %o : tensor<f32>
}
"""


def test_reachable_follows_what_a_loop_body_captures(tmp_path: Path) -> None:
    """A while loop whose body reads an outer value (%m) directly: a dependency of the loop only
    with ``regions=True``; the body's own ops are not listed."""
    path = tmp_path / "while.mlir"
    path.write_text(WHILE_MLIR)
    comp = xs.load_computation(path)
    graph = comp.instruction_graph()
    ins = {i.name: i.op for i in comp.instructions()}
    assert list(ins) == ["p0", "p1", "constant.2", "multiply.3", "negate.4", "while.5", "negate.6"]
    (out,) = graph.outputs
    loop = ins["while.5"]
    (gte,) = out.operands  # the loop's second result
    assert gte.operands == (loop,) and gte.opdef is not loop.opdef
    assert reachable([out]) == [ins["p0"], ins["p1"], loop, gte, out]
    assert reachable([out], regions=True) == [
        ins["p0"], ins["p1"], ins["constant.2"], ins["multiply.3"], loop, gte, out]
    assert reachable([out], regions=True, stop=lambda o: o.opdef is PARAMETER) == [
        ins["constant.2"], ins["multiply.3"], loop, gte, out]
    # the captured value already known: not gone past
    assert reachable([out], regions=True, stop=lambda o: o is ins["multiply.3"] or o.opdef is PARAMETER) == [
        loop, gte, out]


def test_reachable_follows_the_values_bound_to_branches() -> None:
    """A built ``if``: its one operand is the predicate, its branches' operands are bindings."""
    b = xs.XlaBuilder("cond")
    p = ops.Parameter(b, 0, F32)
    q = ops.Parameter(b, 1, xs.Shape.array_shape(np.bool_, ()))
    t = ops.Neg(p)
    e = ops.Abs(p)
    c = ops.Conditional(q, t, lambda x: x * 2.0, e, lambda x: x + 1.0)
    out = ops.Neg(c)
    assert c.operands == (q,)
    assert reachable([out]) == [q, c, out]
    assert reachable([out], regions=True) == [p, q, t, e, c, out]


def test_users_lists_each_reader_once_in_the_given_order() -> None:
    g = _diamond()
    g["sq"] = ops.Mul(g["a"], g["a"])  # reads a twice: one use
    nodes = [*reachable([g["out"], g["d"]]), g["sq"]]
    got = {_names(g, [o])[0]: _names(g, us) for o in nodes for us in [users(nodes).get(o.id)] if us}
    assert got == {"p": ["a"], "q": ["a", "d"], "a": ["n", "s", "sq"], "n": ["out"], "s": ["out"]}
    assert users([]) == {}


def test_closure_of_a_relation() -> None:
    reads = {5: [3, 4], 4: [1], 3: [1, 2], 2: [], 1: [0], 6: [5]}

    def step(k: int) -> list[int]:
        return reads.get(k, [])

    assert closure([5], step) == {0, 1, 2, 3, 4, 5}
    assert closure([4, 2], step) == {0, 1, 2, 4}
    assert closure(step(3), step) == {0, 1, 2}  # the start left out
    assert closure([], step) == set()
