"""jaxlib's ``Traceback`` / ``Frame`` and the ``tracebacks()`` switch."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Final

from .._jaxlib import compat as _compat

# -- tracebacks ---------------------------------------------------------------------------------
Traceback: Final = _compat.Traceback
"""The former ``Traceback``: ``Traceback.get_traceback()`` (None while tracebacks are off),
``frames`` (bare function names, as the former API), ``raw_frames()``, ``as_python_traceback()``,
``traceback_from_frames(frames)``."""

Frame: Final = _compat.Frame
"""jaxlib's ``Frame(file_name, function_name, function_start_line, line_num)``."""


@contextlib.contextmanager
def tracebacks(enabled: bool = True) -> Iterator[None]:
    """Turn the recording of Python tracebacks on (or off) inside a ``with`` block: then
    ``Traceback.get_traceback()``, ``Buffer.traceback`` and ``LoadedExecutable.traceback`` give
    where things were made (None while off). The setting is process-wide (jaxlib's)."""
    saved = _compat.tracebacks_enabled()
    _compat.set_tracebacks_enabled(bool(enabled))
    try:
        yield
    finally:
        _compat.set_tracebacks_enabled(saved)
