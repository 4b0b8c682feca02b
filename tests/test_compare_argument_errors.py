"""compare's argument errors are typed (``xs.CompareArgumentError``; a bad tolerance is also a
``ShapeError``, as before), and ``xlasdk compare`` turns exactly those into usage errors (exit 2) by
their class, not by reading "compare:" in their message text."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk.cli import main
from xlasdk.reference import compare

_TEXT = ("HloModule {name}\nENTRY e {{\n  a = f32[4] parameter(0)\n  b = f32[4] parameter(1)\n"
         "  ROOT r = f32[4] multiply(a, b)\n}}\n")


def _program(name: str = "good") -> Any:
    return xs.XlaComputation.from_hlo_text(_TEXT.format(name=name))


def _args() -> list[np.ndarray[Any, Any]]:
    return [np.array([1.0, 2.0, -3.0, 0.5], np.float32), np.array([4.0, -1.0, 2.0, 8.0], np.float32)]


def _cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), stdout=out, stderr=err), err.getvalue()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"rtol": -1.0}, "rtol must be a finite number >= 0, got -1.0"),
    ({"ulps": -2}, "ulps must be a finite number >= 0, got -2"),
])
def test_a_bad_tolerance_is_a_tolerance_error_and_still_a_shape_error(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(xs.ToleranceError, match=message) as e:
        compare(_program(), _args(), **kwargs)
    assert isinstance(e.value, xs.ShapeError) and isinstance(e.value, xs.CompareArgumentError)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"against": [np.zeros(4, np.float32), np.zeros(4, np.float32)]}, "the program has 1 outputs"),
    ({"against": [np.zeros(5, np.float32)]}, "given output 0 is float32"),
    ({"bisect": "halves"}, "bisect='halves'"),
    ({"against": "cpu:0", "bisect": "passes"}, "not against 'cpu:0'"),
    ({"device_kind": "tpu-v9"}, "device kind 'tpu-v9' is not known"),
    ({"precision": "medium"}, "precision 'medium'"),
])
def test_what_does_not_fit_the_program_is_a_compare_argument_error(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(xs.CompareArgumentError, match=message) as e:
        compare(_program(), _args(), **kwargs)
    assert str(e.value).startswith("compare: ")
    assert not isinstance(e.value, xs.ShapeError)


def test_the_cli_reports_argument_errors_as_usage_errors(tmp_path: Path) -> None:
    path = tmp_path / "m.hlo"
    path.write_text(_TEXT.format(name="m"))
    np.savez(tmp_path / "in.npz", **{"0": _args()[0], "1": _args()[1]})
    code, err = _cli("compare", str(path), "--inputs", str(tmp_path / "in.npz"), "--rtol", "-1")
    assert code == 2 and "argument --rtol: must be a finite number >= 0, got '-1'" in err, err
    code, err = _cli("compare", str(path), "--inputs", str(tmp_path / "in.npz"), "--device-kind", "tpu-v9")
    assert code == 2 and "device kind 'tpu-v9' is not known" in err, err

