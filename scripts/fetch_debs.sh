#!/usr/bin/env bash
# Prepares what a lent GPU machine without Debian's libraries and without network needs to build,
# test and measure quantkit (docs/gpu.md), in .debs/ (ignored by git), for
# run(command="scripts/gpu_machine.sh", carry=[".debs"]):
#   .debs/*.deb             Debian 12 packages (apt-get download, no install; about 11 MB), unpacked
#                           there by scripts/gpu_machine.sh under /opt/qkdebs
#   .debs/fashion-mnist.tar.xz  dataset-fashion-mnist's four IDX files, recompressed (xz: 27 MB
#                           instead of the .deb's 31 MB gzip), gzipped again there
#   .debs/realmodels.tar.xz the real models of docs/realmodels-table.md (python -m qkdev.realmodels
#                           makes them here), model.onnx + kind.json + the first $QK_REAL_SAMPLES
#                           calibration samples each, unpacked there into the quantkit cache
#                           (QK_REAL_MODELS=ppocr_det,ppocr_rec,ppocr_cls,silero_vad: only those)
# What travels (the working tree, ~7 MB, plus .debs) must stay under the tool's 64 MiB: the
# script prints the total and fails above $QK_CARRY_MAX_MB (default 60).
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES=(
  libonnx-dev libonnx1 libonnxifi libgloo-dev libprotobuf-dev libprotobuf32 libcli11-dev nlohmann-json3-dev
  libzip-dev libzip4 libbz2-1.0 libssl-dev libssl3 zlib1g-dev zlib1g libpng-dev libpng16-16
  libjpeg62-turbo-dev libjpeg62-turbo libgtest-dev libgmock-dev
  libfp16-dev libpsimd-dev
  pkgconf pkgconf-bin libpkgconf3
)
mkdir -p .debs
(cd .debs && apt-get download "${PACKAGES[@]}")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ ! -f .debs/fashion-mnist.tar.xz ]]; then
  (cd "$work" && apt-get download dataset-fashion-mnist && dpkg -x dataset-fashion-mnist_*.deb x)
  mkdir -p "$work/fashion-mnist"
  for f in "$work"/x/usr/share/datasets/fashion-mnist/*.gz; do gunzip -c "$f" >"$work/fashion-mnist/$(basename "${f%.gz}")"; done
  tar -C "$work" -cf - fashion-mnist | xz -6 -T0 >.debs/fashion-mnist.tar.xz.tmp
  mv .debs/fashion-mnist.tar.xz.tmp .debs/fashion-mnist.tar.xz
fi
rm -f .debs/dataset-fashion-mnist_*.deb .debs/libbenchmark*.deb  # older layouts of this folder

# The ONNX node suite of the venv's PyPI onnx (1.8 MB as xz): the machine's onnx wheel ships none.
NODE=$(.venv/bin/python -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "backend/test/data"))' 2>/dev/null)
if [[ ! -f .debs/onnx-node-data.tar.xz && -d $NODE/node ]]; then
  tar -C "$NODE" -cf - node | xz -6 -T0 >.debs/onnx-node-data.tar.xz.tmp && mv .debs/onnx-node-data.tar.xz.tmp .debs/onnx-node-data.tar.xz
fi

REAL=${QUANTKIT_CACHE:-$HOME/.cache/quantkit}/realmodels
SAMPLES=${QK_REAL_SAMPLES:-4}
if [[ -d $REAL ]]; then
  stage=$work/stage
  mkdir -p "$stage/realmodels"
  for dir in "$REAL"/*/; do
    name=$(basename "$dir")
    [[ -f $dir/model.onnx && -d $dir/calib ]] || continue
    # QK_REAL_MODELS=a,b: only these (the GPU run measures the shipped ones; the carry limit is 64 MiB).
    [[ -z ${QK_REAL_MODELS:-} || ,$QK_REAL_MODELS, == *,$name,* ]] || continue
    mkdir -p "$stage/realmodels/$name/calib"
    cp "$dir/model.onnx" "$dir/kind.json" "$dir/stamp.json" "$stage/realmodels/$name/" 2>/dev/null || true
    # The first samples in sample order: files (s0000.npy) or folders (test_data_set_0).
    ls "$dir/calib" | sort -V | head -n "$SAMPLES" | while read -r s; do cp -r "$dir/calib/$s" "$stage/realmodels/$name/calib/"; done
  done
  tar -C "$stage" -cf - realmodels | xz -6 -T0 >.debs/realmodels.tar.xz
else
  echo "fetch_debs: no real models under $REAL (python -m qkdev.realmodels makes them); the GPU run skips them" >&2
fi
tree_mb=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -n 1 | cut -f1)
debs_mb=$(du -sb .debs | cut -f1)
total=$(((tree_mb + debs_mb) / 1048576))
echo "fetch_debs: .debs $((debs_mb / 1048576)) MiB + working tree $((tree_mb / 1048576)) MiB = $total MiB to carry"
if ((total > ${QK_CARRY_MAX_MB:-60})); then
  echo "fetch_debs: over ${QK_CARRY_MAX_MB:-60} MiB: lower QK_REAL_SAMPLES or leave real models out" >&2
  exit 1
fi
