#!/usr/bin/env bash
# Builds, tests and measures quantkit on a lent GPU machine in ONE call of the `run` tool
# (docs/gpu.md, "On the lent GPU machine"):
#
#   here, once:  scripts/fetch_debs.sh          # Debian 12 .debs + the real models into .debs/
#   there:       run(command="scripts/gpu_machine.sh", carry=[".debs"], timeout_s=600)
#
# That machine has CUDA, cmake, ninja, g++ and a python3 holding PyPI torch (+ torchvision, onnx,
# onnxruntime), but none of Debian's libraries and no network: the libraries travel as .deb files
# and are unpacked under $QK_DEBS_PREFIX with dpkg -x (never into /: that can break its packages);
# the real models travel as .debs/realmodels.tar.xz (scripts/fetch_debs.sh).
#
# Steps, each bounded by the time left so that the call ends inside the tool's 600 s and $OUT
# holds whatever was reached (at most 8 files come back: the 8 below):
#   env.txt       GPU, driver, torch/CUDA versions, compilers (written first, whatever fails)
#   build.log     configure (preset cuda, Release, no Python extension, no benchmarks) and build
#                 quantkit, cuda_test, conformance_test, runtime_device_test on every core
#   tests.log     ctest -L cuda (the Cuda.* tests: GPU == CPU, TF32 off) + the FP32 numerics and
#                 emulated-device unit tests; then the op-parity harness on the GPU: every ONNX node
#                 case, the zoo and the real models on cuda:0 against the CPU (conformance_test,
#                 QK_PARITY_DEVICES=cuda:0): "N node cases on cuda:0: N equal, M within tolerance,
#                 0 failing"
#   bench.log     the real models calibrated on cuda vs cpu (activation scales within 1e-5),
#                 the PTQ stages (seqmse, adaround, bias-correction, smoothquant) and qat --lr auto on
#                 the device vs the CPU, scored in onnxruntime (bench/gpu/ptq_device.py),
#                 the QAT step ratio (resnet18 224x224 batch 64 vs eager PyTorch with fake quant),
#                 the throughput table (resnet50, vit_b_16; 8192 samples, batch 64; start-up apart;
#                 eager PyTorch side by side): bench/gpu/{realmodels_device,ptq_device,qat_step,gpu_bench}.py
#   results.md, results.json   the tables and numbers of those three, rewritten after each
#   profile.txt   where one calibrate run's time goes (resnet50, max, 2048 samples; quantkit --profile
#                 summed by bench/gpu/trace_summary.py), written after resnet50's row
#   summary.md    one line per step: ok / FAILED (exit code) / skipped (no time) / timeout
#
# Usage: scripts/gpu_machine.sh [all|build|test|bench]   (build: env + build; test: + tests.log;
#        bench: env + bench.log only, on an existing build/cuda; all: everything)
# Environment: OUT (results; default build/gpu-results), QK_DEBS_PREFIX (default /opt/qkdebs),
#   QK_GPU_BUDGET_S (seconds for the whole script, default 540), QK_SKIP (a regex: steps whose
#   name matches it are skipped, e.g. "QAT|PTQ" for a short second call), QK_DEVICE (default cuda; `cpu`
#   with QK_SMALL=1 and QK_BUILD_DIR=build/dev or build/cuda runs every piece on a CPU machine:
#   no .debs, no build, small sizes, the emulated device for parity -- the dry run that keeps
#   a script bug from costing the GPU call), QK_BENCH_SAMPLES / QK_BENCH_SHORT (8192 / 1024).
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-all}
case $MODE in all | build | test | bench) ;; *) echo "usage: $0 [all|build|test|bench]" >&2; exit 2 ;; esac
START=$(date +%s)
DEADLINE=$((START + ${QK_GPU_BUDGET_S:-540}))
DEVICE=${QK_DEVICE:-cuda}
SMALL=${QK_SMALL:-0}
BUILD=${QK_BUILD_DIR:-build/cuda}
PREFIX=${QK_DEBS_PREFIX:-/opt/qkdebs}
ARCH_LIB=$PREFIX/usr/lib/x86_64-linux-gnu
OUT_DIR=${OUT:-$PWD/build/gpu-results}
WORK=$PWD/build/gpu-work  # the scripts' own files; results.md / results.json are assembled from them
mkdir -p "$OUT_DIR" "$WORK"
SUMMARY=$OUT_DIR/summary.md
echo "# scripts/gpu_machine.sh $MODE on $DEVICE ($(date -u +%FT%TZ), budget $((DEADLINE - START)) s)" >"$SUMMARY"
PY=python3
[[ $DEVICE == cpu && -x .venv/bin/python ]] && PY=$PWD/.venv/bin/python  # the dry run: Debian torch + ORT

left() { echo $((DEADLINE - $(date +%s))); }
# step NAME MIN_SECONDS LOG COMMAND...: runs COMMAND under the time left, logs it, records the outcome.
step() {
  local name=$1 need=$2 log=$3
  shift 3
  if [[ -n ${QK_SKIP:-} && $name =~ $QK_SKIP ]]; then
    echo "- $name: skipped (QK_SKIP)" >>"$SUMMARY"
    return 0
  fi
  if (($(left) < need)); then
    echo "- $name: skipped (only $(left) s left, needs ~$need s)" >>"$SUMMARY"
    return 1
  fi
  echo "=== $name ($(date -u +%T))" >>"$log"
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
# results.md / results.json from the parts written so far.
assemble() {
  {
    echo "# quantkit on $DEVICE: results of scripts/gpu_machine.sh ($(date -u +%FT%TZ))"
    for part in realmodels ptq qat throughput; do
      [[ -f $WORK/$part.md ]] && { echo; cat "$WORK/$part.md"; }
    done
  } >"$OUT_DIR/results.md"
  $PY - "$WORK" "$OUT_DIR/results.json" <<'EOF'
import json, os, sys
work, out = sys.argv[1:]
merged = {}
for part in ("realmodels", "ptq", "qat", "throughput"):
    path = os.path.join(work, part + ".json")
    if os.path.exists(path):
        with open(path) as f:
            merged[part] = json.load(f)
with open(out, "w") as f:
    json.dump(merged, f, indent=2, sort_keys=True)
EOF
}

# 1. What the machine is.
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "nvidia-smi: none"
  $PY -c 'import sys, torch; print("python", sys.version.split()[0], sys.prefix); print("torch", torch.__version__,
        "cuda", torch.version.cuda, "devices", torch.cuda.device_count(), "cxx11abi", torch.compiled_with_cxx11_abi())'
  g++ --version | head -n 1
  cmake --version | head -n 1
  echo "cores $(nproc), device $DEVICE, small $SMALL, build dir $BUILD"
} >"$OUT_DIR/env.txt" 2>&1

# 2a. Debian's libraries under $PREFIX; absolute symlinks (libz.so -> /lib/...) re-pointed inside it;
# the real models into the quantkit cache.
setup_debs() {
  compgen -G ".debs/*.deb" >/dev/null || { echo "no .debs/*.deb: run scripts/fetch_debs.sh here and carry .debs"; return 1; }
  for f in .debs/*.deb; do dpkg -x "$f" "$PREFIX" || return 1; done
  find "$PREFIX" -xtype l | while read -r link; do
    target=$(readlink "$link")
    if [[ $target == /* && -e $PREFIX$target ]]; then ln -sfn "$PREFIX$target" "$link"; fi
  done
  # Fashion-MNIST (scripts/fetch_debs.sh recompressed it) at its Debian path, gzipped as there.
  if [[ -f .debs/fashion-mnist.tar.xz && ! -e /usr/share/datasets/fashion-mnist ]]; then
    mkdir -p "$PREFIX/usr/share/datasets" /usr/share/datasets &&
      tar -xJf .debs/fashion-mnist.tar.xz -C "$PREFIX/usr/share/datasets" &&
      gzip -1 "$PREFIX"/usr/share/datasets/fashion-mnist/*-ubyte &&
      ln -sfn "$PREFIX/usr/share/datasets/fashion-mnist" /usr/share/datasets/fashion-mnist || return 1
  fi
  if [[ -f .debs/realmodels.tar.xz ]]; then
    mkdir -p "${QUANTKIT_CACHE:-$HOME/.cache/quantkit}" &&
      tar -xJf .debs/realmodels.tar.xz -C "${QUANTKIT_CACHE:-$HOME/.cache/quantkit}"
  fi
  # The cuda preset reads torch through .venv-torch: the machine's python3 prefix (a link from
  # this checkout, if any, points at a path that does not exist there).
  ln -sfn "$(python3 -c 'import sys; print(sys.prefix)')" .venv-torch
}
if [[ $DEVICE != cpu ]]; then
  export LD_LIBRARY_PATH=$ARCH_LIB:$PREFIX/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # LIBDIR (not PATH) replaces the default search path, so the sysroot applies to our .pc files only.
  export PKG_CONFIG_LIBDIR=$ARCH_LIB/pkgconfig:$PREFIX/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$PREFIX
fi
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
if [[ $DEVICE == cpu ]]; then
  echo "- build: skipped (dry run on $BUILD)" >>"$SUMMARY"
  built=0
elif [[ $MODE == bench ]]; then
  built=0
else
  step "unpack .debs" 30 "$BUILD_LOG" bash -c setup_debs &&
    step "configure (preset cuda)" 30 "$BUILD_LOG" bash -c configure &&
    step "build" 120 "$BUILD_LOG" cmake --build --preset cuda -j "$(nproc)" --target quantkit cuda_test \
      conformance_test runtime_device_test
  built=$?
fi
[[ $MODE == build || $built -ne 0 ]] && { cat "$SUMMARY"; exit $built; }
QK=$BUILD/tools/quantkit/quantkit

# 3. The GPU tests, then the op-parity harness on the GPU (the test preset's QUANTKIT_THREADS=1).
TESTS_LOG=$OUT_DIR/tests.log
if [[ $MODE != bench ]]; then
  if [[ $DEVICE == cpu ]]; then
    PARITY=emulated
  else
    step "ctest -L cuda" 60 "$TESTS_LOG" env QUANTKIT_THREADS=1 ctest --test-dir "$BUILD" -L cuda --output-on-failure
    PARITY=$DEVICE
  fi
  step "FP32 numerics + emulated device" 20 "$TESTS_LOG" env QUANTKIT_THREADS=1 \
    "$BUILD/tests/unit/runtime/runtime_device_test"
  # QK_CONFORMANCE_FILTER narrows the node cases of a dry run (the GPU runs them all).
  # The machine's PyPI onnx carries the newer node suite (no .venv there).
  # The machine's onnx wheel has no backend data: .debs/onnx-node-data.tar.xz (scripts/fetch_debs.sh)
  # carries the venv's onnx node suite.
  NODE_DATA=$([[ $DEVICE == cpu ]] || $PY -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "backend/test/data/node"))' 2>/dev/null)
  if [[ $DEVICE != cpu && ! -d $NODE_DATA && -f .debs/onnx-node-data.tar.xz ]]; then
    mkdir -p "$PREFIX/onnx-data" && tar -xJf .debs/onnx-node-data.tar.xz -C "$PREFIX/onnx-data" && NODE_DATA=$PREFIX/onnx-data/node
  fi
  step "op parity on $PARITY" 60 "$TESTS_LOG" env QUANTKIT_THREADS=1 QK_PARITY_DEVICES="$PARITY" QK_ONNX_NODE_DATA="$NODE_DATA" \
    QK_CONFORMANCE_FILTER="${QK_CONFORMANCE_FILTER:-}" "$BUILD/tests/conformance/conformance_test"
  grep -E "cases on |models on |passed, .* failed" "$TESTS_LOG" | sed 's/^/    /' >>"$SUMMARY"
fi
[[ $MODE == test ]] && { cat "$SUMMARY"; exit 0; }

# 4. The measurements (each script writes its part into $WORK; results.* assembled after each).
BENCH_LOG=$OUT_DIR/bench.log
if ((SMALL)); then
  REAL=(--samples 2) QAT=(--batch 4 --steps 1,2 --calib 8)
  PTQ=(--models plain_cnn --samples 32 --ptq-samples 8 --test 200 --qat-steps 10)
  THR=(--samples "${QK_BENCH_SAMPLES:-24}" --short "${QK_BENCH_SHORT:-8}" --batch 8)
else
  # QAT steps 10,60: the 3,13 of sessions 9-16 rested on a ~1 s wall difference (0.58x..2.26x).
  REAL=(--samples 4 --methods "${QK_REAL_METHODS:-default,max}") QAT=(--batch 64 --steps 10,60 --calib 64)
  PTQ=(--models plain_cnn --ptq-samples 32 --qat-steps 200)
  THR=(--samples "${QK_BENCH_SAMPLES:-8192}" --short "${QK_BENCH_SHORT:-1024}" --batch 64)
fi
export PYTHONUNBUFFERED=1
step "real models: calibrate on $DEVICE vs cpu" 45 "$BENCH_LOG" $PY bench/gpu/realmodels_device.py "$QK" \
  --device "$DEVICE" --out "$WORK" "${REAL[@]}"
assemble
step "PTQ stages + qat --lr auto on $DEVICE vs cpu" 60 "$BENCH_LOG" timeout "${QK_PTQ_BUDGET_S:-170}" env PYTHONPATH=. $PY bench/gpu/ptq_device.py "$QK" \
  --device "$DEVICE" --out "$WORK" "${PTQ[@]}"
assemble
step "QAT step vs eager" 45 "$BENCH_LOG" $PY bench/gpu/qat_step.py "$QK" --device "$DEVICE" --out "$WORK" "${QAT[@]}"
assemble
step "throughput (resnet50, vit_b_16)" 90 "$BENCH_LOG" $PY bench/gpu/gpu_bench.py "$QK" --device "$DEVICE" \
  --out "$WORK" ${QK_BENCH_MODELS:+--models "$QK_BENCH_MODELS"} --profile "$OUT_DIR/profile.txt" "${THR[@]}"
assemble
cat "$SUMMARY"
