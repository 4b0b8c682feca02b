"""The rounding-error bounds of ``xs.compare`` against the reference (``error_bounds`` in
``xlasdk/reference/_bounds.py``): followed through called functions (JAX's private functions in
StableHLO, XLA's fusions in optimized HLO) and carried by complex values.

A debugging tool never cries wolf: on correct programs (XLA:CPU computes them right; numpy/scipy
and JAX, a test-only peer, say what the values are) ``compare`` says match, with the default
tolerances. It still finds XLA:CPU's real wrong value (``x / 2**127`` rewritten into a product with
a reciprocal flushed to zero) when the division sits inside a called function, in f32 and c64.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk.reference._bounds import OutputScale, error_bounds
from xlasdk.reference._evaluator import run_reference
from xlasdk.reference._walk import Evaluator

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

REPO = Path(__file__).resolve().parents[1]
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def _forms(fn: Callable[..., Any], *args: Any) -> dict[str, xs.XlaComputation]:
    """The program as JAX lowers it (StableHLO: its work inside private functions, ``func.call``)
    and as XLA:CPU optimized it (HLO: its work inside fusions, loaded as calls)."""
    lowered = jax.jit(fn, keep_unused=True).lower(*args)
    return {"stablehlo": xs.XlaComputation.from_stablehlo(lowered.as_text()),
            "optimized": xs.XlaComputation.from_hlo_text(lowered.compile().as_text())}


def _square_system(dt: Any, n: int = 4) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """A well-conditioned square ``a`` (``A + n I``), an exact solution ``x`` and ``b = a @ x``."""
    rng = np.random.default_rng(23)
    a, x = rng.standard_normal((n, n)) + n * np.eye(n), rng.standard_normal((n, 2))
    if np.dtype(dt).kind == "c":
        a, x = a + 1j * rng.standard_normal((n, n)), x + 1j * rng.standard_normal((n, 2))
    a, x = a.astype(dt), x.astype(dt)
    wide = np.complex128 if np.dtype(dt).kind == "c" else np.float64
    return a, x, (a.astype(wide) @ x.astype(wide)).astype(dt)


# -- task of a colleague: lstsq of a square, exactly solvable system ---------------------------------------------
@pytest.mark.parametrize("form", ["stablehlo", "optimized"])
@pytest.mark.parametrize("dt", DTYPES)
def test_lstsq_of_an_exactly_solvable_square_system_matches(dt: Any, form: str) -> None:
    """The residual output is rounding noise (XLA's and the reference's differ by 100% of it, e.g.
    3.5e-13 against 1.8e-12 in f32): it matches because the bounds follow the solve through
    ``func.call`` / the fusions, and through the complex ops, to the squared norm."""
    with jax.enable_x64(np.dtype(dt).itemsize >= 8 and dt is not np.complex64):
        a, x, b = _square_system(dt)
        comp = _forms(lambda u, v: jnp.linalg.lstsq(u, v), a, b)[form]
    report = xs.compare(comp, [a, b])
    assert report.ok, str(report)
    sol, resid, rank, sv = (o.want for o in report.outputs)
    wide = np.complex128 if np.dtype(dt).kind == "c" else np.float64
    eps = float(np.finfo(dt).eps)
    np.testing.assert_allclose(sol, np.linalg.solve(a.astype(wide), b.astype(wide)), rtol=64 * eps, atol=64 * eps)
    np.testing.assert_allclose(sol, x, rtol=64 * eps, atol=64 * eps)  # and the solution b was made from
    # the squared residual of a backward-stable solve: at most (n eps |a| |x|)^2 per column, n = 4
    ceiling = (4 * eps * np.abs(a).sum(axis=1).max() * np.abs(x).max(axis=0)) ** 2 * 4
    assert np.all(resid <= ceiling), (resid, ceiling)
    assert int(rank) == 4
    np.testing.assert_allclose(sv, np.linalg.svd(a.astype(wide), compute_uv=False), rtol=64 * eps)
    # the residual's bound covers its rounding noise, but not a value 100 times its scale
    bound = run_reference(comp, [a, b])[1][1]
    assert isinstance(bound, OutputScale) and bound.bound is not None
    assert np.all(bound.bound < 100 * ceiling)


# -- wrong values inside calls are still found ---------------------------------------------------------------------
@pytest.mark.parametrize("dt", [np.float32, np.complex64])
def test_xla_cpu_wrong_division_inside_a_called_function_is_found(dt: Any) -> None:
    """``h / 2**127 * 2**127`` in a nested jit (a ``func.call`` in StableHLO): XLA:CPU multiplies by
    the reciprocal, subnormal and flushed to zero. The bounds followed into the call do not hide it
    (it is 100% of the value); the same program without the division matches."""
    big = np.float32(2.0**127)
    rescale = jax.jit(lambda h: h / big * big)
    rng = np.random.default_rng(8)
    w = rng.standard_normal((16, 10)).astype(dt)
    x = (rng.standard_normal((8, 16)) + (1j * rng.standard_normal((8, 16)) if np.dtype(dt).kind == "c" else 0))
    x = x.astype(dt)
    wrong = _forms(lambda w, x: rescale(jnp.tanh(x @ w)) + 1.0, w, x)["stablehlo"]
    assert "call @" in wrong.as_stablehlo_text()
    report = xs.compare(wrong, [w, x])
    device = np.asarray(xs.compile(wrong)(w, x))
    (want,) = xs.evaluate(wrong, w, x)
    np.testing.assert_allclose(want, np.tanh(x.astype(np.complex128) @ w) + 1.0, rtol=1e-5, atol=1e-6)  # numpy
    if np.allclose(device, want, rtol=1e-5, atol=1e-6):  # an XLA that divides right: then a match
        assert report.ok, str(report)
    else:
        assert not report.ok and report.outputs[0].mismatches > 0, str(report)
    right = _forms(lambda w, x: jax.jit(lambda h: h * 1.0)(jnp.tanh(x @ w)) + 1.0, w, x)["stablehlo"]
    assert xs.compare(right, [w, x]).ok


# -- complex values carry bounds -----------------------------------------------------------------------------------
def _complex_chain(z: Any, w: Any) -> Any:
    @jax.jit
    def inner(z: Any, w: Any) -> Any:
        s = jnp.sqrt(jnp.log(jnp.exp(0.1 * (z * w) / (w + 2)) + 1))
        return s, jnp.abs(s) + jnp.real(s) - jnp.imag(s), jnp.tanh(s), jnp.log(1 + 1e-3 * z)
    return inner(z, w)


@pytest.mark.parametrize(("dt", "form"), [(np.complex64, "stablehlo"), (np.complex64, "optimized"),
                                         (np.complex128, "stablehlo")])
def test_complex_functions_match_with_bounds_of_tens_of_ulps(dt: Any, form: str) -> None:
    """Products, quotients, exp, log (next to 1 too), sqrt, tanh, abs, real and imag of complex
    values: numpy gives the values, XLA:CPU matches, and each output's bound stays within 300 ulps
    of its modulus (XLA's own error: 1.6 ulps; 4 ulps per function, 6 functions, a 4x margin) but
    where XLA's optimized log computes with error-free products (Dekker's splitting), whose
    cancellation first-order bounds cannot see."""
    rng = np.random.default_rng(1)
    z = (rng.standard_normal(64) + 1j * rng.standard_normal(64)).astype(dt)
    w = (rng.standard_normal(64) + 1j * rng.standard_normal(64)).astype(dt)
    with jax.enable_x64(dt is np.complex128):
        comp = _forms(_complex_chain, z, w)[form]
    report = xs.compare(comp, [z, w])
    assert report.ok, str(report)
    part = np.float32 if dt is np.complex64 else np.float64

    def r(v: Any) -> Any:  # numpy in complex128, rounded to the program's type after each op, as it runs
        return np.asarray(v).astype(part if np.isrealobj(v) else dt).astype(np.complex128)

    z64, w64, c = r(z), r(w), (lambda v: r(np.complex128(v)))
    s = r(np.sqrt(r(np.log(r(r(np.exp(r(r(c(0.1) * r(z64 * w64)) / r(w64 + 2)))) + 1)))))
    arg = r(1 + r(c(1e-3) * z64))
    oracle = [s, r(r(np.abs(s) + s.real) - s.imag), r(np.tanh(s)), r(np.log(arg))]
    outs, scales = run_reference(comp, [z, w])
    eps = float(np.finfo(dt).eps)
    for k, (got, want, sc) in enumerate(zip(outs, oracle, scales, strict=True)):
        np.testing.assert_allclose(got, want, rtol=4 * eps, atol=0)
        assert isinstance(sc, OutputScale) and sc.bound is not None
        # log(1 + z/1000): its argument, rounded in the sum, is known to an ulp of 1: a flip of it
        # (when the product before it may land on either side of a rounding boundary) moves the log
        # by up to ~2 eps, of a value of ~1e-3
        ceiling = 300 * eps * np.abs(want) + (8 * eps if k == 3 else 0)
        if not (form == "optimized" and k == 3):
            assert np.all(sc.bound <= ceiling), (k, np.max(sc.bound / ceiling))


def test_imag_and_abs_carry_a_complex_error_in_every_direction() -> None:
    """A complex value's bound is a bound of its error's modulus: imag() and abs() of it carry all
    of it (moving the value along the real axis alone would give imag() none)."""
    b = xs.XlaBuilder("c")
    p = xs.ops.Parameter(b, 0, xs.Shape.array_shape(np.complex64, (3,)))
    prod = xs.ops.Mul(p, p)  # rounds: carries a bound
    comp = b.build(xs.ops.Tuple(b, [xs.ops.Imag(prod), xs.ops.Abs(prod), xs.ops.Real(prod)]))
    z = np.array([3 + 1e-3j, -2 + 2e-3j, 1 - 1e-4j], np.complex64)  # z^2 nearly real: imag(z^2) << |z^2|
    g = comp.instruction_graph()
    env: dict[int, Any] = {id(g.params[0]): z}
    ev = Evaluator(comp)
    ev.run_graph(g.outputs, env)
    bounds = error_bounds(g.outputs, env, ev)
    prod = g.outputs[0].operands[0]
    assert prod.opcode == "stablehlo.multiply" and all(o.operands[0] is prod for o in g.outputs)
    square = z.astype(np.complex128) ** 2
    eps = float(np.finfo(np.float32).eps)
    own = bounds[id(prod)]
    # 4 ulps of |z^2| (np.float32 eps), or the one ulp where rounding the moved value lands elsewhere
    assert np.all(own > 0) and np.all(own <= 4 * eps * np.abs(square) * 1.5)
    im, mod, re = (bounds[id(out)] for out in g.outputs)
    # imag(z^2) is tiny: the error, in the direction of i, lands on it whole (to its ulps, 1e-9 here)
    np.testing.assert_allclose(im, own, rtol=1e-3)
    # real(z^2) ~ |z^2|: the error, to an ulp of it (rounded to f32); |z^2| also rounds (4 ulps of its own)
    ulp = eps * np.abs(square)
    assert np.all(re >= own - ulp) and np.all(re <= own + ulp)
    assert np.all(mod >= own - ulp) and np.all(mod <= 2 * own + 2 * ulp)


# -- the bounds followed into calls without the evaluator's record (bisect's evaluator) ---------------------------
def test_bounds_of_a_call_are_the_same_evaluated_again_or_recorded() -> None:
    a, x, b = _square_system(np.float32)
    comp = _forms(lambda u, v: jnp.linalg.lstsq(u, v), a, b)["stablehlo"]
    g = comp.instruction_graph()
    found = []
    for record in (True, False):
        env: dict[int, Any] = {id(p): v for p, v in zip(g.params, [a, b], strict=True)}
        ev = Evaluator(comp)
        if record:
            ev.record_calls(env)
        ev.run_graph(g.outputs, env)
        assert bool(ev.called) == record
        bounds = error_bounds(g.outputs, env, ev)
        found.append([bounds[id(o)] for o in g.outputs if isinstance(bounds.get(id(o)), np.ndarray)])
    assert len(found[0]) == 3  # the three float outputs
    for r, e in zip(*found, strict=True):
        np.testing.assert_array_equal(r, e)
        assert np.any(r > 0)


# -- no false alarm on fresh JAX programs ------------------------------------------------------------------------
def _generator(name: str) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A program of ``tools/make_dump_corpus.py`` (the corpus's generator), lowered here by the JAX
    under test, with its float inputs drawn again (seed 5) around the corpus's."""
    spec = importlib.util.spec_from_file_location("make_dump_corpus", REPO / "tools" / "make_dump_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn, args = getattr(module, name)()
    rng = np.random.default_rng(5)

    def fresh(v: Any) -> Any:
        a = np.asarray(v)
        if a.dtype.kind in "iub" or a.ndim == 0:
            return v  # labels, keys, a learning rate: as the program expects them
        wide = a.astype(np.float64)
        return (wide + 0.25 * (np.std(wide) or 1.0) * rng.standard_normal(a.shape)).astype(a.dtype)

    return fn, jax.tree_util.tree_map(fresh, args)


@pytest.mark.parametrize("name", ["transformer_bf16", "convnet_train", "gru_scan"])
def test_fresh_jax_programs_match_before_and_after_optimizations(name: str) -> None:
    fn, args = _generator(name)
    flat = [np.asarray(v) for v in jax.tree_util.tree_leaves(args)]
    want = [np.asarray(v) for v in jax.tree_util.tree_leaves(jax.jit(fn, keep_unused=True)(*args))]
    for form, comp in _forms(fn, *args).items():
        report = xs.compare(comp, flat)
        assert report.ok, f"{form}\n{report}"
        for got, w in zip((o.want for o in report.outputs), want, strict=True):  # the reference, near JAX's run
            if got.dtype.kind in "iub":
                np.testing.assert_array_equal(got, w)
            else:
                tol = 2.0**-6 if got.dtype.itemsize == 2 else 1e-5
                np.testing.assert_allclose(got.astype(np.float64), w.astype(np.float64), rtol=tol,
                                           atol=tol * max(float(np.max(np.abs(w.astype(np.float64)))), 1.0))


LINALG: dict[str, Callable[..., Any]] = {
    "solve": lambda a: jnp.linalg.solve(a, a[..., :2] + 1),
    "inv": jnp.linalg.inv,
    "eigh": lambda a: jnp.linalg.eigh(a @ jnp.conj(a.T) + 4 * jnp.eye(4, dtype=a.dtype)),
    "svd": lambda a: jnp.linalg.svd(a, full_matrices=False),
    "qr": jnp.linalg.qr,
    "cholesky": lambda a: jnp.linalg.cholesky(a @ jnp.conj(a.T) + 4 * jnp.eye(4, dtype=a.dtype)),
    "det": jnp.linalg.det,
    "lstsq": lambda a: jnp.linalg.lstsq(a, a[..., :2] * 2 - 1),
    "pinv": jnp.linalg.pinv,
}


@pytest.mark.parametrize("dt", [np.float64, np.complex128])
@pytest.mark.parametrize("name", list(LINALG))
def test_double_precision_linalg_in_stablehlo_matches(name: str, dt: Any) -> None:
    """The f64/c128 ``jnp.linalg`` programs as JAX lowers them (LAPACK calls inside private
    functions; their f32/c64 forms and optimized forms: tests/test_reference_linalg.py)."""
    a, _, _ = _square_system(dt)
    with jax.enable_x64(True):
        comp = _forms(LINALG[name], a)["stablehlo"]
        want = [np.asarray(v) for v in jax.tree_util.tree_leaves(jax.jit(LINALG[name])(a))]
    assert "lapack_" in comp.as_stablehlo_text()
    report = xs.compare(comp, [a])
    assert report.ok, str(report)
    for got, w in zip((o.want for o in report.outputs), want, strict=True):  # the same LAPACK routine as JAX's
        np.testing.assert_allclose(got, w, rtol=1e-12, atol=1e-12)
