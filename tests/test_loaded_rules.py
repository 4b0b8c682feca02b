"""Loaded modules that the builder refuses are refused at load, never run (issue 31, finding 4).

XLA's verifier lets an FFT whose ``fft_length`` disagrees with its operand through; compiled, it
reads memory outside its operand (``fft_length={8}`` on ``c64[16]``: values from nowhere) or the
FFT library aborts the process (``{32}``). :mod:`xlasdk.formats.rule_check` runs the op table's
own rule on such ops when the worker loads a module. :data:`REFUSED` lists programs, one per kind
of claim the builder's rules refuse, as HLO text: each must be refused at load (or, where XLA's
compiler checks it, by a clean compile error), never compiled into a process abort or a value.
They run in a child process (a regression would kill the test runner).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops
from xlasdk.formats import rule_check

FFT_HLO = """HloModule fft_mismatch

ENTRY main {
  p = c64[16] parameter(0)
  ROOT f = c64[16] fft(p), fft_type=FFT, fft_length={8}
}
"""

FFT_MLIR = """func.func @main(%arg0: tensor<16xcomplex<f32>>) -> tensor<16xcomplex<f32>> {
  %0 = stablehlo.fft %arg0, type = FFT, length = [8] : (tensor<16xcomplex<f32>>) -> tensor<16xcomplex<f32>>
  return %0 : tensor<16xcomplex<f32>>
}
"""

_COMPS = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}

lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=LT
}

"""

Builder = Callable[[xs.XlaBuilder, xs.XlaOp], Any]


def _program(name: str, param: str, root: str, extra: str = "") -> str:
    return f"HloModule {name}\n\n{_COMPS}ENTRY main {{\n  p = {param} parameter(0)\n{extra}  ROOT r = {root}\n}}\n"


def _f32(n: int) -> xs.Shape:
    return xs.Shape.array_shape(xs.PrimitiveType.F32, [n])


def _s32(n: int) -> xs.Shape:
    return xs.Shape.array_shape(xs.PrimitiveType.S32, [n])


def _z(b: xs.XlaBuilder) -> xs.XlaOp:
    return ops.Constant(b, np.float32(0))


#: name -> (HLO text, the builder call of the same op on a parameter of the same shape, which
#: must raise ShapeError / DTypeError; None where the op needs more than one parameter to build).
REFUSED: dict[str, tuple[str, Builder | None]] = {
    "fft_length_short": (_program("a", "c64[16]", "c64[16] fft(p), fft_type=FFT, fft_length={8}"),
                         lambda b, p: ops.Fft(p, "FFT", [8])),
    "fft_length_long": (_program("a", "c64[16]", "c64[16] fft(p), fft_type=FFT, fft_length={32}"),
                        lambda b, p: ops.Fft(p, "FFT", [32])),
    "ifft_length": (_program("a", "c64[16]", "c64[16] fft(p), fft_type=IFFT, fft_length={8}"),
                    lambda b, p: ops.Fft(p, "IFFT", [8])),
    "fft_2d_length": (_program("a", "c64[4,16]", "c64[4,16] fft(p), fft_type=FFT, fft_length={2,16}"),
                      lambda b, p: ops.Fft(p, "FFT", [2, 16])),
    "fft_3d_length": (_program("a", "c64[2,4,8]", "c64[2,4,8] fft(p), fft_type=FFT, fft_length={2,4,4}"),
                      lambda b, p: ops.Fft(p, "FFT", [2, 4, 4])),
    "fft_length_zero": (_program("a", "c64[16]", "c64[16] fft(p), fft_type=FFT, fft_length={0}"),
                        lambda b, p: ops.Fft(p, "FFT", [0])),
    "fft_rank_4": (_program("a", "c64[2,2,2,2]", "c64[2,2,2,2] fft(p), fft_type=FFT, fft_length={2,2,2,2}"),
                   lambda b, p: ops.Fft(p, "FFT", [2, 2, 2, 2])),
    "rfft_length": (_program("a", "f32[16]", "c64[5] fft(p), fft_type=RFFT, fft_length={8}"),
                    lambda b, p: ops.Fft(p, "RFFT", [8])),
    "irfft_length": (_program("a", "c64[9]", "f32[8] fft(p), fft_type=IRFFT, fft_length={8}"),
                     lambda b, p: ops.Fft(p, "IRFFT", [8])),
    "irfft_length_short": (_program("a", "c64[5]", "f32[16] fft(p), fft_type=IRFFT, fft_length={16}"),
                           lambda b, p: ops.Fft(p, "IRFFT", [16])),
    "topk_k_over_size": (_program("a", "f32[4]", "(f32[8], s32[8]) topk(p), k=8, largest=true"),
                         lambda b, p: ops.TopK(p, 8)),
    "reduce_precision_exponent_0": (
        _program("a", "f32[4]", "f32[4] reduce-precision(p), exponent_bits=0, mantissa_bits=3"),
        lambda b, p: ops.ReducePrecision(p, 0, 3)),
    "reduce_precision_mantissa_negative": (
        _program("a", "f32[4]", "f32[4] reduce-precision(p), exponent_bits=5, mantissa_bits=-1"),
        lambda b, p: ops.ReducePrecision(p, 5, -1)),
    "dynamic_slice_over_size": (
        _program("a", "f32[4]", "f32[8] dynamic-slice(p, s), dynamic_slice_sizes={8}",
                 "  s = s32[] constant(0)\n"),
        lambda b, p: ops.DynamicSlice(p, [0], [8])),
    "cholesky_not_square": (_program("a", "f32[3,4]", "f32[3,4] cholesky(p), lower=true"),
                            lambda b, p: ops.Cholesky(p)),
    "triangular_solve_shapes": (
        _program("a", "f32[3,3]", "f32[3,4] triangular-solve(p, p), left_side=true, lower=true, "
                 "transpose_a=NO_TRANSPOSE"), None),
    "rng_bit_generator_state": (
        _program("a", "u64[1]", "(u64[1], u32[4]) rng-bit-generator(p), algorithm=rng_three_fry"),
        lambda b, p: ops.RngBitGenerator("THREE_FRY", p, xs.Shape.array_shape(xs.PrimitiveType.U32, [4]))),
    "rng_bit_generator_philox_state": (
        _program("a", "u64[1]", "(u64[1], u32[4]) rng-bit-generator(p), algorithm=rng_philox"),
        lambda b, p: ops.RngBitGenerator("PHILOX", p, xs.Shape.array_shape(xs.PrimitiveType.U32, [4]))),
    "slice_stride_0": (_program("a", "f32[4]", "f32[4] slice(p), slice={[0:4:0]}"),
                       lambda b, p: ops.Slice(p, [0], [4], [0])),
    "transpose_not_permutation": (_program("a", "f32[2,3]", "f32[3,2] transpose(p), dimensions={0,0}"),
                                  lambda b, p: ops.Transpose(p, [0, 0])),
    "broadcast_dimension_size": (_program("a", "f32[3]", "f32[2,3] broadcast(p), dimensions={0}"),
                                 lambda b, p: ops.BroadcastInDim(p, [2, 3], [0])),
    "get_dimension_size_rank": (_program("a", "f32[4]", "s32[] get-dimension-size(p), dimensions={3}"),
                                lambda b, p: ops.GetDimensionSize(p, 3)),
    "pad_negative_size": (
        _program("a", "f32[4]", "f32[0] pad(p, z), padding=-3_-3", "  z = f32[] constant(0)\n"),
        lambda b, p: ops.Pad(p, _z(b), [(-3, -3, 0)])),
    "sort_dimension": (_program("a", "f32[4]", "f32[4] sort(p), dimensions={1}, to_apply=lt"),
                       lambda b, p: ops.Sort(b, p, 1)),
    "collective_permute_duplicate_source": (
        _program("a", "f32[4]", "f32[4] collective-permute(p), source_target_pairs={{0,0},{0,0}}"),
        lambda b, p: ops.CollectivePermute(p, [(0, 0), (0, 0)])),
    "cbrt_complex": (_program("a", "c64[4]", "c64[4] cbrt(p)"), lambda b, p: ops.Cbrt(p)),
    "remainder_complex": (_program("a", "c64[4]", "c64[4] remainder(p, p)"), lambda b, p: ops.Rem(p, p)),
    "rng_uniform_pred": (_program("a", "pred[]", "pred[4] rng(p, p), distribution=rng_uniform"),
                         lambda b, p: ops.RngUniform(p, p, xs.Shape.array_shape(xs.PrimitiveType.PRED, [4]))),
    "custom_call_topk_over_size": (
        _program("a", "f32[4]", '(f32[8], s32[8]) custom-call(p), custom_call_target="TopK"'),
        lambda b, p: ops.CustomCall(b, "TopK", [p], xs.Shape.tuple_shape([_f32(8), _s32(8)]))),
    "custom_call_slice_to_dynamic": (
        _program("a", "f32[4]", 'f32[4] custom-call(p), custom_call_target="SliceToDynamic"'),
        lambda b, p: ops.CustomCall(b, "SliceToDynamic", [p], _f32(4))),
    "custom_call_onednn": (
        _program("a", "f32[4]", 'f32[4] custom-call(p), custom_call_target="__onednn$matmul"'),
        lambda b, p: ops.CustomCall(b, "__onednn$matmul", [p], _f32(4))),
    "custom_call_sharding_shape": (
        _program("a", "f32[4]", 'f32[8] custom-call(p), custom_call_target="Sharding", sharding={replicated}'),
        lambda b, p: ops.CustomCall(b, "Sharding", [p], _f32(8))),
    "custom_call_lapack_potrf_result": (
        _program("a", "f32[4,4]", '(f32[64,64]{0,1}, s32[]) custom-call(p), custom_call_target="lapack_spotrf_ffi", '
                 "operand_layout_constraints={f32[4,4]{0,1}}, api_version=API_VERSION_TYPED_FFI, "
                 "backend_config={uplo = 76 : ui8}"),
        lambda b, p: ops.CustomCallWithLayout(
            b, "lapack_spotrf_ffi", [p], xs.Shape.tuple_shape([xs.Shape.array_shape(np.float32, (64, 64), (0, 1)),
                                                               xs.Shape.array_shape(np.int32, ())]),
            [p.shape], api_version=4, backend_config={"uplo": np.uint8(76)})),
    "all_to_all_split_count": (
        _program("a", "f32[6]", "f32[6] all-to-all(p), dimensions={0}, replica_groups={{0,1,2,3}}"),
        lambda b, p: ops.AllToAll(p, 0, 0, 4, [[0, 1, 2, 3]])),
}

_PARAMS = {
    "fft_length_short": ("c64", (16,)), "fft_length_long": ("c64", (16,)), "ifft_length": ("c64", (16,)),
    "fft_2d_length": ("c64", (4, 16)), "fft_3d_length": ("c64", (2, 4, 8)), "fft_length_zero": ("c64", (16,)),
    "fft_rank_4": ("c64", (2, 2, 2, 2)), "rfft_length": ("f32", (16,)), "irfft_length": ("c64", (9,)),
    "irfft_length_short": ("c64", (5,)), "cholesky_not_square": ("f32", (3, 4)),
    "rng_bit_generator_state": ("u64", (1,)),
    "rng_bit_generator_philox_state": ("u64", (1,)), "transpose_not_permutation": ("f32", (2, 3)),
    "broadcast_dimension_size": ("f32", (3,)), "all_to_all_split_count": ("f32", (6,)),
    "cbrt_complex": ("c64", (4,)), "remainder_complex": ("c64", (4,)), "rng_uniform_pred": ("pred", ()),
    "maximum_complex": ("c64", (4,)), "minimum_complex": ("c64", (4,)), "topk_pred": ("pred", (4,)),
    "rng_bit_generator_f32": ("u64", (2,)), "compare_lt_complex": ("c64", (4,)), "clamp_complex": ("c64", (4,)),
    "custom_call_lapack_potrf_result": ("f32", (4, 4)),
}

#: Programs the builder refuses that XLA verifies, compiles and runs to the answer its semantics
#: give (no crash, no value from nowhere): the loader lets them through, and this test says so.
RUN_BY_XLA: dict[str, tuple[str, Builder]] = {
    "maximum_complex": (_program("a", "c64[4]", "c64[4] maximum(p, p)"), lambda b, p: ops.Max(p, p)),
    "minimum_complex": (_program("a", "c64[4]", "c64[4] minimum(p, p)"), lambda b, p: ops.Min(p, p)),
    "topk_pred": (_program("a", "pred[4]", "(pred[2], s32[2]) topk(p), k=2, largest=true"),
                  lambda b, p: ops.TopK(p, 2)),
    "compare_lt_complex": (_program("a", "c64[4]", "pred[4] compare(p, p), direction=LT"),
                           lambda b, p: ops.Lt(p, p)),
    "clamp_complex": (_program("a", "c64[4]", "c64[4] clamp(p, p, p)"), lambda b, p: ops.Clamp(p, p, p)),
    "rng_bit_generator_f32": (
        _program("a", "u64[2]", "(u64[2], f32[4]) rng-bit-generator(p), algorithm=rng_three_fry"),
        lambda b, p: ops.RngBitGenerator("THREE_FRY", p, xs.Shape.array_shape(xs.PrimitiveType.F32, [4]))),
}

#: The programs XLA's verifier accepts and its compiler or runtime does not survive (found by this
#: list), which only the loader's rule check (:data:`xlasdk.formats.rule_check.CHECKED`) refuses.
CHECKED_AT_LOAD = {"fft_length_short": "Fft: ", "fft_length_long": "Fft: ", "ifft_length": "Fft: ",
                   "fft_2d_length": "Fft: ", "fft_3d_length": "Fft: ", "fft_length_zero": "Fft: ",
                   "remainder_complex": "Rem: ", "rng_uniform_pred": "RngUniform: ",
                   "custom_call_topk_over_size": "CustomCall: target 'TopK'",
                   "custom_call_slice_to_dynamic": "CustomCall: call_target_name 'SliceToDynamic'",
                   "custom_call_onednn": "CustomCall: call_target_name '__onednn$matmul'",
                   "custom_call_sharding_shape": "CustomCall: target 'Sharding'",
                   "custom_call_lapack_potrf_result": "CustomCall: target 'lapack_spotrf_ffi' on f32[4,4]"}

_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import xlasdk as xs
    out = {}
    for path in sys.argv[1:]:
        name = path.rsplit("/", 1)[-1][:-4]
        print("START", name, flush=True)
        try:
            comp = xs.load_computation(path)
        except xs.FormatError as e:
            out[name] = ["load", str(e)]
            continue
        try:
            exe = xs.compile(comp, device="cpu:0")
        except xs.CompileError as e:
            out[name] = ["compile", str(e)]
            continue
        args = [np.ones(s.dimensions(), s.numpy_dtype()) for s in comp.program_shape().parameter_shapes()]
        out[name] = ["ran", repr(exe(*args))[:200]]
    print("RESULT " + json.dumps(out), flush=True)
""")


def test_the_builder_refuses_every_program_of_the_list() -> None:
    """Each program of :data:`REFUSED` is one the builder's rules refuse (the same op, built)."""
    for name, (_, build) in [*REFUSED.items(), *RUN_BY_XLA.items()]:
        if build is None:
            continue
        dtype, dims = _PARAMS.get(name, ("f32", (4,)))
        b = xs.XlaBuilder(name)
        p = ops.Parameter(b, 0, xs.Shape.array_shape(getattr(xs.PrimitiveType, dtype.upper()), list(dims)), "p")
        with pytest.raises((xs.ShapeError, xs.DTypeError)):
            build(b, p)
            pytest.fail(f"{name}: the builder accepted it")


def _outcomes(tmp_path: Path, names: list[str]) -> dict[str, list[str]]:
    paths = []
    for name in names:
        f = tmp_path / f"{name}.hlo"
        text = (REFUSED.get(name) or RUN_BY_XLA[name])[0]
        f.write_text(text.replace("HloModule a\n", f"HloModule {name}\n", 1))
        paths.append(str(f))
    proc = subprocess.run([sys.executable, "-c", _CHILD, *paths], capture_output=True, text=True, timeout=900,
                          env={**__import__("os").environ, "XLASDK_LOAD_CACHE": "0"})
    started = [ln.split()[1] for ln in proc.stdout.splitlines() if ln.startswith("START ")]
    assert proc.returncode == 0, f"the child died ({proc.returncode}) on {started[-1:]}: {proc.stderr[-2000:]}"
    result = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    got: dict[str, list[str]] = json.loads(result[0][7:])
    return got


def test_every_refused_program_is_refused_at_load_or_compile_never_run(tmp_path: Path) -> None:
    got = _outcomes(tmp_path, list(REFUSED))
    ran = {k: v[1] for k, v in got.items() if v[0] == "ran"}
    assert ran == {}
    assert set(got) == set(REFUSED)
    for name, (stage, message) in got.items():
        assert (f"{name}.hlo" if stage == "load" else repr(name)) in message, (name, message)
        if name in CHECKED_AT_LOAD:  # XLA's verifier lets these through: the rule check refuses them
            assert stage == "load" and CHECKED_AT_LOAD[name] in message and "XLA" in message.rsplit("(", 1)[1], (
                name, message)


def test_programs_xla_runs_correctly_are_run_not_refused(tmp_path: Path) -> None:
    """The builder refuses them too, but XLA runs them without harm: not refused at load (the
    check is for what XLA's compiler or runtime does not survive), and nothing dies."""
    got = _outcomes(tmp_path, list(RUN_BY_XLA))
    want = dict.fromkeys(RUN_BY_XLA, "ran")
    if xs.jaxlib_version_info().xla_client >= 495:  # XLA of jaxlib 0.11+ refuses an ordered complex compare itself
        want["compare_lt_complex"] = "compile"
    assert {k: v[0] for k, v in got.items()} == want, got


def test_fft_length_mismatch_aborts_the_process_when_nothing_checks_it(tmp_path: Path) -> None:
    """The finding: compiled without the load check (the module parsed in the child directly), the
    FFT library aborts the process on ``fft_length={32}`` over ``c64[16]``."""
    code = textwrap.dedent("""
        import numpy as np, xlasdk as xs
        from xlasdk._jaxlib import mlir
        from xlasdk.formats.loaders import _loaded
        from xlasdk.formats.sniff import Format
        text = '''%s'''
        comp = _loaded(mlir.parse_module(text.replace("[8]", "[32]")), "fft", fmt=Format.STABLEHLO_TEXT)
        exe = xs.compile(comp, device="cpu:0")
        print("compiled", flush=True)
        exe(np.ones(16, np.complex64))
        print("ran", flush=True)
    """) % FFT_MLIR
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert "compiled" in proc.stdout
    assert proc.returncode < 0 and "ran" not in proc.stdout, (proc.returncode, proc.stderr[-500:])
    assert "not conformable" in proc.stderr


@pytest.mark.parametrize("kind", ["hlo", "mlir", "pb", "mlirbc"])
def test_the_fft_module_is_refused_at_load_naming_the_instruction(tmp_path: Path, kind: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLASDK_LOAD_CACHE", "0")
    f = tmp_path / f"m.{kind}"
    if kind == "hlo":
        f.write_text(FFT_HLO)
    elif kind == "mlir":
        f.write_text(FFT_MLIR)
    else:  # the same module in the binary formats, written by jaxlib (not bytes xlasdk saved)
        from xlasdk._jaxlib import mlir

        if kind == "pb":
            f.write_bytes(mlir.hlo_proto(mlir.module_to_hlo(FFT_MLIR)))
        else:
            f.write_bytes(mlir.serialize_portable_artifact(mlir.parse_module(FFT_MLIR),
                                                           mlir.stablehlo_minimum_version()))
    with pytest.raises(xs.FormatError) as e:
        xs.load_computation(f)
    msg = str(e.value)
    assert msg.startswith(str(f)), msg
    assert "Fft: operand 'operand' has trailing dimensions [16], but FFT with fft_lengths [8] needs [8]" in msg
    assert "XLA does not check this" in msg
    if kind == "hlo":
        assert "line 5: instruction 'f'" in msg
    if kind == "mlir":
        assert "line 2: Fft" in msg


def test_check_rules_walks_nested_regions_and_skips_text_without_checked_ops() -> None:
    from xlasdk._jaxlib import mlir

    nested = FFT_MLIR.replace(
        "  %0 = stablehlo.fft %arg0, type = FFT, length = [8] : (tensor<16xcomplex<f32>>) -> tensor<16xcomplex<f32>>\n",
        "  %0 = stablehlo.optimization_barrier %arg0 : tensor<16xcomplex<f32>>\n"
    ).replace("  return %0", """  %c = stablehlo.constant dense<true> : tensor<i1>
  %1 = "stablehlo.if"(%c) ({
    %2 = stablehlo.fft %0, type = FFT, length = [8] : (tensor<16xcomplex<f32>>) -> tensor<16xcomplex<f32>>
    stablehlo.return %2 : tensor<16xcomplex<f32>>
  }, {
    stablehlo.return %0 : tensor<16xcomplex<f32>>
  }) : (tensor<i1>) -> tensor<16xcomplex<f32>>
  return %1""")
    module = mlir.parse_module(nested)
    generic = mlir.module_to_text(module, debug_info=True, generic=True)  # the text the worker has
    with pytest.raises(rule_check.RuleViolation) as e:
        rule_check.check_rules(module, generic)
    assert e.value.name == "line 5" and e.value.message.startswith("Fft: ")
    rule_check.check_rules(module, "no checked op is named in this text")  # not walked
    rule_check.check_rules(mlir.parse_module(FFT_MLIR.replace("[8]", "[16]")))  # a valid FFT passes
