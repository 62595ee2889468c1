#!/usr/bin/env bash
# make bench: quantkit's benchmarks, peers side by side in one run (not timed tests).
#   1. microbenchmarks (Google Benchmark): histogramming ns/element, calibrator search times
#   2. calibration vs onnxruntime.quantization.quantize_static: wall time and peak RSS
# Environment: BENCH_MODELS, BENCH_SAMPLES, BENCH_METHODS narrow the peer benchmark.
set -euo pipefail
BUILD_DIR=${1:-build/dev}
echo "== microbenchmarks"
"$BUILD_DIR/bench/quant/quant_bench" --benchmark_min_time=0.2
echo "== FP32 latency: quantkit interpreter vs onnxruntime (batch 1 and 8)"
.venv/bin/python bench/runtime/ort_latency.py --runtime-bench "$BUILD_DIR/bench/runtime/runtime_bench" \
  --models "${BENCH_RUNTIME_MODELS:-resnet18,mobilenet_v2,mobilenet_v3_small,efficientnet_b0,squeezenet1_1,shufflenet_v2_x1_0}"
echo "== calibration: quantkit vs onnxruntime.quantization"
.venv/bin/python bench/peer_calibrate.py --quantkit "$BUILD_DIR/tools/quantkit/quantkit" \
  --models "${BENCH_MODELS:-plain_cnn,resnet18}" --samples "${BENCH_SAMPLES:-256,1024,4096}" \
  --methods "${BENCH_METHODS:-entropy,max}" --max-ort-samples "${BENCH_MAX_ORT_SAMPLES:-4096}"
