"""XLA:CPU's known wrong values, as JAX programs (issue 19: "On each of the four XLA:CPU wrong values,
built as a small program and as a JAX dump, it reports the divergence, --bisect ops names the op that
introduced it, and --bisect passes names the pass").

Each program is written with jax (a test-only peer), jitted, and its module taken as JAX hands it to
XLA (``jax.jit(f).lower(x).as_text()``: StableHLO, JAX's own op names and source lines). The right
value comes from numpy, each op rounded to f32 as the program's types say; XLA:CPU's value is what
jax itself computes. The built forms of these programs are in ``tests/test_bisect.py``.

The fourth wrong value of the issue, an Exp of a surely-NaN element, is XLA:CPU leaving the output
uninitialized (LLVM proves the value NaN and stores ``poison``): its value changes from run to
run, so the test below checks that ``compare`` never calls it a match, whatever garbage comes, and
that the bisections name the Exp and the pass (``fusion``: unfused, LLVM sees no NaN to fold). The
chain campaign's run-twice check (``tests/campaigns/chains.py``) finds it too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
lax = pytest.importorskip("jax.lax")


def _divide_big(x: Any) -> Any:
    return jnp.exp(x) / jnp.float32(2.0**127) * jnp.float32(2.0**100)


def _log_exp(x: Any) -> Any:
    return jnp.log(jnp.exp(x))


def _max_clamp(x: Any) -> Any:
    lo, hi = jnp.float32(5), jnp.float32(1)  # lo > hi: clamp gives hi, max(hi, lo) gives lo
    return jnp.maximum(lax.clamp(lo, x, hi), lo)


def _numpy_divide_big(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    e = np.exp(a.astype(np.float64)).astype(np.float32)
    q = (e.astype(np.float64) / 2.0**127).astype(np.float32)  # a normal f32 for a in 1..4
    return (q.astype(np.float64) * 2.0**100).astype(np.float32)


def _numpy_log_exp(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    with np.errstate(all="ignore"):
        e = np.exp(a.astype(np.float64)).astype(np.float32)  # exp(100) overflows f32: inf; exp(-200): 0
        return np.log(e.astype(np.float64)).astype(np.float32)


def _numpy_max_clamp(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return np.maximum(np.minimum(np.maximum(a, 5.0), 1.0), 5.0).astype(np.float32)  # XLA's clamp: min(max(x, lo), hi)


CASES = [
    ("divide-by-broadcast-2**127", _divide_big, [1.0, 2.0, 3.0, 4.0], _numpy_divide_big, "stablehlo.divide"),
    ("log-of-exp", _log_exp, [1.0, 100.0, -200.0], _numpy_log_exp, "stablehlo.log"),
    ("max-of-clamp-lo-above-hi", _max_clamp, [0.0, 3.0, 7.0], _numpy_max_clamp, "stablehlo.maximum"),
]


@pytest.mark.parametrize(("name", "fn", "args", "right", "culprit"), CASES, ids=[c[0] for c in CASES])
def test_compare_and_both_bisections_on_the_jax_program(name: str, fn: Any, args: list[float], right: Any,
                                                        culprit: str, tmp_path: Path) -> None:
    a = np.array(args, np.float32)
    want = right(a)
    xla_value = np.asarray(jax.jit(fn)(a))  # what XLA:CPU computes for JAX
    path = tmp_path / f"{name}.mlir"
    path.write_text(jax.jit(fn).lower(a).as_text())
    comp = xs.load_computation(path)
    np.testing.assert_array_equal(xs.evaluate(comp, a)[0], want)  # the reference gives numpy's value
    report = xs.compare(comp, [a], bisect="ops")
    # XLA computes it right (a fold that is off by an ulp, as log(exp(1)) -> 1, is no wrong value): nothing to find
    if np.allclose(xla_value, want, rtol=1e-5, atol=0, equal_nan=True):
        assert report.ok, str(report)
        pytest.skip(f"XLA of jaxlib {xs.jaxlib_version_info().release} computes {name} right")
    assert not report.ok, f"{name}: XLA gives {xla_value}, numpy {want}, and compare says match"
    bo = report.bisect_ops
    (op,) = [i for i in comp.instructions() if i.opcode == culprit]
    assert bo.culprit is not None and bo.culprit.name == op.name, str(bo)
    passes = xs.compare(comp, [a], bisect="passes").bisect_passes
    assert passes.status == "found" and passes.passes == ["algsimp"], str(passes)


def _exp_of_nan(p: Any) -> Any:
    c = (p & ~p).astype(jnp.float32)  # 0, which XLA can prove: log(0 - 1) is NaN for sure
    return jnp.exp(jnp.log(c - jnp.float32(1)))


def _exp_of_nan_built() -> xs.XlaComputation:
    from xlasdk import ops

    b = xs.XlaBuilder("exp_of_nan")
    p = ops.Parameter(b, 0, xs.Shape.array_shape(np.int32, (8,)), "p")
    c = ops.ConvertElementType(ops.And(p, ops.Not(p)), np.float32)
    return b.build(ops.Exp(ops.Log(ops.Sub(c, ops.Broadcast(ops.Constant(b, np.float32(1)), (8,))))))


@pytest.mark.parametrize("form", ["jax", "built"])
def test_exp_of_a_surely_nan_value_left_uninitialized(form: str, tmp_path: Path) -> None:
    p = np.arange(8, dtype=np.int32)
    if form == "jax":
        path = tmp_path / "exp_of_nan.mlir"
        path.write_text(jax.jit(_exp_of_nan).lower(p).as_text())
        comp = xs.load_computation(path)
    else:
        comp = _exp_of_nan_built()
    assert np.isnan(xs.evaluate(comp, p)[0]).all()  # the reference: exp(NaN) is NaN
    exe = xs.compile(comp, cache=None)
    runs = [exe(p).to_numpy() for _ in range(3)]
    if all(np.isnan(r).all() for r in runs):
        report = xs.compare(comp, [p])
        assert report.ok, str(report)
        pytest.skip(f"XLA of jaxlib {xs.jaxlib_version_info().release} computes exp(NaN) as NaN")
    # uninitialized memory: a rare run may hold NaN everywhere by chance; compare runs again
    reports = [xs.compare(comp, [p], bisect="ops") for _ in range(3)]
    diverged = [r for r in reports if not r.ok]
    assert diverged, "compare said match three times on an Exp whose XLA:CPU output is uninitialized"
    report = diverged[0]
    out = report.outputs[0]
    assert out.nonfinite_mismatches == out.mismatches >= 1, str(report)  # NaN against a number, each
    assert f"({out.nonfinite_mismatches} NaN/Inf against a different value)" in str(report)
    (exp,) = [i for i in comp.instructions() if i.opcode == "stablehlo.exponential"]
    bo = report.bisect_ops
    assert bo.culprit is not None and bo.culprit.name == exp.name, str(bo)
    for _ in range(3):  # again past a run whose garbage happens to be NaN
        passes = xs.compare(comp, [p], bisect="passes").bisect_passes
        if passes.status != "no divergence":
            break
    assert passes.status == "found" and passes.passes == ["fusion"], str(passes)
