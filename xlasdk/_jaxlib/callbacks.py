"""Python host callbacks on jaxlib 0.10.2: XLA calls a Python function while a program runs.

jaxlib lowers a host callback to the typed-FFI custom call ``xla_ffi_python_cpu_callback``
(``backend_config = {index = N : ui64}``) and takes the Python callables at compile time:
``client.compile_and_load(ir.Module, devices, options, host_callbacks=[f0, f1, ...])``; the
custom call with index ``N`` calls ``fN``. (Only an ``ir.Module`` is accepted with
``host_callbacks``, not module text.) What jaxlib does, checked on 0.10.2 CPU:

* each operand arrives as a C-contiguous, read-only numpy array that owns a copy of the data
  (keeping it after the call is safe); a token operand arrives as ``None``;
* the callable returns a tuple with one value per result (``None`` for a token result);
  non-contiguous or Fortran-ordered arrays are accepted, but a result of the wrong byte size
  **corrupts the heap** (jaxlib copies the declared size), so :class:`PyCallback` checks every
  result's shape and dtype before handing it back;
* an exception raised by the callable fails the execution with ``INTERNAL: CpuCallback error
  calling callback: <traceback>``; :class:`PyCallback` records the exception and
  :func:`callback_failure` turns that message back into an :class:`HostCallbackError` carrying it;
* the executable holds references to the callables; a serialized executable does not (it
  cannot be reloaded with them), so executables with host callbacks are never serialized or
  cached.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jaxlib import xla_client as _xc

from ..errors import CompileError, HostCallbackError

__all__ = [
    "CALL_TARGET",
    "PyCallback",
    "ResultSpec",
    "callback_failure",
    "compile_and_load_with_callbacks",
]

CALL_TARGET = "xla_ffi_python_cpu_callback"

ResultSpec = tuple[tuple[int, ...], "np.dtype[Any]"]

_MARKER = "xlasdk host callback failure #"
_failures: dict[int, tuple[str, BaseException]] = {}
_failures_lock = threading.Lock()
_failure_ids = itertools.count(1)
_MAX_PENDING = 256


def _record(name: str, exc: BaseException) -> int:
    n = next(_failure_ids)
    with _failures_lock:
        if len(_failures) >= _MAX_PENDING:  # failures nobody read (errors swallowed elsewhere)
            for k in sorted(_failures)[: _MAX_PENDING // 2]:
                del _failures[k]
        _failures[n] = (name, exc)
    return n


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def callback_failure(what: str, e: BaseException) -> HostCallbackError | None:
    """The :class:`HostCallbackError` for a jaxlib error ``e`` caused by a failing
    :class:`PyCallback` (None when ``e`` is not one); ``what`` says what was running."""
    msg = str(e)
    at = msg.find(_MARKER)
    if at < 0:
        return None
    digits = ""
    for c in msg[at + len(_MARKER):]:
        if not c.isdigit():
            break
        digits += c
    with _failures_lock:
        found = _failures.pop(int(digits), None) if digits else None
    if found is None:
        err = HostCallbackError(f"{what}: a host callback failed: {msg[at:].splitlines()[0]}")
        return err
    name, exc = found
    err = HostCallbackError(f"{what}: host callback {name} raised {_describe(exc)}")
    err.exception = exc
    return err


class PyCallback:
    """The callable handed to jaxlib for one ``ops.HostCallback``: calls ``fn`` on the operands
    (numpy arrays) and checks and converts what it returns.

    ``fn`` returns one array-like per result (a single value, not a tuple, when ``single``).
    Python scalars and lists are converted to the result's dtype when numpy can do so without
    changing the kind of number (``same_kind``); numpy arrays must have the result's dtype. Every
    result is made C-contiguous and native-endian, so strided and transposed arrays are fine.
    ``token`` adds the leading token operand and result jaxlib passes as ``None``.
    """

    __slots__ = ("fn", "name", "results", "single", "token", "__weakref__")

    def __init__(
        self, fn: Callable[..., Any], name: str, results: Sequence[ResultSpec], *, single: bool, token: bool
    ) -> None:
        self.fn = fn
        self.name = name
        self.results = tuple(results)
        self.single = single
        self.token = token

    def __repr__(self) -> str:
        return f"PyCallback({self.name})"

    def __call__(self, *args: Any) -> tuple[Any, ...]:
        try:
            out = self.fn(*(args[1:] if self.token else args))
            values = self._check(out)
        except BaseException as e:  # noqa: BLE001 - every failure must reach the caller of the run
            n = _record(self.name, e)
            raise RuntimeError(f"{_MARKER}{n}: {self.name} raised {_describe(e)}") from None
        return (None, *values) if self.token else values

    def _check(self, out: Any) -> tuple[np.ndarray[Any, Any], ...]:
        n = len(self.results)
        if self.single:
            outs: Sequence[Any] = (out,)
        elif n == 0 and out is None:
            outs = ()
        elif isinstance(out, (tuple, list)):
            outs = out
        else:
            raise TypeError(f"returned {type(out).__name__}, expected a tuple or list of {n} arrays")
        if len(outs) != n:
            raise TypeError(f"returned {len(outs)} values, expected {n}")
        pairs = enumerate(zip(outs, self.results, strict=True))
        return tuple(self._convert(i, v, dims, dt) for i, (v, (dims, dt)) in pairs)

    def _convert(self, i: int, v: Any, dims: tuple[int, ...], dt: np.dtype[Any]) -> np.ndarray[Any, Any]:
        what = "the result" if self.single else f"result {i}"
        if isinstance(v, (np.ndarray, np.generic)):
            a = np.asarray(v)
            if a.dtype != dt and a.dtype.newbyteorder("=") != dt:  # byte order is converted below
                raise TypeError(f"{what} has dtype {a.dtype}, expected {dt} (convert it with .astype)")
        else:
            try:
                raw = np.asarray(v)
            except Exception as e:
                raise TypeError(f"{what} is a {type(v).__name__}, not an array: {e}") from None
            if raw.dtype == object or not np.can_cast(raw.dtype, dt, "same_kind"):
                raise TypeError(f"{what} ({type(v).__name__} of {raw.dtype}) does not convert to {dt}")
            a = raw.astype(dt)
        if a.shape != dims:
            raise ValueError(f"{what} has shape {a.shape}, expected {dims}")
        if not a.dtype.isnative:
            a = a.astype(a.dtype.newbyteorder("="))
        return a if a.flags.c_contiguous else a.copy(order="C")  # (ascontiguousarray makes 0-d 1-d)


def compile_and_load_with_callbacks(
    client: Any, module: Any, devices: Sequence[Any], options: Any, name: str, callbacks: Sequence[Any]
) -> Any:
    """``client.compile_and_load(module, DeviceList(devices), options, host_callbacks=callbacks)``
    for a parsed ``ir.Module`` calling ``xla_ffi_python_cpu_callback``.

    Raises
    ------
    CompileError
        When XLA rejects the module or the platform has no Python callbacks.
    """
    try:
        return client.compile_and_load(module, _xc.DeviceList(tuple(devices)), options, host_callbacks=list(callbacks))
    except Exception as e:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        msg = lines[0] if lines else type(e).__name__
        raise CompileError(f"compiling {name!r} (with {len(callbacks)} host callbacks) failed: {msg}") from e
