"""A dimension's run-time size past its bound: running the program refuses it with a ShapeError
naming the parameter, the dimension, the bound and the size given (it used to be numpy's raw
``ValueError: cannot reshape``, after XLA had run on a size past the buffer); ``random_inputs``
draws such a size within the bound. The oracle: numpy's slice of the operand at the size given."""

from __future__ import annotations

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops
from xlasdk.inputs import input_ranges

F32 = np.float32
X = np.arange(6, dtype=F32).reshape(2, 3)


def _reshape(size: str = "n") -> xs.XlaComputation:
    """``DynamicReshape(x f32[2,3], [n, 3], [2, 3], [True, False])`` (``size="n+1"``: the size computed)."""
    b = xs.XlaBuilder("dyn_reshape")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(F32, (2, 3)), "x")
    n = ops.Parameter(b, 1, xs.Shape.array_shape(np.int32, ()), "n")
    s = n if size == "n" else ops.Add(n, ops.Constant(b, np.int32(1)))
    return b.build(ops.DynamicReshape(x, [s, 3], [2, 3], [True, False]))


@pytest.mark.parametrize("n", [0, 1, 2])
def test_a_size_within_the_bound_runs(n: int) -> None:
    got = xs.compile(_reshape())(X, np.int32(n)).to_numpy()
    np.testing.assert_array_equal(got, X[:n])


@pytest.mark.parametrize("n", [5, 3, -1])
def test_a_size_argument_outside_the_bound_is_a_shape_error_naming_it(n: int) -> None:
    exe = xs.compile(_reshape())
    with pytest.raises(xs.ShapeError, match=rf"argument 1 \('n'\) is the run-time size of dimension 0 of "
                                            rf"set_dimension_size\.\d+, whose bound is 2: expected a size in "
                                            rf"\[0, 2\], got {n}$"):
        exe(X, np.int32(n))


def test_a_computed_size_outside_the_bound_is_a_shape_error() -> None:
    exe = xs.compile(_reshape("n+1"))
    np.testing.assert_array_equal(exe(X, np.int32(1)).to_numpy(), X[:2])
    with pytest.raises(xs.ShapeError, match=r"result 0's dimension 0 came out of run-time size 3, outside \[0, 2\] "
                                            r"\(its bound\)"):
        exe(X, np.int32(2))


def test_random_inputs_draw_a_size_within_the_bound() -> None:
    from xlasdk.program.dynamic_sizes import dimension_size_parameters

    comp = _reshape()
    assert dimension_size_parameters(comp)[0][::2] == (1, 0) and dimension_size_parameters(comp)[0][3] == 2
    r = input_ranges(comp)[1]
    assert r.index_max == 2 and any("set_dimension_size" in why for why in r.reasons)
    exe = xs.compile(comp)
    drawn = set()
    for seed in range(30):
        x, n = xs.random_inputs(comp, seed=seed)
        drawn.add(int(n))
        np.testing.assert_array_equal(exe(x, n).to_numpy(), x[: int(n)])
    assert drawn == {0, 1, 2}  # the whole valid range, nothing past it
