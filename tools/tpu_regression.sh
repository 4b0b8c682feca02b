#!/usr/bin/env bash
# One call on a TPU machine (the device tool) after a change to the runtime or the debugging tools:
# the platform-independent tests, compare of the real programs on the chip (no false alarm), the
# TPU-optimized dumps run as compiled, and the accelerator bench. Logs and figures under $OUT
# (default /tmp/tpu_out); a summary line per step in $OUT/summary.txt. Each step is its own process:
# one process at a time may hold the chip. About 7-9 minutes; run from the project root with the
# ignored folder of wheels carried (.whl-tpu: flatbuffers, protobuf; see ../shared/accelerators/TPU.md).
set -u
OUT="${OUT:-/tmp/tpu_out}"; mkdir -p "$OUT"
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile \
  --no-cache-dir --upgrade --target /tmp/site .whl-tpu/*.whl >/dev/null 2>&1
export PYTHONPATH="${PYTHONPATH:-}:/tmp/site:$PWD"
step() { local name="$1" limit="$2"; shift 2; local t0; t0=$(date +%s.%N)
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1; local rc=$?
  echo "$name rc=$rc $(python3 -c "print(round($(date +%s.%N)-$t0,1))")s" | tee -a "$OUT/summary.txt"
  grep -v "^[IWE][0-9]\{4\} \|^WARNING: Logging\|Source Location\|learning/" "$OUT/$name.log" | tail -n 12; }
python3 -c "import jax, jaxlib, numpy; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, 'numpy', numpy.__version__)" \
  | tee -a "$OUT/summary.txt"
# 1. the platform-independent tests that cover the program model, the evaluator and compare (on the CPU there)
step tests_cpu "${TESTS_LIMIT:-240}" python3 -m pytest -p no:cacheprovider -o addopts="-m 'not campaign'" -q -x \
  tests/test_layers.py tests/test_computation_model.py tests/test_graph_import.py tests/test_attr_kinds.py \
  tests/test_reference.py tests/test_compare_against.py tests/test_compare_deep.py tests/test_op_props.py \
  tests/test_built_index.py tests/test_typed_rules.py tests/test_tpu_dumps.py
# the recorded inputs and JAX's outputs of each real program as the CLI reads them (keys 0, 1, ... and
# output_0, ...; raw bf16 bytes named in a "__dtypes__" manifest, as `xlasdk run --output` writes them)
IO=/tmp/tpu_io; mkdir -p "$IO"
python3 - "$IO" <<'PY'
import json, pathlib, sys
import numpy as np
out = pathlib.Path(sys.argv[1])
for d in pathlib.Path("tests/data/dumps").iterdir():
    if not (d / "io.npz").exists():
        continue
    with np.load(d / "io.npz", allow_pickle=False) as z:
        for prefix, key, name in (("in", "in_dtypes", "{}"), ("out", "out_dtypes", "output_{}")):
            types = [str(t) for t in z[key]]
            arrays = {name.format(i): z[f"{prefix}{i}"] for i in range(len(types))}
            raw = {name.format(i): t for i, t in enumerate(types) if z[f"{prefix}{i}"].dtype.kind == "V"}
            extra = {"__dtypes__": np.array(json.dumps(raw))} if raw else {}
            np.savez(out / f"{d.name}.{prefix}.npz", **arrays, **extra)
PY
# 2. the real programs on the chip: compare against the reference (a correct program must not diverge)
for p in convnet_train gru_scan int_indexing transformer_bf16; do
  step "compare_tpu_$p" 90 python3 -m xlasdk.cli compare "tests/data/dumps/$p/module.before_optimizations.txt" \
    --device tpu:0 --inputs "$IO/$p.in.npz" --json "$OUT/compare_$p.json"
done
# the outputs of one program as compiled from before optimizations (beside its optimized dump's, below)
step run_tpu_before_convnet_train 90 python3 -m xlasdk.cli run \
  tests/data/dumps/convnet_train/module.before_optimizations.txt --device tpu:0 --inputs "$IO/convnet_train.in.npz" \
  --output "$OUT/before_opt_outputs_convnet_train.npz"
# 3. the TPU-optimized dumps as compiled, on the chip, against JAX's outputs
#    (their outputs kept: compare them off the chip with `xlasdk compare ... --outputs FILE --device-kind tpu-v5e`),
#    and compared on the chip against the reference evaluator
for p in convnet_train gru_scan int_indexing transformer_bf16; do
  step "run_tpu_optimized_$p" 90 python3 -m xlasdk.cli run "tests/data/dumps_tpu/$p/module.after_optimizations.txt" \
    --device tpu:0 --inputs "$IO/$p.in.npz" --expect "$IO/$p.out.npz" --output "$OUT/after_opt_outputs_$p.npz"
  step "compare_tpu_optimized_$p" 120 python3 -m xlasdk.cli compare \
    "tests/data/dumps_tpu/$p/module.after_optimizations.txt" --device tpu:0 --inputs "$IO/$p.in.npz" \
    --json "$OUT/compare_optimized_$p.json"
done
# 4. the accelerator bench (dispatch, transfers, matmul against JAX in separate processes)
step bench "${BENCH_LIMIT:-200}" python3 bench/accelerator.py --rounds 5 --json "$OUT/accelerator.json"
