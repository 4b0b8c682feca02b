"""Compiling and running: ``CompileOptions``, ``compile``, ``Executable``, (de)serialization.

``xs.compile(computation, device)`` turns an :class:`~xlasdk.XlaComputation` into an
:class:`Executable` loaded on a device; calling it runs the program::

    exe = xs.compile(comp, "cpu:0")
    out = exe(np.ones((2, 3), np.float32), 2.0)   # -> DeviceArray
    out.to_numpy()

Arguments are checked in Python before any work (XLA itself accepts a wrong shape of the same
byte size), against per-executable data computed once at compile time.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import struct
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Final, Protocol

import numpy as np

from .._jaxlib import pjrt
from ..errors import CompileError, DTypeError, FormatError, ShapeError, XlaRuntimeError
from ..shape import ProgramShape, Shape
from ..types import COMPLEX, FLOATS, INTS, PrimitiveType
from .array import DeviceArray, _aval, _native, _put_dlpack, _put_numpy
from .cache import CacheArg, compile_cached
from .device import Client, Device, UnknownDeviceError, _resolve_device
from .isolated_compile import compile_isolated

__all__ = [
    "CompileOptions",
    "Executable",
    "MemoryStats",
    "compile",
    "deserialize_executable",
    "load_executable",
]

OptionValue = str | bool | int | float
_ndarray: Final = np.ndarray
_put: Final = pjrt.put  # bound once: the call path reads module globals only


class _ComputationLike(Protocol):
    """What :func:`compile` needs from an :class:`~xlasdk.XlaComputation`."""

    @property
    def name(self) -> str: ...

    def program_shape(self) -> ProgramShape: ...

    def _mlir_module_text(self) -> str: ...


# -- CompileOptions ---------------------------------------------------------------------------
_FLAG_RE: Final = re.compile(r"^xla_[a-z0-9_]+$")


def _positive_int(field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 1:
        raise CompileError(f"CompileOptions.{field} must be an int >= 1, got {value!r}")
    return int(value)


def _assignment(value: Any) -> tuple[tuple[int, ...], ...] | None:
    if value is None:
        return None
    try:
        arr = np.asarray(value)
    except Exception:
        arr = np.asarray([], dtype=object)
    if arr.ndim == 1 and arr.size:
        arr = arr.reshape(-1, 1)  # a list of ids: one per replica
    if arr.ndim != 2 or arr.size == 0 or arr.dtype.kind not in "iu":
        raise CompileError(
            "CompileOptions.device_assignment must be a non-empty 2-D array of device ids "
            f"[num_replicas, num_partitions] (or a 1-D list, one id per replica), got {value!r}"
        )
    ids = [int(x) for x in arr.ravel()]
    if min(ids) < 0 or len(set(ids)) != len(ids):
        raise CompileError(f"CompileOptions.device_assignment ids must be distinct and >= 0, got {ids}")
    return tuple(tuple(int(x) for x in row) for row in arr)


def _overrides(value: Any) -> tuple[tuple[str, OptionValue], ...]:
    if value is None:
        return ()
    items: Iterable[Any] = value.items() if isinstance(value, Mapping) else value
    out: list[tuple[str, OptionValue]] = []
    try:
        pairs = [tuple(p) for p in items]
    except TypeError:
        raise CompileError(
            "CompileOptions.env_option_overrides must be a mapping or a list of (name, value) pairs, "
            f"got {value!r}"
        ) from None
    for pair in pairs:
        if len(pair) != 2:
            raise CompileError(f"CompileOptions.env_option_overrides: {pair!r} is not a (name, value) pair")
        name, v = pair
        if not isinstance(name, str) or not _FLAG_RE.match(name):
            raise CompileError(
                f"CompileOptions.env_option_overrides: {name!r} is not an XLA option name (xla_[a-z0-9_]+)"
            )
        if isinstance(v, os.PathLike):
            v = os.fspath(v)
        if isinstance(v, np.generic):
            v = v.item()
        if not isinstance(v, (str, bool, int, float)):
            raise CompileError(
                f"CompileOptions.env_option_overrides: {name} must be a str, bool, int or float, got {v!r}"
            )
        out.append((name, v))
    return tuple(out)


class CompileOptions:
    """Options for :func:`compile` (mirrors ``xla::CompileOptions``).

    Parameters
    ----------
    num_replicas:
        Number of replicas (data-parallel copies, each on its own device; ``>= 1``).
    num_partitions:
        Number of SPMD partitions (``>= 1``); above 1 SPMD partitioning is switched on and
        parameters without sharding annotations are replicated.
    device_assignment:
        Device ids, an int array of shape ``[num_replicas, num_partitions]`` (a 1-D list is one
        id per replica). Default: the first ``num_replicas * num_partitions`` devices of the
        client, starting at the ``device`` given to :func:`compile`.
    env_option_overrides:
        XLA debug/compile options as a mapping or ``(name, value)`` pairs, for example
        ``{"xla_cpu_enable_fast_math": False, "xla_dump_to": "/tmp/dump"}``. Unknown names are
        rejected by XLA at compile time (:class:`~xlasdk.CompileError`).
    xla_dump_to:
        Shortcut for ``env_option_overrides["xla_dump_to"]``: a directory where XLA writes the
        HLO before and after optimization, LLVM IR and the buffer assignment.

    Raises
    ------
    CompileError
        For an invalid value (checked on construction and on assignment).
    """

    __slots__ = ("_num_replicas", "_num_partitions", "_device_assignment", "_env")

    def __init__(
        self,
        num_replicas: int = 1,
        num_partitions: int = 1,
        device_assignment: Any = None,
        env_option_overrides: Mapping[str, OptionValue] | Iterable[tuple[str, OptionValue]] | None = None,
        *,
        xla_dump_to: str | os.PathLike[str] | None = None,
    ) -> None:
        self.num_replicas = num_replicas
        self.num_partitions = num_partitions
        self.device_assignment = device_assignment
        env = list(_overrides(env_option_overrides))
        if xla_dump_to is not None:
            env = [p for p in env if p[0] != "xla_dump_to"] + [("xla_dump_to", os.fspath(xla_dump_to))]
        self._env = tuple(env)

    @property
    def num_replicas(self) -> int:
        return self._num_replicas

    @num_replicas.setter
    def num_replicas(self, value: int) -> None:
        self._num_replicas = _positive_int("num_replicas", value)

    @property
    def num_partitions(self) -> int:
        return self._num_partitions

    @num_partitions.setter
    def num_partitions(self, value: int) -> None:
        self._num_partitions = _positive_int("num_partitions", value)

    @property
    def device_assignment(self) -> tuple[tuple[int, ...], ...] | None:
        """Device ids per ``[replica][partition]``, or None for the default."""
        return self._device_assignment

    @device_assignment.setter
    def device_assignment(self, value: Any) -> None:
        self._device_assignment = _assignment(value)

    @property
    def env_option_overrides(self) -> tuple[tuple[str, OptionValue], ...]:
        """XLA options as ``(name, value)`` pairs."""
        return self._env

    @env_option_overrides.setter
    def env_option_overrides(self, value: Any) -> None:
        self._env = _overrides(value)

    @property
    def num_devices(self) -> int:
        """``num_replicas * num_partitions``."""
        return self._num_replicas * self._num_partitions

    def __repr__(self) -> str:
        parts = [f"num_replicas={self._num_replicas}", f"num_partitions={self._num_partitions}"]
        if self._device_assignment is not None:
            parts.append(f"device_assignment={[list(r) for r in self._device_assignment]}")
        if self._env:
            parts.append(f"env_option_overrides={dict(self._env)}")
        return f"CompileOptions({', '.join(parts)})"


@dataclasses.dataclass(frozen=True)
class MemoryStats:
    """Memory an executable needs, in bytes (``xla::CompiledMemoryStats``).

    ``peak_memory_in_bytes`` is the peak of live device memory during a run, as XLA's buffer
    assignment computes it. ``host_*`` count host memory for programs that use it.
    """

    argument_size_in_bytes: int
    output_size_in_bytes: int
    temp_size_in_bytes: int
    alias_size_in_bytes: int
    generated_code_size_in_bytes: int
    peak_memory_in_bytes: int
    host_argument_size_in_bytes: int = 0
    host_output_size_in_bytes: int = 0
    host_temp_size_in_bytes: int = 0
    host_alias_size_in_bytes: int = 0
    host_generated_code_size_in_bytes: int = 0

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


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
        return DTypeError(msg)

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


# -- Executable -------------------------------------------------------------------------------
def _execute_multi_no_token(
    exe: Any, shards: Sequence[Sequence[Any]], avals: Sequence[Any], devices: Sequence[Any], name: str
) -> tuple[list[list[Any]], None]:
    return pjrt.execute_multi(exe, shards, avals, devices, name), None


class ExecutionToken:
    """The completion of one run, side effects included (from :meth:`Executable.execute_with_token`
    and :meth:`Executable.execute_replicated_with_tokens`).

    ``block_until_ready()`` waits until the run is done on every device, its host callbacks and
    prints included; ``get_token(i)`` is device ``i``'s own token (devices in the order the run
    took its arguments). Maps to jaxlib's ``ShardedToken`` / ``Token`` (PJRT execute futures).
    """

    __slots__ = ("_t", "_name", "_devices", "_index")

    _t: Any
    _name: str
    _devices: tuple[Device, ...]
    _index: int | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("ExecutionToken objects come from Executable.execute_with_token")

    @classmethod
    def _make(cls, token: Any, name: str, devices: Sequence[Device], index: int | None = None) -> ExecutionToken:
        t = object.__new__(cls)
        t._t = token
        t._name = name
        t._devices = tuple(devices)
        t._index = index
        return t

    @property
    def devices(self) -> tuple[Device, ...]:
        """The devices whose completion this token stands for."""
        return self._devices

    def block_until_ready(self) -> ExecutionToken:
        """Wait until the run (and its side effects) is done; returns ``self``.

        Raises
        ------
        XlaRuntimeError
            When the run failed.
        """
        pjrt.token_wait(self._t, f"waiting for {self._name!r}")
        return self

    def get_token(self, device_index: int) -> ExecutionToken:
        """The token of the ``device_index``-th device of the run.

        Raises
        ------
        ShapeError
            For an index outside ``[0, number of devices)``, or on a single device's token.
        """
        from ..ops._core import int_arg

        i = int_arg("ExecutionToken.get_token", "device_index", device_index, error=ShapeError)
        if self._index is not None or not 0 <= i < len(self._devices):
            n = 1 if self._index is not None else len(self._devices)
            raise ShapeError(f"ExecutionToken.get_token: device_index {i} out of range for {n} devices")
        return ExecutionToken._make(pjrt.token_of_device(self._t, i), self._name, (self._devices[i],), i)

    def __repr__(self) -> str:
        return f"ExecutionToken({self._name!r}, devices=[{', '.join(str(d) for d in self._devices)}])"


class Executable:
    """A computation compiled and loaded on one or more devices. Call it to run it.

    Made by :func:`compile`, :func:`deserialize_executable` or :func:`load_executable`.
    """

    __slots__ = (
        "_exe", "_name", "_program_shape", "_devices", "_num_replicas", "_num_partitions", "_plan",
        "_host_callbacks", "_spmd", "__weakref__",
    )

    _exe: Any
    _name: str
    _program_shape: ProgramShape
    _devices: tuple[Device, ...]
    _num_replicas: int
    _num_partitions: int
    _plan: _CallPlan
    _spmd: Any
    _host_callbacks: tuple[Any, ...]  # kept alive with the executable (ops.HostCallback)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("Executable objects are made by xs.compile(computation, device)")

    @classmethod
    def _make(
        cls,
        exe: Any,
        name: str,
        program_shape: ProgramShape,
        devices: Sequence[Device],
        num_replicas: int,
        num_partitions: int,
    ) -> Executable:
        self = object.__new__(cls)
        self._exe = exe
        self._name = name
        self._program_shape = program_shape
        self._devices = tuple(devices)
        self._num_replicas = num_replicas
        self._num_partitions = num_partitions
        self._plan = _CallPlan(name, program_shape, self._devices)
        self._spmd = None  # execute_sharded's per-executable data (runtime/sharded.py), on first use
        self._host_callbacks = ()
        n_out = pjrt.executable_num_outputs(exe)
        if n_out is not None and n_out != len(self._plan.outputs):
            raise CompileError(
                f"{name!r}: the compiled program has {n_out} outputs but its result shape "
                f"{program_shape.result_shape()} has {len(self._plan.outputs)}"
            )
        return self

    # -- description ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The computation's name."""
        return self._name

    def program_shape(self) -> ProgramShape:
        """Parameter shapes and result shape."""
        return self._program_shape

    @property
    def input_shapes(self) -> tuple[Shape, ...]:
        """Shapes of the parameters, in order."""
        return self._program_shape.parameter_shapes()

    @property
    def output_shapes(self) -> tuple[Shape, ...]:
        """Shapes of the outputs: the tuple elements for a tuple result, else one shape."""
        r = self._program_shape.result_shape()
        return r.tuple_shapes() if r.is_tuple() else (r,)

    @property
    def devices(self) -> tuple[Device, ...]:
        """The devices it runs on, replica-major (``[r0p0, r0p1, ..., r1p0, ...]``)."""
        return self._devices

    @property
    def local_devices(self) -> tuple[Device, ...]:
        """The devices of :attr:`devices` that this process addresses, in the same order (all of
        them in a single process; under ``xs.distributed`` this process's own)."""
        me = self.client.process_index
        return tuple(d for d in self._devices if d.process_index == me)

    @property
    def client(self) -> Client:
        return self._devices[0].client

    @property
    def num_replicas(self) -> int:
        return self._num_replicas

    @property
    def num_partitions(self) -> int:
        return self._num_partitions

    def __repr__(self) -> str:
        devs = ", ".join(str(d) for d in self._devices)
        return f"Executable({self._name!r}, {self._program_shape}, devices=[{devs}])"

    # -- running -------------------------------------------------------------------------------
    def __call__(self, *args: Any) -> DeviceArray | tuple[DeviceArray, ...]:
        """Run on the executable's device.

        Parameters
        ----------
        *args:
            One per parameter: a numpy array of exactly the parameter's shape and dtype, a
            :class:`DeviceArray` (moved via the host if on another device), a Python scalar
            for a rank-0 parameter (when it converts losslessly; floats round to nearest),
            or an object with ``__dlpack__``.

        Returns
        -------
        DeviceArray, or a tuple of DeviceArrays for a tuple result. The values are computed
        asynchronously; reading them waits.

        Raises
        ------
        ShapeError
            Wrong number of arguments, or an argument of the wrong shape (named by index
            and name, with the expected and given shapes).
        DTypeError
            An argument of the wrong dtype, or a Python scalar that does not fit.
        XlaRuntimeError
            A deleted DeviceArray argument, or a failure while running.

        Maps to PJRT ``LoadedExecutable::Execute`` (``execute_sharded``).
        """
        plan = self._plan
        if not plan.fast or len(args) != plan.nparams:
            return self._call_checked(args)
        # The fast path: every check below is an identity or tuple comparison against data
        # computed once per executable; anything unusual goes through spec.to_buffer, which
        # checks and converts (and raises the errors).
        device = plan.device
        bufs = []
        for a, (spec, dtype, dims, aval) in zip(args, plan.checks):  # noqa: B905 (count checked; kwargs cost)
            ty = type(a)
            if ty is DeviceArray:
                arr = a._arr
                if arr is not None and a._device is device and a._dtype is dtype and a._shape == dims:
                    bufs.append(arr)
                    continue
            elif ty is _ndarray and a.dtype is dtype and a.shape == dims:
                bufs.append(_put(a, aval, plan.sharding, plan.jdevice))
                continue
            bufs.append(spec.to_buffer(a, device))
        outs = pjrt.execute(self._exe, bufs, plan.handlers, self._name)
        if plan.is_tuple:
            wrap = DeviceArray._wrap
            return tuple(wrap(o, d, t, device) for o, (d, t) in zip(outs, plan.outputs, strict=True))
        return DeviceArray._wrap(outs[0], plan.out_dims, plan.out_dtype, device)

    def _call_checked(self, args: tuple[Any, ...]) -> DeviceArray | tuple[DeviceArray, ...]:
        """``exe(*args)`` for every case the fast path leaves out (and its errors)."""
        plan = self._plan
        if len(args) != plan.nparams:
            raise plan.count_error(len(args))
        if plan.multi:
            raise XlaRuntimeError(
                f"{self._name}: this executable runs on {len(self._devices)} devices; "
                "call exe.execute_replicated([[args of device 0], [args of device 1], ...])"
            )
        if plan.unsupported_output is not None:
            raise plan.output_error()
        device = plan.device
        bufs = [spec.to_buffer(a, device) for spec, a in zip(plan.params, args, strict=True)]
        outs = pjrt.execute(self._exe, bufs, plan.handlers, self._name)
        wrap = DeviceArray._wrap
        if plan.is_tuple:
            return tuple(wrap(o, d, t, device) for o, (d, t) in zip(outs, plan.outputs, strict=True))
        d, t = plan.outputs[0]
        return wrap(outs[0], d, t, device)

    def execute_replicated(
        self, per_device_args: Sequence[Sequence[Any]]
    ) -> list[DeviceArray | tuple[DeviceArray, ...]]:
        """Run once on every device of the executable (replicas and/or partitions).

        Parameters
        ----------
        per_device_args:
            One argument list per device of this process, in the order of :attr:`local_devices`
            (replica-major; in a single process every device of :attr:`devices`). Each argument
            is anything ``exe(*args)`` accepts and is placed on its device; the argument shapes
            are the parameter shapes (parameters are not sharded).

        Returns
        -------
        list
            One entry per device of this process, in the same order: a DeviceArray, or a tuple
            of them for a tuple result, on that device.

        Raises
        ------
        ShapeError, DTypeError
            As for ``exe(*args)``, naming the device; also for a wrong number of lists.
        XlaRuntimeError
            On failure while running.
        DistributedError
            Under ``xs.distributed``, when the program's collectives fail because another
            process died or left (gloo's error, within about 30 s at most).

        Maps to PJRT ``LoadedExecutable::Execute`` over all addressable devices; under
        ``xs.distributed.initialize`` every process calls it with its own devices' arguments.
        """
        return self._execute_replicated(per_device_args, False)[0]

    def execute_replicated_with_tokens(
        self, per_device_args: Sequence[Sequence[Any]]
    ) -> tuple[list[DeviceArray | tuple[DeviceArray, ...]], ExecutionToken]:
        """:meth:`execute_replicated`, also returning the run's :class:`ExecutionToken`, which is
        ready when the run and its side effects (host callbacks...) are done on every device.

        Raises
        ------
        As :meth:`execute_replicated`.

        Maps to PJRT ``Execute`` with ``returned_futures`` (jaxlib ``execute_sharded(args,
        with_tokens=True)``).
        """
        outs, token = self._execute_replicated(per_device_args, True)
        return outs, ExecutionToken._make(token, self._name, self.local_devices)

    def execute_with_token(self, *args: Any) -> tuple[DeviceArray | tuple[DeviceArray, ...], ExecutionToken]:
        """``exe(*args)``, also returning the run's :class:`ExecutionToken`, which is ready when
        the run and its side effects (host callbacks, ``ops.DebugPrint``...) are done.

        Raises
        ------
        As ``exe(*args)``; XlaRuntimeError for a multi-device executable (use
        :meth:`execute_replicated_with_tokens`).

        Maps to PJRT ``Execute`` with ``returned_futures`` (jaxlib ``execute_sharded(args,
        with_tokens=True)``).
        """
        plan = self._plan
        if len(args) != plan.nparams:
            raise plan.count_error(len(args))
        if plan.multi:
            raise XlaRuntimeError(
                f"{self._name}: this executable runs on {len(self._devices)} devices; "
                "call exe.execute_replicated_with_tokens([[args of device 0], [args of device 1], ...])"
            )
        if plan.unsupported_output is not None:
            raise plan.output_error()
        device = plan.device
        bufs = [spec.to_buffer(a, device) for spec, a in zip(plan.params, args, strict=True)]
        outs, token = pjrt.execute_with_token(self._exe, bufs, plan.handlers, self._name)
        wrap = DeviceArray._wrap
        tok = ExecutionToken._make(token, self._name, (device,))
        if plan.is_tuple:
            return tuple(wrap(o, d, t, device) for o, (d, t) in zip(outs, plan.outputs, strict=True)), tok
        d, t = plan.outputs[0]
        return wrap(outs[0], d, t, device), tok

    def _execute_replicated(
        self, per_device_args: Sequence[Sequence[Any]], with_tokens: bool
    ) -> tuple[list[DeviceArray | tuple[DeviceArray, ...]], Any]:
        plan = self._plan
        devs = self.local_devices
        if isinstance(per_device_args, (str, bytes)) or not isinstance(per_device_args, Sequence):
            raise ShapeError(
                f"{self._name}: execute_replicated takes a list of {len(devs)} argument lists, "
                f"got {_describe_value(per_device_args)}"
            )
        if len(per_device_args) != len(devs):
            raise ShapeError(
                f"{self._name}: execute_replicated needs one argument list per device "
                f"({len(devs)}: {', '.join(str(d) for d in devs)}), got {len(per_device_args)}"
            )
        if plan.unsupported_output is not None:
            raise plan.output_error()
        shards: list[list[Any]] = [[None] * len(devs) for _ in plan.params]
        for k, (dev, args) in enumerate(zip(devs, per_device_args, strict=True)):
            where = f"device {k} ({dev}), "
            if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
                raise ShapeError(f"{self._name}: {where}args must be a list, got {_describe_value(args)}")
            if len(args) != plan.nparams:
                raise plan.count_error(len(args), where)
            for spec, a in zip(plan.params, args, strict=True):
                shards[spec.index][k] = spec.to_buffer(a, dev, where)
        try:
            outs, token = (pjrt.execute_multi_with_token if with_tokens else _execute_multi_no_token)(
                self._exe, shards, [p.aval for p in plan.params], [d._d for d in self._devices], self._name
            )
        except XlaRuntimeError as e:
            if self.client.process_count > 1:
                from ..distributed import _execution_failed

                raise _execution_failed(self._name, e) from e
            raise
        wrap = DeviceArray._wrap
        result: list[DeviceArray | tuple[DeviceArray, ...]] = []
        for k, dev in enumerate(devs):
            vals = tuple(wrap(outs[j][k], d, t, dev) for j, (d, t) in enumerate(plan.outputs))
            result.append(vals if plan.is_tuple else vals[0])
        return result, token

    def execute_sharded(self, args: Sequence[Any]) -> Any:
        """Run an SPMD program once on all its devices, each parameter given whole or in shards.

        Parameters
        ----------
        args:
            One entry per parameter, each one of:

            * a numpy array (or scalar, DeviceArray, array-like) of the parameter's *global*
              shape: split by the parameter's sharding and copied to the devices;
            * a list of per-device shards (numpy arrays or DeviceArrays), one per device in
              :attr:`devices` order, each of the sharding's tile shape (under
              ``xs.distributed``: one per device of this process, :attr:`local_devices`);
            * an ``xs.ShardedArray`` (from :func:`xlasdk.shard` or an earlier run): used in place
              when its devices and sharding are the parameter's, else resharded through the host.

        Returns
        -------
        ShardedArray, or a tuple of them for a tuple result: each output's per-device shards
        (this process's devices') and sharding (``.to_numpy()`` assembles the global array).

        The shardings are the compiled program's (``get_parameter_shardings`` /
        ``get_output_shardings``: what the program was built with, after XLA's propagation); an
        unannotated parameter is replicated, and so is an unannotated result.

        Raises
        ------
        ShapeError, DTypeError
            For a wrong number of arguments or shards, or a value or shard of the wrong shape or
            dtype (naming the parameter, the shard and its device, and what was expected).
        XlaRuntimeError
            For deleted arrays or a failure while running.

        Maps to PJRT ``LoadedExecutable::Execute`` (jaxlib ``execute_sharded``) on global arrays
        (``ArrayImpl`` + ``GSPMDSharding``).
        """
        spmd = self._spmd
        if spmd is None:
            from .sharded import _Spmd

            spmd = self._spmd = _Spmd(self)
        return spmd.run(self, args)

    # -- introspection -------------------------------------------------------------------------
    def hlo_text(self) -> str:
        """The optimized, scheduled HLO module with ``metadata={...}`` (``get_hlo_text()``)."""
        return pjrt.executable_hlo_text(self._exe)

    def _hlo_modules(self) -> list[Any]:
        """jaxlib ``HloModule`` objects of the optimized program (for the compat layer)."""
        return pjrt.executable_hlo_modules(self._exe)

    def cost_analysis(self) -> dict[str, float]:
        """XLA's cost estimate: ``flops``, ``transcendentals``, ``bytes accessed`` and per-operand
        ``bytes accessed{i}{}`` / ``utilization{i}{}`` keys (``LoadedExecutable.cost_analysis``)."""
        return pjrt.executable_cost_analysis(self._exe)

    def memory_stats(self) -> MemoryStats:
        """Argument, output, temporary and peak memory in bytes (``GetCompiledMemoryStats``)."""
        return MemoryStats(**pjrt.executable_memory_stats(self._exe))

    @property
    def fingerprint(self) -> str | None:
        """XLA's fingerprint of the compiled program (None if the backend has none).

        Stable across :meth:`serialize` / :func:`deserialize_executable`.
        """
        fp = pjrt.executable_fingerprint(self._exe)
        if fp is None:
            return None
        try:
            return fp.decode("ascii")
        except UnicodeDecodeError:
            return fp.hex()

    # -- serialization -------------------------------------------------------------------------
    def serialize(self) -> bytes:
        """The executable as bytes, for :func:`deserialize_executable` in this or another process.

        The blob holds XLA's serialized executable plus the program shape and device layout,
        under a checksum. It loads only with the same jaxlib version and platform. Like any
        compiled code, load blobs only from sources you trust.

        Maps to PJRT ``SerializeExecutable``.

        Raises
        ------
        XlaRuntimeError
            For an executable that calls Python host callbacks (``ops.HostCallback``,
            ``ops.DebugPrint``): the callbacks live in this process and cannot be serialized.
        """
        if self._host_callbacks:
            raise XlaRuntimeError(
                f"{self._name!r} calls {len(self._host_callbacks)} Python host callbacks, which live in this "
                "process: it cannot be serialized (compile it again where it runs)"
            )
        blob = pjrt.serialize_executable(self._exe, self._name)
        header = {
            "name": self._name,
            "jaxlib": pjrt.JAXLIB_VERSION,
            "xla_client_version": pjrt.XLA_CLIENT_VERSION,
            "platform": self._devices[0].platform,
            "num_replicas": self._num_replicas,
            "num_partitions": self._num_partitions,
            "device_ids": [d.id for d in self._devices],
            "parameter_names": list(self._program_shape.parameter_names()),
            "parameters": [_shape_to_json(s) for s in self._program_shape.parameter_shapes()],
            "result": _shape_to_json(self._program_shape.result_shape()),
        }
        hbytes = json.dumps(header, separators=(",", ":")).encode()
        crc = zlib.crc32(blob, zlib.crc32(hbytes))
        return _MAGIC + _PREFIX.pack(_FORMAT_VERSION, len(hbytes), len(blob), crc) + hbytes + blob

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`serialize` to ``path`` (load it with :func:`load_executable`).

        The executable is serialized first, then written to a temporary file in the same
        directory, synced and renamed over ``path``: a failed serialization or write leaves an
        existing file exactly as it was and no temporary file behind (``OSError`` on a failed write).
        """
        from .._atomic import atomic_write

        atomic_write(path, self.serialize())


# -- compile ----------------------------------------------------------------------------------
def _place(options: CompileOptions, device: Device | str | None) -> list[Device]:
    n = options.num_devices
    assignment = options.device_assignment
    if assignment is not None:
        shape = (len(assignment), len(assignment[0]))
        if shape != (options.num_replicas, options.num_partitions):
            raise CompileError(
                f"CompileOptions.device_assignment has shape {list(shape)}, expected "
                f"[num_replicas, num_partitions] = [{options.num_replicas}, {options.num_partitions}]"
            )
        base = _resolve_device(device)
        cl = base.client
        devs = [cl.device(i) for row in assignment for i in row]
        if device is not None and n == 1 and devs[0] != base:
            raise CompileError(f"compile: device {base} disagrees with device_assignment {list(assignment)}")
        return devs
    base = _resolve_device(device)
    if n == 1:
        return [base]
    all_devs = base.client.devices()  # under xs.distributed: every process's, the same everywhere
    start = 0 if device is None else all_devs.index(base)
    if start + n > len(all_devs):
        raise CompileError(
            f"compile: num_replicas={options.num_replicas} x num_partitions={options.num_partitions} needs "
            f"{n} devices from {base}, but the {base.client.name} client has {len(all_devs)} "
            f"({', '.join(str(d) for d in all_devs)}); for CPU use xs.client('cpu', num_devices={n})"
        )
    return all_devs[start : start + n]


_DEFAULT_OPTIONS: Final = CompileOptions()


def compile(
    computation: _ComputationLike,
    device: Device | str | None = None,
    *,
    options: CompileOptions | None = None,
    cache: CacheArg = None,
) -> Executable:
    """Compile ``computation`` with XLA and load it on ``device``.

    Parameters
    ----------
    computation:
        An :class:`~xlasdk.XlaComputation`.
    device:
        A :class:`Device`, a ``"cpu:0"``-style string, or None for the default device. With
        several replicas/partitions it is the first device used.
    options:
        :class:`CompileOptions` (replicas, partitions, device assignment, XLA flags).
    cache:
        The on-disk compile cache: ``True`` (the default cache directory), a directory, an
        :class:`~xlasdk.runtime.cache.CompileCache`, ``False`` (never), or ``None`` (the cache in
        ``$XLASDK_CACHE_DIR`` if that variable is set, else none). A hit loads the stored
        executable instead of compiling; a corrupt entry is discarded and recompiled.

    Returns
    -------
    Executable

    Raises
    ------
    CompileError
        When XLA rejects the program or the options.
    UnknownDeviceError
        For an unknown device, or a device assignment naming a missing device.

    Maps to PJRT ``Client::CompileAndLoad`` (``client.compile_and_load``).
    """
    if not (hasattr(computation, "_mlir_module_text") and hasattr(computation, "program_shape")):
        raise TypeError(f"compile: expected an XlaComputation, got {type(computation).__name__}")
    opts = options if options is not None else _DEFAULT_OPTIONS
    if not isinstance(opts, CompileOptions):
        raise TypeError(f"compile: options must be xs.CompileOptions, got {type(opts).__name__}")
    name = str(computation.name)
    # the stored xs.ProgramShape (xla_client.XlaComputation.program_shape() gives the former
    # API's shapes, whose element_type() is a numpy dtype)
    program_shape = getattr(computation, "_program_shape", None) or computation.program_shape()
    _check_runnable(name, program_shape)
    if not getattr(computation, "_padded_results", False) and not all(
        s.is_static() for s in (*program_shape.parameter_shapes(), *_leaves(program_shape.result_shape()))
    ):
        from .dynamic import compile_dynamic  # bounded dynamic shapes: real extents of the results

        return compile_dynamic(computation, name, program_shape, device, opts, cache)
    cross_partition = getattr(computation, "_cross_partition_ids", None)
    if cross_partition is not None:  # what XLA would abort on, found once per computation
        from ..ops.collectives import partition_ids_problem

        problem = partition_ids_problem(cross_partition(), opts.num_partitions)
        if problem is not None:
            raise CompileError(f"compile: {name!r}: {problem}")
    devs = _place(opts, device)
    if opts.num_partitions > 1:  # shardings that do not fit the partitions, before XLA sees them
        from ..sharding import check_computation_shardings

        check_computation_shardings(computation, opts.num_partitions, opts.num_replicas)
    text = computation._mlir_module_text()
    # Loaded from a file or bytes: not checked op by op, so XLA's compiler runs in the worker
    # process first (it aborts on some verified modules). Other platforms compile in-process.
    isolate = getattr(computation, "_source_format", None) is not None and devs[0].platform == "cpu"
    get_callbacks = getattr(computation, "_callbacks", None)
    callbacks: tuple[Any, ...] = get_callbacks() if get_callbacks is not None else ()
    if callbacks:  # Python host callbacks: compiled here with them, never cached or isolated
        return _compile_with_callbacks(computation, name, program_shape, opts, devs, callbacks)
    if "python_cpu_callback" in text or "python_gpu_callback" in text:  # jaxlib crashes running it
        raise CompileError(
            f"compile: {name!r} calls Python host callbacks (a custom call to jaxlib's "
            "xla_*python_*_callback, as jax.debug.print and jax.pure_callback make), but the Python "
            "functions do not travel with a loaded program; build the callbacks with ops.HostCallback "
            "(running it without them would crash the process)"
        )

    def build() -> Executable:  # only on a cache miss (or with no cache)
        # Always explicit: without it XLA assigns replica 0 to device 0 whatever DeviceList says.
        ids = [d.id for d in devs]
        assignment = np.asarray(ids, dtype=np.int64).reshape(opts.num_replicas, opts.num_partitions)
        jopts = pjrt.make_compile_options(
            opts.num_replicas, opts.num_partitions, assignment, opts.env_option_overrides
        )
        if isolate:
            exe = compile_isolated(
                devs[0].client._c, text, [d._d for d in devs], jopts,
                opts.num_replicas, opts.num_partitions, opts.env_option_overrides, name,
            )
        else:
            exe = pjrt.compile_and_load(devs[0].client._c, text, [d._d for d in devs], jopts, name)
        return Executable._make(exe, name, program_shape, devs, opts.num_replicas, opts.num_partitions)

    return compile_cached(cache, text, opts, devs, build, source=computation)


def _compile_with_callbacks(
    computation: Any,
    name: str,
    program_shape: ProgramShape,
    opts: CompileOptions,
    devs: list[Device],
    callbacks: tuple[Any, ...],
) -> Executable:
    """Compile a built computation that calls Python host callbacks (``ops.HostCallback``): in
    this process (the callbacks are Python objects of this process), without the compile cache
    (an executable holding callbacks cannot be serialized), and keeping the callbacks alive with
    the executable."""
    from .._jaxlib.callbacks import compile_and_load_with_callbacks

    if any(d.platform != "cpu" for d in devs):
        raise CompileError(
            f"compile: {name!r} calls Python host callbacks, which jaxlib {pjrt.JAXLIB_VERSION} runs on CPU "
            f"devices only (got {devs[0]})"
        )
    ids = [d.id for d in devs]
    assignment = np.asarray(ids, dtype=np.int64).reshape(opts.num_replicas, opts.num_partitions)
    jopts = pjrt.make_compile_options(opts.num_replicas, opts.num_partitions, assignment, opts.env_option_overrides)
    exe = compile_and_load_with_callbacks(
        devs[0].client._c, computation._mlir_module(), [d._d for d in devs], jopts, name, callbacks
    )
    result = Executable._make(exe, name, program_shape, devs, opts.num_replicas, opts.num_partitions)
    result._host_callbacks = callbacks
    return result


def _leaves(s: Shape) -> tuple[Shape, ...]:
    return s.tuple_shapes() if s.is_tuple() else (s,)


def _check_runnable(name: str, program_shape: ProgramShape) -> None:
    """PJRT executables take and return flat lists of arrays: reject nested tuples up front."""
    for i, p in enumerate(program_shape.parameter_shapes()):
        if p.is_tuple():
            raise CompileError(
                f"compile: parameter {i} of {name!r} is a tuple {p}; PJRT executables take arrays only "
                "(pass the elements as separate parameters)"
            )
    r = program_shape.result_shape()
    if r.is_tuple() and any(s.is_tuple() for s in r.tuple_shapes()):
        raise CompileError(
            f"compile: {name!r} returns a nested tuple {r}; PJRT executables return a flat list of arrays "
            "(build the root as one flat ops.Tuple)"
        )


# -- deserialization --------------------------------------------------------------------------
_MAGIC: Final = b"XLASDK-EXECUTABLE\n"
_PREFIX: Final = struct.Struct("<IIQI")  # format version, header length, blob length, crc32
_FORMAT_VERSION: Final = 1


def _shape_to_json(s: Shape) -> Any:
    if s.is_tuple():
        return {"tuple": [_shape_to_json(x) for x in s.tuple_shapes()]}
    if s.is_token():
        return {"token": True}
    return {"etype": int(s.element_type()), "dims": list(s.dimensions())}


def _shape_from_json(j: Any) -> Shape:
    if not isinstance(j, dict):
        raise ValueError(f"bad shape entry {j!r}")
    if "tuple" in j:
        return Shape.tuple_shape(_shape_from_json(x) for x in j["tuple"])
    if j.get("token"):
        return Shape.token_shape()
    return Shape.array_shape(PrimitiveType(int(j["etype"])), [int(d) for d in j["dims"]])


def _parse(data: Any, what: str, verified: bool = False) -> tuple[dict[str, Any], bytes]:
    """(header, XLA blob) of :meth:`Executable.serialize` bytes, after every format check.

    ``verified``: the caller has already checked these exact bytes against a stronger checksum
    (the compile cache's sha256), so the crc32 is not computed again.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise FormatError(f"{what}: expected bytes, got {type(data).__name__}")
    if not (isinstance(data, bytes) or isinstance(data, memoryview) and isinstance(data.obj, bytes)
            and data.c_contiguous):
        data = bytes(data)  # a private copy of mutable buffers
    # Views of immutable bytes: the only copy made is the blob handed to XLA.
    view = memoryview(data).cast("B")
    n = len(view)
    if not n:
        raise FormatError(f"{what}: the data is empty")
    if view[: len(_MAGIC)].tobytes() != _MAGIC:
        if n < len(_MAGIC) and _MAGIC.startswith(view.tobytes()):
            raise FormatError(f"{what}: truncated: only {n} bytes")
        raise FormatError(
            f"{what}: not an xlasdk serialized executable (it does not start with {_MAGIC!r}; "
            f"starts with {bytes(view[:16])!r})"
        )
    fixed = len(_MAGIC) + _PREFIX.size
    if n < fixed:
        raise FormatError(f"{what}: truncated: {n} bytes, the fixed header alone is {fixed}")
    version, hlen, blen, crc = _PREFIX.unpack_from(view, len(_MAGIC))
    if version != _FORMAT_VERSION:
        raise FormatError(f"{what}: format version {version} is unsupported (xlasdk reads {_FORMAT_VERSION})")
    expected = fixed + hlen + blen
    if n != expected:
        kind = "truncated" if n < expected else "has trailing data"
        raise FormatError(f"{what}: {kind}: {n} bytes, the header says {expected}")
    hbytes = bytes(view[fixed : fixed + hlen])
    body = view[fixed + hlen :]
    if not verified and zlib.crc32(body, zlib.crc32(hbytes)) != crc:
        raise FormatError(f"{what}: corrupt: checksum mismatch")
    blob = bytes(body)
    try:
        header = json.loads(hbytes.decode())
        if not isinstance(header, dict):
            raise ValueError("header is not an object")
    except (ValueError, UnicodeDecodeError) as e:
        raise FormatError(f"{what}: corrupt header: {e}") from None
    return header, blob


_load_options_memo: dict[tuple[int, int, tuple[int, ...]], Any] = {}


def _load_options(nr: int, npart: int, ids: tuple[int, ...]) -> Any:
    """The jaxlib ``CompileOptions`` that place a deserialized executable on device ``ids``.

    Memoised: the object is only ever read (jaxlib copies it into each load).
    """
    key = (nr, npart, ids)
    opts = _load_options_memo.get(key)
    if opts is None:
        assignment = np.asarray(ids, dtype=np.int64).reshape(nr, npart)
        opts = pjrt.make_compile_options(nr, npart, assignment, ())
        if len(_load_options_memo) >= 256:
            _load_options_memo.clear()
        _load_options_memo[key] = opts
    return opts


def deserialize_executable(
    data: bytes | bytearray | memoryview,
    device: Device | str | None = None,
    *,
    _what: str = "",
    _verified: bool = False,
) -> Executable:
    """Load an executable made by :meth:`Executable.serialize`, without compiling.

    Parameters
    ----------
    data:
        The bytes from :meth:`Executable.serialize`.
    device:
        Where to load it: a :class:`Device`, a ``"cpu:0"``-style string or None (default
        device). Multi-device executables load on the same device ids of that device's client.

    Raises
    ------
    FormatError
        For empty, truncated, corrupt or foreign data, or data from another jaxlib version or
        platform; the message names what was wrong.
    UnknownDeviceError
        If the target client lacks a device the executable needs.

    Maps to PJRT ``DeserializeExecutable`` (``client.deserialize_executable``).
    """
    what = _what or "deserialize_executable"
    header, blob = _parse(data, what, _verified)
    try:
        name = str(header["name"])
        jaxlib_version = str(header["jaxlib"])
        xc_version = int(header["xla_client_version"])
        platform = str(header["platform"])
        nr = int(header["num_replicas"])
        npart = int(header["num_partitions"])
        ids = [int(i) for i in header["device_ids"]]
        names = [str(n) for n in header["parameter_names"]]
        params = [_shape_from_json(j) for j in header["parameters"]]
        result = _shape_from_json(header["result"])
    except (KeyError, TypeError, ValueError) as e:
        raise FormatError(f"{what}: corrupt header: {e}") from None
    if jaxlib_version != pjrt.JAXLIB_VERSION or xc_version != pjrt.XLA_CLIENT_VERSION:
        raise FormatError(
            f"{what}: {name!r} was serialized with jaxlib {jaxlib_version} (xla_client {xc_version}); "
            f"this process has jaxlib {pjrt.JAXLIB_VERSION} (xla_client {pjrt.XLA_CLIENT_VERSION}): "
            "recompile it"
        )
    base = _resolve_device(device)
    if base.platform != platform:
        raise FormatError(f"{what}: {name!r} was compiled for {platform}, cannot load it on {base}")
    if nr * npart != len(ids) or not ids:
        raise FormatError(f"{what}: corrupt header: {len(ids)} device ids for {nr} x {npart} devices")
    if len(ids) == 1:
        devs = [base]
    else:
        try:
            devs = [base.client.device(i) for i in ids]
        except UnknownDeviceError as e:
            raise UnknownDeviceError(f"{what}: {name!r} needs devices {ids}: {e}") from None
    options = _load_options(nr, npart, tuple(d.id for d in devs))
    exe = pjrt.deserialize_executable(base.client._c, blob, [d._d for d in devs], options, what)
    program_shape = ProgramShape(params, result, names)
    return Executable._make(exe, name, program_shape, devs, nr, npart)


def load_executable(path: str | os.PathLike[str], device: Device | str | None = None) -> Executable:
    """Load an executable saved with :meth:`Executable.save`.

    Raises
    ------
    FormatError
        If the file is missing, unreadable, empty, truncated or corrupt (the message names
        the file).
    """
    spath = os.fspath(path)
    what = f"load_executable({spath!r})"
    try:
        with open(spath, "rb") as f:
            data = f.read()
    except OSError as e:
        raise FormatError(f"{what}: cannot read the file: {e.strerror or e}") from None
    return deserialize_executable(data, device, _what=what)
