"""xlasdk's version (the package face's ``__version__``; ``pyproject.toml`` carries the same string).

A leaf module, so that modules of every layer (the verified-load cache's code stamp, ``xlasdk
version``) read it without importing the package face.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
