"""Tests of xlasdk/formats/ and the file methods of XlaComputation: every format, round trips
across every format pair, XLA dump files, portable artifact versions, corrupt inputs (each in a
subprocess: the process must survive), C-08 and C-14."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import run
from xlasdk import formats, ops
from xlasdk.formats import Format
from xlasdk.formats.hlo_text import _parse_hlo_text

load_computation = getattr(xs, "load_computation", formats.load_computation)
REPO = str(Path(__file__).resolve().parents[1])
F32 = np.float32
SUFFIX = {Format.HLO_TEXT: ".hlo", Format.STABLEHLO_TEXT: ".mlir", Format.PORTABLE_ARTIFACT: ".mlirbc",
          Format.HLO_PROTO: ".pb"}


# -- helpers ----------------------------------------------------------------------------------------
def build_mixed() -> xs.XlaComputation:
    """f(a: f32[2,3], b: f32[3]) -> (exp(a) @ b, sum(a * b), a + b): several op kinds, a region, a tuple."""
    bld = xs.XlaBuilder("mixed")
    a = ops.Parameter(bld, 0, xs.Shape.array_shape(F32, (2, 3)), "a")
    b = ops.Parameter(bld, 1, xs.Shape.array_shape(F32, (3,)), "b")
    bb = ops.BroadcastInDim(b, (2, 3), (1,))
    dot = ops.Dot(ops.Exp(a), ops.Reshape(b, (3, 1)))
    total = ops.Reduce(bld, [a * bb], [ops.Constant(bld, F32(0))], lambda x, y: x + y, [0, 1])
    return bld.build(ops.Tuple(bld, [dot, total, a + bb]))


A = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], F32)
B = np.array([1.0, 2.0, -3.0], F32)


def mixed_oracle() -> list[np.ndarray[Any, Any]]:
    return [np.exp(A) @ B.reshape(3, 1), np.sum(A * B), A + B]


def run_in_subprocess(code: str, env: dict[str, str] | None = None, timeout: float = 120) -> list[dict[str, Any]]:
    """Run ``code`` in a fresh interpreter; it prints one JSON line per result via ``report(...)``.

    Asserts the process exits normally (no abort, no segfault) and returns the reports.
    """
    prelude = textwrap.dedent(
        f"""
        import json, sys
        sys.path.insert(0, {REPO!r})
        import xlasdk as xs
        from xlasdk import formats
        def report(case, fn):
            print("START " + case, flush=True)
            try:
                fn()
                out = {{"case": case, "error": None}}
            except Exception as e:
                out = {{"case": case, "error": type(e).__name__, "msg": str(e)}}
            print("RESULT " + json.dumps(out), flush=True)
        """
    )
    full_env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    if env:
        full_env.update(env)
    r = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                       env=full_env, timeout=timeout)
    started = [ln[6:] for ln in r.stdout.splitlines() if ln.startswith("START ")]
    assert r.returncode == 0, (
        f"the process died (exit {r.returncode}) during case {started[-1] if started else '?'}:\n"
        f"{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    )
    return [json.loads(ln[7:]) for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]


def assert_format_error(res: dict[str, Any], *fragments: str) -> None:
    assert res["error"] == "FormatError", res
    for f in fragments:
        assert f in res["msg"], (f, res)


# -- C-08: HLO text that must fail with a FormatError, not a crash ------------------------------------
C08 = {
    "reshape31": "HloModule m\nENTRY e {\n  a = f32[4,8] parameter(0)\n  ROOT result = f32[31] reshape(a)\n}\n",
    "reshape32": "HloModule m\nENTRY e {\n  a = f32[4,8] parameter(0)\n  ROOT result = f32[32] reshape(a)\n}\n",
    "nope": "HloModule m\nENTRY e {\n  p = s32[] parameter(0)\n  ROOT c = s32[] call(p), to_apply=nope\n}\n",
    "syntax": "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] add(p, )\n}\n",
    "add23": "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  q = f32[3] parameter(1)\n"
             "  ROOT r = f32[2] add(p, q)\n}\n",
}


def test_C08_bad_hlo_text_raises_format_error_in_a_surviving_process(tmp_path: Path) -> None:
    paths = {}
    for name, text in C08.items():
        p = tmp_path / f"{name}.hlo"
        p.write_text(text)
        paths[name] = str(p)
    code = f"""
    paths = {paths!r}
    texts = {C08!r}
    for name in ("reshape31", "nope", "syntax", "add23"):
        report(name + ":file", lambda: xs.XlaComputation and formats.load_computation(paths[name]))
        report(name + ":text", lambda: xs.XlaComputation.from_hlo_text(texts[name]))
    """
    res = {r["case"]: r for r in run_in_subprocess(code)}
    assert len(res) == 8
    # 1: the parser would abort; the message names the file, the line, the op and both shapes
    assert_format_error(res["reshape31:file"], paths["reshape31"], "line 4", "reshape", "'result'", "f32[4,8]",
                        "f32[31]", "32 elements", "31 elements")
    assert_format_error(res["reshape31:text"], "from_hlo_text", "reshape", "f32[31]")
    # 3: unknown computation
    assert_format_error(res["nope:file"], paths["nope"], "line 4", "computation does not exist: nope")
    # 4: syntax
    assert_format_error(res["syntax:file"], paths["syntax"], "syntax error", "line 4")
    # 5: verified on load, not later
    assert_format_error(res["add23:file"], paths["add23"], "'r'", "stablehlo.add", "same shape")
    assert_format_error(res["add23:text"], "from_hlo_text", "stablehlo.add")


def test_C08_reshape_to_32_loads_prints_reparses_and_runs() -> None:
    comp = xs.XlaComputation.from_hlo_text(C08["reshape32"])
    assert comp.source_format == "hlo"
    ps = comp.program_shape()
    assert ps.parameter_shapes() == (xs.Shape.array_shape(F32, (4, 8)),)
    assert ps.result_shape() == xs.Shape.array_shape(F32, (32,))
    text = comp.as_hlo_text()
    assert "reshape(" in text and "f32[32]" in text
    again = xs.XlaComputation.from_hlo_text(text)
    assert again.as_hlo_text() == text
    x = np.arange(32, dtype=F32).reshape(4, 8)  # iota(32) reshaped to [4, 8]
    for c in (comp, again):
        (out,) = run(c, x)
        np.testing.assert_array_equal(out, np.arange(32, dtype=F32))


# Inputs that made XLA's HLO parser or its HLO -> StableHLO importer abort or segfault (found by
# fuzzing jaxlib 0.10.2); each must be a FormatError naming the problem.
CRASHERS = {
    "dynamic_reshape": ("  a = f32[4,8] parameter(0)\n  s = s32[] parameter(1)\n"
                        "  ROOT r = f32[31] dynamic-reshape(a, s)", "", "32 elements"),
    "reshape_bounded": ("  p = f32[<=4,3] parameter(0)\n  ROOT r = f32[5] reshape(p)", "", "12 elements"),
    "reshape_scalar": ("  p = f32[] parameter(0)\n  ROOT r = f32[2] reshape(p)", "", "1 elements"),
    "reshape_tuple": ("  p = (f32[], f32[]) parameter(0)\n  ROOT r = f32[2] reshape(p)", "", "array operand"),
    "gte_not_tuple": ("  p = f32[4] parameter(0)\n  ROOT r = f32[4] get-tuple-element(p), index=0", "", "not a tuple"),
    "gte_range": ("  p = f32[4] parameter(0)\n  t = (f32[4]) tuple(p)\n"
                  "  ROOT r = f32[4] get-tuple-element(t), index=1", "", "index 1 is out of range"),
    "gte_negative": ("  p = (f32[]) parameter(0)\n  ROOT r = f32[] get-tuple-element(p), index=-1", "",
                     "index -1 is out of range"),
    "param_gap": ("  p = f32[4] parameter(0)\n  q = f32[4] parameter(2)\n  ROOT r = f32[4] add(p, q)", "",
                  "parameter numbers must be 0..1"),
    "branch_arity": ("  p = s32[] parameter(0)\n  x = f32[] parameter(1)\n"
                     "  ROOT r = f32[] conditional(p, x, x), branch_computations={id1, id2}",
                     "id1 {\n  a = f32[] parameter(0)\n  ROOT c = f32[] negate(a)\n}\n"
                     "id2 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n",
                     "takes 2 parameter(s)"),
    "branch_tuple": ("  p = pred[] parameter(0)\n  x = f32[] parameter(1)\n"
                     "  ROOT r = f32[] conditional(p, x, x), true_computation=idt, false_computation=idt",
                     "idt {\n  a = (f32[], f32[]) parameter(0)\n  ROOT c = f32[] get-tuple-element(a), index=0\n}\n",
                     "is (f32[], f32[]), but the value passed is f32[]"),
    "topk_not_tuple": ("  p = f32[4] parameter(0)\n  ROOT r = f32[2] topk(p), k=2, largest=true", "",
                       "(values, indices) tuple"),
}


def test_C08_inputs_that_crash_xla_are_format_errors() -> None:
    texts = {}
    for name, (body, pre, _) in CRASHERS.items():
        texts[name] = "HloModule m\n" + pre + "ENTRY e {\n" + body + "\n}\n"
    texts["entry_layout"] = ("HloModule m, entry_computation_layout={(f32[4], f32[4])->f32[4]}\nENTRY e {\n"
                             "  p = f32[4] parameter(0)\n  ROOT r = f32[4] negate(p)\n}\n")
    code = f"""
    texts = {texts!r}
    for name, t in texts.items():
        report(name, lambda: xs.XlaComputation.from_hlo_text(t))
    """
    res = {r["case"]: r for r in run_in_subprocess(code)}
    for name, (_, _, fragment) in CRASHERS.items():
        assert_format_error(res[name], "from_hlo_text", fragment)
    assert_format_error(res["entry_layout"], "entry_computation_layout lists 2 parameter(s)")


# -- formats: round trips across every pair ----------------------------------------------------------
def test_every_format_pair_round_trips_with_identical_results(tmp_path: Path) -> None:
    built = build_mixed()
    expect = run(built, A, B)
    for got, want in zip(expect, mixed_oracle(), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    fmts = list(Format)
    first = {}
    for f in fmts:
        p = tmp_path / f"first{SUFFIX[f]}"
        built.save(p)
        first[f] = load_computation(p)
        assert first[f].source_format == f.value
    for f1 in fmts:
        for f2 in fmts:
            p2 = tmp_path / f"{f1.value}_to_{f2.value}{SUFFIX[f2]}"
            first[f1].save(p2)
            back = load_computation(p2)
            ps = back.program_shape()
            assert ps.parameter_shapes() == built.program_shape().parameter_shapes(), (f1, f2)
            assert ps.result_shape() == built.program_shape().result_shape(), (f1, f2)
            for got, want in zip(run(back, A, B), expect, strict=True):
                np.testing.assert_array_equal(got, want, err_msg=f"{f1.value} -> {f2.value}")


def test_from_memory_constructors_and_their_types() -> None:
    built = build_mixed()
    expect = run(built, A, B)
    hlo = xs.XlaComputation.from_hlo_text(built.as_hlo_text())
    shlo = xs.XlaComputation.from_stablehlo(built.as_stablehlo_text(debug_info=True))
    shlo_b = xs.XlaComputation.from_stablehlo(built.as_stablehlo_text().encode())
    art = xs.XlaComputation.from_stablehlo(built.serialize_portable_artifact())
    pb = xs.XlaComputation.from_hlo_proto(built.as_serialized_hlo_module_proto())
    for c in (hlo, shlo, shlo_b, art, pb):
        assert c.name == "mixed"
        for got, want in zip(run(c, A, B), expect, strict=True):
            np.testing.assert_array_equal(got, want)
    # parameter names survive StableHLO text and artifacts (argument locations), and HLO (names)
    assert shlo.program_shape().parameter_names() == ("a", "b")
    assert shlo_b.program_shape().parameter_names() == ("p0", "p1")  # text without locations
    assert art.program_shape().parameter_names() == ("a", "b")
    assert [n.split(".")[0] for n in hlo.program_shape().parameter_names()] == ["a", "b"]
    with pytest.raises(xs.FormatError, match="from_hlo_text: expected HLO text"):
        xs.XlaComputation.from_hlo_text(b"HloModule m")  # type: ignore[arg-type]
    with pytest.raises(xs.FormatError, match="from_hlo_proto: expected bytes"):
        xs.XlaComputation.from_hlo_proto("x")  # type: ignore[arg-type]
    with pytest.raises(xs.FormatError, match="from_stablehlo: not StableHLO: it holds HLO text"):
        xs.XlaComputation.from_stablehlo(built.as_hlo_text())
    with pytest.raises(xs.FormatError, match="from_hlo_text: not HLO text.*StableHLO text"):
        xs.XlaComputation.from_hlo_text(built.as_stablehlo_text())
    with pytest.raises(xs.FormatError, match="from_hlo_proto: not an HLO module proto: it holds HLO text"):
        xs.XlaComputation.from_hlo_proto(built.as_hlo_text().encode())


def test_empty_inputs_and_unknown_format_names(tmp_path: Path) -> None:
    with pytest.raises(xs.FormatError, match="from_hlo_text: the HLO text is empty"):
        xs.XlaComputation.from_hlo_text("  \n")
    with pytest.raises(xs.FormatError, match="from_stablehlo: the StableHLO text is empty"):
        xs.XlaComputation.from_stablehlo("")
    with pytest.raises(xs.FormatError, match="from_stablehlo: the data is empty"):
        xs.XlaComputation.from_stablehlo(b"")
    with pytest.raises(xs.FormatError, match="from_hlo_proto: the data is empty"):
        xs.XlaComputation.from_hlo_proto(b"")
    with pytest.raises(xs.FormatError, match="from_stablehlo: invalid StableHLO: .*no 'main'|has no 'main'"):
        xs.XlaComputation.from_stablehlo("module @m {\n}\n")
    p = tmp_path / "m.hlo"
    p.write_text(C08["reshape32"])
    with pytest.raises(xs.FormatError, match="unknown format 'docx': use one of hlo, mlir, mlirbc, pb"):
        load_computation(p, "docx")


def test_loaded_hlo_prints_the_hlo_it_was_loaded_from() -> None:
    text = C08["reshape32"]
    comp = xs.XlaComputation.from_hlo_text(text)
    assert "ROOT %result = f32[32]{0} reshape(%a)" in comp.as_hlo_text()
    pb = xs.XlaComputation.from_hlo_proto(comp.as_serialized_hlo_module_proto())
    assert pb.as_hlo_text() == comp.as_hlo_text()
    assert "stablehlo.reshape" in comp.as_stablehlo_text()


def test_tuple_parameters_of_hlo_are_flattened_in_the_program_shape() -> None:
    text = ("HloModule tup\nENTRY e {\n  p = (f32[2], s32[]) parameter(0)\n  q = f32[2] parameter(1)\n"
            "  a = f32[2] get-tuple-element(p), index=0\n  i = s32[] get-tuple-element(p), index=1\n"
            "  s = f32[2] add(a, q)\n  ROOT r = (f32[2], s32[]) tuple(s, i)\n}\n")
    comp = xs.XlaComputation.from_hlo_text(text)
    ps = comp.program_shape()
    assert ps.parameter_names() == ("p.0", "p.1", "q")
    assert [str(s) for s in ps.parameter_shapes()] == ["f32[2]", "s32[]", "f32[2]"]
    assert str(ps.result_shape()) == "(f32[2], s32[])"
    s, i = run(comp, np.array([1, 2], F32), np.int32(7), np.array([10, 20], F32))
    np.testing.assert_array_equal(s, [11, 22])
    assert i == 7


def test_a_format_given_that_the_file_does_not_hold_names_the_argument(tmp_path: Path) -> None:
    """``format=`` names the format, not the suffix: the error says which one spoke (a fresh user's find:
    "the suffix says StableHLO portable artifact" of ``m.hlo.txt`` loaded with ``format="mlirbc"``)."""
    built = build_mixed()
    path = tmp_path / "m.hlo.txt"
    path.write_text(built.as_hlo_text())
    with pytest.raises(xs.FormatError, match=r"m\.hlo\.txt: format='mlirbc' says StableHLO portable artifact, but "
                                             "the file holds HLO text"):
        load_computation(path, format="mlirbc")
    with pytest.raises(xs.FormatError, match=r"m\.hlo\.txt: format='mlirbc' says"):
        load_computation(path, format=xs.formats.Format.PORTABLE_ARTIFACT)
    other = tmp_path / "m.mlirbc"
    other.write_text(built.as_hlo_text())
    with pytest.raises(xs.FormatError, match=r"m\.mlirbc: the suffix says StableHLO portable artifact, but the file "
                                             "holds HLO text"):
        load_computation(other)


def test_txt_and_unknown_suffixes_are_recognised_by_content(tmp_path: Path) -> None:
    built = build_mixed()
    expect = run(built, A, B)
    cases = {
        "module_0000.main.before_optimizations.txt": built.as_hlo_text().encode(),
        "x.hlo.txt": built.as_hlo_text().encode(),
        "noext": built.as_stablehlo_text().encode(),
        "y.bin": built.serialize_portable_artifact(),
        "z.data": built.as_serialized_hlo_module_proto(),
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        c = load_computation(tmp_path / name)
        for got, want in zip(run(c, A, B), expect, strict=True):
            np.testing.assert_array_equal(got, want, err_msg=name)
    assert formats.format_from_suffix("a.hlo.txt") is Format.HLO_TEXT
    assert formats.format_from_suffix("a.HLO") is Format.HLO_TEXT
    assert formats.format_from_suffix("a.txt") is None
    # a forced format wins over the suffix
    (tmp_path / "forced.dat").write_text(built.as_hlo_text())
    assert load_computation(tmp_path / "forced.dat", "hlo").source_format == "hlo"


# -- bad files: each case in a subprocess --------------------------------------------------------------
def _flip_middle(data: bytes) -> bytes:
    b = bytearray(data)
    mid = len(b) // 2
    for k in range(mid, min(mid + 16, len(b))):
        b[k] ^= 0x5A
    return bytes(b)


def test_every_loader_rejects_missing_empty_truncated_corrupt_and_wrong_format_files(tmp_path: Path) -> None:
    built = build_mixed()
    good = {f: formats.computation_bytes(built, f) for f in Format}
    files: dict[str, tuple[str, list[str]]] = {}
    for f in Format:
        suf = SUFFIX[f]
        files[f"missing{suf}"] = (str(tmp_path / f"missing{suf}"), ["no such file"])
        p = tmp_path / f"empty{suf}"
        p.write_bytes(b"")
        files[f"empty{suf}"] = (str(p), ["the file is empty"])
        p = tmp_path / f"truncated{suf}"
        p.write_bytes(good[f][: len(good[f]) // 2])
        files[f"truncated{suf}"] = (str(p), [])
        p = tmp_path / f"corrupt{suf}"
        p.write_bytes(_flip_middle(good[f]) if f is not Format.HLO_PROTO else b"\xff\xfe garbage \x00\x01" * 8)
        files[f"corrupt{suf}"] = (str(p), [])
        other = Format.HLO_TEXT if f is not Format.HLO_TEXT else Format.STABLEHLO_TEXT
        p = tmp_path / f"wrong{suf}"
        p.write_bytes(good[other])
        files[f"wrong{suf}"] = (str(p), [f"holds {other.description}"])
    p = tmp_path / "module_0001.main.cpu_after_optimizations-buffer-assignment.txt"
    p.write_text("BufferAssignment:\nallocation 0: size 16, output shape is |f32[4]|\n")
    files["not_a_module.txt"] = (str(p), ["not a recognised computation format"])
    files["directory.hlo"] = (str(tmp_path), ["is a directory"])
    code = f"""
    files = {files!r}
    for name, (path, _) in files.items():
        report(name, lambda: formats.load_computation(path))
    """
    res = {r["case"]: r for r in run_in_subprocess(code)}
    assert set(res) == set(files)
    for name, (path, fragments) in files.items():
        assert_format_error(res[name], path, *fragments)
    # the truncated / corrupt messages say what was wrong
    assert "HLO syntax error: line" in res["truncated.hlo"]["msg"]
    assert "HLO syntax error: line" in res["corrupt.hlo"]["msg"]
    assert "invalid StableHLO: line" in res["truncated.mlir"]["msg"]
    assert "invalid StableHLO: line" in res["corrupt.mlir"]["msg"]
    for name in ("truncated.mlirbc", "corrupt.mlirbc"):
        assert "corrupt or truncated StableHLO portable artifact (v0.9.0)" in res[name]["msg"]
    for name in ("truncated.pb", "corrupt.pb"):
        assert "not a valid protobuf message (truncated or corrupt)" in res[name]["msg"]


def test_bit_flipped_artifacts_and_protos_never_crash() -> None:
    """Seeded bit flips in a portable artifact and an HLO proto: a FormatError or a valid load."""
    built = build_mixed()
    blobs = {"mlirbc": built.serialize_portable_artifact(), "pb": built.as_serialized_hlo_module_proto()}
    code = f"""
    import random
    blobs = {blobs!r}
    for kind, good in blobs.items():
        for seed in range(6):
            rnd = random.Random(seed)
            b = bytearray(good)
            for _ in range(2):
                b[rnd.randrange(len(b))] ^= 1 << rnd.randrange(8)
            load = xs.XlaComputation.from_stablehlo if kind == "mlirbc" else xs.XlaComputation.from_hlo_proto
            report(f"{{kind}}:{{seed}}", lambda: load(bytes(b)).as_hlo_text())
    """
    res = run_in_subprocess(code)
    assert len(res) == 12
    for r in res:
        assert r["error"] in (None, "FormatError"), r


def _encode_proto(fields: list[tuple[int, int, Any]]) -> bytes:
    def varint(v: int) -> bytes:
        out = bytearray()
        while True:
            c, v = v & 0x7F, v >> 7
            out.append(c | (0x80 if v else 0))
            if not v:
                return bytes(out)

    out = b""
    for num, wt, v in fields:
        out += varint(num << 3 | wt)
        out += varint(v) if wt == 0 else (varint(len(v)) + v if wt == 2 else v)
    return out


def test_corrupt_hlo_proto_with_inconsistent_instruction_is_format_error(tmp_path: Path) -> None:
    """A proto whose reshape changes the element count (made by editing a valid proto)."""
    proto = xs.XlaComputation.from_hlo_text(C08["reshape32"]).as_serialized_hlo_module_proto()
    from xlasdk.formats.protobuf import _proto_fields as pf

    def shape_31(shape: bytes) -> bytes:  # ShapeProto.dimensions (3) = [31]
        return _encode_proto([(n, w, bytes([31]) if n == 3 else v) for n, w, v in pf(shape)])

    def instr(i: bytes) -> bytes:  # HloInstructionProto: opcode (2), shape (3)
        fs = pf(i)
        if not any(n == 2 and v == b"reshape" for n, _, v in fs):
            return i
        return _encode_proto([(n, w, shape_31(v) if n == 3 else v) for n, w, v in fs])

    def comp(c: bytes) -> bytes:  # HloComputationProto.instructions (2)
        return _encode_proto([(n, w, instr(v) if n == 2 else v) for n, w, v in pf(c)])

    bad = _encode_proto([(n, w, comp(v) if n == 3 else v) for n, w, v in pf(proto)])  # computations (3)
    assert bad != proto
    p = tmp_path / "bad_reshape.pb"
    p.write_bytes(bad)
    code = f"""
    report("pb", lambda: formats.load_computation({str(p)!r}))
    """
    (res,) = run_in_subprocess(code)
    assert_format_error(res, str(p), "corrupt HloModuleProto", "f32[31]")


# -- saving ------------------------------------------------------------------------------------------
def test_save_errors_and_atomic_write(tmp_path: Path) -> None:
    built = build_mixed()
    with pytest.raises(xs.FormatError, match=r"save\('.*x\.docx'\): unknown suffix"):
        built.save(tmp_path / "x.docx")
    with pytest.raises(xs.FormatError, match="target_version applies only to .mlirbc"):
        built.save(tmp_path / "x.hlo", target_version="1.0.0")
    with pytest.raises(xs.FormatError, match="cannot write the file"):
        built.save(tmp_path / "no" / "such" / "dir.hlo")
    for d in (tmp_path, f"{tmp_path}/", tmp_path / "d.hlo"):  # a directory, with a suffix or none (a fresh user's find:
        (tmp_path / "d.hlo").mkdir(exist_ok=True)              # "unknown suffix" was said of a directory)
        with pytest.raises(xs.FormatError, match=r"save\('.*'\): is a directory; name the file to write"):
            built.save(d)
    assert (tmp_path / "d.hlo").is_dir() and not any((tmp_path / "d.hlo").iterdir())
    (tmp_path / "d.hlo").rmdir()
    built.save(tmp_path / "ok.txt")  # .txt saves HLO text
    assert (tmp_path / "ok.txt").read_text().startswith("HloModule mixed")
    built.save(tmp_path / "forced.out", format="mlir")
    assert "func.func" in (tmp_path / "forced.out").read_text()
    assert sorted(os.listdir(tmp_path)) == ["forced.out", "ok.txt"]  # no temporary files left


# -- portable artifacts --------------------------------------------------------------------------------
def _exp_with_accuracy() -> xs.XlaComputation:
    b = xs.XlaBuilder("acc")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(F32, (3,)), "x")
    return b.build(ops.Exp(x, result_accuracy=xs.ResultAccuracy(mode="HIGHEST")))


def test_portable_artifact_default_version_is_the_oldest_that_holds_every_op() -> None:
    simple = build_mixed()
    data = simple.serialize_portable_artifact()
    assert data.startswith(b"ML\xefR")
    assert formats.portable_artifact_version(data) == "0.9.0"  # the oldest StableHLO jaxlib writes
    acc = _exp_with_accuracy()
    data = acc.serialize_portable_artifact()
    assert formats.portable_artifact_version(data) == "1.9.0"  # result_accuracy came in StableHLO 1.9.0
    x = np.array([0.0, 1.0, -2.0], F32)
    (out,) = run(xs.XlaComputation.from_stablehlo(data), x)
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-6)
    with pytest.raises(xs.FormatError, match=r"StableHLO 1\.8\.0 cannot hold every op.*oldest version that can "
                                             r"is 1\.9\.0"):
        acc.serialize_portable_artifact("1.8.0")


@pytest.mark.parametrize("bad, fragment", [
    ("bogus", "is not a StableHLO version"),
    ("1.2", "is not a StableHLO version"),
    ("0.8.0", "older than the oldest version this jaxlib writes (0.9.0)"),
    ("99.0.0", "newer than this jaxlib's current version"),
])
def test_portable_artifact_bad_versions(bad: str, fragment: str) -> None:
    with pytest.raises(xs.FormatError, match="serialize_portable_artifact: .*" + fragment.replace("(", r"\(")
                       .replace(")", r"\)").replace(".", r"\.")):
        build_mixed().serialize_portable_artifact(bad)


def test_portable_artifacts_of_older_versions_load_and_run(tmp_path: Path) -> None:
    built = build_mixed()
    expect = run(built, A, B)
    from xlasdk._jaxlib import mlir

    versions = ["0.9.0", "1.0.0", mlir.stablehlo_version_for("WEEK_12"), "WEEK_4", "current"]
    for v in versions:
        data = built.serialize_portable_artifact(v)
        got_v = formats.portable_artifact_version(data)
        assert got_v is not None
        p = tmp_path / f"v{got_v}.mlirbc"
        p.write_bytes(data)
        c = load_computation(p)
        for got, want in zip(run(c, A, B), expect, strict=True):
            np.testing.assert_array_equal(got, want, err_msg=v)
    built.save(tmp_path / "t.mlirbc", target_version="1.0.0")
    assert formats.portable_artifact_version((tmp_path / "t.mlirbc").read_bytes()) == "1.0.0"


# -- XLA's own dump files ------------------------------------------------------------------------------
def test_xla_dump_files_load_and_run(tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    code = f"""
    import numpy as np
    sys.path.insert(0, {os.path.join(REPO, 'tests')!r})
    from helpers import run
    from test_formats import build_mixed, A, B
    run(build_mixed(), A, B)
    """
    run_in_subprocess(code, env={"XLA_FLAGS": f"--xla_dump_to={dump} --xla_dump_hlo_as_text --xla_dump_hlo_as_proto"})
    names = sorted(os.listdir(dump))
    before_txt = [n for n in names if n.endswith("mixed.before_optimizations.txt")]
    after_txt = [n for n in names if n.endswith("mixed.cpu_after_optimizations.txt")]
    before_pb = [n for n in names if n.endswith("mixed.before_optimizations.hlo.pb")]
    after_pb = [n for n in names if n.endswith("mixed.cpu_after_optimizations.hlo.pb")]
    assert before_txt and after_txt and before_pb and after_pb, names
    mlir_files = glob.glob(str(dump / "*mixed*" / "module.mlir"))
    expect = mixed_oracle()
    for name in before_txt + after_txt + before_pb + after_pb + mlir_files:
        c = load_computation(dump / name)
        assert c.program_shape().parameter_shapes() == build_mixed().program_shape().parameter_shapes()
        for got, want in zip(run(c, A, B), expect, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=name)
    # the optimized module keeps XLA's fusions (mhlo.fusion): not StableHLO, so no portable artifact
    opt = load_computation(dump / after_txt[0])
    assert "fusion" in opt.as_hlo_text()
    if "mhlo.fusion" in opt.as_stablehlo_text():
        with pytest.raises(xs.FormatError, match="mhlo.fusion.*save it as .mlir, .hlo or .pb"):
            opt.serialize_portable_artifact()
    opt.save(tmp_path / "opt.mlir")
    for got, want in zip(run(load_computation(tmp_path / "opt.mlir"), A, B), expect, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5)
    # a dump file that is not a module
    other = [n for n in names if n.endswith("buffer-assignment.txt")]
    if other:
        with pytest.raises(xs.FormatError, match="not a recognised computation format"):
            load_computation(dump / other[0])


def test_optimized_hlo_fusions_and_layout_bitcasts_run_as_written() -> None:
    """XLA's optimized HLO: fusions run as calls; a bitcast between layouts is a transpose."""
    text = """HloModule opt, is_scheduled=true, entry_computation_layout={(f32[2,3]{1,0})->(f32[3,2]{1,0}, f32[6]{0})}

%fused (p: f32[2,3]) -> f32[2,3] {
  %p = f32[2,3]{1,0} parameter(0)
  ROOT %e = f32[2,3]{1,0} exponential(%p)
}

ENTRY %main (x: f32[2,3]) -> (f32[3,2], f32[6]) {
  %x = f32[2,3]{1,0} parameter(0)
  %f = f32[2,3]{1,0} fusion(%x), kind=kLoop, calls=%fused
  %t = f32[3,2]{0,1} bitcast(%f)
  %c = f32[3,2]{1,0} copy(%t)
  %flat = f32[6]{0} bitcast(%f)
  ROOT %r = (f32[3,2]{1,0}, f32[6]{0}) tuple(%c, %flat)
}
"""
    comp = xs.XlaComputation.from_hlo_text(text)
    assert "fusion(" in comp.as_hlo_text() and "bitcast(" in comp.as_hlo_text()  # printed as loaded
    x = np.arange(6, dtype=F32).reshape(2, 3) / 4
    t, flat = run(comp, x)
    np.testing.assert_allclose(t, np.exp(x).T, rtol=1e-6)
    np.testing.assert_allclose(flat, np.exp(x).reshape(6), rtol=1e-6)


# -- the HLO pre-check's parser understands XLA's own printing -----------------------------------------
SAMPLE = """HloModule sample, entry_computation_layout={(f32[4,8]{1,0}, s32[], (f32[3], s32[2]))->(f32[8,4], f32[])}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=LT
}

cond {
  t = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  k = s32[] constant(3)
  ROOT c = pred[] compare(i, k), direction=LT
}

body {
  t = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  v = f32[3] get-tuple-element(t), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  v2 = f32[3] multiply(v, v)
  ROOT r = (s32[], f32[3]) tuple(i2, v2)
}

br0 {
  x = f32[3] parameter(0)
  ROOT n = f32[3] negate(x)
}

br1 {
  x = f32[3] parameter(0)
  ROOT e = f32[3] exponential(x)
}

callee {
  x = f32[4,8] parameter(0)
  y = f32[8,4] transpose(x), dimensions={1,0}
  ROOT z = f32[8,4] sine(y)
}

ENTRY main {
  p0 = f32[4,8] parameter(0)
  p1 = s32[] parameter(1)
  p2 = (f32[3], s32[2]) parameter(2)
  v = f32[3] get-tuple-element(p2), index=0
  zero = s32[] constant(0)
  init = (s32[], f32[3]) tuple(zero, v)
  w = (s32[], f32[3]) while(init), condition=cond, body=body
  wv = f32[3] get-tuple-element(w), index=1
  cnd = f32[3] conditional(p1, wv, wv), branch_computations={br0, br1}
  r = f32[32] reshape(p0)
  r2 = f32[8,4] reshape(r)
  cl = f32[8,4] call(p0), to_apply=callee
  s = f32[8,4] add(r2, cl)
  fz = f32[] constant(0)
  srt = f32[3] sort(cnd), dimensions={0}, to_apply=lt
  red = f32[] reduce(srt, fz), dimensions={0}, to_apply=add
  ROOT out = (f32[8,4], f32[]) tuple(s, red)
}
"""


def test_precheck_parser_follows_xla_printed_hlo() -> None:
    built = build_mixed()
    sample = xs.XlaComputation.from_hlo_text(SAMPLE)
    p0 = np.arange(32, dtype=F32).reshape(4, 8) / 8
    v = np.array([0.5, -1.0, 1.25], F32)
    for branch, fn in ((0, np.negative), (1, np.exp)):
        s, red = run(sample, p0, np.int32(branch), v, np.zeros(2, np.int32))
        np.testing.assert_allclose(s, p0.reshape(8, 4) + np.sin(p0.T), rtol=1e-6)
        np.testing.assert_allclose(red, np.sum(fn(v ** 8)), rtol=1e-5)  # the while squares 3 times
    for text in (built.as_hlo_text(), built.as_hlo_text(print_metadata=False), SAMPLE, sample.as_hlo_text()):
        mod = _parse_hlo_text(text)
        assert mod is not None
        n = sum(len(c.instrs) for c in mod.comps)
        assert n == sum(1 for ln in text.splitlines() if " = " in ln and not ln.startswith("HloModule"))
        assert all(i.operands is not None for c in mod.comps for i in c.instrs)
    counts = formats.hlo_opcode_counts(built.as_hlo_text())
    assert counts["parameter"] >= 2 and counts["reduce"] == 1 and counts["dot"] == 1


# -- C-14: executable serialization ---------------------------------------------------------------------
def _c14() -> xs.XlaComputation:
    b = xs.XlaBuilder("c14")
    a = ops.Parameter(b, 0, xs.Shape.array_shape(F32, (3,)), "a")
    bb = ops.Parameter(b, 1, xs.Shape.array_shape(F32, (3,)), "b")
    return b.build(a * bb + a)


def test_C14_executable_round_trip_same_and_second_client(tmp_path: Path) -> None:
    rt = xs
    a, b = np.array([1, 2, 3], F32), np.array([4, 5, 6], F32)
    exe = rt.compile(_c14())
    np.testing.assert_array_equal(np.asarray(exe(a, b)), [5, 12, 21])
    blob = exe.serialize()
    again = rt.deserialize_executable(blob)
    np.testing.assert_array_equal(np.asarray(again(a, b)), [5, 12, 21])
    other = rt.client("cpu", cached=False)
    assert other is not rt.client("cpu")
    third = rt.deserialize_executable(blob, device=other.devices()[0])
    assert third.devices[0] == other.devices()[0]
    np.testing.assert_array_equal(np.asarray(third(a, b)), [5, 12, 21])
    exe.save(tmp_path / "c14.xlaexe")
    loaded = rt.load_executable(tmp_path / "c14.xlaexe")
    np.testing.assert_array_equal(np.asarray(loaded(a, b)), [5, 12, 21])


def test_C14_truncated_and_garbage_blobs_raise_format_error(tmp_path: Path) -> None:
    code = f"""
    import numpy as np
    sys.path.insert(0, {os.path.join(REPO, 'tests')!r})
    from test_formats import _c14
    rt = xs
    blob = rt.compile(_c14()).serialize()
    report("half", lambda: rt.deserialize_executable(blob[: len(blob) // 2]))
    report("garbage", lambda: rt.deserialize_executable(b"garbage"))
    report("empty", lambda: rt.deserialize_executable(b""))
    flipped = bytearray(blob); flipped[len(blob) // 2] ^= 0xFF
    report("flipped", lambda: rt.deserialize_executable(bytes(flipped)))
    open({str(tmp_path / 'half.xlaexe')!r}, "wb").write(blob[: len(blob) // 2])
    report("file", lambda: rt.load_executable({str(tmp_path / 'half.xlaexe')!r}))
    report("missing", lambda: rt.load_executable({str(tmp_path / 'missing.xlaexe')!r}))
    """
    res = {r["case"]: r for r in run_in_subprocess(code)}
    for case in ("half", "garbage", "empty", "flipped"):
        assert res[case]["error"] == "FormatError", res[case]
    assert "truncated" in res["half"]["msg"]
    assert_format_error(res["file"], str(tmp_path / "half.xlaexe"), "truncated")
    assert_format_error(res["missing"], str(tmp_path / "missing.xlaexe"))


def test_hlo_with_rank0_dynamic_slice_loads_and_runs() -> None:
    """StableHLO's pretty printer writes a rank-0 dynamic_slice its parser rejects ("expected
    'sizes'"); a loaded module is compiled from the generic form, which always parses back."""
    text = (
        "HloModule m, entry_computation_layout={(f32[])->(f32[], f32[])}\n\n"
        "ENTRY %main.1 (x: f32[]) -> (f32[], f32[]) {\n"
        "  %x = f32[] parameter(0)\n"
        "  %d = f32[] dynamic-slice(%x), dynamic_slice_sizes={}\n"
        "  %n = f32[] negate(%d)\n"
        "  ROOT %t = (f32[], f32[]) tuple(%d, %n)\n"
        "}\n"
    )
    comp = xs.XlaComputation.from_hlo_text(text)
    got = [o.to_numpy() for o in xs.compile(comp)(np.float32(2.5))]
    assert got == [np.float32(2.5), np.float32(-2.5)]


def test_mlir_file_of_a_rank0_dynamic_slice_loads_back(tmp_path: Path) -> None:
    """StableHLO's pretty form of a rank-0 dynamic_slice does not parse back; the .mlir file is
    then written in the generic form, so the saved file still loads and runs."""
    b = xs.XlaBuilder("ds0")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, ()), "x")
    comp = b.build(ops.Neg(ops.DynamicSlice(x, [], ())))
    path = tmp_path / "ds0.mlir"
    comp.save(path)
    loaded = xs.load_computation(path)
    assert xs.compile(loaded)(np.float32(3)).to_numpy() == np.float32(-3)
    plain = tmp_path / "plain.mlir"  # an ordinary module keeps the readable pretty form
    b2 = xs.XlaBuilder("plain")
    comp2 = b2.build(ops.Neg(ops.Parameter(b2, 0, xs.Shape.array_shape(np.float32, (2,)), "x")))
    comp2.save(plain)
    assert "stablehlo.negate %" in plain.read_text()


def test_hlo_text_with_elided_constants_is_rejected() -> None:
    """XLA's parser reads ``constant({...})`` (print_large_constants=False) as garbage values."""
    b = xs.XlaBuilder("elided")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (20,)), "x")
    comp = b.build(ops.Add(x, ops.Constant(b, np.arange(20, dtype=np.float32))))
    short = comp.as_hlo_text(print_large_constants=False)
    assert "constant({...})" in short
    with pytest.raises(xs.FormatError, match=r"line \d+: a constant.s value is elided .*--xla_dump_large_constants"):
        xs.XlaComputation.from_hlo_text(short)
    full = xs.XlaComputation.from_hlo_text(comp.as_hlo_text())
    np.testing.assert_array_equal(xs.compile(full)(np.ones(20, np.float32)).to_numpy(), np.arange(1, 21))


def test_parameter_names_survive_hlo_and_mlir_round_trips(tmp_path: Path) -> None:
    names = ['a"b', "π", "x\ny", "back\\slash", "plain"]
    b = xs.XlaBuilder("names")
    ps = [ops.Parameter(b, i, xs.Shape.array_shape(np.float32, (2,)), n) for i, n in enumerate(names)]
    comp = b.build(ops.Tuple(b, ps))
    assert comp.program_shape().parameter_names() == tuple(names)
    assert xs.XlaComputation.from_hlo_text(comp.as_hlo_text()).program_shape().parameter_names() == tuple(names)
    comp.save(tmp_path / "n.mlir")
    assert xs.load_computation(tmp_path / "n.mlir").program_shape().parameter_names() == tuple(names)


def test_hlo_syntax_error_names_the_cause() -> None:
    text = (
        "HloModule m, entry_computation_layout={(f32[2]{0})->f32[2]{0}}\n\n"
        "ENTRY %main.1 (p: f32[2]) -> f32[2] {\n"
        "  %p = f32[2]{0} parameter(0)\n"
        "  ROOT %a = f32[2] add(%p, %b)\n"
        "}\n"
    )
    with pytest.raises(xs.FormatError, match=r"line 5, column 28: .*instruction does not exist: b"):
        xs.XlaComputation.from_hlo_text(text)


def test_stablehlo_text_of_a_rank0_dynamic_slice_loads_back() -> None:
    b = xs.XlaBuilder("ds0")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, ()), "x")
    comp = b.build(ops.Neg(ops.DynamicSlice(x, [], ())))
    loaded = xs.XlaComputation.from_stablehlo(comp.as_stablehlo_text())
    assert xs.compile(loaded)(np.float32(2)).to_numpy() == np.float32(-2)
    b2 = xs.XlaBuilder("ds1")  # a rank-1 dynamic_slice keeps the pretty form
    y = ops.Parameter(b2, 0, xs.Shape.array_shape(np.float32, (4,)), "y")
    text = b2.build(ops.DynamicSlice(y, [ops.Constant(b2, np.int32(1))], (2,))).as_stablehlo_text()
    assert "stablehlo.dynamic_slice %" in text
    assert xs.XlaComputation.from_stablehlo(text).program_shape().result_shape().dimensions() == (2,)


_NEWER_XLA_SYNTAX = """HloModule newer_syntax

cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT, order=TOTAL
}

ENTRY main {
  x = f32[5] parameter(0)
  t = (f32[5], f32[5]) tuple(x, x)
  c = pred[5] compare(t#0, t#1), direction=GE, order=TOTAL
  s = f32[5] sort(t#0), dimensions={0}, to_apply=cmp
  k = (f32[5], s32[5]) topk(s), k=5, largest=true, is_stable=true
  ROOT r = (pred[5], f32[5], s32[5]) tuple(c, k#0, k#1)
}
"""


def test_hlo_text_in_jaxlib_012_syntax_loads_under_every_jaxlib() -> None:
    # XLA of jaxlib 0.12 writes `%t#k` operands, `order=TOTAL` and `topk(..., is_stable=)`
    # (tests/data/dumps_jax012 is full of them); 0.10.2's parser refuses all three.
    comp = xs.XlaComputation.from_hlo_text(_NEWER_XLA_SYNTAX)
    x = np.array([3.0, -0.0, 0.0, np.nan, 1.0], np.float32)
    ge, top, idx = (o.to_numpy() for o in xs.compile(comp)(x))
    np.testing.assert_array_equal(ge, [True] * 5)  # total order: NaN >= NaN
    # sorted ascending in the total order (-0 < +0 < ... < NaN), then the top 5, largest first
    assert np.array_equal(top, [np.nan, 3.0, 1.0, 0.0, -0.0], equal_nan=True)
    assert list(np.signbit(top[3:])) == [False, True]
    np.testing.assert_array_equal(idx, [4, 3, 2, 1, 0])


def test_a_portable_artifact_from_a_newer_stablehlo_that_does_not_read_names_both_versions(tmp_path: Path) -> None:
    # An artifact written by a newer jaxlib (its producer string says so) that this jaxlib cannot
    # read: the FormatError names its version and this jaxlib's, not "corrupt".
    from xlasdk._jaxlib import mlir as _mlir
    from xlasdk.formats.artifact import portable_artifact_version

    b = xs.XlaBuilder("art")
    x = xs.ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (3,)), "x")
    data = b.build(xs.ops.Exp(x)).serialize_portable_artifact()
    old = portable_artifact_version(data)
    assert old is not None
    future = "9" + old[1:]  # same length, a newer major version
    newer = data.replace(f"StableHLO_v{old}".encode(), f"StableHLO_v{future}".encode(), 1)
    assert portable_artifact_version(newer) == future
    path = tmp_path / "newer.mlirbc"
    path.write_bytes(newer[: len(newer) * 2 // 3])
    current = _mlir.stablehlo_current_version()
    want = rf"v{re.escape(future)}.* newer StableHLO than this jaxlib's \({re.escape(current)}"
    with pytest.raises(xs.FormatError, match=want):
        xs.load_computation(path)
    # written for an older version that this jaxlib reads: loads and computes
    ok = tmp_path / "ok.mlirbc"
    ok.write_bytes(data)
    v = np.array([0.0, 1.0, -1.0], np.float32)
    np.testing.assert_allclose(xs.compile(xs.load_computation(ok))(v).to_numpy(), np.exp(v), rtol=1e-6)
