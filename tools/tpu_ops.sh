#!/usr/bin/env bash
# The op suite on a TPU chip, one call of the device tool at a time (each call is limited to 10
# minutes; the whole of tests/ops takes about 25): run from the project root with the ignored folder
# of wheels carried (.whl-tpu: flatbuffers, protobuf; see ../shared/accelerators/TPU.md):
#
#   tools/tpu_ops.sh [--budget SECONDS] [FILE...]      (default: every tests/ops/test_*.py)
#
# (pyproject's addopts give -q: one more would drop the "N passed, M failed" line read below.)
# Files run one after the other, each in its own process (one process at a time may hold the chip),
# until the budget is spent; the files not reached are listed so the next call can take them.
# Under $OUT (default /tmp/tpu_out): one log per file, failures.txt ("test :: phase :: last line"),
# summary.txt (per file: passed/failed/skipped and seconds), not_run.txt.
set -u
OUT="${OUT:-/tmp/tpu_out}"; mkdir -p "$OUT"
budget=540
if [ "${1:-}" = "--budget" ]; then budget="$2"; shift 2; fi
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(tests/ops/test_*.py)
if [ -d .whl-tpu ]; then
  PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile \
    --no-cache-dir --upgrade --target /tmp/site .whl-tpu/*.whl >/dev/null 2>&1
fi
export PYTHONPATH="${PYTHONPATH:-}:/tmp/site:$PWD"
export XLASDK_TEST_PLATFORM="${XLASDK_TEST_PLATFORM:-tpu}"
start=$(date +%s)
: > "$OUT/not_run.txt"
for f in "${files[@]}"; do
  left=$(( budget - ($(date +%s) - start) ))
  if [ "$left" -lt 30 ]; then echo "$f" >> "$OUT/not_run.txt"; continue; fi
  name=$(basename "$f" .py)
  t0=$(date +%s)
  timeout "$left" python3 -m pytest -p no:xdist -p no:cacheprovider -rfE --tb=line \
    "$f" > "$OUT/$name.log" 2>&1
  rc=$?
  line=$(grep -E "^(=+ )?[0-9]+ (passed|failed|skipped|error)" "$OUT/$name.log" | tail -n 1)
  echo "$name rc=$rc $(( $(date +%s) - t0 ))s ${line:-no summary (stopped at the budget?)}" | tee -a "$OUT/summary.txt"
  grep -E "^(FAILED|ERROR) " "$OUT/$name.log" | sed 's/ - / :: /' >> "$OUT/failures.txt"
done
[ -s "$OUT/not_run.txt" ] && { echo "not run (budget spent):"; cat "$OUT/not_run.txt"; }
exit 0
