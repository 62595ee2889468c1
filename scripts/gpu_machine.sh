#!/usr/bin/env bash
# Builds, tests and measures quantkit on a lent GPU machine in ONE call of the `run` tool
# (docs/gpu.md, "On the lent GPU machine"):
#
#   here, once:  scripts/fetch_debs.sh                      # Debian 12 .debs into .debs/ (~41 MB)
#   there:       run(command="scripts/gpu_machine.sh", carry=[".debs"], timeout_s=600)
#
# That machine has CUDA, cmake, ninja, g++ and a python3 holding PyPI torch (+ torchvision, onnx,
# onnxruntime), but none of Debian's libraries and no network: the libraries travel as .deb files
# and are unpacked under $QK_DEBS_PREFIX with dpkg -x (never into /: that can break its packages).
#
# Steps, each bounded so that the whole call ends inside the tool's 600 s and $OUT holds whatever
# was reached (at most 8 files come back):
#   1. env.txt        GPU, driver, torch/CUDA versions, compilers (written first, whatever fails)
#   2. build.log      configure (preset cuda, Release, no Python extension, no benchmarks) and build
#                     `quantkit` + `cuda_test` on every core
#   3. ctest-cuda.log ctest -L cuda -V (the Cuda.* tests; GPU == CPU checks)
#   4. bench.log, results.md, results.json   bench/gpu/gpu_bench.py (throughput, peak memory,
#                     the issue-16 targets), written row by row
#   5. ctest-unit.log with the time left: build everything, ctest -L unit -LE 'ort|slow'
#   summary.md        one line per step: ok / FAILED (exit code) / skipped (no time) / timeout
#
# Usage: scripts/gpu_machine.sh [all|build|test|bench]   (all: every step; test: 1-3; bench: 1-4)
# Environment: OUT (results; default build/gpu-results), QK_DEBS_PREFIX (default /opt/qkdebs),
# QK_GPU_BUDGET_S (seconds for the whole script, default 560), QK_BENCH_MODELS (gpu_bench --models).
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-all}
case $MODE in all | build | test | bench) ;; *) echo "usage: $0 [all|build|test|bench]" >&2; exit 2 ;; esac
START=$(date +%s)
DEADLINE=$((START + ${QK_GPU_BUDGET_S:-560}))
PREFIX=${QK_DEBS_PREFIX:-/opt/qkdebs}
ARCH_LIB=$PREFIX/usr/lib/x86_64-linux-gnu
OUT_DIR=${OUT:-$PWD/build/gpu-results}
mkdir -p "$PREFIX" "$OUT_DIR"
SUMMARY=$OUT_DIR/summary.md
echo "# scripts/gpu_machine.sh $MODE ($(date -u +%FT%TZ), budget $((DEADLINE - START)) s)" >"$SUMMARY"

left() { echo $((DEADLINE - $(date +%s))); }
# step NAME MIN_SECONDS LOG COMMAND...: runs COMMAND under the time left, logs it, records the outcome.
step() {
  local name=$1 need=$2 log=$3
  shift 3
  if (($(left) < need)); then
    echo "- $name: skipped (only $(left) s left, needs ~$need s)" >>"$SUMMARY"
    return 1
  fi
  local t0=$(date +%s) rc
  timeout --kill-after=5 "$(left)" "$@" >>"$log" 2>&1
  rc=$?
  local took=$(($(date +%s) - t0))
  if ((rc == 0)); then
    echo "- $name: ok (${took} s)" >>"$SUMMARY"
  elif ((rc == 124 || rc == 137)); then
    echo "- $name: timeout after ${took} s (see $(basename "$log"))" >>"$SUMMARY"
  else
    echo "- $name: FAILED, exit $rc after ${took} s (see $(basename "$log"))" >>"$SUMMARY"
  fi
  return $rc
}

# 1. What the machine is.
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "nvidia-smi: none"
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], sys.prefix); print("torch", torch.__version__,
        "cuda", torch.version.cuda, "devices", torch.cuda.device_count(), "cxx11abi", torch.compiled_with_cxx11_abi())'
  g++ --version | head -n 1
  cmake --version | head -n 1
  nproc
} >"$OUT_DIR/env.txt" 2>&1

# 2a. Debian's libraries under $PREFIX; absolute symlinks (libz.so -> /lib/...) re-pointed inside it.
setup_debs() {
  compgen -G ".debs/*.deb" >/dev/null || { echo "no .debs/*.deb: run scripts/fetch_debs.sh here and carry .debs"; return 1; }
  for f in .debs/*.deb; do dpkg -x "$f" "$PREFIX" || return 1; done
  find "$PREFIX" -xtype l | while read -r link; do
    target=$(readlink "$link")
    if [[ $target == /* && -e $PREFIX$target ]]; then ln -sfn "$PREFIX$target" "$link"; fi
  done
  # Fashion-MNIST is read from its Debian path.
  if [[ ! -e /usr/share/datasets/fashion-mnist ]]; then
    mkdir -p /usr/share/datasets && ln -sfn "$PREFIX/usr/share/datasets/fashion-mnist" /usr/share/datasets/fashion-mnist
  fi
  # The cuda preset reads torch through .venv-torch: the machine's python3 prefix (a link from
  # this checkout, if any, points at a path that does not exist there).
  ln -sfn "$(python3 -c 'import sys; print(sys.prefix)')" .venv-torch
}
export LD_LIBRARY_PATH=$ARCH_LIB:$PREFIX/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# LIBDIR (not PATH) replaces the default search path, so the sysroot applies to our .pc files only.
export PKG_CONFIG_LIBDIR=$ARCH_LIB/pkgconfig:$PREFIX/usr/share/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$PREFIX
PKG_CONFIG_BIN=$(command -v pkg-config || echo "$PREFIX/usr/bin/pkgconf")
# 2b. Configure and build (no ccache there; Release: faster to compile, smaller to keep).
configure() {
  cmake --preset cuda -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX/usr" \
    -DPKG_CONFIG_EXECUTABLE="$PKG_CONFIG_BIN" -DCMAKE_CXX_COMPILER_LAUNCHER= -DCMAKE_C_COMPILER_LAUNCHER= \
    -DQUANTKIT_BUILD_BENCH=OFF -DQUANTKIT_PYTHON=OFF
}
# timeout(1) runs programs, not shell functions: the two run in a child bash.
export PREFIX PKG_CONFIG_BIN
export -f setup_debs configure
BUILD_LOG=$OUT_DIR/build.log
step "unpack .debs" 30 "$BUILD_LOG" bash -c setup_debs &&
  step "configure (preset cuda)" 30 "$BUILD_LOG" bash -c configure &&
  step "build quantkit + cuda_test" 120 "$BUILD_LOG" cmake --build --preset cuda -j "$(nproc)" --target quantkit cuda_test
built=$?
[[ $MODE == build || $built -ne 0 ]] && exit $built

# 3. The GPU tests (the cuda preset's test environment: QUANTKIT_THREADS=1).
step "ctest -L cuda" 60 "$OUT_DIR/ctest-cuda.log" ctest --preset cuda -L cuda --output-on-failure -V
[[ $MODE == test ]] && exit 0

# 4. The measurements of docs/gpu.md (results.md / results.json rewritten after each model).
step "bench/gpu/gpu_bench.py" 90 "$OUT_DIR/bench.log" env PYTHONUNBUFFERED=1 python3 bench/gpu/gpu_bench.py \
  build/cuda/tools/quantkit/quantkit --out "$OUT_DIR" ${QK_BENCH_MODELS:+--models "$QK_BENCH_MODELS"}
[[ $MODE == bench ]] && exit 0

# 5. With the time left: the unit tests on the same build (CPU code paths against this torch).
step "build all" 120 "$OUT_DIR/ctest-unit.log" cmake --build --preset cuda -j "$(nproc)" &&
  step "ctest -L unit" 30 "$OUT_DIR/ctest-unit.log" ctest --preset cuda -L unit -LE 'ort|slow' -j "$(nproc)"
cat "$SUMMARY"
