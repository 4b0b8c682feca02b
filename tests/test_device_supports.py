"""``xs.capabilities(device).supports(what)``: whether a device's compiler takes a computation, an op or an
element type, by its capability table (``xs.capabilities``), without compiling; the answer agrees with what
``xs.compile`` does for the same device (refused with the same words, or compiled). With the compile-only
TPU v5e (and v4) devices of ``xs.topology`` and the CPU."""

from __future__ import annotations

import numpy as np
import pytest

import xlasdk as xs
from tests.test_capabilities import P, S, _lapack, _libtpu_or_skip, _rng, _unary
from xlasdk import ops


def _f32_add() -> xs.XlaComputation:
    return _unary(P.F32, (8, 128), lambda x: ops.Add(x, x))


def test_computation_on_a_tpu_agrees_with_compile() -> None:
    dev = _libtpu_or_skip()
    bad = _rng(P.F64)
    answer = xs.capabilities(dev).supports(bad)
    assert not answer and answer.supported is False
    assert [r.row.name for r in answer.refusals] == ["tpu-rng-f64"]
    what = answer.refusals[0].row.what  # "an f64 rng"
    assert "f64 rng" in what and answer.reason.startswith(f"{what} is not supported on TPU v5e"), answer.reason
    assert str(answer).startswith(f"computation 'probe' is not supported on TPU v5e: {what}"), str(answer)
    with pytest.raises(xs.UnsupportedOnDeviceError) as e:
        xs.compile(bad, device=dev)
    assert answer.reason in str(e.value)
    good = xs.capabilities(dev).supports(_f32_add())
    assert good and good.reasons == () and str(good) == "computation 'probe' is supported on TPU v5e"
    assert isinstance(xs.compile(_f32_add(), device=dev), xs.CompileOnlyExecutable)


def test_supports_compiles_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    dev = _libtpu_or_skip()
    import xlasdk._jaxlib.isolated as isolated

    def no_worker(*args: object, **kwargs: object) -> None:
        raise AssertionError("supports asked the worker (a compile)")

    monkeypatch.setattr(isolated, "request", no_worker)
    assert not xs.capabilities(dev).supports(_rng(P.F64))
    assert xs.capabilities(dev).supports(_f32_add())
    assert xs.capabilities(dev).supports(np.float32)


def test_lapack_calls_are_judged_as_compile_lowers_them() -> None:
    """A LAPACK call is lowered for the TPU by xs.compile: the device takes the program; asked about
    the program as written, the table refuses the call."""
    dev = _libtpu_or_skip()
    assert xs.capabilities(dev).supports(_lapack())
    as_written = xs.capabilities(dev).supports(_lapack(), as_written=True)
    assert not as_written and [r.row.name for r in as_written.refusals] == ["tpu-lapack"]


def test_an_op() -> None:
    dev = _libtpu_or_skip()
    b = xs.XlaBuilder("ops")
    r64 = ops.RngUniform(ops.Constant(b, np.float64(0)), ops.Constant(b, np.float64(1)), S(P.F64, (4,)))
    r32 = ops.RngUniform(ops.Constant(b, np.float32(0)), ops.Constant(b, np.float32(1)), S(P.F32, (4,)))
    answer = xs.capabilities(dev).supports(r64)
    assert not answer and "f64 rng" in answer.reason and str(answer).startswith("op stablehlo.rng -> f64[4]")
    assert xs.capabilities(dev).supports(r32)
    assert xs.capabilities(xs.devices("cpu")[0]).supports(r64)


def test_element_types() -> None:
    v5e = _libtpu_or_skip()
    f64 = xs.capabilities(v5e).supports(np.float64)
    assert f64  # XLA:TPU compiles f64 arithmetic (its X64 rewriter); some ops of it it refuses:
    assert {"tpu-rng-f64", "tpu-fft-x64", "tpu-reduce-precision-f64"} <= {r.name for r in f64.limits}
    assert "except: " in str(f64) and "f64 rng" in str(f64)
    assert xs.capabilities(v5e).supports("bf16") and not xs.capabilities(v5e).supports("bf16").limits
    s2 = xs.capabilities(v5e).supports("s2")
    assert s2 and [r.name for r in s2.limits] == ["tpu-int2-tile"]  # only small tiles of it
    v4 = _libtpu_or_skip("v4:2x2x1")
    no = xs.capabilities(v4).supports(P.S2)
    assert not no and no.limits[0].name == "tpu-int2-v4"
    assert no.reason.startswith(f"{no.limits[0].what} is not supported on TPU v4"), no.reason


def test_cpu_supports_everything_the_table_knows() -> None:
    cpu = xs.devices("cpu")[0]
    for what in (_rng(P.F64), _lapack(), np.float64, "s2", P.C128):
        answer = xs.capabilities(cpu).supports(what)
        assert answer and answer.limits == () and answer.device == "cpu", what


@pytest.mark.parametrize("what", [3, None, "foo", object()])
def test_not_a_computation_op_or_type(what: object) -> None:
    with pytest.raises(xs.DTypeError, match="supports: expected an XlaComputation, an XlaOp or an element type"):
        xs.capabilities(xs.devices("cpu")[0]).supports(what)
