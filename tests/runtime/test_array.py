"""DeviceArray and device_put: round trips for every dtype, DLPack, deletion, conversions."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import xlasdk.runtime as rt
from xlasdk.errors import DTypeError, XlaRuntimeError
from xlasdk.shape import Shape

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ALL_DTYPES = [
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128,
    ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.int4, ml_dtypes.uint4,
]


def sample(dtype: Any, shape: tuple[int, ...] = (2, 3)) -> np.ndarray[Any, Any]:
    """Values exactly representable in every dtype above (0..6, alternating sign if signed)."""
    n = int(np.prod(shape))
    base = np.arange(n) % 7
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return (base % 2 == 1).reshape(shape)
    signed = dt.kind in "fc" or dt.name in ("bfloat16", "int4") or dt.name.startswith("float8") or (
        dt.kind == "i"
    )
    vals = np.where(np.arange(n) % 2 == 0, base, -base) if signed else base
    if dt.kind == "c":
        return (vals + 1j * vals[::-1]).astype(dt).reshape(shape)
    return vals.astype(dt).reshape(shape)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_round_trip_every_dtype(dtype: Any) -> None:
    x = sample(dtype)
    a = rt.device_put(x)
    assert a.shape == (2, 3)
    assert a.dtype == np.dtype(dtype)
    assert a.device == rt.devices()[0]
    assert a.nbytes == x.nbytes
    assert a.xla_shape() == Shape.array_shape(dtype, (2, 3))
    back = a.to_numpy()
    assert back.dtype == np.dtype(dtype)
    assert np.array_equal(back.view(np.uint8), np.ascontiguousarray(x).view(np.uint8))
    assert np.array_equal(np.asarray(a), x)


@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (1,), (5, 1, 2), (2, 3, 4, 5)])
def test_round_trip_shapes(shape: tuple[int, ...]) -> None:
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    a = rt.device_put(x)
    assert a.shape == shape and a.ndim == len(shape) and a.size == x.size
    assert np.array_equal(a.to_numpy(), x)


def test_non_contiguous_fortran_and_big_endian_inputs() -> None:
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    assert np.array_equal(rt.device_put(x[:, ::2]).to_numpy(), x[:, ::2])
    assert np.array_equal(rt.device_put(x[::-1]).to_numpy(), x[::-1])
    f = np.asfortranarray(x)
    assert np.array_equal(rt.device_put(f).to_numpy(), x)
    be = x.astype(">f4")
    a = rt.device_put(be)
    assert a.dtype == np.float32
    assert np.array_equal(a.to_numpy(), x)


def test_device_put_copies_the_host_data() -> None:
    x = np.ones(4, np.float32)
    a = rt.device_put(x)
    x[:] = 7
    assert np.array_equal(a.to_numpy(), np.ones(4, np.float32))


@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        (True, np.bool_),
        (3, np.int32),
        (-(2**31), np.int32),
        (2.5, np.float32),
        (1 + 2j, np.complex64),
        (np.float64(1.5), np.float64),
        (np.int8(-3), np.int8),
        (ml_dtypes.bfloat16(1.5), ml_dtypes.bfloat16),
    ],
)
def test_device_put_scalars(value: Any, dtype: Any) -> None:
    a = rt.device_put(value)
    assert a.shape == ()
    assert a.dtype == np.dtype(dtype)
    assert a.item() == value


def test_device_put_lists_follow_python_defaults() -> None:
    a = rt.device_put([[1.0, 2.0], [3.0, 4.0]])
    assert a.dtype == np.float32 and a.shape == (2, 2)
    b = rt.device_put([1, 2, 3])
    assert b.dtype == np.int32
    assert np.array_equal(b.to_numpy(), [1, 2, 3])


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (2**40, "does not fit s32"),
        ([2**40], "do not fit s32"),
        ("text", "cannot put a str"),
        (None, "cannot put a NoneType"),
        (np.array(["a", "b"]), "not an XLA element type"),
        (np.array([object()]), "not an XLA element type"),
        ([[1, 2], [3]], "cannot make an array"),
    ],
)
def test_device_put_rejects(value: Any, match: str) -> None:
    with pytest.raises(DTypeError, match=match):
        rt.device_put(value)


def test_device_put_to_named_and_other_devices(cpu4: rt.Client) -> None:
    x = np.arange(3, dtype=np.int32)
    a = rt.device_put(x, "cpu:0")
    assert a.device is rt.devices()[0]
    d2 = cpu4.devices()[2]
    b = rt.device_put(x, d2)
    assert b.device is d2
    assert rt.device_put(b, d2) is b  # already there
    c = rt.device_put(b)  # to the default device: a copy
    assert c is not b and c.device == rt.devices()[0]
    assert np.array_equal(c.to_numpy(), x)
    with pytest.raises(rt.UnknownDeviceError):
        rt.device_put(x, "cpu:42")


def test_to_numpy_is_read_only_and_conversions() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = rt.device_put(x)
    v = a.to_numpy()
    assert not v.flags.writeable
    with pytest.raises(ValueError):
        v[0, 0] = 1
    w = np.array(a)
    assert w.flags.writeable
    w[0, 0] = 100
    assert a.to_numpy()[0, 0] == 0
    assert np.asarray(a, dtype=np.float64).dtype == np.float64
    assert a.__array__(copy=True) is not v
    with pytest.raises(ValueError, match="without a copy"):
        a.__array__(dtype=np.float64, copy=False)
    assert len(a) == 2
    s = rt.device_put(np.float32(2.5))
    assert float(s) == 2.5 and int(rt.device_put(7)) == 7 and bool(rt.device_put(True))
    assert complex(rt.device_put(1 + 1j)) == 1 + 1j
    with pytest.raises(TypeError):
        len(s)


def test_repr_shows_values() -> None:
    a = rt.device_put(np.array([[1, 2], [3, 4]], np.int32))
    r = repr(a)
    assert r.startswith("DeviceArray([[1, 2],")
    assert "[3, 4]]" in r and "dtype=int32" in r and "device=cpu:0" in r
    assert "bfloat16" in repr(rt.device_put(np.ones(2, ml_dtypes.bfloat16)))
    assert str(a) == str(np.array([[1, 2], [3, 4]]))


def test_deleted_array_raises_and_never_crashes() -> None:
    a = rt.device_put(np.ones((2, 3), np.float32))
    assert a.block_until_ready() is a
    assert a.on_device_size_in_bytes() == 24
    assert isinstance(a.unsafe_buffer_pointer(), int)
    a.delete()
    assert a.is_deleted()
    a.delete()  # twice is fine
    for use in (a.to_numpy, a.block_until_ready, a.on_device_size_in_bytes, a.unsafe_buffer_pointer,
                lambda: np.asarray(a), lambda: rt.device_put(a)):
        with pytest.raises(XlaRuntimeError, match="deleted"):
            use()
    with pytest.raises(BufferError, match="deleted"):
        a.__dlpack__()
    assert "<deleted>" in repr(a)
    assert a.shape == (2, 3) and a.dtype == np.float32  # metadata stays readable


def test_numpy_view_survives_delete() -> None:
    x = np.arange(1 << 16, dtype=np.float32)
    a = rt.device_put(x)
    v = a.to_numpy()
    a.delete()
    del a
    gc.collect()
    junk = [rt.device_put(np.full(1 << 16, 7, np.float32)) for _ in range(8)]
    assert np.array_equal(v, x)
    del junk


# -- DLPack ---------------------------------------------------------------------------------------
class DLPackOnly:
    """A producer exposing only the DLPack protocol (like a torch or cupy tensor)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.inner.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.inner.__dlpack_device__()  # type: ignore[no-any-return]


def test_dlpack_export_to_numpy() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = rt.device_put(x)
    assert a.__dlpack_device__() == (1, 0)
    y = np.from_dlpack(a)
    assert np.array_equal(y, x)
    assert y.dtype == np.float32
    z = np.from_dlpack(a, copy=True)
    assert np.array_equal(z, x)
    with pytest.raises(BufferError):
        a.__dlpack__(dl_device=(2, 0))


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8, np.complex64, np.bool_, np.float16])
def test_dlpack_round_trip(dtype: Any) -> None:
    x = sample(dtype, (3, 2))
    a = rt.device_put(DLPackOnly(x))  # import a numpy producer
    assert a.dtype == np.dtype(dtype) and a.shape == (3, 2)
    assert np.array_equal(np.from_dlpack(a), x)  # export back


def test_dlpack_import_of_dtypes_numpy_cannot_read() -> None:
    # numpy's DLPack import rejects bfloat16; the runtime falls back to XLA's importer.
    x = sample(ml_dtypes.bfloat16)
    src = rt.device_put(x)
    a = rt.device_put(DLPackOnly(src))
    assert a.dtype == ml_dtypes.bfloat16
    assert a is not src
    assert np.array_equal(a.to_numpy(), x)


def test_delete_while_dlpack_consumer_alive_does_not_crash() -> None:
    # Deleting a PJRT buffer that a DLPack consumer still holds aborts the process inside XLA;
    # DeviceArray.delete() must avoid that. Run it in a subprocess and check it survived.
    code = textwrap.dedent(
        """
        import numpy as np, gc
        import xlasdk.runtime as rt
        x = np.arange(6, dtype=np.float32)
        a = rt.device_put(x)
        view = np.from_dlpack(a)
        a.delete()
        assert a.is_deleted()
        gc.collect()
        assert np.array_equal(view, x)
        del view
        gc.collect()
        print("SURVIVED")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "SURVIVED" in proc.stdout


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2])
@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (1,), (5, 1, 2), (2, 3, 4)])
def test_readback_of_types_outside_the_buffer_protocol(dtype: Any, shape: tuple[int, ...]) -> None:
    # read back through DLPack, a view of the device buffer (bits compared with the numpy input)
    x = sample(dtype, shape)
    a = rt.device_put(x)
    back = a.to_numpy()
    assert back.dtype == np.dtype(dtype) and back.shape == shape and not back.flags.writeable
    assert back.tobytes() == x.tobytes()
    if x.size:
        assert back.ctypes.data == a.unsafe_buffer_pointer()  # zero-copy
    assert a.to_numpy() is back  # cached
    a.delete()  # the view keeps the memory: delete lets the buffer go instead of freeing it
    assert a.is_deleted()
    gc.collect()
    junk = [rt.device_put(np.full(64, 7, np.float32)) for _ in range(8)]
    assert back.tobytes() == x.tobytes()
    del junk


def _aligned_fortran(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``x`` (2-d) in column-major order at a 64-byte aligned address (DLPack import then aliases
    it and keeps its strides as the buffer's layout)."""
    raw = np.empty(x.nbytes + 128, np.uint8)
    off = (-raw.ctypes.data) % 64
    f = raw[off:off + x.nbytes].view(x.dtype).reshape(x.shape[::-1]).T
    f[...] = x
    assert f.flags.f_contiguous and f.ctypes.data % 64 == 0
    return f


def test_dlpack_host_copy_follows_a_column_major_layout() -> None:
    # A buffer whose layout is not row-major (DLPack import keeps a producer's strides) reads
    # back in its logical order; float16 goes through the buffer protocol in DeviceArray, so
    # the DLPack view is made directly here, of a buffer the buffer protocol refuses to show.
    from xlasdk._jaxlib import pjrt

    x = np.arange(12, dtype=np.float16).reshape(3, 4) - 5
    f = _aligned_fortran(x)
    arr = pjrt.dlpack_import_view(f.__dlpack__(), rt.devices()[0]._d, None)
    assert pjrt.array_minor_to_major(arr) == (0, 1)
    got = pjrt.dlpack_host_view(arr, (3, 4), np.dtype(np.float16))
    assert got is not None and np.array_equal(got, x) and got.flags.f_contiguous
    assert pjrt.dlpack_host_view(arr, (4, 3), np.dtype(np.float16)) is None  # not what DLPack says: refused
    assert pjrt.dlpack_host_view(arr, (3, 4), np.dtype(np.float32)) is None


def test_column_major_bfloat16_tensor_from_torch_reads_right() -> None:
    torch = pytest.importorskip("torch")
    t = (torch.arange(12, dtype=torch.float32).reshape(4, 3) - 5).to(torch.bfloat16).T  # (3, 4), strides (1, 3)
    a = rt.device_put(DLPackOnly(t))
    want = (np.arange(12, dtype=np.float32).reshape(4, 3) - 5).T
    assert a.shape == (3, 4) and a.dtype == ml_dtypes.bfloat16
    assert np.array_equal(a.to_numpy().astype(np.float32), want)


def test_delete_racing_a_dlpack_readback_does_not_crash() -> None:
    # The bfloat16 readback is a view that holds a DLPack capsule; deleting the buffer under it
    # would abort the process in XLA. One thread reads, another deletes, in a child process.
    code = textwrap.dedent(
        """
        import threading, numpy as np, ml_dtypes
        import xlasdk.runtime as rt
        from xlasdk.errors import XlaRuntimeError
        x = np.arange(4096).astype(ml_dtypes.bfloat16)
        arrays = [rt.device_put(x) for _ in range(2000)]
        read = 0
        both = threading.Barrier(2)  # each array: read and deleted at the same moment
        def reader():
            global read
            for a in arrays:
                both.wait()
                try:
                    v = a.to_numpy()
                except XlaRuntimeError:
                    continue
                assert np.array_equal(v.view(np.uint16), x.view(np.uint16))
                read += 1
        def deleter():
            for a in arrays:
                both.wait()
                a.delete()
        ts = [threading.Thread(target=reader), threading.Thread(target=deleter)]
        for t in ts: t.start()
        for t in ts: t.join()
        print("SURVIVED", read)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "SURVIVED" in proc.stdout


def test_no_fake_jax_module_left_behind() -> None:
    # The jax stand-in modules are present only during jaxlib calls.
    from xlasdk._jaxlib import pjrt

    a = rt.device_put(np.ones(3, np.float32))
    a.to_numpy()
    if pjrt._SHIM is not None:
        assert "jax" not in sys.modules and "jax.core" not in sys.modules


def test_constructor_is_private() -> None:
    with pytest.raises(TypeError):
        rt.DeviceArray()


@settings(max_examples=40, deadline=None)
@given(
    hnp.arrays(
        dtype=st.sampled_from([np.dtype(t) for t in (np.float32, np.int16, np.uint8, np.float64)]),
        shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5),
    )
)
def test_round_trip_property(x: np.ndarray[Any, Any]) -> None:
    back = rt.device_put(x).to_numpy()
    assert back.shape == x.shape and back.dtype == x.dtype
    assert np.array_equal(back, x, equal_nan=x.dtype.kind == "f")
