"""``xla_client.ops``: xlasdk's ops taking the former ``Shape``, plus the former enums."""

from __future__ import annotations

import functools
import types
from typing import Any, Final

from .. import ops as _xs_ops
from ..attrs import ComparisonDirection, FftType, RandomAlgorithm, ResultAccuracy, TriangularSolveOptions_Transpose
from ._shapes import Shape, _native_shape

# -- ops --------------------------------------------------------------------------------------
_OPS_EXTRAS: Final[dict[str, Any]] = {
    "TriangularSolveOptions_Transpose": TriangularSolveOptions_Transpose,
    "RandomAlgorithm": RandomAlgorithm,
    "FftType": FftType,
    "ResultAccuracy": ResultAccuracy,
    "ComparisonDirection": ComparisonDirection,
}


class _OpsNamespace(types.ModuleType):
    """``xla_client.ops``: every function of :mod:`xlasdk.ops` plus the enums the former
    ``ops`` namespace carried (``ops.TriangularSolveOptions_Transpose``...).

    Names are looked up in :mod:`xlasdk.ops` on each access, so ops added there show up here.
    """

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("__"):
            try:
                return _with_native_shapes(getattr(_xs_ops, name))
            except AttributeError:
                pass
            if name in _OPS_EXTRAS:
                return _OPS_EXTRAS[name]
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")

    def __dir__(self) -> list[str]:
        return sorted(set(getattr(_xs_ops, "__all__", ())) | set(_OPS_EXTRAS))


ops: Final = _OpsNamespace("xlasdk.xla_client.ops", _OpsNamespace.__doc__)


@functools.cache
def _with_native_shapes(fn: Any) -> Any:
    """``fn`` taking this module's :class:`Shape` (whose ``element_type()`` is a numpy dtype)
    wherever xlasdk's ops take an ``xs.Shape``: such arguments, alone or in a list, are handed
    on as ``xs.Shape``. Enums and classes pass through unchanged."""
    if not callable(fn) or isinstance(fn, type) or not _takes_shapes(fn):
        return fn  # the op itself: ops.Add is xs.ops.Add

    @functools.wraps(fn)
    def op(*args: Any, **kwargs: Any) -> Any:
        return fn(*[_native_arg(a) for a in args], **{k: _native_arg(v) for k, v in kwargs.items()})

    return op


def _takes_shapes(fn: Any) -> bool:
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    return any("Shape" in str(p.annotation) or p.kind is p.VAR_POSITIONAL for p in params)


def _native_arg(value: Any) -> Any:
    if type(value) is Shape:
        return _native_shape(value)
    if isinstance(value, (list, tuple)) and value and any(type(v) is Shape for v in value):
        return type(value)(_native_shape(v) if type(v) is Shape else v for v in value)
    return value
