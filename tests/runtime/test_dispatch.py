"""The generated call path of ``exe(*args)`` (xlasdk/runtime/_dispatch.py): values against numpy
on every arity it unrolls and on the loop beyond, what it declines and what the checked path then
does, and the interned array metadata its identity checks rest on."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops
from xlasdk.errors import DTypeError, ShapeError, XlaRuntimeError
from xlasdk.runtime import _device_array, _dispatch
from xlasdk.runtime import array as _array


def sum_of(n: int, dims: tuple[int, ...] = (2, 3), dtype: Any = np.float32) -> xs.Executable:
    """``p0 * 1 + p1 * 2 + ... + p{n-1} * n`` (each parameter weighted, so an argument in the
    wrong slot changes the value); n = 0 gives the constant 0."""
    b = xs.XlaBuilder(f"sum{n}")
    shape = xs.Shape.array_shape(dtype, dims)
    acc = ops.Broadcast(ops.Constant(b, np.array(0, dtype)), dims)
    for i in range(n):
        p = ops.Parameter(b, i, shape, f"p{i}")
        acc = ops.Add(acc, ops.Mul(p, ops.Broadcast(ops.Constant(b, np.array(i + 1, dtype)), dims)))
    return xs.compile(b.build(acc))


def weighted(args: list[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
    return sum((a * (i + 1) for i, a in enumerate(args)), np.zeros((2, 3), np.float32))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, _dispatch.MAX_UNROLLED, _dispatch.MAX_UNROLLED + 1, 40])
def test_every_arity_computes_the_right_values(n: int) -> None:
    exe = sum_of(n)
    # generated (not the never-taking stub) on every arity: a one-device, all-array program
    assert exe._fast is not _dispatch._never
    rng = np.random.default_rng(n)
    hosts = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(n)]
    want = weighted(hosts)
    devs = [xs.device_put(h) for h in hosts]
    mixed = [d if i % 2 else h for i, (h, d) in enumerate(zip(hosts, devs, strict=True))]
    for args in (hosts, devs, mixed):
        out = exe._fast(tuple(args))  # taken by the generated path itself
        assert isinstance(out, xs.DeviceArray)
        np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-6)
        np.testing.assert_allclose(exe(*args).to_numpy(), want, rtol=1e-6)  # type: ignore[union-attr]
    assert exe._fast(tuple(hosts[:-1]) if n else (hosts,)) is None  # a wrong count: declined


def test_tuple_outputs_are_device_arrays_with_their_own_shapes() -> None:
    b = xs.XlaBuilder("three")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2, 3)), "x")
    y = ops.Parameter(b, 1, xs.Shape.array_shape(np.int32, (4,)), "y")
    exe = xs.compile(b.build(ops.Tuple(b, [ops.Neg(x), ops.Add(y, y), ops.Reduce(
        b, [x], [ops.Constant(b, np.float32(0))], _add_f32(), [0, 1])])))
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    yv = np.array([1, -2, 3, 40], np.int32)
    for args in ((xv, yv), (xs.device_put(xv), xs.device_put(yv))):
        out = exe._fast(args)
        assert isinstance(out, tuple) and len(out) == 3
        neg, twice, total = out
        assert (neg.shape, neg.dtype, twice.shape, twice.dtype, total.shape) == ((2, 3), np.float32, (4,), np.int32, ())
        np.testing.assert_array_equal(neg.to_numpy(), -xv)
        np.testing.assert_array_equal(twice.to_numpy(), 2 * yv)
        assert total.to_numpy() == np.float32(15)
        live = xs.default_device().live_buffers()
        assert all(any(o is b for b in live) for o in out)  # registered, as DeviceArray._wrap does


def _add_f32() -> xs.XlaComputation:
    b = xs.XlaBuilder("add_f32")
    s = xs.Shape.array_shape(np.float32, ())
    ops.Add(ops.Parameter(b, 0, s), ops.Parameter(b, 1, s))
    return b.build()


def test_declined_arguments_go_through_the_checked_path_with_their_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    exe = sum_of(2)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = np.full((2, 3), 3, np.float32)
    puts: list[Any] = []
    orig_put = _array.pjrt.put

    def counting_put(*args: Any) -> Any:
        puts.append(args[0])
        return orig_put(*args)

    # a rebuilt call path with a counting put: nothing is put before every argument passed
    monkeypatch.setattr(_dispatch.pjrt, "put", counting_put)
    fast = _dispatch.fast_call(exe._plan, exe._run)
    for bad in (a.astype(np.float64), a.reshape(3, 2), a.astype(">f4"), a.view(np.matrix), 1.5, a.tolist()):
        assert fast((a, bad)) is None
        assert puts == []
    assert fast((a, c)) is not None and len(puts) == 2
    # what the generated path declines, the checked path converts (a big-endian array, a matrix)
    np.testing.assert_array_equal(exe(a, c.astype(">f4")).to_numpy(), a + 2 * c)  # type: ignore[union-attr]
    np.testing.assert_array_equal(exe(a.view(np.matrix), c).to_numpy(), a + 2 * c)  # type: ignore[union-attr]
    # ... or refuses, naming the argument
    with pytest.raises(ShapeError, match=r"argument 1 \('p1'\) is f32\[3,2\], expected f32\[2,3\]"):
        exe(a, c.reshape(3, 2))
    with pytest.raises(DTypeError, match=r"argument 0 \('p0'\) is f64\[2,3\], expected f32\[2,3\]"):
        exe(a.astype(np.float64), c)
    d = xs.device_put(c)
    d.delete()
    assert exe._fast((a, d)) is None
    with pytest.raises(XlaRuntimeError, match="deleted"):
        exe(a, d)


def test_a_device_array_of_another_device_or_meta_object_still_runs() -> None:
    exe = sum_of(2)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = np.full((2, 3), 3, np.float32)
    other = xs.client("cpu", num_devices=2).devices()[1]
    far = xs.device_put(c, other)
    assert exe._fast((a, far)) is None  # another device: moved by the checked path
    np.testing.assert_array_equal(exe(a, far).to_numpy(), a + 2 * c)  # type: ignore[union-attr]
    # After the interning table is cleared, arrays made before it hold meta objects that are not
    # the plan's: the generated path declines them and the checked path compares the fields.
    near = xs.device_put(c)
    table = near.device._metas
    saved = dict(table)
    table.clear()
    try:
        fresh = xs.device_put(c)
        assert fresh._meta is not near._meta
        assert (fresh._meta.dtype, fresh._meta.shape) == (near.dtype, near.shape)
        assert exe._fast((a, fresh)) is None  # not the plan's record: declined
        assert exe._fast((a, near)) is not None  # made before: the plan's record
        for arg in (near, fresh):
            np.testing.assert_array_equal(exe(a, arg).to_numpy(), a + 2 * c)  # type: ignore[union-attr]
    finally:
        table.update(saved)


def test_meta_is_interned_per_device_dtype_and_shape() -> None:
    d = xs.default_device()
    x = xs.device_put(np.zeros((2, 3), np.float32))
    y = xs.device_put(np.ones((2, 3), np.float32))
    z = xs.device_put(np.ones((3, 2), np.float32))
    w = xs.device_put(np.ones((2, 3), np.int32))
    assert x._meta is y._meta is _array._meta_of(d, np.dtype(np.float32), (2, 3))
    assert z._meta is not x._meta and w._meta is not x._meta
    assert (x._meta.dtype, x._meta.shape) == (np.float32, (2, 3))
    # per device: the same dtype and shape on another device is another record
    other = xs.client("cpu", num_devices=2).devices()[1]
    assert xs.device_put(np.zeros((2, 3), np.float32), other)._meta is not x._meta
    # how each reads back on CPU: the buffer protocol, else DLPack (jaxlib's copy where that fails)
    import ml_dtypes

    assert x._meta.readback == _array._READ_BUFFER
    for dtype in (ml_dtypes.bfloat16, ml_dtypes.int4):
        v = np.array([1, -2, 3], dtype)
        a = xs.device_put(v)
        assert a._meta.readback == _array._READ_DLPACK
        np.testing.assert_array_equal(a.to_numpy().astype(np.float32), [1, -2, 3])


def test_every_path_that_makes_an_array_sets_every_slot_alike() -> None:
    """DeviceArray's slots are written once (``_device_array._SLOTS``): the class's ``__slots__``,
    ``_wrap`` (device_put, the checked call path) and the generated call path are made from it, so
    each path sets every slot, to the same values for the same result."""
    slots = [s for s in xs.DeviceArray.__slots__ if s != "__weakref__"]
    assert slots == [s for s, _ in _device_array._SLOTS]
    exe = sum_of(1)
    host = np.ones((2, 3), np.float32)
    fast = exe._fast((host,))
    checked = exe._call_checked((host,))
    put = xs.device_put(host * 2)
    made = {"generated": fast, "checked": checked, "device_put": put}
    for path, a in made.items():
        assert isinstance(a, xs.DeviceArray)
        missed = [s for s in slots if not hasattr(a, s)]  # an unset slot raises AttributeError
        assert not missed, f"the {path} path leaves {missed} unset"
    for s in slots:
        if s == "_arr":
            continue
        want = getattr(checked, s)
        assert all(getattr(a, s) is want or getattr(a, s) == want for a in made.values()), s
    assert fast._meta is checked._meta is put._meta  # interned: the call path's identity check
    assert fast._host is None and fast._exported is False
    np.testing.assert_array_equal(fast.to_numpy(), checked.to_numpy())


def test_init_slots_refuses_an_input_a_device_array_does_not_have() -> None:
    assert _device_array.init_slots("x", arr="outs[0]")[0] == "x._arr = outs[0]"
    with pytest.raises(ValueError, match="shap"):
        _device_array.init_slots("x", shap="s")

