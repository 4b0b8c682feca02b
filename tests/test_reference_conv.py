"""The reference evaluator's convolution (``xlasdk/reference/conv.py``) and its empty windows
(``xlasdk/reference/window.py``), against an independent oracle: a direct loop over every output
element, written here from XLA's operation semantics (not importing the reference's code).

Each case is evaluated twice: built with ``ops.ConvGeneralDilated`` (whose ``window_reversal``
reverses the kernel with an op of its own) and loaded from StableHLO text that holds the
convolution's own ``window_reversal`` (what XLA's CPU compiler writes for the gradient of a
transposed convolution). Inputs are small integers, so every sum is exact in f32 and the values
must be equal, not close. Cases: no spatial dimension to 4-D (and 30 random ones, 1-D to 3-D),
layouts in every order, feature and batch groups, lhs and rhs dilations, strides, negative and
positive padding, window reversal and windows larger than the padded input (an empty result, as
XLA computes it); then XLA:CPU against the evaluator, and a real JAX ``conv_transpose`` gradient as
XLA:CPU optimized it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops

_SPATIAL = {1: "W", 2: "HW", 3: "DHW"}


@dataclass(frozen=True)
class Case:
    """A convolution: layout strings (xla_client's: ``N``/``C`` batch and feature of the input and
    the output, ``O``/``I`` of the kernel, spatial dimensions by letter, numbered in the order the
    kernel's string names them), sizes by role, and the window attributes per spatial dimension."""

    name: str
    labels: tuple[str, str, str]
    batch: int
    features: int  # the input's (groups x the kernel's input features)
    out_features: int
    spatial: tuple[int, ...]  # input sizes, in the kernel's spatial order
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]
    lhs_dil: tuple[int, ...]
    rhs_dil: tuple[int, ...]
    groups: int = 1
    batch_groups: int = 1
    reversal: tuple[bool, ...] = ()
    dtype: Any = np.float32

    @property
    def letters(self) -> list[str]:
        return [ch for ch in self.labels[1] if ch not in "OI"]

    def sizes(self, string: str, roles: dict[str, int], spatial: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(roles[ch] if ch in roles else spatial[self.letters.index(ch)] for ch in string)

    @property
    def lhs_shape(self) -> tuple[int, ...]:
        return self.sizes(self.labels[0], {"N": self.batch, "C": self.features}, self.spatial)

    @property
    def rhs_shape(self) -> tuple[int, ...]:
        return self.sizes(self.labels[1], {"O": self.out_features, "I": self.features // self.groups}, self.kernel)

    @property
    def out_spatial(self) -> tuple[int, ...]:
        out = []
        for s, k, st, (lo, hi), ld, rd in zip(self.spatial, self.kernel, self.strides, self.pads, self.lhs_dil,
                                              self.rhs_dil, strict=True):
            padded = ((s - 1) * ld + 1 if s else 0) + lo + hi
            span = (k - 1) * rd + 1
            out.append((padded - span) // st + 1 if padded >= span else 0)
        return tuple(out)

    @property
    def out_shape(self) -> tuple[int, ...]:
        roles = {"N": self.batch // self.batch_groups, "C": self.out_features}
        return self.sizes(self.labels[2], roles, self.out_spatial)


def direct_conv(x: np.ndarray[Any, Any], w: np.ndarray[Any, Any], c: Case) -> np.ndarray[Any, Any]:
    """The convolution by its definition, one output element at a time, in float64 (int64)."""
    lhs, rhs, out = c.labels
    n = len(c.letters)
    rev = c.reversal or (False,) * n
    kin = c.features // c.groups
    og, obg = c.out_features // c.groups, c.out_features // c.batch_groups
    dilated = [(s - 1) * ld + 1 if s else 0 for s, ld in zip(c.spatial, c.lhs_dil, strict=True)]
    acc_type = np.int64 if np.dtype(c.dtype).kind in "iu" else np.float64
    res = np.zeros(c.out_shape, acc_type)
    xw, ww = x.astype(acc_type), w.astype(acc_type)
    for b, o, *p in itertools.product(range(c.batch // c.batch_groups), range(c.out_features),
                                      *(range(s) for s in c.out_spatial)):
        fg, bg = o // og, o // obg  # the feature group and the batch group of output feature o
        total = acc_type(0)
        for i in range(kin):
            for k in itertools.product(*(range(s) for s in c.kernel)):
                src = []
                for d in range(n):  # k's place in the dilated input (before padding)
                    q = p[d] * c.strides[d] + k[d] * c.rhs_dil[d] - c.pads[d][0]
                    if q < 0 or q >= dilated[d] or q % c.lhs_dil[d]:
                        break  # padding, or a hole of the lhs dilation: zero
                    src.append(q // c.lhs_dil[d])
                else:
                    kk = [c.kernel[d] - 1 - k[d] if rev[d] else k[d] for d in range(n)]  # the reversed window
                    at_x = {"N": bg * (c.batch // c.batch_groups) + b, "C": fg * kin + i}
                    at_w = {"O": o, "I": i}
                    xi = tuple(at_x[ch] if ch in at_x else src[c.letters.index(ch)] for ch in lhs)
                    wi = tuple(at_w[ch] if ch in at_w else kk[c.letters.index(ch)] for ch in rhs)
                    total += xw[xi] * ww[wi]
        at_o = {"N": b, "C": o}
        res[tuple(at_o[ch] if ch in at_o else p[c.letters.index(ch)] for ch in out)] = total
    return res


def inputs(c: Case, seed: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    return (rng.integers(-3, 4, c.lhs_shape).astype(c.dtype), rng.integers(-3, 4, c.rhs_shape).astype(c.dtype))


def built(c: Case) -> xs.XlaComputation:
    b = xs.XlaBuilder(c.name)
    x = ops.Parameter(b, 0, xs.Shape.array_shape(c.dtype, c.lhs_shape), "x")
    w = ops.Parameter(b, 1, xs.Shape.array_shape(c.dtype, c.rhs_shape), "w")
    return b.build(ops.ConvGeneralDilated(
        x, w, c.strides, list(c.pads), c.lhs_dil, c.rhs_dil, c.labels, feature_group_count=c.groups,
        batch_group_count=c.batch_groups, window_reversal=list(c.reversal) if c.reversal else None))


def stablehlo_text(c: Case) -> str:
    """The case as a StableHLO module whose convolution holds its own ``window_reversal``."""
    et = "i32" if np.dtype(c.dtype) == np.int32 else "f32"

    def ty(shape: tuple[int, ...]) -> str:
        return f"tensor<{''.join(f'{d}x' for d in shape)}{et}>"

    def dims(string: str, roles: dict[str, str]) -> str:
        return "[" + ", ".join(roles[ch] if ch in roles else str(c.letters.index(ch)) for ch in string) + "]"

    def ints(v: tuple[int, ...]) -> str:
        return "[" + ", ".join(map(str, v)) + "]"

    lhs, rhs, out = c.labels
    dn = f"{dims(lhs, {'N': 'b', 'C': 'f'})}x{dims(rhs, {'O': 'o', 'I': 'i'})}->{dims(out, {'N': 'b', 'C': 'f'})}"
    rev = ", ".join("true" if r else "false" for r in (c.reversal or (False,) * len(c.letters)))
    window = (f"stride = {ints(c.strides)}, pad = [{', '.join(ints(p) for p in c.pads)}], "
              f"lhs_dilate = {ints(c.lhs_dil)}, rhs_dilate = {ints(c.rhs_dil)}, reverse = [{rev}]")
    x, w, r = ty(c.lhs_shape), ty(c.rhs_shape), ty(c.out_shape)
    return (f"func.func @main(%x: {x}, %w: {w}) -> {r} {{\n"
            f"  %r = stablehlo.convolution(%x, %w) dim_numbers = {dn}, window = {{{window}}} "
            f"{{batch_group_count = {c.batch_groups} : i64, feature_group_count = {c.groups} : i64}} "
            f": ({x}, {w}) -> {r}\n"
            f"  return %r : {r}\n}}\n")


def loaded(c: Case) -> xs.XlaComputation:
    return xs.XlaComputation.from_stablehlo(stablehlo_text(c))


def _c(name: str, labels: tuple[str, str, str], batch: int, features: int, out_features: int,
       spatial: tuple[int, ...], kernel: tuple[int, ...], strides: tuple[int, ...] | None = None,
       pads: tuple[tuple[int, int], ...] | None = None, lhs_dil: tuple[int, ...] | None = None,
       rhs_dil: tuple[int, ...] | None = None, **kw: Any) -> Case:
    n = len(spatial)
    return Case(name, labels, batch, features, out_features, spatial, kernel, strides or (1,) * n,
                pads or ((0, 0),) * n, lhs_dil or (1,) * n, rhs_dil or (1,) * n, **kw)


NCW, NCHW, NCDHW = ("NCW", "OIW", "NCW"), ("NCHW", "OIHW", "NCHW"), ("NCDHW", "OIDHW", "NCDHW")
NHWC, NDHWC = ("NHWC", "HWIO", "NHWC"), ("NDHWC", "DHWIO", "NDHWC")
CASES = [
    _c("1d_stride_pad", NCW, 2, 3, 2, (7,), (3,), (2,), ((1, 2),)),
    _c("1d_reversed_groups", NCW, 1, 4, 4, (6,), (3,), pads=((2, 0),), groups=2, reversal=(True,)),
    _c("2d_nchw_dilations", NCHW, 1, 2, 3, (5, 4), (2, 3), (1, 2), ((-1, 1), (2, 0)), (2, 1), (1, 2)),
    _c("2d_nhwc_depthwise", NHWC, 2, 3, 6, (4, 5), (2, 2), (2, 1), ((0, 1), (1, 1)), groups=3),
    _c("2d_reversed_rhs_dilated", NHWC, 1, 2, 2, (6, 5), (3, 2), pads=((1, 1), (0, 0)), rhs_dil=(2, 1),
       reversal=(True, False)),
    _c("2d_batch_groups", ("NHWC", "OIHW", "NCHW"), 4, 2, 4, (4, 3), (2, 2), batch_groups=2),
    _c("3d_ncdhw", NCDHW, 1, 2, 2, (3, 4, 3), (2, 2, 2)),
    _c("3d_ndhwc_strided_padded", NDHWC, 2, 2, 3, (4, 3, 5), (2, 3, 2), (2, 1, 2), ((1, 0), (-1, 2), (0, 1))),
    _c("3d_odd_orders", ("DCNHW", "WIDOH", "HWCND"), 1, 3, 2, (3, 4, 3), (2, 2, 2), (1, 2, 1), rhs_dil=(1, 1, 2)),
    _c("3d_transposed_reversed", NDHWC, 1, 2, 2, (3, 2, 3), (2, 2, 3), pads=((1, 1), (1, 1), (2, 2)),
       lhs_dil=(2, 2, 1), reversal=(True, True, True)),
    _c("3d_groups_reversed", ("NCDHW", "DHWIO", "NDHWC"), 1, 4, 4, (3, 3, 3), (2, 1, 2), groups=2,
       reversal=(False, True, True)),
    _c("3d_batch_groups_reversed", NCDHW, 4, 1, 2, (3, 3, 2), (2, 2, 2), batch_groups=2, reversal=(True, False, True)),
    _c("3d_int32", ("NHCWD", "IDOWH", "NHCWD"), 1, 2, 2, (3, 3, 3), (2, 2, 2), pads=((0, 1), (1, 0), (0, 0)),
       dtype=np.int32),
    _c("empty_1d_window_past_input", NCW, 1, 2, 3, (2,), (4,)),
    _c("empty_2d_negative_pads", NHWC, 1, 2, 2, (4, 4), (3, 2), pads=((-1, -1), (0, 0))),
    _c("empty_3d_dilated_window_reversed", NDHWC, 1, 1, 2, (3, 3, 3), (2, 2, 2), rhs_dil=(1, 3, 1),
       reversal=(True, False, False)),
    _c("empty_batch", NCHW, 0, 2, 2, (3, 3), (2, 2)),
    _c("4d_reversed", ("NCTDHW", "OITDHW", "TDNHWC"), 1, 2, 2, (3, 2, 3, 2), (2, 1, 2, 2), (1, 1, 2, 1),
       ((0, 1), (1, 0), (0, 0), (-1, 1)), reversal=(True, False, False, True)),
    _c("0d_no_spatial_dimension", ("NC", "OI", "NC"), 3, 4, 2, (), ()),
]
NAMED = {c.name: c for c in CASES}


def _random_cases(count: int, seed: int) -> list[Case]:
    """Random convolutions: 1-D to 3-D, each layout a random order, random groups, dilations,
    strides, paddings and reversals (some windows larger than the input: empty results)."""
    rng = np.random.default_rng(seed)
    out = []
    for j in range(count):
        n = 1 + j % 3
        sp = _SPATIAL[n]

        def perm(s: str) -> str:
            return "".join(rng.permutation(list(s)))

        labels = (perm("NC" + sp), perm("OI" + sp), perm("NC" + sp))
        groups = int(rng.choice([1, 1, 2]))
        batch_groups = 1 if groups > 1 else int(rng.choice([1, 1, 2]))

        def draw(lo: int, hi: int, n: int = n) -> tuple[int, ...]:
            return tuple(int(v) for v in rng.integers(lo, hi, n))

        out.append(Case(
            f"random_{j}_{''.join(labels)}", labels, batch_groups * int(rng.integers(1, 3)),
            groups * int(rng.integers(1, 3)), groups * batch_groups * int(rng.integers(1, 3)), draw(2, 6),
            draw(1, 4), draw(1, 3), tuple((int(a), int(b)) for a, b in rng.integers(-1, 3, (n, 2))), draw(1, 3),
            draw(1, 3), groups, batch_groups, tuple(bool(r) for r in rng.random(n) < 0.4)))
    return out


RANDOM = _random_cases(30, 20260)


@pytest.mark.parametrize("case", CASES + RANDOM, ids=lambda c: c.name)
def test_convolution_matches_the_direct_loop(case: Case) -> None:
    x, w = inputs(case, len(case.name))
    want = direct_conv(x, w, case).astype(case.dtype)
    for comp in (built(case), loaded(case)):
        (got,) = xs.evaluate(comp, x, w)
        assert got.dtype == want.dtype and got.shape == want.shape == case.out_shape
        np.testing.assert_array_equal(got, want)


def test_the_cases_cover_what_they_are_meant_to() -> None:
    every = CASES + RANDOM
    assert {len(c.spatial) for c in every} == {0, 1, 2, 3, 4}
    assert sum(len(c.spatial) == 3 for c in every) >= 15
    for cover in (lambda c: c.groups > 1, lambda c: c.batch_groups > 1, lambda c: any(c.reversal),
                  lambda c: 0 in c.out_shape, lambda c: any(lo < 0 or hi < 0 for lo, hi in c.pads),
                  lambda c: max(c.lhs_dil, default=1) > 1, lambda c: max(c.rhs_dil, default=1) > 1,
                  lambda c: max(c.strides, default=1) > 1,
                  lambda c: len(c.spatial) == 3 and any(c.reversal), lambda c: 0 not in c.out_shape):
        assert sum(map(cover, every)) >= 3


def test_narrow_integers_are_summed_in_the_result_type() -> None:
    """An int8 convolution into int32 (``preferred_element_type``): products and sums in 32 bits,
    not wrapped to 8 (XLA's value; the evaluator's was -64 for 120000)."""
    c = _c("i8", NCW, 1, 4, 2, (6,), (3,), dtype=np.int8)
    b = xs.XlaBuilder("i8")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.int8, c.lhs_shape), "x")
    w = ops.Parameter(b, 1, xs.Shape.array_shape(np.int8, c.rhs_shape), "w")
    comp = b.build(ops.ConvGeneralDilated(x, w, (1,), "VALID", preferred_element_type=np.int32))
    a, k = np.full(c.lhs_shape, 100, np.int8), np.full(c.rhs_shape, -100, np.int8)
    (got,) = xs.evaluate(comp, a, k)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, direct_conv(a, k, c).astype(np.int32))
    assert xs.compare(comp, [a, k]).ok


def test_many_spatial_dimensions_are_computed_or_refused_by_name() -> None:
    """Labels are never shared, whatever the number of spatial dimensions: 14 (what numpy 1's
    view of the windows holds) are computed; past what numpy holds, an UnsupportedOpError, not
    numpy's ValueError."""
    for n in (14, 31):
        b = xs.XlaBuilder("many")
        x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2, 3) + (2,) * 2 + (1,) * (n - 2)), "x")
        w = ops.Parameter(b, 1, xs.Shape.array_shape(np.float32, (2, 3) + (2,) * 2 + (1,) * (n - 2)), "w")
        comp = b.build(ops.ConvGeneralDilated(x, w, (1,) * n, [(0, 0)] * n))
        rng = np.random.default_rng(n)
        a, k = (rng.integers(-3, 4, (2, 3, 2, 2) + (1,) * (n - 2)).astype(np.float32) for _ in range(2))
        if n == 31:
            with pytest.raises(xs.UnsupportedOpError, match="31 spatial dimensions"):
                xs.evaluate(comp, a, k)
            continue
        (got,) = xs.evaluate(comp, a, k)
        want = np.einsum("ncij,ocij->no", a.reshape(2, 3, 2, 2), k.reshape(2, 3, 2, 2))
        np.testing.assert_array_equal(got.reshape(2, 2), want)


# -- empty window results of reduce_window and select_and_scatter -------------------------------------------------
@pytest.mark.parametrize("body", ["add", "region"])
def test_a_reduce_window_larger_than_its_input_is_empty(body: str) -> None:
    b = xs.XlaBuilder("rw")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (1, 2, 4)), "x")
    reducer: Any = ops.Add if body == "add" else (lambda p, q: ops.Add(ops.Mul(q, q), p))  # (not numpy's)
    pads = [(0, 0), (-1, 0), (0, 0)]
    comp = b.build(ops.Tuple(b, [ops.ReduceWindow(x, ops.Constant(b, np.float32(0)), reducer, (1, 3, 1),
                                                  (1, 1, 1), [(0, 0)] * 3),
                                 ops.ReduceWindow(x, ops.Constant(b, np.float32(0)), reducer, (1, 2, 1),
                                                  (1, 1, 1), pads)]))
    a = np.arange(8, dtype=np.float32).reshape(1, 2, 4)
    got = xs.evaluate(comp, a)
    assert [(g.shape, g.dtype) for g in got] == [((1, 0, 4), np.float32)] * 2
    assert xs.compare(comp, [a]).ok


def _select_and_scatter(shape: tuple[int, ...], source: tuple[int, ...], window: tuple[int, ...],
                        pads: list[tuple[int, int]]) -> xs.XlaComputation:
    def ty(s: tuple[int, ...]) -> str:
        return f"tensor<{''.join(f'{d}x' for d in s)}f32>"

    pad = ", ".join(f"[{lo}, {hi}]" for lo, hi in pads)
    return xs.XlaComputation.from_stablehlo(f"""
func.func @main(%x: {ty(shape)}, %s: {ty(source)}) -> {ty(shape)} {{
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  %r = "stablehlo.select_and_scatter"(%x, %s, %init) ({{
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %c = stablehlo.compare GE, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
  }}, {{
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %c = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %c : tensor<f32>
  }}) {{window_dimensions = array<i64: {', '.join(map(str, window))}>,
       window_strides = array<i64: {', '.join('1' for _ in window)}>,
       padding = dense<[{pad}]> : tensor<{len(shape)}x2xi64>}} : ({ty(shape)}, {ty(source)}, tensor<f32>) -> {ty(shape)}
  return %r : {ty(shape)}
}}""")


@pytest.mark.parametrize(("shape", "source", "window", "pads"), [
    ((1, 2, 4), (1, 0, 4), (1, 3, 1), [(0, 0)] * 3),
    ((2, 4), (2, 0), (1, 3), [(0, 0), (-1, -1)]),
    ((0, 4), (0, 3), (1, 2), [(0, 0), (0, 0)]),
])
def test_a_select_and_scatter_with_no_window_scatters_nothing(
        shape: tuple[int, ...], source: tuple[int, ...], window: tuple[int, ...], pads: list[tuple[int, int]]) -> None:
    comp = _select_and_scatter(shape, source, window, pads)
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    s = np.ones(source, np.float32)
    (got,) = xs.evaluate(comp, x, s)
    assert got.shape == shape and got.dtype == np.float32 and not got.any()
    assert xs.compare(comp, [x, s]).ok


# -- XLA:CPU against the evaluator -------------------------------------------------------------------------------
def _normal(c: Case, seed: int) -> list[np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(c.lhs_shape).astype(np.float32), rng.standard_normal(c.rhs_shape).astype(np.float32)]


XLA_CASES = {
    "3d_built": (built, _c("3d", NDHWC, 2, 3, 4, (5, 4, 6), (3, 2, 3), (1, 2, 1), ((1, 1), (0, 1), (2, -1)),
                           rhs_dil=(1, 1, 2))),
    "3d_odd_orders_built": (built, NAMED["3d_odd_orders"]),
    "2d_reversed_loaded": (loaded, NAMED["2d_reversed_rhs_dilated"]),
    "3d_reversed_loaded": (loaded, _c("3dr", NDHWC, 1, 2, 3, (3, 3, 4), (2, 2, 3), pads=((1, 1), (1, 1), (2, 2)),
                                      lhs_dil=(2, 2, 1), reversal=(True, False, True))),
    "3d_batch_groups_reversed_loaded": (loaded, NAMED["3d_batch_groups_reversed"]),
    "empty_3d_loaded": (loaded, NAMED["empty_3d_dilated_window_reversed"]),
}


@pytest.mark.parametrize("name", list(XLA_CASES))
def test_xla_cpu_and_the_evaluator_agree(name: str) -> None:
    make, case = XLA_CASES[name]
    comp = make(case)
    args = _normal(case, 7)
    out = xs.compile(comp, device="cpu:0")(*args)
    assert not isinstance(out, tuple)
    got = out.to_numpy()
    (want,) = xs.evaluate(comp, *args)
    assert got.shape == want.shape == case.out_shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    report = xs.compare(comp, args)
    assert report.ok, str(report)


@pytest.mark.parametrize("rank", [2, 3])
def test_a_jax_conv_transpose_gradient_optimized_by_xla_cpu_matches(rank: int) -> None:
    """XLA:CPU writes the kernel's gradient of a transposed convolution as a convolution with
    ``rhs_reversal`` (jaxlib 0.10 and 0.12): the evaluator computes it and ``compare`` matches."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    lax = pytest.importorskip("jax.lax")
    spec = ("NHWC", "HWIO", "NHWC") if rank == 2 else ("NDHWC", "DHWIO", "NDHWC")

    def loss(x: Any, w: Any) -> Any:
        return jnp.sum(lax.conv_transpose(x, w, (2,) * rank, "SAME", dimension_numbers=spec) ** 2)

    rng = np.random.default_rng(rank)
    x = rng.standard_normal((1, *(4,) * rank, 3)).astype(np.float32)
    w = rng.standard_normal((*(3,) * rank, 3, 2)).astype(np.float32)
    text = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(x, w).compile().as_text()
    assert "rhs_reversal=" in text  # the case this test is for
    comp = xs.XlaComputation.from_hlo_text(text)
    report = xs.compare(comp, [x, w])
    assert report.ok, str(report)
    want = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, w)
    for got, exact in zip(xs.evaluate(comp, x, w), want, strict=True):
        np.testing.assert_allclose(got, np.asarray(exact), rtol=2e-4, atol=2e-4 * float(np.max(np.abs(exact))))
