"""What storing Q/DQ scales in float16 costs: a strongly typed FP16 + INT8 model keeps its scales in
the activations' type (TensorRT's Quantize takes its scale in its input's type), and a float16
scale keeps 11 significant bits (relative error up to 2^-11), fewer below 2^-14 (subnormal), and
is 0 below 2^-25.

For each model: calibrate (max) once, then evaluate with quantkit's simulation
  fp32 scales   the plan as calibrated
  fp16 scales   every scale (activations and per-channel weights) rounded to float16 (numpy's
                astype, nearest even), the plan otherwise unchanged
against the FP32 model: top-1 (zoo, Fashion-MNIST test) or arg-max agreement and output SQNR
(torchvision exports: random weights, seeded N(0, 1) inputs). Also counted: scales float16 stores
as subnormals or as 0.

    .venv/bin/python bench/fp16_scale_precision.py --quantkit build/dev/tools/quantkit/quantkit
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZOO = ["plain_cnn", "resnet_small", "mobilenetv2_small", "efficientnet_small", "vit_tiny"]
TORCHVISION = ["resnet18", "mobilenet_v2"]
FLOAT16_MIN_NORMAL = 2.0 ** -14


def quantkit(qk, *args):
    p = subprocess.run([qk, *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"quantkit {' '.join(args)}: {p.stderr.strip()}")
    return p.stdout


def rounded_plan(src, dst):
    plan = json.load(open(src))
    subnormal = zero = total = 0
    for t in plan["tensors"].values():
        if not t.get("quantized") or not t.get("scale"):
            continue
        s32 = np.asarray(t["scale"], np.float32)
        s16 = s32.astype(np.float16)
        total += s32.size
        subnormal += int(((np.abs(s16) < FLOAT16_MIN_NORMAL) & (s16 != 0)).sum())
        zero += int((s16 == 0).sum())
        t["scale"] = [float(v) for v in s16.astype(np.float32)]
    json.dump(plan, open(dst, "w"), indent=1)
    return total, subnormal, zero


def evaluate(qk, model, plan, data, samples):
    out = json.loads(quantkit(qk, "eval", model, "--plan", plan, "--data", data, "--samples", str(samples),
                              "--json", "-q"))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quantkit", required=True)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--models", default=",".join(ZOO + TORCHVISION))
    args = ap.parse_args()
    print("| model | data | scales (subnormal in FP16 / zero) | FP32 scales | FP16 scales | output SQNR FP32 -> FP16 scales |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        for name in args.models.split(","):
            if name in ZOO:
                model = os.path.join(ROOT, "models", "zoo", name + ".onnx")
                calib, data, samples, metric = "fashion-mnist:calib", "fashion-mnist:test", args.samples, "top1"
            else:
                sys.path.insert(0, ROOT)
                from qkdev import export_torchvision
                model = export_torchvision.ensure(name, 13)
                x = np.random.RandomState(0).randn(64, 3, 224, 224).astype(np.float32)
                np.save(os.path.join(d, name + "_calib.npy"), x[:32])
                np.save(os.path.join(d, name + "_eval.npy"), x[32:])
                calib, data = os.path.join(d, name + "_calib.npy"), os.path.join(d, name + "_eval.npy")
                samples, metric = 32, "argmax"
            out = os.path.join(d, name)
            quantkit(args.quantkit, "calibrate", model, "--data", calib, "--method", "max", "-o", out, "-q")
            plan32 = os.path.join(out, "plan.json")
            plan16 = os.path.join(out, "plan16.json")
            total, subnormal, zero = rounded_plan(plan32, plan16)
            r32 = evaluate(args.quantkit, model, plan32, data, samples)
            r16 = evaluate(args.quantkit, model, plan16, data, samples)

            def value(r):
                return r.get(metric, r.get("agreement", {}).get(metric))
            print(f"| {name} | {data.split('/')[-1]} ({samples}) | {total} ({subnormal} / {zero}) | "
                  f"{metric} {value(r32):.4f} | {value(r16):.4f} | {r32['agreement']['sqnr_db']:.2f} -> "
                  f"{r16['agreement']['sqnr_db']:.2f} dB |", flush=True)


if __name__ == "__main__":
    main()
