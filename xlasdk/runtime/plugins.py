"""Finding installed PJRT plugins the way JAX's users get them, without importing JAX.

Four sources, as ``jax._src.xla_bridge`` reads them:

1. ``PJRT_NAMES_AND_LIBRARY_PATHS="name:/path/plugin.so,name2:/path/config.json"`` (a ``.json``
   file holds ``library_path`` and optional ``create_options``);
2. libtpu for ``"tpu"``: ``TPU_LIBRARY_PATH`` when it names a file, else the ``libtpu`` package's
   ``libtpu.so`` (found without importing it), as JAX's ``get_tpu_library_path``;
3. entry points of the groups ``jax_plugins`` (JAX's GPU/TPU wheels: ``jax-cuda12-pjrt`` declares
   ``xla_cuda12 = jax_plugins.xla_cuda12``) and ``xla_plugins``;
4. modules of the namespace packages ``jax_plugins`` / ``xla_plugins`` (``jax_plugins/NAME/``).

JAX imports each plugin module and calls its ``initialize()``, which imports ``jax``; xlasdk does
not: it finds the module's directory and the PJRT library in it (``xla_cuda_plugin.so``...)
without running the module. The platform name comes from the module's name (``xla_cuda12`` ->
``cuda``, ``xla_rocm7`` -> ``rocm``). Nothing is loaded until asked for: ``xs.client("cuda")``,
``xs.devices("cuda")`` or a ``"cuda:0"`` device string load the plugin found for ``cuda``.

A JAX plugin wheel (``jax-cuda12-pjrt``...) is released with each jaxlib and must have jaxlib's
version; another version is refused before loading (``XLASDK_SKIP_PLUGIN_VERSION_CHECK=1`` loads it
anyway). The PJRT C API version is checked by jaxlib when the plugin initializes.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.metadata
import importlib.util
import json
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Final

from .._jaxlib import pjrt
from ..errors import PluginError

__all__ = ["PluginInfo", "plugins", "find_plugin", "install_hint", "preload_gpu_libraries"]

ENV_PLUGINS: Final = "PJRT_NAMES_AND_LIBRARY_PATHS"
ENV_TPU_LIBRARY: Final = "TPU_LIBRARY_PATH"
ENV_SKIP_VERSION_CHECK: Final = "XLASDK_SKIP_PLUGIN_VERSION_CHECK"
_GROUPS: Final = ("jax_plugins", "xla_plugins")
_JAX_WHEEL_RE: Final = re.compile(r"^jax[-_](cuda|rocm|tpu|oneapi)\w*[-_](pjrt|plugin)$", re.IGNORECASE)


@dataclass(frozen=True)
class PluginInfo:
    """One PJRT plugin found on this machine.

    Attributes
    ----------
    name : str
        The platform name it loads under (``"cuda"``, ``"rocm"``...).
    library_path : str or None
        The PJRT plugin library (exports ``GetPjrtApi``); None when none was found.
    source : str
        Where it was found: ``"PJRT_NAMES_AND_LIBRARY_PATHS"``, ``"entry point jax_plugins:xla_cuda12"``
        or ``"namespace package jax_plugins.xla_cuda12"``.
    module : str or None
        The plugin's Python module (never imported by xlasdk).
    distribution, version : str or None
        The installed wheel that provides it, and its version.
    options : dict or None
        Client creation options (``create_options`` of a JSON config).
    problem : str or None
        Why it cannot be loaded (no library, a version mismatch), else None.
    """

    name: str
    library_path: str | None
    source: str
    module: str | None = None
    distribution: str | None = None
    version: str | None = None
    options: dict[str, Any] | None = field(default=None, compare=False)
    problem: str | None = None


def platform_name(module: str) -> str:
    """``jax_plugins.xla_cuda12`` -> ``cuda``; ``xla_rocm7`` -> ``rocm``; other names lower-cased."""
    leaf = module.rsplit(".", 1)[-1].lower()
    name = re.sub(r"^(xla|pjrt|jax)_", "", leaf)
    name = re.sub(r"_(pjrt|plugin)$", "", name)
    name = re.sub(r"\d+$", "", name) or leaf
    if name in ("cpu", "host") or not re.match(r"^[a-z_][a-z0-9_]*$", name):
        name = re.sub(r"\W", "_", leaf)  # "cpu" is the built-in client: keep the module's name
    return name


def _release(version: str) -> tuple[int, ...]:
    parts = []
    for p in version.split(".")[:3]:
        m = re.match(r"\d+", p)
        if m is None:
            break
        parts.append(int(m.group()))
    return tuple(parts)


def version_problem(distribution: str | None, version: str | None) -> str | None:
    """Why a JAX plugin wheel of ``version`` does not fit this jaxlib, or None."""
    if distribution is None or version is None or not _JAX_WHEEL_RE.match(distribution):
        return None
    if os.environ.get(ENV_SKIP_VERSION_CHECK, "").strip() not in ("", "0"):
        return None
    want = pjrt.JAXLIB_VERSION
    if _release(version) == _release(want):
        return None
    return (
        f"{distribution} {version} is built for jaxlib {'.'.join(map(str, _release(version)))}, "
        f"but this is jaxlib {want}: pip install '{distribution}=={want}' "
        f"(or set {ENV_SKIP_VERSION_CHECK}=1 to load it anyway)"
    )


def _find_library(directory: str) -> str | None:
    """The PJRT library in a plugin package directory: ``*plugin*.so`` / ``*pjrt*.so`` first."""
    found = sorted(glob.glob(os.path.join(directory, "*.so"))) + sorted(glob.glob(os.path.join(directory, "*.dylib")))
    if not found:
        found = sorted(glob.glob(os.path.join(directory, "*", "*.so")))
    ranked = sorted(found, key=lambda p: (not re.search(r"pjrt|plugin", os.path.basename(p)), p))
    return ranked[0] if ranked else None


def _module_dir(module: str) -> str | None:
    """The directory of a package, found without importing it (its parent package, a namespace
    package such as ``jax_plugins``, is imported; it runs no code)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError, AttributeError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return str(list(spec.submodule_search_locations)[0])
    if spec.origin and os.path.exists(spec.origin):
        return os.path.dirname(spec.origin)
    return None


def _from_env() -> list[PluginInfo]:
    raw = os.environ.get(ENV_PLUGINS, "")
    found: list[PluginInfo] = []
    for item in filter(None, (x.strip() for x in raw.split(","))):
        name, sep, path = item.partition(os.pathsep)
        src = f"{ENV_PLUGINS} ({item})"
        if not sep or not name or not path:
            bad = f"{ENV_PLUGINS}: expected NAME:PATH, got {item!r}"
            found.append(PluginInfo(name or item, None, src, problem=bad))
            continue
        options: dict[str, Any] | None = None
        problem: str | None = None
        library: str | None = path
        if path.endswith(".json"):
            try:
                with open(path) as f:
                    config = json.load(f)
                library = str(config["library_path"])
                raw_options = config.get("create_options")
                options = dict(raw_options) if raw_options else None
            except (OSError, ValueError, KeyError, TypeError) as e:
                library, problem = None, f"cannot read the plugin config {path}: {e}"
        if library is not None and not os.path.isfile(library):
            problem = f"no such file: {library}"
        found.append(PluginInfo(name.lower(), library, src, options=options, problem=problem))
    return found


def _module_plugin(module: str, source: str, dist: str | None, version: str | None) -> PluginInfo:
    name = platform_name(module)
    directory = _module_dir(module)
    if directory is None:
        return PluginInfo(name, None, source, module, dist, version, problem=f"module {module} is not installed")
    library = _find_library(directory)
    problem = version_problem(dist, version)
    if library is None:
        problem = problem or f"no PJRT library (*.so) in {directory}"
    return PluginInfo(name, library, source, module, dist, version, problem=problem)


def framework_options() -> dict[str, Any]:
    """The client options that name the framework to the plugin, as JAX names itself
    (``ml_framework_name`` / ``ml_framework_version``)."""
    from .._version import __version__

    return {"ml_framework_name": "xlasdk", "ml_framework_version": __version__}


def _from_libtpu() -> PluginInfo | None:
    """libtpu: ``TPU_LIBRARY_PATH`` if set, else the ``libtpu`` package's library (not imported)."""
    env = os.environ.get(ENV_TPU_LIBRARY, "").strip()
    if env:
        src = f"{ENV_TPU_LIBRARY} ({env})"
        problem = None if os.path.isfile(env) else f"{ENV_TPU_LIBRARY} names no file: {env} (unset it or fix the path)"
        return PluginInfo("tpu", env, src, options=framework_options(), problem=problem)
    directory = _module_dir("libtpu")
    if directory is None:
        return None
    version: str | None = None
    try:
        version = importlib.metadata.version("libtpu")
    except importlib.metadata.PackageNotFoundError:
        pass
    library = os.path.join(directory, "libtpu.so")
    problem = None if os.path.isfile(library) else f"the libtpu package at {directory} holds no libtpu.so"
    return PluginInfo("tpu", library, "libtpu package", "libtpu", "libtpu", version,
                      options=framework_options(), problem=problem)


def _discover() -> dict[str, PluginInfo]:
    found: dict[str, PluginInfo] = {}
    for info in _from_env():  # explicit: wins over what is installed
        found.setdefault(info.name, info)
    tpu = _from_libtpu()
    if tpu is not None:
        found.setdefault("tpu", tpu)
    modules: dict[str, tuple[str, str | None, str | None]] = {}
    for group in _GROUPS:
        try:
            eps = importlib.metadata.entry_points(group=group)
        except Exception:  # a broken installed distribution must not break xlasdk
            continue
        for ep in eps:
            dist = getattr(ep, "dist", None)
            modules.setdefault(
                ep.value.split(":")[0].strip(),
                (f"entry point {group}:{ep.name}", getattr(dist, "name", None), getattr(dist, "version", None)),
            )
    for package in _GROUPS:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            continue
        for location in list(spec.submodule_search_locations):
            try:
                entries = sorted(os.listdir(location))
            except OSError:
                continue
            for entry in entries:
                if os.path.isdir(os.path.join(location, entry)) and entry.isidentifier():
                    modules.setdefault(f"{package}.{entry}", (f"namespace package {package}.{entry}", None, None))
    for module, (source, dist, version) in modules.items():
        info = _module_plugin(module, source, dist, version)
        if info.name not in found or (found[info.name].problem and not info.problem):
            found[info.name] = info
    return found


_lock: Final = threading.Lock()
_cache: dict[str, PluginInfo] | None = None


def plugins(refresh: bool = False) -> list[PluginInfo]:
    """The PJRT plugins installed or named in ``PJRT_NAMES_AND_LIBRARY_PATHS``, by name.

    Found once per process (``refresh=True`` looks again). Nothing is imported or loaded.
    """
    global _cache
    with _lock:
        if _cache is None or refresh:
            _cache = _discover()
        return sorted(_cache.values(), key=lambda p: p.name)


def find_plugin(name: str, refresh: bool = False) -> PluginInfo | None:
    """The plugin found for platform ``name`` (``"gpu"``: ``cuda``, else ``rocm``), or None."""
    found = {p.name: p for p in plugins(refresh)}
    if name == "gpu":
        return found.get("cuda") or found.get("rocm")
    return found.get(name)


def install_hint(name: str) -> str:
    """How to get a plugin for ``name``."""
    v = pjrt.JAXLIB_VERSION
    if name in ("cuda", "gpu"):
        return (
            f"pip install 'jax-cuda12-plugin[with-cuda]=={v}' (the PJRT plugin jax-cuda12-pjrt=={v} and the CUDA "
            f"libraries; or jax-cuda12-pjrt=={v} alone with a system CUDA 12), or set "
            f"{ENV_PLUGINS}=cuda:/path/to/xla_cuda_plugin.so"
        )
    if name == "rocm":
        return f"pip install the jax-rocm*-pjrt wheel for jaxlib {v}, or set {ENV_PLUGINS}=rocm:/path/to/plugin.so"
    return f"install its PJRT plugin, or set {ENV_PLUGINS}={name}:/path/to/pjrt_plugin.so"


# The CUDA libraries JAX's CUDA plugin preloads from the nvidia-* wheels (package, library).
_NVIDIA_LIBS: Final = (
    ("cuda_runtime", "libcudart.so.12"), ("cuda_nvrtc", "libnvrtc.so.12"), ("cublas", "libcublasLt.so.12"),
    ("cublas", "libcublas.so.12"), ("nccl", "libnccl.so.2"), ("cuda_cupti", "libcupti.so.12"),
    ("cusparse", "libcusparse.so.12"), ("cusolver", "libcusolver.so.11"), ("cufft", "libcufft.so.11"),
    ("nvshmem", "libnvshmem_host.so.3"), ("cudnn", "libcudnn.so.9"),
)


def preload_gpu_libraries(name: str) -> list[str]:
    """Load the CUDA runtime libraries of the ``nvidia-*`` wheels, as JAX's CUDA plugin does
    before loading ``xla_cuda_plugin.so``; missing ones are skipped (a system CUDA on the loader
    path serves instead). Returns the libraries loaded."""
    if name != "cuda" or not sys.platform.startswith("linux"):
        return []
    roots: list[str] = []
    try:
        spec = importlib.util.find_spec("nvidia")
        if spec is not None and spec.submodule_search_locations:
            roots = list(spec.submodule_search_locations)
    except (ImportError, ValueError):
        return []
    loaded: list[str] = []
    for root in roots:
        for package, lib in _NVIDIA_LIBS:
            path = os.path.join(root, package, "lib", lib)
            if os.path.isfile(path):
                try:
                    ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                    loaded.append(path)
                except OSError:
                    pass
    return loaded


def explain_load_error(name: str, path: str, message: str) -> PluginError:
    """A :class:`PluginError` that says what a jaxlib load/initialize failure means."""
    if name == "tpu" and "lockfile" in message:
        return tpu_in_use(path, message)
    if "Failed to open" in message:
        why = "the file is not a loadable shared library (or a library it needs is missing)"
        if name == "cuda":
            why += "; the CUDA runtime libraries must be installed (nvidia-*-cu12 wheels or a system CUDA)"
    elif "GetPjrtApi not found" in message:
        why = "the library is not a PJRT plugin (it exports no GetPjrtApi)"
    elif "PJRT API" in message and ("Mismatched" in message or "older than" in message or "newer" in message):
        why = (
            f"its PJRT C API version does not match jaxlib {pjrt.JAXLIB_VERSION}'s; install the plugin built "
            f"for jaxlib {pjrt.JAXLIB_VERSION}"
        )
    else:
        why = "loading or initializing it failed"
    detail = re.sub(r"^(loading PJRT plugin .*? from .*?|initializing PJRT plugin '[^']*'): ", "", message)
    return PluginError(f"loading PJRT plugin {name!r} from {path} failed: {why} [{detail}]")


def tpu_in_use(path: str, message: str) -> PluginError:
    """The TPU is held by another process (libtpu's lock file is taken): name the process."""
    from .accelerators import tpu_holders

    pids = tpu_holders()
    who = ("process " + ", ".join(str(p) for p in pids)) if pids else "another process"
    return PluginError(
        f"TPU initialization failed: the TPU is held by {who} (one process at a time may open a TPU, and libtpu "
        f"{path} found its lock file taken); end that process (or wait for it), or use JAX and xlasdk in one "
        f"process, where they share one client [{message}]"
    )


def explain_client_error(name: str, path: str, message: str) -> PluginError:
    """A :class:`PluginError` that says what a failure to create a plugin's client means and what
    to do (a TPU that is absent, or held by another process)."""
    if name == "tpu" and "No jellyfish device found" in message:
        return PluginError(
            f"TPU initialization failed: this machine has no TPU chip (libtpu {path} found none); "
            "to compile for a TPU without one use xs.topology('v5e:1x1') (xlasdk inspect --topology), or run "
            f"on the CPU [{message}]"
        )
    if name == "tpu" and ("lockfile" in message or "already in use" in message):
        return tpu_in_use(path, message)
    return PluginError(f"PJRT plugin {name!r} ({path}) loaded, but creating its client failed: {message}")
