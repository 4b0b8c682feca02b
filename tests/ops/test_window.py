"""ReduceWindow, ReduceWindowWithGeneralPadding and SelectAndScatterWithGeneralPadding against
loop-based numpy references, the C-06 cases, and errors."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import raises, run
from xlasdk import ops
from xlasdk.errors import DTypeError, ShapeError

Pads = Sequence[tuple[int, int]]


# -- references ----------------------------------------------------------------------------------

def dilate_and_pad(x: np.ndarray[Any, Any], init: Any, bdil: Sequence[int], pads: Pads) -> np.ndarray[Any, Any]:
    """Base-dilate ``x`` (holes hold ``init``) and pad by ``pads`` (negative crops), filling with ``init``."""
    dshape = [(n - 1) * d + 1 if n else 0 for n, d in zip(x.shape, bdil, strict=True)]
    dil = np.full(dshape, init, dtype=x.dtype)
    dil[tuple(slice(None, None, d) for d in bdil)] = x
    pshape = [n + lo + hi for n, (lo, hi) in zip(dshape, pads, strict=True)]
    out = np.full(pshape, init, dtype=x.dtype)
    dst, src = [], []
    for n, p, (lo, _) in zip(dshape, pshape, pads, strict=True):
        j0, j1 = max(0, lo), min(p, n + lo)  # output positions j hold dil[j - lo]
        if j1 <= j0:
            return out
        dst.append(slice(j0, j1))
        src.append(slice(j0 - lo, j1 - lo))
    out[tuple(dst)] = dil[tuple(src)]
    return out


def ref_reduce_window(
    xs_: Sequence[np.ndarray[Any, Any]],
    inits: Sequence[Any],
    fn: Callable[[tuple[Any, ...], tuple[Any, ...]], tuple[Any, ...]],
    win: Sequence[int],
    strides: Sequence[int],
    pads: Pads,
    bdil: Sequence[int],
    wdil: Sequence[int],
) -> list[np.ndarray[Any, Any]]:
    padded = [dilate_and_pad(x, i, bdil, pads) for x, i in zip(xs_, inits, strict=True)]
    dwin = [(w - 1) * d + 1 for w, d in zip(win, wdil, strict=True)]
    oshape = [0 if p < w else (p - w) // s + 1 for p, w, s in zip(padded[0].shape, dwin, strides, strict=True)]
    outs = [np.empty(oshape, dtype=x.dtype) for x in xs_]
    for o in np.ndindex(*oshape):
        acc = tuple(inits)
        for k in np.ndindex(*win):
            pos = tuple(oi * s + ki * d for oi, s, ki, d in zip(o, strides, k, wdil, strict=True))
            acc = fn(acc, tuple(p[pos] for p in padded))
        for out, a in zip(outs, acc, strict=True):
            out[o] = a
    return outs


def same_pads(dims: Sequence[int], win: Sequence[int], strides: Sequence[int],
              bdil: Sequence[int], wdil: Sequence[int]) -> list[tuple[int, int]]:
    """SAME padding on the dilated input and window: ceil(in / stride) outputs, extra on the high side."""
    pads = []
    for n, w, s, bd, wd in zip(dims, win, strides, bdil, wdil, strict=True):
        size, window = (n - 1) * bd + 1, (w - 1) * wd + 1
        total = max((-(-size // s) - 1) * s + window - size, 0)
        pads.append((total // 2, total - total // 2))
    return pads


def ref_select_and_scatter(
    x: np.ndarray[Any, Any], src: np.ndarray[Any, Any], win: Sequence[int], strides: Sequence[int],
    pads: Pads, init: Any, better: Callable[[Any, Any], bool],
) -> np.ndarray[Any, Any]:
    """Each source element goes to the selected element of its window (scan in row-major order,
    keep the current choice while ``better(current, candidate)``; padding is never selected)."""
    out = np.full(x.shape, init, dtype=x.dtype)
    for o in np.ndindex(*src.shape):
        best = None
        for k in np.ndindex(*win):
            pos = tuple(oi * s + ki - lo for oi, s, ki, (lo, _) in zip(o, strides, k, pads, strict=True))
            if not all(0 <= p < n for p, n in zip(pos, x.shape, strict=True)):
                continue
            if best is None or not better(x[best], x[pos]):
                best = pos
        if best is not None:
            out[best] += src[o]
    return out


def _sum(a: tuple[Any, ...], v: tuple[Any, ...]) -> tuple[Any, ...]:
    return (a[0] + v[0],)


def _max(a: tuple[Any, ...], v: tuple[Any, ...]) -> tuple[Any, ...]:
    return (max(a[0], v[0]),)


def _min(a: tuple[Any, ...], v: tuple[Any, ...]) -> tuple[Any, ...]:
    return (min(a[0], v[0]),)


def lowest(dt: np.dtype[Any]) -> Any:
    return dt.type(-np.inf) if dt.kind == "f" or dt == ml_dtypes.bfloat16 else np.iinfo(dt).min


def highest(dt: np.dtype[Any]) -> Any:
    return dt.type(np.inf) if dt.kind == "f" or dt == ml_dtypes.bfloat16 else np.iinfo(dt).max


def f32(b: xs.XlaBuilder, n: int, dims: Sequence[int]) -> xs.XlaOp:
    return ops.Parameter(b, n, xs.Shape.array_shape(np.float32, dims))


# -- C-06: negative padding ----------------------------------------------------------------------

def test_C06_reduce_window_negative_padding_values() -> None:
    b = xs.XlaBuilder("c06")
    x = f32(b, 0, [8, 4])
    zero = ops.Constant(b, np.float32(0))
    sums = [
        ops.ReduceWindow(x, zero, ops.Add, (1, 1), (1, 1), pads)
        for pads in [((-1, 0), (0, 0)), ((0, -1), (0, 0)), ((-1, -1), (0, 0)), ((-1, 0), (0, 1)), ((-2, 1), (0, 0))]
    ]
    mx = ops.ReduceWindow(x, ops.Constant(b, np.float32(-np.inf)), ops.Max, (2, 1), (1, 1), ((-1, 1), (0, 0)))
    y = f32(b, 1, [6])
    one_d = ops.ReduceWindow(y, zero, ops.Add, (3,), (2,), ((1, 1),))
    xv = np.arange(32, dtype=np.float32).reshape(8, 4)
    got = run(b.build(ops.Tuple(b, [*sums, mx, one_d])), xv, np.arange(1, 7, dtype=np.float32))
    np.testing.assert_array_equal(got[0], xv[1:8])
    np.testing.assert_array_equal(got[1], xv[0:7])
    np.testing.assert_array_equal(got[2], xv[1:7])
    assert got[3].shape == (7, 5)
    np.testing.assert_array_equal(got[3][0], [4, 5, 6, 7, 0])
    np.testing.assert_array_equal(got[3][-1], [28, 29, 30, 31, 0])
    np.testing.assert_array_equal(got[3][:, :4], xv[1:8])
    np.testing.assert_array_equal(got[3][:, 4], 0)
    assert got[4].shape == (7, 4)
    np.testing.assert_array_equal(got[4][0], [8, 9, 10, 11])
    np.testing.assert_array_equal(got[4][:6], xv[2:8])
    np.testing.assert_array_equal(got[4][-1], [0, 0, 0, 0])
    np.testing.assert_array_equal(got[5][:, 0], [8, 12, 16, 20, 24, 28, 28])
    np.testing.assert_array_equal(got[6], [3, 9, 15])


def test_C06_negative_padding_lowers_to_slice_without_negative_pads() -> None:
    b = xs.XlaBuilder("c06_text")
    x = f32(b, 0, [8, 4])
    ops.ReduceWindow(x, ops.Constant(b, np.float32(0)), ops.Add, (1, 1), (1, 1), ((-1, -1), (0, 0)))
    text = b.build().as_stablehlo_text()
    assert "stablehlo.slice" in text and "[1:7, 0:4]" in text
    assert "padding = dense<0>" in text


def test_C06_split_negative_padding_is_exact_for_every_small_case() -> None:
    """Cropping ``x[start:limit]`` then padding by the non-negative remainder equals padding ``x``."""
    from xlasdk.ops.window import split_negative_padding

    checked = 0
    for n, d, lo, hi in itertools.product(range(6), range(1, 4), range(-7, 3), range(-7, 3)):
        size = (n - 1) * d + 1 if n else 0
        if size + lo + hi < 0:
            continue
        x = np.arange(1, n + 1, dtype=np.int32)
        (start,), (limit,), ((plo, phi),) = split_negative_padding([n], [d], [(lo, hi)])
        assert plo >= 0 and phi >= 0 and 0 <= start <= limit <= n
        want = dilate_and_pad(x, 0, [d], [(lo, hi)])
        np.testing.assert_array_equal(dilate_and_pad(x[start:limit], 0, [d], [(plo, phi)]), want,
                                      err_msg=f"n={n} d={d} pads=({lo}, {hi})")
        checked += 1
    assert checked > 500


def test_C06_formerly_crashing_case_survives_in_subprocess() -> None:
    code = textwrap.dedent(
        """
        import numpy as np
        import xlasdk as xs
        from xlasdk import ops
        from helpers import run
        b = xs.XlaBuilder("c06")
        x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, [8, 4]))
        z = ops.Constant(b, np.float32(0))
        r1 = ops.ReduceWindow(x, z, ops.Add, (1, 1), (1, 1), ((-1, 0), (0, 0)))
        r2 = ops.ReduceWindowWithGeneralPadding(x, z, ops.Add, (1, 1), (1, 1), (), (), ((-1, -1), (0, 0)))
        xv = np.arange(32, dtype=np.float32).reshape(8, 4)
        a, c = run(b.build(ops.Tuple(b, [r1, r2])), xv)
        assert (a == xv[1:]).all() and (c == xv[1:7]).all()
        print("C06-OK")
        """
    )
    import os

    tests_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    repo = os.path.dirname(tests_dir)
    # the child runs on the CPU: under XLASDK_TEST_PLATFORM=tpu this process holds the chip, which one
    # process at a time may open (the child failed on libtpu's lockfile there)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([tests_dir, repo, os.environ.get("PYTHONPATH", "")]),
               XLASDK_TEST_PLATFORM="cpu", XLASDK_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "C06-OK" in proc.stdout


# -- ReduceWindow against the reference ----------------------------------------------------------

# (window, strides, padding, base_dilations, window_dilations) on a (5, 7) operand.
CONFIGS: list[tuple[tuple[int, ...], tuple[int, ...], Any, tuple[int, ...], tuple[int, ...]]] = [
    ((2, 3), (1, 1), "VALID", (1, 1), (1, 1)),
    ((2, 3), (2, 2), "SAME", (1, 1), (1, 1)),
    ((3, 2), (2, 1), ((1, 2), (0, 1)), (1, 1), (1, 1)),
    ((2, 2), (1, 1), ((0, 0), (0, 0)), (2, 1), (1, 1)),
    ((2, 2), (1, 2), ((1, 1), (2, 0)), (1, 1), (2, 2)),
    ((3, 3), (2, 2), xs.PaddingType.SAME, (2, 3), (1, 2)),
    ((2, 2), (1, 1), ((-1, 2), (1, -2)), (2, 1), (1, 1)),
    ((1, 2), (1, 1), ((-3, -2), (-1, 0)), (2, 2), (1, 1)),
    ((2, 1), (3, 2), ((-1, -1), (-2, -3)), (1, 3), (1, 1)),
    ((6, 1), (1, 1), xs.PaddingType.VALID, (1, 1), (1, 1)),  # window larger than the input: 0 rows
]


def _explicit(pad: Any, dims: Sequence[int], win: Sequence[int], strides: Sequence[int],
              bdil: Sequence[int], wdil: Sequence[int]) -> list[tuple[int, int]]:
    name = pad if isinstance(pad, str) else pad.name if isinstance(pad, xs.PaddingType) else None
    if name == "VALID":
        return [(0, 0)] * len(dims)
    if name == "SAME":
        return same_pads(dims, win, strides, bdil, wdil)
    return [(int(p[0]), int(p[1])) for p in pad]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.int8, np.uint32])
def test_reduce_window_sum_max_min_matches_reference(dtype: Any) -> None:
    dt = np.dtype(dtype)
    rng = np.random.default_rng(7)
    xv = rng.integers(-20 if dt.kind != "u" else 0, 20, size=(5, 7)).astype(dt)
    b = xs.XlaBuilder("rw")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(dt, xv.shape))
    reducers = [(ops.Add, dt.type(0), _sum), (ops.Max, lowest(dt), _max), (ops.Min, highest(dt), _min)]
    outs, expected = [], []
    for (win, strides, pad, bdil, wdil), (comp, init, fn) in itertools.product(CONFIGS, reducers):
        outs.append(ops.ReduceWindow(x, ops.Constant(b, np.asarray(init, dt)), comp, win, strides, pad, bdil, wdil))
        pads = _explicit(pad, xv.shape, win, strides, bdil, wdil)
        expected.append(ref_reduce_window([xv], [init], fn, win, strides, pads, bdil, wdil)[0])
        assert outs[-1].dims == expected[-1].shape
    got = run(b.build(ops.Tuple(b, outs)), xv)
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert g.dtype == dt
        np.testing.assert_array_equal(g, e, err_msg=f"case {i}: {CONFIGS[i // 3]} reducer {i % 3}")


def test_reduce_window_bfloat16_and_3d_float_sum() -> None:
    bf = np.dtype(ml_dtypes.bfloat16)
    xv = (np.arange(2 * 5 * 6).reshape(2, 5, 6) % 7).astype(bf)
    b = xs.XlaBuilder("rw_bf16")
    x = ops.Constant(b, xv)
    win, strides, bdil, wdil = (1, 3, 2), (1, 2, 2), (1, 1, 2), (1, 2, 1)
    r = ops.ReduceWindow(x, ops.Constant(b, np.asarray(0, bf)), ops.Add, win, strides, "SAME", bdil, wdil)
    m = ops.ReduceWindow(x, ops.Constant(b, np.asarray(-np.inf, bf)), ops.Max, win, strides, "SAME", bdil, wdil)
    got = run(b.build(ops.Tuple(b, [ops.ConvertElementType(r, np.float32), ops.ConvertElementType(m, np.float32)])))
    pads = same_pads(xv.shape, win, strides, bdil, wdil)
    x32 = xv.astype(np.float32)
    exp_sum = ref_reduce_window([x32], [np.float32(0)], _sum, win, strides, pads, bdil, wdil)[0]
    exp_max = ref_reduce_window([x32], [np.float32(-np.inf)], _max, win, strides, pads, bdil, wdil)[0]
    np.testing.assert_array_equal(got[0], exp_sum)
    np.testing.assert_array_equal(got[1], exp_max)


def test_reduce_window_random_floats_sum_close_to_reference() -> None:
    rng = np.random.default_rng(3)
    xv = rng.standard_normal((3, 9, 8)).astype(np.float32)
    b = xs.XlaBuilder("rw_float")
    x = f32(b, 0, xv.shape)
    args = ((1, 3, 3), (1, 2, 1), ((0, 0), (2, 1), (-1, 1)), (1, 1, 2), (1, 2, 1))
    r = ops.ReduceWindow(x, ops.Constant(b, np.float32(0)), lambda a, c: a + c, *args)
    got = run(b.build(r), xv)[0]
    win, strides, pads, bdil, wdil = args
    exp = ref_reduce_window([xv.astype(np.float64)], [0.0], _sum, win, strides, pads, bdil, wdil)[0]
    np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-5)


def _argmax_reducer(av: xs.XlaOp, ai: xs.XlaOp, bv: xs.XlaOp, bi: xs.XlaOp) -> tuple[xs.XlaOp, xs.XlaOp]:
    take_a = ops.Or(ops.Gt(av, bv), ops.And(ops.Eq(av, bv), ops.Lt(ai, bi)))
    return ops.Select(take_a, av, bv), ops.Select(take_a, ai, bi)


def _argmax_ref(a: tuple[Any, ...], v: tuple[Any, ...]) -> tuple[Any, ...]:
    take_a = a[0] > v[0] or (a[0] == v[0] and a[1] < v[1])
    return a if take_a else v


def test_reduce_window_variadic_argmax_pairs() -> None:
    rng = np.random.default_rng(11)
    xv = rng.integers(0, 4, size=(6, 5)).astype(np.float32)  # many ties
    idx = np.arange(30, dtype=np.int32).reshape(6, 5)
    b = xs.XlaBuilder("argmax")
    x = f32(b, 0, xv.shape)
    i = ops.Parameter(b, 1, xs.Shape.array_shape(np.int32, idx.shape))
    inits = [ops.Constant(b, np.float32(-np.inf)), ops.Constant(b, np.int32(2**31 - 1))]
    cfg = ((2, 3), (2, 1), ((1, 0), (1, 1)), (1, 1), (1, 1))
    r = ops.ReduceWindow([x, i], inits, _argmax_reducer, *cfg)
    assert r.shape.is_tuple() and len(r.shape.tuple_shapes()) == 2
    r2 = ops.ReduceWindowWithGeneralPadding([x, i], inits, _argmax_reducer, cfg[0], cfg[1], cfg[3], cfg[4], cfg[2])
    outs = [ops.GetTupleElement(t, k) for t in (r, r2) for k in (0, 1)]
    got = run(b.build(ops.Tuple(b, outs)), xv, idx)
    ev, ei = ref_reduce_window([xv, idx], [np.float32(-np.inf), np.int32(2**31 - 1)], _argmax_ref,
                               cfg[0], cfg[1], cfg[2], cfg[3], cfg[4])
    assert got[1].dtype == np.int32
    for g, e in zip(got, [ev, ei, ev, ei], strict=True):
        np.testing.assert_array_equal(g, e)


def test_reduce_window_with_general_padding_and_xla_computation_reducer() -> None:
    sub = xs.XlaBuilder("mul")
    p0 = ops.Parameter(sub, 0, xs.Shape.scalar_shape(np.int32))
    p1 = ops.Parameter(sub, 1, xs.Shape.scalar_shape(np.int32))
    mul = sub.build(ops.Mul(p0, p1))
    xv = np.arange(1, 13, dtype=np.int32).reshape(3, 4) % 5 + 1
    b = xs.XlaBuilder("rwgp")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.int32, xv.shape))
    r = ops.ReduceWindowWithGeneralPadding(x, ops.Constant(b, np.int32(1)), mul, (2, 2), (1, 2), (1, 1), (1, 1),
                                           ((0, 1), (1, 0)))
    single_list = ops.ReduceWindow([x], [ops.Constant(b, np.int32(1))], mul, (2, 2), (1, 2), ((0, 1), (1, 0)))
    assert not single_list.shape.is_tuple()
    got = run(b.build(ops.Tuple(b, [r, single_list])), xv)

    def prod(a: tuple[Any, ...], v: tuple[Any, ...]) -> tuple[Any, ...]:
        return (a[0] * v[0],)

    exp = ref_reduce_window([xv], [np.int32(1)], prod, (2, 2), (1, 2), ((0, 1), (1, 0)), (1, 1), (1, 1))[0]
    np.testing.assert_array_equal(got[0], exp)
    np.testing.assert_array_equal(got[1], exp)


def test_reduce_window_pred_or_and_shape_only() -> None:
    xv = np.array([[True, False, False], [False, False, True]])
    b = xs.XlaBuilder("rw_pred")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.bool_, xv.shape))
    r = ops.ReduceWindow(x, ops.Constant(b, np.bool_(False)), ops.Or, (1, 2), (1, 1), "VALID")
    assert str(r.shape) == "pred[2,2]"
    got = run(b.build(r), xv)[0]
    np.testing.assert_array_equal(got, [[True, False], [False, True]])


# -- SelectAndScatter ----------------------------------------------------------------------------

SAS_CONFIGS: list[tuple[tuple[int, int], tuple[int, int], Any]] = [
    ((2, 2), (2, 2), ((0, 0), (0, 0))),  # max-pool gradient, non-overlapping (6x7: last column dropped)
    ((3, 3), (1, 1), "SAME"),  # overlapping windows: several sources add into one element
    ((3, 2), (2, 1), ((1, 2), (0, 1))),
    ((2, 2), (1, 2), ((-1, 1), (0, -2))),  # negative padding: cropped elements never selected
    ((4, 3), (3, 3), ((3, 3), (2, 2))),  # some windows hold only padding: their source is dropped
]


def _sas_source_shape(dims: Sequence[int], win: Sequence[int], strides: Sequence[int], pads: Pads) -> list[int]:
    return [max((n + lo + hi - w) // s + 1, 0) for n, w, s, (lo, hi) in zip(dims, win, strides, pads, strict=True)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_select_and_scatter_max_pool_gradient_matches_reference(dtype: Any) -> None:
    dt = np.dtype(dtype)
    rng = np.random.default_rng(5)
    xv = rng.integers(-3, 3, size=(6, 7)).astype(dt)  # negative values and many ties
    b = xs.XlaBuilder("sas")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(dt, xv.shape))
    outs, srcs, expected = [], [], []
    for k, (win, strides, pad) in enumerate(SAS_CONFIGS):
        pads = _explicit(pad, xv.shape, win, strides, (1, 1), (1, 1))
        sshape = _sas_source_shape(xv.shape, win, strides, pads)
        sv = (np.arange(1, int(np.prod(sshape)) + 1).reshape(sshape) * (k + 1)).astype(dt)
        s = ops.Parameter(b, k + 1, xs.Shape.array_shape(dt, sshape))
        for select, better in ((ops.Ge, lambda a, c: a >= c), (ops.Le, lambda a, c: a <= c)):
            outs.append(ops.SelectAndScatterWithGeneralPadding(x, select, win, strides, pad, s,
                                                               ops.Constant(b, dt.type(0)), ops.Add))
            expected.append(ref_select_and_scatter(xv, sv, win, strides, pads, dt.type(0), better))
            assert outs[-1].shape == x.shape
        srcs.append(sv)
    got = run(b.build(ops.Tuple(b, outs)), xv, *srcs)
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert g.dtype == dt
        np.testing.assert_array_equal(g, e, err_msg=f"case {i}: {SAS_CONFIGS[i // 2]}")


def test_select_and_scatter_init_value_and_first_max_on_ties() -> None:
    xv = np.array([[1, 1], [1, 1]], np.float32)  # all tied: the first element of the window wins
    b = xs.XlaBuilder("sas_ties")
    x = f32(b, 0, [2, 2])
    s = f32(b, 1, [1, 1])
    r = ops.SelectAndScatterWithGeneralPadding(x, ops.Ge, (2, 2), (2, 2), ((0, 0), (0, 0)), s,
                                               ops.Constant(b, np.float32(10)), ops.Add)
    got = run(b.build(r), xv, np.array([[5]], np.float32))[0]
    np.testing.assert_array_equal(got, [[15, 10], [10, 10]])


def test_select_and_scatter_ties_go_to_first_in_row_major_order_with_xla_computations() -> None:
    # XLA documents select(a, b) with a before b in row-major order, so Ge picks the first of tied
    # maxima. XLA:CPU's own select_and_scatter breaks that once the minor dimension has low padding:
    # for [[0, 5], [5, 0]] with padding ((0, 0), (1, 0)) it sends the second window's value to (1, 0).
    ge_b = xs.XlaBuilder("ge")
    ge = ge_b.build(ops.Ge(ops.Parameter(ge_b, 0, xs.Shape.scalar_shape(np.float32)),
                           ops.Parameter(ge_b, 1, xs.Shape.scalar_shape(np.float32))))
    add_b = xs.XlaBuilder("add")
    add = add_b.build(ops.Add(ops.Parameter(add_b, 0, xs.Shape.scalar_shape(np.float32)),
                              ops.Parameter(add_b, 1, xs.Shape.scalar_shape(np.float32))))
    xv = np.array([[0, 5, 1], [5, 0, 5], [2, 5, 5]], np.float32)
    b = xs.XlaBuilder("sas_order")
    x = f32(b, 0, [3, 3])
    s = f32(b, 1, [2, 2])
    x2 = f32(b, 2, [2, 2])
    s2 = f32(b, 3, [1, 2])
    z = ops.Constant(b, np.float32(0))
    r1 = ops.SelectAndScatterWithGeneralPadding(x, ge, (2, 2), (1, 1), "VALID", s, z, add)
    r2 = ops.SelectAndScatterWithGeneralPadding(x, ops.Ge, (2, 2), (1, 1), "VALID", s, z, ops.Add)
    r3 = ops.SelectAndScatterWithGeneralPadding(x2, ge, (2, 2), (1, 1), ((0, 0), (1, 0)), s2, z, ops.Add)
    sv, xv2, sv2 = np.array([[1, 2], [4, 8]], np.float32), np.array([[0, 5], [5, 0]], np.float32), np.array(
        [[1, 2]], np.float32)
    got = run(b.build(ops.Tuple(b, [r1, r2, r3])), xv, sv, xv2, sv2)
    exp = np.array([[0, 1 + 2, 0], [4, 0, 8], [0, 0, 0]], np.float32)
    np.testing.assert_array_equal(got[0], exp)
    np.testing.assert_array_equal(got[1], exp)
    np.testing.assert_array_equal(got[2], [[0, 2], [1, 0]])
    ge_ref = lambda a, c: a >= c  # noqa: E731
    np.testing.assert_array_equal(exp, ref_select_and_scatter(xv, sv, (2, 2), (1, 1), [(0, 0)] * 2, 0.0, ge_ref))
    np.testing.assert_array_equal(
        got[2], ref_select_and_scatter(xv2, sv2, (2, 2), (1, 1), [(0, 0), (1, 0)], 0.0, ge_ref)
    )


def test_select_and_scatter_empty_operand_drops_padding_only_windows() -> None:
    b = xs.XlaBuilder("sas_empty")
    x = f32(b, 0, [0, 3])
    s = f32(b, 1, [2, 3])
    r = ops.SelectAndScatterWithGeneralPadding(x, ops.Ge, (1, 1), (1, 1), ((1, 1), (0, 0)), s,
                                               ops.Constant(b, np.float32(0)), ops.Add)
    assert r.dims == (0, 3)
    got = run(b.build(r), np.zeros((0, 3), np.float32), np.ones((2, 3), np.float32))[0]
    assert got.shape == (0, 3)


# -- errors --------------------------------------------------------------------------------------


def test_reduce_window_errors() -> None:
    b = xs.XlaBuilder("errs")
    x = f32(b, 0, [4, 6])
    z = ops.Constant(b, np.float32(0))
    RW, RWG = ops.ReduceWindow, ops.ReduceWindowWithGeneralPadding
    with raises(ShapeError, "ReduceWindow", "window_dimensions", "operand", "f32[4,6]"):
        RW(x, z, ops.Add, (2,), (1, 1), "VALID")
    with raises(ShapeError, "ReduceWindow", "window_strides", "operand"):
        RW(x, z, ops.Add, (2, 2), (1, 1, 1), "VALID")
    with raises(ShapeError, "ReduceWindow", "window_strides", ">= 1", "operand"):
        RW(x, z, ops.Add, (2, 2), (0, 1), "VALID")
    with raises(ShapeError, "ReduceWindow", "window_dimensions", ">= 1"):
        RW(x, z, ops.Add, (0, 2), (1, 1), "VALID")
    with raises(ShapeError, "ReduceWindow", "base_dilations", ">= 1"):
        RW(x, z, ops.Add, (2, 2), (1, 1), "VALID", (1, 0))
    with raises(ShapeError, "ReduceWindow", "window_dilations"):
        RW(x, z, ops.Add, (2, 2), (1, 1), "VALID", (), (1,))
    with raises(ShapeError, "ReduceWindow", "padding", "operand"):
        RW(x, z, ops.Add, (2, 2), (1, 1), [(0, 0)])
    with raises(ShapeError, "ReduceWindow", "padding[0]"):
        RW(x, z, ops.Add, (2, 2), (1, 1), [(0, 0, 0), (0, 0)])  # type: ignore[list-item]
    with raises(ShapeError, "ReduceWindow", "FULL"):
        RW(x, z, ops.Add, (2, 2), (1, 1), "FULL")
    with raises(ShapeError, "ReduceWindow", "crops", "operand"):
        RW(x, z, ops.Add, (1, 1), (1, 1), [(-3, -2), (0, 0)])
    with raises(ShapeError, "ReduceWindowWithGeneralPadding", "padding"):
        RWG(x, z, ops.Add, (2, 2), (1, 1), (), (), [(0, 0)])
    v = ops.Constant(b, np.zeros(2, np.float32))
    with raises(ShapeError, "ReduceWindow", "'init_value'", "scalar", "f32[2]"):
        RW(x, v, ops.Add, (2, 2), (1, 1), "VALID")
    zi = ops.Constant(b, np.int32(0))
    with raises(DTypeError, "ReduceWindow", "'init_value'", "s32[]", "f32"):
        RW(x, zi, ops.Add, (2, 2), (1, 1), "VALID")
    with raises(ShapeError, "ReduceWindow", "computation", "takes 1"):
        RW(x, z, lambda a: a, (2, 2), (1, 1), "VALID")
    with raises(ShapeError, "ReduceWindow", "computation", "pred[]"):
        RW(x, z, lambda a, c: ops.Lt(a, c), (2, 2), (1, 1), "VALID")
    with raises(ShapeError, "ReduceWindow", "computation returns"):
        RW(x, z, lambda a, c: (a, c), (2, 2), (1, 1), "VALID")
    with raises(DTypeError, "ReduceWindow", "computation"):
        RW(x, z, 3, (2, 2), (1, 1), "VALID")
    i = ops.Parameter(b, 1, xs.Shape.array_shape(np.int32, [4, 5]))
    with raises(ShapeError, "ReduceWindow", "'operands[1]'", "s32[4,5]"):
        RW([x, i], [z, zi], _argmax_reducer, (2, 2), (1, 1), "VALID")
    with raises(ShapeError, "ReduceWindow", "2 operands", "1 init"):
        RW([x, x], [z], ops.Add, (2, 2), (1, 1), "VALID")
    with raises(ShapeError, "ReduceWindow", "computation"):
        RW([x, x], [z, z], ops.Add, (2, 2), (1, 1), "VALID")
    with raises(DTypeError, "ReduceWindow", "'init_values[1]'"):
        RW([x, x], [z, zi], ops.Add, (2, 2), (1, 1), "VALID")
    with raises(DTypeError, "ReduceWindow", "'operand'", "XlaOp"):
        RW(np.zeros(3), z, ops.Add, (2,), (1,), "VALID")
    other = ops.Constant(xs.XlaBuilder("other"), np.float32(0))
    with raises(ShapeError, "ReduceWindow", "'init_value'", "builder"):
        RW(x, other, ops.Add, (2, 2), (1, 1), "VALID")


def test_select_and_scatter_errors() -> None:
    b = xs.XlaBuilder("sas_errs")
    x = f32(b, 0, [4, 4])
    s = f32(b, 1, [2, 2])
    z = ops.Constant(b, np.float32(0))
    SAS, P = ops.SelectAndScatterWithGeneralPadding, ((0, 0), (0, 0))
    with raises(ShapeError, "SelectAndScatter", "'source'", "f32[3,3]"):
        SAS(x, ops.Ge, (2, 2), (1, 1), P, s, z, ops.Add)
    with raises(ShapeError, "SelectAndScatter", "window_dimensions", "operand"):
        SAS(x, ops.Ge, (2,), (2, 2), P, s, z, ops.Add)
    with raises(ShapeError, "SelectAndScatter", "window_strides", ">= 1"):
        SAS(x, ops.Ge, (2, 2), (2, -1), P, s, z, ops.Add)
    with raises(ShapeError, "SelectAndScatter", "padding"):
        SAS(x, ops.Ge, (2, 2), (2, 2), [(0, 0)], s, z, ops.Add)
    with raises(ShapeError, "SelectAndScatter", "select", "pred[]"):
        SAS(x, ops.Max, (2, 2), (2, 2), P, s, z, ops.Add)
    with raises(ShapeError, "SelectAndScatter", "computation", "pred[]"):
        SAS(x, ops.Ge, (2, 2), (2, 2), P, s, z, ops.Ge)
    with raises(ShapeError, "SelectAndScatter", "select", "takes 1"):
        SAS(x, lambda a: a, (2, 2), (2, 2), P, s, z, ops.Add)
    v = ops.Constant(b, np.zeros(2, np.float32))
    with raises(ShapeError, "SelectAndScatter", "'init_value'", "scalar"):
        SAS(x, ops.Ge, (2, 2), (2, 2), P, s, v, ops.Add)
    zi = ops.Constant(b, np.int32(0))
    with raises(DTypeError, "SelectAndScatter", "'init_value'", "f32"):
        SAS(x, ops.Ge, (2, 2), (2, 2), P, s, zi, ops.Add)
    si = ops.Parameter(b, 2, xs.Shape.array_shape(np.int32, [2, 2]))
    with raises(DTypeError, "SelectAndScatter", "'source'", "s32[2,2]"):
        SAS(x, ops.Ge, (2, 2), (2, 2), P, si, z, ops.Add)


# -- pure shape rules (no builder) ----------------------------------------------------------------

def test_window_shape_rules() -> None:
    from xlasdk.ops.window import reduce_window_op_shape, reduce_window_shape, select_and_scatter_shape, window_padding

    x = xs.Shape.array_shape(np.float32, (4, 6))
    sf = xs.Shape.array_shape(np.float32, ())
    # (4 - 2) // 2 + 1 = 2; padded 6 + 1 + 1 = 8, window 3: 8 - 3 + 1 = 6
    assert reduce_window_shape((4, 6), (2, 3), (2, 1), (1, 1), (1, 1), ((0, 0), (1, 1))) == (2, 6)
    assert reduce_window_op_shape("RW", [x], [sf], (2, 3), (2, 1), (1, 1), (1, 1), ((0, 0), (1, 1))) == (
        xs.Shape.array_shape(np.float32, (2, 6)))
    # SAME: ceil(6 / 2) = 3 windows of 3 need 7 elements: one more, at the high end
    assert window_padding("RW", x, "operand", (2, 3), (2, 2), (1, 1), (1, 1), "SAME") == ((0, 0), (0, 1))
    # base dilation 2: 7 elements; window dilation 2: 5 wide: 3 windows
    assert reduce_window_op_shape("RW", [x], [sf], (1, 3), (1, 1), (2, 1), (1, 2), "VALID").dimensions() == (7, 2)
    si = xs.Shape.array_shape(np.int32, ())
    s32 = xs.Shape.array_shape(np.int32, (4, 6))
    pair = reduce_window_op_shape("RW", [x, s32], [sf, si], (4, 6), (1, 1), (1, 1), (1, 1), "VALID")
    assert pair.tuple_shapes()[1] == xs.Shape.array_shape(np.int32, (1, 1))
    with raises(ShapeError, "RW: window_strides [1, 0] must all be >= 1 (operand 'operands[0]' f32[4,6])"):
        reduce_window_op_shape("RW", [x], [sf], (1, 1), (1, 0), (1, 1), (1, 1), "VALID")
    with raises(ShapeError, "RW: padding (-5, 0) of dimension 0 crops more than the 4 elements"):
        window_padding("RW", x, "operand", (1, 1), (1, 1), (1, 1), (1, 1), ((-5, 0), (0, 0)))
    with raises(DTypeError, "RW: operand 'init_values[0]' is s32[], expected f32[] like operand 'operands[0]'"):
        reduce_window_op_shape("RW", [x], [si], (1, 1), (1, 1), (1, 1), (1, 1), "VALID")
    src = xs.Shape.array_shape(np.float32, (2, 3))
    assert select_and_scatter_shape("SS", x, src, sf, (2, 2), (2, 2), "VALID") == x
    with raises(ShapeError, "SS: operand 'source' has shape f32[2,2], expected f32[2,3] (one element per window"):
        select_and_scatter_shape("SS", x, xs.Shape.array_shape(np.float32, (2, 2)), sf, (2, 2), (2, 2), "VALID")
