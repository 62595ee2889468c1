"""The PTQ stages (`calibrate --ptq`) and `qat --lr auto` on a device and on the CPU (issue 31,
"works on the GPU as on the CPU"):

    python3 bench/gpu/ptq_device.py build/cuda/tools/quantkit/quantkit --device cuda --out results/

For each zoo model of --models and each stage set of --configs, `quantkit calibrate` runs twice with
the same data (fashion-mnist:calib, the first --samples), --device cpu and --device DEVICE. Each
written model.qdq.onnx is scored in onnxruntime (CPU) on the first --test fashion-mnist:test images:
relative MSE of the logits against the FP32 model, and top-1. The two devices' Q/DQ models are
compared initializer by initializer (how many weight values differ: AdaRound's rounding may flip
where the float summation order differs). Then `qat --lr auto` runs on the device (plain_cnn, few
steps) and its model is scored the same way.

Prints one line per run and writes ptq.json / ptq.md under --out. Exit 1 when a run fails or the
device's score is further from FP32 than the CPU's by more than SCORE_SLACK (every run is still made).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, REPO)
from qkdev.zoo import data as zoo_data  # noqa: E402  (numpy only)

CONFIGS = {
    "max": [],
    "seqmse,adaround,bias-correction": ["--ptq", "seqmse,adaround:iterations=200,bias-correction"],
    "smoothquant": ["--ptq", "smoothquant:alpha=0.5"],
}
# The device's Q/DQ model may differ from the CPU's where AdaRound's decisions flip; its output error
# against FP32 must stay within this factor of the CPU's (both are one deterministic run each).
SCORE_SLACK = 1.25


def run(cmd):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r, time.perf_counter() - t0


def score(model, ref, x, y):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    out = np.concatenate([sess.run(None, {name: x[i:i + 500]})[0] for i in range(0, len(x), 500)])
    if ref is None:
        return out, None, float(np.mean(out.argmax(1) == y))
    return out, float(np.mean((out - ref) ** 2) / np.mean(ref ** 2)), float(np.mean(out.argmax(1) == y))


def weight_diff(a_path, b_path):
    """(values that differ, values compared) over the float initializers the two models share."""
    import onnx
    from onnx import numpy_helper
    a = {t.name: numpy_helper.to_array(t) for t in onnx.load(a_path).graph.initializer}
    b = {t.name: numpy_helper.to_array(t) for t in onnx.load(b_path).graph.initializer}
    differ = total = 0
    for name, va in a.items():
        vb = b.get(name)
        if vb is None or vb.shape != va.shape or va.dtype.kind not in "fiu":
            continue
        differ += int(np.count_nonzero(va != vb))
        total += va.size
    return differ, total


def write(args, rows, qat):
    """ptq.json and ptq.md under --out (after every run: a timeout keeps what was reached)."""
    with open(os.path.join(args.out, "ptq.json"), "w") as f:
        json.dump({"score_slack": SCORE_SLACK, "rows": rows, "qat": qat}, f, indent=2, sort_keys=True)
    with open(os.path.join(args.out, "ptq.md"), "w") as f:
        f.write(f"### PTQ stages: calibrate --device {args.device} vs cpu ({args.samples} samples, stages on "
                f"{args.ptq_samples}; {args.test} fashion-mnist:test images in onnxruntime)\n\n"
                "| model | --ptq | rel MSE cpu / device | top-1 cpu / device (FP32) | weight values differing | "
                "wall s cpu / device |\n|---|---|---|---|---|---|\n")
        for r in rows:
            if "error" in r:
                f.write(f"| {r['model']} | {r['config']} | failed: {r['error'][:80]} | | | |\n")
            else:
                f.write(f"| {r['model']} | {r['config']} | {r['rel_mse_cpu']:.3e} / {r['rel_mse_device']:.3e} | "
                        f"{r['top1_cpu']:.4f} / {r['top1_device']:.4f} ({r['fp32_top1']:.4f}) | "
                        f"{r['weights_differ']} of {r['weights_total']} | {r['wall_s_cpu']} / {r['wall_s_device']} |\n")
        if qat:
            f.write(f"\nqat --lr auto --device {args.device} (plain_cnn, {qat['steps']} steps): "
                    + (f"failed: {qat['error'][:200]}" if "error" in qat else
                       f"{qat['lr_line']}; rel MSE {qat['rel_mse']:.3e}, top-1 {qat['top1']:.4f}, wall {qat['wall_s']} s")
                    + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("quantkit")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="plain_cnn,mobilenetv2_small")
    ap.add_argument("--configs", default=";".join(CONFIGS),
                    help="stage sets separated by ';' (names of CONFIGS)")
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--ptq-samples", type=int, default=64)
    ap.add_argument("--test", type=int, default=2000)
    ap.add_argument("--qat-steps", type=int, default=200, help="0: no qat --lr auto run")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    x, y = zoo_data.load_split("test")
    x, y = x[:args.test], y[:args.test]
    rows, failed = [], False
    with tempfile.TemporaryDirectory() as work:
        for name in [m for m in args.models.split(",") if m]:
            model = os.path.join(REPO, "models", "zoo", name + ".onnx")
            ref, _, fp32_top1 = score(model, None, x, y)
            for config in [c for c in args.configs.split(";") if c]:
                row = {"model": name, "config": config, "fp32_top1": fp32_top1}
                outs = {}
                for role, device in (("cpu", "cpu"), ("device", args.device)):
                    out = os.path.join(work, f"{name}.{config}.{role}")
                    cmd = [args.quantkit, "calibrate", model, "--data", "fashion-mnist:calib", "--samples",
                           str(args.samples), "--float-dtype", "fp32", "--device", device, "-o", out,
                           "--ptq-samples", str(args.ptq_samples), *CONFIGS[config]]
                    r, wall = run(cmd)
                    row[f"wall_s_{role}"] = round(wall, 1)
                    if r.returncode != 0:
                        row["error"] = f"--device {device}: exit {r.returncode}: {r.stderr.strip()[-500:]}"
                        break
                    row[f"ptq_lines_{role}"] = [ln for ln in r.stdout.splitlines() if ln.startswith("ptq")][:4]
                    qdq = os.path.join(out, "model.qdq.onnx")
                    _, rel, top1 = score(qdq, ref, x, y)
                    row[f"rel_mse_{role}"], row[f"top1_{role}"] = rel, top1
                    outs[role] = qdq
                if "error" not in row:
                    row["weights_differ"], row["weights_total"] = weight_diff(outs["cpu"], outs["device"])
                    row["ok"] = row["rel_mse_device"] <= SCORE_SLACK * row["rel_mse_cpu"]
                    print(f"{name} {config}: rel MSE cpu {row['rel_mse_cpu']:.3e} / {args.device} "
                          f"{row['rel_mse_device']:.3e}, top-1 {row['top1_cpu']:.4f} / {row['top1_device']:.4f} "
                          f"(FP32 {fp32_top1:.4f}); weight values differing {row['weights_differ']} of "
                          f"{row['weights_total']}; wall cpu {row['wall_s_cpu']} s, {args.device} "
                          f"{row['wall_s_device']} s", flush=True)
                else:
                    print(f"{name} {config}: FAILED {row['error']}", flush=True)
                failed |= not row.get("ok", False)
                rows.append(row)
                write(args, rows, None)
        qat = None
        if args.qat_steps > 0:
            model = os.path.join(REPO, "models", "zoo", "plain_cnn.onnx")
            out = os.path.join(work, "qat")
            r, wall = run([args.quantkit, "qat", model, "--data", "fashion-mnist:train", "--samples", "4096",
                           "--calib-data", "fashion-mnist:calib", "--calib-samples", "256", "--float-dtype", "fp32", "-q",
                           "--steps", str(args.qat_steps), "--lr", "auto", "--device", args.device, "-o", out])
            qat = {"model": "plain_cnn", "steps": args.qat_steps, "wall_s": round(wall, 1)}
            if r.returncode != 0:
                qat["error"] = f"exit {r.returncode}: {r.stderr.strip()[-500:]}"
                failed = True
                print(f"qat --lr auto on {args.device}: FAILED {qat['error']}", flush=True)
            else:
                qat["lr_line"] = next((ln.strip() for ln in r.stdout.splitlines() if "lr auto" in ln), "")
                ref, _, _ = score(model, None, x, y)
                _, qat["rel_mse"], qat["top1"] = score(os.path.join(out, "model.qdq.onnx"), ref, x, y)
                print(f"qat --lr auto on {args.device}: {qat['lr_line']}; rel MSE {qat['rel_mse']:.3e}, top-1 "
                      f"{qat['top1']:.4f}; wall {qat['wall_s']} s", flush=True)
    write(args, rows, qat)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
