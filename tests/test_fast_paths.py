"""The fast paths are taken (issue 5): dispatch does no repeated set-up, readback needs no
``import jax``, and graph building / emission does a constant amount of work per op.

No timing assertions: each test counts work (objects made, functions called, imports tried,
lines executed), so a regression shows without a stopwatch. The speed itself is measured by
``bench/run_all.py``.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops
from xlasdk._jaxlib import mlir as _mlir
from xlasdk._jaxlib import pjrt
from xlasdk.errors import DTypeError, ShapeError, XlaRuntimeError
from xlasdk.runtime import _arguments as _executable
from xlasdk.shape import Shape

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _binary_exe(dtype: Any, dims: tuple[int, ...], op: Callable[[Any, Any], Any] = ops.Add) -> xs.Executable:
    b = xs.XlaBuilder("binary")
    s = Shape.array_shape(dtype, dims)
    op(ops.Parameter(b, 0, s, "a"), ops.Parameter(b, 1, s, "b"))
    return xs.compile(b.build())


@pytest.fixture(scope="module")
def add_exe() -> xs.Executable:
    return _binary_exe(np.float32, (2, 3))


def one(out: xs.DeviceArray | tuple[xs.DeviceArray, ...]) -> xs.DeviceArray:
    assert isinstance(out, xs.DeviceArray)
    return out


def pair(out: xs.DeviceArray | tuple[xs.DeviceArray, ...]) -> tuple[xs.DeviceArray, ...]:
    assert isinstance(out, tuple)
    return out


A = np.arange(6, dtype=np.float32).reshape(2, 3)
B = np.full((2, 3), 0.25, np.float32)


@contextlib.contextmanager
def counting() -> Iterator[dict[str, int]]:
    """Within: per-executable set-up fails, and the slow routes for arguments, avals, result
    handlers and readback are counted (compile first, then call inside)."""
    counts = {"to_buffer": 0, "aval": 0, "handler": 0, "readback": 0}

    def forbid(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a call built per-executable data again")

    orig_to_buffer = _executable._ParamSpec.to_buffer
    orig_aval_init = pjrt.Aval.__init__
    orig_handler = pjrt.result_handler
    orig_readback = pjrt.array_to_numpy

    def to_buffer(self: Any, *args: Any) -> Any:
        counts["to_buffer"] += 1
        return orig_to_buffer(self, *args)

    def aval_init(self: Any, *args: Any) -> None:
        counts["aval"] += 1
        orig_aval_init(self, *args)

    def handler(*args: Any) -> Any:
        counts["handler"] += 1
        return orig_handler(*args)

    def readback(arr: Any) -> Any:
        counts["readback"] += 1
        return orig_readback(arr)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_executable._ParamSpec, "__init__", forbid)
        mp.setattr(_executable._CallPlan, "__init__", forbid)
        mp.setattr(_executable._ParamSpec, "to_buffer", to_buffer)
        mp.setattr(pjrt.Aval, "__init__", aval_init)
        mp.setattr(pjrt, "result_handler", handler)
        mp.setattr(pjrt, "array_to_numpy", readback)
        yield counts


# -- dispatch -------------------------------------------------------------------------------------
def test_repeat_calls_take_the_fast_path(add_exe: xs.Executable) -> None:
    da, db = xs.device_put(A), xs.device_put(B)
    plan = add_exe._plan
    with counting() as no_setup:
        for _ in range(10):
            np.testing.assert_array_equal(one(add_exe(A, B)).to_numpy(), A + B)
            np.testing.assert_array_equal(one(add_exe(da, db)).block_until_ready().to_numpy(), A + B)
            np.testing.assert_array_equal(one(add_exe(A, db)).to_numpy(), A + B)  # mixed
    assert add_exe._plan is plan
    # no argument went through the checking/converting route, no aval or result handler was
    # made, and no result was read back through the slow (jax-importing) route
    assert no_setup == {"to_buffer": 0, "aval": 0, "handler": 0, "readback": 0}


def test_unusual_arguments_leave_the_fast_path_and_are_still_checked(add_exe: xs.Executable) -> None:
    strided = np.arange(12, dtype=np.float32).reshape(2, 6)[:, ::2]
    fortran = np.asfortranarray(A)
    # (argument, goes through the checking route?)
    cases = [
        (strided, False),  # any layout of the right dtype and shape is put directly
        (fortran, False),
        (A.astype(">f4"), True),  # non-native byte order: converted
        (A.view(np.matrix), True),  # an ndarray subclass
        (A.tolist(), True),  # rejected below
    ]
    for arg, slow in cases[:-1]:
        with counting() as counts:
            np.testing.assert_array_equal(one(add_exe(arg, B)).to_numpy(), np.asarray(arg) + B)
        assert counts["to_buffer"] == int(slow), arg
    with pytest.raises(DTypeError, match=r"argument 0 \('a'\) is a list"):
        add_exe(cases[-1][0], B)
    # shape and dtype checks stay on the fast path's doorstep (XLA accepts equal byte sizes)
    with pytest.raises(ShapeError, match=r"argument 1 \('b'\) is f32\[3,2\], expected f32\[2,3\]"):
        add_exe(A, B.reshape(3, 2))
    with pytest.raises(DTypeError, match=r"argument 0 \('a'\) is s32\[2,3\], expected f32\[2,3\]"):
        add_exe(A.view(np.int32), B)
    with pytest.raises(ShapeError, match=r"expected 2 arguments \(a: f32\[2,3\], b: f32\[2,3\]\), got 1"):
        add_exe(A)
    d6 = xs.device_put(np.zeros(6, np.float32))
    with pytest.raises(ShapeError, match=r"argument 0 \('a'\) is a DeviceArray f32\[6\]"):
        add_exe(d6, B)
    gone = xs.device_put(A)
    gone.delete()
    with pytest.raises(XlaRuntimeError, match=r"argument 0 \('a'\) is a deleted DeviceArray"):
        add_exe(gone, B)


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.int32, np.uint8, np.int64, np.bool_, np.complex64, np.float16]
)
def test_fast_path_values_across_dtypes(dtype: Any) -> None:
    exe = _binary_exe(dtype, (3, 4), ops.Mul if dtype is np.bool_ else ops.Add)
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((3, 4)) * 10).astype(dtype)
    y = (rng.standard_normal((3, 4)) * 10).astype(dtype)
    want = np.logical_and(x, y) if dtype is np.bool_ else x + y
    dx, dy = xs.device_put(x), xs.device_put(y)
    with counting() as counts:
        for _ in range(3):
            np.testing.assert_array_equal(one(exe(x, y)).to_numpy(), want)
            np.testing.assert_array_equal(one(exe(dx, dy)).to_numpy(), want)
    # no argument was converted, and the buffer-protocol readback served every dtype here
    assert counts == {"to_buffer": 0, "aval": 0, "handler": 0, "readback": 0}


def test_tuple_result_fast_path() -> None:
    b = xs.XlaBuilder("pair")
    s = Shape.array_shape(np.int32, (4,))
    x, y = ops.Parameter(b, 0, s, "x"), ops.Parameter(b, 1, s, "y")
    exe = xs.compile(b.build([ops.Add(x, y), ops.Mul(x, y)]))
    xv = np.arange(4, dtype=np.int32)
    yv = np.array([3, -1, 7, 2], np.int32)
    with counting() as counts:
        for _ in range(3):
            s_, p_ = pair(exe(xv, yv))
            np.testing.assert_array_equal(s_.to_numpy(), xv + yv)
            np.testing.assert_array_equal(p_.to_numpy(), xv * yv)
    assert counts == {"to_buffer": 0, "aval": 0, "handler": 0, "readback": 0}


# -- readback -------------------------------------------------------------------------------------
def test_to_numpy_reads_through_the_buffer_protocol_and_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    views: list[Any] = []
    orig = pjrt.host_view

    def host_view(arr: Any) -> Any:
        v = orig(arr)
        views.append(v)
        return v

    def no_slow_readback(arr: Any) -> Any:
        raise AssertionError("slow readback used")

    monkeypatch.setattr(pjrt, "host_view", host_view)
    monkeypatch.setattr(pjrt, "array_to_numpy", no_slow_readback)
    x = np.arange(1 << 12, dtype=np.float32).reshape(64, 64)
    a = xs.device_put(x)
    v = a.to_numpy()
    assert a.to_numpy() is v and np.asarray(a) is v  # cached: one readback
    assert len(views) == 1
    assert not v.flags.writeable  # read-only, as before
    np.testing.assert_array_equal(v, x)
    np.testing.assert_array_equal(np.array(a), x)
    w = np.array(a)
    w[0, 0] = -1  # np.array is a writable copy
    assert a.to_numpy()[0, 0] == 0
    a.delete()
    junk = [xs.device_put(np.full((64, 64), 7, np.float32)) for _ in range(4)]
    np.testing.assert_array_equal(v, x)  # the view keeps its memory after delete
    with pytest.raises(XlaRuntimeError, match="deleted"):
        a.to_numpy()
    del junk


def test_results_read_back_correctly_while_still_computing() -> None:
    # exe() returns before XLA finishes; the buffer-protocol readback must wait for the value.
    n = 256
    b = xs.XlaBuilder("mm")
    s = Shape.array_shape(np.float32, (n, n))
    p = ops.Parameter(b, 0, s, "p")
    y = p
    for _ in range(6):
        y = ops.Dot(y, p)
    exe = xs.compile(b.build(ops.Tanh(y)))
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((n, n)) / n).astype(np.float32)
    want = np.tanh(np.linalg.matrix_power(x.astype(np.float64), 7))
    outs = [one(exe(x)) for _ in range(4)]  # several in flight
    for o in outs:
        np.testing.assert_allclose(o.to_numpy(), want, rtol=1e-3, atol=1e-6)


def test_types_outside_the_buffer_protocol_use_the_jaxlib_readback() -> None:
    for dt in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.int4):
        x = np.array([[1, 2, 3], [-4, 5, -6]]).astype(dt)
        a = xs.device_put(x)
        assert pjrt.host_view(a._arr) is None  # the buffer protocol refuses them
        v = a.to_numpy()
        assert v.dtype == np.dtype(dt) and not v.flags.writeable
        np.testing.assert_array_equal(v.astype(np.float32), x.astype(np.float32))
        assert a.to_numpy() is v


def test_replicated_sharding_answer_is_built_once() -> None:
    if "jax" in sys.modules:
        pytest.skip("jax installs its own _to_xla_hlo_sharding")
    from jaxlib import xla_client as xc

    s = xs.devices()[0]._sharding
    assert isinstance(s, xc.SingleDeviceSharding)
    assert s._to_xla_hlo_sharding(2) is s._to_xla_hlo_sharding(3) is pjrt._REPLICATED


# -- no hidden `import jax` -----------------------------------------------------------------------
def test_hot_paths_attempt_no_jax_import() -> None:
    # In a fresh process (jax not imported, whether or not it is installed): the dispatch and
    # readback fast paths must not make jaxlib look for jax at all (each failed look-up costs
    # ~70 us). An import hook counts every look-up of a jax module.
    code = textwrap.dedent(
        """
        import sys, importlib.abc
        import numpy as np
        import xlasdk as xs
        from xlasdk import ops
        assert "jax" not in sys.modules
        seen = []
        class Recorder(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name == "jax" or name.startswith("jax."):
                    seen.append(name)
                return None
        b = xs.XlaBuilder("f")
        s = xs.Shape.array_shape(np.float32, (2, 3))
        ops.Mul(ops.Add(ops.Parameter(b, 0, s, "a"), ops.Parameter(b, 1, s, "b")), 2.0)
        exe = xs.compile(b.build())
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        sys.meta_path.insert(0, Recorder())
        da = xs.device_put(a)
        total = 0.0
        for _ in range(20):
            total += float(exe(a, a).to_numpy().sum())
            total += float(exe(da, da).block_until_ready().to_numpy().sum())
            total += float(xs.device_put(a).to_numpy().sum())
            total += float(np.asarray(exe(da, a)).sum())
        assert total == 20 * (60.0 + 60.0 + 15.0 + 60.0), total
        # element types outside the buffer protocol read back through DLPack, not jaxlib's
        # readback (which imports all of jax, 0.35-0.5 s, when jax is installed)
        import ml_dtypes
        for t in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2):
            bt = xs.XlaBuilder("neg")
            ops.Neg(ops.Parameter(bt, 0, xs.Shape.array_shape(np.dtype(t), (2, 3)), "x"))
            h = np.arange(6).reshape(2, 3).astype(t)
            got = xs.compile(bt.build())(h).to_numpy()
            assert got.dtype == np.dtype(t) and (got.astype(np.float32) == -np.arange(6.0).reshape(2, 3)).all()
        print("LOOKUPS", seen)
        print("JAX_IMPORTED", "jax" in sys.modules)
        """
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "LOOKUPS []" in r.stdout, r.stdout
    assert "JAX_IMPORTED False" in r.stdout, r.stdout


# -- graph building and emission: constant work per op --------------------------------------------
def _count_lines(fn: Callable[[], Any]) -> int:
    """Python lines executed by ``fn()`` (any quadratic Python loop shows up here)."""
    n = 0

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        nonlocal n
        if event == "line":
            n += 1
        return tracer

    gc.collect()
    gc.disable()  # finalizers of other tests' garbage would run (and count) at random points
    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
        gc.enable()
    return n


def _chain(n: int) -> tuple[xs.XlaBuilder, Any]:
    b = xs.XlaBuilder(f"chain{n}")
    x = ops.Parameter(b, 0, Shape.array_shape(np.float32, (8,)), "x")
    y = x
    for i in range(n):
        y = ops.Add(y, x) if i % 2 == 0 else ops.Mul(y, x)
    return b, y


def test_building_does_constant_work_per_op() -> None:
    _chain(10)  # imports and first-call set-up
    lines = {n: _count_lines(functools.partial(_chain, n)) for n in (200, 400, 800, 1600)}
    per_op = [(lines[2 * n] - lines[n]) / n for n in (200, 400, 800)]
    assert per_op[0] == per_op[1] == per_op[2], (lines, per_op)
    assert per_op[0] <= 60, per_op  # a few dozen lines per op: operand check, shape, location, _add
    b, y = _chain(1000)
    assert len(b._loc_cache) == 2  # one location per user line (Parameter's, the loop's), not per op


def test_emitting_does_constant_work_per_op() -> None:
    comps = {n: _chain(n)[0].build() for n in (200, 400, 800, 1600)}
    comps[200]._mlir_module_text()
    lines = {n: _count_lines(c._mlir_module_text) for n, c in comps.items() if n != 200}
    lines[200] = _count_lines(_chain(200)[0].build()._mlir_module_text)
    per_op = [(lines[2 * n] - lines[n]) / n for n in (200, 400, 800)]
    assert per_op[0] == per_op[1] == per_op[2], (lines, per_op)
    text = comps[1600]._mlir_module_text()
    assert text.count('"stablehlo.add"') == 800 and text.count('"stablehlo.multiply"') == 800


# -- HLO conversion from the parsed module ---------------------------------------------------------
def test_parsed_module_to_hlo_matches_the_text_route() -> None:
    b = xs.XlaBuilder("mixed")
    x = ops.Parameter(b, 0, Shape.array_shape(np.float32, (4, 3)), "x")
    i = ops.Parameter(b, 1, Shape.array_shape(np.int32, (3,)), "i")
    with b.op_metadata(op_name="scaled"):
        y = ops.Mul(x, 2.0)
    total = ops.Reduce(b, y, ops.Constant(b, np.float32(0)), lambda p, q: ops.Add(p, q), [0])
    comp = b.build([ops.Add(total, ops.ConvertElementType(i, np.float32)), ops.Tanh(x)])
    text = comp._mlir_module_text()
    via_text = _mlir.hlo_text(_mlir.module_to_hlo(text))
    via_module = _mlir.hlo_text(_mlir.parsed_module_to_hlo(_mlir.parse_module(text)))
    assert via_module == via_text
    assert 'op_name="scaled"' in via_module and "test_fast_paths.py" in via_module  # locations kept
    assert comp._converted_hlo_text() == via_text  # the converter route of as_hlo_text()
