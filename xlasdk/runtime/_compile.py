"""The entry points that make an ``Executable``: ``compile``, ``deserialize_executable``, ``load_executable``."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np

from .._atomic import file_path, read_regular_file
from .._cache import CacheArg, _fingerprint_of, _key, resolve_cache
from .._jaxlib import mlir as _mlir
from .._jaxlib import pjrt
from .._numbers import SECONDS_OR_NO_LIMIT
from ..errors import CompileError, DeviceCountError, FormatError, XlaSdkError
from ..ops.collectives import partition_ids_problem
from ..program.computation import CompileRequest, XlaComputation, compile_request
from ..program.static_interface import static_interface
from ..shape import ProgramShape, Shape
from ..sharding._spmd import check_computation_shardings
from ._executable import Executable
from ._options import CompileOptions
from ._platform_lowering import for_device
from ._serial_format import _parse, _shape_from_json
from .capabilities import check_capabilities
from .device import Device, UnknownDeviceError, _resolve_device
from .dynamic import DynamicResultExecutable
from .isolated_compile import compile_isolated, optimized_dump_for_device, per_partition_devices


# -- compile ----------------------------------------------------------------------------------
def _place(options: CompileOptions, device: Device | str | None) -> list[Device]:
    n = options.num_devices
    assignment = options.device_assignment
    if assignment is not None:
        shape = (len(assignment), len(assignment[0]))
        if shape != (options.num_replicas, options.num_partitions):
            raise CompileError(
                f"CompileOptions.device_assignment has shape {list(shape)}, expected "
                f"[num_replicas, num_partitions] = [{options.num_replicas}, {options.num_partitions}]"
            )
        base = _resolve_device(device)
        cl = base.client
        devs = [cl.device(i) for row in assignment for i in row]
        if device is not None and n == 1 and devs[0] != base:
            raise CompileError(f"compile: device {base} disagrees with device_assignment {list(assignment)}")
        return devs
    base = _resolve_device(device)
    if n == 1:
        return [base]
    all_devs = base.client.devices()  # under xs.distributed: every process's, the same everywhere
    start = 0 if device is None else all_devs.index(base)
    if start + n > len(all_devs):
        raise DeviceCountError(
            f"compile: num_replicas={options.num_replicas} x num_partitions={options.num_partitions} needs "
            f"{n} devices from {base}, but the {base.client.name} client has {len(all_devs)} "
            f"({', '.join(str(d) for d in all_devs)}); for CPU use xs.client('cpu', num_devices={n})",
            needed=n, available=len(all_devs) - start, platform=base.platform,
        )
    return all_devs[start : start + n]


_DEFAULT_OPTIONS: Final = CompileOptions()


def _module_options(req: CompileRequest) -> CompileOptions:
    """The options of a program compiled without any: one device, except for an optimized
    per-partition dump of XLA's SPMD partitioner loaded from a file, which runs only on the
    partitions its collectives join (on one device it would compute a wrong value)."""
    if req.from_file and (span := per_partition_devices(req.module_text)) is not None:
        return CompileOptions(num_partitions=span)
    return _DEFAULT_OPTIONS


#: What XLA's optimized dump compiles with unless the options say otherwise: its first compile
#: placed the bf16/f16 rounding conversions where the program asked for them; with excess precision
#: allowed, compiling it again removes them (f32 -> bf16 -> f32 pairs), and a bf16 dump no longer
#: gives JAX's values (174 of 512 elements of a bf16 attention block, by up to 2^-6).
_OPTIMIZED_DUMP_OVERRIDE = ("xla_allow_excess_precision", False)


def _dump_precision(opts: CompileOptions, req: CompileRequest) -> CompileOptions:
    """``opts``, for XLA's optimized dump with :data:`_OPTIMIZED_DUMP_OVERRIDE` unless it sets that
    option itself."""
    env = opts.env_option_overrides
    if not req.optimized_dump or any(k == _OPTIMIZED_DUMP_OVERRIDE[0] for k, _ in env):
        return opts
    return CompileOptions(num_replicas=opts.num_replicas, num_partitions=opts.num_partitions,
                          device_assignment=opts.device_assignment,
                          env_option_overrides=(*env, _OPTIMIZED_DUMP_OVERRIDE))


def compile(
    computation: XlaComputation,
    device: Device | str | None = None,
    *,
    options: CompileOptions | None = None,
    cache: CacheArg = None,
    timeout: float | None = None,
) -> Executable:
    """Compile ``computation`` with XLA and load it on ``device``.

    Parameters
    ----------
    computation:
        An :class:`~xlasdk.XlaComputation`.
    device:
        A :class:`Device`, a ``"cpu:0"``-style string, or None for the default device. With
        several replicas/partitions it is the first device used.
    options:
        :class:`CompileOptions` (replicas, partitions, device assignment, XLA flags). Default:
        one device (a sharded program then computes its global values on it; ``comp.partitioning()``
        says what it records, for ``CompileOptions(num_partitions=N)``), except an optimized
        per-partition dump of XLA's SPMD partitioner, which gets the partitions it was split over.
        XLA's optimized dump (``*after_optimizations*``, loaded or edited from one) compiles with
        ``xla_allow_excess_precision=false`` unless the options set it: with excess precision XLA
        drops the bf16/f16 rounding its first compile placed, and the dump no longer computes
        the values of the program it was dumped from.
    cache:
        The on-disk compile cache: ``True`` (the default cache directory), a directory, an
        :class:`~xlasdk.runtime.cache.CompileCache`, ``False`` (never), or ``None`` (the cache in
        ``$XLASDK_CACHE_DIR`` if that variable is set, else none). A hit loads the stored
        executable instead of compiling; a corrupt entry is discarded and recompiled.
    timeout:
        Seconds the compile may take where it runs in xlasdk's worker process (a computation
        loaded from a file, or edited from one, on the CPU): past it the worker is stopped and a
        :class:`CompileError` says so. Default: ``$XLASDK_COMPILE_TIMEOUT``, else 3600; ``0`` for
        no limit. A number of seconds from 0 to 10**6 (11.6 days; ``xlasdk._numbers.MAX_SECONDS``):
        NaN, an infinity (no limit is ``0``, not ``inf``) or a negative number is refused, whatever
        the computation. A computation built with :class:`XlaBuilder` compiles in this process,
        where XLA cannot be stopped, and takes no limit.

    Returns
    -------
    Executable

    Raises
    ------
    CompileError
        When XLA rejects the program or the options, or ``$XLASDK_COMPILE_TIMEOUT`` is not a number
        of seconds from 0 to 10**6.
    XlaSdkError
        A ``timeout`` that is not a number of seconds from 0 to 10**6.
    UnknownDeviceError
        For an unknown device, or a device assignment naming a missing device.

    Maps to PJRT ``Client::CompileAndLoad`` (``client.compile_and_load``).
    """
    if not isinstance(computation, XlaComputation):
        raise TypeError(f"compile: expected an XlaComputation, got {type(computation).__name__}")
    if timeout is not None:  # refused whether or not this compile runs in the worker
        timeout = SECONDS_OR_NO_LIMIT.check(timeout, "compile: timeout")
    computation = for_device(computation, device)  # LAPACK calls in the device's own linear algebra
    req = compile_request(computation)
    opts = options if options is not None else _module_options(req)
    if not isinstance(opts, CompileOptions):
        raise TypeError(f"compile: options must be xs.CompileOptions, got {type(opts).__name__}")
    opts = _dump_precision(opts, req)
    name, program_shape = req.name, req.program_shape
    _check_runnable(name, program_shape)
    if not req.static_interface and not all(
        s.is_static() for s in (*program_shape.parameter_shapes(), *_leaves(program_shape.result_shape()))
    ):
        # bounded dynamic shapes: the static-interface rewrite, run with real extents of the results
        rw = static_interface(computation)
        exe = compile(rw.computation, device, options=opts, cache=cache, timeout=timeout)
        dynamic = DynamicResultExecutable._wrap(
            exe, program_shape, rw.n_results, rw.dynamic_results, rw.dynamic_params
        )
        return _remember(dynamic, computation)
    problem = partition_ids_problem(req.cross_partition_ids(), opts.num_partitions)  # what XLA would abort on
    if problem is not None:
        raise CompileError(f"compile: {name!r}: {problem}")
    devs = _place(opts, device)
    check_capabilities(computation, devs[0])  # what the device's compiler fails on, before XLA sees it
    if opts.num_partitions > 1:  # shardings that do not fit the partitions, before XLA sees them
        check_computation_shardings(computation, opts.num_partitions, opts.num_replicas)
    text = _module_text_for(req.module_text, devs[0])
    if devs[0].platform != "cpu" and req.from_file:  # an optimized per-partition dump: compiled as on the CPU
        text = optimized_dump_for_device(text, opts.num_replicas, opts.num_partitions, name, _compile_timeout(timeout))
    if devs[0].client.compile_only is not None:  # xs.topology's devices: compile, never run
        return _remember(_compile_for_topology(req, text, opts, devs, timeout), computation)
    # Loaded from a file or bytes: not checked op by op, so XLA's compiler runs in the worker
    # process first (it aborts on some verified modules): for the CPU, and for a TPU through libtpu's
    # compile-only client. Other platforms compile in-process.
    isolate = req.from_file and devs[0].platform == "cpu"
    # On a TPU every program, built ones too (XLA's TPU compiler aborts on some programs the builder
    # accepts: the op tests' unary ops did on a v5e), compiles in the worker by libtpu's compile-only
    # client, and the executable is loaded here on the chip.
    tpu_isolate = devs[0].platform == "tpu" and os.environ.get("XLASDK_TPU_COMPILE", "").strip() != "in-process"
    # Arrays no machine holds: XLA:CPU of jaxlib 0.12 dies of SIGFPE compiling some of them
    # (s32[2**54], s8[2**28,2**28]); 0.10.2 compiles them. Such a program compiles in the worker too.
    if devs[0].platform == "cpu" and req.heap_bytes >= _ISOLATE_HEAP_BYTES:
        isolate = True
    if req.host_callbacks:  # Python host callbacks: compiled here with them, never cached or isolated
        return _remember(_compile_with_callbacks(req, opts, devs), computation)
    if "python_cpu_callback" in text or "python_gpu_callback" in text:  # jaxlib crashes running it
        raise CompileError(
            f"compile: {name!r} calls Python host callbacks (a custom call to jaxlib's "
            "xla_*python_*_callback, as jax.debug.print and jax.pure_callback make), but the Python "
            "functions do not travel with a loaded program; build the callbacks with ops.HostCallback "
            "(running it without them would crash the process)"
        )

    def build() -> Executable:  # only on a cache miss (or with no cache)
        jopts = _jax_options(opts, devs)
        blob = None
        if isolate:
            exe, blob = compile_isolated(
                devs[0].client._c, text, [d._d for d in devs], jopts,
                opts.num_replicas, opts.num_partitions, opts.env_option_overrides, name,
                timeout=_compile_timeout(timeout),
            )
        elif tpu_isolate:
            from .topology import compile_for_chip

            exe, blob = compile_for_chip(text, name, devs, opts, jopts, _compile_timeout(timeout))
        else:
            exe = pjrt.compile_and_load(devs[0].client._c, text, [d._d for d in devs], jopts, name)
        made = Executable._make(exe, name, program_shape, devs, opts.num_replicas, opts.num_partitions)
        made._xla_blob = blob
        return made

    return _remember(compile_cached(cache, text, opts, devs, build, source=computation), computation)


def _jax_options(opts: CompileOptions, devs: list[Device]) -> Any:
    """jaxlib's ``CompileOptions`` for ``opts`` on ``devs``, the device assignment always explicit
    (without it XLA assigns replica 0 to device 0 whatever the DeviceList says)."""
    assignment = np.asarray([d.id for d in devs], dtype=np.int64).reshape(opts.num_replicas, opts.num_partitions)
    return pjrt.make_compile_options(opts.num_replicas, opts.num_partitions, assignment, opts.env_option_overrides)


def _module_text_for(text: str, device: Device) -> str:
    """The module text compiled for ``device``: for any platform but the CPU, without ``mhlo.copy``
    (XLA's HLO import writes one for each ``copy`` of a loaded HLO module, a change of layout whose
    value is its operand's; libtpu's pipeline refuses the op). XLA:CPU compiles ``text`` as it is."""
    if device.platform == "cpu" or "mhlo.copy" not in text:
        return text
    return _mlir.without_copies(text)


def _compile_for_topology(req: CompileRequest, text: str, opts: CompileOptions, devs: list[Device],
                          timeout: float | None) -> Executable:
    from .topology import compile_for_topology

    if req.host_callbacks:
        raise CompileError(
            f"compile: {req.name!r} calls Python host callbacks, which a compile-only device cannot hold"
        )
    jopts = _jax_options(opts, devs)
    return compile_for_topology(text, req.name, req.program_shape, devs, opts, jopts,
                                isolate=os.environ.get("XLASDK_TPU_COMPILE", "").strip() != "in-process",
                                timeout=_compile_timeout(timeout))


def _remember(exe: Executable, computation: Any) -> Executable:
    """Keep the computation an executable was compiled from (``Executable.record`` writes its module)."""
    exe._computation = computation
    return exe


DEFAULT_COMPILE_TIMEOUT = 3600.0
"""Seconds a compile in the worker may take unless ``timeout=`` or ``XLASDK_COMPILE_TIMEOUT`` says otherwise."""


def _compile_timeout(timeout: float | None) -> float | None:
    """The limit of a worker compile: ``timeout`` (checked by :func:`compile`), else
    ``$XLASDK_COMPILE_TIMEOUT``, else the default; 0 means none."""
    if timeout is None:
        env = os.environ.get("XLASDK_COMPILE_TIMEOUT", "").strip()
        try:
            timeout = float(env) if env else DEFAULT_COMPILE_TIMEOUT
        except ValueError:
            timeout = None
        if timeout is None or not SECONDS_OR_NO_LIMIT.fits(timeout):
            raise CompileError(f"XLASDK_COMPILE_TIMEOUT must be {SECONDS_OR_NO_LIMIT.expected}, got {env!r}")
    return float(timeout) if timeout > 0 else None


_ISOLATE_HEAP_BYTES = 2**40
"""A built computation whose arrays add up to this many bytes (1 TiB) or more compiles in the worker."""


def _compile_with_callbacks(req: CompileRequest, opts: CompileOptions, devs: list[Device]) -> Executable:
    """Compile a built computation that calls Python host callbacks (``ops.HostCallback``): in
    this process (the callbacks are Python objects of this process), without the compile cache
    (an executable holding callbacks cannot be serialized), and keeping the callbacks alive with
    the executable."""
    from .._jaxlib.callbacks import compile_and_load_with_callbacks

    name, program_shape, callbacks = req.name, req.program_shape, req.host_callbacks

    if any(d.platform != "cpu" for d in devs):
        raise CompileError(
            f"compile: {name!r} calls Python host callbacks, which jaxlib {pjrt.JAXLIB_VERSION} runs on CPU "
            f"devices only (got {devs[0]})"
        )
    jopts = _jax_options(opts, devs)
    exe = compile_and_load_with_callbacks(
        devs[0].client._c, req.module(), [d._d for d in devs], jopts, name, callbacks
    )
    result = Executable._make(exe, name, program_shape, devs, opts.num_replicas, opts.num_partitions)
    result._host_callbacks = callbacks
    return result


def _leaves(s: Shape) -> tuple[Shape, ...]:
    return s.tuple_shapes() if s.is_tuple() else (s,)


def _check_runnable(name: str, program_shape: ProgramShape) -> None:
    """PJRT executables take and return flat lists of arrays: reject nested tuples up front."""
    for i, p in enumerate(program_shape.parameter_shapes()):
        if p.is_tuple():
            raise CompileError(
                f"compile: parameter {i} of {name!r} is a tuple {p}; PJRT executables take arrays only "
                "(pass the elements as separate parameters)"
            )
    r = program_shape.result_shape()
    if r.is_tuple() and any(s.is_tuple() for s in r.tuple_shapes()):
        raise CompileError(
            f"compile: {name!r} returns a nested tuple {r}; PJRT executables return a flat list of arrays "
            "(build the root as one flat ops.Tuple)"
        )



# -- deserialization --------------------------------------------------------------------------
_load_options_memo: dict[tuple[int, int, tuple[int, ...]], Any] = {}


def _load_options(nr: int, npart: int, ids: tuple[int, ...]) -> Any:
    """The jaxlib ``CompileOptions`` that place a deserialized executable on device ``ids``.

    Memoised: the object is only ever read (jaxlib copies it into each load).
    """
    key = (nr, npart, ids)
    opts = _load_options_memo.get(key)
    if opts is None:
        assignment = np.asarray(ids, dtype=np.int64).reshape(nr, npart)
        opts = pjrt.make_compile_options(nr, npart, assignment, ())
        if len(_load_options_memo) >= 256:
            _load_options_memo.clear()
        _load_options_memo[key] = opts
    return opts


def deserialize_executable(
    data: bytes | bytearray | memoryview,
    device: Device | str | None = None,
    *,
    _what: str = "",
    _verified: bool = False,
) -> Executable:
    """Load an executable made by :meth:`Executable.serialize`, without compiling.

    Parameters
    ----------
    data:
        The bytes from :meth:`Executable.serialize`.
    device:
        Where to load it: a :class:`Device`, a ``"cpu:0"``-style string or None (default
        device). Multi-device executables load on the same device ids of that device's client.

    Raises
    ------
    FormatError
        For empty, truncated, corrupt or foreign data, or data from another jaxlib version or
        platform; the message names what was wrong.
    UnknownDeviceError
        If the target client lacks a device the executable needs.

    Maps to PJRT ``DeserializeExecutable`` (``client.deserialize_executable``).
    """
    what = _what or "deserialize_executable"
    header, blob = _parse(data, what, _verified)
    try:
        name = str(header["name"])
        jaxlib_version = str(header["jaxlib"])
        xc_version = int(header["xla_client_version"])
        platform = str(header["platform"])
        nr = int(header["num_replicas"])
        npart = int(header["num_partitions"])
        ids = [int(i) for i in header["device_ids"]]
        names = [str(n) for n in header["parameter_names"]]
        params = [_shape_from_json(j) for j in header["parameters"]]
        result = _shape_from_json(header["result"])
    except (KeyError, TypeError, ValueError, OverflowError, RecursionError) as e:  # 1e400, deep nesting
        raise FormatError(f"{what}: corrupt header: {type(e).__name__}: {str(e):.200}") from None
    if jaxlib_version != pjrt.JAXLIB_VERSION or xc_version != pjrt.XLA_CLIENT_VERSION:
        raise FormatError(
            f"{what}: {name!r} was serialized with jaxlib {jaxlib_version} (xla_client {xc_version}); "
            f"this process has jaxlib {pjrt.JAXLIB_VERSION} (xla_client {pjrt.XLA_CLIENT_VERSION}): "
            "recompile it"
        )
    base = _resolve_device(device)
    if base.platform != platform:
        raise FormatError(f"{what}: {name!r} was compiled for {platform}, cannot load it on {base}")
    if nr * npart != len(ids) or not ids:
        raise FormatError(f"{what}: corrupt header: {len(ids)} device ids for {nr} x {npart} devices")
    if len(ids) == 1:
        devs = [base]
    else:
        try:
            devs = [base.client.device(i) for i in ids]
        except UnknownDeviceError as e:
            raise UnknownDeviceError(f"{what}: {name!r} needs devices {ids}: {e}") from None
    options = _load_options(nr, npart, tuple(d.id for d in devs))
    exe = pjrt.deserialize_executable(base.client._c, blob, [d._d for d in devs], options, what)
    program_shape = ProgramShape(params, result, names)
    loaded = Executable._make(exe, name, program_shape, devs, nr, npart)
    loaded._xla_blob = bytes(blob)
    return loaded


def load_executable(path: str | os.PathLike[str], device: Device | str | None = None) -> Executable:
    """Load an executable saved with :meth:`Executable.save`.

    Raises
    ------
    FormatError
        If the file is missing, unreadable, empty, truncated or corrupt (the message names
        the file).
    """
    try:
        spath = file_path(path)
    except (TypeError, ValueError) as e:
        raise FormatError(f"load_executable: {e}") from None
    what = f"load_executable({spath!r})"
    try:
        data = read_regular_file(spath)  # regular files only, bounded: never a FIFO or /dev/zero
    except OSError as e:
        reason = e.strerror or e
        raise FormatError(f"{what}: cannot read the file: {reason}") from None
    return deserialize_executable(data, device, _what=what)


def compile_cached(
    cache: CacheArg,
    module_text: str,
    options: Any,
    devices: Sequence[Device],
    build: Callable[[], Executable],
    *,
    source: object = None,
) -> Executable:
    """``build()`` through the cache: a hit deserializes, a miss compiles and stores.

    Parameters
    ----------
    cache:
        As for :func:`resolve_cache`.
    module_text:
        The exact StableHLO text handed to XLA.
    options:
        The :class:`~xlasdk.CompileOptions` (its ``repr`` is part of the key).
    devices:
        The devices the executable is placed on (the first is where a hit is loaded).
    build:
        Compiles and returns the :class:`~xlasdk.Executable` on a miss.
    source:
        The computation ``module_text`` came from, if any: the text's fingerprint is remembered
        on it (weakly) so that compiling the same computation again does not hash it again.

    A corrupt or incompatible entry is deleted and the program recompiled; failing to store
    an entry (read-only directory, full disk) warns once and never fails the compile.
    """
    c = resolve_cache(cache)
    if c is None:
        return build()
    dev = devices[0]
    fp = _fingerprint_of(source, module_text)  # source None (or not weakly referenceable): hashed afresh
    key = _key(
        fp,
        options=repr(options),
        platform=str(dev.platform),
        device_kind=str(dev.device_kind),
        device_ids=[int(d.id) for d in devices],
    )
    data = c._load(key)
    if data is not None:
        try:
            # The entry's sha256 covers these bytes: the executable's own crc32 is not redone.
            exe = deserialize_executable(data, dev, _verified=True)
            c.hits += 1
            return exe
        except (FormatError, XlaSdkError):
            c.discard(key)
    c.misses += 1
    exe = build()
    try:
        c.put(key, exe.serialize(), name=exe.name)
    except (OSError, XlaSdkError) as e:
        c._warn_once(f"xlasdk compile cache {c.directory}: cannot store the executable: {e}")
    return exe
