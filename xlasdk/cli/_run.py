"""The ``run`` verb of the ``xlasdk`` command (SPMD programs included) and its help text.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time
from typing import IO, Any

import numpy as np

from ._arrays import _describe_array, _expected_outputs, _gather_inputs, _npz_entries, _summary
from ._common import (
    EXIT_OK,
    UsageError,
    _api,
    _device,
    _human_time,
    _load_program,
    _npz_path,
    _quiet_native_logs,
    _stage,
    dump_options,
)
from ._verbs import _RUN_DESCRIPTION as _RUN_DESCRIPTION  # the help texts live in the light _verbs
from ._verbs import _RUN_EPILOG as _RUN_EPILOG
from ._verbs import check_run_flags

_check_run_flags = check_run_flags  # its name before it moved to _verbs

EXIT_DIVERGENCE = 1  # --expect: the outputs differ from the expected ones
EXIT_CANNOT_JUDGE = 3  # --expect-device-kind: no element outside its bound, some bound too loose (as compare's)

# -- run ---------------------------------------------------------------------------------------------
def _tpu_line(comp: Any, out: IO[str]) -> None:
    """``  ran the CPU meaning of a TPU-optimized module: ...`` for a module loaded from one."""
    from xlasdk.formats.tpu_meaning import tpu_note

    note = tpu_note(comp)
    if note is not None:
        out.write(f"  ran {note}\n")


def _spmd_counts(args: argparse.Namespace, comp: Any) -> tuple[int, int]:
    """``(replicas, partitions)``: the flags, else what the module records (its HLO header's
    ``replica_count`` / ``num_partitions``, its StableHLO ``mhlo.num_replicas`` /
    ``mhlo.num_partitions``, or the device count its shardings need), else 1."""
    from xlasdk.program.computation import compile_request
    from xlasdk.sharding._spmd import module_spmd_counts

    header = None
    if getattr(comp, "source_format", None) == "hlo":
        try:
            with open(args.file, "rb") as f:
                header = f.read(1 << 16).decode("utf-8", "replace")
        except OSError:
            header = None
    replicas, partitions = args.replicas, args.partitions
    if replicas is None or partitions is None:
        # the module text the compile hands XLA (already there: printing it again would parse a loaded module)
        found_r, found_p = module_spmd_counts(comp, header, module_text=compile_request(comp).module_text)
        replicas = replicas if replicas is not None else found_r or 1
        partitions = partitions if partitions is not None else found_p or 1
    return replicas, partitions


def _spmd_device(args: argparse.Namespace, needed: int) -> Any:
    """The first device of a program on ``needed`` devices: of a CPU client with ``--devices`` (default:
    ``needed``) devices, or of ``--device``'s platform."""
    rt = _api()
    from xlasdk.runtime.device import UnknownDeviceError

    count = args.devices if args.devices is not None else needed
    if count < needed:
        raise UsageError(
            f"--devices {count}: the program runs on replicas x partitions = {needed} devices "
            "(see --replicas / --partitions)"
        )
    platform, index = "cpu", 0
    if args.device is not None:
        m = re.match(r"^\s*([A-Za-z_]\w*)\s*(?::\s*(\d+))?\s*$", args.device)
        if m is None:
            raise UsageError(f"--device {args.device!r}: expected PLATFORM or PLATFORM:ID such as cpu:0")
        platform, index = m.group(1), int(m.group(2) or 0)
    _stage("client")
    with _quiet_native_logs(not args.debug):
        try:
            devs = rt.client(platform, num_devices=count).devices()
        except UnknownDeviceError as e:
            raise UsageError(f"--devices {count}: {e}") from None
    if index + needed > len(devs):
        raise UsageError(
            f"--device {args.device}: the program needs {needed} devices from there, but the {platform} client has "
            f"{len(devs)} ({', '.join(str(d) for d in devs)})"
        )
    return devs[index]


def _leaf_shapes(shape: Any) -> list[Any]:
    return [x for e in shape.tuple_shapes() for x in _leaf_shapes(e)] if shape.is_tuple() else [shape]


def _memory_limit() -> int:
    """``XLASDK_MAX_RUN_BYTES``, else this machine's physical memory."""
    env = os.environ.get("XLASDK_MAX_RUN_BYTES", "").strip()
    if env:
        try:
            return int(env)
        except ValueError:
            raise UsageError(f"XLASDK_MAX_RUN_BYTES must be a number of bytes, got {env!r}") from None
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 1 << 62


def _free_memory() -> tuple[int, str] | None:
    """Bytes this process can still allocate, and what bounds them: the system's available memory
    (``MemAvailable``), this process's ``RLIMIT_AS`` / ``RLIMIT_DATA`` (less what it holds), its
    control group's ``memory.max`` (less ``memory.current``); None when none of these is known."""
    bounds: list[tuple[int, str]] = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    bounds.append((int(line.split()[1]) * 1024, "free on this machine"))
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource

        with open("/proc/self/status") as f:
            status = {k: v.split() for k, _, v in (ln.partition(":") for ln in f)}
        held = {"VmSize": 0, "VmData": 0}
        for key in held:
            if key in status and status[key]:
                held[key] = int(status[key][0]) * 1024
        for lim, key, name in ((resource.RLIMIT_AS, "VmSize", "RLIMIT_AS"), (resource.RLIMIT_DATA, "VmData",
                                                                              "RLIMIT_DATA")):
            soft = resource.getrlimit(lim)[0]
            if soft != resource.RLIM_INFINITY:
                bounds.append((max(0, soft - held[key]), f"left under this process's {name} (ulimit)"))
    except (ImportError, OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            cap = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read().strip())
        if cap.isdigit():
            bounds.append((max(0, int(cap) - used), "left under this control group's memory.max"))
    except (OSError, ValueError):
        pass
    return min(bounds) if bounds else None


def _working_set(shape: Any, *, output: bool, random: bool) -> tuple[int, int]:
    """Bytes a value of ``shape`` holds for the whole run, and bytes of numpy temporaries made for it
    (one at a time): an input on the host and on the device, plus, drawn by ``--random-inputs``,
    numpy's float64 / int64 draws (8 bytes an element, 16 for floats, 32 for complex numbers); an
    output on the device and its host copy, plus the float64 copies of its printed summary."""
    held = temp = 0
    for leaf in _leaf_shapes(shape):
        nbytes = leaf._heap_bytes()
        if not nbytes:
            continue
        n = 1
        for d in leaf.dimensions():
            n *= max(int(d), 1)
        try:
            kind = np.dtype(leaf.numpy_dtype()).kind
        except (TypeError, ValueError):  # pragma: no cover - a type numpy cannot hold
            kind = "V"
        held += 2 * nbytes
        if output:
            t = 0 if kind == "b" else 8 * n if kind == "c" else 17 * n
        elif random:
            t = 32 * n if kind == "c" else 8 * n if kind in "biu" else 16 * n
        else:
            t = 0
        temp = max(temp, t)
    return held, temp


def _check_memory(ps: Any, *, random_inputs: bool = False) -> None:
    """Refuse (exit 2) a program whose inputs and outputs alone need more memory than the machine
    has, or, unless ``XLASDK_MAX_RUN_BYTES`` sets the limit, whose run (the values, their host and
    device copies, numpy's temporaries for ``--random-inputs`` and the printed summaries) needs
    more than this process can still allocate: it would end in MemoryError or the out-of-memory
    killer after a long wait."""
    params = [(f"parameter {i} ({n})", s) for i, (n, s) in enumerate(zip(ps.parameter_names(),
                                                                           ps.parameter_shapes(), strict=True))]
    results = [(f"output {i}", s) for i, s in enumerate(_leaf_shapes(ps.result_shape()))]
    sized = [(what, s, sum(x._heap_bytes() for x in _leaf_shapes(s))) for what, s in params + results]
    total = sum(n for _, _, n in sized)
    limit = _memory_limit()
    if total > limit:
        what, shape, n = max(sized, key=lambda t: t[2])
        raise UsageError(
            f"the program's inputs and outputs need {total:,} bytes, more than the {limit:,} this machine has "
            f"(the largest: {what}, {shape}, {n:,} bytes); XLASDK_MAX_RUN_BYTES overrides the limit"
        )
    if os.environ.get("XLASDK_MAX_RUN_BYTES", "").strip():
        return
    free = _free_memory()
    if free is None:  # pragma: no cover - no /proc
        return
    sets = [(what, s, _working_set(s, output=what.startswith("output"), random=random_inputs))
            for what, s in params + results]
    need = sum(h for _, _, (h, _) in sets) + max((t for _, _, (_, t) in sets), default=0)
    if need > free[0]:
        what, shape, (h, t) = max(sets, key=lambda x: x[2][0] + x[2][1])
        raise UsageError(
            f"running the program takes about {need:,} bytes (its inputs and outputs: {total:,}; with their host "
            f"and device copies, numpy's temporaries for random inputs and summaries), more than the {free[0]:,} "
            f"{free[1]} (the largest: {what}, {shape}, about {h + t:,} bytes); XLASDK_MAX_RUN_BYTES sets the "
            "limit instead"
        )


def _recorded_arguments(args: argparse.Namespace, snap: Any) -> Any:
    """The snapshot's arguments for the parameters not given, or None."""
    if snap is None:
        return None
    if len(snap.partitions) > 1:
        if args.input or args.inputs or args.random_inputs:
            return None
        raise UsageError(
            f"{args.file} records the inputs of {len(snap.partitions)} partitions (shards); xlasdk run takes the "
            "global arrays: give them with --input / --inputs (or --random-inputs)"
        )
    return snap.arguments


def _expected(args: argparse.Namespace, snap: Any, n: int) -> tuple[list[Any], str]:
    """The outputs ``--expect`` names, and how the report calls them."""
    if args.expect == "recorded":
        if snap is None:
            raise UsageError(f"--expect recorded: {args.file} is not a snapshot (no recorded result); give "
                             "--expect OUT.npz")
        if snap.result is None:
            unoptimized = snap.kind == "unoptimized_snapshot"
            why = " (XLA's unoptimized snapshots hold only the arguments)" if unoptimized else ""
            raise UsageError(f"--expect recorded: {args.file} records no result{why}; give --expect OUT.npz")
        return snap.outputs(), "the recorded result"
    return _expected_outputs(args.expect, n, "--expect"), f"the outputs in {args.expect}"


def _record(args: argparse.Namespace, comp: Any, inputs: list[Any], host: list[Any], platform: str) -> str:
    """Write one run as an HloSnapshot under ``--record``; its path."""
    from xlasdk.formats.snapshot import new_snapshot_path, write_snapshot

    path = None
    try:
        path = new_snapshot_path(args.record, comp.name)
        result: Any = tuple(host) if comp.program_shape().result_shape().is_tuple() else host[0]
        write_snapshot(path, comp, inputs, result, execution_platform=platform)
    except OSError as e:
        if path is not None and os.path.exists(path) and os.path.getsize(path) == 0:
            os.unlink(path)
        raise UsageError(f"--record {args.record}: cannot write: {e.strerror or e}") from None
    return path


def _expect_report(args: argparse.Namespace, comp: Any, host: list[Any], expected: tuple[list[Any], str],
                   out: IO[str], inputs: Any = None, dev: Any = None) -> bool:
    """:func:`_expect_verdict`: True for a match."""
    return _expect_verdict(args, comp, host, expected, out, inputs, dev) == "MATCH"


def _expect_verdict(args: argparse.Namespace, comp: Any, host: list[Any], expected: tuple[list[Any], str],
                    out: IO[str], inputs: Any = None, dev: Any = None) -> str:
    """Print how ``host`` compares with ``--expect``'s outputs; the verdict: ``MATCH``, ``DIVERGENCE``
    or ``CANNOT JUDGE`` (:func:`_verdict_exit` gives its exit code). With ``--expect-device-kind``,
    :func:`_judge_by_kinds`."""
    from xlasdk.reference import compare_outputs
    from xlasdk.reference._orders import verdict

    want, label = expected
    kind = getattr(args, "expect_device_kind", None)
    if kind is not None and inputs is not None:
        return _judge_by_kinds(args, comp, host, want, label, out, inputs, dev)
    report = compare_outputs(host, want, name=comp.name, against=label, rtol=args.rtol, atol=args.atol)
    exact = all(o.got.tobytes() == o.want.tobytes() for o in report.outputs)
    head, _, table = str(report).partition("\n")
    head = head.replace(": device vs ", ": outputs vs ", 1) + (" (bit-exact)" if exact and report.ok else "")
    out.write(f"{head}\n{table}\n")
    return str(verdict(report))


#: the verdicts from best to worst: two judgments together give the worse
_VERDICTS = ("MATCH", "CANNOT JUDGE", "DIVERGENCE")


def _judge_by_kinds(args: argparse.Namespace, comp: Any, host: list[Any], want: list[Any], label: str,
                    out: IO[str], inputs: Any, dev: Any) -> str:
    """``--expect OUT.npz --expect-device-kind KIND``: the outputs recorded on a device of KIND judged
    as ``xlasdk compare --outputs OUT.npz --device-kind KIND`` judges them, by the same call
    (:func:`xlasdk.reference.compare` with ``outputs=``: against the reference computing as KIND does),
    and this run's outputs by that call too, as recorded on this device's kind. Each within its own
    device's bounds of the reference, they agree as closely as both devices allow; the verdict is the
    worse of the two, so that it is compare's whenever this device computes right (a verdict of the
    two outputs' difference alone, under the sum of both devices' bounds, could not judge where a
    TPU's bf16 passes loosen those bounds: CANNOT JUDGE where compare said MATCH)."""
    from xlasdk.errors import CompareArgumentError, XlaSdkError
    from xlasdk.reference import UnsupportedOpError, compare
    from xlasdk.reference._orders import verdict
    from xlasdk.reference._precision import device_kind, device_kind_of

    try:
        theirs, ours = device_kind(args.expect_device_kind), device_kind_of(dev)
    except XlaSdkError as e:
        raise UsageError(f"--expect-device-kind: {str(e).removeprefix('compare: ')}") from None
    _stage("comparing")
    try:
        reports = [(f"the outputs in {args.expect}", compare(comp, inputs, outputs=want, device_kind=theirs.name,
                                                              rtol=args.rtol, atol=args.atol)),
                   ("this run's outputs", compare(comp, inputs, outputs=host, device_kind=ours.name,
                                                  rtol=args.rtol, atol=args.atol))]
    except UnsupportedOpError as e:  # as compare --outputs: no verdict without the reference
        raise UsageError(f"--expect-device-kind: cannot check {args.file}: {e}") from None
    except CompareArgumentError as e:
        raise UsageError(f"--expect {args.expect}: {str(e).removeprefix('compare: ')}") from None
    found = max((str(verdict(r)) for _, r in reports), key=_VERDICTS.index)
    out.write(f"{comp.name}: outputs vs {label} (recorded on {theirs.label}): {found}, each judged against the "
              f"reference as its device computes\n")
    for what, report in reports:
        out.write(str(report).replace(": device vs ", f": {what} vs ", 1) + "\n")
    return found


def _verdict_exit(found: str) -> int:
    """The exit code of ``--expect``'s verdict, as ``xlasdk compare`` gives it: 0, 1 (DIVERGENCE) or 3."""
    return EXIT_OK if found == "MATCH" else EXIT_CANNOT_JUDGE if found == "CANNOT JUDGE" else EXIT_DIVERGENCE


def _cmd_run(args: argparse.Namespace, out: IO[str]) -> int:
    try:
        return _run(args, out)
    except MemoryError as e:  # past the estimate of _check_memory (XLASDK_MAX_RUN_BYTES raised it): exit 2
        raise UsageError(f"{args.file}: the run needs more memory than this process can allocate ({e}); "
                         "XLASDK_MAX_RUN_BYTES bounds what xlasdk run accepts") from None


def _run(args: argparse.Namespace, out: IO[str]) -> int:
    from xlasdk._atomic import atomic_write

    check_run_flags(args)
    _stage("loading")
    comp, snap = _load_program(args)
    if snap is None:
        from ._per_partition import per_partition_devices_of, run_per_partition

        if (parts := per_partition_devices_of(comp)) is not None:  # one partition's program of an SPMD program
            return run_per_partition(args, comp, parts, out, expected_of=_expected, report=_expect_report,
                                     device_of=_spmd_device, exit_divergence=EXIT_DIVERGENCE)
    ps = comp.program_shape()
    _check_memory(ps, random_inputs=args.random_inputs)  # before any input is made, before XLA allocates results
    recorded = _recorded_arguments(args, snap)
    inputs = _gather_inputs(args, ps, recorded, comp)
    expected = _expected(args, snap, len(_leaf_shapes(ps.result_shape()))) if args.expect is not None else None
    if getattr(args, "expect_device_kind", None) is not None:
        from xlasdk.errors import XlaSdkError
        from xlasdk.reference._precision import device_kind

        if args.expect is None:
            raise UsageError("--expect-device-kind: give --expect OUT.npz (the outputs that device recorded)")
        try:
            device_kind(args.expect_device_kind)
        except XlaSdkError as e:
            raise UsageError(f"--expect-device-kind: {str(e).removeprefix('compare: ')}") from None
    replicas, partitions = _spmd_counts(args, comp)
    spmd = replicas * partitions > 1 or args.devices is not None
    rt = _api()
    if spmd:
        dev = _spmd_device(args, replicas * partitions)
        where = (f"{replicas * partitions} {dev.platform} devices ({replicas} replica{'s' if replicas > 1 else ''} x "
                 f"{partitions} partition{'s' if partitions > 1 else ''})")
    else:
        dev = _device(args)
        where = str(dev)
    dump_opts, dump_line = dump_options(args)
    _stage("compiling")
    t0 = time.perf_counter()
    if spmd or dump_opts:
        exe = rt.compile(comp, dev, options=rt.CompileOptions(num_replicas=replicas, num_partitions=partitions,
                                                              env_option_overrides=dump_opts))
    else:
        exe = rt.compile(comp, dev)
    compile_s = time.perf_counter() - t0
    _stage("running")

    def call() -> Any:
        return exe.execute_sharded(inputs) if spmd else exe(*inputs)

    result = call()
    outs = list(result) if isinstance(result, tuple) else [result]
    host = [np.asarray(o) for o in outs]
    npz = None
    if args.output is not None:  # before anything is printed: a closed stdout must not lose the file
        _stage("writing")
        npz = _npz_path(args.output)
        entries = _npz_entries(host)
        savez: Any = np.savez
        try:
            atomic_write(npz, lambda f: savez(f, **entries))
        except OSError as e:
            raise UsageError(f"--output {args.output}: cannot write: {e.strerror or e}") from None
    record_path = _record(args, comp, inputs, host, dev.platform) if args.record is not None else None
    n_rec = sum(1 for a, r in zip(inputs, recorded or [], strict=False) if a is r)
    source = ""
    if n_rec:
        source = (f" (the recorded arguments of the {snap.kind.replace('_', ' ')})" if n_rec == len(inputs)
                  else f" ({n_rec} of them the snapshot's recorded arguments)")
    out.write(dump_line)
    out.write(
        f"{comp.name} on {where}: {len(inputs)} input(s){source}, {len(host)} output(s); "
        f"compiled in {_human_time(compile_s)}\n"
    )
    _tpu_line(comp, out)
    if args.iterations > 1:
        out.write(f"iteration 0 (seed {args.seed}):\n")
    for i, a in enumerate(host):
        sharding = f"  sharding {outs[i].sharding}" if spmd else ""
        out.write(f"  output {i}: {_describe_array(a):<16} {_summary(a)}{sharding}\n")
    found = _expect_verdict(args, comp, host, expected, out, inputs, dev) if expected is not None else "MATCH"
    if record_path is not None:
        out.write(f"  recorded {record_path}\n")
    for it in range(1, args.iterations):  # fresh random inputs, as run_hlo_module's --iterations
        inputs = _gather_inputs(args, ps, recorded, comp, seed=args.seed + it)
        r = call()
        host = [np.asarray(o) for o in (r if isinstance(r, tuple) else (r,))]
        path = _record(args, comp, inputs, host, dev.platform) if args.record is not None else None
        out.write(f"iteration {it} (seed {args.seed + it}):\n")
        for i, a in enumerate(host):
            out.write(f"  output {i}: {_describe_array(a):<16} {_summary(a)}\n")
        if expected is not None:
            found = max(found, _expect_verdict(args, comp, host, expected, out, inputs, dev), key=_VERDICTS.index)
        if path is not None:
            out.write(f"  recorded {path}\n")
    if args.repeat > 1:
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            r = call()
            for o in r if isinstance(r, tuple) else (r,):
                o.block_until_ready()
            times.append(time.perf_counter() - t)
        out.write(
            f"  time per run over {args.repeat} runs: min {_human_time(min(times))}, "
            f"median {_human_time(statistics.median(times))}\n"
        )
    if npz is not None:
        out.write(f"  wrote {npz}\n")
    return _verdict_exit(found)
