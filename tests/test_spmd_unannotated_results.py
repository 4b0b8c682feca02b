"""A built SPMD program whose parameters are sharded and whose results carry no sharding: XLA makes
such results replicated (jaxlib 0.10.2), and jaxlib 0.12.1's Shardy import aborted the process on
the module ("Expected HloShardingV3 ... but got non-replicated HloShardingV2"). The emitter says
``{replicated}`` for them outright. Run in a child process, so that an abort is a failure here,
not the end of the test run; values checked against numpy."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

import xlasdk as xs
from xlasdk import ops

CHILD = r"""
import json, sys
import numpy as np
import xlasdk as xs
from xlasdk import ops

S = "{devices=[4,1]<=[4]}"
shp = xs.Shape.array_shape(np.float32, (8, 4))
x_np = (np.arange(32, dtype=np.float32).reshape(8, 4) - 16) / 10
w_np = (np.arange(12, dtype=np.float32).reshape(4, 3) - 6) / 7
devs = xs.client("cpu", num_devices=4).devices()
out = {}
for case in ("one_result", "tuple", "dot", "sharded_middle"):
    b = xs.XlaBuilder(case)
    with b.sharding(S):
        x = ops.Parameter(b, 0, shp, "x")
    w = ops.Parameter(b, 1, xs.Shape.array_shape(np.float32, (4, 3)), "w")
    if case == "one_result":
        y = ops.Tanh(x)
    elif case == "tuple":
        y = ops.Tuple(b, [ops.Tanh(x), ops.Exp(x)])
    elif case == "dot":
        y = ops.Dot(x, w)
    else:
        with b.sharding(S):
            t = ops.Tanh(x)
        y = ops.Exp(t)
    exe = xs.compile(b.build(y), devs[0], options=xs.CompileOptions(num_partitions=4))
    res = exe.execute_sharded([x_np, w_np])
    res = res if isinstance(res, (list, tuple)) else [res]
    out[case] = [[str(r.sharding), r.to_numpy().tolist()] for r in res]
print(json.dumps(out))
"""


def test_sharded_parameters_and_unannotated_results_compile_and_come_back_replicated() -> None:
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    x = (np.arange(32, dtype=np.float32).reshape(8, 4) - 16) / 10
    w = (np.arange(12, dtype=np.float32).reshape(4, 3) - 6) / 7
    want = {"one_result": [np.tanh(x)], "tuple": [np.tanh(x), np.exp(x)], "dot": [x.astype(np.float64) @ w],
            "sharded_middle": [np.exp(np.tanh(x))]}
    for case, arrays in want.items():
        assert len(got[case]) == len(arrays), case
        for (sharding, value), expected in zip(got[case], arrays, strict=True):
            assert sharding == "{replicated}", (case, sharding)
            np.testing.assert_allclose(np.array(value), expected, rtol=2e-6, atol=1e-6, err_msg=case)


def test_the_module_says_replicated_only_where_parameters_are_sharded() -> None:
    b = xs.XlaBuilder("plain")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (8, 4)), "x")
    assert "mhlo.sharding" not in b.build(ops.Tanh(x)).as_stablehlo_text()
    b = xs.XlaBuilder("sharded")
    with b.sharding("{devices=[4,1]<=[4]}"):
        x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (8, 4)), "x")
    text = b.build(ops.Tanh(x)).as_stablehlo_text()
    assert 'mhlo.sharding = "{replicated}"' in text.split("func.func public @main", 1)[1].split("{\n", 1)[0], text



LOADED_CHILD = r"""
import json
import numpy as np
import xlasdk as xs

S = "{devices=[4,1]<=[4]}"
text = ("HloModule m, entry_computation_layout={(f32[8,4]{1,0})->f32[8,4]{1,0}}, num_partitions=4\n\nENTRY main {\n"
        f"  x = f32[8,4] parameter(0), sharding={S}\n  ROOT t = f32[8,4] tanh(x)\n}}\n")
x_np = (np.arange(32, dtype=np.float32).reshape(8, 4) - 16) / 10
devs = xs.client("cpu", num_devices=4).devices()
try:
    exe = xs.compile(xs.XlaComputation.from_hlo_text(text), devs[0], options=xs.CompileOptions(num_partitions=4))
except xs.CompileError as e:
    print(json.dumps({"error": str(e)}))
else:
    res = exe.execute_sharded([x_np])
    res = res[0] if isinstance(res, (list, tuple)) else res
    print(json.dumps({"value": res.to_numpy().tolist()}))
"""


def test_a_loaded_module_with_sharded_parameters_and_unannotated_results_never_kills_the_process() -> None:
    """The same as HLO text loaded from a file: xlasdk does not rewrite a loaded module's result
    shardings (where XLA propagates shardings to the outputs, a module that allows it, a {replicated}
    written in would change what it computes). jaxlib 0.10.2 runs it (right values); jaxlib 0.12.1's
    Shardy import aborts on it, in xlasdk's worker: a CompileError with XLA's words, the process alive."""
    p = subprocess.run([sys.executable, "-c", LOADED_CHILD], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    x = (np.arange(32, dtype=np.float32).reshape(8, 4) - 16) / 10
    if "error" in got:
        assert "XLA aborted" in got["error"] and "HloShardingV3" in got["error"], got["error"]
    else:
        np.testing.assert_allclose(np.array(got["value"]), np.tanh(x), rtol=2e-6, atol=1e-6)
