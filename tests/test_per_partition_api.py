"""The per-partition plan as library API (issue 44 step 1's last item): ``PerPartitionPlan``,
``run_per_partition`` and ``xs.compare`` of an optimized per-partition dump (one partition's program of
an SPMD program) from the program's *global* arrays, as ``xlasdk run`` / ``xlasdk compare`` do them.

Oracles: JAX's recorded global outputs (``io.npz``, within ``tests/test_real_dumps.py``'s tolerances);
plain numpy slicing of the global arrays by the shardings the dumps spell (row blocks, replicated);
the CLI's own outputs and verdicts (the same dumps, the same inputs); planted bugs that must be
DIVERGENCE. Also: keyword ``bisect_ops``/``local_divergences`` judge with the device's kind (they
used the CPU's error model for any device)."""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.test_real_dumps import assert_matches_jax
from xlasdk.cli import main
from xlasdk.errors import CompareArgumentError, DTypeError, ShapeError, XlaRuntimeError
from xlasdk.reference import _bisect_core
from xlasdk.reference.bisect import bisect_ops, local_divergences
from xlasdk.runtime.per_partition import PerPartitionPlan, before_files, per_partition_count, run_per_partition

DATA = Path(__file__).parent / "data"
MLP = DATA / "dumps" / "sharded_mlp"
TPU_MLP = DATA / "dumps_tpu" / "sharded_mlp"
JAX012_MLP = DATA / "dumps_jax012" / "sharded_mlp"

#: (optimized dump, its before_optimizations file, its io.npz, partitions)
DUMPS = [
    (MLP / "module.cpu_after_optimizations.txt", MLP / "module.before_optimizations.txt", MLP / "io.npz", 4),
    (JAX012_MLP / "module.cpu_after_optimizations.txt", JAX012_MLP / "module.before_optimizations.txt",
     JAX012_MLP / "io.npz", 4),
    (DATA / "spmd" / "mesh2x2" / "module.cpu_after_optimizations.txt",
     DATA / "spmd" / "mesh2x2" / "module.before_optimizations.txt", DATA / "spmd" / "mesh2x2" / "io.npz", 4),
    (DATA / "spmd" / "module.after_optimizations.txt", DATA / "spmd" / "module.before_optimizations.txt",
     DATA / "spmd" / "io.npz", 8),
    (TPU_MLP / "module.after_optimizations.txt", TPU_MLP / "module.before_optimizations.txt", MLP / "io.npz", 4),
]
IDS = ["sharded_mlp", "sharded_mlp_jax012", "mesh2x2", "spmd8", "sharded_mlp_tpu"]


def refused_here(after: Path) -> bool:
    """Whether this XLA may refuse to put ``after``'s outputs together: jax 0.12's dump leaves its results'
    shardings to XLA's propagation, and XLA of jaxlib 0.10.2 propagates other shardings to its before
    file's results (replicated, for the dump's row blocks); the plan says so, never a guess."""
    return after.parent == JAX012_MLP and not xs.jaxlib_version_info().release.startswith("0.12")


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def io_arrays(path: Path, prefix: str) -> list[np.ndarray[Any, Any]]:
    with np.load(path) as z:
        n = sum(k.startswith(prefix) and k[len(prefix):].isdigit() for k in z)
        return [z[f"{prefix}{i}"] for i in range(n)]


@pytest.mark.parametrize("after,before,npz,parts", DUMPS, ids=IDS)
def test_run_per_partition_is_the_cli_run_and_jaxs_outputs(after: Path, before: Path, npz: Path, parts: int,
                                                           tmp_path: Path) -> None:
    """The API's outputs from the global inputs are the CLI's ``run --output`` bit for bit, and JAX's
    (the TPU-optimized module's CPU meaning keeps the TPU's bf16 converts: compared with the CLI only)."""
    comp = xs.load_computation(after)
    assert per_partition_count(comp) == parts
    plan = PerPartitionPlan.of(comp, path=after)
    assert plan.num_partitions == parts and plan.before_path == str(before)
    ins = io_arrays(npz, "in")
    inputs, out = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, **{name: a for name, a in zip(plan.parameter_names, ins, strict=True)})
    if plan.result_shardings is None:
        assert refused_here(after), plan.result_source
        with pytest.raises(ShapeError, match="do not split the program's results into the module's"):
            run_per_partition(plan, ins)
        code, text, err = cli("run", str(after), "--inputs", str(inputs))
        assert code == 0 and "outputs per partition (a leading axis of 4): the optimized module" in text, err + text
        return
    got = run_per_partition(plan, ins)
    code, text, err = cli("run", str(after), "--inputs", str(inputs), "--output", str(out))
    assert code == 0, err + text
    assert "global inputs split" in text and "outputs put together by" in text, text
    with np.load(out) as z:
        assert len(z.files) == len(got)
        for i, g in enumerate(got):
            assert g.dtype == z[f"output_{i}"].dtype and g.shape == z[f"output_{i}"].shape
            assert g.tobytes() == z[f"output_{i}"].tobytes(), f"output {i}: the API and the CLI differ"
    if after.parent != TPU_MLP:
        assert_matches_jax(got, io_arrays(npz, "out"), after.name)


def test_split_is_numpys_slicing_and_join_inverts_it() -> None:
    """sharded_mlp: x is split in row blocks ({devices=[4,1]<=[4]}), the weights replicated; the pieces are
    numpy's slices, and join gives the global arrays back."""
    after = MLP / "module.cpu_after_optimizations.txt"
    plan = PerPartitionPlan.of(xs.load_computation(after), path=after)
    assert plan.parameter_source == "the dump's parameter shardings"
    x, w1, w2 = io_arrays(MLP / "io.npz", "in")
    pieces = plan.split([x, w1, w2])
    assert len(pieces) == 4
    for k, (px, pw1, pw2) in enumerate(pieces):
        np.testing.assert_array_equal(px, x[4 * k:4 * k + 4])
        np.testing.assert_array_equal(pw1, w1)
        np.testing.assert_array_equal(pw2, w2)
    for g, j in zip([x, w1, w2], plan.join(pieces), strict=True):
        assert g.tobytes() == j.tobytes()
    assert [tuple(s.dimensions()) for s in plan.global_parameter_shapes] == [(16, 8), (8, 32), (32, 4)]
    assert plan.global_result_dims == ((16, 4), ())


def test_put_together_refuses_partitions_that_disagree() -> None:
    """A replicated result (the loss) whose partitions' copies differ is reported, never one of them picked;
    so are the pieces of a replicated parameter given per partition."""
    after = MLP / "module.cpu_after_optimizations.txt"
    plan = PerPartitionPlan.of(xs.load_computation(after), path=after)
    outs = [[np.full((4, 4), k, np.float32), np.float32(1.0)] for k in range(4)]
    got = plan.put_together(outs)
    np.testing.assert_array_equal(got[0], np.repeat(np.arange(4, dtype=np.float32), 4)[:, None] * np.ones((1, 4)))
    assert got[1] == 1.0
    outs[2][1] = np.float32(2.0)
    with pytest.raises(XlaRuntimeError, match="partition 2's piece differs"):
        plan.put_together(outs)
    pieces = plan.split(io_arrays(MLP / "io.npz", "in"))
    pieces[3][1] = pieces[3][1] + 1
    with pytest.raises(ShapeError, match="partition 3's piece differs"):
        plan.join(pieces)


def test_wrong_global_inputs_name_the_parameter() -> None:
    after = MLP / "module.cpu_after_optimizations.txt"
    plan = PerPartitionPlan.of(xs.load_computation(after), path=after)
    x, w1, w2 = io_arrays(MLP / "io.npz", "in")
    with pytest.raises(ShapeError, match=r"parameter 0 .* must be f32\[16,8\], got float32\[4, 8\]"):
        plan.split([x[:4], w1, w2])
    with pytest.raises(DTypeError, match="parameter 1"):
        plan.split([x, w1.astype(np.float64), w2])
    with pytest.raises(ShapeError, match="takes 3 global array"):
        plan.split([x, w1])


def test_without_the_before_file_the_plan_says_what_it_cannot_do(tmp_path: Path) -> None:
    """jax 0.12's optimized dump keeps no parameter shardings: alone, its global arrays cannot be split
    and its outputs cannot be put together (never a guess); with the before file given, both work."""
    alone = tmp_path / "module.cpu_after_optimizations.txt"
    shutil.copy(JAX012_MLP / "module.cpu_after_optimizations.txt", alone)
    comp = xs.load_computation(alone)
    assert before_files(alone) == []
    plan = PerPartitionPlan.of(comp, path=alone)
    assert plan.parameter_source is None and plan.result_shardings is None and plan.before is None
    ins = io_arrays(JAX012_MLP / "io.npz", "in")
    with pytest.raises(ShapeError, match="parameters carry no sharding"):
        plan.split(ins)
    with pytest.raises(ShapeError, match="does not record its result shardings"):
        plan.put_together([])
    with pytest.raises(ShapeError, match="parameters carry no sharding"):
        run_per_partition(comp, ins)
    with_before = PerPartitionPlan.of(comp, before=JAX012_MLP / "module.before_optimizations.txt")
    assert with_before.parameter_source is not None and len(with_before.split(ins)) == 4
    if with_before.result_shardings is not None or not refused_here(JAX012_MLP / alone.name):
        given = run_per_partition(with_before, ins)
        assert_matches_jax(given, io_arrays(JAX012_MLP / "io.npz", "out"), "with before=")
    with pytest.raises(xs.FormatError):
        PerPartitionPlan.of(comp, before=tmp_path / "missing.txt")
    with pytest.raises(ShapeError, match="not an optimized per-partition dump"):
        PerPartitionPlan.of(xs.load_computation(MLP / "module.before_optimizations.txt"))


# -- xs.compare of a per-partition dump ------------------------------------------------------------
@pytest.mark.parametrize("after,before,npz,parts", DUMPS, ids=IDS)
def test_compare_gives_the_clis_verdict_and_values(after: Path, before: Path, npz: Path, parts: int,
                                                   tmp_path: Path) -> None:
    """Against the before module (a second module: it gives the plan its shardings too) and against the
    reference on the before file beside the dump: MATCH, with the CLI's errors, output for output."""
    comp = xs.load_computation(after)
    ins = io_arrays(npz, "in")
    inputs = tmp_path / "in.npz"
    names = PerPartitionPlan.of(comp, path=after).parameter_names
    np.savez(inputs, **{name: a for name, a in zip(names, ins, strict=True)})
    module = xs.load_computation(before)
    if PerPartitionPlan.of(comp, path=after).result_shardings is None:
        assert refused_here(after)
        with pytest.raises(CompareArgumentError, match="do not split the program's results"):
            xs.compare(comp, ins, against=module)
        return
    for report, argv in ((xs.compare(comp, ins, against=module), ["--against", str(before)]),
                         (xs.compare(PerPartitionPlan.of(comp, path=after), ins), [])):
        doc = tmp_path / "r.json"
        code, text, err = cli("compare", str(after), "--inputs", str(inputs), "--json", str(doc), *argv)
        assert code == 0 and report.ok, err + text + str(report)
        assert ": MATCH" in text and ": MATCH" in str(report), str(report)
        want = json.loads(doc.read_text())
        assert report.as_dict()["verdict"] == want["verdict"] == "MATCH"
        assert report.as_dict()["outputs"] == want["outputs"]
        assert report.against == want["against"]


def planted(tmp_path: Path, old: str, new: str) -> Path:
    src = (TPU_MLP / "module.after_optimizations.txt").read_text()
    assert src.count(old) == 1, old
    path = tmp_path / "module.after_optimizations.txt"
    path.write_text(src.replace(old, new))
    return path


@pytest.mark.parametrize("old,new,outputs", [
    # the all-reduce's combiner (the sum over the partitions) made a maximum: only the loss departs
    ("ROOT %reduce_sum.10 = f32[]{:T(128)} add(", "ROOT %reduce_sum.10 = f32[]{:T(128)} maximum(", [1]),
    # the relu made a min: both outputs depart
    ("%max.17 = f32[4,32]{1,0:T(4,128)} maximum(", "%max.17 = f32[4,32]{1,0:T(4,128)} minimum(", [0, 1]),
])
def test_a_planted_bug_is_a_divergence_through_the_api(tmp_path: Path, old: str, new: str,
                                                       outputs: list[int]) -> None:
    """The TPU-optimized sharded_mlp with one op changed: DIVERGENCE on the outputs it reaches, against the
    before module and against the reference (the before file given to the plan); unchanged: MATCH."""
    ins = io_arrays(MLP / "io.npz", "in")
    before = TPU_MLP / "module.before_optimizations.txt"
    bad = xs.load_computation(planted(tmp_path, old, new))
    good = xs.load_computation(TPU_MLP / "module.after_optimizations.txt")
    for report in (xs.compare(bad, ins, against=xs.load_computation(before)),
                   xs.compare(PerPartitionPlan.of(bad, before=before), ins)):
        assert not report.ok and ": DIVERGENCE" in str(report), str(report)
        assert [o.index for o in report.outputs if o.mismatches] == outputs, str(report)
    for report in (xs.compare(good, ins, against=xs.load_computation(before)),
                   xs.compare(PerPartitionPlan.of(good, before=before), ins)):
        assert report.ok and ": MATCH" in str(report), str(report)


def test_recorded_global_outputs_through_the_api() -> None:
    """against=[arrays]: JAX's global outputs (the plan reads the result shardings from the file beside
    the dump); one changed element is a divergence. Without the plan's file they cannot be put together."""
    after = MLP / "module.cpu_after_optimizations.txt"
    comp = PerPartitionPlan.of(xs.load_computation(after), path=after)
    ins, outs = io_arrays(MLP / "io.npz", "in"), io_arrays(MLP / "io.npz", "out")
    assert xs.compare(comp, ins, against=outs).ok
    wrong = [outs[0].copy(), outs[1]]
    wrong[0][3, 2] += 1.0
    report = xs.compare(comp, ins, against=wrong)
    assert not report.ok and [o.index for o in report.outputs if o.mismatches] == [0], str(report)
    with pytest.raises(CompareArgumentError, match="output 0"):
        xs.compare(comp, ins, against=[outs[0][:4], outs[1]])
    with pytest.raises(CompareArgumentError, match="does not record its result shardings"):
        xs.compare(comp.computation, ins, against=outs)


def test_what_compare_cannot_do_with_a_per_partition_dump_says_what_to_give() -> None:
    after = MLP / "module.cpu_after_optimizations.txt"
    comp = xs.load_computation(after)
    ins = io_arrays(MLP / "io.npz", "in")
    with pytest.raises(CompareArgumentError, match="its ops are bisected against the reference evaluator on the "
                       "module itself"):
        xs.compare(comp, ins, against=xs.load_computation(MLP / "module.before_optimizations.txt"), bisect="ops")
    with pytest.raises(CompareArgumentError, match="bisect its before_optimizations module"):
        xs.compare(comp, ins, bisect="passes")
    with pytest.raises(CompareArgumentError, match="bisect its before_optimizations module"):
        xs.compare(comp, ins, find_nonfinite=True)
    with pytest.raises(CompareArgumentError, match="compare it against the reference"):
        xs.compare(comp, ins, against="cpu:0")
    # loaded without its path (the file beside it is not known): the module as written, partition by partition
    try:
        report = xs.compare(comp, ins)
    except CompareArgumentError as e:  # no parameter shardings to split the global inputs by: it says what to give
        assert "stacked on a leading axis" in str(e), e
    else:
        assert report.ok and "module as written" in report.against, report
    with pytest.raises(CompareArgumentError, match="not the before_optimizations module of this dump"):
        xs.compare(comp, ins, against=xs.load_computation(DATA / "spmd" / "module.before_optimizations.txt"))
    with pytest.raises(CompareArgumentError, match="precision="):
        xs.compare(PerPartitionPlan.of(comp, path=after), ins, precision="highest")


# -- bisect_ops' keywords: the device's error model ------------------------------------------------
class _Seen(Exception):
    pass


@pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason="libtpu is not installed")
@pytest.mark.parametrize("entry", [bisect_ops, local_divergences])
def test_keyword_bisections_judge_with_the_devices_kind(entry: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``bisect_ops(comp, args, device=<a TPU>)`` without ``device_kind`` judged with the CPU's error model;
    the kind comes from the device, as ``xs.compare``'s does (a compile-only v5e device: the settings the
    search starts from are read, nothing runs); a kind named stays the one named."""
    seen: list[str] = []

    def start(self: Any, comp: Any, args: Any, settings: Any, *rest: Any, **kw: Any) -> None:
        seen.append(settings.kind.name)
        raise _Seen

    monkeypatch.setattr(_bisect_core._Program, "__init__", start)
    b = xs.XlaBuilder("f")
    x = xs.ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (4,)), "x")
    comp = b.build(xs.ops.Tanh(x))
    tpu = xs.topology("v5e:1x1").devices[0]
    for kw, want in (({"device": tpu}, "tpu-v5e"), ({"device": tpu, "device_kind": "cpu"}, "cpu"),
                     ({}, "cpu")):
        with pytest.raises(_Seen):
            entry(comp, [np.ones(4, np.float32)], **kw)
        assert seen[-1] == want, (kw, seen)
