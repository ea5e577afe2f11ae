#!/usr/bin/env bash
# Wheels for a GPU machine that has torch but cannot download: the dependencies of tbuild such an image
# usually lacks (pydantic and its parts; FastAPI and uvicorn for the server's tests), for
# its Python (PY, default 3.12) on x86_64 Linux, into wheels/ (ignored by git). Carry wheels/ there;
# scripts/cuda-check.sh installs from it what the machine cannot import. Run from a set-up clone.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-3.12}
rm -rf wheels && mkdir wheels
.venv/bin/pip download -q --no-deps --only-binary=:all: --python-version "$PY" --implementation cp \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any -d wheels \
  pydantic pydantic-core annotated-types typing-inspection typing-extensions \
  fastapi starlette uvicorn annotated-doc
du -sh wheels | sed 's/^/gpu-wheels: /'
