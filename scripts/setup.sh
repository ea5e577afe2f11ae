#!/usr/bin/env bash
# Create .venv and install tbuild with its test tools. torch is pinned to the CPU wheel (constraints.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
extra=()
[ -d /opt/wheels ] && extra=(--find-links /opt/wheels)
.venv/bin/pip install -q "${extra[@]}" -c constraints.txt -e ".[dev,export]"
