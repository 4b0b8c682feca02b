"""``xlasdk run --expect OUT.npz --expect-device-kind KIND`` and ``xlasdk compare --outputs OUT.npz
--device-kind KIND`` give one verdict (issue 47): on the README's example, the conv-net training step
whose outputs a TPU v5e recorded (``tests/data/dumps_tpu/convnet_train/tpu_v5e_outputs.npz``), run
said CANNOT JUDGE (exit 1) where compare said MATCH. Both now judge the recorded outputs by the same
call (``xs.compare(..., outputs=, device_kind=)``); run also judges its own outputs so, and both
give the same verdict and exit code on the example and on planted bugs: one output element 1% off
in the recorded file, and a ``subtract`` turned into ``add`` in the program."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tests.test_cli import cli
from tests.test_real_dumps import recorded

DATA = Path(__file__).resolve().parent / "data"
MODULE = DATA / "dumps" / "convnet_train" / "module.before_optimizations.txt"
TPU_OUTPUTS = DATA / "dumps_tpu" / "convnet_train" / "tpu_v5e_outputs.npz"
VERDICT = re.compile(r": (MATCH|DIVERGENCE|CANNOT JUDGE)\b")


@pytest.fixture(scope="module")
def inputs_npz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ins, _ = recorded("dumps/convnet_train")
    path = tmp_path_factory.mktemp("convnet") / "in.npz"
    np.savez(path, **{str(i): a for i, a in enumerate(ins)})  # by parameter index
    return path


def _both(module: Path, inputs: Path, outputs: Path) -> tuple[tuple[int, str], tuple[int, str]]:
    """(exit code, verdict) of compare --outputs and of run --expect on the same files."""
    code_c, out_c, err_c = cli("compare", str(module), "--inputs", str(inputs), "--outputs", str(outputs),
                               "--device-kind", "tpu-v5e")
    head = out_c.splitlines()[0] if out_c else ""
    m = VERDICT.search(head)
    assert m is not None, (out_c, err_c)
    code_r, out_r, err_r = cli("run", str(module), "--inputs", str(inputs), "--expect", str(outputs),
                               "--expect-device-kind", "tpu-v5e")
    line = next((ln for ln in out_r.splitlines() if ": outputs vs " in ln), "")
    n = VERDICT.search(line)
    assert n is not None, (out_r, err_r)
    return (code_c, m.group(1)), (code_r, n.group(1))


def test_the_readme_example_gives_compares_verdict(inputs_npz: Path) -> None:
    compared, ran = _both(MODULE, inputs_npz, TPU_OUTPUTS)
    assert compared == (0, "MATCH")
    assert ran == compared


def test_a_recorded_output_off_by_one_percent_diverges_in_both(inputs_npz: Path, tmp_path: Path) -> None:
    d = np.load(TPU_OUTPUTS)
    outs = {k: d[k].copy() for k in d.files}
    k = "output_4"  # the second convolution's kernel gradient
    outs[k].flat[int(np.argmax(np.abs(outs[k])))] *= np.float32(1.01)
    planted = tmp_path / "planted.npz"
    np.savez(planted, **outs)
    compared, ran = _both(MODULE, inputs_npz, planted)
    assert compared == (1, "DIVERGENCE")
    assert ran == compared


def test_a_bug_planted_in_the_program_diverges_in_both(inputs_npz: Path, tmp_path: Path) -> None:
    text = MODULE.read_text()
    old = "%sub.25 = f32[3,3,4,8]{3,2,1,0} subtract("
    assert text.count(old) == 1
    buggy = tmp_path / "buggy.txt"
    buggy.write_text(text.replace(old, "%sub.25 = f32[3,3,4,8]{3,2,1,0} add("))
    compared, ran = _both(buggy, inputs_npz, TPU_OUTPUTS)
    assert compared == (1, "DIVERGENCE")
    assert ran == compared
