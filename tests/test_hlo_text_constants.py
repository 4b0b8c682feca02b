"""An executable's optimized HLO loads back (issue 43): ``hlo_text()`` of a CPU executable and of a
program compiled for a TPU v5e without a chip, and ``xlasdk inspect --optimized``, printed constants of
more than 10 elements as ``{...}``, which the loader refuses ("a constant's value is elided").
``hlo_text(print_large_constants=...)``: True by default (the text loads back and computes the same),
False for XLA's short form.

Oracle: numpy's float32 product of the argument and the constant (one rounding, as XLA's multiply).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.test_cli import cli

_LIBTPU = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason="libtpu is not installed")
N = 1024
CONST = np.random.default_rng(7).standard_normal(N).astype(np.float32)  # no iota, nothing XLA can fold away
TEXT = ("HloModule big\n\nENTRY e {\n  p = f32[1024] parameter(0)\n"
        f"  c = f32[1024] constant({{{', '.join(repr(float(v)) for v in CONST)}}})\n"
        "  ROOT r = f32[1024] multiply(p, c)\n}\n")


def _devices() -> list[Any]:
    out: list[Any] = ["cpu:0"]
    if importlib.util.find_spec("libtpu") is not None:
        out.append(xs.topology("v5e:1x1").devices[0])
    return out


def _runs_as_the_program(text: str) -> None:
    """``text`` loads, holds the constant's values, and computes p * c on the CPU."""
    back = xs.XlaComputation.from_hlo_text(text)
    x = np.random.default_rng(1).standard_normal(N).astype(np.float32)
    got = np.asarray(xs.compile(back, device="cpu:0")(x).to_numpy())
    assert got.tobytes() == (x * CONST).tobytes()


@pytest.mark.parametrize("where", ["cpu", pytest.param("v5e:1x1", marks=_LIBTPU)])
def test_optimized_hlo_with_a_large_constant_loads_back(where: str) -> None:
    comp = xs.XlaComputation.from_hlo_text(TEXT)
    device = "cpu:0" if where == "cpu" else xs.topology(where).devices[0]
    exe = xs.compile(comp, device=device)
    assert isinstance(exe, xs.CompileOnlyExecutable) == (where != "cpu")
    text = exe.hlo_text()
    assert "{...}" not in text and text == exe.hlo_text(print_large_constants=True)
    _runs_as_the_program(text)
    short = exe.hlo_text(print_large_constants=False)  # XLA's short form: for reading, not loading
    assert "{...}" in short and len(short) < len(text)
    with pytest.raises(xs.FormatError, match=r"elided as \{\.\.\.\}"):
        xs.XlaComputation.from_hlo_text(short)


@pytest.mark.parametrize("where", ["cpu", pytest.param("v5e:1x1", marks=_LIBTPU)])
def test_inspect_optimized_prints_hlo_that_loads_back(where: str, tmp_path: Path) -> None:
    path = tmp_path / "big.hlo"
    path.write_text(TEXT)
    where_args = ["--device", "cpu:0"] if where == "cpu" else ["--topology", where]
    code, out, err = cli("inspect", str(path), *where_args, "--optimized")
    assert code == 0, err
    text = out.split("\noptimized HLO:\n", 1)[1]
    assert "{...}" not in text
    _runs_as_the_program(text)
    code, out, err = cli("inspect", str(path), *where_args, "--optimized", "--json")
    assert code == 0, err
    import json

    _runs_as_the_program(json.loads(out)["optimized_hlo"])
