#!/usr/bin/env bash
# Installs what quantkit needs on a Debian 12 machine, idempotently:
#   1. the Debian packages of the build and of the offline data (apt-get, only those missing);
#   2. a project venv (.venv) with the Python test oracles pinned from PyPI; it sees Debian's
#      python3-torch/torchvision (system site packages), which train and export the model zoo.
# Fast when everything is present (it only runs dpkg-query and a stamp check).
set -euo pipefail
cd "$(dirname "$0")/.."

DEB_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config clang
  # libFuzzer and clang's sanitizer runtimes (make fuzz / fuzz-smoke): only a Recommends of clang-14,
  # which --no-install-recommends below would leave out on a fresh Debian 12.
  libclang-rt-14-dev
  # .ci/run checks the format of the lines the last commit changed (scripts/check_format.sh).
  clang-format
  libtorch-dev libgloo-dev libonnx-dev libprotobuf-dev protobuf-compiler
  # oneDNN's header: float MatMul/Gemm call the sgemm of the libdnnl Debian's libtorch links
  # (2x OpenBLAS's on AVX-512 machines; runtime/ops/float_gemm.h).
  libdnnl-dev
  # ATen's convolutions and matmuls call libblas.so.3; Debian's default is the reference BLAS,
  # 3-30x slower. OpenBLAS takes over the libblas.so.3 alternative (measured in bench/), in its
  # OpenMP build: it shares libgomp's thread pool with ATen, where the pthread build runs a pool of
  # its own beside ATen's (both spin on 2 cores: vit_b_16 eval 1.5x slower; docs/performance.md 9).
  libopenblas0-openmp
  # float16 <-> float32 outside the runtime (ir/float16.h: scales, weights and checks of FP16 models)
  libfp16-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev libzip-dev
  zlib1g-dev libssl-dev libpng-dev libjpeg-dev
  python3 python3-venv python3-pip python3-numpy python3-torch python3-torchvision
  # the Python API (python/): bindings and its pytest suite
  python3-dev pybind11-dev python3-pytest
  libonnx-testdata dataset-fashion-mnist
)
PY_REQUIREMENTS=scripts/requirements.txt

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# A machine that also has OpenBLAS's pthread build (an earlier setup installed it) keeps that one
# (higher priority) behind libblas.so.3, liblapack.so.3 and libopenblas.so.0: select the OpenMP
# build for all three, once, and say so (two OpenBLAS copies in one process would each keep a pool).
ARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
for lib in libblas.so.3 liblapack.so.3 libopenblas.so.0; do
  alt=$lib-$ARCH
  want=$(update-alternatives --list "$alt" 2>/dev/null | grep /openblas-openmp/ || true)
  have=$(update-alternatives --query "$alt" 2>/dev/null | sed -n 's/^Value: //p')
  if [[ -n $want && $have != "$want" ]]; then
    echo "setup: selecting OpenBLAS's OpenMP build for $lib ($want)"
    SUDO=""
    if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
    $SUDO update-alternatives --quiet --set "$alt" "$want"
  fi
done

# The venv uses Debian's interpreter so that python3-torch (a Debian package) is importable.
PY=/usr/bin/python3
stamp=.venv/.requirements.sha256
want=$(sha256sum "$PY_REQUIREMENTS" | cut -d' ' -f1)
if [[ ! -x .venv/bin/python || ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  echo "setup: creating .venv (onnx, onnxruntime, numpy from PyPI)"
  rm -rf .venv
  "$PY" -m venv --system-site-packages .venv
  .venv/bin/pip install -q --disable-pip-version-check -r "$PY_REQUIREMENTS"
  echo "$want" > "$stamp"
fi
