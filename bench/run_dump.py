"""Time to first result: ``xlasdk run DUMP --random-inputs`` against the same work written directly on
jaxlib's calls, each in a fresh process, in interleaved rounds.

The peer (``_PEER`` below) is what a user of jaxlib alone would write, with none of xlasdk's safety:
parse the HLO text with XLA's parser, convert it to StableHLO, make a CPU client, compile, draw
random inputs with numpy, transfer them, run, read the results back. ``xlasdk run`` does the same
work after its own: a supervised child process, the file's checks, the load in the worker
(parse, import, verify), the compile in the worker.

Target (issue "time to first result"): the wall-time ratio xlasdk / peer at most 1.3 on the
project's real dumps (``tests/data/dumps``).

    python bench/run_dump.py [--rounds N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _timing as tm  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DUMPS = ("transformer_bf16", "convnet_train")
TARGET = 1.3

# jaxlib's own calls only (the Aval and sharding helpers are xlasdk's thin stand-ins for jax's
# ShapedArray and SingleDeviceSharding, which these calls want and which need no jax)
_PEER = r"""
import sys
import numpy as np
import jaxlib._hlo as hlo
import jaxlib._jax as J
from jaxlib import xla_client as xc
from xlasdk._jaxlib._pjrt_base import Aval, single_device_sharding
from xlasdk._jaxlib import pjrt

text = open(sys.argv[1]).read()
module = hlo.hlo_module_from_text(text)
proto = bytes(module.as_serialized_hlo_module_proto())
mlir = bytes(J.mlir.hlo_to_stablehlo(proto))
client = xc.make_cpu_client()
dev = client.local_devices()[0]
exe = client.compile_and_load(mlir, xc.DeviceList((dev,)), xc.CompileOptions())
shape = hlo.XlaComputation(proto).program_shape()
rng = np.random.default_rng(0)
sharding = single_device_sharding(dev)
bufs = []
for p in shape.parameter_shapes():
    dt = np.dtype(p.numpy_dtype())
    x = rng.standard_normal(p.dimensions()) if dt.kind in "fcV" else rng.integers(0, 2, p.dimensions())
    x = np.asarray(x).astype(dt)
    bufs.append(pjrt.put(x, Aval(x.shape, dt), sharding, dev))
outs = exe.execute_sharded(bufs).disassemble_into_single_device_arrays()
print(len([np.asarray(memoryview(o[0])) if o[0].dtype.kind != "V" else o[0] for o in outs]))
"""


def child_env() -> dict[str, str]:
    """The environment of the timed processes: this one's, with Python's bytecode cache on. With
    ``PYTHONDONTWRITEBYTECODE`` set (some CI images set it) an editable install recompiles every
    xlasdk module it imports in each process (about 0.3 s), while the peer's jaxlib was compiled
    when pip installed it; a user's installed xlasdk, like jaxlib, has its bytecode from pip."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _wall(argv: list[str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False,
                       cwd=os.path.dirname(ROOT), env=child_env())  # not the source tree: the xlasdk on the path runs
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed: {r.stderr.decode()[-2000:]}")
    return time.perf_counter() - t0


def run(rounds: int = 5) -> list[dict[str, Any]]:
    rows = []
    for name in DUMPS:
        path = os.path.join(ROOT, "tests", "data", "dumps", name, "module.before_optimizations.txt")
        contenders = {
            "xlasdk": ["-m", "xlasdk.cli", "run", path, "--random-inputs"],
            "peer": ["-c", _PEER, path],
        }
        times: dict[str, list[float]] = {k: [] for k in contenders}
        _wall(contenders["xlasdk"])  # warm the file cache and write the interpreter's bytecode
        _wall(contenders["peer"])
        for r in range(rounds):
            order = list(contenders) if r % 2 == 0 else list(reversed(contenders))
            for k in order:
                times[k].append(_wall(contenders[k]))
        ratio = tm.ratio(times["xlasdk"], times["peer"])
        rows.append(tm.row(f"xlasdk run {name} --random-inputs (wall)", "s", round(tm.median(times["xlasdk"]), 3),
                           round(tm.median(times["peer"]), 3), "jaxlib calls alone", round(ratio, 3), TARGET,
                           f"<= {TARGET}x"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", default=None)
    ns = ap.parse_args()
    rows = run(ns.rounds)
    for r in rows:
        print(f"{r['figure']:<58} {r['xlasdk']:>7.3f} s  peer {r['peer']:.3f} s  ratio {r['ratio']:.2f}  "
              f"{'ok' if r['ok'] else 'MISSED'} ({r['target_text']})")
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
