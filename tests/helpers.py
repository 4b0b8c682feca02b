"""Test helpers shared by the test files.

- :func:`run` compiles a computation for the CPU and returns every output as numpy (including
  ml_dtypes results such as bf16, fp8 and int4). With ``XLASDK_CHECK_DIRECT_HLO=1`` in the
  environment it also checks every computation it runs with :func:`check_direct_hlo` (a deep
  local run of the direct HLO printer against XLA; about twice the compile time).
- :func:`check_direct_hlo` checks xlasdk's directly printed HLO text against XLA.
- :func:`raises` (``with raises(exc, *words):``) asserts that the block raises the expected error
  whose message names the given words and points at the line that raised in the calling test
  file (``" — at test_x.py:LINE"``). The file name is always taken from the test code itself
  (the ``with`` statement's frame), never from this module.
- :func:`shape` and :func:`param` build array shapes and parameters tersely.
- :data:`PARAM_AND_CONST` runs a test with ``const`` False and True; :func:`case_inputs` makes
  its input arrays parameters or constants accordingly and :func:`run_case` runs the outputs (a
  bug case must give the same values both ways: constants take XLA's constant-folding path, the
  HloEvaluator, parameters the compiled code).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops

#: the device the op tests run on: ``XLASDK_TEST_PLATFORM`` (``tpu``...) or the CPU (tests/conftest.py)
TEST_DEVICE = (os.environ.get("XLASDK_TEST_PLATFORM", "cpu").strip().lower() or "cpu") + ":0"


def run(comp: xs.XlaComputation, *args: Any) -> list[np.ndarray[Any, Any]]:
    """Compile ``comp`` for :data:`TEST_DEVICE` (cpu:0 unless ``XLASDK_TEST_PLATFORM`` says
    otherwise), run it on ``args`` and return every output as numpy."""
    out = xs.compile(comp, device=TEST_DEVICE)(*(np.asarray(a) for a in args))
    outs = out if isinstance(out, tuple) else (out,)
    result = [o.to_numpy() for o in outs]
    if os.environ.get("XLASDK_CHECK_DIRECT_HLO"):  # a deep local run: every computation a test runs
        check_direct_hlo(comp, *args, outs=result)
    return result


def assert_same_outputs(
    got: Sequence[np.ndarray[Any, Any]], want: Sequence[np.ndarray[Any, Any]], what: str = ""
) -> None:
    """Equal shapes and dtypes; integers and pred bit for bit, floats to 1e-6 (NaN equal to NaN)."""
    assert len(got) == len(want), (what, len(got), len(want))
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape and g.dtype == w.dtype, (what, i, g.shape, g.dtype, w.shape, w.dtype)
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"{what} output {i}")
        else:
            wide = np.complex128 if g.dtype.kind == "c" else np.float64
            np.testing.assert_allclose(
                g.astype(wide), w.astype(wide), rtol=1e-6, atol=0, equal_nan=True, err_msg=f"{what} output {i}"
            )


def check_direct_hlo(comp: xs.XlaComputation, *args: Any, outs: Sequence[np.ndarray[Any, Any]] | None = None) -> bool:
    """If ``comp``'s HLO text is printed directly from the graph (``xlasdk._hlo_emit``), check it
    against XLA: XLA's HLO parser (through ``XlaComputation.from_hlo_text``) accepts it, its
    program shape is ``comp``'s, and compiled it computes the same values as ``comp`` (``outs``,
    or ``run(comp, *args)``). Returns whether the direct printer handled ``comp``.
    """
    text = comp._direct_hlo_text(True, True) if comp._built() is not None else None
    if text is None:
        return False
    loaded = xs.XlaComputation.from_hlo_text(text)
    ps, lps = comp.program_shape(), loaded.program_shape()
    assert lps.parameter_shapes() == ps.parameter_shapes(), (lps, ps)
    result = ps.result_shape()
    if result.is_tuple() and len(result.tuple_shapes()) == 1:
        result = result.tuple_shapes()[0]  # a one-element tuple root is one HLO result
    assert lps.result_shape() in (result, ps.result_shape()), (lps, ps)
    want = run(comp, *args) if outs is None else outs
    assert_same_outputs(run(loaded, *args), want, "direct HLO text vs StableHLO")
    return True


# -- shapes and parameters -------------------------------------------------------------------------

def shape(dtype: Any, dims: Sequence[int]) -> xs.Shape:
    """The array shape ``dtype[dims]``."""
    return xs.Shape.array_shape(np.dtype(dtype), tuple(dims))


def param(b: xs.XlaBuilder, i: int, dtype: Any, dims: tuple[int, ...]) -> xs.XlaOp:
    """Parameter number ``i`` of ``b`` with the array shape ``dtype[dims]``."""
    return ops.Parameter(b, i, xs.Shape.array_shape(dtype, dims))


# -- bug cases as parameters and as constants -----------------------------------------------------

PARAM_AND_CONST = pytest.mark.parametrize("const", [False, True], ids=["param", "const"])


def case_inputs(b: xs.XlaBuilder, arrays: list[np.ndarray[Any, Any]], const: bool) -> list[xs.XlaOp]:
    """``arrays`` as constants of ``b`` (``const``) or as its parameters 0, 1, ..."""
    if const:
        return [ops.Constant(b, a) for a in arrays]
    return [ops.Parameter(b, i, xs.shape_from_pyval(a)) for i, a in enumerate(arrays)]


def run_case(b: xs.XlaBuilder, outs: list[xs.XlaOp], arrays: list[np.ndarray[Any, Any]],
             const: bool) -> list[np.ndarray[Any, Any]]:
    """Build ``outs`` of ``b`` and run them, passing ``arrays`` unless they went in as constants."""
    return run(b.build(outs), *([] if const else arrays))


# -- error assertions ------------------------------------------------------------------------------

@contextlib.contextmanager
def raises(exc: type[Exception], *words: str) -> Iterator[pytest.ExceptionInfo[Exception]]:
    """``with raises(exc, *words):`` -- the block raises ``exc`` whose message has every word and the
    location ``" — at test_x.py:LINE"`` of the line that raised.

    ``test_x.py`` is the file of the ``with`` statement (the calling test file, wherever this helper
    lives) and ``LINE`` the line of the innermost frame of the traceback in that file: a line of the
    block, or of a function of the test file that the block called. The message must end with the
    location (every xlasdk message does). Yields pytest's ``ExceptionInfo``.
    """
    caller = sys._getframe(2)  # 0: this generator, 1: contextlib's __enter__, 2: the with statement
    test_file = caller.f_code.co_filename
    with pytest.raises(exc) as info:
        yield info
    msg = str(info.value)
    for w in words:
        assert w in msg, (w, msg)
    line = None
    tb = info.tb
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == test_file:
            line = tb.tb_lineno
        tb = tb.tb_next
    assert line is not None, (test_file, msg)
    where = f" — at {os.path.basename(test_file)}:{line}"
    assert msg.endswith(where), (where, msg)



class PerTestRng:
    """numpy random values that depend only on the test that draws them, not on which tests ran
    before (the suite runs in any order: a module-wide generator gave each test other values
    depending on the order, and a tolerance tuned for some values failed for others)."""

    def __init__(self, seed: int = 0) -> None:
        self._seed = seed
        self._by_test: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        import os
        import zlib

        test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
        g = self._by_test.get(test)
        if g is None:
            g = self._by_test[test] = np.random.default_rng([self._seed, zlib.crc32(test.encode())])
        return getattr(g, name)
