"""Sharing one client per platform with JAX in this process: :func:`share_with_jax`.

JAX first: nothing to do. ``xs.client(platform)`` (and every device string) uses the client JAX
made for that platform, so ``xs.device_put(jax_array)`` and ``exe(jax_array)`` take JAX's buffers as
they are and ``DeviceArray.to_jax()`` hands xlasdk's outputs to JAX, without copies.

xlasdk first: ``xs.share_with_jax()`` before JAX's first use makes xlasdk's client JAX's backend
(JAX's backend-factory registration, the route of JAX's own plugins). Without it JAX makes a
second client of its own (both work; their arrays cross only through the host), and
``DeviceArray.to_jax()`` says so.
"""

from __future__ import annotations

from .._jaxlib.jax_bridge import give_to_jax
from .device import Client, _default_platform, client

__all__ = ["share_with_jax"]


def share_with_jax(platform: str | None = None) -> Client:
    """Make xlasdk's client of ``platform`` (default: the default platform) JAX's client too.

    Call it before JAX's first use of the platform (``jax.devices()``, a first ``jit``...). After
    it, arrays cross between xlasdk and JAX without copies: ``xs.device_put(jax_array)``,
    ``exe(jax_array)`` and ``DeviceArray.to_jax()``.

    Returns
    -------
    Client
        The shared client.

    Raises
    ------
    XlaSdkError
        When JAX is not installed, or JAX has already made its own client of the platform (then
        nothing is needed the other way round: xlasdk adopts JAX's client when JAX comes first, so
        a fresh process that uses JAX first shares without this call).
    """
    c = client(platform if platform is not None else _default_platform())
    give_to_jax(c.platform, c._c)
    return c
