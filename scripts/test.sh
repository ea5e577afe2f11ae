#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite. Multi30k comes from $TBUILD_DATA_MIRROR, set here to
# ../shared/data when that folder exists beside the clone; otherwise the tests download it once into
# ~/.cache/tbuild (or skip the tests that need it, with the reason, when there is no network).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ -z "${TBUILD_DATA_MIRROR:-}" ] && [ -d ../shared/data/multi30k ]; then
  TBUILD_DATA_MIRROR="$(cd ../shared/data && pwd)"
  export TBUILD_DATA_MIRROR
fi
.venv/bin/python -m pytest -q "$@"
