#!/usr/bin/env bash
# Create .venv and install tbuild (editable) with its test and export tools, torch at the version
# pinned in constraints.txt. Which build of torch: TBUILD_TORCH unset takes PyPI's (on Linux x86_64 a
# CUDA build, a few GB; on macOS and Windows the CPU one); TBUILD_TORCH=cpu the CPU-only build (about
# 200 MB), TBUILD_TORCH=cu126 (or another cuXXX) that CUDA's, both from PyTorch's own index. A torch
# of the pinned version already in .venv is kept. Ends with one line naming the torch it has.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
version="$(sed -n 's/^torch==//p' constraints.txt)"
have="$(.venv/bin/python -c 'import torch; print(torch.__version__)' 2>/dev/null || true)"
if [ -n "${TBUILD_TORCH:-}" ]; then
  case "$TBUILD_TORCH" in
    cpu | cu[0-9]*) ;;
    *) echo "setup: TBUILD_TORCH must be cpu or a CUDA tag such as cu126, not '$TBUILD_TORCH'" >&2; exit 2 ;;
  esac
  if [ "$have" != "$version+$TBUILD_TORCH" ]; then
    .venv/bin/pip install -q "torch==$version+$TBUILD_TORCH" --index-url "https://download.pytorch.org/whl/$TBUILD_TORCH"
  fi
fi
if [ -z "${TBUILD_TORCH:-}" ] && [ -z "$have" ]; then
  echo "setup: installing torch $version, pip's default build (on Linux x86_64 a CUDA one, a few GB;" \
    "TBUILD_TORCH=cpu for the CPU-only build)"
fi
extra=()
[ -d /opt/wheels ] && extra=(--find-links /opt/wheels)  # a local wheel folder, where there is one
.venv/bin/pip install -q ${extra[@]+"${extra[@]}"} -c constraints.txt -e ".[dev,export]"
.venv/bin/python -c "import torch; cuda = torch.version.cuda
print(f'setup: torch {torch.__version__} (' + (f'CUDA {cuda} build' if cuda else 'CPU-only build')
      + '); run \`source .venv/bin/activate\` to put tbuild on PATH')"
