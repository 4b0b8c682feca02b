"""What JAX, when a program uses it beside xlasdk, has started in this process. Light: imports
neither jax nor jaxlib (it reads only what is already imported)."""

from __future__ import annotations

import sys

__all__ = ["jax_backends_started"]


def jax_backends_started() -> bool:
    """Whether JAX has started its XLA backends in this process: they run threads, so the process
    must not fork (JAX warns ``os.fork() was called ...`` at every fork from then on)."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    if bridge is None:
        return False
    return bool(getattr(bridge, "_backends", None)) or bool(getattr(bridge, "_at_fork_handler_installed", False))
