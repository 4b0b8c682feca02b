"""What the installed JAX lowers its common functions to, run through xlasdk (issue 41).

Each program below is a ``jax.numpy`` / ``lax`` / ``jax.random`` / ``jax.nn`` /
``jax.scipy.special`` / ``jnp.linalg`` function as users call it, lowered fresh by the JAX beside
the jaxlib under test (a test-only peer: the newest release in range in CI, and 0.10.2): every op
and custom call a new release starts to emit (JAX 0.12.1: ``stablehlo.fma`` in ``erf_inv``, so in
``jax.random.normal``; ``exp2``, ``log2``; the ``cpu_lgamma_ffi`` / ``cpu_digamma_ffi`` kernels)
shows here first. For each program and each of its forms (HLO before optimizations, XLA:CPU's
optimized HLO, StableHLO), xlasdk loads it, runs it to JAX's own outputs bit for bit (``run
--expect``'s check) and ``compare`` judges it MATCH against the reference evaluator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xlasdk as xs

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jsp = pytest.importorskip("jax.scipy.special")

Arr = np.ndarray[Any, Any]
RNG = np.random.default_rng(41)
# compiling the same module again (another file of the same program, compare after compile) reads it
# back from a compile cache of this run (tests/conftest.py): these tests are about values, not compiling
pytestmark = pytest.mark.usefixtures("shared_compile_cache")


def _pos(*shape: int) -> Arr:
    return RNG.uniform(0.25, 4.0, shape).astype(np.float32)


def _unit(*shape: int) -> Arr:
    return RNG.uniform(-0.95, 0.95, shape).astype(np.float32)


def _normal(*shape: int) -> Arr:
    return RNG.standard_normal(shape).astype(np.float32)


def _spd(n: int) -> Arr:
    a = RNG.standard_normal((n, n))
    return (a @ a.T + n * np.eye(n)).astype(np.float32)


def _key() -> Arr:
    return np.asarray(jax.random.key_data(jax.random.key(7)))


def _rand(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A jax.random function of raw key data (a program parameter, as JAX lowers typed keys)."""
    return lambda k: fn(jax.random.wrap_key_data(k))


#: name -> (function, inputs): the functions users call, as they call them
PROGRAMS: dict[str, tuple[Callable[..., Any], Callable[[], list[Arr]]]] = {
    "jnp.exp2_log2": (lambda x: (jnp.exp2(x), jnp.log2(x), jnp.log10(x)), lambda: [_pos(4, 8)]),
    "jnp.logaddexp_sinc": (lambda x, y: (jnp.logaddexp(x, y), jnp.sinc(x)), lambda: [_normal(16), _normal(16)]),
    "jnp.cumsum_sort": (lambda x: (jnp.cumsum(x, axis=1), jnp.sort(x, axis=1), jnp.argsort(x[0])),
                        lambda: [_normal(4, 16)]),
    "lax.erf_inv": (jax.lax.erf_inv, lambda: [_unit(64)]),
    "lax.special": (lambda x: (jax.lax.lgamma(x), jax.lax.digamma(x), jax.lax.cbrt(x), jax.lax.expm1(x)),
                    lambda: [_pos(32)]),
    "scipy.gammaln_digamma": (lambda x: (jsp.gammaln(x), jsp.digamma(x)), lambda: [_pos(3, 7)]),
    "scipy.erf_erfinv": (lambda x: (jsp.erf(x), jsp.erfinv(x), jsp.expit(x)), lambda: [_unit(32)]),
    "scipy.logsumexp_xlogy": (lambda x, y: (jsp.logsumexp(x, axis=0), jsp.xlogy(y, y)),
                              lambda: [_normal(8, 4), _pos(8)]),
    "random.normal": (_rand(lambda k: jax.random.normal(k, (4, 32))), lambda: [_key()]),
    "random.uniform_bernoulli": (_rand(lambda k: (jax.random.uniform(k, (64,)), jax.random.bernoulli(k, 0.3, (64,)))),
                                 lambda: [_key()]),
    "random.truncated_normal": (_rand(lambda k: jax.random.truncated_normal(k, -2.0, 2.0, (64,))),
                                lambda: [_key()]),
    "random.dropout": (lambda k, x: jnp.where(jax.random.bernoulli(jax.random.wrap_key_data(k), 0.9, x.shape),
                                              x / 0.9, 0.0), lambda: [_key(), _normal(8, 8)]),
    "nn.activations": (lambda x: (jax.nn.gelu(x, approximate=False), jax.nn.gelu(x), jax.nn.silu(x),
                                  jax.nn.softmax(x, axis=-1), jax.nn.log_softmax(x, axis=-1)),
                       lambda: [_normal(4, 16)]),
    "nn.initializers": (_rand(lambda k: (jax.nn.initializers.glorot_normal()(k, (8, 8)),
                                         jax.nn.initializers.lecun_uniform()(k, (8, 8)))), lambda: [_key()]),
    "lax.conv_transpose_grad": (lambda x, w: jax.grad(lambda x, w: jnp.sum(jax.lax.conv_transpose(
        x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")) ** 2), argnums=(0, 1))(x, w),
        lambda: [_normal(1, 5, 5, 2), _normal(3, 3, 2, 3)]),
    "linalg.solve_inv": (lambda a, b: (jnp.linalg.solve(a, b), jnp.linalg.inv(a)), lambda: [_spd(6), _normal(6, 2)]),
    "linalg.cholesky_qr": (lambda a: (jnp.linalg.cholesky(a), jnp.linalg.qr(a)[1]), lambda: [_spd(5)]),
    "linalg.eigh_slogdet": (lambda a: (jnp.linalg.eigh(a)[0], jnp.linalg.slogdet(a)[1]), lambda: [_spd(5)]),
}

FORMS = ("before_optimizations", "cpu_after_optimizations", "stablehlo")


def _forms(name: str) -> tuple[dict[str, xs.XlaComputation], list[Arr], list[Arr]]:
    fn, make = PROGRAMS[name]
    args = make()
    lowered = jax.jit(fn).lower(*args)
    comps = {
        "before_optimizations": xs.XlaComputation.from_hlo_text(lowered.as_text(dialect="hlo")),
        "cpu_after_optimizations": xs.XlaComputation.from_hlo_text(lowered.compile().as_text()),
        "stablehlo": xs.XlaComputation.from_stablehlo(lowered.as_text()),
    }
    want = [np.asarray(v) for v in jax.tree_util.tree_leaves(jax.jit(fn)(*args))]
    return comps, args, want


@pytest.fixture(scope="module")
def cpu_only_jax() -> None:
    if jax.default_backend() != "cpu":
        pytest.skip(f"JAX's default backend here is {jax.default_backend()}: the outputs compared are XLA:CPU's")


@pytest.mark.usefixtures("cpu_only_jax")
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_jax_programs_run_bit_exact_and_compare_match(name: str) -> None:
    comps, args, want = _forms(name)
    for form in FORMS:
        comp = comps[form]
        out = xs.compile(comp, device="cpu:0")(*args)
        got = [o.to_numpy() for o in (out if isinstance(out, (list, tuple)) else [out])]
        assert len(got) == len(want), (form, len(got), len(want))
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert g.dtype == w.dtype and g.shape == w.shape, (form, i, g.dtype, g.shape, w.dtype, w.shape)
            assert np.array_equal(g, w, equal_nan=g.dtype.kind in "fc"), (
                f"{name} ({form}) output {i}: not JAX's bits, max |diff| {np.max(np.abs(g - w))}")
        report = xs.compare(comp, args)
        assert report.ok, f"{name} ({form}):\n{report}"
