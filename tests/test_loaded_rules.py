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
FRS = "xla.sdy.FuncResultSharding"


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
    "custom_call_sdy_func_result_sharding": (
        _program("a", "f32[4]", f'f32[4] custom-call(p), custom_call_target="{FRS}"'),
        lambda b, p: ops.CustomCall(b, FRS, [p], _f32(4))),
    "custom_call_sdy_propagation_barrier_none": (
        _program("a", "f32[4]", 'f32[4] custom-call(), custom_call_target="xla.sdy.PropagationBarrier"'),
        lambda b, p: ops.CustomCall(b, "xla.sdy.PropagationBarrier", [], _f32(4))),
    "custom_call_sdy_sharding_group_two": (
        _program("a", "f32[4]", 'f32[4] custom-call(p, p), custom_call_target="xla.sdy.ShardingGroup"'),
        lambda b, p: ops.CustomCall(b, "xla.sdy.ShardingGroup", [p, p], _f32(4))),
    "custom_call_eigh_none": (
        _program("a", "f32[4,4]", 'f32[4,4] custom-call(), custom_call_target="Eigh"'),
        lambda b, p: ops.CustomCall(b, "Eigh", [], p.shape)),
    "custom_call_qr_none": (
        _program("a", "f32[4,4]", 'f32[4,4] custom-call(), custom_call_target="Qr"'),
        lambda b, p: ops.CustomCall(b, "Qr", [], p.shape)),
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
    "custom_call_lapack_potrf_result": ("f32", (4, 4)), "custom_call_eigh_none": ("f32", (4, 4)),
    "custom_call_qr_none": ("f32", (4, 4)),
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
                   "custom_call_lapack_potrf_result": "CustomCall: target 'lapack_spotrf_ffi' on f32[4,4]",
                   "custom_call_sdy_func_result_sharding": f"CustomCall: target '{FRS}' gives a result of the entry",
                   "custom_call_sdy_propagation_barrier_none":
                       "CustomCall: target 'xla.sdy.PropagationBarrier' takes exactly one operand, got no operand",
                   "custom_call_sdy_sharding_group_two":
                       "CustomCall: target 'xla.sdy.ShardingGroup' takes exactly one operand, got (f32[4], f32[4])",
                   "custom_call_eigh_none": "CustomCall: target 'Eigh' takes one operand (the matrix), got no operand",
                   "custom_call_qr_none": "CustomCall: target 'Qr' takes one operand (the matrix), got no operand"}

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
        module = mlir.parse_module(text.replace("[8]", "[32]"))
        comp = xs.XlaComputation(*_loaded(module, "fft", fmt=Format.STABLEHLO_TEXT))
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


# -- custom calls XLA's verifier accepts and its compiler dies on (jaxlib 0.10.2 and 0.12.1 alike) ---------
#: The standalone reproducers, as found: name -> (HLO text, the line of the call, the rule's words).
#: Each loaded as it is and compiled, XLA:CPU dies: ``attribute_exporter.cc`` (SIGABRT: ``xla.sdy.
#: FuncResultSharding custom call should have frontend attrs``), ``sharding_remover.cc`` (SIGABRT:
#: ``Sharding instruction must have exactly one operand``), the Eigh expander (SIGSEGV).
ABORT_REPRODUCERS = {
    "sdy_func_result_sharding_custom_call": (
        'HloModule sdy_func_result_sharding\n\nENTRY main {\n  x = f32[4,4] parameter(0)\n'
        f'  ROOT r = f32[4,4] custom-call(x), custom_call_target="{FRS}"\n}}\n',
        5, f"CustomCall: target '{FRS}' gives a result of the entry function, so it needs the frontend attribute "
        "xla.sdy.sharding, a #sdy.sharding_per_value holding the result's one sharding"),
    "sdy_propagation_barrier_no_operand_custom_call": (
        'HloModule sdy_propagation_barrier\n\nENTRY main {\n'
        '  ROOT r = f32[4,4] custom-call(), custom_call_target="xla.sdy.PropagationBarrier"\n}\n',
        4, "CustomCall: target 'xla.sdy.PropagationBarrier' takes exactly one operand, got no operand"),
    "sdy_sharding_group_two_operands_custom_call": (
        'HloModule sdy_sharding_group\n\nENTRY main {\n  x = u32[4] parameter(0)\n  y = u32[4] parameter(1)\n'
        '  ROOT r = u64[4] custom-call(x, y), custom_call_target="xla.sdy.ShardingGroup"\n}\n',
        6, "CustomCall: target 'xla.sdy.ShardingGroup' takes exactly one operand, got (u32[4], u32[4])"),
    "eigh_no_operand_custom_call_sigsegv": (
        'HloModule eigh_no_operand\n\nENTRY main {\n  ROOT r = f32[4,4] custom-call(), custom_call_target="Eigh"\n}\n',
        4, "CustomCall: target 'Eigh' takes one operand (the matrix), got no operand"),
}


def _stablehlo(call: str, n_args: int = 1, attrs: str = "", pre: str = "", ret: str = "%0") -> str:
    """A StableHLO module whose ``main`` (``n_args`` f32[4,4] arguments) returns ``call`` (line 3)."""
    args = ", ".join(f"%arg{i}: tensor<4x4xf32>" for i in range(n_args))
    head = f"module @m attributes {{{attrs}}} {{\n" if attrs else "module @m {\n"
    return (f"{head}{pre}  func.func public @main({args}) -> tensor<4x4xf32> {{\n    {call}\n"
            f"    return {ret} : tensor<4x4xf32>\n  }}\n}}\n")


def _sdy_call(target: str, operands: str, attrs: str = "") -> str:
    n = len([o for o in operands.split(",") if o.strip()])
    types = ", ".join(["tensor<4x4xf32>"] * n)
    return f"%0 = stablehlo.custom_call @{target}({operands}) {{{attrs}}} : ({types}) -> tensor<4x4xf32>"


#: The same calls in StableHLO (a loaded module of JAX's form): name -> (text, the rule's words).
ABORT_REPRODUCERS_STABLEHLO = {
    "func_result_sharding": (_stablehlo(_sdy_call(FRS, "%arg0", "has_side_effect = true")),
                             f"line 3: CustomCall: target '{FRS}' gives a result of the entry function"),
    "propagation_barrier_two": (_stablehlo(_sdy_call("xla.sdy.PropagationBarrier", "%arg0, %arg1"), 2),
                                "line 3: CustomCall: target 'xla.sdy.PropagationBarrier' takes exactly one operand"),
    "sharding_group_none": (_stablehlo(_sdy_call("xla.sdy.ShardingGroup", ""), 0),
                            "line 3: CustomCall: target 'xla.sdy.ShardingGroup' takes exactly one operand"),
    "qr_none": (_stablehlo(_sdy_call("Qr", ""), 0), "line 3: CustomCall: target 'Qr' takes one operand"),
}


@pytest.mark.parametrize("name", list(ABORT_REPRODUCERS))
def test_each_abort_reproducer_is_refused_at_load(name: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Each found module loaded (XLA's verifier lets it through) and XLA:CPU died compiling it (in the
    worker): now its load is refused, naming the line, the instruction and what XLA requires."""
    monkeypatch.setenv("XLASDK_LOAD_CACHE", "0")
    text, line, words = ABORT_REPRODUCERS[name]
    f = tmp_path / f"{name}.hlo"
    f.write_text(text)
    with pytest.raises(xs.FormatError) as e:
        xs.load_computation(f)
    msg = str(e.value)
    assert msg.startswith(str(f)) and f"line {line}: instruction 'r': {words}" in msg, msg
    assert "XLA's verifier accepts it" in msg, msg
    with pytest.raises(xs.FormatError, match=f"line {line}: instruction 'r': CustomCall"):
        xs.XlaComputation.from_hlo_text(text)


@pytest.mark.parametrize("name", list(ABORT_REPRODUCERS_STABLEHLO))
def test_each_abort_reproducer_is_refused_at_load_from_stablehlo(name: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A loaded StableHLO module dies the same way (``stablehlo.custom_call @xla.sdy.FuncResultSharding``
    without ``mhlo.frontend_attributes``, returned by main: ``attribute_exporter.cc``): refused alike."""
    monkeypatch.setenv("XLASDK_LOAD_CACHE", "0")
    text, words = ABORT_REPRODUCERS_STABLEHLO[name]
    f = tmp_path / f"{name}.mlir"
    f.write_text(text)
    with pytest.raises(xs.FormatError) as e:
        xs.load_computation(f)
    assert str(e.value).startswith(f"{f}: {words}"), str(e.value)


_PV = '"#sdy.sharding_per_value<[<{}, [{{}}, {{}}]>]>"'
_MESHES = 'mhlo.frontend_attributes = {{xla.sdy.meshes = "{{{}}}"}}'
_X2 = '#sdy.mesh<[\\\\\\"x\\\\\\"=2]>'  # C-escaped quotes, as Shardy's export writes them: #sdy.mesh<[\"x\"=2]>


def _frs(sharding: str) -> str:
    attrs = f"has_side_effect = true, mhlo.frontend_attributes = {{xla.sdy.sharding = {sharding}}}"
    return _sdy_call(FRS, "%arg0", attrs)


#: ``xla.sdy.FuncResultSharding`` calls returned by main with a frontend attribute XLA's exporter
#: cannot use (each aborts or crashes XLA:CPU): name -> (StableHLO text, the rule's words).
BAD_RESULT_SHARDINGS = {
    "not_per_value": (_stablehlo(_frs('"#sdy.sharding<mesh<[]>, [{}, {}]>"')), "is not a string spelling a #sdy"),
    "not_a_string": (_stablehlo(_frs("3 : i64")), "is not a string spelling a #sdy.sharding_per_value"),
    "trailing_backslash": (_stablehlo(_frs('"#sdy.sharding_per_value<[<mesh<[]>, [{}, {}]>]>\\\\"')),
                           "is not a string spelling"),
    "two_shardings": (_stablehlo(_frs('"#sdy.sharding_per_value<[<mesh<[]>, [{}, {}]>, <mesh<[]>, [{}, {}]>]>"')),
                      "holds 2 shardings; XLA takes exactly one"),
    "mesh_nowhere": (_stablehlo(_frs(_PV.format("@mesh"))), "names mesh @mesh, which the module does not define"),
    "mesh_not_in_meshes": (_stablehlo(_frs(_PV.format("@mesh")), attrs=_MESHES.format(f"other = {_X2}")),
                           "names mesh @mesh"),
    # jaxlib 0.10.2 reads the sdy.mesh ops (and dies on the first), 0.12.1 xla.sdy.meshes (and dies on the second)
    "mesh_ops_without_it": (_stablehlo(_frs(_PV.format("@mesh")), attrs=_MESHES.format(f"mesh = {_X2}"),
                                       pre='  sdy.mesh @other = <["x"=2]>\n'), "names mesh @mesh"),
    "mesh_op_only": (_stablehlo(_frs(_PV.format("@mesh")), pre='  sdy.mesh @mesh = <["x"=2]>\n'), "names mesh @mesh"),
    "unknown_axis": (_stablehlo(_frs('"#sdy.sharding_per_value<[<@mesh, [{\\\\\\"q\\\\\\"}, {}]>]>"'),
                                attrs=_MESHES.format(f"mesh = {_X2}")),
                     "shards along axis 'q', which mesh @mesh (axes 'x') does not have"),
}

#: What XLA compiles: a mark with the attribute it reads (inline mesh, named mesh, C escapes), one
#: without it that main does not return (here or in a callee), Shardy's barrier on one operand. (A
#: mesh only an sdy.mesh op defines compiles on jaxlib 0.10.2 and aborts 0.12.1: refused above.)
GOOD_SHARDY = {
    "inline_mesh": _stablehlo(_frs('"#sdy.sharding_per_value<[<mesh<[\\\\\\"x\\\\\\"=1]>, [{}, {}]>]>"')),
    "named_mesh": _stablehlo(_frs(_PV.format("@mesh")), attrs=_MESHES.format(f"mesh = {_X2}")),
    "sdy_mesh_op_and_meshes": _stablehlo(_frs(_PV.format("@mesh")), attrs=_MESHES.format(f"mesh = {_X2}"),
                                         pre='  sdy.mesh @mesh = <["x"=2]>\n'),
    "not_returned": _stablehlo(_sdy_call(FRS, "%arg0") + "\n    %1 = stablehlo.negate %0 : tensor<4x4xf32>",
                               ret="%1"),
    "returned_by_a_callee": (
        "module @m {\n  func.func private @f(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {\n"
        f"    %0 = stablehlo.custom_call @{FRS}(%a) : (tensor<4x4xf32>) -> tensor<4x4xf32>\n"
        "    return %0 : tensor<4x4xf32>\n  }\n  func.func public @main(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {\n"
        "    %0 = call @f(%arg0) : (tensor<4x4xf32>) -> tensor<4x4xf32>\n    return %0 : tensor<4x4xf32>\n  }\n}\n"),
    "propagation_barrier": _stablehlo(_sdy_call("xla.sdy.PropagationBarrier", "%arg0")),
}


@pytest.mark.parametrize("name", list(BAD_RESULT_SHARDINGS))
def test_result_sharding_attributes_xla_cannot_read_are_refused(name: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLASDK_LOAD_CACHE", "0")
    text, words = BAD_RESULT_SHARDINGS[name]
    f = tmp_path / f"{name}.mlir"
    f.write_text(text)
    with pytest.raises(xs.FormatError) as e:
        xs.load_computation(f)
    msg = str(e.value)
    line = 4 if "sdy.mesh @" in text else 3
    assert f"line {line}: CustomCall: target '{FRS}' gives a result of the entry function: its frontend attribute " \
           "xla.sdy.sharding = " in msg and words in msg, msg


def test_what_xla_compiles_of_shardys_marks_still_loads_and_compiles(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The check requires what XLA's compiler requires, no more: each of these loads and compiles;
    ``Eigh`` with one operand of the wrong kind is XLA's clean compile error, not a load refusal."""
    monkeypatch.setenv("XLASDK_LOAD_CACHE", "0")
    for name, text in GOOD_SHARDY.items():
        f = tmp_path / f"{name}.mlir"
        f.write_text(text)
        xs.compile(xs.load_computation(f))
    hlo = ('HloModule m, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["x"=1]>}}\n\nENTRY main {\n'
           '  x = f32[4,4] parameter(0)\n  n = f32[4,4] negate(x)\n'
           f'  r = f32[4,4] custom-call(n), custom_call_target="{FRS}", custom_call_has_side_effect=true, '
           'frontend_attributes={xla.sdy.sharding="#sdy.sharding_per_value<[<@mesh, [{\\"x\\"}, {}]>]>"}\n'
           f'  u = f32[4,4] custom-call(x), custom_call_target="{FRS}"\n  a = f32[4,4] add(r, u)\n'
           f'  ROOT t = (f32[4,4], f32[4,4]) tuple(r, a)\n}}\n')
    xs.compile(xs.XlaComputation.from_hlo_text(hlo))
    eigh = 'HloModule m\n\nENTRY main {\n  x = f32[4,4] parameter(0)\n  ROOT r = f32[4,4] custom-call(x), ' \
           'custom_call_target="Eigh"\n}\n'
    with pytest.raises(xs.CompileError) as e:
        xs.compile(xs.XlaComputation.from_hlo_text(eigh))
    assert "XLA aborted" not in str(e.value), str(e.value)


SHARDY_DUMPS = sorted(p for p in (Path(__file__).resolve().parent / "data").rglob("*")
                      if p.is_file() and b"sdy" in p.read_bytes() and not p.name.endswith("tpu_comp_env.txt")
                      and p.suffix != ".npz")


@pytest.mark.parametrize("path", SHARDY_DUMPS, ids=lambda p: str(p).split("/data/", 1)[1])
def test_real_shardy_dumps_still_load(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """JAX's Shardy-partitioned programs load as before: the lowerings and exports (``sdy.mesh``,
    ``sdy.sharding``) and the HLO dumps, whose ``xla.sdy.FuncResultSharding`` calls carry the
    frontend attribute ``xla.sdy.sharding`` and the module its meshes (``xla.sdy.meshes``); the
    calls main returns are the ones the check reads."""
    monkeypatch.setenv("XLASDK_LOAD_CACHE", "0")
    comp = xs.load_computation(path)
    if b"FuncResultSharding" not in path.read_bytes():
        return
    from xlasdk._jaxlib import mlir, mlir_graph

    claims = [c for c in mlir_graph.ops_named(mlir.parse_module(comp.as_stablehlo_text()),
                                              frozenset({"stablehlo.custom_call"}))
              if c.attrs.get("call_target_name") == FRS]
    assert claims and all(c.returned for c in claims), claims
    assert all((c.frontend_attributes or {}).get("xla.sdy.sharding", "").startswith("#sdy.sharding_per_value<[")
               for c in claims), claims
