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


def test_inspect_compiles_a_global_spmd_module_for_its_partitions() -> None:
    """A JAX dump of a sharded program (``num_partitions=4`` in its header) is compiled for its 4
    partitions, so the optimized HLO and the cost are what XLA runs: the per-partition shapes and the
    collectives (it was compiled for one device, quietly: a new user's finding)."""
    f = Path(__file__).parent / "data" / "dumps" / "sharded_mlp" / "module.before_optimizations.txt"
    code, out, err = cli("inspect", str(f), "--json", "--optimized")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["compiled_for"] == {"num_replicas": 1, "num_partitions": 4}
    assert "all-reduce" in rep["optimized_hlo"] or "all-gather" in rep["optimized_hlo"], rep["optimized_hlo"]
    code, out, err = cli("inspect", str(f))
    assert code == 0 and "compiled for 4 partition(s) x 1 replica(s) as the module says" in out, err


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
        (["--random-inputs", "--repeat", "0"], "argument --repeat: must be an integer >= 1, got '0'"),
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
    assert_one_line_error(capsys.readouterr().err, "argument --repeat: must be an integer >= 1, got 'many'")


# -- cache ------------------------------------------------------------------------------------------------------
def test_cache_info_and_clear(tmp_path: Path) -> None:
    c = CompileCache(tmp_path / "cache")
    for i, size in enumerate((1000, 3000)):
        c.put(CompileCache.key(f"m{i}", options="", platform="cpu", device_kind="cpu"), b"x" * size, name=f"mod{i}")
    loads = CompileCache(tmp_path / "cache" / "loads")  # the verified-load cache beside it
    loads.put("ab" * 32, b"y" * 500, name="a module")
    code, out, _ = cli("cache", "info", "--dir", str(tmp_path / "cache"), "--list")
    assert code == 0
    assert f"directory: {tmp_path / 'cache'}" in out and "entries:   2" in out
    lines = [ln for ln in out.splitlines() if ln.startswith("  ")]
    assert len(lines) == 2 and {ln.split()[-1] for ln in lines} == {"mod0", "mod1"}
    assert f"verified loads: 1 entry, {loads.info().total_bytes} B in {tmp_path / 'cache' / 'loads'}" in out
    code, out, _ = cli("cache", "clear", "--dir", str(tmp_path / "cache"))
    assert code == 0 and out.strip() == (f"removed 2 entries from {tmp_path / 'cache'} and 1 verified load from "
                                         f"{tmp_path / 'cache' / 'loads'}")
    out = cli("cache", "info", "--dir", str(tmp_path / "cache"))[1]
    assert "entries:   0" in out and "verified loads: 0 entries" in out


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


def test_run_output_is_written_when_stdout_is_closed(tmp_path: Path) -> None:
    # `xlasdk run m.hlo --inputs in.npz --output o.npz | head -1` exited 0 without o.npz when the
    # reader left before the summary was printed (found by a new user's trial).
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = REPO
    module = tmp_path / "m.hlo"
    module.write_text("HloModule m\nENTRY e {\n  p = s32[4] parameter(0)\n  ROOT r = s32[4] multiply(p, p)\n}\n")
    x = np.array([1, -2, 3, 40], np.int32)
    np.savez(tmp_path / "in.npz", p=x)
    result = tmp_path / "o.npz"
    r, w = os.pipe()
    os.close(r)  # every write to stdout fails with EPIPE
    p = subprocess.Popen([sys.executable, "-m", "xlasdk.cli", "run", str(module), "--inputs", str(tmp_path / "in.npz"),
                          "--output", str(result)], stdout=w, stderr=subprocess.PIPE, text=True, env=env)
    os.close(w)
    _, err = p.communicate(timeout=300)
    assert (p.returncode, err) == (0, "")
    with np.load(result) as z:
        np.testing.assert_array_equal(z["output_0"], x * x)


@pytest.mark.skipif(shutil.which("xlasdk") is None, reason="the xlasdk console script is not installed")
def test_console_script() -> None:
    r = subprocess.run(["xlasdk", "version"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("xlasdk ")
    r = subprocess.run(["xlasdk", "nosuchverb"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1


# -- element types numpy does not have (bf16, fp8, int4, int2) ------------------------------------------------
def _save_module(tmp_path: Path, name: str, bld: xs.XlaBuilder, root: Any) -> Path:
    path = tmp_path / f"{name}.hlo"
    bld.build(root).save(path)
    return path


def _load_outputs(path: Path) -> dict[str, np.ndarray[Any, Any]]:
    """``--output`` read the documented way: plain np.load, then the '__dtypes__' manifest's views."""
    import ml_dtypes

    with np.load(path) as z:  # plain numpy, no pickles
        arrays = {k: z[k] for k in z.files}
    types = json.loads(str(arrays.pop("__dtypes__"))) if "__dtypes__" in arrays else {}
    for key, name in types.items():
        assert arrays[key].dtype.kind == "V"  # raw bytes in the file
        arrays[key] = arrays[key].view(getattr(ml_dtypes, name))
    return arrays


def test_run_bf16_inputs_and_outputs_round_trip(tmp_path: Path) -> None:
    import ml_dtypes

    bf16 = ml_dtypes.bfloat16
    bld = xs.XlaBuilder("bf16ops")
    x = ops.Parameter(bld, 0, xs.Shape.array_shape(bf16, (2, 3)), "x")
    y = ops.Parameter(bld, 1, xs.Shape.array_shape(bf16, (2, 3)), "y")
    path = _save_module(tmp_path, "bf16", bld, ops.Tuple(bld, [x * y, x + y]))
    rng = np.random.default_rng(5)
    xv = (rng.standard_normal((2, 3)) * 3).astype(bf16)
    yv = (rng.standard_normal((2, 3)) * 3).astype(bf16)
    np.save(tmp_path / "x.npy", xv)  # numpy writes these as raw '|V2'
    np.save(tmp_path / "y.npy", yv)
    assert np.load(tmp_path / "x.npy").dtype == np.dtype("V2")
    out = tmp_path / "out.npz"
    code, text, err = cli("run", str(path), "--input", f"x={tmp_path / 'x.npy'}", "--input",
                          f"y={tmp_path / 'y.npy'}", "--output", str(out))
    assert code == 0, err
    assert re.search(r"output 0: bf16\[2,3\]\s+min ", text) and re.search(r"output 1: bf16\[2,3\]", text)
    with np.load(out) as z:
        assert z.files == ["output_0", "output_1", "__dtypes__"]
        assert json.loads(str(z["__dtypes__"])) == {"output_0": "bfloat16", "output_1": "bfloat16"}
        np.testing.assert_array_equal(z["output_0"].view(bf16), xv * yv)  # as --help shows
    got = _load_outputs(out)
    assert list(got) == ["output_0", "output_1"] and got["output_0"].dtype == bf16
    # one rounding per op, as ml_dtypes does it
    np.testing.assert_array_equal(got["output_0"], xv * yv)
    np.testing.assert_array_equal(got["output_1"], xv + yv)
    # the output file is the input of another run: output_0 -> x, output_1 -> y
    code, text2, err = cli("run", str(path), "--inputs", str(out), "--output", str(tmp_path / "out2.npz"))
    assert code == 0, err
    again = _load_outputs(tmp_path / "out2.npz")
    a, b = got["output_0"], got["output_1"]
    np.testing.assert_array_equal(again["output_0"], a * b)
    np.testing.assert_array_equal(again["output_1"], a + b)
    # one array of an .npz: FILE.npz:KEY
    code, _, err = cli("run", str(path), "--input", f"x={out}:output_1", "--input", f"y={out}:output_0")
    assert code == 0, err


def test_run_fp8_every_kind_and_e5m2_files_numpy_cannot_read(tmp_path: Path) -> None:
    import ml_dtypes

    kinds = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3", "float8_e3m4", "float8_e4m3fnuz", "float8_e5m2fnuz",
             "float8_e4m3b11fnuz", "float8_e8m0fnu", "float4_e2m1fn"]
    dts = [np.dtype(getattr(ml_dtypes, k)) for k in kinds]
    xv = np.array([0.5, 1.0, 1.5, 2.0, 3.0, 0.25, 4.0, 0.125], F32)
    bld = xs.XlaBuilder("tofp8")
    x = ops.Parameter(bld, 0, xs.Shape.array_shape(F32, (8,)), "x")
    to8 = _save_module(tmp_path, "to8", bld, ops.Tuple(bld, [ops.ConvertElementType(x, dt) for dt in dts]))
    yv = (np.random.default_rng(1).standard_normal(8) * 2).astype(F32)  # rounded to each kind by XLA
    np.save(tmp_path / "x.npy", yv)
    code, _, err = cli("run", str(to8), "--input", f"x={tmp_path / 'x.npy'}", "--output", str(tmp_path / "f8.npz"))
    assert code == 0, err
    got = _load_outputs(tmp_path / "f8.npz")
    for i, dt in enumerate(dts):
        assert got[f"output_{i}"].dtype == dt
        np.testing.assert_array_equal(got[f"output_{i}"].astype(F32), yv.astype(dt).astype(F32), err_msg=dt.name)
    # back to f32 through the file: every kind as an input, exact values
    bld = xs.XlaBuilder("from8")
    ps = [ops.Parameter(bld, i, xs.Shape.array_shape(dt, (8,)), f"p{i}") for i, dt in enumerate(dts)]
    from8 = _save_module(tmp_path, "from8", bld, ops.Tuple(bld, [ops.ConvertElementType(p, F32) for p in ps]))
    for i, dt in enumerate(dts):
        np.save(tmp_path / f"in{i}.npy", xv.astype(dt))  # float8_e5m2 is written with descr '<f1' ...
    with pytest.raises(ValueError, match="descr"):
        np.load(tmp_path / "in1.npy")  # ... which numpy itself cannot read back
    args = [a for i in range(len(dts)) for a in ("--input", f"p{i}={tmp_path / f'in{i}.npy'}")]
    code, _, err = cli("run", str(from8), *args, "--output", str(tmp_path / "back.npz"))
    assert code == 0, err
    back = _load_outputs(tmp_path / "back.npz")
    assert "__dtypes__" not in np.load(tmp_path / "back.npz").files  # f32 outputs only: no manifest
    for i, dt in enumerate(dts):
        np.testing.assert_array_equal(back[f"output_{i}"], xv.astype(dt).astype(F32), err_msg=dt.name)
    # and in an .npz written by numpy (the '<f1' member too)
    np.savez(tmp_path / "ins.npz", **{f"p{i}": xv.astype(dt) for i, dt in enumerate(dts)})
    code, _, err = cli("run", str(from8), "--inputs", str(tmp_path / "ins.npz"))
    assert code == 0, err


def test_run_int4_uint4_int2_uint2(tmp_path: Path) -> None:
    import ml_dtypes

    cases = [(ml_dtypes.int4, -8, 7), (ml_dtypes.uint4, 0, 15), (ml_dtypes.int2, -2, 1), (ml_dtypes.uint2, 0, 3)]
    rng = np.random.default_rng(3)
    for dt, lo, hi in cases:
        name = np.dtype(dt).name
        bld = xs.XlaBuilder(f"add_{name}")
        a = ops.Parameter(bld, 0, xs.Shape.array_shape(dt, (4, 4)), "a")
        b = ops.Parameter(bld, 1, xs.Shape.array_shape(dt, (4, 4)), "b")
        path = _save_module(tmp_path, name, bld, ops.Tuple(bld, [a + b, a * b, ops.ConvertElementType(a, np.int32)]))
        av = rng.integers(lo, hi + 1, (4, 4))
        bv = rng.integers(lo, hi + 1, (4, 4))
        np.savez(tmp_path / f"{name}.npz", a=av.astype(dt), b=bv.astype(dt))
        out = tmp_path / f"{name}_out.npz"
        code, text, err = cli("run", str(path), "--inputs", str(tmp_path / f"{name}.npz"), "--output", str(out))
        assert code == 0, (name, err)
        got = _load_outputs(out)
        span = hi - lo + 1

        def wrap(v: np.ndarray[Any, Any], lo: int = lo, span: int = span) -> np.ndarray[Any, Any]:
            return (v - lo) % span + lo  # two's complement wrap-around of the narrow type

        assert got["output_0"].dtype == np.dtype(dt)
        np.testing.assert_array_equal(got["output_0"].astype(np.int64), wrap(av + bv), err_msg=name)
        np.testing.assert_array_equal(got["output_1"].astype(np.int64), wrap(av * bv), err_msg=name)
        np.testing.assert_array_equal(got["output_2"], av.astype(np.int32))
        code, _, err = cli("run", str(path), "--random-inputs", "--seed", "2")  # random values of the narrow type
        assert code == 0, (name, err)


def test_run_raw_inputs_of_the_wrong_size_or_type_are_named(tmp_path: Path) -> None:
    import ml_dtypes

    bld = xs.XlaBuilder("halfs")
    x = ops.Parameter(bld, 0, xs.Shape.array_shape(ml_dtypes.bfloat16, (3,)), "x")
    h = ops.Parameter(bld, 1, xs.Shape.array_shape(np.float16, (3,)), "h")
    path = _save_module(tmp_path, "halfs", bld, ops.Tuple(bld, [x, h]))
    np.save(tmp_path / "f8.npy", np.ones(3, ml_dtypes.float8_e4m3fn))  # raw 1-byte values
    np.save(tmp_path / "h.npy", np.ones(3, np.float16))
    code, _, err = cli("run", str(path), "--input", f"x={tmp_path / 'f8.npy'}", "--input", f"h={tmp_path / 'h.npy'}")
    assert code == 2
    assert_one_line_error(err, "xlasdk run: error: input for parameter 0 ('x') must be bf16[3] (2-byte elements), "
                          f"but {tmp_path / 'f8.npy'} holds raw 1-byte values (|V1[3])")
    # raw 2-byte values without a manifest are read as the parameter's type, even f16 ...
    np.save(tmp_path / "x.npy", np.ones(3, ml_dtypes.bfloat16))
    code, text, err = cli("run", str(path), "--input", f"x={tmp_path / 'x.npy'}",
                          "--input", f"h={tmp_path / 'x.npy'}", "--output", str(tmp_path / "o.npz"))
    assert code == 0, err
    # ... but a manifest says what they are: a bf16 output is no f16 input
    code, _, err = cli("run", str(path), "--input", f"x={tmp_path / 'o.npz'}:output_0",
                       "--input", f"h={tmp_path / 'o.npz'}:output_0")
    assert code == 2
    assert_one_line_error(err, "input for parameter 1 ('h') must be f16[3], but "
                          f"{tmp_path / 'o.npz'}[output_0] holds bf16[3]")
    code, _, err = cli("run", str(path), "--input", f"x={tmp_path / 'o.npz'}:nope")
    assert code == 2
    assert_one_line_error(err, "has no array 'nope'; it holds output_0, output_1")


# -- convert checks what it wrote -------------------------------------------------------------------------------
def test_convert_checks_the_written_file(hlo_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from xlasdk.formats import saving

    out = tmp_path / "c.mlir"
    code, text, err = cli("convert", str(hlo_file), str(out))
    assert code == 0, err
    assert text.startswith(f"wrote {out} (StableHLO text, ") and text.endswith("bytes, loads back and compiles)\n")
    old = out.read_bytes()
    real = saving.computation_bytes

    def leftovers() -> list[str]:
        return sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp"))

    # bytes that do not load back: exit 1, the old file as it was, no temporary file
    monkeypatch.setattr(saving, "computation_bytes", lambda *a, **k: real(*a, **k)[:-40])
    code, _, err = cli("convert", str(hlo_file), str(out))
    assert code == 1
    assert_one_line_error(err, f"xlasdk convert: error: {out}: the written file does not load back (",
                          "nothing was written")
    assert ".tmp" not in err and out.read_bytes() == old and leftovers() == []
    code, _, err = cli("convert", str(hlo_file), str(tmp_path / "new.mlir"))
    assert code == 1 and not (tmp_path / "new.mlir").exists() and leftovers() == []
    # --no-check writes whatever the bytes are
    code, text, _ = cli("convert", str(hlo_file), str(tmp_path / "unchecked.mlir"), "--no-check")
    assert code == 0 and text.endswith(" bytes)\n")
    # another module: loads back, but with another program shape
    other = xs.XlaBuilder("other")
    ops.Neg(ops.Parameter(other, 0, xs.Shape.array_shape(F32, (5,)), "z"))
    other_comp = other.build()
    monkeypatch.setattr(saving, "computation_bytes", lambda comp, *a, **k: real(other_comp, *a, **k))
    code, _, err = cli("convert", str(hlo_file), str(out))
    assert code == 1 and out.read_bytes() == old and leftovers() == []
    assert_one_line_error(err, "the written file loads back with another program shape (f32[5] -> f32[5], expected "
                          "f32[2,3], f32[3] -> (f32[2,1], f32[]))")
    # same program shape, but XLA cannot compile what was written, though it compiles the source
    bad = xs.XlaComputation.from_hlo_text(
        "HloModule m\nENTRY e {\n  a = f32[2,3] parameter(0)\n  b = f32[3] parameter(1)\n"
        '  r = f32[2,1] custom-call(a, b), custom_call_target="no_such_kernel"\n  s = f32[] constant(0)\n'
        "  ROOT t = (f32[2,1], f32[]) tuple(r, s)\n}\n")
    monkeypatch.setattr(saving, "computation_bytes", lambda comp, *a, **k: real(bad, *a, **k))
    code, _, err = cli("convert", str(hlo_file), str(out))
    assert code == 1 and out.read_bytes() == old and leftovers() == []
    assert_one_line_error(err, f"{out}: the written StableHLO text does not compile, though {hlo_file} does (",
                          "no_such_kernel")
    code, text, err = cli("convert", str(hlo_file), str(out), "--no-compile")  # loads back: enough
    assert code == 0 and text.endswith("bytes, loads back)\n") and out.read_bytes() != old
    # a source that does not compile here either: the file is written, and the report says so
    monkeypatch.setattr(saving, "computation_bytes", real)
    src = tmp_path / "custom.hlo"
    src.write_text(bad.as_hlo_text())
    code, text, err = cli("convert", str(src), str(tmp_path / "custom.pb"))
    assert code == 0, err
    assert text.rstrip().endswith(f"loads back; like {src}, it does not compile on cpu:0)")


# -- supervised runs: --timeout, XLA aborts ---------------------------------------------------------------------
def _forever(tmp_path: Path) -> Path:
    """A While whose condition is always true."""
    bld = xs.XlaBuilder("forever")
    n = ops.Parameter(bld, 0, xs.Shape.array_shape(np.int32, ()), "n")
    loop = ops.While(lambda c: ops.Eq(c, c), lambda c: c + np.int32(1), n)
    return _save_module(tmp_path, "forever", bld, loop)


def _bad_sorts(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Sorts whose comparators are not strict weak orders: always true (on distinct keys), and <=
    (on equal keys); the keys of the second."""
    cb = xs.XlaBuilder("always_true")
    for i in range(2):
        ops.Parameter(cb, i, xs.Shape.array_shape(F32, ()), f"v{i}")
    ops.Constant(cb, np.bool_(True))
    paths = []
    for name, cmp in (("alwaystrue", cb.build()), ("lessequal", lambda a, b: ops.Le(a, b))):
        bld = xs.XlaBuilder(name)
        x = ops.Parameter(bld, 0, xs.Shape.array_shape(F32, (100000,)), "x")
        paths.append(_save_module(tmp_path, name, bld, ops.Sort(bld, x, comparator=cmp)))
    np.save(tmp_path / "zeros.npy", np.zeros(100000, F32))
    return paths[0], paths[1], tmp_path / "zeros.npy"


def _popen(*argv: str, script: str | None = None) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = REPO
    cmd = [sys.executable, script] if script else [sys.executable, "-m", "xlasdk.cli"]
    return subprocess.Popen([*cmd, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_timeout_ends_programs_that_never_finish(tmp_path: Path) -> None:
    """The xlasdk command (a forked child) and main() from Python (a spawned child) alike."""
    forever = _forever(tmp_path)
    always, lessequal, zeros = _bad_sorts(tmp_path)
    procs = [_popen("run", str(forever), "--random-inputs", "--timeout", "8"),
             _popen("run", str(always), "--random-inputs", "--timeout", "8"),
             _popen("run", str(lessequal), "--input", f"x={zeros}", "--timeout", "8")]
    code, out, err = cli("run", str(forever), "--random-inputs", "--timeout", "8")
    assert code == 1 and out == ""
    assert_one_line_error(err, f"xlasdk run: error: {forever}: ", "did not finish within 8 s (--timeout)")
    results = [(p, *p.communicate(timeout=120)) for p in procs]
    p, out, err = results[0]
    assert p.returncode == 1 and out == ""
    assert_one_line_error(err, f"xlasdk run: error: {forever}: the run did not finish within 8 s (--timeout)")
    # XLA:CPU's sort loops or runs off the array with such comparators: a run that never ends, or a crash
    # (jaxlib 0.10.2); XLA of jaxlib 0.11+ sorts them to an end: then some order of the input is printed
    for path, (p, out, err) in zip((always, lessequal), results[1:], strict=True):
        if p.returncode == 0 and xs.jaxlib_version_info().xla_client >= 495:
            assert out.strip() and err.strip() == "", (out, err)
            continue
        assert p.returncode == 1 and out == ""
        assert_one_line_error(err, f"xlasdk run: error: {path}: ")
        assert re.search(r": (the run did not finish within 8 s \(--timeout\)|XLA crashed while running \(SIG\w+\))",
                         err), err
    code, _, err = cli("run", str(forever), "--timeout", "0")
    assert code == 2
    assert_one_line_error(err, "argument --timeout: must be a number of seconds > 0")


def test_compare_exits_1_for_a_divergence_only(tmp_path: Path) -> None:
    """A program XLA refuses to compile, or one that does not end within --timeout, is no
    divergence: compare says why and exits 2 (it exited 1, as for "XLA computed it wrong")."""
    cc = tmp_path / "cc.hlo"
    cc.write_text('HloModule cc\n\nENTRY main {\n  p = f32[4] parameter(0)\n'
                  '  ROOT r = f32[4] custom-call(p), custom_call_target="xlasdk_no_such_target"\n}\n')
    for against in ("reference", "cpu:0"):
        code, out, err = cli("compare", str(cc), "--random-inputs", "--against", against)
        assert (code, out) == (2, ""), (against, code, out, err)
        assert_one_line_error(err, "xlasdk compare: error: ", "xlasdk_no_such_target")
    forever = _forever(tmp_path)
    code, out, err = cli("compare", str(forever), "--random-inputs", "--against", "cpu:0", "--timeout", "5")
    assert (code, out) == (2, ""), (code, out, err)
    assert_one_line_error(err, "xlasdk compare: error: ", "did not finish within 5 s (--timeout)")
    code, out, err = cli("run", str(forever), "--random-inputs", "--timeout", "5")  # run keeps its 1
    assert (code, out) == (1, ""), (code, out, err)


_ABORTING = """\
import os, sys
import numpy as np
import xlasdk.cli as cli
import xlasdk.runtime.executable as ex

def abort(*args, **kwargs):  # what XLA does on a failed CHECK: log F..., a stack trace, abort()
    os.write(2, b"W0000 00:00:00.000000   123 fake.cc:1] a warning before\\n")
    os.write(2, b"F0000 00:00:00.000000   123 fake.cc:2] Check failed: 1 == 2 (synthetic)\\n")
    os.write(2, b"*** Check failure stack trace: ***\\n    @ 0x1234 xla::Frame()\\n")
    os.abort()

def half_write(f, **arrays):  # dies in the middle of writing --output
    f.write(b"PK-half-a-file")
    f.flush()
    abort()

if sys.argv[1] == "when-running":
    ex.Executable.__call__ = abort
else:
    np.savez = half_write
sys.argv = ["xlasdk", *sys.argv[2:]]
sys.exit(cli.main())
"""


def test_an_abort_in_xla_is_one_line_and_exit_1(hlo_file: Path, tmp_path: Path) -> None:
    script = tmp_path / "aborting.py"
    script.write_text(_ABORTING)
    old = tmp_path / "o.npz"
    old.write_bytes(b"old outputs")
    p = _popen("when-running", "run", str(hlo_file), "--random-inputs", script=str(script))
    out, err = p.communicate(timeout=300)
    assert p.returncode == 1 and out == ""
    lines = err.splitlines()  # XLA's earlier log lines still flow; the fatal line and stack are summarized
    assert lines == ["W0000 00:00:00.000000   123 fake.cc:1] a warning before",
                     f"xlasdk run: error: {hlo_file}: XLA aborted while running (SIGABRT): fake.cc:2] Check failed: "
                     "1 == 2 (synthetic)"], err
    p = _popen("when-running", "--debug", "run", str(hlo_file), "--random-inputs", script=str(script))
    out, err = p.communicate(timeout=300)
    assert p.returncode == 1 and "*** Check failure stack trace: ***" in err and "xla::Frame()" in err
    assert err.splitlines()[-1].startswith(f"xlasdk run: error: {hlo_file}: XLA aborted while running (SIGABRT)")
    # killed while writing --output: the old file stays, the half-written temporary file is removed
    p = _popen("when-writing", "run", str(hlo_file), "--random-inputs", "--output", str(old), script=str(script))
    out, err = p.communicate(timeout=300)
    assert p.returncode == 1
    assert err.strip().endswith("XLA aborted while writing the output (SIGABRT): fake.cc:2] Check failed: 1 == 2 "
                                "(synthetic)"), err
    assert old.read_bytes() == b"old outputs"
    assert sorted(q.name for q in tmp_path.iterdir()) == ["aborting.py", "o.npz"]


def test_xla_ending_the_process_is_reported(hlo_file: Path, tmp_path: Path) -> None:
    """A real one: XLA logs a fatal error and ends the process on an unknown XLA_FLAGS flag; xlasdk's
    worker reads the flags first, and the command reports it in one line (exit 1)."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = REPO
    env["XLA_FLAGS"] = "--xla_no_such_flag=1"
    mlir = tmp_path / "m.mlir"
    build().save(mlir)
    for argv in (["devices"], ["run", str(mlir), "--random-inputs"]):
        r = subprocess.run([sys.executable, "-m", "xlasdk.cli", *argv], capture_output=True, text=True, env=env,
                           timeout=300)
        assert r.returncode == 1 and r.stdout == "", (argv, r.stderr)
        assert_one_line_error(r.stderr, f"xlasdk {argv[0]}: error: ", "does not know: --xla_no_such_flag=1;")
        assert "XLA_FLAGS holds a flag this XLA does not know: --xla_no_such_flag=1; XLA ends" in r.stderr
        assert "fix or unset XLA_FLAGS" in r.stderr and "((" not in r.stderr and "))" not in r.stderr


def test_several_unknown_xla_flags_are_named_as_the_environments_fault(tmp_path: Path) -> None:
    """XLA says "Unknown flags in XLA_FLAGS: --a --b" for several: still the environment's fault,
    named once each (it was "loading the module could not begin ... nothing is known about the file")."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = REPO
    env["XLA_FLAGS"] = "--xla_no_such_flag=1 --xla_nor_this"
    mlir = tmp_path / "m.mlir"
    build().save(mlir)
    r = subprocess.run([sys.executable, "-m", "xlasdk.cli", "run", str(mlir), "--random-inputs"], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 1 and r.stdout == "", r.stderr
    assert "XLA_FLAGS holds a flag this XLA does not know: --xla_no_such_flag=1 --xla_nor_this; XLA ends" in r.stderr


def test_interrupting_the_parent_leaves_no_child_running(tmp_path: Path) -> None:
    # SIGINT to the supervising parent alone (as `timeout -s INT` sends it): the child, busy inside
    # XLA in a loop that never ends, must not outlive it (it did, reparented to init, at full CPU).
    import signal
    import time

    hang = tmp_path / "hang_forever_unique.hlo"
    hang.write_text(
        "HloModule hang\n\n%cond (p: s32[]) -> pred[] {\n  %p = s32[] parameter(0)\n"
        "  ROOT %t = pred[] constant(true)\n}\n\n"
        "%body (p: s32[]) -> s32[] {\n  %p = s32[] parameter(0)\n  %one = s32[] constant(1)\n"
        "  ROOT %a = s32[] add(%p, %one)\n}\n\nENTRY %main () -> s32[] {\n  %z = s32[] constant(0)\n"
        "  ROOT %w = s32[] while(%z), condition=%cond, body=%body\n}\n"
    )
    proc = subprocess.Popen([sys.executable, "-m", "xlasdk.cli", "run", str(hang)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(8)  # compiled and running
    os.kill(proc.pid, signal.SIGKILL)  # the parent dies without a chance to kill its child
    proc.communicate(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        left = subprocess.run(["pgrep", "-f", str(hang)], capture_output=True, text=True).stdout.split()
        if not left:
            break
        time.sleep(0.5)
    assert not left, f"processes still running {hang}: {left}"


_TOO_BIG = {
    "result": """HloModule big_result

ENTRY %main (x: f32[2]) -> f32[1099511627776] {
  %x = f32[2]{0} parameter(0)
  %c = f32[] constant(1)
  ROOT %b = f32[1099511627776]{0} broadcast(%c), dimensions={}
}
""",
    "input": """HloModule big_input

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[1099511627776]) -> f32[] {
  %x = f32[1099511627776]{0} parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[] reduce(%x, %z), dimensions={0}, to_apply=%add
}
""",
}


@pytest.mark.parametrize("which", sorted(_TOO_BIG))
def test_run_refuses_programs_larger_than_memory_with_exit_2(which: str, tmp_path: Path) -> None:
    """Issue 17, finding 7: a 4 TiB result or --random-inputs parameter ended in `internal error
    (MemoryError)`, exit 1; it is refused before anything is allocated, exit 2, naming the size."""
    path = tmp_path / f"{which}.hlo"
    path.write_text(_TOO_BIG[which])
    code, _, err = cli("run", str(path), "--random-inputs")
    assert code == 2, err
    what = "output 0" if which == "result" else "parameter 0 (x)"
    assert f"the largest: {what}, f32[1099511627776], 4,398,046,511,104 bytes" in err, err


def test_run_memory_limit_is_overridable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = xs.XlaBuilder("small")
    b.build(ops.Neg(ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (4,)), "x"))).save(tmp_path / "s.hlo")
    monkeypatch.setenv("XLASDK_MAX_RUN_BYTES", "16")  # 16 B in, 16 B out: 32 > 16
    code, _, err = cli("run", str(tmp_path / "s.hlo"), "--random-inputs")
    assert code == 2 and "need 32 bytes, more than the 16" in err, err
    monkeypatch.setenv("XLASDK_MAX_RUN_BYTES", "32")
    code, out, err = cli("run", str(tmp_path / "s.hlo"), "--random-inputs")
    assert code == 0, err


def test_inputs_that_are_not_an_npz_say_what_they_are(tmp_path: Path) -> None:
    """numpy's own message spoke of pickled object data for any file neither zip nor .npy (a new
    user passed a snapshot as --inputs)."""
    hlo = tmp_path / "m.hlo"
    hlo.write_text("HloModule m\n\nENTRY main {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] negate(p)\n}\n")
    snap = tmp_path / "m.snapshot.0.pb"
    snap.write_bytes(b"\n\x05hello" + bytes(range(40)))
    code, out, err = cli("run", str(hlo), "--inputs", str(snap))
    assert (code, out) == (2, ""), (code, out, err)
    assert_one_line_error(err, f"--inputs: {snap}: not a readable .npz file", "not a zip archive",
                          "an HloSnapshot holds its own arguments: give it as FILE")
    assert "pickle" not in err
    np.savez(tmp_path / "ok.npz", p=np.array([1.5, -2.0], np.float32))
    code, out, err = cli("run", str(hlo), "--inputs", str(tmp_path / "ok.npz"))
    assert code == 0 and "-1.5" in out, (out, err)


def test_expected_outputs_are_read_as_np_savez_names_them(tmp_path: Path) -> None:
    """``--expect`` / ``--against OUT.npz`` take ``output_N`` (what ``run --output`` writes) and, in
    a file without them, the positional names ``np.savez(path, *outputs)`` gives (``arr_N``), as
    ``--inputs`` does; a file with neither names both spellings (a new user's finding)."""
    b = xs.XlaBuilder("twice")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (3,)), "x")
    comp = b.build(ops.Add(x, x))
    path = tmp_path / "twice.hlo"
    path.write_text(comp.as_hlo_text())
    a = np.array([1.0, 2.0, 3.5], np.float32)
    np.savez(tmp_path / "in.npz", a)
    np.savez(tmp_path / "want.npz", a + a)
    ins = str(tmp_path / "in.npz")
    code, text, err = cli("run", str(path), "--inputs", ins, "--expect", str(tmp_path / "want.npz"))
    assert code == 0 and "MATCH" in text, (text, err)
    np.savez(tmp_path / "wrong.npz", a)
    code, text, err = cli("compare", str(path), "--inputs", str(tmp_path / "in.npz"), "--against",
                          str(tmp_path / "wrong.npz"))
    assert code == 1 and "DIVERGENCE" in text, (text, err)
    np.savez(tmp_path / "other.npz", y=a)
    code, text, err = cli("run", str(path), "--inputs", ins, "--expect", str(tmp_path / "other.npz"))
    assert code == 2 and "no output_0" in err and "arr_0" in err, (text, err)
