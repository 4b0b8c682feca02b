"""Shrinking a module that shows a problem (``xs.reduce``, ``xlasdk reduce``) on real JAX programs
(tests/data/dumps) into which a known XLA problem has been spliced through the HLO text.

Oracles: XLA itself, in the worker process (the reduced module still aborts XLA there, or still fails
to compile with the same message), ``xs.compare`` against the reference evaluator (XLA:CPU's
``x / 2**127`` is reported on the original first), a shell ``grep``, and hand-written expectations of
what the failing core is (the opcodes left).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests import xla_faults
from tests.helpers import raises
from tests.test_real_dumps import recorded
from xlasdk._jaxlib import isolated
from xlasdk.reducer import NotReproducedError, ReduceStep

DATA = Path(__file__).resolve().parent / "data"
CONVNET = DATA / "dumps/convnet_train/module.before_optimizations.txt"

# XLA's algebraic simplifier aborts (RET_CHECK ShapeUtil::Compatible) on a reduce-window whose
# padding is all negative (cases.md C-06), on jaxlib 0.10.2 and 0.12 alike.
NEG_PAD = ("  %bad = f32[4,3,4,8]{3,2,1,0} reduce-window(%jit_relu_.3, %constant.25), "
           "window={size=1x1x1x1 pad=0_0x-1_0x0_0x0_0}, to_apply=%region_1.4\n")
# XLA:CPU divides by a broadcast constant as a multiply by its reciprocal: 2**-127 is subnormal
# and flushed to zero, so 1000 * x / 2**127 (a normal number for |x| > 0.002) comes out 0.
TINY = ("  %k1000 = f32[] constant(1000)\n"
        "  %kb = f32[4,2,2,8]{3,2,1,0} broadcast(%k1000), dimensions={}\n"
        "  %big = f32[4,2,2,8]{3,2,1,0} multiply(%div.5, %kb)\n"
        "  %c127 = f32[] constant(1.70141183e+38)\n"
        "  %cb = f32[4,2,2,8]{3,2,1,0} broadcast(%c127), dimensions={}\n"
        "  %bad = f32[4,2,2,8]{3,2,1,0} divide(%big, %cb)\n")
# A custom call to a target nothing registered: XLA:CPU's compile fails cleanly, naming it.
NO_TARGET = ("  %bad = f32[4,2,2,8]{3,2,1,0} custom-call(%div.5), custom_call_target=\"xlasdk_no_such_target\"\n")


def splice(new_lines: str, shape: str, path: Path = CONVNET) -> str:
    """The dump's HLO text with ``new_lines`` inserted before the entry's ROOT tuple and ``%bad`` (of
    ``shape``) added to its outputs (the header's layout, which lists the outputs, dropped)."""
    lines = path.read_text().splitlines(keepends=True)
    lines[0] = lines[0].split(",", 1)[0] + "\n"  # "HloModule jit_train_step"
    entry = next(k for k, ln in enumerate(lines) if ln.startswith("ENTRY"))
    lines[entry] = re.sub(r"\) \{$", f", {shape}) {{", lines[entry].rstrip("\n")) + "\n"
    root = next(k for k, ln in enumerate(lines) if k > entry and ln.lstrip().startswith("ROOT"))
    lines[root] = re.sub(r"\) tuple\((.*)\)", rf", {shape}) tuple(\1, %bad)", lines[root])
    lines[root] = new_lines + lines[root]
    return "".join(lines)


def aborts_in_worker(text: str) -> str | None:
    """XLA's death reason when loading and compiling ``text`` kills the worker, else None."""
    try:
        xs.compile(xs.XlaComputation.from_hlo_text(text))
    except (xs.CompileError, xs.FormatError) as e:
        return str(e) if "XLA aborted" in str(e) else None
    return None


def cli(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xlasdk.cli", *argv], capture_output=True, text=True,
                          timeout=timeout, check=False)


def in_process(*argv: str) -> tuple[int, str]:
    """``xlasdk ARGV`` run in this process (usage errors: no child, no XLA): exit code and stderr."""
    import io

    from xlasdk.cli import main

    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), stdout=out, stderr=err), err.getvalue()


# -- crash ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def crash_result() -> Any:
    xla_faults.require(xla_faults.CPU_ABORTS[0])  # NEG_PAD's fault: XLA:CPU of jaxlib 0.12.1 no longer dies on it
    comp = xs.XlaComputation.from_hlo_text(splice(NEG_PAD, "f32[4,3,4,8]"))
    steps: list[ReduceStep] = []
    res = xs.reduce(comp, "crash", progress=steps.append)
    return comp, res, steps


def test_crash_reduces_to_the_reduce_window_and_still_aborts(crash_result: Any, tmp_path: Path) -> None:
    comp, res, steps = crash_result
    assert res.instructions_before == len(comp.instructions()) >= 90
    assert res.instructions_after == len(res.computation.instructions()) <= 10
    opcodes = [i.opcode for i in res.computation.instructions()]
    assert opcodes.count("stablehlo.reduce_window") == 1 and "stablehlo.convolution" not in opcodes
    rw = next(i for i in res.computation.instructions() if i.opcode == "stablehlo.reduce_window")
    assert [tuple(p) for p in rw.attributes["padding"]] == [(0, 0), (-1, 0), (0, 0), (0, 0)]
    # the shapes were simplified: the spliced reduce-window read f32[4,4,4,8] (512 elements); what is
    # left reads fewer, still padded -1 in dimension 1 (so that dimension keeps at least 2 elements)
    src = next(i for i in comp.instructions() if i.opcode == "stablehlo.reduce_window" and i.shape.rank() == 4
               and i.shape.dimensions() == (4, 3, 4, 8))
    (operand, _) = rw.operands
    assert src.operands[0].shape.size() == 512 and operand.shape.size() < 512, operand.shape
    assert rw.shape.dimensions()[1] == operand.shape.dimensions()[1] - 1 and rw.shape.size() < 96
    assert any(s.strategy.startswith("simplify: dimension") for s in steps)
    # written as HLO text, loaded back through load_computation: XLA still aborts on it, in the worker
    out = tmp_path / "min.hlo"
    out.write_text(res.hlo_text)
    back = xs.load_computation(out)
    with pytest.raises(xs.CompileError, match=r"XLA aborted on this program \(it died with SIGABRT"):
        xs.compile(back)
    # progress once per accepted step, counts that add up
    assert [s.step for s in steps] == list(range(1, res.steps + 1)) and res.steps >= 2
    assert steps[-1].instructions == min(s.instructions for s in steps)
    assert res.candidates >= res.steps and res.compiles == res.candidates and not res.timed_out
    assert isolated.worker_pid() != 0  # this process lived through every abort


OLD_XLA = xs.jaxlib_version_info()[1] < 495  # jaxlib 0.10.2 (extension version 467); 0.11+ is >= 495
II = DATA / "dumps/int_indexing/module.before_optimizations.txt"
C03 = "  %c7 = s32[] constant(7)\n  %c0 = s32[] constant(0)\n  %bad = s32[] divide(%c7, %c0)\n"


@pytest.mark.skipif(not OLD_XLA, reason="XLA of jaxlib 0.11+ no longer dies on C-03's constant division")
def test_crash_c03_reduces_through_the_direct_printer() -> None:
    """cases.md C-03: XLA:CPU dies (SIGFPE) folding the constant s32 division 7 / 0. Spliced into
    int_indexing, the module loads from its text and XLA dies compiling it; XLA's StableHLO -> HLO
    converter dies on every edited candidate holding the division too, so those are printed by
    xlasdk's direct printer; the ones it cannot print (func.call) are skipped and counted."""
    comp = xs.XlaComputation.from_hlo_text(splice(C03, "s32[]", II))
    bad = [i for i in comp.instructions() if i.opcode == "stablehlo.divide" and i.shape.rank() == 0]
    with pytest.raises(xs.CompileError, match=r"XLA aborted while converting .*SIGFPE"):
        comp.extract([*bad, *bad[0].operands]).as_hlo_text()  # XLA's own converter dies on such a candidate
    res = xs.reduce(comp, "crash", max_time=120)
    assert res.instructions_after <= 10 and not res.timed_out, str(res)
    assert "SIGFPE" in (aborts_in_worker(res.hlo_text) or "")
    opcodes = sorted(i.opcode for i in res.computation.instructions())
    assert opcodes == ["stablehlo.constant", "stablehlo.constant", "stablehlo.divide"], opcodes
    if res.unprintable:
        assert f"{res.unprintable} candidates skipped: neither XLA nor xlasdk could print them as HLO" in str(res)


# Every XLA compile abort this project keeps a reproducer of (cases.md, the builder's guards in
# tests/ops/test_side_effects.py and test_elementwise.py), as HLO lines spliced into a real dump:
# (name, lines, shape of %bad, dump, whether jaxlib 0.10.2 / 0.11+ dies on it, quick profile).
# C-08 and C-15 abort XLA's *parser* (xlasdk's pre-check rejects them first): no module loads, so
# there is nothing for --until crash to reduce; StableHLO's verifier dies on an all_to_all without
# replica groups while *loading*, likewise.
def _custom_call(target: str, operands: str, shape: str) -> str:
    return f'  %bad = {shape} custom-call({operands}), custom_call_target="{target}"\n'


def _sharded(line: str, mesh: str) -> str:
    """``line`` (one instruction) with the frontend attribute ``xla.sdy.sharding`` of a 2-D value on ``mesh``."""
    return line.replace("\n", f', frontend_attributes={{xla.sdy.sharding="#sdy.sharding_per_value<[<{mesh}, '
                        '[{}, {}]>]>"}\n')


CPLX = "  %z = c64[1]{0} constant({(1, 2)})\n  %bad = pred[1]{0} compare(%z, %z), direction=LT\n"
ABORTS = [
    ("C-06-negative-padding", NEG_PAD, "f32[4,3,4,8]", CONVNET, (True, True), False),  # the crash fixture too
    ("C-03-divide", C03, "s32[]", II, (True, False), True),
    ("C-03-remainder", C03.replace("divide", "remainder"), "s32[]", II, (True, False), False),
    ("complex-ordered-compare", CPLX, "pred[1]", II, (True, False), False),
]
# Custom calls XLA aborts on: the loader's check (xlasdk/formats/rule_check.py) now refuses them, so
# no module of them loads and there is nothing for --until crash to reduce.
REFUSED_AT_LOAD = [
    ("TopK-array-result", _custom_call("TopK", "%x.1", "f32[5,6]{1,0}"), "f32[5,6]"),
    ("TopK-no-operand", _custom_call("TopK", "", "f32[4,4]{1,0}"), "f32[4,4]"),
    ("Sharding-no-operand", _custom_call("Sharding", "", "f32[4,4]{1,0}"), "f32[4,4]"),
    ("SetBound-no-operand", _custom_call("SetBound", "", "f32[4,4]{1,0}"), "f32[4,4]"),
    ("SliceToDynamic", _custom_call("SliceToDynamic", "%x.1", "f32[5,6]{1,0}"), "f32[5,6]"),
    ("onednn-softmax-no-operand", _custom_call("__onednn$softmax", "", "f32[4,4]{1,0}"), "f32[4,4]"),
    ("LayoutConstraint-tuple", _custom_call("LayoutConstraint", "%x.1", "(f32[5,6]{1,0}, s32[4,4]{1,0})"),
     "(f32[5,6], s32[4,4])"),
    # Shardy's marks (jaxlib 0.10.2 and 0.12.1 abort: attribute_exporter.cc, sharding_remover.cc) and XLA's
    # decompositions without their operands (SIGSEGV)
    ("sdy-FuncResultSharding-no-frontend-attributes",
     _custom_call("xla.sdy.FuncResultSharding", "%x.1", "f32[5,6]{1,0}"), "f32[5,6]"),
    ("sdy-FuncResultSharding-no-operand", _custom_call("xla.sdy.FuncResultSharding", "", "f32[4,4]{1,0}"),
     "f32[4,4]"),
    ("sdy-FuncResultSharding-two-operands",
     _custom_call("xla.sdy.FuncResultSharding", "%x.1, %x.1", "f32[5,6]{1,0}"), "f32[5,6]"),
    ("sdy-FuncResultSharding-two-operands-with-sharding",
     _sharded(_custom_call("xla.sdy.FuncResultSharding", "%x.1, %x.1", "f32[5,6]{1,0}"), "mesh<[]>"), "f32[5,6]"),
    ("sdy-FuncResultSharding-mesh-not-defined",
     _sharded(_custom_call("xla.sdy.FuncResultSharding", "%x.1", "f32[5,6]{1,0}"), "@mesh"), "f32[5,6]"),
    ("sdy-PropagationBarrier-no-operand", _custom_call("xla.sdy.PropagationBarrier", "", "f32[4,4]{1,0}"), "f32[4,4]"),
    ("sdy-PropagationBarrier-two-operands",
     _custom_call("xla.sdy.PropagationBarrier", "%x.1, %x.1", "f32[5,6]{1,0}"), "f32[5,6]"),
    ("sdy-ShardingGroup-no-operand", _custom_call("xla.sdy.ShardingGroup", "", "f32[4,4]{1,0}"), "f32[4,4]"),
    ("sdy-ShardingGroup-two-operands", _custom_call("xla.sdy.ShardingGroup", "%x.1, %x.1", "f32[5,6]{1,0}"),
     "f32[5,6]"),
    ("Eigh-no-operand", _custom_call("Eigh", "", "f32[4,4]{1,0}"), "f32[4,4]"),
    ("Qr-no-operand", _custom_call("Qr", "", "f32[4,4]{1,0}"), "f32[4,4]"),
    ("ProductOfElementaryHouseholderReflectors-one-operand",
     _custom_call("ProductOfElementaryHouseholderReflectors", "%x.1", "f32[5,6]{1,0}"), "f32[5,6]"),
]


@pytest.mark.parametrize("name,lines,shape", [pytest.param(*a, id=a[0]) for a in REFUSED_AT_LOAD])
def test_custom_call_abort_reproducers_are_refused_at_load(name: str, lines: str, shape: str) -> None:
    text = splice(lines, shape, II)
    with pytest.raises(xs.FormatError, match=r"line \d+: instruction 'bad': CustomCall"):
        xs.XlaComputation.from_hlo_text(text)


#: Their well-formed twins, spliced alike: XLA compiles (or cleanly refuses) them, so they load.
LOADED_AS_BEFORE = [
    ("sdy-FuncResultSharding-with-sharding",
     _sharded(_custom_call("xla.sdy.FuncResultSharding", "%x.1", "f32[5,6]{1,0}"), "mesh<[]>"), "f32[5,6]"),
    ("sdy-PropagationBarrier-one-operand", _custom_call("xla.sdy.PropagationBarrier", "%x.1", "f32[5,6]{1,0}"),
     "f32[5,6]"),
    ("Eigh-one-operand", _custom_call("Eigh", "%x.1", "f32[5,6]{1,0}"), "f32[5,6]"),
]


@pytest.mark.parametrize("name,lines,shape", [pytest.param(*a, id=a[0]) for a in LOADED_AS_BEFORE])
def test_well_formed_twins_of_the_refused_custom_calls_load(name: str, lines: str, shape: str) -> None:
    xs.XlaComputation.from_hlo_text(splice(lines, shape, II))


@pytest.mark.parametrize("name,lines,shape,dump,dies,quick", [
    pytest.param(*a, id=a[0], marks=() if a[5] else pytest.mark.campaign) for a in ABORTS])
def test_crash_each_abort_reproducer_reduces_to_10_instructions(
        name: str, lines: str, shape: str, dump: Path, dies: tuple[bool, bool], quick: bool) -> None:
    """The issue's check: ``reduce --until crash`` on each XLA-abort reproducer, spliced into a real
    dump, ends with at most 10 instructions that still abort XLA in the worker."""
    text = splice(lines, shape, dump)
    if not aborts_in_worker(text):  # dies: the releases seen dying on it (0.10.2, 0.11+); the probe decides
        pytest.skip(f"XLA of {xla_faults.release()} no longer dies on {name} (seen: {dies})")
    res = xs.reduce(xs.XlaComputation.from_hlo_text(text), "crash", max_time=150)
    assert res.instructions_after <= 10, str(res)
    assert aborts_in_worker(res.hlo_text), res.hlo_text


def test_direct_printer_of_loaded_graphs_computes_what_xlas_converter_does() -> None:
    """xlasdk._reduce_graph.direct_hlo_text (the reducer's printer where XLA's converter dies) against XLA's
    StableHLO -> HLO converter: one extracted instruction of each opcode of two real dumps, printed
    both ways, loaded, compiled and run on the same inputs, gives the same bits."""
    from xlasdk._hlo_emit import Unsupported
    from xlasdk._reduce_graph import direct_hlo_text

    done: set[str] = set()
    for dump in (II, CONVNET):
        comp = xs.load_computation(dump)
        for ins in comp.instructions():
            if ins.opcode in done or ins.opcode == "parameter":
                continue
            piece = comp.extract([ins, *(o for o in ins.operands if o.opcode == "stablehlo.constant")])
            try:
                direct = direct_hlo_text(piece)
            except Unsupported:
                continue
            done.add(ins.opcode)
            args = xs.random_inputs(piece, 0)
            want = xs.compile(xs.XlaComputation.from_hlo_text(piece.as_hlo_text()))(*args)
            got = xs.compile(xs.XlaComputation.from_hlo_text(direct))(*args)
            for w, g in zip(want if isinstance(want, list) else [want], got if isinstance(got, list) else [got],
                            strict=True):
                np.testing.assert_array_equal(np.asarray(g.to_numpy()), np.asarray(w.to_numpy()), err_msg=ins.opcode)
    assert {"stablehlo.compare", "stablehlo.dot_general", "stablehlo.reduce", "stablehlo.reduce_window",
            "stablehlo.slice", "stablehlo.broadcast_in_dim", "stablehlo.pad"} <= done, done
    with pytest.raises(Unsupported):  # a func.call has no direct form: the candidate is skipped, not misprinted
        direct_hlo_text(comp.extract([i for i in comp.instructions() if i.opcode == "func.call"][:1]))


def test_time_budget_is_honoured() -> None:
    xla_faults.require(xla_faults.CPU_ABORTS[0])
    text = splice(NEG_PAD, "f32[4,3,4,8]")
    t0 = time.monotonic()
    assert aborts_in_worker(text)
    one_check = time.monotonic() - t0  # as long as a check takes on this machine now
    comp = xs.XlaComputation.from_hlo_text(text)
    res = xs.reduce(comp, "crash", max_time=3.0)
    # the check that the module shows the problem, then the search until the budget is spent (a check
    # in flight is stopped then, or at its 1 s floor), on a machine that may be busy
    assert res.timed_out and res.wall_s < 3.0 + 2 * one_check + 2.0, (res.wall_s, one_check)
    assert res.instructions_after <= res.instructions_before
    assert aborts_in_worker(res.hlo_text)  # what it returns so far still shows the problem


# A reduce-window with negative padding (XLA's algebraic simplifier aborts on it, as NEG_PAD) beside a
# while loop of 2**31 trips: its reference evaluation (the values that cuts turn into arguments, and
# every "diverge" check) runs in this process for hours, and so does XLA's run of it.
CRASH_AND_LOOP = DATA / "reduce/crash_and_long_loop.hlo"


def test_max_time_stops_reduce_whatever_a_check_in_this_process_is_doing(tmp_path: Path) -> None:
    """Issue 31: ``reduce --max-time 20`` ran on past 120 s on a module with a 2**31-trip loop (with
    inputs, the values of the cut module's new parameters come from a reference evaluation of the loop)."""
    xla_faults.require(xla_faults.CPU_ABORTS[0])  # the module's crash is NEG_PAD's
    out = tmp_path / "min.hlo"
    t0 = time.monotonic()
    r = cli("reduce", str(CRASH_AND_LOOP), "--until", "crash", "--random-inputs", "--max-time", "6",
            "--output", str(out), timeout=120)
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    # the budget, the 2 s the search is given to stop, the process's start and the final load, loosely
    assert "(time budget reached)" in r.stdout and took < 6 + 20, (took, r.stdout)
    assert aborts_in_worker(out.read_text())  # what it wrote still shows the problem


def test_max_time_stops_the_check_of_the_module_given(tmp_path: Path) -> None:
    """"diverge": the check of the module given (XLA runs the 2**31-trip loop, then the reference
    evaluator) is what the budget stops: said so, exit 2."""
    out = tmp_path / "min.hlo"
    t0 = time.monotonic()
    r = cli("reduce", str(CRASH_AND_LOOP).replace("crash_and_long_loop", "long_loop"), "--until", "diverge",
            "--random-inputs", "--max-time", "6", "--output", str(out), timeout=120)
    took = time.monotonic() - t0
    assert r.returncode == 2 and took < 6 + 20, (took, r.stderr)
    assert "the time budget (max_time=6 s) ran out while checking that the module 'spin' shows the problem" in r.stderr


# -- a module XLA's loader dies on: the text-level pass ----------------------------------------------------
# A recv whose shape is not the (data, context, token) tuple XLA's HLO parser reads its parts from:
# XLA CHECK-fails loading it ("shape.h:803] Check failed: state Expected a tuple shape. Got s32[8]"),
# on jaxlib 0.10.2. Planted, with its readers, into a real optimized dump.
RECV = ("  %after-all = token[] after-all()\n"
        "  %recv = s32[8]{0} recv(%after-all), channel_id=7\n"
        "  %recv-done = (s32[8]{0}, token[]) recv-done(%recv), channel_id=7\n"
        "  %get-tuple-element.99 = s32[8]{0} get-tuple-element(%recv-done), index=0\n")


def plant_recv(dump: str, after: str, reader: str, read: str) -> str:
    """The optimized dump's text with :data:`RECV` after the line that defines ``after`` and ``reader``
    (an instruction line that reads ``%get-tuple-element.99``) after it; ``read`` (``(old, new)``) is
    substituted once in the ROOT line so the outputs read it."""
    lines = (DATA / "dumps" / dump / "module.cpu_after_optimizations.txt").read_text().splitlines(keepends=True)
    k = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith(f"%{after} = "))
    lines.insert(k + 1, RECV + reader)
    root = max(i for i, ln in enumerate(lines) if ln.lstrip().startswith("ROOT"))
    assert read[0] in lines[root]
    lines[root] = lines[root].replace(read[0], read[1], 1)
    return "".join(lines)


#: XLA of jaxlib 0.11+ refuses the planted recv cleanly ("HLO syntax error: ... recv must have a non-empty
#: tuple shape"): there the loader does not die, and there is no crash to reduce.
needs_loader_crash = pytest.mark.skipif(
    not OLD_XLA, reason="XLA of jaxlib 0.11+ refuses the planted recv cleanly (test_newer_xla_refuses_the_recv)")


def test_newer_xla_refuses_the_recv(tmp_path: Path) -> None:
    src = tmp_path / "crash.txt"
    src.write_text(plant_recv("sharded_mlp", "ynn_fusion.1", "", ("tuple(%ynn_fusion", "tuple(%ynn_fusion")))
    if OLD_XLA:
        assert "Expected a tuple shape" in (loader_dies(src.read_text()) or "")
    else:
        with pytest.raises(xs.FormatError, match="recv must have a non-empty tuple shape"):
            xs.load_computation(src)


def loader_dies(text: str) -> str | None:
    """XLA's fatal line when loading ``text`` kills the worker (as ``xs.load_computation`` loads it)."""
    from xlasdk._reduce_text import loader_death

    return loader_death(text, 120)[1] if loader_death(text, 120)[0] else None


@needs_loader_crash
@pytest.mark.parametrize("case", [
    pytest.param(("sharded_mlp", "ynn_fusion.1", "  %bad = s32[8]{0} negate(%get-tuple-element.99)\n",
                  ("tuple(%ynn_fusion", "tuple(%ynn_fusion")), id="sharded_mlp-80-lines"),
    pytest.param(("int_indexing", "select_divide_fusion",
                  "  %add.99 = s32[8]{0} add(%select_divide_fusion, %get-tuple-element.99)\n",
                  ("tuple(%reduce.1, %bitcast.1,", "tuple(%reduce.1, %add.99,")),
                 id="int_indexing-340-lines", marks=pytest.mark.campaign),
])
def test_a_module_xlas_loader_dies_on_is_cut_as_text(case: Any, tmp_path: Path) -> None:
    """Issue 36 item 3: ``reduce --until crash`` of a module XLA aborts *loading* (it was refused)."""
    dump, after, reader, read = case
    src = tmp_path / "crash.txt"
    src.write_text(plant_recv(dump, after, reader, read))
    why = loader_dies(src.read_text())
    assert why is not None and "Check failed: state Expected a tuple shape" in why, why
    with pytest.raises(xs.FormatError, match="XLA aborted while loading"):
        xs.load_computation(src)
    out = tmp_path / "min.hlo"
    r = cli("reduce", str(src), "--until", "crash", "--output", str(out), timeout=600)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^step 1: text: ", r.stdout, re.M), r.stdout
    m = re.search(r"^reduced (\d+) -> (\d+) instructions", r.stdout, re.M)
    assert m is not None and int(m.group(1)) >= 20 and int(m.group(2)) <= 10, r.stdout
    reduced = out.read_text()
    # the oracle: XLA still dies loading what was written, on the same check; the recv is what is left
    assert "Check failed: state Expected a tuple shape" in (loader_dies(reduced) or ""), reduced
    assert " recv(" in reduced and "metadata=" not in reduced and "FileNames" not in reduced, reduced
    # the API takes the path too; the result has no computation (it never loads)
    res = xs.reduce(src, "crash")
    assert res.computation is None and res.hlo_text == reduced and res.instructions_after == int(m.group(2))


@needs_loader_crash
def test_a_module_xlas_loader_dies_on_is_refused_for_other_conditions(tmp_path: Path) -> None:
    src = tmp_path / "crash.txt"
    src.write_text(plant_recv("sharded_mlp", "ynn_fusion.1", "", ("tuple(%ynn_fusion", "tuple(%ynn_fusion")))
    code, err = in_process("reduce", str(src), "--until", "compile-error", "--output", str(tmp_path / "m.hlo"))
    assert code == 2 and "XLA dies loading it" in err and "only --until crash or --script" in err, err
    with raises(xs.XlaSdkError, "XLA dies loading it", "only until='crash' or a script"):
        xs.reduce(src, "compile-error")
    # a file that fails to load cleanly is the loader's message, as before
    bad = tmp_path / "bad.txt"
    bad.write_text("HloModule m\n\nENTRY %e (x: f32[2]) -> f32[2] {\n  ROOT %y = f32[2] add(%x, )\n}\n")
    code, err = in_process("reduce", str(bad), "--until", "crash", "--output", str(tmp_path / "m.hlo"))
    assert code == 2 and "XLA dies" not in err and str(bad) in err, err


@needs_loader_crash
def test_the_text_pass_honours_max_time(tmp_path: Path) -> None:
    src = tmp_path / "crash.txt"
    src.write_text(plant_recv("sharded_mlp", "ynn_fusion.1", "", ("tuple(%ynn_fusion", "tuple(%ynn_fusion")))
    t0 = time.monotonic()
    res = xs.reduce(src, "crash", max_time=3.0)
    took = time.monotonic() - t0
    # the first load (XLA dies: a fresh worker), the budget, the 2 s the search is given to stop, loosely
    assert res.timed_out and took < 3.0 + 20, took
    assert res.instructions_after <= res.instructions_before
    assert "Expected a tuple shape" in (loader_dies(res.hlo_text) or "")


def test_text_passes_cut_mlir_text_by_lines_and_locations() -> None:
    """MLIR text is cut line by line (and its locations dropped): here with a check that the text still
    loads and still holds the maximum, the dead ops and the locations planted in it go, the rest stays."""
    from xlasdk._reduce_text import TextReducer, count_instructions

    text = (DATA / "dumps/sharded_mlp/lowered.mlir").read_text()
    dead = ("    %d0 = stablehlo.add %2, %2 : tensor<16x4xf32> loc(#loc9)\n"
            "    %d1 = stablehlo.negate %d0 : tensor<16x4xf32>\n"
            "    %d2 = stablehlo.abs %0 : tensor<16x32xf32>\n")
    text = text.replace("    return %2, %4", dead + "    return %2, %4", 1) + '#loc9 = loc("planted.py":1:2)\n'
    xs.XlaComputation.from_stablehlo(text)  # it loads

    def check(t: str) -> bool:
        try:
            xs.XlaComputation.from_stablehlo(t)
        except xs.XlaSdkError:
            return False
        return "stablehlo.maximum" in t

    steps: list[str] = []
    r = TextReducer(text, check, lambda strategy, t: steps.append(strategy))
    r.run()
    assert "%d0" not in r.cur and "%d2" not in r.cur and "loc(" not in r.cur and "#loc9" not in r.cur, r.cur
    assert check(r.cur) and count_instructions(r.cur) < count_instructions(text)
    assert steps[0] == "text: drop locations" and "text: delete lines" in steps


# -- diverge ---------------------------------------------------------------------------------------------
def assert_division_core(comp: xs.XlaComputation) -> None:
    """``comp`` is the spliced pattern's core: a parameter divided by 2**127 (a constant, or a broadcast
    scalar constant)."""
    opcodes = sorted(i.opcode for i in comp.instructions())
    assert opcodes in (["parameter", "stablehlo.constant", "stablehlo.divide"],
                       ["parameter", "stablehlo.broadcast_in_dim", "stablehlo.constant", "stablehlo.divide"]), opcodes
    div = next(i for i in comp.instructions() if i.opcode == "stablehlo.divide")
    x, cb = div.operands
    k = cb.operands[0] if cb.opcode == "stablehlo.broadcast_in_dim" else cb
    assert x.opcode == "parameter" and k.opcode == "stablehlo.constant"
    assert np.all(np.asarray(k.attributes["value"]) == np.float32(2.0**127))


def test_diverge_ends_at_the_division_and_its_operands() -> None:
    comp = xs.XlaComputation.from_hlo_text(splice(TINY, "f32[4,2,2,8]"))
    ins, _ = recorded("dumps/convnet_train")
    report = xs.compare(comp, ins)
    assert not report.ok and [o.index for o in report.outputs if not o.ok] == [7]  # only the spliced output
    res = xs.reduce(comp, "diverge", arguments=ins)
    assert_division_core(res.computation)
    # the argument is 1000 * the dump's average-pooled activations; on it XLA gives 0, numpy x / 2**127
    assert res.arguments is not None and len(res.arguments) == 1
    (a,) = res.arguments
    assert a.size < 4 * 2 * 2 * 8  # the shapes were simplified too (dimensions shrunk)
    (got,) = [np.asarray(o) for o in [xs.compile(res.computation)(a).to_numpy()]]
    want = a.astype(np.float64) / 2.0**127
    assert np.any(np.abs(want) > np.finfo(np.float32).tiny) and np.all(got[np.abs(want) > 1e-37] == 0)
    assert not xs.compare(res.computation, [a]).ok
    # deterministic: the same input gives the same module, steps and candidates
    again = xs.reduce(comp, "diverge", arguments=ins)
    assert again.hlo_text == res.hlo_text and (again.steps, again.candidates) == (res.steps, res.candidates)
    assert all(np.array_equal(x, y) for x, y in zip(again.arguments or [], res.arguments, strict=True))


# -- script, compile-error -------------------------------------------------------------------------------
def test_script_with_a_shell_one_liner() -> None:
    comp = xs.load_computation(CONVNET)
    res = xs.reduce(comp, script="grep -q ' multiply('")
    opcodes = [i.opcode for i in res.computation.instructions()]
    assert "stablehlo.multiply" in opcodes and res.instructions_after <= 4, opcodes
    assert res.compiles == 0 and "multiply(" in res.hlo_text


def test_compile_error_regex() -> None:
    comp = xs.XlaComputation.from_hlo_text(splice(NO_TARGET, "f32[4,2,2,8]"))
    res = xs.reduce(comp, "compile-error=xlasdk_no_such_target")
    opcodes = [i.opcode for i in res.computation.instructions()]
    assert "stablehlo.custom_call" in opcodes and len(opcodes) <= 3, opcodes
    with pytest.raises(xs.CompileError, match="xlasdk_no_such_target"):
        xs.compile(xs.XlaComputation.from_hlo_text(res.hlo_text))
    with raises(NotReproducedError, "does not show the problem (compile-error=another message)"):
        xs.reduce(comp, "compile-error=another message")


def test_api_errors() -> None:
    comp = xs.load_computation(CONVNET)
    with raises(NotReproducedError, "does not show the problem (crash)", "loads and compiles"):
        xs.reduce(comp, "crash")
    with raises(xs.XlaSdkError, "exactly one of until="):
        xs.reduce(comp)
    with raises(xs.XlaSdkError, "exactly one of until="):
        xs.reduce(comp, "crash", script="true")
    with raises(xs.XlaSdkError, "until='segfault'", "expected 'crash'"):
        xs.reduce(comp, "segfault")
    with raises(xs.XlaSdkError, "does not compile"):
        xs.reduce(comp, "compile-error=(")
    with raises(xs.XlaSdkError, "max_time must be a number of seconds > 0"):
        xs.reduce(comp, "crash", max_time=0)
    with raises(xs.XlaSdkError, "takes 9 arguments, 1 were given"):
        xs.reduce(comp, "diverge", arguments=[np.zeros(3)])


# -- the command line ------------------------------------------------------------------------------------
def test_cli_diverge_writes_the_module_and_a_snapshot(tmp_path: Path) -> None:
    from xlasdk.formats.snapshot import load_snapshot

    src = tmp_path / "spliced.hlo"
    src.write_text(splice(TINY, "f32[4,2,2,8]"))
    ins, _ = recorded("dumps/convnet_train")
    np.savez(tmp_path / "in.npz", **{str(i): a for i, a in enumerate(ins)})
    out = tmp_path / "min.hlo"
    r = cli("reduce", str(src), "--until", "diverge", "--inputs", str(tmp_path / "in.npz"), "--output", str(out))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("step 1: ") and " instructions (" in lines[0]
    assert re.search(r"^reduced \d+ -> [34] instructions in \d+ steps: \d+ candidates, \d+ compiles", r.stdout, re.M)
    assert f"wrote {out}" in r.stdout and f"wrote {tmp_path / 'min.snapshot.pb'}" in r.stdout
    assert_division_core(xs.load_computation(out))
    snap = load_snapshot(tmp_path / "min.snapshot.pb")
    assert not xs.compare(snap.computation, snap.arguments).ok  # the snapshot replays the divergence
    # it records the result reduce showed (XLA's), so run --expect recorded checks it is still there
    assert "and the result XLA gave" in r.stdout
    xla = xs.compile(snap.computation, "cpu:0")(*snap.arguments).to_numpy()
    np.testing.assert_array_equal(snap.outputs()[0], xla)
    r = cli("run", str(tmp_path / "min.snapshot.pb"), "--expect", "recorded")
    assert r.returncode == 0, r.stderr + r.stdout


def test_cli_script_and_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "min.hlo"
    r = cli("reduce", str(CONVNET), "--script", "grep -q ' multiply('", "--output", str(out))
    assert r.returncode == 0, r.stderr
    assert "multiply(" in out.read_text() and not (tmp_path / "min.snapshot.pb").exists()
    # the original does not show the problem: exit 2, named
    r = cli("reduce", str(CONVNET), "--until", "compile-error", "--output", str(out))
    assert r.returncode == 2 and not r.stdout
    assert r.stderr.strip() == (f"xlasdk reduce: error: {CONVNET}: the module 'jit_train_step' does not show the "
                                "problem (compile-error): loads and compiles")
    # usage errors
    for argv, words in [
        (["--output", str(out)], "give exactly one of --until"),
        (["--until", "crash", "--script", "true", "--output", str(out)], "give exactly one of --until"),
        (["--until", "hang", "--output", str(out)], "--until 'hang': expected crash, compile-error"),
        (["--until", "crash", "--output", str(tmp_path / "no" / "min.hlo")], "does not exist"),
        (["--until", "crash", "--output", str(out), "--max-time", "0"], "argument --max-time: must be a number of "
         "seconds > 0"),
        (["--until", "diverge", "--output", str(out)], "missing input for parameter 0"),
    ]:
        code, err = in_process("reduce", str(CONVNET), *argv)
        assert code == 2 and words in err and err.startswith("xlasdk reduce: error: "), (argv, err)
    code, err = in_process("reduce", str(CONVNET), "--until", "crash")
    assert code == 2 and "the following arguments are required: --output" in err


def test_drop_metadata_drops_every_location_and_the_stack_frame_tables() -> None:
    """A loop of a real dump reduced: no metadata= anywhere (the loop's body and condition included)
    and no stack-frame tables, where the dump has both; the module still shows the problem and runs."""
    path = DATA / "dumps/gru_scan/module.before_optimizations.txt"
    text = path.read_text()
    assert "metadata=" in text and "\nStackFrames\n" in text and "\nFileNames\n" in text
    comp = xs.load_computation(path)
    res = xs.reduce(comp, script="grep -q ' while('")
    assert "simplify: drop metadata" in [s.strategy for s in res.history]
    for printed in (res.hlo_text, res.computation.as_hlo_text()):
        assert " while(" in printed and "metadata=" not in printed, printed
        assert not re.search(r"^(FileNames|FunctionNames|FileLocations|StackFrames)$", printed, re.M), printed
    assert "body=" in res.hlo_text  # the loop is whole: its body's ops carry no metadata either
    assert subprocess.run(["grep", "-q", " while("], input=res.hlo_text.encode()).returncode == 0
    again = xs.XlaComputation.from_hlo_text(res.hlo_text)  # it loads, compiles and runs
    args = xs.random_inputs(again, seed=0)
    got = xs.compile(again)(*args)
    want = xs.evaluate(again, *args)
    for g, w in zip(got if isinstance(got, (list, tuple)) else [got], want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)
