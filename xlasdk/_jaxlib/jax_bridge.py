"""One PJRT client per platform per process, shared with JAX in either order.

* JAX came first: :func:`jax_backend` finds the client JAX made for a platform in
  ``jax._src.xla_bridge`` without importing JAX (a process that has not imported JAX has no JAX
  client), and xlasdk adopts it.
* xlasdk came first: :func:`give_to_jax` registers xlasdk's client as JAX's backend for that
  platform through JAX's backend-factory registration (``xla_bridge.register_backend_factory``, the
  route JAX's own plugins take), before JAX initializes its backends.

Arrays then cross without a copy: both sides hold jaxlib ``ArrayImpl`` objects of the same client;
:func:`as_jax_array` gives JAX an ``ArrayImpl`` with JAX's own abstract value over the same device
buffer, and :func:`single_device_buffer` takes the buffer of a ``jax.Array`` for xlasdk.

This module and :mod:`xlasdk._jaxlib` are the only places that read JAX's internals.
"""

from __future__ import annotations

import sys
from typing import Any

from ..errors import XlaSdkError

__all__ = ["jax_backend", "jax_backends_initialized", "give_to_jax", "jax_uses", "as_jax_array",
           "single_device_buffer"]

#: platform -> the client :func:`give_to_jax` registered as JAX's backend factory for it
_GIVEN: dict[str, Any] = {}


def _xla_bridge() -> Any | None:
    return sys.modules.get("jax._src.xla_bridge")


def jax_backends_initialized() -> bool:
    """Whether JAX is imported and has made its clients."""
    xb = _xla_bridge()
    return bool(xb is not None and getattr(xb, "_backends", None))


def jax_backend(platform: str) -> Any | None:
    """JAX's client for ``platform`` when JAX has made its clients, else None (JAX is never
    imported or initialized here)."""
    xb = _xla_bridge()
    backends = getattr(xb, "_backends", None) if xb is not None else None
    if not backends:
        return None
    return backends.get(platform)


def give_to_jax(platform: str, client: Any) -> None:
    """Make ``client`` JAX's backend for ``platform`` (imports JAX).

    Raises
    ------
    XlaSdkError
        When JAX has already made its clients with another one for ``platform`` (two clients of
        one platform in one process cannot share arrays: call this before JAX's first use).
    """
    try:
        from jax._src import xla_bridge as xb
    except ImportError as e:
        raise XlaSdkError(f"share_with_jax: JAX is not installed ({e})") from None
    with xb._backend_lock:
        made = dict(xb._backends) if xb._backends else None
    if made is not None:
        if made.get(platform) is client:
            return
        raise XlaSdkError(
            f"share_with_jax: JAX has already made its {platform!r} client (JAX was used before this call), "
            f"so it cannot take xlasdk's; call xs.share_with_jax() before JAX's first use, or let xlasdk "
            f"adopt JAX's client instead: use JAX first, then xlasdk finds its client"
        )
    old = xb._backend_factories.get(platform)
    priority = int(getattr(old, "priority", 0)) if old is not None else (300 if platform == "tpu" else 0)
    xb.register_backend_factory(platform, lambda: client, priority=priority, fail_quietly=False)
    _GIVEN[platform] = client


def jax_uses(platform: str, client: Any) -> bool:
    """Whether JAX uses ``client`` for ``platform``. When :func:`give_to_jax` gave it to JAX and JAX
    has not made its clients yet (this is JAX's first use), JAX makes them now, from the factory
    registered: the client given is then JAX's. Otherwise JAX is neither imported nor started here.

    Raises
    ------
    XlaSdkError
        JAX failed to make its clients.
    """
    if jax_backend(platform) is client:
        return True
    if _GIVEN.get(platform) is not client or jax_backends_initialized():
        return False
    from jax._src import xla_bridge as xb

    try:
        xb.backends()
    except Exception as e:  # noqa: BLE001 - JAX's own error, in one line
        raise XlaSdkError(f"JAX could not make its clients ({type(e).__name__}: {str(e)[:300]})") from None
    return jax_backend(platform) is client


def as_jax_array(buffer: Any, shape: tuple[int, ...], dtype: Any, device: Any) -> Any:
    """A ``jax.Array`` over the same device buffer as the single-device jaxlib array ``buffer``."""
    import jax
    from jax._src import array as jax_array
    from jax._src import core

    aval = core.ShapedArray(shape, dtype)
    sharding = jax.sharding.SingleDeviceSharding(device)
    return jax_array.ArrayImpl(aval, sharding, [buffer], committed=True)


def single_device_buffer(value: Any, device: Any) -> Any | None:
    """The buffer of a single-device ``jax.Array`` that lives on the jaxlib ``device`` itself
    (JAX and xlasdk share its client), else None."""
    if type(value).__name__ != "ArrayImpl" or "jax" not in sys.modules:
        return None
    try:
        arrays = value._arrays
        if arrays is None or len(arrays) != 1 or arrays[0].is_deleted():
            return None
        (where,) = value.sharding.device_set
    except Exception:
        return None
    return arrays[0] if where is device else None
