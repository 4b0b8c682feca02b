"""``xlasdk triage`` / :func:`xlasdk.triage`: many modules compiled in the worker, their
failures grouped by signature (openxla/xla#47398: 452 crashing modules grouped by hand).

Oracles: the files are made to fail in known ways (two modules with a custom call to a target
nothing registered, under different names and shapes: XLA:CPU's NOT_FOUND; two renamed copies of
one of tests/xla_faults.py's abort cases, where this XLA still dies on it; a file that is not a
module), so the groups are known in advance; a module that compiles (checked with xs.compile) is
never in a group; the last pass XLA entered before an abort in algebraic_simplifier.cc is an
algsimp pass.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import xlasdk as xs
from tests import xla_faults
from tests.helpers import raises
from xlasdk import _triage as tr

GOOD = {
    "good1.hlo": "HloModule good1\n\nENTRY main {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p)\n}\n",
    "good2.hlo": ("HloModule good2\n\nENTRY main {\n  a = f32[2,3] parameter(0)\n  b = f32[3,2] parameter(1)\n"
                  "  ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n"),
}


def _no_target(name: str, n: int) -> str:
    return (f"HloModule {name}\n\nENTRY main {{\n  p = f32[{n}] parameter(0)\n"
            f"  ROOT c.{n} = f32[{n}] custom-call(p), custom_call_target=\"xlasdk_no_such_target\"\n}}\n")


def _cli(*argv: str) -> tuple[int, str, str]:
    from xlasdk.cli import main

    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), stdout=out, stderr=err), out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("modules")
    for name, text in GOOD.items():
        (d / name).write_text(text)
        xs.compile(xs.XlaComputation.from_hlo_text(text), "cpu:0")  # they compile
    (d / "sub").mkdir()
    (d / "cc1.hlo").write_text(_no_target("first", 3))
    (d / "sub" / "cc2.hlo").write_text(_no_target("second_one", 7))
    (d / "broken.hlo").write_text("HloModule broken\n\nENTRY main {\n  ROOT x = f32[2] nonsense(\n}\n")
    (d / "notes.md").write_text("not a module: not looked at")
    return d


def test_groups_compile_errors_and_load_failures(modules: Path) -> None:
    rep = tr.triage([modules])
    by = {g.signature: g for g in rep.groups}
    assert sorted(Path(f).name for f in rep.compiled) == ["good1.hlo", "good2.hlo"]
    nf = [g for g in rep.groups if g.signature.startswith("NOT_FOUND")]
    assert len(nf) == 1 and sorted(Path(f).name for f in nf[0].files) == ["cc1.hlo", "cc2.hlo"], by
    assert "xlasdk_no_such_target" in nf[0].signature and not nf[0].flaky
    load = [g for g in rep.groups if g.signature.startswith("loading:")]
    assert len(load) == 1 and [Path(f).name for f in load[0].files] == ["broken.hlo"]
    assert len(rep.groups) == 2
    for g in rep.groups:  # a module that compiles is never in a failure group
        assert not set(g.files) & set(rep.compiled)
    assert "notes.md" not in str(rep.as_dict())


def test_cli_table_json_and_repeat(modules: Path, tmp_path: Path) -> None:
    out_json = tmp_path / "t.json"
    rc, out, err = _cli("triage", str(modules / "cc1.hlo"), str(modules / "sub"), str(modules / "good1.hlo"),
                        "--repeat", "2", "--json", str(out_json))
    assert rc == 1, err  # some module failed
    assert "NOT_FOUND" in out and "2 of 3 modules failed on cpu in 1 group" in out, out
    data = json.loads(out_json.read_text())
    assert data["repeat"] == 2 and data["modules"] == 3
    [g] = data["groups"]
    assert g["count"] == 2 and g["flaky"] is False and g["example"].endswith("cc1.hlo")
    assert data["compiled"] == [str(modules / "good1.hlo")]
    rc, out, _ = _cli("triage", str(modules / "good1.hlo"), str(modules / "good2.hlo"))
    assert rc == 0 and "0 of 2 modules failed" in out


def test_aborts_grouped_by_the_check_location_with_the_last_pass(tmp_path: Path) -> None:
    case = xla_faults.cpu_abort()  # skipped, naming the release, where XLA:CPU dies on none
    death = xla_faults.require(case)
    (tmp_path / "a1.hlo").write_text(case.text)
    (tmp_path / "a2.hlo").write_text(case.text.replace("HloModule ", "HloModule renamed_", 1))
    (tmp_path / "ok.hlo").write_text(GOOD["good1.hlo"])
    (tmp_path / "cc.hlo").write_text(_no_target("x", 2))
    rep = tr.triage([tmp_path], repeat=2)
    assert [Path(f).name for f in rep.compiled] == ["ok.hlo"]
    aborts = [g for g in rep.groups if g.signature.startswith("abort at ")]
    assert len(aborts) == 1 and sorted(Path(f).name for f in aborts[0].files) == ["a1.hlo", "a2.hlo"], rep
    where = aborts[0].signature.removeprefix("abort at ")
    assert where.split(":")[0] in death, (where, death)  # the file:line of XLA's own fatal line
    assert not aborts[0].flaky
    if where.startswith("algebraic_simplifier.cc"):
        assert aborts[0].last_pass is not None and "algsimp" in aborts[0].last_pass, aborts[0]
    assert len(rep.groups) == 2


def test_a_module_that_fails_differently_marks_its_group_flaky(modules: Path, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    seen: dict[str, int] = {}
    real = tr._attempt

    def flaky(path: str, topology: str | None, timeout: float, overrides: tuple[tuple[str, str], ...] = ()
              ) -> tr.Attempt:
        got = real(path, topology, timeout, overrides)
        if path.endswith("cc1.hlo") and not overrides:
            seen[path] = seen.get(path, 0) + 1
            if seen[path] == 2:  # its second compile: another way
                return tr.Attempt("abort at somewhere.cc:1", "it died with SIGSEGV")
        return got

    monkeypatch.setattr(tr, "_attempt", flaky)
    rep = tr.triage([modules / "cc1.hlo", modules / "sub" / "cc2.hlo", modules / "good1.hlo"], repeat=2)
    [g] = rep.groups
    assert g.count == 2 and g.flaky
    assert [a.signature for a in rep.attempts[str(modules / "cc1.hlo")]][1] == "abort at somewhere.cc:1"
    rep = tr.triage([modules / "sub" / "cc2.hlo"], repeat=2)
    assert not rep.groups[0].flaky


def test_bad_paths_are_clear_errors(tmp_path: Path) -> None:
    with raises(xs.XlaSdkError, "triage:", "no such file or directory"):
        tr.triage([tmp_path / "missing"])
    (tmp_path / "empty").mkdir()
    with raises(xs.XlaSdkError, "a directory with no module file"):
        tr.triage([tmp_path / "empty"])
    with raises(xs.XlaSdkError, "expected a list of module files"):
        tr.triage(str(tmp_path))  # type: ignore[arg-type]
    with raises(xs.XlaSdkError, "repeat"):
        tr.triage([tmp_path], repeat=0)
    rc, _, err = _cli("triage", str(tmp_path / "missing"))
    assert rc == 2 and f"{tmp_path / 'missing'}: no such file or directory" in err
    rc, _, err = _cli("triage", str(tmp_path / "empty"))
    assert rc == 2 and "a directory with no module file" in err
    rc, _, err = _cli("triage", str(tmp_path), "--repeat", "0")
    assert rc == 2 and "--repeat" in err
    rc, _, err = _cli("triage", str(tmp_path), "--json", str(tmp_path / "nodir" / "x.json"))
    assert rc == 2 and "--json" in err and "does not exist" in err
    rc, _, err = _cli("triage", str(tmp_path), "--device", "cpu:0", "--topology", "v5e:1x1")
    assert rc == 2 and "give one" in err


def _rp64(name: str, n: int) -> str:
    return (f"HloModule {name}\n\nENTRY main {{\n  p = f64[{n}] parameter(0)\n"
            f"  ROOT r.{n} = f64[{n}] reduce-precision(p), exponent_bits=8, mantissa_bits=7\n}}\n")


def test_topology_groups_xla_tpu_failures_without_a_tpu(tmp_path: Path) -> None:
    import importlib.metadata

    try:
        release = importlib.metadata.version("libtpu")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("libtpu is not installed: no compile for a TPU without a chip")
    (tmp_path / "rp1.hlo").write_text(_rp64("one", 3))
    (tmp_path / "rp2.hlo").write_text(_rp64("two", 11))
    (tmp_path / "ok.hlo").write_text(GOOD["good2.hlo"])
    from tests.test_capabilities import _lapack  # jaxlib's LAPACK kernel: lowered for the TPU, as xs.compile does

    (tmp_path / "lu.hlo").write_text(_lapack().as_hlo_text())
    dies = xla_faults.still_aborts(xla_faults.TPU_ABORTS[0], tpu=True)
    if dies is not None:
        (tmp_path / "abort.hlo").write_text(xla_faults.TPU_ABORTS[0].text)
    rep = tr.triage([tmp_path], device=xs.topology("v5e:1x1").devices[0])
    assert rep.device == "v5e:1x1" and sorted(Path(f).name for f in rep.compiled) == ["lu.hlo", "ok.hlo"], str(rep)
    x64 = [g for g in rep.groups if "While rewriting computation to not contain X" in g.signature]
    if not x64:
        pytest.skip(f"XLA:TPU of libtpu {release} compiles an f64 reduce-precision ({rep})")
    assert len(x64) == 1 and sorted(Path(f).name for f in x64[0].files) == ["rp1.hlo", "rp2.hlo"]
    assert x64[0].signature.startswith("UNIMPLEMENTED (reduce-precision): ")
    if dies is not None:
        [a] = [g for g in rep.groups if g.signature.startswith(("abort at", "died"))]
        assert [Path(f).name for f in a.files] == ["abort.hlo"]
    assert len(rep.groups) == 1 + (dies is not None)


def test_a_real_xla_dump_directory_counts_only_its_modules(tmp_path: Path) -> None:
    """XLA writes reports beside a dump's modules (``...-buffer-assignment.txt``,
    ``...-memory-usage-report.txt``): they are no modules, so a dump of programs that compile is
    all green (a new user's dump counted 12 of 21 files as failed modules)."""
    pytest.importorskip("jax")
    import os
    import subprocess
    import sys

    dump = tmp_path / "dump"
    env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={dump}", "JAX_PLATFORMS": "cpu"}
    subprocess.run([sys.executable, "-c", "import jax, jax.numpy as jnp\n"
                    "print(jax.jit(lambda x: jnp.tanh(x) @ x.T)(jnp.ones((4, 4))).sum())"],
                   env=env, check=True, capture_output=True, timeout=120)
    names = sorted(p.name for p in dump.iterdir())
    assert any("buffer-assignment" in n for n in names), names  # the reports are there
    found = tr.module_files([dump])
    assert found and not any(any(r in Path(f).name for r in tr.XLA_REPORT_FILES) for f in found), found
    rc, out, _ = _cli("triage", str(dump))
    assert rc == 0, out


def test_each_group_gets_a_small_repro_that_fails_the_same_way(tmp_path: Path) -> None:
    """``--reduce DIR``: each group's example shrunk by the reducer (the group's signature kept): the
    custom call to a target nothing registered, buried in 12 other instructions, comes out alone
    with its operand; the repro fails with the group's signature; a load failure gets a note."""
    d = tmp_path / "mods"
    d.mkdir()
    body = "".join(f"  t{i} = f32[8] tanh(t{i - 1})\n" for i in range(1, 12))
    (d / "big.hlo").write_text(
        "HloModule big\n\nENTRY main {\n  t0 = f32[8] parameter(0)\n" + body
        + "  c = f32[8] custom-call(t11), custom_call_target=\"xlasdk_no_such_target\"\n"
        + "  ROOT r = f32[8] add(c, t3)\n}\n")
    (d / "broken.hlo").write_text("HloModule broken\n\nENTRY main {\n  ROOT x = f32[2] nonsense(\n}\n")
    rc, out, _ = _cli("triage", str(d), "--reduce", str(tmp_path / "repros"), "--json", str(tmp_path / "g.json"))
    assert rc == 1, out
    groups = json.loads((tmp_path / "g.json").read_text())["groups"]
    cc = next(g for g in groups if "big.hlo" in g["example"])
    assert cc["repro"] and cc["repro_instructions"] <= 3, cc
    text = Path(cc["repro"]).read_text()
    assert "xlasdk_no_such_target" in text and "tanh" not in text, text
    again = tr.triage([cc["repro"]])
    assert [g.signature for g in again.groups] == [cc["signature"]]
    loading = next(g for g in groups if g["signature"].startswith("loading:"))
    assert loading["repro"] is None and "fail loading" in loading["repro_note"]


def test_a_tpu_dump_directory_counts_only_its_modules(tmp_path: Path) -> None:
    """XLA:TPU writes more files beside its modules (``tpu_comp_env.txt``, ``target_arguments.txt``,
    ``execution_options.txt``...): no modules either (a new user's TPU dump had 6 counted as failed,
    "not a recognised computation format")."""
    import importlib.metadata
    import os
    import subprocess
    import sys

    try:
        importlib.metadata.version("libtpu")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("libtpu is not installed: no compile for a TPU without a chip")
    src = tmp_path / "m.hlo"
    src.write_text("HloModule m\n\nENTRY main {\n  p = f32[8,128] parameter(0)\n  ROOT t = f32[8,128] tanh(p)\n}\n")
    dump = tmp_path / "dump"
    env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={dump}"}
    subprocess.run([sys.executable, "-m", "xlasdk.cli", "inspect", str(src), "--topology", "v5e:1x1", "--optimized"],
                   env=env, check=True, capture_output=True, timeout=300)
    names = sorted(p.name for p in dump.iterdir())
    side = [n for n in names if any(k in n for k in ("tpu_comp_env", "target_arguments", "execution_options"))]
    if not side:
        pytest.skip(f"this libtpu writes none of XLA:TPU's side files: {names}")
    found = [Path(f).name for f in tr.module_files([dump])]
    assert found and not any(n in found for n in side), (found, side)
    rc, out, _ = _cli("triage", str(dump), "--topology", "v5e:1x1")
    assert "not a recognised computation format" not in out, out


def test_the_last_pass_is_named_without_its_instance_number(tmp_path: Path) -> None:
    """XLA numbers a pass that runs more than once (``apply-xla-transforms-7``), and the number depends
    on what else the process compiled (a new user saw -7, -3 and -5 for one module): the group names
    the pass alone, so one crash stays one group."""
    for n, name in ((1, "before_apply-xla-transforms-7"), (2, "before_algsimp")):
        (tmp_path / f"module_0003.jit_f.000{n}.pipe.after_x.{name}.txt").write_text("")
    (tmp_path / "module_0003.jit_f.0003.pipe.after_x.before_apply-xla-transforms-12.txt").write_text("")
    assert tr.last_pass(str(tmp_path)) == "pipe/apply-xla-transforms"
