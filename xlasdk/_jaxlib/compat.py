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
import sys
import types
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

Frame: Final[Any] = _J.Frame
"""jaxlib's ``Frame(file_name, function_name, function_start_line, line_num)``."""


class _FrameMarker(Exception):
    """Raised (and caught) to make one traceback entry in :meth:`Traceback.traceback_from_frames`."""


class Traceback:
    """A Python traceback recorded by jaxlib, as the former ``xla_client.Traceback`` showed it.

    jaxlib 0.10.2+ names each frame's function by its qualified name (``co_qualname``,
    ``'K.test'``); the former API, and this class, give the bare ``co_name`` (``'test'``).
    ``frames`` is a list of :data:`Frame`, innermost first; ``raw_frames()`` gives jaxlib's
    ``(code objects, last instruction offsets)``; ``as_python_traceback()`` a Python traceback.
    """

    __slots__ = ("_tb", "_frames")

    def __init__(self, tb: Any) -> None:
        self._tb = tb
        self._frames: list[Any] | None = None

    @staticmethod
    def get_traceback() -> Traceback | None:
        """The Python stack now, or None while tracebacks are disabled."""
        tb = _J.Traceback.get_traceback()
        return None if tb is None else Traceback(tb)

    @staticmethod
    def traceback_from_frames(frames: Sequence[Any]) -> types.TracebackType | None:
        """A Python traceback object made of ``frames`` (:data:`Frame` objects, innermost first,
        as :attr:`frames` lists them); the traceback runs outermost first, as Python's do.

        Built in Python (a frame per entry, at its file, line and function name): jaxlib's
        ``traceback_from_frames`` sometimes points at the function's first line instead of
        ``line_num``, depending on what ran before.
        """
        tb: types.TracebackType | None = None
        for f in frames:
            line = max(int(f.line_num), 1)
            code = compile("\n" * (line - 1) + "raise __xlasdk_frame__", str(f.file_name), "exec")
            code = code.replace(co_name=str(f.function_name))
            try:
                exec(code, {"__xlasdk_frame__": _FrameMarker()})
            except _FrameMarker:
                here = sys.exc_info()[2]
                assert here is not None and here.tb_next is not None
                made = here.tb_next  # the frame of `code` (``here`` is this function's)
            made.tb_next = tb
            tb = made
        return tb

    @property
    def frames(self) -> list[Any]:
        """The frames, innermost first, each a :data:`Frame` with the bare function name."""
        if self._frames is None:
            codes, _ = self._tb.raw_frames()
            self._frames = [
                _J.Frame(f.file_name, code.co_name, f.function_start_line, f.line_num)
                for f, code in zip(self._tb.frames, codes, strict=True)
                if code not in _OWN_CODES
            ]
        return self._frames

    def raw_frames(self) -> tuple[list[Any], list[int]]:
        """jaxlib's ``(code objects, last instruction offsets)``, innermost first."""
        codes, lastis = self._tb.raw_frames()
        kept = [(c, i) for c, i in zip(codes, lastis, strict=True) if c not in _OWN_CODES]
        return [c for c, _ in kept], [i for _, i in kept]

    def as_python_traceback(self) -> types.TracebackType | None:
        """The recorded stack as a Python ``types.TracebackType`` (outermost first, as Python's)."""
        return Traceback.traceback_from_frames(self.frames)

    def __str__(self) -> str:
        return "\n".join(f"{f.file_name}:{f.line_num} ({f.function_name})" for f in self.frames)

    def __repr__(self) -> str:
        return f"Traceback({len(self.frames)} frames)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Traceback) and bool(self._tb == other._tb)

    def __hash__(self) -> int:
        return hash(self._tb)


def tracebacks_enabled() -> bool:
    """Whether jaxlib records Python tracebacks (``Traceback.get_traceback()`` not None)."""
    return bool(_J.tracebacks_enabled())


def set_tracebacks_enabled(enabled: bool) -> None:
    """Turn jaxlib's traceback recording on or off (process-wide)."""
    _J.set_tracebacks_enabled(bool(enabled))


def current_traceback() -> Traceback | None:
    """``Traceback.get_traceback()``: the Python stack now, or None while disabled."""
    return Traceback.get_traceback()


# This module's own frames are not the user's: left out of every Traceback.
_OWN_CODES: Final[frozenset[Any]] = frozenset({Traceback.get_traceback.__code__, current_traceback.__code__})


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
