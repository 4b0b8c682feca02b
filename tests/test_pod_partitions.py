"""A pod's job on one machine (issue 46): a 64-partition SPMD training step (and, under ``-m campaign``,
a 256-partition one) made by JAX on as many CPU devices of one process, run by xlasdk from the program's
global inputs on as many CPU devices of this process, compared, and bisected to a bug planted in one
partition's computation.

The fixtures (``tests/data/pod/<jax>_p<N>/``, made by ``tools/make_pod_fixture.py``): an MLP's SGD step
with NamedShardings over a ``("data", "model")`` mesh of 8x8 (16x16); XLA's before_optimizations and
cpu_after_optimizations dumps (text and proto); its optimized module has tuple all-reduces (of 2 and of
5 operands) and mesh-notation replica groups (``replica_groups=mesh['axis_0'=8,'axis_1'=8] {'axis_1'}``).

Oracles: JAX's global outputs (``out.npz``): bit for bit where the program promises it (the jaxlib that
made the fixture runs it: the same XLA compiles the same program), within
``tests/test_real_dumps.py``'s tolerances on the other jaxlib of the range; bugs planted by hand in the
per-partition module (one constant changed, a partition's entry of XLA's partition-offset table
changed, a select that errs only where ``partition-id`` is 13) and in the reference evaluator's rule of
``multiply`` (wrong on simulated partition 5 only), each of which the bisection must name, with the
partitions where it departs (inside the fusion that holds it, for the last). No jax needed: the fixtures are files.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import assert_same_bits
from tests.test_real_dumps import assert_matches_jax
from xlasdk.cli import main
from xlasdk.runtime.per_partition import PerPartitionPlan, per_partition_count, run_per_partition

POD = Path(__file__).parent / "data" / "pod"
P64 = POD / "jax012_p64"
BEFORE, AFTER = "module.before_optimizations", "module.cpu_after_optimizations"
FILES = [f"{BEFORE}.txt", f"{BEFORE}.hlo.pb", f"{AFTER}.txt", f"{AFTER}.hlo.pb"]
JAXLIB = xs.jaxlib_version_info().release


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _made_here(fixture: Path) -> bool:
    """Whether the installed jaxlib is the one that made ``fixture`` (its XLA compiled what JAX ran)."""
    version = fixture.name.split("_")[0][3:]  # "012" for jax 0.12.x
    return JAXLIB.startswith(f"0.{int(version[1:])}.")


#: the 64-partition fixture the installed jaxlib made (its XLA propagates the before module's results as the
#: optimized module has them: XLA of jaxlib 0.10 gives the 0.12 before module's results other shardings)
HERE = P64 if _made_here(P64) else POD / "jax010_p64"


def _outs(fixture: Path) -> list[np.ndarray[Any, Any]]:
    with np.load(fixture / "out.npz") as z:
        return [z[f"output_{i}"] for i in range(len(z.files))]


def _ins(fixture: Path) -> list[np.ndarray[Any, Any]]:
    with np.load(fixture / "in.npz") as z:
        return [z[str(i)] for i in range(len(z.files))]


def _run_file(fixture: Path, fname: str, tmp_path: Path) -> None:
    """``xlasdk run`` of one dump file from the program's global inputs reproduces JAX's outputs."""
    out = tmp_path / "out.npz"
    n = int(fixture.name.rsplit("_p", 1)[1])
    code, text, err = cli("run", str(fixture / fname), "--inputs", str(fixture / "in.npz"), "--output", str(out))
    assert code == 0, err + text
    want = _outs(fixture)
    if "outputs per partition" in text:
        # XLA of jaxlib 0.10 gives the 0.12 before module's unannotated results other shardings (replicated,
        # where 0.12 splits them): never a guess, each partition's outputs are written
        assert fname.startswith(AFTER) and not _made_here(fixture), text
        assert "do not split the program's results" in text, text
        with np.load(out) as z:
            assert z["output_4"].shape == (n,), z["output_4"].shape
            assert_matches_jax([z["output_4"][k] for k in range(n)], [want[4]] * n, f"{fname} loss per partition")
        return
    with np.load(out) as z:
        got = [z[f"output_{i}"] for i in range(len(want))]
    if fname.startswith(AFTER):
        assert f"on {n} cpu devices" in text and "global inputs split by the parameters' shardings" in text, text
        assert "outputs put together by" in text, text
    if _made_here(fixture):
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same_bits(g, w, f"{fixture.name}/{fname} output {i}")
    assert_matches_jax(got, want, f"{fixture.name}/{fname}")


# -- the fixtures ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fixture", ["jax012_p64", "jax010_p64", "jax012_p256"])
def test_the_optimized_dumps_hold_tuple_all_reduces_and_mesh_replica_groups(fixture: str) -> None:
    text = (POD / fixture / f"{AFTER}.txt").read_text()
    n = int(fixture.rsplit("_p", 1)[1])
    side = int(round(n ** 0.5))
    sizes = sorted(len(re.findall(r"\]", m)) for m in re.findall(r"= \(([^)]*)\) all-reduce\(", text))
    assert sizes == [2, 5], sizes
    assert f"replica_groups=mesh['axis_0'={side},'axis_1'={side}] {{'axis_1'}}" in text
    assert f"replica_groups=[{side},{side}]<=[{n}]" in text
    before = (POD / fixture / f"{BEFORE}.txt").read_text()
    if fixture.startswith("jax012"):
        assert f"sharding={{mesh['data'={side},'model'={side}], [{{'model'}}, {{}}]}}" in before
    assert per_partition_count(xs.load_computation(POD / fixture / f"{AFTER}.hlo.pb")) == n


# -- 64 partitions: run, compare -----------------------------------------------------------------------------
@pytest.mark.parametrize("fname", FILES)
@pytest.mark.parametrize("fixture", ["jax012_p64", "jax010_p64"])
def test_every_file_runs_from_global_inputs_on_64_devices(fixture: str, fname: str, tmp_path: Path) -> None:
    _run_file(POD / fixture, fname, tmp_path)


def test_the_api_runs_the_optimized_dump_from_global_inputs() -> None:
    """``xs.run_per_partition`` (the plan read from the before file beside the dump) gives what the CLI
    gives: JAX's outputs, bit for bit where the same jaxlib made them."""
    path = HERE / f"{AFTER}.hlo.pb"
    plan = PerPartitionPlan.of(xs.load_computation(path), path=path)
    assert plan.num_partitions == 64 and plan.parameter_source is not None
    got = run_per_partition(plan, _ins(HERE))
    for i, (g, w) in enumerate(zip(got, _outs(HERE), strict=True)):
        assert_same_bits(g, w, f"output {i}")


def test_compare_says_match_and_bisect_ops_finds_nothing() -> None:
    """``xlasdk compare`` of the optimized dump (against the reference on the before file's global
    program) says MATCH; ``--bisect ops`` (the module itself on every simulated partition) finds no
    divergence. ``xs.compare`` of the proto says MATCH."""
    code, text, err = cli("compare", str(HERE / f"{AFTER}.txt"), "--inputs", str(HERE / "in.npz"), "--bisect", "ops")
    assert code == 0, err + text
    assert ": MATCH" in text and "bisect ops: no divergence" in text, text
    assert "ran as one partition's program of 64 on 64 cpu devices" in text, text
    path = HERE / f"{AFTER}.hlo.pb"
    report = xs.compare(PerPartitionPlan.of(xs.load_computation(path), path=path), _ins(HERE))
    assert report.ok, str(report)


# -- 64 partitions: a bug planted in one partition's computation -------------------------------------------------
def _plant(tmp_path: Path, old: str, new: str) -> Path:
    """The 64-partition optimized dump (:data:`HERE`) with ``old`` made ``new`` (once), its before file
    beside it."""
    src = (HERE / f"{AFTER}.txt").read_text()
    assert src.count(old) == 1, old
    path = tmp_path / f"{AFTER}.txt"
    path.write_text(src.replace(old, new))
    shutil.copy(HERE / f"{BEFORE}.txt", tmp_path / f"{BEFORE}.txt")
    return path


def _mean_factor() -> tuple[str, str]:
    """The loss's last multiply (``wrapped_multiply``, by 1/128: the mean) and the constant it reads."""
    src = (HERE / f"{AFTER}.txt").read_text()
    m = re.search(r"  %wrapped_multiply = f32\[\] fusion\((%[^,]+), (%[^)]+)\),", src)
    assert m is not None and f"{m.group(2)} = f32[] constant(0.0078125)" in src
    return m.group(0), m.group(2)


def _offset_table(k: int) -> tuple[str, str]:
    """XLA's partition-offset table (``constant.20``: partition -> its column block) and the same table
    with partition ``k``'s entry moved to the next block: only partition ``k`` reads it."""
    src = (HERE / f"{AFTER}.txt").read_text()
    m = re.search(r"%constant\.20 = u32\[64\]\{0\} constant\(\{([^}]*)\}\)", src)
    assert m is not None
    values = m.group(1).split(", ")
    values[k] = str((int(values[k]) + 1) % 8)
    return m.group(0), m.group(0).replace(m.group(1), ", ".join(values))


def test_a_partitions_table_entry_changed_is_named_against_the_good_dump(tmp_path: Path) -> None:
    """Only partition 13 computes with the wrong column block: its replicated outputs disagree with the
    other partitions' (compare judges each tile by the piece farthest from the expected: DIVERGENCE, never
    an error or a piece picked at random); ``--bisect ops --against GOOD`` names the table, the element of
    partition 13."""
    bad = _plant(tmp_path, *_offset_table(13))
    code, text, err = cli("compare", str(bad), "--inputs", str(HERE / "in.npz"), "--against",
                          str(HERE / f"{AFTER}.txt"), "--bisect", "ops", "--json", str(tmp_path / "r.json"))
    assert code == 1, err + text
    assert ": DIVERGENCE" in text and "partition 13's piece differs" in text, text
    assert "bisect ops: localised" in text and "constant.20 (stablehlo.constant" in text, text
    assert "first at [13]" in text, text
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["verdict"] == "DIVERGENCE" and doc["bisect_ops"]["culprit"]["name"] == "constant.20", doc
    assert doc["bisect_ops"]["partitions"] == list(range(64)), doc["bisect_ops"]  # the table is every partition's


def test_a_bug_only_where_partition_id_is_k_is_named_with_its_partition(tmp_path: Path) -> None:
    """``select(partition-id == 13, 1, 1/128)`` planted before the loss's last multiply: the
    bisection (API, against the good per-partition module) names that multiply's fusion, in
    partition 13 only, and the planted select it reads."""
    old, factor = _mean_factor()
    new = ("  %planted.k = u32[] constant(13)\n"
           "  %planted.eq = pred[] compare(%partition-id.1, %planted.k), direction=EQ\n"
           "  %planted.one = f32[] constant(1)\n"
           f"  %planted.c = f32[] select(%planted.eq, %planted.one, {factor})\n" + old.replace(factor, "%planted.c"))
    bad = xs.load_computation(_plant(tmp_path, old, new))
    plan = PerPartitionPlan.of(bad, path=tmp_path / f"{AFTER}.txt")
    good = xs.load_computation(HERE / f"{AFTER}.txt")
    report = xs.compare(plan, _ins(HERE), against=good, bisect="ops")
    assert not report.ok and report.outputs[4].mismatches == 1, str(report)
    b = report.bisect_ops
    assert b.status == "localised" and b.culprit.name == "wrapped_multiply", str(b)
    assert b.partitions == [13] and "reads planted.c" in b.note, str(b)
    assert b.as_dict()["partitions"] == [13]


@pytest.mark.campaign
def test_a_constant_changed_is_named(tmp_path: Path) -> None:
    factor = _mean_factor()[1]
    bad = _plant(tmp_path, f"{factor} = f32[] constant(0.0078125)", f"{factor} = f32[] constant(0.0079)")
    code, text, err = cli("compare", str(bad), "--inputs", str(HERE / "in.npz"), "--bisect", "ops")
    # against the reference on the module itself the module's own meaning holds: nothing to blame, and
    # the report says where to look
    assert code == 1 and ": DIVERGENCE" in text, err + text
    assert "bisect ops: no divergence" in text and "the divergence from the global program is in the module" in text
    code, text, err = cli("compare", str(bad), "--inputs", str(HERE / "in.npz"), "--against",
                          str(HERE / f"{AFTER}.txt"), "--bisect", "ops")
    assert code == 1 and f"{factor[1:]} (stablehlo.constant" in text, err + text
    assert "in every partition (64)" in text, text


@pytest.fixture
def multiply_wrong_on_partition_5(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference's rule of ``multiply`` made wrong (``a * b + 1``) on simulated partition 5 only: the
    device (right) departs from it there, as a device that miscompiles one partition's program would."""
    import xlasdk.reference  # noqa: F401 - binds the rules
    from xlasdk import _optable, ops
    from xlasdk.reference import collectives

    b = xs.XlaBuilder("row")
    p = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, ()), "p")
    row = ops.Mul(p, p).opdef
    right = _optable._EVALUATE[row]

    def wrong(o: Any, a: Any, ev: Any) -> Any:
        v = np.asarray(right(o, a, ev))
        return v + np.float32(1) if collectives._device().partition == 5 else v

    monkeypatch.setitem(_optable._EVALUATE, row, wrong)


def test_a_departure_on_one_simulated_partition_is_named_with_it(multiply_wrong_on_partition_5: None) -> None:
    path = HERE / f"{AFTER}.txt"
    plan = PerPartitionPlan.of(xs.load_computation(path), path=path)
    report = xs.compare(plan, _ins(HERE), bisect="ops")
    b = report.bisect_ops
    assert b.status == "localised" and b.partitions == [5], str(b)
    assert b.culprit.name == "multiply_copy_fusion" and b.culprit.error is not None, str(b)
    assert "in partition 5 of 64" in b.note, b.note
    # inside the fusion (a per-partition program of its own, on every partition's device operand values):
    # the multiply itself, on partition 5 only
    deep = b.deepest
    assert b.region == "called function" and deep.culprit.opcode == "stablehlo.multiply", str(b)
    assert deep.partitions == [5] and b.path.startswith("multiply_copy_fusion > called function > multiply"), b.path


def test_bisect_ops_against_recorded_outputs_says_what_to_use() -> None:
    code, _, err = cli("compare", str(P64 / f"{AFTER}.txt"), "--inputs", str(P64 / "in.npz"), "--against",
                       str(P64 / "out.npz"), "--bisect", "ops")
    assert code == 2 and "--against GOOD.hlo" in err and "leave out --against" in err, err
    code, _, err = cli("compare", str(P64 / f"{AFTER}.txt"), "--inputs", str(P64 / "in.npz"), "--bisect", "passes")
    assert code == 2 and "or its ops with --bisect ops" in err, err


# -- 256 partitions (a long profile) --------------------------------------------------------------------------
@pytest.mark.campaign
@pytest.mark.parametrize("fname", FILES)
def test_256_partitions_run_from_global_inputs(fname: str, tmp_path: Path) -> None:
    _run_file(POD / "jax012_p256", fname, tmp_path)


@pytest.mark.campaign
def test_256_partitions_compare_match() -> None:
    p256 = POD / "jax012_p256"
    if not _made_here(p256):
        pytest.skip("XLA of jaxlib 0.10 gives the 0.12 before module's results other shardings: no global outputs")
    code, text, err = cli("compare", str(p256 / f"{AFTER}.txt"), "--inputs", str(p256 / "in.npz"))
    assert code == 0 and ": MATCH" in text and "on 256 cpu devices" in text, err + text
