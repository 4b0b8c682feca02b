"""Loaded modules calling jaxlib's LAPACK kernels (issue 31, finding 4): the kernels trust the shapes a
module claims (``lapack_spotrf_ffi`` claiming an ``f32[64,64]`` result of an ``f32[4,4]`` operand
ran and returned memory from outside the operand), so the loader checks each call against its
target's contract (:mod:`xlasdk.ops.lapack_contracts`). Every ``jnp.linalg`` / ``jax.scipy.linalg``
program JAX lowers for CPU loads and runs to numpy's values; each of its LAPACK calls, lifted into a
module of its own, loads and runs as it is and is refused at load, naming the line and the target,
once one of its operand or result shapes lies (in a child process: before the contracts, a lie could
write outside a buffer)."""

from __future__ import annotations

import json
import re
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

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jsl = pytest.importorskip("jax.scipy.linalg")

RNG = np.random.default_rng(31)
Arr = np.ndarray[Any, Any]


def _a(*shape: int, spd: bool = False, dt: Any = np.float32) -> Arr:
    a = RNG.standard_normal(shape)
    if np.dtype(dt).kind == "c":
        a = a + 1j * RNG.standard_normal(shape)
    n = shape[-1]
    out = a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n) if spd else a + n * np.eye(shape[-2], n)
    return np.asarray(out.astype(dt))


def _close(got: Any, want: Any, tol: float = 2e-4) -> None:
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol)


def _mT(x: Arr) -> Arr:
    return np.conj(np.swapaxes(x, -1, -2))


def _qr(a: Arr, out: list[Arr]) -> None:
    q, r = out
    _close(q @ r, a)
    _close(_mT(q) @ q, np.broadcast_to(np.eye(q.shape[-1]), q.shape[:-2] + (q.shape[-1],) * 2))
    _close(np.tril(r, -1), 0)


def _eigh(a: Arr, out: list[Arr]) -> None:
    w, v = out
    _close(w, np.linalg.eigvalsh(a))
    _close(a @ v, v * w[..., None, :], 1e-3)


def _svd(a: Arr, out: list[Arr]) -> None:
    u, s, vt = out
    _close(s, np.linalg.svd(a, compute_uv=False))
    k = s.shape[-1]
    _close((u[..., :k] * s[..., None, :]) @ vt[..., :k, :], a)


def _lu(a: Arr, out: list[Arr]) -> None:
    p, lo, up = out
    _close(p @ lo @ up, a)
    _close(np.triu(lo, 1), 0)
    _close(np.tril(up, -1), 0)


def _eig(a: Arr, out: list[Arr]) -> None:
    w, v = out
    _close(np.sort_complex(w.reshape(-1)), np.sort_complex(np.linalg.eigvals(a).reshape(-1)), 1e-3)
    _close(a @ v, v * w[..., None, :], 1e-3)


def _schur(a: Arr, out: list[Arr]) -> None:
    t, z = out
    _close(z @ t @ _mT(z), a, 1e-3)
    _close(np.tril(t, -2), 0)


def _hessenberg(a: Arr, out: list[Arr]) -> None:
    h, q = out
    _close(q @ h @ _mT(q), a, 1e-3)
    _close(np.tril(h, -2), 0)


def _tridiagonal_solve(args: list[Arr], out: list[Arr]) -> None:
    dl, d, du, b = args
    dense = np.diag(d[0]) + np.diag(dl[0, 1:], -1) + np.diag(du[0, :-1], 1)
    _close(out[0][0], np.linalg.solve(dense, b[0]))


def _values(fn: Callable[..., Any]) -> Callable[[list[Arr], list[Arr]], None]:
    def check(args: list[Arr], out: list[Arr]) -> None:
        want = fn(*args)
        for g, w in zip(out, want if isinstance(want, tuple) else (want,), strict=True):
            _close(g, w)
    return check


def _one(check: Callable[[Arr, list[Arr]], None]) -> Callable[[list[Arr], list[Arr]], None]:
    return lambda args, out: check(args[0], out)


_B2 = (2, 4, 2)
#: name -> (jax function, arguments, numpy oracle of its outputs).
PROGRAMS: dict[str, tuple[Callable[..., Any], list[Arr], Callable[[list[Arr], list[Arr]], None]]] = {
    "cholesky": (jnp.linalg.cholesky, [_a(2, 4, 4, spd=True)], _values(np.linalg.cholesky)),
    "cholesky_c64": (jnp.linalg.cholesky, [_a(4, 4, spd=True, dt=np.complex64)], _values(np.linalg.cholesky)),
    "qr": (jnp.linalg.qr, [_a(2, 5, 3)], _one(_qr)),
    "qr_complete_f64": (lambda x: jnp.linalg.qr(x, mode="complete"), [_a(5, 3, dt=np.float64)], _one(_qr)),
    "eigh": (jnp.linalg.eigh, [_a(2, 4, 4, spd=True)], _one(_eigh)),
    "eigh_c64": (jnp.linalg.eigh, [_a(4, 4, spd=True, dt=np.complex64)], _one(_eigh)),
    "svd": (jnp.linalg.svd, [_a(2, 5, 3)], _one(_svd)),
    "svd_reduced": (lambda x: jnp.linalg.svd(x, full_matrices=False), [_a(3, 5)], _one(_svd)),
    "svdvals": (lambda x: jnp.linalg.svd(x, compute_uv=False), [_a(2, 5, 3)],
                _values(lambda x: np.linalg.svd(x, compute_uv=False))),
    "svd_gesvd": (lambda x: jax.lax.linalg.svd(x, algorithm=jax.lax.linalg.SvdAlgorithm.QR), [_a(4, 3)],
                  _one(lambda a, out: _svd(a, [out[0], out[1], out[2]]))),
    "lu": (jsl.lu, [_a(4, 4)], _one(_lu)),
    "solve": (jnp.linalg.solve, [_a(2, 4, 4), _a(*_B2)], _values(np.linalg.solve)),
    "inv": (jnp.linalg.inv, [_a(2, 4, 4)], _values(np.linalg.inv)),
    "det": (jnp.linalg.det, [_a(2, 4, 4)], _values(np.linalg.det)),
    "eig": (jnp.linalg.eig, [_a(2, 4, 4)], _one(_eig)),
    "schur": (jsl.schur, [_a(4, 4)], _one(_schur)),
    "hessenberg": (lambda x: jsl.hessenberg(x, calc_q=True), [_a(4, 4)], _one(_hessenberg)),
    "solve_triangular": (lambda x, b: jsl.solve_triangular(x, b, lower=True), [_a(2, 4, 4), _a(*_B2)],
                         _values(lambda x, b: np.linalg.solve(np.tril(x), b))),
    "solve_triangular_right": (
        lambda x, b: jax.lax.linalg.triangular_solve(x, b, left_side=False, lower=False, transpose_a=True),
        [_a(2, 4, 4), _a(2, 3, 4)], _values(lambda x, b: b @ np.linalg.inv(np.triu(x).mT))),
    "cho_solve": (lambda x, b: jsl.cho_solve(jsl.cho_factor(x, lower=True), b), [_a(4, 4, spd=True), _a(4, 2)],
                  _values(np.linalg.solve)),
    "ormqr": (lambda x, c: jax.lax.linalg.ormqr(jnp.linalg.qr(x, mode="raw")[0].mT, jnp.linalg.qr(x, mode="raw")[1],
                                                c, left=True, transpose=True),
              [_a(5, 3), _a(5, 2)], _values(lambda x, c: np.linalg.qr(x, mode="complete")[0].T @ c)),
    "tridiagonal_solve": (jax.lax.linalg.tridiagonal_solve,
                          [_a(1, 4), _a(1, 4) + 4, _a(1, 4), _a(1, 4, 3)], _tridiagonal_solve),
    "pinv": (jnp.linalg.pinv, [_a(2, 5, 3)], _values(np.linalg.pinv)),
}


def _lowered(name: str) -> str:
    fn, args, _ = PROGRAMS[name]
    with jax.enable_x64(any(a.dtype == np.float64 for a in args)):
        text: str = jax.jit(fn).lower(*args).as_text()
    return text


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_jax_linalg_programs_load_and_run_to_numpys_values(name: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLASDK_LOAD_CACHE", "0")
    _, args, check = PROGRAMS[name]
    text = _lowered(name)
    assert re.search(r"custom_call @(lapack_\w+_ffi)", text), "no LAPACK call in the program: nothing checked"
    path = tmp_path / f"{name}.mlir"
    path.write_text(text)
    comp = xs.load_computation(path)
    out = xs.compile(comp, device="cpu:0")(*args)
    check(args, [np.asarray(v) for v in (out if isinstance(out, (list, tuple)) else [out])])


_CALL = re.compile(r"^\s*%\S+ = stablehlo\.custom_call @(\w+)\(([^)]*)\) (\{.*\}) : \((.*)\) -> (.*)$")


def _split(types: str) -> list[str]:
    """``tensor<2x4xf32>, tensor<i32>`` -> its types (a result list may be parenthesized)."""
    types = types.strip()
    if types.startswith("(") and types.endswith(")"):
        types = types[1:-1]
    return re.findall(r"tensor<[^<>]*(?:<[^<>]*>)?>", types)


def _lifted(line: str) -> tuple[str, str, list[str], list[str]]:
    """One LAPACK call of a JAX program as ``(target, attributes, operand types, result types)``,
    the attributes without the ones a lifted call cannot keep (Shardy's rule, the aliases)."""
    m = _CALL.match(line)
    assert m, line
    attrs = re.sub(r", sdy\.sharding_rule = #sdy\.op_sharding_rule<.*?, custom>", "", m.group(3))
    attrs = re.sub(r"output_operand_aliases = \[.*?>\], ", "", attrs)
    assert "sdy." not in attrs and "output_operand_aliases" not in attrs, attrs
    return m.group(1), attrs, _split(m.group(4)), _split(m.group(5))


def _module(target: str, attrs: str, operands: list[str], results: list[str]) -> str:
    params = ", ".join(f"%a{i}: {t}" for i, t in enumerate(operands))
    uses = ", ".join(f"%a{i}" for i in range(len(operands)))
    res = ", ".join(results)
    outs = ", ".join(f"%0#{i}" for i in range(len(results))) if len(results) > 1 else "%0"
    lhs = f"%0:{len(results)}" if len(results) > 1 else "%0"
    return (f"func.func @main({params}) -> ({res}) {{\n"
            f"  {lhs} = stablehlo.custom_call @{target}({uses}) {attrs} : ({', '.join(operands)}) -> "
            f"{'(' + res + ')' if len(results) > 1 else res}\n"
            f"  return {outs} : {res}\n}}\n")


def _grown(t: str, axis: int, by: int) -> str | None:
    """``tensor<2x4x4xf32>`` with dimension ``axis`` (from the end) grown by ``by``; None for a scalar."""
    m = re.fullmatch(r"tensor<((?:\d+x)*)(.+)>", t)
    assert m, t
    dims = [int(d) for d in m.group(1).split("x") if d]
    if len(dims) < -axis:
        return None
    dims[axis] = max(dims[axis] + by, 0)
    return f"tensor<{''.join(f'{d}x' for d in dims)}{m.group(2)}>"


def _calls() -> dict[str, tuple[str, str, list[str], list[str]]]:
    """Every distinct LAPACK call of :data:`PROGRAMS`, lifted: ``program.i`` -> its parts."""
    out = {}
    for name in PROGRAMS:
        lines = [ln for ln in _lowered(name).splitlines() if "stablehlo.custom_call @" in ln
                 and ("lapack_" in ln or "tridiagonal_solve" in ln)]
        for i, ln in enumerate(lines):
            out[f"{name}.{i}"] = _lifted(ln)
    return out


def _lies(target: str, attrs: str, operands: list[str], results: list[str]) -> dict[str, str]:
    """The call with one shape lying: each result grown (a bigger claim: the kernel's output ends
    before it) and shrunk (the kernel writes past its end), and the first operand grown by 3 rows
    (its last dimension when it has one)."""
    lies = {}
    for i, t in enumerate(results):
        for by, word in ((60, "grown"), (-1, "shrunk")):
            bad = _grown(t, -1, by)
            if bad is not None and bad != t:
                lies[f"result{i}_{word}"] = _module(target, attrs, operands, [*results[:i], bad, *results[i + 1:]])
    bad_first = _grown(operands[0], -2, 3) or _grown(operands[0], -1, 3)
    if bad_first is not None:
        lies["operand0_grown"] = _module(target, attrs, [bad_first, *operands[1:]], results)
    return lies


_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import xlasdk as xs
    out = {}
    for path in sys.argv[1:]:
        name = path.rsplit("/", 1)[-1][:-5]
        print("START", name, flush=True)
        try:
            comp = xs.load_computation(path)
        except xs.FormatError as e:
            out[name] = ["load", str(e)]
            continue
        args = [np.ones(s.dimensions(), s.numpy_dtype()) + np.eye(*s.dimensions()[-2:], dtype=s.numpy_dtype())
                if s.rank() >= 2 else np.ones(s.dimensions(), s.numpy_dtype()) * 4
                for s in comp.program_shape().parameter_shapes()]
        try:
            res = xs.compile(comp, device="cpu:0")(*args)
        except xs.XlaSdkError as e:
            out[name] = ["error", str(e)]
            continue
        out[name] = ["ran", ""]
    print("RESULT " + json.dumps(out), flush=True)
""")


def _outcomes(tmp_path: Path, modules: dict[str, str]) -> dict[str, list[str]]:
    paths = []
    for name, text in modules.items():
        f = tmp_path / f"{name}.mlir"
        f.write_text(text)
        paths.append(str(f))
    proc = subprocess.run([sys.executable, "-c", _CHILD, *paths], capture_output=True, text=True, timeout=900,
                          env={**__import__("os").environ, "XLASDK_LOAD_CACHE": "0"})
    started = [ln.split()[1] for ln in proc.stdout.splitlines() if ln.startswith("START ")]
    assert proc.returncode == 0, f"the child died ({proc.returncode}) on {started[-1:]}: {proc.stderr[-2000:]}"
    result = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    got: dict[str, list[str]] = json.loads(result[0][7:])
    return got


def test_each_lapack_call_runs_as_lowered_and_is_refused_at_load_when_a_shape_lies(tmp_path: Path) -> None:
    calls = _calls()
    targets = {c[0] for c in calls.values()}
    assert {"lapack_spotrf_ffi", "lapack_cpotrf_ffi", "lapack_sgeqrf_ffi", "lapack_dorgqr_ffi", "lapack_ssyevd_ffi",
            "lapack_cheevd_ffi", "lapack_sgesdd_ffi", "lapack_sgesvd_ffi", "lapack_sgetrf_ffi", "lapack_strsm_ffi",
            "lapack_sgeev_ffi", "lapack_sgees_ffi", "lapack_sgehrd_ffi", "lapack_sormqr_ffi",
            "lapack_sgtsv_ffi"} <= targets, targets
    honest = {f"{k}.ok": _module(*c) for k, c in calls.items()}
    lying = {f"{k}.{lie}": text for k, c in calls.items() for lie, text in _lies(*c).items()}
    got = _outcomes(tmp_path, {**honest, **lying})
    assert {k: v for k, v in got.items() if k in honest and v[0] != "ran"} == {}
    wrong = {}
    for name in lying:
        stage, message = got[name]
        target = calls[name.rsplit(".", 1)[0]][0]
        if not (stage == "load" and message.startswith(str(tmp_path / f"{name}.mlir") + ": line 2: ")
                and f"CustomCall: target {target!r}" in message):
            wrong[name] = (stage, message[:300])
    assert wrong == {}
    assert len(lying) > 100


POTRF_HLO = (
    "HloModule potrf_lies\n\nENTRY main {\n  p = f32[4,4]{1,0} parameter(0)\n"
    '  c = (f32[64,64]{0,1}, s32[]) custom-call(p), custom_call_target="lapack_spotrf_ffi", '
    "operand_layout_constraints={f32[4,4]{0,1}}, api_version=API_VERSION_TYPED_FFI, backend_config={uplo = 76 : ui8}\n"
    "  ROOT r = f32[64,64]{1,0} get-tuple-element(c), index=0\n}\n"
)


def test_the_potrf_of_the_finding_is_refused_as_hlo_text_naming_the_instruction(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLASDK_LOAD_CACHE", "0")
    f = tmp_path / "potrf.hlo"
    f.write_text(POTRF_HLO)
    with pytest.raises(xs.FormatError) as e:
        xs.load_computation(f)
    msg = str(e.value)
    assert msg.startswith(f"{f}: line 5: instruction 'c': CustomCall: target 'lapack_spotrf_ffi' on f32[4,4] returns "
                          "(f32[4,4], s32[]), got shape (f32[64,64], s32[])"), msg
    f.write_text(POTRF_HLO.replace("64,64", "4,4"))  # the honest call loads and factors
    a = _a(4, 4, spd=True)
    _close(np.tril(xs.compile(xs.load_computation(f), device="cpu:0")(a)), np.linalg.cholesky(a))


def _potrf(attrs: str = "backend_config = {uplo = 76 : ui8}", target: str = "lapack_spotrf_ffi",
           layouts: str = "operand_layouts = [dense<[0, 1]> : tensor<2xindex>], "
           "result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]") -> str:
    return (f'func.func @main(%a: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<i32>) {{\n'
            f'  %0:2 = stablehlo.custom_call @{target}(%a) {{api_version = 4 : i32, {attrs}, {layouts}}} : '
            f'(tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<i32>)\n'
            f'  return %0#0, %0#1 : tensor<4x4xf32>, tensor<i32>\n}}\n')


@pytest.mark.parametrize(("text", "words"), [
    (_potrf(target="lapack_spotri_ffi"), "'lapack_spotri_ffi' is a jaxlib LAPACK kernel name xlasdk has no shape"),
    (_potrf(target="lapack_sungqr_ffi"), "'lapack_sungqr_ffi' is a jaxlib LAPACK kernel name"),
    (_potrf(target="lapack_spotrf"), "'lapack_spotrf' is a jaxlib LAPACK kernel name"),  # the legacy form
    (_potrf(target="cpu_csr_sparse_dense_ffi"), "'cpu_csr_sparse_dense_ffi' is a jaxlib CPU kernel xlasdk has no"),
    (_potrf(target="lapack_dpotrf_ffi"), "target 'lapack_dpotrf_ffi' takes f64 operands, got operand 0 of shape f32"),
    (_potrf("backend_config = {}"), "needs attribute uplo in backend_config, one of 'L' (76), 'U' (85); got no such"),
    (_potrf("backend_config = {uplo = 88 : ui8}"), "got 88"),
    (_potrf(layouts="operand_layouts = [dense<[1, 0]> : tensor<2xindex>], "
            "result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]"),
     "needs operand 0 in layout {0,1} (matrices column-major, the rest row-major), got {1,0}"),
    (_potrf(layouts="operand_layouts = [dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[1, 0]> : "
            "tensor<2xindex>, dense<> : tensor<0xindex>]"), "needs result 0 in layout {0,1}"),
    (_potrf(layouts="mhlo.frontend_attributes = {}"), "needs operand_layouts and result_layouts"),
    (_potrf().replace("tensor<4x4xf32>", "tensor<?x4xf32>"),
     "target 'lapack_spotrf_ffi' takes static array shapes, got (f32[?,4], f32[?,4], i32[])"),
    (_potrf().replace("tensor<4x4xf32>", "tensor<?x4xf32, #stablehlo.bounds<4, ?>>"),
     "target 'lapack_spotrf_ffi' takes static shapes (its kernel reads the buffers' sizes"),
    (_potrf("backend_config = {uplo = 76 : ui8}, mhlo.backend_config = {uplo = 85 : ui8}"),
     "needs attribute uplo"),  # two dictionaries that disagree: neither is believed
    # a dictionary next to a string: which one XLA reads is not guessed
    (_potrf('backend_config = "{uplo = 85 : ui8}", mhlo.backend_config = {uplo = 76 : ui8}').replace(
        "api_version = 4 : i32, ", ""), "needs attribute uplo"),
])
def test_targets_attributes_and_layouts_outside_the_contract_are_refused(
        text: str, words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLASDK_LOAD_CACHE", "0")
    f = tmp_path / "m.mlir"
    f.write_text(text)
    with pytest.raises(xs.FormatError) as e:
        xs.load_computation(f)
    assert "line 2: CustomCall: " in str(e.value) and words in str(e.value), str(e.value)


def _only_call(name: str, target: str) -> tuple[str, str, list[str], list[str]]:
    lines = [ln for ln in _lowered(name).splitlines() if f"custom_call @{target}" in ln]
    return _lifted(lines[0])


@pytest.mark.parametrize(("program", "target", "old", "new", "words"), [
    ("schur", "lapack_sgees_ffi", "sort = 78", "sort = 83", "needs attribute sort in backend_config, one of 'N'"),
    ("svd", "lapack_sgesdd_ffi", "mode = 65", "mode = 79", "needs attribute mode in backend_config, one of 'A'"),
    ("hessenberg", "lapack_sgehrd_ffi", "high = 4", "high = 9", "needs 1 <= low <= high <= n"),
    ("hessenberg", "lapack_sgehrd_ffi", "low = 1", "low = 0", "needs 1 <= low <= high <= n"),
    ("solve_triangular", "lapack_strsm_ffi", "side = 76", "side = 82", "with side='R' needs a (n, n)"),
    ("ormqr", "lapack_sormqr_ffi", "left = true", "left = false", "with left=False needs a"),
    ("ormqr", "lapack_sormqr_ffi", "left = true", "left = 1 : i32", "needs a bool attribute left"),
    ("svd_reduced", "lapack_sgesdd_ffi", "mode = 83", "mode = 65", "returns (f32[3,5], f32[3], f32[3,3], f32[5,5]"),
])
def test_attributes_that_change_the_shapes_are_checked(program: str, target: str, old: str, new: str, words: str,
                                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLASDK_LOAD_CACHE", "0")
    t, attrs, operands, results = _only_call(program, target)
    assert old in attrs, attrs
    f = tmp_path / "m.mlir"
    f.write_text(_module(t, attrs, operands, results))
    xs.load_computation(f)  # as lowered: loads
    f.write_text(_module(t, attrs.replace(old, new), operands, results))
    with pytest.raises(xs.FormatError) as e:
        xs.load_computation(f)
    assert f"line 2: CustomCall: target {target!r} " in str(e.value) and words in str(e.value), str(e.value)


def test_the_builder_applies_the_same_contracts() -> None:
    b = xs.XlaBuilder("potrf")
    cm = xs.Shape.array_shape(np.float32, (4, 4), (0, 1))
    p = ops.Parameter(b, 0, cm)
    big = xs.Shape.array_shape(np.float32, (64, 64), (0, 1))
    info = xs.Shape.array_shape(np.int32, ())
    api = ops.CustomCallApiVersion.API_VERSION_TYPED_FFI
    with pytest.raises(xs.ShapeError, match=r"target 'lapack_spotrf_ffi' on f32\[4,4\]\S* returns"):
        ops.CustomCallWithLayout(b, "lapack_spotrf_ffi", [p], xs.Shape.tuple_shape([big, info]), [cm],
                                 api_version=api, backend_config={"uplo": np.uint8(76)})
    with pytest.raises(xs.ShapeError, match="needs operand_layouts and result_layouts"):
        ops.CustomCall(b, "lapack_spotrf_ffi", [p], xs.Shape.tuple_shape([cm, info]), api_version=api,
                       backend_config={"uplo": np.uint8(76)})
    out = ops.CustomCallWithLayout(b, "lapack_spotrf_ffi", [p], xs.Shape.tuple_shape([cm, info]), [cm],
                                   api_version=api, backend_config={"uplo": np.uint8(76)})
    a = _a(4, 4, spd=True)
    got = xs.compile(b.build(ops.GetTupleElement(out, 0)), device="cpu:0")(a)
    _close(np.tril(np.asarray(got)), np.linalg.cholesky(a))


def test_a_lying_potrf_corrupts_the_heap_when_nothing_checks_it() -> None:
    """The finding: compiled without the load check (the module parsed in the child directly), a
    ``lapack_spotrf_ffi`` claiming an ``f32[2,2]`` result of an ``f32[4,4]`` operand writes past
    its result buffer, and glibc aborts the process (``double free or corruption``)."""
    code = textwrap.dedent("""
        import numpy as np, xlasdk as xs
        from xlasdk._jaxlib import mlir
        from xlasdk.formats.loaders import _loaded
        from xlasdk.formats.sniff import Format
        text = '''%s'''
        comp = xs.XlaComputation(*_loaded(mlir.parse_module(text), "potrf", fmt=Format.STABLEHLO_TEXT))
        exe = xs.compile(comp, device="cpu:0")
        print("compiled", flush=True)
        for _ in range(3):
            exe(np.eye(4, dtype=np.float32) * 4)
        print("ran", flush=True)
    """) % _potrf().replace("(tensor<4x4xf32>, tensor<i32>)\n", "(tensor<2x2xf32>, tensor<i32>)\n").replace(
        "-> (tensor<4x4xf32>, tensor<i32>) {", "-> (tensor<2x2xf32>, tensor<i32>) {").replace(
        "return %0#0, %0#1 : tensor<4x4xf32>", "return %0#0, %0#1 : tensor<2x2xf32>")
    assert code.count("tensor<2x2xf32>") == 3, code
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert "compiled" in proc.stdout
    assert proc.returncode != 0 and "ran" not in proc.stdout, (proc.returncode, proc.stderr[-500:])


def test_verified_loads_are_cached_under_the_contracts_source() -> None:
    """A verified load is cached under a stamp of the loader's code: the contracts (in
    ``xlasdk/ops``) are part of it, so an edited contract never reads what the older one passed."""
    from xlasdk.program import load_cache

    stamp = load_cache._code_stamp()
    assert b"lapack_contracts.py:" in stamp and b"custom_call.py:" in stamp and b"rule_check.py:" in stamp
    # the loader's code in both packages: formats' checks and program's worker services (moved there)
    assert b"untrusted.py:" in stamp and b"hlo_check.py:" in stamp and b"_worker.py:" in stamp


def _alias(operand: int, output: str = "") -> str:
    return (f"output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [{output}], "
            f"operand_index = {operand}, operand_tuple_indices = []>], ")


def test_aliases_other_than_the_kernels_own_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``trsm`` works in place over ``b`` (operand 1): its result over ``a`` would overwrite the
    triangle it still reads (a wrong answer); potrf's result 0 over operand 0 is its own alias."""
    monkeypatch.setenv("XLASDK_LOAD_CACHE", "0")
    t, attrs, operands, results = _only_call("inv", "lapack_strsm_ffi")
    assert operands[0] == operands[1] == results[0]  # a and b of one shape: the verifier lets either alias through
    f = tmp_path / "m.mlir"
    assert "side = 76" in attrs and "trans_x = 78" in attrs, attrs  # a x = b
    a, b = _a(2, 4, 4), _a(2, 4, 4)
    tri = np.tril(a) if "uplo = 76" in attrs else np.triu(a)
    if "diag = 85" in attrs:  # unit diagonal
        tri = tri - tri * np.eye(4) + np.eye(4)
    f.write_text(_module(t, attrs.replace("{", "{" + _alias(1), 1), operands, results))
    _close(xs.compile(xs.load_computation(f), device="cpu:0")(a, b), np.linalg.solve(tri, b), 1e-3)
    f.write_text(_module(t, attrs.replace("{", "{" + _alias(0), 1), operands, results))
    with pytest.raises(xs.FormatError, match=r"line 2: CustomCall: target 'lapack_strsm_ffi' takes no output_operand_"
                       r"aliases but its own \(result 0 over operand 1\); got result \[\] over operand 0"):
        xs.load_computation(f)
    t, attrs, operands, results = _only_call("cholesky", "lapack_spotrf_ffi")
    f.write_text(_module(t, attrs.replace("{", "{" + _alias(0, "0"), 1), operands, results))
    xs.load_computation(f)
