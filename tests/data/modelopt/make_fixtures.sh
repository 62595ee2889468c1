#!/usr/bin/env bash
# Regenerates the ModelOpt 0.47 outputs of this directory: NVIDIA ModelOpt's default ONNX INT8
# mode (INT8 Q/DQ, FP16 elsewhere, opset 19) on two zoo models, calibrated with `max` on the first
# 512 images of the Fashion-MNIST calibration split (docs/fashion-mnist-splits.md).
#   MODELOPT_PYTHON=/path/to/venv/bin/python bash tests/data/modelopt/make_fixtures.sh
# The venv needs `pip install "nvidia-modelopt[onnx]==0.47.*"` (torch, onnx 1.21, onnxruntime-gpu:
# not the project's .venv). ModelOpt rewrites its --onnx_path input in place (it adds inferred
# value_info), so it is given a copy.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${MODELOPT_PYTHON:?set MODELOPT_PYTHON to a python with nvidia-modelopt[onnx]==0.47}
OUT=tests/data/modelopt
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
.venv/bin/python -c "
import numpy as np, sys
sys.path.insert(0, '.')
from qkdev.zoo import data
x, _ = data.load_split('calib')
np.save('$TMP/calib.npy', x[:512].astype(np.float32))"
for m in resnet_small efficientnet_small; do
  cp "models/zoo/$m.onnx" "$TMP/$m.onnx"
  "$PY" -m modelopt.onnx.quantization --onnx_path "$TMP/$m.onnx" --quantize_mode int8 \
    --calibration_data "$TMP/calib.npy" --calibration_method max --output_path "$OUT/$m.modelopt.onnx"
done
