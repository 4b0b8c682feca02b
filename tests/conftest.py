"""Shared pytest setup. ``tests`` is a package: test files import ``tests.helpers``."""

from __future__ import annotations

import os

import pytest

# The shared helpers assert too: have pytest explain their failures as it does in test files.
pytest.register_assert_rewrite("tests.helpers")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
