"""The CPU meaning of XLA:TPU's custom calls ``Cholesky``, ``InvertDiagBlocksLowerTriangular`` /
``InvertDiagBlocksUpperTriangular`` and ``GatherScatterIndicesBitpacked`` (xlasdk.formats.tpu_meaning), on
modules XLA:TPU wrote: tests/data/dumps_tpu_custom_calls/<program>/ (jaxlib 0.10.2, libtpu 0.0.42.1) and
tests/data/dumps_tpu_custom_calls_libtpu052/<program>/ (jaxlib 0.12.1, libtpu 0.0.52), JAX programs compiled
for a v5e without a chip by tools/make_tpu_custom_call_dumps.py.

The evidence for each meaning: the TPU-optimized module run on the CPU with its meaning gives the values
of the module it was compiled from (its before-optimizations file, run on the CPU) on several inputs, to
f32 rounding; numpy's decompositions are the independent oracle of both; the reference evaluator (which
evaluates the rewritten module op by op in float64) agrees; a meaning changed on purpose is caught.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import assert_same_or_within_ulps
from xlasdk import ops

DATA = Path(__file__).resolve().parent / "data" / "dumps_tpu_custom_calls"
#: the dumps of each libtpu release
RELEASES = {"libtpu-0.0.42": DATA, "libtpu-0.0.52": DATA.with_name("dumps_tpu_custom_calls_libtpu052")}
# compiling the same module again reads it back from a compile cache of this run (tests/conftest.py):
# these tests are about values, not compiling
pytestmark = pytest.mark.usefixtures("shared_compile_cache")
LINALG = ("cholesky", "cholesky_batch", "cholesky_blocked", "cho_solve", "triangular_solve_blocked",
          "triangular_solve_upper", "triangular_solve_batch")
INDEXING = ("gather_2d", "scatter_add_2d", "take_along_axis")
TARGETS = {
    "cholesky": {"Cholesky"}, "cholesky_batch": {"Cholesky"},
    "cholesky_blocked": {"Cholesky", "InvertDiagBlocksLowerTriangular"},
    "cho_solve": {"Cholesky", "InvertDiagBlocksLowerTriangular"},
    "triangular_solve_blocked": {"InvertDiagBlocksLowerTriangular", "AllocateBuffer"},
    "triangular_solve_upper": {"InvertDiagBlocksUpperTriangular"},
    "triangular_solve_batch": {"InvertDiagBlocksLowerTriangular"},
    "gather_2d": {"GatherScatterIndicesBitpacked"}, "scatter_add_2d": {"GatherScatterIndicesBitpacked"},
    "take_along_axis": {"GatherScatterIndicesBitpacked"},
}


def _outs(result: Any) -> list[np.ndarray[Any, Any]]:
    return [np.asarray(o.to_numpy()) for o in (result if isinstance(result, tuple) else (result,))]


def _modules(program: str, release: str = "libtpu-0.0.42") -> tuple[xs.XlaComputation, xs.XlaComputation]:
    folder = RELEASES[release] / program
    before = xs.load_computation(folder / "module.before_optimizations.txt")
    after = xs.load_computation(folder / "module.after_optimizations.txt")
    return before, after


def _inputs(program: str, comp: xs.XlaComputation, seed: int) -> list[np.ndarray[Any, Any]]:
    """Symmetric positive definite matrices for a Cholesky, well-conditioned triangular ones for a solve
    (the other triangle random: it must not be read), indices in range, negative and out of range."""
    rng = np.random.default_rng(seed)
    out = []
    for s in comp.program_shape().parameter_shapes():
        dims = tuple(s.dimensions())
        if s.numpy_dtype().kind in "iu":
            out.append(rng.integers(-70, 140, dims).astype(s.numpy_dtype()))
            continue
        a = rng.standard_normal(dims)
        if len(dims) >= 2 and dims[-1] == dims[-2]:
            n = dims[-1]
            eye = np.eye(n)
            a = a @ np.swapaxes(a, -1, -2) / n + eye if "cho" in program else a / np.sqrt(n) + 3 * eye
            if program == "cho_solve":  # cho_factor(lower=True) reads the lower triangle only: junk above
                a = np.tril(a) + np.triu(rng.standard_normal(dims), 1)
        out.append(a.astype(np.float32))
    return out


def _numpy_oracle(program: str, args: list[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
    a = args[0].astype(np.float64)
    if program.startswith("cholesky"):
        return np.linalg.cholesky(a)
    if program == "cho_solve":
        return np.linalg.solve(np.tril(a) + np.tril(a, -1).T, args[1].astype(np.float64))
    t = np.triu(a) if program.endswith("upper") else np.tril(a)
    if program.endswith("batch"):  # trans=1: t^T x = b
        t = np.swapaxes(t, -1, -2)
    return np.linalg.solve(t, args[1].astype(np.float64))


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_the_dumps_hold_the_custom_calls(release: str) -> None:
    for program, targets in TARGETS.items():
        text = (RELEASES[release] / program / "module.after_optimizations.txt").read_text()
        assert set(re.findall(r'custom_call_target="(\w+)"', text)) == targets, program
        assert "custom_call_target" not in (RELEASES[release] / program / "module.before_optimizations.txt").read_text()


@pytest.mark.parametrize("release", sorted(RELEASES))
@pytest.mark.parametrize("program", LINALG)
def test_linalg_custom_calls_reproduce_the_program(program: str, release: str) -> None:
    before, after = _modules(program, release)
    assert after.tpu_rewrite is not None and after.tpu_rewrite[0] > 0
    run_before, run_after = xs.compile(before, device="cpu:0"), xs.compile(after, device="cpu:0")
    for seed in range(3):
        args = _inputs(program, before, seed)
        (want,), (got,) = _outs(run_before(*args)), _outs(run_after(*args))
        # measured: within 1.7e-7 of the output's scale (f32 rounding of another order of operations)
        assert_same_or_within_ulps(got, want, ulps=64, what=f"{program} seed {seed}")
        oracle = _numpy_oracle(program, args)
        np.testing.assert_allclose(got, oracle, rtol=0, atol=1e-4 * float(np.max(np.abs(oracle))))


@pytest.mark.parametrize("program", ("cholesky", "cholesky_batch", "cho_solve"))
def test_reference_evaluator_agrees_with_the_cpu_meaning(program: str) -> None:
    _, after = _modules(program)
    report = xs.compare(after, _inputs(program, after, 7))
    assert report.ok, str(report)


@pytest.mark.parametrize("program", ("cholesky", "cholesky_batch"))
def test_cholesky_of_a_matrix_not_positive_definite_is_nan_as_the_program_says(program: str) -> None:
    before, after = _modules(program)
    args = _inputs(program, before, 3)
    args[0][..., 1, 1] = -5.0  # not positive definite
    (want,), (got,) = _outs(xs.compile(before, device="cpu:0")(*args)), _outs(xs.compile(after, device="cpu:0")(*args))
    assert np.isnan(want).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)])


@pytest.mark.parametrize("release", sorted(RELEASES))
@pytest.mark.parametrize("program", INDEXING)
def test_bitpacked_index_mark_is_the_identity(program: str, release: str) -> None:
    before, after = _modules(program, release)
    run_before, run_after = xs.compile(before, device="cpu:0"), xs.compile(after, device="cpu:0")
    for seed in range(3):
        args = _inputs(program, before, seed)
        (want,), (got,) = _outs(run_before(*args)), _outs(run_after(*args))
        np.testing.assert_array_equal(got, want)
    x, i = args[0], args[1]
    if program == "gather_2d":  # numpy: jnp's indexing wraps negative indices once and clamps
        j = args[2]
        r, c = np.clip(np.where(i < 0, i + 64, i), 0, 63), np.clip(np.where(j < 0, j + 128, j), 0, 127)
        np.testing.assert_array_equal(got, x[r, c])


def _meaning_text(program: str) -> str:
    from xlasdk.formats.tpu_meaning import cpu_meaning

    found = cpu_meaning((DATA / program / "module.after_optimizations.txt").read_text())
    assert found is not None
    return found.text


@pytest.mark.parametrize(("program", "pattern", "wrong"), [
    # the block inverse replaced by the block itself: the solve is wrong
    ("triangular_solve_upper", r"triangular-solve\((%[\w.\-]+), [^)]*\)[^\n]*", r"copy(\1)"),
    # the upper Cholesky factor in place of the lower
    ("cho_solve", r"cholesky\((%[\w.\-]+)\), lower=true", r"cholesky(\1), lower=false"),
    # the indices marked off by one
    ("gather_2d", r"copy\((%[\w.\-]+)\)(?=[^\n]*\n[^\n]*gather)", r"add(\1, \1)"),
])
def test_a_wrong_meaning_is_caught(program: str, pattern: str, wrong: str) -> None:
    """The same check with the meaning changed on purpose fails: the evidence discriminates."""
    text = _meaning_text(program)
    bad_text, n = re.subn(pattern, wrong, text, count=1)
    assert n == 1, text
    bad = xs.XlaComputation.from_hlo_text(bad_text)
    before, _ = _modules(program)
    args = _inputs(program, before, 0)
    (want,), (got,) = _outs(xs.compile(before, device="cpu:0")(*args)), _outs(xs.compile(bad, device="cpu:0")(*args))
    with pytest.raises(AssertionError):
        assert_same_or_within_ulps(got, want, ulps=64, what=program)


# -- refusals: forms not seen in XLA:TPU's modules ------------------------------------------------------
_CFG = 'backend_config={"flag_configs":[],"scoped_memory_configs":[]}'


def _load(body: str, params: str, result: str) -> xs.XlaComputation:
    return xs.XlaComputation.from_hlo_text(f"HloModule m, is_scheduled=true\n\nENTRY %e ({params}) -> {result} {{\n"
                                           f"{body}\n}}\n")


@pytest.mark.parametrize(("target", "shapes", "words"), [
    ("Cholesky", ("f32[4,6]", "f32[4,6]"), "square matrices"),
    ("Cholesky", ("bf16[4,4]", "bf16[4,4]"), "f32 arrays"),
    ("InvertDiagBlocksLowerTriangular", ("f32[2,4,4]", "f32[2,4,3]"), "one array operand of the result's shape"),
    ("GatherScatterIndicesBitpacked", ("f32[8,2]", "f32[8,2]"), "not integer indices"),
])
def test_forms_not_seen_are_refused_naming_the_call(target: str, shapes: tuple[str, str], words: str) -> None:
    src, dst = shapes
    with pytest.raises(xs.FormatError, match=rf"instruction 'k' \(custom-call '{target}'\).*{words}"):
        _load(f"  %a = {src}{{{','.join(map(str, range(src.count(',') , -1, -1)))}:T(8,128)}} parameter(0)\n"
              f'  ROOT %k = {dst} custom-call(%a), custom_call_target="{target}", {_CFG}', f"a: {src}", dst)


# -- the reference evaluator's rules for the custom calls themselves --------------------------------------
def _call(target: str, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    b = xs.XlaBuilder("c")
    p = ops.Parameter(b, 0, xs.shape_from_pyval(x))
    out = ops.CustomCall(b, target, [p], xs.shape_from_pyval(x))
    (got,) = xs.evaluate(b.build(out), x)
    return np.asarray(got)


def test_reference_rules_of_the_custom_calls() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 5, 5))
    spd = (a @ np.swapaxes(a, -1, -2) + 5 * np.eye(5)).astype(np.float32)
    got = _call("Cholesky", spd)
    low = np.tri(5, dtype=bool)
    np.testing.assert_allclose(got[..., low], np.linalg.cholesky(spd.astype(np.float64))[..., low], rtol=1e-6)
    assert np.isnan(got[..., ~low]).all()  # the triangle XLA:TPU leaves unspecified
    t = (a + 4 * np.eye(5)).astype(np.float32)
    for target, tri in (("InvertDiagBlocksLowerTriangular", np.tril), ("InvertDiagBlocksUpperTriangular", np.triu)):
        np.testing.assert_allclose(_call(target, t), np.linalg.inv(tri(t.astype(np.float64))), rtol=1e-5, atol=1e-6)
    idx = rng.integers(0, 9, (8, 2)).astype(np.int32)
    np.testing.assert_array_equal(_call("GatherScatterIndicesBitpacked", idx), idx)
    with pytest.raises(xs.XlaSdkError, match="GatherScatterIndicesBitpacked"):
        _call("GatherScatterIndicesBitpacked", idx.astype(np.float32))
