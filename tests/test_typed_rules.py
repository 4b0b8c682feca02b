"""The reference evaluator's rules read the typed attribute values the builder stores (issue 34, step 1).

Each row of the op table declares its attributes' kinds (:attr:`xlasdk._optable.OpDef.attrs`), and
:meth:`Evaluator.attr <xlasdk.reference._walk.Evaluator.attr>` gives a rule the typed value of a
declared one (``ConvolutionDimensionNumbers``, ``ComparisonDirection``, ``I64Elements``...): a built
node's as stored, a loaded node's read by its kind's reader. So the same rules evaluate a built
computation's own nodes: here each program is evaluated on its built graph (``comp.graph()``) and on
the graph imported from its module (what :func:`xlasdk.evaluate` walks), bit for bit the same, and
both against numpy where the op is simple.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops
from xlasdk._mlir_attrs import F32, I32, UNIT, DenseElements, I64Elements
from xlasdk._optable import AttrKind
from xlasdk.attrs import (
    ComparisonDirection,
    ComparisonType,
    ConvolutionDimensionNumbers,
    DotDimensionNumbers,
    FftType,
    GatherDimensionNumbers,
    PrecisionConfig,
    RandomAlgorithm,
    RandomDistribution,
    ScatterDimensionNumbers,
    TriangularSolveOptions_Transpose,
)
from xlasdk.ops.collectives import ChannelHandle
from xlasdk.program.attr_kinds import MlirAttr, declared_kind
from xlasdk.reference._walk import Evaluator, UnsupportedOpError, dtype_of

RNG = np.random.default_rng(34)
Program = tuple[xs.XlaComputation, list[np.ndarray[Any, Any]], Callable[..., list[Any]] | None]


def _param(b: xs.XlaBuilder, i: int, dtype: Any, dims: tuple[int, ...]) -> xs.XlaOp:
    return ops.Parameter(b, i, xs.Shape.array_shape(np.dtype(dtype), dims))


def _normal(*dims: int, dtype: Any = np.float32) -> np.ndarray[Any, Any]:
    return RNG.standard_normal(dims).astype(dtype)


def _built_values(comp: xs.XlaComputation, *args: Any) -> list[np.ndarray[Any, Any]]:
    """The outputs of ``comp`` evaluated on its own built nodes (not on the imported module)."""
    g = comp.graph()
    assert g.context is None  # a built graph
    ev = Evaluator(comp)
    env = {id(p): np.asarray(a).astype(dtype_of(p.shape), copy=False) for p, a in zip(g.parameters, args, strict=True)}
    out = ev.run_graph([g.root], env)[0]
    return [np.asarray(v) for v in (out if isinstance(out, tuple) else (out,))]


# -- the programs: one per op family, with the attributes each kind has -----------------------------------------
def _conv() -> Program:
    b = xs.XlaBuilder("conv")
    x, w = _param(b, 0, np.float32, (2, 4, 7, 6)), _param(b, 1, np.float32, (6, 2, 3, 2))
    ops.ConvGeneralDilated(x, w, (1, 2), [(1, 0), (0, 1)], lhs_dilation=(2, 1), rhs_dilation=(1, 2),
                           feature_group_count=2, precision_config=PrecisionConfig(["HIGHEST", "HIGHEST"]))
    return b.build(), [_normal(2, 4, 7, 6), _normal(6, 2, 3, 2)], None


def _conv_nhwc_batch_groups() -> Program:
    b = xs.XlaBuilder("conv_bg")
    x, w = _param(b, 0, np.float32, (4, 5, 5, 3)), _param(b, 1, np.float32, (2, 2, 3, 4))
    ops.ConvGeneralDilated(x, w, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"), batch_group_count=2)
    return b.build(), [_normal(4, 5, 5, 3), _normal(2, 2, 3, 4)], None


def _dot() -> Program:
    b = xs.XlaBuilder("dot")
    x, y = _param(b, 0, np.float32, (3, 4, 5)), _param(b, 1, np.float32, (3, 5, 2))
    ops.DotGeneral(x, y, DotDimensionNumbers([2], [1], [0], [0]))
    return b.build(), [_normal(3, 4, 5), _normal(3, 5, 2)], lambda x, y: [np.einsum("bij,bjk->bik", x.astype(
        np.float64), y.astype(np.float64)).astype(np.float32)]


def _gather() -> Program:
    b = xs.XlaBuilder("gather")
    x, idx = _param(b, 0, np.float32, (5, 3)), _param(b, 1, np.int32, (4,))
    ops.Gather(x, idx, GatherDimensionNumbers(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                                              index_vector_dim=1), [1, 3])
    return b.build(), [_normal(5, 3), np.array([4, 0, 9, -2], np.int32)], lambda x, i: [x[np.clip(i, 0, 4)]]


def _scatter_add() -> Program:
    b = xs.XlaBuilder("scatter")
    x, idx, upd = _param(b, 0, np.int32, (5, 3)), _param(b, 1, np.int32, (4, 1)), _param(b, 2, np.int32, (4, 3))
    ops.Scatter(x, idx, upd, ops.Add, ScatterDimensionNumbers(update_window_dims=[1], inserted_window_dims=[0],
                                                              scatter_dims_to_operand_dims=[0], index_vector_dim=1))

    def oracle(x: Any, i: Any, u: Any) -> list[Any]:
        out = x.copy()
        for k, row in zip(i[:, 0], u, strict=True):
            if 0 <= k < 5:
                out[k] += row
        return [out]

    return b.build(), [RNG.integers(-9, 9, (5, 3)).astype(np.int32), np.array([[1], [1], [7], [4]], np.int32),
                       RNG.integers(-9, 9, (4, 3)).astype(np.int32)], oracle


_DIRECTIONS = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater,
               "GE": np.greater_equal}


def _compare() -> Program:
    b = xs.XlaBuilder("compare")
    x, y = _param(b, 0, np.float32, (6,)), _param(b, 1, np.float32, (6,))
    outs = [ops.Compare(x, y, d) for d in _DIRECTIONS]
    outs.append(ops.Compare(x, y, "LT", "TOTALORDER"))
    ops.Tuple(b, outs)

    def oracle(x: Any, y: Any) -> list[Any]:
        total = [np.array([(v.view(np.int32) ^ ((v.view(np.int32) >> 31) & 0x7FFFFFFF)) for v in a]) for a in (x, y)]
        return [fn(x, y) for fn in _DIRECTIONS.values()] + [total[0] < total[1]]

    xv = np.array([1, -0.0, np.nan, 2, 3, -1], np.float32)
    yv = np.array([1, 0.0, np.nan, 1, 4, np.nan], np.float32)
    return b.build(), [xv, yv], oracle


def _sort() -> Program:
    b = xs.XlaBuilder("sort")
    k, v = _param(b, 0, np.float32, (3, 6)), _param(b, 1, np.int32, (3, 6))
    ops.Sort(b, [k, v], 1, True)
    keys = RNG.integers(0, 3, (3, 6)).astype(np.float32)
    vals = np.arange(18, dtype=np.int32).reshape(3, 6)

    def oracle(k: Any, v: Any) -> list[Any]:
        order = np.argsort(k, axis=1, kind="stable")
        return [np.take_along_axis(k, order, 1), np.take_along_axis(v, order, 1)]

    return b.build(), [keys, vals], oracle


def _windows() -> Program:
    b = xs.XlaBuilder("windows")
    x = _param(b, 0, np.float32, (5, 6))
    z = ops.Constant(b, np.float32(0))
    ops.Tuple(b, [
        ops.ReduceWindow(x, z, ops.Add, (2, 3), (1, 2), [(1, 0), (0, 2)], base_dilations=(1, 2),
                         window_dilations=(2, 1)),
        ops.ReduceWindow(x, ops.Constant(b, np.float32(-np.inf)), ops.Max, (2, 2), (2, 2), "VALID"),
    ])
    return b.build(), [_normal(5, 6)], None


def _shaping() -> Program:
    b = xs.XlaBuilder("shaping")
    x = _param(b, 0, np.int32, (3, 4))
    pad = ops.Pad(x, ops.Constant(b, np.int32(-1)), [(1, -1, 1), (0, 2, 0)])
    sl = ops.Slice(x, [0, 1], [3, 4], [2, 2])
    tr = ops.Transpose(x, [1, 0])
    bc = ops.BroadcastInDim(ops.Slice(x, [0, 0], [1, 4], [1, 1]), [2, 1, 4], [1, 2])
    rv = ops.Rev(x, [0])
    cat = ops.ConcatInDim(b, [x, x], 1)
    io = ops.Iota(b, xs.Shape.array_shape(np.int32, (2, 3)), iota_dimension=1)
    const = ops.Constant(b, np.array([[7, -8, 9]], np.int32))
    ds = ops.DynamicSlice(x, [ops.Constant(b, np.int32(2)), ops.Constant(b, np.int32(1))], [2, 2])
    red = ops.Reduce(b, x, ops.Constant(b, np.int32(0)), ops.Add, [1])
    ops.Tuple(b, [pad, sl, tr, bc, rv, cat, io, const, ds, red, ops.GetDimensionSize(x, 1)])

    def oracle(x: Any) -> list[Any]:
        grown = np.full((5, 4), -1, np.int32)
        grown[::2] = x
        padded = np.concatenate([np.full((1, 4), -1, np.int32), grown[:-1]])
        padded = np.concatenate([padded, np.full((5, 2), -1, np.int32)], axis=1)
        return [padded, x[0:3:2, 1:4:2], x.T, np.broadcast_to(x[0], (2, 1, 4)), x[::-1],
                np.concatenate([x, x], 1), np.broadcast_to(np.arange(3, dtype=np.int32), (2, 3)),
                np.array([[7, -8, 9]], np.int32), x[1:3, 1:3], x.sum(1, dtype=np.int32), np.int32(4)]

    return b.build(), [RNG.integers(-50, 50, (3, 4)).astype(np.int32)], oracle


def _fft() -> Program:
    b = xs.XlaBuilder("fft")
    x = _param(b, 0, np.float32, (3, 8))
    c = _param(b, 1, np.complex64, (4,))
    ops.Tuple(b, [ops.Fft(x, "RFFT", [8]), ops.Fft(c, FftType.IFFT, [4])])
    return b.build(), [_normal(3, 8), (_normal(4) + 1j * _normal(4)).astype(np.complex64)], None


def _rng() -> Program:
    b = xs.XlaBuilder("rng")
    s = _param(b, 0, np.uint64, (2,))
    ops.RngBitGenerator("THREE_FRY", s, xs.Shape.array_shape(np.uint32, (2, 5)))
    return b.build(), [np.array([1, 2], np.uint64)], None


def _linalg() -> Program:
    b = xs.XlaBuilder("linalg")
    a, rhs = _param(b, 0, np.float64, (3, 3)), _param(b, 1, np.float64, (2, 3))
    ops.Tuple(b, [
        ops.TriangularSolve(a, rhs, left_side=False, lower=True, unit_diagonal=False, transpose_a="TRANSPOSE"),
        ops.TriangularSolve(a, ops.Transpose(rhs, [1, 0]), left_side=True, lower=False, unit_diagonal=True),
        ops.Cholesky(ops.Add(ops.Dot(a, ops.Transpose(a, [1, 0])), ops.Constant(b, np.eye(3) * 3)), lower=True),
    ])
    am = _normal(3, 3, dtype=np.float64) + 4 * np.eye(3)
    return b.build(), [am, _normal(2, 3, dtype=np.float64)], None


def _misc() -> Program:
    b = xs.XlaBuilder("misc")
    x = _param(b, 0, np.float32, (2, 3, 4))
    f = _param(b, 1, np.float32, (3,))
    ops.Tuple(b, [ops.ReducePrecision(x, 5, 10),
                  ops.BatchNormInference(x, f, f, f, ops.Abs(f), 1e-3, 1),
                  ops.Compare(ops.ConvertElementType(x, np.int32), ops.Constant(b, np.int32(0)), "GE")])
    return b.build(), [_normal(2, 3, 4) * 100, _normal(3)], None


PROGRAMS: dict[str, Callable[[], Program]] = {
    "conv": _conv, "conv_batch_groups": _conv_nhwc_batch_groups, "dot": _dot, "gather": _gather,
    "scatter_add": _scatter_add, "compare": _compare, "sort": _sort, "windows": _windows, "shaping": _shaping,
    "fft": _fft, "rng_bit_generator": _rng, "linalg": _linalg, "misc": _misc,
}


def _same(got: list[np.ndarray[Any, Any]], want: list[np.ndarray[Any, Any]]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g, w)
        assert g.tobytes() == w.tobytes(), (g, w)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_built_nodes_evaluate_as_the_loaded_module(name: str) -> None:
    comp, args, oracle = PROGRAMS[name]()
    built = _built_values(comp, *args)
    _same(built, xs.evaluate(comp, *args))
    if oracle is not None:
        want = oracle(*args)
        assert len(want) == len(built)
        for g, w in zip(built, want, strict=True):
            assert g.shape == np.shape(w)
            if g.dtype.kind in "iub":
                assert np.array_equal(g, w)
            else:
                np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_built_nodes_store_the_typed_values() -> None:
    """What the rules read of a built node is the value its wrapper stored: no reading, no copy."""
    comp, _, _ = _conv()
    conv = comp.graph().root
    ev = Evaluator(comp)
    for name in conv.attrs:
        assert ev.attr(conv, name) is conv.attrs[name]


# -- a loaded node's declared attributes read as the builder's typed values ----------------------------------------
_KIND_TYPES: dict[AttrKind, type] = {
    AttrKind.INT: int, AttrKind.I32: I32, AttrKind.BOOL: bool, AttrKind.INTS: tuple,
    AttrKind.I64_ELEMENTS: I64Elements, AttrKind.ELEMENTS: DenseElements, AttrKind.F32: F32,
    AttrKind.UNIT: type(UNIT), AttrKind.REPLICA_GROUPS: I64Elements, AttrKind.CHANNEL_HANDLE: ChannelHandle,
    AttrKind.COMPARISON_DIRECTION: ComparisonDirection, AttrKind.COMPARISON_TYPE: ComparisonType,
    AttrKind.FFT_TYPE: FftType, AttrKind.RNG_ALGORITHM: RandomAlgorithm,
    AttrKind.RNG_DISTRIBUTION: RandomDistribution, AttrKind.TRANSPOSE: TriangularSolveOptions_Transpose,
    AttrKind.DOT_DIMENSION_NUMBERS: DotDimensionNumbers, AttrKind.PRECISION_CONFIG: PrecisionConfig,
    AttrKind.CONV_DIMENSION_NUMBERS: ConvolutionDimensionNumbers,
    AttrKind.GATHER_DIMENSION_NUMBERS: GatherDimensionNumbers,
    AttrKind.SCATTER_DIMENSION_NUMBERS: ScatterDimensionNumbers,
}


def _collectives() -> xs.XlaComputation:
    b = xs.XlaBuilder("collectives")
    x = _param(b, 0, np.float32, (4,))
    ops.Tuple(b, [ops.AllReduce(x, ops.Add, [[0, 1]], channel_id=3, use_global_device_ids=True),
                  ops.RngUniform(ops.Constant(b, np.float32(0)), ops.Constant(b, np.float32(1)), x.shape)])
    return b.build()


def _nodes(comp: xs.XlaComputation) -> list[xs.XlaOp]:
    out, stack = [], [ins.op for ins in comp.instructions()]
    while stack:
        o = stack.pop()
        out.append(o)
        stack.extend(n for r in o.regions for n in r.results)
    return out


def _declared(comp: xs.XlaComputation) -> Iterator[tuple[xs.XlaOp, str, Any, AttrKind]]:
    """``(node, name, value, kind)`` of every attribute a row declares, on the program's nodes."""
    for o in _nodes(comp):
        for name, attr in o.attrs.items():
            kind = declared_kind(o, name)
            if kind is not None:
                yield o, name, attr, kind


def _loaded(comp: xs.XlaComputation) -> xs.XlaComputation:
    """The same program loaded from its StableHLO text (a built one is walked on its own nodes)."""
    return xs.XlaComputation.from_stablehlo(comp.as_stablehlo_text())


def test_loaded_nodes_read_each_declared_kind_typed() -> None:
    seen: set[AttrKind] = set()
    for comp in [_loaded(c) for c in [*(make()[0] for make in PROGRAMS.values()), _collectives()]]:
        ev = Evaluator(comp)
        for o, name, attr, kind in _declared(comp):
            assert isinstance(attr, MlirAttr)  # as the module spells it
            got = ev.attr(o, name)
            assert isinstance(got, _KIND_TYPES[kind]), (o.opcode, name, got)
            assert type(o.attr(name)) is type(got)
            seen.add(kind)
    assert seen == set(AttrKind)


def test_built_nodes_hold_each_declared_kind_as_the_wrapper_stored_it() -> None:
    # a built program is indexed by its emitter's record: the typed values, never re-read from the module
    seen: set[AttrKind] = set()
    for comp in [*(make()[0] for make in PROGRAMS.values()), _collectives()]:
        ev = Evaluator(comp)
        for o, name, attr, kind in _declared(comp):
            assert not isinstance(attr, MlirAttr), (o.opcode, name)
            assert ev.attr(o, name) is attr
            assert isinstance(attr, _KIND_TYPES[kind]), (o.opcode, name, attr)
            seen.add(kind)
    assert seen == set(AttrKind)


def test_a_loaded_convolution_from_hlo_text(tmp_path: Any) -> None:
    (tmp_path / "conv.hlo").write_text("""HloModule conv

ENTRY main {
  x = f32[1,5,5,2] parameter(0)
  w = f32[3,3,2,4] parameter(1)
  ROOT c = f32[1,3,3,4] convolution(x, w), window={size=3x3}, dim_labels=b01f_01io->b01f
}
""")
    comp = xs.load_computation(tmp_path / "conv.hlo")
    (conv,) = [i.op for i in comp.instructions() if i.opcode == "stablehlo.convolution"]
    dn = Evaluator(comp).attr(conv, "dimension_numbers")
    assert isinstance(dn, ConvolutionDimensionNumbers)
    assert (dn.input_batch_dimension, dn.input_feature_dimension, dn.input_spatial_dimensions) == (0, 3, [1, 2])
    assert (dn.kernel_input_feature_dimension, dn.kernel_output_feature_dimension) == (2, 3)
    x, w = _normal(1, 5, 5, 2), _normal(3, 3, 2, 4)
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (3, 3), axis=(1, 2))  # n h w c i j
    want = np.einsum("nhwcij,ijco->nhwo", windows, w.astype(np.float64))
    np.testing.assert_allclose(xs.evaluate(comp, x, w)[0], want, rtol=1e-6, atol=1e-6)


def test_an_unreadable_declared_attribute_is_an_unsupported_op() -> None:
    """A declared attribute whose spelling does not fit its kind: the evaluator cannot check the
    program (UnsupportedOpError naming the op and the attribute), as before kinds were read."""
    comp = _loaded(_dot()[0])
    (dot,) = [i.op for i in comp.instructions() if i.opcode == "stablehlo.dot_general"]
    dot.attrs = {**dot.attrs, "dot_dimension_numbers": MlirAttr('"not dimension numbers"')}
    with pytest.raises(UnsupportedOpError, match=r"stablehlo.dot_general.*dot_dimension_numbers"):
        Evaluator(comp).attr(dot, "dot_dimension_numbers")
