"""A TPU v5e's outputs of three correct f32 programs where a transcendental function feeds a dot at
DEFAULT precision (``dot(f(dot(x, w1)), w2)``, f = tanh, logistic, exp), recorded on the chip by
tools/make_tpu_mlp_outputs.py (jaxlib 0.10.2, libtpu 0.0.42.1, 2026-12-06): off the chip,
``compare --outputs --device-kind tpu-v5e`` says MATCH (issue 43: the TPU model cried wolf on 341
elements of such a program), the CPU's model does not take them, and a 1% error in one element is
found."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops

RECORDED = Path(__file__).resolve().parent / "data" / "tpu_mlp" / "recorded.npz"
FUNCTIONS = {"tanh": ops.Tanh, "logistic": ops.Logistic, "exp": ops.Exp}


def _program(fn: str) -> xs.XlaComputation:
    b = xs.XlaBuilder(f"mlp_{fn}")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (64, 128)), "x")
    w1 = ops.Parameter(b, 1, xs.Shape.array_shape(np.float32, (128, 128)), "w1")
    w2 = ops.Parameter(b, 2, xs.Shape.array_shape(np.float32, (128, 32)), "w2")
    return b.build(ops.Dot(FUNCTIONS[fn](ops.Dot(x, w1)), w2))


@pytest.mark.parametrize("fn", sorted(FUNCTIONS))
def test_a_real_tpu_run_with_a_function_feeding_a_default_dot_matches_on_the_tpu_model(fn: str) -> None:
    with np.load(RECORDED) as z:
        assert str(z["device_kind"]) == "TPU v5 lite"
        args = [z["x"], z["w1"], z["w2"]]
        got = z[fn]
    comp = _program(fn)
    report = xs.compare(comp, args, outputs=[got], device_kind="tpu-v5e")
    assert report.ok, str(report)
    # the TPU's DEFAULT precision really shows: the CPU's model does not take these values
    assert not xs.compare(comp, args, outputs=[got], device_kind="cpu").ok
    planted = got.copy()
    planted.flat[int(np.argmax(np.abs(got)))] *= np.float32(1.01)
    bad = xs.compare(comp, args, outputs=[planted], device_kind="tpu-v5e")
    assert not bad.ok and bad.outputs[0].mismatches == 1, str(bad)
