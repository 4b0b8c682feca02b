"""Test helpers shared by the test files.

- :func:`run` compiles a computation for the CPU and returns every output as numpy (including
  ml_dtypes results such as bf16, fp8 and int4). With ``XLASDK_CHECK_DIRECT_HLO=1`` in the
  environment it also checks every computation it runs with :func:`check_direct_hlo` (a deep
  local run of the direct HLO printer against XLA; about twice the compile time).
- :func:`on_test_device` (called by :func:`run`): with ``XLASDK_RECORD_PROGRAMS=DIR`` it records every
  program an op test compiles (tests/test_tpu_compile_only.py compiles them for a TPU v5e); on
  another platform than the CPU it skips a test whose program the device's capability table
  (``xs.capabilities``) refuses, with the table's reason.
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


#: ``XLASDK_RECORD_PROGRAMS=DIR``: every program :func:`run` compiles is written to ``DIR`` as StableHLO
#: text with its locations, one file per distinct text (``<sha256>.mlir``): the programs of the op
#: tests, which tests/test_tpu_compile_only.py compiles for a TPU v5e without a chip.
RECORD_PROGRAMS = os.environ.get("XLASDK_RECORD_PROGRAMS", "").strip()


def record_program(comp: xs.XlaComputation) -> None:
    """Write ``comp`` to :data:`RECORD_PROGRAMS` (when set), named by its text's sha256 (written once)."""
    import hashlib

    text = comp.as_stablehlo_text(debug_info=True)
    path = os.path.join(RECORD_PROGRAMS, hashlib.sha256(text.encode()).hexdigest()[:32] + ".mlir")
    if not os.path.exists(path):
        os.makedirs(RECORD_PROGRAMS, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)


def on_test_device(comp: xs.XlaComputation) -> None:
    """Before a test compiles ``comp`` for :data:`TEST_DEVICE`: record it (``XLASDK_RECORD_PROGRAMS``),
    and on another platform than the CPU skip the test where the device's capability table
    (:mod:`xlasdk.runtime.capabilities`) refuses the program, with the table's reason."""
    if RECORD_PROGRAMS:
        record_program(comp)
    if not str(TEST_DEVICE).startswith("cpu"):
        from xlasdk.runtime._platform_lowering import for_device

        found = xs.capabilities(TEST_DEVICE).refusals(for_device(comp, TEST_DEVICE))  # as xs.compile checks it
        if found:
            pytest.skip(f"capability table: {found[0]}")


#: A run of :func:`run`: the computation, its arguments and (weakly) its outputs, which
#: :func:`assert_device_close` judges by the test device's error model off the CPU.
Program = tuple[xs.XlaComputation, tuple[Any, ...], list[Any]]
#: the program each test ran last (by ``PYTEST_CURRENT_TEST``), and the program of each output array
#: still alive (by ``id``, with a weak reference to tell a reused id)
_LAST_RUN: dict[str, Program] = {}
_PROGRAM_OF: dict[int, tuple[Any, int, Program]] = {}


def _current_test() -> str:
    return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]


def _remember(comp: xs.XlaComputation, args: tuple[Any, ...], result: list[np.ndarray[Any, Any]]) -> None:
    import weakref

    for k in [k for k, (ref, _, _) in _PROGRAM_OF.items() if ref() is None]:
        del _PROGRAM_OF[k]
    program: Program = (comp, args, [weakref.ref(r) for r in result])
    _LAST_RUN[_current_test()] = program
    for i, r in enumerate(result):
        _PROGRAM_OF[id(r)] = (weakref.ref(r), i, program)


def program_of(got: Any) -> tuple[Program, int] | None:
    """The program (and output index) :func:`run` returned ``got`` from, if it is one of its outputs."""
    found = _PROGRAM_OF.get(id(got))
    if found is None or found[0]() is not got:
        return None
    return found[2], found[1]


def _c_order(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``a`` itself when C-contiguous (0-d arrays always are), else a C-ordered copy."""
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def run(comp: xs.XlaComputation, *args: Any) -> list[np.ndarray[Any, Any]]:
    """Compile ``comp`` for :data:`TEST_DEVICE` (cpu:0 unless ``XLASDK_TEST_PLATFORM`` says
    otherwise), run it on ``args`` and return every output as numpy (C-contiguous: a device's
    layout may give other strides, and a test's ``.view(dtype)`` of another width needs them)."""
    on_test_device(comp)
    host = tuple(np.asarray(a) for a in args)
    out = xs.compile(comp, device=TEST_DEVICE)(*host)
    outs = out if isinstance(out, tuple) else (out,)
    result = [_c_order(o.to_numpy()) for o in outs]
    _remember(comp, host, result)
    if os.environ.get("XLASDK_CHECK_DIRECT_HLO"):  # a deep local run: every computation a test runs
        check_direct_hlo(comp, *args, outs=result)
    return result


# -- value checks judged by the test device's error model ------------------------------------------

def test_device_kind() -> str:
    """The error model the op tests' value checks judge by: ``"cpu"`` on the CPU (each test's own
    tolerance), else the test device's kind in :mod:`xlasdk.reference._precision` (``"tpu-v5e"``: the
    model ``xlasdk compare --device-kind tpu-v5e`` uses)."""
    if str(TEST_DEVICE).startswith("cpu"):
        return "cpu"
    from xlasdk.reference._precision import device_kind_of
    from xlasdk.runtime.device import _resolve_device

    return device_kind_of(_resolve_device(TEST_DEVICE)).name


test_device_kind.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


def assert_device_close(got: Any, want: Any, *, rtol: float = 1e-7, atol: float = 0.0, equal_nan: bool = True,
                        err_msg: str = "", kind: str | None = None, of: Any = None) -> None:
    """The value check of an op test, by the error model of the device that computed ``got``.

    ``kind`` (default :func:`test_device_kind`) ``"cpu"``: exactly ``np.testing.assert_allclose(got,
    want, rtol=rtol, atol=atol, equal_nan=equal_nan, err_msg=err_msg)``, the test's check as written for
    XLA:CPU. Any other kind (``"tpu-v5e"``): the tolerance was written for XLA:CPU and says nothing of
    that device, so the program that computed the values is judged as ``xlasdk compare --outputs
    --device-kind KIND`` judges it: against the reference evaluator computing as that device does (a
    TPU's DEFAULT-precision f32 dots on bf16 operands), each op within that device's bound (a TPU's
    tanh within 1365.5 ulps...). The program: that of ``of`` (an output array :func:`run` returned:
    that output alone is judged), else that of ``got`` when it is such an output, else the one this
    test ran last (every output judged: ``got`` is a value derived from them). A program the model
    cannot judge fails the check (it never passes unjudged)."""
    kind = test_device_kind() if kind is None else kind
    if kind == "cpu":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=equal_nan, err_msg=err_msg)
        return
    found = program_of(of if of is not None else got)
    program, index = found if found is not None else (_LAST_RUN.get(_current_test()), None)
    if program is None:
        pytest.fail(f"assert_device_close on {kind}: no program to judge by its error model ({err_msg})")
    judge(program, kind, index, err_msg)


def judge(program: Program, kind: str, index: int | None = None, what: str = "") -> None:
    """Assert that the error model of device ``kind`` takes ``program``'s outputs (output ``index`` only,
    when given): ``xs.compare(comp, args, outputs=..., device_kind=kind)``."""
    comp, args, refs = program
    outs = [r() if callable(r) else r for r in refs]
    if any(o is None for o in outs):  # an output the test let go: the device gives it again
        out = xs.compile(comp, device=TEST_DEVICE)(*args)
        outs = [np.asarray(o.to_numpy()) for o in (out if isinstance(out, tuple) else (out,))]
    report = xs.compare(comp, list(args), outputs=outs, device_kind=kind)
    ok = report.outputs[index].ok if index is not None else report.ok
    assert ok, f"{what}: by the error model of {kind}{f' (output {index})' if index is not None else ''}:\n{report}"


def device_defines_otherwise(name: str) -> bool:
    """Whether the test device's platform defines the behaviour ``name`` (a row of
    :data:`xlasdk.runtime.capabilities.BEHAVIOURS`) otherwise than XLA:CPU (False on the CPU)."""
    from xlasdk.runtime.capabilities import BEHAVIOURS

    row = BEHAVIOURS[name]
    return test_device_kind() != "cpu" and xs.capabilities(TEST_DEVICE).platform is row.platform


def skip_where_device_defines_otherwise(name: str) -> None:
    """Skip the test on a test device whose platform defines the behaviour ``name`` (a row of
    :data:`xlasdk.runtime.capabilities.BEHAVIOURS`) otherwise than the test checks (XLA:CPU's), with the
    row's reason; nothing to do on the CPU or where the row does not hold."""
    from xlasdk.runtime.capabilities import BEHAVIOURS

    row = BEHAVIOURS[name]
    if device_defines_otherwise(name):
        pytest.skip(f"capability table, behaviour {row.name}: {row}")


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


# -- JAX's recorded outputs as an oracle on any host -----------------------------------------------

def _ordered_bits(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Each float's bits as an integer that orders like the floats (-0 and +0 both 0): two floats' ulp
    distance is the difference of these (Python ints for 64-bit floats: no overflow)."""
    bits = np.ascontiguousarray(a).view(np.dtype(f"i{a.dtype.itemsize}")).astype(np.int64)
    magnitude = bits & ((1 << (8 * a.dtype.itemsize - 1)) - 1)
    ordered = np.where(bits < 0, -magnitude, magnitude)
    return np.asarray(ordered.astype(object) if a.dtype.itemsize == 8 else ordered)


def _ulp(x: np.ndarray[Any, Any]) -> float:
    """The spacing of the floats of ``x``'s type at ``x[0]`` (>= 0): the gap to the next float up, or
    down from the largest finite one."""
    ints = np.dtype(f"i{x.dtype.itemsize}")
    up = (x.view(ints) + 1).view(x.dtype)
    if np.isfinite(up.astype(np.float64))[0]:
        return float(up.astype(np.float64)[0] - x.astype(np.float64)[0])
    return float(x.astype(np.float64)[0] - (x.view(ints) - 1).view(x.dtype).astype(np.float64)[0])


def assert_same_or_within_ulps(got: Any, want: Any, ulps: int = 4, what: str = "") -> None:
    """``got`` is ``want`` (JAX's recorded output) as computed on another host: same shape and dtype;
    integers, bools and other non-float types bit for bit; floats (complex: both parts) with NaN where
    ``want`` has NaN, the same infinities, and every other element within ``ulps`` ulps of ``want``,
    in the output's type, either of the element itself or of the output's largest finite magnitude.

    Why a tolerance: XLA:CPU compiles for the host's CPU (vector width, FMA, its vectorized exp/tanh
    polynomials), so the recorded bits hold only on the host that recorded them; other x86-64 hosts
    give a few ulps off. Why also the output's scale: a dot or a sum that cancels loses its bits
    relative to the terms it adds, not to its small result (sharded_mlp/mesh2x2: 192 ulps of an
    element -0.0257 of an output whose largest magnitude is 4.67, 0.75 ulp of 4.67). An error of
    1e-3 relative is some thousands of ulps: caught (tests/test_helpers.py plants one)."""
    g, w = np.asarray(got), np.asarray(want)
    assert (g.shape, g.dtype) == (w.shape, w.dtype), f"{what}: got {g.dtype}{g.shape}, want {w.dtype}{w.shape}"
    if g.dtype.kind == "c":
        assert_same_or_within_ulps(g.real.copy(), w.real.copy(), ulps, f"{what} (real part)")
        assert_same_or_within_ulps(g.imag.copy(), w.imag.copy(), ulps, f"{what} (imaginary part)")
        return
    try:
        import ml_dtypes

        ml_dtypes.finfo(g.dtype)  # type: ignore[no-untyped-call]
    except ValueError:  # integers, bools, int4...: no rounding to differ in
        np.testing.assert_array_equal(g, w, err_msg=what)
        return
    g64, w64 = g.astype(np.float64), w.astype(np.float64)
    finite = np.isfinite(w64)
    odd = ~finite | ~np.isfinite(g64)
    same_odd = (np.isnan(g64) & np.isnan(w64)) | (g64 == w64)
    bad_odd = np.flatnonzero(odd & ~same_odd)
    assert bad_odd.size == 0, (f"{what}: element {bad_odd[0]} is {g64.flat[bad_odd[0]]}, want "
                               f"{w64.flat[bad_odd[0]]} ({bad_odd.size} NaN/inf mismatches)")
    scale = np.max(np.abs(w64), initial=0.0, where=finite)
    scale_ulp = _ulp(np.asarray([scale]).astype(g.dtype))
    dist = np.abs(_ordered_bits(g) - _ordered_bits(w))
    dist = np.where(odd, 0, dist)
    scale_dist = np.abs(np.where(odd, 0.0, g64) - np.where(odd, 0.0, w64)) / scale_ulp
    bad = np.flatnonzero((dist > ulps) & (scale_dist > ulps))
    worst = int(np.max(dist, initial=0))
    worst_scale = float(np.max(scale_dist, initial=0.0))
    assert bad.size == 0, (
        f"{what}: {bad.size} of {g.size} elements more than {ulps} ulps off (worst {worst} ulps of the element, "
        f"{worst_scale:.3g} ulps of the output's scale {scale:g}); first: element {bad[0]} "
        f"{g64.flat[bad[0]]!r}, want {w64.flat[bad[0]]!r}")


def assert_same_bits(got: Any, want: Any, what: str = "") -> None:
    """The same shape, dtype and bytes (the oracle is the same program run on this host)."""
    g, w = np.asarray(got), np.asarray(want)
    assert (g.shape, g.dtype) == (w.shape, w.dtype), f"{what}: got {g.dtype}{g.shape}, want {w.dtype}{w.shape}"
    if np.ascontiguousarray(g).tobytes() != np.ascontiguousarray(w).tobytes():
        diff = np.flatnonzero(np.ascontiguousarray(g).view(np.uint8) != np.ascontiguousarray(w).view(np.uint8))
        raise AssertionError(f"{what}: not the same bits ({diff.size} bytes differ, first at byte {diff[0]})")


def path_states(root: Any) -> dict[str, tuple[int, int, int, int]]:
    """Every path under ``root`` (``root`` included) with its inode, mode, size and mtime: anything
    written there changes it."""
    out = {}
    for d, dirs, files in os.walk(root):
        for p in [d, *(os.path.join(d, n) for n in dirs + files)]:
            st = os.lstat(p)
            out[p] = (st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns)
    return out
