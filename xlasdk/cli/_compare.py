"""``xlasdk compare``: is XLA right on this program? Its outputs against the reference evaluator,
another device, or recorded outputs (:func:`xlasdk.compare`)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import IO, Any

from ._arrays import _expected_outputs, _gather_inputs, add_input_arguments
from ._common import _ERR_STREAM, EXIT_OK, UsageError, _api, _device, _load_program, _stage
from ._run import _check_memory, _recorded_arguments

EXIT_DIVERGENCE = 1

_COMPARE_DESCRIPTION = """\
Run FILE on a device (XLA) and compare its outputs with a reference: xlasdk's reference evaluator
(every op computed in numpy from its inputs, floats in float64 rounded once to the op's type;
the default), XLA on another device (--against cpu:0), a snapshot's recorded result (--against
recorded), or recorded outputs (--against OUT.npz,
output_0, output_1, ... as `xlasdk run --output` writes them). Inputs as `xlasdk run` takes them
(a snapshot FILE gives its recorded arguments).

Per output it prints the largest absolute, relative and ulp error, the number of elements outside
the tolerance and the first of them. An element matches when |got - want| <= atol + rtol * |want|;
by default rtol and atol (as a fraction of the output's largest magnitude) follow the element type:
f32 1e-5 / 1e-6, f16 2^-9 / 2^-9, bf16 2^-6 / 2^-6, f64 1e-12 / 1e-13, where the magnitude is the
larger of the output's and of the terms the op that made it added (a sum that cancels), plus
4 times the rounding error the ops before it may have carried to the element (a first-order
bound), and never below the type's smallest normal number (XLA:CPU flushes subnormals); integers and bool
must be equal; NaN matches only NaN. Against the reference, XLA compiles without excess
precision (each bf16/f16 op rounded, as the reference rounds it); --excess-precision keeps XLA's
default, which the tolerances do not model: a divergence it reports may be XLA being more precise
than the reference's per-op rounding, not wrong (the default compile is the check).
--ulps N: a float element also matches when it is at most N units in the last place of
the reference value in the output's type (the "max ulp" column), whatever --rtol/--atol say
(--rtol 0 --atol 0 --ulps N: ulps alone).

--bisect ops: when the outputs diverge, the first instruction (topological order, as `xlasdk
inspect` names them) that introduces the divergence: its device value differs from its rule on
the device's values of its operands, while those agree with the reference. Found by binary search
over programs cut after a candidate (O(log N) compiles), then compiled alone on the device's
operand values; when it is right alone, the smallest group of ops before it whose compile still
diverges is named (an optimization across them). Prints its name, opcode, HLO line, source line,
error and values; says "not localised" rather than blame an op without evidence.
--bisect passes: a smallest set of XLA passes (as xla_disable_hlo_passes names them, read from
XLA's per-pass dump of this compile) whose disabling removes the divergence, by delta debugging;
each step compiles in a worker process; a set whose compile fails counts as unknown.
--find-nonfinite: the first instruction whose device value has a NaN or Inf while its operands
have none (on any device; XLA's own checker is GPU-only), and whether its NaN/Inf reaches an
output (flows there through values that all hold one) or is dropped (by a select, say); then, for
each output that holds NaN/Inf that it does not reach, the first instruction on that output's path
that introduces one. Progress of these goes to stderr.
--html OUT.html: the report as a self-contained page (no scripts, nothing fetched): the outputs'
errors, the bisections, and the program's graph, each instruction filled by its error against the
reference (exact, within rounding, diverges), the one that introduces the divergence and the path
that carries its value to the outputs marked, and the first NaN/Inf.

--timeout S: compiling, running and comparing (bisections included) must end within S seconds.
The command runs in a supervised child process: an XLA abort or crash is one error line.

Exit codes: 0 match; 1 divergence, and nothing else; 2 no comparison could be made: usage or file
error, an op the reference evaluator has no rule for (named), a compile XLA refused, a device
error, an XLA crash or --timeout (the message says which)."""


def add_parser(sub: Any, common: argparse.ArgumentParser, fmt_help: str) -> None:
    s = sub.add_parser("compare", parents=[common], help="compare a module's outputs on a device with a reference",
                       formatter_class=argparse.RawDescriptionHelpFormatter, description=_COMPARE_DESCRIPTION)
    s.add_argument("file", metavar="FILE", help="the module file")
    s.add_argument("--format", default=None, help=fmt_help)
    s.add_argument("--device", default=None, help="device XLA runs on, e.g. cpu:0 (default: the first device)")
    s.add_argument("--against", default="reference", metavar="reference|DEVICE|recorded|OUT.npz",
                   help="what to compare with (default: the reference evaluator)")
    add_input_arguments(s)
    s.add_argument("--rtol", type=float, default=None, help="relative tolerance (default: by element type)")
    s.add_argument("--atol", type=float, default=None, help="absolute tolerance (default: by element type)")
    s.add_argument("--xla-flags", default=None, metavar='"--xla_NAME=VALUE ..."',
                   help="XLA flags (DebugOptions fields, as XLA_FLAGS spells them) for the device side's compile")
    s.add_argument("--ulps", type=float, default=None, metavar="N",
                   help="a float element also matches within N ulps of the reference (see below)")
    s.add_argument("--bisect", choices=("ops", "passes"), default=None,
                   help="on a divergence: the instruction that introduces it (ops) or the XLA passes that cause it")
    s.add_argument("--find-nonfinite", action="store_true",
                   help="the first instruction whose value has a NaN/Inf while its operands have none")
    s.add_argument("--excess-precision", action="store_true",
                   help="against the reference, let XLA keep bf16/f16 values in f32 between ops (its default; "
                        "the tolerances do not model it: a divergence then may be XLA being more precise)")
    s.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="stop when compiling, running and comparing take more than S seconds, with exit code 2 "
                        "(a While whose condition stays true never ends, on the device or in the reference)")
    s.add_argument("--json", metavar="OUT.json", default=None, help="also write the report as JSON")
    s.add_argument("--html", metavar="OUT.html", default=None,
                   help="also write the report as a self-contained HTML page (the program's graph, each "
                        "instruction colored by its error, the first divergent one and its path marked)")
    s.set_defaults(verb_parser=s)


def _xla_flags(text: str | None) -> dict[str, Any]:
    """``--xla-flags "--xla_a=1 --xla_b"`` as DebugOptions overrides: ``{"xla_a": 1, "xla_b": True}``
    (true/false as booleans, numbers as numbers, anything else as text)."""
    out: dict[str, Any] = {}
    for item in (text or "").split():
        name, eq, raw = item.removeprefix("--").partition("=")
        if not re.fullmatch(r"xla_\w+", name):
            raise UsageError(f"--xla-flags: {item!r} is not an XLA flag (expected --xla_NAME=VALUE)")
        value: Any = True if not eq else raw
        if eq and raw.lower() in ("true", "false"):
            value = raw.lower() == "true"
        elif eq and re.fullmatch(r"-?\d+", raw):
            value = int(raw)
        elif eq and re.fullmatch(r"-?\d*\.\d+(e-?\d+)?", raw):
            value = float(raw)
        out[name] = value
    return out


def _cmd_compare(args: argparse.Namespace, out: IO[str]) -> int:
    _stage("loading")
    comp, snap = _load_program(args)
    ps = comp.program_shape()
    _check_memory(ps)
    inputs = _gather_inputs(args, ps, _recorded_arguments(args, snap), comp)
    rt = _api()
    dev = _device(args)
    against: Any = args.against
    if against not in ("reference", "recorded") and not against.endswith(".npz") and not re.fullmatch(
            r"[a-z][a-z0-9_]*(:\d+)?", against):
        raise UsageError(f"--against {against!r}: expected 'reference', a device such as cpu:0, 'recorded' (a "
                         "snapshot's result) or an .npz of recorded outputs (output_0, output_1, ...)")
    label = None
    if against == "recorded":
        if snap is None or snap.result is None:
            what = "is not a snapshot" if snap is None else "records no result"
            raise UsageError(f"--against recorded: {args.file} {what}; give --against OUT.npz")
        against, label = snap.outputs(), "the recorded result"
    elif against.endswith(".npz"):
        n = len(ps.result_shape().tuple_shapes()) if ps.result_shape().is_tuple() else 1
        against, label = _expected_outputs(against, n, "--against"), f"the outputs in {args.against}"
    flags = _xla_flags(args.xla_flags)
    _stage("comparing")
    from xlasdk.errors import XlaSdkError
    from xlasdk.reference import UnsupportedOpError, compare

    if (args.bisect or args.find_nonfinite) and args.against != "reference":
        raise UsageError(f"--bisect / --find-nonfinite compare against the reference, not --against {args.against}")
    if args.ulps is not None and not args.ulps >= 0:
        raise UsageError(f"--ulps {args.ulps}: expected a number of ulps >= 0")

    def progress(line: str) -> None:
        err = _ERR_STREAM[0] if _ERR_STREAM else sys.stderr
        err.write(line + "\n")
        err.flush()

    if args.bisect or args.find_nonfinite:
        _stage("bisecting")
    try:
        report = compare(comp, inputs, device=dev, against=against, rtol=args.rtol, atol=args.atol,
                         excess_precision=args.excess_precision, ulps=args.ulps, bisect=args.bisect,
                         find_nonfinite=args.find_nonfinite, progress=progress, xla_flags=flags)
    except UnsupportedOpError as e:
        raise UsageError(f"cannot check {args.file}: {e}") from None
    except XlaSdkError as e:
        if "compare:" not in str(e):
            raise
        raise UsageError(str(e)) from None
    del rt
    if label is not None:
        report.against = label
    out.write(str(report) + "\n")
    if args.json:
        from xlasdk._atomic import atomic_write

        doc = report.as_dict()
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
    return EXIT_OK if report.ok else EXIT_DIVERGENCE
