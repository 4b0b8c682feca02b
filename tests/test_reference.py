"""The reference evaluator (``xs.evaluate``) and ``xs.compare``.

Oracles: hand-computed values and numpy for the edges of XLA's operation semantics (integer
division by zero, shifts past the bit width, saturating conversions, clamped slices, total order);
XLA itself on the same programs (``compare`` against the device must say match on correct
programs, the real dumps of both corpora included: a debugging tool never cries wolf); and a known
XLA:CPU wrong value (a division by a broadcast 2**127 rewritten into a multiplication by a
subnormal reciprocal that flushes to zero), which ``compare`` must report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.test_real_dumps import recorded
from xlasdk import ops

DATA = Path(__file__).resolve().parent / "data"
# compiling the same module again (another file of the same program, compare after compile) reads it
# back from a compile cache of this run (tests/conftest.py): these tests are about values, not compiling
pytestmark = pytest.mark.usefixtures("shared_compile_cache")


def _p(b: xs.XlaBuilder, n: int, dt: Any, dims: tuple[int, ...], name: str = "") -> xs.XlaOp:
    return ops.Parameter(b, n, xs.Shape.array_shape(dt, dims), name or f"p{n}")


# -- real programs: no false alarm --------------------------------------------------------------------------
SUPPORTED = [
    (prog, f)
    for prog in ("transformer_bf16", "convnet_train", "gru_scan", "int_indexing", "sharded_mlp")
    for f in ("module.before_optimizations.txt", "lowered.mlir", "exported.mlirbc",
              "module.cpu_after_optimizations.txt")
    if not (f.startswith("module.cpu") and prog == "sharded_mlp")  # partitioned: XLA:CPU cannot compile it again
]


@pytest.mark.parametrize("corpus", ["dumps", "dumps_jax012"])
@pytest.mark.parametrize(("program", "fname"), SUPPORTED)
def test_every_real_program_matches_the_reference(corpus: str, program: str, fname: str) -> None:
    ins, outs = recorded(f"{corpus}/{program}")
    comp = xs.load_computation(DATA / corpus / program / fname)
    report = xs.compare(comp, ins, bisect="ops")  # bisection on a match: nothing blamed, no compile
    assert report.ok and report.bisect_ops.status == "no divergence" and report.bisect_ops.compiles == 0, str(report)
    # and the reference alone is close to what JAX recorded
    ref = xs.evaluate(comp, *ins)
    assert xs.compare(comp, ins, against=ref).ok


def test_an_op_without_a_rule_is_named() -> None:
    comp = xs.XlaComputation.from_hlo_text(
        'HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n'
        '  ROOT r = f32[2] custom-call(p), custom_call_target="my_kernel"\n}\n')
    with pytest.raises(xs.UnsupportedOpError, match="stablehlo.custom_call to 'my_kernel' has no evaluation rule"):
        xs.evaluate(comp, np.ones(2, np.float32))
    # XLA:CPU's TopK custom call has one (int_indexing's optimized dump), checked against JAX's outputs
    ins, outs = recorded("dumps/int_indexing")
    got = xs.evaluate(xs.load_computation(DATA / "dumps/int_indexing/module.cpu_after_optimizations.txt"), *ins)
    for g, w in zip(got, outs, strict=True):
        np.testing.assert_array_equal(g, w)
    # an op refused on purpose says why
    b = xs.XlaBuilder("rng")
    lo = _p(b, 0, np.float32, ())
    r = ops.RngUniform(lo, ops.Add(lo, ops.Constant(b, np.float32(1))), xs.Shape.array_shape(np.float32, (3,)))
    with pytest.raises(xs.UnsupportedOpError, match="stablehlo.rng is not evaluated by the reference: it draws"):
        xs.evaluate(b.build(r), np.float32(0))


# -- a real XLA:CPU wrong value ------------------------------------------------------------------------------
def test_compare_reports_xla_cpu_dividing_by_a_huge_broadcast_scalar() -> None:
    """x / 2**127 (a broadcast constant): XLA:CPU computes x * (1 / 2**127), whose reciprocal is
    subnormal and flushed to zero, so every output is 0 instead of x * 2**-127 (a normal number)."""
    b = xs.XlaBuilder("div_big")
    x = _p(b, 0, np.float32, (4,), "x")
    comp = b.build(ops.Div(x, ops.Broadcast(ops.Constant(b, np.float32(2.0**127)), [4])))
    a = np.array([1e10, 3e9, -7e10, 2.5e10], np.float32)
    (ref,) = xs.evaluate(comp, a)
    np.testing.assert_array_equal(ref, a / np.float32(2.0**127))  # numpy divides correctly
    assert np.all(ref != 0)
    report = xs.compare(comp, [a])
    (out,) = report.outputs
    device = np.asarray(xs.compile(comp)(a))
    if np.array_equal(device, ref):  # an XLA that computes it right: then compare must say match
        assert report.ok
    else:
        assert not report.ok and out.mismatches == int(np.sum(device != ref)) and out.first_mismatch == (0,)
        assert "DIVERGENCE" in str(report)
        # the pass that rewrites the division (algebraic simplification), turned off for the device's
        # compile through xla_flags (--xla-flags in the CLI): XLA divides, and the outputs match
        fixed = xs.compare(comp, [a], xla_flags={"xla_disable_hlo_passes": "algsimp"})
        assert fixed.ok, str(fixed)


# -- edges of the operation semantics ----------------------------------------------------------------------------
def _both(comp: xs.XlaComputation, *args: Any) -> list[np.ndarray[Any, Any]]:
    """The reference's outputs, after checking that XLA computes the same (a second oracle)."""
    report = xs.compare(comp, list(args))
    assert report.ok, str(report)
    return xs.evaluate(comp, *args)


def test_integer_division_and_remainder_edges() -> None:
    b = xs.XlaBuilder("idiv")
    x, y = _p(b, 0, np.int32, (6,)), _p(b, 1, np.int32, (6,))
    comp = b.build([ops.Div(x, y), ops.Rem(x, y)])
    xs_ = np.array([7, -7, 7, -2**31, -2**31, 5], np.int32)
    ys = np.array([2, 2, 0, -1, 0, -3], np.int32)
    q, r = _both(comp, xs_, ys)
    np.testing.assert_array_equal(q, [3, -3, -1, -2**31, -1, -1])  # toward zero; /0 is -1; MIN/-1 is MIN
    np.testing.assert_array_equal(r, [1, -1, 7, 0, -2**31, 2])  # sign of the dividend; %0 is x


def test_shifts_past_the_bit_width() -> None:
    b = xs.XlaBuilder("shift")
    x, s = _p(b, 0, np.int8, (5,)), _p(b, 1, np.int8, (5,))
    comp = b.build([ops.ShiftLeft(x, s), ops.ShiftRightLogical(x, s), ops.ShiftRightArithmetic(x, s)])
    xv = np.array([1, -128, -1, 64, -3], np.int8)
    sv = np.array([1, 7, 8, 9, -1], np.int8)
    left, logical, arith = _both(comp, xv, sv)
    np.testing.assert_array_equal(left, [2, 0, 0, 0, 0])
    np.testing.assert_array_equal(logical, [0, 1, 0, 0, 0])
    np.testing.assert_array_equal(arith, [0, -1, -1, 0, -1])


def test_float_to_int_conversion_saturates_and_nan_is_zero() -> None:
    b = xs.XlaBuilder("cvt")
    x = _p(b, 0, np.float32, (6,))
    comp = b.build(ops.ConvertElementType(x, np.int8))
    (got,) = _both(comp, np.array([1.9, -1.9, 300, -300, np.nan, 127.5], np.float32))
    np.testing.assert_array_equal(got, [1, -1, 127, -128, 0, 127])


def test_dynamic_slice_start_is_clamped_and_total_order_compare() -> None:
    b = xs.XlaBuilder("ds")
    x, i = _p(b, 0, np.float32, (5,)), _p(b, 1, np.int32, ())
    y = _p(b, 2, np.float32, (4,))
    comp = b.build([ops.DynamicSlice(x, [i], [3]), ops.Compare(y, ops.Constant(b, np.float32(0)), "LT",
                                                               compare_type="TOTALORDER")])
    sl, lt = _both(comp, np.arange(5, dtype=np.float32), np.int32(4), np.array([-0.0, 0.0, np.nan, -np.nan],
                                                                                   np.float32))
    np.testing.assert_array_equal(sl, [2, 3, 4])  # start 4 clamped to 5 - 3
    np.testing.assert_array_equal(lt, [True, False, False, True])  # -0 < 0; -NaN below everything


def test_bf16_ops_round_once_from_the_exact_value() -> None:
    b = xs.XlaBuilder("bf16")
    x, y = _p(b, 0, xs.bfloat16, (3,)), _p(b, 1, xs.bfloat16, (3,))
    comp = b.build([ops.Add(x, y), ops.Mul(x, y)])
    bf = np.dtype(xs.bfloat16)
    xv = np.array([1.0, 3.0, 1e3], bf)
    yv = np.array([2.0**-8, 2.0**-7, 3.0], bf)
    add, mul = _both(comp, xv, yv)
    want_add = (xv.astype(np.float64) + yv.astype(np.float64)).astype(bf)
    np.testing.assert_array_equal(add.view(np.uint16), want_add.view(np.uint16))
    np.testing.assert_array_equal(mul.view(np.uint16), (xv.astype(np.float64) * yv.astype(np.float64)).astype(bf)
                                  .view(np.uint16))


def test_compare_against_a_device_and_recorded_arrays() -> None:
    b = xs.XlaBuilder("f")
    x = _p(b, 0, np.float32, (3,))
    comp = b.build(ops.Tanh(x))
    a = np.array([0.1, -2.0, 5.0], np.float32)
    assert xs.compare(comp, [a], against="cpu:0").ok
    wrong = np.tanh(a)
    wrong[1] += 0.01
    report = xs.compare(comp, [a], against=[wrong])
    assert not report.ok and report.outputs[0].first_mismatch == (1,) and report.outputs[0].mismatches == 1
    assert report.outputs[0].max_abs == pytest.approx(0.01, rel=1e-3)


def test_cli_compare(tmp_path: Path) -> None:
    import json

    from tests.test_cli import cli

    ins, outs = recorded("dumps/gru_scan")
    np.savez(tmp_path / "in.npz", **{str(i): a for i, a in enumerate(ins)})
    np.savez(tmp_path / "out.npz", **{f"output_{i}": a for i, a in enumerate(outs)})
    dump = str(DATA / "dumps/gru_scan/module.before_optimizations.txt")
    code, out, err = cli("compare", dump, "--inputs", str(tmp_path / "in.npz"), "--json", str(tmp_path / "r.json"))
    assert code == 0 and "MATCH" in out, (out, err)
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["match"] and len(doc["outputs"]) == 7 and all(o["mismatches"] == 0 for o in doc["outputs"])
    code, out, err = cli("compare", dump, "--inputs", str(tmp_path / "in.npz"), "--against", str(tmp_path / "out.npz"))
    assert code == 0 and "the outputs in" in out, (out, err)
    wrong = list(outs)
    wrong[1] = wrong[1] + np.float32(1)
    np.savez(tmp_path / "wrong.npz", **{f"output_{i}": a for i, a in enumerate(wrong)})
    code, out, err = cli("compare", dump, "--inputs", str(tmp_path / "in.npz"), "--against",
                         str(tmp_path / "wrong.npz"))
    assert code == 1 and "DIVERGENCE" in out and "8  [0, 0]" in out, out
    code, out, err = cli("compare", str(DATA / "dumps/int_indexing/module.cpu_after_optimizations.txt"),
                         "--random-inputs")  # XLA:CPU's TopK custom call has a rule
    assert code == 0 and "MATCH" in out, (out, err)
    code, out, err = cli("compare", dump, "--inputs", str(tmp_path / "in.npz"), "--xla-flags",
                         "--xla_disable_hlo_passes=algsimp --xla_cpu_enable_fast_math=false")
    assert code == 0 and "MATCH" in out, (out, err)
    code, _, err = cli("compare", dump, "--random-inputs", "--xla-flags", "--fast")
    assert code == 2 and "'--fast' is not an XLA flag" in err, err
    code, _, err = cli("compare", dump, "--inputs", str(tmp_path / "in.npz"), "--against", "refernce.txt")
    assert code == 2 and "expected 'reference', a device" in err, err


def test_evaluate_checks_its_arguments() -> None:
    b = xs.XlaBuilder("f")
    comp = b.build(ops.Neg(_p(b, 0, np.float32, (2,))))
    with pytest.raises(xs.DTypeError, match="argument 0 has element type float64"):
        xs.evaluate(comp, np.zeros(2))
    with pytest.raises(xs.ShapeError, match=r"argument 0 has shape \(3,\)"):
        xs.evaluate(comp, np.zeros(3, np.float32))
    with pytest.raises(xs.ShapeError, match="takes 1 arguments, got 2"):
        xs.evaluate(comp, np.zeros(2, np.float32), np.zeros(2, np.float32))
    (got,) = xs.evaluate(comp, np.array([1.5, -2.0], np.float32))
    np.testing.assert_array_equal(got, [-1.5, 2.0])


# -- what a new user's trial found: no false alarms on correct programs ---------------------------------------------
def test_no_false_alarm_on_bf16_computed_then_widened() -> None:
    """(x.bf16 * w.bf16).f32: XLA keeps the product in f32 unless told not to (excess precision);
    against the reference it compiles with xla_allow_excess_precision=false."""
    b = xs.XlaBuilder("mixed")
    x, w = _p(b, 0, np.float32, (256,)), _p(b, 1, np.float32, (256,))
    bf = ops.Mul(ops.ConvertElementType(x, xs.bfloat16), ops.ConvertElementType(w, xs.bfloat16))
    comp = b.build(ops.ConvertElementType(bf, np.float32))
    rng = np.random.default_rng(0)
    a, c = rng.standard_normal(256).astype(np.float32), rng.standard_normal(256).astype(np.float32)
    report = xs.compare(comp, [a, c])
    assert report.ok, str(report)
    (ref,) = xs.evaluate(comp, a, c)
    want = (a.astype(xs.bfloat16).astype(np.float64) * c.astype(xs.bfloat16).astype(np.float64)).astype(
        xs.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(ref, want)


def test_no_false_alarm_when_a_sum_cancels() -> None:
    """mean(x*x) - mean(x)**2 with x near 1e4: the true value is about 1, and two correct f32 orders
    of the sum give 0 and -8 (one ulp of 1e8 is 8); the tolerance follows the terms, not the result."""
    b = xs.XlaBuilder("variance")
    x = _p(b, 0, np.float32, (1000,))
    n = ops.Constant(b, np.float32(1000))
    add = xs.XlaBuilder("add")
    add_c = add.build(ops.Add(_p(add, 0, np.float32, ()), _p(add, 1, np.float32, ())))
    zero = ops.Constant(b, np.float32(0))
    sq = ops.Div(ops.Reduce(b, [ops.Mul(x, x)], [zero], add_c, [0]), n)
    m = ops.Div(ops.Reduce(b, [x], [zero], add_c, [0]), n)
    comp = b.build(ops.Sub(sq, ops.Mul(m, m)))
    a = (1e4 + np.random.default_rng(1).standard_normal(1000)).astype(np.float32)
    report = xs.compare(comp, [a])
    assert report.ok, str(report)


@pytest.mark.parametrize(("seed", "layers", "width"), [(0, 4, 64), (1, 4, 64), (2, 8, 16), (4, 4, 64)])
def test_no_false_alarm_when_a_rounding_error_travels_through_later_ops(seed: int, layers: int, width: int) -> None:
    """tanh(dot(h, w)) layer after layer, XLA:CPU computing right: a dot whose terms cancel hands its
    rounding error (of the size of its terms) to the tanh after it, which keeps it, then to the next
    dot. Each of these seeds made compare cry wolf (up to 57,759 ulp) when an output's tolerance
    followed only the op that made it; the error scales now travel with the values."""
    rng = np.random.default_rng(seed)
    b = xs.XlaBuilder("tanh_chain")
    h = _p(b, 0, np.float32, (4, width))
    args = [rng.standard_normal((4, width)).astype(np.float32)]
    for i in range(layers):
        h = ops.Tanh(ops.Dot(h, _p(b, i + 1, np.float32, (width, width))))
        args.append(rng.standard_normal((width, width)).astype(np.float32))
    report = xs.compare(b.build(h), args)
    assert report.ok, str(report)
    # what travels is the dots' rounding, not a free pass: the carried bound (XLA's real error here
    # is 1e-5..3e-5) stays below 2e-3, and an error of 0.05 in one element is found
    from xlasdk.reference._evaluator import run_reference

    want, scales = run_reference(b.build(h), args)
    bound = getattr(scales[0], "bound", None)
    assert bound is not None and bound.shape == want[0].shape
    assert 0 < float(bound.max()) < 2e-3, float(bound.max())
    got = xs.compile(b.build(h), "cpu:0")(*args).to_numpy()
    nudged = got.copy()
    nudged[0, 0] += np.float32(0.05)
    from xlasdk.reference._report import compare_one

    assert compare_one(0, nudged, want[0], None, None, scales[0]).mismatches == 1


def test_signed_zeros_and_subnormals() -> None:
    b = xs.XlaBuilder("zeros")
    x, y = _p(b, 0, np.float32, (2,)), _p(b, 1, np.float32, (2,))
    comp = b.build([ops.Max(x, y), ops.Min(x, y), ops.Sign(x), ops.Round(x), ops.Mul(y, y)])
    xv = np.array([0.0, -0.0], np.float32)
    yv = np.array([-0.0, 1e-20], np.float32)
    mx, mn, sg, rd, tiny = xs.evaluate(comp, xv, yv)
    assert list(np.signbit(mx)) == [False, False]  # max(+0, -0) = +0; max(-0, 1e-20) = 1e-20
    assert list(np.signbit(mn)) == [True, True]  # min(+0, -0) = -0; min(-0, 1e-20) = -0
    assert list(np.signbit(sg)) == [False, True] and list(np.signbit(rd)) == [False, True]
    assert tiny[1] == np.float32(1e-20) * np.float32(1e-20) and tiny[1] != 0  # a subnormal, exactly
    assert xs.compare(comp, [xv, yv]).ok  # XLA:CPU flushes the subnormal to zero: not a divergence


def test_recorded_outputs_of_raw_bytes_and_wrong_shapes() -> None:
    b = xs.XlaBuilder("bf")
    x = _p(b, 0, xs.bfloat16, (3,))
    comp = b.build(ops.Neg(x))
    a = np.array([1.5, -2.0, 3.0], xs.bfloat16)
    raw = (-a).view("V2")  # what np.savez / np.load give back for bf16
    assert xs.compare(comp, [a], against=[raw]).ok
    wrong = r"given output 0 is float64\[3\], the program's output 0 is bfloat16\[3\]"
    with pytest.raises(xs.XlaSdkError, match=wrong):
        xs.compare(comp, [a], against=[np.zeros(3)])


def test_complex_constants_never_crash() -> None:
    b = xs.XlaBuilder("cplx")
    x = _p(b, 0, np.complex64, (2,))
    comp = b.build(ops.Mul(x, ops.Constant(b, np.complex64(1 + 2j))))
    a = np.array([1 + 1j, -2j], np.complex64)
    try:
        (got,) = xs.evaluate(comp, a)
    except xs.UnsupportedOpError as e:
        assert "complex" in str(e).lower() or "C64" in str(e)
    else:
        np.testing.assert_allclose(got, a * np.complex64(1 + 2j), rtol=1e-6)
        assert xs.compare(comp, [a]).ok


def test_a_bf16_matmul_upstream_does_not_hide_a_wrong_f32_loss() -> None:
    """A new user's find: an f32 loss 16% wrong (XLA:CPU's ``x / 2**127``: logits flushed to 0)
    below a bf16 matmul was a MATCH, because every bf16 op was allowed a whole bf16 ulp of its own
    and the loss's carried bound grew to 0.13. Ops XLA rounds correctly now add no rounding of
    their own, and the others one ulp of their type only next to a rounding boundary."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    big = np.float32(2.0**127)

    def loss(w: Any, x: Any) -> Any:
        h = jnp.dot(x.astype(jnp.bfloat16), w.astype(jnp.bfloat16)).astype(jnp.float32) + 1.0
        logits = (h / big) * big  # XLA:CPU: h * (1/big), a subnormal flushed to 0
        return jax.nn.logsumexp(logits, axis=-1).mean()

    rng = np.random.default_rng(8)
    w, x = rng.standard_normal((16, 10)).astype(np.float32), rng.standard_normal((8, 16)).astype(np.float32)
    comp = xs.XlaComputation.from_stablehlo(jax.jit(loss).lower(w, x).as_text())
    report = xs.compare(comp, [w, x])
    got = xs.compile(comp, "cpu:0")(w, x).to_numpy()
    (want,) = xs.evaluate(comp, w, x)
    if abs(float(got) - float(want)) < 1e-3:  # an XLA that computes it right: nothing to find
        assert report.ok, str(report)
    else:
        assert not report.ok, str(report)

    def right(w: Any, x: Any) -> Any:  # the same loss without the division: computed right, a match
        h = jnp.dot(x.astype(jnp.bfloat16), w.astype(jnp.bfloat16)).astype(jnp.float32) + 1.0
        return jax.nn.logsumexp(h, axis=-1).mean()

    assert xs.compare(xs.XlaComputation.from_stablehlo(jax.jit(right).lower(w, x).as_text()), [w, x]).ok


def test_an_unstable_sort_with_payloads_is_evaluated_where_no_keys_tie() -> None:
    """Where no two keys tie, a sort that is not stable orders its payloads one way only: the
    evaluator computes it (it used to refuse every such sort); where keys tie it refuses, naming it."""
    def build(comparator: Any = None) -> xs.XlaComputation:
        b = xs.XlaBuilder("unstable")
        k = _p(b, 0, np.float32, (2, 5), "k")
        v = _p(b, 1, np.int32, (2, 5), "v")
        s = ops.Sort(b, [k, v], dimension=1, comparator=comparator)  # is_stable=False
        return b.build(ops.GetTupleElement(s, 1))

    keys = np.array([[3, 1, 2, 5, 4], [0.5, -1, 7, 2, -3]], np.float32)
    vals = np.arange(10, dtype=np.int32).reshape(2, 5)
    (got,) = xs.evaluate(build(), keys, vals)
    np.testing.assert_array_equal(got, np.take_along_axis(vals, np.argsort(keys, axis=1), axis=1))
    descending = build(lambda a, c, x, y: ops.Gt(a, c))
    (got,) = xs.evaluate(descending, keys, vals)
    np.testing.assert_array_equal(got, np.take_along_axis(vals, np.argsort(-keys, axis=1), axis=1))
    assert xs.compare(build(), [keys, vals]).ok  # XLA agrees
    tied = keys.copy()
    tied[1, 3] = tied[1, 0]
    with pytest.raises(xs.UnsupportedOpError, match="not stable and carries payloads, on keys that tie"):
        xs.evaluate(build(), tied, vals)
