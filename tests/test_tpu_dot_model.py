"""The TPU's DEFAULT-precision f32 dots in the error model: XLA:TPU rounds a matrix dot's inputs to
bf16 (the matrix unit), but computes a dot that contracts nothing or has a vector operand as f32
multiplies and a sum (XLA's dot strength reduction), and complex dots as real dots of the parts.
Measured on a TPU v5e (libtpu 0.0.42.1, tests/ops/test_linalg.py on the chip): vector and outer
product dots came out at the f32 inputs' values, where the model had allowed only the bf16-rounded
inputs' (4 false DIVERGENCEs); matrix-matrix dots at the bf16 inputs' values bit for bit.

Off the chip the f32 values are XLA:CPU's: judged by the tpu-v5e model they must MATCH for the
strength-reduced forms, and must still be DIVERGENCE for a matrix-matrix dot (whose device value the
model pins to the bf16 inputs) and for a planted 1% error in a vector dot."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops

S = xs.Shape.array_shape
RNG = np.random.default_rng(7)


def _dot(lhs: np.ndarray[Any, Any], rhs: np.ndarray[Any, Any], lc: list[int], rc: list[int],
         lb: tuple[int, ...] = (), rb: tuple[int, ...] = ()) -> xs.XlaComputation:
    b = xs.XlaBuilder("dot")
    x = ops.Parameter(b, 0, S(lhs.dtype, lhs.shape), "x")
    y = ops.Parameter(b, 1, S(rhs.dtype, rhs.shape), "y")
    dn = xs.DotDimensionNumbers(lhs_contracting_dimensions=lc, rhs_contracting_dimensions=rc,
                                lhs_batch_dimensions=list(lb), rhs_batch_dimensions=list(rb))
    return b.build(ops.DotGeneral(x, y, dn))


def _judge(comp: xs.XlaComputation, args: list[np.ndarray[Any, Any]], scale: float = 1.0,
           conj: bool = False) -> bool:
    out = np.asarray(xs.compile(comp, "cpu:0")(*args).to_numpy()) * np.float32(scale)
    out = np.conj(out) if conj else out
    return xs.compare(comp, args, outputs=[out], device_kind="tpu-v5e").ok


def _f32(*shape: int) -> np.ndarray[Any, Any]:
    return RNG.standard_normal(shape).astype(np.float32)


STRENGTH_REDUCED = {
    "vector_vector": (lambda: (_f32(16), _f32(16)), [0], [0], (), ()),
    "matrix_vector": (lambda: (_f32(3, 16), _f32(16)), [1], [0], (), ()),
    "vector_matrix": (lambda: (_f32(16), _f32(16, 5)), [0], [0], (), ()),
    "outer": (lambda: (_f32(3, 4), _f32(5, 2)), [], [], (), ()),
    "batched_outer": (lambda: (_f32(2, 3, 4), _f32(3, 2, 5)), [], [], (0, 1), (1, 0)),
}


@pytest.mark.parametrize("case", sorted(STRENGTH_REDUCED))
def test_a_strength_reduced_dot_computed_in_f32_is_not_a_divergence(case: str) -> None:
    make, lc, rc, lb, rb = STRENGTH_REDUCED[case]
    lhs, rhs = make()
    assert _judge(_dot(lhs, rhs, lc, rc, lb, rb), [lhs, rhs])


def test_a_planted_error_in_a_vector_dot_is_still_found() -> None:
    lhs, rhs = _f32(3, 16), _f32(16)
    assert not _judge(_dot(lhs, rhs, [1], [0]), [lhs, rhs], scale=1.01)


def test_a_matrix_dot_is_still_pinned_to_the_bf16_inputs() -> None:
    """A matrix-matrix dot goes to the matrix unit: its f32 inputs' value is not the device's."""
    lhs, rhs = _f32(8, 32), _f32(32, 8)
    assert not _judge(_dot(lhs, rhs, [1], [0]), [lhs, rhs])


def test_a_complex_matrix_dot_is_judged_by_its_parts_rounding() -> None:
    """c64 (real dots of the parts on the chip): the f32 parts' value MATCHes; a planted bug (the
    imaginary parts' sign, a 50% error) does not."""
    lhs = (_f32(4, 16) + 1j * _f32(4, 16)).astype(np.complex64)
    rhs = (_f32(16, 3) + 1j * _f32(16, 3)).astype(np.complex64)
    comp = _dot(lhs, rhs, [1], [0])
    assert _judge(comp, [lhs, rhs])
    assert not _judge(comp, [lhs, rhs], conj=True)
    assert not _judge(comp, [lhs, rhs], scale=1.5)


def test_a_complex_mismatch_is_reported_with_both_parts() -> None:
    lhs = (_f32(2, 4) + 1j * _f32(2, 4)).astype(np.complex64)
    rhs = (_f32(4, 2) + 1j * _f32(4, 2)).astype(np.complex64)
    comp = _dot(lhs, rhs, [1], [0])
    out = np.conj(np.asarray(xs.compile(comp, "cpu:0")(lhs, rhs).to_numpy()))
    text = str(xs.compare(comp, [lhs, rhs], outputs=[out], device_kind="cpu"))
    assert re.search(r"got \S+[-+]\S+j, the model's value \S+[-+]\S+j", text), text
    assert "computing as cpu does, each element" in text, text  # no TPU wording for the CPU


def test_the_report_says_a_vector_dot_may_take_its_f32_inputs() -> None:
    lhs, rhs = _f32(3, 16), _f32(16)
    comp = _dot(lhs, rhs, [1], [0])
    out = np.asarray(xs.compile(comp, "cpu:0")(lhs, rhs).to_numpy())
    text = str(xs.compare(comp, [lhs, rhs], outputs=[out], device_kind="tpu-v5e"))
    assert "or its f32 inputs as they are (a vector's dot or an outer product" in text, text
    m_lhs, m_rhs = _f32(8, 32), _f32(32, 8)
    m = _dot(m_lhs, m_rhs, [1], [0])
    mout = np.asarray(xs.compile(m, "cpu:0")(m_lhs, m_rhs).to_numpy())
    assert "or its f32 inputs" not in str(xs.compare(m, [m_lhs, m_rhs], outputs=[mout], device_kind="tpu-v5e"))
