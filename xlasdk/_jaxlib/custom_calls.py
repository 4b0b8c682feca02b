"""Registering the user's own custom-call targets with XLA (jaxlib ``register_custom_call_target``).

Checked on jaxlib 0.10.2 and 0.12.0.1 (the same binding): ``xla_client.register_custom_call_target(
name, fn, platform="cpu", api_version=0, traits=DEFAULT)``, where ``fn`` is a PyCapsule holding a
function pointer: an ``XLA_FFI_Handler*`` for ``api_version=1`` (typed FFI, what
``XLA_FFI_DEFINE_HANDLER_SYMBOL`` defines), or for ``api_version=0`` a legacy CPU custom call
``void fn(void* out, const void** in)``; for typed FFI also a dict of stage capsules
(``{"execute": capsule, "instantiate": ..., "prepare": ..., "initialize": ...}``). The handler
lives in this process only: programs that call it compile and run here.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Mapping
from typing import Any, Final

from jaxlib import xla_client as _xc

from ..errors import DTypeError, XlaRuntimeError

__all__ = ["register_custom_call_target", "registered_custom_call_targets"]

_STAGES: Final = ("execute", "instantiate", "prepare", "initialize")
_lock = threading.Lock()
_registered: dict[tuple[str, str], int] = {}

_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)


def _is_capsule(x: Any) -> bool:
    return type(x).__name__ == "PyCapsule"


def _as_capsule(what: str, fn: Any) -> Any:
    """A PyCapsule of ``fn``: a capsule as it is, a ctypes function pointer wrapped (kept alive)."""
    if _is_capsule(fn):
        return fn
    if isinstance(fn, ctypes._CFuncPtr):  # type: ignore[attr-defined]  # lib.MyHandler
        address = ctypes.cast(fn, ctypes.c_void_p).value
        if not address:
            raise DTypeError(f"{what}: the ctypes function pointer is NULL")
        return _PyCapsule_New(address, None, None)
    raise DTypeError(
        f"{what}: expected a PyCapsule holding the handler's address or a ctypes function "
        f"(ctypes.CDLL(path).MyHandler), got {type(fn).__name__}"
    )


def register_custom_call_target(name: str, fn: Any, platform: str = "cpu", api_version: int = 1) -> None:
    """Register ``fn`` with XLA as the custom-call target ``name`` for ``platform``.

    Parameters
    ----------
    name: the target name, as ``ops.CustomCall(..., call_target_name=name)`` gives it.
    fn: the handler: a PyCapsule holding its address, or a ctypes function (``lib.MyHandler`` of
        ``ctypes.CDLL(path)``); for ``api_version=1`` also a dict of such, keyed by FFI stage
        (``"execute"`` required; ``"instantiate"``, ``"prepare"``, ``"initialize"``).
    platform: ``"cpu"`` (or a plugin's platform name, ``"cuda"``...); case-insensitive.
    api_version: 1 (default): XLA FFI (``XLA_FFI_DEFINE_HANDLER_SYMBOL``; call it with
        ``api_version=CustomCallApiVersion.API_VERSION_TYPED_FFI``); 0: the legacy CPU signature
        ``void fn(void* out, const void** in)`` (``API_VERSION_ORIGINAL``).

    Raises
    ------
    DTypeError
        For a name that is not a non-empty str, a handler that is not a capsule / ctypes function
        (or a dict of them without ``"execute"``), or an ``api_version`` other than 0 and 1.
    XlaRuntimeError
        When XLA refuses the registration (a name registered again with another handler).
    """
    what = f"register_custom_call_target({name!r})"
    if not isinstance(name, str) or not name:
        raise DTypeError(f"register_custom_call_target: name must be a non-empty str, got {name!r}")
    if not isinstance(platform, str) or not platform:
        raise DTypeError(f"{what}: platform must be a non-empty str, got {platform!r}")
    if isinstance(api_version, bool) or api_version not in (0, 1):
        raise DTypeError(f"{what}: api_version must be 0 (legacy) or 1 (XLA FFI), got {api_version!r}")
    handler: Any
    if isinstance(fn, Mapping):
        if api_version != 1:
            raise DTypeError(f"{what}: a dict of FFI stages needs api_version=1")
        unknown = sorted(set(fn) - set(_STAGES))
        if unknown or "execute" not in fn:
            raise DTypeError(
                f"{what}: FFI stages must include 'execute' and be among {list(_STAGES)}, got {sorted(fn)}"
            )
        handler = {k: _as_capsule(f"{what}[{k!r}]", v) for k, v in fn.items()}
    else:
        handler = _as_capsule(what, fn)
    key = (platform.upper(), name)
    with _lock:
        try:
            _xc.register_custom_call_target(name, handler, platform=platform, api_version=api_version)
        except Exception as e:
            raise XlaRuntimeError(f"{what}: XLA refused the registration: {e}") from e
        _registered[key] = api_version


def registered_custom_call_targets() -> dict[tuple[str, str], int]:
    """The targets registered through xlasdk in this process: ``{(PLATFORM, name): api_version}``."""
    with _lock:
        return dict(_registered)
