"""What a user sees around inputs and outputs: no numpy warnings for an all-NaN output, a named
bad seed, and how to pass the raw bytes numpy saves bfloat16 arrays as.

Oracles: numpy (``np.savez`` of a bfloat16 array gives ``|V2`` raw bytes; ``np.random.default_rng``
refuses the seed), and values computed by hand (``p + p`` of ones).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from tests.test_cli import cli
from xlasdk import ops
from xlasdk.cli._arrays import _summary
from xlasdk.errors import DTypeError, XlaSdkError


def _doubler(dtype: object, n: int = 3) -> xs.XlaComputation:
    b = xs.XlaBuilder("double")
    p = ops.Parameter(b, 0, xs.Shape.array_shape(dtype, (n,)), "p")
    return b.build(ops.Add(p, p))


# -- all-NaN outputs -----------------------------------------------------------------------------------------------
def test_summary_of_an_all_nan_array_warns_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would raise here
        text = _summary(np.full(4, np.nan, np.float32))
    assert text.startswith("min nan  max nan  mean nan  nan 4  [nan, nan, nan, nan]"), text


def test_run_prints_an_all_nan_output_without_numpy_warnings(tmp_path: Path) -> None:
    b = xs.XlaBuilder("nans")
    p = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (3,)), "p")
    comp = b.build(ops.Sqrt(ops.Neg(p)))  # sqrt of negative numbers: NaN everywhere
    path = tmp_path / "nans.hlo"
    path.write_text(comp.as_hlo_text())
    np.savez(tmp_path / "in.npz", p=np.array([1, 2, 3], np.float32))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, out, err = cli("run", str(path), "--inputs", str(tmp_path / "in.npz"))
    assert code == 0, err
    assert "output 0: f32[3]" in out and "min nan  max nan  mean nan  nan 3" in out, out
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in caught]
    assert "RuntimeWarning" not in err and "All-NaN" not in err


# -- random_inputs' seed -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", ["x", -1, 1.5])
def test_random_inputs_names_a_seed_numpy_refuses(seed: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        np.random.default_rng(seed)  # type: ignore[arg-type]  # the oracle: numpy refuses it
    with pytest.raises(XlaSdkError, match=r"random_inputs: seed must be an integer >= 0 and <= 2\*\*64 - 1, got "
                                          rf"(str )?{re.escape(repr(seed))}"):
        xs.random_inputs(_doubler(np.float32), seed)  # type: ignore[arg-type]


def test_random_inputs_with_a_good_seed_is_deterministic() -> None:
    comp = _doubler(np.float32, 5)
    a, b, c = xs.random_inputs(comp, 7), xs.random_inputs(comp, 7), xs.random_inputs(comp, 8)
    assert np.array_equal(a[0], b[0]) and not np.array_equal(a[0], c[0])


# -- raw bytes of a bfloat16 .npz ------------------------------------------------------------------------------------
def test_raw_bytes_of_a_bf16_npz_are_refused_with_the_view_to_use(tmp_path: Path) -> None:
    np.savez(tmp_path / "bf.npz", p=np.ones(3, ml_dtypes.bfloat16))
    raw = np.load(tmp_path / "bf.npz")["p"]
    assert raw.dtype == np.dtype("V2")  # the oracle: what numpy gives back
    exe = xs.compile(_doubler(ml_dtypes.bfloat16))
    with pytest.raises(DTypeError) as e:
        exe(raw)
    assert str(e.value).startswith("double: argument 0 ('p') is a numpy array of dtype |V2 and shape (3,), "
                                   "expected bf16[3]"), str(e.value)
    assert str(e.value).endswith("pass a.view(ml_dtypes.bfloat16)"), str(e.value)
    got = np.asarray(exe(raw.view(ml_dtypes.bfloat16)))  # what the hint says works
    assert got.dtype == ml_dtypes.bfloat16 and np.array_equal(got.astype(np.float32), [2, 2, 2])


def test_raw_bytes_hint_names_numpy_s_own_type_and_only_matching_sizes() -> None:
    exe16 = xs.compile(_doubler(np.float16))
    with pytest.raises(DTypeError, match=r"pass a\.view\(np\.float16\)$"):
        exe16(np.zeros(3, "V2"))
    exe_bf = xs.compile(_doubler(ml_dtypes.bfloat16))
    with pytest.raises(DTypeError) as e:  # 4-byte raw values are no bfloat16
        exe_bf(np.zeros(3, "V4"))
    assert "view" not in str(e.value)
    with pytest.raises(DTypeError) as e:  # a float32 array is no raw bytes
        exe_bf(np.zeros(3, np.float32))
    assert "view" not in str(e.value)
