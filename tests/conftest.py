"""Shared pytest setup: make tests/helpers.py importable from every test directory."""

from __future__ import annotations

import os
import sys

import pytest

# The shared helpers assert too: have pytest explain their failures as it does in test files.
pytest.register_assert_rewrite("helpers")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
