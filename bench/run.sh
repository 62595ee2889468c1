#!/usr/bin/env bash
# make bench: quantkit's benchmarks, peers side by side in one run (not timed tests).
#   1. microbenchmarks (Google Benchmark): collectors' GB/s, histogramming ns/element, calibrator search
#   2. the engine table (bench/speed_table.py): FP32 pass vs onnxruntime vs PyTorch (1.13 eager,
#      1.13 and 2.x TorchScript), calibrate max/entropy vs quantkit's own FP32 pass vs
#      onnxruntime.quantization.quantize_static, simulated INT8 vs FP32: wall, CPU and peak RSS
#   3. host costs (bench/host_cost.py): start-up to the first batch, calibrate's fixed cost, per-node
#      dispatch on a 1000-node chain against onnxruntime; then FP32 latency per batch: quantkit
#      interpreter vs onnxruntime (batch 1 and 8)
#   4. strongly typed INT8 + FP16 models: quantkit vs ModelOpt 0.47's ONNX INT8 mode side by side
#      (bench/modelopt_side_by_side.py; ModelOpt in .venv-peers, scripts/setup_peers.sh)
#   5. a big model in bounded memory (bench/big_model_memory.py): peak RSS of calibrating a 2.5 GB
#      ViT-H/14 (external data) with quantkit, onnxruntime's quantize_static and ModelOpt
# Environment: BENCH_QUICK=1 (resnet18 + a zoo model, 64 samples: a few minutes), BENCH_MODELS,
# BENCH_SAMPLES narrow the engine table; BENCH_LATENCY=0 skips part 3, BENCH_MODELOPT=0 part 4
# (BENCH_MODELOPT_MODELS narrows it; BENCH_QUICK runs it on two zoo models); BENCH_BIG=0 or
# BENCH_QUICK=1 skips part 5 (its first run exports the model: ~10 minutes, ~12 GB of memory). The default run takes about
# 60-70 minutes on a dedicated 2-core machine (docs/performance.md).
set -euo pipefail
BUILD_DIR=${1:-build/dev}
echo "== microbenchmarks"
"$BUILD_DIR/bench/quant/quant_bench" --benchmark_min_time=0.2
echo "== statistics per element against one read of the tensor (bench/stats_cost.py)"
.venv/bin/python bench/stats_cost.py "$BUILD_DIR/bench/quant/quant_bench"
echo "== engine table: FP32 pass, calibration, simulation vs peers"
args=()
[ "${BENCH_QUICK:-0}" = 1 ] && args+=(--quick)
[ -n "${BENCH_MODELS:-}" ] && args+=(--models "$BENCH_MODELS")
[ -n "${BENCH_SAMPLES:-}" ] && args+=(--samples "$BENCH_SAMPLES")
.venv/bin/python bench/speed_table.py --quantkit "$BUILD_DIR/tools/quantkit/quantkit" "${args[@]}"
echo "== host costs: start-up, calibrate's fixed cost, per-node dispatch vs onnxruntime (bench/host_cost.py)"
.venv/bin/python bench/host_cost.py --quantkit "$BUILD_DIR/tools/quantkit/quantkit" \
  $([ "${BENCH_QUICK:-0}" = 1 ] && echo --quick)
if [ "${BENCH_LATENCY:-1}" = 1 ] && [ "${BENCH_QUICK:-0}" != 1 ]; then
  echo "== FP32 latency: quantkit interpreter vs onnxruntime (batch 1 and 8)"
  .venv/bin/python bench/runtime/ort_latency.py --runtime-bench "$BUILD_DIR/bench/runtime/runtime_bench" \
    --models "${BENCH_RUNTIME_MODELS:-resnet18,mobilenet_v2,efficientnet_b0}"
fi
if [ "${BENCH_MODELOPT:-1}" = 1 ]; then
  echo "== strongly typed INT8 + FP16: quantkit vs ModelOpt 0.47 (docs/strongly-typed-bench.md)"
  bash scripts/setup_peers.sh
  models=${BENCH_MODELOPT_MODELS:-}
  [ -z "$models" ] && [ "${BENCH_QUICK:-0}" = 1 ] && models=plain_cnn,resnet_small
  .venv/bin/python bench/modelopt_side_by_side.py --quantkit "$BUILD_DIR/tools/quantkit/quantkit" \
    ${models:+--models "$models"} --markdown docs/strongly-typed-bench.md --json docs/strongly-typed-bench.json
fi
if [ "${BENCH_BIG:-1}" = 1 ] && [ "${BENCH_QUICK:-0}" != 1 ]; then
  echo "== a big model in bounded memory: ViT-H/14, 2.5 GB of weights (bench/big_model_memory.py)"
  bash scripts/setup_peers.sh
  .venv/bin/python bench/big_model_memory.py --quantkit "$BUILD_DIR/tools/quantkit/quantkit"
fi
