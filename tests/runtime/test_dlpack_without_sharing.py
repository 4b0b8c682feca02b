"""A producer whose memory DLPack cannot describe (a ``jax.Array`` on a TPU when JAX and xlasdk hold
two clients: jaxlib raises "... cannot be used as a DLPack device" from ``__dlpack_device__``) is
copied through the host, or refused with what to do instead when no copy is allowed (issue 43;
``xs.device_put(jax_array)`` raised jaxlib's raw ``XlaRuntimeError``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlasdk as xs


class _DeviceOnly:
    """Device memory DLPack cannot describe, with no way for the host to read it."""

    def __init__(self, data: np.ndarray) -> None:
        self._data = data
        self.shape, self.dtype = data.shape, data.dtype

    def __dlpack_device__(self) -> tuple[int, int]:
        raise RuntimeError("INVALID_ARGUMENT: TPU_0(...) cannot be used as a DLPack device")

    def __dlpack__(self, **kw: Any) -> Any:
        raise RuntimeError("INVALID_ARGUMENT: TPU_0(...) cannot be used as a DLPack device")



class _TpuLikeArray(_DeviceOnly):
    """A stand-in for a ``jax.Array`` on a TPU held by another client: DLPack fails, the host reads it."""

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._data


def test_device_put_copies_through_the_host_where_dlpack_cannot_describe_the_memory() -> None:
    data = np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5
    got = xs.device_put(_TpuLikeArray(data))
    np.testing.assert_array_equal(got.to_numpy(), data)
    # and as an executable's argument
    b = xs.XlaBuilder("f")
    x = xs.ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (3, 4)), "x")
    exe = xs.compile(b.build(x * 2.0))
    np.testing.assert_array_equal(exe(_TpuLikeArray(data)).to_numpy(), data * 2)


def test_no_copy_allowed_says_how_to_share_instead() -> None:
    with pytest.raises(BufferError, match=r"share_with_jax\(\)"):
        xs.from_dlpack(_TpuLikeArray(np.ones(3, np.float32)), copy=False)


def test_a_producer_the_host_cannot_read_is_an_xlasdk_error_naming_the_way_out() -> None:
    with pytest.raises(xs.XlaRuntimeError, match=r"no __array__.*share_with_jax\(\)"):
        xs.device_put(_DeviceOnly(np.ones(3, np.float32)))
