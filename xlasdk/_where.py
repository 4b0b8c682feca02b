"""Where an error happened in the user's code: the innermost frame outside the xlasdk package.

Errors of xlasdk end with `` — at file.py:42``, naming the user's line (see
:func:`xlasdk.errors`). Leaf module: it imports nothing from xlasdk.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["PKG_DIR", "user_frame", "where"]

#: The xlasdk package directory (with a trailing separator): frames under it are not the user's.
PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_frame() -> tuple[str, int]:
    """File name and line of the innermost caller outside the xlasdk package."""
    f: Any = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(PKG_DIR):
        f = f.f_back
    if f is None:  # pragma: no cover - only when called from inside xlasdk with no user frame
        return ("<unknown>", 0)
    return (f.f_code.co_filename, f.f_lineno)


def where() -> str:
    """`` — at file.py:42`` for error messages, naming the user's line."""
    fname, line = user_frame()
    return f" — at {os.path.basename(fname)}:{line}"
