"""``with_outputs`` and ``extract`` on every module of the TPU corpus (issue 42): XLA's TPU dumps give
their entry computation tiled layouts (``f32[4,4]{1,0:T(4,128)}``); a cut of such a module kept the
original's per-result layouts and ``out_*`` frontend lists, one per result of the *original* program,
and XLA died converting it (SIGSEGV, caught by the worker) or refused it (``RET_CHECK ... shape.cc:132
... element_type TUPLE should not have a layout``).

Oracles: the reference evaluator's values of the original program's instructions, computed op by op
on the original graph (``Evaluator.run_graph``): the cut, evaluated by the same evaluator, gives those
very bits (so it computes the instructions it names), and its CPU run is judged against them by
``xs.compare``'s error bounds; where a value is an output of the original program, the CPU run of
the full program gives it too.
"""

from __future__ import annotations

import collections
import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.test_real_dumps import _partition_args, recorded

TPU = Path(__file__).resolve().parent / "data" / "dumps_tpu"
FILES = sorted(str(p.relative_to(TPU)) for p in TPU.glob("*/module.*_optimizations.txt"))
PER_PARTITION = "sharded_mlp/module.after_optimizations.txt"  # one partition's program of 4
ONE_DEVICE = [f for f in FILES if f != PER_PARTITION]
_LIBTPU = importlib.util.find_spec("libtpu") is not None
# compiling the same module again (another file of the same program, compare after compile) reads it
# back from a compile cache of this run (tests/conftest.py): these tests are about values, not compiling
pytestmark = pytest.mark.usefixtures("shared_compile_cache")


def _outs(result: Any) -> list[np.ndarray[Any, Any]]:
    return [np.asarray(o.to_numpy()) for o in (result if isinstance(result, (tuple, list)) else (result,))]


def _reference_values(comp: xs.XlaComputation, args: list[Any]) -> dict[int, Any]:
    """The reference evaluator's value of every instruction (and every result of a multi-result one)
    of ``comp``'s main, by node id, computed on ``comp``'s own graph."""
    from xlasdk.reference._walk import Evaluator, dtype_of

    g = comp.instruction_graph()
    env: dict[int, Any] = {id(p): np.asarray(a).astype(dtype_of(p.shape), copy=False)
                           for p, a in zip(g.params, args, strict=True)}
    roots = [*g.outputs, *g.effects, *(i.op for i in g.instructions),
             *(part for i in g.instructions for part in g.parts.get(i.op.id, ()))]
    Evaluator(comp).run_graph(roots, env)
    return env


def _same_bits(got: Any, want: Any, what: str) -> None:
    g, w = np.asarray(got), np.asarray(want)
    assert (g.dtype, g.shape) == (w.dtype, w.shape), f"{what}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
    assert g.tobytes() == w.tobytes(), f"{what}: other bits than the original program's"


def _values(comp: xs.XlaComputation) -> list[Any]:
    """The nodes of every value of main but its parameters: each instruction's, or each result of a
    multi-result one (a ``while``'s)."""
    g = comp.instruction_graph()
    out: list[Any] = []
    for i in comp.instructions():
        if i.op.opcode == "parameter":
            continue
        parts = g.parts.get(i.op.id)
        out.extend(parts if parts is not None else [i.op] if i.op.shape.is_array() else [])
    return out


def _selections(comp: xs.XlaComputation) -> dict[str, list[Any]]:
    """Sets of values to expose: two (one from the middle of the program, one of its outputs), and
    every value of each of the three most frequent opcodes."""
    g = comp.instruction_graph()
    values = _values(comp)
    assert len(values) >= 2
    mid = values[len(values) // 2]
    outputs = [v for v in values if any(v is o for o in g.outputs) and v is not mid]
    two = [mid, outputs[0] if outputs else next(v for v in reversed(values) if v is not mid)]
    kinds = collections.Counter(v.opcode for v in values)
    out = {"two": two}
    for kind, _ in kinds.most_common(3):
        out[f"all {kind}"] = [v for v in values if v.opcode == kind]
    return out


def _two_instructions(comp: xs.XlaComputation) -> list[str]:
    """Two instructions (not parameters) to extract: one from the middle, and the last."""
    names = [i.name for i in comp.instructions() if i.op.opcode != "parameter"]
    assert len(names) >= 2
    return [names[len(names) // 2], names[-1]] if len(names) // 2 != len(names) - 1 else names[:2]


@pytest.fixture(scope="module")
def corpus() -> dict[str, Any]:
    return {}


def _loaded(name: str, cache: dict[str, Any]) -> tuple[xs.XlaComputation, list[Any], dict[int, Any], list[Any]]:
    if name not in cache:
        comp = xs.load_computation(TPU / name)
        program = name.split("/")[0]
        args, _ = recorded(f"dumps_tpu/{program}" if (TPU / program / "io.npz").exists() else f"dumps/{program}")
        full = _outs(xs.compile(comp, device="cpu:0")(*args))
        cache[name] = (comp, args, _reference_values(comp, args), full)
    got: tuple[xs.XlaComputation, list[Any], dict[int, Any], list[Any]] = cache[name]
    return got


@pytest.mark.parametrize("name", ONE_DEVICE)
def test_with_outputs_on_every_tpu_dump(name: str, corpus: dict[str, Any]) -> None:
    """Two values, and all values of a few kinds, exposed: the cut compiles and runs on the CPU, the
    reference evaluator gives it the original's bits, its CPU run passes ``compare`` and, for a value
    the original returns, is the original's CPU output."""
    comp, args, env, full = _loaded(name, corpus)
    g = comp.instruction_graph()
    for what, ops in _selections(comp).items():
        cut = comp.with_outputs(ops)
        names = [repr(op) for op in ops]
        assert [str(s) for s in cut.program_shape().parameter_shapes()] == \
            [str(s) for s in comp.program_shape().parameter_shapes()]
        got = _outs(xs.compile(cut, device="cpu:0")(*args))
        assert len(got) == len(names)
        for k, (n, op, value) in enumerate(zip(names, ops, xs.evaluate(cut, *args), strict=True)):
            _same_bits(value, env[id(op)], f"{name}: {what}: reference value of {n}")
            if any(op is o for o in g.outputs):
                _same_bits(got[k], full[[i for i, o in enumerate(g.outputs) if o is op][0]],
                           f"{name}: {what}: CPU value of output {n}")
        report = xs.compare(cut, args)
        assert report.ok, f"{name}: {what}: {report}"


@pytest.mark.parametrize("name", ONE_DEVICE)
def test_extract_on_every_tpu_dump(name: str, corpus: dict[str, Any]) -> None:
    """Two instructions extracted: fed the reference values of what they read in the original, the
    extracted program gives the original's reference bits, and its CPU run passes ``compare``."""
    comp, _, env, _ = _loaded(name, corpus)
    g = comp.instruction_graph()
    names = _two_instructions(comp)
    one = comp.extract(names)
    inputs = []
    for pname in one.program_shape().parameter_names():
        owner, _, part = pname.partition("#")
        op = comp.instruction(owner).op
        inputs.append(env[id(g.parts[op.id][int(part)])] if part else env[id(op)])
    chosen = [comp.instruction(n).op for n in names]
    read = {id(x) for o in chosen for x in o.operands}
    want = [p for o in chosen if id(o) not in read for p in g.parts.get(o.id, (o,))]
    values = xs.evaluate(one, *inputs)
    assert len(values) == len(want)
    for o, v in zip(want, values, strict=True):
        _same_bits(v, env[id(o)], f"{name}: extract {names}")
    _outs(xs.compile(one, device="cpu:0")(*inputs))
    assert xs.compare(one, inputs).ok


@pytest.mark.skipif(not _LIBTPU, reason="libtpu is not installed")
@pytest.mark.parametrize("name", ONE_DEVICE)
def test_cuts_of_every_tpu_dump_compile_for_a_tpu(name: str) -> None:
    """The same cuts compile for a TPU v5e (libtpu's compile-only client; sharded_mlp's program, laid out
    for 4 partitions, for a v5e:2x2 as its dump was made)."""
    comp = xs.load_computation(TPU / name)
    two, names = _selections(comp)["two"], _two_instructions(comp)
    parts = 4 if name.startswith("sharded_mlp/") else 1
    device = xs.topology("v5e:2x2" if parts == 4 else "v5e:1x1").devices[0]
    for cut in (comp.with_outputs(two), comp.extract(names)):
        exe = xs.compile(cut, device=device, options=xs.CompileOptions(num_partitions=parts))
        assert isinstance(exe, xs.CompileOnlyExecutable)
        assert exe.input_shapes == tuple(cut.program_shape().parameter_shapes())


def test_with_outputs_of_a_per_partition_tpu_dump() -> None:
    """sharded_mlp's TPU-optimized module (one partition's program of 4, an all-reduce inside): every
    value exposed, run on 4 CPU devices each on its rows: the prefetched copy is ``w1``, the other two
    the full program's outputs on each device."""
    comp = xs.load_computation(TPU / PER_PARTITION)
    ins, _ = recorded("dumps/sharded_mlp")
    first = xs.client("cpu", num_devices=4).devices()[0]
    per_device = _partition_args(ins, 4)
    full = [_outs(out) for out in xs.compile(comp, first).execute_replicated(per_device)]  # type: ignore[union-attr]
    cut = comp.with_outputs(["copy-done", "copy", "all-reduce"])
    got = [_outs(out) for out in xs.compile(cut, first).execute_replicated(per_device)]  # type: ignore[union-attr]
    for d, (g, f) in enumerate(zip(got, full, strict=True)):
        _same_bits(g[0], ins[1], f"device {d}: copy-done")
        _same_bits(g[1], f[0], f"device {d}: copy")
        _same_bits(g[2], f[1], f"device {d}: all-reduce")
    if _LIBTPU:
        exe = xs.compile(cut, device=xs.topology("v5e:2x2").devices[0], options=xs.CompileOptions(num_partitions=4))
        assert isinstance(exe, xs.CompileOnlyExecutable)


# -- a cut XLA dies on: the worker's death, never the user's process ---------------------------------------
def _cuts(case_text: str) -> list[xs.XlaComputation]:
    comp = xs.XlaComputation.from_hlo_text(case_text)
    names = [i.name for i in comp.instructions()]
    values = [i.name for i in comp.instructions() if i.op.opcode != "parameter"]
    return [comp.with_outputs([values[-1], names[0]]), comp.extract(values)]


def test_a_cut_that_xla_dies_on_compiles_in_the_worker() -> None:
    """A module XLA:CPU dies compiling (tests/xla_faults.py's probe finds one this jaxlib still dies on):
    its cuts (with_outputs of two values, extract) are compiled in xlasdk's worker first, so XLA's death
    is a CompileError naming it, and this process goes on."""
    from tests import xla_faults

    case = xla_faults.cpu_abort()
    for cut in _cuts(case.text):
        with pytest.raises(xs.CompileError, match="XLA aborted"):
            xs.compile(cut, device="cpu:0")
    assert _outs(xs.compile(xs.XlaComputation.from_hlo_text(
        "HloModule ok\n\nENTRY e {\n  ROOT c = f32[] constant(2)\n}\n"), device="cpu:0")()) == [np.float32(2)]


@pytest.mark.skipif(not _LIBTPU, reason="libtpu is not installed")
def test_a_cut_that_xla_tpu_dies_on_compiles_in_the_worker() -> None:
    """The same for a TPU v5e (compile-only): libtpu's death on a cut is a CompileError."""
    from tests import xla_faults

    case = xla_faults.TPU_ABORTS[0]
    xla_faults.require(case, tpu=True)
    for cut in _cuts(case.text):
        with pytest.raises(xs.CompileError, match="XLA aborted"):
            xs.compile(cut, device=xs.topology("v5e:1x1").devices[0])
