"""Which accelerators this machine has, and which platform is the default: as JAX decides it.

The default platform is the first of these that applies:

1. ``XLASDK_PLATFORMS`` (else JAX's ``JAX_PLATFORMS``): a comma-separated list such as ``"tpu"``,
   ``"cpu"`` or ``"tpu,cpu"``; its first entry is the default platform, and an entry that cannot be
   opened is an error when it is used, never a silent move to the CPU;
2. a plugin added in this process with ``xs.load_pjrt_plugin``;
3. an accelerator that is really attached and whose plugin is installed: a TPU chip on the PCI bus
   (Google's vendor id and a TPU device id, as JAX's ``hardware_utils`` reads ``/sys``) with libtpu,
   or an NVIDIA device node with a CUDA plugin;
4. the CPU.

A machine with libtpu but no chip (a laptop, CI with the ``tpu`` extra) therefore keeps the CPU as
its default and never initializes the TPU runtime unless asked (``xs.devices("tpu")``); it can still
compile for a TPU with :func:`xlasdk.topology`.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable
from typing import Final

__all__ = [
    "tpu_chips", "tpu_holders", "nvidia_gpu_visible", "requested_platforms", "attached_accelerator", "ENV_PLATFORMS",
    "model_platform",
]

ENV_PLATFORMS: Final = "XLASDK_PLATFORMS"
_JAX_PLATFORMS: Final = "JAX_PLATFORMS"
_GOOGLE_PCI_VENDOR: Final = "0x1ae0"
#: TPU PCI device ids and their generations (JAX's ``hardware_utils._TPU_PCI_DEVICE_IDS``)
TPU_PCI_DEVICES: Final = {
    "0x0027": "v3", "0x0056": "plc", "0x005e": "v4", "0x0062": "v5p", "0x0063": "v5e", "0x006f": "v6e",
    "0x0076": "tpu7x",
}
_NVIDIA_NODES: Final = ("/dev/nvidia0", "/dev/nvidiactl", "/dev/dxg")


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read(64).strip()
    except OSError:
        return ""


def tpu_chips(root: str = "/sys/bus/pci/devices") -> tuple[int, str | None]:
    """``(number of TPU chips on the PCI bus, their generation)``, read from ``/sys`` (no libtpu)."""
    n, generation = 0, None
    for vendor in glob.glob(os.path.join(root, "*", "vendor")):
        if _read(vendor) != _GOOGLE_PCI_VENDOR:
            continue
        kind = TPU_PCI_DEVICES.get(_read(os.path.join(os.path.dirname(vendor), "device")))
        if kind is not None:
            n, generation = n + 1, kind
    return n, generation


#: what a process that holds a TPU has open: its device nodes, and libtpu's lock file
_TPU_FILES: Final = ("/dev/accel", "/dev/vfio/", "/tmp/libtpu_lockfile")


def tpu_holders(proc: str = "/proc") -> list[int]:
    """The other processes that hold a TPU (have its device nodes or libtpu's lock file open),
    read from ``/proc/PID/fd`` (only processes this user may inspect are seen)."""
    me, found = os.getpid(), []
    for fd_dir in glob.glob(os.path.join(proc, "[0-9]*", "fd")):
        pid = int(fd_dir.split(os.sep)[-2])
        if pid == me:
            continue
        try:
            links = [os.readlink(os.path.join(fd_dir, fd)) for fd in os.listdir(fd_dir)]
        except OSError:
            continue
        if any(link.startswith(_TPU_FILES) for link in links):
            found.append(pid)
    return sorted(found)


def nvidia_gpu_visible() -> bool:
    """Whether an NVIDIA device node exists (``/dev/nvidia0``...), as JAX checks."""
    return any(os.path.exists(p) for p in _NVIDIA_NODES)


def requested_platforms() -> tuple[tuple[str, ...], str] | None:
    """The platforms ``XLASDK_PLATFORMS`` (else ``JAX_PLATFORMS``) asks for, and the variable's
    name; None when neither is set."""
    for var in (ENV_PLATFORMS, _JAX_PLATFORMS):
        raw = os.environ.get(var, "").strip()
        if raw:
            names = tuple(p.strip().lower() for p in raw.split(",") if p.strip())
            if names:
                return names, var
    return None


def attached_accelerator(installed: Callable[[], set[str]]) -> str | None:
    """The platform of an accelerator attached to this machine whose plugin is among
    ``installed()`` (asked only when the hardware is there: plugin discovery reads every installed
    distribution's entry points)."""
    tpu, gpu = tpu_chips()[0] > 0, nvidia_gpu_visible()
    if not (tpu or gpu):
        return None
    names = installed()
    if tpu and "tpu" in names:
        return "tpu"
    if gpu and "cuda" in names:
        return "cuda"
    return None


#: platforms whose devices are the hardware their name says (the others: read the device kind)
_HARDWARE_PLATFORMS: Final = {"cpu": "cpu", "host": "cpu", "cuda": "gpu", "rocm": "gpu", "gpu": "gpu", "tpu": "tpu"}


def model_platform(platform: str, device_kind: str) -> str:
    """The hardware whose numerics a device has (``"cpu"``, ``"gpu"`` or ``"tpu"``): its platform's,
    or, for a device reached through another client (the ``proxy`` platform: IFRT Proxy, Pathways)
    or an unknown plugin, the one its ``device_kind`` names: ``"TPU v5 lite"`` is a TPU, an
    ``"NVIDIA ..."`` or ``"AMD ..."`` kind a GPU. A kind that names none of them is the CPU, whose
    model is the strictest (an unknown device is never judged with a TPU's looser bounds)."""
    known = _HARDWARE_PLATFORMS.get(platform.strip().lower())
    if known is not None:
        return known
    kind = device_kind.strip().lower()
    if kind.startswith("tpu") or re.search(r"\btpu\b", kind):
        return "tpu"
    if re.search(r"\b(nvidia|tesla|geforce|quadro|amd|radeon|instinct)\b", kind):
        return "gpu"
    return "cpu"
