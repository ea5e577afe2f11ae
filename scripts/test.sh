#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite. Tests read Multi30k from a local mirror.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TBUILD_MULTI30K_MIRROR="${TBUILD_MULTI30K_MIRROR:-$(pwd)/../shared/data/multi30k}"
.venv/bin/python -m pytest -q "$@"
