"""``bisect="ops"`` against another Python environment goes inside regions
(:class:`xlasdk.reference._bisect_regions_against.RunsElsewhere`): the other side's region programs
run there.

Oracles: the other side is this interpreter behind a wrapper whose ``XLA_FLAGS`` disables XLA's
algebraic simplifier, which rewrites ``x / 3`` into ``x * (1/3)`` on XLA:CPU (about a third of the
elements an ulp off numpy's correctly rounded divide); the divide sits inside a called function, so
the search must stop at the call at the top level and name the divide inside it.
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import numpy as np
import pytest

import xlasdk as xs
from xlasdk.reference._other_env import OtherEnvironment

CALL = """HloModule c

f {
  x = f32[1024] parameter(0)
  c = f32[] constant(3)
  b = f32[1024] broadcast(c), dimensions={}
  d = f32[1024] divide(x, b)
  ROOT e = f32[1024] tanh(d)
}

ENTRY main {
  p = f32[1024] parameter(0)
  e1 = f32[1024] exponential(p)
  k = f32[1024] call(e1), to_apply=f
  ROOT r = f32[1024] negate(k)
}
"""


def test_the_search_goes_inside_a_call_run_in_the_other_environment(tmp_path: Path) -> None:
    from xlasdk.runtime import CompileOptions
    from xlasdk.runtime import compile as _compile

    x = np.random.default_rng(0).standard_normal(1024).astype(np.float32)
    div = xs.XlaComputation.from_hlo_text(
        "HloModule d\n\nENTRY e {\n  p = f32[1024] parameter(0)\n  c = f32[] constant(3)\n"
        "  b = f32[1024] broadcast(c), dimensions={}\n  ROOT d = f32[1024] divide(p, b)\n}\n")
    e1 = np.exp(x)
    plain = np.asarray(_compile(div, None)(e1))
    off = np.asarray(_compile(div, None, options=CompileOptions(
        env_option_overrides={"xla_disable_hlo_passes": "algsimp"}))(e1))
    if np.array_equal(plain, off):
        pytest.skip("XLA's algebraic simplifier no longer changes x / 3 on this XLA:CPU")
    assert np.array_equal(off, e1 / np.float32(3))  # without it: numpy's correctly rounded divide
    py = tmp_path / "noalg"
    py.write_text(f"#!/bin/sh\nXLA_FLAGS=--xla_disable_hlo_passes=algsimp exec '{sys.executable}' \"$@\"\n")
    py.chmod(py.stat().st_mode | stat.S_IXUSR)
    comp = xs.XlaComputation.from_hlo_text(CALL)
    r = xs.compare(comp, [x], against=OtherEnvironment(str(py)), rtol=0, atol=0, bisect="ops")
    assert not r.ok
    b = r.bisect_ops
    assert b.status == "localised" and b.culprit.name == "k", b
    assert b.region == "called function" and b.inside is not None, b
    assert b.inside.status == "localised" and b.inside.culprit.opcode.endswith("divide"), b
    assert "does not go inside" not in str(b) and "k > called function > divide" in str(b), str(b)
