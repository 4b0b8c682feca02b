"""Real XLA dumps of real JAX programs (tests/data/dumps/, made by tools/make_dump_corpus.py): every
loadable file of every program loads, compiles and reproduces JAX's recorded outputs, through the API
and through ``xlasdk run``; JAX's own ``Exported.serialize()`` file is refused with a FormatError.

Loads, compiles and runs happen in this process: xlasdk runs XLA's steps on a file in its worker
process first (fail closed), so a file that aborts XLA fails that one test instead of killing pytest.
``xlasdk run`` is called in this process (``xlasdk.cli.main``: the command's loading and argument
handling) for every case, and as a command in its own process (the supervised child that loads and
compiles the file itself) for every file format, on one program of each corpus; a crash there names
the signal and XLA's last words. Files that load to the same module text (a dump's text and its
HloProto) are compiled once: the others read the executable back from the run's compile cache
(``shared_compile_cache``, tests/conftest.py) and are still loaded and run. Nothing here imports jax.

Comparison (``assert_matches_jax``): shapes and dtypes exact; integers, bool and unsigned exact;
floats pass if bit-identical, else within a per-dtype tolerance (``FLOAT_TOL``). A module compiled
again by XLA can round differently from JAX's own run: an optimized dump goes through the pipeline a
second time (fusion and reassociation may change), and any module may be fused differently. What the
generator measured, jitted vs op-by-op (``jax.disable_jit()``, no fusion at all), bounds how far that
moves: at most 8e-8 of the output's largest magnitude in f32 (about 1 ulp), and 1 bf16 ulp of the
output's largest magnitude (0.0156 on values up to 3.16) for the bf16 transformer. The tolerances
allow a few times that (f32: 1e-5 relative + 1e-6 of the largest magnitude, ~80 ulp; bf16: 2 ulp,
2**-6 relative + 2**-6 of the largest magnitude) and still catch every real error: a wrong op,
operand order, parameter order, bitcast or RNG bit gives differences of order 1. (With jaxlib 0.10.2
every file reproduces JAX's outputs bit for bit; the tolerances are the margin for other XLA versions.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
# compiling the same module again (another file of the same program, compare after compile) reads it
# back from a compile cache of this run (tests/conftest.py): these tests are about values, not compiling
pytestmark = pytest.mark.usefixtures("shared_compile_cache")
# Two corpora of the same programs: written by jax/jaxlib 0.10.2 (dumps/) and by 0.12.0.1
# (dumps_jax012/, whose XLA writes other metadata, layouts and StableHLO versions). Every file of
# both must load and reproduce JAX's outputs under every jaxlib of the range.
CORPORA = ("dumps", "dumps_jax012")
NAMES = ("transformer_bf16", "convnet_train", "gru_scan", "int_indexing")
PROGRAMS = tuple(f"{c}/{n}" for c in CORPORA for n in NAMES)
DUMPS = DATA  # a program is named by its path under tests/data: "dumps_jax012/gru_scan"
LOADABLE = (
    "module.before_optimizations.txt",  # XLA dump: HLO text before optimizations
    "module.before_optimizations.hlo.pb",  # XLA dump: HloProto before optimizations
    "module.cpu_after_optimizations.txt",  # XLA dump: optimized HLO text
    "module.cpu_after_optimizations.hlo.pb",  # XLA dump: optimized HloProto
    "lowered.mlir",  # jax.jit(f).lower(*args).as_text()
    "exported.mlirbc",  # jax.export.export(jax.jit(f))(*args).mlir_module_serialized
    "exported.jax_export",  # ...(*args).serialize(): JAX's flatbuffer around that module
)
CASES = [pytest.param(p, f, id=f"{p}/{f}") for p in PROGRAMS for f in LOADABLE]
# The CLI path is the API's plus argument handling: every file of the first corpus, and each program's
# dumps of the second.
CLI_CASES = [c for c in CASES if c.values[0].startswith("dumps/") or str(c.values[1]).startswith("module.")]
# dtype -> (rtol, atol as a fraction of the largest |expected| in that output), used when not bit-identical
FLOAT_TOL = {"float32": (1e-5, 1e-6), "bfloat16": (2.0**-6, 2.0**-6)}
TIMEOUT = 300



def _dtype(name: str) -> np.dtype[Any]:
    return np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)


def load_npz(path: Path, prefix: str, dtypes_key: str) -> list[np.ndarray[Any, Any]]:
    """``prefix0``, ``prefix1``, ... of an .npz; raw ``|V2`` (bfloat16) arrays viewed as ``dtypes_key`` names."""
    with np.load(path, allow_pickle=False) as z:
        names = [str(d) for d in z[dtypes_key]]
        arrays = [z[f"{prefix}{i}"] for i in range(len(names))]
    return [a.view(_dtype(d)) if a.dtype.kind == "V" else a for a, d in zip(arrays, names, strict=True)]


def recorded(program: str) -> tuple[list[np.ndarray[Any, Any]], list[np.ndarray[Any, Any]]]:
    """The program's recorded inputs and JAX's outputs."""
    io = DUMPS / program / "io.npz"
    return load_npz(io, "in", "in_dtypes"), load_npz(io, "out", "out_dtypes")


def died(r: subprocess.CompletedProcess[str], what: str) -> str:
    """Why a child failed: its exit code or signal name, and the last lines of its stderr and stdout."""
    how = f"signal {signal.Signals(-r.returncode).name}" if r.returncode < 0 else f"exit code {r.returncode}"
    err = (r.stderr or "").strip().splitlines()
    fatal = [ln for ln in err if ln[:1] == "F" and "] " in ln[:60]]  # XLA's fatal log line: "F... Check failed: ..."
    tail = "\n".join([*fatal, *[ln for ln in err if not ln.lstrip().startswith("@ ") and ln not in fatal][-12:]])
    return f"{what}: the process ended with {how}; stderr:\n{tail}\nstdout ends:\n{(r.stdout or '')[-1000:]}"


def run_child(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="1", PYTHONPATH=str(REPO))
    env.pop("XLA_FLAGS", None)  # a dump flag in the environment would slow every child and litter
    env.pop("XLASDK_CACHE_DIR", None)  # the command compiles the file itself, not from the run's compile cache
    try:
        return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, timeout=TIMEOUT,
                              cwd=str(REPO))
    except subprocess.TimeoutExpired:
        pytest.fail(f"{argv}: no result after {TIMEOUT} s")


def assert_matches_jax(got: list[np.ndarray[Any, Any]], want: list[np.ndarray[Any, Any]], what: str) -> None:
    """Every output as JAX computed it: integers exactly, floats bit for bit or within FLOAT_TOL[dtype]."""
    assert len(got) == len(want), f"{what}: {len(got)} outputs, JAX has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert (g.shape, g.dtype) == (w.shape, w.dtype), f"{what}: out{i} {g.dtype}{g.shape}, JAX {w.dtype}{w.shape}"
        if g.dtype.name not in FLOAT_TOL:  # integers, bool, unsigned (bfloat16's numpy kind is "V" too)
            np.testing.assert_array_equal(g, w, err_msg=f"{what}: output {i}")
            continue
        if np.array_equal(g, w, equal_nan=True):
            continue  # bit for bit (up to NaN payloads)
        rtol, atol_frac = FLOAT_TOL[g.dtype.name]
        w64, g64 = w.astype(np.float64), g.astype(np.float64)
        atol = atol_frac * float(np.max(np.abs(w64), initial=0.0, where=np.isfinite(w64)))
        np.testing.assert_allclose(g64, w64, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=f"{what}: output {i} ({g.dtype}; rtol {rtol}, atol {atol:.3g})")


# -- the corpus itself ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("program", PROGRAMS)
def test_corpus_is_complete(program: str) -> None:
    d = DUMPS / program
    for f in (*LOADABLE, "io.npz"):
        assert (d / f).is_file() and (d / f).stat().st_size > 0, d / f
    ins, outs = recorded(program)
    assert ins and outs
    header = next(ln for ln in (d / "module.before_optimizations.txt").read_text().splitlines() if "ENTRY" in ln)
    assert header.split(" -> ")[0].count(": ") == len(ins), (header, len(ins))  # one input per ENTRY parameter


@pytest.mark.parametrize("corpus", CORPORA)
def test_corpus_covers_what_it_is_meant_to(corpus: str) -> None:
    """The optimized GRU dump has an element-type-changing bitcast (the float sort's total order), a while
    loop and threefry's shifts; the transformer's dumps are bf16; the conv net's has convolutions and
    reduce-windows of the backward pass."""
    gru = (DATA / corpus / "gru_scan" / "module.cpu_after_optimizations.txt").read_text()
    assert any(" bitcast(" in ln and "= s32[" in ln and "f32" not in ln.split("bitcast(")[0] for ln in gru.splitlines())
    assert " while(" in gru and "shift-right-logical(" in gru and " sort(" in gru
    assert "bf16[8,16]" in (DATA / corpus / "transformer_bf16" / "module.cpu_after_optimizations.txt").read_text()
    conv = (DATA / corpus / "convnet_train" / "module.before_optimizations.txt").read_text()
    assert " convolution(" in conv and " reduce-window(" in conv and " select-and-scatter(" in conv


# -- load, compile, run: the API ------------------------------------------------------------------------------

@pytest.mark.parametrize(("program", "fname"), CASES)
def test_load_compile_run_matches_jax(program: str, fname: str) -> None:
    # In this process: loading and compiling files fail closed (xlasdk runs XLA's steps on them
    # in its worker process first), so a dump that aborted XLA cannot take pytest with it.
    import xlasdk as xs

    ins, want = recorded(program)
    comp = xs.load_computation(DUMPS / program / fname)
    shapes = comp.program_shape().parameter_shapes()
    got_params = [(tuple(s.dimensions()), np.dtype(s.numpy_dtype())) for s in shapes]
    assert got_params == [(a.shape, a.dtype) for a in ins], f"{program}/{fname}: parameters"
    out = xs.compile(comp, device="cpu:0")(*ins)
    outs = [o.to_numpy() for o in (out if isinstance(out, tuple) else (out,))]
    assert_matches_jax(outs, want, f"{program}/{fname}")


# -- the optimized dumps of the sharded program: per-partition programs ---------------------------------------

SHARDED_OPTIMIZED = [pytest.param(c, f, id=f"{c}/sharded_mlp/{f}") for c in CORPORA
                     for f in ("module.cpu_after_optimizations.txt", "module.cpu_after_optimizations.hlo.pb")]


def _partition_args(ins: list[np.ndarray[Any, Any]], n: int) -> list[list[np.ndarray[Any, Any]]]:
    """sharded_mlp's arguments of each partition: x's rows split ``n`` ways, the weights whole."""
    x, *weights = ins
    return [[x[i * len(x) // n:(i + 1) * len(x) // n], *weights] for i in range(n)]


@pytest.mark.parametrize(("corpus", "fname"), SHARDED_OPTIMIZED)
def test_sharded_optimized_dump_runs_per_partition(corpus: str, fname: str) -> None:
    """XLA's optimized dump of sharded_mlp is one partition's program (after the SPMD partitioner:
    x is f32[4,8] of the global f32[16,8], and an all-reduce makes the global sum). xs.compile
    gives it the 4 partitions its collectives span and keeps it as it is on each (XLA's fusions
    inlined, parameters and results {manual}); each device runs it on its own rows: the rows of
    the results put together, and every device's sum, are the bits of the program before
    optimizations run from global inputs on 4 partitions (as JAX runs it) on this machine, and
    JAX's recorded values (recorded on another CPU: jaxlib 0.12's dot differs in the last bit on
    this session's AVX-512 EPYC, for JAX itself too). The rows' bits hold when this jaxlib made the
    dump; the other corpus' dump (another XLA's fusions) is within 4 ulps of them."""
    import xlasdk as xs

    ins, want = recorded(f"{corpus}/sharded_mlp")
    comp = xs.load_computation(DUMPS / corpus / "sharded_mlp" / fname)
    assert [tuple(s.dimensions()) for s in comp.program_shape().parameter_shapes()] == [(4, 8), (8, 32), (32, 4)]
    first = xs.client("cpu", num_devices=4).devices()[0]
    exe = xs.compile(comp, first)
    assert (exe.num_replicas, exe.num_partitions) == (1, 4)
    outs = exe.execute_replicated(_partition_args(ins, 4))
    per_device = [[o.to_numpy() for o in out] for out in outs]  # type: ignore[union-attr]
    rows = np.concatenate([d[0] for d in per_device])
    before = xs.load_computation(DUMPS / corpus / "sharded_mlp" / "module.before_optimizations.txt")
    here = [np.asarray(a.to_numpy()) for a in xs.compile(
        before, first, options=xs.CompileOptions(num_partitions=4)).execute_sharded(ins)]
    for d in per_device:
        assert_matches_jax([rows, d[1]], want, f"{corpus}/sharded_mlp/{fname}")
        assert np.array_equal(d[1], here[1])  # the all-reduced sum: the same bits on every device
    if xs.jaxlib_version_info().release.startswith("0.12" if corpus == "dumps_jax012" else "0.10"):
        assert np.array_equal(rows, here[0])  # this XLA made the dump: its program of the before file, bit for bit
    else:  # another XLA's optimized program (other fusions): this XLA's within rounding (not bit for bit
        from tests.helpers import assert_same_or_within_ulps  # with 0.10.2 on an AVX2 EPYC)

        assert_same_or_within_ulps(rows, here[0], what=f"{corpus}/{fname} rows")
    with pytest.raises(xs.ShapeError, match=r"is f32\[16,8\], expected f32\[4,8\]"):  # global arrays: refused
        exe.execute_sharded(ins)


@pytest.mark.parametrize(("corpus", "fname"), SHARDED_OPTIMIZED[:1] + SHARDED_OPTIMIZED[3:])
def test_sharded_optimized_dump_refuses_other_device_counts(corpus: str, fname: str) -> None:
    """Compiled for fewer devices than its collectives span, the per-partition program would sum a
    quarter of the rows (XLA compiles it on one device and gives 4.64 for JAX's 18.85): refused,
    naming the file's kind and what to load instead."""
    import xlasdk as xs

    comp = xs.load_computation(DUMPS / corpus / "sharded_mlp" / fname)
    first = xs.client("cpu", num_devices=4).devices()[0]
    for options in (xs.CompileOptions(), xs.CompileOptions(num_partitions=2)):
        with pytest.raises(xs.CompileError, match=r"an optimized per-partition dump .* split over 4 devices.*"
                           r"num_partitions=4.*execute_replicated.*before_optimizations"):
            xs.compile(comp, first, options=options)


# -- the same through `xlasdk run` ------------------------------------------------------------------------------

#: the program whose files (of both corpora, each of CLI_CASES' formats) ``xlasdk run`` runs as a command
#: in its own process; the other cases call it in this process. The richest program: a while loop, a
#: sort, an element-type-changing bitcast
CLI_PROCESS_PROGRAM = "gru_scan"


def cli_in_process(*argv: str) -> tuple[int, str, str]:
    """``xlasdk ARGV`` run in this process: exit code, stdout, stderr."""
    import io

    from xlasdk.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("program", "fname"), CLI_CASES)
def test_cli_run_matches_jax(program: str, fname: str, tmp_path: Path) -> None:
    ins, want = recorded(program)
    inputs, out = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, **{str(i): a for i, a in enumerate(ins)})  # keyed by parameter index
    path = DUMPS / program / fname
    argv = ["run", str(path), "--device", "cpu:0", "--inputs", str(inputs), "--output", str(out)]
    if program.endswith("/" + CLI_PROCESS_PROGRAM):
        r = run_child(["-m", "xlasdk.cli", *argv])
        if r.returncode != 0 or not out.exists():
            pytest.fail(died(r, f"xlasdk run {program}/{fname}"), pytrace=False)
    else:
        code, stdout, err = cli_in_process(*argv)
        assert code == 0 and out.exists(), (code, stdout[-1000:], err)
    with np.load(out, allow_pickle=False) as z:  # output_N; bf16 as raw |V2 named in the "__dtypes__" manifest
        raw = [z[f"output_{i}"] for i in range(sum(k.startswith("output_") for k in z.files))]
        types = json.loads(str(z["__dtypes__"])) if "__dtypes__" in z.files else {}
    got = [g.view(_dtype(types[f"output_{i}"])) if f"output_{i}" in types else g for i, g in enumerate(raw)]
    assert_matches_jax(got, want, f"xlasdk run {program}/{fname}")


# -- jax.export's own serialization is not a module -----------------------------------------------------------

@pytest.mark.parametrize("program", PROGRAMS)
def test_damaged_jax_export_file_is_refused(program: str, tmp_path: Path) -> None:
    """A jax.export file cut short, or with its module bytes damaged, is a FormatError (API) and exit 2
    (CLI), never a crash or a module read from garbage."""
    data = (DUMPS / program / "exported.jax_export").read_bytes()
    module_at = data.index(b"ML\xefR")
    cut = tmp_path / "cut.jax_export"
    cut.write_bytes(data[: module_at + 40])
    bad = tmp_path / "bad.jax_export"
    bad.write_bytes(data[: module_at + 24] + bytes(b ^ 0x5A for b in data[module_at + 24: module_at + 200])
                    + data[module_at + 200:])
    import xlasdk as xs

    for path in (cut, bad):
        with pytest.raises(xs.FormatError) as caught:  # in this process: xlasdk's loaders fail closed
            xs.load_computation(path)
        assert str(path) in str(caught.value), caught.value
        code, _, err = cli_in_process("run", str(path), "--random-inputs")
        assert code == 2, (code, err)
    # as a command in its own process too (its supervised child reads the damaged module itself)
    r = run_child(["-m", "xlasdk.cli", "run", str(bad), "--random-inputs"])
    assert r.returncode == 2, died(r, f"xlasdk run {bad.name} (want exit code 2)")
