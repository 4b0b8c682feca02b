"""Tests of the host callbacks of xlasdk/ops/side_effects.py: ``ops.HostCallback`` and
``ops.DebugPrint`` (jaxlib's ``xla_ffi_python_cpu_callback`` with ``host_callbacks=`` at compile).

Values are checked against numpy; failures inside a callback must come back as an
``HostCallbackError`` from the call, never a crash.
"""

from __future__ import annotations

import gc
import io
import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import param
from xlasdk import ops
from xlasdk.errors import DTypeError, HostCallbackError, ShapeError

S = xs.Shape
F32 = np.float32


def f32(*dims: int) -> xs.Shape:
    return S.array_shape(F32, dims)


def test_single_result_values_and_transposed_operand() -> None:
    b = xs.XlaBuilder("cb")
    x = param(b, 0, F32, (3, 2))
    seen: list[np.ndarray[Any, Any]] = []

    def fn(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        seen.append(a)
        return np.sin(a) * 2

    y = ops.HostCallback(fn, [ops.Transpose(x, [1, 0])], f32(2, 3))
    assert y.shape == f32(2, 3)
    exe = xs.compile(b.build(y + 1.0))
    v = np.arange(6, dtype=F32).reshape(3, 2)
    np.testing.assert_allclose(exe(v).to_numpy(), np.sin(v.T) * 2 + 1, rtol=1e-6)
    (a,) = seen
    assert a.shape == (2, 3) and a.dtype == F32 and a.flags.c_contiguous
    np.testing.assert_array_equal(a, v.T)  # the operand is a copy: still valid after the call


@pytest.mark.parametrize(
    "make",
    [
        lambda a: np.asfortranarray(a * 3),  # Fortran order
        lambda a: np.ascontiguousarray(np.repeat(a * 3, 2, axis=1))[:, ::2],  # strided
        lambda a: np.ascontiguousarray((a * 3)[:, ::-1])[:, ::-1],  # negative strides
        lambda a: (a * 3).T.copy().T,  # transposed view
        lambda a: (a * 3).astype(">f4"),  # big-endian
    ],
    ids=["fortran", "strided", "reversed", "transposed", "big-endian"],
)
def test_non_contiguous_results(make: Any) -> None:
    b = xs.XlaBuilder("strided")
    x = param(b, 0, F32, (2, 3))
    exe = xs.compile(b.build(ops.HostCallback(make, [x], f32(2, 3))))
    v = np.arange(6, dtype=F32).reshape(2, 3)
    np.testing.assert_array_equal(exe(v).to_numpy(), v * 3)


def test_several_results_and_dtypes() -> None:
    b = xs.XlaBuilder("multi")
    x = param(b, 0, F32, (4,))
    n = param(b, 1, np.int32, ())

    def fn(a: np.ndarray[Any, Any], k: np.ndarray[Any, Any]) -> tuple[Any, ...]:
        return a.sum(), np.arange(4, dtype=np.int64) * int(k), a > 1

    shapes = [S.scalar_shape(F32), S.array_shape(np.int64, (4,)), S.array_shape(np.bool_, (4,))]
    r = ops.HostCallback(fn, [x, n], shapes)
    assert r.shape == S.tuple_shape(shapes)
    exe = xs.compile(b.build(r))
    s, idx, gt = exe(np.array([0, 1, 2, 3], F32), np.int32(5))
    assert s.to_numpy() == 6
    np.testing.assert_array_equal(idx.to_numpy(), np.arange(4) * 5)
    np.testing.assert_array_equal(gt.to_numpy(), [False, False, True, True])


def test_python_values_converted() -> None:
    b = xs.XlaBuilder("py")
    x = param(b, 0, F32, (2,))
    r = ops.HostCallback(lambda a: (3, [1.5, 2.5]), [x], [S.scalar_shape(np.int32), f32(2)])
    a, c = xs.compile(b.build(r))(np.zeros(2, F32))
    assert a.to_numpy() == 3 and a.dtype == np.int32
    np.testing.assert_array_equal(c.to_numpy(), [1.5, 2.5])


def test_no_operands_needs_builder_and_runs_each_call() -> None:
    calls: list[int] = []

    def fn() -> np.ndarray[Any, Any]:
        calls.append(1)
        return np.full((2,), len(calls), np.int32)

    with pytest.raises(DTypeError, match="builder="):
        ops.HostCallback(fn, [], S.array_shape(np.int32, (2,)))
    b = xs.XlaBuilder("noargs")
    r = ops.HostCallback(fn, [], S.array_shape(np.int32, (2,)), has_side_effect=True, builder=b)
    exe = xs.compile(b.build(r))
    assert list(exe().to_numpy()) == [1, 1]
    assert list(exe().to_numpy()) == [2, 2]


def test_side_effect_without_results_runs() -> None:
    log: list[float] = []
    b = xs.XlaBuilder("effect")
    x = param(b, 0, F32, (3,))
    ops.HostCallback(lambda a: log.append(float(a.sum())), [x], [])  # no results: always kept
    exe = xs.compile(b.build(x * 2.0))
    np.testing.assert_array_equal(exe(np.ones(3, F32)).to_numpy(), [2, 2, 2])
    assert log == [3.0]


def test_tokens_order_calls() -> None:
    log: list[str] = []
    b = xs.XlaBuilder("ordered")
    x = param(b, 0, F32, (2,))
    t0 = ops.CreateToken(b)
    r1 = ops.HostCallback(lambda a: (log.append("first"), a + 1)[1], [x], f32(2), token=t0)
    assert r1.shape == S.tuple_shape([f32(2), S.token_shape()])
    t1 = ops.GetTupleElement(r1, 1)
    r2 = ops.HostCallback(lambda: log.append("second"), [], [], token=t1)
    assert r2.shape == S.tuple_shape([S.token_shape()])
    r3 = ops.HostCallback(
        lambda a: (log.append("third"), (a * 2,))[1], [x], [f32(2)], token=ops.GetTupleElement(r2, 0)
    )
    out = ops.GetTupleElement(r1, 0) + ops.GetTupleElement(r3, 0)
    exe = xs.compile(b.build(out))
    np.testing.assert_array_equal(exe(np.array([1, 2], F32)).to_numpy(), [4, 7])
    assert log == ["first", "second", "third"]


def test_debug_print_values_and_order() -> None:
    out = io.StringIO()
    b = xs.XlaBuilder("dbg")
    x = param(b, 0, F32, (2, 2))
    s = ops.Reduce(b, [x], [ops.Constant(b, F32(0))], lambda a, c: a + c, [0, 1])
    ops.DebugPrint("x =\n{}", x, file=out)
    tok = ops.DebugPrint("sum={0:.3f} first={1[0]}", s, x, file=out)
    assert tok.shape == S.token_shape()
    ops.DebugPrint("done {0.shape} {0.dtype}", x, file=out)
    exe = xs.compile(b.build(x * 2.0))
    v = np.array([[1, 2], [3, 4]], F32)
    np.testing.assert_array_equal(exe(v).to_numpy(), v * 2)
    assert out.getvalue() == f"x =\n{v}\nsum=10.000 first={v[0]}\ndone (2, 2) float32\n"


def test_debug_print_to_stdout(capfd: pytest.CaptureFixture[str]) -> None:
    b = xs.XlaBuilder("stdout")
    x = param(b, 0, np.int32, (3,))
    ops.DebugPrint("x={} with spec {:03d}", x, x)
    xs.compile(b.build(x))(np.array([1, 2, 3], np.int32)).to_numpy()
    assert capfd.readouterr().out == "x=[1 2 3] with spec [001 002 003]\n"


def test_debug_print_in_while_body() -> None:
    out = io.StringIO()
    b = xs.XlaBuilder("loop")
    i0 = ops.Constant(b, np.int32(0))

    def cond(i: xs.XlaOp) -> xs.XlaOp:
        return ops.Lt(i, ops.Constant(i.builder, np.int32(3)))

    def body(i: xs.XlaOp) -> xs.XlaOp:
        ops.DebugPrint("i={}", i, file=out)
        return i + 1

    exe = xs.compile(b.build(ops.While(cond, body, i0)))
    assert exe().to_numpy() == 3
    assert out.getvalue() == "i=0\ni=1\ni=2\n"


def test_debug_print_build_errors() -> None:
    b = xs.XlaBuilder("e")
    x = param(b, 0, F32, (2,))
    with pytest.raises(ShapeError, match=r"DebugPrint: fmt '\{\} \{\}' does not format 1 operands"):
        ops.DebugPrint("{} {}", x)
    with pytest.raises(ShapeError, match="does not format"):
        ops.DebugPrint("{:q}", x)
    with pytest.raises(DTypeError, match="fmt must be a str"):
        ops.DebugPrint(b"x", x)  # type: ignore[arg-type]
    with pytest.raises(DTypeError, match="must be an XlaOp"):
        ops.DebugPrint("{}", np.ones(2))  # type: ignore[arg-type]


def test_build_errors() -> None:
    b = xs.XlaBuilder("e")
    x = param(b, 0, F32, (2,))
    with pytest.raises(DTypeError, match="fn must be callable"):
        ops.HostCallback(3, [x], f32(2))  # type: ignore[arg-type]
    with pytest.raises(DTypeError, match="operands must be a list"):
        ops.HostCallback(abs, x, f32(2))  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match="must be an array shape"):
        ops.HostCallback(abs, [x], S.tuple_shape([f32(2)]))
    with pytest.raises(ShapeError, match="static shape"):
        ops.HostCallback(abs, [x], S.array_shape(F32, (2,), dynamic_dimensions=[True]))
    with pytest.raises(ShapeError, match="must be a token"):
        ops.HostCallback(abs, [x], f32(2), token=x)
    other = param(xs.XlaBuilder("o"), 0, F32, (2,))
    with pytest.raises(ShapeError, match="belongs to builder"):
        ops.HostCallback(abs, [x, other], f32(2))
    with pytest.raises(ShapeError, match="use ops.HostCallback"):
        ops.CustomCall(b, "xla_ffi_python_cpu_callback", [x], f32(2), api_version=4, backend_config={"index": 0})


def raiser(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    raise KeyError("no such thing")


@pytest.mark.parametrize(
    ("fn", "exc", "words"),
    [
        (raiser, KeyError, "host callback 'raiser' raised KeyError: 'no such thing'"),
        (lambda a: np.zeros(5, F32), ValueError, "the result has shape (5,), expected (3,)"),
        (lambda a: np.zeros(3, np.float64), TypeError, "the result has dtype float64, expected float32"),
        (lambda a: "text", TypeError, "does not convert to float32"),
    ],
    ids=["raises", "shape", "dtype", "str"],
)
def test_callback_failures_surface(fn: Any, exc: type[BaseException], words: str) -> None:
    b = xs.XlaBuilder("fails")
    x = param(b, 0, F32, (3,))
    exe = xs.compile(b.build(ops.HostCallback(fn, [x], f32(3))))
    with pytest.raises(HostCallbackError) as ei:
        exe(np.ones(3, F32)).to_numpy()
    assert isinstance(ei.value, xs.XlaRuntimeError)
    assert "executing 'fails'" in str(ei.value) and words in str(ei.value)
    assert isinstance(ei.value.exception, exc)
    # the executable still works after a failure
    assert exe is not None


def test_wrong_result_count_and_float_to_int() -> None:
    b = xs.XlaBuilder("count")
    x = param(b, 0, F32, (3,))
    r = ops.HostCallback(lambda a: (a,), [x], [f32(3), f32(3)])
    with pytest.raises(HostCallbackError, match="returned 1 values, expected 2"):
        xs.compile(b.build(r))(np.ones(3, F32)).to_numpy()
    b = xs.XlaBuilder("kind")
    x = param(b, 0, F32, (3,))
    r = ops.HostCallback(lambda a: [0.5, 1.5, 2.5], [x], S.array_shape(np.int32, (3,)))
    with pytest.raises(HostCallbackError, match="does not convert to int32"):
        xs.compile(b.build(r))(np.ones(3, F32)).to_numpy()


def test_executable_keeps_callbacks_alive() -> None:
    b = xs.XlaBuilder("alive")
    x = param(b, 0, F32, (2,))

    class Scale:
        def __call__(self, a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
            return a * 4

    exe = xs.compile(b.build(ops.HostCallback(Scale(), [x], f32(2))))
    del b, x
    gc.collect()
    np.testing.assert_array_equal(exe(np.array([1, 2], F32)).to_numpy(), [4, 8])


def test_never_cached_nor_serialized(tmp_path: Any) -> None:
    cache = xs.CompileCache(str(tmp_path))
    b = xs.XlaBuilder("nocache")
    x = param(b, 0, F32, (2,))
    comp = b.build(ops.HostCallback(lambda a: a + 1, [x], f32(2)))
    for _ in range(2):
        exe = xs.compile(comp, cache=cache)
        np.testing.assert_array_equal(exe(np.zeros(2, F32)).to_numpy(), [1, 1])
    assert cache.hits == 0 and cache.entries() == []
    with pytest.raises(xs.XlaRuntimeError, match="cannot be serialized"):
        exe.serialize()


def test_one_callback_in_two_computations() -> None:
    b = xs.XlaBuilder("two")
    x = param(b, 0, F32, (2,))
    first = ops.HostCallback(lambda a: a + 1, [x], f32(2))
    second = ops.HostCallback(lambda a: a * 10, [x], f32(2))
    only_second = xs.compile(b.build(second))
    both = xs.compile(b.build(first + second))
    v = np.array([1, 2], F32)
    np.testing.assert_array_equal(only_second(v).to_numpy(), v * 10)
    np.testing.assert_array_equal(both(v).to_numpy(), v + 1 + v * 10)


def test_replicas_call_once_per_device() -> None:
    cl = xs.client("cpu", num_devices=2)
    seen: list[float] = []
    b = xs.XlaBuilder("rep")
    x = param(b, 0, F32, ())
    y = ops.HostCallback(lambda a: (seen.append(float(a)), a * 2)[1], [x], S.scalar_shape(F32))
    exe = xs.compile(b.build(y), cl.devices()[0], options=xs.CompileOptions(num_replicas=2))
    outs = exe.execute_replicated([[F32(1)], [F32(2)]])
    assert [float(o.to_numpy()) for o in outs] == [2.0, 4.0]  # type: ignore[union-attr]
    assert sorted(seen) == [1.0, 2.0]


def test_loaded_program_with_callback_is_refused(tmp_path: Any) -> None:
    b = xs.XlaBuilder("saved")
    x = param(b, 0, F32, (2,))
    comp = b.build(ops.HostCallback(lambda a: a, [x], f32(2)))
    path = os.path.join(str(tmp_path), "m.mlir")
    comp.save(path)
    with pytest.raises(xs.CompileError, match="Python host callbacks"):
        xs.compile(xs.load_computation(path))


def test_failure_in_subprocess_does_not_crash() -> None:
    code = textwrap.dedent(
        """
        import numpy as np, xlasdk as xs
        from xlasdk import ops
        b = xs.XlaBuilder("p")
        x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (1000,)), "x")
        exe = xs.compile(b.build(ops.HostCallback(lambda a: np.zeros(2000, np.float32), [x], x.shape)))
        for _ in range(20):
            try:
                exe(np.ones(1000, np.float32)).to_numpy()
            except xs.XlaRuntimeError:
                pass
        print("ok")
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]


def test_execution_tokens() -> None:
    out = io.StringIO()
    b = xs.XlaBuilder("tok")
    x = param(b, 0, F32, (2,))
    ops.DebugPrint("x={}", x, file=out)
    exe = xs.compile(b.build(x * 3.0))
    r, token = exe.execute_with_token(np.array([1, 2], F32))
    assert isinstance(token, xs.ExecutionToken) and token.devices == exe.devices
    assert token.block_until_ready() is token
    assert out.getvalue() == "x=[1. 2.]\n"
    np.testing.assert_array_equal(r.to_numpy(), [3, 6])  # type: ignore[union-attr]
    assert token.get_token(0).devices == exe.devices
    with pytest.raises(ShapeError, match="out of range"):
        token.get_token(1)
    with pytest.raises(ShapeError, match="arguments|expected 1"):
        exe.execute_with_token()

    cl = xs.client("cpu", num_devices=2)
    rep = xs.compile(b.build(x * 3.0), cl.devices()[0], options=xs.CompileOptions(num_replicas=2))
    outs, tok = rep.execute_replicated_with_tokens([[np.ones(2, F32)], [np.zeros(2, F32)]])
    tok.block_until_ready()
    assert [o.to_numpy().tolist() for o in outs] == [[3, 3], [0, 0]]  # type: ignore[union-attr]
    assert tok.get_token(1).devices == (rep.devices[1],)
    with pytest.raises(xs.XlaRuntimeError, match="execute_replicated_with_tokens"):
        rep.execute_with_token(np.ones(2, F32))


def test_failure_through_token() -> None:
    b = xs.XlaBuilder("tokfail")
    x = param(b, 0, F32, (2,))
    y = ops.HostCallback(raiser, [x], f32(2))
    exe = xs.compile(b.build(y))
    with pytest.raises(HostCallbackError, match="KeyError"):
        _, token = exe.execute_with_token(np.ones(2, F32))
        token.block_until_ready()
