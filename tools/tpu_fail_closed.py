"""On a TPU: can a program compiled by the compile-only client (in xlasdk's worker, beside this
process that holds the chip) be loaded on the chip and give the in-process compile's values?"""

import os
import sys
import time

import numpy as np

import xlasdk as xs

os.environ["XLASDK_TPU_COMPILE"] = "in-process"  # the unprotected compile, as the reference here
dev = xs.devices("tpu")[0]
print("chip:", dev, dev.device_kind)
path = sys.argv[1] if len(sys.argv) > 1 else "tests/data/dumps/convnet_train/module.before_optimizations.txt"
comp = xs.load_computation(path)
args = xs.random_inputs(comp, seed=0) if hasattr(xs, "random_inputs") else None
t = time.time()
direct = xs.compile(comp, dev)
print("in-process compile on the chip: %.2f s" % (time.time() - t))
want = direct(*args)
want = [w.to_numpy() for w in (want if isinstance(want, tuple) else (want,))]
topo = xs.topology("v5e:1x1")
t = time.time()
try:
    only = xs.compile(comp, device=topo.devices[0])  # a loaded program: the worker compiles first
    print("topology compile (worker, then here): %.2f s" % (time.time() - t))
except Exception as e:
    print("topology compile FAILED:", type(e).__name__, str(e)[:400])
    raise SystemExit(1) from None
data = only.serialize()
t = time.time()
try:
    loaded = xs.deserialize_executable(data, dev)
    print("deserialize on the chip: %.2f s" % (time.time() - t))
except Exception as e:
    print("deserialize on the chip FAILED:", type(e).__name__, str(e)[:400])
    raise SystemExit(1) from None


def values(exe):
    out = exe(*args)
    return [np.asarray(o.to_numpy()).tobytes() for o in (out if isinstance(out, tuple) else (out,))]


want = [np.asarray(w).tobytes() for w in want]
print("topology executable on the chip, bit-exact with the in-process compile:", values(loaded) == want)
del os.environ["XLASDK_TPU_COMPILE"]
t = time.time()
safe = xs.compile(comp, dev)  # the default now: compiled in the worker, loaded on the chip
took = time.time() - t
print(f"xs.compile of a loaded program on the chip (worker): {took:.2f} s; bit-exact: {values(safe) == want}")
bad = xs.load_computation("tools/tpu_abort_case.hlo")
try:
    xs.compile(bad, dev)
    print("abort case: compiled?!")
except xs.CompileError as e:
    print("abort case: CompileError, this process lives:", str(e)[:240])
