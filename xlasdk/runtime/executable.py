"""Compiling and running: ``CompileOptions``, ``compile``, ``Executable``, (de)serialization.

``xs.compile(computation, device)`` turns an :class:`~xlasdk.XlaComputation` into an
:class:`Executable` loaded on a device; calling it runs the program::

    exe = xs.compile(comp, "cpu:0")
    out = exe(np.ones((2, 3), np.float32), 2.0)   # -> DeviceArray
    out.to_numpy()

Arguments are checked in Python before any work (XLA itself accepts a wrong shape of the same
byte size), against per-executable data computed once at compile time.
"""

from __future__ import annotations

from ._compile import compile, deserialize_executable, load_executable
from ._executable import Executable, ExecutionToken
from ._options import CompileOptions, MemoryStats, OptionValue

__all__ = [
    "CompileOptions",
    "Executable",
    "ExecutionToken",
    "MemoryStats",
    "OptionValue",
    "compile",
    "deserialize_executable",
    "load_executable",
]
