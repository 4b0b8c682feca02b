"""Per-executable call data: the checks and conversions of arguments, made once at compile time."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar, Final

import numpy as np

from .._jaxlib import pjrt
from ..errors import DTypeError, ShapeError, XlaRuntimeError
from ..shape import ProgramShape, Shape
from ..types import COMPLEX, FLOATS, INTS, PrimitiveType
from ._device_array import DeviceArray, _aval, _put_numpy
from .array import _native, _put_dlpack, _shared_jax
from .device import Device


# -- per-executable call data -----------------------------------------------------------------
def _describe_value(v: Any) -> str:
    """HLO-like description of an argument value for error messages."""
    if isinstance(v, DeviceArray):
        return f"a DeviceArray {v.xla_shape()}"
    if isinstance(v, (np.ndarray, np.generic)):
        try:
            return str(Shape.array_shape(v.dtype, v.shape))
        except Exception:
            return f"a numpy array of dtype {v.dtype} and shape {v.shape}"
    if isinstance(v, (bool, int, float, complex)):
        return f"the Python {type(v).__name__} {v!r}"
    return f"a {type(v).__name__}"


_SUB_BYTE_INT_RANGES: Final = {
    PrimitiveType.S2: (-2, 1),
    PrimitiveType.S4: (-8, 7),
    PrimitiveType.U2: (0, 3),
    PrimitiveType.U4: (0, 15),
}


def _int_range(etype: PrimitiveType, dtype: np.dtype[Any]) -> tuple[int, int]:
    r = _SUB_BYTE_INT_RANGES.get(etype)
    if r is not None:
        return r
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def _scalar_as(v: bool | int | float | complex, etype: PrimitiveType, dtype: np.dtype[Any]) -> Any:
    """``v`` as a 0-d array of ``dtype`` when the conversion is lossless, else None.

    ints and bools must be exactly representable; floats round to nearest (as any float
    literal does) but must not overflow; complex values only go to complex types.
    """
    try:
        with np.errstate(all="ignore"):
            if etype == PrimitiveType.PRED:
                if isinstance(v, bool) or (isinstance(v, int) and v in (0, 1)):
                    return np.asarray(bool(v))
                return None
            if isinstance(v, complex):
                if etype not in COMPLEX:
                    return None
                x = np.asarray(v, dtype)
                ok = not math.isfinite(abs(v)) or bool(np.isfinite(x.astype(np.complex128)))
                return x if ok else None
            if etype in INTS:
                if isinstance(v, float):
                    if not v.is_integer():
                        return None
                    v = int(v)
                lo, hi = _int_range(etype, dtype)
                return np.asarray(v, dtype) if lo <= v <= hi else None
            if etype in FLOATS or etype in COMPLEX:
                x = np.asarray(v, dtype)
                if isinstance(v, int):  # bools too: exact or rejected
                    back = complex(x).real if etype in COMPLEX else float(x)
                    return x if back == v else None
                back_f = complex(x).real if etype in COMPLEX else float(x)
                return x if math.isfinite(back_f) or not math.isfinite(v) else None
    except (OverflowError, ValueError, TypeError):
        return None
    return None


class _ParamSpec:
    """What parameter ``index`` accepts; turns an argument into a device buffer."""

    __slots__ = ("index", "name", "shape", "dims", "dtype", "etype", "aval", "supported", "exe_name")

    def __init__(self, index: int, name: str, shape: Shape, exe_name: str) -> None:
        self.index = index
        self.name = name
        self.shape = shape
        self.exe_name = exe_name
        self.supported = shape.is_array()
        self.dims = shape.dimensions()
        self.etype = shape.element_type()
        self.dtype = shape.numpy_dtype() if self.supported else np.dtype(np.uint8)
        self.aval = _aval(self.dims, self.dtype)

    def _where(self, where: str) -> str:
        return f"{self.exe_name}: {where}argument {self.index} ({self.name!r})"

    def mismatch(self, given: Any, where: str = "") -> Exception:
        """ShapeError when the dimensions differ, else DTypeError, naming the parameter."""
        msg = f"{self._where(where)} is {_describe_value(given)}, expected {self.shape}"
        gshape = getattr(given, "shape", ())
        python_scalar = isinstance(given, (bool, int, float, complex)) and not isinstance(given, np.generic)
        if python_scalar or tuple(gshape) != self.dims:
            return ShapeError(msg)
        return DTypeError(msg + self._raw_bytes_hint(given))

    def _raw_bytes_hint(self, given: Any) -> str:
        """For raw bytes of this parameter's size (numpy saves bfloat16 and other ml_dtypes arrays in
        an ``.npz`` as ``|V2``...): how to read them as the type expected."""
        dt = getattr(given, "dtype", None)
        if not isinstance(dt, np.dtype) or dt.kind != "V" or dt.fields is not None:
            return ""
        if dt.itemsize != self.dtype.itemsize:
            return ""
        module = "ml_dtypes" if self.dtype.num >= 256 else "np"  # a type numpy does not know: ml_dtypes'
        return (f"; these look like raw bytes, as numpy saves {self.dtype.name} arrays in an .npz: pass "
                f"a.view({module}.{self.dtype.name})")

    def to_buffer(self, a: Any, device: Device, where: str = "") -> Any:
        """The jaxlib buffer to pass for argument ``a`` on ``device`` (checks and converts)."""
        if not self.supported:
            raise ShapeError(
                f"{self._where(where)} has shape {self.shape}; only array parameters can be passed "
                "(flatten tuple parameters, create tokens inside the computation)"
            )
        if isinstance(a, DeviceArray):
            if a._arr is None:
                raise XlaRuntimeError(f"{self._where(where)} is a deleted DeviceArray {a.xla_shape()}")
            if a._shape != self.dims or a._dtype != self.dtype:
                raise self.mismatch(a, where)
            if a._device == device:
                return a._arr
            return _put_numpy(a.to_numpy(), device)._arr  # another device or client: via the host
        if isinstance(a, (np.ndarray, np.generic)):
            arr = np.asarray(a)
            if arr.shape != self.dims:
                raise self.mismatch(arr, where)
            if arr.dtype != self.dtype:
                if arr.dtype.isnative or arr.dtype.newbyteorder("=") != self.dtype:
                    raise self.mismatch(arr, where)
                arr = arr.astype(self.dtype)
            return pjrt.put(arr, self.aval, device._sharding, device._d)
        if isinstance(a, (bool, int, float, complex)):  # Python scalars (numpy's are handled above)
            if self.dims != ():
                raise self.mismatch(a, where)
            x = _scalar_as(a, self.etype, self.dtype)
            if x is None:
                raise DTypeError(
                    f"{self._where(where)} is {_describe_value(a)}, which does not fit {self.shape}"
                )
            return pjrt.put(x, self.aval, device._sharding, device._d)
        if isinstance(a, (list, tuple, str, bytes)) or a is None:
            raise DTypeError(
                f"{self._where(where)} is {_describe_value(a)}; pass a numpy array "
                f"(np.asarray(value, np.{self.dtype})), a scalar or a DeviceArray for {self.shape}"
            )
        if hasattr(a, "__dlpack__"):
            da = _shared_jax(a, device)
            if da is None:
                da = _put_dlpack(a, device, self._where(where))
            if da._shape != self.dims or da._dtype != self.dtype:
                raise self.mismatch(da, where)
            return da._arr
        if hasattr(a, "__array__"):
            return self.to_buffer(_native(np.asarray(a), self._where(where)), device, where)
        raise DTypeError(f"{self._where(where)} is {_describe_value(a)}, expected an array {self.shape}")


class _CallPlan:
    """Everything a call needs that does not depend on the arguments; built once per executable."""

    created: ClassVar[int] = 0  # instances made in this process (tests check calls make none)

    __slots__ = (
        "name", "params", "nparams", "device", "jdevice", "sharding", "handlers", "outputs",
        "is_tuple", "multi", "signature", "unsupported_output", "fast", "checks", "out_dims", "out_dtype",
    )

    def __init__(self, name: str, program_shape: ProgramShape, devices: Sequence[Device]) -> None:
        _CallPlan.created += 1
        self.name = name
        names = program_shape.parameter_names()
        self.params = tuple(
            _ParamSpec(i, names[i] if i < len(names) else f"p{i}", s, name)
            for i, s in enumerate(program_shape.parameter_shapes())
        )
        self.nparams = len(self.params)
        self.device = devices[0]
        self.jdevice = self.device._d
        self.sharding = self.device._sharding
        self.multi = len(devices) > 1
        result = program_shape.result_shape()
        self.is_tuple = result.is_tuple()
        leaves = result.tuple_shapes() if self.is_tuple else (result,)
        self.unsupported_output = next((s for s in leaves if not s.is_array()), None)
        self.outputs = tuple(
            (s.dimensions(), s.numpy_dtype()) if s.is_array() else ((), np.dtype(np.uint8)) for s in leaves
        )
        self.handlers = [pjrt.result_handler(_aval(d, t), self.sharding) for d, t in self.outputs]
        self.signature = ", ".join(f"{p.name}: {p.shape}" for p in self.params)
        # exe(*args) may take the fast path: one device, array parameters, array outputs.
        self.fast = not self.multi and self.unsupported_output is None and all(p.supported for p in self.params)
        self.checks = tuple((p, p.dtype, p.dims, p.aval) for p in self.params)
        first: tuple[tuple[int, ...], np.dtype[Any]] = self.outputs[0] if self.outputs else ((), np.dtype(np.uint8))
        self.out_dims, self.out_dtype = first

    def output_error(self) -> XlaRuntimeError:
        return XlaRuntimeError(f"{self.name}: outputs of shape {self.unsupported_output} cannot be returned")

    def count_error(self, given: int, where: str = "") -> ShapeError:
        return ShapeError(
            f"{self.name}: {where}expected {self.nparams} argument{'s' if self.nparams != 1 else ''} "
            f"({self.signature}), got {given}"
        )
