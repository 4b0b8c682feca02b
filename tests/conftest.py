"""Shared pytest setup. ``tests`` is a package: test files import ``tests.helpers``."""

from __future__ import annotations

import os
import sys
import tempfile

import pytest

# Bytecode: where PYTHONDONTWRITEBYTECODE is set (to keep source trees free of __pycache__), every
# process the suite starts (the xdist workers, each CLI subprocess, each xlasdk worker process) would
# compile xlasdk's ~64,000 lines from source again (about 0.35 s of CPU each, some hundreds of
# processes a run) and pytest would rewrite every test module again in each worker. The suite's
# processes write their bytecode instead to one directory outside the tree (PYTHONPYCACHEPREFIX), so
# the tree stays as clean as the variable asked. Nothing under test depends on it; an explicit
# PYTHONPYCACHEPREFIX is kept.
if sys.dont_write_bytecode:
    _prefix = sys.pycache_prefix or os.path.join(tempfile.gettempdir(), f"xlasdk-test-pycache-{os.getuid()}")
    sys.pycache_prefix = _prefix
    sys.dont_write_bytecode = False
    os.environ["PYTHONPYCACHEPREFIX"] = _prefix
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# The shared helpers assert too: have pytest explain their failures as it does in test files.
pytest.register_assert_rewrite("tests.helpers")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

# The platform the op tests run on (tests.helpers.run / TEST_DEVICE): ``XLASDK_TEST_PLATFORM=tpu
# python -m pytest -p no:xdist tests/ops`` runs them on a TPU (one process: one process may hold
# the chip). Everything else keeps the CPU as its default platform, here and in the subprocesses the
# tests start (on a TPU machine the TPU would otherwise be the default, and a child could not open
# it while this process holds it); tests marked ``cpu_only`` are skipped on another platform.
TEST_PLATFORM = os.environ.get("XLASDK_TEST_PLATFORM", "cpu").strip().lower() or "cpu"
os.environ.setdefault("XLASDK_PLATFORMS", "cpu")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if TEST_PLATFORM == "cpu":
        return
    for item in items:
        mark = item.get_closest_marker("cpu_only")
        if mark is not None:
            why = mark.kwargs.get("reason") or (mark.args[0] if mark.args else "assumes XLA:CPU")
            item.add_marker(pytest.mark.skip(reason=f"cpu_only: {why}"))


@pytest.fixture
def shared_compile_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> str:
    """Turn xlasdk's on-disk compile cache on (``XLASDK_CACHE_DIR``) for one test, in one directory of this
    run shared by its xdist workers: a module the test compiles again (the same text and options: another
    format of the same program, or ``compare`` after ``compile``) is read back instead of compiled again.

    For modules whose tests are about values, not about compiling (they use it through ``pytestmark``);
    a test that sets ``XLASDK_CACHE_DIR`` itself wins. Every distinct module is still compiled, once."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # .../pytest-N/popen-gwK: the run's directory is the parent
        root = root.parent
    directory = root / "shared-compile-cache"
    directory.mkdir(mode=0o700, exist_ok=True)
    monkeypatch.setenv("XLASDK_CACHE_DIR", str(directory))
    return str(directory)
