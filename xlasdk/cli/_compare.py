"""``xlasdk compare``: is XLA right on this program? Its outputs against the reference evaluator,
another device, or recorded outputs (:func:`xlasdk.compare`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import IO, Any

from ._arrays import _expected_outputs, _gather_inputs
from ._common import (
    _ERR_STREAM,
    EXIT_OK,
    UsageError,
    _api,
    _device,
    _load_program,
    _quiet_native_logs,
    _stage,
    _unknown_device_message,
    _xla_flags,
    dump_options,
)
from ._run import _check_memory, _recorded_arguments
from ._verbs import _COMPARE_DESCRIPTION as _COMPARE_DESCRIPTION  # the parser lives in the light _verbs
from ._verbs import add_compare_parser, against_path_problem

add_parser = add_compare_parser  # its name before the parser moved to _verbs

EXIT_DIVERGENCE = 1
EXIT_CANNOT_JUDGE = 3  # no element outside its bound, but some bound too loose to judge by (never a match)


def _check_against_device(args: argparse.Namespace) -> None:
    """``--against NAME`` that is no regular file names a device: a name no device answers to is a
    usage error that also says what is wrong with NAME as a file (``--against modules``, a
    directory, said "no PJRT client for platform 'modules'"), except for a ``PLATFORM:ID`` that
    names no file, which was meant as a device."""
    from xlasdk.runtime.device import UnknownDeviceError, _resolve_device

    try:
        with _quiet_native_logs(not args.debug):
            _resolve_device(args.against)
    except UnknownDeviceError:
        message = _unknown_device_message(args.against, "--against")
        if ":" in args.against and not os.path.lexists(args.against):  # cpu:7: meant as a device
            raise UsageError(message) from None
        raise UsageError(f"{message}; as a file: {against_path_problem(args.against)}") from None


def _max_trials(args: argparse.Namespace) -> dict[str, int]:
    """``--max-trials N`` as CompareSettings' ``max_trials`` ({} when not given: its default)."""
    n = getattr(args, "max_trials", None)
    if n is not None and args.bisect != "passes":
        raise UsageError(f"--max-trials {n} bounds --bisect passes: give --bisect passes (or leave it out)")
    return {} if n is None else {"max_trials": n}


def _other_environment(args: argparse.Namespace) -> Any:
    """``--against-python PATH`` / ``--against-jaxlib VERSION`` as an OtherEnvironment (the venv of
    VERSION made first when missing), or None."""
    from xlasdk.errors import OtherEnvironmentError
    from xlasdk.reference._other_env import OtherEnvironment

    if getattr(args, "against_python", None) is not None:
        return OtherEnvironment(args.against_python)
    if getattr(args, "against_jaxlib", None) is not None:
        from xlasdk.reference._env_venv import jaxlib_environment

        _stage("preparing the jaxlib environment")
        try:
            return OtherEnvironment(jaxlib_environment(args.against_jaxlib), name=f"jaxlib {args.against_jaxlib}")
        except OtherEnvironmentError as e:
            raise UsageError(str(e)) from None
    return None


def _cmd_compare(args: argparse.Namespace, out: IO[str]) -> int:
    _stage("loading")
    comp, snap = _load_program(args)
    if getattr(args, "optimized_hlo", False):  # two environments' compiles, nothing run
        from ._compare_optimized import compare_optimized

        return compare_optimized(args, comp, _other_environment(args), out)
    if snap is None:
        from ._per_partition import per_partition_devices_of

        if (parts := per_partition_devices_of(comp)) is not None:  # one partition's program of an SPMD program
            from ._compare_per_partition import compare_per_partition
            from ._run import _spmd_device

            return compare_per_partition(args, comp, parts, out, device_of=_spmd_device,
                                         exit_divergence=EXIT_DIVERGENCE, exit_cannot_judge=EXIT_CANNOT_JUDGE)
    ps = comp.program_shape()
    _check_memory(ps)
    inputs = _gather_inputs(args, ps, _recorded_arguments(args, snap), comp)
    rt = _api()
    dev = _device(args)
    against: Any = args.against
    # check_against (the precheck) made a value that is no device name a regular file
    module = against not in ("reference", "recorded") and not against.endswith(".npz") and os.path.isfile(against)
    if not module and against not in ("reference", "recorded") and not against.endswith(".npz"):
        _check_against_device(args)
    from xlasdk.reference._runners import GivenOutputs  # recorded outputs: compared as given ones, named

    env = _other_environment(args)
    if env is not None:
        against = env
    elif module:
        import xlasdk as xs

        try:
            against = xs.load_computation(args.against)
        except xs.XlaSdkError as e:
            raise UsageError(f"--against {args.against}: cannot load it as a module: {e}") from None
    elif against == "recorded":
        if snap is None or snap.result is None:
            what = "is not a snapshot" if snap is None else "records no result"
            raise UsageError(f"--against recorded: {args.file} {what}; give --against OUT.npz")
        against = GivenOutputs(snap.outputs(), "the recorded result")
    elif against.endswith(".npz"):
        n = len(ps.result_shape().tuple_shapes()) if ps.result_shape().is_tuple() else 1
        against = GivenOutputs(_expected_outputs(against, n, "--against"), f"the outputs in {args.against}")
    dump_opts, dump_line = dump_options(args)  # the dump's own options, under --xla-flags
    flags = {**dump_opts, **_xla_flags(args.xla_flags)}
    recorded_outputs = None
    if getattr(args, "outputs", None):
        if args.against != "reference" or args.bisect or args.find_nonfinite:
            raise UsageError("--outputs (recorded elsewhere) is compared with the reference alone: no --against, "
                             "--bisect or --find-nonfinite (they need the device)")
        if args.device_kind is None:
            raise UsageError("--outputs: give --device-kind, the kind of device that recorded them (e.g. tpu-v5e)")
        n = len(ps.result_shape().tuple_shapes()) if ps.result_shape().is_tuple() else 1
        recorded_outputs = _expected_outputs(args.outputs, n, "--outputs")
    _stage("comparing")
    from xlasdk.errors import CompareArgumentError, OtherEnvironmentError
    from xlasdk.reference import CompareSettings, UnsupportedOpError, compare

    device_against = not module and args.against not in ("reference", "recorded") and not args.against.endswith(
        ".npz")
    if env is None and (args.bisect or args.find_nonfinite) and args.against != "reference" and not (
            (module or device_against) and args.bisect in (None, "ops")):
        why = ("; recorded outputs hold no intermediate values to bisect, and going into a while's iterations, a "
               "call or a fusion needs a good side that runs: bisect against the reference on the device (no "
               "--against) or against a good module (--against GOOD.hlo)") if not (module or device_against) else ""
        raise UsageError(f"--bisect / --find-nonfinite compare against the reference (--bisect ops against a "
                         f"second module or a device too, and --find-nonfinite), not --against "
                         f"{args.against}{why}")

    def progress(line: str) -> None:
        err = _ERR_STREAM[0] if _ERR_STREAM else sys.stderr
        err.write(line + "\n")
        err.flush()

    if args.bisect or args.find_nonfinite:
        _stage("bisecting")
    try:
        settings = CompareSettings(device=dev, rtol=args.rtol, atol=args.atol, ulps=args.ulps,
                                   excess_precision=args.excess_precision, xla_flags=flags, progress=progress,
                                   device_kind=getattr(args, "device_kind", None),
                                   precision=getattr(args, "precision", None), outputs=recorded_outputs,
                                   **_max_trials(args))
        report = compare(comp, inputs, against=against, settings=settings, bisect=args.bisect,
                         find_nonfinite=args.find_nonfinite)
    except UnsupportedOpError as e:
        raise UsageError(f"cannot check {args.file}: {e}") from None
    except CompareArgumentError as e:  # what was asked does not fit the program (a usage error, exit 2)
        raise UsageError(str(e)) from None
    except OtherEnvironmentError as e:  # no answer from the other environment: never a verdict
        raise UsageError(str(e)) from None
    del rt
    out.write(dump_line)
    out.write(str(report) + "\n")
    from xlasdk.formats.tpu_meaning import tpu_note

    if (note := tpu_note(comp)) is not None:
        out.write(f"  ran {note}\n")
    if args.json:
        from xlasdk._atomic import atomic_write

        doc = report.as_dict()
        if env is not None and env.versions is not None and env.here is not None:
            doc["environments"] = {"this": env.here.as_dict(), "other": env.versions.as_dict()}
        if dump_opts:
            doc["dump_debug_options"] = dump_opts
        try:
            atomic_write(args.json, json.dumps(doc, indent=2).encode() + b"\n")
        except OSError as e:
            raise UsageError(f"--json {args.json}: cannot write: {e.strerror or e}") from None
    if args.html:
        from xlasdk._atomic import atomic_write
        from xlasdk.reference.bisect import html_report

        try:
            atomic_write(args.html, html_report(comp, report).encode())
        except OSError as e:
            raise UsageError(f"--html {args.html}: cannot write: {e.strerror or e}") from None
    if report.ok:
        return EXIT_OK
    from xlasdk.reference._orders import verdict

    return EXIT_CANNOT_JUDGE if verdict(report) == "CANNOT JUDGE" else EXIT_DIVERGENCE
