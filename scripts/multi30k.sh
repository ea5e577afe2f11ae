#!/usr/bin/env bash
# The main job: set up, train specs/multi30k.yaml on Multi30k en→de, then decode and score test2016.
# MINUTES=5 bash scripts/multi30k.sh gives a quick look (re-running continues the same run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Offline machines: copy Multi30k from a local mirror instead of downloading it.
if [ -z "${TBUILD_DATA_MIRROR:-}" ] && [ -d ../shared/data/multi30k ]; then
  TBUILD_DATA_MIRROR="$(cd ../shared/data && pwd)"
  export TBUILD_DATA_MIRROR
fi
tbuild=.venv/bin/tbuild
$tbuild train specs/multi30k.yaml ${MINUTES:+--minutes "$MINUTES"}
# Evaluate the average of the last train.average_last (5) checkpoints, as §6.1 does; a short look has fewer.
weights=(--average)
[ -n "${MINUTES:-}" ] && weights=()
printf 'A man in a blue shirt is riding a bike.\nTwo dogs are playing in the snow.\nA little girl eats an ice cream.\n' \
  | $tbuild decode specs/multi30k.yaml --beam 4 ${weights[@]+"${weights[@]}"}
$tbuild evaluate specs/multi30k.yaml --split test --show 3 ${weights[@]+"${weights[@]}"}
