"""The package face: ``import xlasdk`` is lazy (PEP 562), every public name resolves, and the answers
of the command that need no XLA (``--help``, ``version``, usage errors) never load jaxlib's XLA
extension or ml_dtypes."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import xlasdk

HEAVY = ("jaxlib._jax", "jaxlib.xla_client", "ml_dtypes", "numpy")


def _loaded_after(code: str) -> list[str]:
    """The heavy modules a fresh interpreter has loaded after running ``code``."""
    probe = f"{code}\nimport sys\nprint(sorted(m for m in sys.modules if m in {HEAVY!r}))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    return list(ast.literal_eval(out.stdout.strip().splitlines()[-1]))


def test_import_xlasdk_loads_nothing_heavy() -> None:
    assert _loaded_after("import xlasdk") == []


@pytest.mark.parametrize("argv", [["--help"], ["version"], ["run", "/nonexistent/m.hlo"], ["run", "--bogus"]])
def test_answers_without_xla(argv: list[str]) -> None:
    code = f"from xlasdk.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass"
    loaded = _loaded_after(code)
    assert "jaxlib._jax" not in loaded and "ml_dtypes" not in loaded, loaded


def test_every_public_name_resolves_and_the_type_checking_imports_match() -> None:
    for name in xlasdk.__all__:
        assert getattr(xlasdk, name) is not None, name
    assert set(xlasdk.__all__) <= set(dir(xlasdk))
    # dir() shows the public names and submodules, not the package's own helpers (a new user's find)
    assert not {"Any", "TYPE_CHECKING", "annotations", "importlib"} & set(dir(xlasdk))
    importlib.import_module("xlasdk.ops")
    assert "ops" in dir(xlasdk)
    tree = ast.parse(Path(xlasdk.__file__).read_text())
    typed: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            for a in node.names:
                typed[a.asname or a.name] = (node.module, a.name) if node.module else (a.name, None)
    assert typed == xlasdk._LAZY  # what type checkers see is what the package hands out
    assert set(typed) | {"__version__"} == set(xlasdk.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        xlasdk.nope  # noqa: B018


@pytest.mark.parametrize("sub", ["formats", "sharding", "ops", "reference", "distributed"])
def test_the_documented_subpackages_are_there_after_import_xlasdk(sub: str) -> None:
    """``import xlasdk as xs`` then ``xs.formats.read_jax_export(...)`` / ``xs.sharding.parse_replica_groups``
    (README): each subpackage the README names answers on first use, in a fresh interpreter where
    nothing imported it before (a fresh user's find: ``xs.formats`` raised AttributeError)."""
    code = f"import xlasdk as xs\nm = xs.{sub}\nprint(m.__name__)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == f"xlasdk.{sub}", proc.stderr[-2000:]


def test_no_public_function_shares_its_name_with_a_submodule() -> None:
    """Importing ``xlasdk.NAME`` sets the package attribute NAME to the module: a public function of
    that name (``xs.reduce`` and a module ``xlasdk/reduce.py``) would be replaced by the module."""
    import importlib.util

    for name, (_, attr) in xlasdk._LAZY.items():
        if attr is not None:
            assert importlib.util.find_spec(f"xlasdk.{name}") is None, name
