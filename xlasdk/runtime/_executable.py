"""``Executable`` and ``ExecutionToken``: running a compiled program."""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np

from .._atomic import atomic_write, file_path
from .._jaxlib import pjrt
from .._numbers import SECONDS
from ..errors import CompileError, ExecutionTimeoutError, FormatError, ShapeError, XlaRuntimeError
from ..ops._core import int_arg
from ..shape import ProgramShape, Shape
from ._arguments import _CallPlan, _describe_value
from ._dispatch import FastCall, fast_call
from ._options import MemoryStats
from ._serial_format import pack
from .array import DeviceArray
from .device import Client, Device, _execution_failed

_ndarray: Final = np.ndarray


# -- Executable -------------------------------------------------------------------------------
def _execute_multi_no_token(
    exe: Any, shards: Sequence[Sequence[Any]], avals: Sequence[Any], devices: Sequence[Any], name: str
) -> tuple[list[list[Any]], None]:
    return pjrt.execute_multi(exe, shards, avals, devices, name), None



_MISSING: Final = object()  # an argument not given (keyword binding)

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
        "_host_callbacks", "_spmd", "_computation", "_xla_blob", "_run", "_fast", "__weakref__",
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
    _computation: Any  # the XlaComputation it was compiled from (xs.compile), else None
    # XLA's serialized executable this one was loaded from, if it was: what serialize() writes, since
    # XLA:CPU re-serializes a deserialized executable without its kernels ("Function ... not found")
    _xla_blob: bytes | None
    _run: Callable[[list[Any]], list[Any]]  # pjrt.runner: execute + result handlers, bound once
    _fast: FastCall  # the generated call path (runtime._dispatch), made once

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
        self._run = pjrt.runner(exe, self._plan.handlers, name)
        self._fast = fast_call(self._plan, self._run)
        self._spmd = None  # execute_sharded's per-executable data (runtime/sharded.py), on first use
        self._host_callbacks = ()
        self._computation = None
        self._xla_blob = None
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
    def _bind_by_name(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """``args`` followed by ``kwargs`` placed by parameter name (ShapeError naming the problem)."""
        names = self._program_shape.parameter_names()
        n = len(names)
        if len(args) > n:
            raise ShapeError(f"{self._name}: {len(args)} positional arguments for {n} parameters")
        slots: list[Any] = list(args) + [_MISSING] * (n - len(args))
        for key, value in kwargs.items():
            hits = [i for i, nm in enumerate(names) if nm == key]
            if not hits:
                known = ", ".join(repr(nm) for nm in names if nm) or "none (the parameters have no names)"
                raise ShapeError(f"{self._name}: no parameter named {key!r}; its parameter names are {known}")
            if len(hits) > 1:
                raise ShapeError(
                    f"{self._name}: several parameters are named {key!r} (numbers {hits}); pass them by position"
                )
            i = hits[0]
            if slots[i] is not _MISSING:
                raise ShapeError(f"{self._name}: parameter {i} ({key!r}) given twice (by position and by name)")
            slots[i] = value
        missing = [f"{i} ({names[i]!r})" if names[i] else str(i) for i, v in enumerate(slots) if v is _MISSING]
        if missing:
            raise ShapeError(f"{self._name}: no argument for parameter(s) {', '.join(missing)}")
        return tuple(slots)

    def __call__(self, *args: Any, **kwargs: Any) -> DeviceArray | tuple[DeviceArray, ...]:
        """Run on the executable's device.

        Parameters
        ----------
        *args:
            One per parameter: a numpy array of exactly the parameter's shape and dtype, a
            :class:`DeviceArray` (moved via the host if on another device), a Python scalar
            for a rank-0 parameter (when it converts losslessly; floats round to nearest),
            or an object with ``__dlpack__``.
        **kwargs:
            Parameters by name (``exe(x=..., w=...)``, the names of ``ops.Parameter`` or of the
            loaded module's parameters), after the positional ones.

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
        if kwargs:
            args = self._bind_by_name(args, kwargs)
        # The generated call path (runtime._dispatch): identity checks against values computed
        # once; None for anything else (a deleted or foreign array, a scalar, a cast, a wrong
        # shape...), which the checked path converts or refuses with its error.
        out = self._fast(args)
        if out is None:
            return self._call_mixed(args)
        return out  # type: ignore[no-any-return]

    def _call_mixed(self, args: tuple[Any, ...]) -> DeviceArray | tuple[DeviceArray, ...]:
        """``exe(*args)`` when the generated path declined: each argument it would take is taken
        as it would (a Python scalar beside arrays does not make the arrays slow), the others go
        through ``spec.to_buffer``, which checks and converts them (and raises the errors)."""
        plan = self._plan
        if not plan.fast or len(args) != plan.nparams:
            return self._call_checked(args)
        device = plan.device
        bufs = []
        for a, (spec, dtype, dims, aval) in zip(args, plan.checks, strict=True):
            ty = type(a)
            if ty is DeviceArray:
                arr = a._arr
                if arr is not None and a._device is device and a._dtype == dtype and a._shape == dims:
                    bufs.append(arr)
                    continue
            elif ty is _ndarray and a.dtype is dtype and a.shape == dims:
                bufs.append(pjrt.put(a, aval, plan.sharding, plan.jdevice))
                continue
            bufs.append(spec.to_buffer(a, device))
        return self._wrap_outputs(self._run(bufs))

    def _single_device_buffers(self, args: tuple[Any, ...], replicated: str) -> list[Any]:
        """The device buffers of ``args`` for a one-device call, checked (``replicated`` names
        the method a multi-device executable takes instead)."""
        plan = self._plan
        if len(args) != plan.nparams:
            raise plan.count_error(len(args))
        if plan.multi:
            raise XlaRuntimeError(
                f"{self._name}: this executable runs on {len(self._devices)} devices; "
                f"call exe.{replicated}([[args of device 0], [args of device 1], ...])"
            )
        if plan.unsupported_output is not None:
            raise plan.output_error()
        return [spec.to_buffer(a, plan.device) for spec, a in zip(plan.params, args, strict=True)]

    def _wrap_outputs(self, outs: Sequence[Any]) -> DeviceArray | tuple[DeviceArray, ...]:
        """The one-device call's outputs as DeviceArrays (a tuple for a tuple result)."""
        plan = self._plan
        wrap, device = DeviceArray._wrap, plan.device
        if plan.is_tuple:
            return tuple(wrap(o, d, t, device) for o, (d, t) in zip(outs, plan.outputs, strict=True))
        d, t = plan.outputs[0]
        return wrap(outs[0], d, t, device)

    def _call_checked(self, args: tuple[Any, ...]) -> DeviceArray | tuple[DeviceArray, ...]:
        """``exe(*args)`` for every case the fast path leaves out (and its errors)."""
        bufs = self._single_device_buffers(args, "execute_replicated")
        return self._wrap_outputs(pjrt.execute(self._exe, bufs, self._plan.handlers, self._name))

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

    def execute(self, *args: Any, timeout: float | None = None, **kwargs: Any) -> DeviceArray | tuple[DeviceArray, ...]:
        """``exe(*args)`` waited for so that the caller keeps control: the run goes on a background
        thread while this one waits for its outputs to be ready, and returns them, or raises
        :class:`~xlasdk.ExecutionTimeoutError` once ``timeout`` seconds have passed, or lets Ctrl-C
        (``KeyboardInterrupt``) through at once.

        XLA cannot stop a program that runs (XLA:CPU executes small programs on the calling
        thread, where ``exe(*args)`` cannot be interrupted: an endless ``While`` hangs it). Here an
        interrupted or timed-out run is abandoned: it goes on in its background thread until it
        ends (an endless loop keeps one core busy until the process exits), its results are
        dropped, and nothing it leaves behind answers a later call; the executable can run again
        at once. Arguments are checked, and transferred, in the calling thread first.

        Parameters
        ----------
        *args, **kwargs:
            As for ``exe(*args)`` (a parameter named ``timeout`` must be given by position).
        timeout:
            Seconds to wait for the outputs, > 0 and at most 10**6 (11.6 days); None: no limit
            (Ctrl-C still returns). NaN and infinities are refused (no limit is None).

        Raises
        ------
        ExecutionTimeoutError
            The outputs were not ready after ``timeout`` seconds.
        XlaSdkError
            A ``timeout`` that is not a number of seconds > 0 and <= 10**6.
        ShapeError, DTypeError, XlaRuntimeError
            As ``exe(*args)``; a failed run raises here.
        """
        if timeout is not None:
            timeout = SECONDS.check(timeout, f"{self._name}: execute: timeout", hint="None for no limit")
        if kwargs:
            args = self._bind_by_name(args, kwargs)
        bufs = self._single_device_buffers(args, "execute_replicated")
        done = threading.Event()
        box: list[Any] = []

        def run() -> None:
            try:
                out = self._wrap_outputs(pjrt.execute(self._exe, bufs, self._plan.handlers, self._name))
                for o in out if isinstance(out, tuple) else (out,):
                    o.block_until_ready()
                box.append(out)
            except BaseException as e:  # handed to the caller (or dropped with an abandoned run)
                box.append(e)
            finally:
                done.set()

        threading.Thread(target=run, name=f"xlasdk-execute-{self._name}", daemon=True).start()
        deadline = None if timeout is None else time.monotonic() + timeout
        while not done.wait(0.05):  # short waits: Ctrl-C reaches this thread between them
            if deadline is not None and time.monotonic() >= deadline:
                raise ExecutionTimeoutError(
                    f"{self._name}: the run did not finish within {timeout:g} s; XLA cannot stop a running "
                    "program, so it goes on in a background thread until it ends and its results are dropped"
                )
        result = box[0]
        if isinstance(result, BaseException):
            raise result
        return result  # type: ignore[no-any-return]

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
        bufs = self._single_device_buffers(args, "execute_replicated_with_tokens")
        outs, token = pjrt.execute_with_token(self._exe, bufs, self._plan.handlers, self._name)
        return self._wrap_outputs(outs), ExecutionToken._make(token, self._name, (self._plan.device,))

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

    # -- recording -----------------------------------------------------------------------------
    def record(
        self, args: Sequence[Any], directory: str | os.PathLike[str]
    ) -> tuple[DeviceArray | tuple[DeviceArray, ...], str]:
        """Run on ``args`` (as ``exe(*args)``) and write what ran as an ``HloSnapshot`` in ``directory``.

        The file, ``NAME.snapshot.K.pb`` (``K`` the first unused number; the directory is made if
        missing), holds the module, the arguments and the result, as XLA's
        ``--xla_dump_hlo_snapshots`` writes them, so that ``xs.load_snapshot``, ``xlasdk run FILE
        --expect recorded`` and XLA's ``run_hlo_module`` replay it. The module is the computation
        this executable was compiled from (before XLA's optimizations: a replay compiles it again,
        through every pass); for an executable loaded from bytes or a file, the optimized module it
        holds.

        Returns
        -------
        ``(outputs, path)``: what ``exe(*args)`` returns, and the path of the snapshot.

        Raises
        ------
        ShapeError / DTypeError
            As ``exe(*args)``.
        XlaRuntimeError
            For an executable on several devices (record a one-device compile of the program).
        OSError
            When the directory or the file cannot be written (nothing half-written is left).
        """
        from ..formats.snapshot import new_snapshot_path, write_snapshot

        if self._plan.multi:
            raise XlaRuntimeError(f"{self._name}: record runs a one-device executable; this one runs on "
                                  f"{len(self._devices)} devices")
        outs = self(*args)
        comp = self._computation
        if comp is None:
            from ..program.computation import XlaComputation

            comp = XlaComputation.from_hlo_text(self.hlo_text())
        host = [o.to_numpy() for o in (outs if isinstance(outs, tuple) else (outs,))]
        arrays = [a.to_numpy() if isinstance(a, DeviceArray) else np.asarray(a) for a in args]
        result: Any = tuple(host) if isinstance(outs, tuple) else host[0]
        path = new_snapshot_path(directory, self._name)
        try:
            write_snapshot(path, comp, arrays, result, execution_platform=self._devices[0].platform)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise
        return outs, path

    # -- introspection -------------------------------------------------------------------------
    def hlo_text(self, print_large_constants: bool = True) -> str:
        """The optimized, scheduled HLO module with ``metadata={...}``.

        Parameters
        ----------
        print_large_constants: write every constant's value out (the default: the text loads back
            with :func:`xlasdk.load_computation` / ``XlaComputation.from_hlo_text`` and computes the
            same); False prints constants of more than 10 elements as ``{...}``, as XLA's
            ``get_hlo_text()`` does (shorter, to read; it does not load back).
        """
        return pjrt.executable_hlo_text(self._exe, large_constants=print_large_constants)

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
        blob = self._xla_blob if self._xla_blob is not None else pjrt.serialize_executable(self._exe, self._name)
        return pack(self._name, blob, self._devices[0].platform, self._num_replicas, self._num_partitions,
                    [d.id for d in self._devices], self._program_shape, pjrt.JAXLIB_VERSION, pjrt.XLA_CLIENT_VERSION)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`serialize` to ``path`` (load it with :func:`load_executable`).

        The executable is serialized first, then written to a temporary file in the same
        directory, synced and renamed over ``path``: a failed serialization or write leaves an
        existing file exactly as it was and no temporary file behind (``OSError`` on a failed write).

        Raises
        ------
        FormatError
            ``path`` is not a ``str`` or ``os.PathLike`` of one, holds a NUL character, or is (or
            links to) something other than a regular file: a directory, FIFO, device node or
            socket, or a link that loops; nothing is written (as :meth:`XlaComputation.save`).
        OSError
            The write failed (a missing directory, a full disk...).
        """
        try:
            spath = file_path(path)
        except (TypeError, ValueError) as e:
            raise FormatError(f"save: {e}") from None
        try:
            atomic_write(spath, self.serialize())
        except OSError as e:
            if e.errno in (errno.EEXIST, errno.ELOOP) and e.filename == spath:  # refused before writing
                raise FormatError(f"save({spath!r}): cannot write the file: {e.strerror}") from None
            raise
