"""MLIR / StableHLO / HLO conversions on top of jaxlib's bundled bindings.

Every function takes and returns plain Python values (``str``, ``bytes``) or opaque jaxlib
objects typed ``Any``; callers never import jaxlib themselves.
"""

from __future__ import annotations

import threading
from typing import Any

import jaxlib
import jaxlib._hlo as _hlo
from jaxlib import _jax as _J
from jaxlib.mlir import ir as _ir
from jaxlib.mlir._mlir_libs import _jax_mlir_ext
from jaxlib.mlir.dialects import chlo as _chlo
from jaxlib.mlir.dialects import stablehlo as _stablehlo

__all__ = [
    "JAXLIB_VERSION",
    "MlirError",
    "context",
    "parse_module",
    "module_to_pretty_text",
    "module_to_hlo",
    "hlo_text",
    "hlo_proto",
    "hlo_dot_graph",
    "stablehlo_current_version",
    "stablehlo_minimum_version",
]

JAXLIB_VERSION: str = jaxlib.__version__ if hasattr(jaxlib, "__version__") else "unknown"
MlirError = _ir.MLIRError

_local = threading.local()


def context() -> Any:
    """A per-thread MLIR context with the StableHLO, CHLO and upstream dialects loaded."""
    ctx = getattr(_local, "ctx", None)
    if ctx is None:
        registry = _ir.DialectRegistry()
        _jax_mlir_ext.register_dialects(registry)
        ctx = _ir.Context()
        ctx.append_dialect_registry(registry)
        ctx.load_all_available_dialects()
        _stablehlo.register_dialect(ctx)
        _chlo.register_dialect(ctx)
        _local.ctx = ctx
    return ctx


def parse_module(text: str | bytes, *, verify: bool = True) -> Any:
    """Parse MLIR text or bytecode into an ``ir.Module`` (raises ``MlirError``)."""
    ctx = context()
    with ctx, _ir.Location.unknown():
        m = _ir.Module.parse(text)
        if verify and not m.operation.verify():  # pragma: no cover - verify raises instead
            raise ValueError("module failed verification")
    return m


def module_to_pretty_text(module: Any, *, debug_info: bool = False) -> str:
    """StableHLO text in the pretty (custom) form."""
    with context():
        return str(module.operation.get_asm(enable_debug_info=debug_info, large_elements_limit=None))


def module_to_bytecode(module: Any) -> bytes:
    """MLIR bytecode of a module, keeping locations."""
    import io

    buf = io.BytesIO()
    with context():
        module.operation.write_bytecode(buf)
    return buf.getvalue()


def module_to_hlo(text: str | bytes) -> Any:
    """Convert a StableHLO module (text or bytecode) to a jaxlib ``XlaComputation``.

    Raises jaxlib's runtime error on failure; callers wrap it.
    """
    return _J.mlir.mlir_module_to_xla_computation(text, use_tuple_args=False, return_tuple=False)


def hlo_text(xla_computation: Any, *, metadata: bool = True, large_constants: bool = True) -> str:
    """HLO text of a jaxlib ``XlaComputation``, with ``metadata={...}`` when asked."""
    opts = _hlo.HloPrintOptions()
    opts.print_metadata = metadata
    opts.print_large_constants = large_constants
    return str(xla_computation.get_hlo_module().to_string(opts))


def hlo_proto(xla_computation: Any) -> bytes:
    return bytes(xla_computation.as_serialized_hlo_module_proto())


def hlo_dot_graph(xla_computation: Any) -> str:
    return str(_hlo.hlo_module_to_dot_graph(xla_computation.get_hlo_module()))


def stablehlo_current_version() -> str:
    return str(_stablehlo.get_current_version())


def stablehlo_minimum_version() -> str:
    return str(_stablehlo.get_minimum_version())
