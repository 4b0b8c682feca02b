"""``compare`` of an optimized per-partition dump with nothing beside it that says what its global
program is (no before_optimizations file: what ``reduce --until diverge`` writes of such a dump,
``MIN.hlo`` with its stacked per-partition ``MIN.npz``): each partition's outputs judged against the
reference evaluator on the module as written, every partition simulated
(``xlasdk.reference._per_partition_written``). It was refused ("the outputs cannot be put together").

Fixture: ``tests/test_pod_partitions.py``'s 64-partition MLP step, its optimized module copied alone;
the planted bug: ``tests/test_reduce_partitions.py``'s (the reference's float multiply wrong on
simulated partition 5 only, so the device, right, departs from it there). Oracles: a correct run is
MATCH on every partition; the planted partition, and only it, is named; ``--bisect ops`` names the
multiply."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import raises
from tests.test_pod_partitions import AFTER, HERE, cli
from tests.test_reduce_partitions import float_multiply_wrong_on_partition_5  # noqa: F401 - a fixture
from xlasdk.runtime.per_partition import PerPartitionPlan

N = 64


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the optimized module alone in a directory, its stacked per-partition inputs)."""
    d = tmp_path_factory.mktemp("alone")
    src = HERE / f"{AFTER}.txt"
    plan = PerPartitionPlan.of(xs.load_computation(src), path=str(src), num_partitions=N)
    with np.load(HERE / "in.npz") as z:
        parts = plan.split([z[k] for k in z.files])
    np.savez(d / "min.npz", **{f"arg{i}": np.stack([p[i] for p in parts]) for i in range(len(parts[0]))})
    shutil.copy(src, d / "min.hlo")
    return d / "min.hlo", d / "min.npz"


def _stacked(path: Path) -> list[np.ndarray[Any, Any]]:
    with np.load(path) as z:
        return [z[f"arg{i}"] for i in range(len(z.files))]


def test_a_right_module_alone_is_a_match_on_every_partition(alone: tuple[Path, Path]) -> None:
    hlo, npz = alone
    code, text, err = cli("compare", str(hlo), "--inputs", str(npz))
    assert code == 0, err + text
    assert "reference evaluator on the module as written, each of 64 partitions simulated: MATCH" in text, text
    assert "each partition is judged against the module as written" in text, text


def test_the_planted_partition_alone_is_named(alone: tuple[Path, Path],
                                              float_multiply_wrong_on_partition_5: None) -> None:  # noqa: F811
    hlo, npz = alone
    plan = PerPartitionPlan.of(xs.load_computation(hlo), path=str(hlo), num_partitions=N)
    assert plan.before is None
    report = xs.compare(plan, _stacked(npz))
    assert not report.ok
    departs = [ln for ln in report.judged_by if "depart" in ln]  # through the all-reduces, every partition
    assert departs and all(" 5," in ln for ln in departs), report.judged_by
    code, text, err = cli("compare", str(hlo), "--inputs", str(npz), "--bisect", "ops")
    assert code == 1, err + text
    assert "DIVERGENCE" in text and "multiply" in text and "in partition 5" in text, text


def test_arguments_that_are_not_stacked_are_refused(alone: tuple[Path, Path]) -> None:
    hlo, _ = alone
    plan = PerPartitionPlan.of(xs.load_computation(hlo), path=str(hlo), num_partitions=N)
    with raises(xs.XlaSdkError, "stacked on a leading axis", "64x"):
        xs.compare(plan, [np.zeros((3,), np.float32)])
