"""Interop of buffers (native API): host buffer semantics and zero-copy, the buffer protocol,
DLPack both ways (numpy, torch, jax), lifetimes, live buffers, and the guarded jaxlib faults.

Zero-copy is checked by pointer equality (``unsafe_buffer_pointer()`` against the producer's data
pointer) and by writes through one side showing on the other.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import weakref
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops
from xlasdk.errors import DTypeError, XlaRuntimeError

ZC = xs.HostBufferSemantics.ZERO_COPY
DELETED = r"BlockHostUntilReady\(\) called on deleted or donated buffer"

# Every element type DLPack carries that numpy and XLA share, plus the ml_dtypes ones.
NUMPY_DLPACK_DTYPES = [
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128,
]
ALL_DTYPES = [*NUMPY_DLPACK_DTYPES, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2]


def sample(dtype: Any, shape: tuple[int, ...] = (4, 8)) -> np.ndarray[Any, Any]:
    n = int(np.prod(shape))
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return (np.arange(n) % 3 == 0).reshape(shape)
    if dt.kind == "c":
        return (np.arange(n) + 1j * np.arange(n)[::-1]).astype(dt).reshape(shape)
    return (np.arange(n) % 13).astype(dt).reshape(shape)


def aligned_copy(x: np.ndarray[Any, Any], offset: int = 0) -> np.ndarray[Any, Any]:
    """``x`` copied to memory at ``offset`` bytes past a 64-byte boundary."""
    raw = xs.aligned_empty(x.nbytes + offset, np.uint8)
    out: np.ndarray[Any, Any] = raw[offset : offset + x.nbytes].view(x.dtype).reshape(x.shape)
    out[...] = x
    return out


def run_child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )


# -- aligned_empty ----------------------------------------------------------------------------
@pytest.mark.parametrize("alignment", [64, 128, 4096])
def test_aligned_empty(alignment: int) -> None:
    for shape in [(3, 5), (0,), (), (1000,)]:
        x = xs.aligned_empty(shape, np.float32, alignment=alignment)
        assert x.shape == shape and x.dtype == np.float32
        assert x.size == 0 or x.ctypes.data % alignment == 0  # (an empty array has no data)
        assert x.flags.c_contiguous and x.flags.writeable
    assert xs.aligned_empty(7, ml_dtypes.bfloat16).dtype == ml_dtypes.bfloat16
    for bad in (0, 3, 48, -64):
        with pytest.raises(ValueError, match="power of two"):
            xs.aligned_empty((2,), alignment=bad)
    with pytest.raises(ValueError, match="negative"):
        xs.aligned_empty((2, -1))


# -- host buffer semantics ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_zero_copy_aliases_aligned_data(dtype: Any) -> None:
    x = aligned_copy(sample(dtype))
    a = xs.device_put(x, semantics=ZC)
    assert a.unsafe_buffer_pointer() == x.ctypes.data
    assert a.dtype == np.dtype(dtype) and a.shape == x.shape
    assert np.array_equal(a.to_numpy(), x)
    x.flat[1] = x.flat[0]  # a write to the numpy array shows in the device array
    assert a.to_numpy().flat[1] == x.flat[0]


def test_zero_copy_of_4bit_types_copies() -> None:
    x = aligned_copy(np.arange(16).astype(ml_dtypes.int4))
    a = xs.device_put(x, semantics=ZC)
    assert a.unsafe_buffer_pointer() != x.ctypes.data
    assert np.array_equal(a.to_numpy(), x)


@pytest.mark.parametrize("offset", [4, 8, 16, 32, 48])
def test_zero_copy_of_unaligned_data_copies(offset: int) -> None:
    x = aligned_copy(np.arange(64, dtype=np.float32), offset)
    a = xs.device_put(x, semantics=ZC)
    assert a.unsafe_buffer_pointer() != x.ctypes.data
    x[0] = 99
    assert a.to_numpy()[0] == 0  # a copy: the write does not show


def test_zero_copy_of_non_contiguous_copies() -> None:
    base = aligned_copy(np.arange(64, dtype=np.float32).reshape(8, 8))
    for x in (base[:, ::2], base.T, np.asfortranarray(base)):
        a = xs.device_put(x, semantics=ZC)
        assert a.unsafe_buffer_pointer() != x.ctypes.data
        assert np.array_equal(a.to_numpy(), x)


@pytest.mark.parametrize(
    "semantics",
    [xs.HostBufferSemantics.IMMUTABLE_ONLY_DURING_CALL, xs.HostBufferSemantics.IMMUTABLE_UNTIL_TRANSFER_COMPLETES],
)
def test_copying_semantics_copy_aligned_data(semantics: xs.HostBufferSemantics) -> None:
    x = aligned_copy(np.arange(256, dtype=np.float32))
    a = xs.device_put(x, semantics=semantics)
    assert a.unsafe_buffer_pointer() != x.ctypes.data
    a.block_until_ready()
    x[0] = -1
    assert a.to_numpy()[0] == 0
    assert np.array_equal(xs.device_put(x).to_numpy(), x)  # the default copies too
    assert xs.device_put(x).unsafe_buffer_pointer() != x.ctypes.data


def test_force_copy_and_semantics_names() -> None:
    x = aligned_copy(np.arange(256, dtype=np.float32))
    assert xs.device_put(x, semantics=ZC, force_copy=True).unsafe_buffer_pointer() != x.ctypes.data
    assert xs.device_put(x, semantics="ZERO_COPY").unsafe_buffer_pointer() == x.ctypes.data  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown host buffer semantics"):
        xs.device_put(x, semantics="ALIAS")  # type: ignore[arg-type]
    a = xs.device_put(x)
    assert xs.device_put(a) is a
    b = xs.device_put(a, force_copy=True)
    assert b is not a and b.unsafe_buffer_pointer() != a.unsafe_buffer_pointer()


def test_zero_copy_keeps_the_numpy_array_alive() -> None:
    x = aligned_copy(np.arange(1 << 12, dtype=np.float32))
    owner = weakref.ref(x.base.base if x.base.base is not None else x.base)  # the raw allocation
    a = xs.device_put(x, semantics=ZC)
    ptr = x.ctypes.data
    del x
    gc.collect()
    assert owner() is not None
    junk = [np.full(1 << 12, 7, np.float32) for _ in range(16)]
    assert a.unsafe_buffer_pointer() == ptr
    assert np.array_equal(a.to_numpy(), np.arange(1 << 12, dtype=np.float32))
    del a, junk
    gc.collect()
    # jaxlib holds the last zero-copied host array until its next transfer: released by then
    xs.device_put(np.zeros(1, np.float32))
    gc.collect()
    assert owner() is None


def test_zero_copy_argument_runs() -> None:
    b = xs.XlaBuilder("scale")
    p = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (1024,)), "x")
    exe = xs.compile(b.build(ops.Mul(p, ops.Constant(b, np.float32(2)))))
    x = aligned_copy(np.arange(1024, dtype=np.float32))
    a = xs.device_put(x, semantics=ZC)
    assert np.array_equal(exe(a).to_numpy(), 2 * x)
    x[:] = 1  # the next run sees the new data
    assert np.array_equal(exe(a).to_numpy(), np.full(1024, 2, np.float32))


# -- buffer protocol ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", NUMPY_DLPACK_DTYPES, ids=lambda d: np.dtype(d).name)
def test_asarray_is_a_view_without_copy(dtype: Any) -> None:
    x = sample(dtype)
    a = xs.device_put(x)
    v = np.asarray(a)
    assert v.ctypes.data == a.unsafe_buffer_pointer()
    assert not v.flags.writeable
    assert np.array_equal(v, x)
    w = np.array(a)  # copy=True: writable and separate
    assert w.flags.writeable and w.ctypes.data != a.unsafe_buffer_pointer()


def test_asarray_of_zero_copy_array_is_the_numpy_memory() -> None:
    x = aligned_copy(np.arange(64, dtype=np.float32))
    a = xs.device_put(x, semantics=ZC)
    assert np.asarray(a).ctypes.data == x.ctypes.data


# -- lifetime, errors, is_ready, clone, live buffers -------------------------------------------
def test_deleted_array_error_keeps_the_former_wording() -> None:
    a = xs.device_put(np.ones(3, np.float32))
    a.delete()
    for use in (a.block_until_ready, a.to_numpy, a.unsafe_buffer_pointer, a.is_ready, a.clone):
        with pytest.raises(XlaRuntimeError, match=DELETED) as e:
            use()
        assert "f32[3]" in str(e.value) and "deleted" in str(e.value)


def test_is_ready() -> None:
    a = xs.device_put(np.ones(3, np.float32)).block_until_ready()
    assert a.is_ready() is True


def test_is_ready_of_deleted_array_raises_in_a_child_process() -> None:
    # jaxlib's ArrayImpl.is_ready() on a deleted array segfaults; xlasdk raises instead.
    r = run_child(
        """
        import numpy as np, xlasdk as xs
        a = xs.device_put(np.ones(3, np.float32)); a.delete()
        try:
            a.is_ready()
        except xs.XlaRuntimeError as e:
            print("raised", e)
        """
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "raised" in r.stdout and "BlockHostUntilReady() called on deleted or donated buffer" in r.stdout


def test_clone_is_an_independent_copy() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = xs.device_put(x)
    c = a.clone()
    assert c is not a and c.device == a.device and c.shape == a.shape and c.dtype == a.dtype
    assert c.unsafe_buffer_pointer() != a.unsafe_buffer_pointer()
    a.delete()
    assert np.array_equal(c.to_numpy(), x)


def test_live_buffers() -> None:
    dev = xs.default_device()
    a = xs.device_put(np.ones(3, np.float32))
    b = xs.device_put(np.zeros(2, np.int32))
    live = dev.live_buffers()
    assert live[0] is b and live[1] is a  # newest first
    a.delete()
    assert all(x is not a for x in dev.live_buffers())
    ref = weakref.ref(b)
    del b, live
    gc.collect()
    assert ref() is None


def test_live_buffers_hold_the_outputs_of_every_call_path() -> None:
    # the fast path of exe(*args) (one output, device-resident or numpy arguments) and the
    # checking path (a Python scalar) both register their output
    dev = xs.default_device()
    bld = xs.XlaBuilder("twice")
    ops.Mul(ops.Parameter(bld, 0, xs.Shape.array_shape(np.float32, (3,)), "x"), ops.Constant(bld, np.float32(2)))
    exe = xs.compile(bld.build())
    x = np.arange(3, dtype=np.float32)
    d = xs.device_put(x)
    outs = [exe(d), exe(x)]
    live = dev.live_buffers()
    for o in outs:
        assert isinstance(o, xs.DeviceArray) and np.array_equal(o.to_numpy(), 2 * x)
        assert any(b is o for b in live)
    assert all(x is not None and not x.is_deleted() for x in dev.live_buffers())
    other = xs.client("cpu", num_devices=2).devices()[1]
    c = xs.device_put(np.ones(1, np.float32), other)
    assert c in other.live_buffers() and all(x is not c for x in dev.live_buffers())


# -- DLPack: export -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", NUMPY_DLPACK_DTYPES, ids=lambda d: np.dtype(d).name)
def test_dlpack_export_to_numpy_is_zero_copy(dtype: Any) -> None:
    x = sample(dtype)
    a = xs.device_put(x)
    assert a.__dlpack_device__() == (1, 0)
    y = np.from_dlpack(a)
    assert y.ctypes.data == a.unsafe_buffer_pointer()
    assert np.array_equal(y, x)


def test_delete_with_live_capsule_is_safe_in_a_child_process() -> None:
    # Raw jaxlib aborts the process here; DeviceArray.delete() must not.
    r = run_child(
        """
        import gc, numpy as np, xlasdk as xs
        a = xs.device_put(np.arange(8, dtype=np.float32))
        cap = a.__dlpack__()
        a.delete()
        assert a.is_deleted()
        b = xs.from_dlpack(cap)               # the capsule still works after the delete
        assert np.array_equal(b.to_numpy(), np.arange(8, dtype=np.float32))
        c = xs.device_put(np.arange(4, dtype=np.float32))
        view = np.from_dlpack(c)
        c.delete(); b.delete(); gc.collect()
        assert np.array_equal(view, np.arange(4, dtype=np.float32))
        print("survived")
        """
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "survived" in r.stdout


# -- DLPack: import -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", NUMPY_DLPACK_DTYPES, ids=lambda d: np.dtype(d).name)
def test_from_dlpack_of_numpy_is_zero_copy_when_aligned(dtype: Any) -> None:
    x = aligned_copy(sample(dtype))
    a = xs.from_dlpack(x)
    assert a.unsafe_buffer_pointer() == x.ctypes.data
    assert a.dtype == np.dtype(dtype) and np.array_equal(a.to_numpy(), x)
    b = xs.from_dlpack(x, copy=False)
    assert b.unsafe_buffer_pointer() == x.ctypes.data
    c = xs.from_dlpack(x, copy=True)
    assert c.unsafe_buffer_pointer() != x.ctypes.data and np.array_equal(c.to_numpy(), x)


def test_from_dlpack_of_unaligned_numpy() -> None:
    x = aligned_copy(np.arange(32, dtype=np.float32), 16)
    a = xs.from_dlpack(x)  # copy=None: a copy
    assert a.unsafe_buffer_pointer() != x.ctypes.data and np.array_equal(a.to_numpy(), x)
    with pytest.raises(BufferError, match="aligned to 64 bytes"):
        xs.from_dlpack(x, copy=False)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_dlpack_round_trip_between_device_arrays(dtype: Any) -> None:
    # bf16 / fp8 travel through XLA's own exporter and importer.
    x = sample(dtype)
    a = xs.device_put(x)
    b = xs.from_dlpack(a.__dlpack__())  # a capsule
    assert b.unsafe_buffer_pointer() == a.unsafe_buffer_pointer()
    assert b.dtype == np.dtype(dtype) and np.array_equal(b.to_numpy(), x)


def test_capsule_is_consumed_once() -> None:
    a = xs.device_put(np.arange(4, dtype=np.float32))
    cap = a.__dlpack__()
    xs.from_dlpack(cap)
    with pytest.raises(BufferError, match="already consumed"):
        xs.from_dlpack(cap)


def test_from_dlpack_errors() -> None:
    with pytest.raises(DTypeError, match="__dlpack__"):
        xs.from_dlpack([1, 2, 3])
    a = xs.device_put(np.ones(2, np.float32))
    assert xs.from_dlpack(a) is a
    assert xs.from_dlpack(a, copy=True) is not a
    a.delete()
    with pytest.raises(XlaRuntimeError, match=DELETED):
        xs.from_dlpack(a)


def test_device_put_of_dlpack_producer_copies() -> None:
    # device_put's default semantics copy, although jaxlib's importer aliases aligned data.
    a = xs.device_put(np.arange(8, dtype=ml_dtypes.bfloat16))

    class Producer:
        def __dlpack__(self, **kw: Any) -> Any:
            return a.__dlpack__(**kw)

        def __dlpack_device__(self) -> tuple[int, int]:
            return a.__dlpack_device__()

    b = xs.device_put(Producer())
    assert b.unsafe_buffer_pointer() != a.unsafe_buffer_pointer()
    c = xs.device_put(Producer(), semantics=ZC)
    assert c.unsafe_buffer_pointer() == a.unsafe_buffer_pointer()


# -- torch ----------------------------------------------------------------------------------------
def _torch_dtypes(torch: Any) -> list[Any]:
    names = ["bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
             "float16", "bfloat16", "float32", "float64", "complex64", "complex128"]
    return [getattr(torch, n) for n in names if hasattr(torch, n)]


def test_torch_to_xlasdk_and_back_zero_copy() -> None:
    torch = pytest.importorskip("torch")
    for tdt in _torch_dtypes(torch):
        t = (torch.arange(24) % 5).to(tdt).reshape(4, 6)
        a = xs.from_dlpack(t, copy=False)
        assert a.unsafe_buffer_pointer() == t.data_ptr(), tdt
        assert a.shape == (4, 6)
        ref = t.to(torch.float64).numpy() if tdt not in (torch.complex64, torch.complex128) else t.numpy()
        assert np.array_equal(a.to_numpy().astype(ref.dtype), ref), tdt
        back = torch.from_dlpack(a)
        assert back.data_ptr() == a.unsafe_buffer_pointer() and back.dtype == tdt
        assert torch.equal(back, t)
    t = torch.zeros(8)
    a = xs.from_dlpack(t)
    t[3] = 5.0  # writes by torch show in the alias
    assert a.to_numpy()[3] == 5.0
    u = torch.zeros(65)[1:]  # 4 bytes past an aligned start
    assert xs.from_dlpack(u).unsafe_buffer_pointer() != u.data_ptr()
    with pytest.raises(BufferError):
        xs.from_dlpack(u, copy=False)
    strided = torch.arange(12, dtype=torch.float32).reshape(3, 4)[:, ::2]  # non-compact: copied
    assert np.array_equal(xs.from_dlpack(strided).to_numpy(), strided.numpy())
    with pytest.raises(BufferError, match="strided"):
        xs.from_dlpack(strided, copy=False)
    transposed = torch.arange(12, dtype=torch.float32).reshape(3, 4).T  # strides kept as a layout by XLA
    ta = xs.from_dlpack(transposed)  # ... so it is copied to row-major: executables read it right
    assert ta.unsafe_buffer_pointer() != transposed.data_ptr()
    assert np.array_equal(ta.to_numpy(), transposed.numpy())
    with pytest.raises(BufferError, match="row-major"):
        xs.from_dlpack(transposed, copy=False)
    b = xs.XlaBuilder("ident")
    ops.Add(ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (4, 3)), "x"), ops.Constant(b, np.float32(0)))
    exe = xs.compile(b.build())
    assert np.array_equal(exe(ta).to_numpy(), transposed.numpy())
    assert np.array_equal(exe(transposed).to_numpy(), transposed.numpy())
    assert xs.device_put(t).unsafe_buffer_pointer() != t.data_ptr()  # device_put copies
    assert xs.device_put(t, semantics=ZC).unsafe_buffer_pointer() == t.data_ptr()


def test_torch_tensor_outlives_its_producer() -> None:
    torch = pytest.importorskip("torch")
    t = torch.arange(1000, dtype=torch.float32)
    a = xs.from_dlpack(t)
    del t
    gc.collect()
    junk = [torch.full((1000,), 7.0) for _ in range(8)]
    assert np.array_equal(a.to_numpy(), np.arange(1000, dtype=np.float32))
    a.delete()
    del junk


# -- jax --------------------------------------------------------------------------------------------
def test_jax_to_xlasdk_and_back_zero_copy() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    jax.config.update("jax_enable_x64", True)
    try:
        for dt in [*NUMPY_DLPACK_DTYPES, ml_dtypes.bfloat16]:
            x = sample(dt)
            j = jnp.asarray(x)
            a = xs.from_dlpack(j)
            assert a.unsafe_buffer_pointer() == j.unsafe_buffer_pointer(), dt
            assert a.dtype == np.dtype(dt) and np.array_equal(a.to_numpy(), x)
            back = jnp.from_dlpack(a)
            assert back.unsafe_buffer_pointer() == a.unsafe_buffer_pointer()
            assert np.array_equal(np.asarray(back), x)
    finally:
        jax.config.update("jax_enable_x64", False)
