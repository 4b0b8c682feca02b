"""``xlasdk reduce`` of an optimized per-partition dump (issue 46): ``--until diverge`` from the
program's global inputs, each candidate cut run on all 64 partitions (the plan's devices) and judged
partition by partition against the reference evaluator on the cut itself, every partition simulated
(``xlasdk._reduce_partitions``); what cannot be judged so (``--against``, ``--until crash``) is refused
with one line saying what works.

The fixture is ``tests/test_pod_partitions.py``'s 64-partition MLP step (the jaxlib's own: ``HERE``), its
planted bug that file's (``multiply_wrong_on_partition_5``, kept to floating-point multiplies): the
reference's ``multiply`` made wrong on simulated partition 5 only (the device, right,
departs from it there, as a device that miscompiles one partition's program would). Oracles: the reduced
module run on the 64 devices against the reference evaluator with its rule restored (the same values in
every partition, bit for bit: an f32 multiply rounds once) and with the planted rule (partition 5 alone
departs); numpy's split of the global inputs for the arguments a cut keeps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.test_pod_partitions import AFTER, BEFORE, HERE, _ins, cli
from xlasdk._reduce_graph import _evaluate_per_partition
from xlasdk.runtime import CompileOptions
from xlasdk.runtime.per_partition import PerPartitionPlan

N = 64
DUMP = HERE / f"{AFTER}.txt"


@pytest.fixture
def float_multiply_wrong_on_partition_5(monkeypatch: pytest.MonkeyPatch) -> None:
    """``tests/test_pod_partitions.py``'s planted bug kept to floating-point multiplies, in their own
    type (``a * b + 1`` on simulated partition 5): the partition-offset arithmetic (u32 multiplies) stays
    right, so a cut that keeps it is judged, not refused by a rule that gives another type."""
    import xlasdk.reference  # noqa: F401 - binds the rules
    from xlasdk import _optable, ops
    from xlasdk.reference import collectives

    b = xs.XlaBuilder("row")
    p = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, ()), "p")
    row = ops.Mul(p, p).opdef
    right = _optable._EVALUATE[row]

    def wrong(o: Any, a: Any, ev: Any) -> Any:
        v = np.asarray(right(o, a, ev))
        return v + v.dtype.type(1) if v.dtype.kind == "f" and collectives._device().partition == 5 else v

    monkeypatch.setitem(_optable._EVALUATE, row, wrong)


def _run_on_partitions(comp: xs.XlaComputation, stacked: list[np.ndarray[Any, Any]]
                       ) -> list[list[np.ndarray[Any, Any]]]:
    """Each partition's outputs of ``comp`` compiled for 1 x 64 partitions, run on the 64 CPU devices."""
    from xlasdk.runtime.device import client

    dev = client("cpu", num_devices=N).devices()[0]
    exe = xs.compile(comp, dev, options=CompileOptions(num_replicas=1, num_partitions=N))
    return PerPartitionPlan.execute(exe, [[a[k] for a in stacked] for k in range(N)])


def _stacked(path: Path) -> list[np.ndarray[Any, Any]]:
    with np.load(path) as z:
        return [z[f"arg{i}"] for i in range(len(z.files))]


def test_a_departure_on_one_partition_reduces_to_the_multiply(float_multiply_wrong_on_partition_5: None,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    out = tmp_path / "min.hlo"
    code, text, err = cli("reduce", str(DUMP), "--until", "diverge", "--inputs", str(HERE / "in.npz"), "-o", str(out))
    assert code == 0, err + text
    assert "wrote" in text and "stacked on a leading axis" in text, text
    reduced = out.read_text()
    assert "num_partitions=64" in reduced.splitlines()[0], reduced[:300]
    assert " multiply(" in reduced, reduced
    comp = xs.load_computation(out)
    before, after = len(xs.load_computation(DUMP).instructions()), len(comp.instructions())
    assert after < before // 4, (before, after)
    args = _stacked(tmp_path / "min.npz")
    assert [a.shape[0] for a in args] == [N] * len(args)
    got = _run_on_partitions(comp, args)
    planted = _evaluate_per_partition(N, comp, *args)
    departs = [k for k in range(N) if any(not np.array_equal(g, w[k]) for g, w in zip(got[k], planted, strict=True))]
    assert departs == [5], departs
    # compare judges the files written as the search did: partition 5 alone departs from the module as written
    assert f"xlasdk compare {out} --inputs {tmp_path / 'min.npz'}" in text, text
    code, judged, err = cli("compare", str(out), "--inputs", str(tmp_path / "min.npz"))
    assert code == 1 and "DIVERGENCE" in judged and "partition [5] depart" in judged, err + judged
    monkeypatch.undo()  # the reference's own multiply: every partition's device values, bit for bit
    code, judged, err = cli("compare", str(out), "--inputs", str(tmp_path / "min.npz"))
    assert code == 0 and "MATCH" in judged, err + judged
    right = _evaluate_per_partition(N, comp, *args)
    for k in range(N):
        for g, w in zip(got[k], right, strict=True):
            assert g.dtype == w.dtype and g.tobytes() == w[k].tobytes(), k
    # the files written run as they were checked: one partition's program on 64 devices, each its own arguments
    assert f"xlasdk run {out} --inputs {tmp_path / 'min.npz'}" in text, text
    code, ran, err = cli("run", str(out), "--inputs", str(tmp_path / "min.npz"), "--output", str(tmp_path / "o.npz"))
    assert code == 0 and "on 64 cpu devices" in ran and "outputs per partition" in ran, err + ran
    with np.load(tmp_path / "o.npz") as z:
        assert all(z["output_0"][k].tobytes() == got[k][0].tobytes() for k in range(N))


def test_the_api_takes_global_or_stacked_arguments_and_keeps_the_program_s_pieces(
        float_multiply_wrong_on_partition_5: None) -> None:
    """``xs.reduce`` of the plan: the global inputs split by the plan (numpy's split of them are the
    stacked arguments of a cut that keeps the parameters), the same result from the stacked pieces."""
    plan = PerPartitionPlan.of(xs.load_computation(DUMP), path=DUMP)
    ins = _ins(HERE)
    pieces = plan.split(ins)
    stacked = [np.stack([row[i] for row in pieces]) for i in range(len(ins))]
    # an independent split: parameter 0 (w1, P("model", None) over an 8x8 mesh) is 8 row blocks, each
    # partition (d, m) holding block m
    w1 = ins[0]
    rows = w1.shape[0] // 8
    for k in range(N):
        assert np.array_equal(stacked[0][k], w1[(k % 8) * rows:(k % 8 + 1) * rows]), k
    a = xs.reduce(plan, "diverge", arguments=ins, max_time=600)
    b = xs.reduce(plan, "diverge", arguments=stacked, max_time=600)
    assert a.hlo_text == b.hlo_text and a.instructions_after == b.instructions_after
    assert a.condition == "diverge (each of 64 partitions)"
    assert a.arguments is not None and all(x.shape[0] == N for x in a.arguments)


def test_a_correct_dump_has_nothing_to_reduce(tmp_path: Path) -> None:
    out = tmp_path / "min.hlo"
    code, text, err = cli("reduce", str(DUMP), "--until", "diverge", "--inputs", str(HERE / "in.npz"), "-o", str(out))
    assert code == 2 and "nothing to reduce: every partition of 64 computes what the reference gives" in err, err
    assert not out.exists()


def test_what_cannot_be_judged_per_partition_is_refused_in_one_line(tmp_path: Path) -> None:
    out = str(tmp_path / "min.hlo")
    code, _, err = cli("reduce", str(DUMP), "--against", str(DUMP), "--inputs", str(HERE / "in.npz"), "-o", out)
    assert code == 2 and "is an optimized per-partition dump (one partition's program of 64)" in err, err
    assert "--bisect ops" in err and "--until diverge" in err and len(err.strip().splitlines()) == 1, err
    code, _, err = cli("reduce", str(DUMP), "--until", "crash", "-o", out)
    assert code == 2 and "optimized per-partition dump" in err and "--until diverge" in err, err
    comp = xs.load_computation(DUMP)
    with pytest.raises(xs.XlaSdkError, match=r"against=: the module 'jit_step' is an optimized per-partition dump"):
        xs.reduce(comp, against=comp)
    with pytest.raises(xs.XlaSdkError, match=r"until='compile-error'.*per-partition dump.*until='diverge'"):
        xs.reduce(comp, "compile-error")
    plan = PerPartitionPlan.of(comp, path=DUMP)
    wrong = [np.zeros((3, 3), np.float32)] + _ins(HERE)[1:]
    with pytest.raises(xs.XlaSdkError, match=r"per-partition dump \(one partition's program of 64\): give the "
                                              r"program's global arrays .* or each parameter's 64 per-partition"):
        xs.reduce(plan, "diverge", arguments=wrong)
    assert (HERE / f"{BEFORE}.txt").is_file()
