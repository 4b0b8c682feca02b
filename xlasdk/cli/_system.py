"""The ``devices``, ``version``, ``launch`` and ``cache`` verbs of the ``xlasdk`` command.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from typing import IO, Any

from ._common import _ERR_STREAM, EXIT_OK, UsageError, _api, _human_bytes, _quiet_native_logs, _stage, _table


# -- devices / version --------------------------------------------------------------------------------
def _cmd_devices(args: argparse.Namespace, out: IO[str]) -> int:
    rt = _api()
    from xlasdk import distributed
    from xlasdk.runtime.device import UnknownDeviceError

    _stage("client")
    joined = False
    if os.environ.get(distributed.ENV_COORDINATOR) and not distributed.is_initialized():
        # Under 'xlasdk launch' (or with the variables set by hand): join the job, list every process's devices.
        distributed.initialize()
        joined = True
    try:
        with _quiet_native_logs(not args.debug):
            try:
                devs = rt.devices(args.platform)
            except UnknownDeviceError:
                known = ", ".join(str(d) for d in rt.devices())
                raise UsageError(f"--platform {args.platform}: no such platform; the devices are {known}") from None
        if distributed.is_initialized():
            me = distributed.process_index()
            out.write(f"process {me} of {distributed.process_count()}\n")
            rows = [["DEVICE", "PLATFORM", "ID", "PROCESS", "LOCAL", "KIND"]]
            for d in devs:
                local = "yes" if d.process_index == me else "no"
                rows.append([str(d), str(d.platform), str(d.id), str(d.process_index), local, str(d.device_kind)])
        else:
            rows = [["DEVICE", "PLATFORM", "ID", "KIND"]]
            for d in devs:
                rows.append([str(d), str(d.platform), str(d.id), str(d.device_kind)])
        _table(rows, out)
        out.flush()
    finally:
        if joined:
            distributed.shutdown()
    return EXIT_OK


class _BinarySink:
    """A binary stream writing into a text stream (``main(stdout=StringIO())``)."""

    def __init__(self, text: IO[str]) -> None:
        self.text = text

    def write(self, data: bytes) -> int:
        self.text.write(data.decode("utf-8", "replace"))
        return len(data)

    def flush(self) -> None:
        self.text.flush()


def _binary(stream: IO[str]) -> Any:
    buffer = getattr(stream, "buffer", None)
    return buffer if buffer is not None else _BinarySink(stream)


def _cmd_launch(args: argparse.Namespace, out: IO[str]) -> int:
    from xlasdk.launch import command_for, launch

    if args.num_processes < 1:
        raise UsageError(f"-n must be >= 1, got {args.num_processes}")
    if args.local_device_count is not None and args.local_device_count < 1:
        raise UsageError(f"--local-device-count must be >= 1, got {args.local_device_count}")
    if args.grace < 0:
        raise UsageError(f"--grace must be >= 0 seconds, got {args.grace:g}")
    try:
        command = command_for(args.launch_module, args.launch_script, args.launch_args)
    except ValueError as e:
        raise UsageError(str(e)) from None
    out.flush()
    result = launch(
        command, args.num_processes, timeout=args.timeout, local_device_count=args.local_device_count,
        join_timeout=args.join_timeout, keep_going=args.keep_going, grace=args.grace, prefix=not args.no_prefix,
        stdout=_binary(out), stderr=_binary(_ERR_STREAM[0] if _ERR_STREAM else sys.stderr),
    )
    return result.returncode


def _one_blas_thread() -> None:
    """In the ``xlasdk version`` process (the command, not a program calling ``main()``): jaxlib's
    StableHLO bindings import numpy, whose OpenBLAS starts a thread pool when it loads (about 0.07 s
    of CPU); nothing in that process computes with it, so one thread does. Unless the variable is set."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _cmd_version(args: argparse.Namespace, out: IO[str]) -> int:
    from xlasdk._jaxlib.versions import jaxlib_version, stablehlo_versions
    from xlasdk._version import __version__

    # What this needs to import: jaxlib's StableHLO bindings (jaxlib.mlir._mlir_libs._stablehlo), which
    # import jaxlib.mlir.ir, which imports numpy; not jaxlib's XLA extension (jaxlib._jax) nor ml_dtypes.
    current, minimum = stablehlo_versions()
    # That imported the jaxlib package, and with it jaxlib.version: its version, without reading the
    # installed packages' metadata (importlib.metadata) as jaxlib_version() does.
    jaxlib = sys.modules.get("jaxlib.version")
    jaxlib_v = getattr(jaxlib, "__version__", None)
    out.write(
        f"xlasdk {__version__}\njaxlib {jaxlib_v if isinstance(jaxlib_v, str) else jaxlib_version()}\n"
        f"stablehlo {current} (writes portable artifacts back to {minimum})\npython {sys.version.split()[0]}\n"
    )
    return EXIT_OK


# -- cache --------------------------------------------------------------------------------------------
def _cmd_cache(args: argparse.Namespace, out: IO[str]) -> int:
    import warnings

    with warnings.catch_warnings(record=True) as caught:  # a cache that is off: one plain line each, not a traceback
        warnings.simplefilter("always")
        _cache_verb(args, out)
    err = _ERR_STREAM[0] if _ERR_STREAM else sys.stderr
    for w in caught:
        err.write(f"xlasdk cache: warning: {w.message}\n")
    return EXIT_OK


def _jaxlib_envs(directory: str) -> list[tuple[str, int]]:
    """The environments ``--against-jaxlib`` made in ``directory`` (those it finished: the marker file
    in them), each with its size in bytes."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    found = []
    for name in names:
        path = os.path.join(directory, name)
        if name.startswith("jaxlib-") and os.path.isfile(os.path.join(path, ".xlasdk-env-complete")):
            size = sum(os.lstat(os.path.join(d, f)).st_size for d, _, files in os.walk(path) for f in files)
            found.append((path, size))
    return found


def _cache_verb(args: argparse.Namespace, out: IO[str]) -> None:
    from xlasdk._cache import CacheInfo, CompileCache

    cache = CompileCache(args.dir)
    loads = CompileCache(os.path.join(cache.directory, "loads"))  # xlasdk.program.load_cache's verified loads
    if args.cache_command == "info":
        out.write(str(cache.info()) + "\n")
        if args.list:
            for e in reversed(cache.entries()):
                stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.last_used))
                out.write(f"  {e.key[:16]}  {_human_bytes(e.size):>10}  {stamp}  {e.name}\n")
        li = loads.info() if not cache._verdict() else CacheInfo(loads.directory, 0, 0, loads.max_bytes)
        out.write(f"verified loads: {li.entries} entr{'y' if li.entries == 1 else 'ies'}, "
                  f"{_human_bytes(li.total_bytes)} in {loads.directory}\n")
        envs = _jaxlib_envs(os.path.join(cache.directory, "envs"))
        out.write(f"jaxlib environments (--against-jaxlib): {len(envs)}, "
                  f"{_human_bytes(sum(size for _, size in envs))} in {os.path.join(cache.directory, 'envs')}"
                  + "".join(f"\n  {os.path.basename(p)}  {_human_bytes(size)}" for p, size in envs) + "\n")
        return
    n = cache.clear()
    m = loads.clear() if not cache._verdict() else 0
    out.write(f"removed {n} entr{'y' if n == 1 else 'ies'} from {cache.directory}"
              f" and {m} verified load{'' if m == 1 else 's'} from {loads.directory}\n")
    envs = _jaxlib_envs(os.path.join(cache.directory, "envs")) if not cache._verdict() else []
    for path, _ in envs:
        shutil.rmtree(path, ignore_errors=True)
    if envs:
        out.write(f"removed {len(envs)} jaxlib environment{'' if len(envs) == 1 else 's'} (--against-jaxlib, "
                  f"{_human_bytes(sum(size for _, size in envs))}) from {os.path.join(cache.directory, 'envs')}\n")
    untagged = [c.directory for c in (cache, loads) if c._verdict() == "" and not c._cleanable()]
    if untagged:
        out.write(f"left alone: {', '.join(untagged)} (no CACHEDIR.TAG of xlasdk's: the cache never stored there, "
                  "so nothing in it is known to be the cache's)\n")
