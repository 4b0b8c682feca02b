#!/usr/bin/env bash
# One call on a TPU machine (the device tool): discovery, sharing with JAX, the worker compile for the
# chip, a held chip, the accelerator bench. Logs under $OUT (default /tmp/tpu_out). Each step is its
# own process: one process at a time may hold the chip.
set -u
OUT="${OUT:-/tmp/tpu_out}"; mkdir -p "$OUT"
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile \
  --no-cache-dir --upgrade --target /tmp/site .whl-tpu/*.whl >/dev/null 2>&1
export PYTHONPATH="${PYTHONPATH:-}:/tmp/site:$PWD"
step() { local name="$1"; shift; local t0=$(date +%s.%N)
  timeout "${STEP_TIMEOUT:-240}" "$@" >"$OUT/$name.log" 2>&1; local rc=$?
  echo "$name rc=$rc $(python3 -c "print(round($(date +%s.%N)-$t0,1))")s" | tee -a "$OUT/summary.txt"
  grep -v "^[IWE][0-9]\{4\} \|^WARNING: Logging\|Source Location\|learning/" "$OUT/$name.log" | tail -n 25; }
step discovery python3 -c "
import time; t=time.time(); import xlasdk as xs
print(xs.devices(), xs.default_device(), round(time.time()-t,2), 's')"
step quickstart_tpu python3 -c "
import runpy, sys, xlasdk as xs
import numpy as np; from xlasdk import ops
b = xs.XlaBuilder('f'); x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (256,)), 'x'); ops.Tanh(x * 2.0)
exe = xs.compile(b.build()); a = np.linspace(-2, 2, 256, dtype=np.float32)
print(exe.devices, np.abs(exe(a).to_numpy() - np.tanh(2 * a)).max())"
step share_jax_first python3 tools/tpu_share.py jax-first
step share_xlasdk_first python3 tools/tpu_share.py xlasdk-first
step xlasdk_first_no_share python3 -c "
import numpy as np, xlasdk as xs
d = xs.device_put(np.ones(3, np.float32)); print('xlasdk', d.device)
import jax, jax.numpy as jnp
print('jax', jax.devices(), jnp.ones(3) + 1)
try: d.to_jax()
except Exception as e: print(type(e).__name__, str(e)[:200])"
step fail_closed python3 tools/tpu_fail_closed.py
( python3 -c "import xlasdk as xs, time; print(xs.devices(), flush=True); time.sleep(25)" > "$OUT/holder.log" 2>&1 & )
sleep 12
step held_elsewhere python3 -c "
import xlasdk as xs
try: print(xs.devices('tpu'))
except Exception as e: print(type(e).__name__, e)"
sleep 25
STEP_TIMEOUT=300 step bench python3 bench/accelerator.py --rounds 5 --json "$OUT/accelerator.json"
