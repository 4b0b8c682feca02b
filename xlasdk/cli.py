"""The ``xlasdk`` command (argparse over the public API)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="xlasdk", description="Build, inspect, convert and run XLA computations.")
    p.add_argument("--debug", action="store_true", help="show Python tracebacks on errors")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the xlasdk, jaxlib and StableHLO versions")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``xlasdk`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    if args.command == "version":
        from . import __version__
        from ._jaxlib import mlir

        print(f"xlasdk {__version__}\njaxlib {mlir.JAXLIB_VERSION}\nstablehlo {mlir.stablehlo_current_version()}")
        return 0
    return 2  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
