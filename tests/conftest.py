"""Shared pytest setup. ``tests`` is a package: test files import ``tests.helpers``."""

from __future__ import annotations

import os

import pytest

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
