"""Numeric arguments and options are checked in one place (``xlasdk._numbers``), the same for the
API and the ``xlasdk`` command (a reliability campaign's findings).

Reproduced before the fix: ``--rtol nan`` / ``--atol nan`` (and ``xs.compare(..., rtol=nan)``) gave
DIVERGENCE on a bit-exact program; ``--timeout inf`` was ``internal error (OverflowError)`` and
``xs.compile(..., timeout=inf)`` printed a background thread's traceback, then compiled with no
limit; ``--random-inputs --seed -1`` was ``internal error (ValueError)``; ``--html ''`` and
``--json ''`` were silently ignored; ``--against`` with a missing file, a FIFO or a directory said
"expected 'reference', a device ..." and ``--against modules`` (a directory) "no PJRT client for
platform 'modules'"; a lazy ``range(2**40)`` given as a dimension list was read to a MemoryError.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import raises
from xlasdk import _numbers, ops
from xlasdk.cli import main
from xlasdk.cli._verbs import build_parser
from xlasdk.ops._core import MAX_INT_LIST
from xlasdk.reference._outputs import compare_outputs

_TEXT = ("HloModule exact\nENTRY e {\n  a = f32[4] parameter(0)\n  b = f32[4] parameter(1)\n"
         "  ROOT r = f32[4] multiply(a, b)\n}\n")


def _program() -> xs.XlaComputation:
    return xs.XlaComputation.from_hlo_text(_TEXT)


def _args() -> list[np.ndarray[Any, Any]]:
    return [np.array([1.0, 2.0, -3.0, 0.5], np.float32), np.array([4.0, -1.0, 2.0, 8.0], np.float32)]


@pytest.fixture
def module(tmp_path: Path) -> str:
    path = tmp_path / "exact.hlo"
    path.write_text(_TEXT)
    return str(path)


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()  # argparse's errors come to ``err`` too
    return main(list(argv), stdout=out, stderr=err), out.getvalue(), err.getvalue()


def _usage_error(argv: Sequence[str], *words: str) -> str:
    """``xlasdk ARGV`` is a one-line usage error (exit 2) with every word; returns the line."""
    code, out, err = _cli(*argv)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and "Traceback" not in err, (argv, code, out, err)
    assert lines[0].startswith(f"xlasdk {argv[0]}: error: "), lines[0]
    assert "internal error" not in lines[0], lines[0]
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


# -- tolerances -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--rtol", "--atol", "--ulps"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "1e400", "x"])
def test_cli_refuses_tolerances_that_are_not_finite_numbers_ge_0(module: str, flag: str, value: str) -> None:
    option = f"{flag}={value}"  # argparse reads "--rtol -inf" as two options
    _usage_error(["compare", module, "--random-inputs", option],
                 f"argument {flag}: must be a finite number >= 0, got {value!r}")
    if flag != "--ulps":
        _usage_error(["run", module, "--random-inputs", option], f"argument {flag}: must be a finite number")
        _usage_error(["reduce", module, "-o", module + ".min", "--until", "diverge", option],
                     f"argument {flag}: must be a finite number")


def test_a_bit_exact_program_matches_with_finite_tolerances(module: str) -> None:
    code, out, err = _cli("compare", module, "--random-inputs", "--rtol", "0", "--atol", "0", "--ulps", "0")
    assert code == 0 and "MATCH" in out, (out, err)


@pytest.mark.parametrize("name", ["rtol", "atol", "ulps"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -1.0, np.float32("nan"), True, "0.1", None])
def test_compare_refuses_tolerances_naming_the_argument(name: str, value: Any) -> None:
    if value is None:  # the default, for the record
        assert xs.compare(_program(), _args(), **{name: value}).ok
        return
    with pytest.raises(xs.ToleranceError, match=rf"^compare: {name} must be a finite number >= 0, got ") as e:
        xs.compare(_program(), _args(), **{name: value})
    assert isinstance(e.value, xs.ShapeError) and "— at test_numeric_arguments.py:" in str(e.value)


def test_other_tolerance_takers_refuse_nan_too() -> None:
    got = [np.ones(3, np.float32)]
    with pytest.raises(xs.ToleranceError, match="compare: atol must be a finite number >= 0, got nan"):
        compare_outputs(got, got, atol=math.nan)
    with pytest.raises(xs.ToleranceError, match="compare: rtol must be a finite number >= 0, got inf"):
        xs.compare(_program(), _args(), rtol=math.inf, outputs=[np.zeros(4, np.float32)], device_kind="cpu")
    from xlasdk.reference.bisect import bisect_ops

    with pytest.raises(xs.ToleranceError, match="compare: ulps must be a finite number >= 0, got nan"):
        bisect_ops(_program(), _args(), ulps=math.nan)
    with raises(xs.ToleranceError, "reduce: rtol must be a finite number >= 0, got nan"):
        xs.reduce(_program(), "diverge", rtol=math.nan)


# -- timeouts ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["inf", "nan", "1e10", "0", "-5"])
@pytest.mark.parametrize("verb", ["run", "compare", "inspect", "convert"])
def test_cli_refuses_timeouts_that_are_not_seconds(module: str, verb: str, value: str) -> None:
    argv = [verb, module] + ([module + ".mlir"] if verb == "convert" else []) + ["--timeout", value]
    _usage_error(argv, f"argument --timeout: must be a number of seconds > 0 and <= 1000000, got {value!r}")


def test_cli_time_budgets_of_reduce_and_launch(module: str) -> None:
    for flag in ("--max-time", "--check-timeout"):
        _usage_error(["reduce", module, "-o", module + ".min", "--until", "crash", flag, "inf"],
                     f"argument {flag}: must be a number of seconds > 0")
    _usage_error(["launch", "-n", "2", "--timeout", "nan", "x.py"], "argument --timeout: must be a number of seconds")
    _usage_error(["launch", "-n", "2", "--grace", "-1", "x.py"], "argument --grace: must be a number of seconds >= 0")
    _usage_error(["launch", "-n", "2", "--join-timeout", "inf", "x.py"], "argument --join-timeout:")


@pytest.mark.parametrize("value", [math.inf, math.nan, -1.0, 1e10, "60", True])
def test_compile_refuses_a_timeout_that_is_not_seconds_without_a_thread_traceback(
        tmp_path: Path, capfd: pytest.CaptureFixture[str], value: Any) -> None:
    path = tmp_path / "m.hlo"
    path.write_text(_TEXT)
    comp = xs.load_computation(path)  # loaded: compiled in the worker, where the limit applies
    with raises(xs.XlaSdkError, "compile: timeout must be a number of seconds >= 0 and <= 1000000 (0: no limit), "
                                "got "):
        xs.compile(comp, timeout=value, cache=False)
    with raises(xs.XlaSdkError, "compile: timeout must be"):  # a built one too, though it takes no limit
        xs.compile(_built(), timeout=value, cache=False)
    assert "Traceback" not in capfd.readouterr().err
    exe = xs.compile(comp, timeout=0, cache=False)  # 0: no limit, as documented
    np.testing.assert_array_equal(exe(*_args()).to_numpy(), _args()[0] * _args()[1])


def test_compile_timeout_from_the_environment_is_checked_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.hlo"
    path.write_text(_TEXT)
    comp = xs.load_computation(path)
    for text in ("inf", "nan", "-1"):
        monkeypatch.setenv("XLASDK_COMPILE_TIMEOUT", text)
        with pytest.raises(xs.CompileError, match=rf"XLASDK_COMPILE_TIMEOUT must be a number of seconds >= 0 .*"
                                                  rf"got '{text}'"):
            xs.compile(comp, cache=False)


def _built() -> xs.XlaComputation:
    b = xs.XlaBuilder("neg")
    return b.build(ops.Neg(ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2,)), "x")))


@pytest.mark.parametrize("value", [math.inf, math.nan, 0, -1, 2e6])
def test_execute_refuses_a_timeout_that_is_not_seconds(value: float) -> None:
    exe = xs.compile(_built())
    with raises(xs.XlaSdkError, "neg: execute: timeout must be a number of seconds > 0 and <= 1000000, got",
                "None for no limit"):
        exe.execute(np.ones(2, np.float32), timeout=value)


@pytest.mark.parametrize("value", [math.inf, math.nan, 0.0, 1e7])
def test_evaluate_spmd_refuses_a_timeout_that_is_not_seconds(value: float) -> None:
    """An infinite wait at a collective overflowed a device thread's clock."""
    b = xs.XlaBuilder("sum")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2,)), "x")
    comp = b.build(ops.CrossReplicaSum(x))
    args = [[np.ones(2, np.float32)], [np.full(2, 2.0, np.float32)]]
    with raises(xs.ShapeError, "evaluate_spmd: timeout must be a number of seconds > 0 and <= 1000000, got"):
        xs.evaluate_spmd(comp, args, timeout=value)
    for out in xs.evaluate_spmd(comp, args, timeout=30):
        np.testing.assert_array_equal(out[0], np.full(2, 3.0, np.float32))


# -- seeds ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("verb", ["run", "compare"])
@pytest.mark.parametrize("seed", ["-1", str(2**64), "1.5", "1e3"])
def test_cli_refuses_seeds_out_of_range(module: str, verb: str, seed: str) -> None:
    _usage_error([verb, module, "--random-inputs", "--seed", seed],
                 f"argument --seed: must be an integer >= 0 and <= 2**64 - 1, got {seed!r}")


def test_cli_seed_range_holds_for_every_iteration(module: str) -> None:
    _usage_error(["run", module, "--random-inputs", "--seed", str(2**64 - 1), "--iterations", "2"],
                 f"the last run's seed would be {2**64}")
    code, out, err = _cli("run", module, "--random-inputs", "--seed", str(2**64 - 1))
    assert code == 0 and "output 0" in out, (out, err)


@pytest.mark.parametrize("seed", [-1, 2**64, 1.5, True, "3", None])
def test_random_inputs_and_reduce_refuse_seeds_out_of_range(seed: Any) -> None:
    with raises(xs.XlaSdkError, "random_inputs: seed must be an integer >= 0 and <= 2**64 - 1, got"):
        xs.random_inputs(_program(), seed)
    with raises(xs.XlaSdkError, "reduce: seed must be an integer >= 0 and <= 2**64 - 1, got"):
        xs.reduce(_program(), "diverge", seed=seed)
    a = xs.random_inputs(_program(), np.uint64(2**64 - 1))
    b = xs.random_inputs(_program(), 2**64 - 1)
    np.testing.assert_array_equal(a[0], b[0])


# -- counts -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--repeat", "--iterations", "--devices", "--replicas", "--partitions"])
@pytest.mark.parametrize("value", ["0", "-2", "1.0", "many"])
def test_cli_refuses_counts_below_one(module: str, flag: str, value: str) -> None:
    _usage_error(["run", module, "--random-inputs", flag, value],
                 f"argument {flag}: must be an integer >= 1, got {value!r}")


def test_every_numeric_option_is_read_by_one_of_the_kinds() -> None:
    """No option of the ``xlasdk`` parser (nor ``python -m xlasdk.launch``'s) reads a number with a
    bare ``int`` or ``float``, which take NaN, infinities and negative counts."""
    from xlasdk.launch import build_parser as launch_parser

    def actions(p: argparse.ArgumentParser, where: str) -> Iterator[tuple[str, argparse.Action]]:
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    yield from actions(sub, f"{where} {name}")
            else:
                yield where, a

    kinds = {k.parse for k in vars(_numbers).values() if isinstance(k, (_numbers.Real, _numbers.Integer))}
    seen = 0
    for where, a in [*actions(build_parser(), "xlasdk"), *actions(launch_parser(), "launch")]:
        assert a.type not in (int, float), (where, a.option_strings)
        if a.type is not None and getattr(a.type, "__self__", None) is not None:
            assert a.type in kinds, (where, a.option_strings)
            seen += 1
    assert seen >= 30


# -- paths ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("argv", "flag"), [
    (["compare", "{m}", "--random-inputs", "--html", ""], "--html"),
    (["compare", "{m}", "--random-inputs", "--json", ""], "--json"),
    (["compare", "{m}", "--outputs", "", "--device-kind", "cpu", "--random-inputs"], "--outputs"),
    (["run", "{m}", "--random-inputs", "--record", ""], "--record"),
    (["run", "{m}", "--random-inputs", "--output", ""], "--output"),
])
def test_empty_file_names_are_refused_alike(module: str, argv: list[str], flag: str) -> None:
    _usage_error([a.format(m=module) for a in argv], f"{flag} '': an empty file name ({flag} ")


def test_report_files_are_checked_before_the_comparison(module: str, tmp_path: Path) -> None:
    _usage_error(["compare", module, "--random-inputs", "--json", str(tmp_path / "no" / "r.json")],
                 "--json", "cannot write: directory", "does not exist")
    _usage_error(["compare", module, "--random-inputs", "--html", str(tmp_path)], "--html", "it is a directory")


def test_against_says_what_is_wrong_with_the_path(module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                  ) -> None:
    monkeypatch.chdir(tmp_path)
    os.mkfifo("fifo.npz")
    os.mkdir("modules")
    os.mkdir("good.hlo")
    os.symlink("gone.hlo", "link.hlo")
    run = ["compare", module, "--random-inputs", "--against"]
    _usage_error(run + ["missing.hlo"], "--against missing.hlo: no such file; expected 'reference'")
    _usage_error(run + [str(tmp_path / "missing.npz")], "missing.npz: no such file")
    _usage_error(run + ["fifo.npz"], "--against fifo.npz: it is a FIFO, not a regular file")
    _usage_error(run + ["good.hlo"], "--against good.hlo: it is a directory, not a module file")
    _usage_error(run + [str(tmp_path)], "it is a directory, not a module file")
    _usage_error(run + ["link.hlo"], "--against link.hlo: it is a broken symbolic link")
    line = _usage_error(run + ["modules"], "--against modules: no platform 'modules'",
                        "as a file: it is a directory, not a module file")
    assert "PJRT" not in line
    _usage_error(run + ["nosuchthing"], "--against nosuchthing: no platform 'nosuchthing'", "as a file: no such file")
    line = _usage_error(run + ["cpu:99"], "--against cpu:99: no such device")
    assert "as a file" not in line
    code, out, err = _cli(*run, "cpu:0")
    assert code == 0 and "MATCH" in out, (out, err)


# -- integer lists ----------------------------------------------------------------------------------------
class _LongSequence(Sequence[int]):
    """A sequence of 2**40 entries that fails the test if an entry is read."""

    def __len__(self) -> int:
        return 2**40

    def __getitem__(self, i: Any) -> Any:
        raise AssertionError("an entry was read before the length was checked")


def test_a_long_dimension_list_fails_at_once_naming_the_op_and_argument() -> None:
    b = xs.XlaBuilder("long")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2, 3)))
    t0 = time.monotonic()
    with raises(xs.ShapeError, "Reduce: dimensions_to_reduce has 1099511627776 entries"):
        ops.Reduce(b, [x], [ops.Constant(b, np.float32(0))], lambda u, v: u + v, _LongSequence())
    with raises(xs.ShapeError, "Transpose: permutation has 1099511627776 entries, expected at most 4096"):
        ops.Transpose(x, range(2**40))  # was read for a minute, to a MemoryError
    with raises(xs.ShapeError, "Transpose: permutation has more than 2**63 entries"):
        ops.Transpose(x, range(2**70))
    with raises(xs.ShapeError, f"Reshape: new_sizes has {MAX_INT_LIST + 1} entries"):
        ops.Reshape(x, [6] + [1] * MAX_INT_LIST)
    assert time.monotonic() - t0 < 5
    assert ops.Reshape(x, [6] + [1] * 63).shape.rank() == 64  # numpy's largest rank still builds


# -- the kinds themselves ---------------------------------------------------------------------------------
def test_kinds_take_numpy_numbers_and_refuse_bools() -> None:
    assert _numbers.TOLERANCE.check(np.float16(0.5), "x") == 0.5
    assert _numbers.TOLERANCE.check(3, "x") == 3.0 and isinstance(_numbers.TOLERANCE.check(3, "x"), float)
    assert _numbers.COUNT.check(np.int8(2), "x") == 2
    with pytest.raises(xs.XlaSdkError, match=r"^n must be an integer >= 1, got bool True"):
        _numbers.COUNT.check(True, "n")
    with pytest.raises(xs.XlaSdkError, match=r"^n must be an integer >= 1, got bool"):
        _numbers.COUNT.check(np.bool_(True), "n")
    with pytest.raises(xs.XlaSdkError, match=r"^t must be a finite number >= 0, got 10{56}\.\.\. — at "):
        _numbers.TOLERANCE.check(10**400, "t")  # too large for a float: neither taken nor an OverflowError
    assert _numbers.SEED.expected == "an integer >= 0 and <= 2**64 - 1"
    assert _numbers.SECONDS.parse("2.5") == 2.5 and _numbers.SEED.parse(" 7 ") == 7
    with pytest.raises(argparse.ArgumentTypeError, match=r"got '1111111111111111111111111111111111111\.\.\.'"):
        _numbers.SEED.parse("1" * 5000)  # more digits than int() reads
