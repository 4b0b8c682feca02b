"""Minimal compile-and-run used by tests (independent of the runtime layer under test)."""

from __future__ import annotations

from typing import Any

import jaxlib.xla_client as _xc
import numpy as np

_client: Any = None


def run(comp: Any, *args: Any) -> list[np.ndarray[Any, Any]]:
    """Compile ``comp`` for the first CPU device, run it on numpy ``args``, return numpy outputs."""
    global _client
    if _client is None:
        _client = _xc.make_cpu_client()
    dev = _client.devices()[0]
    exe = _client.compile_and_load(comp._mlir_module_text(), _xc.DeviceList((dev,)), _xc.CompileOptions())
    bufs = []
    for a in args:
        arr = np.asarray(a)
        arr = arr if arr.flags.c_contiguous else arr.copy(order="C")
        if arr.dtype.kind in "biufc" and arr.dtype.isbuiltin:
            bufs.append(_xc._xla.dlpack_managed_tensor_to_buffer(arr.__dlpack__(), dev, None, True))
        else:  # ml_dtypes: ship the bits, then view back (same itemsize)
            raise TypeError(f"pjrt_testing.run: pass {arr.dtype} values as constants, or use xs.compile")
    outs = exe.execute(bufs)
    return [np.asarray(o) for o in outs]
