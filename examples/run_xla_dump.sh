#!/usr/bin/env bash
# Dump what XLA compiles for an xlasdk program (XLA_FLAGS=--xla_dump_to), then inspect, convert
# and run the dump files with the `xlasdk` command, and check the results against numpy.
#
#     bash examples/run_xla_dump.sh [WORKDIR]
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${1:-$(mktemp -d -t xlasdk-dump-XXXXXX)}
mkdir -p "$WORK"
if command -v xlasdk >/dev/null 2>&1; then XLASDK=(xlasdk); else XLASDK=(python -m xlasdk.cli); fi

# 1. Compile the softmax of examples/save_and_load.py with XLA's dump flags on; keep inputs and
#    the expected output (numpy) for later.
XLA_FLAGS="--xla_dump_to=$WORK/dump --xla_dump_hlo_as_text --xla_dump_hlo_as_proto" \
python - "$WORK" "$HERE" <<'EOF'
import sys
import numpy as np
import xlasdk as xs
sys.path.insert(0, sys.argv[2])
from save_and_load import build, reference

rng = np.random.default_rng(0)
x, w, b = (rng.standard_normal(s, dtype=np.float32) for s in ((4, 3), (3, 5), (5,)))
np.savez(f"{sys.argv[1]}/inputs.npz", x=x, w=w, b=b)
np.save(f"{sys.argv[1]}/x.npy", x)
np.save(f"{sys.argv[1]}/expected.npy", reference(x, w, b))
xs.compile(build())
EOF
echo "== XLA wrote:"
ls "$WORK/dump" | grep -E 'dense_softmax\.(before_optimizations|cpu_after_optimizations)\.(txt|hlo\.pb)$'

BEFORE=$(ls "$WORK"/dump/*dense_softmax.before_optimizations.txt | head -1)
AFTER=$(ls "$WORK"/dump/*dense_softmax.cpu_after_optimizations.txt | head -1)
AFTER_PB=$(ls "$WORK"/dump/*dense_softmax.cpu_after_optimizations.hlo.pb | head -1)

# 2. Inspect: program shape, op counts, cost analysis, memory; the optimized module's fusions.
echo "== xlasdk inspect (before optimizations)"
"${XLASDK[@]}" inspect "$BEFORE"
echo "== xlasdk inspect --no-compile (after optimizations)"
"${XLASDK[@]}" inspect --no-compile "$AFTER"

# 3. Run both dumps on the inputs (by parameter name), timing 200 runs of the optimized one.
echo "== xlasdk run"
"${XLASDK[@]}" run "$BEFORE" --inputs "$WORK/inputs.npz" --output "$WORK/before_out.npz"
"${XLASDK[@]}" run "$AFTER_PB" --device cpu:0 --inputs "$WORK/inputs.npz" --output "$WORK/after_out.npz" --repeat 200
# one input from a .npy, the others random (seeded)
"${XLASDK[@]}" run "$AFTER" --input x="$WORK/x.npy" --random-inputs --seed 7

# 4. Convert the dump to a portable artifact and StableHLO text; run the artifact.
"${XLASDK[@]}" convert "$BEFORE" "$WORK/softmax.mlirbc"
"${XLASDK[@]}" convert "$AFTER" "$WORK/softmax_optimized.mlir"
"${XLASDK[@]}" run "$WORK/softmax.mlirbc" --inputs "$WORK/inputs.npz" --output "$WORK/artifact_out.npz"

# 5. An input of the wrong shape is an error naming the parameter (exit code 2).
python -c "import numpy as np; np.save('$WORK/bad.npy', np.zeros((3, 4), np.float32))"
set +e
"${XLASDK[@]}" run "$BEFORE" --input x="$WORK/bad.npy" --random-inputs
code=$?
set -e
echo "(exit code $code)"

# 6. Every output matches numpy.
python - "$WORK" <<'EOF'
import sys
import numpy as np
want = np.load(f"{sys.argv[1]}/expected.npy")
for name in ("before_out", "after_out", "artifact_out"):
    got = np.load(f"{sys.argv[1]}/{name}.npz")["output_0"]
    assert np.allclose(got, want, rtol=1e-5, atol=1e-6), name
print("all dump runs match numpy; files in", sys.argv[1])
EOF
test "$code" -eq 2
