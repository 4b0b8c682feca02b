"""Versions of the installed jaxlib and its StableHLO, read without loading XLA.

``xlasdk version`` answers from here: the jaxlib version from the package metadata, the StableHLO
versions from jaxlib's small StableHLO extension module (``jaxlib.mlir._mlir_libs._stablehlo``,
about 70 ms), not from jaxlib's XLA extension (``jaxlib._jax``) nor ml_dtypes, which the rest of
xlasdk needs and which take most of a second to import. A leaf module.
"""

from __future__ import annotations

import importlib.metadata


def jaxlib_version() -> str:
    """The installed jaxlib's version (``"unknown"`` when its metadata is missing)."""
    try:
        return importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def stablehlo_versions() -> tuple[str, str]:
    """``(current, minimum)``: the StableHLO version jaxlib writes, and the oldest its portable
    artifacts can target."""
    from jaxlib.mlir._mlir_libs import _stablehlo

    return str(_stablehlo.get_current_version()), str(_stablehlo.get_minimum_version())
