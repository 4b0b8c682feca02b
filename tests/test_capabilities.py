"""The capability table (xlasdk/runtime/capabilities.py): every refusal row is backed by XLA.

For each row of the TPU table a probe program: the table refuses it (UnsupportedOnDeviceError from
``xs.compile`` for ``xs.topology("v5e:1x1")``, naming the op, its source line, XLA's words and what
to do), and XLA:TPU compiling the same module without the table (in xlasdk's worker) really fails
or aborts. Where the installed libtpu no longer fails the row's test skips, naming the release
(the row must then be bounded by ``fixed_in``). Beside each row, programs of the same ops that
XLA:TPU compiles are not refused (f64 add, c64 arithmetic, s2[16,16], HIGHEST accuracy...).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import xlasdk as xs
from tests.xla_faults import release
from xlasdk import ops
from xlasdk._jaxlib import isolated
from xlasdk.program.computation import compile_request
from xlasdk.runtime.capabilities import TABLE, Platform, Refusal

P = xs.PrimitiveType
RA = xs.ResultAccuracy
S = xs.Shape.array_shape


def _libtpu_or_skip(topology: str = "v5e:1x1") -> xs.Device:
    try:
        return xs.topology(topology).devices[0]
    except xs.PluginError as e:
        pytest.skip(f"no libtpu: {e}")


def xla_tpu_says(comp: xs.XlaComputation, timeout: float = 300, topology: str = "v5e:1x1") -> str | None:
    """What XLA:TPU says compiling ``comp`` for ``topology``'s first device without the capability
    table (in the worker: an abort ends it, not pytest): its error or death, None when it compiles."""
    text = compile_request(comp).module_text
    try:
        isolated.request("xlasdk.runtime.topology:compile_for_topology_in_worker", text, topology, [0], 1, 1, (),
                         "probe", timeout=timeout)
    except isolated.Failed as e:
        return e.message
    except isolated.WorkerDied as e:
        return f"did not finish within {timeout:g} s" if e.timed_out else f"XLA aborted ({e.reason})"
    return None


def _unary(et: P, dims: tuple[int, ...], fn: Callable[[xs.XlaOp], object]) -> xs.XlaComputation:
    b = xs.XlaBuilder("probe")
    fn(ops.Parameter(b, 0, S(et, dims)))
    return b.build()


def _all_reduce(et: P, reducer: str) -> xs.XlaComputation:
    b = xs.XlaBuilder("probe")
    p = ops.Parameter(b, 0, S(et, (8,)))
    sb = xs.XlaBuilder("r")
    getattr(ops, reducer)(ops.Parameter(sb, 0, S(et, ())), ops.Parameter(sb, 1, S(et, ())))
    ops.AllReduce(p, sb.build())
    return b.build()


def _rng(et: P) -> xs.XlaComputation:
    b = xs.XlaBuilder("probe")
    d = xs.etype_to_dtype(et)
    ops.RngUniform(ops.Constant(b, d.type(0)), ops.Constant(b, d.type(1)), S(et, (4, 4)))
    return b.build()


def _bits(algorithm: str, n: int) -> xs.XlaComputation:
    b = xs.XlaBuilder("probe")
    ops.RngBitGenerator(algorithm, ops.Parameter(b, 0, S(P.U64, (n,))), S(P.U32, (4, 64)))
    return b.build()


def _fft(et: P) -> xs.XlaComputation:
    return _unary(et, (2, 8), lambda x: ops.Fft(x, xs.FftType.RFFT if et in (P.F64, P.F32) else xs.FftType.FFT, [8]))


def _reduce_scatter(et: P) -> xs.XlaComputation:
    b = xs.XlaBuilder("probe")
    p = ops.Parameter(b, 0, S(et, (4, 6)))
    sb = xs.XlaBuilder("r")
    ops.Add(ops.Parameter(sb, 0, S(et, ())), ops.Parameter(sb, 1, S(et, ())))
    ops.ReduceScatter(p, sb.build(), 0, 1)
    return b.build()


def _topk(dims: tuple[int, ...], k: int) -> xs.XlaComputation:
    b = xs.XlaBuilder("probe")
    p = ops.Parameter(b, 0, S(P.F32, dims))
    out = dims[:-1] + (k,)
    ops.CustomCall(b, "TopK", [p], xs.Shape.tuple_shape([S(P.F32, out), S(P.S32, out)]))
    return b.build()


def _lapack() -> xs.XlaComputation:
    b = xs.XlaBuilder("probe")
    ops.LU(ops.Parameter(b, 0, S(P.F32, (4, 4))))
    return b.build()


def _fma(t: P) -> xs.XlaComputation:
    from xlasdk._jaxlib.opset import FIRST_WITH_EXP2_LOG2_FMA, HAS_EXP2_LOG2_FMA

    if not HAS_EXP2_LOG2_FMA:  # no stablehlo.fma: xlasdk lowers f32 fma itself and refuses f64 (ops/fma.py)
        release = xs.jaxlib_version_info().release
        pytest.skip(f"jaxlib {release} has no stablehlo.fma (first in {FIRST_WITH_EXP2_LOG2_FMA})")
    return _unary(t, (8,), lambda x: ops.Fma(x, x, x))


#: row name -> (a program it refuses, programs of the same ops it must not refuse)
PROBES: dict[str, tuple[Callable[[], xs.XlaComputation], list[Callable[[], xs.XlaComputation]]]] = {
    "tpu-int2-tile": (lambda: _unary(P.S2, (8, 128), lambda x: ops.Add(x, x)),
                      [lambda: _unary(P.S2, (16, 16), lambda x: ops.Add(x, x)),
                       lambda: _unary(P.U2, (17, 128), lambda x: ops.Add(x, x))]),
    "tpu-lapack": (_lapack, []),
    "tpu-int2-v4": (lambda: _unary(P.S2, (64, 256), lambda x: ops.Add(x, x)), []),
    "tpu-fft-x64": (lambda: _fft(P.C128), [lambda: _fft(P.C64), lambda: _fft(P.F32)]),
    "tpu-rng-f64": (lambda: _rng(P.F64), [lambda: _rng(P.F32)]),
    "tpu-dot-s64": (lambda: _unary(P.S64, (4, 4), lambda x: ops.Dot(x, x)),
                    [lambda: _unary(P.F64, (4, 4), lambda x: ops.Dot(x, x)),
                     lambda: _unary(P.C128, (4,), lambda x: ops.Dot(x, x))]),
    "tpu-all-reduce-x64-not-sum": (lambda: _all_reduce(P.F64, "Max"),
                                   [lambda: _all_reduce(P.F64, "Add"), lambda: _all_reduce(P.F32, "Max")]),
    "tpu-reduce-scatter-x64": (lambda: _reduce_scatter(P.F64),
                               [lambda: _reduce_scatter(P.F32), lambda: _reduce_scatter(P.S64)]),
    "tpu-topk-rank1": (lambda: _topk((7,), 3), [lambda: _topk((4, 10), 3)]),
    "tpu-f8-erf": (lambda: _unary(P.F8E4M3FN, (24,), ops.Erf),
                   [lambda: _unary(P.F8E4M3FN, (24,), ops.Exp), lambda: _unary(P.BF16, (24,), ops.Erf)]),
    "tpu-reduce-precision-f64": (lambda: _unary(P.F64, (16,), lambda x: ops.ReducePrecision(x, 8, 23)),
                                 [lambda: _unary(P.F32, (16,), lambda x: ops.ReducePrecision(x, 5, 10))]),
    "tpu-fma-f64": (lambda: _fma(P.F64), [lambda: _fma(P.F32)]),
    "tpu-rng-bit-generator-default-state": (lambda: _bits("DEFAULT", 3),
                                            [lambda: _bits("DEFAULT", 2), lambda: _bits("THREE_FRY", 2)]),
    "tpu-convert-c128": (lambda: _unary(P.F32, (16,), lambda x: ops.ConvertElementType(x, P.C128)),
                         [lambda: _unary(P.F32, (16,), lambda x: ops.ConvertElementType(x, P.C64))]),
    "tpu-c128-math": (lambda: _unary(P.C128, (16,), ops.Sin),
                      [lambda: _unary(P.C128, (16,), lambda x: ops.Add(x, x)), lambda: _unary(P.C64, (16,), ops.Sin)]),
    "tpu-c128-reverse-rank3": (lambda: _unary(P.C128, (2, 3, 4), lambda x: ops.Rev(x, [0])),
                               [lambda: _unary(P.C128, (3, 4), lambda x: ops.Rev(x, [0])),
                                lambda: _unary(P.C64, (2, 3, 4), lambda x: ops.Rev(x, [0]))]),
    "tpu-c128-qr": (lambda: _unary(P.C128, (3, 6), lambda x: ops.QR(x, full_matrices=False)),
                    [lambda: _unary(P.C64, (3, 6), lambda x: ops.QR(x, full_matrices=False))]),
    "tpu-c128-cholesky": (lambda: _unary(P.C128, (3, 5, 5), ops.Cholesky),
                          [lambda: _unary(P.C64, (3, 5, 5), ops.Cholesky),
                           lambda: _unary(P.F64, (3, 5, 5), ops.Cholesky)]),
    "tpu-f64-nextafter": (lambda: _unary(P.F64, (16,), lambda x: ops.NextAfter(x, x)),
                          [lambda: _unary(P.F32, (16,), lambda x: ops.NextAfter(x, x))]),
    "tpu-accuracy-tolerance": (
        lambda: _unary(P.F32, (4,), lambda x: ops.Exp(x, result_accuracy=RA(RA.Mode.TOLERANCE, atol=1e-5, ulps=2))),
        [lambda: _unary(P.F32, (4,), lambda x: ops.Exp(x, result_accuracy=RA(RA.Mode.HIGHEST))),
         lambda: _unary(P.F32, (4,), lambda x: ops.Log(x, result_accuracy=RA(RA.Mode.TOLERANCE, atol=1e-5, ulps=2)))]),
    "tpu-accuracy-cbrt": (lambda: _unary(P.F32, (4,), lambda x: ops.Cbrt(x, result_accuracy=RA(RA.Mode.HIGHEST))),
                          [lambda: _unary(P.F32, (4,), ops.Cbrt)]),
}


def test_every_row_has_a_probe() -> None:
    assert sorted(PROBES) == sorted(r.name for r in TABLE if r.platform is Platform.TPU)


@pytest.mark.parametrize("name", sorted(PROBES))
def test_row_refuses_what_xla_tpu_fails_on(name: str) -> None:
    row = next(r for r in TABLE if r.name == name)
    topology = "v4:2x2x1" if row.generations == ("v4",) else "v5e:1x1"
    dev = _libtpu_or_skip(topology)
    caps = xs.capabilities(dev)
    comp = PROBES[name][0]()
    if not row.applies_to(caps.release, caps.generation):  # fixed in this release: it must compile
        assert all(r.row is not row for r in caps.refusals(comp))
        assert xla_tpu_says(comp, topology=topology) is None, f"row {name}: fixed_in {row.fixed_in} is wrong"
        return
    said = xla_tpu_says(comp, topology=topology)
    if said is None:
        pytest.skip(f"XLA:TPU of {release()} compiles the probe of row {name}: bound the row with fixed_in")
    assert {r.row.name for r in caps.refusals(comp)} == {name}
    if name == "tpu-lapack":  # xs.compile lowers LAPACK calls for the TPU first (runtime/_platform_lowering.py)
        return
    with pytest.raises(xs.UnsupportedOnDeviceError) as info:
        xs.compile(comp, device=dev)
    assert isinstance(info.value, xs.CompileError)
    msg = str(info.value)
    assert f"{row.what} is not supported on {caps.device}" in msg and row.instead in msg, msg
    first = next(r for r in info.value.refusals if r.opcode != "parameter")  # type: ignore[attr-defined]
    assert f"fails on {first.instruction} at test_capabilities.py:" in msg and first.opcode in msg, msg
    # XLA's words are quoted as measured on a probe (their shapes are the probe's), not as this program's
    assert "what it said of such a program when measured: " in msg, msg
    assert {r.row.name for r in info.value.refusals} == {name}  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(n for n, p in PROBES.items() if p[1]))
def test_row_does_not_refuse_what_xla_tpu_compiles(name: str) -> None:
    dev = _libtpu_or_skip()
    for make in PROBES[name][1]:
        comp = make()
        assert xs.capabilities(dev).refusals(comp) == [], comp.as_hlo_text()
        assert xla_tpu_says(comp) is None, comp.as_hlo_text()


def test_two_bit_integers_of_full_tiles_are_refused_on_v4_only() -> None:
    """s2[64,256]: XLA:TPU of v5e compiles it, v4's has no 2-bit vector unpacking."""
    comp = PROBES["tpu-int2-v4"][0]()
    v5e = _libtpu_or_skip()
    assert xs.capabilities(v5e).refusals(comp) == []
    assert xla_tpu_says(comp) is None
    assert {r.row.name for r in xs.capabilities(_libtpu_or_skip("v4:2x2x1")).refusals(comp)} == {"tpu-int2-v4"}


def test_f64_s64_c64_arithmetic_is_not_refused() -> None:
    """The X64 rewriter compiles 64-bit and complex arithmetic: the table is no 'no f64 on the TPU'."""
    dev = _libtpu_or_skip()
    for et in (P.F64, P.S64, P.U64, P.C64):
        comp = _unary(et, (16,), lambda x: ops.Mul(ops.Add(x, x), x))
        assert xs.capabilities(dev).refusals(comp) == []
        assert isinstance(xs.compile(comp, device=dev), xs.CompileOnlyExecutable)


def test_cpu_refuses_nothing() -> None:
    caps = xs.capabilities("cpu:0")
    assert caps.platform is Platform.CPU and caps.rows == ()
    for make, _ in PROBES.values():
        if make is _lapack:
            continue
        comp = make()
        assert caps.refusals(comp) == []
    out = xs.compile(_rng(P.F64), device="cpu:0")()
    assert np.asarray(out.to_numpy()).dtype == np.float64


def test_refusal_inside_a_region_names_it() -> None:
    """An op inside a loop body is found too."""
    dev = _libtpu_or_skip()
    b = xs.XlaBuilder("loop")
    x = ops.Parameter(b, 0, S(P.S64, (4, 4)))
    cb = xs.XlaBuilder("cond")
    ops.Parameter(cb, 0, S(P.S64, (4, 4)))
    ops.Constant(cb, np.bool_(False))
    bb = xs.XlaBuilder("body")
    y = ops.Parameter(bb, 0, S(P.S64, (4, 4)))
    ops.Dot(y, y)
    ops.While(cb.build(), bb.build(), x)
    found = xs.capabilities(dev).refusals(b.build())
    assert [f.row.name for f in found] == ["tpu-dot-s64"], found


def test_custom_call_available() -> None:
    dev = _libtpu_or_skip()
    assert not xs.capabilities(dev).custom_call_available("lapack_sgetrf_ffi")
    assert xs.capabilities("cpu:0").custom_call_available("lapack_sgetrf_ffi")


def test_op_tests_on_a_tpu_skip_by_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """tests.helpers.run on a TPU (TEST_DEVICE) skips a program the table refuses, with its reason,
    and goes on with one it does not."""
    import tests.helpers as helpers

    monkeypatch.setattr(helpers, "TEST_DEVICE", _libtpu_or_skip())
    with pytest.raises(pytest.skip.Exception, match="capability table: an f64 rng is not supported on TPU v5e"):
        helpers.on_test_device(_rng(P.F64))
    helpers.on_test_device(_unary(P.F64, (16,), lambda x: ops.Add(x, x)))  # no skip


@pytest.mark.parametrize("dialect", ["stablehlo", "hlo"])
@pytest.mark.parametrize("case", ["fft", "reduce_precision"])
def test_refusal_inside_a_called_function_names_it(case: str, dialect: str) -> None:
    """JAX wraps ``jnp.fft.fft`` and a nested ``jax.jit`` in a private function (``func.call``, an
    HLO ``call``): the op refused there is found and named, before XLA's raw error."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    dev = _libtpu_or_skip()

    def fft(x: object) -> object:
        return jnp.abs(jnp.fft.fft(x))

    def nested(x: object) -> object:
        return jax.jit(lambda y: jax.lax.reduce_precision(y, exponent_bits=11, mantissa_bits=52) * 2)(x) + 1

    f, row, opcode = {"fft": (fft, "tpu-fft-x64", "stablehlo.fft"),
                      "reduce_precision": (nested, "tpu-reduce-precision-f64", "stablehlo.reduce_precision")}[case]
    was = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        text = jax.jit(f).lower(np.zeros(8, np.float64)).as_text(dialect=dialect)
    finally:
        jax.config.update("jax_enable_x64", was)
    assert "call" in text  # the op is in a called function
    comp = xs.XlaComputation.from_stablehlo(text) if dialect == "stablehlo" else xs.XlaComputation.from_hlo_text(text)
    with pytest.raises(xs.UnsupportedOnDeviceError) as info:
        xs.compile(comp, device=dev)
    refusals = [r for r in info.value.refusals if isinstance(r, Refusal)]
    assert len(refusals) == len(info.value.refusals)
    assert row in [f.row.name for f in refusals], refusals
    found = next(f for f in refusals if f.row.name == row)
    assert opcode in str(found) and "in function" in str(found), str(found)


def test_the_table_prints_as_a_table() -> None:
    """``print(xs.capabilities(device))`` is one line per row (a new user got an 8,000-character
    dataclass repr with function addresses)."""
    cpu = xs.capabilities("cpu:0")
    assert str(cpu) == "cpu: no refusals known"
    tpu = xs.capabilities(_libtpu_or_skip())
    lines = str(tpu).splitlines()
    assert lines[0].startswith("TPU v5e: ") and len(lines) == 1 + len(tpu.rows)
    assert all(line.startswith("  ") and " at 0x" not in line for line in lines[1:])
    assert any("f64 rng" in line for line in lines)
