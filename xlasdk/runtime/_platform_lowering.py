"""Per-platform lowering of linear algebra: the compile step's rewrite of LAPACK custom calls.

xlasdk's linear-algebra wrappers build one program for every platform. Where XLA has an op or
an expander on every platform they use it (``stablehlo.cholesky``, ``stablehlo.triangular_solve``,
XLA's ``Qr`` / ``ProductOfElementaryHouseholderReflectors`` expanders, Jacobi sweeps of XLA ops
for ``Eigh`` / ``SVD``); ``ops.LU`` calls jaxlib's LAPACK ``getrf`` kernel, as JAX does on the CPU,
which only XLA:CPU has. JAX lowers such primitives per platform; xlasdk lowers them per device, at
compile time: :func:`for_device` (called by :func:`xlasdk.compile` before anything else) gives a
program for a device that is not a CPU in which every custom call to jaxlib's CPU kernels is
replaced by its value built from what that platform has
(:func:`xlasdk.runtime._lapack_lowering.lower_lapack_call`: on a TPU ``LuDecomposition``,
``stablehlo.cholesky``...). A program compiled for the CPU is never touched (bit for bit the
program built), and the same rewrite serves programs loaded from a CPU dump of JAX
(``jnp.linalg.*`` lowered to ``lapack_*_ffi``). A call with no form on the platform is refused with
a :class:`~xlasdk.runtime._lapack_lowering.PlatformLoweringError` (a CompileError) naming the target and
the platform, before XLA says "Custom emitter ... not found".
"""

from __future__ import annotations

from typing import Any

from .._jaxlib.lapack import names_a_target
from ..program.computation import XlaComputation, compile_request

__all__ = ["for_device", "for_platform"]


def for_device(computation: XlaComputation, device: Any) -> XlaComputation:
    """``computation`` as compiled for ``device`` (a :class:`~xlasdk.Device`, a ``"tpu:0"``-style
    string or None for the default device): :func:`for_platform` of its platform."""
    from .device import _resolve_device

    return for_platform(computation, str(_resolve_device(device).platform))


def for_platform(computation: XlaComputation, platform: str) -> XlaComputation:
    """``computation`` with its LAPACK custom calls lowered for ``platform`` (``"cpu"``: the
    computation itself; another platform: a new computation, or ``computation`` when it calls no
    LAPACK kernel).

    Raises
    ------
    PlatformLoweringError
        A call with no form on ``platform``, or one inside a region (a loop body, a branch, a
        called function) where the rewrite does not reach.
    """
    from ..errors import PlatformLoweringError
    from ._lapack_lowering import lapack_target, lower_lapack_call

    if platform == "cpu":
        return computation
    text = compile_request(computation).module_text
    if not names_a_target(text):
        return computation
    calls = [ins.name for ins in computation.instructions() if lapack_target(ins.op) is not None]
    if calls:
        b = computation.to_builder()
        with b.keeping_default_root():
            for name in calls:
                old = b.instruction(name)
                b.replace(old, lower_lapack_call(old, platform))
        computation = b.build()
        text = compile_request(computation).module_text
    if names_a_target(text):  # a call the rewrite did not reach: refused rather than left to XLA
        found = _first_target(text)
        raise PlatformLoweringError(
            f"compile: {computation.name!r} calls {found!r} (a jaxlib XLA:CPU kernel) inside a loop body, a branch "
            f"or a called function, where xlasdk does not lower it for {platform}; run the program on cpu:0"
        )
    return computation


def _first_target(text: str) -> str:
    import re

    m = re.search(r"\b(?:lapack|cpu)_\w+_ffi\b", text)
    return m.group(0) if m else "a LAPACK kernel"
