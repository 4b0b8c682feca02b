"""Buffer interop through the former ``xla_client`` API: host buffer semantics, the buffer
protocol, ``clone``, live buffers, deleted buffers and the former ``_xla`` DLPack functions.

Written as code for ``jaxlib.xla_client`` was: build with ``xla_client.XlaBuilder``, compile with
``backend.compile``, execute, compare with numpy; only the import line differs.
"""

from __future__ import annotations

import gc
import re
import subprocess
import sys
import textwrap
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from xlasdk import xla_client

ops = xla_client.ops
HBS = xla_client.HostBufferSemantics

DLPACK_DTYPES = [
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128, ml_dtypes.bfloat16,
]


@pytest.fixture(scope="module")
def backend() -> Any:
    return xla_client.make_cpu_client()


def aligned(x: np.ndarray[Any, Any], offset: int = 0) -> np.ndarray[Any, Any]:
    raw = np.empty(x.nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    out: np.ndarray[Any, Any] = raw[start : start + x.nbytes].view(x.dtype).reshape(x.shape)
    out[...] = x
    return out


def add_one(backend: Any, shape: tuple[int, ...], dtype: Any = np.float32) -> Any:
    c = xla_client.XlaBuilder("add_one")
    p = ops.Parameter(c, 0, xla_client.shape_from_pyval(np.zeros(shape, dtype)))
    ops.Add(p, ops.Constant(c, np.array(1, dtype)))
    return backend.compile(c.build())


def sample(dtype: Any) -> np.ndarray[Any, Any]:
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return np.array([[True, False, True], [False, False, True]])
    return (np.arange(6).reshape(2, 3) % 5).astype(dt)


# -- host buffer semantics ----------------------------------------------------------------------
def test_buffer_from_pyval_zero_copy_aliases_aligned_data(backend: Any) -> None:
    x = aligned(np.arange(12, dtype=np.float32).reshape(3, 4))
    buf = backend.buffer_from_pyval(x, host_buffer_semantics=HBS.ZERO_COPY)
    assert buf.unsafe_buffer_pointer() == x.ctypes.data
    exe = add_one(backend, (3, 4))
    [out] = exe.execute([buf])
    np.testing.assert_array_equal(np.asarray(out), x + 1)
    x[0, 0] = 100  # the buffer is the numpy memory
    [out] = exe.execute([buf])
    assert np.asarray(out)[0, 0] == 101


def test_buffer_from_pyval_default_is_zero_copy_as_before(backend: Any) -> None:
    x = aligned(np.arange(8, dtype=np.float32))
    assert backend.buffer_from_pyval(x).unsafe_buffer_pointer() == x.ctypes.data
    assert backend.buffer_from_pyval(x, force_copy=True).unsafe_buffer_pointer() != x.ctypes.data


@pytest.mark.parametrize("semantics", ["IMMUTABLE_ONLY_DURING_CALL", "IMMUTABLE_UNTIL_TRANSFER_COMPLETES"])
def test_buffer_from_pyval_copying_semantics(backend: Any, semantics: str) -> None:
    x = aligned(np.arange(8, dtype=np.float32))
    buf = backend.buffer_from_pyval(x, host_buffer_semantics=getattr(HBS, semantics))
    assert buf.unsafe_buffer_pointer() != x.ctypes.data
    buf.block_until_ready()
    x[:] = 0
    [out] = add_one(backend, (8,)).execute([buf])
    np.testing.assert_array_equal(np.asarray(out), np.arange(8, dtype=np.float32) + 1)


def test_unaligned_zero_copy_copies(backend: Any) -> None:
    x = aligned(np.arange(8, dtype=np.float32), 16)
    buf = backend.buffer_from_pyval(x, host_buffer_semantics=HBS.ZERO_COPY)
    assert buf.unsafe_buffer_pointer() != x.ctypes.data
    np.testing.assert_array_equal(np.asarray(buf), x)


def test_execute_with_python_values_zero_copy(backend: Any) -> None:
    exe = add_one(backend, (2, 3), np.int32)
    [y] = xla_client.execute_with_python_values(exe, [sample(np.int32)], backend)
    np.testing.assert_array_equal(y, sample(np.int32) + 1)


# -- buffer protocol, clone, is_ready -----------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.complex128, np.bool_])
def test_buffer_protocol_is_zero_copy(backend: Any, dtype: Any) -> None:
    x = sample(dtype)
    buf = backend.buffer_from_pyval(x)
    y = np.asarray(buf)
    assert y.ctypes.data == buf.unsafe_buffer_pointer()
    np.testing.assert_array_equal(y, x)
    assert np.asarray(memoryview(np.asarray(buf))).ctypes.data == buf.unsafe_buffer_pointer()


def test_clone(backend: Any) -> None:
    x = np.array([[3.0, 4.0, 5.0]], np.float32)
    y = backend.buffer_from_pyval(x)
    z = y.clone()
    assert id(z) != id(y)
    np.testing.assert_array_equal(np.asarray(y), np.asarray(z))
    assert y.unsafe_buffer_pointer() == z.unsafe_buffer_pointer()
    y.delete()
    np.testing.assert_array_equal(np.asarray(z), x)  # the memory lives while a clone does


def test_is_ready_and_block_until_ready(backend: Any) -> None:
    [out] = add_one(backend, (4,)).execute([backend.buffer_from_pyval(np.zeros(4, np.float32))])
    assert out.block_until_ready() is out
    assert out.is_ready()


def test_deleted_buffer_raises_with_former_wording(backend: Any) -> None:
    arg = np.array([[1.0, 2.0, 3.0]], np.float32)
    buffer = backend.buffer_from_pyval(arg)
    buffer.delete()
    assert buffer.is_deleted()
    for use in (buffer.block_until_ready, buffer.is_ready, lambda: np.asarray(buffer)):
        with pytest.raises(RuntimeError, match=re.escape("BlockHostUntilReady() called on deleted or donated buffer")):
            use()


def test_dlpack_of_a_deleted_buffer_is_the_former_runtime_error(backend: Any) -> None:
    buffer = backend.buffer_from_pyval(np.arange(3, dtype=np.float32))
    buffer.delete()
    want = re.escape("Cannot convert deleted/invalid buffer to DLPack tensor")
    with pytest.raises(xla_client.XlaRuntimeError, match=want) as info:
        xla_client._xla.buffer_to_dlpack_managed_tensor(buffer)
    assert isinstance(info.value, RuntimeError)


def test_array_priority_makes_numpy_defer_to_the_buffer(backend: Any) -> None:
    buffer = backend.buffer_from_pyval(np.arange(3, dtype=np.float32))
    assert buffer.__array_priority__ == 100  # the former ArrayImpl's value
    assert buffer.__array_priority__ > np.arange(3).__array_priority__


@pytest.mark.skipif(sys.version_info < (3, 12), reason="memoryview() asks for __buffer__ from Python 3.12 (PEP 688)")
def test_memoryview_of_a_cpu_buffer(backend: Any) -> None:
    x = np.array([[1.5, -2.0, 3.25]], np.float32)
    buffer = backend.buffer_from_pyval(x)
    view = memoryview(buffer)
    assert view.readonly and view.shape == (1, 3) and view.format == "f"
    np.testing.assert_array_equal(np.asarray(view), x)
    assert bytes(view) == x.tobytes()
    buffer.delete()
    with pytest.raises(RuntimeError):
        memoryview(buffer)


def test_buffer_protocol_of_a_dynamic_result_and_of_types_it_cannot_describe(backend: Any) -> None:
    # The former suite's DynamicReshapeTest.testReshape2D: a dynamic result's view has its real
    # extents; bfloat16 has no buffer-protocol format: BufferError, as jaxlib's buffers gave.
    # ``memoryview(buf)`` calls ``__buffer__`` from Python 3.12; on 3.11 the method is called here.
    c = xla_client.XlaBuilder("dynamic_reshape")
    arg0 = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    p0 = ops.Parameter(c, 0, xla_client.shape_from_pyval(arg0))
    p1 = ops.Parameter(c, 1, xla_client.shape_from_pyval(np.int32(2)))
    ops.DynamicReshape(p0, [p1, p1], [2, 3], [False, True])
    [buf] = backend.compile(c.build()).execute([arg0, np.int32(2)])
    view = memoryview(buf) if sys.version_info >= (3, 12) else buf.__buffer__(0)
    assert view.shape == (2, 2) and view.readonly
    np.testing.assert_array_equal(np.asarray(view), [[1, 2], [4, 5]])
    bf16 = backend.buffer_from_pyval(np.ones(3, xla_client.bfloat16))
    with pytest.raises(BufferError, match="BF16"):
        memoryview(bf16) if sys.version_info >= (3, 12) else bf16.__buffer__(0)
    with pytest.raises(BufferError, match="read-only"):
        buf.__buffer__(1)  # PyBUF_WRITABLE
    assert buf.aval is None and buf._device is None  # the former attributes JAX filled, None by default


def test_live_buffers(backend: Any) -> None:
    client = xla_client.make_cpu_client()
    assert client.live_buffers() == []
    arg0 = np.array([])
    arg1 = np.array([[0.0, 1.0, 2.0]], np.float32)
    arg2 = np.array([[3.0, 4.0, 5.0]], np.float32)
    arg0_buffer = client.buffer_from_pyval(arg0)
    arg1_buffer = client.buffer_from_pyval(arg1)
    arg2_buffer = client.buffer_from_pyval(arg2)
    assert len(client.live_buffers()) == 3
    assert client.live_buffers()[0] is arg2_buffer
    arg1_buffer.delete()
    assert len(client.live_buffers()) == 2
    del arg0_buffer
    gc.collect()
    assert [b for b in client.live_buffers()] == [arg2_buffer]
    dev = client.devices()[0]
    assert dev.live_buffers() == [arg2_buffer]  # the former Buffer objects, as Client.live_buffers()
    assert dev == client.sdk_client.devices()[0] and isinstance(dev, xs.Device)


# -- DLPack: the former _xla functions ------------------------------------------------------------
@pytest.mark.parametrize("take_ownership", [False, True])
@pytest.mark.parametrize("dtype", DLPACK_DTYPES, ids=lambda d: np.dtype(d).name)
def test_dlpack_tensor_round_trip(backend: Any, dtype: Any, take_ownership: bool) -> None:
    x = sample(dtype)
    buffer = backend.buffer_from_pyval(x)
    ptr = buffer.unsafe_buffer_pointer()
    dlt = xla_client._xla.buffer_to_dlpack_managed_tensor(buffer, take_ownership=take_ownership)
    assert buffer.is_deleted() is take_ownership
    del buffer  # the capsule keeps the memory
    gc.collect()
    assert type(dlt).__name__ == "PyCapsule"
    y = xla_client._xla.dlpack_managed_tensor_to_buffer(dlt, backend)
    assert y.unsafe_buffer_pointer() == ptr  # zero-copy both ways
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(np.asarray(y), x)
    [out] = add_one(backend, (2, 3), dtype).execute([y]) if np.dtype(dtype) != np.bool_ else [y]
    np.testing.assert_array_equal(np.asarray(out), x + np.array(1, dtype) if np.dtype(dtype) != np.bool_ else x)


def test_dlpack_tensors_can_be_consumed_once_only(backend: Any) -> None:
    buffer = backend.buffer_from_pyval(np.array(np.random.rand(3, 4, 5, 6), dtype=np.float32))
    dlt = xla_client._xla.buffer_to_dlpack_managed_tensor(buffer, take_ownership=True)

    def consume() -> None:
        xla_client._xla.dlpack_managed_tensor_to_buffer(dlt, backend.devices()[0], None)

    consume()
    with pytest.raises(RuntimeError, match=".*a DLPack tensor may be consumed at most once.*"):
        consume()
    with pytest.raises(BufferError):
        consume()


def test_take_ownership_makes_the_source_deleted(backend: Any) -> None:
    buffer = backend.buffer_from_pyval(np.arange(4, dtype=np.float32))
    dlt = xla_client._xla.buffer_to_dlpack_managed_tensor(buffer, take_ownership=True)
    assert buffer.is_deleted()
    with pytest.raises(RuntimeError, match=re.escape("BlockHostUntilReady() called on deleted or donated buffer")):
        buffer.block_until_ready()
    y = xla_client._xla.dlpack_managed_tensor_to_buffer(dlt, backend.devices()[0], None)
    np.testing.assert_array_equal(np.asarray(y), np.arange(4, dtype=np.float32))


def test_dlpack_from_numpy_and_to_numpy(backend: Any) -> None:
    x = aligned(np.arange(16, dtype=np.float64).reshape(4, 4))
    y = xla_client._xla.dlpack_managed_tensor_to_buffer(x.__dlpack__(), backend.devices()[0], None)
    assert y.unsafe_buffer_pointer() == x.ctypes.data
    z = np.from_dlpack(y)
    assert z.ctypes.data == x.ctypes.data
    np.testing.assert_array_equal(z, x)


def test_dlpack_with_torch(backend: Any) -> None:
    torch = pytest.importorskip("torch")
    t = torch.arange(12, dtype=torch.bfloat16).reshape(3, 4)
    y = xla_client._xla.dlpack_managed_tensor_to_buffer(torch.utils.dlpack.to_dlpack(t), backend.devices()[0], None)
    assert y.unsafe_buffer_pointer() == t.data_ptr()
    [out] = add_one(backend, (3, 4), ml_dtypes.bfloat16).execute([y])
    back = torch.from_dlpack(out)
    assert back.data_ptr() == out.unsafe_buffer_pointer()
    assert torch.equal(back, t + 1)
    dlt = xla_client._xla.buffer_to_dlpack_managed_tensor(out, take_ownership=True)
    assert torch.equal(torch.utils.dlpack.from_dlpack(dlt), t + 1)


def test_delete_with_live_capsule_does_not_abort() -> None:
    # Raw jaxlib aborts when a buffer whose DLPack capsule is alive is deleted.
    code = textwrap.dedent(
        """
        import numpy as np
        from xlasdk import xla_client
        backend = xla_client.make_cpu_client()
        buf = backend.buffer_from_pyval(np.arange(4, dtype=np.float32))
        cap = xla_client._xla.buffer_to_dlpack_managed_tensor(buf, take_ownership=False)
        buf.delete()
        y = xla_client._xla.dlpack_managed_tensor_to_buffer(cap, backend.devices()[0], None)
        clone = y.clone(); y.delete(); clone.delete()
        try:
            y.is_ready()
        except RuntimeError as e:
            print("ok", e)
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("ok")
