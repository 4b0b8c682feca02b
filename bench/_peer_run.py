"""The peer of ``bench/run_dump.py``: ``xlasdk run DUMP --random-inputs``'s work written on jaxlib's
calls alone, as a user of jaxlib would, importing jaxlib and numpy only (nothing of xlasdk, whose
package import it would otherwise pay; the few lines it needs are copied here). Parse the HLO
text, convert it to StableHLO, make a CPU client, compile, draw random inputs, transfer them, run,
read every result back (the buffer protocol; bfloat16, which it does not know, through DLPack).

    python bench/_peer_run.py DUMP.txt
"""

import ctypes
import sys

import jaxlib._hlo as hlo
import jaxlib._jax as J  # noqa: N812
import numpy as np
from jaxlib import xla_client as xc


class Aval:  # jaxlib wants an abstract value beside each buffer (jax's ShapedArray; no jax here)
    def __init__(self, shape, dtype):
        self.shape, self.dtype, self.weak_type, self.ndim = tuple(shape), np.dtype(dtype), False, len(shape)


_REPLICATED = xc.HloSharding.replicate()
if not hasattr(xc.SingleDeviceSharding, "_to_xla_hlo_sharding"):  # jax adds it; batched_device_put calls it
    xc.SingleDeviceSharding._to_xla_hlo_sharding = lambda self, n: _REPLICATED


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_get = ctypes.pythonapi.PyCapsule_GetPointer
_get.restype, _get.argtypes = ctypes.c_void_p, (ctypes.py_object, ctypes.c_char_p)


def host(a, shape, dt):
    """The result on the host: the buffer protocol, or (bf16, which it does not know) DLPack."""
    if dt.kind != "V":
        return np.asarray(memoryview(a))
    cap = J.buffer_to_dlpack_managed_tensor(a, stream=None)
    t = _DLTensor.from_address(_get(cap, b"dltensor"))
    n = int(np.prod(shape)) * dt.itemsize
    raw = (ctypes.c_char * n).from_address(int(t.data or 0) + int(t.byte_offset))
    return np.frombuffer(bytes(raw), dtype=dt).reshape(shape)


def leaves(s):
    return [x for e in s.tuple_shapes() for x in leaves(e)] if s.is_tuple() else [s]


text = open(sys.argv[1]).read()
module = hlo.hlo_module_from_text(text)
proto = bytes(module.as_serialized_hlo_module_proto())
mlir = bytes(J.mlir.hlo_to_stablehlo(proto))
client = xc.make_cpu_client()
dev = client.local_devices()[0]
exe = client.compile_and_load(mlir, xc.DeviceList((dev,)), xc.CompileOptions())
shape = hlo.XlaComputation(proto).program_shape()
rng = np.random.default_rng(0)
sharding = xc.SingleDeviceSharding(dev)
bufs = []
for p in shape.parameter_shapes():
    dt = np.dtype(p.numpy_dtype())
    x = rng.standard_normal(p.dimensions()) if dt.kind in "fcV" else rng.integers(0, 2, p.dimensions())
    x = np.asarray(x).astype(dt)
    bufs.append(xc.batched_device_put(Aval(x.shape, dt), sharding, [x], [dev], True, False,
                                      xc.HostBufferSemantics.IMMUTABLE_ONLY_DURING_CALL, True))
outs = leaves(shape.result_shape())
avals = [Aval(o.dimensions(), o.numpy_dtype()) for o in outs]
skip = {"_skip_checks": True} if xc._version < 495 else {}
handlers = [xc.array_result_handler(a, sharding, True, **skip) for a in avals]
res = exe.execute_sharded(bufs).consume_with_handlers(handlers)
got = [host(r, a.shape, a.dtype) for r, a in zip(res, avals, strict=True)]
assert not [m for m in sys.modules if m.split(".")[0] in ("xlasdk", "jax")], "the peer imported xlasdk or jax"
print(len(got), [float(np.asarray(g, np.float64).sum()) for g in got][:3])
