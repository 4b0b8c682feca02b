"""``Client`` and the client factories of the former ``xla_client``, and running with Python values."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from .. import errors as _errors
from .. import ops as _xs_ops
from .._jaxlib import compat as _compat
from ..builder import XlaBuilder as _XlaBuilder
from ..builder import XlaOp
from ..errors import ShapeError, XlaRuntimeError
from ..program.computation import XlaComputation as _XlaComputation
from ..runtime import CompileOptions as _CompileOptions
from ..runtime import Device, DeviceArray, HostBufferSemantics, UnknownDeviceError, device_put
from ..runtime import client as _sdk_client
from ..runtime import compile as _sdk_compile
from ..runtime import deserialize_executable as _sdk_deserialize
from ..runtime.device import Client as _SdkClient
from ..shape import Shape as _Shape
from ._buffers import Buffer, _unwrap
from ._computations import HloModule, XlaComputation, _as_computation
from ._executables import LoadedExecutable
from ._options import CompileOptions
from ._shapes import CompileError, FormatError, _native_shape


# -- devices ----------------------------------------------------------------------------------
class _FormerDevice(Device):
    """A device as the former ``xla_client`` client lists it: the same ``xs.Device`` (equal to
    it, accepted wherever one is), whose :meth:`live_buffers` gives the former :class:`Buffer`
    objects of its client rather than ``xs.DeviceArray`` objects."""

    __slots__ = ("_former",)

    _former: weakref.ref[Client]

    @classmethod
    def _of(cls, device: Device, former: Client) -> _FormerDevice:
        d = object.__new__(cls)
        for name in Device.__slots__:
            object.__setattr__(d, name, getattr(device, name))
        d._former = weakref.ref(former)
        return d

    def live_buffers(self) -> list[Any]:
        """The client's :class:`Buffer` objects on this device that are alive and not deleted,
        newest first (the former ``Device.live_buffers``)."""
        former = self._former()
        if former is None:
            return []
        return [b for b in former.live_buffers() if b._a.device == self]


def _with_operand_layouts(fn: Callable[..., Any], layouts: Sequence[tuple[int, ...] | None]) -> Callable[..., Any]:
    """``fn`` called with each operand laid out as ``layouts`` says (a ``minor_to_major``
    permutation, or None for row-major): the same values, with the strides of that layout."""

    def laid_out(*values: Any) -> Any:
        args = list(values)
        for i, m2m in enumerate(layouts):
            if m2m is not None and isinstance(args[i], np.ndarray):
                major_to_minor = m2m[::-1]
                physical = np.ascontiguousarray(np.transpose(args[i], major_to_minor))
                args[i] = np.transpose(physical, np.argsort(major_to_minor))
        return fn(*args)

    return laid_out


# -- client -----------------------------------------------------------------------------------
class Client:
    """A backend with the former ``xla_client.Client`` methods (from :func:`make_cpu_client`).

    Wraps an ``xs.Client`` (:attr:`sdk_client`). Buffers and executables it makes remember
    it; :meth:`live_buffers` lists its buffers that are still alive.
    """

    __slots__ = ("_c", "_live", "_devices", "__weakref__")

    _c: _SdkClient
    _live: list[weakref.ref[Buffer]]
    _devices: list[Device]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("use xla_client.make_cpu_client()")

    @classmethod
    def _make(cls, sdk_client: _SdkClient) -> Client:
        c = object.__new__(cls)
        c._c = sdk_client
        c._live = []
        c._devices = [_FormerDevice._of(d, c) for d in sdk_client.devices()]
        return c

    # -- description ---------------------------------------------------------------------------
    @property
    def sdk_client(self) -> _SdkClient:
        """The ``xs.Client`` behind this one."""
        return self._c

    @property
    def platform(self) -> str:
        return self._c.platform

    @property
    def platform_version(self) -> str:
        return self._c.platform_version

    def devices(self) -> list[Device]:
        """The client's devices (``xs.Device`` objects whose ``live_buffers()`` lists this
        client's :class:`Buffer` objects, as the former API did)."""
        return list(self._devices)

    def local_devices(self) -> list[Device]:
        return list(self._devices)

    def device_count(self) -> int:
        return self._c.device_count

    def local_device_count(self) -> int:
        return self._c.device_count

    def process_index(self) -> int:
        return 0

    host_id = process_index

    def get_default_device_assignment(
        self, num_replicas: int, num_partitions: int | None = None
    ) -> list[Device] | list[list[Device]]:
        """The first ``num_replicas * num_partitions`` devices: a list per replica, or (when
        ``num_partitions`` is None) one device per replica.

        Raises
        ------
        XlaRuntimeError
            If the client has too few devices.
        """
        parts = 1 if num_partitions is None else num_partitions
        devs = self.devices()
        if num_replicas < 1 or parts < 1 or num_replicas * parts > len(devs):
            raise XlaRuntimeError(
                f"get_default_device_assignment: {num_replicas} x {parts} devices requested, "
                f"the client has {len(devs)}"
            )
        if num_partitions is None:
            return devs[:num_replicas]
        return [devs[r * parts : (r + 1) * parts] for r in range(num_replicas)]

    def __repr__(self) -> str:
        return f"xla_client.Client({self._c!r})"

    # -- buffers -------------------------------------------------------------------------------
    def _track(self, buf: Buffer) -> None:
        live = self._live
        live.append(weakref.ref(buf))
        if len(live) >= 256 and len(live) & (len(live) - 1) == 0:  # prune at powers of two
            live[:] = [r for r in live if r() is not None]

    def live_buffers(self) -> list[Buffer]:
        """Buffers made through this client that are alive and not deleted, newest first."""
        out: list[Buffer] = []
        keep: list[weakref.ref[Buffer]] = []
        for r in self._live:
            b = r()
            if b is not None and not b.is_deleted():
                keep.append(r)
                out.append(b)
        self._live = keep
        out.reverse()
        return out

    live_arrays = live_buffers

    def buffer_from_pyval(
        self,
        pyval: Any,
        device: Device | None = None,
        force_copy: bool = False,
        host_buffer_semantics: Any = None,
    ) -> Buffer:
        """Copy a value to ``device`` (default: the client's first device).

        Parameters
        ----------
        pyval:
            numpy array or scalar (keeps its dtype), Python scalar (``float`` -> f32, ``int``
            -> s32, ``bool`` -> pred), :class:`Buffer`, ``xs.DeviceArray`` or a DLPack producer.
        device:
            A device of this client (from :meth:`devices`).
        force_copy:
            Copy even under ``HostBufferSemantics.ZERO_COPY``.
        host_buffer_semantics:
            A :class:`HostBufferSemantics` (default ``ZERO_COPY``, as the former client):
            ``ZERO_COPY`` aliases a C-contiguous numpy array whose data is 64-byte aligned
            (``xs.aligned_empty`` makes one) on CPU, and copies anything else;
            ``IMMUTABLE_ONLY_DURING_CALL`` / ``IMMUTABLE_UNTIL_TRANSFER_COMPLETES`` copy.

        Returns
        -------
        Buffer
            A new buffer; it aliases ``pyval`` only under ``ZERO_COPY`` (then
            ``unsafe_buffer_pointer() == pyval.ctypes.data`` and the buffer keeps ``pyval``
            alive).

        Raises
        ------
        DTypeError
            For values of no XLA element type, or a Python int outside s32.
        ValueError
            For an unknown ``host_buffer_semantics``.

        Maps to PJRT ``Client::BufferFromHostBuffer``.
        """
        dev = device if device is not None else self._c.default_device
        value = _unwrap(pyval)
        if isinstance(value, DeviceArray):
            value = value.to_numpy()  # a fresh buffer, never an alias
        sem = HostBufferSemantics.ZERO_COPY if host_buffer_semantics is None else host_buffer_semantics
        return Buffer._make(device_put(value, dev, semantics=sem, force_copy=bool(force_copy)), self)

    # -- compiling -----------------------------------------------------------------------------
    def compile(self, computation: Any, compile_options: Any = None) -> LoadedExecutable:
        """Compile ``computation`` for this client's devices.

        Parameters
        ----------
        computation:
            An :class:`XlaComputation` (from :class:`XlaBuilder` or ``xs``), or StableHLO
            module text / bytecode.
        compile_options:
            :class:`CompileOptions` (or ``xs.CompileOptions``), or a list of devices to run on
            (the newer ``compile(module, executable_devices, ...)`` form). Default: one
            replica on the client's first device.

        Raises
        ------
        CompileError
            When XLA rejects the program or options (also an :class:`XlaRuntimeError`).
        FormatError
            For unreadable StableHLO text.
        """
        if isinstance(compile_options, Sequence) and not isinstance(compile_options, (str, bytes)):
            return self.compile_and_load(computation, compile_options)
        return self.compile_and_load(computation, None, compile_options)

    def compile_and_load(
        self, computation: Any, executable_devices: Sequence[Device] | None = None, compile_options: Any = None
    ) -> LoadedExecutable:
        """Compile ``computation`` and load it on ``executable_devices`` (default: as the
        options' device assignment says, else the client's first devices).

        Raises
        ------
        CompileError
            When XLA rejects the program or options, or ``executable_devices`` does not match
            ``num_replicas * num_partitions``.
        """
        what = "compile"
        comp = _as_computation(computation, what)
        opts = compile_options if compile_options is not None else CompileOptions()
        if not isinstance(opts, _CompileOptions):
            raise TypeError(f"{what}: compile_options must be a CompileOptions, got {type(opts).__name__}")
        if isinstance(opts, CompileOptions):
            opts._check_supported(what)
        devs = list(executable_devices) if executable_devices is not None else []
        if devs:
            if len(devs) != opts.num_devices:
                raise CompileError(
                    f"{what}: {len(devs)} executable_devices for num_replicas={opts.num_replicas} x "
                    f"num_partitions={opts.num_partitions}"
                )
            ids = np.asarray([d.id for d in devs], dtype=np.int64).reshape(opts.num_replicas, opts.num_partitions)
            opts = _CompileOptions(opts.num_replicas, opts.num_partitions, ids, opts.env_option_overrides)
            base = devs[0]
        else:
            base = self._c.default_device
        try:
            if opts.device_assignment is not None and not devs:
                base = self._c.device(opts.device_assignment[0][0])
            exe = _sdk_compile(comp, base, options=opts)
        except UnknownDeviceError as e:
            raise CompileError(f"{what}: {e}") from e
        except _errors.CompileError as e:
            if isinstance(e, XlaRuntimeError):
                raise
            raise CompileError(str(e)) from e
        return LoadedExecutable._make(exe, self)

    def emit_python_callback(
        self,
        callable: Callable[..., Any],  # noqa: A002 - the former name
        builder: _XlaBuilder,
        operands: Sequence[XlaOp],
        result_shapes: Sequence[_Shape],
        operand_layouts: Sequence[Any] | None = None,
        has_side_effects: bool = False,
    ) -> tuple[XlaOp, Any]:
        """Build a call of the Python function ``callable`` (the former
        ``Client.emit_python_callback``), over ``ops.HostCallback``.

        ``callable`` receives one numpy array per operand (``None`` for a token operand) and
        returns a tuple (or list) with one entry per shape of ``result_shapes`` (the entry of a
        token result is ignored), as jaxlib's former callback did.

        Parameters
        ----------
        builder: the XlaBuilder; operands: its array or token XlaOps; result_shapes: array or
            token Shapes.
        operand_layouts: None, or one entry per operand that is None, a Shape with a layout, or
            a ``minor_to_major`` permutation. The callable sees the same values whatever the
            layout, with the strides of that layout, as jaxlib handed them over: ``(0, 1)`` gives
            a Fortran-ordered (``f_contiguous``) array.
        has_side_effects: keep the call even when its results are unused.

        Tokens order the call: the call runs after the side effects that made its token
        operands (several are joined with ``AfterAll``), and every token result is a new token
        for what must come after it.

        Returns
        -------
        ``(op, keepalive)``: a tuple-shaped XlaOp of the results, and the callback object
        (executables keep their callbacks alive themselves; holding it is harmless).

        Raises
        ------
        DTypeError, ShapeError
            As ``ops.HostCallback``; ShapeError for an operand layout that is not a permutation
            of the operand's dimensions, or a count of layouts other than the operands'.
        """
        layouts: list[tuple[int, ...] | None] = [None] * len(operands)
        if operand_layouts is not None:
            if len(operand_layouts) != len(operands):
                raise ShapeError(
                    f"emit_python_callback: {len(operand_layouts)} operand_layouts for {len(operands)} operands"
                )
            for i, (lay, x) in enumerate(zip(operand_layouts, operands, strict=True)):
                rank = x.shape.rank() if isinstance(x, XlaOp) and x.shape.is_array() else 0
                m2m: Any = lay
                if isinstance(lay, _Shape):
                    layout = lay.layout()
                    m2m = None if layout is None else layout.minor_to_major()
                if m2m is not None and sorted(int(d) for d in m2m) != list(range(rank)):
                    raise ShapeError(
                        f"emit_python_callback: operand_layouts[{i}] = {tuple(m2m)!r} is not a layout of a "
                        f"rank-{rank} operand (expected a permutation of 0..{rank - 1})"
                    )
                if m2m is not None and list(m2m) != list(range(rank - 1, -1, -1)):
                    layouts[i] = tuple(int(d) for d in m2m)
        if any(lay is not None for lay in layouts):
            callable = _with_operand_layouts(callable, layouts)  # noqa: A001 - the former name
        shapes = [_native_shape(s) if isinstance(s, _Shape) else s for s in result_shapes]
        in_tok = [isinstance(x, XlaOp) and x.shape.is_token() for x in operands]
        out_tok = [isinstance(s, _Shape) and s.is_token() for s in shapes]
        if not any(in_tok) and not any(out_tok):
            op = _xs_ops.HostCallback(
                callable, list(operands), shapes, has_side_effect=has_side_effects, builder=builder
            )
            return op, getattr(op.extra, "callback", None)
        tokens = [x for x, t in zip(operands, in_tok, strict=True) if t]
        if not tokens:
            token = _xs_ops.CreateToken(builder)
        elif len(tokens) == 1:
            token = tokens[0]
        else:
            token = _xs_ops.AfterAll(builder, tokens)
        arrays = [x for x, t in zip(operands, in_tok, strict=True) if not t]
        array_shapes = [sh for sh, t in zip(shapes, out_tok, strict=True) if not t]
        n_in = len(operands)

        def with_tokens(*values: Any) -> tuple[Any, ...]:
            it = iter(values)
            out = callable(*[None if in_tok[i] else next(it) for i in range(n_in)])
            out = () if out is None else tuple(out)
            if len(out) != len(shapes):
                raise TypeError(f"the callback returned {len(out)} values for {len(shapes)} result shapes")
            return tuple(v for v, t in zip(out, out_tok, strict=True) if not t)

        call = _xs_ops.HostCallback(
            with_tokens, arrays, array_shapes, has_side_effect=has_side_effects, token=token, builder=builder
        )
        new_token = _xs_ops.GetTupleElement(call, len(array_shapes))
        elements: list[XlaOp] = []
        k = 0
        for t in out_tok:
            if t:
                elements.append(new_token)
            else:
                elements.append(_xs_ops.GetTupleElement(call, k))
                k += 1
        return _xs_ops.Tuple(builder, elements), getattr(call.extra, "callback", None)

    def serialize_executable(self, executable: LoadedExecutable) -> bytes:
        """The executable as bytes for :meth:`deserialize_executable` (same jaxlib version and
        platform only; load only blobs you trust)."""
        return executable.executable.serialize()

    def deserialize_executable(
        self, serialized: bytes, executable_devices: Any = None, compile_options: Any = None
    ) -> LoadedExecutable:
        """Load an executable from :meth:`serialize_executable`, without compiling.

        ``executable_devices`` (a list of devices; its first one is used) or the client's
        first device says where; ``compile_options`` is accepted for compatibility.

        Raises
        ------
        FormatError
            For empty, truncated, corrupt or foreign data (also an :class:`XlaRuntimeError`).
        """
        if isinstance(executable_devices, _CompileOptions):  # the former (serialized, options) order
            executable_devices = None
        base = self._c.default_device
        if isinstance(executable_devices, Device):
            base = executable_devices
        elif isinstance(executable_devices, Iterable):
            devs = list(executable_devices)
            if devs:
                base = devs[0]
        try:
            exe = _sdk_deserialize(serialized, base)
        except _errors.FormatError as e:
            if isinstance(e, XlaRuntimeError):
                raise
            raise FormatError(str(e)) from e
        return LoadedExecutable._make(exe, self)


def make_cpu_client(
    asynchronous: bool = True,
    distributed_client: Any = None,
    node_id: int = 0,
    num_nodes: int = 1,
    collectives: Any = None,
    num_devices: int | None = None,
) -> Client:
    """A CPU :class:`Client` (the former ``xla_client.make_cpu_client``).

    Parameters
    ----------
    num_devices:
        Number of CPU devices (default: 1, or ``--xla_force_host_platform_device_count`` from
        ``XLA_FLAGS``).
    asynchronous:
        Accepted for compatibility (xlasdk's CPU client is always asynchronous).
    distributed_client, node_id, num_nodes, collectives:
        Multi-process CPU clients are not supported: these must keep their defaults.

    Returns
    -------
    Client
        A new wrapper (its own :meth:`Client.live_buffers`) over xlasdk's cached CPU client
        for that device count.

    Raises
    ------
    XlaRuntimeError
        For multi-process arguments.
    UnknownDeviceError
        For a bad ``num_devices``.
    """
    if distributed_client is not None or num_nodes != 1 or node_id != 0 or collectives is not None:
        raise XlaRuntimeError("make_cpu_client: multi-process CPU clients are not supported by xlasdk")
    return Client._make(_sdk_client("cpu", num_devices))


def make_gpu_client(*args: Any, **kwargs: Any) -> Client:
    """Not provided: GPU backends come from PJRT plugins.

    Raises
    ------
    XlaRuntimeError
        Always, explaining how to get a GPU client: load the CUDA or ROCm PJRT plugin with
        ``xs.load_pjrt_plugin(name, path)`` and use the returned ``xs.Client``.
    """
    raise XlaRuntimeError(
        "make_gpu_client: xlasdk runs GPUs through PJRT plugins; load one with "
        "xs.load_pjrt_plugin('cuda', '/path/to/xla_cuda_plugin.so') and compile for its devices"
    )


def get_local_backend(name: str | None = None) -> Client:
    """The former ``xla_client.get_local_backend``: ``"cpu"`` (or None) gives :func:`make_cpu_client`.

    Raises
    ------
    XlaRuntimeError
        For any other backend name (GPU and TPU backends come from PJRT plugins).
    """
    if name in (None, "cpu"):
        return make_cpu_client()
    raise XlaRuntimeError(
        f"get_local_backend: backend {name!r} is not built in; load its PJRT plugin with xs.load_pjrt_plugin"
    )



# -- running with Python values ---------------------------------------------------------------
def execute_with_python_values(
    executable: LoadedExecutable, arguments: Sequence[Any], backend: Client
) -> list[np.ndarray[Any, Any]]:
    """Run on one device with Python/numpy values in and numpy arrays out.

    Each argument is copied with ``backend.buffer_from_pyval`` to the executable's first
    device; every output (one per tuple element for a tuple result) comes back as a read-only
    numpy array.

    Raises
    ------
    ShapeError, DTypeError
        Wrong number of arguments, or an argument of the wrong shape or dtype.
    """
    device = executable.local_devices()[0]
    buffers = [backend.buffer_from_pyval(a, device=device) for a in arguments]
    return [np.asarray(x) for x in executable.execute(buffers)]


def execute_with_python_values_replicated(
    executable: LoadedExecutable, arguments: Sequence[Sequence[Any]], backend: Client
) -> list[list[np.ndarray[Any, Any]]]:
    """Run on every device with Python values: ``arguments[replica][arg]`` in,
    ``[replica][output]`` numpy arrays out.

    Raises
    ------
    ShapeError
        When ``arguments`` does not have one list per device, or lists of unequal length.
    """
    devices = executable.local_devices()
    if len(arguments) != len(devices):
        raise ShapeError(
            f"execute_with_python_values_replicated: {len(arguments)} argument lists for {len(devices)} devices"
        )
    nargs = {len(a) for a in arguments}
    if len(nargs) > 1:
        raise ShapeError(f"execute_with_python_values_replicated: argument lists of unequal lengths {sorted(nargs)}")
    per_param = [
        [backend.buffer_from_pyval(arguments[d][i], device=devices[d]) for d in range(len(devices))]
        for i in range(nargs.pop() if nargs else 0)
    ]
    outs = executable.execute_sharded_on_local_devices(per_param)
    return [[np.asarray(o[d]) for o in outs] for d in range(len(devices))]


def register_custom_call_target(name: str | bytes, fn: Any, platform: str = "cpu", api_version: int = 0) -> None:
    """Register a custom-call target (the former ``xla_client.register_custom_call_target``).

    ``fn``: a PyCapsule (or ctypes function) of the handler; ``api_version`` 0 (the former default):
    the legacy CPU signature ``void fn(void* out, const void** in)``; 1: an XLA FFI handler
    (``XLA_FFI_DEFINE_HANDLER_SYMBOL``). ``name`` may be bytes, as the former API took it.

    Raises
    ------
    DTypeError, XlaRuntimeError
        As ``xs.register_custom_call_target``.
    """
    from ..runtime import register_custom_call_target as _register

    _register(name.decode() if isinstance(name, bytes) else name, fn, platform, api_version)


def _hlo_module_cost_analysis(client: Any, module: Any) -> dict[str, float]:
    """``xla_client._xla.hlo_module_cost_analysis(backend, hlo_module)``: XLA's cost analysis (``flops``,
    ``bytes accessed``, ...) of an unoptimized module, for ``backend``'s platform.

    ``client`` is a :class:`Client` or ``xs.Client``; ``module`` an :class:`HloModule` (from
    ``XlaComputation.get_hlo_module()``) or an ``xs.XlaComputation``.

    Raises
    ------
    TypeError
        For other argument types.
    XlaRuntimeError
        When XLA cannot analyse the module.
    """
    sdk = client.sdk_client if isinstance(client, Client) else client
    if not isinstance(sdk, _SdkClient):
        raise TypeError(f"hlo_module_cost_analysis: expected a Client, got {type(client).__name__}")
    if isinstance(module, _XlaComputation):
        module = XlaComputation._adopt(module).get_hlo_module()
    if not isinstance(module, HloModule):
        raise TypeError(f"hlo_module_cost_analysis: expected an HloModule, got {type(module).__name__}")
    return _compat.hlo_module_cost_analysis(sdk._c, module._m)
