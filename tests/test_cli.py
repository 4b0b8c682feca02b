"""Tests of xlasdk/cli.py: every verb through ``main()`` (the console script's function) and
through a subprocess, exit codes 0/1/2, one-line errors, ``--debug`` tracebacks."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops
from xlasdk.cli import main
from xlasdk.formats import portable_artifact_version
from xlasdk.runtime.cache import CompileCache

load_computation = getattr(xs, "load_computation", None) or __import__("xlasdk.formats").formats.load_computation
REPO = str(Path(__file__).resolve().parents[1])
F32 = np.float32
A = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], F32)
B = np.array([1.0, 2.0, -3.0], F32)


def build() -> xs.XlaComputation:
    """f(a: f32[2,3], b: f32[3]) -> (exp(a) @ b, sum(a * b))."""
    bld = xs.XlaBuilder("clitest")
    a = ops.Parameter(bld, 0, xs.Shape.array_shape(F32, (2, 3)), "a")
    b = ops.Parameter(bld, 1, xs.Shape.array_shape(F32, (3,)), "b")
    bb = ops.BroadcastInDim(b, (2, 3), (1,))
    dot = ops.Dot(ops.Exp(a), ops.Reshape(b, (3, 1)))
    total = ops.Reduce(bld, [a * bb], [ops.Constant(bld, F32(0))], lambda x, y: x + y, [0, 1])
    return bld.build(ops.Tuple(bld, [dot, total]))


def oracle(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> list[np.ndarray[Any, Any]]:
    return [np.exp(a) @ b.reshape(3, 1), np.sum(a * b)]


@pytest.fixture(scope="module")
def hlo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("cli") / "clitest.hlo"
    build().save(p)
    return p


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def hlo_block_counts(text: str) -> dict[str, dict[str, int]]:
    """Opcode counts per computation of printed HLO text ("ENTRY" for the entry computation)."""
    blocks: dict[str, dict[str, int]] = {}
    for m in re.finditer(r"^(ENTRY )?%?(\S+) \([^\n]*\{\n(.*?)^\}", text, re.M | re.S):
        counts = blocks.setdefault("ENTRY" if m.group(1) else m.group(2), {})
        for op in re.findall(r"^\s*(?:ROOT )?%\S+ = \S+(?: \S+)*? ([a-z][\w-]*)\(", m.group(3), re.M):
            counts[op] = counts.get(op, 0) + 1
    return blocks


def assert_one_line_error(err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for f in fragments:
        assert f in lines[0], (f, lines[0])


# -- help, devices, version -----------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [[], ["devices"], ["version"], ["inspect"], ["convert"], ["run"], ["cache"],
                                  ["cache", "info"], ["cache", "clear"]])
def test_help_for_every_verb(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: xlasdk") and " ".join(argv) in out.splitlines()[0]


def test_devices_and_version() -> None:
    code, out, err = cli("devices")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["DEVICE", "PLATFORM", "ID", "KIND"]
    assert lines[1].split()[:3] == ["cpu:0", "cpu", "0"]
    code, out, _ = cli("devices", "--platform", "cpu")
    assert code == 0 and "cpu:0" in out
    code, _, err = cli("devices", "--platform", "nosuchplatform")
    assert code == 2
    assert_one_line_error(err, "xlasdk devices: error:", "nosuchplatform")
    from xlasdk._jaxlib.mlir import JAXLIB_VERSION

    code, out, _ = cli("version")
    assert code == 0
    assert f"xlasdk {xs.__version__}" in out and f"jaxlib {JAXLIB_VERSION}" in out
    assert re.search(r"stablehlo \d+\.\d+\.\d+", out)


# -- inspect -------------------------------------------------------------------------------------------------
def test_inspect_text_report(hlo_file: Path) -> None:
    code, out, err = cli("inspect", str(hlo_file))
    assert code == 0, err
    assert f"file:          {hlo_file} (HLO text)" in out
    assert "program shape: (a: f32[2,3], b: f32[3]) -> (f32[2,1], f32[])" in out
    assert re.search(r"^\s+0\s+a\s+f32\[2,3\]$", out, re.M) and re.search(r"^\s+1\s+b\s+f32\[3\]$", out, re.M)
    # op counts of the entry computation against the HLO text itself (one instruction per line)
    want = hlo_block_counts(build().as_hlo_text())["ENTRY"]
    assert want["parameter"] == 2
    for op in ("dot", "reduce", "exponential", "parameter"):
        assert re.search(rf"^  {op}\s+{want[op]}$", out, re.M), (op, want[op], out)
    assert f"ops:           {sum(want.values())} HLO instructions in the entry computation" in out
    assert re.search(r"^\s+flops\s+[\d,]+$", out, re.M)
    assert re.search(r"^\s+peak_memory_in_bytes\s+\d+ B$", out, re.M)
    assert "optimized HLO" not in out


def test_inspect_json_optimized_and_options(hlo_file: Path) -> None:
    code, out, _ = cli("inspect", str(hlo_file), "--json", "--optimized", "--stablehlo")
    assert code == 0
    rep = json.loads(out)
    assert rep["name"] == "clitest" and rep["format"] == "HLO text"
    assert [p["shape"] for p in rep["parameters"]] == ["f32[2,3]", "f32[3]"]
    assert rep["op_counts"]["dot"] == 1 and rep["op_counts"]["reduce"] == 1
    # an exp of 6 elements, a 2x3 @ 3x1 dot and a 6-element multiply + reduce: > 0 flops, 6 transcendentals
    assert rep["cost_analysis"]["flops"] > 0 and rep["cost_analysis"]["transcendentals"] == 6
    assert rep["memory"]["argument_size_in_bytes"] == 4 * (6 + 3)
    assert rep["memory"]["output_size_in_bytes"] >= 4 * (2 + 1)
    assert rep["optimized_hlo"].startswith("HloModule") and "stablehlo.dot" in rep["stablehlo"]
    code, out, _ = cli("inspect", str(hlo_file), "--no-compile", "--hlo")
    assert code == 0 and "cost analysis" not in out and "\nHLO:\nHloModule clitest" in out
    code, _, err = cli("inspect", str(hlo_file), "--no-compile", "--optimized")
    assert code == 2
    assert_one_line_error(err, "--optimized needs compilation")


def test_inspect_counts_sub_computations_apart(tmp_path: Path) -> None:
    """5 parameters and two reducer regions of 2 parameters each: 'parameter 5' in the entry computation,
    the regions' instructions listed apart under 'in 2 sub-computations'."""
    bld = xs.XlaBuilder("fiveparams")
    ps = [ops.Parameter(bld, i, xs.Shape.array_shape(F32, (4, 3)), f"p{i}") for i in range(5)]
    s = ps[0] + ps[1] + ps[2] + ps[3] + ps[4]
    mx = ops.Reduce(bld, s, ops.Constant(bld, F32(-np.inf)), ops.Max, [1])
    sm = ops.Reduce(bld, s, ops.Constant(bld, F32(0)), ops.Add, [0])
    comp = bld.build(ops.Tuple(bld, [mx, sm]))
    path = tmp_path / "five.hlo"
    comp.save(path)
    blocks = hlo_block_counts(comp.as_hlo_text())
    entry = blocks.pop("ENTRY")
    assert entry["parameter"] == 5 and len(blocks) == 2
    sub: dict[str, int] = {}
    for counts in blocks.values():
        for op, n in counts.items():
            sub[op] = sub.get(op, 0) + n
    assert sub == {"parameter": 4, "maximum": 1, "add": 1}
    code, out, err = cli("inspect", str(path), "--no-compile")
    assert code == 0, err
    assert f"ops:           {sum(entry.values())} HLO instructions in the entry computation\n" in out
    assert re.search(r"^  parameter\s+5$", out, re.M) and re.search(r"^  add\s+4$", out, re.M)  # p0+...+p4
    assert re.search(rf"^  in 2 sub-computations:\s+6 more \({', '.join(blocks)}\)$", out, re.M), out
    assert re.search(r"^    parameter\s+4$", out, re.M) and re.search(r"^    maximum\s+1$", out, re.M)
    assert re.search(r"^    add\s+1$", out, re.M)
    code, out, _ = cli("inspect", str(path), "--no-compile", "--json")
    rep = json.loads(out)
    assert rep["op_counts"] == entry and rep["op_counts"]["parameter"] == 5
    assert rep["sub_computations"] == {"count": 2, "names": list(blocks), "op_counts": sub}
    # a module without sub-computations prints no such line
    bld = xs.XlaBuilder("flat")
    ops.Exp(ops.Parameter(bld, 0, xs.Shape.array_shape(F32, (2,)), "x"))
    flat = bld.build()
    flat.save(tmp_path / "flat.hlo")
    code, out, _ = cli("inspect", str(tmp_path / "flat.hlo"), "--no-compile")
    assert code == 0 and "ops:           2 HLO instructions in the entry computation" in out
    assert "sub-computation" not in out


# -- convert -------------------------------------------------------------------------------------------------
def test_convert_between_every_format(hlo_file: Path, tmp_path: Path) -> None:
    want = oracle(A, B)
    chain = [tmp_path / "c.mlir", tmp_path / "c.mlirbc", tmp_path / "c.pb", tmp_path / "c.hlo.txt"]
    src = hlo_file
    for dst in chain:
        code, out, err = cli("convert", str(src), str(dst))
        assert code == 0, err
        assert out.startswith(f"wrote {dst} (") and f"{dst.stat().st_size} bytes" in out
        exe = xs.compile(load_computation(dst))
        got = exe(A, B)
        assert isinstance(got, tuple)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6)
        src = dst
    assert "StableHLO v0.9.0" in cli("convert", str(hlo_file), str(tmp_path / "d.mlirbc"))[1]
    code, out, _ = cli("convert", str(hlo_file), str(tmp_path / "v.mlirbc"), "--target-version", "1.0.0")
    assert code == 0 and "StableHLO v1.0.0" in out
    assert portable_artifact_version((tmp_path / "v.mlirbc").read_bytes()) == "1.0.0"
    code, _, _ = cli("convert", str(hlo_file), str(tmp_path / "forced.bin"), "--to", "mlir")
    assert code == 0 and "func.func" in (tmp_path / "forced.bin").read_text()
    code, out, _ = cli("convert", str(tmp_path / "forced.bin"), str(tmp_path / "f2.bin"), "--from", "stablehlo",
                       "--to", "pb")
    assert code == 0 and "(HLO module proto," in out
    code, _, err = cli("convert", str(hlo_file), str(tmp_path / "f3.bin"), "--to", "nope")
    assert code == 2
    assert_one_line_error(err, "unknown format 'nope'")


@pytest.mark.parametrize("args, fragment", [
    (["--target-version", "bogus"], "'bogus' is not a StableHLO version"),
    (["--target-version", "0.1.0"], "older than the oldest version"),
])
def test_convert_errors(hlo_file: Path, tmp_path: Path, args: list[str], fragment: str) -> None:
    code, _, err = cli("convert", str(hlo_file), str(tmp_path / "x.mlirbc"), *args)
    assert code == 2
    assert_one_line_error(err, "xlasdk convert: error:", fragment)
    assert not (tmp_path / "x.mlirbc").exists()
    code, _, err = cli("convert", str(hlo_file), str(tmp_path / "x.docx"))
    assert code == 2
    assert_one_line_error(err, "unknown suffix")


# -- run -------------------------------------------------------------------------------------------------------
def test_run_with_named_inputs_npz_and_output(hlo_file: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "b.npy", B)
    want = oracle(A, B)
    code, out, err = cli("run", str(hlo_file), "--input", f"a={tmp_path / 'a.npy'}", "--input",
                         f"b={tmp_path / 'b.npy'}", "--output", str(tmp_path / "out.npz"))
    assert code == 0, err
    assert out.startswith("clitest on cpu:0: 2 input(s), 2 output(s); compiled in ")
    assert re.search(r"output 0: f32\[2,1\]\s+min ", out) and re.search(r"output 1: f32\[\]\s+min ", out)
    assert f"mean {float(want[1]):.6g}" in out
    with np.load(tmp_path / "out.npz") as got:
        assert got.files == ["output_0", "output_1"]
        np.testing.assert_allclose(got["output_0"], want[0], rtol=1e-6)
        np.testing.assert_allclose(got["output_1"], want[1], rtol=1e-6)
    # an .npz keyed by parameter names; indices work as names too
    np.savez(tmp_path / "in.npz", a=A, b=B)
    code, out2, _ = cli("run", str(hlo_file), "--inputs", str(tmp_path / "in.npz"))
    assert code == 0 and out2.splitlines()[1:] == out.splitlines()[1:3]
    code, out3, _ = cli("run", str(hlo_file), "--input", f"0={tmp_path / 'a.npy'}",
                        "--input", f"p1={tmp_path / 'b.npy'}")
    assert code == 0 and out3.splitlines()[1:] == out.splitlines()[1:3]


def test_run_random_inputs_seed_and_repeat(hlo_file: Path, tmp_path: Path) -> None:
    outs: list[np.ndarray[Any, Any]] = []
    for seed in ("3", "3", "4"):
        code, _, err = cli("run", str(hlo_file), "--random-inputs", "--seed", seed, "--output",
                           str(tmp_path / f"r{len(outs)}.npz"))
        assert code == 0, err
        with np.load(tmp_path / f"r{len(outs)}.npz") as z:
            outs.append(z["output_0"].copy())
    np.testing.assert_array_equal(outs[0], outs[1])
    assert not np.array_equal(outs[0], outs[2])
    rng = np.random.default_rng(3)  # the documented generator: standard normal per parameter, in order
    a, b = rng.standard_normal((2, 3)).astype(F32), rng.standard_normal(3).astype(F32)
    np.testing.assert_allclose(outs[0], oracle(a, b)[0], rtol=1e-5)
    code, out, _ = cli("run", str(hlo_file), "--random-inputs", "--repeat", "5")
    assert code == 0
    assert re.search(r"time per run over 5 runs: min [\d.]+ (us|ms|s), median [\d.]+ (us|ms|s)", out)


def test_run_input_errors(hlo_file: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "wrong.npy", np.zeros(3))
    np.save(tmp_path / "a.npy", A)
    cases = [
        (["--input", f"a={tmp_path / 'wrong.npy'}", "--random-inputs"],
         "input for parameter 0 ('a') must be f32[2,3], but " + str(tmp_path / "wrong.npy") + " holds f64[3]"),
        (["--input", f"a={tmp_path / 'a.npy'}"], "missing input for parameter 1 ('b', f32[3])"),
        (["--input", f"zz={tmp_path / 'a.npy'}"], "no parameter named 'zz'; parameters are 0:a, 1:b"),
        (["--input", f"a={tmp_path / 'none.npy'}"], "none.npy: no such file"),
        (["--input", "a"], "expected NAME=FILE.npy"),
        (["--inputs", str(tmp_path / "a.npy")], "a single array; use --input"),
        (["--random-inputs", "--repeat", "0"], "--repeat must be >= 1"),
        (["--random-inputs", "--device", "cpu:99"], "cpu:99"),
    ]
    for args, fragment in cases:
        code, out, err = cli("run", str(hlo_file), *args)
        assert code == 2, (args, err)
        assert_one_line_error(err, "xlasdk run: error:", fragment)


def test_run_value_previews_stay_on_one_line(tmp_path: Path) -> None:
    """Values in exponent form and complex values made numpy wrap the preview onto more lines."""
    bld = xs.XlaBuilder("wide")
    x = ops.Parameter(bld, 0, xs.Shape.array_shape(F32, (8,)), "x")
    c = ops.Parameter(bld, 1, xs.Shape.array_shape(np.complex64, (8,)), "c")
    comp = bld.build(ops.Tuple(bld, [x * F32(1e10), c * c]))
    comp.save(tmp_path / "wide.hlo")
    rng = np.random.default_rng(7)
    xv = (rng.standard_normal(8) * 1e9).astype(F32)
    cv = ((rng.standard_normal(8) + 1j * rng.standard_normal(8)) * 1e3).astype(np.complex64)
    np.save(tmp_path / "x.npy", xv)
    np.save(tmp_path / "c.npy", cv)
    code, out, err = cli("run", str(tmp_path / "wide.hlo"), "--input", f"x={tmp_path / 'x.npy'}",
                         "--input", f"c={tmp_path / 'c.npy'}")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 3, out
    want = [xv.astype(np.float64) * F32(1e10), cv * cv]
    for i, (line, w) in enumerate(zip(lines[1:], want, strict=True)):
        assert line.startswith(f"  output {i}: ") and line.endswith(", ...]"), line
        items = [t.strip() for t in line[line.index("[", 20) + 1 : -len(", ...]")].split(", ")]
        assert len(items) == 6
        got = np.array([complex(t.replace(" ", "")) for t in items])
        np.testing.assert_allclose(got, w[:6], rtol=2e-6)
        assert any("e+" in t for t in items)  # the exponent form that used to wrap


def test_run_checks_the_output_path_before_compiling(tmp_path: Path) -> None:
    # a module XLA cannot compile (exit 1): the bad --output must be reported first, with nothing run
    bad = tmp_path / "custom.hlo"
    bad.write_text('HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n'
                   '  ROOT r = f32[2] custom-call(p), custom_call_target="no_such_kernel"\n}\n')
    missing = tmp_path / "nodir" / "o.npz"
    code, out, err = cli("run", str(bad), "--random-inputs", "--output", str(missing))
    assert code == 2 and out == ""
    assert_one_line_error(err, "xlasdk run: error:", f"--output {missing}: cannot write: directory "
                          f"{tmp_path / 'nodir'} does not exist")
    code, out, err = cli("run", str(tmp_path / "missing.hlo"), "--output", str(bad / "o"))  # a file as directory
    assert code == 2 and out == ""
    assert_one_line_error(err, f"--output {bad / 'o'}: cannot write: {bad} is not a directory")
    (tmp_path / "d.npz").mkdir()
    code, out, err = cli("run", str(bad), "--random-inputs", "--output", str(tmp_path / "d"))  # d -> d.npz
    assert code == 2 and out == ""
    assert_one_line_error(err, "cannot write: it is a directory")
    assert not missing.parent.exists()


def test_cli_errors_use_cli_names(hlo_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Errors name the CLI's options (--from, --to, --device...), not the Python API's arguments."""
    hlo_bin = tmp_path / "a.bin"
    shutil.copy(hlo_file, hlo_bin)
    np.save(tmp_path / "a.npy", A)
    code, _, err = cli("convert", str(hlo_bin), str(tmp_path / "x.mlir"), "--from", "mlir")
    assert code == 2 and "suffix" not in err
    assert_one_line_error(err, "xlasdk convert: error:", f"{hlo_bin}: --from mlir says StableHLO text, but the "
                          "file holds HLO text")
    code, _, err = cli("inspect", str(hlo_file), "--format", "mlir", "--no-compile")
    assert code == 2
    assert_one_line_error(err, "xlasdk inspect: error:", "--format mlir says StableHLO text")
    code, _, err = cli("convert", str(hlo_file), str(tmp_path / "q.xyz"))
    assert code == 2 and "format=" not in err and "save(" not in err
    assert_one_line_error(err, f"{tmp_path / 'q.xyz'}: unknown suffix", "or pass --to FORMAT")
    assert not (tmp_path / "q.xyz").exists()
    code, _, err = cli("convert", str(hlo_file), str(tmp_path / "t.mlir"), "--target-version", "1.0.0")
    assert code == 2 and "save(" not in err
    assert_one_line_error(err, f"{tmp_path / 't.mlir'}: --target-version applies only to .mlirbc")
    code, _, err = cli("convert", str(hlo_file), str(tmp_path / "nodir" / "x.mlir"))
    assert code == 2
    assert_one_line_error(err, "cannot write: directory", "does not exist")
    for verb in (["run", str(hlo_file), "--random-inputs"], ["inspect", str(hlo_file)]):
        code, _, err = cli(*verb, "--device", "cpu:5")
        assert code == 2 and "xs." not in err and "client(" not in err
        assert_one_line_error(err, f"xlasdk {verb[0]}: error: --device cpu:5: no such device; the cpu platform has "
                              "1 device: cpu:0", "XLA_FLAGS=--xla_force_host_platform_device_count=N")
    code, _, err = cli("run", str(hlo_file), "--random-inputs", "--device", "gpu:0")
    assert code == 2 and "xs." not in err and "load_pjrt_plugin" not in err
    assert_one_line_error(err, "--device gpu:0: no platform 'gpu'; the devices are cpu:0")
    code, _, err = cli("devices", "--platform", "nosuchplatform")
    assert code == 2 and "xs." not in err
    assert_one_line_error(err, "--platform nosuchplatform: no such platform; the devices are cpu:0")
    capsys.readouterr()
    assert main(["run", str(hlo_file), "--input", "x", str(tmp_path / "a.npy")]) == 2  # argparse: sys.stderr
    npy = tmp_path / "a.npy"
    assert_one_line_error(capsys.readouterr().err, f"xlasdk run: error: unrecognized arguments: {npy}; --input "
                          f"takes NAME=FILE.npy as one argument, e.g. --input x={npy}", "(see 'xlasdk run --help')")
    assert main(["cache", "info", "extra"]) == 2
    assert_one_line_error(capsys.readouterr().err, "xlasdk cache info: error: unrecognized arguments: extra",
                          "(see 'xlasdk cache info --help')")
    code, _, err = cli("run", str(hlo_file), "--input", f"7={tmp_path / 'a.npy'}")
    assert code == 2 and "no parameter named" not in err
    assert_one_line_error(err, f"--input 7={tmp_path / 'a.npy'}: parameter index 7 is out of range; the program has "
                          "2 parameters: 0:a, 1:b")
    np.savez(tmp_path / "in.npz", **{"2": B})
    code, _, err = cli("run", str(hlo_file), "--inputs", str(tmp_path / "in.npz"))
    assert code == 2
    assert_one_line_error(err, "parameter index 2 is out of range; the program has 2 parameters")


def test_errors_exit_codes_and_debug(tmp_path: Path) -> None:
    code, _, err = cli("run", str(tmp_path / "missing.hlo"))
    assert code == 2
    assert_one_line_error(err, "xlasdk run: error:", "missing.hlo: no such file")
    code, _, err = cli("--debug", "inspect", str(tmp_path / "missing.hlo"))
    assert code == 2 and "Traceback" in err and "FormatError" in err
    assert err.strip().splitlines()[-1].startswith("xlasdk inspect: error:")
    code, _, err = cli("inspect", str(tmp_path / "missing.hlo"), "--debug")  # --debug after the verb too
    assert code == 2 and "Traceback" in err
    # a runtime failure: XLA cannot compile a custom call it does not know -> exit 1
    bad = tmp_path / "custom.hlo"
    bad.write_text('HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n'
                   '  ROOT r = f32[2] custom-call(p), custom_call_target="no_such_kernel"\n}\n')
    code, _, err = cli("run", str(bad), "--random-inputs")
    assert code == 1
    assert_one_line_error(err, "xlasdk run: error:", "no_such_kernel")
    code, _, _ = cli("inspect", str(bad), "--no-compile")
    assert code == 0


def test_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert_one_line_error(err, "xlasdk: error: argument VERB: invalid choice: 'frobnicate'", "see 'xlasdk --help'")
    assert main(["run"]) == 2
    assert_one_line_error(capsys.readouterr().err, "xlasdk run: error:", "FILE")
    assert main(["run", "x.hlo", "--repeat", "many"]) == 2
    assert_one_line_error(capsys.readouterr().err, "invalid int value: 'many'")


# -- cache ------------------------------------------------------------------------------------------------------
def test_cache_info_and_clear(tmp_path: Path) -> None:
    c = CompileCache(tmp_path / "cache")
    for i, size in enumerate((1000, 3000)):
        c.put(CompileCache.key(f"m{i}", options="", platform="cpu", device_kind="cpu"), b"x" * size, name=f"mod{i}")
    code, out, _ = cli("cache", "info", "--dir", str(tmp_path / "cache"), "--list")
    assert code == 0
    assert f"directory: {tmp_path / 'cache'}" in out and "entries:   2" in out
    lines = [ln for ln in out.splitlines() if ln.startswith("  ")]
    assert len(lines) == 2 and {ln.split()[-1] for ln in lines} == {"mod0", "mod1"}
    code, out, _ = cli("cache", "clear", "--dir", str(tmp_path / "cache"))
    assert code == 0 and out.strip() == f"removed 2 entries from {tmp_path / 'cache'}"
    assert "entries:   0" in cli("cache", "info", "--dir", str(tmp_path / "cache"))[1]


def test_cache_uses_the_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLASDK_CACHE_DIR", str(tmp_path / "envc"))
    code, out, _ = cli("cache", "info")
    assert code == 0 and f"directory: {tmp_path / 'envc'}" in out


# -- through a real process -----------------------------------------------------------------------------------
def _proc(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # the CLI must be quiet itself
    env["PYTHONPATH"] = REPO
    return subprocess.run([sys.executable, "-m", "xlasdk.cli", *argv], capture_output=True, text=True, env=env,
                          timeout=300)


def test_subprocess_run_is_quiet_and_errors_are_one_line(hlo_file: Path, tmp_path: Path) -> None:
    r = _proc("run", str(hlo_file), "--random-inputs")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""  # no XLA log lines
    assert "output 0: f32[2,1]" in r.stdout
    crash = tmp_path / "c08.hlo"  # XLA's parser aborts the process on this one
    crash.write_text("HloModule m\nENTRY e {\n  a = f32[4,8] parameter(0)\n  ROOT result = f32[31] reshape(a)\n}\n")
    r = _proc("run", str(crash), "--random-inputs")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert str(crash) in r.stderr and "reshape 'result' cannot turn f32[4,8]" in r.stderr


def test_closed_stdout_exits_quietly(hlo_file: Path, tmp_path: Path) -> None:
    """`xlasdk ... | head -1`: a reader that goes away ends the command quietly, exit code 0."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = REPO
    cmd = [sys.executable, "-m", "xlasdk.cli"]
    procs = []
    # stdout a pipe whose reader is already gone (`| head -0`): every write fails with EPIPE
    for argv in (["inspect", str(hlo_file)], ["run", str(hlo_file), "--random-inputs"], ["devices"]):
        r, w = os.pipe()
        os.close(r)
        procs.append((argv, subprocess.Popen([*cmd, *argv], stdout=w, stderr=subprocess.PIPE, text=True, env=env)))
        os.close(w)
    # a real pipeline, its output larger than the pipe's buffer so that head leaves before it is written
    big = tmp_path / "big.hlo"
    body = "".join(f"  a{i} = f32[4] add(p, p)\n" for i in range(3000))
    big.write_text(f"HloModule big\nENTRY e {{\n  p = f32[4] parameter(0)\n{body}  ROOT r = f32[4] add(p, p)\n}}\n")
    bash = shutil.which("bash")
    pipeline = None
    if bash is not None and shutil.which("head") is not None:
        line = " ".join([*cmd, "inspect", str(big), "--no-compile", "--hlo"])
        pipeline = subprocess.Popen([bash, "-c", f"set -o pipefail; {line} | head -1"], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=env)
    for argv, p in procs:
        _, err = p.communicate(timeout=300)
        assert (p.returncode, err) == (0, ""), argv
    if pipeline is not None:
        out, err = pipeline.communicate(timeout=300)
        assert (pipeline.returncode, err, out) == (0, "", f"file:          {big} (HLO text)\n")


@pytest.mark.skipif(shutil.which("xlasdk") is None, reason="the xlasdk console script is not installed")
def test_console_script() -> None:
    r = subprocess.run(["xlasdk", "version"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("xlasdk ")
    r = subprocess.run(["xlasdk", "nosuchverb"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
