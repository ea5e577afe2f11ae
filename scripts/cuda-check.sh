#!/usr/bin/env bash
# The checks to run on a machine with a CUDA GPU, in at most ~8 minutes, each part within a time limit,
# keeping what each found in $OUT:
#   0. setup: what the machine cannot import is installed from wheels/ (scripts/gpu-wheels.sh, run where
#      there is a network) into .gpu-site/, and tbuild is this working tree (no install);
#   1. the test suite (device auto puts every training, decoding and evaluation of the tests on the GPU);
#   2. python -m benchmarks --devices cuda --only train: base and big, tbuild against torch and HF Marian;
#   3. the recipe: `tbuild train specs/multi30k.yaml --profile 30` (GPU busy %, top kernels, host gaps), again
#      with train.packing,
#      then a minute of its training with `nvidia-smi dmon` beside it (SM busy %);
#   4. python -m benchmarks --devices cuda --only decode.
#   TEST_S=140 TRAIN_S=110 PROFILE_S=50 RECIPE_S=90 DECODE_S=45 OUT=cuda-check bash scripts/cuda-check.sh
# A part cut at its limit gets SIGINT first: pytest then still prints its failures with their tracebacks.
# With pytest-xdist installed the tests run on WORKERS processes (default 12), each on OMP_NUM_THREADS threads.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-cuda-check}
PYTHON=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
$PYTHON -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 'cuda-check: no CUDA device here (this \
script checks a GPU machine)'); print('torch', torch.__version__, 'on', torch.cuda.get_device_name(0))" || exit 2
mkdir -p "$OUT"
site="$PWD/.gpu-site"
mkdir -p "$site/tbuild"
touch "$site/tbuild/__init__.py"
for part in builder components engine cli; do ln -sfn "$PWD/$part" "$site/tbuild/$part"; done
export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
# The data sets: a carried copy (.gpu-data/, e.g. `cp -r ../shared/data/multi30k .gpu-data/`), as a mirror.
[ -z "${TBUILD_DATA_MIRROR:-}" ] && [ -d .gpu-data ] && export TBUILD_DATA_MIRROR="$PWD/.gpu-data"
if [ -d wheels ]; then
  for w in wheels/*.whl; do
    module=$(basename "$w" | cut -d- -f1)
    $PYTHON -c "import $module" 2>/dev/null || $PYTHON -m pip install -q --no-index --no-deps --target "$site" "$w"
  done
fi
$PYTHON -c "import tbuild.cli.app, pydantic; print('tbuild from', tbuild.cli.app.__file__, '| pydantic', pydantic.VERSION)" \
  || { echo "cuda-check: tbuild does not import (carry wheels/: bash scripts/gpu-wheels.sh)"; exit 2; }
git rev-parse --short HEAD 2>/dev/null | sed 's/^/commit /'
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

parallel=()
if $PYTHON -c "import xdist" 2>/dev/null; then
  parallel=(-n "${WORKERS:-12}" --dist loadfile)
fi
start=$SECONDS
timeout -s INT -k 20 "${TEST_S:-140}" $PYTHON -m pytest -q -p no:cacheprovider -o addopts="" -rfE --tb=short \
  "${parallel[@]}" tests > "$OUT/tests.log" 2>&1
echo "tests: exit $? after $((SECONDS - start)) s; $(tail -1 "$OUT/tests.log")"
grep -E "^(FAILED|ERROR) " "$OUT/tests.log" | head -30

start=$SECONDS
timeout -s INT -k 20 "${TRAIN_S:-110}" $PYTHON -m benchmarks --devices cuda --only train --shapes base,big \
  --peers torch,hf --repeats 3 --warmup 1 --json "$OUT/bench-train.json" > "$OUT/bench-train.txt" 2> "$OUT/bench-train.log"
echo "benchmarks --only train: exit $? after $((SECONDS - start)) s"
grep -vE "^\[transformers\]" "$OUT/bench-train.log" | tail -12

start=$SECONDS
recipe=(-m tbuild.cli train specs/multi30k.yaml --set "output_dir=$OUT/multi30k")
timeout -s INT -k 20 "${PROFILE_S:-50}" $PYTHON "${recipe[@]}" --profile 30 > "$OUT/recipe-profile.txt" 2>&1
echo "recipe --profile 30: exit $? after $((SECONDS - start)) s"
start=$SECONDS
timeout -s INT -k 20 "${PROFILE_S:-50}" $PYTHON -m tbuild.cli train specs/multi30k.yaml --set train.packing=true \
  --set "output_dir=$OUT/multi30k-packed" --profile 30 > "$OUT/recipe-packed-profile.txt" 2>&1
echo "recipe, packed rows, --profile 30: exit $? after $((SECONDS - start)) s"
grep -E "profiled|GPU busy|packed" "$OUT/recipe-packed-profile.txt" | head -4
start=$SECONDS
nvidia-smi dmon -s u -d 1 > "$OUT/recipe-dmon.txt" 2>&1 &
dmon=$!
timeout -s INT -k 20 "${RECIPE_S:-90}" $PYTHON "${recipe[@]}" --minutes 1 > "$OUT/recipe-train.txt" 2>&1
echo "recipe --minutes 1: exit $? after $((SECONDS - start)) s"
kill $dmon 2>/dev/null
grep -E "profiled|GPU busy|compile|graph" "$OUT/recipe-profile.txt" | head -8
awk '$1 ~ /^[0-9]+$/ {n++; s+=$2} END {if (n) printf "recipe: SM busy %.0f%% (mean of %d nvidia-smi dmon seconds)\n", s/n, n}' \
  "$OUT/recipe-dmon.txt"
grep -E "step|stopped|tokens" "$OUT/recipe-train.txt" | tail -3

start=$SECONDS
timeout -s INT -k 20 "${DECODE_S:-45}" $PYTHON -m benchmarks --devices cuda --only decode --shapes base \
  --peers torch,hf --lengths fixed --repeats 3 --warmup 1 --json "$OUT/bench-decode.json" \
  > "$OUT/bench-decode.txt" 2> "$OUT/bench-decode.log"
echo "benchmarks --only decode: exit $? after $((SECONDS - start)) s"
grep -vE "^\[transformers\]" "$OUT/bench-decode.log" | tail -8
