"""tests/helpers.py's oracle for JAX's recorded outputs on another host (``assert_same_or_within_ulps``):
a few ulps pass, a real error (1e-3 relative, a wrong integer, a NaN or an infinity of its own) fails."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from tests.helpers import assert_same_bits, assert_same_or_within_ulps

FLOATS = [np.float16, np.float32, np.float64, ml_dtypes.bfloat16, np.complex64]


def _values(dtype: Any) -> np.ndarray[Any, Any]:
    x = np.linspace(-3.0, 5.0, 41)
    return (x * np.exp(x / 4)).astype(dtype) if np.dtype(dtype).kind != "c" else (x + 1j * x[::-1]).astype(dtype)


def _ulps_up(a: np.ndarray[Any, Any], n: int) -> np.ndarray[Any, Any]:
    """Every element ``n`` floats further from zero (``n`` ulps off)."""
    ints = np.dtype(f"i{a.dtype.itemsize}")
    return (a.view(ints) + n).view(a.dtype)


@pytest.mark.parametrize("dtype", [d for d in FLOATS if np.dtype(d).kind != "c"])
def test_a_few_ulps_pass_and_more_fail(dtype: Any) -> None:
    want = _values(dtype)
    assert_same_or_within_ulps(want.copy(), want)
    assert_same_or_within_ulps(_ulps_up(want, 4), want, ulps=4)
    with pytest.raises(AssertionError, match="more than 4 ulps off"):
        assert_same_or_within_ulps(_ulps_up(want, 5), want, ulps=4)


@pytest.mark.parametrize("dtype", FLOATS)
def test_a_planted_error_of_1e_3_relative_is_caught(dtype: Any) -> None:
    want = _values(dtype)
    # float16's ulp is 1e-3 relative, bfloat16's 8e-3: 1e-2 and 1e-1 there
    rel = {np.dtype(np.float16): 1e-2, np.dtype(ml_dtypes.bfloat16): 1e-1}.get(np.dtype(dtype), 1e-3)
    wrong = (want.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64) * (1 + rel)).astype(dtype)
    with pytest.raises(AssertionError, match="ulps off"):
        assert_same_or_within_ulps(wrong, want)
    one = want.copy()  # one element alone, the output's largest
    one[-1] = wrong[-1]
    with pytest.raises(AssertionError, match="1 of"):
        assert_same_or_within_ulps(one, want)


def test_small_elements_are_measured_against_the_output_s_scale_too() -> None:
    """A sum that cancels (tests/data/spmd/mesh2x2 output 1 on an AMD EPYC): 19x ulps of -0.0257 but
    under 1 ulp of the output's largest element 4.67."""
    want = np.array([-4.67316, -2.3877609, -0.02567351], np.float32)
    got = np.array([-4.67316, -2.387761, -0.02567315], np.float32)
    assert_same_or_within_ulps(got, want)
    with pytest.raises(AssertionError, match=r"worst 19\d ulps of the element"):
        assert_same_or_within_ulps(got[2:], want[2:])  # alone, -0.0257 is its own scale


def test_nan_inf_and_integers() -> None:
    want = np.array([np.nan, np.inf, -np.inf, 0.0, 1.0], np.float32)
    assert_same_or_within_ulps(want.copy(), want)
    assert_same_or_within_ulps(np.array([np.nan, np.inf, -np.inf, -0.0, 1.0], np.float32), want)
    for k, v in [(0, 1.0), (1, float(np.finfo(np.float32).max)), (2, np.inf), (3, np.nan)]:
        bad = want.copy()
        bad[k] = v
        with pytest.raises(AssertionError, match="NaN/inf"):
            assert_same_or_within_ulps(bad, want)
    ints = np.arange(-5, 5, dtype=np.int32)
    assert_same_or_within_ulps(ints.copy(), ints)
    with pytest.raises(AssertionError):
        assert_same_or_within_ulps(ints + np.eye(1, 10, 3, dtype=np.int32)[0], ints)  # one off by one
    with pytest.raises(AssertionError):
        assert_same_or_within_ulps(np.array([True, False]), np.array([True, True]))
    with pytest.raises(AssertionError, match="float64"):
        assert_same_or_within_ulps(want.astype(np.float64), want)  # the dtype counts


def test_same_bits() -> None:
    a = _values(np.float32)
    assert_same_bits(a.copy(), a)
    with pytest.raises(AssertionError, match="not the same bits"):
        assert_same_bits(_ulps_up(a, 1), a)
    with pytest.raises(AssertionError, match="not the same bits"):
        assert_same_bits(np.array([-0.0], np.float32), np.array([0.0], np.float32))
