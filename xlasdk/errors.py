"""The xlasdk exception hierarchy.

Every error xlasdk raises for something a user passed derives from :class:`XlaSdkError`.
Build-time mistakes are :class:`ShapeError` (also a ``ValueError``) or :class:`DTypeError`
(also a ``TypeError``), raised by the op call itself and naming the op, the operand, what was
expected and what was given, and the user's source line.

Every public error class is defined here (``tests/test_errors.py`` checks it): the modules that
raise them import them from here, and the few that defined one before keep the name importable
from their old path (``xlasdk.runtime.device.UnknownDeviceError`` is this module's class).
"""

from __future__ import annotations

__all__ = [
    "XlaSdkError",
    "ShapeError",
    "DTypeError",
    "CompileError",
    "DeviceCountError",
    "UnsupportedOnDeviceError",
    "PlatformLoweringError",
    "OtherEnvironmentError",
    "XlaRuntimeError",
    "FormatError",
    "DistributedError",
    "PluginError",
    "HostCallbackError",
    "GraphImportError",
    "CompareArgumentError",
    "ToleranceError",
    "ExecutionTimeoutError",
    "UnknownDeviceError",
    "CompileOnlyError",
    "DLPackError",
    "UnsupportedOpError",
    "CollectiveTimeoutError",
    "NotReproducedError",
]


class XlaSdkError(Exception):
    """Base class of every error raised by xlasdk."""


class ShapeError(XlaSdkError, ValueError):
    """An operand or attribute has the wrong rank, dimensions or value for an operation."""


class DTypeError(XlaSdkError, TypeError):
    """An operand has an element type the operation does not accept, or a dtype is unknown."""


class CompileError(XlaSdkError):
    """XLA failed to compile a computation (wraps jaxlib's ``JaxRuntimeError``)."""


class DeviceCountError(CompileError):
    """A program that runs on more devices (``num_replicas`` x ``num_partitions``, the options' or
    those its module records) than its device's client has from that device on.

    Attributes: ``needed`` (the program's device count), ``available`` (the client's devices from
    the given one on), ``platform`` (the client's platform)."""

    def __init__(self, message: str = "", *, needed: int = 0, available: int = 0, platform: str = "") -> None:
        super().__init__(message)
        self.needed = needed
        self.available = available
        self.platform = platform


class UnsupportedOnDeviceError(CompileError):
    """A program holds what the device's compiler does not take (an element type, an op, an
    attribute), as its capability table (``xs.capabilities(device)``) knows: refused before XLA sees
    it, with the instruction, its source line, what XLA says and what to do instead.

    Attribute: ``refusals``, every refused instruction (``xlasdk.runtime.capabilities.Refusal``)."""

    def __init__(self, message: str = "", *, refusals: tuple[object, ...] = ()) -> None:
        super().__init__(message)
        self.refusals = refusals


class PlatformLoweringError(CompileError):
    """A program holds a platform's custom call (jaxlib's LAPACK kernels) that the target platform
    has no form of; the message names the target and the platform."""


class OtherEnvironmentError(XlaSdkError):
    """``compare --against-python`` / ``--against-jaxlib``: the other environment could not give an
    answer: its interpreter does not start, is no Python with jaxlib (in xlasdk's range), numpy and
    ml_dtypes, dies, runs past its time, answers with something else than the worker's result, or its
    XLA could not compile or run the module."""


class XlaRuntimeError(XlaSdkError, RuntimeError):
    """Executing a compiled computation or moving data to or from a device failed."""


class FormatError(XlaSdkError, ValueError):
    """A file or in-memory blob is missing, empty, truncated, corrupt or of the wrong format."""


class GraphImportError(XlaSdkError):
    """A loaded module has a construct the instruction graph cannot hold (a region with several
    blocks, an unbounded dynamic dimension, ``main`` returning a tuple-typed value), named in the
    message. Raised by ``comp.instructions()`` and the tools built on it; the module itself still
    prints, saves, compiles and runs."""


class CompareArgumentError(XlaSdkError, ValueError):
    """``compare`` cannot run as asked: what it compares against, ``bisect``, ``outputs``, the device
    kind or the precision do not fit the program or each other. The message starts with
    ``compare:`` and says which; ``xlasdk compare`` reports it as a usage error (exit 2)."""


class ToleranceError(CompareArgumentError, ShapeError):
    """A tolerance of ``compare`` (``rtol``, ``atol``, ``ulps``) that is not a finite number >= 0 (also
    a :class:`ShapeError`, as it was before this class)."""


class ExecutionTimeoutError(XlaRuntimeError):
    """``Executable.execute(..., timeout=S)`` waited S seconds and the run had not finished. XLA
    cannot stop a running program: it goes on in a background thread until it ends, and its results
    are dropped."""


class DistributedError(XlaRuntimeError):
    """A multi-process run failed: a process did not join, died, or left (``xs.distributed``).

    Raised by ``xs.distributed.initialize`` / ``shutdown`` and by executions whose cross-process
    collectives fail (XLA's distributed runtime and gloo collectives)."""


class PluginError(XlaRuntimeError):
    """A PJRT plugin could not be used: a bad library, a PJRT C API or jaxlib version mismatch,
    or a failed initialization (``load_pjrt_plugin``, ``xs.client("cuda")``)."""


class HostCallbackError(XlaRuntimeError):
    """A Python host callback (``ops.HostCallback``, ``ops.DebugPrint``) raised, or returned
    values of the wrong number, shape or dtype, while a computation ran.

    The message names the computation, the callback and the exception; ``exception`` is the
    exception the callback raised (or the one xlasdk raised about its return value)."""

    exception: BaseException | None = None


class UnknownDeviceError(XlaSdkError, ValueError):
    """A device or platform name matches no device of any available client."""


class CompileOnlyError(XlaSdkError):
    """A compile-only executable (compiled for a topology, not a chip) was asked to run."""


class DLPackError(XlaRuntimeError, BufferError):
    """A DLPack capsule that cannot be imported as asked (used twice, or not aliasable): both
    the ``BufferError`` of the array API standard and the ``RuntimeError`` jaxlib raised."""


class UnsupportedOpError(XlaSdkError):
    """The reference evaluator has no rule for an op of the program (named in the message)."""


class CollectiveTimeoutError(XlaSdkError):
    """A simulated device waited at a collective longer than the timeout for devices that never
    came (they took another path through the program, or the op's groups name a device that does
    not run it); the message names the op and the devices."""


class NotReproducedError(XlaSdkError):
    """The module given to :func:`reduce` does not satisfy the condition: there is nothing to shrink."""
