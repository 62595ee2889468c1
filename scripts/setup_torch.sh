#!/usr/bin/env bash
# Creates .venv-torch: PyPI torch in its own venv. Its `torchrun` launches the distributed tests
# (Debian's python3-torch torchrun crashes in its elastic agent) and its libtorch is the one a
# CUDA build uses (find_package(Torch) via torch.utils.cmake_prefix_path).
# Idempotent and fast when the venv is already there: only file checks, no import, no network.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv-torch
TORCH_VERSION=2.15.0

if [ -x "$VENV/bin/torchrun" ] && compgen -G "$VENV/lib/python3*/site-packages/torch/lib/libtorch_cpu.so" >/dev/null; then
  exit 0
fi
echo "setup: creating $VENV (PyPI torch $TORCH_VERSION, about 3 GB)"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "torch==$TORCH_VERSION" numpy
