#!/usr/bin/env bash
# The checks to run on a machine with a CUDA GPU, each within a time limit, keeping what each found:
#   1. the test suite (device auto puts every training, decoding and evaluation of the tests on the GPU);
#   2. python -m benchmarks --devices cuda (training, then decoding, rows printed as each finishes).
# Run from the repository root with tbuild installed (pip install -e '.[dev,bench]').
#   TEST_S=300 TRAIN_S=240 DECODE_S=180 OUT=cuda-check bash scripts/cuda-check.sh
# A part cut at its limit gets SIGINT first: pytest then still prints its failures with their tracebacks.
# With pytest-xdist installed the tests run on WORKERS processes (default 8), each on OMP_NUM_THREADS threads.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-cuda-check}
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
python -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 'cuda-check: no CUDA device here (this \
script checks a GPU machine)'); print('torch', torch.__version__, 'on', torch.cuda.get_device_name(0))" || exit 2
mkdir -p "$OUT"
parallel=()
if python -c "import xdist" 2>/dev/null; then
  parallel=(-n "${WORKERS:-8}" --dist loadfile)
fi
start=$SECONDS
timeout -s INT -k 30 "${TEST_S:-300}" python -m pytest -q -p no:cacheprovider -o addopts="" -rfE --tb=short \
  "${parallel[@]}" tests > "$OUT/tests.log" 2>&1
echo "tests: exit $? after $((SECONDS - start)) s; $(tail -1 "$OUT/tests.log")"
grep -E "^(FAILED|ERROR) " "$OUT/tests.log" | head -40
for part in train decode; do
  limit=$([ "$part" = train ] && echo "${TRAIN_S:-240}" || echo "${DECODE_S:-180}")
  start=$SECONDS
  timeout -s INT -k 30 "$limit" python -m benchmarks --devices cuda --only "$part" --shapes tiny,base \
    --repeats 3 --warmup 1 --json "$OUT/bench-$part.json" > "$OUT/bench-$part.txt" 2> "$OUT/bench-$part.log"
  echo "benchmarks --only $part: exit $? after $((SECONDS - start)) s (rows: $OUT/bench-$part.log)"
  grep -vE "^\[transformers\]" "$OUT/bench-$part.log" | tail -20
done
