"""Public op parameters say what they take: none is typed bare ``Any`` (issue 18).

A parameter that accepts several forms gets a named alias for them (``ComputationLike``,
``ChannelIdLike``, ``LayoutLike``, ``LiteralLike``, ``PaddingLike``, ``DTypeLike``... in
``xlasdk/ops/_core.py``, ``xlasdk/attrs`` and ``xlasdk/types.py``), as the former ``ops.pyi`` named its
``Any``s.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

import xlasdk.ops as ops
from xlasdk import types as xt
from xlasdk.ops import _core


def _public_ops() -> list[tuple[str, Callable[..., Any]]]:
    return [(n, f) for n in ops.__all__ if inspect.isfunction(f := getattr(ops, n)) and n[:1].isupper()]


def _bare_any(fn: Callable[..., Any]) -> list[str]:
    out = []
    for variant in (fn, *typing.get_overloads(fn)):
        for p in inspect.signature(variant).parameters.values():
            if p.annotation in ("Any", Any):
                out.append(p.name)
    return out


def test_no_public_op_parameter_is_typed_bare_any() -> None:
    ops_ = _public_ops()
    assert len(ops_) > 80
    count = sum(len(inspect.signature(f).parameters) for _, f in ops_)
    assert count > 350  # the check reads what it should
    bare = {name: names for name, f in ops_ if (names := _bare_any(f))}
    assert not bare, f"public op parameters typed bare Any (name the forms they take): {bare}"


def test_the_aliases_are_exported_where_the_others_are() -> None:
    for name in ("ComputationLike", "ChannelHandleLike", "ChannelIdLike", "LayoutLike", "LiteralLike",
                 "ConditionalArgument"):
        assert name in _core.__all__ and getattr(_core, name) is not Any
    assert "DTypeLike" in xt.__all__ and xt.DTypeLike is not Any
