"""The ``xlasdk`` command's parser and the checks its verbs make before loading anything: every
verb's options, descriptions and epilogs, and the verbs themselves imported only when they run.

A light module (the standard library, ``_common``, ``xlasdk.errors`` and ``xlasdk.launch``'s
options): ``xlasdk --help``, ``xlasdk VERB --help`` and the usage errors answer without importing
numpy, ml_dtypes or jaxlib, which the verbs' modules (``_run``, ``_compare``, ``_reduce`` and
``_arrays``) import. A supervised verb's module is imported by the child that runs it
(``_supervisor``), so the parent imports none of them before the fork.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
from collections.abc import Callable
from typing import IO, Any

from xlasdk._numbers import COUNT, MAX_SEED, SECONDS, SEED, TOLERANCE

from ._common import UsageError, _check_exists, _check_writable, _npz_path, _Parser

# -- help texts ----------------------------------------------------------------------------------------
_RUN_DESCRIPTION = """\
Compile and run a module (any format, XLA dumps included) on a device; print each output's shape
and a summary of its values, and with --repeat the min/median time per run. Inputs come from .npy
files (--input NAME=FILE, NAME being a parameter name or index), an .npz (--inputs, keyed by
parameter names) or random values (--random-inputs).

A partitioned (SPMD) program runs on replicas x partitions devices: XLA's dumps of such programs
record num_partitions (and replica_count) in their HloModule line, JAX's StableHLO mhlo.num_partitions,
and --partitions / --replicas override them. Inputs and outputs are then the global arrays: each
input is split by its parameter's sharding, each output is assembled from its shards (and printed
with its sharding). --devices N gives the CPU client N devices (default: replicas x partitions)."""

_RUN_EPILOG = """\
element types:
  Every XLA array type goes through .npy and .npz files: bf16, the fp8 types (f8e4m3fn, f8e5m2,
  ...), f4e2m1fn, s4/u4 and s2/u2 too. numpy has no such types; ml_dtypes adds them and np.save
  writes them as raw bytes ('|V2', '|V1'). An input holding raw bytes of the parameter's element
  size is read as the parameter's type; other sizes are an error naming the parameter.
  --output writes those outputs as raw bytes too, and their types (ml_dtypes names) in a
  '__dtypes__' entry, so the file loads in plain numpy and is the --inputs of another run as it is.
  In numpy:
    z = np.load("out.npz")
    z["output_0"].view(ml_dtypes.bfloat16)              # a bf16 output
    types = json.loads(str(z["__dtypes__"]))            # {"output_0": "bfloat16", ...}
    z["output_0"].view(getattr(ml_dtypes, types["output_0"]))

crashes and --timeout:
  The work runs in a child process: if XLA aborts, the command reports its "Check failed" line
  (exit code 1) instead of dying. --timeout S bounds compiling and running (reading the files
  and starting up are not counted): past S seconds the child is killed, exit code 1,
  "FILE: the run did not finish within S s (--timeout)". --debug shows XLA's full log.

exit codes: 0 success, 1 runtime failure (compile, execute, XLA abort, --timeout), 2 usage or input error
"""


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
must be equal; NaN matches only NaN. Where an element differs and that carried bound reaches the
largest of the output's magnitude, its terms and the arguments (any value of the output's size
would pass), it is not judged: CANNOT JUDGE, exit 3, never a match. A top_k's indices match when
they are a valid top-k of the reference's keys within those keys' bounds (near ties either way).
Against the reference, XLA compiles without excess
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
--bisect passes: a minimal set of XLA passes (as xla_disable_hlo_passes names them, read from
XLA's per-pass dump of this compile) whose disabling removes the divergence, by delta debugging
(ddmin); says when passes interact ("either of A or B", "A and B together"), confirms the set by
two final compiles (disabled: match; enabled: divergence) and prints the XLA_FLAGS line of the
good run. Passes disabled already (the dump's debug_options, --xla-flags, $XLA_FLAGS) stay
disabled. Each trial compiles in a worker process; a set whose compile fails counts as unknown;
at most --max-trials trials.
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
error, an XLA crash or --timeout (the message says which); 3 CANNOT JUDGE (a bound too loose to
judge an output, with the op-by-op step's reason); 130 interrupted."""


_REDUCE_DESCRIPTION = """\
Shrink FILE to the smallest module that still shows a problem, and write it as HLO text (what
XLA's tools and `xlasdk run` read). The problem, one of:
  --until crash                XLA aborts or dies compiling the module (checked in xlasdk's
                               worker process: this one never crashes)
  --until compile-error        the compile fails cleanly; compile-error=REGEX: with a message
                               in which REGEX is found. Without REGEX (and for crash) the failure
                               must stay FILE's: the same check file:line, or the same status code
                               and message once names and numbers are normalised
  --topology NAME              with crash / compile-error: compile for a TPU slice without a chip
                               (v5e:1x1; needs libtpu): an XLA:TPU failure shrinks on any machine
  --until diverge              `xlasdk compare` (against the reference evaluator, with --rtol,
                               --atol, --excess-precision) reports a divergence on the inputs
  --script CMD                 each candidate is written to a file whose path is appended to
                               CMD (run by the shell); exit 0 means "still interesting"
  --against GOOD.hlo           FILE differs from GOOD (a program bug): MIN.hlo is the instruction
                               of FILE that first departs from its match in GOOD (found as
                               `compare --against GOOD --bisect ops` finds it, inside while
                               bodies, calls, fusions and branches), its operands parameters;
                               MIN.good.hlo the matching cut of GOOD; MIN.npz the good run's
                               values of the operands (`xlasdk compare MIN.hlo --inputs MIN.npz
                               --against MIN.good.hlo` shows the difference). Kept only when
                               compare says DIVERGENCE on them, else a larger repro; FILE and GOOD
                               agreeing: "nothing to reduce", exit 2
Strategies, as XLA's hlo_bisect and C-Reduce use them: drop outputs, cut the instruction sequence
(bisected), replace instructions by parameters or by constants of their values on the inputs; then
simplify shapes and attributes (shrink dimension sizes, drop metadata and attributes, constants
to splats; an invalid candidate is rejected when loaded, and counted). A file of HLO or MLIR text
that XLA dies *loading* is cut as text (--until crash or --script): instructions, computations,
parameters, attributes and lines are deleted while XLA still dies loading it the same way.
Deterministic; one line per accepted step; --max-time bounds the search (the smallest module
found so far is written). With inputs, MIN.snapshot.pb (an HloSnapshot with the arguments the
reduced module shows the problem on) is written beside MIN.hlo. Inputs as `xlasdk run` takes
them; a snapshot's recorded arguments are used for the parameters not given (diverge without
inputs needs --random-inputs). Exit codes: 0 a reduced module was
written, 2 usage or file error, or FILE does not show the problem."""


# -- parser --------------------------------------------------------------------------------------------
def add_input_arguments(s: argparse.ArgumentParser) -> None:
    """The options that give a program's inputs (``run``, ``compare``, ``reduce``: :func:`._arrays._gather_inputs`)."""
    s.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                   help="one parameter's value (repeatable); FILE.npz:KEY takes one array of an .npz")
    s.add_argument("--inputs", metavar="FILE.npz", default=None,
                   help="parameter values keyed by parameter name or index (output_N of another run's --output "
                        "is parameter N)")
    s.add_argument("--random-inputs", action="store_true",
                   help="random values for parameters not given (indices in bounds, log/sqrt/divisor operands "
                        "positive: learned from the parameters' uses)")
    s.add_argument("--seed", type=SEED.parse, default=0, help="seed of --random-inputs (default 0)")


def add_compare_parser(sub: Any, common: argparse.ArgumentParser, fmt_help: str) -> None:
    s = sub.add_parser("compare", parents=[common], help="compare a module's outputs on a device with a reference",
                       formatter_class=argparse.RawDescriptionHelpFormatter, description=_COMPARE_DESCRIPTION)
    s.add_argument("file", metavar="FILE", help="the module file")
    s.add_argument("--format", default=None, help=fmt_help)
    s.add_argument("--device", default=None, help="device XLA runs on, e.g. cpu:0 (default: the first device)")
    s.add_argument("--against", default="reference", metavar="reference|DEVICE|recorded|OUT.npz|GOOD.hlo",
                   help="what to compare with (default: the reference evaluator; GOOD.hlo: a second module that "
                        "computes what FILE should, run on the same device, --bisect ops matching their "
                        "instructions by name, then structure)")
    s.add_argument("--against-python", default=None, metavar="PATH",
                   help="compare with the same module compiled and run under another Python environment: PATH is "
                        "its interpreter (or a wrapper that execs one), with jaxlib>=0.10.2,<0.13, numpy and "
                        "ml_dtypes; --bisect ops names the first instruction whose value differs there (where exposing "
                        "the values hides it, the one from which the module cut there still differs), --bisect "
                        "passes the passes that make the difference (on the side that leaves the reference) and the "
                        "passes one release runs and the other does not")
    s.add_argument("--against-jaxlib", default=None, metavar="VERSION",
                   help="as --against-python, in a virtual environment with that jaxlib made once with pip and "
                        "kept in xlasdk's cache directory (envs/)")
    s.add_argument("--optimized-hlo", action="store_true",
                   help="with --against-python/--against-jaxlib: compare the optimized HLO XLA makes of FILE here "
                        "and there, instruction by instruction (matched by origin, then structure: added, removed, "
                        "changed opcode, shape, layout, fusion kind); nothing runs; exit 1 when they differ")
    s.add_argument("--topology", default=None, metavar="NAME",
                   help="--optimized-hlo: compile for one device of this TPU slice without a chip, e.g. v5e:1x1 "
                        "(each environment's libtpu; default: the CPU)")
    add_input_arguments(s)
    s.add_argument("--rtol", type=TOLERANCE.parse, default=None, help="relative tolerance (default: by element type)")
    s.add_argument("--atol", type=TOLERANCE.parse, default=None, help="absolute tolerance (default: by element type)")
    s.add_argument("--xla-flags", default=None, metavar='"--xla_NAME=VALUE ..."',
                   help="XLA flags (DebugOptions fields, as XLA_FLAGS spells them) for the device side's compile")
    s.add_argument("--no-debug-options", action="store_true",
                   help="compile a file of an XLA dump without the options it was compiled with (by default the "
                        "device side gets those of its module_NNNN.NAME.debug_options that change values, under "
                        "--xla-flags, and the report names them)")
    s.add_argument("--ulps", type=TOLERANCE.parse, default=None, metavar="N",
                   help="a float element also matches within N ulps of the reference (see below)")
    s.add_argument("--bisect", choices=("ops", "passes"), default=None,
                   help="on a divergence: the instruction that introduces it (ops) or the XLA passes that cause it")
    s.add_argument("--max-trials", type=COUNT.parse, default=None, metavar="N",
                   help="--bisect passes: at most N trial compiles (default 200; the report says when the search "
                        "stopped there)")
    s.add_argument("--find-nonfinite", action="store_true",
                   help="the first instruction whose value has a NaN/Inf while its operands have none")
    s.add_argument("--excess-precision", action="store_true",
                   help="against the reference, let XLA keep bf16/f16 values in f32 between ops (its default; "
                        "the tolerances do not model it: a divergence then may be XLA being more precise)")
    s.add_argument("--timeout", type=SECONDS.parse, default=None, metavar="S",
                   help="stop when compiling, running and comparing take more than S seconds, with exit code 2 "
                        "(a While whose condition stays true never ends, on the device or in the reference)")
    s.add_argument("--device-kind", default=None, metavar="cpu|gpu|tpu-v5e|tpu-v5p|tpu-v6e|...",
                   help="whose error model judges each op (default: the device's; a TPU's f32 dots at DEFAULT "
                        "precision are bf16 products, its tanh within 1365.5 ulp...: README 'How sure is compare?')")
    s.add_argument("--precision", choices=("default", "high", "highest"), default=None,
                   help="compile and judge every dot and convolution at this precision (highest: tells the "
                        "device's precision from a bug)")
    s.add_argument("--outputs", metavar="OUT.npz", default=None,
                   help="outputs recorded on a device of --device-kind elsewhere (output_0, ...): compared with "
                        "the reference computing as that device does (no local run)")
    s.add_argument("--json", metavar="OUT.json", default=None, help="also write the report as JSON")
    s.add_argument("--html", metavar="OUT.html", default=None,
                   help="also write the report as a self-contained HTML page (the program's graph, each "
                        "instruction colored by its error, the first divergent one and its path marked)")
    s.set_defaults(verb_parser=s)


def add_reduce_parser(sub: Any, common: argparse.ArgumentParser, fmt_help: str) -> None:
    s = sub.add_parser("reduce", parents=[common], help="shrink a module that shows a problem",
                       formatter_class=argparse.RawDescriptionHelpFormatter, description=_REDUCE_DESCRIPTION)
    s.add_argument("file", metavar="FILE", help="the module file")
    s.add_argument("--format", default=None, help=fmt_help)
    s.add_argument("--until", default=None, metavar="crash|compile-error[=REGEX]|diverge",
                   help="the problem the reduced module must still show")
    s.add_argument("--script", default=None, metavar="CMD",
                   help="instead of --until: a shell command; the candidate's path is appended, exit 0 = interesting")
    s.add_argument("--against", default=None, metavar="GOOD.hlo",
                   help="instead of --until: a module that computes what FILE should; MIN.hlo is a small cut of "
                        "FILE that still differs from GOOD's matching cut (MIN.good.hlo) on MIN.npz")
    s.add_argument("--device", default=None, help="--against: where both run, e.g. cpu:0 (default: the first device)")
    s.add_argument("--topology", default=None, metavar="NAME",
                   help="--until crash|compile-error: compile each candidate for a TPU slice without a chip, e.g. "
                        "v5e:1x1 (needs libtpu), keeping XLA:TPU's failure (default: the CPU)")
    s.add_argument("--output", "-o", required=True, metavar="MIN.hlo", help="where the reduced module is written")
    s.add_argument("--max-time", type=SECONDS.parse, default=None, metavar="S",
                   help="stop after S seconds and write the smallest module found so far")
    s.add_argument("--check-timeout", type=SECONDS.parse, default=300.0, metavar="S",
                   help="seconds one check may take before it counts as not showing the problem (default 300)")
    add_input_arguments(s)
    s.add_argument("--rtol", type=TOLERANCE.parse, default=None,
                   help="diverge: relative tolerance (default: by element type)")
    s.add_argument("--atol", type=TOLERANCE.parse, default=None,
                   help="diverge: absolute tolerance (default: by element type)")
    s.add_argument("--excess-precision", action="store_true",
                   help="diverge: let XLA keep bf16/f16 values in f32 between ops (its default)")
    s.set_defaults(verb_parser=s)


_TRIAGE_DESCRIPTION = """\
Load and compile each module (files, and the module files of directories: .hlo, .txt, .mlir,
.mlirbc, .pb, .stablehlo) in xlasdk's worker process, and group the modules that fail by the
way they fail: an abort by its check's location (XLA's "Check failed" / "F0000 ... file.cc:NNN]"
line), a clean failure by its status code and message with what is particular to one module
blanked (sizes, layouts, names' numbers, numbers, paths; element types and XLA's words kept), the
failing instruction's opcode in parentheses where XLA names one, a load that fails marked
"loading:". For each failing module one more compile with XLA's per-pass dump names the last HLO
pass XLA entered. --repeat N compiles each module N times: a group holding a module whose compiles
did not all end the same way is flaky. Prints a table (group, count, flaky, last pass, example
file, the signature whole below); --json OUT writes the groups with every file; --html OUT a
self-contained page (the groups, XLA's messages, links to --reduce's repros). Exit codes: 0 every
module compiled, 1 some failed (the table says how), 2 usage error (a path that does not exist, a
directory with no module file)."""


def add_triage_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser("triage", parents=[common], help="compile many modules and group their failures",
                       formatter_class=argparse.RawDescriptionHelpFormatter, description=_TRIAGE_DESCRIPTION)
    s.add_argument("paths", nargs="+", metavar="DIR_OR_FILE", help="module files and directories of them")
    s.add_argument("--device", default=None, help="compile for this device, e.g. cpu:0 (default: the CPU)")
    s.add_argument("--topology", default=None, metavar="NAME",
                   help="compile for a TPU slice without a chip, e.g. v5e:1x1 (needs libtpu); instead of --device")
    s.add_argument("--repeat", type=COUNT.parse, default=1, metavar="N",
                   help="compile each module N times and mark the groups whose modules fail differently as flaky")
    s.add_argument("--json", default=None, metavar="OUT.json", help="write the groups as JSON")
    s.add_argument("--html", default=None, metavar="OUT.html",
                   help="write the groups as a self-contained HTML page (repros of --reduce linked)")
    s.add_argument("--timeout", type=SECONDS.parse, default=300.0, metavar="S",
                   help="seconds one compile may take (past it: a 'timeout' failure; default 300)")
    s.add_argument("--reduce", default=None, metavar="DIR",
                   help="shrink each group's example with the reducer into DIR/group_K.hlo (same failure kept)")
    s.add_argument("--reduce-time", type=SECONDS.parse, default=120.0, metavar="S",
                   help="seconds the reducer may spend per group (default 120)")
    s.set_defaults(verb_parser=s)


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the ``xlasdk`` command."""
    common = _Parser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show Python tracebacks and XLA's log output on errors")
    p = _Parser(
        prog="xlasdk",
        description="Build, inspect, convert and run XLA computations.",
        epilog="Exit codes: 0 success, 1 runtime failure, 2 usage or input error.",
        parents=[common],
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="VERB", parser_class=_Parser)

    s = sub.add_parser("devices", parents=[common], help="list the devices of a platform",
                       description="A table of the devices of a platform (default: the default platform).")
    s.add_argument("--platform", default=None, help="platform name, e.g. cpu, cuda (default: the default platform)")
    s.set_defaults(verb_parser=s)

    s = sub.add_parser("version", parents=[common], help="print the xlasdk, jaxlib and StableHLO versions",
                       description="Print the xlasdk, jaxlib, StableHLO and Python versions.")
    s.set_defaults(verb_parser=s)

    fmt_help = "force the input format: hlo, mlir, mlirbc or pb (default: by suffix, then by content)"
    timeout_help = "stop when compiling takes more than S seconds (exit code 1)"
    s = sub.add_parser(
        "inspect", parents=[common], help="program shape, op counts, cost and memory of a module",
        description="Print a module's program shape, HLO op counts by opcode, XLA's cost analysis and memory "
                    "figures (compiled for --device), and optionally its HLO, StableHLO or optimized HLO. "
                    "FILE is HLO text, StableHLO text, a portable artifact or an HLO proto, including XLA dump files.",
    )
    s.add_argument("file", metavar="FILE", help="the module file")
    s.add_argument("--format", default=None, help=fmt_help)
    s.add_argument("--device", default=None, help="device to compile for, e.g. cpu:0 (default: the first device)")
    s.add_argument("--topology", default=None, metavar="NAME",
                   help="compile for a TPU slice without a chip, e.g. v5e:1x1 or v5e:2x2 (needs libtpu: "
                        "pip install 'xlasdk[tpu]'); instead of --device")
    s.add_argument("--optimized", action="store_true", help="print the optimized HLO XLA compiled")
    s.add_argument("--hlo", action="store_true", help="print the (unoptimized) HLO text")
    s.add_argument("--stablehlo", action="store_true", help="print the StableHLO text")
    s.add_argument("--no-compile", action="store_true", help="skip compiling (no cost or memory figures)")
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s.add_argument("--timeout", type=SECONDS.parse, default=None, metavar="S", help=timeout_help)
    s.set_defaults(verb_parser=s)

    s = sub.add_parser(
        "convert", parents=[common], help="convert a module between file formats",
        description="Convert a module between HLO text (.hlo, .hlo.txt, .txt), StableHLO text (.mlir), StableHLO "
                    "portable artifacts (.mlirbc) and HLO module protos (.pb). Formats follow the suffixes. The "
                    "file is written under a temporary name, loaded back and, when IN compiles, compiled; only "
                    "then is it renamed to OUT (a file that fails the check is removed, exit code 1, and an "
                    "existing OUT is left as it was).",
    )
    s.add_argument("input", metavar="IN", help="the module to read")
    s.add_argument("output", metavar="OUT", help="the file to write (format from its suffix)")
    s.add_argument("--target-version", default=None,
                   help="StableHLO version of a .mlirbc artifact, e.g. 1.9.0, or WEEK_4, WEEK_12, MAX, current "
                        "(default: the oldest version that holds every op)")
    s.add_argument("--from", dest="from_format", default=None, help=fmt_help)
    s.add_argument("--to", dest="to_format", default=None, help="force the output format: hlo, mlir, mlirbc or pb")
    s.add_argument("--no-compile", action="store_true", help="load the written file back, but do not compile it")
    s.add_argument("--no-check", action="store_true", help="do not load the written file back (nor compile it)")
    s.add_argument("--timeout", type=SECONDS.parse, default=None, metavar="S", help=timeout_help)
    s.set_defaults(verb_parser=s)

    s = sub.add_parser(
        "run", parents=[common], help="run a module on a device and summarize its outputs",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=_RUN_DESCRIPTION,
        epilog=_RUN_EPILOG,
    )
    s.add_argument("file", metavar="FILE", help="the module file")
    s.add_argument("--format", default=None, help=fmt_help)
    s.add_argument("--device", default=None, help="device to run on, e.g. cpu:0 (default: the first device)")
    add_input_arguments(s)
    s.add_argument("--no-debug-options", action="store_true",
                   help="compile a file of an XLA dump without the options it was compiled with (by default those "
                        "of its module_NNNN.NAME.debug_options that change values are applied, and named)")
    s.add_argument("--iterations", type=COUNT.parse, default=1, metavar="K",
                   help="run K times, each with fresh random inputs (seed, seed+1, ...), as run_hlo_module does")
    s.add_argument("--output", metavar="OUT.npz", default=None,
                   help="save the outputs as output_0, output_1, ... (written atomically; see below for bf16, "
                        "fp8, int4)")
    s.add_argument("--repeat", type=COUNT.parse, default=1, metavar="N", help="run N times and report min/median time")
    s.add_argument("--expect", default=None, metavar="recorded|OUT.npz",
                   help="compare the outputs with a snapshot's recorded result or an .npz of outputs, as xlasdk "
                        "compare does (per-type tolerances, --rtol / --atol); exit code 1 when they differ")
    s.add_argument("--expect-device-kind", default=None, metavar="KIND",
                   help="the kind of device that recorded --expect's outputs (cpu, gpu, tpu-v5e, ...): they are "
                        "judged as xlasdk compare --outputs OUT.npz --device-kind KIND judges them, and this run's "
                        "outputs as recorded on this device's kind; the worse verdict counts (exit code 1 for "
                        "DIVERGENCE, 3 for CANNOT JUDGE, as compare's)")
    s.add_argument("--rtol", type=TOLERANCE.parse, default=None,
                   help="relative tolerance of --expect (default: by element type)")
    s.add_argument("--atol", type=TOLERANCE.parse, default=None,
                   help="absolute tolerance of --expect (default: by element type)")
    s.add_argument("--record", default=None, metavar="DIR",
                   help="write the run (module, inputs, outputs) as an HloSnapshot DIR/NAME.snapshot.K.pb, which "
                        "xlasdk run and XLA's run_hlo_module replay")
    s.add_argument("--devices", type=COUNT.parse, default=None, metavar="N",
                   help="run on a CPU client of N devices (default: replicas x partitions when that is above 1)")
    s.add_argument("--replicas", type=COUNT.parse, default=None, metavar="R",
                   help="number of replicas (default: the module's replica_count / mhlo.num_replicas, else 1)")
    s.add_argument("--partitions", type=COUNT.parse, default=None, metavar="P",
                   help="number of SPMD partitions (default: the module's num_partitions / mhlo.num_partitions, "
                        "else the device count of its shardings, else 1)")
    s.add_argument("--timeout", type=SECONDS.parse, default=None, metavar="S",
                   help="stop when compiling and running take more than S seconds, with exit code 1: a While whose "
                        "condition stays true, or a Sort whose comparator is not a strict weak order, never ends")
    s.set_defaults(verb_parser=s)

    add_compare_parser(sub, common, fmt_help)
    add_reduce_parser(sub, common, fmt_help)
    add_triage_parser(sub, common)

    s = sub.add_parser("cache", parents=[common], help="inspect or clear the compile cache",
                       description="The on-disk compile cache (XLASDK_CACHE_DIR, default ~/.cache/xlasdk).")
    csub = s.add_subparsers(dest="cache_command", required=True, metavar="ACTION", parser_class=_Parser)
    for name, hlp in (("info", "entry count and size (--list: every entry)"), ("clear", "delete every entry")):
        c = csub.add_parser(name, parents=[common], help=hlp, description=hlp[0].upper() + hlp[1:] + ".")
        c.add_argument("--dir", default=None,
                       help="the cache directory (default: $XLASDK_CACHE_DIR or ~/.cache/xlasdk)")
        if name == "info":
            c.add_argument("--list", action="store_true", help="list the entries, most recently used first")
        c.set_defaults(verb_parser=c)

    from xlasdk.launch import build_parser as launch_options

    s = sub.add_parser(
        "launch", parents=[common], help="run a Python script in N local processes of one xs.distributed job",
        usage="xlasdk launch -n N [OPTIONS] (SCRIPT | -m MODULE) [ARGS...]",
        description="Run 'python SCRIPT ARGS' (or 'python -m MODULE ARGS') in N local processes with "
                    "XLASDK_COORDINATOR, XLASDK_NUM_PROCESSES and XLASDK_PROCESS_ID set, so that "
                    "xs.distributed.initialize() joins them; the same as 'python -m xlasdk.launch'. Output lines "
                    "are prefixed with [i]; when a process fails the others are stopped.",
    )
    launch_options(s)
    s.set_defaults(verb_parser=s)
    return p


# -- the checks a verb makes before it loads anything ---------------------------------------------
def _check_output_name(output: str) -> None:
    """``--output`` names a file to write (an empty name was refused first: :func:`_check_paths_named`):
    not a directory (``out/``), not a special file (``/dev/full``: np.savez would write
    ``/dev/full.npz`` beside it)."""
    import stat

    from xlasdk._atomic import file_kind

    if output.endswith(("/", os.sep)) or os.path.basename(output) in (".", ".."):
        raise UsageError(f"--output {output}: names a directory, not a file (--output OUT.npz)")
    for path in dict.fromkeys((output, _npz_path(output))):
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            continue
        if not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):  # a directory: _check_writable says so
            raise UsageError(f"--output {output}: {path} is {file_kind(st.st_mode)}, not a regular file; --output "
                             "writes an .npz file")


#: What each option that names a file is for, said when it is given an empty name.
_PATH_OPTIONS: dict[str, str] = {
    "output": "--output OUT.npz names the file the outputs are written to",
    "record": "--record DIR names the directory the snapshots are written to",
    "json": "--json OUT.json names the file the report is written to",
    "html": "--html OUT.html names the file the report is written to",
    "outputs": "--outputs OUT.npz names the file of outputs recorded elsewhere",
}


def _check_paths_named(args: argparse.Namespace, flags: tuple[str, ...]) -> None:
    """An option of ``flags`` (``_PATH_OPTIONS``) given an empty name is a usage error, as
    ``--output ''`` always was (``--json ''`` and ``--html ''`` were silently ignored); the
    report files (``--json``, ``--html``) must be writable before the comparison runs."""
    for flag in flags:
        value = getattr(args, flag, None)
        if value is None:
            continue
        if not value:
            raise UsageError(f"--{flag} '': an empty file name ({_PATH_OPTIONS[flag]})")
        if flag in ("json", "html"):
            _check_writable(value, f"--{flag} {value}")


#: A device as ``--against`` names one (``cpu``, ``cuda:1``); anything else names a file.
_DEVICE_NAME = re.compile(r"[a-z][a-z0-9_]*(:\d+)?")
_AGAINST_FORMS = ("expected 'reference', a device such as cpu:0, 'recorded' (a snapshot's result), an .npz of "
                  "recorded outputs (output_0, output_1, ...) or a second module file (GOOD.hlo)")


def against_path_problem(value: str) -> str | None:
    """What is wrong with ``--against VALUE`` as a file (a module or an .npz of outputs): None for a
    regular file, else ``"no such file"``, ``"it is a directory, ..."``, ``"it is a FIFO, not a regular
    file ..."``."""
    import stat

    from xlasdk._atomic import file_kind

    try:
        st = os.stat(value)
    except (OSError, ValueError):  # missing, a broken link, a NUL in the name
        return "it is a broken symbolic link" if os.path.islink(value) else "no such file"
    if stat.S_ISREG(st.st_mode):
        return None
    if stat.S_ISDIR(st.st_mode):
        return "it is a directory, not a module file or an .npz of recorded outputs"
    return f"it is {file_kind(st.st_mode)}, not a regular file (a module file or an .npz of recorded outputs)"


def check_against(value: str) -> None:
    """``--against VALUE``, before anything is loaded: a value that is no device name (it has a
    ``/``, a suffix, capitals...) names a file, which must be a regular one; the message says what is
    wrong with the path. A device name that is no regular file is resolved as a device later (where
    an unknown platform's message adds the path's problem: :func:`against_path_problem`)."""
    if not value:
        raise UsageError(f"--against '': an empty name; {_AGAINST_FORMS}")
    if value in ("reference", "recorded") or _DEVICE_NAME.fullmatch(value):
        return
    problem = against_path_problem(value)
    if problem is not None:
        raise UsageError(f"--against {value}: {problem}" + (f"; {_AGAINST_FORMS}" if problem == "no such file" else ""))


def check_against_environment(args: argparse.Namespace) -> None:
    """``--against-python PATH`` / ``--against-jaxlib VERSION``: one of them, instead of --against,
    with no --bisect but ops and no --outputs; PATH an existing file."""
    given = [f for f, v in (("--against-python", args.against_python), ("--against-jaxlib", args.against_jaxlib))
             if v is not None]
    if getattr(args, "topology", None) is not None and not getattr(args, "optimized_hlo", False):
        raise UsageError("--topology NAME is where --optimized-hlo compiles: give --optimized-hlo")
    if getattr(args, "optimized_hlo", False):
        if not given:
            raise UsageError("--optimized-hlo compares two environments' compiles: give --against-python PATH or "
                             "--against-jaxlib VERSION")
        if args.bisect or args.find_nonfinite or args.outputs or args.html:
            raise UsageError("--optimized-hlo compiles and compares the optimized HLO, nothing runs: no --bisect, "
                             "--find-nonfinite, --outputs or --html")
    if not given:
        return
    if len(given) > 1 or args.against != "reference":
        raise UsageError(f"{given[0]}: give one of --against, --against-python and --against-jaxlib")
    if args.find_nonfinite or args.outputs:
        raise UsageError(f"{given[0]}: --bisect ops and --bisect passes are the searches between two environments "
                         "(not --find-nonfinite or --outputs)")
    if args.against_python is not None and not os.path.isfile(args.against_python):
        raise UsageError(f"--against-python {args.against_python}: no such file (expected a Python interpreter)")
    if args.against_jaxlib is not None:
        from xlasdk.errors import OtherEnvironmentError
        from xlasdk.reference._env_venv import checked_version

        try:
            checked_version(args.against_jaxlib)
        except OtherEnvironmentError as e:
            raise UsageError(str(e)) from None


def check_run_flags(args: argparse.Namespace) -> None:
    """Flag errors found before the (slow) load and compile (the numbers were checked as they were
    parsed: :mod:`xlasdk._numbers`)."""
    _check_paths_named(args, ("output", "record"))
    if args.output is not None:
        _check_output_name(args.output)
        _check_writable(_npz_path(args.output), f"--output {args.output}")
    if args.expect is not None and args.expect != "recorded":
        if not args.expect.endswith(".npz"):
            raise UsageError(f"--expect {args.expect!r}: expected 'recorded' or an .npz of outputs (output_0, "
                             "output_1, ... as --output writes them)")
    if args.record is not None and os.path.exists(args.record) and not os.path.isdir(args.record):
        raise UsageError(f"--record {args.record}: not a directory")
    if args.seed + args.iterations - 1 > MAX_SEED:  # run K uses seed + K - 1
        raise UsageError(f"--seed {args.seed} --iterations {args.iterations}: the last run's seed would be "
                         f"{args.seed + args.iterations - 1}; --seed must be {SEED.expected}")
    if args.iterations > 1 and args.output is not None:
        raise UsageError("--output saves the outputs of one run; drop --iterations (or --output)")


def check_reduce_flags(args: argparse.Namespace) -> None:
    """``reduce``'s flag errors, found before the (slow) load."""
    given = [f for f, v in (("--until", args.until), ("--script", args.script), ("--against", args.against))
             if v is not None]
    if len(given) != 1:
        raise UsageError("give exactly one of --until crash|compile-error[=REGEX]|diverge and --script CMD"
                         + (f" (or --against GOOD.hlo); got {' and '.join(given)}" if given else ""))
    if args.device is not None and args.against is None:
        raise UsageError("--device is where --against runs both modules; give --against GOOD.hlo"
                         " (--topology NAME compiles for a TPU without a chip with --until crash|compile-error)")
    if args.topology is not None and (args.until is None or args.until == "diverge"):
        raise UsageError("--topology NAME compiles each candidate for that TPU: it goes with --until crash or "
                         "--until compile-error[=REGEX]")
    if args.until is not None and not (args.until in ("crash", "diverge", "compile-error")
                                       or args.until.startswith("compile-error=")):
        raise UsageError(f"--until {args.until!r}: expected crash, compile-error, compile-error=REGEX or diverge")
    _check_writable(args.output, f"--output {args.output}")


def _precheck_run(args: argparse.Namespace) -> None:
    check_run_flags(args)
    _check_exists(args.file)


def _precheck_reduce(args: argparse.Namespace) -> None:
    check_reduce_flags(args)
    _check_exists(args.file)
    if args.against is not None and not os.path.lexists(args.against):
        raise UsageError(f"--against {args.against}: no such file")


def _precheck_triage(args: argparse.Namespace) -> None:
    if args.topology is not None and args.device is not None:
        raise UsageError("--topology and --device: give one (a topology's devices are compile-only)")
    if args.json is not None:
        _check_writable(args.json, f"--json {args.json}")
    if args.html is not None:
        _check_writable(args.html, f"--html {args.html}")


def _precheck_compare(args: argparse.Namespace) -> None:
    _check_paths_named(args, ("json", "html", "outputs", "inputs"))
    check_against_environment(args)
    check_against(args.against)
    _check_exists(args.file)


# -- the verbs, imported when they run ---------------------------------------------------------------
Command = Callable[[argparse.Namespace, IO[str]], int]

#: verb -> (module of xlasdk.cli, its function)
_VERBS: dict[str, tuple[str, str]] = {
    "devices": ("_system", "_cmd_devices"),
    "version": ("_system", "_cmd_version"),
    "inspect": ("_inspect", "_cmd_inspect"),
    "convert": ("_inspect", "_cmd_convert"),
    "run": ("_run", "_cmd_run"),
    "compare": ("_compare", "_cmd_compare"),
    "reduce": ("_reduce", "_cmd_reduce"),
    "triage": ("_triage", "_cmd_triage"),
    "cache": ("_system", "_cmd_cache"),
    "launch": ("_system", "_cmd_launch"),
}
#: The checks a verb makes first, before it loads anything, for the verbs whose modules import numpy:
#: run before importing the module, so that these usage errors (the same messages, in the same order,
#: exit code 2) import nothing heavy. (``inspect`` finds a missing file in ``_load_program`` before any
#: import; ``convert`` checks its output's format first, which needs ``xlasdk.formats``.)
_PRECHECKS: dict[str, Callable[[argparse.Namespace], None]] = {
    "run": _precheck_run,
    "compare": _precheck_compare,
    "reduce": _precheck_reduce,
    "triage": _precheck_triage,
}


def _lazy(verb: str) -> Command:
    module, name = _VERBS[verb]

    def command(args: argparse.Namespace, out: IO[str]) -> int:
        precheck = _PRECHECKS.get(verb)
        if precheck is not None:
            precheck(args)
        cmd: Command = getattr(importlib.import_module(f"{__package__}.{module}"), name)
        return cmd(args, out)

    command.__name__ = command.__qualname__ = name
    return command


#: verb -> the function that runs it (``fn(args, out) -> exit code``); each imports its module on its first call
COMMANDS: dict[str, Command] = {verb: _lazy(verb) for verb in _VERBS}
