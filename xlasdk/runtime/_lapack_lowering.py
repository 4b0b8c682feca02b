"""The TPU's forms of jaxlib's CPU LAPACK custom calls (``lapack_<t><routine>_ffi``).

XLA:CPU runs linear algebra through jaxlib's LAPACK kernels, custom calls no other platform has
(XLA:TPU: "Custom emitter for lapack_sgetrf_ffi not found"). :func:`lower_lapack_call` builds, in
the call's builder, the value the call computes from what the platform has, as JAX lowers the
same primitives per platform (``jax/_src/lax/linalg.py``):

=================  ==============================================================================
routine            TPU form
=================  ==============================================================================
``getrf``          XLA:TPU's ``LuDecomposition`` custom call (``lu``, 0-based pivots, permutation)
                   for f32/c64, :func:`~xlasdk.ops.lu.lu_from_ops` for f64/c128 (which it lacks);
                   pivots made 1-based, ``info`` = the first zero on ``U``'s diagonal (1-based)
``potrf``          ``stablehlo.cholesky`` (the other triangle kept from the operand, as LAPACK
                   leaves it); ``info`` = the first diagonal entry not > 0 (NaN included)
``trsm``           ``stablehlo.triangular_solve``
``geqrf``          XLA's ``Qr`` custom call (its ``QrExpander``), LAPACK's convention
``orgqr/ungqr``    XLA's ``ProductOfElementaryHouseholderReflectors`` custom call
``syevd/heevd``    :func:`~xlasdk.ops.Eigh` (Jacobi sweeps of XLA ops), ``info`` 0
``gesdd/gesvd``    :func:`~xlasdk.ops.SVD` (one-sided Jacobi of XLA ops), ``info`` 0
=================  ==============================================================================

Any other target (``geev``, ``gees``, ``gehrd``, ``sytrd``, the tridiagonal solvers, jaxlib's
special functions) has no TPU form: :class:`PlatformLoweringError` names it and the platform.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import numpy as np

from ..attrs import TriangularSolveOptions_Transpose
from ..builder import XlaOp
from ..errors import CompileError, PlatformLoweringError
from ..ops import elementwise as ew
from ..ops._core import array_shape
from ..ops.control import GetTupleElement, Tuple
from ..ops.custom_call import CUSTOM_CALL
from ..ops.decompositions import (
    SVD,
    Eigh,
    ProductOfElementaryHouseholderReflectors,
    QrDecomposition,
    _adjoint,
    _diag,
    _iota,
    _legacy_call,
    _slice2,
    _tri_mask,
)
from ..ops.lapack_contracts import is_lapack_target
from ..ops.linalg import Cholesky, TriangularSolve
from ..ops.lu import lu_from_ops
from ..ops.reduce import Reduce
from ..ops.sources import Constant, constant_like
from ..shape import Shape
from ..types import COMPLEX, PrimitiveType

__all__ = ["LOWERED_ROUTINES", "lapack_target", "lower_lapack_call"]


#: The TPU custom call of LU with partial pivoting (``jax/_src/lax/linalg.py``'s TPU lowering of
#: ``lu_p``): operand ``(..., m, n)``; results ``(lu, pivots s32 (..., min(m, n)) 0-based,
#: permutation s32 (..., m))``.
TPU_LU_TARGET: Final = "LuDecomposition"
#: The element types XLA:TPU's ``LuDecomposition`` takes; f64/c128 get :func:`~xlasdk.ops.lu.lu_from_ops`.
_TPU_LU_TYPES: Final = frozenset({PrimitiveType.F32, PrimitiveType.C64})

_TRANSPOSE: Final = {"N": TriangularSolveOptions_Transpose.NO_TRANSPOSE,
                     "T": TriangularSolveOptions_Transpose.TRANSPOSE,
                     "C": TriangularSolveOptions_Transpose.ADJOINT}


def lapack_target(op: XlaOp) -> str | None:
    """The call target of ``op`` when it is a custom call to one of jaxlib's CPU kernels
    (:func:`~xlasdk.ops.lapack_contracts.is_lapack_target`), else None."""
    if not op.opdef.same_op(CUSTOM_CALL):  # a loaded tuple-result call has an opaque row of its name
        return None
    target = op.attr("call_target_name")
    return target if isinstance(target, str) and is_lapack_target(target) else None


class _Call:
    """One LAPACK call being lowered: its target, routine, operands, results and attributes."""

    def __init__(self, op: XlaOp, target: str, platform: str) -> None:
        self.op, self.target, self.platform = op, target, platform
        self.b = op.builder
        name = target[len("lapack_"):] if target.startswith("lapack_") else ""
        self.routine = name[1:-len("_ffi")] if name.endswith("_ffi") else ""
        self.operands = list(op.operands)
        self.results = list(op.shape.tuple_shapes()) if op.shape.is_tuple() else [op.shape]
        self.config = _config(op)

    def fail(self, why: str) -> CompileError:
        return PlatformLoweringError(
            f"a custom call to {self.target!r} (jaxlib's XLA:CPU LAPACK kernel) cannot be compiled for "
            f"{self.platform}: {why}; run the program on cpu:0, or build it with xlasdk's ops (ops.LU, ops.QR, "
            "ops.Eigh, ops.SVD, ops.Cholesky, ops.TriangularSolve), which lower for every platform")

    def char(self, name: str, allowed: str) -> str:
        v = self.config.get(name)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < 256 or chr(v) not in allowed:
            raise self.fail(f"its attribute {name}={v!r} is not one of {', '.join(repr(c) for c in allowed)}")
        return chr(int(v))

    def shape(self, i: int) -> tuple[int, ...]:
        return tuple(self.results[i].dimensions())

    def out(self, values: list[XlaOp]) -> XlaOp:
        """The call's value: one array, or the tuple of its results."""
        for i, (v, s) in enumerate(zip(values, self.results, strict=True)):
            if v.shape != s:  # a contract the module broke: never a value of another shape
                raise self.fail(f"result {i} is {s}, the lowering computes {v.shape}")
        return values[0] if not self.op.shape.is_tuple() else Tuple(self.b, values)


def _config(op: XlaOp) -> dict[str, Any]:
    """The typed-FFI attributes: ``backend_config`` (StableHLO) or ``mhlo.backend_config`` (from HLO)."""
    for name in ("backend_config", "mhlo.backend_config"):
        v = op.attr(name)
        if isinstance(v, Mapping) and v:
            return dict(v)
    return {}


def _first_true(flags: XlaOp) -> XlaOp:
    """s32 ``(...)``: 1 + the index of the first true entry of pred ``(..., k)``, 0 when none
    (LAPACK's ``info`` of a failing column)."""
    b = flags.builder
    dims = flags.shape.dimensions()
    k = dims[-1]
    r = len(dims)
    none = np.int32(k + 1)
    idx = _iota(b, dims, r - 1) + 1
    cand = ew.Select(flags, idx, constant_like("LU", int(none), idx))
    first = Reduce(b, cand, Constant(b, none), ew.Min, [r - 1])
    return ew.Select(ew.Eq(first, int(none)), constant_like("LU", 0, first), first)


def _zero_info(c: _Call, i: int) -> XlaOp:
    return Constant(c.b, np.zeros(c.shape(i), np.int32))


def _getrf(c: _Call) -> XlaOp:
    (a,) = c.operands
    d = a.shape.dimensions()
    lead, (m, n) = d[:-2], d[-2:]
    k = min(m, n)
    if k == 0:  # nothing to factor
        return c.out([a, Constant(c.b, np.zeros(lead + (0,), np.int32)), _zero_info(c, 2)])
    if a.shape.element_type() in _TPU_LU_TYPES:
        s32 = PrimitiveType.S32
        shape = Shape.tuple_shape([a.shape, array_shape(s32, lead + (k,), "LU"), array_shape(s32, lead + (m,), "LU")])
        res = c.b.add_op(CUSTOM_CALL, (a,), shape, _legacy_call(TPU_LU_TARGET))
        lu, piv = GetTupleElement(res, 0), GetTupleElement(res, 1)
    else:  # "Only F32 and C64 types are implemented in LuDecomposition" (libtpu 0.0.42)
        lu, piv, _ = lu_from_ops(a)
    diag = _diag(_slice2(lu, (0, k), (0, k)))
    info = _first_true(ew.Eq(diag, constant_like("LU", 0, diag)))
    return c.out([lu, piv + 1, info])


def _potrf(c: _Call) -> XlaOp:
    (a,) = c.operands
    lower = c.char("uplo", "LU") == "L"
    fac = Cholesky(a, lower=lower)
    keep = _tri_mask(c.b, a.shape.dimensions(), "GE" if lower else "LE")
    fac = ew.Select(keep, fac, a)  # LAPACK leaves the other triangle as it was
    diag = _diag(fac)
    if a.shape.element_type() in COMPLEX:
        diag = ew.Real(diag)
    info = _first_true(ew.Not(ew.Gt(diag, constant_like("Cholesky", 0, diag))))
    return c.out([fac, info])


def _trsm(c: _Call) -> XlaOp:
    a, rhs = c.operands
    side, uplo = c.char("side", "LR"), c.char("uplo", "LU")
    trans, diag = c.char("trans_x", "NTC"), c.char("diag", "NU")
    x = TriangularSolve(a, rhs, left_side=side == "L", lower=uplo == "L", unit_diagonal=diag == "U",
                        transpose_a=_TRANSPOSE[trans])
    return c.out([x])


def _geqrf(c: _Call) -> XlaOp:
    qr, taus = QrDecomposition(c.operands[0])
    return c.out([qr, taus])


def _orgqr(c: _Call) -> XlaOp:
    return c.out([ProductOfElementaryHouseholderReflectors(c.operands[0], c.operands[1])])


def _syevd(c: _Call) -> XlaOp:
    c.char("mode", "VN")
    lower = c.char("uplo", "LU") == "L"
    v, w = Eigh(c.operands[0], lower=lower, sort_eigenvalues=True)  # LAPACK's ascending order
    return c.out([v, w, _zero_info(c, 2)])


def _gesvd(c: _Call) -> XlaOp:
    c.char("mode", "ASN")
    (a,) = c.operands
    d = a.shape.dimensions()
    m, n = d[-2:]
    full = c.shape(2)[-2:] == (m, m) and c.shape(3)[-2:] == (n, n)
    u, s, v = SVD(a, full_matrices=full)
    return c.out([a, s, u, _adjoint(v), _zero_info(c, 4)])


#: routine -> its TPU form (the routines with no entry are refused).
LOWERED_ROUTINES: Final[dict[str, Callable[[_Call], XlaOp]]] = {
    "getrf": _getrf, "potrf": _potrf, "trsm": _trsm, "geqrf": _geqrf, "orgqr": _orgqr, "ungqr": _orgqr,
    "syevd": _syevd, "heevd": _syevd, "gesdd": _gesvd, "gesvd": _gesvd,
}

#: platform -> the routines it has a form of
_PLATFORMS: Final[dict[str, Mapping[str, Callable[[_Call], XlaOp]]]] = {"tpu": LOWERED_ROUTINES}


def lower_lapack_call(op: XlaOp, platform: str) -> XlaOp:
    """The value of the LAPACK custom call ``op`` (:func:`lapack_target`), built in ``op``'s
    builder from what ``platform`` has (see the module's docstring); same shape as ``op``.

    Raises
    ------
    PlatformLoweringError: the routine (or the platform) has no such form, or the call's
        attributes are not what jaxlib's kernel takes; the message names the target and platform.
    """
    target = lapack_target(op)
    if target is None:
        raise PlatformLoweringError(f"lower_lapack_call: expected a custom call to a LAPACK target, got {op.opcode}")
    c = _Call(op, target, platform)
    table = _PLATFORMS.get(platform)
    if table is None:
        raise c.fail(f"xlasdk has no {platform} form of jaxlib's CPU kernels")
    rule = table.get(c.routine)
    if rule is None:
        have = ", ".join(sorted(table))
        raise c.fail(f"XLA:{platform.upper()} has no form of this kernel that xlasdk knows (it lowers {have})")
    return rule(c)
