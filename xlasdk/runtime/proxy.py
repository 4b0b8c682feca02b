"""The ``proxy`` platform: devices of a remote IFRT runtime (Pathways) through jaxlib's IFRT Proxy client.

``xs.devices("proxy")``, ``xs.client("proxy")``, a ``"proxy:0"`` device string (``--device proxy:0``)
or ``XLASDK_PLATFORMS=proxy`` (JAX's ``JAX_PLATFORMS=proxy``) connect to the proxy server named by
``XLASDK_BACKEND_TARGET`` (else JAX's ``JAX_BACKEND_TARGET``), ``grpc://HOST:PORT``, waiting at most
``XLASDK_PROXY_TIMEOUT`` seconds (default 60).

Fail closed: the connection is made first in xlasdk's worker process, so that a server that is
absent, refuses, or makes jaxlib die costs the worker, not this process; only when the worker
connected does this process connect, with no Python callback (a Python connection callback makes
jaxlib end the process at exit). The devices' ``device_kind`` (``"TPU v5 lite"``) says what hardware
the server runs: the precision model judges a TPU behind the proxy as a TPU
(:func:`xlasdk.runtime.accelerators.model_platform`).
"""

from __future__ import annotations

import os
import re
from typing import Any, Final

from .._jaxlib import isolated
from .._jaxlib import proxy as _proxy
from ..errors import PluginError

__all__ = ["ENV_TARGET", "ENV_TIMEOUT", "target", "proxy_client"]

ENV_TARGET: Final = "XLASDK_BACKEND_TARGET"
_JAX_TARGET: Final = "JAX_BACKEND_TARGET"
ENV_TIMEOUT: Final = "XLASDK_PROXY_TIMEOUT"
DEFAULT_TIMEOUT: Final = 60
_ADDRESS: Final = re.compile(r"^([a-z][a-z0-9+.-]*)://(\S+)$")


def target() -> tuple[str, str] | None:
    """``(address, variable)`` of the proxy server, from ``XLASDK_BACKEND_TARGET`` else
    ``JAX_BACKEND_TARGET``; None when neither is set."""
    for var in (ENV_TARGET, _JAX_TARGET):
        raw = os.environ.get(var, "").strip()
        if raw:
            return raw, var
    return None


def _timeout() -> int:
    raw = os.environ.get(ENV_TIMEOUT, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        seconds = int(raw)
    except ValueError:
        seconds = 0
    if seconds < 1:
        raise PluginError(f"platform 'proxy': {ENV_TIMEOUT} must be a whole number of seconds >= 1, got {raw!r}")
    return seconds


def proxy_client() -> Any:
    """A jaxlib client of the proxy server's devices, connected in the worker first.

    Raises
    ------
    PluginError
        No server address set, an address that is not ``TRANSPORT://HOST:PORT``, no proxy client in
        this jaxlib, or the server could not be reached within the timeout (the message names the
        platform, the address and the variable to set).
    """
    found = target()
    if found is None:
        raise PluginError(
            f"platform 'proxy' (IFRT Proxy, e.g. Pathways) needs the address of its proxy server: set "
            f"{ENV_TARGET} (or JAX's {_JAX_TARGET}) to grpc://HOST:PORT"
        )
    address, var = found
    m = _ADDRESS.match(address)
    if m is None or m.group(1) not in _proxy.TRANSPORTS:
        raise PluginError(
            f"platform 'proxy': {var}={address!r} is not an IFRT proxy server address: expected "
            f"TRANSPORT://HOST:PORT with a transport of {', '.join(_proxy.TRANSPORTS)} (grpc://localhost:29000)"
        )
    if not _proxy.available():
        raise PluginError("platform 'proxy': this jaxlib has no IFRT Proxy client (jaxlib._ifrt_proxy)")
    seconds = _timeout()
    where = f"the IFRT proxy server {address} ({var})"
    try:
        isolated.request("xlasdk.runtime.proxy:connect_in_worker", address, seconds, timeout=seconds + 30.0)
    except isolated.Failed as e:
        raise PluginError(
            f"platform 'proxy': cannot connect to {where} within {seconds} s ({ENV_TIMEOUT}): {e.message}; "
            "check that the server runs and the address"
        ) from None
    except isolated.WorkerDied as e:
        raise PluginError(
            f"platform 'proxy': connecting to {where} ended xlasdk's worker process ({e.reason}); this process "
            "did not connect"
        ) from None
    try:
        return _proxy.connect(address, seconds)
    except PluginError as e:
        raise PluginError(f"platform 'proxy': the worker connected to {where}, this process could not: {e}") from None


def connect_in_worker(address: str, seconds: int) -> tuple[str, list[str]]:  # pragma: no cover - in the worker
    """Connect to the proxy server in the worker; ``(platform, device kinds)`` of its devices."""
    try:
        client = _proxy.connect(address, seconds)
    except PluginError as e:
        raise isolated.Failed("connect", str(e)) from None
    summary = _proxy.client_summary(client)
    del client
    return summary
