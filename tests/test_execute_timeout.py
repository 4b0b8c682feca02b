"""``Executable.execute(..., timeout=)``: the caller gets control back from a run XLA cannot stop
(issue 17, findings 7 and 10: an endless ``While`` ran on after Ctrl-C; a notebook hung).

The endless runs happen in a child process (their abandoned thread keeps a core busy until that
process exits); each child prints what it saw, checked here against the values numpy gives."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops

_PROGRAMS = textwrap.dedent("""
    import os, signal, sys, threading, time
    import numpy as np
    import xlasdk as xs
    from xlasdk import ops

    def counter():
        # while (i < n) i += 1, with n a parameter: n = 2**62 never ends in practice
        b = xs.XlaBuilder("spin")
        n = ops.Parameter(b, 0, xs.Shape.array_shape(np.int64, ()))
        cb = xs.XlaBuilder("cond")
        c = ops.Parameter(cb, 0, xs.Shape.tuple_shape([xs.Shape.array_shape(np.int64, ())] * 2))
        cond = cb.build(ops.Lt(ops.GetTupleElement(c, 0), ops.GetTupleElement(c, 1)))
        bb = xs.XlaBuilder("body")
        t = ops.Parameter(bb, 0, xs.Shape.tuple_shape([xs.Shape.array_shape(np.int64, ())] * 2))
        body = bb.build(ops.Tuple(bb, [ops.Add(ops.GetTupleElement(t, 0), ops.Constant(bb, np.int64(1))),
                                       ops.GetTupleElement(t, 1)]))
        w = ops.While(cond, body, ops.Tuple(b, [ops.Constant(b, np.int64(0)), n]))
        return xs.compile(b.build(ops.GetTupleElement(w, 0)))
""")


def _child(body: str) -> list[str]:
    code = _PROGRAMS + textwrap.dedent(body) + "\nsys.stdout.flush(); os._exit(0)\n"  # the spinning thread dies too
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.split()


def test_a_timeout_returns_control_and_the_executable_runs_again() -> None:
    words = _child("""
        exe = counter()
        t0 = time.monotonic()
        try:
            exe.execute(np.int64(2**62), timeout=0.5)
            print("finished")
        except xs.ExecutionTimeoutError as e:
            print("timeout", round(time.monotonic() - t0, 1) < 5, "background" in str(e))
        # the same executable, at once, on an input that ends: the right count, not the abandoned run's
        print(int(exe.execute(np.int64(1000), timeout=60).to_numpy()), int(exe(np.int64(7)).to_numpy()))
    """)
    assert words == ["timeout", "True", "True", "1000", "7"]


def test_ctrl_c_during_execute_raises_keyboard_interrupt_at_once() -> None:
    words = _child("""
        exe = counter()
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        t0 = time.monotonic()
        try:
            exe.execute(np.int64(2**62))
            print("finished")
        except KeyboardInterrupt:
            print("interrupted", round(time.monotonic() - t0, 1) < 5)
        print(int(exe.execute(np.int64(12)).to_numpy()))
    """)
    assert words == ["interrupted", "True", "12"]


def test_execute_returns_what_a_call_returns_and_checks_its_arguments() -> None:
    b = xs.XlaBuilder("affine")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (3,)), "x")
    w = ops.Parameter(b, 1, xs.Shape.array_shape(np.float32, (3,)), "w")
    exe = xs.compile(b.build(ops.Tuple(b, [ops.Mul(x, w), ops.Add(x, w)])))
    xv = np.array([1.5, -2.0, 3.0], np.float32)
    wv = np.array([2.0, 0.5, -1.0], np.float32)
    prod, total = exe.execute(xv, w=wv, timeout=30)
    np.testing.assert_array_equal(prod.to_numpy(), xv * wv)
    np.testing.assert_array_equal(total.to_numpy(), xv + wv)
    with pytest.raises(xs.ShapeError, match="affine"):
        exe.execute(xv, np.zeros(4, np.float32))
    with pytest.raises(xs.XlaSdkError, match="timeout must be a number of seconds > 0"):
        exe.execute(xv, wv, timeout=0)
