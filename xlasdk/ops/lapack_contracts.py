"""Shape contracts of jaxlib's CPU LAPACK custom-call targets (``lapack_<t><routine>_ffi``).

jaxlib's typed-FFI LAPACK kernels (the calls ``jnp.linalg`` / ``jax.scipy.linalg`` lower to on
CPU) read their sizes from the first operand and trust every other buffer to have the sizes those
imply: ``lapack_spotrf_ffi`` claiming an ``f32[64,64]`` result of an ``f32[4,4]`` operand compiles
and runs, and its result holds memory from outside the operand (a smaller result is written past
its end). :func:`lapack_check` is the contract of each target, as JAX's lowering emits it
(``jax/_src/lax/linalg.py``, jaxlib 0.10): the element type its letter names (``s`` f32, ``d``
f64, ``c`` c64, ``z`` c128), the same batch dimensions on every operand and result, the square
matrix where the routine needs one, the ``info`` / pivot arrays (s32), the attributes that select a
shape (``mode``, ``side``...) with the values jaxlib knows, and column-major matrices (the kernels
read a column-major buffer: a row-major one would be factored transposed). A ``lapack_*`` target
with no contract here is refused: the kernel would trust whatever the module claims.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NoReturn

from ..shape import Shape
from ..types import PrimitiveType
from ._core import dtype_error, shape_error

__all__ = ["ALIASES", "ELEMENTWISE_KERNELS", "ROUTINES", "UNCHECKED_KERNELS", "is_lapack_target", "lapack_check"]

#: A custom call's ``output_operand_aliases`` entry: ``(output_tuple_indices, operand_index,
#: operand_tuple_indices)``.
Alias = tuple[tuple[int, ...], int, tuple[int, ...]]

_ETYPE: Final = {"s": PrimitiveType.F32, "d": PrimitiveType.F64, "c": PrimitiveType.C64, "z": PrimitiveType.C128}
_REAL: Final = {PrimitiveType.F32: PrimitiveType.F32, PrimitiveType.F64: PrimitiveType.F64,
                PrimitiveType.C64: PrimitiveType.F32, PrimitiveType.C128: PrimitiveType.F64}
_S32: Final = PrimitiveType.S32

Dims = tuple[int, ...]
#: What a contract gives back: the operands and results it expects, each ``(element type, dims)``.
Expected = tuple[list[tuple[PrimitiveType, Dims]], list[tuple[PrimitiveType, Dims]]]


class _Call:
    """One call's claims: the target, its element type, its operands (arrays), its attributes."""

    def __init__(self, op: str, target: str, et: PrimitiveType, operands: Sequence[Shape],
                 config: Mapping[str, Any] | None) -> None:
        self.op, self.target, self.et, self.operands = op, target, et, operands
        self.config = config or {}

    def fail(self, msg: str) -> NoReturn:
        shape_error(self.op, f"target {self.target!r} {msg}")

    def matrix(self, i: int, name: str) -> tuple[Dims, int, int]:
        """Batch dimensions, rows and columns of operand ``i`` (rank 2 or more)."""
        d = tuple(self.operands[i].dimensions())
        if len(d) < 2:
            self.fail(f"needs a matrix ({name}: rank 2 or more), got operand {i} of shape {self.operands[i]}")
        return d[:-2], d[-2], d[-1]

    def square(self, i: int, name: str) -> tuple[Dims, int]:
        b, m, n = self.matrix(i, name)
        if m != n:
            self.fail(f"needs a square matrix ({name}), got operand {i} of shape {self.operands[i]}")
        return b, n

    def char(self, name: str, allowed: str) -> str:
        """Attribute ``name``, a character code (``uplo = 76 : ui8`` is ``'L'``) among ``allowed``."""
        v = self.config.get(name)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 256 or chr(v) not in allowed:
            want = ", ".join(f"{c!r} ({ord(c)})" for c in allowed)
            got = "no such attribute" if name not in self.config else repr(v)
            self.fail(f"needs attribute {name} in backend_config, one of {want}; got {got}")
        return chr(v)

    def flag(self, name: str) -> bool:
        v = self.config.get(name)
        if not isinstance(v, bool):
            got = "no such attribute" if name not in self.config else repr(v)
            self.fail(f"needs a bool attribute {name} in backend_config; got {got}")
        return v

    def integer(self, name: str) -> int:
        v = self.config.get(name)
        if isinstance(v, bool) or not isinstance(v, int):
            got = "no such attribute" if name not in self.config else repr(v)
            self.fail(f"needs an integer attribute {name} in backend_config; got {got}")
        return v


def _potrf(c: _Call) -> Expected:
    c.char("uplo", "LU")
    b, n = c.square(0, "a")
    return [(c.et, (*b, n, n))], [(c.et, (*b, n, n)), (_S32, b)]


def _getrf(c: _Call) -> Expected:
    b, m, n = c.matrix(0, "a")
    return [(c.et, (*b, m, n))], [(c.et, (*b, m, n)), (_S32, (*b, min(m, n))), (_S32, b)]


def _geqrf(c: _Call) -> Expected:
    b, m, n = c.matrix(0, "a")
    return [(c.et, (*b, m, n))], [(c.et, (*b, m, n)), (c.et, (*b, min(m, n)))]


def _orgqr(c: _Call) -> Expected:
    b, m, n = c.matrix(0, "a")
    taus = tuple(c.operands[1].dimensions())
    k = taus[-1] if len(taus) == len(b) + 1 else -1
    if not 0 <= k <= n <= m:
        c.fail(f"needs a (..., m, n) and taus (..., k) with k <= n <= m, got {c.operands[0]} and {c.operands[1]}")
    return [(c.et, (*b, m, n)), (c.et, (*b, k))], [(c.et, (*b, m, n))]


def _ormqr(c: _Call) -> Expected:
    left, _ = c.flag("left"), c.flag("transpose")
    b, ma, ka = c.matrix(0, "a")
    taus = tuple(c.operands[1].dimensions())
    _, m, n = c.matrix(2, "c")
    k = taus[-1] if len(taus) == len(b) + 1 else -1
    rows = m if left else n  # a holds k reflectors of length rows
    if not (0 <= k <= rows and ma == rows and ka >= k):
        c.fail(f"with left={left} needs a (..., {'m' if left else 'n'}, >= k) and taus (..., k), k <= "
               f"{'m' if left else 'n'}, for c (..., m, n); got {c.operands[0]}, {c.operands[1]}, {c.operands[2]}")
    return ([(c.et, (*b, ma, ka)), (c.et, (*b, k)), (c.et, (*b, m, n))], [(c.et, (*b, m, n))])


def _syevd(c: _Call) -> Expected:
    c.char("mode", "VN")
    c.char("uplo", "LU")
    b, n = c.square(0, "a")
    return [(c.et, (*b, n, n))], [(c.et, (*b, n, n)), (_REAL[c.et], (*b, n)), (_S32, b)]


def _gesvd(c: _Call) -> Expected:
    mode = c.char("mode", "ASN")  # 'O' (u over a) is not what JAX emits: refused
    b, m, n = c.matrix(0, "a")
    k = min(m, n)
    u, vt = ((m, k), (k, n)) if mode == "S" else ((m, m), (n, n))
    return ([(c.et, (*b, m, n))],
            [(c.et, (*b, m, n)), (_REAL[c.et], (*b, k)), (c.et, (*b, *u)), (c.et, (*b, *vt)), (_S32, b)])


def _geev(c: _Call) -> Expected:
    c.char("compute_left", "VN")
    c.char("compute_right", "VN")
    b, n = c.square(0, "a")
    cplx = PrimitiveType.C64 if _REAL[c.et] is PrimitiveType.F32 else PrimitiveType.C128
    vectors = [(cplx, (*b, n, n)), (cplx, (*b, n, n)), (_S32, b)]
    values = [(c.et, (*b, n)), (c.et, (*b, n))] if c.et is _REAL[c.et] else [(c.et, (*b, n))]
    return [(c.et, (*b, n, n))], [*values, *vectors]


def _gees(c: _Call) -> Expected:
    c.char("mode", "VN")
    c.char("sort", "N")  # sorting needs a select function the FFI call cannot carry
    b, n = c.square(0, "a")
    values = [(c.et, (*b, n)), (c.et, (*b, n))] if c.et is _REAL[c.et] else [(c.et, (*b, n))]
    return [(c.et, (*b, n, n))], [(c.et, (*b, n, n)), (c.et, (*b, n, n)), *values, (_S32, b), (_S32, b)]


def _gehrd(c: _Call) -> Expected:
    low, high = c.integer("low"), c.integer("high")
    b, n = c.square(0, "a")
    if not ((n > 0 and 1 <= low <= high <= n) or (n == 0 and low == 1 and high == 0)):
        c.fail(f"needs 1 <= low <= high <= n (low=1, high=0 when n=0), got low={low}, high={high}, n={n}")
    return [(c.et, (*b, n, n))], [(c.et, (*b, n, n)), (c.et, (*b, max(n - 1, 0))), (_S32, b)]


def _sytrd(c: _Call) -> Expected:
    c.char("uplo", "LU")
    b, n = c.square(0, "a")
    e = (*b, max(n - 1, 0))
    return [(c.et, (*b, n, n))], [(c.et, (*b, n, n)), (_REAL[c.et], (*b, n)), (_REAL[c.et], e), (c.et, e), (_S32, b)]


def _trsm(c: _Call) -> Expected:
    side = c.char("side", "LR")
    c.char("uplo", "LU")
    c.char("trans_x", "NTC")
    c.char("diag", "NU")
    b, k = c.square(0, "a")
    _, m, n = c.matrix(1, "b")
    if k != (m if side == "L" else n):
        c.fail(f"with side={side!r} needs a ({'m, m' if side == 'L' else 'n, n'}) for b (..., m, n); got "
               f"{c.operands[0]} and {c.operands[1]}")
    return [(c.et, (*b, k, k)), (c.et, (*b, m, n))], [(c.et, (*b, m, n))]


def _diagonals(c: _Call) -> tuple[Dims, list[tuple[PrimitiveType, Dims]]]:
    b, n, k = c.matrix(3, "b")
    diag = (*b, n)
    return b, [(c.et, diag), (c.et, diag), (c.et, diag), (c.et, (*b, n, k))]


def _gtsv(c: _Call) -> Expected:
    b, operands = _diagonals(c)
    return operands, [*operands, (_S32, b)]


def _tridiagonal_solve_perturbed(c: _Call) -> Expected:
    _, operands = _diagonals(c)
    return operands, [operands[3]]


#: routine -> (number of operands, contract). ``or``/``un``, ``sy``/``he`` name one routine for
#: real and complex element types.
ROUTINES: Final[dict[str, tuple[int, Callable[[_Call], Expected]]]] = {
    "potrf": (1, _potrf), "getrf": (1, _getrf), "geqrf": (1, _geqrf),
    "orgqr": (2, _orgqr), "ungqr": (2, _orgqr), "ormqr": (3, _ormqr), "unmqr": (3, _ormqr),
    "syevd": (1, _syevd), "heevd": (1, _syevd), "gesdd": (1, _gesvd), "gesvd": (1, _gesvd),
    "geev": (1, _geev), "gees": (1, _gees), "gehrd": (1, _gehrd),
    "sytrd": (1, _sytrd), "hetrd": (1, _sytrd), "trsm": (2, _trsm), "gtsv": (4, _gtsv),
}
#: routine -> the aliases JAX's lowering gives its calls, ``{result: operand}``: the kernel copies
#: the operand to the result when they are not one buffer, and works in place when they are. Any
#: other alias makes it overwrite an operand it still reads (``trsm``'s result over ``a``).
ALIASES: Final[dict[str, dict[int, int]]] = {
    "ormqr": {0: 2}, "unmqr": {0: 2}, "trsm": {0: 1}, "gtsv": {0: 0, 1: 1, 2: 2, 3: 3}, "geev": {},
    **{r: {0: 0} for r in ("potrf", "getrf", "geqrf", "orgqr", "ungqr", "syevd", "heevd", "gesdd", "gesvd",
                           "gees", "gehrd", "sytrd", "hetrd")},
}
_REAL_ONLY: Final = frozenset({"orgqr", "ormqr", "syevd", "sytrd"})
_COMPLEX_ONLY: Final = frozenset({"ungqr", "unmqr", "heevd", "hetrd"})
_PERTURBED: Final = "tridiagonal_solve_perturbed_ffi"
#: jaxlib's other CPU kernels (``jaxlib.cpu._sparse``, registered when JAX's sparse module is
#: imported in the process): no contract, so refused (a CSR matrix's indices are read as given).
UNCHECKED_KERNELS: Final = frozenset({"cpu_csr_sparse_dense_ffi"})
#: jaxlib's element-wise special-function kernels (``jaxlib.cpu._math``, jaxlib 0.12.1+; JAX 0.12.1
#: lowers ``gammaln`` / ``digamma`` to them on the CPU): one float array in, the same shape and type
#: out, row-major (the kernel walks the operand's elements and writes as many).
ELEMENTWISE_KERNELS: Final = frozenset({"cpu_lgamma_ffi", "cpu_digamma_ffi"})
_ELEMENTWISE_TYPES: Final = frozenset({PrimitiveType.F16, PrimitiveType.BF16, PrimitiveType.F32, PrimitiveType.F64})


def is_lapack_target(target: str) -> bool:
    """A name jaxlib's CPU kernel modules register, or could (``lapack_*``, the perturbed
    tridiagonal solve, :data:`ELEMENTWISE_KERNELS`, :data:`UNCHECKED_KERNELS`)."""
    return (target.startswith("lapack_") or target == _PERTURBED or target in UNCHECKED_KERNELS
            or target in ELEMENTWISE_KERNELS)


def _elementwise(c: _Call) -> Expected:
    dims = tuple(c.operands[0].dimensions())
    return [(c.et, dims)], [(c.et, dims)]


def _show(et: PrimitiveType, dims: Dims) -> str:
    return str(Shape.array_shape(et, list(dims)))


def _routine(
    op: str, target: str, operands: Sequence[Shape],
) -> tuple[PrimitiveType, int, Callable[[_Call], Expected], str]:
    if target in UNCHECKED_KERNELS:
        shape_error(op, f"call_target_name {target!r} is a jaxlib CPU kernel xlasdk has no shape contract for (it "
                    "trusts the shapes and indices a module gives it); it cannot be called from here")
    if target in ELEMENTWISE_KERNELS:
        et = operands[0].element_type() if operands and operands[0].is_array() else None
        if et not in _ELEMENTWISE_TYPES:
            got = ", ".join(str(o) for o in operands)
            dtype_error(op, f"target {target!r} needs an f16, bf16, f32 or f64 operand, got ({got})")
        assert et is not None
        return et, 1, _elementwise, ""
    if target == _PERTURBED:
        x = operands[0] if operands and operands[0].is_array() else None
        et = x.element_type() if x is not None else None
        if et not in _REAL:
            got = ", ".join(str(o) for o in operands)
            dtype_error(op, f"target {target!r} needs f32, f64, c64 or c128 operands, got ({got})")
        assert et is not None
        return et, 4, _tridiagonal_solve_perturbed, ""
    name = target[len("lapack_"):]
    routine = name[1:-len("_ffi")] if name.endswith("_ffi") else ""
    if (not routine or name[0] not in _ETYPE or routine not in ROUTINES
            or (routine in _REAL_ONLY and name[0] in "cz") or (routine in _COMPLEX_ONLY and name[0] in "sd")):
        shape_error(
            op, f"call_target_name {target!r} is a jaxlib LAPACK kernel name xlasdk has no shape contract for "
            "(the kernel trusts the shapes a module claims, and reads or writes outside its buffers when they "
            "lie); the targets with a contract are lapack_<s|d|c|z><routine>_ffi for the routines "
            f"{', '.join(sorted(ROUTINES))}, and {_PERTURBED}",
        )
    n, contract = ROUTINES[routine]
    return _ETYPE[name[0]], n, contract, routine


def _layout(rank: int, matrix: bool) -> tuple[int, ...]:
    """The layout (minor to major) the kernels read: a matrix column-major over major batch
    dimensions, anything else row-major."""
    return (rank - 2, rank - 1, *range(rank - 3, -1, -1)) if matrix else tuple(range(rank - 1, -1, -1))


def lapack_check(op: str, target: str, operands: Sequence[Shape], result: Shape,
                 config: Mapping[str, Any] | None,
                 layouts: tuple[Sequence[Sequence[int]], Sequence[Sequence[int]]] | None,
                 aliases: Sequence[Alias] = ()) -> None:
    """The shape contract of jaxlib's LAPACK target ``target`` (``is_lapack_target``): ShapeError /
    DTypeError when the operands, ``result``, the attributes (``config``, the typed-FFI
    ``backend_config``) or the layouts (``(operand_layouts, result_layouts)`` minor to major, or
    None when the call has none: XLA's default row-major, which the kernels would read transposed)
    are not what the kernel reads and writes, or an alias of ``aliases`` is not one of
    :data:`ALIASES`."""
    et, count, contract, routine = _routine(op, target, operands)
    if len(operands) != count or not all(o.is_array() for o in operands):
        got = ", ".join(str(o) for o in operands)
        shape_error(op, f"target {target!r} takes {count} array operand{'s' * (count > 1)}, got ({got})")
    leaves = list(result.tuple_shapes()) if result.is_tuple() else [result]
    for s in (*operands, *leaves):
        if s.is_array() and any(s.is_dynamic_dimension(i) for i in range(s.rank())):
            shape_error(op, f"target {target!r} takes static shapes (its kernel reads the buffers' sizes, not the "
                        f"bounds a module claims), got {s}")
    for i, o in enumerate(operands):
        if o.element_type() is not et:
            dtype_error(op, f"target {target!r} takes {et.name.lower()} operands, got operand {i} of shape {o}")
    call = _Call(op, target, et, operands, config)
    want_operands, want_results = contract(call)
    got_operands = [(o.element_type(), tuple(o.dimensions())) for o in operands]
    got_results = [(r.element_type(), tuple(r.dimensions())) if r.is_array() else None for r in leaves]
    if got_operands != want_operands:
        want = ", ".join(_show(*w) for w in want_operands)
        call.fail(f"takes ({want}) here, got ({', '.join(str(o) for o in operands)})")
    if got_results != want_results:
        want = ", ".join(_show(*w) for w in want_results)
        shown = f"({want})" if len(want_results) > 1 else want
        call.fail(f"on {', '.join(str(o) for o in operands)} returns {shown}, got shape {result}")
    allowed = ALIASES.get(routine, {})
    for out_index, operand_index, operand_tuple in aliases:
        result_index = out_index[0] if len(out_index) == 1 else (0 if not out_index and len(leaves) == 1 else -1)
        if operand_tuple or allowed.get(result_index) != operand_index:
            want = ", ".join(f"result {r} over operand {o}" for r, o in allowed.items()) or "none"
            call.fail(f"takes no output_operand_aliases but its own ({want}); got result {list(out_index)} over "
                      f"operand {operand_index} {list(operand_tuple)} (the kernel would overwrite an operand it reads)")
    nb = len(want_operands[-1 if count == 4 else 0][1]) - 2  # the batch: a's (b's for the tridiagonal solves)
    if layouts is None and target in ELEMENTWISE_KERNELS:
        return  # XLA's default layout: row-major, as the kernel reads
    if layouts is None:
        call.fail("needs operand_layouts and result_layouts with column-major matrices (its kernel reads them "
                  "column-major; XLA's default row-major layout would be read transposed)")
    for kind, shapes, lays in (("operand", want_operands, layouts[0]), ("result", want_results, layouts[1])):
        if len(lays) != len(shapes):
            call.fail(f"has {len(lays)} {kind}_layouts for {len(shapes)} {kind}s")
        for i, ((_, dims), lay) in enumerate(zip(shapes, lays, strict=True)):
            want_lay = _layout(len(dims), len(dims) == nb + 2 and target not in ELEMENTWISE_KERNELS)
            if tuple(int(v) for v in lay) != want_lay:
                call.fail(f"needs {kind} {i} in layout {{{','.join(map(str, want_lay))}}} (matrices column-major, "
                          f"the rest row-major), got {{{','.join(str(int(v)) for v in lay)}}}")
