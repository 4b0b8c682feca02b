"""``xlasdk compare`` of an optimized per-partition dump (issue 33): the program's global inputs split
by the parameters' shardings, each partition run, the outputs put together by the result shardings,
then judged against the before-optimizations file's global program (the reference evaluator on it,
or the file itself run on one device) by the error models of the single-device path.

Oracles: the before-optimizations file (XLA on one device, or the reference evaluator on it), JAX's
recorded global outputs (``io.npz``), and planted bugs that must be flagged."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk.cli import main

DATA = Path(__file__).parent / "data"
TPU_MLP = DATA / "dumps_tpu" / "sharded_mlp"
MLP = DATA / "dumps" / "sharded_mlp"
BEFORE = MLP / "module.before_optimizations.txt"
AFTER = TPU_MLP / "module.after_optimizations.txt"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def mlp_inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sharded_mlp's global inputs, keyed by parameter number (as the issue makes them)."""
    path = tmp_path_factory.mktemp("mlp") / "X.npz"
    with np.load(MLP / "io.npz") as z:
        np.savez(path, **{str(i): z[f"in{i}"] for i in range(3)})
    return path


def planted(tmp_path: Path, old: str, new: str, *, beside: bool) -> Path:
    """The TPU-optimized sharded_mlp with ``old`` made ``new`` (once), optionally with its
    before_optimizations file beside it."""
    src = AFTER.read_text()
    assert src.count(old) == 1, old
    path = tmp_path / "module.after_optimizations.txt"
    path.write_text(src.replace(old, new))
    if beside:
        shutil.copy(TPU_MLP / "module.before_optimizations.txt", tmp_path / "module.before_optimizations.txt")
    return path


def test_tpu_sharded_mlp_matches_its_before_file_with_global_inputs(mlp_inputs: Path) -> None:
    """The issue's command: MATCH (before: 'input for parameter 0 ('x') must be f32[4,8]', exit 2),
    judged with the TPU's error model added (the optimized module keeps the TPU's bf16 converts)."""
    code, text, err = cli("compare", str(AFTER), "--against", str(BEFORE), "--inputs", str(mlp_inputs))
    assert code == 0, err + text
    assert ": MATCH" in text and "module 'jit_sharded_mlp' on global inputs on one device" in text, text
    assert "4 cpu devices: global inputs split by the parameters' shardings" in text, text
    assert "the CPU meaning of a TPU-optimized module" in text, text


def test_tpu_sharded_mlp_matches_the_reference_on_its_global_program(mlp_inputs: Path) -> None:
    code, text, err = cli("compare", str(AFTER), "--inputs", str(mlp_inputs))
    assert code == 0, err + text
    assert "reference evaluator on module.before_optimizations.txt's global program" in text and ": MATCH" in text, text


def test_recorded_global_outputs(mlp_inputs: Path, tmp_path: Path) -> None:
    """--against OUT.npz: JAX's global outputs (recorded on the CPU: within the TPU's bf16 rounding
    of the default tolerances is not claimed; the CPU-optimized dump matches them)."""
    want = tmp_path / "want.npz"
    with np.load(MLP / "io.npz") as z:
        np.savez(want, output_0=z["out0"], output_1=z["out1"])
    code, text, err = cli("compare", str(MLP / "module.cpu_after_optimizations.txt"), "--against", str(want),
                          "--inputs", str(mlp_inputs))
    assert code == 0, err + text
    assert f"the outputs in {want}" in text and ": MATCH" in text, text


@pytest.mark.parametrize("old,new,outputs", [
    # the all-reduce's combiner (the sum over the partitions) made a maximum: only the loss departs
    ("ROOT %reduce_sum.10 = f32[]{:T(128)} add(", "ROOT %reduce_sum.10 = f32[]{:T(128)} maximum(", [1]),
    # the relu made a min: both outputs depart
    ("%max.17 = f32[4,32]{1,0:T(4,128)} maximum(", "%max.17 = f32[4,32]{1,0:T(4,128)} minimum(", [0, 1]),
])
@pytest.mark.parametrize("against", ["before", "reference"])
def test_a_planted_bug_is_a_divergence(mlp_inputs: Path, tmp_path: Path, old: str, new: str, outputs: list[int],
                                       against: str) -> None:
    path = planted(tmp_path, old, new, beside=against == "reference")
    doc = tmp_path / "report.json"
    argv = ["compare", str(path), "--inputs", str(mlp_inputs), "--json", str(doc)]
    if against == "before":
        argv += ["--against", str(BEFORE)]
    code, text, err = cli(*argv)
    assert code == 1, err + text
    assert ": DIVERGENCE" in text, text
    report = json.loads(doc.read_text())
    assert report["verdict"] == "DIVERGENCE"
    assert [o["index"] for o in report["outputs"] if o["mismatches"]] == outputs, text


def stacked_inputs(path: Path, comp: Any, globals_: list[np.ndarray[Any, Any]], n: int) -> None:
    shardings = [xs.HloSharding.parse(s) for s in comp.partitioning().parameter_shardings]
    np.savez(path, **{str(i): np.stack([a[s.shard_slices(a.shape, n)[k]] for k in range(n)])
                      for i, (a, s) in enumerate(zip(globals_, shardings, strict=True))})


def test_per_partition_inputs_are_accepted(tmp_path: Path) -> None:
    """Each partition's own arrays stacked on a leading axis: put together into the global inputs by
    the parameters' shardings, then the same judgement."""
    comp = xs.load_computation(AFTER)
    with np.load(MLP / "io.npz") as z:
        ins = [z[f"in{i}"] for i in range(3)]
    path = tmp_path / "pp.npz"
    stacked_inputs(path, comp, ins, 4)
    with np.load(path) as z:
        assert z["0"].shape == (4, 4, 8)
    code, text, err = cli("compare", str(AFTER), "--against", str(BEFORE), "--inputs", str(path))
    assert code == 0, err + text
    assert "per-partition inputs (put together" in text and ": MATCH" in text, text


def test_per_partition_inputs_that_are_no_global_array_are_refused(tmp_path: Path) -> None:
    """A replicated parameter whose partitions' copies differ has no global value to judge by."""
    comp = xs.load_computation(AFTER)
    with np.load(MLP / "io.npz") as z:
        ins = [z[f"in{i}"] for i in range(3)]
    path = tmp_path / "pp.npz"
    stacked_inputs(path, comp, ins, 4)
    with np.load(path) as z:
        arrays = {k: z[k].copy() for k in z}
    arrays["1"][2] += 1.0
    np.savez(path, **arrays)
    code, _, err = cli("compare", str(AFTER), "--against", str(BEFORE), "--inputs", str(path))
    assert code == 2 and "the partitions' pieces of a parameter disagree" in err, err


@pytest.mark.parametrize("after,before,names", [
    (MLP / "module.cpu_after_optimizations.txt", BEFORE, None),
    (DATA / "spmd" / "mesh2x2" / "module.cpu_after_optimizations.txt",
     DATA / "spmd" / "mesh2x2" / "module.before_optimizations.txt", ["x", "w"]),
    (DATA / "spmd" / "module.after_optimizations.txt", DATA / "spmd" / "module.before_optimizations.txt",
     ["a", "w", "v"]),
])
def test_xla_cpu_optimized_per_partition_dumps(tmp_path: Path, after: Path, before: Path,
                                               names: list[str] | None) -> None:
    """XLA:CPU's optimized per-partition dumps (4 and 8 partitions; the 8-partition one's before file
    is a Shardy program with ``xla.sdy.FuncResultSharding`` marks the reference reads as the value)."""
    inputs = tmp_path / "in.npz"
    with np.load(after.parent / "io.npz") as z:
        n = sum(k.startswith("in") and k[2:].isdigit() for k in z)
        np.savez(inputs, **{(names[i] if names else str(i)): z[f"in{i}"] for i in range(n)})
    for extra in ([], ["--against", str(before)]):
        code, text, err = cli("compare", str(after), "--inputs", str(inputs), *extra)
        assert code == 0, err + text
        assert ": MATCH" in text, text


@pytest.mark.parametrize("argv,says", [
    (["--bisect", "passes"], "bisect its before_optimizations file"),
    (["--find-nonfinite"], "bisect its before_optimizations file"),
    (["--against", "cpu:0"], "compare it against the reference, its before_optimizations file"),
    (["--against", "recorded"], "is not a snapshot"),
])
def test_what_cannot_be_done_says_what_to_use(mlp_inputs: Path, argv: list[str], says: str) -> None:
    code, _, err = cli("compare", str(AFTER), "--inputs", str(mlp_inputs), *argv)
    assert code == 2 and says in err, err


def test_without_a_before_file_the_reference_path_says_what_to_give(mlp_inputs: Path, tmp_path: Path) -> None:
    path = tmp_path / "module.after_optimizations.txt"
    shutil.copy(AFTER, path)
    code, text, err = cli("compare", str(path), "--inputs", str(mlp_inputs))  # the module as written, or what to give
    assert (code == 0 and "module as written" in text) or (code == 2 and "stacked on a leading axis" in err), err + text
    code, text, err = cli("compare", str(path), "--inputs", str(mlp_inputs), "--against", str(BEFORE))
    assert code == 0 and ": MATCH" in text, err + text
