"""Tests of xlasdk/ops/fma.py: ``ops.Fma`` against exact rational arithmetic (one rounding of
``a * b + c``) on every float type it builds, on inputs where a multiply then an add rounds
otherwise; its errors; the reference evaluator's rule; a loaded module's ``fma``."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops
from xlasdk._jaxlib.opset import HAS_EXP2_LOG2_FMA
from xlasdk.errors import DTypeError, ShapeError

P = xs.PrimitiveType
N = 600


def _round(v: Fraction, dt: np.dtype[Any]) -> Any:
    """The value of ``dt`` nearest ``v`` (ties to even bits), searched among the neighbours of
    Python's correctly rounded float64."""
    if dt == np.float64:
        return float(v)
    u = np.dtype(f"u{dt.itemsize}")
    start = int(np.array([float(v)]).astype(dt).view(u)[0])
    best: tuple[tuple[Fraction, int], Any] | None = None
    for bits in range(start - 3, start + 4):
        cand = np.array([bits % (1 << (8 * dt.itemsize))], dtype=np.uint64).astype(u).view(dt)[0]
        f = float(cand)
        if not np.isfinite(f):
            continue
        key = (abs(Fraction(f) - v), bits & 1)
        if best is None or key < best[0]:
            best = (key, cand)
    assert best is not None
    return best[1]


def exact_fma(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any], c: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``a * b + c`` computed exactly in rationals, rounded once to the operands' type."""
    out = [_round(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)), a.dtype)
           for x, y, z in zip(a.tolist(), b.tolist(), c.tolist(), strict=True)]
    return np.array(out, dtype=a.dtype)


def inputs(dt: np.dtype[Any], seed: int) -> tuple[np.ndarray[Any, Any], ...]:
    """Operands where ``c`` nearly cancels ``a * b`` (the fused result keeps the product's low
    bits, a multiply and an add lose them), plus plain random ones."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(N).astype(dt)
    b = rng.standard_normal(N).astype(dt)
    prod = a.astype(np.float64) * b.astype(np.float64)
    near = -prod * (1 + rng.standard_normal(N) * 2.0 ** -rng.integers(3, 20, N).astype(np.float64))
    c = np.where(np.arange(N) % 3 == 0, rng.standard_normal(N), near).astype(dt)
    return a, b, c


def fma_program(et: xs.PrimitiveType, n: int = N) -> xs.XlaComputation:
    b = xs.XlaBuilder("fma")
    shape = xs.Shape.array_shape(et, (n,))
    x, y, z = (ops.Parameter(b, i, shape, k) for i, k in enumerate("abc"))
    ops.Fma(x, y, z)
    return b.build()


BUILT = [P.F32, P.F16, P.BF16, P.F8E4M3FN] + ([P.F64] if HAS_EXP2_LOG2_FMA else [])


@pytest.mark.parametrize("et", BUILT, ids=lambda e: e.name)
def test_fma_rounds_once_on_every_float_type(et: xs.PrimitiveType) -> None:
    dt = xs.etype_to_dtype(et)
    a, b, c = inputs(dt, seed=int(et))
    want = exact_fma(a, b, c)
    with np.errstate(all="ignore"):
        two_roundings = ((a * b).astype(dt) + c).astype(dt)
    # the inputs tell a fused result from a multiply and an add: the test can fail
    assert np.sum(two_roundings.astype(np.float64) != want.astype(np.float64)) > N // 10
    got = xs.compile(fma_program(et), device="cpu:0")(a, b, c).to_numpy()
    assert got.dtype == dt
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def test_fma_takes_python_scalars_and_keeps_specials() -> None:
    bld = xs.XlaBuilder("fma_scalars")
    x = ops.Parameter(bld, 0, xs.Shape.array_shape(P.F32, (4,)), "x")
    ops.Fma(x, 3.0, -1.0)
    a = np.array([1.0, np.inf, np.nan, 2.0**100], np.float32)
    got = xs.compile(bld.build(), device="cpu:0")(a).to_numpy()
    np.testing.assert_array_equal(got, np.array([2.0, np.inf, np.nan, np.float32(3 * 2.0**100)], np.float32))


def test_fma_errors_name_the_operand() -> None:
    bld = xs.XlaBuilder("fma_errors")
    f = ops.Parameter(bld, 0, xs.Shape.array_shape(P.F32, (3,)), "f")
    g = ops.Parameter(bld, 1, xs.Shape.array_shape(P.F32, (4,)), "g")
    h = ops.Parameter(bld, 2, xs.Shape.array_shape(P.F16, (3,)), "h")
    i = ops.Parameter(bld, 3, xs.Shape.array_shape(P.S32, (3,)), "i")
    with pytest.raises(ShapeError, match=r"Fma: operand 'b' has shape f32\[4\], expected f32\[3\]"):
        ops.Fma(f, g, f)
    with pytest.raises(DTypeError, match=r"Fma: operand 'c' has element type f16\[3\], expected f32"):
        ops.Fma(f, f, h)
    with pytest.raises(DTypeError, match="Fma"):
        ops.Fma(i, i, i)


@pytest.mark.skipif(HAS_EXP2_LOG2_FMA, reason="this jaxlib has stablehlo.fma: f64 is built as the op")
def test_fma_of_f64_without_the_op_is_refused_naming_the_release() -> None:
    bld = xs.XlaBuilder("fma_f64")
    x = ops.Parameter(bld, 0, xs.Shape.array_shape(P.F64, (2,)), "x")
    with pytest.raises(DTypeError, match=r"Fma: f64 needs jaxlib 0\.12\.1 or newer"):
        ops.Fma(x, x, x)


@pytest.mark.parametrize("et", [P.F32, P.F64, P.BF16], ids=lambda e: e.name)
def test_the_reference_evaluator_rounds_fma_once(et: xs.PrimitiveType) -> None:
    dt = xs.etype_to_dtype(et)
    a, b, c = inputs(dt, seed=7)
    bld = xs.XlaBuilder("fma_ref")
    shape = xs.Shape.array_shape(et, (N,))
    x, y, z = (ops.Parameter(bld, i, shape, k) for i, k in enumerate("abc"))
    bld.add_op(ops.fma.FMA, (x, y, z), shape)  # the op itself, whatever this jaxlib can compile
    got = xs.evaluate(bld.build(), a, b, c)[0]
    want = exact_fma(a, b, c)
    if et is P.BF16:  # ml_dtypes before 0.5.4 rounds float64 to bf16 through f32: within an ulp
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=2.0**-7, atol=0)
    else:
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


@pytest.mark.skipif(not HAS_EXP2_LOG2_FMA, reason="this jaxlib's HLO has no fma opcode (jaxlib 0.12.1+)")
def test_a_loaded_hlo_fma_runs_and_compares() -> None:
    text = """HloModule m, entry_computation_layout={(f32[600]{0}, f32[600]{0}, f32[600]{0})->f32[600]{0}}

ENTRY main {
  a = f32[600]{0} parameter(0)
  b = f32[600]{0} parameter(1)
  c = f32[600]{0} parameter(2)
  ROOT r = f32[600]{0} fma(a, b, c)
}
"""
    comp = xs.XlaComputation.from_hlo_text(text)
    a, b, c = inputs(np.dtype(np.float32), seed=3)
    got = xs.compile(comp, device="cpu:0")(a, b, c).to_numpy()
    np.testing.assert_array_equal(got, exact_fma(a, b, c))
    assert "MATCH" in str(xs.compare(comp, [a, b, c])).splitlines()[0]



@pytest.mark.parametrize("suffix,text", [
    (".hlo", "HloModule m\n\nENTRY main {\n  a = f32[3]{0} parameter(0)\n  ROOT e = f32[3]{0} exp2(a)\n}\n"),
    (".mlir", "func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {\n  %0 = stablehlo.fma %a, %a, %a : "
              "tensor<3xf32>\n  return %0 : tensor<3xf32>\n}\n"),
], ids=["hlo-exp2", "stablehlo-fma"])
def test_a_file_with_the_new_ops_loads_or_names_the_release(suffix: str, text: str, tmp_path: Any) -> None:
    """A file jaxlib 0.12.1 wrote with exp2 / fma: it runs where jaxlib has the ops; under an older
    jaxlib the FormatError names the release that has them."""
    path = tmp_path / f"new_ops{suffix}"
    path.write_text(text)
    if not HAS_EXP2_LOG2_FMA:
        with pytest.raises(xs.FormatError, match=r"is an op of jaxlib 0\.12\.1 and newer"):
            xs.load_computation(path)
        return
    a = np.array([0.5, 1.0, 3.0], np.float32)
    got = xs.compile(xs.load_computation(path), device="cpu:0")(a).to_numpy()
    want = np.exp2(a) if "exp2" in text else exact_fma(a, a, a)
    np.testing.assert_array_equal(got, want.astype(np.float32))
