"""Top-1 of ModelOpt FP16 + INT8 models three ways (docs/strongly-typed-simulation.md):
onnxruntime CPU as the file is, onnxruntime with every float16 QuantizeLinear computed from
float32 (tests/e2e/fp16/fp16_vs_ort_test.py float32_quantizers: same values, no truncation), and
quantkit eval (TensorRT's arithmetic), beside the FP32 model, on Fashion-MNIST test images.

    .venv/bin/python bench/fp16_ort_table.py --quantkit build/dev/tools/quantkit/quantkit \
        --models DIR_WITH_<zoo name>.mo.onnx [--samples 2000]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e", "fp16"))
os.environ.setdefault("QUANTKIT_BIN", "unused")
from qkdev.zoo import data  # noqa: E402
from fp16_vs_ort_test import float32_quantizers  # noqa: E402
from qktest import ort_session  # noqa: E402

ZOO = ["plain_cnn", "resnet_small", "mobilenetv2_small", "efficientnet_small", "vit_tiny"]


def ort_top1(path, x, y):
    s = ort_session(path, threads=1)
    name = s.get_inputs()[0].name
    out = np.concatenate([s.run(None, {name: x[i:i + 250]})[0] for i in range(0, len(x), 250)])
    return float((out.argmax(1) == y).mean())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quantkit", required=True)
    ap.add_argument("--models", required=True, help="directory holding <zoo name>.mo.onnx")
    ap.add_argument("--samples", type=int, default=2000)
    args = ap.parse_args()
    x, y = data.load_split("test")
    x, y = x[:args.samples].astype(np.float32), y[:args.samples]
    print(f"| model | FP32 (onnxruntime) | ModelOpt FP16+INT8, onnxruntime | same, float32 QuantizeLinear | quantkit eval |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        for name in ZOO:
            mo = os.path.join(args.models, name + ".mo.onnx")
            if not os.path.exists(mo):
                continue
            fixed = os.path.join(d, name + ".q32.onnx")
            float32_quantizers(mo, fixed)
            fp32 = ort_top1(os.path.join(ROOT, "models", "zoo", name + ".onnx"), x, y)
            p = subprocess.run([args.quantkit, "eval", mo, "--data", "fashion-mnist:test", "--samples",
                                str(args.samples), "--json", "-q"], capture_output=True, text=True, check=True)
            qk = json.loads(p.stdout)["top1"]
            print(f"| {name} | {100 * fp32:.2f} | {100 * ort_top1(mo, x, y):.2f} | {100 * ort_top1(fixed, x, y):.2f} | "
                  f"{100 * qk:.2f} |", flush=True)


if __name__ == "__main__":
    main()
