"""The ``inspect`` and ``convert`` verbs of the ``xlasdk`` command.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections import Counter
from typing import IO, Any

from ._common import (
    EXIT_OK,
    CheckFailed,
    UsageError,
    _api,
    _check_writable,
    _device,
    _error_line,
    _human_bytes,
    _load,
    _load_program,
    _quiet_native_logs,
    _stage,
)


# -- inspect ------------------------------------------------------------------------------------------
def _format_label(comp: Any, path: str) -> str:
    from xlasdk.formats import Format, portable_artifact_version

    fmt = comp.source_format
    label = Format(fmt).description if fmt else "?"
    if fmt == Format.PORTABLE_ARTIFACT.value:
        try:
            with open(path, "rb") as f:
                head = f.read(64)
        except OSError:
            head = b""
        if head and not head.startswith(b"ML\xefR"):  # the module of a jax.export file
            return "jax.export file: its StableHLO module"
        v = portable_artifact_version(head)
        label += f", StableHLO v{v}" if v else " (plain MLIR bytecode)"
    return label


_COMP_HEADER_RE = re.compile(r"^(ENTRY\s+)?%?([^\s(]+)\s*\(.*\{\s*$")


def _op_counts(hlo_text: str) -> tuple[Counter[str], list[tuple[str, Counter[str]]]]:
    """Opcode counts of the entry computation, and ``(name, counts)`` of every other computation.

    Sub-computations are reducer / comparator / loop-body regions the entry computation calls;
    their parameters and instructions are not the program's, so they are counted apart.
    """
    from xlasdk.formats import hlo_opcode_counts
    from xlasdk.formats.hlo_text import _parse_hlo_text

    mod = _parse_hlo_text(hlo_text)
    comps: list[tuple[str, bool, Counter[str]]] = []
    if mod is not None:
        for c in mod.comps:
            comps.append((c.name, c.entry, Counter(i.opcode for i in c.instrs)))
    else:  # text the small parser does not follow: XLA prints one computation block per header line
        name, entry = "", False
        body: list[str] = []
        for line in hlo_text.splitlines():
            m = _COMP_HEADER_RE.match(line)
            if m is not None:
                name, entry, body = m.group(2), m.group(1) is not None, []
            elif line.startswith("}") and name:
                comps.append((name, entry, hlo_opcode_counts("\n".join(body))))
                name = ""
            elif name:
                body.append(line)
    if not comps:
        return hlo_opcode_counts(hlo_text), []
    entry_idx = next((i for i, c in enumerate(comps) if c[1]), len(comps) - 1)  # HLO: ENTRY, else the last
    subs = [(n, c) for i, (n, _, c) in enumerate(comps) if i != entry_idx]
    return comps[entry_idx][2], subs


def _partitioning(comp: Any) -> dict[str, Any] | None:
    """The module's partitioning (``comp.partitioning()``) when it asks for several devices, else
    None; None too when the module holds what the instruction graph cannot (inspect goes on)."""
    from ..errors import GraphImportError

    try:
        p = comp.partitioning()
    except GraphImportError:
        return None
    if not p.is_partitioned:
        return None
    return {
        "num_partitions": p.num_partitions, "num_replicas": p.num_replicas, "meshes": list(p.meshes),
        "parameter_shardings": list(p.parameter_shardings), "result_shardings": list(p.result_shardings),
    }


def _tpu_report(comp: Any, path: str) -> dict[str, Any] | None:
    """What marks a module loaded from TPU-optimized HLO as such, and how it runs here (None for
    any other module)."""
    from xlasdk.formats.tpu_meaning import comp_env_beside, tpu_note

    note = tpu_note(comp)
    if note is None or comp.tpu_rewrite is None:
        return None
    rewritten, signs = comp.tpu_rewrite
    return {"signs": signs, "rewritten": rewritten, "comp_env": comp_env_beside(path), "note": note}


def _sorted_counts(counts: Counter[str]) -> dict[str, int]:
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _device_count_message(args: argparse.Namespace, e: Any, dev: Any) -> str:
    """``FILE``'s program runs on more devices than ``dev``'s client has from ``dev`` on (a
    per-partition dump): what ``xlasdk inspect`` can do about it (the API's message names
    ``xs.client('cpu', num_devices=N)``, which the command cannot take)."""
    have = f"{e.available} device{'s' if e.available != 1 else ''}"
    if e.platform == "cpu":
        n = e.needed + len(dev.client.devices()) - e.available  # the devices before ``dev`` too
        more = f"set XLA_FLAGS=--xla_force_host_platform_device_count={n} for {n} CPU devices"
    else:
        more = f"compile for a TPU slice of {e.needed} chips with --topology NAME (v5e:2x2 has 4)"
    return (f"{args.file}: the program runs on {e.needed} devices (one per partition and replica), the "
            f"{e.platform} client has {have} from {dev} on; {more}, or give --no-compile (no cost or memory "
            "figures)")


def _cmd_inspect(args: argparse.Namespace, out: IO[str]) -> int:
    _stage("loading")
    comp, snap = _load_program(args)
    ps = comp.program_shape()
    counts, subs = _op_counts(comp.as_hlo_text(print_metadata=False))
    sub_counts: Counter[str] = Counter()
    for _, c in subs:
        sub_counts.update(c)
    report: dict[str, Any] = {
        "file": args.file,
        "format": _format_label(comp, args.file),
        "name": comp.name,
        "program_shape": str(ps),
        "parameters": [
            {"index": i, "name": n, "shape": str(s)}
            for i, (n, s) in enumerate(zip(ps.parameter_names(), ps.parameter_shapes(), strict=True))
        ],
        "result": str(ps.result_shape()),
        "op_counts": _sorted_counts(counts),
        "sub_computations": {
            "count": len(subs),
            "names": [n for n, _ in subs],
            "op_counts": _sorted_counts(sub_counts),
        },
    }
    if snap is not None:
        report["format"] = ("HloSnapshot: module, arguments, result" if snap.kind == "snapshot"
                            else "HloUnoptimizedSnapshot: module before optimizations, arguments")
        report["snapshot"] = {
            "kind": snap.kind, "arguments": len(snap.arguments), "partitions": len(snap.partitions),
            "result": snap.result is not None, "execution_platform": snap.execution_platform,
        }
    part = _partitioning(comp)
    if part is not None:
        report["partitioning"] = part
    tpu = _tpu_report(comp, args.file)
    if tpu is not None:
        report["tpu_optimized"] = tpu
    exe = None
    if not args.no_compile:
        rt = _api()
        if args.topology is not None:
            if args.device is not None:
                raise UsageError("--topology and --device: give one (a topology's devices are compile-only)")
            try:
                dev = rt.topology(args.topology).devices[0]
            except rt.UnknownDeviceError as e:
                raise UsageError(f"--topology: {str(e).removeprefix('topology: ')}") from None
        options = None
        if part is not None:  # as the module says (a global SPMD program), so the HLO is what XLA runs
            from xlasdk.runtime.per_partition import per_partition_count

            r, n = part["num_replicas"] or 1, part["num_partitions"] or 1
            if r * n > 1 and per_partition_count(comp) is None:
                options = rt.CompileOptions(num_replicas=r, num_partitions=n)
                report["compiled_for"] = {"num_replicas": r, "num_partitions": n}
        if args.topology is None:
            if options is not None:  # a CPU client with a device per partition and replica, as run makes
                from ._run import _spmd_device

                dev = _spmd_device(argparse.Namespace(devices=None, device=args.device, debug=args.debug),
                                   options.num_replicas * options.num_partitions)
            else:
                dev = _device(args)
        _stage("compiling")
        from xlasdk.errors import DeviceCountError

        try:
            exe = rt.compile(comp, dev, options=options)
        except DeviceCountError as e:  # the API's hint names xs.client(...): say what this command can do
            raise UsageError(_device_count_message(args, e, dev)) from None
        report["device"] = str(dev)
        report["cost_analysis"] = exe.cost_analysis()
        report["memory"] = exe.memory_stats().as_dict()
    if args.json:
        if args.optimized and exe is not None:
            report["optimized_hlo"] = exe.hlo_text(print_large_constants=True)  # loads back
        if args.hlo:
            report["hlo"] = comp.as_hlo_text()
        if args.stablehlo:
            report["stablehlo"] = comp.as_stablehlo_text()
        out.write(json.dumps(report, indent=2) + "\n")
        return EXIT_OK
    out.write(f"file:          {args.file} ({report['format']})\n")
    out.write(f"name:          {comp.name}\n")
    out.write(f"program shape: {ps}\n")
    out.write("parameters:\n")
    if not report["parameters"]:
        out.write("  (none)\n")
    for p in report["parameters"]:
        out.write(f"  {p['index']:>3}  {p['name']:<20} {p['shape']}\n")
    out.write(f"result:        {ps.result_shape()}\n")
    if snap is not None:
        rec = report["snapshot"]
        parts = f" of each of {rec['partitions']} partitions" if rec["partitions"] > 1 else ""
        where = f" on {rec['execution_platform']}" if rec["execution_platform"] else ""
        out.write(f"recorded:      {rec['arguments']} argument(s){parts}"
                  f"{', the result' if rec['result'] else ', no result'}{where} (xlasdk run FILE replays them)\n")
    if part is not None:
        counts_text = ", ".join(f"{k}={part[k]}" for k in ("num_partitions", "num_replicas") if part[k] is not None)
        out.write(f"partitioning:  {counts_text or '(the module gives no partition count)'}\n")
        for mesh in part["meshes"]:
            out.write(f"  mesh         {mesh}\n")
        for i, sh in enumerate(part["parameter_shardings"]):
            if sh is not None:
                out.write(f"  parameter {i:<3}{sh}\n")
        for i, sh in enumerate(part["result_shardings"]):
            if sh is not None:
                out.write(f"  result {i:<6}{sh}\n")
    if tpu is not None:
        env = f"; {os.path.basename(tpu['comp_env'])} beside it" if tpu["comp_env"] else ""
        out.write(f"TPU-optimized: XLA's HLO for a TPU: {tpu['signs']}{env}\n")
        out.write(f"  runs as {tpu['note']}\n")
    out.write(f"ops:           {sum(counts.values())} HLO instructions in the entry computation\n")
    for op, n in report["op_counts"].items():
        out.write(f"  {op:<28} {n}\n")
    if subs:
        label = f"in {len(subs)} sub-computation{'s' if len(subs) != 1 else ''}:"
        shown = ", ".join(n for n, _ in subs[:4]) + (", ..." if len(subs) > 4 else "")
        out.write(f"  {label:<28} {sum(sub_counts.values())} more ({shown})\n")
        for op, n in report["sub_computations"]["op_counts"].items():
            out.write(f"    {op:<26} {n}\n")
    if exe is not None:
        spmd = report.get("compiled_for")
        on = (f"{report['device']}, compiled for {spmd['num_partitions']} partition(s) x {spmd['num_replicas']} "
              "replica(s) as the module says" if spmd else report["device"])
        out.write(f"cost analysis ({on}):\n")
        for k, v in sorted(report["cost_analysis"].items()):
            if "{" in k:  # per-operand / per-output breakdowns
                continue
            out.write(f"  {k:<28} {v:,.0f}\n" if v == 0 or abs(v) >= 1 else f"  {k:<28} {v:.3g}\n")
        out.write("memory:\n")
        for k, v in report["memory"].items():
            if v or not k.startswith("host_"):
                out.write(f"  {k:<34} {_human_bytes(v)}\n")
    if args.hlo:
        out.write("\nHLO:\n" + comp.as_hlo_text())
    if args.stablehlo:
        out.write("\nStableHLO:\n" + comp.as_stablehlo_text())
    if args.optimized:
        if exe is None:
            raise UsageError("--optimized needs compilation; drop --no-compile")
        out.write("\noptimized HLO:\n" + exe.hlo_text(print_large_constants=True))  # loads back
    return EXIT_OK


# -- convert ------------------------------------------------------------------------------------------
def _save_error(e: Exception, output: str) -> UsageError:
    """A FormatError of the save API in the CLI's words: ``OUT: ...``, ``--to``, ``--target-version``."""
    msg = str(e)
    prefix = f"save({output!r}): "
    if msg.startswith(prefix):
        msg = f"{output}: " + msg[len(prefix):]
    msg = msg.replace("target_version", "--target-version").replace("pass format=", "pass --to FORMAT")
    return UsageError(msg)


def _shape_signature(comp: Any) -> tuple[list[str], str]:
    ps = comp.program_shape()
    return [str(s) for s in ps.parameter_shapes()], str(ps.result_shape())


def _check_written(args: argparse.Namespace, comp: Any, fmt: Any, tmp: str) -> str:
    """Load the file ``convert`` wrote (still at its temporary name ``tmp``) and, when the source
    compiles, compile it: a file that fails either is not renamed into place. Returns what was
    checked, for the report."""
    from xlasdk.errors import CompileError, FormatError, XlaRuntimeError
    from xlasdk.formats import load_computation

    _stage("checking")
    out_name = args.output
    try:
        back = load_computation(tmp, fmt)
    except FormatError as e:
        msg = _error_line(e).replace(tmp, out_name).replace(os.path.basename(tmp), os.path.basename(out_name))
        raise CheckFailed(f"{out_name}: the written file does not load back ({msg}); nothing was written") from None
    want, got = _shape_signature(comp), _shape_signature(back)
    if want != got:
        raise CheckFailed(
            f"{out_name}: the written file loads back with another program shape ({', '.join(got[0])} -> {got[1]}, "
            f"expected {', '.join(want[0])} -> {want[1]}); nothing was written"
        )
    if args.no_compile:
        return "loads back"
    rt = _api()
    with _quiet_native_logs(not args.debug):
        dev = rt.devices()[0]
    try:
        rt.compile(back, dev, cache=False)
    except (CompileError, XlaRuntimeError) as e:
        try:
            rt.compile(comp, dev, cache=False)
        except (CompileError, XlaRuntimeError):
            # the source does not compile here either (a custom call, another platform): nothing lost
            return f"loads back; like {args.input}, it does not compile on {dev}"
        raise CheckFailed(
            f"{out_name}: the written {fmt.description} does not compile, though {args.input} does "
            f"({_error_line(e)}); nothing was written"
        ) from None
    return "loads back and compiles"


def _cmd_convert(args: argparse.Namespace, out: IO[str]) -> int:
    from xlasdk.errors import FormatError
    from xlasdk.formats import Format, format_from_suffix, portable_artifact_version
    from xlasdk.formats.saving import save_format, write_computation
    from xlasdk.formats.sniff import _SUFFIX_LIST, _parse_format

    to = args.to_format
    if to is not None:
        try:
            _parse_format(to)
        except FormatError as e:
            raise UsageError(f"--to {to}: {e}") from None
    elif format_from_suffix(args.output) is None and not args.output.lower().endswith(".txt"):
        raise UsageError(
            f"{args.output}: unknown suffix; use one of {_SUFFIX_LIST}, or pass --to FORMAT (hlo, mlir, mlirbc or pb)"
        )
    _check_writable(args.output, args.output)
    try:
        fmt = save_format(args.output, to, args.target_version)
    except FormatError as e:
        raise _save_error(e, args.output) from None
    _stage("loading")
    comp = _load(args.input, args.from_format, "--from")
    _stage("writing")

    checked: list[str] = []

    def check(tmp: str) -> None:
        if not args.no_check:
            checked.append(_check_written(args, comp, fmt, tmp))

    try:
        write_computation(comp, args.output, fmt, target_version=args.target_version, check=check)
    except FormatError as e:  # the API's wording: save('OUT'): ..., format=, target_version
        raise _save_error(e, args.output) from None
    size = os.path.getsize(args.output)
    label = fmt.description
    if fmt is Format.PORTABLE_ARTIFACT:
        with open(args.output, "rb") as f:
            v = portable_artifact_version(f.read(64))
        label += f", StableHLO v{v}" if v else ""
    out.write(f"wrote {args.output} ({label}, {size} bytes{''.join(', ' + c for c in checked)})\n")
    return EXIT_OK
