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

from ._arguments import _CallPlan as _CallPlan
from ._arguments import _ParamSpec as _ParamSpec
from ._arguments import _scalar_as as _scalar_as
from ._compile import compile, deserialize_executable, load_executable
from ._executable import Executable
from ._executable import ExecutionToken as ExecutionToken
from ._options import CompileOptions, MemoryStats
from ._options import OptionValue as OptionValue
from ._serial_format import _FORMAT_VERSION as _FORMAT_VERSION
from ._serial_format import _MAGIC as _MAGIC
from ._serial_format import _PREFIX as _PREFIX

__all__ = [
    "CompileOptions",
    "Executable",
    "MemoryStats",
    "compile",
    "deserialize_executable",
    "load_executable",
]

for _public in (CompileOptions, Executable, ExecutionToken, MemoryStats, compile, deserialize_executable,
                load_executable):
    _public.__module__ = __name__  # their public home (pickles, docs)
del _public
