"""``bisect="passes"`` between two environments (:mod:`xlasdk.reference._bisect_passes_env`,
``xlasdk compare FILE --against-python PATH --bisect passes``).

Oracles: the other side is this interpreter behind a wrapper whose ``XLA_FLAGS`` disables XLA's
algebraic simplifier (which rewrites ``x / 3`` into ``x * (1/3)`` on XLA:CPU, changing about a
third of the elements by an ulp): numpy's correctly rounded divide says which side leaves the
reference (this one), the pass whose disabling makes this side match the other is ``algsimp``, and
the pass lists differ by ``algsimp`` (it never runs there). Across releases
(``XLASDK_OTHER_PYTHON``, CI: the other end of the jaxlib range) the pass lists reported are checked
against each release's dump, read independently.
"""

from __future__ import annotations

import io
import os
import stat
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk.reference._other_env import OtherEnvironment

PROGRAM = """HloModule m
ENTRY e {
  p = f32[1024] parameter(0)
  e1 = f32[1024] exponential(p)
  c = f32[] constant(3)
  b = f32[1024] broadcast(c), dimensions={}
  ROOT d = f32[1024] divide(e1, b)
}"""


def _wrapper(tmp: Path, name: str, body: str) -> str:
    path = tmp / name
    path.write_text(f"#!/bin/sh\nPY='{sys.executable}'\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture(scope="module")
def x() -> np.ndarray[Any, Any]:
    return np.random.default_rng(0).standard_normal(1024).astype(np.float32)


def test_the_side_that_leaves_the_reference_is_bisected_and_the_pass_lists_compared(tmp_path: Path, x: Any
                                                                                    ) -> None:
    comp = xs.XlaComputation.from_hlo_text(PROGRAM)
    from xlasdk.runtime import compile as _compile

    plain = np.asarray(_compile(comp, None)(x))
    exact = np.exp(x) / np.float32(3)  # numpy: exp is XLA's (the same on both sides), the divide rounded once
    there_exact = np.asarray(_compile(comp, None, options=xs.CompileOptions(
        env_option_overrides={"xla_disable_hlo_passes": "algsimp"}))(x))
    if np.array_equal(plain, there_exact):
        pytest.skip("XLA's algebraic simplifier no longer changes x / 3 on this XLA:CPU")
    assert np.count_nonzero(there_exact != exact) < np.count_nonzero(plain != exact)
    env = OtherEnvironment(_wrapper(tmp_path, "noalg", 'XLA_FLAGS=--xla_disable_hlo_passes=algsimp exec "$PY" "$@"'))
    r = xs.compare(comp, [x], against=env, rtol=0, atol=0, ulps=0, bisect="passes")
    assert not r.ok
    b = r.bisect_passes
    assert b.side == "here" and b.status == "found", b
    assert "algsimp" in b.passes and len(b.passes) == 1, b
    assert b.passes_only_here is not None and "algsimp" in b.passes_only_here, b
    assert b.passes_only_there is not None and "algsimp" not in b.passes_only_there
    text = str(r)
    assert "bisected in this environment" in text and "only here" in text and "algsimp" in text
    d = r.as_dict()["bisect_passes"]
    assert d["side"] == "here" and "algsimp" in d["passes_only_here"]


def test_cli_bisect_passes_against_python(tmp_path: Path, x: Any) -> None:
    from xlasdk.cli import main

    f = tmp_path / "m.hlo"
    f.write_text(PROGRAM)
    np.save(tmp_path / "x.npy", x)
    py = _wrapper(tmp_path, "noalg", 'XLA_FLAGS=--xla_disable_hlo_passes=algsimp exec "$PY" "$@"')
    out, err = io.StringIO(), io.StringIO()
    rc = main(["compare", str(f), "--against-python", py, "--input", f"p={tmp_path / 'x.npy'}", "--rtol", "0",
               "--atol", "0", "--bisect", "passes"], stdout=out, stderr=err)
    if rc == 0:
        pytest.skip("XLA's algebraic simplifier no longer changes x / 3 on this XLA:CPU")
    assert rc == 1, err.getvalue()
    assert "bisect passes: found" in out.getvalue() and "algsimp" in out.getvalue(), out.getvalue()


NORM = """HloModule norm

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  p = f32[64,128] parameter(0)
  sq = f32[64,128] multiply(p, p)
  z = f32[] constant(0)
  s = f32[64] reduce(sq, z), dimensions={1}, to_apply=add
  n = f32[64] sqrt(s)
  nb = f32[64,128] broadcast(n), dimensions={0}
  ROOT d = f32[64,128] divide(p, nb)
}"""


def test_across_releases_the_pass_that_made_the_difference(x: Any) -> None:
    """x / sqrt(sum(x * x)): jaxlib 0.10.2's XLA:CPU rewrites it to a multiply by rsqrt in algsimp,
    0.12.1's does not (measured: 3073 of 8192 elements 1-2 ulps apart; both within the reference's
    bound). The set found is checked by a run of its own on the side bisected (the set disabled: bit
    for bit the other side's outputs), and the pass lists against each release's dump, read
    independently."""
    other = os.environ.get("XLASDK_OTHER_PYTHON")
    if not other:
        pytest.skip("XLASDK_OTHER_PYTHON names no other environment (CI: the other end of the jaxlib range)")
    import subprocess
    import tempfile

    from xlasdk.reference._bisect_passes import pass_names, passes_in_dump
    from xlasdk.runtime import compile as _compile

    comp = xs.XlaComputation.from_hlo_text(NORM)
    v = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32)
    env = OtherEnvironment(other)
    r = xs.compare(comp, [v], against=env, rtol=0, atol=0, ulps=0, bisect="passes")
    if r.ok:
        pytest.skip(f"the two releases agree bit for bit on this program ({r.against})")
    b = r.bisect_passes
    here = pass_names(comp)
    with tempfile.TemporaryDirectory() as d:  # the other release's dump, made by a plain script there
        script = ("import sys, xlasdk as xs\n"
                  "from xlasdk.runtime import CompileOptions, compile\n"
                  f"c = xs.XlaComputation.from_hlo_text({NORM!r})\n"
                  "compile(c, 'cpu:0', options=CompileOptions(env_option_overrides={'xla_dump_to': sys.argv[1], "
                  "'xla_dump_hlo_pass_re': '.*'}), cache=False)\n")
        env_vars = {**os.environ, "PYTHONPATH": str(Path(xs.__file__).resolve().parents[1])}
        subprocess.run([other, "-c", script, d], check=True, capture_output=True, timeout=300, env=env_vars)
        there = passes_in_dump(d)
    assert b.passes_only_here == [p for p in here if p not in there], b
    assert b.passes_only_there == [p for p in there if p not in here], b
    assert b.passes_only_here or b.passes_only_there  # the releases' pass lists differ on this module
    assert b.status == "found" and b.side in ("here", "there"), b
    off = {"xla_disable_hlo_passes": ",".join(b.passes)}
    plain_here = np.asarray(_compile(comp, None)(v))
    a = env.run(comp, [v], xs.CompareSettings(), {})
    assert a.outputs is not None
    if b.side == "here":
        fixed = np.asarray(_compile(comp, None, options=xs.CompileOptions(env_option_overrides=off))(v))
        assert np.array_equal(fixed.view(np.uint32), np.asarray(a.outputs[0]).view(np.uint32))
    else:
        fixed_there = env.run(comp, [v], xs.CompareSettings(), off)
        assert fixed_there.outputs is not None
        assert np.array_equal(np.asarray(fixed_there.outputs[0]).view(np.uint32), plain_here.view(np.uint32))
    assert set(b.passes) <= set(here if b.side == "here" else there)
