"""jaxlib pieces behind the compatibility module (:mod:`xlasdk.xla_client`): Python tracebacks,
the ``DeviceAssignment`` proto and XLA's cost analysis of an unoptimized HLO module.

Checked on jaxlib 0.10.2: ``_jax.Traceback.get_traceback()`` returns None while tracebacks are
disabled (``_jax.set_tracebacks_enabled``; enabled by default), ``_jax.Frame(file_name,
function_name, function_start_line, line_num)`` and ``Traceback.traceback_from_frames(frames)``
build a Python traceback object, and ``_jax.hlo_module_cost_analysis(client, hlo_module)``
returns a dict of floats (``flops``, ``bytes accessed``...).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
from jaxlib import xla_client as _xc

from ..errors import XlaRuntimeError

__all__ = [
    "Traceback",
    "Frame",
    "tracebacks_enabled",
    "set_tracebacks_enabled",
    "current_traceback",
    "device_assignment_proto",
    "hlo_module_cost_analysis",
]

_J: Final[Any] = importlib.import_module("jaxlib._jax")

Traceback: Final[Any] = _J.Traceback
"""jaxlib's ``Traceback``: ``get_traceback()``, ``frames``, ``raw_frames()``,
``as_python_traceback()``, ``traceback_from_frames(frames)``, ``str()``."""

Frame: Final[Any] = _J.Frame
"""jaxlib's ``Frame(file_name, function_name, function_start_line, line_num)``."""


def tracebacks_enabled() -> bool:
    """Whether jaxlib records Python tracebacks (``Traceback.get_traceback()`` not None)."""
    return bool(_J.tracebacks_enabled())


def set_tracebacks_enabled(enabled: bool) -> None:
    """Turn jaxlib's traceback recording on or off (process-wide)."""
    _J.set_tracebacks_enabled(bool(enabled))


def current_traceback() -> Any:
    """``Traceback.get_traceback()``: the Python stack now, or None while disabled."""
    return _J.Traceback.get_traceback()


def device_assignment_proto(rows: Sequence[Sequence[int]]) -> bytes:
    """The serialized ``xla.DeviceAssignmentProto`` of ``rows[replica][computation]`` ids."""
    try:
        return bytes(_xc.DeviceAssignment.create(np.asarray(rows, dtype=np.int64)).serialize())
    except Exception as e:
        raise XlaRuntimeError(f"DeviceAssignment.serialize: {e}") from e


def hlo_module_cost_analysis(client: Any, hlo_module: Any) -> dict[str, float]:
    """XLA's cost analysis of an (unoptimized) HLO module for ``client``'s platform.

    Raises
    ------
    XlaRuntimeError
        When XLA cannot analyse the module.
    """
    try:
        return dict(_J.hlo_module_cost_analysis(client, hlo_module))
    except Exception as e:
        raise XlaRuntimeError(f"hlo_module_cost_analysis: {e}") from e
