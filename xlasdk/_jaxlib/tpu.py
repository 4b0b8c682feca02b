"""libtpu through jaxlib: the TPU plugin, topologies and compile-only devices.

libtpu compiles for a TPU with no chip attached: ``make_tfrt_tpu_c_api_device_topology(name, ...)``
describes a slice (``"v5e:2x2"``), its ``_make_compile_only_devices()`` belong to a compile-only
client whose ``compile(ir.Module, DeviceList, CompileOptions)`` gives a real, unloaded TPU executable
(optimized HLO, cost and memory figures, ``serialize()``). This module is the only one that calls
those jaxlib entry points.

On a machine without a TPU chip, libtpu asks the cloud's instance metadata server for the slice's
hosts when it initializes and retries for about ten minutes before giving up; JAX sets
``TPU_SKIP_MDS_QUERY=1`` when no chip is on the PCI bus, and so does :func:`ensure_plugin` (with
``TPU_WORKER_HOSTNAMES=localhost``, which it would otherwise complain of on stderr).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Sequence
from typing import Any, Final

from jaxlib import xla_client as _xc

from ..errors import CompileError
from ._pjrt_base import _one_line, _runtime_error
from .mlir import _QuietNativeStderr, hlo_modules_text

__all__ = [
    "ensure_plugin", "parse_topology_name", "make_topology", "topology_devices", "compile_only",
    "unloaded_hlo_text", "device_coords", "device_slice_index", "TopologyNameError",
]

#: libtpu's own pattern for topology names (its error quotes it): ``v5e:2x2``, ``v6e=2x2``,
#: ``v4:2x2x1``, ``v5e:4x4_twisted``.
_NAME: Final = re.compile(r"^([A-Za-z0-9_ ]+)[=_:]([0-9]+(?:x[0-9]+){1,2})(_twisted|_untwisted)?$")
#: the chips one host holds unless told otherwise (libtpu's default ``chips_per_host_bounds``)
_HOST_BOUNDS: Final = (2, 2, 1)


class TopologyNameError(ValueError):
    """A topology name libtpu cannot read."""


def parse_topology_name(name: str) -> tuple[str, tuple[int, int, int]]:
    """``("v5e", (2, 2, 1))`` from ``"v5e:2x2"``; :class:`TopologyNameError` for anything else."""
    m = _NAME.match(name.strip()) if isinstance(name, str) else None
    if m is None:
        raise TopologyNameError(
            f"topology name {name!r} is not of the form GENERATION:CHIPS, such as 'v5e:1x1', 'v5e:2x2', "
            "'v6e:2x2', 'v5p:2x2x1' or 'v4:2x2x1' (the names of jax.experimental.topologies.get_topology_desc)"
        )
    dims = [int(x) for x in m.group(2).split("x")]
    if any(d < 1 for d in dims):
        raise TopologyNameError(f"topology name {name!r}: every dimension must be at least 1")
    while len(dims) < 3:
        dims.append(1)
    return m.group(1), (dims[0], dims[1], dims[2])


def ensure_plugin(path: str, *, chips_present: bool) -> None:
    """Load and initialize libtpu as the PJRT plugin ``"tpu"`` unless it is (JAX and xlasdk then
    share it: JAX's ``make_tpu_client`` does the same checks). Without a chip on the PCI bus,
    ``TPU_SKIP_MDS_QUERY=1`` keeps libtpu from waiting minutes for a cloud metadata server, and
    ``ALLOW_MULTIPLE_LIBTPU_LOAD=1`` lets several processes compile at once (the lock file libtpu
    takes otherwise guards a chip there is none of)."""
    if not chips_present:  # no cloud metadata to ask for the slice's hosts: this host alone
        os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
        os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
        # libtpu's lock file guards the chip; without one it would keep a second process (a second
        # test worker, a second compile) from compiling at all
        os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    # Without a chip libtpu's start-up complains on stderr of what only a TPU VM has (its accelerator
    # type); the failures that matter come back as errors, so that noise is dropped there.
    quiet = contextlib.nullcontext() if chips_present else _QuietNativeStderr()
    try:
        with quiet:
            if not _xc.pjrt_plugin_loaded("tpu"):
                _xc.load_pjrt_plugin_dynamically("tpu", path)
            if not _xc.pjrt_plugin_initialized("tpu"):
                _xc.initialize_pjrt_plugin("tpu")
    except Exception as e:
        raise _runtime_error(f"loading PJRT plugin 'tpu' from {path}", e) from e


def make_topology(name: str, num_slices: int = 1) -> Any:
    """libtpu's ``DeviceTopology`` for ``name`` (the plugin must be initialized), of ``num_slices``
    slices joined by the data-center network (multi-slice, libtpu's ``megascale``: device ids
    ``100000 * (slice + 1) + i``, each device's ``slice_index``).

    A slice smaller than one host's default bounds (``v5e:1x1``) is given bounds of its own size.

    Raises
    ------
    TopologyNameError
        When libtpu does not know the name.
    """
    _, dims = parse_topology_name(name)
    bounds = [min(d, h) for d, h in zip(dims, _HOST_BOUNDS, strict=True)]
    try:
        return _xc.make_tfrt_tpu_c_api_device_topology(
            name.strip(), chip_config_name="default", chips_per_host_bounds=bounds, num_slices=num_slices
        )
    except Exception as e:
        slices = f" of {num_slices} slices" if num_slices != 1 else ""
        raise TopologyNameError(f"libtpu refuses the topology {name!r}{slices}: {_one_line(e)}") from None


def topology_devices(topology: Any) -> tuple[Any, list[Any]]:
    """``(compile-only client, devices in id order)`` of a topology."""
    devices = sorted(topology._make_compile_only_devices(), key=lambda d: int(d.id))
    return devices[0].client, devices


def device_coords(device: Any) -> tuple[int, int, int] | None:
    """A TPU device's chip coordinates in its slice (``TpuDevice.coords``), or None."""
    c = getattr(device, "coords", None)
    try:
        x, y, z = (int(v) for v in c)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        return None
    return x, y, z


def device_slice_index(device: Any) -> int:
    """The slice of a multi-slice topology's device (``TpuDevice.slice_index``); 0 in one slice."""
    try:
        return int(getattr(device, "slice_index", 0) or 0)
    except (TypeError, ValueError):
        return 0


def compile_only(client: Any, module_text: str | bytes, devices: Sequence[Any], options: Any, name: str) -> Any:
    """Compile StableHLO for compile-only devices: an unloaded executable (not runnable).

    Raises
    ------
    CompileError
        When the module does not parse or XLA rejects it.
    """
    from . import mlir

    try:
        module = mlir.parse_module(module_text)
    except Exception as e:
        raise CompileError(f"compiling {name!r} failed: the module does not parse: {_one_line(e)}") from None
    try:
        return client.compile(module, _xc.DeviceList(tuple(devices)), options)
    except Exception as e:
        msg = str(e).strip()
        if "Suspected Python Code Location" in msg:
            msg = msg.split("Suspected Python Code Location")[0].strip()
        raise CompileError(f"compiling {name!r} failed: {msg}") from None


def unloaded_hlo_text(executable: Any, *, large_constants: bool = True) -> str:
    """The optimized HLO of an unloaded executable (its modules, with metadata; large constants
    written out when ``large_constants``)."""
    try:
        modules = executable.hlo_modules()
    except Exception as e:
        raise _runtime_error("hlo_modules", e) from e
    return hlo_modules_text(modules, large_constants=large_constants)
