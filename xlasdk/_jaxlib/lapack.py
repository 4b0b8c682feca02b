"""jaxlib's own XLA:CPU custom-call targets: LAPACK kernels and special functions.

jaxlib ships typed-FFI handlers for XLA:CPU in ``jaxlib.cpu``: LAPACK (``_lapack``:
``lapack_sgetrf_ffi``, ``lapack_dgeqrf_ffi``, ...), special functions (``_math``, new in jaxlib
0.12.1: ``cpu_lgamma_ffi`` and ``cpu_digamma_ffi``, which JAX 0.12.1 lowers
``jax.scipy.special.gammaln`` / ``digamma`` to on the CPU) and sparse kernels (``_sparse``:
``cpu_csr_sparse_dense_ffi``). jaxlib registers them with XLA only when jax imports them; xlasdk
never imports jax: :func:`ensure_registered` registers every ``*_ffi`` handler of every such module
the installed jaxlib has, once, for the ``cpu`` platform, before a program that calls one is
compiled or loaded (:func:`names_a_target` tells from its text or bytes).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import threading
from typing import Final

from ..types import PrimitiveType

__all__ = ["ensure_registered", "names_a_target", "target_name", "missing_kernel_hint", "MODULES", "NEWER_KERNELS"]

MODULES: Final[tuple[str, ...]] = ("jaxlib.cpu._lapack", "jaxlib.cpu._math", "jaxlib.cpu._sparse")
"""The ``jaxlib.cpu`` extension modules whose ``registrations()`` give XLA:CPU FFI handlers (a
module the installed jaxlib lacks is skipped: ``_math`` is new in 0.12.1)."""

#: jaxlib's CPU kernels that a release added, by the first release that has them (a program JAX of
#: that release lowered calls them; an older jaxlib has no handler to register).
NEWER_KERNELS: Final[dict[str, str]] = {"cpu_lgamma_ffi": "0.12.1", "cpu_digamma_ffi": "0.12.1"}

_TARGET: Final = re.compile(rb"\b(?:lapack|cpu)_\w+_ffi\b")
_NO_HANDLER: Final = re.compile(r"No FFI handler registered for (\w+)")
_lock: Final = threading.Lock()
_done = False

_PREFIX: Final[dict[PrimitiveType, str]] = {
    PrimitiveType.F32: "s", PrimitiveType.F64: "d", PrimitiveType.C64: "c", PrimitiveType.C128: "z",
}


def names_a_target(program: str | bytes) -> bool:
    """Whether a program's text or serialized bytes may call one of jaxlib's CPU targets
    (``lapack_*_ffi``, ``cpu_*_ffi``)."""
    data = program.encode("utf-8", "surrogateescape") if isinstance(program, str) else program
    return _TARGET.search(data) is not None


def ensure_registered() -> None:
    """Register jaxlib's XLA:CPU FFI handlers (LAPACK, special functions, sparse) with XLA
    (idempotent, thread-safe)."""
    global _done
    if _done:
        return
    with _lock:
        if _done:
            return
        from jaxlib import xla_client as _xc

        for name in MODULES:
            try:
                module = importlib.import_module(name)
            except ImportError:  # this jaxlib has no such module
                continue
            init = getattr(module, "initialize", None)
            if init is not None:
                init()
            for target, value in module.registrations().items():
                if target.endswith("_ffi"):
                    _xc.register_custom_call_target(target, value, platform="cpu", api_version=1)
        _done = True


def target_name(routine: str, et: PrimitiveType) -> str:
    """``lapack_<s|d|c|z><routine>_ffi`` for an f32/f64/c64/c128 element type."""
    return f"lapack_{_PREFIX[et]}{routine}_ffi"


def missing_kernel_hint(message: str) -> str:
    """For XLA's "No FFI handler registered for cpu_lgamma_ffi" where the installed jaxlib has no
    such kernel (:data:`NEWER_KERNELS`): a sentence naming the release that has it; "" otherwise."""
    m = _NO_HANDLER.search(message)
    release = NEWER_KERNELS.get(m.group(1), "") if m is not None else ""
    if not release or importlib.util.find_spec("jaxlib.cpu._math") is not None:
        return ""
    assert m is not None
    return (f" ({m.group(1)} is a CPU kernel of jaxlib {release} and newer, whose JAX lowers gammaln / digamma to "
            f"it; the installed jaxlib has none: run this program under jaxlib {release}+)")
