"""jaxlib's LAPACK kernels as XLA:CPU custom-call targets.

jaxlib 0.10.2 ships typed-FFI LAPACK handlers (``lapack_sgetrf_ffi``, ``lapack_dgeqrf_ffi``, ...)
in ``jaxlib.cpu._lapack`` but registers them with XLA only when jax imports them. xlasdk never
imports jax: :func:`ensure_registered` registers every ``*_ffi`` handler once, for the ``cpu``
platform, before the first op that calls one is built.
"""

from __future__ import annotations

import threading
from typing import Final

from ..types import PrimitiveType

__all__ = ["ensure_registered", "target_name"]

_lock: Final = threading.Lock()
_done = False

_PREFIX: Final[dict[PrimitiveType, str]] = {
    PrimitiveType.F32: "s", PrimitiveType.F64: "d", PrimitiveType.C64: "c", PrimitiveType.C128: "z",
}


def ensure_registered() -> None:
    """Register jaxlib's LAPACK FFI handlers with XLA:CPU (idempotent, thread-safe)."""
    global _done
    if _done:
        return
    with _lock:
        if _done:
            return
        from jaxlib import xla_client as _xc
        from jaxlib.cpu import _lapack  # type: ignore[attr-defined,unused-ignore]  # typed or not, by jaxlib version

        _lapack.initialize()
        for name, value in _lapack.registrations().items():
            if name.endswith("_ffi"):
                _xc.register_custom_call_target(name, value, platform="cpu", api_version=1)
        _done = True


def target_name(routine: str, et: PrimitiveType) -> str:
    """``lapack_<s|d|c|z><routine>_ffi`` for an f32/f64/c64/c128 element type."""
    return f"lapack_{_PREFIX[et]}{routine}_ffi"
