"""Hostile-file campaign: broken, corrupt and adversarial files for every loader and the CLI.

Inputs are made from REAL seed files: the committed corpus of JAX dumps in
``tests/data/dumps/*/`` (HLO text before and after optimization, ``HloModuleProto`` dumps,
StableHLO text, portable artifacts) and files xlasdk writes itself (``comp.save`` to ``.hlo``,
``.mlir``, ``.mlirbc``, ``.pb``, and portable artifacts of several StableHLO versions). Input
``i`` of campaign seed ``s`` is a pure function of ``(s, i)`` (:meth:`Generator.make`): one to
three mutations of one seed, chosen by ``random.Random(f"{s}:{i}")``:

* bytes: truncation, bit flips, inserted / deleted / duplicated byte ranges, splices of two seeds;
* HLO text lines: a dimension changed (0, -1, 2**31, 2**63-1, element counts that overflow int64
  such as ``f32[9223372036854775807,2]``), a layout changed (``{1,0}`` -> ``{0}``, ``{2,0,1}``),
  an opcode swapped or renamed, an operand dropped or added, a tuple shape made an array,
  ``token[2]``, ``token[] constant(0)``, a ``dot`` with one operand, an unknown or recursive
  ``to_apply=`` / ``calls=`` / ``body=``, parameter numbers with gaps or 2**31, attribute values
  (``dimensions=``, ``index=``, ``window=``, ``slice=``, ``direction=``), an entry layout that
  disagrees with the root, lines deleted / duplicated / swapped, the stack-frame tables of JAX
  dumps (``FileNames`` / ``FunctionNames`` / ``FileLocations`` / ``StackFrames`` blocks inserted,
  deleted, cyclic, with out-of-range ids) and ``stack_frame_id=`` values;
* StableHLO text: tensor dimensions and element types, op names, SSA value names, operands,
  ``call`` targets (unknown, recursive), attributes;
* portable artifacts: the ``StableHLO_vX.Y.Z`` producer version rewritten (older, newer, garbage);
* HLO protos: the wire format decoded into a tree and one varint, packed element, string or
  field edited, deleted, duplicated or swapped, then re-encoded with correct lengths.

Besides the mutations, :func:`special_inputs` makes structural extremes: HLO tuple shapes and
call chains nested 10,000 deep, StableHLO modules / regions / attributes / tuple types nested
10,000 deep, recursive ``call`` / ``func.call``, a 50,000-instruction chain, huge and overflowing
dimensions, tokens with dimensions, version strings, custom calls XLA does not know.

Each input is checked in a child process (``harness.run_batch``; a child that dies on input
``k`` is replaced and the batch goes on at ``k+1``): :func:`check_input` calls every loader
(``xs.load_computation`` with the suffixes ``.hlo .txt .mlir .mlirbc .pb`` and an unknown one,
``XlaComputation.from_hlo_text``, ``from_hlo_proto``, ``from_stablehlo`` with bytes and with
text), and for every distinct module that loads prints it (``as_hlo_text``), compiles it
(``xs.compile``) and runs it with zero inputs of the declared shapes (unless inputs or outputs
would pass :data:`RUN_LIMIT_BYTES`, or it holds tokens, infeed / outfeed / send / recv).
A sample of the inputs also goes through the CLI (``python -m xlasdk.cli inspect FILE`` and
``run FILE --random-inputs``) in a fresh process each.

Outcomes per input: ``ok`` (some loader accepted it, all later steps ended well or with an
xlasdk error), ``error`` (every loader raised an :class:`xlasdk.XlaSdkError`: what they must do),
and the failures ``raw`` (another exception escaped), ``death`` (the process died), ``hang``
(no answer within :func:`input_timeout`: :data:`INPUT_TIMEOUT_S`, more for big inputs, plus
:data:`LOAD_TIMEOUT_S` per loader, the ``XLASDK_LOAD_TIMEOUT`` the children run with, so that a
load xlasdk stops itself counts as its error). A CLI run fails when it ends by a signal, with an
exit code other than 0/1/2, prints a Python traceback or an ``internal error``, or hangs. Every
failure is written, with its input bytes and a reproducer, under the campaign's output directory.
A timeout while *running* a loaded program that has a ``while`` loop is counted as ``slow`` (a
mutated loop bound can make a valid program run for ages), not as a failure.

Children run with a :data:`ADDRESS_SPACE_BYTES` address-space limit (inherited by xlasdk's own
worker process), so that an unbounded allocation fails instead of taking the machine down.

``python tests/campaigns/hostile_files.py --profile quick|long [--seed S] [--out DIR]`` runs a
campaign and prints its figures; ``--show I`` writes input ``I`` to ``--out`` without running it.
"""

from __future__ import annotations

import argparse
import collections
import glob
import hashlib
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DUMPS = os.path.join(REPO, "tests", "data", "dumps")

INPUT_TIMEOUT_S = 120.0  # one input, every loader + compile + run (plus LOAD_TIMEOUT_S per loader)
CLI_TIMEOUT_S = 120.0  # one CLI command (plus LOAD_TIMEOUT_S)
LOAD_TIMEOUT_S = 60.0  # XLASDK_LOAD_TIMEOUT in the children: a load xlasdk gives up on is its error, not a hang
RUN_LIMIT_BYTES = 64 << 20  # inputs or outputs larger than this are not run
ADDRESS_SPACE_BYTES = 8 << 30  # per child process (and xlasdk's worker under it)
PGID_DIR_ENV = "XLASDK_HOSTILE_PGID_DIR"

KIND_SUFFIX = {"hlo": ".hlo", "mlir": ".mlir", "mlirbc": ".mlirbc", "pb": ".pb", "other": ".bin"}
LOAD_SUFFIXES = (".hlo", ".txt", ".mlir", ".mlirbc", ".pb", ".data")


@dataclass(frozen=True)
class Profile:
    name: str
    files: int  # inputs in all (specials included)
    cli: int  # CLI runs (inspect + run count as two)
    seed: int
    specials: str  # "quick" or "all"
    extra_loaders: int | None  # loaders besides the suffix's one per input (None: every loader)


# the quick profile (the default suite): every quick special input and the first 74 mutations (was 134, with
# 20 CLI runs: cut for the suite's time, issue 44; the long profile runs them all and more)
QUICK = Profile("quick", files=140, cli=12, seed=1, specials="quick", extra_loaders=1)
LONG = Profile("long", files=10_000, cli=400, seed=2, specials="all", extra_loaders=None)
PROFILES = {"quick": QUICK, "long": LONG}


# == seeds ====================================================================================
@dataclass(frozen=True)
class Seed:
    name: str
    kind: str  # hlo | mlir | mlirbc | pb | other
    data: bytes
    weight: float = 1.0


def _kind_of(path: str) -> str:
    if path.endswith((".txt", ".hlo")):
        return "hlo"
    if path.endswith(".mlirbc"):
        return "mlirbc"
    if path.endswith(".mlir"):
        return "mlir"
    if path.endswith(".pb"):
        return "pb"
    return "other"


def dump_seeds(root: str = DUMPS) -> list[Seed]:
    """The committed corpus of real JAX dumps (every file of ``tests/data/dumps/*/``)."""
    seeds = []
    for path in sorted(glob.glob(os.path.join(root, "*", "*"))):
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            data = f.read()
        kind = _kind_of(path)
        # Big dumps cost seconds to compile when a mutation leaves them loadable: weigh them down.
        weight = 0.15 if kind == "other" else (0.5 if len(data) > 60_000 else 1.0)
        seeds.append(Seed(os.path.relpath(path, root), kind, data, weight))
    return seeds


def _built_programs() -> dict[str, Any]:
    """Small programs built with xlasdk's builder (their saved files are seeds too)."""
    import numpy as np

    import xlasdk as xs
    from xlasdk import ops

    f32, s32 = np.float32, np.int32
    progs: dict[str, Any] = {}

    b = xs.XlaBuilder("affine")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(f32, (2, 3)), "x")
    w = ops.Parameter(b, 1, xs.Shape.array_shape(f32, (3, 4)), "w")
    progs["affine"] = b.build(ops.Tanh(x @ w + 1.0))

    b = xs.XlaBuilder("loop")
    n = ops.Parameter(b, 0, xs.Shape.array_shape(s32, ()), "n")
    v = ops.Parameter(b, 1, xs.Shape.array_shape(f32, (4,)), "v")

    def cond(i: Any, acc: Any, n_: Any) -> Any:
        return ops.Lt(i, n_)

    def body(i: Any, acc: Any, n_: Any) -> Any:
        return (i + 1, acc * 2.0, n_)

    loop = ops.While(cond, body, ops.Tuple(b, [ops.Constant(b, s32(0)), v, n]))
    progs["loop"] = b.build([ops.GetTupleElement(loop, 0), ops.GetTupleElement(loop, 1)])

    b = xs.XlaBuilder("reduce_sort")
    m = ops.Parameter(b, 0, xs.Shape.array_shape(f32, (3, 5)), "m")
    r = ops.Reduce(b, m, ops.Constant(b, f32(0)), ops.Add, [1])
    s = ops.Sort(b, m, dimension=1)
    progs["reduce_sort"] = b.build([r, s, ops.Iota(b, xs.Shape.array_shape(s32, (6,)), 0)])
    return progs


def saved_seeds() -> list[Seed]:
    """Files xlasdk writes itself: small built programs and one real dump, saved in every format."""
    import xlasdk as xs

    comps = dict(_built_programs())
    real = os.path.join(DUMPS, "int_indexing", "module.before_optimizations.txt")
    if os.path.exists(real):
        comps["int_indexing_resaved"] = xs.load_computation(real)
    seeds = []
    with tempfile.TemporaryDirectory(prefix="hostile-seeds-") as d:
        for name, comp in comps.items():
            for suffix in (".hlo", ".mlir", ".mlirbc", ".pb"):
                path = os.path.join(d, name + suffix)
                comp.save(path)
                with open(path, "rb") as f:
                    seeds.append(Seed(f"saved/{name}{suffix}", _kind_of(path), f.read(), 1.5))
        affine = comps["affine"]
        for version in ("WEEK_4", "WEEK_12", "1.0.0", "current"):
            try:
                data = affine.serialize_portable_artifact(version)
            except xs.XlaSdkError:
                continue
            seeds.append(Seed(f"saved/affine.{version}.mlirbc", "mlirbc", data, 0.5))
    return seeds


def all_seeds() -> list[Seed]:
    dumps = dump_seeds()
    if not dumps:
        raise RuntimeError(f"no committed seed files under {DUMPS}")
    return dumps + saved_seeds()


# == the inputs ===============================================================================
@dataclass
class Hostile:
    key: str
    suffix: str
    data: bytes
    origin: str  # the seed (or "special")
    mutation: str  # what was done, one line

    def describe(self) -> str:
        return f"{self.key}: {self.origin} + {self.mutation} ({len(self.data)} bytes, {self.suffix})"


BIG_INTS = (
    0, 1, 2, 3, 7, 255, 256, 65535, 2**31 - 1, 2**31, 2**32, 2**32 + 1, 2**53, 2**62, 2**63 - 1,
    2**63, 2**64 - 1, 10**20, -1, -2, -(2**31), -(2**63),
)
DIMS = ("0", "1", "-1", "-7", "2147483647", "2147483648", "4294967296", "9223372036854775807",
        "9223372036854775808", "18446744073709551615", "100000000000000000000", "99999", "?", "<=4", "")
HUGE_SHAPES = (
    "f32[9223372036854775807,2]", "f32[4611686018427387904,4]", "f32[2147483648,2147483648]",
    "s8[3037000500,3037000500]", "f32[-1]", "f32[-2,3]", "pred[9223372036854775807]", "f32[1,0,9223372036854775807]",
    "u8[100000,100000]", "f64[65536,65536,65536]",
)
LAYOUTS = ("{0}", "{}", "{1,0}", "{0,1}", "{2,0,1}", "{1,1}", "{5,0}", "{-1,0}", "{0,1,2,3,4,5,6,7}",
           "{1,0:T(8,128)}", "{0:T(2)E(32)}", "{1,0:S(1)}", "{9223372036854775807}", "{", "{0,}")
OPCODES = (
    "add", "multiply", "dot", "tuple", "get-tuple-element", "parameter", "constant", "call", "while",
    "reshape", "broadcast", "transpose", "custom-call", "after-all", "infeed", "outfeed", "rng", "sort",
    "fusion", "bitcast", "copy", "conditional", "all-reduce", "send", "recv", "slice", "dynamic-slice",
    "concatenate", "pad", "gather", "scatter", "reduce", "reduce-window", "select-and-scatter", "iota",
    "convolution", "fft", "triangular-solve", "cholesky", "map", "bitcast-convert", "convert", "negate",
    "abs", "tanh", "compare", "select", "clamp", "domain", "partition-id", "replica-id", "add-dependency",
    "optimization-barrier", "copy-start", "copy-done", "async-start", "async-done", "recv-done",
    "send-done", "rng-bit-generator", "rng-get-and-update-state", "get-dimension-size", "set-dimension-size",
    "top-k", "stochastic-convert", "erf", "frobnicate", "ADD", "",
)
ETYPES = ("pred", "s2", "s4", "s8", "s16", "s32", "s64", "u2", "u4", "u8", "u16", "u32", "u64", "f16",
          "bf16", "f32", "f64", "c64", "c128", "f8e4m3fn", "f8e5m2", "f4e2m1fn", "token", "opaque", "f99",
          "tuple", "s0")
MLIR_ETYPES = ("i1", "i2", "i4", "i8", "i16", "i32", "i64", "ui8", "ui32", "ui64", "f16", "bf16", "f32",
               "f64", "complex<f32>", "complex<f64>", "f8E4M3FN", "f8E5M2", "f4E2M1FN", "index", "i0",
               "i65", "i1024", "!stablehlo.token", "tuple<>", "none", "f80", "tf32", "!quant.uniform<i8:f32, 1.0>")
MLIR_OPS = ("add", "multiply", "dot_general", "tuple", "get_tuple_element", "constant", "while", "reshape",
            "broadcast_in_dim", "transpose", "custom_call", "after_all", "infeed", "outfeed", "rng", "sort",
            "convert", "slice", "dynamic_slice", "concatenate", "pad", "gather", "scatter", "reduce",
            "reduce_window", "iota", "convolution", "fft", "triangular_solve", "cholesky", "compare", "select",
            "clamp", "optimization_barrier", "send", "recv", "case", "if", "return", "composite",
            "frobnicate", "all_reduce", "partition_id", "replica_id", "bitcast_convert", "get_dimension_size")
VERSIONS = (b"0.0.0", b"1.0.0", b"1.0.1", b"9.9.9", b"99.99.99", b"1.99.0", b"0.9.99", b"x.y.z", b"1..0",
            b"-1.0.0", b"1.0", b"1", b"", b"1.0.0.0", b"999999999999.0.0", b"1.0.0 ", b"\x00.0.0")

HLO_INSTR = re.compile(r"^(\s*)(ROOT\s+)?(%?[\w.\-]+)\s*=\s*")
HLO_SHAPE = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,?<=\-]*)\](\{[^}]*\})?")
HLO_COMP = re.compile(r"^(ENTRY\s+)?(%?[\w.\-]+)\s*\(.*\{\s*$")
MLIR_TENSOR = re.compile(r"tensor<((?:[0-9?]+x)*)([a-zA-Z!][\w.<>:, ]*?)>")
MLIR_OP = re.compile(r"\bstablehlo\.([a-z_]+)")


def _balanced(s: str, i: int, open_: str = "(", close: str = ")") -> int:
    """The index just past the bracket that closes the one at ``s[i]`` (or len(s))."""
    depth = 0
    for j in range(i, len(s)):
        if s[j] == open_:
            depth += 1
        elif s[j] == close:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(s)


@dataclass
class Instr:
    """One HLO instruction line split into its parts."""

    head: str  # indentation, ROOT, name, " = "
    name: str
    shape: str
    opcode: str
    operands: str  # between the opcode's parentheses
    rest: str  # after them (", attr=..., metadata=...")

    def text(self) -> str:
        return f"{self.head}{self.shape} {self.opcode}({self.operands}){self.rest}"


def parse_instr(line: str) -> Instr | None:
    m = HLO_INSTR.match(line)
    if m is None:
        return None
    i = m.end()
    if line[i:i + 1] == "(":
        j = _balanced(line, i)
    else:
        sp = line.find(" ", i)
        if sp < 0:
            return None
        j = sp
    shape = line[i:j]
    k = j
    while k < len(line) and line[k] == " ":
        k += 1
    p = line.find("(", k)
    if p < 0 or not re.fullmatch(r"[a-z][a-z0-9\-]*", line[k:p] or "?"):
        return None
    e = _balanced(line, p)
    return Instr(line[:i], m.group(3), shape, line[k:p], line[p + 1:e - 1], line[e:])


def _computations(lines: list[str]) -> list[tuple[int, int, str, bool]]:
    """(first line, last line, name, is_entry) of each computation of HLO text."""
    out = []
    start = None
    for n, ln in enumerate(lines):
        m = HLO_COMP.match(ln)
        if m is not None:
            start = (n, m.group(2), bool(m.group(1)))
        elif ln.startswith("}") and start is not None:
            out.append((start[0], n, start[1], start[2]))
            start = None
    return out


def _pick_int(rng: random.Random, old: int | None = None) -> int:
    if old is not None and rng.random() < 0.3:
        return old + rng.choice((-1, 1, 2, -2)) if rng.random() < 0.5 else old * rng.choice((2, 10, 1000))
    return rng.choice(BIG_INTS)


# -- byte mutations -----------------------------------------------------------------------------
def mut_truncate(rng: random.Random, data: bytes, _: Any) -> tuple[bytes, str]:
    k = rng.randrange(len(data) + 1) if rng.random() < 0.7 else rng.choice((0, 1, 4, 8, 16, len(data) - 1))
    k = max(0, min(k, len(data)))
    return data[:k], f"truncate at {k}"


def mut_bitflip(rng: random.Random, data: bytes, _: Any) -> tuple[bytes, str]:
    if not data:
        return data, "bitflip (empty)"
    b = bytearray(data)
    flips = []
    for _i in range(rng.choice((1, 1, 1, 2, 4, 8, 32))):
        pos = rng.randrange(len(b))
        bit = rng.randrange(8)
        b[pos] ^= 1 << bit
        flips.append(f"{pos}.{bit}")
    return bytes(b), "bitflip " + ",".join(flips[:8]) + ("..." if len(flips) > 8 else "")


def mut_insert(rng: random.Random, data: bytes, _: Any) -> tuple[bytes, str]:
    pos = rng.randrange(len(data) + 1)
    choice = rng.random()
    if choice < 0.3:
        junk = bytes(rng.randrange(256) for _ in range(rng.choice((1, 2, 4, 16, 64))))
    elif choice < 0.5:
        junk = rng.choice((b"\x00", b"\xff" * 10 + b"\x01", b"\x80" * 12, b"\xff\xff\xff\xff\x0f", b"\n", b"{",
                           b"(", b"[", b"<", b"\"", b"\\", b"%", b"\xef\xbb\xbf", b"\xc3\x28", b"ML\xefR"))
    elif choice < 0.8:
        junk = data[rng.randrange(len(data) + 1):][: rng.choice((1, 8, 64, 512))]
    else:
        junk = rng.choice((b"(", b"[", b"{", b"<", b"tuple<")) * rng.choice((100, 1000))
    return data[:pos] + junk + data[pos:], f"insert {len(junk)} bytes at {pos}"


def mut_delete(rng: random.Random, data: bytes, _: Any) -> tuple[bytes, str]:
    if not data:
        return data, "delete (empty)"
    pos = rng.randrange(len(data))
    n = rng.choice((1, 1, 2, 4, 16, 256, 4096))
    return data[:pos] + data[pos + n:], f"delete {n} bytes at {pos}"


def mut_duplicate(rng: random.Random, data: bytes, _: Any) -> tuple[bytes, str]:
    if not data:
        return data, "duplicate (empty)"
    pos = rng.randrange(len(data))
    n = rng.choice((1, 16, 256, 4096))
    times = rng.choice((1, 2, 10))
    return data[:pos] + data[pos:pos + n] * (times + 1) + data[pos + n:], f"duplicate {n} bytes at {pos} x{times}"


def mut_splice(rng: random.Random, data: bytes, other: Any) -> tuple[bytes, str]:
    seed: Seed = other()
    a = rng.randrange(len(data) + 1)
    b = rng.randrange(len(seed.data) + 1)
    return data[:a] + seed.data[b:], f"splice [:{a}] + {seed.name}[{b}:]"


BYTE_MUTATIONS: list[Callable[..., tuple[bytes, str]]] = [
    mut_truncate, mut_bitflip, mut_bitflip, mut_insert, mut_delete, mut_duplicate, mut_splice,
]


# -- HLO text mutations -------------------------------------------------------------------------
def _instr_lines(lines: list[str]) -> list[int]:
    return [n for n, ln in enumerate(lines) if parse_instr(ln) is not None]


def hlo_dimension(rng: random.Random, lines: list[str]) -> str | None:
    cands = [(n, m) for n, ln in enumerate(lines) for m in HLO_SHAPE.finditer(ln) if m.group(1) in ETYPES]
    if not cands:
        return None
    n, m = rng.choice(cands)
    dims = m.group(2).split(",") if m.group(2) else []
    how = rng.random()
    if how < 0.35 and dims:
        dims[rng.randrange(len(dims))] = rng.choice(DIMS)
    elif how < 0.5:
        dims.append(rng.choice(DIMS))
    elif how < 0.6 and dims:
        dims.pop(rng.randrange(len(dims)))
    elif how < 0.8:
        new = rng.choice(HUGE_SHAPES)
        lines[n] = lines[n][:m.start()] + new + lines[n][m.end():]
        return f"line {n + 1}: shape {m.group(0)} -> {new}"
    else:
        dims = [rng.choice(DIMS) for _ in range(rng.choice((1, 2, 8, 64)))]
    new = f"{m.group(1)}[{','.join(dims)}]{m.group(3) or ''}"
    lines[n] = lines[n][:m.start()] + new + lines[n][m.end():]
    return f"line {n + 1}: shape {m.group(0)} -> {new}"


def hlo_etype(rng: random.Random, lines: list[str]) -> str | None:
    cands = [(n, m) for n, ln in enumerate(lines) for m in HLO_SHAPE.finditer(ln) if m.group(1) in ETYPES]
    if not cands:
        return None
    n, m = rng.choice(cands)
    et = rng.choice(ETYPES)
    lines[n] = lines[n][:m.start(1)] + et + lines[n][m.end(1):]
    return f"line {n + 1}: element type {m.group(1)} -> {et}"


def hlo_layout(rng: random.Random, lines: list[str]) -> str | None:
    cands = [(n, m) for n, ln in enumerate(lines) for m in HLO_SHAPE.finditer(ln) if m.group(3)]
    if not cands:
        cands = [(n, m) for n, ln in enumerate(lines) for m in HLO_SHAPE.finditer(ln)]
        if not cands:
            return None
    n, m = rng.choice(cands)
    lay = rng.choice(LAYOUTS)
    end = m.end()
    lines[n] = lines[n][:m.end(2) + 1] + lay + lines[n][end:]
    return f"line {n + 1}: layout of {m.group(0)} -> {lay}"


def hlo_opcode(rng: random.Random, lines: list[str]) -> str | None:
    cands = _instr_lines(lines)
    if not cands:
        return None
    n = rng.choice(cands)
    ins = parse_instr(lines[n])
    assert ins is not None
    op = rng.choice(OPCODES)
    old = ins.opcode
    ins.opcode = op
    lines[n] = ins.text()
    return f"line {n + 1}: opcode {old} -> {op!r}"


def hlo_operands(rng: random.Random, lines: list[str]) -> str | None:
    cands = [n for n in _instr_lines(lines) if parse_instr(lines[n]).operands.strip()]  # type: ignore[union-attr]
    if not cands:
        return None
    n = rng.choice(cands)
    ins = parse_instr(lines[n])
    assert ins is not None
    ops_ = [o.strip() for o in ins.operands.split(",")]
    how = rng.random()
    if how < 0.4:
        ops_.pop(rng.randrange(len(ops_)))
        what = "dropped an operand"
    elif how < 0.6:
        ops_.append(rng.choice(ops_))
        what = "added an operand"
    elif how < 0.8:
        names = [p.name for p in (parse_instr(ln) for ln in lines) if p is not None]
        i = rng.randrange(len(ops_))
        ops_[i] = rng.choice(names + ["%nonexistent.1", "%" + ins.name.lstrip("%")])
        what = f"operand {i} -> {ops_[i]}"
    else:
        ops_ = []
        what = "no operands"
    ins.operands = ", ".join(ops_)
    lines[n] = ins.text()
    return f"line {n + 1}: {what}"


def hlo_tuple_to_array(rng: random.Random, lines: list[str]) -> str | None:
    cands = [n for n in _instr_lines(lines) if parse_instr(lines[n]).shape.startswith("(")]  # type: ignore[union-attr]
    if not cands:
        return None
    n = rng.choice(cands)
    ins = parse_instr(lines[n])
    assert ins is not None
    new = rng.choice(("f32[2]", "f32[]", "token[]", "()", "(f32[])", "((((f32[]))))", "s32[3,4]{1,0}"))
    old, ins.shape = ins.shape, new
    lines[n] = ins.text()
    return f"line {n + 1}: shape {old[:60]} -> {new}"


def hlo_token(rng: random.Random, lines: list[str]) -> str | None:
    comps = _computations(lines)
    if not comps:
        return None
    start, end, _name, _entry = rng.choice(comps)
    new = rng.choice((
        "  %tok.h = token[] constant(0)",
        "  %tok.h = token[2] after-all()",
        "  %tok.h = token[2]{0} parameter(0)",
        "  %tok.h = token[] after-all(%tok.h)",
        "  %tok.h = (token[], f32[]) after-all()",
        "  %tok.h = f32[] after-all()",
        "  %tok.h = token[] parameter(2147483648)",
        "  %tok.h = token[] constant({})",
    ))
    lines.insert(start + 1, new)
    return f"after line {start + 1}: inserted {new.strip()!r}"


def hlo_dot_one(rng: random.Random, lines: list[str]) -> str | None:
    cands = [n for n in _instr_lines(lines)
             if parse_instr(lines[n]).opcode in ("dot", "add", "multiply")]  # type: ignore[union-attr]
    if not cands:
        return None
    n = rng.choice(cands)
    ins = parse_instr(lines[n])
    assert ins is not None
    first = ins.operands.split(",")[0].strip()
    ins.opcode, ins.operands = "dot", first
    if rng.random() < 0.5:
        ins.rest = ", lhs_contracting_dims={1}, rhs_contracting_dims={0}" + ins.rest
    lines[n] = ins.text()
    return f"line {n + 1}: a dot with one operand ({first})"


CALL_REF = re.compile(r"\b(to_apply|calls|body|condition|branch_computations|comparator)=(\{?)(%?[\w.\-]+)")


def hlo_calls(rng: random.Random, lines: list[str]) -> str | None:
    refs = [(n, m) for n, ln in enumerate(lines) for m in CALL_REF.finditer(ln)]
    comps = _computations(lines)
    if not comps:
        return None
    how = rng.random()
    if refs and how < 0.7:
        n, m = rng.choice(refs)
        enclosing = [c for c in comps if c[0] <= n <= c[1]]
        names = [c[2] for c in comps]
        target = rng.choice(
            [enclosing[0][2]] * 3 + names + ["%unknown_computation", "%", "%" + "x" * 5000] if enclosing
            else names + ["%unknown_computation"]
        )
        lines[n] = lines[n][:m.start(3)] + target + lines[n][m.end(3):]
        return f"line {n + 1}: {m.group(1)}={m.group(3)} -> {target[:40]}" + (
            " (recursive)" if enclosing and target == enclosing[0][2] else "")
    start, end, name, _e = rng.choice(comps)
    params = [parse_instr(ln) for ln in lines[start + 1:end]]
    ps = [p for p in params if p is not None and p.opcode == "parameter"]
    if not ps:
        target = rng.choice([c[2] for c in comps])
        new = f"  %rec.h = f32[] call(), to_apply={target}"
    else:
        new = f"  %rec.h = {ps[0].shape} call({', '.join(p.name for p in ps)}), to_apply={name}"
    lines.insert(start + 1, new)
    return f"after line {start + 1}: inserted {new.strip()[:80]!r} (recursive call)"


def hlo_parameter_number(rng: random.Random, lines: list[str]) -> str | None:
    cands = [(n, m) for n, ln in enumerate(lines) for m in re.finditer(r"parameter\((\d+)\)", ln)]
    if not cands:
        return None
    n, m = rng.choice(cands)
    new = str(rng.choice((int(m.group(1)) + 1, int(m.group(1)) + 5, 2**31, 2**31 - 1, 2**32, 2**63, -1, 0, 1, 99)))
    lines[n] = lines[n][:m.start(1)] + new + lines[n][m.end(1):]
    return f"line {n + 1}: parameter({m.group(1)}) -> parameter({new})"


ATTR_EDITS = (
    (r"dimensions=\{[^}]*\}", ("dimensions={}", "dimensions={5}", "dimensions={-1}", "dimensions={0,0}",
                               "dimensions={2147483648}", "dimensions={1,0,2,3,4,5,6,7,8}")),
    (r"index=\d+", ("index=99", "index=-1", "index=2147483648", "index=9223372036854775807")),
    (r"window=\{[^}]*\}", ("window={size=0}", "window={size=8 pad=-99_0}", "window={size=1 stride=0}",
                           "window={size=9223372036854775807}", "window={}", "window={size=2x2x2x2 pad=0_0}")),
    (r"slice=\{[^}]*\}", ("slice={[5:0]}", "slice={[0:99:0]}", "slice={[-1:2]}", "slice={}",
                          "slice={[0:9223372036854775807]}", "slice={[0:1], [0:1], [0:1]}")),
    (r"direction=[A-Z]+", ("direction=XX", "direction=", "direction=EQ", "direction=LT")),
    (r"iota_dimension=\d+", ("iota_dimension=9", "iota_dimension=-1", "iota_dimension=2147483648")),
    (r"lhs_contracting_dims=\{[^}]*\}", ("lhs_contracting_dims={7}", "lhs_contracting_dims={0,0}",
                                         "lhs_contracting_dims={}")),
    (r"lhs_batch_dims=\{[^}]*\}", ("lhs_batch_dims={9}", "lhs_batch_dims={0,0}")),
    (r"padding=[0-9_x\-]+", ("padding=-5_-5", "padding=0_0x0_0x0_0x0_0x0_0", "padding=9223372036854775807_0")),
    (r"constant\([^()]*\)", ("constant(nan)", "constant(1e400)", "constant({1,2,3})", "constant(-inf)",
                             "constant(true)", "constant({...})", "constant()", "constant(0x7fffffff)",
                             "constant(99999999999999999999999999)", "constant({{{{{{}}}}}})")),
    (r"custom_call_target=\"[^\"]*\"", ("custom_call_target=\"nope\"", "custom_call_target=\"\"",
                                         "custom_call_target=\"__cpu$xla.cpu.notthere\"")),
    (r"sharding=\{[^}]*\}", ("sharding={devices=[2,2]0,1,2,3}", "sharding={maximal device=99}",
                             "sharding={devices=[9223372036854775807]0}")),
    (r"metadata=\{[^}]*\}", ("metadata={op_name=\"x\" source_line=-1}", "metadata={source_line=9999999999}",
                             "metadata={stack_frame_id=0}", "metadata={stack_frame_id=2147483648}",
                             "metadata={unknown_field=1}", "metadata={op_name=\"\\xff\\\"}")),
)


def hlo_attribute(rng: random.Random, lines: list[str]) -> str | None:
    order = list(ATTR_EDITS)
    rng.shuffle(order)
    for pattern, values in order:
        cands = [(n, m) for n, ln in enumerate(lines) for m in re.finditer(pattern, ln)]
        if cands:
            n, m = rng.choice(cands)
            new = rng.choice(values)
            lines[n] = lines[n][:m.start()] + new + lines[n][m.end():]
            return f"line {n + 1}: {m.group(0)[:50]} -> {new}"
    return None


def hlo_entry_layout(rng: random.Random, lines: list[str]) -> str | None:
    for n, ln in enumerate(lines):
        m = re.search(r"entry_computation_layout=\{", ln)
        if m is None:
            continue
        j = _balanced(ln, m.end() - 1, "{", "}")
        inner = ln[m.end():j - 1]
        how = rng.random()
        if how < 0.3:
            new = inner.replace("->", "->(f32[7]{0}, ", 1) + ")" if "->(" not in inner else inner.replace(
                "->(", "->(f32[7]{0}, ", 1)
        elif how < 0.5:
            new = re.sub(r"->.*$", "->f32[1,2,3]{2,1,0}", inner)
        elif how < 0.7:
            new = inner.replace("(", "(s32[9]{0}, ", 1)
        elif how < 0.85:
            new = re.sub(r"\{1,0\}", "{0,1}", inner)
        else:
            new = "(" * 200 + ")" * 200 + "->()"
        lines[n] = ln[:m.end()] + new + ln[j - 1:]
        return f"line {n + 1}: entry_computation_layout {{{inner[:40]}...}} -> {{{new[:40]}...}}"
    return None


def hlo_lines(rng: random.Random, lines: list[str]) -> str | None:
    if len(lines) < 2:
        return None
    how = rng.random()
    a = rng.randrange(len(lines))
    if how < 0.35:
        old = lines.pop(a)
        return f"deleted line {a + 1} ({old.strip()[:40]!r})"
    if how < 0.6:
        lines.insert(a, lines[a])
        return f"duplicated line {a + 1}"
    if how < 0.8:
        b = rng.randrange(len(lines))
        lines[a], lines[b] = lines[b], lines[a]
        return f"swapped lines {a + 1} and {b + 1}"
    cands = _instr_lines(lines)
    if not cands:
        return None
    n = rng.choice(cands)
    if "ROOT" in lines[n]:
        lines[n] = lines[n].replace("ROOT ", "", 1)
        return f"line {n + 1}: removed ROOT"
    lines[n] = re.sub(r"^(\s*)", r"\1ROOT ", lines[n], count=1)
    return f"line {n + 1}: added a second ROOT"


STACK_BLOCKS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def hlo_stack_frames(rng: random.Random, lines: list[str]) -> str | None:
    heads = [n for n, ln in enumerate(lines) if ln.strip() in STACK_BLOCKS]
    how = rng.random()
    if not heads or how < 0.2:  # insert a table (hostile or not) after the HloModule line
        start = next((n for n, ln in enumerate(lines) if ln.startswith("HloModule")), 0)
        block = rng.choice((
            ["", "FileNames", '1 "a.py"', "", "FunctionNames", '1 "f"', "", "FileLocations",
             "1 {file_name_id=1 function_name_id=1 line=1 end_line=1 column=1 end_column=2}", "",
             "StackFrames", "1 {file_location_id=1 parent_frame_id=1}"],
            ["", "StackFrames", "1 {file_location_id=1 parent_frame_id=2}", "2 {file_location_id=1 parent_frame_id=1}"],
            ["", "StackFrames", "1 {file_location_id=99 parent_frame_id=0}"],
            ["", "FileNames", '0 "zero.py"', '2147483648 "big.py"'],
            ["", "FileLocations", "1 {file_name_id=7 function_name_id=-1 line=-5}"],
            ["", "StackFrames"] + [f"{i} {{file_location_id=1 parent_frame_id={i + 1}}}" for i in range(1, 3000)],
            ["", "FileNames", '1 "unterminated'],
            ["", "StackFrames", "1 {parent_frame_id=1}", "1 {parent_frame_id=1}"],
        ))
        lines[start + 1:start + 1] = block
        return f"after line {start + 1}: inserted a {block[1]} table ({len(block) - 1} lines)"
    if how < 0.35:
        h = rng.choice(heads)
        end = h + 1
        while end < len(lines) and lines[end].strip() and lines[end].strip() not in STACK_BLOCKS:
            end += 1
        name = lines[h].strip()
        del lines[h:end]
        return f"deleted the {name} table at line {h + 1} ({end - h} lines)"
    if how < 0.5:
        h = rng.choice(heads)
        lines[h] = rng.choice(STACK_BLOCKS + ("StackFrame", "filenames", "FileNames FileNames"))
        return f"line {h + 1}: table heading -> {lines[h]!r}"
    if how < 0.85:  # an entry: ids, parents, lines
        rows = [(n, m) for n, ln in enumerate(lines)
                for m in re.finditer(r"(?:^(\d+) |(?:_id|line|column)=(-?\d+))", ln)
                if any(lines[k].strip() in STACK_BLOCKS for k in range(max(0, n - 400), n))]
        if not rows:
            return None
        n, m = rng.choice(rows)
        g = 1 if m.group(1) is not None else 2
        new = str(_pick_int(rng, int(m.group(g))))
        lines[n] = lines[n][:m.start(g)] + new + lines[n][m.end(g):]
        return f"line {n + 1}: stack-frame table value {m.group(g)} -> {new}"
    ids = [(n, m) for n, ln in enumerate(lines) for m in re.finditer(r"stack_frame_id=(\d+)", ln)]
    if not ids:
        return None
    n, m = rng.choice(ids)
    new = str(rng.choice((0, -1, 2**31, 2**63 - 1, 2**64, 99999, int(m.group(1)) + 1000)))
    lines[n] = lines[n][:m.start(1)] + new + lines[n][m.end(1):]
    return f"line {n + 1}: stack_frame_id={m.group(1)} -> {new}"


def hlo_numbers(rng: random.Random, lines: list[str]) -> str | None:
    cands = [(n, m) for n, ln in enumerate(lines) for m in re.finditer(r"(?<![\w.])\d+(?![\w.])", ln)]
    if not cands:
        return None
    n, m = rng.choice(cands)
    new = str(_pick_int(rng, int(m.group(0))))
    lines[n] = lines[n][:m.start()] + new + lines[n][m.end():]
    return f"line {n + 1}: number {m.group(0)} -> {new}"


HLO_MUTATIONS: list[Callable[[random.Random, list[str]], str | None]] = [
    hlo_dimension, hlo_dimension, hlo_etype, hlo_layout, hlo_layout, hlo_opcode, hlo_opcode, hlo_operands,
    hlo_operands, hlo_tuple_to_array, hlo_token, hlo_dot_one, hlo_calls, hlo_calls, hlo_parameter_number,
    hlo_attribute, hlo_attribute, hlo_attribute, hlo_entry_layout, hlo_lines, hlo_lines, hlo_stack_frames,
    hlo_stack_frames, hlo_numbers,
]


# -- StableHLO text mutations -------------------------------------------------------------------
def mlir_tensor(rng: random.Random, lines: list[str]) -> str | None:
    cands = [(n, m) for n, ln in enumerate(lines) for m in MLIR_TENSOR.finditer(ln)]
    if not cands:
        return None
    n, m = rng.choice(cands)
    dims = [d for d in m.group(1).split("x") if d]
    et = m.group(2)
    how = rng.random()
    if how < 0.4 and dims:
        dims[rng.randrange(len(dims))] = rng.choice(("0", "1", "?", "2147483648", "9223372036854775807",
                                                     "9223372036854775808", "4611686018427387904", "99999"))
    elif how < 0.55:
        dims.append(rng.choice(("2", "0", "9223372036854775807")))
    elif how < 0.65 and dims:
        dims.pop()
    elif how < 0.9:
        et = rng.choice(MLIR_ETYPES)
    else:
        dims = ["9223372036854775807", "2"] if rng.random() < 0.5 else ["3037000500", "3037000500"]
    new = "tensor<" + "".join(d + "x" for d in dims) + et + ">"
    lines[n] = lines[n][:m.start()] + new + lines[n][m.end():]
    return f"line {n + 1}: {m.group(0)} -> {new}"


def mlir_op(rng: random.Random, lines: list[str]) -> str | None:
    cands = [(n, m) for n, ln in enumerate(lines) for m in MLIR_OP.finditer(ln)]
    if not cands:
        return None
    n, m = rng.choice(cands)
    new = rng.choice(MLIR_OPS)
    lines[n] = lines[n][:m.start(1)] + new + lines[n][m.end(1):]
    return f"line {n + 1}: stablehlo.{m.group(1)} -> stablehlo.{new}"


def mlir_value(rng: random.Random, lines: list[str]) -> str | None:
    cands = [(n, m) for n, ln in enumerate(lines) for m in re.finditer(r"%([\w.]+)", ln)]
    if not cands:
        return None
    n, m = rng.choice(cands)
    names = list({mm.group(1) for _n, mm in cands})
    new = rng.choice(names + ["999999", "arg99", "0", "undefined"])
    lines[n] = lines[n][:m.start(1)] + new + lines[n][m.end(1):]
    return f"line {n + 1}: %{m.group(1)} -> %{new}"


def mlir_operand(rng: random.Random, lines: list[str]) -> str | None:
    cands = [(n, m) for n, ln in enumerate(lines) for m in re.finditer(r"(%[\w.#]+), (%[\w.#]+)", ln)]
    if not cands:
        return None
    n, m = rng.choice(cands)
    new = m.group(1) if rng.random() < 0.6 else f"{m.group(1)}, {m.group(2)}, {m.group(2)}"
    lines[n] = lines[n][:m.start()] + new + lines[n][m.end():]
    return f"line {n + 1}: operands {m.group(0)} -> {new}"


def mlir_call(rng: random.Random, lines: list[str]) -> str | None:
    funcs = [m.group(1) for ln in lines for m in re.finditer(r"func\.func (?:\w+ )?@([\w.$]+)", ln)]
    cands = [(n, m) for n, ln in enumerate(lines) for m in re.finditer(r"\bcall @([\w.$]+)", ln)]
    if not cands or not funcs:
        return None
    n, m = rng.choice(cands)
    enclosing = None
    for k in range(n, -1, -1):
        f = re.search(r"func\.func (?:\w+ )?@([\w.$]+)", lines[k])
        if f:
            enclosing = f.group(1)
            break
    new = rng.choice(funcs + ["main", "nonexistent"] + ([enclosing] * 3 if enclosing else []))
    lines[n] = lines[n][:m.start(1)] + new + lines[n][m.end(1):]
    return f"line {n + 1}: call @{m.group(1)} -> @{new}" + (" (recursive)" if new == enclosing else "")


MLIR_ATTR_EDITS = (
    (r"dims = \[[^\]]*\]", ("dims = [5]", "dims = [-1]", "dims = [0, 0]", "dims = [9223372036854775807]")),
    (r"dense<[^>]*>", ("dense<nan>", "dense<[1, 2, 3]>", "dense<>", "dense<\"0xZZ\">", "dense<1e400>",
                       "dense<[[[[[[[[1]]]]]]]]>")),
    (r"array<i64[^>]*>", ("array<i64: -1>", "array<i64: 9223372036854775807>", "array<i64>", "array<i64: 0, 0>")),
    (r"mhlo\.num_partitions = \d+ : i32", ("mhlo.num_partitions = 0 : i32", "mhlo.num_partitions = -1 : i32",
                                           "mhlo.num_partitions = 2147483647 : i32")),
    (r"mhlo\.num_replicas = \d+ : i32", ("mhlo.num_replicas = 0 : i32", "mhlo.num_replicas = 100000 : i32")),
    (r"\b(LT|GT|EQ|NE|GE|LE)\b", ("XX", "LT", "TOTALORDER")),
    (r"\bSIGNED\b|\bFLOAT\b", ("UNSIGNED", "FLOAT", "NOTATYPE")),
    (r"loc\([^()]*\)", ("loc(unknown)", "loc(\"x\":99999999999:1)", "loc(#loc999)", "loc(")),
)


def mlir_attribute(rng: random.Random, lines: list[str]) -> str | None:
    order = list(MLIR_ATTR_EDITS)
    rng.shuffle(order)
    for pattern, values in order:
        cands = [(n, m) for n, ln in enumerate(lines) for m in re.finditer(pattern, ln)]
        if cands:
            n, m = rng.choice(cands)
            new = rng.choice(values)
            lines[n] = lines[n][:m.start()] + new + lines[n][m.end():]
            return f"line {n + 1}: {m.group(0)[:50]} -> {new}"
    return None


MLIR_MUTATIONS: list[Callable[[random.Random, list[str]], str | None]] = [
    mlir_tensor, mlir_tensor, mlir_tensor, mlir_op, mlir_op, mlir_value, mlir_operand, mlir_call, mlir_call,
    mlir_attribute, mlir_attribute, hlo_lines, hlo_numbers,
]


# -- portable artifacts -------------------------------------------------------------------------
def mut_version(rng: random.Random, data: bytes, _: Any) -> tuple[bytes, str]:
    m = re.search(rb"StableHLO_v([0-9.]+)", data)
    if m is None:
        return mut_bitflip(rng, data, _)
    old = m.group(1)
    same_len = [v for v in VERSIONS if len(v) == len(old)]
    if same_len and rng.random() < 0.5:
        new = rng.choice(same_len)
    elif rng.random() < 0.5:  # keep the length: digits changed in place
        new = bytes(c if c == ord(".") else ord(rng.choice("0123456789")) for c in old)
    else:
        new = rng.choice(VERSIONS)
    return data[:m.start(1)] + new + data[m.end(1):], f"producer version {old.decode()} -> {new!r}"


# -- protobuf wire format ---------------------------------------------------------------------
class WireError(ValueError):
    pass


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise WireError("bad varint")
        b = buf[i]
        v |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            return v, i
        shift += 7


def _enc_varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def decode_message(buf: bytes, depth: int = 0) -> list[list[Any]]:
    """A protobuf message as a list of ``[field, wire_type, value]``; length-delimited values that
    parse as messages (or packed varints) are decoded too: ``("msg", fields)``, ``("packed", ints)``
    or ``("bytes", data)``."""
    fields: list[list[Any]] = []
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        fnum, wt = key >> 3, key & 7
        if fnum == 0 or fnum > (1 << 29):
            raise WireError("bad field number")
        if wt == 0:
            v, i = _varint(buf, i)
            fields.append([fnum, 0, v])
        elif wt == 1:
            if i + 8 > len(buf):
                raise WireError("short fixed64")
            fields.append([fnum, 1, buf[i:i + 8]])
            i += 8
        elif wt == 5:
            if i + 4 > len(buf):
                raise WireError("short fixed32")
            fields.append([fnum, 5, buf[i:i + 4]])
            i += 4
        elif wt == 2:
            n, i = _varint(buf, i)
            if i + n > len(buf):
                raise WireError("short bytes")
            fields.append([fnum, 2, _decode_bytes(buf[i:i + n], depth)])
            i += n
        else:
            raise WireError("group or bad wire type")
    return fields


def _decode_bytes(data: bytes, depth: int) -> tuple[str, Any]:
    if data and depth < 40:
        try:
            return ("msg", decode_message(data, depth + 1))
        except WireError:
            pass
        try:
            if data.decode("utf-8").isprintable():
                return ("bytes", data)  # a string, not packed varints
        except UnicodeDecodeError:
            pass
        try:
            ints, i = [], 0
            while i < len(data):
                v, i = _varint(data, i)
                ints.append(v)
            return ("packed", ints)
        except WireError:
            pass
    return ("bytes", data)


def encode_message(fields: list[list[Any]]) -> bytes:
    out = bytearray()
    for fnum, wt, v in fields:
        out += _enc_varint(fnum << 3 | wt)
        if wt == 0:
            out += _enc_varint(v)
        elif wt in (1, 5):
            out += v
        else:
            kind, val = v
            body = encode_message(val) if kind == "msg" else (
                b"".join(_enc_varint(x) for x in val) if kind == "packed" else val)
            out += _enc_varint(len(body)) + body
    return bytes(out)


def _slots(fields: list[list[Any]], path: tuple[int, ...] = ()) -> list[tuple[list[list[Any]], int, tuple[int, ...]]]:
    """Every (message, index, path) of the tree, for picking a field to edit."""
    out = []
    for k, f in enumerate(fields):
        out.append((fields, k, path + (f[0],)))
        if f[1] == 2 and f[2][0] == "msg":
            out.extend(_slots(f[2][1], path + (f[0],)))
    return out


def mut_proto(rng: random.Random, data: bytes, other: Any) -> tuple[bytes, str]:
    try:
        tree = decode_message(data)
    except WireError:
        return mut_bitflip(rng, data, other)
    slots = _slots(tree)
    if not slots:
        return mut_bitflip(rng, data, other)
    varints = [s for s in slots if s[0][s[1]][1] == 0]
    how = rng.random()
    if varints and how < 0.45:
        msg, k, path = rng.choice(varints)
        old = msg[k][2]
        msg[k][2] = _pick_int(rng, old) % (1 << 64)
        what = f"varint {'.'.join(map(str, path))}: {old} -> {msg[k][2]}"
    else:
        msg, k, path = rng.choice(slots)
        f = msg[k]
        where = ".".join(map(str, path))
        if how < 0.6:
            del msg[k]
            what = f"deleted field {where}"
        elif how < 0.72:
            msg.insert(k, [f[0], f[1], f[2]])
            what = f"duplicated field {where}"
        elif how < 0.8 and len(msg) > 1:
            j = rng.randrange(len(msg))
            msg[k], msg[j] = msg[j], msg[k]
            what = f"swapped fields {where} and {msg[k][0]}"
        elif f[1] == 2 and f[2][0] == "packed" and f[2][1]:
            ints = list(f[2][1])
            i = rng.randrange(len(ints))
            if rng.random() < 0.7:
                ints[i] = _pick_int(rng, ints[i]) % (1 << 64)
                what = f"packed {where}[{i}] -> {ints[i]}"
            else:
                ints.pop(i) if rng.random() < 0.5 else ints.append(rng.choice(BIG_INTS) % (1 << 64))
                what = f"packed {where} now has {len(ints)} elements"
            f[2] = ("packed", ints)
        elif f[1] == 2 and f[2][0] == "bytes":
            val = f[2][1]
            new = rng.choice((b"", val[: len(val) // 2], val + b"\xff", b"%" * 3, b"\x00" + val, b"x" * 100000,
                              b"f32[9223372036854775807,2]"))
            f[2] = ("bytes", new)
            what = f"string {where}: {val[:20]!r} -> {new[:20]!r}"
        else:
            f[0] = rng.choice((f[0] + 1, 1, 2**29, 99))
            what = f"field number {where} -> {f[0]}"
    return encode_message(tree), "proto " + what


# -- the generator --------------------------------------------------------------------------------
class Generator:
    """Input ``i`` of campaign seed ``seed`` from ``seeds`` (a pure function of both)."""

    def __init__(self, seeds: Sequence[Seed], seed: int) -> None:
        self.seeds = list(seeds)
        self.seed = seed
        self.weights = [s.weight for s in self.seeds]

    def _pick(self, rng: random.Random) -> Seed:
        return rng.choices(self.seeds, self.weights)[0]

    def make(self, i: int) -> Hostile:
        rng = random.Random(f"{self.seed}:{i}")
        seed = self._pick(rng)
        data = seed.data
        steps = []
        for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
            data, what = self._mutate(rng, seed.kind, data)
            steps.append(what)
        return Hostile(f"s{self.seed}-i{i}", KIND_SUFFIX[seed.kind], data, seed.name, "; ".join(steps))

    def _mutate(self, rng: random.Random, kind: str, data: bytes) -> tuple[bytes, str]:
        def other() -> Seed:
            return self._pick(rng)

        text_ok = kind in ("hlo", "mlir")
        if text_ok and rng.random() < 0.75:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            if text is not None:
                lines = text.split("\n")
                table = HLO_MUTATIONS if kind == "hlo" else MLIR_MUTATIONS
                for _attempt in range(6):
                    what = rng.choice(table)(rng, lines)
                    if what is not None:
                        return "\n".join(lines).encode("utf-8", "surrogatepass"), what
        if kind == "pb" and rng.random() < 0.75:
            return mut_proto(rng, data, other)
        if kind == "mlirbc" and rng.random() < 0.3:
            return mut_version(rng, data, other)
        return rng.choice(BYTE_MUTATIONS)(rng, data, other)


# -- structural extremes --------------------------------------------------------------------------
def _hlo(body: str, name: str = "m", header: str = "") -> bytes:
    return f"HloModule {name}{header}\n\nENTRY %main {{\n{body}\n}}\n".encode()


def _chain_hlo(n: int) -> bytes:
    lines = ["  %p = f32[4]{0} parameter(0)", "  %a0 = f32[4]{0} add(%p, %p)"]
    lines += [f"  %a{k} = f32[4]{{0}} add(%a{k - 1}, %p)" for k in range(1, n)]
    lines.append(f"  ROOT %r = f32[4]{{0}} negate(%a{n - 1})")
    return _hlo("\n".join(lines), "chain")


def _chain_mlir(n: int) -> bytes:
    body = ["    %0 = stablehlo.add %arg0, %arg0 : tensor<4xf32>"]
    body += [f"    %{k} = stablehlo.add %{k - 1}, %arg0 : tensor<4xf32>" for k in range(1, n)]
    body.append(f"    return %{n - 1} : tensor<4xf32>")
    return ("module @chain {\n  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
            + "\n".join(body) + "\n  }\n}\n").encode()


def _call_chain_hlo(n: int) -> bytes:
    comps = ["HloModule calls\n"]
    comps.append("%c0 (x: f32[]) -> f32[] {\n  ROOT %x = f32[] parameter(0)\n}\n")
    for k in range(1, n):
        comps.append(f"%c{k} (x: f32[]) -> f32[] {{\n  %x = f32[] parameter(0)\n"
                     f"  ROOT %r = f32[] call(%x), to_apply=%c{k - 1}\n}}\n")
    comps.append(f"ENTRY %main (x: f32[]) -> f32[] {{\n  %x = f32[] parameter(0)\n"
                 f"  ROOT %r = f32[] call(%x), to_apply=%c{n - 1}\n}}\n")
    return "\n".join(comps).encode()


def _nested_regions_mlir(n: int) -> bytes:
    """``stablehlo.case`` nested ``n`` deep (each one's only branch holds the next case)."""
    head = "module @regions {\n  func.func public @main(%arg0: tensor<i32>, %arg1: tensor<f32>) -> tensor<f32> {\n"
    opens = "".join(f'%r{k} = "stablehlo.case"(%arg0) ({{\n' for k in range(n))
    inner = '"stablehlo.return"(%arg1) : (tensor<f32>) -> ()\n'
    closes = "".join(f'}}) : (tensor<i32>) -> tensor<f32>\n"stablehlo.return"(%r{k}) : (tensor<f32>) -> ()\n'
                     for k in range(n - 1, 0, -1))
    text = head + opens + inner + closes + "}) : (tensor<i32>) -> tensor<f32>\n    return %r0 : tensor<f32>\n  }\n}\n"
    return text.encode()


def _nest(inner: str, wrap: str, n: int) -> str:
    """``wrap`` (a format with one ``{}``) applied ``n`` times around ``inner``."""
    head, _, tail = wrap.partition("{}")
    return head * n + inner + tail * n


def _mlir_main(sig: str, body: str, attrs: str = "") -> bytes:
    return (f"module @m{attrs} {{\n  func.func public @main({sig}) {{\n{body}\n  }}\n}}\n").encode()


def special_inputs(which: str = "all") -> list[Hostile]:
    """Structural extremes (not mutations): deep nesting, huge dimensions, long chains, recursion."""
    deep = 10_000
    t = "f32[]"
    for _ in range(deep):
        t = f"({t})"
    tt = "tensor<f32>"
    for _ in range(deep):
        tt = f"tuple<{tt}>"
    callsite = _nest('"a"', 'callsite({} at "b")', deep)
    fused = _nest('"a"', 'fused[{}, "b"]', 3000)
    items: list[tuple[str, str, bytes, bool]] = [  # (name, suffix, data, in the quick profile)
        ("hlo-tuple-shape-10000-deep", ".hlo", _hlo(f"  ROOT %p = {t} parameter(0)"), True),
        ("hlo-tuple-layout-10000-deep", ".hlo",
         _hlo("  ROOT %p = f32[] parameter(0)", header=f", entry_computation_layout={{({t})->f32[]}}"), True),
        ("hlo-tuple-constant-10000-deep", ".hlo", _hlo(f"  ROOT %c = {t} constant({'(' * deep}0{')' * deep})"), False),
        ("hlo-call-chain-10000-deep", ".hlo", _call_chain_hlo(deep), False),
        ("hlo-tuple-reshape-960-deep", ".hlo",
         _hlo(f"  %p = {_nest('f32[]', '({})', 960)} parameter(0)\n  ROOT %r = f32[] reshape(%p)"), True),
        ("hlo-tuple-reshape-990-deep", ".hlo",
         _hlo(f"  %p = {_nest('f32[]', '({})', 990)} parameter(0)\n  ROOT %r = f32[] reshape(%p)"), False),
        ("hlo-tuple-call-900-deep", ".hlo",
         b"HloModule m\n\n%f (x: f32[]) -> f32[] {\n  ROOT %x = f32[] parameter(0)\n}\n\nENTRY %main {\n"
         + f"  %p = {_nest('f32[]', '({})', 900)} parameter(0)\n".encode()
         + b"  ROOT %r = f32[] call(%p), to_apply=%f\n}\n", False),
        ("hlo-tuple-layout-950-deep", ".hlo",
         _hlo("  ROOT %p = f32[] parameter(0)",
              header=f", entry_computation_layout={{({_nest('f32[]', '({})', 950)})->f32[]}}"), False),
        ("hlo-call-chain-300-deep", ".hlo", _call_chain_hlo(300), True),
        ("hlo-chain-50000", ".hlo", _chain_hlo(50_000), False),
        ("hlo-chain-2000", ".hlo", _chain_hlo(2_000), True),
        ("hlo-recursive-call", ".hlo",
         b"HloModule rec\n\n%f (x: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n"
         b"  ROOT %r = f32[] call(%x), to_apply=%f\n}\n\nENTRY %main (x: f32[]) -> f32[] {\n"
         b"  %x = f32[] parameter(0)\n  ROOT %r = f32[] call(%x), to_apply=%f\n}\n", True),
        ("hlo-mutual-recursion", ".hlo",
         b"HloModule rec2\n\n%f (x: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n"
         b"  ROOT %r = f32[] call(%x), to_apply=%g\n}\n\n%g (x: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n"
         b"  ROOT %r = f32[] call(%x), to_apply=%f\n}\n\nENTRY %main (x: f32[]) -> f32[] {\n"
         b"  %x = f32[] parameter(0)\n  ROOT %r = f32[] call(%x), to_apply=%f\n}\n", True),
        ("hlo-entry-calls-itself", ".hlo",
         _hlo("  %x = f32[] parameter(0)\n  ROOT %r = f32[] call(%x), to_apply=%main"), True),
        ("hlo-reduce-to-apply-itself", ".hlo",
         b"HloModule r\n\n%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
         b"  %z = f32[] constant(0)\n  %q = f32[] reduce(%a, %z), dimensions={}, to_apply=%add\n"
         b"  ROOT %s = f32[] add(%q, %b)\n}\n\nENTRY %main (x: f32[4]) -> f32[] {\n  %x = f32[4] parameter(0)\n"
         b"  %z = f32[] constant(0)\n  ROOT %r = f32[] reduce(%x, %z), dimensions={0}, to_apply=%add\n}\n", True),
        ("hlo-unknown-computation", ".hlo",
         _hlo("  %x = f32[] parameter(0)\n  ROOT %r = f32[] call(%x), to_apply=%nowhere"), True),
        ("hlo-overflow-param", ".hlo", _hlo("  ROOT %p = f32[9223372036854775807,2]{1,0} parameter(0)"), True),
        ("hlo-overflow-param-3d", ".hlo", _hlo("  ROOT %p = f32[4294967296,4294967296,4]{2,1,0} parameter(0)"), True),
        ("hlo-huge-param", ".hlo", _hlo("  ROOT %p = f32[2147483648,2147483648]{1,0} parameter(0)"), True),
        ("hlo-negative-dim", ".hlo", _hlo("  ROOT %p = f32[-1,4]{1,0} parameter(0)"), True),
        ("hlo-huge-broadcast", ".hlo",
         _hlo("  %c = f32[] constant(1)\n  ROOT %b = f32[100000,100000]{1,0} broadcast(%c), dimensions={}"), True),
        ("hlo-overflow-broadcast", ".hlo",
         _hlo("  %c = f32[] constant(1)\n  ROOT %b = f32[9223372036854775807,2]{1,0} broadcast(%c), dimensions={}"),
         True),
        ("hlo-huge-iota", ".hlo", _hlo("  ROOT %i = s32[3037000500,3037000500]{1,0} iota(), iota_dimension=0"), True),
        ("hlo-huge-constant", ".hlo", _hlo("  ROOT %c = f32[2147483648]{0} constant({1, 2})"), True),
        ("hlo-rank-64", ".hlo", _hlo("  ROOT %p = f32[" + ",".join(["1"] * 64) + "] parameter(0)"), True),
        ("hlo-rank-10000", ".hlo", _hlo("  ROOT %p = f32[" + ",".join(["1"] * 10_000) + "] parameter(0)"), False),
        ("hlo-token-dims", ".hlo", _hlo("  ROOT %t = token[2] parameter(0)"), True),
        ("hlo-token-constant", ".hlo", _hlo("  ROOT %t = token[] constant(0)"), True),
        ("hlo-token-after-all-dims", ".hlo", _hlo("  ROOT %t = token[2]{0} after-all()"), True),
        ("hlo-dot-one-operand", ".hlo",
         _hlo("  %a = f32[2,2]{1,0} parameter(0)\n  ROOT %d = f32[2,2]{1,0} dot(%a), lhs_contracting_dims={1}, "
              "rhs_contracting_dims={0}"), True),
        ("hlo-param-gap", ".hlo",
         _hlo("  %a = f32[] parameter(0)\n  %b = f32[] parameter(2)\n  ROOT %r = f32[] add(%a, %b)"), True),
        ("hlo-param-2^31", ".hlo",
         _hlo("  %a = f32[] parameter(0)\n  %b = f32[] parameter(2147483648)\n  ROOT %r = f32[] add(%a, %b)"), True),
        ("hlo-param-2^31-1", ".hlo",
         _hlo("  %a = f32[] parameter(0)\n  %b = f32[] parameter(2147483647)\n  ROOT %r = f32[] add(%a, %b)"), True),
        ("hlo-param-duplicate", ".hlo",
         _hlo("  %a = f32[] parameter(0)\n  %b = f32[] parameter(0)\n  ROOT %r = f32[] add(%a, %b)"), True),
        ("hlo-entry-layout-disagrees", ".hlo",
         _hlo("  %a = f32[2,3]{1,0} parameter(0)\n  ROOT %r = f32[2,3]{1,0} negate(%a)",
              header=", entry_computation_layout={(f32[2,3]{1,0})->f32[3,2]{0,1}}"), True),
        ("hlo-entry-layout-minor", ".hlo",
         _hlo("  %a = f32[2,3]{1,0} parameter(0)\n  ROOT %r = f32[2,3]{1,0} negate(%a)",
              header=", entry_computation_layout={(f32[2,3]{1,0})->f32[2,3]{0,1}}"), True),
        ("hlo-entry-layout-tuple", ".hlo",
         _hlo("  %a = f32[2]{0} parameter(0)\n  ROOT %r = f32[2]{0} negate(%a)",
              header=", entry_computation_layout={(f32[2]{0})->(f32[2]{0}, f32[2]{0})}"), True),
        ("hlo-layout-rank-mismatch", ".hlo", _hlo("  ROOT %p = f32[2,3,4]{0} parameter(0)"), True),
        ("hlo-layout-permutation-3", ".hlo",
         _hlo("  %p = f32[2,3]{2,0,1} parameter(0)\n  ROOT %n = f32[2,3]{1,0} negate(%p)"), True),
        ("hlo-tuple-as-array", ".hlo",
         _hlo("  %a = f32[2] parameter(0)\n  ROOT %t = f32[2] tuple(%a, %a)"), True),
        ("hlo-custom-call-unknown", ".hlo",
         _hlo("  %a = f32[2] parameter(0)\n  ROOT %c = f32[2] custom-call(%a), custom_call_target=\"no_such_target\""),
         True),
        ("hlo-stack-frame-cycle", ".hlo",
         b"HloModule sf\n\nFileNames\n1 \"a.py\"\n\nFunctionNames\n1 \"f\"\n\nFileLocations\n"
         b"1 {file_name_id=1 function_name_id=1 line=1 end_line=1 column=1 end_column=2}\n\nStackFrames\n"
         b"1 {file_location_id=1 parent_frame_id=2}\n2 {file_location_id=1 parent_frame_id=1}\n\n"
         b"ENTRY %main {\n  %p = f32[] parameter(0), metadata={op_name=\"x\" stack_frame_id=1}\n"
         b"  ROOT %n = f32[] negate(%p), metadata={stack_frame_id=2}\n}\n", True),
        ("hlo-stack-frame-out-of-range", ".hlo",
         b"HloModule sf\n\nStackFrames\n1 {file_location_id=7 parent_frame_id=0}\n\n"
         b"ENTRY %main {\n  %p = f32[] parameter(0), metadata={stack_frame_id=99}\n"
         b"  ROOT %n = f32[] negate(%p), metadata={stack_frame_id=1}\n}\n", True),
        ("mlir-nested-modules-10000", ".mlir", ("module {\n" * deep + "}\n" * deep).encode(), True),
        ("mlir-nested-regions-10000", ".mlir", _nested_regions_mlir(deep), True),
        ("mlir-nested-regions-200", ".mlir", _nested_regions_mlir(200), True),
        ("mlir-nested-regions-1000", ".mlir", _nested_regions_mlir(1000), True),
        ("mlir-nested-regions-2000", ".mlir", _nested_regions_mlir(2000), False),
        ("mlir-nested-callsite-loc-10000", ".mlir",
         _mlir_main("%arg0: tensor<f32>) -> (tensor<f32>",
                    f"    %0 = stablehlo.negate %arg0 : tensor<f32> loc({callsite})\n"
                    "    return %0 : tensor<f32>"), False),
        ("mlir-nested-fused-loc-3000", ".mlir",
         _mlir_main("%arg0: tensor<f32>) -> (tensor<f32>",
                    f"    %0 = stablehlo.negate %arg0 : tensor<f32> loc({fused})\n"
                    "    return %0 : tensor<f32>"), False),
        ("mlir-nested-op-attr-10000", ".mlir",
         _mlir_main("%arg0: tensor<f32>) -> (tensor<f32>",
                    f"    %0 = stablehlo.negate %arg0 {{x.deep = {'[' * deep}1{']' * deep}}} : tensor<f32>\n"
                    "    return %0 : tensor<f32>"), False),
        ("mlir-nested-tuple-type-100", ".mlir",
         _mlir_main(f"%arg0: {_nest('tensor<f32>', 'tuple<{}>', 100)}) -> (tensor<f32>",
                    "    %0 = stablehlo.constant dense<1.0> : tensor<f32>\n    return %0 : tensor<f32>"), True),
        ("mlir-nested-array-attr-10000", ".mlir",
         _mlir_main("%arg0: tensor<f32>) -> (tensor<f32>", "    return %arg0 : tensor<f32>",
                    f" attributes {{x.deep = {'[' * deep}1{']' * deep}}}"), True),
        ("mlir-nested-dict-attr-10000", ".mlir",
         _mlir_main("%arg0: tensor<f32>) -> (tensor<f32>", "    return %arg0 : tensor<f32>",
                    f" attributes {{x.deep = {'{a = ' * deep}1{'}' * deep}}}"), False),
        ("mlir-nested-tuple-type-10000", ".mlir",
         _mlir_main(f"%arg0: {tt}) -> ({tt}", f"    return %arg0 : {tt}"), True),
        ("mlir-nested-parens-10000", ".mlir",
         _mlir_main("%arg0: tensor<f32>) -> (tensor<f32>", "    return " + "(" * deep + "%arg0" + ")" * deep), False),
        ("mlir-recursive-call", ".mlir",
         _mlir_main("%arg0: tensor<f32>) -> (tensor<f32>",
                    "    %0 = func.call @main(%arg0) : (tensor<f32>) -> tensor<f32>\n"
                    "    return %0 : tensor<f32>"), True),
        ("mlir-mutual-recursion", ".mlir",
         b"module @m {\n  func.func public @main(%arg0: tensor<f32>) -> tensor<f32> {\n"
         b"    %0 = func.call @f(%arg0) : (tensor<f32>) -> tensor<f32>\n    return %0 : tensor<f32>\n  }\n"
         b"  func.func private @f(%arg0: tensor<f32>) -> tensor<f32> {\n"
         b"    %0 = func.call @main(%arg0) : (tensor<f32>) -> tensor<f32>\n    return %0 : tensor<f32>\n"
         b"  }\n}\n", True),
        ("mlir-chain-50000", ".mlir", _chain_mlir(50_000), False),
        ("mlir-chain-2000", ".mlir", _chain_mlir(2_000), True),
        ("mlir-overflow-tensor", ".mlir",
         _mlir_main("%arg0: tensor<9223372036854775807x2xf32>) -> (tensor<9223372036854775807x2xf32>",
                    "    return %arg0 : tensor<9223372036854775807x2xf32>"), True),
        ("mlir-huge-tensor", ".mlir",
         _mlir_main("%arg0: tensor<2147483648x2147483648xf32>) -> (tensor<2147483648x2147483648xf32>",
                    "    return %arg0 : tensor<2147483648x2147483648xf32>"), True),
        ("mlir-huge-broadcast", ".mlir",
         _mlir_main("%arg0: tensor<f32>) -> (tensor<100000x100000xf32>",
                    "    %0 = stablehlo.broadcast_in_dim %arg0, dims = [] : "
                    "(tensor<f32>) -> tensor<100000x100000xf32>\n"
                    "    return %0 : tensor<100000x100000xf32>"), True),
        ("mlir-huge-iota", ".mlir",
         _mlir_main(") -> (tensor<4611686018427387904x4xi32>",
                    "    %0 = stablehlo.iota dim = 0 : tensor<4611686018427387904x4xi32>\n"
                    "    return %0 : tensor<4611686018427387904x4xi32>"), True),
        ("mlir-dynamic-dims", ".mlir",
         _mlir_main("%arg0: tensor<?x4xf32>) -> (tensor<?x4xf32>", "    return %arg0 : tensor<?x4xf32>"), True),
        ("mlir-token-arg", ".mlir",
         _mlir_main("%arg0: !stablehlo.token) -> (!stablehlo.token", "    return %arg0 : !stablehlo.token"), True),
        ("mlir-no-main", ".mlir",
         b"module @m {\n  func.func public @other(%arg0: tensor<f32>) -> tensor<f32> {\n"
         b"    return %arg0 : tensor<f32>\n  }\n}\n", True),
        ("mlir-custom-call-unknown", ".mlir",
         _mlir_main("%arg0: tensor<2xf32>) -> (tensor<2xf32>",
                    "    %0 = stablehlo.custom_call @no_such_target(%arg0) : (tensor<2xf32>) -> tensor<2xf32>\n"
                    "    return %0 : tensor<2xf32>"), True),
        ("mlir-big-partitions", ".mlir",
         _mlir_main("%arg0: tensor<f32>) -> (tensor<f32>", "    return %arg0 : tensor<f32>",
                    " attributes {mhlo.num_partitions = 1024 : i32, mhlo.num_replicas = 1024 : i32}"), True),
        ("mlir-vhlo-text", ".mlir",
         b'"vhlo.func_v1"() <{arg_attrs = #vhlo.array_v1<[]>, function_type = #vhlo.type_v1<!vhlo.func_v1<() -> ()>>,'
         b' res_attrs = #vhlo.array_v1<[]>, sym_name = #vhlo.string_v1<"main">, sym_visibility = '
         b'#vhlo.string_v1<"">}> ({\n  "vhlo.return_v1"() : () -> ()\n}) : () -> ()\n', True),
    ]
    pb_name = encode_message([[1, 2, ("bytes", b"m")]])
    deep_pb = b""
    for _ in range(deep + 1):  # field 3 (computations) inside field 3 inside ...
        deep_pb = bytes([0x1A]) + _enc_varint(len(deep_pb)) + deep_pb
    all_ones = [[k, 0, 2**64 - 1] for k in range(1, 40)]
    items += [
        ("pb-nested-10000", ".pb", pb_name + deep_pb, True),
        ("pb-huge-length", ".pb", pb_name + bytes([0x1A]) + _enc_varint(2**62) + b"x" * 16, True),
        ("pb-negative-varints", ".pb", pb_name + encode_message([[3, 2, ("msg", all_ones)]]), True),
        ("pb-many-computations", ".pb", pb_name + encode_message([[3, 2, ("msg", [[1, 2, ("bytes", b"c")]])]] * 20000),
         False),
    ]
    out = [Hostile(f"special-{name}", suffix, data, "special", name)
           for name, suffix, data, quick in items if which == "all" or quick]
    return out


def version_inputs(seeds: Sequence[Seed], which: str = "all") -> list[Hostile]:
    """Portable artifacts whose ``StableHLO_vX.Y.Z`` producer version is rewritten."""
    out = []
    arts = [s for s in seeds if s.kind == "mlirbc" and b"StableHLO_v" in s.data]
    arts = arts[:2] if which != "all" else arts
    for s in arts:
        m = re.search(rb"StableHLO_v([0-9.]+)", s.data)
        assert m is not None
        old = m.group(1)
        for new in VERSIONS if which == "all" else (b"9.9.9", b"0.0.0", b"99.99.99"):
            if len(new) != len(old) and which != "all":
                continue
            data = s.data[:m.start(1)] + new + s.data[m.end(1):]
            out.append(Hostile(f"version-{s.name.replace('/', '_')}-{new.decode(errors='replace')}", ".mlirbc",
                               data, s.name, f"producer version {old.decode()} -> {new!r}"))
    return out


def _shape_proto(depth: int = 0, dims: Sequence[int] = (), etype: int = 11) -> bytes:
    """A serialized ``ShapeProto``: an array (``etype``, ``dims``) inside ``depth`` one-element tuples."""
    shape = bytes([0x10]) + _enc_varint(etype)
    if dims:
        packed = b"".join(_enc_varint(d) for d in dims)
        shape += bytes([0x1A]) + _enc_varint(len(packed)) + packed
    for _ in range(depth):  # element_type = TUPLE (13), tuple_shapes (field 4) = [shape]
        shape = bytes([0x10, 13, 0x22]) + _enc_varint(len(shape)) + shape
    return shape


def proto_inputs(seeds: Sequence[Seed], which: str = "all") -> list[Hostile]:
    """``HloModuleProto`` s whose first instruction's shape (or the program shape) is replaced."""
    base = next((s for s in seeds if s.name == "saved/affine.pb"), None)
    if base is None:
        return []
    edits = [
        ("instr-tuple-10000-deep", (3, 2, 3), _shape_proto(10_000), True),
        ("instr-tuple-90-deep", (3, 2, 3), _shape_proto(90), True),
        ("instr-10000-dims", (3, 2, 3), _shape_proto(0, [1] * 10_000), False),
        ("instr-overflow-dims", (3, 2, 3), _shape_proto(0, [2**63 - 1, 2]), True),
        ("instr-token-dims", (3, 2, 3), _shape_proto(0, [2], etype=17), True),
        ("instr-bad-etype", (3, 2, 3), _shape_proto(0, [2, 3], etype=999), True),
        ("program-shape-tuple-10000-deep", (4, 1), _shape_proto(10_000), True),
        ("program-shape-tuple-500-deep", (4, 1), _shape_proto(500), False),
        ("program-shape-result-overflow", (4, 2), _shape_proto(0, [2**62, 4]), True),
    ]
    out = []
    for name, path, shape, quick in edits:
        if which != "all" and not quick:
            continue
        tree = decode_message(base.data)
        msg = tree
        for k, fnum in enumerate(path):
            f = next(f for f in msg if f[0] == fnum)
            if k == len(path) - 1:
                f[2] = ("bytes", shape)
            else:
                msg = f[2][1]
        out.append(Hostile(f"proto-{name}", ".pb", encode_message(tree), base.name, f"field {path} -> {name}"))
    return out


# Byte edits of committed seeds that once broke a loader (seed, offset, new byte, what happened).
KNOWN_EDITS: tuple[tuple[str, int, int, str], ...] = (
    ("int_indexing/exported.mlirbc", 118, 0x03, "MLIR's bytecode reader spun for minutes (load never returned)"),
)


def known_inputs(seeds: Sequence[Seed], which: str = "all") -> list[Hostile]:
    """The :data:`KNOWN_EDITS` (long profile only: each took minutes before it was fixed)."""
    if which != "all":
        return []
    by_name = {s.name: s for s in seeds}
    out = []
    for name, offset, value, what in KNOWN_EDITS:
        s = by_name.get(name)
        if s is None or offset >= len(s.data):
            continue
        data = s.data[:offset] + bytes([value]) + s.data[offset + 1:]
        out.append(Hostile(f"known-{_safe(name)}-{offset}", KIND_SUFFIX[s.kind], data, name,
                           f"byte {offset}: {s.data[offset]:#04x} -> {value:#04x} ({what})"))
    return out


def make_inputs(profile: Profile, seeds: Sequence[Seed] | None = None) -> list[Hostile]:
    """The inputs of a profile: the structural extremes, the version edits, then mutations."""
    seeds = list(seeds) if seeds is not None else all_seeds()
    fixed = (special_inputs(profile.specials) + version_inputs(seeds, profile.specials)
             + proto_inputs(seeds, profile.specials) + known_inputs(seeds, profile.specials))
    gen = Generator(seeds, profile.seed)
    n = max(0, profile.files - len(fixed))
    return fixed + [gen.make(i) for i in range(n)]


# == checking one input (in a child process) ===================================================
def _note(step: str) -> None:
    sys.stderr.write(f"[hostile] step {step}\n")
    sys.stderr.flush()


_compiled: dict[str, str] = {}  # module text -> what compiling and running it gave (per child)


def _attempt(steps: list[tuple[str, str, str]], name: str, fn: Callable[[], Any]) -> Any:
    """Run one step; record ("ok" | "error" | "raw", detail). Returns fn()'s value or None."""
    import xlasdk as xs

    _note(name)
    try:
        value = fn()
    except xs.XlaSdkError as e:
        steps.append((name, "error", f"{type(e).__name__}: {str(e)[:300]}"))
        return None
    except Exception as e:
        import traceback

        tb = traceback.format_exc()
        steps.append((name, "raw", f"{type(e).__name__}: {str(e)[:300]}\n{_short(tb, 60)}"))
        return None
    steps.append((name, "ok", ""))
    return value


def _nbytes(shape: Any) -> int | None:
    """Bytes of an array shape, or None for tokens and tuples (and anything odd)."""
    if shape.is_tuple():
        total = 0
        for s in shape.tuple_shapes():
            n = _nbytes(s)
            if n is None:
                return None
            total += n
        return total
    if shape.is_token():
        return None
    try:
        n = int(shape.numpy_dtype().itemsize)
    except Exception:  # an element type without a numpy dtype: not run (the loaders' business, not ours)
        return None
    if shape.rank() > 32:  # numpy arrays hold at most 64 dimensions
        return None
    for d in shape.dimensions():
        if d < 0:
            return None
        n *= d
    return n


def _compile_and_run(steps: list[tuple[str, str, str]], comp: Any, label: str) -> None:
    import numpy as np

    import xlasdk as xs

    text = _attempt(steps, f"{label}: as_stablehlo_text", comp.as_stablehlo_text)
    if text is None:
        return
    key = hashlib.sha256(text.encode()).hexdigest()
    if key in _compiled:
        steps.append((f"{label}: compile", "skip", f"same module as before: {_compiled[key]}"))
        return
    _compiled[key] = "?"
    ps = _attempt(steps, f"{label}: program_shape", comp.program_shape)
    for method in ("as_hlo_text", "as_serialized_hlo_module_proto", "serialize_portable_artifact",
                   "as_hlo_dot_graph"):
        _attempt(steps, f"{label}: {method}", getattr(comp, method))
    exe = _attempt(steps, f"{label}: compile", lambda: xs.compile(comp, cache=False))
    if exe is None or ps is None:
        _compiled[key] = "not compiled"
        return
    sizes = [_nbytes(s) for s in ps.parameter_shapes()] + [_nbytes(ps.result_shape())]
    side = re.search(r"stablehlo\.(infeed|outfeed|send|recv)\b|mhlo\.(infeed|outfeed)", text)
    if any(n is None for n in sizes) or side is not None or sum(n for n in sizes if n) > RUN_LIMIT_BYTES:
        steps.append((f"{label}: run", "skip", "tokens, tuples, side effects or over the size limit"))
        _compiled[key] = "compiled"
        return
    if "stablehlo.while" in text:
        _note("run-with-while")
        steps.append((f"{label}: while", "note", "the program has a while loop"))
    args = [np.zeros(s.dimensions(), s.numpy_dtype()) for s in ps.parameter_shapes()]

    def run() -> Any:
        out = exe(*args)
        return [o.to_numpy() for o in (out if isinstance(out, tuple) else (out,))]

    _attempt(steps, f"{label}: run", run)
    _compiled[key] = "ran"


LOADERS = tuple(f"load_computation({s})" for s in LOAD_SUFFIXES) + (
    "from_hlo_text", "from_hlo_proto", "from_stablehlo(bytes)", "from_stablehlo(str)")
NATURAL_LOADER = {"hlo": "load_computation(.hlo)", "mlir": "load_computation(.mlir)",
                  "mlirbc": "load_computation(.mlirbc)", "pb": "load_computation(.pb)",
                  "other": "load_computation(.data)"}
SUFFIX_KIND = {".hlo": "hlo", ".mlir": "mlir", ".mlirbc": "mlirbc", ".pb": "pb", ".bin": "other"}


def loaders_for(h: Hostile, index: int, extra: int | None) -> list[str]:
    """The loaders input number ``index`` goes through: every one (``extra`` None), or the one of its
    suffix plus ``extra`` others in rotation (so that every loader still sees many inputs)."""
    if extra is None:
        return list(LOADERS)
    natural = NATURAL_LOADER[SUFFIX_KIND.get(h.suffix, "other")]
    others = [name for name in LOADERS if name != natural]
    return [natural] + [others[(index * extra + k) % len(others)] for k in range(extra)]


def _loader_call(name: str, data: bytes, d: str) -> Callable[[], Any]:
    import xlasdk as xs

    if name.startswith("load_computation("):
        path = os.path.join(d, "input" + name[len("load_computation("):-1])
        with open(path, "wb") as f:
            f.write(data)
        return lambda: xs.load_computation(path)
    if name == "from_hlo_text":
        return lambda: xs.XlaComputation.from_hlo_text(data.decode("utf-8", "replace"))
    if name == "from_hlo_proto":
        return lambda: xs.XlaComputation.from_hlo_proto(data)
    if name == "from_stablehlo(bytes)":
        return lambda: xs.XlaComputation.from_stablehlo(data)
    assert name == "from_stablehlo(str)"
    return lambda: xs.XlaComputation.from_stablehlo(data.decode("utf-8", "replace"))


def check_input(inp: dict[str, Any]) -> dict[str, Any]:
    """The loaders ``inp["loaders"]`` (default: all) on ``inp["data"]``, and compile + run of what
    loads (runs in a child process)."""
    data: bytes = inp["data"]
    steps: list[tuple[str, str, str]] = []
    loaded: list[tuple[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="hostile-") as d:
        for name in inp.get("loaders") or LOADERS:
            comp = _attempt(steps, name, _loader_call(name, data, d))
            if comp is not None:
                loaded.append((name, comp))
    for label, comp in loaded:
        _compile_and_run(steps, comp, label)
    _note("done")
    return {"steps": steps, "loaded": len(loaded)}


# == the campaign (parent side) ==============================================================
CHILD_SOURCE = f"""
import os, resource, sys
sys.path.insert(0, {HERE!r})
_limit = int(os.environ.get("XLASDK_HOSTILE_AS", "0"))
if _limit:
    resource.setrlimit(resource.RLIMIT_AS, (_limit, _limit))
try:
    os.setpgid(0, 0)  # our own process group: xlasdk's worker joins it, so it can be cleaned up
    _d = os.environ.get({PGID_DIR_ENV!r})
    if _d:
        open(os.path.join(_d, str(os.getpid())), "w").close()
except OSError:
    pass
from hostile_files import check_input as main
"""


def _group_members(pgid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(") ", 1)[-1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # fields: state, ppid, pgrp, ...
            out.append(int(name))
    return out


def _describe_hung_groups(pgid_dir: str) -> str:
    """State, kernel wait channel and (with gdb) native stacks of what is left of the process
    groups of dead children: where a hung xlasdk worker was stuck."""
    parts = []
    for name in os.listdir(pgid_dir):
        for pid in _group_members(int(name)):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")[:100]
                with open(f"/proc/{pid}/stat") as f:
                    state = f.read().rsplit(") ", 1)[-1].split()[0]
                with open(f"/proc/{pid}/wchan") as f:
                    wchan = f.read().strip()
            except OSError:
                continue
            line = f"pid {pid} state {state} wchan {wchan or '-'}: {cmd}"
            if shutil.which("gdb"):
                try:
                    bt = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt 12"],
                                        capture_output=True, text=True, timeout=60).stdout
                    frames = [ln.split(" in ", 1)[-1][:160] for ln in bt.splitlines() if ln.startswith("#")]
                    line += "\n      " + "\n      ".join(frames[:40])
                except (OSError, subprocess.SubprocessError):
                    pass
            parts.append(line)
    return "\n    ".join(parts)


def _reap_groups(pgid_dir: str) -> None:
    """Kill what is left of the process groups of dead children (xlasdk workers they left behind)."""
    for name in os.listdir(pgid_dir):
        pid = int(name)
        if os.path.exists(f"/proc/{pid}"):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().split(") ")[-1][:1] != "Z":
                        continue  # still running
            except OSError:
                pass
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        os.unlink(os.path.join(pgid_dir, name))


@dataclass
class Result:
    """What became of one input."""

    hostile: Hostile
    outcome: str  # ok | error | raw | death | hang | slow
    detail: str = ""
    steps: list[tuple[str, str, str]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def has_while(self) -> bool:
        return any(status == "note" and name.endswith(": while") for name, status, _ in self.steps)

    @property
    def failed(self) -> bool:
        return self.outcome in ("raw", "death", "hang")


@dataclass
class CliResult:
    hostile: Hostile
    argv: list[str]
    outcome: str  # ok | exit1 | exit2 | slow | raw | death | hang | badexit
    returncode: int | None
    stderr: str
    seconds: float

    @property
    def failed(self) -> bool:
        return self.outcome in ("raw", "death", "hang", "badexit")


def input_timeout(h: Hostile, loaders: int = len(LOADERS)) -> float:
    """Seconds one input may take (every loader, compile and run): more for big inputs, and
    enough for each loader to run into xlasdk's own load time limit."""
    return INPUT_TIMEOUT_S + 300.0 * len(h.data) / 1e6 + LOAD_TIMEOUT_S * loaders


def _classify(h: Hostile, o: Any, loaders: int = len(LOADERS)) -> Result:
    if o.status == "died":
        step = _last_step(o.stderr)
        return Result(h, "death", f"{o.signal_name or f'exit {o.returncode}'} during {step}: "
                      f"{_tail(o.stderr)}", seconds=o.seconds)
    if o.status == "timeout":
        step = _last_step(o.stderr)
        if "run-with-while" in o.stderr and step.endswith(": run"):
            return Result(h, "slow", f"a while loop ran past {input_timeout(h, loaders):.0f} s", seconds=o.seconds)
        return Result(h, "hang", f"no answer within {input_timeout(h, loaders):.0f} s during {step}: {_tail(o.stderr)}",
                      seconds=o.seconds)
    if o.status == "error":
        return Result(h, "raw", f"check_input raised {o.error}\n{o.traceback[-3000:]}", seconds=o.seconds)
    steps = o.value["steps"]
    raws = [s for s in steps if s[1] == "raw"]
    if raws:
        return Result(h, "raw", f"{raws[0][0]}: {raws[0][2]}", steps, o.seconds)
    outcome = "ok" if o.value["loaded"] else "error"
    return Result(h, outcome, "", steps, o.seconds)


def _last_step(stderr: str) -> str:
    found = re.findall(r"\[hostile\] step (.*)", stderr)
    found = [s for s in found if s != "run-with-while"]
    return found[-1] if found else "start-up"


def _tail(stderr: str, n: int = 6) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if not ln.startswith(("[hostile]", "[harness]"))]
    return " | ".join(lines[-n:])[-1500:]


def _pythonpath(first: str) -> str:
    rest = os.environ.get("PYTHONPATH")
    return os.pathsep.join([first, REPO] + ([rest] if rest else []))


def snapshot_xlasdk(directory: str) -> str:
    """A copy of the ``xlasdk`` package under ``directory`` (returned: put it first on PYTHONPATH).

    A campaign runs for hours in a tree that others edit: its child processes (and xlasdk's
    worker processes under them) import this copy, so that they all run the same code, the code
    of the campaign's start."""
    shutil.copytree(os.path.join(REPO, "xlasdk"), os.path.join(directory, "xlasdk"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    return directory


def _cli_env(pythonpath: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("XLASDK_CACHE_DIR", None)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    env["PYTHONPATH"] = pythonpath
    env["XLASDK_LOAD_TIMEOUT"] = str(LOAD_TIMEOUT_S)
    return env


def _cli_preexec() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def run_cli(h: Hostile, verb: str, workdir: str, has_while: bool = False, pythonpath: str = REPO) -> CliResult:
    """``python -m xlasdk.cli inspect FILE`` or ``run FILE --random-inputs`` in a fresh process.

    A ``run`` of a program with a while loop that passes the time limit is ``slow`` (its loop
    bound may be anything), not a hang."""
    timeout = CLI_TIMEOUT_S + 300.0 * len(h.data) / 1e6 + LOAD_TIMEOUT_S
    path = os.path.join(workdir, re.sub(r"[^\w.\-]", "_", h.key) + h.suffix)
    with open(path, "wb") as f:
        f.write(h.data)
    argv = [sys.executable, "-m", "xlasdk.cli", verb, path]
    if verb == "run":
        argv += ["--random-inputs", "--seed", "0"]
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_cli_env(pythonpath), cwd=workdir,
                         preexec_fn=_cli_preexec, start_new_session=True)
    try:
        _, err_b = p.communicate(timeout=timeout)
        hung = False
    except subprocess.TimeoutExpired:
        hung = True
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        _, err_b = p.communicate()
    rc = p.returncode
    if hung or rc < 0:
        try:  # whatever the command left behind (its xlasdk worker)
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
    err = err_b.decode("utf-8", "replace")
    seconds = time.monotonic() - t0
    if hung:
        outcome = "slow" if verb == "run" and has_while else "hang"
    elif rc < 0:
        outcome = "death"
    elif "Traceback (most recent call last)" in err or "internal error" in err:
        outcome = "raw"
    elif rc in (0, 1, 2):
        outcome = ("ok", "exit1", "exit2")[rc]
    else:
        outcome = "badexit"
    try:
        os.unlink(path)
    except OSError:
        pass
    return CliResult(h, argv[3:], outcome, rc, err[-3000:], seconds)


@dataclass
class Campaign:
    profile: str
    results: list[Result] = field(default_factory=list)
    cli: list[CliResult] = field(default_factory=list)
    seconds: float = 0.0
    out_dir: str = ""

    @property
    def failures(self) -> list[Result]:
        return [r for r in self.results if r.failed]

    @property
    def cli_failures(self) -> list[CliResult]:
        return [c for c in self.cli if c.failed]

    def figures(self) -> str:
        by = collections.Counter(r.outcome for r in self.results)
        cby = collections.Counter(c.outcome for c in self.cli)
        loaders = collections.Counter()
        for r in self.results:
            for name, status, _ in r.steps:
                loaders[(name.split(":")[-1].strip().split("(")[0], status)] += 1
        steps = ", ".join(f"{k[0]} {k[1]} {v}" for k, v in sorted(loaders.items()))
        deaths = [r for r in self.results if r.outcome == "death"]
        return "\n".join([
            f"hostile files ({self.profile}): {len(self.results)} files in {self.seconds:.1f} s: "
            + ", ".join(f"{k} {by.get(k, 0)}" for k in ("ok", "error", "slow", "raw", "death", "hang")),
            f"  deaths: {len(deaths)}; CLI runs: {len(self.cli)}: "
            + ", ".join(f"{k} {cby.get(k, 0)}" for k in ("ok", "exit1", "exit2", "slow", "raw", "death", "hang",
                                                            "badexit")),
            f"  steps: {steps}",
            f"  failures saved under {self.out_dir}" if self.failures or self.cli_failures else "  no failures",
        ])

    def describe_failures(self, limit: int = 30) -> str:
        parts = []
        for r in self.failures[:limit]:
            parts.append(f"[{r.outcome}] {r.hostile.describe()}\n  {_short(r.detail)}\n  input: "
                         f"{os.path.join(self.out_dir, _safe(r.hostile.key) + r.hostile.suffix)}")
        for c in self.cli_failures[:limit]:
            parts.append(f"[cli {c.outcome}] {' '.join(c.argv)} (rc {c.returncode}) on {c.hostile.describe()}\n  "
                         f"{c.stderr.strip()[-1500:]}\n  input: "
                         f"{os.path.join(self.out_dir, _safe(c.hostile.key) + c.hostile.suffix)}")
        n = len(self.failures) + len(self.cli_failures)
        if n > 2 * limit:
            parts.append(f"... {n} failures in all")
        return "\n\n".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile, "seconds": self.seconds,
            "files": dict(collections.Counter(r.outcome for r in self.results)),
            "cli": dict(collections.Counter(c.outcome for c in self.cli)),
            "failures": [{"key": r.hostile.key, "outcome": r.outcome, "origin": r.hostile.origin,
                          "mutation": r.hostile.mutation, "detail": r.detail[:4000]} for r in self.failures],
            "cli_failures": [{"key": c.hostile.key, "argv": c.argv, "outcome": c.outcome, "rc": c.returncode,
                              "stderr": c.stderr[-2000:]} for c in self.cli_failures],
        }


def _short(text: str, max_lines: int = 24) -> str:
    """``text`` with runs of repeated traceback lines collapsed, and at most ``max_lines`` lines."""
    out: list[str] = []
    seen: set[str] = set()
    skipped = 0
    for ln in text.splitlines():
        key = ln.strip()
        if key in seen and (key.startswith(("File ", "^", "return ", "elems.")) or not key):
            skipped += 1
            continue
        seen.add(key)
        out.append(ln)
    if skipped:
        out.append(f"    [{skipped} repeated traceback lines left out]")
    if len(out) > max_lines:
        out = out[:4] + ["    ..."] + out[-(max_lines - 5):]
    return "\n".join(out)


def _safe(key: str) -> str:
    return re.sub(r"[^\w.\-]", "_", key)


def _save_failure(out_dir: str, h: Hostile, what: str, reproducer: str | None = None) -> None:
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, _safe(h.key))
    with open(base + h.suffix, "wb") as f:
        f.write(h.data)
    with open(base + ".txt", "w") as f:
        f.write(h.describe() + "\n\n" + what + "\n")
    if reproducer is not None:
        with open(base + ".py", "w") as f:
            f.write(reproducer)


def _cli_sample(results: list[Result], n: int) -> list[tuple[Result, str]]:
    """``n`` CLI runs: half on inputs that loaded (they compile and run), half on the others."""
    if n <= 0:
        return []
    loaded = [r for r in results if r.outcome == "ok"]
    rest = [r for r in results if r.outcome != "ok"]
    pairs = n // 2
    pick: list[Result] = []
    for pool, k in ((loaded, (pairs + 1) // 2), (rest, pairs)):
        if pool and k:
            step = max(1, len(pool) // k)
            pick += pool[::step][:k]
    while len(pick) < pairs and (loaded or rest):
        extra = [h for h in (loaded + rest) if h not in pick]
        if not extra:
            break
        pick.append(extra[0])
    return [(h, verb) for h in pick for verb in ("inspect", "run")][:n]


def run_campaign(
    profile: Profile,
    *,
    out_dir: str | None = None,
    inputs: list[Hostile] | None = None,
    progress: Callable[[str], None] | None = None,
    max_tasks_per_child: int = 400,
    snapshot: bool = True,
    first_index: int = 0,
) -> Campaign:
    """Check every input of ``profile`` in child processes, then a sample through the CLI (all of
    them importing a snapshot of ``xlasdk`` taken at the start when ``snapshot`` is true).
    ``first_index``: the profile-wide index of ``inputs[0]`` (a part of a profile, see ``--part``)."""
    from harness import Task, Worker

    t0 = time.monotonic()
    out_dir = out_dir or tempfile.mkdtemp(prefix=f"hostile-{profile.name}-")
    os.makedirs(out_dir, exist_ok=True)
    hostiles = inputs if inputs is not None else make_inputs(profile)
    camp = Campaign(profile.name, out_dir=out_dir)
    pgid_dir = tempfile.mkdtemp(prefix="hostile-pgids-")
    snap_dir = tempfile.mkdtemp(prefix="hostile-xlasdk-")
    pythonpath = _pythonpath(snapshot_xlasdk(snap_dir)) if snapshot else _pythonpath(REPO)
    env: dict[str, str | None] = {"XLASDK_CACHE_DIR": None, PGID_DIR_ENV: pgid_dir,
                                  "XLASDK_HOSTILE_AS": str(ADDRESS_SPACE_BYTES), "PYTHONPATH": pythonpath,
                                  "XLASDK_LOAD_TIMEOUT": str(LOAD_TIMEOUT_S)}
    by_key = {h.key: h for h in hostiles}
    loader_lists = [loaders_for(h, first_index + i, profile.extra_loaders) for i, h in enumerate(hostiles)]
    n_loaders = {h.key: len(ls) for h, ls in zip(hostiles, loader_lists, strict=True)}
    tasks = [Task(CHILD_SOURCE, {"key": h.key, "data": h.data, "loaders": ls}, key=h.key)
             for h, ls in zip(hostiles, loader_lists, strict=True)]
    counts: collections.Counter[str] = collections.Counter()

    def on_outcome(o: Any) -> None:
        h = by_key[o.task.key]
        r = _classify(h, o, n_loaders[h.key])
        camp.results.append(r)
        counts[r.outcome] += 1
        if o.status == "timeout":
            where = _describe_hung_groups(pgid_dir)
            if where:
                r.detail += f"\n  processes left when the time ran out:\n    {where}"
        if o.status in ("died", "timeout"):
            _reap_groups(pgid_dir)
        if r.failed:
            _save_failure(out_dir, h, f"[{r.outcome}] {r.detail}", o.reproducer() if o.failed else None)
        if progress is not None and (len(camp.results) % 100 == 0 or r.failed):
            progress(f"{len(camp.results)}/{len(hostiles)} inputs, {time.monotonic() - t0:.0f} s: {dict(counts)}"
                     + (f"; {r.outcome}: {h.describe()}" if r.failed else ""))

    try:
        with Worker(INPUT_TIMEOUT_S, env=env, cwd=out_dir) as w:
            for h, task in zip(hostiles, tasks, strict=True):
                if w.tasks_run >= max_tasks_per_child:
                    w.close()
                on_outcome(w.run(task, timeout=input_timeout(h, n_loaders[h.key])))
    except BaseException:
        shutil.rmtree(snap_dir, ignore_errors=True)
        raise
    finally:
        _reap_groups(pgid_dir)
        try:
            os.rmdir(pgid_dir)
        except OSError:
            pass
    try:
        with tempfile.TemporaryDirectory(prefix="hostile-cli-") as work:
            for r, verb in _cli_sample(camp.results, profile.cli):
                h = r.hostile
                c = run_cli(h, verb, work, r.has_while, pythonpath)
                camp.cli.append(c)
                if c.failed:
                    _save_failure(out_dir, h, f"[cli {c.outcome}] {' '.join(c.argv)} -> rc {c.returncode}\n{c.stderr}")
                    if progress is not None:
                        progress(f"CLI {c.outcome}: {' '.join(c.argv)} on {h.describe()}")
                elif progress is not None and len(camp.cli) % 50 == 0:
                    progress(f"{len(camp.cli)} CLI runs, {time.monotonic() - t0:.0f} s")
    finally:
        shutil.rmtree(snap_dir, ignore_errors=True)
    camp.seconds = time.monotonic() - t0
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(camp.to_json(), f, indent=1)
    return camp


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    ap.add_argument("--seed", type=int, help="campaign seed (default: the profile's)")
    ap.add_argument("--files", type=int, help="number of inputs (default: the profile's)")
    ap.add_argument("--cli", type=int, help="number of CLI runs (default: the profile's)")
    ap.add_argument("--out", help="directory for failures and summary.json (default: a new temp dir)")
    ap.add_argument("--show", type=int, action="append", help="write mutated input I to --out and describe it")
    ap.add_argument(
        "--part", help="K/M: run only the K-th of M equal slices of the profile's inputs and CLI runs (so a long "
        "profile can run in pieces, on several machines or sessions; the parts' summaries add up to the profile)",
    )
    args = ap.parse_args(argv)
    p = PROFILES[args.profile]
    p = Profile(p.name, args.files if args.files is not None else p.files, args.cli if args.cli is not None else p.cli,
                args.seed if args.seed is not None else p.seed, p.specials, p.extra_loaders)
    if args.show:
        gen = Generator(all_seeds(), p.seed)
        out = args.out or tempfile.mkdtemp(prefix="hostile-show-")
        os.makedirs(out, exist_ok=True)
        for i in args.show:
            h = gen.make(i)
            path = os.path.join(out, _safe(h.key) + h.suffix)
            with open(path, "wb") as f:
                f.write(h.data)
            print(f"{h.describe()}\n  -> {path}")
        return 0
    inputs, first = None, 0
    if args.part:
        try:
            k, m = (int(v) for v in args.part.split("/"))
        except ValueError:
            ap.error(f"--part must be K/M with 1 <= K <= M, got {args.part!r}")
        if not 1 <= k <= m:
            ap.error(f"--part must be K/M with 1 <= K <= M, got {args.part!r}")
        every = make_inputs(p)
        first, end = (k - 1) * len(every) // m, k * len(every) // m
        inputs = every[first:end]
        p = Profile(f"{p.name}-part{k}of{m}", len(inputs), p.cli // m, p.seed, p.specials, p.extra_loaders)
    camp = run_campaign(p, out_dir=args.out, inputs=inputs, first_index=first, progress=lambda s: print(s, flush=True))
    print(camp.figures())
    if camp.failures or camp.cli_failures:
        print(camp.describe_failures())
    return 1 if camp.failures or camp.cli_failures else 0


if __name__ == "__main__":
    sys.exit(main())
