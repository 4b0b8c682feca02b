"""``XlaBuilder`` and ``XlaOp``: a computation graph built op by op.

An :class:`XlaOp` is a node of the graph: its result :class:`~xlasdk.shape.Shape` is computed
by the op's shape rule in Python when the op is built, before anything reaches MLIR or XLA.
:meth:`XlaBuilder.build` turns the graph reachable from a root into an
:class:`~xlasdk.program.computation.XlaComputation` (a StableHLO module; HLO on demand).

The graph is plain Python; the only text form produced here is StableHLO in MLIR's generic
syntax (see :mod:`xlasdk._emit`), so building needs no MLIR context and no jaxlib call.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ._graph import Computation, Graph, ModuleContext, Region
from ._metadata import FIELDS, INT_FIELDS, Location, file_line_location, op_location
from ._mlir_attrs import SpelledAttr
from ._optable import PARAMETER, OpDef
from ._where import PKG_DIR as _PKG_DIR
from ._where import user_frame, where
from .attrs import OpMetadata
from .errors import DTypeError, ShapeError
from .shape import MAX_ARRAY_BYTES, ProgramShape, Shape
from .sharding import HloSharding
from .sharding._spmd import sharding_for_shape

if TYPE_CHECKING:
    from .program.computation import XlaComputation
    from .sharding import ShardingLike

__all__ = ["XlaBuilder", "XlaOp", "Region", "Graph", "ModuleContext", "Computation", "user_frame", "where"]

_UNKNOWN_LOC = Location("loc(unknown)", {}, "")
_NO_ATTRS: dict[str, Any] = {}  # the attributes of every op built without any (never changed in place)
_IDS = itertools.count(1)  # op ids are unique across builders (regions nest builders)


class XlaOp:
    """The value of one operation of an :class:`XlaBuilder`.

    Attributes
    ----------
    builder: the builder that owns the op.
    shape: the result :class:`Shape`, known as soon as the op is built.
    attrs: the op's attributes as the emitter writes them: a built op's typed values, a loaded
        op's as the module spelled them; :meth:`attr` reads either as a typed value.

    Python operators map to XLA ops: ``+ - * / % ** @`` to Add, Sub, Mul, Div, Rem, Pow, Dot,
    unary ``-`` to Neg and ``abs()`` to Abs; a Python scalar on one side becomes a constant of
    the other side's dtype. Comparisons are not overloaded (use ``ops.Lt`` and friends), so that
    XlaOps stay hashable.
    """

    __slots__ = ("builder", "shape", "opdef", "operands", "attrs", "regions", "loc", "id", "extra")

    def __init__(
        self,
        builder: XlaBuilder,
        opdef: OpDef,
        operands: tuple[XlaOp, ...],
        shape: Shape,
        attrs: dict[str, Any],
        regions: tuple[Region, ...],
        loc: Location,
        extra: Any,
    ) -> None:
        self.builder = builder
        self.opdef = opdef
        self.operands = operands
        self.shape = shape
        self.attrs = attrs
        self.regions = regions
        self.loc = loc
        self.extra = extra
        self.id = builder._next_id()

    @property
    def opcode(self) -> str:
        """The StableHLO/CHLO op name (``stablehlo.add``) or graph pseudo-op (``parameter``)."""
        return self.opdef.name

    def attr(self, name: str, default: Any = None) -> Any:
        """Attribute ``name`` of the op as a typed value; ``default`` when the op has none.

        One form for built and loaded ops: a built op's value as its wrapper stored it; a loaded
        op's read once from the module's spelling, an attribute its op's row declares
        (:attr:`OpDef.attrs <xlasdk._optable.OpDef.attrs>`) into the value a built op holds
        (:class:`~xlasdk.attrs.DotDimensionNumbers`, :class:`~xlasdk.attrs.ComparisonDirection`, a
        tuple of ints for ``array<i64: ...>``...), another as the MLIR bindings read it (``str``,
        ``int``, a dict...).

        Raises
        ------
        GraphImportError
            A loaded op's declared attribute whose spelling does not fit its kind (the message
            names the op and the attribute).
        """
        v = self.attrs.get(name)
        if isinstance(v, SpelledAttr):
            v = v.typed(self, name)
        return default if v is None else v

    # -- Pythonic views of the shape ---------------------------------------------------------
    @property
    def dtype(self) -> np.dtype[Any]:
        """numpy dtype of the result (raises DTypeError for tuple and token results)."""
        return self.shape.numpy_dtype()

    @property
    def dims(self) -> tuple[int, ...]:
        return self.shape.dimensions()

    @property
    def sharding(self) -> HloSharding | None:
        """The sharding the op was built with (``XlaBuilder.set_sharding``), or None."""
        return self.builder._op_shardings.get(self.id)

    @property
    def ndim(self) -> int:
        return len(self.shape.dimensions())

    def __repr__(self) -> str:
        kind = self.opcode.rsplit(".", 1)[-1]
        return f"XlaOp({kind}: {self.shape}, builder={self.builder.name!r})"

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __bool__(self) -> bool:
        raise DTypeError(
            "XlaOp has no truth value (its value exists only when the program runs): use ops.Select or "
            f"ops.Conditional for data-dependent choices{where()}"
        )

    # Python's ordering operators do not build ops (== and != compare the nodes themselves, so
    # XlaOps can be dict keys); the error says which op to write.
    def __lt__(self, other: Any) -> XlaOp:
        raise DTypeError(f"XlaOp < ...: Python comparisons do not build ops; write ops.Lt(x, y){where()}")

    def __le__(self, other: Any) -> XlaOp:
        raise DTypeError(f"XlaOp <= ...: Python comparisons do not build ops; write ops.Le(x, y){where()}")

    def __gt__(self, other: Any) -> XlaOp:
        raise DTypeError(f"XlaOp > ...: Python comparisons do not build ops; write ops.Gt(x, y){where()}")

    def __ge__(self, other: Any) -> XlaOp:
        raise DTypeError(f"XlaOp >= ...: Python comparisons do not build ops; write ops.Ge(x, y){where()}")

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """numpy's arithmetic operators with an XlaOp (``np.float32(2) * x``, ``array + x``) build
        the same op as Python's; any other numpy function on an XlaOp is a :class:`DTypeError`
        naming the op to write instead (``np.exp(x)``: ``ops.Exp(x)``)."""
        name = getattr(ufunc, "__name__", str(ufunc))
        if method == "__call__" and not kwargs and name in _UFUNC_OPERATORS:
            return getattr(_ew(), _UFUNC_OPERATORS[name])(*inputs)
        hint = _UFUNC_HINTS.get(name) or _UFUNC_OPERATORS.get(name)
        if method in ("reduce", "accumulate", "reduceat"):
            instead = "ops.Reduce(...) (or ops.ReduceWindow / ops.CumSum-style loops) with that computation"
        elif hint:
            instead = f"ops.{hint}(...)"
        else:
            instead = "the ops.* function of XLA's operation semantics"
        raise DTypeError(
            f"numpy.{name}{'' if method == '__call__' else '.' + method} cannot take an XlaOp (numpy computes on "
            f"arrays, an XlaOp is a node of a program being built); write {instead}{where()}"
        )

    # -- operators (implemented in ops.elementwise) ------------------------------------------
    def __add__(self, other: Any) -> XlaOp:
        return cast(XlaOp, _ew().Add(self, other))

    def __radd__(self, other: Any) -> XlaOp:
        return cast(XlaOp, _ew().Add(other, self))

    def __sub__(self, other: Any) -> XlaOp:
        return cast(XlaOp, _ew().Sub(self, other))

    def __rsub__(self, other: Any) -> XlaOp:
        return cast(XlaOp, _ew().Sub(other, self))

    def __mul__(self, other: Any) -> XlaOp:
        return cast(XlaOp, _ew().Mul(self, other))

    def __rmul__(self, other: Any) -> XlaOp:
        return cast(XlaOp, _ew().Mul(other, self))

    def __truediv__(self, other: Any) -> XlaOp:
        return cast(XlaOp, _ew().Div(self, other))

    def __rtruediv__(self, other: Any) -> XlaOp:
        return cast(XlaOp, _ew().Div(other, self))

    def __mod__(self, other: Any) -> XlaOp:
        return cast(XlaOp, _ew().Rem(self, other))

    def __rmod__(self, other: Any) -> XlaOp:
        return cast(XlaOp, _ew().Rem(other, self))

    def __pow__(self, other: Any) -> XlaOp:
        return cast(XlaOp, _ew().Pow(self, other))

    def __rpow__(self, other: Any) -> XlaOp:
        return cast(XlaOp, _ew().Pow(other, self))

    def __matmul__(self, other: XlaOp) -> XlaOp:
        from .ops import linalg  # ops build on this module: imported when an operator is used

        return linalg.Dot(self, other)

    def __neg__(self) -> XlaOp:
        return cast(XlaOp, _ew().Neg(self))

    def __abs__(self) -> XlaOp:
        return cast(XlaOp, _ew().Abs(self))

    def __and__(self, other: Any) -> XlaOp:
        return cast(XlaOp, _ew().And(self, other))

    def __or__(self, other: Any) -> XlaOp:
        return cast(XlaOp, _ew().Or(self, other))

    def __xor__(self, other: Any) -> XlaOp:
        return cast(XlaOp, _ew().Xor(self, other))

    def __rand__(self, other: Any) -> XlaOp:
        return cast(XlaOp, _ew().And(other, self))

    def __ror__(self, other: Any) -> XlaOp:
        return cast(XlaOp, _ew().Or(other, self))

    def __rxor__(self, other: Any) -> XlaOp:
        return cast(XlaOp, _ew().Xor(other, self))

    def __invert__(self) -> XlaOp:
        return cast(XlaOp, _ew().Not(self))


_EW: Any = None


# numpy ufuncs that are Python operators on XlaOps: built as the same op.
_UFUNC_OPERATORS = {
    "add": "Add", "subtract": "Sub", "multiply": "Mul", "true_divide": "Div", "divide": "Div",
    "remainder": "Rem", "power": "Pow", "bitwise_and": "And", "bitwise_or": "Or", "bitwise_xor": "Xor",
    "negative": "Neg", "absolute": "Abs",
}
# Other ufuncs: the op to write instead (named in the error).
_UFUNC_HINTS = {
    "exp": "Exp", "exp2": "Exp2", "expm1": "Expm1", "log": "Log", "log1p": "Log1p", "sqrt": "Sqrt",
    "cbrt": "Cbrt", "sin": "Sin", "cos": "Cos", "tan": "Tan", "tanh": "Tanh", "arctan2": "Atan2",
    "maximum": "Max", "minimum": "Min", "fmax": "Max", "fmin": "Min", "greater": "Gt", "greater_equal": "Ge",
    "less": "Lt", "less_equal": "Le", "equal": "Eq", "not_equal": "Ne", "floor": "Floor", "ceil": "Ceil",
    "sign": "Sign", "rint": "RoundNearestEven", "logical_not": "Not", "invert": "Not", "isfinite": "IsFinite",
    "left_shift": "ShiftLeft", "right_shift": "ShiftRightArithmetic", "logical_and": "And", "logical_or": "Or",
    "logical_xor": "Xor", "matmul": "Dot", "square": "Mul", "reciprocal": "Div", "conjugate": "Conj",
    "real": "Real", "imag": "Imag", "isnan": "Ne",
}


def _ew() -> Any:
    global _EW
    if _EW is None:
        from .ops import elementwise  # ops build on this module: imported when an operator is used

        _EW = elementwise
    return _EW


class XlaBuilder:
    """Builds one computation op by op.

    ``b = XlaBuilder("name")``; add ops with the functions of :mod:`xlasdk.ops` (each takes the
    builder or an operand of it); ``b.build(root)`` returns the
    :class:`~xlasdk.program.computation.XlaComputation`. A builder may be used by one thread at a time.
    """

    def __init__(self, name: str = "xla_computation") -> None:
        if not isinstance(name, str):
            raise DTypeError(f"XlaBuilder: name must be a non-empty str, got {type(name).__name__} {name!r}{where()}")
        if not name:
            raise ShapeError(f"XlaBuilder: name must be a non-empty str, got ''{where()}")
        self.name = name
        self._count = 0
        self._params: dict[int, XlaOp] = {}
        self._last: XlaOp | None = None
        self._metadata: OpMetadata | None = None
        self._metadata_loc: Location | None = None  # the location of every op, when the metadata has a file
        self._metadata_fields: dict[str, Any] = {}  # metadata fields added to each caller-line location
        self._sharding: HloSharding | None = None
        self._op_shardings: dict[int, HloSharding] = {}  # op id -> sharding, for ops built under one
        self._loc_cache: dict[tuple[str, int], Location] = {}
        self._side_effects: list[XlaOp] = []
        self._nbytes = 0  # bytes of every array built, regions included (checked by build)
        self._imported: Any = None  # program.graph_edit._Rewrite of a builder made by from_computation

    def _next_id(self) -> int:
        self._count += 1
        return next(_IDS)

    def __repr__(self) -> str:
        return f"XlaBuilder({self.name!r}, {self._count} ops)"

    # -- locations / metadata ----------------------------------------------------------------
    def _location(self) -> Location:
        """Location of the op being built: the builder's metadata and/or the user's line."""
        f: Any = sys._getframe(2)
        while f is not None and f.f_code.co_filename.startswith(_PKG_DIR):
            f = f.f_back
        if f is None:
            return _UNKNOWN_LOC
        key = (f.f_code.co_filename, f.f_lineno)
        loc = self._loc_cache.get(key)
        if loc is None:
            if self._metadata_fields:
                loc = op_location(**self._metadata_fields, source_file=key[0], source_line=key[1])
            else:
                loc = file_line_location(key[0], key[1])
            self._loc_cache[key] = loc
        return loc

    def set_op_metadata(self, metadata: OpMetadata) -> None:
        """Attach ``metadata`` to every op built from now on.

        Every field of ``xs.OpMetadata`` is kept, and shows in ``as_hlo_text()`` and
        ``as_serialized_hlo_module_proto()`` as XLA's ``OpMetadata``: ``op_type``, ``op_name``
        (XLA also names the instruction after its last ``/`` component), ``source_file``,
        ``source_line``, ``source_end_line``, ``source_column``, ``source_end_column``,
        ``deduplicated_name``, ``scheduling_name``. They live in the op's StableHLO location
        (see :meth:`xs.OpMetadata.to_mlir_location <xlasdk.OpMetadata.to_mlir_location>`), so
        saved ``.mlir`` / ``.mlirbc`` files keep them too.

        ``source_file`` and the line and column numbers replace the caller's line when
        ``source_file`` is set; when it is empty, each op records its own caller's file and
        line instead (and the numbers are not used). A zero ``source_end_line`` /
        ``source_end_column`` means the same as the start (as in MLIR file locations).

        Raises
        ------
        DTypeError: ``metadata`` is not an ``xs.OpMetadata``, or a string field is not a str.
        ShapeError: a line or column number is not an int in ``[0, 2**31)``, or
            ``scheduling_name`` holds a quote, backslash or control character (XLA's HLO printer
            writes it unescaped, so such a name would not read back).
        """
        if not isinstance(metadata, OpMetadata):
            raise DTypeError(f"set_op_metadata: expected an xs.OpMetadata, got {type(metadata).__name__}{where()}")
        fields: dict[str, Any] = {}
        for f in FIELDS:
            v = getattr(metadata, f)
            if f in INT_FIELDS:
                if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < 2**31:
                    raise ShapeError(
                        f"set_op_metadata: {f} must be an int in [0, 2**31) (HLO holds an int32), got {v!r}{where()}"
                    )
                fields[f] = int(v)
            else:
                if v is None:
                    v = ""
                if not isinstance(v, str):
                    raise DTypeError(f"set_op_metadata: {f} must be a str, got {type(v).__name__} {v!r}{where()}")
                if f == "scheduling_name" and any(c in '"\\' or c < " " or c == "\x7f" for c in v):
                    raise ShapeError(
                        f"set_op_metadata: scheduling_name must not hold quotes, backslashes or control characters "
                        f"(XLA writes it unescaped in HLO text), got {v!r}{where()}"
                    )
                fields[f] = v
        self._metadata = metadata
        self._loc_cache = {}
        if fields["source_file"]:
            self._metadata_loc = op_location(**fields)
        else:
            self._metadata_loc = None
        self._metadata_fields = {
            k: v for k, v in fields.items() if v and k not in INT_FIELDS and k != "source_file"
        }

    def clear_op_metadata(self) -> None:
        """Go back to recording only the caller's file and line on each op."""
        self._metadata = None
        self._metadata_loc = None
        self._metadata_fields = {}
        self._loc_cache = {}

    def get_op_metadata(self) -> OpMetadata | None:
        return self._metadata

    def op_metadata(
        self,
        op_name: str = "",
        op_type: str = "",
        source_file: str | None = None,
        source_line: int | None = None,
        *,
        source_end_line: int = 0,
        source_column: int = 0,
        source_end_column: int = 0,
        deduplicated_name: str = "",
        scheduling_name: str = "",
        **unknown: Any,
    ) -> contextlib.AbstractContextManager[None]:
        """Context manager: ops built inside carry this metadata (see :meth:`set_op_metadata`).

        With ``source_file`` None (the default) each op keeps its own caller line and gains the
        other fields. The previous metadata is restored on exit.

        Raises
        ------
        DTypeError
            For a keyword that is not a field of XLA's ``OpMetadata`` (``name=``: write ``op_name=``).
        """
        if unknown:
            fields = "op_name, op_type, source_file, source_line, source_end_line, source_column, " \
                "source_end_column, deduplicated_name, scheduling_name"
            hint = " (did you mean op_name=?)" if "name" in unknown else ""
            raise DTypeError(
                f"op_metadata: unknown field(s) {', '.join(sorted(unknown))}{hint}; the fields of XLA's "
                f"OpMetadata are {fields}{where()}"
            )
        md = OpMetadata(
            op_type=op_type,
            op_name=op_name,
            source_file=source_file or "",
            source_line=source_line or 0,
            source_end_line=source_end_line,
            source_column=source_column,
            source_end_column=source_end_column,
            deduplicated_name=deduplicated_name,
            scheduling_name=scheduling_name,
        )
        return self._metadata_scope(md)

    @contextlib.contextmanager
    def _metadata_scope(self, md: OpMetadata) -> Iterator[None]:
        prev = self._metadata
        self.set_op_metadata(md)
        try:
            yield
        finally:
            if prev is None:
                self.clear_op_metadata()
            else:
                self.set_op_metadata(prev)

    def set_sharding(self, sharding: ShardingLike | None) -> None:
        """Attach ``sharding`` to the ops built from now on (their ``mhlo.sharding`` attribute;
        ``sharding={...}`` in HLO text).

        A Parameter built under it takes it as the argument's sharding, an op as its result's
        (XLA's SPMD partitioner keeps it), and the root op of :meth:`build` gives the program's
        result sharding. Compile with ``xs.CompileOptions(num_partitions=N)`` to partition.

        Parameters
        ----------
        sharding:
            An ``xs.HloSharding``, an ``xs.OpSharding`` or XLA's notation
            (``"{devices=[2,1]0,1}"``, ``"{replicated}"``...); None clears it.

        Scalar ops built under a tiled sharding (the constants Python operators make, such as
        the ``2.0`` of ``x * 2.0``) are left without one: a scalar has nothing to split.
        Ops with a tuple result take a tuple sharding with one element per result, or a single
        sharding that applies to every result.

        Raises
        ------
        ShapeError
            For text that is not a sharding or fields that describe no valid sharding; later,
            from the op itself, for an op whose rank the tiled sharding does not fit.
        DTypeError
            For a value that is not a sharding.
        """
        if sharding is None:
            self._sharding = None
            return
        try:
            self._sharding = HloSharding.of(sharding)
        except (ShapeError, DTypeError) as e:
            raise type(e)(f"set_sharding: {e}{where()}") from None

    def clear_sharding(self) -> None:
        """Build the next ops without a sharding."""
        self._sharding = None

    def get_sharding(self) -> HloSharding | None:
        """The sharding ops are built with now (None when there is none)."""
        return self._sharding

    @contextlib.contextmanager
    def sharding(self, sharding: ShardingLike | None) -> Iterator[None]:
        """Context manager: the ops built inside carry ``sharding`` (see :meth:`set_sharding`);
        the previous sharding is restored on exit::

            with b.sharding("{devices=[4,1]<=[4]}"):
                x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (8, 16)), "x")
        """
        prev = self._sharding
        self.set_sharding(sharding)
        try:
            yield
        finally:
            self._sharding = prev

    # -- graph -------------------------------------------------------------------------------
    def add_op(
        self,
        opdef: OpDef,
        operands: tuple[XlaOp, ...],
        shape: Shape,
        attrs: dict[str, Any] | None = None,
        regions: tuple[Region, ...] = (),
        extra: Any = None,
    ) -> XlaOp:
        """Append one node to the graph: how every op family builds its ops.

        Op wrappers (:mod:`xlasdk.ops`) check their arguments and compute ``shape`` with the op's
        shape rule first; this records the node as it is, without checks of its own.

        Parameters
        ----------
        opdef: the op's row of the op table (:mod:`xlasdk._optable`), defined by its family.
        operands: the operand nodes, in the op's order (all of this builder).
        shape: the result shape (a tuple shape for several results).
        attrs: the op's attributes as typed values, by their StableHLO names
            (``{"dimensions": (0,)}``; see :mod:`xlasdk._mlir_attrs` for the value kinds).
        regions: the op's sub-computations (reducer, comparator, loop body, branches).
        extra: data of graph-level ops (a parameter's number and name, a tuple index, a host
            callback) that is not an attribute.

        Returns the new node. The node records the caller's file and line (or the builder's
        metadata), the builder's sharding when one is set (``mhlo.sharding``), and is kept in
        the computation even when unused if the op has side effects.
        """
        if type(shape) is not Shape:  # xla_client.Shape (element_type() a dtype): ops hold xs.Shape
            shape = shape._plain()
        if attrs is None:
            attrs = _NO_ATTRS
        loc = self._metadata_loc if self._metadata_loc is not None else self._location()
        op = XlaOp(self, opdef, operands, shape, attrs, regions, loc, extra)
        if self._sharding is not None:
            self._shard(op)
        self._last = op
        self._nbytes += shape._heap_bytes()
        for region in regions:
            if region.results:  # the sub-computation's arrays are buffers of this computation too
                self._nbytes += getattr(region.results[0].builder, "_nbytes", 0)
        if opdef.side_effect or (attrs and attrs.get("has_side_effect") is True):
            self._side_effects.append(op)  # kept in the computation even if the root does not use it
        return op

    def add_imported(
        self,
        opdef: OpDef,
        operands: tuple[XlaOp, ...],
        shape: Shape,
        attrs: dict[str, Any],
        regions: tuple[Region, ...],
        loc: Location,
        extra: Any = None,
    ) -> XlaOp:
        """Add a node read from a module (:mod:`xlasdk.program.graph_import`): with the location,
        attributes and regions the module gave it, no shape rule run, and no builder state
        (metadata, sharding, side-effect list) applied. A ``parameter`` node (``extra`` is
        ``(number, name)``) becomes parameter ``number``. Its arrays count towards
        :meth:`build`'s size limit."""
        op = XlaOp(self, opdef, operands, shape, attrs, regions, loc, extra)
        self._nbytes += shape._heap_bytes()
        if opdef is PARAMETER:
            self._params[extra[0]] = op
        return op

    def side_effects(self) -> list[XlaOp]:
        """The ops kept for their side effects (kept in the computation even when unused), in build order."""
        return list(self._side_effects)

    def _shard(self, op: XlaOp) -> None:
        """Give ``op``, built under :meth:`set_sharding`, its ``mhlo.sharding`` (if its shape takes one)."""
        assert self._sharding is not None
        sharding = sharding_for_shape(self._sharding, op.shape, op.opcode)
        if sharding is not None:
            op.attrs = {**op.attrs, "mhlo.sharding": sharding}  # attrs dicts are never changed in place
            self._op_shardings[op.id] = sharding

    def _add_parameter(self, number: int, shape: Shape, name: str) -> XlaOp:
        if number in self._params:
            raise ShapeError(
                f"Parameter: parameter number {number} is already used by builder {self.name!r}{where()}"
            )
        op = self.add_op(PARAMETER, (), shape, extra=(number, name))
        self._params[number] = op
        return op

    def parameters(self) -> list[XlaOp]:
        """The Parameter ops in parameter-number order."""
        return [self._params[k] for k in sorted(self._params)]

    def get_shape(self, op: XlaOp) -> Shape:
        """The result shape of ``op`` (same as ``op.shape``)."""
        self._check_own(op, "get_shape")
        return op.shape

    def _check_own(self, op: Any, what: str) -> None:
        if not isinstance(op, XlaOp):
            raise DTypeError(f"{what}: expected an XlaOp, got {type(op).__name__}{where()}")
        if op.builder is not self:
            raise ShapeError(
                f"{what}: op belongs to builder {op.builder.name!r}, not {self.name!r}{where()}"
            )

    def _program_shape(self, root: XlaOp) -> ProgramShape:
        params = self.parameters()
        nums = sorted(self._params)
        if nums != list(range(len(nums))):
            have = set(nums)
            missing: list[int] = []
            i = 0
            while len(missing) < 10 and i < nums[-1]:  # at most len(nums) + 10 steps, whatever the numbers
                if i not in have:
                    missing.append(i)
                i += 1
            more = ", ..." if i < nums[-1] else ""
            raise ShapeError(
                f"build: parameter numbers must be 0..{len(nums) - 1} without gaps; missing {missing}{more}{where()}"
            )
        return ProgramShape([p.shape for p in params], root.shape, [p.extra[1] or f"p{p.extra[0]}" for p in params])

    def get_program_shape(self, root: XlaOp | None = None) -> ProgramShape:
        """Parameter shapes and the shape of ``root`` (default: the last op built)."""
        r = self._root(root)
        return self._program_shape(r)

    def _root(self, root: XlaOp | Sequence[XlaOp] | None) -> XlaOp:
        if root is None:
            if self._last is None:
                raise ShapeError(f"build: builder {self.name!r} has no ops{where()}")
            return self._last
        if isinstance(root, (list, tuple)):
            from .ops.control import Tuple  # ops build on this module; the public op checks the list

            last = self._last
            tup = Tuple(self, list(root))
            self._last = last  # a root given as a list does not become the default root
            return tup
        self._check_own(root, "build")
        assert isinstance(root, XlaOp)
        return root

    # -- rewriting a computation -------------------------------------------------------------
    @classmethod
    def from_computation(cls, computation: XlaComputation) -> XlaBuilder:
        """A builder that holds a copy of ``computation``'s instruction graph, to rewrite it.

        Its parameters are the computation's; :meth:`instruction` gives the node of an
        instruction (named as ``computation.instructions()`` names them), on which ``ops.*``
        build new ops as usual; :meth:`replace` makes the program read a new value in place of an
        instruction's; :meth:`build` without a root gives the program with its original outputs
        (replacements applied), or with the outputs given. The module's other functions,
        attributes and shardings come along; the computation itself is not changed. Works for
        loaded and built computations alike; the result compiles in the worker process first,
        like a loaded one.

        Raises
        ------
        GraphImportError
            The module holds a construct the graph cannot (see ``computation.instructions()``).
        """
        if not isinstance(computation, Computation):
            raise DTypeError(
                f"XlaBuilder.from_computation: expected an XlaComputation (xs.load_computation(path) loads a file), "
                f"got {type(computation).__name__}{where()}"
            )
        return computation.to_builder()

    @contextlib.contextmanager
    def keeping_default_root(self) -> Iterator[None]:
        """Ops built inside do not change the default root of :meth:`build` (the last op built
        before): for rewrites that add nodes to a user's builder."""
        last = self._last
        try:
            yield
        finally:
            self._last = last

    def set_rewrite(self, rewrite: Any) -> None:
        """Make this builder the rewrite of an imported program (:mod:`xlasdk.program.graph_import`
        calls it for :meth:`from_computation`): :meth:`instruction`, :meth:`replace`,
        :meth:`outputs` and :meth:`build` then act on that program."""
        self._imported = rewrite

    def _rewrite(self, what: str) -> Any:
        if self._imported is None:
            raise ShapeError(f"{what}: builder {self.name!r} was not made by XlaBuilder.from_computation{where()}")
        return self._imported

    def instruction(self, name: str | int) -> XlaOp:
        """The node of the instruction ``name`` (or index) of the computation this builder was made
        from (:meth:`from_computation`); multi-result instructions give their tuple-shaped node,
        whose results ``ops.GetTupleElement`` reads.

        Raises
        ------
        XlaSdkError: no such instruction; ShapeError: not a builder made by ``from_computation``.
        """
        return self._rewrite("instruction").instruction(name)  # type: ignore[no-any-return]

    def outputs(self) -> list[XlaOp]:
        """The program's current outputs (the original ones, with :meth:`replace` applied)."""
        return list(self._rewrite("outputs").outputs)

    def replace(self, old: XlaOp, new: XlaOp) -> None:
        """Make every instruction of the original program that reads ``old`` read ``new`` instead
        (and an output that is ``old`` become ``new``). ``new`` may be built from ``old``
        (``b.replace(x, ops.Max(x, zero))``).

        Raises
        ------
        ShapeError
            ``new`` has another shape than ``old``, either is not of this builder, ``old`` is not an
            instruction of the original program, or ``new`` reads a value computed from ``old``'s
            users (the program would read itself).
        """
        self._rewrite("replace").replace(old, new)

    def build(self, root: XlaOp | Sequence[XlaOp] | None = None) -> XlaComputation:
        """Build the computation whose result is ``root``.

        Parameters
        ----------
        root: the result op (default: the last op built). A tuple-shaped root (for example an
            ``ops.Tuple``, or a list of ops) gives a computation with a tuple result, which runs
            as several outputs.

        ``build`` may be called again, after more ops or with another root: each call returns a
        new, independent computation of the ops built so far (unlike XLA's C++ builder, the
        builder stays usable), and computations built before are not changed.

        Raises
        ------
        ShapeError: no ops, ``root`` from another builder, gaps in parameter numbers, or arrays
        that add up to more than 2**62 bytes (``xs.shape.MAX_ARRAY_BYTES``; sub-computations
        included).
        """
        from .program.computation import XlaComputation  # computation is built from this module's graphs
        from .program.origin import Built  # a built computation's origin (program sits above: built on demand)

        if self._imported is not None:
            return self._imported.build(root)  # type: ignore[no-any-return]
        r = self._root(root)
        if self._nbytes > MAX_ARRAY_BYTES:
            raise ShapeError(
                f"build: the arrays of builder {self.name!r} add up to {self._nbytes} bytes (about "
                f"2**{self._nbytes.bit_length() - 1}); a computation may hold at most 2**62 bytes of arrays "
                f"(XLA places them all in one int64-addressed heap and aborts when it overflows){where()}"
            )
        graph = Graph(self.name, tuple(self.parameters()), r, tuple(self.side_effects()))
        return XlaComputation(self.name, self._program_shape(r), Built(graph, self._nbytes))

    def is_constant(self, op: XlaOp) -> bool:
        """True if ``op`` depends on no Parameter and no side-effecting or random op."""
        self._check_own(op, "is_constant")
        seen: dict[int, bool] = {}
        stack = [op]
        while stack:
            o = stack.pop()
            if o.id in seen:
                continue
            if not o.opdef.constant:
                return False
            seen[o.id] = True
            stack.extend(o.operands)
            for r in o.regions:
                stack.extend(r.bindings or ())
        return True
