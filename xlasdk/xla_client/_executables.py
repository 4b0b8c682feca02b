"""``LoadedExecutable``, its results and run-completion tokens (the former ``xla_client``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._jaxlib import compat as _compat
from ..errors import DTypeError, ShapeError, XlaRuntimeError
from ..runtime import Device, Executable, ExecutionToken, MemoryStats
from ._buffers import Buffer, _unwrap
from ._computations import HloModule

if TYPE_CHECKING:
    from ._client import Client


# -- executables ------------------------------------------------------------------------------
class Token:
    """The completion of a run on one device (the former ``xla_client.Token``), from
    :meth:`LoadedExecutable.execute_with_token`: ready when the run and its side effects (host
    callbacks, ``ops.DebugPrint``) are done. Wraps an ``xs.ExecutionToken``."""

    __slots__ = ("_t",)

    def __init__(self, token: ExecutionToken) -> None:
        self._t = token

    def block_until_ready(self) -> None:
        """Wait for the run. Raises :class:`XlaRuntimeError` if it failed."""
        self._t.block_until_ready()

    def __repr__(self) -> str:
        return f"Token({self._t!r})"


class ShardedToken:
    """The completion of a run on several devices (the former ``xla_client.ShardedToken``)."""

    __slots__ = ("_t",)

    def __init__(self, token: ExecutionToken) -> None:
        self._t = token

    def block_until_ready(self) -> None:
        """Wait for the run on every device. Raises :class:`XlaRuntimeError` if it failed."""
        self._t.block_until_ready()

    def get_token(self, device_index: int) -> Token:
        """The :class:`Token` of the ``device_index``-th device (ShapeError out of range)."""
        return Token(self._t.get_token(device_index))

    def __repr__(self) -> str:
        return f"ShardedToken({self._t!r})"


class ShardedBuffer:
    """One output (or argument) of a multi-device run: one :class:`Buffer` per device, in device
    order (the former ``xla_client.ShardedBuffer``)."""

    __slots__ = ("_bufs",)

    def __init__(self, buffers: Sequence[Buffer]) -> None:
        bufs = list(buffers)
        if not bufs or not all(isinstance(b, Buffer) for b in bufs):
            raise DTypeError("ShardedBuffer: expected a non-empty list of Buffers")
        self._bufs = bufs

    @staticmethod
    def from_pybuffers(buffers: Sequence[Buffer]) -> ShardedBuffer:
        """A ShardedBuffer of ``buffers`` (one per device)."""
        return ShardedBuffer(buffers)

    @staticmethod
    def create_sharded_buffer(buffers: Sequence[Buffer]) -> ShardedBuffer:
        """A ShardedBuffer of ``buffers`` (one per device), as the former API named it.

        Raises
        ------
        DTypeError
            When ``buffers`` is empty or holds something other than :class:`Buffer` objects.
        """
        return ShardedBuffer(buffers)

    def get_pybuffers(self) -> list[Buffer]:
        """The per-device buffers."""
        return list(self._bufs)

    get_device_buffers = get_pybuffers

    @property
    def shape(self) -> tuple[int, ...]:
        return self._bufs[0].shape

    @property
    def dtype(self) -> np.dtype[Any]:
        return self._bufs[0].dtype

    def block_until_ready(self) -> ShardedBuffer:
        for b in self._bufs:
            b.block_until_ready()
        return self

    def delete(self) -> None:
        for b in self._bufs:
            b.delete()

    def is_deleted(self) -> bool:
        return any(b.is_deleted() for b in self._bufs)

    def __len__(self) -> int:
        return len(self._bufs)

    def __getitem__(self, i: int) -> Buffer:
        return self._bufs[i]

    def __iter__(self) -> Iterator[Buffer]:
        return iter(self._bufs)

    def __repr__(self) -> str:
        return f"ShardedBuffer({self.dtype}{list(self.shape)} on {len(self._bufs)} devices)"


def _as_sharded(outs: list[list[Buffer]], arguments: Sequence[Any]) -> list[Any]:
    """``[output][device]`` buffers, or one :class:`ShardedBuffer` per output when every argument
    is a ShardedBuffer (and there is one at least), as the former API returned."""
    if arguments and all(isinstance(a, ShardedBuffer) for a in arguments):
        return [ShardedBuffer(o) for o in outs]
    return outs


def _per_device(arg: Any) -> Any:
    return arg.get_pybuffers() if isinstance(arg, ShardedBuffer) else arg


class ExecuteResults:
    """Results of :meth:`LoadedExecutable.execute_sharded`."""

    __slots__ = ("_outs", "_token")

    def __init__(self, outputs: list[list[Buffer]], token: ShardedToken | None = None) -> None:
        self._outs = outputs
        self._token = token

    def consume_token(self) -> ShardedToken:
        """The run's :class:`ShardedToken` (``execute_sharded(..., with_tokens=True)`` only).

        Raises
        ------
        XlaRuntimeError
            When the run was made without ``with_tokens=True``.
        """
        if self._token is None:
            raise XlaRuntimeError("consume_token: run execute_sharded(..., with_tokens=True) to get a token")
        return self._token

    def disassemble_into_single_device_arrays(self) -> list[list[Buffer]]:
        """``[output][device]`` buffers."""
        return [list(o) for o in self._outs]

    def disassemble_prefix_into_single_device_arrays(self, n: int) -> list[list[Buffer]]:
        """The first ``n`` outputs, ``[output][device]``."""
        return [list(o) for o in self._outs[:n]]


class LoadedExecutable:
    """A compiled program loaded on its devices (the former ``LoadedExecutable``).

    Wraps an ``xs.Executable`` (:attr:`executable`). Run it with :meth:`execute` (one device)
    or :meth:`execute_sharded_on_local_devices` (replicas / partitions).
    """

    __slots__ = ("_e", "_client", "_traceback", "__weakref__")

    _e: Executable | None
    _client: Client
    _traceback: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("LoadedExecutable objects are made by Client.compile(computation)")

    @classmethod
    def _make(cls, exe: Executable, owner: Client) -> LoadedExecutable:
        e = object.__new__(cls)
        e._e = exe
        e._client = owner
        e._traceback = _compat.current_traceback()
        return e

    @property
    def traceback(self) -> Any:
        """Where the executable was compiled: a :class:`Traceback`, or None when tracebacks were
        off (see :func:`tracebacks`)."""
        return self._traceback

    @property
    def executable(self) -> Executable:
        """The ``xs.Executable`` behind this one.

        Raises
        ------
        XlaRuntimeError
            After :meth:`delete`.
        """
        if self._e is None:
            raise XlaRuntimeError("the executable has been deleted")
        return self._e

    @property
    def client(self) -> Client:
        return self._client

    @property
    def name(self) -> str:
        return self.executable.name

    def local_devices(self) -> list[Device]:
        """The devices it runs on, replica-major."""
        return list(self.executable.devices)

    def execute(self, arguments: Sequence[Any], device: Device | None = None) -> list[Buffer]:
        """Run on the executable's single device.

        Parameters
        ----------
        arguments:
            One per parameter: :class:`Buffer` (or anything ``xs.Executable`` accepts: numpy
            arrays, ``xs.DeviceArray``...).
        device:
            Must be None or the executable's device.

        Returns
        -------
        list of Buffer
            The outputs; a tuple result gives one buffer per element.

        Raises
        ------
        ShapeError, DTypeError
            Wrong number of arguments, or an argument of the wrong shape or dtype.
        XlaRuntimeError
            A deleted buffer argument, a multi-device executable, or a failure while running.
        """
        exe = self.executable
        if device is not None and device not in exe.devices:
            raise XlaRuntimeError(f"execute: {exe.name} is loaded on {list(map(str, exe.devices))}, not {device}")
        out = exe(*[_unwrap(a) for a in arguments])
        outs = out if isinstance(out, tuple) else (out,)
        return [Buffer._make(a, self._client) for a in outs]

    def execute_with_token(self, arguments: Sequence[Any], device: Device | None = None) -> tuple[list[Buffer], Token]:
        """:meth:`execute`, also returning the run's :class:`Token` (ready when the run and its
        side effects are done).

        Raises
        ------
        As :meth:`execute`.
        """
        exe = self.executable
        if device is not None and device not in exe.devices:
            raise XlaRuntimeError(f"execute: {exe.name} is loaded on {list(map(str, exe.devices))}, not {device}")
        out, token = exe.execute_with_token(*[_unwrap(a) for a in arguments])
        outs = out if isinstance(out, tuple) else (out,)
        return [Buffer._make(a, self._client) for a in outs], Token(token)

    def execute_sharded_on_local_devices_with_tokens(
        self, arguments: Sequence[Sequence[Any]]
    ) -> tuple[list[Any], ShardedToken]:
        """:meth:`execute_sharded_on_local_devices`, also returning the run's :class:`ShardedToken`
        (outputs as there: one :class:`ShardedBuffer` per output when every argument is one)."""
        outs, token = self._execute_sharded(arguments, True)
        assert token is not None
        return _as_sharded(outs, arguments), ShardedToken(token)

    def execute_sharded_on_local_devices(self, arguments: Sequence[Any]) -> list[Any]:
        """Run on every device of the executable.

        Parameters
        ----------
        arguments:
            ``arguments[i][d]``: parameter ``i`` on device ``d`` (devices as
            :meth:`local_devices`); each ``arguments[i]`` a list of buffers or a
            :class:`ShardedBuffer`.

        Returns
        -------
        list of list of Buffer, or list of ShardedBuffer
            ``[output][device]``; when every argument is a :class:`ShardedBuffer` (and there is at
            least one), one :class:`ShardedBuffer` per output, as the former API returned.

        Raises
        ------
        ShapeError
            When a parameter's list does not have one entry per device, or as for :meth:`execute`.
        """
        return _as_sharded(self._execute_sharded(arguments, False)[0], arguments)

    def _execute_sharded(
        self, arguments: Sequence[Sequence[Any]], with_tokens: bool
    ) -> tuple[list[list[Buffer]], ExecutionToken | None]:
        exe = self.executable
        n = len(exe.devices)
        arguments = [_per_device(a) for a in arguments]
        for i, per_dev in enumerate(arguments):
            if isinstance(per_dev, (str, bytes)) or not isinstance(per_dev, Sequence) or len(per_dev) != n:
                raise ShapeError(
                    f"execute_sharded_on_local_devices: argument {i} must be a list of {n} buffers "
                    f"(one per device), got {type(per_dev).__name__}"
                    + (f" of length {len(per_dev)}" if isinstance(per_dev, Sequence) else "")
                )
        per_device = [[_unwrap(arg[d]) for arg in arguments] for d in range(n)]
        token: ExecutionToken | None = None
        if with_tokens:
            results, token = exe.execute_replicated_with_tokens(per_device)
        else:
            results = exe.execute_replicated(per_device)
        rows = [r if isinstance(r, tuple) else (r,) for r in results]
        nout = len(rows[0]) if rows else 0
        return [[Buffer._make(rows[d][j], self._client) for d in range(n)] for j in range(nout)], token

    def execute_sharded(self, arguments: Sequence[Any], with_tokens: bool = False) -> ExecuteResults:
        """Like :meth:`execute_sharded_on_local_devices`; an argument may also be a single
        buffer when the executable has one device.

        Returns
        -------
        ExecuteResults
            ``disassemble_into_single_device_arrays()`` gives ``[output][device]`` buffers.
        """
        args: list[Any] = [a if isinstance(a, (list, tuple, ShardedBuffer)) else [a] for a in arguments]
        outs, token = self._execute_sharded(args, bool(with_tokens))
        return ExecuteResults(outs, ShardedToken(token) if token is not None else None)

    def hlo_modules(self) -> list[HloModule]:
        """The optimized HLO module(s)."""
        return [HloModule._wrap(m) for m in self.executable._hlo_modules()]

    def get_hlo_text(self) -> str:
        """Optimized HLO text."""
        return self.executable.hlo_text()

    as_text = get_hlo_text

    @property
    def fingerprint(self) -> str | None:
        """XLA's fingerprint of the compiled program (None if the backend has none)."""
        return self.executable.fingerprint

    def cost_analysis(self) -> dict[str, float]:
        return self.executable.cost_analysis()

    def get_compiled_memory_stats(self) -> MemoryStats:
        return self.executable.memory_stats()

    def size_of_generated_code_in_bytes(self) -> int:
        return self.executable.memory_stats().generated_code_size_in_bytes

    def serialize(self) -> bytes:
        """Same as ``client.serialize_executable(self)``."""
        return self.executable.serialize()

    def delete(self) -> None:
        """Drop the executable (running it afterwards raises :class:`XlaRuntimeError`)."""
        self._e = None

    def is_deleted(self) -> bool:
        return self._e is None

    def __repr__(self) -> str:
        return "LoadedExecutable(<deleted>)" if self._e is None else f"Loaded{self._e!r}"
