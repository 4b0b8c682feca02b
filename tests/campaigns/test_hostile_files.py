"""Hostile files for every loader and the CLI (issue 9, campaign 1); see ``hostile_files.py``.

The quick profile (140 inputs, 66 of them the fixed hostile ones, and 12 CLI runs) runs in the default
suite; the long profile (10,000 inputs through every loader, 400 CLI runs) is ``pytest -m campaign``.
Both assert that no input killed or hung the process, and that every failure was an xlasdk error;
failures are printed with the path of their saved input and a reproducer.
"""

from __future__ import annotations

import os
import random
import tempfile
from typing import Any

import hostile_files as hf
import pytest


@pytest.fixture(scope="module")
def seeds() -> list[hf.Seed]:
    assert os.path.isdir(hf.DUMPS), f"the committed corpus of real dumps is missing: {hf.DUMPS}"
    return hf.all_seeds()


def test_seeds_cover_every_format(seeds: list[hf.Seed]) -> None:
    kinds = {s.kind for s in seeds if not s.name.startswith("saved/")}
    assert {"hlo", "mlir", "mlirbc", "pb"} <= kinds, kinds
    saved = {s.name.rsplit(".", 1)[-1] for s in seeds if s.name.startswith("saved/")}
    assert {"hlo", "mlir", "mlirbc", "pb"} <= saved, saved


def test_inputs_are_a_function_of_seed_and_index(seeds: list[hf.Seed]) -> None:
    a, b = hf.Generator(seeds, 7), hf.Generator(list(seeds), 7)
    for i in (0, 1, 17, 999, 123456):
        x, y = a.make(i), b.make(i)
        assert (x.key, x.data, x.mutation) == (y.key, y.data, y.mutation)
    assert hf.Generator(seeds, 8).make(0).key != a.make(0).key


def test_protobuf_codec_round_trips_the_real_protos(seeds: list[hf.Seed]) -> None:
    protos = [s for s in seeds if s.kind == "pb"]
    assert protos
    for s in protos:
        assert hf.encode_message(hf.decode_message(s.data)) == s.data, s.name


def test_every_text_mutation_applies_to_some_seed(seeds: list[hf.Seed]) -> None:
    rng = random.Random(0)
    for kind, table in (("hlo", hf.HLO_MUTATIONS), ("mlir", hf.MLIR_MUTATIONS)):
        texts = [s.data.decode() for s in seeds if s.kind == kind]
        for mutate in set(table):
            changed = 0
            for text in texts:
                lines = text.split("\n")
                if mutate(rng, lines) is not None and "\n".join(lines) != text:
                    changed += 1
            assert changed, f"{mutate.__name__} changed no {kind} seed"


def _run(profile: hf.Profile, seeds: list[hf.Seed], capsys: Any) -> hf.Campaign:
    out = tempfile.mkdtemp(prefix=f"hostile-{profile.name}-")  # kept: it holds the failing inputs
    inputs = hf.make_inputs(profile, seeds)

    def progress(line: str) -> None:  # the long profile takes hours: show where it is
        with capsys.disabled():
            print(line, flush=True)

    camp = hf.run_campaign(profile, out_dir=out, inputs=inputs, progress=progress if profile is hf.LONG else None)
    with capsys.disabled():
        print("\n" + camp.figures())
        if camp.failures or camp.cli_failures:
            print(camp.describe_failures())
    assert len(camp.results) == profile.files
    assert len(camp.cli) == profile.cli
    assert any(r.outcome == "ok" for r in camp.results), "no input loaded: the campaign tests nothing"
    failed, cli_failed = len(camp.failures), len(camp.cli_failures)
    if failed or cli_failed:
        pytest.fail(f"{failed} inputs and {cli_failed} CLI runs failed (inputs saved under {out}):\n"
                    + camp.describe_failures(), pytrace=False)
    return camp


def test_hostile_files_quick(seeds: list[hf.Seed], capsys: Any) -> None:
    _run(hf.QUICK, seeds, capsys)


@pytest.mark.campaign
def test_hostile_files_long(seeds: list[hf.Seed], capsys: Any) -> None:
    camp = _run(hf.LONG, seeds, capsys)
    assert len(camp.results) >= 10_000 and len(camp.cli) >= 400
