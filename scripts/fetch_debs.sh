#!/usr/bin/env bash
# Downloads (apt-get download, no install) the Debian 12 packages that a GPU machine without
# Debian's libraries needs to build and test quantkit into .debs/ (about 41 MB, ignored by git);
# scripts/gpu_machine.sh unpacks them there. See docs/gpu.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES=(
  libonnx-dev libonnx1 libonnxifi libgloo-dev libprotobuf-dev libprotobuf32 libcli11-dev nlohmann-json3-dev
  libzip-dev libzip4 libbz2-1.0 libssl-dev libssl3 zlib1g-dev zlib1g libpng-dev libpng16-16
  libjpeg62-turbo-dev libjpeg62-turbo libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian
  pkgconf pkgconf-bin libpkgconf3 dataset-fashion-mnist
)
mkdir -p .debs
cd .debs
apt-get download "${PACKAGES[@]}"
du -sh .
