"""compare against another Python environment (another jaxlib / libtpu release):
:class:`xlasdk.reference._other_env.OtherEnvironment`, ``xlasdk compare --against-python PATH``.

The other side here is this same interpreter behind a wrapper script (bit-identical: no crying
wolf), or behind one that disables XLA's algebraic simplifier (which rewrites ``x / 3`` into
``x * (1/3)`` on XLA:CPU: bits of about a third of the elements change), whose divide
``bisect="ops"`` must name. With ``XLASDK_OTHER_PYTHON`` naming another environment's interpreter
(CI: the other end of the jaxlib range), real dumps are compared across the two releases.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk.errors import OtherEnvironmentError
from xlasdk.reference._other_env import OtherEnvironment, in_range

DATA = Path(__file__).resolve().parent / "data"

PROGRAM = """HloModule m
ENTRY e {
  p = f32[1024] parameter(0)
  e1 = f32[1024] exponential(p)
  c = f32[] constant(3)
  b = f32[1024] broadcast(c), dimensions={}
  d = f32[1024] divide(e1, b)
  ROOT t = f32[1024] tanh(d)
}"""


def wrapper(tmp: Path, name: str, body: str) -> str:
    """An executable shell script ``name`` in ``tmp`` running ``body`` (``$PY``: this interpreter)."""
    path = tmp / name
    path.write_text(f"#!/bin/sh\nPY='{sys.executable}'\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture(scope="module")
def comp() -> Any:
    return xs.XlaComputation.from_hlo_text(PROGRAM)


@pytest.fixture(scope="module")
def x() -> np.ndarray[Any, Any]:
    return np.random.default_rng(0).standard_normal(1024).astype(np.float32)


def test_same_environment_matches_bit_for_bit(tmp_path: Path, comp: Any, x: Any) -> None:
    env = OtherEnvironment(wrapper(tmp_path, "same", 'exec "$PY" "$@"'))
    r = xs.compare(comp, [x], against=env, rtol=0, atol=0, bisect="ops")
    assert r.ok and r.outputs[0].mismatches == 0
    got = np.asarray(r.outputs[0].got)
    assert np.array_equal(got.view(np.uint32), np.asarray(r.outputs[0].want).view(np.uint32))
    assert r.bisect_ops.status == "no divergence"
    assert env.versions is not None and env.here is not None
    assert env.versions.jaxlib == env.here.jaxlib and env.versions.python == env.here.python
    assert f"jaxlib {env.here.jaxlib}" in r.against and "here" in r.against


def test_a_changed_divide_is_found_and_named(tmp_path: Path, comp: Any, x: Any) -> None:
    from xlasdk.runtime import CompileOptions
    from xlasdk.runtime import compile as _compile

    div = xs.XlaComputation.from_hlo_text(PROGRAM.replace("  d = f32[1024] divide(e1, b)\n", "").replace(
        "ROOT t = f32[1024] tanh(d)", "ROOT t = f32[1024] divide(e1, b)"))
    e1 = np.exp(x)
    plain = np.asarray(_compile(div, None)(x))
    off = np.asarray(_compile(div, None, options=CompileOptions(
        env_option_overrides={"xla_disable_hlo_passes": "algsimp"}))(x))
    exact = e1 / np.float32(3)  # numpy's correctly rounded divide: the oracle of the simplifier-free run
    if np.array_equal(plain, off):
        pytest.skip("XLA's algebraic simplifier no longer changes x / 3 on this XLA:CPU")
    assert np.count_nonzero(off != exact) <= np.count_nonzero(plain != exact)
    env = OtherEnvironment(wrapper(tmp_path, "noalg", 'XLA_FLAGS=--xla_disable_hlo_passes=algsimp exec "$PY" "$@"'))
    r = xs.compare(comp, [x], against=env, rtol=0, atol=0, bisect="ops")
    assert not r.ok and r.outputs[0].mismatches > 0
    b = r.bisect_ops
    assert b.status == "localised" and b.culprit.name == "d" and b.culprit.opcode.endswith("divide")
    # at the device's model (the default tolerances), an ulp of a divide is no divergence
    assert xs.compare(comp, [x], against=OtherEnvironment(env.python)).ok


def test_other_releases_on_real_dumps() -> None:
    other = os.environ.get("XLASDK_OTHER_PYTHON")
    if not other:
        pytest.skip("XLASDK_OTHER_PYTHON names no other environment")
    from tests.test_real_dumps import recorded

    env = OtherEnvironment(other)
    for program in ("dumps/int_indexing", "dumps/gru_scan", "dumps/convnet_train"):  # convnet: 0.10.2 vs 0.12.1 differ
        comp = xs.load_computation(str(DATA / program / "module.before_optimizations.txt"))
        inputs, _ = recorded(program)
        r = xs.compare(comp, inputs, against=env, rtol=0, atol=0, bisect="ops")
        if r.ok:
            continue
        b = r.bisect_ops  # a difference between the releases is explained per op, never left bare
        assert b.status == "localised" and b.culprit is not None, f"{program}: {r}"


# -- errors: never a verdict
def test_not_a_python(tmp_path: Path, comp: Any, x: Any) -> None:
    with pytest.raises(OtherEnvironmentError, match="without answering"):
        xs.compare(comp, [x], against=OtherEnvironment(wrapper(tmp_path, "echo", 'echo "{}"')))
    with pytest.raises(OtherEnvironmentError, match="cannot be started"):
        xs.compare(comp, [x], against=OtherEnvironment(tmp_path / "missing"))


def test_no_jaxlib(tmp_path: Path, comp: Any, x: Any) -> None:
    # python -S -E: no site-packages, so no jaxlib, numpy or ml_dtypes there
    env = OtherEnvironment(wrapper(tmp_path, "bare", 'exec "$PY" -S -E "$@"'))
    with pytest.raises(OtherEnvironmentError, match="has no jaxlib"):
        env.probe()


def test_out_of_range_jaxlib(tmp_path: Path, comp: Any, x: Any) -> None:
    fake = tmp_path / "fake" / "jaxlib-0.9.0.dist-info"
    fake.mkdir(parents=True)
    (fake / "METADATA").write_text("Metadata-Version: 2.1\nName: jaxlib\nVersion: 0.9.0\n")
    env = OtherEnvironment(wrapper(tmp_path, "old", f'PYTHONPATH="{fake.parent}:$PYTHONPATH" exec "$PY" "$@"'))
    with pytest.raises(OtherEnvironmentError, match=r"has jaxlib 0\.9\.0: xlasdk supports jaxlib>=0\.10\.2,<0\.13"):
        xs.compare(comp, [x], against=env)
    assert [in_range(v) for v in ("0.10.2", "0.12.0.1", "0.12.1", "0.10.1", "0.13.0", "0.13.0.dev1", "", "x")] == [
        True, True, True, False, False, False, False, False]


def test_dying_and_hanging_subprocess(tmp_path: Path, comp: Any, x: Any) -> None:
    with pytest.raises(OtherEnvironmentError, match="killed by signal 9"):
        xs.compare(comp, [x], against=OtherEnvironment(wrapper(tmp_path, "die", "kill -9 $$")))
    with pytest.raises(OtherEnvironmentError, match="exited with code 3 before it answered: boom"):
        xs.compare(comp, [x], against=OtherEnvironment(wrapper(tmp_path, "fail", "echo boom >&2; exit 3")))
    with pytest.raises(OtherEnvironmentError, match="ran past its 1 s"):
        xs.compare(comp, [x], against=OtherEnvironment(wrapper(tmp_path, "hang", "exec sleep 30"), timeout=1))
    # a Python that answers another request (a forged result) is no answer
    forged = wrapper(tmp_path, "forged", 'echo \'{"protocol": 1, "token": "x"}\' > "$3/result.json"')
    with pytest.raises(OtherEnvironmentError, match="something else than xlasdk's worker's result"):
        xs.compare(comp, [x], against=OtherEnvironment(forged))


# -- the CLI
def test_cli_against_python(tmp_path: Path) -> None:
    import json

    from tests.test_cli import cli

    src = tmp_path / "m.hlo"
    src.write_text(PROGRAM)
    np.savez(tmp_path / "in.npz", np.random.default_rng(0).standard_normal(1024).astype(np.float32))
    noalg = wrapper(tmp_path, "noalg", 'XLA_FLAGS=--xla_disable_hlo_passes=algsimp exec "$PY" "$@"')
    code, out, err = cli("compare", str(src), "--inputs", str(tmp_path / "in.npz"), "--against-python", noalg,
                         "--rtol", "0", "--atol", "0", "--bisect", "ops", "--json", str(tmp_path / "r.json"))
    if code == 0:
        pytest.skip("XLA's algebraic simplifier no longer changes x / 3 on this XLA:CPU")
    assert code == 1, err
    assert "d (stablehlo.divide" in out and "jaxlib" in out
    doc = json.loads((tmp_path / "r.json").read_text())
    assert set(doc["environments"]) == {"this", "other"} and doc["bisect_ops"]["culprit"]["name"] == "d"
    code, _, err = cli("compare", str(src), "--inputs", str(tmp_path / "in.npz"), "--against-python",
                       wrapper(tmp_path, "die", "kill -9 $$"))
    assert code == 2 and "killed by signal 9" in err


@pytest.mark.parametrize(("flags", "message"), [
    (["--against-python", "/no/such/python"], "no such file"),
    (["--against-jaxlib", "0.9.1"], "xlasdk supports jaxlib>=0.10.2,<0.13"),
    (["--against-jaxlib", "latest"], "expected a jaxlib release number"),
    (["--against-jaxlib", "0.12.1", "--against", "cpu:0"], "give one of --against"),
    (["--against-jaxlib", "0.12.1", "--find-nonfinite"], "--bisect ops and --bisect passes are the searches"),
])
def test_cli_against_environment_flags(tmp_path: Path, flags: list[str], message: str) -> None:
    from tests.test_cli import cli

    src = tmp_path / "m.hlo"
    src.write_text(PROGRAM)
    code, _, err = cli("compare", str(src), *flags)
    assert code == 2 and message in err, err


def test_the_installed_jaxlib_is_not_an_other_release(tmp_path: Path) -> None:
    """``--against-jaxlib`` naming the installed release is refused at once, before a 550 MB
    environment is made to compare that release with itself."""
    from tests.test_cli import cli
    from xlasdk._jaxlib.versions import jaxlib_version
    from xlasdk.reference._env_venv import checked_version

    installed = importlib.metadata.version("jaxlib")
    assert jaxlib_version() == installed
    with pytest.raises(OtherEnvironmentError, match=rf"--against-jaxlib {re.escape(installed)}: that is the jaxlib "
                                                    "installed here; name another release"):
        checked_version(installed)
    major, minor, micro = (int(x) for x in installed.split(".")[:3])
    for spelling in (f"{installed}.0", f"0{installed}", f"{major}.0{minor}.{micro}"):  # pip's same release
        if installed.count(".") == 2:
            with pytest.raises(OtherEnvironmentError, match="that is the jaxlib installed here"):
                checked_version(spelling)
    other = "0.12.0.1" if installed != "0.12.0.1" else "0.12.1"
    assert checked_version(other) == other
    assert checked_version(f"{major}.{minor}.{micro + 1}") == f"{major}.{minor}.{micro + 1}"
    src = tmp_path / "m.hlo"
    src.write_text(PROGRAM)
    code, _, err = cli("compare", str(src), "--against-jaxlib", installed)
    assert code == 2 and "that is the jaxlib installed here" in err, err
    assert not (tmp_path / "envs").exists()


def test_venv_commands(tmp_path: Path) -> None:
    from xlasdk.reference._env_venv import env_directory, venv_commands

    d = env_directory("0.12.1", str(tmp_path))
    assert d == str(tmp_path / "envs" / f"jaxlib-0.12.1-py{sys.version_info[0]}.{sys.version_info[1]}")
    make, pip = venv_commands("0.12.1", d)
    assert make == [sys.executable, "-m", "venv", d]
    assert pip[:4] == [os.path.join(d, "bin", "python"), "-m", "pip", "install"]
    assert pip[-3:] == ["jaxlib==0.12.1", "numpy", "ml_dtypes"]


@pytest.mark.campaign
def test_against_jaxlib_real(tmp_path: Path, comp: Any, x: Any) -> None:
    """Makes a venv with pip (network): not run in CI."""
    from xlasdk.reference._env_venv import jaxlib_environment

    installed = importlib.metadata.version("jaxlib")
    env = OtherEnvironment(jaxlib_environment("0.12.0.1" if installed != "0.12.0.1" else "0.12.1"))
    assert xs.compare(comp, [x], against=env).ok
