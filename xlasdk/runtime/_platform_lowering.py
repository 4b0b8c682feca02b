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
        A call with no form on ``platform``, or one inside a region (a loop body, a branch, or a
        function called from one) where the rewrite does not reach. A call inside a function
        ``main`` calls (``func.call``, an HLO ``call``: JAX's private functions such as
        ``cholesky``), at any depth, is lowered: each such call is replaced by a copy of the
        function's body (so a function called from several places is copied, and lowered, at each).
    """
    from ..errors import PlatformLoweringError
    from ..program.called_ops import every_called_op
    from ._lapack_lowering import lapack_target, lower_lapack_call

    if platform == "cpu":
        return computation
    text = compile_request(computation).module_text
    if not names_a_target(text):
        return computation
    computation = _inline_lapack_functions(computation)
    calls = [ins.name for ins in computation.instructions() if lapack_target(ins.op) is not None]
    if calls:
        b = computation.to_builder()
        with b.keeping_default_root():
            for name in calls:
                old = b.instruction(name)
                b.replace(old, lower_lapack_call(old, platform))
        computation = b.build()
    # a call the rewrite did not reach (in main, a region, a function it calls): refused rather than
    # left to XLA; functions main no longer calls (inlined above) are not compiled
    found = next((t for op, _ in every_called_op(computation.instruction_graph())
                  if (t := lapack_target(op)) is not None), None)
    if found is not None:
        raise PlatformLoweringError(
            f"compile: {computation.name!r} calls {found!r} (a jaxlib XLA:CPU kernel) inside a loop body or a "
            f"branch (or a function called from one), where xlasdk does not lower it for {platform}; run the "
            "program on cpu:0"
        )
    return computation


def _inline_lapack_functions(computation: XlaComputation) -> XlaComputation:
    """``computation`` with each call of ``main`` to a function that calls a LAPACK kernel (at any
    depth, outside loops and branches) replaced by the function's body, until ``main`` calls none.

    Raises
    ------
    PlatformLoweringError
        A function the rewrite cannot copy (its graph cannot be read, it has side effects, it calls itself).
    """
    from ..errors import PlatformLoweringError, XlaSdkError
    from ..ops.control import Tuple
    from ..program.graph_edit import inline_function
    from ..program.graph_import import InstructionGraph, callee_of
    from ._lapack_lowering import lapack_target

    def calls_lapack(graph: InstructionGraph, name: str, memo: dict[str, bool], path: tuple[str, ...]) -> bool:
        if name in memo:
            return memo[name]
        if name in path:
            raise PlatformLoweringError(f"compile: function {name!r} calls itself ({' -> '.join((*path, name))})")
        fn = graph.callee(name)
        found = False
        for ins in fn.instructions:
            inner = callee_of(ins.op)
            if lapack_target(ins.op) is not None or (
                    inner is not None and calls_lapack(graph, inner, memo, (*path, name))):
                found = True
                break
        memo[name] = found
        return found

    for _ in range(_MAX_INLINE_ROUNDS):
        try:
            graph = computation.instruction_graph()
            memo: dict[str, bool] = {}
            sites = [(ins.name, name) for ins in graph.instructions
                     if (name := callee_of(ins.op)) is not None and calls_lapack(graph, name, memo, ())]
            if not sites:
                return computation
            b = computation.to_builder()
            with b.keeping_default_root():
                for ins_name, name in sites:
                    old = b.instruction(ins_name)
                    outs = inline_function(b, graph.callee(name), old.operands)
                    b.replace(old, outs[0] if len(outs) == 1 and not old.shape.is_tuple() else Tuple(b, outs))
            computation = b.build()
        except PlatformLoweringError:
            raise
        except XlaSdkError as e:
            raise PlatformLoweringError(
                f"compile: {computation.name!r} calls a function that calls a LAPACK kernel, which xlasdk cannot "
                f"copy into the program to lower it: {e}; run the program on cpu:0") from None
    raise PlatformLoweringError(f"compile: {computation.name!r} calls LAPACK kernels through more than "
                                f"{_MAX_INLINE_ROUNDS} levels of functions; run the program on cpu:0")


#: How deep a chain of functions calling functions the LAPACK lowering copies into ``main``.
_MAX_INLINE_ROUNDS = 64
