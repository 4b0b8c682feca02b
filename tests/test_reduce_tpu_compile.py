"""A failure only XLA:TPU has, shrunk on a machine without a TPU (openxla/xla#26995: "UNIMPLEMENTED:
While rewriting computation to not contain X64 element types" in a large program, no small repro).

``xs.reduce(comp, "compile-error", device=xs.topology("v5e:1x1").devices[0])`` and
``xlasdk reduce FILE --until compile-error --topology v5e:1x1`` compile each candidate for a v5e
in xlasdk's worker (libtpu's compile-only client, no chip). The program: a JAX program of 30+
instructions in f64 (jax's x64 on) with one ``lax.reduce_precision`` in the middle, which XLA:TPU's
X64 rewriter does not implement. Oracles: XLA itself (the reduced module, compiled again in the
worker for v5e:1x1, fails with the same X64 rewriter message about a reduce-precision; XLA:CPU
compiles it) and the instruction count. Skipped where libtpu (or jax) is absent, and, naming the
release, where the installed libtpu compiles the program.
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import xlasdk as xs
from tests.helpers import raises
from xlasdk._failure_signature import location, signature
from xlasdk._jaxlib import isolated

X64 = re.compile(r"While rewriting computation to not contain X\{?64.*reduce-precision", re.S)


def _libtpu() -> str:
    try:
        return importlib.metadata.version("libtpu")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("libtpu is not installed: no compile for a TPU without a chip")


def _program() -> str:
    """StableHLO text of a JAX program in f64, a reduce-precision buried in it."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    lax = jax.lax
    jax.config.update("jax_enable_x64", True)
    try:
        def f(x: Any, y: Any) -> Any:
            a = jnp.sin(x) * 2.0 + y
            b = jnp.tanh(a) - jnp.cos(y)
            c = lax.reduce_precision(b, exponent_bits=8, mantissa_bits=7)
            d = jnp.exp(c) + a * b
            e = jnp.sum(d * d, axis=0)
            g = jnp.maximum(e, 0.5) / (1.0 + jnp.abs(e))
            h = jnp.sqrt(g + 1.0) * jnp.log1p(jnp.abs(g))
            return h, jnp.mean(a) + jnp.max(b)

        x = jnp.ones((8, 4), jnp.float64)
        text: str = jax.jit(f).lower(x, x).as_text()
    finally:
        jax.config.update("jax_enable_x64", False)
    assert "f64" in text and "reduce_precision" in text
    return text


def _tpu_compile_error(comp: xs.XlaComputation) -> str | None:
    """XLA:TPU's own message compiling ``comp`` for v5e:1x1 in the worker (xlasdk's device checks,
    which refuse an f64 reduce-precision before XLA sees it, are not asked), None when it compiles."""
    mtext = comp.as_stablehlo_text()
    try:
        isolated.request("xlasdk.reducer:_compile_in_worker", mtext, "probe", "v5e:1x1", timeout=300)
    except isolated.Failed as e:
        return e.message
    return None


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, xs.XlaComputation, str]:
    release = _libtpu()
    text = _program()
    path = tmp_path_factory.mktemp("tpu") / "big.mlir"
    path.write_text(text)
    comp = xs.load_computation(str(path))
    assert len(comp.instructions()) >= 30
    err = _tpu_compile_error(comp)
    if err is None or not X64.search(err):
        pytest.skip(f"XLA:TPU of libtpu {release} compiles an f64 reduce-precision (or fails otherwise: {err})")
    xs.compile(comp, "cpu:0")  # XLA:CPU compiles the program: the failure is XLA:TPU's
    return path, comp, err


def _check_reduced(hlo_text: str, original_error: str) -> None:
    small = xs.XlaComputation.from_hlo_text(hlo_text)
    assert len(small.instructions()) <= 5
    assert "reduce-precision" in hlo_text and "f64" in hlo_text
    err = _tpu_compile_error(small)
    assert err is not None and X64.search(err), err
    assert signature(err, died=False) == signature(original_error, died=False)
    xs.compile(small, "cpu:0")  # and XLA:CPU still compiles it


def test_api_shrinks_an_xla_tpu_compile_error_without_a_tpu(program: tuple[Path, xs.XlaComputation, str]) -> None:
    _, comp, err = program
    res = xs.reduce(comp, "compile-error", device=xs.topology("v5e:1x1").devices[0], max_time=400)
    assert res.condition == "compile-error on v5e:1x1"
    assert res.instructions_before >= 30 and res.instructions_after <= 5, res
    _check_reduced(res.hlo_text, err)


def test_cli_shrinks_it_with_topology(program: tuple[Path, xs.XlaComputation, str], tmp_path: Path) -> None:
    path, _, err = program
    out = tmp_path / "min.hlo"
    r = subprocess.run([sys.executable, "-m", "xlasdk.cli", "reduce", str(path), "--until", "compile-error",
                        "--topology", "v5e:1x1", "-o", str(out), "--max-time", "400"],
                       capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr
    assert "compile-error on v5e:1x1" not in r.stderr
    _check_reduced(out.read_text(), err)


def _program_200() -> str:
    """StableHLO text of a 12-layer f64 MLP-like JAX program (about 200 HLO instructions: dots,
    tanh, sin, means, broadcasts), a reduce-precision after its seventh layer."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    lax = jax.lax
    jax.config.update("jax_enable_x64", True)
    try:
        def f(x: Any, y: Any, w: Any) -> Any:
            a = x
            for i in range(12):
                a = jnp.tanh(a @ w + y * (i + 1)) + jnp.sin(a) * 0.5
                a = a - jnp.mean(a, axis=0, keepdims=True)
                if i == 6:
                    a = lax.reduce_precision(a, exponent_bits=8, mantissa_bits=7)
            return jnp.sum(a * a), jnp.max(a, axis=1)

        x = jnp.ones((8, 8), jnp.float64)
        text: str = jax.jit(f).lower(x, x, x).as_text()
    finally:
        jax.config.update("jax_enable_x64", False)
    return text


@pytest.mark.campaign
def test_a_200_instruction_program_shrinks_to_its_refused_op(tmp_path: Path) -> None:
    """Issue 45's size: about 200 instructions shrunk on a CPU machine to at most 10 that XLA:TPU
    refuses with the same signature. Measured: 202 -> 2 instructions in 586 s (libtpu 0.0.52) and
    in 827 s (libtpu 0.0.42), on 2 cores shared with other work: a campaign test (``pytest -m
    campaign``)."""
    import time

    release = _libtpu()
    path = tmp_path / "big200.mlir"
    path.write_text(_program_200())
    comp = xs.load_computation(str(path))
    err = _tpu_compile_error(comp)
    if err is None or not X64.search(err):
        pytest.skip(f"XLA:TPU of libtpu {release} compiles an f64 reduce-precision (or fails otherwise: {err})")
    xs.compile(comp, "cpu:0")
    start = time.monotonic()
    res = xs.reduce(comp, "compile-error", device=xs.topology("v5e:1x1").devices[0], max_time=1500)
    took = time.monotonic() - start
    assert res.instructions_before >= 190 and res.instructions_after <= 10, res
    small = xs.XlaComputation.from_hlo_text(res.hlo_text)
    again = _tpu_compile_error(small)
    assert again is not None and signature(again, died=False) == signature(err, died=False), (again, err)
    assert signature(err, died=False).startswith("UNIMPLEMENTED (reduce-precision): "), err
    print(f"200-instruction TPU case: {res.instructions_before} -> {res.instructions_after} in {took:.0f} s")


def test_on_the_cpu_the_program_shows_no_problem(program: tuple[Path, xs.XlaComputation, str]) -> None:
    with raises(xs.NotReproducedError, "does not show the problem", "loads and compiles"):
        xs.reduce(program[1], "compile-error")


# -- what the device goes with (no libtpu needed) ------------------------------------------------------
def test_device_goes_with_crash_or_compile_error() -> None:
    comp = xs.XlaComputation.from_hlo_text(
        "HloModule m\n\nENTRY main {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p)\n}\n")
    with raises(xs.XlaSdkError, "until='crash' or 'compile-error", "'diverge'"):
        xs.reduce(comp, "diverge", device="cpu:0")
    with raises(xs.XlaSdkError, "device= is where against= runs", "until='crash' or 'compile-error'"):
        xs.reduce(comp, script="true", device="cpu:0")


def test_cli_topology_needs_crash_or_compile_error(tmp_path: Path) -> None:
    import io

    from xlasdk.cli import main

    f = tmp_path / "m.hlo"
    f.write_text("HloModule m\n\nENTRY main {\n  ROOT p = f32[2] parameter(0)\n}\n")
    err = io.StringIO()
    rc = main(["reduce", str(f), "--until", "diverge", "--topology", "v5e:1x1", "-o", str(tmp_path / "o.hlo")],
              stdout=io.StringIO(), stderr=err)
    assert rc == 2 and "--topology NAME compiles each candidate for that TPU" in err.getvalue()


# -- the failure kept: its signature -------------------------------------------------------------------
def test_signature_names_the_class_of_failure_not_its_names() -> None:
    a = ("compiling 'jit_f' failed: UNIMPLEMENTED: While rewriting computation to not contain X{64|128} element "
         "types, XLA encountered an HLO for which this rewriting is not implemented: %reduce-precision.11 = "
         "f64[6005]{0} reduce-precision(%p1.1), exponent_bits=8, mantissa_bits=7, metadata={op_name=\"a/b\"}")
    b = ("compiling 'candidate' failed: UNIMPLEMENTED: While rewriting computation to not contain X{64|128} element "
         "types, XLA encountered an HLO for which this rewriting is not implemented: %reduce-precision.1 = "
         "f64[1]{0} reduce-precision(%constant.1), exponent_bits=8, mantissa_bits=7")
    c = a.replace("reduce-precision", "cbrt")
    assert signature(a, died=False) == signature(b, died=False)
    assert signature(a, died=False) != signature(c, died=False)
    assert signature(a, died=False).startswith("UNIMPLEMENTED (reduce-precision): While rewriting")
    death = "it died with SIGABRT: xprecision_rewriter.cc:2101] Unsupported CVT X{64|128} expansion from c128[19]"
    assert signature(death, died=True) == "abort at xprecision_rewriter.cc:2101 (convert)"
    assert signature(death.replace("c128[19]", "c128[1]"), died=True) == signature(death, died=True)
    assert signature(death.replace("2101", "2102"), died=True) != signature(death, died=True)
    assert signature("it died with SIGSEGV", died=True) == "died (SIGSEGV)"
    rc = "INTERNAL: RET_CHECK failure (external/xla/xla/service/algebraic_simplifier.cc:123) Compatible(a, b)"
    assert signature(rc, died=False) == "INTERNAL at algebraic_simplifier.cc:123"
    assert location("no location here") is None


# -- LAPACK calls: lowered for the TPU first, as xs.compile does ------------------------------------
def _program_with_lapack(x64_bug: bool) -> str:
    """StableHLO of a JAX CPU program calling LAPACK (jnp.linalg.cholesky: ``lapack_spotrf_ffi``), which
    xs.compile lowers for a TPU; with ``x64_bug``, an f64 reduce-precision after it (XLA:TPU's X64 rewriter
    refuses that)."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    lax = jax.lax
    jax.config.update("jax_enable_x64", x64_bug)
    try:
        def f(a: Any, y: Any) -> Any:
            c = jnp.linalg.cholesky(a @ a.T + 4.0 * jnp.eye(4, dtype=a.dtype))
            s = jnp.sum(c) + jnp.sum(jnp.tanh(c))
            if x64_bug:
                z = lax.reduce_precision(jnp.sin(y) * 2.0, exponent_bits=8, mantissa_bits=7)
                return s.astype(jnp.float32), jnp.exp(z) + y
            return s, jnp.cos(y)

        a = jnp.ones((4, 4), jnp.float32)
        y = jnp.ones((8,), jnp.float64 if x64_bug else jnp.float32)
        text: str = jax.jit(f).lower(a, y).as_text()
    finally:
        jax.config.update("jax_enable_x64", False)
    assert "lapack_" in text, "jax no longer lowers cholesky to LAPACK on the CPU"
    return text


def test_a_lapack_call_is_lowered_before_each_candidate_compiles(tmp_path: Path) -> None:
    """A CPU program whose only TPU "failure" would be its LAPACK call (xs.compile lowers it for a
    TPU) is not a TPU compile failure: reduce says it does not show the problem (it would have
    shrunk to a LAPACK call XLA:TPU has no emitter for)."""
    _libtpu()
    path = tmp_path / "chol.mlir"
    path.write_text(_program_with_lapack(False))
    comp = xs.load_computation(str(path))
    with raises(xs.NotReproducedError, "does not show the problem"):
        xs.reduce(comp, "compile-error", device=xs.topology("v5e:1x1").devices[0], max_time=200)


def test_a_tpu_failure_beside_a_lapack_call_shrinks_to_the_failure(tmp_path: Path) -> None:
    release = _libtpu()
    path = tmp_path / "chol64.mlir"
    path.write_text(_program_with_lapack(True))
    comp = xs.load_computation(str(path))
    from xlasdk.runtime._platform_lowering import for_platform

    err = _tpu_compile_error(for_platform(comp, "tpu"))
    if err is None or not X64.search(err):
        pytest.skip(f"XLA:TPU of libtpu {release} compiles an f64 reduce-precision (or fails otherwise: {err})")
    res = xs.reduce(comp, "compile-error", device=xs.topology("v5e:1x1").devices[0], max_time=400)
    assert "lapack" not in res.hlo_text and "reduce-precision" in res.hlo_text, res.hlo_text
    assert res.instructions_after <= 5, res
