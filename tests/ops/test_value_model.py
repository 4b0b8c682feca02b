"""tests.helpers.assert_device_close, the value check of the op tests: on the CPU exactly the test's own
``np.testing.assert_allclose``; on another device (``XLASDK_TEST_PLATFORM=tpu``) the device's error model
(the one ``xlasdk compare --outputs --device-kind tpu-v5e`` uses) judges the program that computed the
values. Proved here on the CPU with the model named: a TPU v5e's recorded outputs of correct programs
(tests/data/tpu_mlp/recorded.npz, tools/make_tpu_mlp_outputs.py) are taken, which the CPU's tolerance
is not; a planted 1% error is still found; TPU-like function errors (within the TPU's documented ulps)
pass and beyond them do not. And the skips of behaviours a TPU defines otherwise name their row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tests.helpers as h
import xlasdk as xs
from tests.helpers import assert_device_close, run
from xlasdk import ops

RECORDED = Path(__file__).resolve().parents[1] / "data" / "tpu_mlp" / "recorded.npz"


def _mlp(fn: str) -> xs.XlaComputation:
    b = xs.XlaBuilder(f"mlp_{fn}")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (64, 128)), "x")
    w1 = ops.Parameter(b, 1, xs.Shape.array_shape(np.float32, (128, 128)), "w1")
    w2 = ops.Parameter(b, 2, xs.Shape.array_shape(np.float32, (128, 32)), "w2")
    return b.build(ops.Dot({"tanh": ops.Tanh, "logistic": ops.Logistic, "exp": ops.Exp}[fn](ops.Dot(x, w1)), w2))


def _recorded(fn: str) -> tuple[xs.XlaComputation, list[np.ndarray[Any, Any]], np.ndarray[Any, Any]]:
    with np.load(RECORDED) as z:
        return _mlp(fn), [z["x"], z["w1"], z["w2"]], np.array(z[fn])


@pytest.mark.parametrize(("got", "want", "rtol", "atol"), [
    (np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-9]), 1e-7, 0.0),
    (np.array([1.0, 2.0]), np.array([1.0, 2.1]), 1e-7, 0.0),
    (np.array([1.0, np.nan]), np.array([1.0, np.nan]), 0.0, 0.0),
    (np.array([0.0, 1e-3]), np.array([0.0, 0.0]), 0.0, 1e-2),
    (np.array([0.0, 1e-1]), np.array([0.0, 0.0]), 0.0, 1e-2),
])
def test_on_the_cpu_it_is_the_tests_own_check(got: Any, want: Any, rtol: float, atol: float) -> None:
    """Same verdict and same words as ``np.testing.assert_allclose`` with the same arguments."""
    def outcome(check: Any) -> str | None:
        try:
            check(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg="case")
        except AssertionError as e:
            return str(e)
        return None

    assert outcome(lambda *a, **k: assert_device_close(*a, kind="cpu", **k)) == outcome(np.testing.assert_allclose)
    if h.TEST_DEVICE.startswith("cpu"):  # on the CPU the default kind is the CPU's (on a chip, the chip's)
        assert h.test_device_kind() == "cpu"


@pytest.mark.parametrize("fn", ["tanh", "logistic", "exp"])
def test_tpu_model_takes_a_real_tpu_run_the_cpu_tolerance_does_not(fn: str) -> None:
    comp, args, got = _recorded(fn)
    h._remember(comp, tuple(args), [got])
    want = np.asarray(xs.evaluate(comp, *args)[0])
    assert_device_close(got, want, rtol=1e-5, kind="tpu-v5e", err_msg=fn)
    with pytest.raises(AssertionError):
        assert_device_close(got, want, rtol=1e-5, kind="cpu", err_msg=fn)
    planted = got.copy()
    planted.flat[int(np.argmax(np.abs(got)))] *= np.float32(1.01)
    h._remember(comp, tuple(args), [planted])
    with pytest.raises(AssertionError, match="by the error model of tpu-v5e"):
        assert_device_close(planted, want, rtol=1e-5, kind="tpu-v5e", err_msg=fn)


def _ulps_off(x: np.ndarray[Any, Any], n: int) -> np.ndarray[Any, Any]:
    return (x.view(np.int32) + np.int32(n)).view(np.float32)


def test_tpu_like_function_errors_pass_and_larger_ones_do_not() -> None:
    """tanh on a TPU v2-v5e is within 1365.5 ulps (JAX's accuracy.md): 1000 ulps off is a TPU's value,
    not a CPU's; 1% off is neither."""
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    b = xs.XlaBuilder("tanh")
    ops.Tanh(ops.Parameter(b, 0, xs.shape_from_pyval(x)))
    (exact,) = run(b.build(), x)
    tpu_like = _ulps_off(exact, 1000)
    h._remember(b.build(), (x,), [tpu_like])
    assert_device_close(tpu_like, np.tanh(x), rtol=1e-6, kind="tpu-v5e")
    with pytest.raises(AssertionError):
        assert_device_close(tpu_like, np.tanh(x), rtol=1e-6, kind="cpu")
    wrong = tpu_like.copy()
    wrong[40] *= np.float32(1.01)
    h._remember(b.build(), (x,), [wrong])
    with pytest.raises(AssertionError):
        assert_device_close(wrong, np.tanh(x), rtol=1e-6, kind="tpu-v5e")


def test_a_derived_value_is_judged_by_the_tests_last_program() -> None:
    """``got`` that is no output of :func:`run` (a reconstruction, a sum): the program the test ran last
    is judged, every output."""
    x = np.linspace(0.1, 2, 32, dtype=np.float32)
    b = xs.XlaBuilder("two")
    p = ops.Parameter(b, 0, xs.shape_from_pyval(x))
    b_comp = b.build([ops.Exp(p), ops.Log(p)])
    e, lg = run(b_comp, x)
    assert_device_close(np.exp(lg), x, rtol=1e-5, kind="tpu-v5e")  # judged: the run's exp and log
    bad = lg * np.float32(1.02)  # held: an output let go is computed again on the device
    h._remember(b_comp, (x,), [e, bad])
    with pytest.raises(AssertionError, match="by the error model of tpu-v5e:"):
        assert_device_close(np.exp(lg), x, rtol=1e-5, kind="tpu-v5e")


def test_behaviours_a_tpu_defines_otherwise_skip_with_their_row(monkeypatch: pytest.MonkeyPatch) -> None:
    h.skip_where_device_defines_otherwise("tpu-float-to-int-nan")  # the CPU: nothing to skip
    try:
        dev = xs.topology("v5e:1x1").devices[0]
    except xs.PluginError as e:
        pytest.skip(f"no libtpu: {e}")
    monkeypatch.setattr(h, "TEST_DEVICE", dev)
    with pytest.raises(pytest.skip.Exception, match="capability table, behaviour tpu-float-to-int-nan: convert of "
                       "infinities and out-of-range floats to s64 / u64: XLA:CPU gives 0 for NaN"):
        h.skip_where_device_defines_otherwise("tpu-float-to-int-nan")
    with pytest.raises(KeyError):
        h.skip_where_device_defines_otherwise("no-such-row")


def test_run_gives_c_ordered_outputs() -> None:
    """tests.helpers.run's outputs are C-contiguous (a TPU's host copy may keep the device layout's
    strides, and ``.view`` of another width needs C order); a 0-d output stays 0-d."""
    f = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    c = h._c_order(f)
    assert c.flags.c_contiguous and np.array_equal(c, f)
    s = np.asarray(np.float32(3))
    assert h._c_order(s) is s and h._c_order(s).shape == ()


def test_every_behaviour_row_is_cited_by_an_op_test() -> None:
    """A row of BEHAVIOURS exists for an op test that skips by it (no row nobody reads), and says what
    XLA:CPU gives and what the platform does."""
    from xlasdk.runtime.capabilities import BEHAVIOURS

    here = Path(__file__).resolve().parent
    text = "".join(p.read_text() for p in here.glob("test_*.py") if p.name != Path(__file__).name)
    for name, row in BEHAVIOURS.items():
        assert f'"{name}"' in text, name
        assert row.name == name and row.cpu and row.device and row.measured, row
