#!/usr/bin/env bash
# Builds the fuzz preset and runs the model-loader fuzzer, seeded with a few ONNX node tests.
#   fuzz/run.sh [SECONDS]   (default 600)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "${JOBS:-2}" --target model_loader_fuzzer
corpus=build/fuzz/corpus
mkdir -p "$corpus" build/fuzz/artifacts
for t in test_if test_conv_with_strides_padding test_loop11 test_scan9_sum test_gemm_default_matrix_bias \
         test_constant test_cast_FLOAT_to_FLOAT16 test_sequence_insert_at_back test_qlinearmatmul_2D \
         test_resize_upsample_scales_linear; do
  src=/usr/share/libonnx-testdata/data/node/$t/model.onnx
  [[ -f $src ]] && cp "$src" "$corpus/$t.onnx"
done
build/fuzz/fuzz/model_loader_fuzzer "$corpus" -max_total_time="$seconds" -rss_limit_mb=2048 \
  -max_len=65536 -artifact_prefix=build/fuzz/artifacts/ -print_final_stats=1
