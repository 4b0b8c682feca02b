"""``compare --against-jaxlib V --optimized-hlo --topology NAME``: the environment xlasdk makes for
``--against-jaxlib`` holds jaxlib alone, so its TPU compile fails for want of libtpu; the user is told
to make one with libtpu and give ``--against-python`` (a new user was told to ``pip install
'xlasdk[tpu]'``, which they had, in an environment they cannot reach)."""

from __future__ import annotations

import argparse
import io
from typing import Any

import pytest

from xlasdk.cli._common import UsageError
from xlasdk.cli._compare_optimized import compare_optimized
from xlasdk.errors import OtherEnvironmentError


def _args(**kw: Any) -> argparse.Namespace:
    base = {"file": "m.hlo", "topology": "v5e:1x1", "against_jaxlib": "0.12.0.1", "xla_flags": None, "json": None,
            "dump_to": None, "no_debug_options": True, "debug_options": None}
    return argparse.Namespace(**{**base, **kw})


def _failing(*a: Any, **k: Any) -> Any:
    raise OtherEnvironmentError("in the other environment: compiling for a TPU needs libtpu: pip install "
                                "'xlasdk[tpu]'")


def test_the_missing_libtpu_of_a_made_environment_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    import xlasdk.reference._other_env as oe

    monkeypatch.setattr(oe, "compare_optimized_hlo", _failing)
    with pytest.raises(UsageError, match=r"holds jaxlib alone, no libtpu.*--against-python D/bin/python"):
        compare_optimized(_args(), object(), object(), io.StringIO())
    with pytest.raises(UsageError, match=r"needs libtpu") as info:  # --against-python: the error as it came
        compare_optimized(_args(against_jaxlib=None), object(), object(), io.StringIO())
    assert "holds jaxlib alone" not in str(info.value)
