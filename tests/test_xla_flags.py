"""A flag XLA does not know in ``XLA_FLAGS`` (issue 17; found by a new-user trial): XLA ends the process
that reads it, at its first client. xlasdk has the worker read them first, so the user's process
gets an ``XlaRuntimeError`` naming the flag (not a death, and not a ``FormatError`` blaming a file).
Each case runs in a fresh process, since XLA reads ``XLA_FLAGS`` once per process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import xlasdk as xs
    from xlasdk import ops
    what = sys.argv[1]
    try:
        if what == "built":
            b = xs.XlaBuilder("neg")
            x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (3,)))
            out = xs.compile(b.build(ops.Neg(x)))(np.array([1.5, -2.0, 0.0], np.float32)).to_numpy()
            print("value", out.tolist())
        else:
            comp = xs.load_computation(sys.argv[2])
            print("value", xs.compile(comp)(np.array([1.5, -2.0, 0.0], np.float32)).to_numpy().tolist())
    except xs.XlaSdkError as e:
        print("error", type(e).__name__, str(e).replace(chr(10), " "))
    print("alive")
""")


def _run(flags: str, *argv: str) -> list[str]:
    env = {**os.environ, "XLA_FLAGS": flags}
    out = subprocess.run([sys.executable, "-c", _SCRIPT, *argv], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    return out.stdout.strip().splitlines()


def test_an_unknown_flag_is_an_error_in_this_process_not_its_death() -> None:
    lines = _run("--xla_no_such_flag_at_all=1", "built")
    assert lines[-1] == "alive"
    assert lines[0].startswith("error XlaRuntimeError XLA_FLAGS holds a flag this XLA does not know"), lines
    assert "--xla_no_such_flag_at_all=1" in lines[0] and "fix or unset XLA_FLAGS" in lines[0]


def test_a_file_is_not_blamed_for_an_unknown_flag(tmp_path: Path) -> None:
    path = tmp_path / "neg.hlo"
    path.write_text("HloModule neg\n\nENTRY main {\n  x = f32[3] parameter(0)\n  ROOT n = f32[3] negate(x)\n}\n")
    lines = _run("--xla_no_such_flag_at_all=1", "loaded", str(path))
    assert lines[-1] == "alive"
    assert lines[0].startswith("error XlaRuntimeError XLA_FLAGS holds a flag"), lines
    assert "neg.hlo" not in lines[0]


def test_known_flags_run_as_before(tmp_path: Path) -> None:
    path = tmp_path / "neg.hlo"
    path.write_text("HloModule neg\n\nENTRY main {\n  x = f32[3] parameter(0)\n  ROOT n = f32[3] negate(x)\n}\n")
    for argv in (("built",), ("loaded", str(path))):
        lines = _run("--xla_cpu_enable_fast_math=false", *argv)
        assert lines == ["value [-1.5, 2.0, -0.0]", "alive"], lines
