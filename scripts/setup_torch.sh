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
# Installed, the venv takes 5.4 GB (torch and its CUDA libraries). --no-cache-dir: pip's wheel cache
# would hold the 3 GB of downloads a second time (a CI machine ran out of disk doing so).
NEED_GB=7
FREE_GB=$(df -Pk . | awk 'NR == 2 { print int($4 / 1048576) }')
if [ "$FREE_GB" -lt "$NEED_GB" ]; then
  echo "setup: $VENV needs about $NEED_GB GB of free disk in $PWD; $FREE_GB GB free" >&2
  exit 1
fi
echo "setup: creating $VENV (PyPI torch $TORCH_VERSION, about 5.4 GB installed)"
# A failed install leaves no half venv behind for the check above to take as done.
trap 'rm -rf "$VENV"' ERR INT TERM
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --no-cache-dir --disable-pip-version-check "torch==$TORCH_VERSION" numpy
trap - ERR INT TERM
