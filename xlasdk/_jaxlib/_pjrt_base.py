"""Shared base of the PJRT modules: the jaxlib handles, versions, error conversion, ``Aval`` and the
import shim (see :mod:`xlasdk._jaxlib.pjrt`)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

import jaxlib
import numpy as np
from jaxlib import xla_client as _xc

from ..errors import XlaRuntimeError

_J: Final[Any] = importlib.import_module("jaxlib._jax")  # untyped extension module

JAXLIB_VERSION: Final[str] = str(getattr(jaxlib, "__version__", "unknown"))
XLA_CLIENT_VERSION: Final[int] = int(getattr(_xc, "_version", 0))
"""``xla_client._version``, the extension version that JAX itself gates on: 467 is jaxlib 0.10.2,
495 is 0.11.2, 505 is 0.12.0.1. Every difference between releases is decided once, here or in the
module that needs it, from this number (``../shared/design/jaxlib-range.md`` lists them)."""

SUPPORTED_XLA_CLIENT_VERSIONS: Final[tuple[int, int]] = (467, 505)
"""The extension versions CI tests: jaxlib 0.10.2 (467) through 0.12.0.1 (505)."""

# jaxlib 0.11.0 dropped array_result_handler's ``_skip_checks`` keyword; on 0.10.x the handler
# without it checks the shard count against the sharding and refuses ("Wrong number of shards: 0").
RESULT_HANDLER_SKIP_CHECKS: Final[bool] = XLA_CLIENT_VERSION < 495
JaxRuntimeError: Final[type[Exception]] = _J.JaxRuntimeError

_T = TypeVar("_T")

_IMMUTABLE_DURING_CALL: Final = _xc.HostBufferSemantics.IMMUTABLE_ONLY_DURING_CALL
_batched_device_put: Final = _xc.batched_device_put
_array_result_handler: Final = _xc.array_result_handler

# jaxlib's batched_device_put asks the sharding for an HloSharding; jax adds this method to
# SingleDeviceSharding in Python. Add the same (replicated) answer when jax has not.
# It is called on every transfer, so the answer is built once.
_REPLICATED: Final = _xc.HloSharding.replicate()
if not hasattr(_xc.SingleDeviceSharding, "_to_xla_hlo_sharding"):

    def _sds_to_xla_hlo_sharding(self: Any, num_dimensions: int) -> Any:
        return _REPLICATED

    _xc.SingleDeviceSharding._to_xla_hlo_sharding = _sds_to_xla_hlo_sharding


def _one_line(e: BaseException) -> str:
    """The first non-empty line of an exception message (jaxlib appends Python stack notes)."""
    for line in str(e).splitlines():
        line = line.strip()
        if line:
            return line
    return type(e).__name__


def _runtime_error(what: str, e: BaseException) -> XlaRuntimeError:
    from .callbacks import callback_failure  # a failing ops.HostCallback: the user's exception

    failed = callback_failure(what, e)
    if failed is not None:
        return failed
    return XlaRuntimeError(f"{what}: {_one_line(e)}")


# -- avals and the import shim ---------------------------------------------------------------
class Aval:
    """The abstract value jaxlib wants beside a buffer: ``shape``, ``dtype``, ``weak_type``, ``ndim``."""

    __slots__ = ("shape", "dtype", "weak_type", "ndim")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        self.shape = shape
        self.dtype = dtype
        self.weak_type = False
        self.ndim = len(shape)

    def __repr__(self) -> str:
        return f"Aval({self.shape}, {self.dtype})"


class _ShapedArray(Aval):
    """Stand-in for ``jax.core.ShapedArray`` (jaxlib builds one for arrays it creates itself)."""

    __slots__ = ()

    def __init__(self, shape: Sequence[int], dtype: Any, weak_type: bool = False, **_: Any) -> None:
        super().__init__(tuple(int(d) for d in shape), np.dtype(dtype))
        self.weak_type = bool(weak_type)


_sharding_cache: dict[Any, Any] = {}


def single_device_sharding(device: Any) -> Any:
    """``SingleDeviceSharding(device)``, cached per jaxlib device."""
    s = _sharding_cache.get(device)
    if s is None:
        s = _sharding_cache[device] = _xc.SingleDeviceSharding(device)
    return s


def _make_single_device_sharding(device: Any, memory_kind: Any = None) -> Any:
    if memory_kind is None or memory_kind == "device":
        return single_device_sharding(device)
    return _xc.SingleDeviceSharding(device, memory_kind=memory_kind)


def _build_shim() -> dict[str, types.ModuleType] | None:
    try:
        if importlib.util.find_spec("jax") is not None:
            return None
    except (ImportError, ValueError):  # a broken or odd "jax" entry: leave it alone
        return None
    jax = types.ModuleType("jax", "xlasdk stand-in, present only during a jaxlib call")
    jax.__path__ = []
    core = types.ModuleType("jax.core")
    core.ShapedArray = _ShapedArray  # type: ignore[attr-defined]
    src = types.ModuleType("jax._src")
    src.__path__ = []
    impls = types.ModuleType("jax._src.sharding_impls")
    impls.make_single_device_sharding = _make_single_device_sharding  # type: ignore[attr-defined]
    jax.core = core  # type: ignore[attr-defined]
    jax._src = src  # type: ignore[attr-defined]
    src.sharding_impls = impls  # type: ignore[attr-defined]
    return {"jax": jax, "jax.core": core, "jax._src": src, "jax._src.sharding_impls": impls}


_SHIM: Final = _build_shim()
_modules: Final = sys.modules


def _shimmed(fn: Callable[..., _T], *args: Any) -> _T:
    """Call ``fn(*args)`` with the stand-in ``jax`` modules present (when jax is absent)."""
    shim = _SHIM
    if shim is None or "jax" in _modules:
        return fn(*args)
    _modules.update(shim)
    try:
        return fn(*args)
    finally:
        for name, mod in shim.items():
            if _modules.get(name) is mod:
                del _modules[name]
