"""The ``xlasdk`` command's answers that need no XLA (``--help``, ``VERB --help``, ``version``, usage
errors) import neither numpy, ml_dtypes nor jaxlib (``version``: only jaxlib's StableHLO bindings),
checked in fresh processes; and the parser, now built by ``xlasdk.cli._verbs``, has every verb's
options and texts as before. CPU time is ``bench/cli_start.py``'s business, not a test's."""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = str(Path(__file__).resolve().parents[1])
HEAVY = ("numpy", "ml_dtypes", "jaxlib")
MISSING = "/nonexistent/missing.hlo"


def _probe(code: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter; its last stdout line is a dict literal it prints."""
    full = {**os.environ, "PYTHONPATH": REPO, **(env or {})}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=full, cwd=REPO)
    assert r.returncode == 0, r.stderr
    result: dict[str, Any] = ast.literal_eval(r.stdout.strip().splitlines()[-1])
    return result


def _in_process(argv: list[str]) -> dict[str, Any]:
    """``xlasdk.cli.main(argv)`` in a fresh process: its exit code, stderr, and the heavy modules loaded."""
    code = f"""
import io, sys
from xlasdk.cli import main
err = io.StringIO()
rc = main({argv!r}, stdout=io.StringIO(), stderr=err)
heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})
print({{"rc": rc, "err": err.getvalue(), "heavy": heavy}})
"""
    return _probe(code)


@pytest.mark.parametrize("argv", [
    ["--help"],
    ["run", "--help"],
    ["compare", "--help"],
    ["reduce", "--help"],
    ["nosuchverb"],
    ["run", "--bogus"],
    ["run"],
])
def test_help_and_argparse_errors_import_nothing_heavy(argv: list[str]) -> None:
    res = _in_process(argv)
    assert res["rc"] == (0 if "--help" in argv else 2), res
    assert res["heavy"] == [], res


@pytest.mark.parametrize("argv, message", [
    (["run", MISSING], f"xlasdk run: error: {MISSING}: no such file"),
    (["run", "/nonexistent/missing.pb"], "xlasdk run: error: /nonexistent/missing.pb: no such file"),
    (["run", MISSING, "--repeat", "0"],  # flags come first
     "xlasdk run: error: argument --repeat: must be an integer >= 1, got '0' (see 'xlasdk run --help')"),
    (["run", MISSING, "--timeout", "5"], f"xlasdk run: error: {MISSING}: no such file"),  # spawn mode: no child
    (["inspect", "/nonexistent/missing"], "xlasdk inspect: error: /nonexistent/missing: no such file"),
    (["compare", MISSING], f"xlasdk compare: error: {MISSING}: no such file"),
    (["reduce", MISSING, "-o", "/tmp/min.hlo"],
     "xlasdk reduce: error: give exactly one of --until crash|compile-error[=REGEX]|diverge and --script CMD"),
    (["reduce", MISSING, "-o", "/tmp/min.hlo", "--until", "crash"], f"xlasdk reduce: error: {MISSING}: no such file"),
])
def test_usage_errors_before_loading_import_nothing_heavy(argv: list[str], message: str) -> None:
    """The checks a verb makes before it loads anything run before its module (numpy) is imported:
    the same one-line message as before, exit code 2."""
    res = _in_process(argv)
    assert (res["rc"], res["err"]) == (2, message + "\n"), res
    assert res["heavy"] == [], res


def test_version_imports_only_the_stablehlo_bindings() -> None:
    res = _in_process(["version"])
    assert res["rc"] == 0 and res["err"] == "", res
    jaxlib = [m for m in res["heavy"] if m.split(".")[0] == "jaxlib"]
    # What `version` must import for the StableHLO versions: jaxlib's StableHLO bindings
    # (jaxlib.mlir._mlir_libs._stablehlo), which import jaxlib.mlir.ir, which imports numpy (for its
    # dense-elements attribute builders). Not jaxlib's XLA extension (jaxlib._jax), nor ml_dtypes.
    assert "jaxlib.mlir._mlir_libs._stablehlo" in jaxlib, res
    assert all(m in ("jaxlib", "jaxlib.version") or m.startswith("jaxlib.mlir") for m in jaxlib), res
    assert not any(m.split(".")[0] == "ml_dtypes" for m in res["heavy"]), res


def test_the_version_command_starts_numpy_with_one_blas_thread() -> None:
    """Only the command's own process (main() with no arguments) asks OpenBLAS for one thread (numpy
    comes with the StableHLO bindings; nothing computes with it); a program calling main(["version"])
    keeps its environment, and a variable the user set stays."""
    code = """
import os, sys
from xlasdk.cli import main
sys.argv = ["xlasdk", "version"]
rc = main(ARGV)
print({"rc": rc, "blas": os.environ.get("OPENBLAS_NUM_THREADS")})
"""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    for argv, extra, blas in (("", {}, "1"), ("['version']", {}, None), ("", {"OPENBLAS_NUM_THREADS": "3"}, "3")):
        r = subprocess.run([sys.executable, "-c", code.replace("ARGV", argv)], capture_output=True, text=True,
                           timeout=120, env={**env, **extra, "PYTHONPATH": REPO}, cwd=REPO)
        assert r.returncode == 0, r.stderr
        assert ast.literal_eval(r.stdout.strip().splitlines()[-1]) == {"rc": 0, "blas": blas}, (argv, extra)


def test_the_supervising_parent_imports_nothing_heavy_before_the_fork() -> None:
    """As the command (main() with no arguments), run forks a child for its work: the parent has
    imported neither numpy nor jaxlib when it forks; the child reports the missing file."""
    code = f"""
import io, os, sys
seen = []
real_fork = os.fork
def fork():
    seen.append(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))
    return real_fork()
os.fork = fork
from xlasdk.cli import main
sys.argv = ["xlasdk", "run", {MISSING!r}]
rc = main()
print({{"rc": rc, "forks": seen}})
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": REPO, "XLASDK_CLI_SUPERVISE": "1"}, cwd=REPO)
    assert r.stderr == f"xlasdk run: error: {MISSING}: no such file\n", r.stderr
    assert ast.literal_eval(r.stdout.strip().splitlines()[-1]) == {"rc": 2, "forks": [[]]}


# -- the parser: as it was -----------------------------------------------------------------------------------
def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    choices: dict[str, argparse.ArgumentParser] = action.choices
    return choices


def _options(p: argparse.ArgumentParser) -> list[str]:
    return sorted(o for a in p._actions for o in (a.option_strings or [a.dest]))


#: every verb's options (and positionals), as the parser built in xlasdk/cli/__init__.py had them
_OPTIONS = {
    "devices": ["--debug", "--help", "--platform", "-h"],
    "version": ["--debug", "--help", "-h"],
    "inspect": ["--debug", "--device", "--format", "--help", "--hlo", "--json", "--no-compile", "--optimized",
                "--stablehlo", "--timeout", "--topology", "-h", "file"],
    "convert": ["--debug", "--from", "--help", "--no-check", "--no-compile", "--target-version", "--timeout", "--to",
                "-h", "input", "output"],
    "run": ["--atol", "--debug", "--device", "--devices", "--expect", "--expect-device-kind", "--format", "--help",
            "--input", "--inputs", "--iterations", "--no-debug-options", "--output", "--partitions",
            "--random-inputs", "--record", "--repeat", "--replicas", "--rtol", "--seed", "--timeout", "-h", "file"],
    "compare": ["--against", "--against-jaxlib", "--against-python", "--atol", "--bisect", "--debug", "--device",
                "--device-kind", "--excess-precision",
                "--find-nonfinite", "--format", "--help", "--html", "--input", "--inputs", "--json", "--max-trials",
                "--no-debug-options", "--optimized-hlo", "--outputs", "--precision", "--random-inputs", "--rtol",
                "--seed", "--timeout", "--topology", "--ulps", "--xla-flags", "-h", "file"],
    "reduce": ["--against", "--atol", "--check-timeout", "--debug", "--device", "--excess-precision", "--format",
               "--help", "--input", "--inputs", "--max-time", "--output", "--random-inputs", "--rtol", "--script",
               "--seed", "--topology", "--until", "-h", "-o", "file"],
    "triage": ["--debug", "--device", "--help", "--html", "--json", "--reduce", "--reduce-time", "--repeat",
               "--timeout", "--topology", "-h", "paths"],
    "cache": ["--debug", "--help", "-h", "cache_command"],
}


def test_the_parser_has_every_verb_and_option() -> None:
    from xlasdk.cli import build_parser

    verbs = _subparsers(build_parser())
    assert list(verbs) == ["devices", "version", "inspect", "convert", "run", "compare", "reduce", "triage", "cache",
                           "launch"]
    for verb, options in _OPTIONS.items():
        assert _options(verbs[verb]) == options, verb
    cache = _subparsers(verbs["cache"])
    assert _options(cache["info"]) == ["--debug", "--dir", "--help", "--list", "-h"]
    assert _options(cache["clear"]) == ["--debug", "--dir", "--help", "-h"]
    assert {"-n", "--timeout", "--debug"} <= set(_options(verbs["launch"]))


def test_the_help_texts_and_their_old_names() -> None:
    from xlasdk.cli import _arrays, _compare, _reduce, _run, _verbs, build_parser

    verbs = _subparsers(build_parser())
    run_help = verbs["run"].format_help()
    assert "Compile and run a module (any format, XLA dumps included)" in run_help
    assert "element types:\n  Every XLA array type goes through .npy and .npz files" in run_help
    assert "crashes and --timeout:" in run_help and run_help.rstrip().endswith("2 usage or input error")
    assert verbs["run"].description == _run._RUN_DESCRIPTION and verbs["run"].epilog == _run._RUN_EPILOG
    assert verbs["compare"].description == _compare._COMPARE_DESCRIPTION
    assert "--bisect ops: when the outputs diverge" in verbs["compare"].format_help()
    assert verbs["reduce"].description == _reduce._REDUCE_DESCRIPTION
    assert "Strategies, as XLA's hlo_bisect and C-Reduce use them" in verbs["reduce"].format_help()
    # the names the parser pieces had in the verbs' modules still work
    assert _arrays.add_input_arguments is _verbs.add_input_arguments
    assert _compare.add_parser is _verbs.add_compare_parser and _reduce.add_parser is _verbs.add_reduce_parser
    assert _run._check_run_flags is _verbs.check_run_flags
    p = argparse.ArgumentParser()
    _arrays.add_input_arguments(p)
    assert p.parse_args(["--input", "a=x.npy", "--seed", "3"]).seed == 3
