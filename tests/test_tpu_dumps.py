"""XLA's TPU-optimized modules (tests/data/dumps_tpu/, TPU v5e dumps of the five real programs made by
the compile-only TPU path) load, run, compare and bisect on the CPU as their CPU meaning
(:mod:`xlasdk.formats.tpu_meaning`); what has no CPU meaning is refused naming the instruction.

Oracles: JAX's recorded outputs (``tests/data/dumps/<program>/io.npz``) where the TPU compile kept
the program's precision (int_indexing, transformer_bf16: every output as JAX's CPU run gave it);
the reference evaluator (``xs.compare``, which computes the very module op by op in float64 rounded
per op) for every program; the program's before-optimizations file run on the CPU, within bf16's
tolerance where the TPU compile rounded the inputs of f32 dots at DEFAULT precision to bf16 (the
conv net, the GRU, the MLP: their optimized modules hold ``bf16 convert`` ops that their
before-optimizations files do not); numpy for the hand-written modules of each rewrite.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from tests.test_cli import cli
from tests.test_real_dumps import FLOAT_TOL, _partition_args, assert_matches_jax, recorded

DATA = Path(__file__).resolve().parent / "data"
TPU = DATA / "dumps_tpu"
PROGRAMS = ("convnet_train", "gru_scan", "int_indexing", "sharded_mlp", "transformer_bf16")
SINGLE = tuple(p for p in PROGRAMS if p != "sharded_mlp")
KEEPS_PRECISION = ("int_indexing", "transformer_bf16")  # no f32 dot: the TPU compile rounds nothing more
FILES = ("module.after_optimizations.txt", "module.after_optimizations.hlo.pb")


def _outs(result: Any) -> list[np.ndarray[Any, Any]]:
    return [np.asarray(o.to_numpy()) for o in (result if isinstance(result, tuple) else (result,))]


def _within_bf16(got: list[np.ndarray[Any, Any]], want: list[np.ndarray[Any, Any]], what: str) -> None:
    """Integers equal; floats within bf16's tolerance of test_real_dumps (2**-6 relative + 2**-6 of the
    output's largest magnitude): the rounding of dot inputs to bf16 that the TPU compile placed."""
    rtol, frac = FLOAT_TOL["bfloat16"]
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert (g.shape, g.dtype) == (w.shape, w.dtype), f"{what}: output {i}"
        if g.dtype.kind not in "fV":
            np.testing.assert_array_equal(g, w, err_msg=f"{what}: output {i}")
            continue
        w64 = w.astype(np.float64)
        atol = frac * float(np.max(np.abs(w64), initial=0.0))
        np.testing.assert_allclose(g.astype(np.float64), w64, rtol=rtol, atol=atol, err_msg=f"{what}: output {i}")


# -- recognition and the rewrite ---------------------------------------------------------------------------
@pytest.mark.parametrize("program", PROGRAMS)
def test_tpu_modules_are_recognised_and_only_they(program: str) -> None:
    from xlasdk._jaxlib import mlir as _mlir
    from xlasdk.formats.hlo_text import _parse_hlo_text
    from xlasdk.formats.tpu_meaning import cpu_meaning, tpu_signs

    text = (TPU / program / "module.after_optimizations.txt").read_text()
    signs = tpu_signs(text)
    assert signs is not None and signs.tiled and signs.memory_spaces and signs.tpu_backend_configs
    meaning = cpu_meaning(_mlir.hlo_module_to_text(_mlir.hlo_module_from_text(text)))
    assert meaning is not None and meaning.rewritten > 0
    mod = _parse_hlo_text(meaning.text)
    assert mod is not None
    opcodes = {i.opcode for c in mod.comps for i in c.instrs}
    assert not opcodes & {"copy-start", "copy-done", "custom-call"}, opcodes
    assert ":T(" not in meaning.text and not re.search(r"S\(\d+\)", meaning.text)
    assert "backend_config" not in meaning.text
    # no false positive: XLA's CPU dumps and the TPU compile's input are not TPU-optimized
    for other in (DATA / "dumps" / program / "module.cpu_after_optimizations.txt",
                  DATA / "dumps" / program / "module.before_optimizations.txt",
                  TPU / program / "module.before_optimizations.txt"):
        assert tpu_signs(other.read_text()) is None, other


@pytest.mark.parametrize("program", SINGLE)
def test_optimized_tpu_module_runs_and_matches_the_reference(program: str) -> None:
    """Text and proto: the same CPU meaning; it matches the reference evaluator's values of the same
    module; JAX's outputs where the TPU compile rounded nothing more, else the before-optimizations
    file's run within bf16's tolerance."""
    ins, want = recorded(f"dumps/{program}")
    comp, from_proto = (xs.load_computation(TPU / program / f) for f in FILES)
    assert comp.tpu_rewrite is not None and comp.tpu_rewrite[0] > 0
    assert from_proto.tpu_rewrite == comp.tpu_rewrite
    assert from_proto.as_stablehlo_text() == comp.as_stablehlo_text()  # text and proto: one CPU meaning
    first = _outs(xs.compile(comp, device="cpu:0")(*ins))
    report = xs.compare(comp, ins)
    assert report.ok, str(report)
    if program in KEEPS_PRECISION:
        assert_matches_jax(first, want, f"{program} (TPU-optimized, on the CPU)")
    else:
        before = xs.load_computation(TPU / program / "module.before_optimizations.txt")
        _within_bf16(first, _outs(xs.compile(before, device="cpu:0")(*ins)), program)
        assert " convert(" in (TPU / program / "module.after_optimizations.txt").read_text()


@pytest.mark.parametrize("program", SINGLE)
def test_optimized_tpu_module_matches_its_before_file_by_the_tpu_model(program: str) -> None:
    """``compare(after, against=before)``: the optimized module's kept bf16 converts are the TPU's
    DEFAULT precision, so both runs are judged with the TPU's error model added to the CPU's (before:
    DIVERGENCE for the conv net and the GRU, on the default tolerances; and the conv net's scalar
    loss had no bound at all, a 0-d sum of the models' bounds read as none)."""
    ins, _ = recorded(f"dumps/{program}")
    after = xs.load_computation(TPU / program / "module.after_optimizations.txt")
    before = xs.load_computation(DATA / "dumps" / program / "module.before_optimizations.txt")
    report = xs.compare(after, ins, against=before)
    # no element departs (the conv net's weight updates carry more bound than their magnitude through
    # the backward pass: those elements are reported unjudged, never as a match)
    assert all(o.ok for o in report.outputs), str(report)
    assert report.ok or program == "convnet_train", str(report)


def test_a_program_bug_in_an_optimized_tpu_module_is_flagged_against_its_before_file(tmp_path: Path) -> None:
    """The same judgement never waves a planted bug through: the conv net's optimized module with the
    log-softmax backward's ``multiply`` made an ``add`` (the reference evaluator cannot see it: it
    evaluates the buggy module too) departs from its before-optimizations file."""
    src = (TPU / "convnet_train" / "module.after_optimizations.txt").read_text()
    old = "%mul.13 = f32[4,10]{1,0:T(4,128)} multiply("
    assert src.count(old) == 1
    path = tmp_path / "module.after_optimizations.txt"
    path.write_text(src.replace(old, old.replace("multiply(", "add(")))
    ins, _ = recorded("dumps/convnet_train")
    before = xs.load_computation(DATA / "dumps" / "convnet_train" / "module.before_optimizations.txt")
    report = xs.compare(xs.load_computation(path), ins, against=before)
    assert not report.ok and not report.outputs[5].ok, str(report)
    # the two modules' constants are matched by value, never by a name XLA reused for another value
    bisection = xs.compare(xs.load_computation(path), ins, against=before, bisect="ops").bisect_ops
    assert bisection is not None
    assert bisection.culprit is None or bisection.culprit.opcode != "stablehlo.constant", str(bisection)


def test_optimized_tpu_per_partition_module_runs_on_its_four_devices() -> None:
    """sharded_mlp for a 2x2 v5e (4 partitions): one partition's program, run on 4 CPU devices each on
    its own rows; the rows put together and the all-reduced sum agree with the before-optimizations
    file compiled for 4 partitions (within bf16: the TPU rounds the f32 dots' inputs to bf16)."""
    ins, _ = recorded("dumps/sharded_mlp")
    comp = xs.load_computation(TPU / "sharded_mlp" / "module.after_optimizations.txt")
    assert comp.tpu_rewrite is not None
    first = xs.client("cpu", num_devices=4).devices()[0]
    exe = xs.compile(comp, first)
    assert (exe.num_replicas, exe.num_partitions) == (1, 4)
    per_device = [[o.to_numpy() for o in out] for out in exe.execute_replicated(_partition_args(ins, 4))]  # type: ignore[union-attr]
    before = xs.load_computation(TPU / "sharded_mlp" / "module.before_optimizations.txt")
    here = [np.asarray(a.to_numpy()) for a in xs.compile(
        before, first, options=xs.CompileOptions(num_partitions=4)).execute_sharded(ins)]
    rows = np.concatenate([d[0] for d in per_device])
    for d in per_device:
        assert np.array_equal(d[1], per_device[0][1])  # the same sum on every device
    _within_bf16([rows, per_device[0][1]], here, "sharded_mlp")


# -- compiled for a TPU (libtpu's compile-only client) -------------------------------------------------------
_LIBTPU = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason="libtpu is not installed")


@_LIBTPU
@pytest.mark.parametrize("program", SINGLE)
def test_optimized_tpu_module_compiles_for_a_tpu(program: str) -> None:
    """The CPU meaning of a TPU-optimized dump compiles for a v5e: XLA's import writes each HLO ``copy``
    as ``mhlo.copy``, which XLA:CPU takes and libtpu refuses ("failed to legalize operation
    'mhlo.copy'", on a v5e for the conv net and the transformer); for any device but the CPU a copy is
    compiled as its operand."""
    comp = xs.load_computation(TPU / program / "module.after_optimizations.txt")
    assert "mhlo.copy" in comp.as_stablehlo_text()
    exe = xs.compile(comp, device=xs.topology("v5e:1x1").devices[0])
    assert isinstance(exe, xs.CompileOnlyExecutable)
    assert exe.input_shapes == tuple(comp.program_shape().parameter_shapes())
    assert "{1,0:T(" in exe.hlo_text()  # XLA's TPU compiler laid it out again


@_LIBTPU
def test_optimized_per_partition_tpu_module_compiles_for_a_tpu() -> None:
    """sharded_mlp's TPU-optimized dump (one partition's program of 4) compiles for a v5e:2x2. It did not:
    its all-reduce's replica groups are mesh axes (``mesh['axis_0'=4,'axis_1'=1] {'axis_0','axis_1'}``),
    imported as ``replica_group_mesh_axes<mesh = @mesh>``, which the TPU's compile path cannot resolve
    ("Failed to find mesh attribute on symbol"), and libtpu 0.0.52's Shardy import refuses the program's own
    tiled shardings ("Expected HloShardingV3"). The loader writes the groups out, and the program compiles
    as on the CPU: each partition's parameters and results ``{manual}``."""
    comp = xs.load_computation(TPU / "sharded_mlp" / "module.after_optimizations.txt")
    assert "replica_group_mesh_axes" not in comp.as_stablehlo_text()
    assert "replica_groups = dense<[[0, 1, 2, 3]]>" in comp.as_stablehlo_text()
    exe = xs.compile(comp, device=xs.topology("v5e:2x2").devices[0], options=xs.CompileOptions(num_partitions=4))
    assert isinstance(exe, xs.CompileOnlyExecutable)
    assert exe.input_shapes == tuple(comp.program_shape().parameter_shapes())  # one partition's shapes
    assert "all-reduce" in exe.hlo_text() and "{1,0:T(" in exe.hlo_text()


@pytest.mark.parametrize("program", ("gru_scan", "transformer_bf16"))
def test_the_module_without_copies_computes_the_same_bits(program: str) -> None:
    """What a device other than the CPU compiles (the module with each ``mhlo.copy`` replaced by its
    operand) gives, on the CPU, the very bits of the module with its copies (the GRU: 90 copies,
    in and around its loop; the transformer: bf16)."""
    from xlasdk._jaxlib import mlir as _mlir
    from xlasdk.program.computation import compile_request

    ins, _ = recorded(f"dumps/{program}")
    comp = xs.load_computation(TPU / program / "module.after_optimizations.txt")
    text = compile_request(comp).module_text
    bare = _mlir.without_copies(text)
    assert "mhlo.copy" in text and "mhlo.copy" not in bare
    exact = xs.CompileOptions(env_option_overrides=(("xla_allow_excess_precision", False),))
    want = _outs(xs.compile(comp, device="cpu:0", options=exact)(*ins))
    got = _outs(xs.compile(xs.XlaComputation.from_stablehlo(bare), device="cpu:0", options=exact)(*ins))
    assert [(g.dtype, g.shape, g.tobytes()) for g in got] == [(w.dtype, w.shape, w.tobytes()) for w in want]


# -- the command line -------------------------------------------------------------------------------------
def test_cli_inspect_run_and_compare_say_what_ran(tmp_path: Path) -> None:
    ins, want = recorded("dumps/int_indexing")
    inputs, out = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, **{str(i): a for i, a in enumerate(ins)})
    path = str(TPU / "int_indexing" / "module.after_optimizations.txt")
    code, text, err = cli("inspect", path, "--no-compile")
    assert code == 0, err
    assert "TPU-optimized: XLA's HLO for a TPU: tiled layouts (" in text and "module.tpu_comp_env.txt beside it" in text
    m = re.search(r"runs as the CPU meaning of a TPU-optimized module: (\d+) instructions rewritten", text)
    assert m is not None and int(m.group(1)) > 0, text
    code, text, err = cli("run", path, "--inputs", str(inputs), "--output", str(out))
    assert code == 0, err
    assert f"ran the CPU meaning of a TPU-optimized module: {m.group(1)} instructions rewritten" in text, text
    with np.load(out) as z:
        got = [z[f"output_{i}"] for i in range(len(want))]
    assert_matches_jax(got, want, "xlasdk run int_indexing (TPU-optimized)")
    code, text, err = cli("compare", path, "--inputs", str(inputs))
    assert code == 0 and "MATCH" in text and "ran the CPU meaning of a TPU-optimized module" in text, (text, err)
    code, text, err = cli("inspect", str(TPU / "int_indexing" / "module.before_optimizations.txt"), "--no-compile")
    assert code == 0 and "TPU-optimized" not in text


def _spliced(tmp_path: Path) -> Path:
    """int_indexing's TPU-optimized module with XLA:CPU's known wrong value spliced in place of its
    top-k values (an output): ``-((|v| + 3)**4 / broadcast(2**127))`` (right: normal numbers of
    5e-37..1e-35; XLA:CPU multiplies by the flushed reciprocal: 0), in tiled layouts like the rest."""
    src = (TPU / "int_indexing" / "module.after_optimizations.txt").read_text()
    m = re.search(r"\n  %slice = f32\[5,2\]\{0,1:T\(2,128\)\} slice\([^\n]*", src)
    assert m is not None
    s = "f32[5,2]{0,1:T(2,128)}"
    md = 'metadata={op_name="spliced" source_file="spliced.py" source_line=7}'
    extra = (f"\n  %sp_abs = {s} abs(%slice)\n  %sp_c3 = f32[] constant(3)"
             f"\n  %sp_b3 = {s} broadcast(%sp_c3), dimensions={{}}\n  %sp_x = {s} add(%sp_abs, %sp_b3)"
             f"\n  %sp_sq = {s} multiply(%sp_x, %sp_x)\n  %sp_q4 = {s} multiply(%sp_sq, %sp_sq)"
             f"\n  %sp_cbig = f32[] constant(1.70141183e+38)\n  %sp_bbig = {s} broadcast(%sp_cbig), dimensions={{}}"
             f"\n  %spliced = {s} divide(%sp_q4, %sp_bbig), {md}\n  %rescaled = {s} negate(%spliced)")
    root = "%broadcast_select_fusion, %slice, %slice.2)"
    assert root in src
    src = src.replace(m.group(0), m.group(0) + extra).replace(root, root.replace("%slice,", "%rescaled,"))
    path = tmp_path / "module.after_optimizations.txt"
    path.write_text(src)
    return path


def test_bisect_ops_localizes_a_wrong_value_in_a_tpu_module(tmp_path: Path) -> None:
    path = _spliced(tmp_path)
    ins, _ = recorded("dumps/int_indexing")
    comp = xs.load_computation(path)
    report = xs.compare(comp, ins)
    if report.ok:  # an XLA that computes x / 2**127 right: nothing to find
        return
    report = xs.compare(comp, ins, bisect="ops")
    c = report.bisect_ops.culprit  # type: ignore[union-attr]
    assert c is not None and (c.name, c.opcode, c.source) == ("spliced", "stablehlo.divide", "spliced.py:7"), report


def test_reduce_shrinks_a_tpu_module_to_the_wrong_value(tmp_path: Path) -> None:
    path = _spliced(tmp_path)
    ins, _ = recorded("dumps/int_indexing")
    if xs.compare(xs.load_computation(path), ins).ok:
        return
    inputs = tmp_path / "in.npz"
    np.savez(inputs, **{str(i): a for i, a in enumerate(ins)})
    out = tmp_path / "min.hlo"
    code, text, err = cli("reduce", str(path), "--until", "diverge", "--inputs", str(inputs), "--output", str(out),
                          "--max-time", "120")
    assert code == 0, (text, err)
    reduced = out.read_text()
    assert " divide(" in reduced and len(re.findall(r"^\s*(?:ROOT )?%\S+ = ", reduced, re.M)) <= 4, reduced


def test_with_outputs_cuts_a_tpu_module() -> None:
    """Values inside the program: the copy of parameter ``a`` (a copy-start/copy-done pair), the
    gather (through AssumeGatherIndicesInBound) and the tiled bitcast of ``a`` to its first element,
    as numpy computes them from the inputs."""
    x, a, *_ = ins = recorded("dumps/int_indexing")[0]
    comp = xs.load_computation(TPU / "int_indexing" / "module.after_optimizations.txt")
    cut = comp.with_outputs(["copy-done.1", "bitcast.25", "gather_fusion"])
    got = _outs(xs.compile(cut, device="cpu:0")(*ins))
    np.testing.assert_array_equal(got[0], a)
    np.testing.assert_array_equal(got[1], a[:1])
    np.testing.assert_array_equal(got[2], x[np.abs(a) % 5])  # jnp.take(x, abs(a) % 5): indices in bounds
    assert xs.compare(cut, ins).ok
    # the tiled bitcast alone, on given operands: the ops of its CPU meaning, named after it
    parts = [i.name for i in comp.instructions() if i.name.startswith("bitcast.25")]
    assert "bitcast.25" in parts and len(parts) > 1, parts
    one = comp.extract(parts)
    assert [str(s) for s in one.program_shape().parameter_shapes()] == ["s32[8]"]
    np.testing.assert_array_equal(_outs(xs.compile(one, device="cpu:0")(a))[0], a[:1])


# -- hand-written modules, one rewrite each -----------------------------------------------------------------
_CFG = 'backend_config={"flag_configs":[],"scoped_memory_configs":[]}'


def _load(body: str, params: str, result: str, comps: str = "") -> xs.XlaComputation:
    return xs.XlaComputation.from_hlo_text(
        f"HloModule m, is_scheduled=true\n\n{comps}ENTRY %e ({params}) -> {result} {{\n{body}\n}}\n")


def test_tiled_offsets_follow_xla_tiling() -> None:
    """XLA's tiling (``layout.h``): a tile tiles the minor dimensions, tiles are laid out row-major,
    each tile's elements row-major; a second tile tiles the first tile's dimensions."""
    from xlasdk.formats.tpu_meaning import tiled_offsets

    off, size = tiled_offsets((16, 256), (1, 0), ((8, 128),))
    r, c = np.indices((16, 256)).reshape(2, -1)
    np.testing.assert_array_equal(off, ((r // 8) * 2 + c // 128) * 1024 + (r % 8) * 128 + c % 128)
    assert size == 4096
    off, size = tiled_offsets((5, 6), (0, 1), ((8, 128),))  # column-major: dimension 1 is major
    r, c = np.indices((5, 6)).reshape(2, -1)
    np.testing.assert_array_equal(off, (c % 8) * 128 + r)
    assert size == 8 * 128
    off, size = tiled_offsets((4, 4), (1, 0), ((8, 128), (2, 1)))  # bf16's pairs of rows
    r, c = np.indices((4, 4)).reshape(2, -1)
    np.testing.assert_array_equal(off, (r // 2) * 256 + c * 2 + r % 2)
    assert size == 8 * 128


def test_tiled_bitcast_reads_the_tiled_bytes() -> None:
    """``s32[1]{0:T(128)} bitcast(s32[8]{0:T(128)})`` is the first element (the tile holds both);
    ``f32[2,128]{1,0:T(2,128)} -> f32[256]{0:T(256)}`` is row-major, as untiled; ``f32[2,8]{1,0:T(2,4)}
    -> f32[16]`` reads the tiles in turn."""
    comp = _load("  %a = s32[8]{0:T(128)} parameter(0)\n"
                 f"  %b = s32[1]{{0:T(128)S(1)}} bitcast(%a), {_CFG}\n"
                 "  %f = f32[2,128]{1,0:T(2,128)} parameter(1)\n"
                 "  %g = f32[256]{0:T(256)} bitcast(%f)\n"
                 "  %h = f32[2,8]{1,0:T(2,4)} parameter(2)\n"
                 "  %i = f32[16]{0} bitcast(%h)\n"
                 "  ROOT %t = (s32[1]{0:T(128)}, f32[256]{0:T(256)}, f32[16]{0}) tuple(%b, %g, %i)",
                 "a: s32[8], f: f32[2,128], h: f32[2,8]", "(s32[1], f32[256], f32[16])")
    a = np.arange(10, 18, dtype=np.int32)
    f = np.arange(256, dtype=np.float32).reshape(2, 128)
    h = np.arange(16, dtype=np.float32).reshape(2, 8)
    got = _outs(xs.compile(comp, device="cpu:0")(a, f, h))
    np.testing.assert_array_equal(got[0], a[:1])
    np.testing.assert_array_equal(got[1], f.reshape(-1))
    # 2x4 tiles, tile by tile: the first 4 columns of both rows, then the next 4 (a gather)
    np.testing.assert_array_equal(got[2], h.reshape(2, 2, 4).transpose(1, 0, 2).reshape(-1))


def test_tiled_bitcast_that_reads_tile_padding_is_refused() -> None:
    with pytest.raises(xs.FormatError, match=r"line 5: instruction 'b' \(bitcast of s32\[8\] to s32\[16\]\): it "
                       r"reads the padding of the TPU's tiles.*before_optimizations"):
        _load("  %a = s32[8]{0:T(128)} parameter(0)\n"
              f"  ROOT %b = s32[16]{{0:T(128)}} bitcast(%a), {_CFG}", "a: s32[8]", "s32[16]")


def test_mosaic_custom_call_is_refused_naming_it() -> None:
    with pytest.raises(xs.FormatError, match=r"TPU-optimized module .*without a CPU meaning: line 5: instruction "
                       r"'k' \(custom-call 'tpu_custom_call'\) is a Mosaic kernel.*before_optimizations"):
        _load("  %a = f32[8,128]{1,0:T(8,128)} parameter(0)\n"
              '  ROOT %k = f32[8,128]{1,0:T(8,128)} custom-call(%a), custom_call_target="tpu_custom_call", '
              'backend_config="{}"', "a: f32[8,128]", "f32[8,128]")


def test_unknown_custom_call_of_a_tpu_module_is_refused() -> None:
    with pytest.raises(xs.FormatError, match=r"line 5: instruction 'k' \(custom-call 'SomeTpuKernel'\) is a custom "
                       r"call of the TPU module whose meaning xlasdk does not know.*before_optimizations"):
        _load("  %a = f32[8,128]{1,0:T(8,128)} parameter(0)\n"
              '  ROOT %k = f32[8,128]{1,0:T(8,128)S(1)} custom-call(%a), custom_call_target="SomeTpuKernel"',
              "a: f32[8,128]", "f32[8,128]")


def test_mixed_precision_pad_copy_and_allocation() -> None:
    """A bf16 pad with an f32 padding value pads with the value rounded to bf16; an f32 -> bf16 copy
    converts; AllocateBuffer is a buffer (zeros here) that a dynamic-update-slice fills."""
    comp = _load("  %p = bf16[3]{0:T(256)(128)(2,1)} parameter(0)\n"
                 "  %c = f32[]{:T(128)} constant(0.1)\n"
                 f"  %pad = bf16[5]{{0:T(256)(128)(2,1)}} pad(%p, %c), padding=1_1, {_CFG}\n"
                 "  %x = f32[3]{0:T(128)} parameter(1)\n"
                 f"  %cp = bf16[3]{{0:T(256)(128)(2,1)S(1)}} copy(%x), {_CFG}\n"
                 f'  %buf = f32[2,3]{{1,0:T(2,128)}} custom-call(), custom_call_target="AllocateBuffer", {_CFG}\n'
                 "  %r = f32[1,3]{1,0:T(1,128)} reshape(%x)\n"
                 "  %i0 = s32[] constant(1)\n  %i1 = s32[] constant(0)\n"
                 "  %dus = f32[2,3]{1,0:T(2,128)} dynamic-update-slice(%buf, %r, %i0, %i1)\n"
                 "  %row = f32[1,3]{1,0:T(1,128)} slice(%dus), slice={[1:2], [0:3]}\n"
                 "  ROOT %t = (bf16[5]{0}, bf16[3]{0}, f32[1,3]{1,0}) tuple(%pad, %cp, %row)",
                 "p: bf16[3], x: f32[3]", "(bf16[5], bf16[3], f32[1,3])")
    assert comp.tpu_rewrite is not None and comp.tpu_rewrite[0] == 3
    bf = ml_dtypes.bfloat16
    p = np.array([1, 2, 3], dtype=bf)
    x = np.array([0.1, 1 / 3, 7.77], dtype=np.float32)
    got = _outs(xs.compile(comp, device="cpu:0")(p, x))
    fill = np.float32(0.1).astype(bf)
    np.testing.assert_array_equal(got[0].view(np.uint16), np.array([fill, 1, 2, 3, fill], dtype=bf).view(np.uint16))
    np.testing.assert_array_equal(got[1].view(np.uint16), x.astype(bf).view(np.uint16))
    np.testing.assert_array_equal(got[2], x[None])


def test_mixed_precision_moves_keep_their_layouts_for_a_later_bitcast() -> None:
    """A slice that rounds what it moves (``bf16[1,4,2]{1,2,0} slice(f32[3,4,2]{1,2,0})``, as a TPU
    compile writes for ``xs[-1]`` fed to a bf16 dot) converts then slices; the rewrite keeps the
    layouts, so the ``bitcast`` after it (a squeeze in physical terms) reads the right elements. The
    same for an element-wise op rounding its result (found by a user's fresh TPU dump: the slice was
    refused, then read transposed when the rewrite wrote default layouts)."""
    comp = _load("  %p = f32[3,4,2]{1,2,0:T(8,128)} parameter(0)\n"
                 f"  %s = bf16[1,4,2]{{1,2,0:T(8,128)(2,1)}} slice(%p), slice={{[2:3], [0:4], [0:2]}}, {_CFG}\n"
                 "  %b = bf16[4,2]{0,1:T(8,128)(2,1)} bitcast(%s)\n"
                 "  %q = f32[4,2]{0,1:T(8,128)} parameter(1)\n"
                 f"  %m = bf16[4,2]{{0,1:T(8,128)(2,1)}} multiply(%q, %q), {_CFG}\n"
                 "  %mb = bf16[2,4]{1,0:T(8,128)(2,1)} bitcast(%m)\n"
                 "  ROOT %t = (bf16[4,2]{1,0}, bf16[2,4]{1,0}) tuple(%b, %mb)",
                 "p: f32[3,4,2], q: f32[4,2]", "(bf16[4,2], bf16[2,4])")
    assert comp.tpu_rewrite is not None and comp.tpu_rewrite[0] >= 2
    bf = ml_dtypes.bfloat16
    p = (np.arange(24, dtype=np.float32).reshape(3, 4, 2) + 0.1) / 7
    q = (np.arange(8, dtype=np.float32).reshape(4, 2) + 0.3) / 3
    got = _outs(xs.compile(comp, device="cpu:0")(p, q))
    np.testing.assert_array_equal(got[0].view(np.uint16), p[2].astype(bf).view(np.uint16))
    # bitcast f32[4,2]{0,1} -> [2,4]{1,0}: the same bytes, column-major of [4,2] = row-major of its transpose
    np.testing.assert_array_equal(got[1].view(np.uint16), (q * q).astype(bf).T.view(np.uint16))


def test_a_tpu_form_without_a_rewrite_is_named_as_such_not_inconsistent() -> None:
    """XLA's own TPU file is never called "inconsistent": a form the CPU meaning does not rewrite
    (here a ``reduce-precision`` that also rounds to bf16) names the line and instruction, says the
    module is TPU-optimized, and points to the before-optimizations file."""
    with pytest.raises(xs.FormatError) as e:
        _load(f"  %p = f32[4]{{0:T(256)}} parameter(0)\n  ROOT %r = bf16[4]{{0:T(256)(2,1)}} reduce-precision(%p), "
              f"exponent_bits=5, mantissa_bits=10, {_CFG}", "p: f32[4]", "bf16[4]")
    msg = str(e.value)
    assert "TPU-optimized module" in msg and "line 5: instruction 'r'" in msg and "before_optimizations" in msg, msg
    assert "inconsistent" not in msg, msg


def test_transposed_convolution_with_rhs_reversal() -> None:
    """``rhs_reversal=1`` (the TPU's transposed convolution): the kernel flipped along that spatial
    dimension, as numpy's correlation with the reversed kernel gives."""
    comp = _load("  %x = f32[1,6,1]{2,1,0} parameter(0)\n  %k = f32[3,1,1]{2,1,0} parameter(1)\n"
                 "  ROOT %c = f32[1,6,1]{2,1,0:T(8,128)} convolution(%x, %k), window={size=3 pad=1_1 rhs_reversal=1}, "
                 f"dim_labels=b0f_0io->b0f, {_CFG}", "x: f32[1,6,1], k: f32[3,1,1]", "f32[1,6,1]")
    x = np.array([1, 2, 4, 8, 16, 32], np.float32).reshape(1, 6, 1)
    k = np.array([1, 10, 100], np.float32).reshape(3, 1, 1)
    (got,) = _outs(xs.compile(comp, device="cpu:0")(x, k))
    want = np.convolve(np.pad(x.ravel(), 1), k.ravel(), mode="valid")  # convolve: the kernel reversed
    np.testing.assert_array_equal(got.ravel(), want.astype(np.float32))


# -- verifier errors ---------------------------------------------------------------------------------------
def test_verifier_errors_name_the_hlo_line_and_instruction() -> None:
    """A bf16 reduce-window with an f32 reducer in a module that is not TPU-optimized: MLIR's verifier
    refuses the import, and the message names the line and instruction although the instruction's
    metadata (op_name, source) is what XLA's importer puts in the op's location."""
    text = ("HloModule m\n\n%max (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n"
            "  %b = f32[] parameter(1)\n  ROOT %m = f32[] maximum(%a, %b)\n}\n\n"
            "ENTRY %e (p: bf16[4,4]) -> bf16[2,2] {\n"
            "  %p = bf16[4,4]{1,0} parameter(0)\n  %c = f32[] constant(-inf)\n"
            "  ROOT %rw = bf16[2,2]{1,0} reduce-window(%p, %c), window={size=2x2 stride=2x2}, to_apply=%max, "
            'metadata={op_name="jit(f)/reduce_window_max" source_file="f.py" source_line=3}\n}\n')
    with pytest.raises(xs.FormatError, match=r"line 12: instruction 'rw': 'stablehlo.reduce_window' op inferred "
                       r"type.*incompatible"):
        xs.XlaComputation.from_hlo_text(text)
