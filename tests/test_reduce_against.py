"""``reduce(BAD, against=GOOD)`` / ``xlasdk reduce BAD --against GOOD`` (issue 42): a program bug
planted in a real JAX program (one instruction of the module text edited) shrinks to a small cut
of BAD, the planted instruction with its operands as parameters, that still differs from GOOD's
matching cut on the good run's values of those operands; a correct BAD is "nothing to reduce".

Oracles: the two written repro files are loaded again and run (XLA:CPU) on the written inputs,
and their outputs differ by numpy's measure; where the cut is one elementwise op, numpy computes
what each cut must give from the inputs (``a + b`` for the bad cut, ``a - b`` for the good one);
the planted opcode, compare direction or constant is in the bad cut's text and not in the good
one's. A correct program against its twin must never be reduced.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk._reduce_text import count_instructions

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from tests.test_bisect_regions_against import (  # noqa: E402 - after the skip: those tests import jax too
    A4,
    B4,
    DATA,
    W,
    X,
    _loop,
    _loss,
    _plant,
    _reachable,
    _scan,
    _strip,
    _text,
    _tril,
    root_fused_planted,
    root_loop_planted,
)

#: the issue's bound on a repro, every computation's instructions counted (parameters too)
MAX_INSTRUCTIONS = 12


def _outputs(text: str, args: list[Any]) -> list[np.ndarray[Any, Any]]:
    """The outputs of the module ``text`` (loaded afresh) on ``args``, compiled for the CPU."""
    out = xs.compile(xs.XlaComputation.from_hlo_text(text), "cpu:0")(*args)
    return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]


def _differ(a: list[np.ndarray[Any, Any]], b: list[np.ndarray[Any, Any]]) -> bool:
    """numpy's word: another shape or type, or an element farther apart than 1e-3 of the larger magnitude."""
    for x, y in zip(a, b, strict=True):
        x64, y64 = np.asarray(x, np.float64), np.asarray(y, np.float64)
        if x.shape != y.shape or x.dtype != y.dtype:
            return True
        scale = max(float(np.max(np.abs(y64), initial=0.0)), 1e-30)
        if not np.allclose(x64, y64, rtol=0.0, atol=1e-3 * scale, equal_nan=True):
            return True
    return False


def _reduced(bad_text: str, good_text: str, args: list[Any], planted: str, fixed: str) -> xs.ReduceResult:
    """``reduce(BAD, against=GOOD)`` checked as the module's docstring says; the result."""
    bad, good = xs.XlaComputation.from_hlo_text(bad_text), xs.XlaComputation.from_hlo_text(good_text)
    res = xs.reduce(bad, against=good, arguments=args)
    assert res.good_hlo_text is not None and res.arguments is not None, str(res)
    n = count_instructions(res.hlo_text)
    assert n <= MAX_INSTRUCTIONS and res.instructions_after == n < res.instructions_before, (str(res), res.hlo_text)
    assert count_instructions(res.good_hlo_text) == n, res.good_hlo_text
    body_b = res.hlo_text[res.hlo_text.find("ENTRY"):]
    body_g = res.good_hlo_text[res.good_hlo_text.find("ENTRY"):]
    assert planted in body_b and planted not in body_g and fixed in body_g, (body_b, body_g)
    assert _differ(_outputs(res.hlo_text, res.arguments), _outputs(res.good_hlo_text, res.arguments)), str(res)
    assert res.located and res.condition == f"differs from {good.name!r}", str(res)
    return res


def _nothing_to_reduce(text: str, args: list[Any]) -> None:
    a, b = xs.XlaComputation.from_hlo_text(text), xs.XlaComputation.from_hlo_text(text)
    with pytest.raises(xs.NotReproducedError, match="nothing to reduce: .* agree"):
        xs.reduce(a, against=b, arguments=args)


# -- the planted bugs ----------------------------------------------------------------------------------------------
def test_a_mask_compare_inside_a_called_function() -> None:
    m = np.arange(1, 26, dtype=np.float32).reshape(5, 5)
    text = _text(_tril, m)
    bad_text, _ = _plant(text, r"direction=GE", "direction=GT")
    res = _reduced(bad_text, text, [m], "direction=GT", "direction=GE")
    assert "called function" in res.located, res.located
    a, b = res.arguments or []
    assert np.array_equal(_outputs(res.hlo_text, [a, b])[0], a > b)  # numpy: the cut compares its operands
    assert np.array_equal(_outputs(res.good_hlo_text or "", [a, b])[0], a >= b)
    _nothing_to_reduce(text, [m])


def test_an_op_inside_a_while_body() -> None:
    text = _text(_loop, X, W)
    bad_text, _ = _plant(text, r" subtract\(", " add(")
    res = _reduced(bad_text, text, [X, W], " add(", " subtract(")
    assert "body (iteration 3)" in res.located, res.located  # the body differs only where i == 3
    a, b = res.arguments or []
    np.testing.assert_array_equal(_outputs(res.hlo_text, [a, b])[0], a + b)
    np.testing.assert_array_equal(_outputs(res.good_hlo_text or "", [a, b])[0], a - b)
    _nothing_to_reduce(text, [X, W])


def test_a_constant_in_a_scan_body() -> None:
    seq = np.linspace(-1, 1, 24).astype(np.float32).reshape(3, 8)
    text = _text(_scan, X, seq)
    bad_text, _ = _plant(text, r"constant\(0\.75\)", "constant(0.7)")
    res = _reduced(bad_text, text, [X, seq], "constant(0.7)", "constant(0.75)")
    (c,) = res.arguments or []  # the constant, what it is broadcast to, and the multiply that reads it
    np.testing.assert_allclose(_outputs(res.hlo_text, [c])[0], c * np.float32(0.7), rtol=1e-6)
    np.testing.assert_allclose(_outputs(res.good_hlo_text or "", [c])[0], c * np.float32(0.75), rtol=1e-6)
    _nothing_to_reduce(text, [X, seq])


def test_a_multiply_in_the_backward_pass_of_a_gradient() -> None:
    text = _text(jax.grad(_loss), W, X)
    bodies = re.findall(r"while\([^)]*\), condition=%?([\w.]+), body=%?([\w.]+)", text)
    first_mul = next(ln for ln in _reachable(text, bodies[-1][1]) if re.search(r" multiply\(", ln))
    bad_text, _ = _plant(text, re.escape(first_mul), first_mul.replace(" multiply(", " add("))
    res = _reduced(bad_text, text, [W, X], " add(", " multiply(")
    assert " > body (iteration " in res.located, res.located
    a, b = res.arguments or []
    np.testing.assert_array_equal(_outputs(res.hlo_text, [a, b])[0], a + b)
    np.testing.assert_array_equal(_outputs(res.good_hlo_text or "", [a, b])[0], a * b)
    _nothing_to_reduce(text, [W, X])


def test_an_op_read_only_by_the_root_of_a_loop_body() -> None:
    text, bad_text, _ = root_loop_planted()
    res = _reduced(bad_text, text, [A4, B4], " subtract(", " add(")
    assert "body (iteration 0)" in res.located and count_instructions(res.hlo_text) <= 4, (res.located, res.hlo_text)
    a, b = res.arguments or []
    np.testing.assert_array_equal(_outputs(res.hlo_text, [a, b])[0], a - b)
    np.testing.assert_array_equal(_outputs(res.good_hlo_text or "", [a, b])[0], a + b)
    _nothing_to_reduce(text, [A4, B4])


def test_an_op_at_the_root_of_a_fused_computation_of_an_optimized_module() -> None:
    text, bad_text, _ = root_fused_planted()
    res = _reduced(bad_text, text, [A4, B4], " add(", " subtract(")
    assert "called function" in res.located and count_instructions(res.hlo_text) <= 4, (res.located, res.hlo_text)
    a, b = res.arguments or []
    np.testing.assert_array_equal(_outputs(res.hlo_text, [a, b])[0], a + b)
    np.testing.assert_array_equal(_outputs(res.good_hlo_text or "", [a, b])[0], a - b)
    _nothing_to_reduce(text, [A4, B4])


def test_a_scale_in_a_tpu_compiled_module_run_on_the_cpu() -> None:
    """The attention scale of a TPU-optimized bf16 transformer (tiled layouts, TPU fusions), made
    0.5: compare's tolerances alone stop at the softmax (the masked scores' -1e9 hide the scale
    under their magnitude); followed difference by difference, the planted constant, its broadcast
    and the multiply are cut out of the fusion, and that cut differs at compare's tolerances."""
    from tests.test_real_dumps import recorded

    text = _strip((DATA / "dumps_tpu/transformer_bf16/module.after_optimizations.txt").read_text())
    bad_text, _ = _plant(text, r"constant\(0\.353553385\)", "constant(0.5)")
    res = _reduced(bad_text, text, recorded("dumps/transformer_bf16")[0], "constant(0.5)", "constant(0.353553385)")
    (s,) = res.arguments or []  # the attention scores before scaling
    np.testing.assert_allclose(_outputs(res.hlo_text, [s])[0], s * np.float32(0.5), rtol=1e-6)
    np.testing.assert_allclose(_outputs(res.good_hlo_text or "", [s])[0], s * np.float32(0.353553385), rtol=1e-6)
    assert "called function" in res.located and res.located.startswith("fusion."), res.located


def test_a_scale_in_a_tpu_dump_before_optimizations() -> None:
    """The attention scale's divisor sqrt(8) of the module XLA's TPU compiler received, made 2: the
    broadcast constant (a constant of the repro, not an input) and the divide that reads it."""
    from tests.test_real_dumps import recorded

    text = _strip((DATA / "dumps_tpu/transformer_bf16/module.before_optimizations.txt").read_text())
    bad_text, _ = _plant(text, r"constant\(2\.82842708\)", "constant(2)")
    res = _reduced(bad_text, text, recorded("dumps/transformer_bf16")[0], "constant(2)", "constant(2.82842708)")
    (s,) = res.arguments or []
    np.testing.assert_allclose(_outputs(res.hlo_text, [s])[0], s / np.float32(2), rtol=1e-6)
    np.testing.assert_allclose(_outputs(res.good_hlo_text or "", [s])[0], s / np.float32(2.82842708), rtol=1e-6)


# -- the command ---------------------------------------------------------------------------------------------------
def _main(*argv: str) -> tuple[int, str, str]:
    from xlasdk.cli import main

    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), stdout=out, stderr=err), out.getvalue(), err.getvalue()


def test_the_command_writes_both_cuts_and_their_inputs(tmp_path: Path) -> None:
    text = _text(_loop, X, W)
    bad_text, _ = _plant(text, r" subtract\(", " add(")
    (tmp_path / "good.hlo").write_text(text)
    (tmp_path / "bad.hlo").write_text(bad_text)
    np.savez(tmp_path / "in.npz", X, W)
    out = tmp_path / "min.hlo"
    code, said, err = _main("reduce", str(tmp_path / "bad.hlo"), "--against", str(tmp_path / "good.hlo"),
                            "--inputs", str(tmp_path / "in.npz"), "-o", str(out))
    assert code == 0, err
    assert "body (iteration 3)" in said and "min.good.hlo" in said and "min.npz" in said, said
    with np.load(tmp_path / "min.npz") as z:
        args = [z[f"arg{i}"] for i in range(len(z.files))]
    bad_out = _outputs(out.read_text(), args)
    good_out = _outputs((tmp_path / "min.good.hlo").read_text(), args)
    assert _differ(bad_out, good_out) and count_instructions(out.read_text()) <= MAX_INSTRUCTIONS
    np.testing.assert_array_equal(good_out[0], args[0] - args[1])
    assert (tmp_path / "min.snapshot.pb").exists()
    # the command the report suggests shows the difference (exit 1: a divergence)
    code, said, err = _main("compare", str(out), "--inputs", str(tmp_path / "min.npz"), "--against",
                            str(tmp_path / "min.good.hlo"))
    assert code == 1 and "DIVERGENCE" in said, (said, err)
    # a correct module against its twin: nothing to reduce, exit 2 (the reducer's "does not show the problem")
    code, said, err = _main("reduce", str(tmp_path / "good.hlo"), "--against", str(tmp_path / "good.hlo"),
                            "--inputs", str(tmp_path / "in.npz"), "-o", str(tmp_path / "none.hlo"))
    assert code == 2 and "nothing to reduce" in err and "agree" in err, err
    assert not (tmp_path / "none.hlo").exists()


@pytest.mark.parametrize("flags, message", [
    (["--until", "crash"], "give exactly one of"),
    (["--script", "true"], "give exactly one of"),
])
def test_against_is_a_problem_of_its_own(tmp_path: Path, flags: list[str], message: str) -> None:
    f = tmp_path / "m.hlo"
    f.write_text(_text(_loop, X, W))
    code, _, err = _main("reduce", str(f), "--against", str(f), *flags, "-o", str(tmp_path / "o.hlo"))
    assert code == 2 and message in err and "--against" in err, err


def test_command_flag_errors(tmp_path: Path) -> None:
    f = tmp_path / "m.hlo"
    f.write_text(_text(_loop, X, W))
    code, _, err = _main("reduce", str(f), "--against", str(tmp_path / "missing.hlo"), "-o", str(tmp_path / "o.hlo"))
    assert code == 2 and "--against" in err and "no such file" in err, err
    code, _, err = _main("reduce", str(f), "--until", "crash", "--device", "cpu:0", "-o", str(tmp_path / "o.hlo"))
    assert code == 2 and "--device" in err, err


def test_the_api_refuses_against_beside_until() -> None:
    comp = xs.XlaComputation.from_hlo_text(_text(_loop, X, W))
    with pytest.raises(xs.XlaSdkError, match="against= is a problem of its own"):
        xs.reduce(comp, "diverge", against=comp)


# -- a difference no single op makes beyond tolerance; the budget; bad calls ---------------------------------------
def _logistic(x: Any) -> Any:
    return jax.lax.fori_loop(0, 40, lambda i, c: 3.9 * c * (1.0 - c), x)


def test_a_difference_each_iteration_keeps_within_tolerance_is_cut_as_the_loop() -> None:
    """The logistic map's rate one float off (3.9 -> 3.9000003): each iteration, on the same state,
    gives values within compare's tolerance of the good one's, and the 40 iterations make them
    differ by O(1). No cut inside the loop differs at compare's tolerances (the constant's cut, one
    float apart, is no repro: never cry wolf), nor does the body's program; the loop cut out of
    the module counts more than the module: the repro is the modules themselves."""
    x = np.linspace(0.1, 0.9, 8).astype(np.float32)
    text = _text(_logistic, x)
    bad_text, _ = _plant(text, r"constant\(3\.9\)", "constant(3.9000003)")
    bad, good = xs.XlaComputation.from_hlo_text(bad_text), xs.XlaComputation.from_hlo_text(text)
    res = xs.reduce(bad, against=good, arguments=[x])
    assert res.good_hlo_text is not None and res.arguments is not None
    assert _differ(_outputs(res.hlo_text, res.arguments), _outputs(res.good_hlo_text, res.arguments)), str(res)
    assert "constant(3.9000003" in res.hlo_text and " while(" in res.hlo_text, res.hlo_text  # printed 3.90000033
    assert res.instructions_after == res.instructions_before and res.located == "", str(res)


def test_a_spent_budget_gives_the_modules_themselves() -> None:
    text = _text(_loop, X, W)
    bad_text, _ = _plant(text, r" subtract\(", " add(")
    bad, good = xs.XlaComputation.from_hlo_text(bad_text), xs.XlaComputation.from_hlo_text(text)
    res = xs.reduce(bad, against=good, arguments=[X, W], max_time=1e-3)
    assert res.timed_out and res.located == "" and res.instructions_after == res.instructions_before, str(res)
    assert _differ(_outputs(res.hlo_text, [X, W]), _outputs(res.good_hlo_text or "", [X, W]))


def test_bad_calls() -> None:
    loop = xs.XlaComputation.from_hlo_text(_text(_loop, X, W))
    tril = xs.XlaComputation.from_hlo_text(_text(_tril, np.eye(5, dtype=np.float32)))
    with pytest.raises(xs.XlaSdkError, match="takes 1 arguments, 'jit__loop' takes 2"):
        xs.reduce(loop, against=tril, arguments=[X, W])
    with pytest.raises(xs.XlaSdkError, match="device= is where against= runs"):
        xs.reduce(loop, "diverge", device="cpu:0")
    with pytest.raises(xs.XlaSdkError, match="argument 0 is"):
        xs.reduce(loop, against=loop, arguments=[W, X])
