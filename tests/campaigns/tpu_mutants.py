"""TPU-dump mutants (issue 47): planted and neutral changes to XLA's real TPU dumps, judged by ``compare``.

Seeds: the HLO text of ``tests/data/dumps_tpu/<program>/`` (the TPU-optimized module and the module
before optimizations, real JAX programs compiled for a TPU v5e; a per-partition optimized module is
left out: ``compare`` judges it against its global program only). Mutant ``i`` of campaign seed ``s`` is
a pure function of ``(s, i)`` (``random.Random(f"{s}:{i}")``), one change to one seed:

* planted: one scalar constant changed (``x`` -> ``2x + 1``, an integer one step towards 0), the two
  operands of a non-commutative elementwise op swapped, an elementwise op made another of its kind
  (``add``/``subtract``/``multiply``/``maximum``/``minimum``; ``exponential``/``tanh``/``negate``/
  ``sine``/``cosine``...), a ``slice`` moved by one along a dimension (inside its operand);
* neutral: an instruction renamed everywhere, two adjacent independent instructions swapped, the
  ``metadata={...}`` of instructions dropped, the operand lists' spacing changed;
* damaged: the file truncated, or 1-8 of its bytes flipped.

Each mutant goes through ``python -m xlasdk.cli compare MUTANT --against ORIGINAL --random-inputs
--seed K`` in a fresh process (mode ``against``), and (planted and neutral) through the reference
evaluator on both modules with the same inputs (``xs.random_inputs``, in a harness child): the oracle.
A mutant of a module whose outputs a TPU v5e recorded (``convnet_train`` and ``gru_scan`` before
optimizations) also goes through ``compare MUTANT --inputs IN.npz --outputs tpu_v5e_outputs.npz
--device-kind tpu-v5e`` (mode ``outputs``; the oracle then runs on the recorded inputs). The verdict is
wrong when the reference's outputs are equal and ``compare`` says DIVERGENCE, or differ clearly
(:data:`CLEAR`) and it says MATCH; a planted change that leaves the reference's outputs equal (a
dead instruction) expects MATCH and is no miss. Failures in every case: a death (a signal), a hang,
a Python traceback or ``internal error`` on stderr, an exit code outside 0-3, and, for a damaged file
refused (exit 2), an error that is not one line.

``python tests/campaigns/tpu_mutants.py --profile quick|long [--seed S]`` runs a campaign and prints
its figures.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from harness import Task, Worker

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DUMPS_TPU = os.path.join(REPO, "tests", "data", "dumps_tpu")
CLI_TIMEOUT_S = 300.0
ORACLE_TIMEOUT_S = 300.0
CLEAR = 0.05  # an output differs clearly: a largest difference above 5% of its largest magnitude


@dataclass(frozen=True)
class Profile:
    name: str
    mutants: int
    seed: int
    programs: tuple[str, ...]  # seed files: "<program>/<before|after>"
    modes: tuple[str, ...] = ("against", "outputs")  # "outputs": where a TPU's outputs are recorded


SMALL = ("fori_loop_libtpu052/after", "fori_loop_libtpu052/before", "int_indexing/before", "int_indexing/after",
         "sharded_mlp/before")
ALL = SMALL + ("convnet_train/before", "convnet_train/after", "gru_scan/before", "gru_scan/after",
               "transformer_bf16/before", "transformer_bf16/after")
QUICK = Profile("quick", mutants=4, seed=47, programs=SMALL)
RECORDED_QUICK = Profile("recorded", mutants=1, seed=47, programs=("convnet_train/before",), modes=("outputs",))
LONG = Profile("long", mutants=120, seed=4701, programs=ALL)
RECORDED = {"convnet_train/before": "convnet_train", "gru_scan/before": "gru_scan"}


def recorded_files(program: str, out_dir: str) -> tuple[str, str]:
    """(the recorded inputs as ``--inputs`` takes them, by parameter index; the TPU's outputs)."""
    name = RECORDED[program]
    path = os.path.join(out_dir, f"{name}.inputs.npz")
    if not os.path.exists(path):
        if REPO not in sys.path:
            sys.path.insert(0, REPO)
        from tests.test_real_dumps import recorded

        ins, _ = recorded(f"dumps/{name}")
        np.savez(path, **{str(i): a for i, a in enumerate(ins)})
    return path, os.path.join(DUMPS_TPU, name, "tpu_v5e_outputs.npz")


def seed_path(program: str) -> str:
    name, _, kind = program.partition("/")
    return os.path.join(DUMPS_TPU, name, f"module.{kind}_optimizations.txt")


# == the mutations ================================================================================
INSTR = re.compile(r"^(\s*)(ROOT\s+)?(%[\w.\-]+)\s*=\s*")
OPCODE = re.compile(r"\s([a-z][a-z0-9\-]*)\(")
BINARY = ("add", "subtract", "multiply", "maximum", "minimum")
UNARY = ("exponential", "tanh", "negate", "sine", "cosine", "abs", "logistic")
NONCOMMUTATIVE = ("subtract", "divide", "power", "atan2", "remainder", "shift-left", "shift-right-logical",
                  "shift-right-arithmetic")
SIDE_EFFECTS = ("rng", "custom-call", "infeed", "outfeed", "send", "recv", "send-done", "recv-done", "after-all",
                "all-reduce", "all-gather", "all-to-all", "collective-permute", "parameter")


def _close(s: str, i: int, open_: str, close: str) -> int:
    """The index just past the bracket that closes the one at ``s[i]``."""
    depth = 0
    for j in range(i, len(s)):
        if s[j] == open_:
            depth += 1
        elif s[j] == close:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(s)


@dataclass(frozen=True)
class Line:
    index: int
    name: str
    shape: str
    opcode: str
    operands: str  # the text between the opcode's parentheses
    start: int  # where the operands begin in the line


def parse(line: str, index: int) -> Line | None:
    m = INSTR.match(line)
    if m is None:
        return None
    rest = m.end()
    end = _close(line, rest, "(", ")") if line[rest:rest + 1] == "(" else line.find(" ", rest)
    if end < 0:
        return None
    op = OPCODE.match(line, end)
    if op is None:
        return None
    start = op.end()
    stop = _close(line, start - 1, "(", ")") - 1
    return Line(index, m.group(3), line[rest:end], op.group(1), line[start:stop], start)


def _lines(lines: list[str]) -> list[Line]:
    return [p for i, t in enumerate(lines) if (p := parse(t, i)) is not None]


def _etype(shape: str) -> str:
    return shape.partition("[")[0]


def _float(shape: str) -> bool:
    return _etype(shape) in ("f16", "bf16", "f32", "f64")


def _replace_operands(lines: list[str], p: Line, new: str) -> None:
    t = lines[p.index]
    lines[p.index] = t[:p.start] + new + t[p.start + len(p.operands):]


def planted_constant(rng: random.Random, lines: list[str]) -> str | None:
    cands = [p for p in _lines(lines) if p.opcode == "constant" and "[]" in p.shape and _etype(p.shape) != "pred"
             and re.fullmatch(r"-?\d+(\.\d+)?(e[-+]?\d+)?", p.operands.strip())]
    if not cands:
        return None
    p = rng.choice(cands)
    old = p.operands.strip()
    # an integer moves towards 0 by one (k + 1 overflowed an s32 2147483647: a refused file, no test)
    new = repr(float(old) * 2 + 1) if _float(p.shape) else str(int(old) - 1 if int(old) > 0 else int(old) + 1)
    _replace_operands(lines, p, new)
    return f"{p.name}: constant {old} -> {new}"


def planted_swap(rng: random.Random, lines: list[str]) -> str | None:
    cands = [p for p in _lines(lines) if p.opcode in NONCOMMUTATIVE and p.operands.count(",") == 1]
    cands += [p for p in _lines(lines) if p.opcode == "compare" and p.operands.count(",") == 1
              and not re.search(r"direction=(EQ|NE)\b", lines[p.index])]
    cands = [p for p in cands if len({s.strip() for s in p.operands.split(",")}) == 2]
    if not cands:
        return None
    p = rng.choice(cands)
    a, b = (s.strip() for s in p.operands.split(","))
    _replace_operands(lines, p, f"{b}, {a}")
    return f"{p.name}: {p.opcode}({a}, {b}) -> {p.opcode}({b}, {a})"


def planted_opcode(rng: random.Random, lines: list[str]) -> str | None:
    cands = [p for p in _lines(lines) if (p.opcode in BINARY and _etype(p.shape) != "pred")
             or (p.opcode in UNARY and _float(p.shape))]
    if not cands:
        return None
    p = rng.choice(cands)
    family = BINARY if p.opcode in BINARY else UNARY
    new = rng.choice([o for o in family if o != p.opcode])
    t = lines[p.index]
    at = p.start - len(p.opcode) - 1
    lines[p.index] = t[:at] + new + t[p.start - 1:]
    return f"{p.name}: {p.opcode} -> {new}"


def planted_slice(rng: random.Random, lines: list[str]) -> str | None:
    shapes = {p.name: p.shape for p in _lines(lines)}
    cands = []
    for p in _lines(lines):
        if p.opcode != "slice":
            continue
        m = re.search(r"slice=\{([^}]*)\}", lines[p.index])
        dims = re.match(r"[a-z0-9]+\[([\d,]*)\]", shapes.get(p.operands.strip(), ""))
        if m is None or dims is None:
            continue
        sizes = [int(d) for d in dims.group(1).split(",") if d]
        ranges = re.findall(r"\[(\d+):(\d+)(?::(\d+))?\]", m.group(1))
        for k, (a, b, _s) in enumerate(ranges):
            if k < len(sizes) and (int(a) > 0 or int(b) < sizes[k]):
                cands.append((p, m, ranges, k, sizes[k]))
    if not cands:
        return None
    p, m, ranges, k, size = rng.choice(cands)
    a, b, s = ranges[k]
    step = -1 if int(a) > 0 else 1
    if int(a) > 0 and int(b) < size:
        step = rng.choice((-1, 1))
    ranges = list(ranges)
    ranges[k] = (str(int(a) + step), str(int(b) + step), s)
    text = ", ".join(f"[{x}:{y}" + (f":{z}]" if z else "]") for x, y, z in ranges)
    t = lines[p.index]
    lines[p.index] = t[:m.start(1)] + text + t[m.end(1):]
    return f"{p.name}: slice dimension {k} [{a}:{b}] -> [{int(a) + step}:{int(b) + step}]"


def neutral_rename(rng: random.Random, lines: list[str]) -> str | None:
    cands = [p for p in _lines(lines) if p.opcode != "parameter"]
    if not cands:
        return None
    p = rng.choice(cands)
    new = f"%renamed_{rng.randrange(10**6)}.{p.name[1:].replace('.', '_')}"
    pattern = re.compile(re.escape(p.name) + r"(?![\w.\-])")
    for i, t in enumerate(lines):
        lines[i] = pattern.sub(new, t)
    return f"{p.name} renamed {new}"


def neutral_reorder(rng: random.Random, lines: list[str]) -> str | None:
    parsed = {p.index: p for p in _lines(lines)}
    cands = []
    for i, p in parsed.items():
        q = parsed.get(i + 1)
        if q is None or p.opcode in SIDE_EFFECTS or q.opcode in SIDE_EFFECTS:
            continue
        if re.search(re.escape(p.name) + r"(?![\w.\-])", lines[q.index]):
            continue
        cands.append(i)
    if not cands:
        return None
    i = rng.choice(cands)
    lines[i], lines[i + 1] = lines[i + 1], lines[i]
    return f"{parsed[i].name} and {parsed[i + 1].name} swapped"


def neutral_format(rng: random.Random, lines: list[str]) -> str | None:
    parsed = _lines(lines)
    with_meta = [p for p in parsed if ", metadata={" in lines[p.index]]
    if with_meta and rng.random() < 0.5:
        for p in rng.sample(with_meta, max(1, len(with_meta) // 2)):
            t = lines[p.index]
            at = t.index(", metadata={")
            lines[p.index] = t[:at] + t[_close(t, at + len(", metadata="), "{", "}"):]
        return "metadata dropped from half the instructions"
    for p in parsed:
        if "," in p.operands:
            _replace_operands(lines, p, p.operands.replace(", ", " ,  "))
        lines[p.index] = "    " + lines[p.index].lstrip() if rng.random() < 0.5 else lines[p.index]
    return "operand lists and indentation respaced"


PLANTED: tuple[Callable[[random.Random, list[str]], str | None], ...] = (
    planted_constant, planted_swap, planted_opcode, planted_slice)
NEUTRAL: tuple[Callable[[random.Random, list[str]], str | None], ...] = (
    neutral_rename, neutral_reorder, neutral_format)


@dataclass(frozen=True)
class Mutant:
    key: str
    program: str
    kind: str  # planted | neutral | damaged
    change: str
    data: bytes


def make(profile: Profile, seed: int, i: int) -> Mutant:
    rng = random.Random(f"{seed}:{i}")
    kind = ("planted", "planted", "neutral", "damaged")[i % 4] if i >= 4 else ("planted", "neutral", "damaged",
                                                                               "planted")[i]
    for _ in range(50):
        program = rng.choice(profile.programs)
        with open(seed_path(program), "rb") as f:
            data = f.read()
        if kind == "damaged":
            if rng.random() < 0.5:
                cut = rng.randrange(1, len(data))
                return Mutant(f"{seed}-{i}", program, kind, f"truncated at byte {cut}", data[:cut])
            flipped = bytearray(data)
            at = sorted(rng.randrange(len(data)) for _ in range(rng.randint(1, 8)))
            for k in at:
                flipped[k] ^= 1 << rng.randrange(8)
            return Mutant(f"{seed}-{i}", program, kind, f"bits flipped at bytes {at}", bytes(flipped))
        lines = data.decode().split("\n")
        mutate = rng.choice(PLANTED if kind == "planted" else NEUTRAL)
        change = mutate(rng, lines)
        if change is not None:
            return Mutant(f"{seed}-{i}", program, kind, f"{mutate.__name__}: {change}", "\n".join(lines).encode())
    raise RuntimeError(f"mutant {i}: no mutation applies")


# == the oracle: the reference evaluator on both modules ========================================
ORACLE_SOURCE = r"""
import numpy as np
import xlasdk as xs

def _differs(a, b, clear):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return "clear"
    if a.dtype.kind in "biu":  # integers and bool exact; every float (bfloat16's kind is "V") below
        return "same" if np.array_equal(a, b) else "clear"
    a64, b64 = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64), b.astype(
        np.complex128 if b.dtype.kind == "c" else np.float64)
    if not np.array_equal(np.isnan(a64), np.isnan(b64)) or not np.array_equal(np.isinf(a64), np.isinf(b64)):
        return "clear"
    fin = np.isfinite(a64)
    if np.isinf(a64).any() and not np.array_equal(a64[~fin & ~np.isnan(a64)], b64[~fin & ~np.isnan(b64)]):
        return "clear"
    if np.array_equal(a64[fin], b64[fin]):
        return "same"
    d = float(np.max(np.abs(a64[fin] - b64[fin])))
    scale = max(float(np.max(np.abs(b64[fin]))), 1e-30)
    return "clear" if d > clear * scale else "close"

def main(job):
    original, mutant, seed, clear, inputs = job
    good = xs.load_computation(original)
    bad = xs.load_computation(mutant)
    if inputs is None:
        args = xs.random_inputs(good, seed=seed)
    else:
        with np.load(inputs) as z:
            args = [z[str(i)] for i in range(len(z.files))]
    want = xs.evaluate(good, *args)
    got = xs.evaluate(bad, *args)
    if len(want) != len(got):
        return "clear"
    verdicts = [_differs(g, w, clear) for g, w in zip(got, want)]
    return "clear" if "clear" in verdicts else "close" if "close" in verdicts else "same"
"""


# == the CLI ==================================================================================
@dataclass
class Result:
    mutant: Mutant
    mode: str  # against | outputs
    oracle: str  # same | close | clear | "error: ..." | "" (damaged: none)
    rc: int | None
    outcome: str  # ok | wrong | death | hang | raw | badexit | messy
    stderr: str
    seconds: float

    @property
    def failed(self) -> bool:
        return self.outcome != "ok"


def _preexec() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_compare(mutant_path: str, judge_by: list[str]) -> tuple[int | None, str, bool]:
    """``xlasdk compare MUTANT JUDGE_BY...``: (exit code or None for a signal, stderr, hung)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    env.pop("XLASDK_CACHE_DIR", None)
    argv = [sys.executable, "-m", "xlasdk.cli", "compare", mutant_path, *judge_by]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=REPO,
                         preexec_fn=_preexec, start_new_session=True)
    try:
        _, err = p.communicate(timeout=CLI_TIMEOUT_S)
        hung = False
    except subprocess.TimeoutExpired:
        hung = True
        os.killpg(p.pid, signal.SIGKILL)
        _, err = p.communicate()
    return p.returncode, err.decode("utf-8", "replace"), hung


def judge(m: Mutant, oracle: str, rc: int | None, err: str, hung: bool) -> str:
    if hung:
        return "hang"
    if rc is None or rc < 0:
        return "death"
    if "Traceback (most recent call last)" in err or "internal error" in err:
        return "raw"
    if rc not in (0, 1, 2, 3):
        return "badexit"
    if m.kind == "damaged":
        return "messy" if rc == 2 and len(err.strip().splitlines()) != 1 else "ok"
    if m.kind == "neutral" and rc != 0:
        return "wrong"
    if oracle == "same" and rc == 1 or oracle == "clear" and rc == 0:
        return "wrong"
    if oracle == "clear" and rc == 2:
        return "wrong"  # the reference ran both: compare must judge them too
    return "ok"


@dataclass
class Campaign:
    profile: str
    seed: int
    results: list[Result] = field(default_factory=list)
    oracle_failures: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[Result]:
        return [r for r in self.results if r.failed]

    def figures(self) -> str:
        by_kind = Counter((r.mutant.kind, r.mode, r.rc) for r in self.results)
        outcomes = Counter(r.outcome for r in self.results)
        oracle = Counter(r.oracle.split(":")[0] for r in self.results if r.mutant.kind != "damaged")
        mutants = len({r.mutant.key for r in self.results})
        return (f"tpu mutants ({self.profile}, seed {self.seed}): {mutants} mutants, {len(self.results)} compares; "
                f"exit codes by kind and mode "
                f"{dict(sorted(by_kind.items(), key=str))}; reference oracle {dict(oracle)}; deaths "
                f"{outcomes['death']}, hangs {outcomes['hang']}, raw exceptions {outcomes['raw']}, wrong verdicts "
                f"{outcomes['wrong']}, other exit codes {outcomes['badexit']}, multi-line refusals "
                f"{outcomes['messy']}; planted changes the reference finds dead: "
                f"{sum(1 for r in self.results if r.mutant.kind == 'planted' and r.oracle == 'same')}")

    def describe_failures(self) -> str:
        return "\n".join(
            f"- {r.outcome}: {r.mutant.key} {r.mutant.kind} {r.mode} {r.mutant.program} ({r.mutant.change}); oracle "
            f"{r.oracle}; exit {r.rc}; stderr: {r.stderr.strip()[-600:]}" for r in self.failures)


def run_campaign(profile: Profile, seed: int | None = None, out_dir: str | None = None,
                 progress: Callable[[str], None] | None = None) -> Campaign:
    seed = profile.seed if seed is None else seed
    out_dir = out_dir or tempfile.mkdtemp(prefix=f"tpu-mutants-{profile.name}-")
    camp = Campaign(profile.name, seed)
    with Worker(timeout=ORACLE_TIMEOUT_S) as oracle:
        for i in range(profile.mutants):
            m = make(profile, seed, i)
            path = os.path.join(out_dir, f"{m.key}.{m.kind}.txt")
            with open(path, "wb") as f:
                f.write(m.data)
            kept = False
            for mode in profile.modes:
                inputs = None
                if mode == "against":
                    judge_by = ["--against", seed_path(m.program), "--random-inputs", "--seed", str(i)]
                elif m.program in RECORDED and m.kind != "damaged":
                    inputs, outputs = recorded_files(m.program, out_dir)
                    judge_by = ["--inputs", inputs, "--outputs", outputs, "--device-kind", "tpu-v5e"]
                else:
                    continue
                verdict = ""
                if m.kind != "damaged":
                    job = (seed_path(m.program), path, i, CLEAR, inputs)
                    o = oracle.run(Task(ORACLE_SOURCE, job, key=m.key))
                    verdict = str(o.value) if o.status == "ok" else f"error: {o.status} {o.error or ''}"[:300]
                    if o.status in ("died", "timeout"):
                        camp.oracle_failures.append(f"{m.key}: {o.describe()}")
                t0 = time.monotonic()
                rc, err, hung = run_compare(path, judge_by)
                outcome = judge(m, verdict, rc, err, hung)
                camp.results.append(Result(m, mode, verdict, rc, outcome, err[-3000:], time.monotonic() - t0))
                kept = kept or outcome != "ok"
                if progress is not None:
                    progress(f"{i + 1}/{profile.mutants} {m.kind} {mode} {m.program}: {m.change[:80]} -> oracle "
                             f"{verdict[:40]}, exit {rc} ({outcome}, {time.monotonic() - t0:.1f} s)")
            if not kept:
                os.unlink(path)  # failures keep their mutant
    return camp


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", choices=("quick", "long"), default="quick")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--mutants", type=int, default=None)
    a = ap.parse_args(argv)
    profile = QUICK if a.profile == "quick" else LONG
    if a.mutants is not None:
        profile = Profile(profile.name, a.mutants, profile.seed, profile.programs, profile.modes)
    camp = run_campaign(profile, a.seed, progress=lambda line: print(line, flush=True))
    print(camp.figures())
    if camp.failures:
        print(camp.describe_failures())
    return 1 if camp.failures else 0


if __name__ == "__main__":
    sys.exit(main())
