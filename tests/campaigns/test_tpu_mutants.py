"""TPU-dump mutants judged by ``xlasdk compare MUTANT --against ORIGINAL`` (issue 47); see ``tpu_mutants.py``.

The quick profile (4 mutants of the small dumps: planted, neutral and damaged; one planted mutant of
the conv net judged against a TPU's recorded outputs) runs in the default suite; the long profile
(120 mutants of every dump, those of the two recorded programs judged both ways) is
``pytest -m campaign``, its seed ``XLASDK_TPU_MUTANTS_SEED`` (default 4701). Both fail on a death, a
hang, a raw exception, an exit code outside 0-3, a multi-line refusal of a damaged file, or a wrong
verdict against the reference evaluator's outputs of both modules.
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
import tpu_mutants as tm

LONG_SEED = int(os.environ.get("XLASDK_TPU_MUTANTS_SEED", str(tm.LONG.seed)))


def test_every_mutation_applies_to_some_dump() -> None:
    texts = [open(tm.seed_path(p)).read() for p in tm.ALL]
    for mutate in tm.PLANTED + tm.NEUTRAL:
        changed = 0
        for k, text in enumerate(texts):
            lines = text.split("\n")
            if mutate(random.Random(k), lines) is not None and "\n".join(lines) != text:
                changed += 1
        assert changed, f"{mutate.__name__} changed no dump"


def test_mutants_are_a_function_of_seed_and_index() -> None:
    for i in range(8):
        a, b = tm.make(tm.QUICK, 5, i), tm.make(tm.QUICK, 5, i)
        assert (a.program, a.kind, a.change, a.data) == (b.program, b.kind, b.change, b.data)
    kinds = {tm.make(tm.QUICK, 5, i).kind for i in range(4)}
    assert kinds == {"planted", "neutral", "damaged"}


def test_the_judge_counts_wrong_verdicts_and_no_misses_for_dead_changes() -> None:
    planted = tm.Mutant("k", "p", "planted", "c", b"")
    neutral = tm.Mutant("k", "p", "neutral", "c", b"")
    damaged = tm.Mutant("k", "p", "damaged", "c", b"")
    assert tm.judge(planted, "clear", 1, "", False) == "ok"
    assert tm.judge(planted, "clear", 0, "", False) == "wrong"
    assert tm.judge(planted, "same", 0, "", False) == "ok"  # a dead change: MATCH is right, not a miss
    assert tm.judge(planted, "same", 1, "", False) == "wrong"
    assert tm.judge(planted, "close", 0, "", False) == "ok"
    assert tm.judge(neutral, "same", 1, "", False) == "wrong"
    assert tm.judge(neutral, "same", 0, "Traceback (most recent call last):\n", False) == "raw"
    assert tm.judge(damaged, "", 2, "xlasdk compare: error: bad\n", False) == "ok"
    assert tm.judge(damaged, "", 2, "xlasdk compare: error: bad\nmore\n", False) == "messy"
    assert tm.judge(damaged, "", -11, "", False) == "death"
    assert tm.judge(damaged, "", None, "", True) == "hang"


def test_the_oracle_reads_every_float_type_as_a_float() -> None:
    # bfloat16's dtype kind is "V": the long run's first oracle compared such outputs bit for bit and
    # called a 0.3% change of a bf16 transformer's output "clear" (3 false wrong verdicts of 22)
    import ml_dtypes
    import numpy as np

    ns: dict[str, Any] = {}
    exec(compile(tm.ORACLE_SOURCE, "<oracle>", "exec"), ns)
    differs = ns["_differs"]
    for dtype in (np.float32, ml_dtypes.bfloat16, np.float16):
        a = np.array([74.5, -73.5, 1.0], dtype)
        assert differs(a, a.copy(), tm.CLEAR) == "same"
        assert differs(np.array([74.5, -73.5, 1.25], dtype), a, tm.CLEAR) == "close"
        assert differs(np.array([74.5, -73.5, 20.0], dtype), a, tm.CLEAR) == "clear"
        assert differs(np.array([74.5, -73.5, np.nan], dtype), a, tm.CLEAR) == "clear"
    assert differs(np.array([1, 2], np.int32), np.array([1, 3], np.int32), tm.CLEAR) == "clear"


def _run(profile: tm.Profile, seed: int, capsys: Any) -> tm.Campaign:
    def progress(line: str) -> None:
        with capsys.disabled():
            print(line, flush=True)

    camp = tm.run_campaign(profile, seed, progress=progress if profile is tm.LONG else None)
    with capsys.disabled():
        print("\n" + camp.figures())
    assert len({r.mutant.key for r in camp.results}) == profile.mutants
    assert not camp.oracle_failures, camp.oracle_failures
    if camp.failures:
        pytest.fail(f"{len(camp.failures)} mutants failed:\n{camp.describe_failures()}", pytrace=False)
    return camp


def test_tpu_mutants_quick(capsys: Any) -> None:
    camp = _run(tm.QUICK, tm.QUICK.seed, capsys)
    assert {r.rc for r in camp.results if r.mutant.kind == "planted" and r.oracle == "clear"} == {1}, camp.figures()


def test_tpu_mutants_against_recorded_tpu_outputs_quick(capsys: Any) -> None:
    camp = _run(tm.RECORDED_QUICK, tm.RECORDED_QUICK.seed, capsys)
    assert [(r.mode, r.oracle, r.rc) for r in camp.results] == [("outputs", "clear", 1)], camp.figures()


@pytest.mark.campaign
def test_tpu_mutants_long(capsys: Any) -> None:
    _run(tm.LONG, LONG_SEED, capsys)
