"""Reference rules bound to the op table (every row has a rule or a refusal, bound once to the row),
and checked against independent oracles: the CHLO ops JAX emits (jnp.sinh,
jnp.arccosh, jax.scipy.special.digamma, jnp.nextafter, ...) against Python's math module and scipy,
and each program as JAX (a test-only peer) lowers it against XLA:CPU under ``xs.compare``; sort
(the comparator evaluated on every pair at once) against numpy's stable sorts."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xlasdk as xs

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jss = pytest.importorskip("jax.scipy.special")
scipy_special = pytest.importorskip("scipy.special")

X = np.array([-2.5, -0.75, -0.1, 0.0, 0.3, 0.9, 1.7, 4.0], np.float32)
UNIT = np.array([-0.99, -0.5, -1e-3, 0.0, 0.25, 0.6, 0.9, 0.999], np.float32)
ABOVE_ONE = np.array([1.0, 1.001, 1.5, 2.0, 3.7, 10.0, 100.0, 1e4], np.float32)
GAMMA = np.array([-2.5, -0.5, 0.1, 0.5, 1.0, 2.5, 7.25, 30.0], np.float32)

CASES: list[tuple[str, Callable[..., Any], str, np.ndarray[Any, Any], Callable[[float], float]]] = [
    ("sinh", jnp.sinh, "chlo.sinh", X, math.sinh),
    ("cosh", jnp.cosh, "chlo.cosh", X, math.cosh),
    ("arcsinh", jnp.arcsinh, "chlo.asinh", X, math.asinh),
    ("arccosh", jnp.arccosh, "chlo.acosh", ABOVE_ONE, math.acosh),
    ("arctanh", jnp.arctanh, "chlo.atanh", UNIT, math.atanh),
    ("arcsin", jnp.arcsin, "chlo.asin", UNIT, math.asin),
    ("arccos", jnp.arccos, "chlo.acos", UNIT, math.acos),
    ("arctan", jnp.arctan, "chlo.atan", X, math.atan),
    ("square", jnp.square, "chlo.square", X, lambda v: v * v),
    ("lgamma", jss.gammaln, "chlo.lgamma", GAMMA, math.lgamma),
    ("digamma", jss.digamma, "chlo.digamma", GAMMA, lambda v: float(scipy_special.digamma(v))),
    ("i1e", jss.i1e, "chlo.bessel_i1e", X, lambda v: float(scipy_special.i1e(v))),
]


def _lowered(fn: Callable[..., Any], *args: Any) -> xs.XlaComputation:
    return xs.XlaComputation.from_stablehlo(jax.jit(fn).lower(*args).as_text())


def _chlo(opcode: str, n: int) -> xs.XlaComputation:
    """``opcode`` applied to an f32[n] parameter, written in CHLO (JAX decomposes some of these
    itself, differently from release to release)."""
    t = f"tensor<{n}xf32>"
    return xs.XlaComputation.from_stablehlo(
        f"module @m {{\n  func.func public @main(%arg0: {t}) -> {t} {{\n"
        f"    %0 = {opcode} %arg0 : {t} -> {t}\n    return %0 : {t}\n  }}\n}}\n")


@pytest.mark.parametrize(("name", "fn", "opcode", "x", "oracle"), CASES, ids=[c[0] for c in CASES])
def test_chlo_unary_matches_xla_and_the_oracle(name: str, fn: Any, opcode: str, x: np.ndarray[Any, Any],
                                               oracle: Callable[[float], float]) -> None:
    want = np.array([oracle(float(v)) for v in x], np.float64).astype(np.float32)
    comp = _chlo(opcode, x.size)
    assert opcode in {i.opcode for i in comp.instructions()}
    (got,) = xs.evaluate(comp, x)
    np.testing.assert_allclose(got, want, rtol=2e-7, atol=1e-30)
    assert xs.compare(comp, [x]).ok, str(xs.compare(comp, [x]))
    jax_program = _lowered(fn, x)  # as JAX lowers it (CHLO, or its own decomposition)
    report = xs.compare(jax_program, [x])
    assert report.ok, str(report)


def test_next_after_from_the_bits() -> None:
    x = np.array([1.0, 1.0, 0.0, 0.0, -0.0, 3.0, np.inf, np.nan, 2.0], np.float32)
    y = np.array([2.0, 0.0, 1.0, -1.0, 1.0, 3.0, 0.0, 1.0, np.nan], np.float32)
    comp = _lowered(jnp.nextafter, x, y)
    assert "chlo.next_after" in comp.as_stablehlo_text()
    (got,) = xs.evaluate(comp, x, y)
    want = np.nextafter(x, y)  # numpy's, an independent oracle for f32
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    for dt in (jnp.bfloat16, jnp.float16):
        xb = np.array([1.0, -1.0, 0.0, 2.0], dt)
        yb = np.array([2.0, -2.0, -1.0, 2.0], dt)
        (gb,) = xs.evaluate(_lowered(jnp.nextafter, xb, yb), xb, yb)
        spacing = np.array([2.0**-7, 2.0**-7, 0.0, 0.0]) if dt is jnp.bfloat16 else np.array([2.0**-10] * 2 + [0, 0])
        moved = np.abs(gb.astype(np.float64) - xb.astype(np.float64))
        np.testing.assert_array_equal(moved[[0, 1, 3]], spacing[[0, 1, 3]])
        assert gb[2] < 0 and gb[2] > -1e-6  # from 0 toward -1: the smallest negative subnormal of the type


def test_without_scipy_the_op_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from xlasdk.reference import elementwise

    monkeypatch.setattr(elementwise, "_scipy_special", lambda name: None)
    with pytest.raises(xs.UnsupportedOpError, match=r"chlo.bessel_i1e needs scipy .*xlasdk\[reference\]"):
        xs.evaluate(_chlo("chlo.bessel_i1e", 3), np.ones(3, np.float32))


# -- sort: the comparator evaluated on every pair at once -------------------------------------------------------
def test_sort_of_thousands_with_ties_is_stable_and_right() -> None:
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 40, 3000).astype(np.int32)
    comp = _lowered(lambda k: jnp.argsort(k, stable=True), keys)
    (got,) = xs.evaluate(comp, keys)
    np.testing.assert_array_equal(got, np.argsort(keys, kind="stable"))
    x = rng.standard_normal(5000).astype(np.float32)
    x[::5] = x[1]
    x[7] = np.nan
    x[8] = -0.0
    comp = _lowered(jnp.sort, x)
    (got,) = xs.evaluate(comp, x)
    np.testing.assert_array_equal(got, np.sort(x))  # NaN last, as numpy and XLA put it
    assert xs.compare(comp, [x]).ok


def test_sort_with_payloads_descending_rows() -> None:
    rng = np.random.default_rng(4)
    keys = rng.integers(0, 5, (6, 200)).astype(np.int32)
    vals = rng.standard_normal((6, 200)).astype(np.float32)
    fn = lambda k, v: jax.lax.sort((-k, v), dimension=1, num_keys=1, is_stable=True)  # noqa: E731
    comp = _lowered(fn, keys, vals)
    got_k, got_v = xs.evaluate(comp, keys, vals)
    order = np.argsort(-keys, axis=1, kind="stable")
    np.testing.assert_array_equal(got_k, np.take_along_axis(-keys, order, axis=1))
    np.testing.assert_array_equal(got_v, np.take_along_axis(vals, order, axis=1))


def test_sort_with_a_comparator_that_is_no_strict_weak_order_falls_back() -> None:
    """``<=`` puts every element before itself: the pairwise positions are no permutation, and the
    rule sorts pair by pair (on distinct values, as ``<`` would)."""
    x = np.random.default_rng(5).permutation(60).astype(np.float32)
    comp = xs.XlaComputation.from_stablehlo("""module @m {
  func.func public @main(%arg0: tensor<60xf32>) -> tensor<60xf32> {
    %0 = "stablehlo.sort"(%arg0) <{dimension = 0 : i64, is_stable = true}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %1 = stablehlo.compare LE, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    }) : (tensor<60xf32>) -> tensor<60xf32>
    return %0 : tensor<60xf32>
  }
}
""")
    (got,) = xs.evaluate(comp, x)
    np.testing.assert_array_equal(got, np.sort(x))


# -- select_and_scatter: every window at once -------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 9, 9, 3), (2, 32, 32, 8)])
def test_max_pool_gradient_matches_jax(shape: tuple[int, ...]) -> None:
    """The gradient of a 3x3 / stride 2 SAME max pool (JAX lowers it to select_and_scatter), with
    ties in a window (the first maximum in window order takes the gradient)."""
    def grad(x: Any) -> Any:
        pool = lambda v: jax.lax.reduce_window(v, -jnp.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")  # noqa: E731
        return jax.grad(lambda v: (pool(v) * jnp.arange(pool(v).size).reshape(pool(v).shape)).sum())(x)

    x = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    x[0, 0, :3, 0] = 1.0
    comp = _lowered(grad, x)
    assert "select_and_scatter" in comp.as_stablehlo_text()
    (got,) = xs.evaluate(comp, x)
    np.testing.assert_array_equal(got, np.asarray(jax.jit(grad)(x)))


# -- XLA:CPU's TopK custom call (how its optimized HLO spells top_k) --------------------------------------------
def test_topk_custom_call_of_an_optimized_module(tmp_path: Any) -> None:
    x = np.random.default_rng(7).standard_normal((5, 9)).astype(np.float32)
    x[0, :4] = 2.0  # ties: the lower index first
    x[1, 3] = np.nan  # NaN is the largest in total order
    text = jax.jit(lambda v: jax.lax.top_k(v, 3)).lower(x).compile().as_text()
    if 'custom_call_target="TopK"' not in text:
        pytest.skip("this XLA spells top_k otherwise")
    path = tmp_path / "topk_optimized.hlo"
    path.write_text(text)
    comp = xs.load_computation(path)
    values, indices = xs.evaluate(comp, x)
    order = np.argsort(-np.where(np.isnan(x), np.inf, x), axis=1, kind="stable")[:, :3]
    np.testing.assert_array_equal(indices, order)
    np.testing.assert_array_equal(values, np.take_along_axis(x, order, axis=1))
    assert xs.compare(comp, [x]).ok


# -- fft, reduce_precision, map ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["fft", "ifft", "rfft", "irfft", "fft2"])
def test_fft_matches_numpy_and_xla(kind: str) -> None:
    rng = np.random.default_rng(9)
    real = rng.standard_normal((3, 16)).astype(np.float32)
    cplx = (real + 1j * rng.standard_normal((3, 16))).astype(np.complex64)
    fn, x, want = {
        "fft": (jnp.fft.fft, cplx, np.fft.fft(cplx.astype(np.complex128))),
        "ifft": (jnp.fft.ifft, cplx, np.fft.ifft(cplx.astype(np.complex128))),
        "rfft": (jnp.fft.rfft, real, np.fft.rfft(real.astype(np.float64))),
        "irfft": (lambda v: jnp.fft.irfft(v, n=16), cplx[:, :9], np.fft.irfft(cplx[:, :9].astype(np.complex128), n=16)),
        "fft2": (jnp.fft.fft2, cplx, np.fft.fft2(cplx.astype(np.complex128))),
    }[kind]
    comp = _lowered(fn, x)
    assert "stablehlo.fft" in comp.as_stablehlo_text()
    (got,) = xs.evaluate(comp, x)
    np.testing.assert_allclose(got, want.astype(got.dtype), rtol=1e-6, atol=1e-6)
    report = xs.compare(comp, [x])
    assert report.ok, str(report)


def test_reduce_precision_bit_for_bit() -> None:
    x = np.array([1.0, 1.0 + 2**-11, 1.0 + 3 * 2**-11, 65504.0, 65520.0, 1e5, 6e-5, 5e-8, -0.0, -3.3, np.inf,
                  np.nan, 2**-14, 2**-15], np.float32)
    comp = _lowered(lambda v: jax.lax.reduce_precision(v, exponent_bits=5, mantissa_bits=10), x)
    (got,) = xs.evaluate(comp, x)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).astype(np.float32)  # e5m10 is f16's format, but without its subnormals
    want = np.where(np.abs(want) < 2**-14, np.copysign(0.0, x), want).astype(np.float32)
    np.testing.assert_array_equal(got.view(np.uint32)[~np.isnan(x)], want.view(np.uint32)[~np.isnan(x)])
    assert np.isnan(got[np.isnan(x)]).all()
    device = xs.compile(comp, "cpu:0")(x).to_numpy()
    np.testing.assert_array_equal(device.view(np.uint32)[~np.isnan(x)], got.view(np.uint32)[~np.isnan(x)])
    (bf,) = xs.evaluate(_lowered(lambda v: jax.lax.reduce_precision(v, 8, 7), x), x)  # bf16's format
    np.testing.assert_array_equal(bf[~np.isnan(x)], x.astype(jnp.bfloat16).astype(np.float32)[~np.isnan(x)])


def test_map_applies_its_region_element_by_element() -> None:
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    y = np.arange(12, dtype=np.float32).reshape(3, 4)
    comp = xs.XlaComputation.from_stablehlo("""module @m {
  func.func public @main(%a: tensor<3x4xf32>, %b: tensor<3x4xf32>) -> tensor<3x4xf32> {
    %0 = "stablehlo.map"(%a, %b) <{dimensions = array<i64: 0, 1>}> ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %1 = stablehlo.multiply %x, %y : tensor<f32>
      %2 = stablehlo.tanh %1 : tensor<f32>
      stablehlo.return %2 : tensor<f32>
    }) : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    return %0 : tensor<3x4xf32>
  }
}
""")
    (got,) = xs.evaluate(comp, x, y)
    np.testing.assert_allclose(got, np.tanh(x.astype(np.float64) * y).astype(np.float32), rtol=1e-7)
    assert xs.compare(comp, [x, y]).ok


def test_a_jax_program_with_a_typed_rbg_key_and_erf_as_hlo() -> None:
    """HLO of ``jit(lambda k, x: (normal(k), erf(x)))`` with a typed ``rbg`` key: the key passes through
    a ``Sharding`` custom call (a sharding annotation: the value itself on one device), and HLO's
    ``erf`` imports as ``mhlo.erf``. The reference gives JAX's values (the key's bits exactly), and
    compare says match; a Sharding call that changes the shape is refused, not guessed."""
    key = jax.random.key(7, impl="rbg")
    f = jax.jit(lambda k, x: (jax.random.bits(k, (16,), jnp.uint32), jss.erf(x)))
    x = np.linspace(-2.5, 2.5, 16, dtype=np.float32)
    comp = xs.XlaComputation.from_hlo_text(f.lower(key, x).as_text(dialect="hlo"))
    opcodes = {i.opcode for i in comp.instructions()}
    assert {"stablehlo.custom_call", "mhlo.erf"} <= opcodes, opcodes
    bits, erf = (np.asarray(v) for v in f(key, x))
    data = np.asarray(jax.random.key_data(key))
    got = xs.evaluate(comp, data, x)
    np.testing.assert_array_equal(got[0], bits)
    np.testing.assert_allclose(got[1], [math.erf(float(v)) for v in x], rtol=1e-6, atol=1e-7)
    assert xs.compare(comp, [data, x]).ok
    bad = xs.XlaComputation.from_hlo_text(
        'HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n'
        '  ROOT r = f32[2] custom-call(p), custom_call_target="SPMDFullToShardShape", sharding={replicated}\n}\n')
    with pytest.raises(xs.UnsupportedOpError, match="SPMDFullToShardShape"):
        xs.evaluate(bad, np.ones(4, np.float32))


# -- the rules are bound to the op table's rows --------------------------------------------------------------------
def test_every_row_of_the_table_has_an_evaluation_rule_or_a_refusal() -> None:
    """As the shape rules: every row of ``OPS`` binds its evaluation rule (``evaluate``) or says why
    the evaluator refuses it (``no_evaluate``), not both; the public views by name agree."""
    from xlasdk import ops  # noqa: F401 - every family's rows
    from xlasdk._optable import OPS
    from xlasdk.reference import OPAQUE_RULES, REFUSED, RULES

    assert len(OPS) > 100
    neither = sorted(n for n, row in OPS.items() if row.evaluate is None and not row.no_evaluate)
    both = sorted(n for n, row in OPS.items() if row.evaluate is not None and row.no_evaluate)
    assert not neither, f"rows with no evaluation rule and no refusal: {neither}"
    assert not both, f"rows both evaluated and refused: {both}"
    assert {n for n, row in OPS.items() if row.no_evaluate} == set(REFUSED)
    assert {"stablehlo.infeed", "stablehlo.outfeed", "stablehlo.rng"} <= set(REFUSED)
    assert set(RULES) == {n for n, row in OPS.items() if row.evaluate is not None} | set(OPAQUE_RULES)
    assert not set(OPAQUE_RULES) & set(OPS), "an op of the table is bound by name: bind it to its row"
    with pytest.raises(TypeError):
        RULES["stablehlo.add"] = RULES["stablehlo.add"]  # type: ignore[index]


def test_a_rule_lives_in_the_reference_module_of_its_op_family() -> None:
    """``ops/indexing.py``'s gather is evaluated by ``reference/indexing.py`` (the table's own rows by
    the evaluator's core; the batch norms of ops/reduce.py with the linear algebra)."""
    import importlib
    import inspect
    import re

    from xlasdk import ops
    from xlasdk._optable import OPS

    exceptions = {"reduce": {"linalg"}}  # batch norms: computed in reference/linalg.py
    checked = 0
    for family in ("collectives", "control", "conv", "convert", "custom_call", "elementwise", "fft", "indexing",
                   "linalg", "random", "reduce", "shaping", "side_effects", "sort", "sources", "window"):
        module = importlib.import_module(f"xlasdk.ops.{family}")
        mine = "rng" if family == "random" else family
        defined = re.findall(r"^([A-Z_]+) = define\(", inspect.getsource(module), re.M)  # its own rows
        rows = {id(getattr(module, name)) for name in defined}
        if family == "elementwise":
            rows |= {id(u.opdef) for u in [*ops.elementwise.UNARY.values(), *ops.elementwise.BINARY.values()]}
        for row in OPS.values():
            if id(row) not in rows or row.evaluate is None:
                continue
            home = row.evaluate.__module__.rsplit(".", 1)[-1]
            assert home == mine or home in exceptions.get(family, set()), (row.name, row.evaluate.__module__)
            checked += 1
    assert checked > 100


def test_binding_twice_or_binding_what_is_no_row_raises() -> None:
    from xlasdk._optable import OPS, OpDef, bind_evaluation, evaluates, refuse_evaluation
    from xlasdk.ops.indexing import GATHER
    from xlasdk.reference import indexing

    before = GATHER.evaluate
    with pytest.raises(ValueError, match="stablehlo.gather.* already has an evaluation rule"):
        bind_evaluation(GATHER, lambda o, a, ev: None)
    with pytest.raises(ValueError, match="already has an evaluation rule"):
        refuse_evaluation(GATHER, "a second thought")
    with pytest.raises(ValueError, match="stablehlo.rng.* already has a refusal"):
        bind_evaluation(OPS["stablehlo.rng"], lambda o, a, ev: None)
    assert GATHER.evaluate is before is indexing._gather  # unchanged
    stranger = OpDef("stablehlo.gather")  # the same name, but not the table's row (an opaque row)
    for bind in (lambda: bind_evaluation(stranger, before), lambda: refuse_evaluation(stranger, "why"),
                 lambda: evaluates(stranger)(before)):
        with pytest.raises(ValueError, match="binds to a row of the table"):
            bind()
    assert stranger.evaluate is None and stranger.no_evaluate == ""
    with pytest.raises(ValueError, match="needs a reason"):
        refuse_evaluation(OPS["stablehlo.add"], "")


def test_opaque_ops_are_bound_by_name_and_never_a_row_s_name() -> None:
    from xlasdk.reference._walk import evaluates_opaque

    with pytest.raises(ValueError, match="is a row of the op table"):
        evaluates_opaque("stablehlo.add")(lambda o, a, ev: None)
    with pytest.raises(ValueError, match="has a rule already"):
        evaluates_opaque("mhlo.copy")(lambda o, a, ev: None)


def test_an_opaque_row_of_a_table_op_takes_the_row_s_rule_and_refusal() -> None:
    """A loaded module's op whose flags do not fit its table row gets an opaque row of the same
    name: the evaluator takes the table row's rule (or its refusal) by that name."""
    from xlasdk._optable import OpDef
    from xlasdk.reference._walk import rule_of

    class Node:
        def __init__(self, row: OpDef) -> None:
            self.opdef, self.opcode = row, row.name

    assert rule_of(Node(OpDef("stablehlo.add"))) is rule_of(Node(OpDef("stablehlo.add", constant=False)))  # type: ignore[arg-type]
    assert rule_of(Node(OpDef("mhlo.copy"))) is not None  # type: ignore[arg-type]
    assert rule_of(Node(OpDef("stablehlo.rng"))) is None  # type: ignore[arg-type]
    assert rule_of(Node(OpDef("mhlo.unheard_of"))) is None  # type: ignore[arg-type]
