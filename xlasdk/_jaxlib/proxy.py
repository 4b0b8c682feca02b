"""jaxlib's IFRT Proxy client (``jaxlib._ifrt_proxy``): devices of a remote IFRT runtime (Pathways).

jaxlib 0.10.2 and 0.12.1 expose the same surface: ``get_client(proxy_server_address: str,
options: ClientConnectionOptions) -> Client`` and ``ClientConnectionOptions`` with the fields
``connection_timeout_in_seconds``, ``initialization_data`` (a dict of bytes / bool / int values),
``on_disconnect`` and ``on_connection_update`` (Python callables). JAX 0.12's ``proxy`` backend calls
``get_client(jax_backend_target, ClientConnectionOptions())``; JAX 0.10.2 registers no ``proxy`` backend
(Pathways' own package does).

Measured without a server (2026-12-06): an address without a transport fails at once
(``INVALID_ARGUMENT: IFRT proxy server address must be '<transport-type>://<backend-address>'``), an
unknown transport too (``NOT_FOUND: IFRT proxy transport 'http' not found; available transports are:
grpc``); ``grpc://HOST:PORT`` with nothing there retries for ``connection_timeout_in_seconds`` and then
raises ``INVALID_ARGUMENT: Unable to establish connection to ifrt_proxy server ...`` (0.10.2: "Invalid
credentials", 0.12.1: "grpc::ChannelCredentials argument is null"). With a Python
``on_connection_update`` / ``on_disconnect`` callback set, the process then dies at exit (0.10.2:
``terminate called ...``, SIGABRT; 0.12.1: SIGSEGV), after ``get_client`` returned: so xlasdk never
sets one.
"""

from __future__ import annotations

import importlib
from typing import Any, Final

from ..errors import PluginError
from ._pjrt_base import _one_line

__all__ = ["available", "connect", "client_summary"]

#: the transports this jaxlib's proxy client knows (``grpc``)
TRANSPORTS: Final = ("grpc",)


def _module() -> Any:
    try:
        return importlib.import_module("jaxlib._ifrt_proxy")
    except ImportError:
        return None


def available() -> bool:
    """Whether this jaxlib has the IFRT Proxy client."""
    return _module() is not None


def connect(address: str, timeout: int) -> Any:
    """``_ifrt_proxy.get_client(address, options)``: a client of the proxy server's devices.

    No Python callback is set (one makes the process die at exit); ``timeout`` is the connection
    timeout in seconds.

    Raises
    ------
    PluginError
        No proxy client in this jaxlib, or the connection failed (jaxlib's reason in one line).
    """
    mod = _module()
    if mod is None:
        raise PluginError("platform 'proxy': this jaxlib has no IFRT Proxy client (jaxlib._ifrt_proxy)")
    options = mod.ClientConnectionOptions()
    options.connection_timeout_in_seconds = int(timeout)
    try:
        return mod.get_client(address, options)
    except Exception as e:
        raise PluginError(_one_line(e)) from None


def client_summary(client: Any) -> tuple[str, list[str]]:
    """``(platform, device kinds)`` of a client, for the worker's answer."""
    return str(client.platform), sorted({str(d.device_kind) for d in client.devices()})
