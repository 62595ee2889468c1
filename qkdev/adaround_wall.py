"""Issue 31's wall-time target: AdaRound on the torchvision resnet18 / mobilenet_v2 exports within
1.5x of aimet-onnx's wall time on the same machine, or faster.

    .venv/bin/python -m qkdev.adaround_wall build/dev/tools/quantkit/quantkit --aimet-python PEERS/bin/python \
        [--models resnet18,mobilenet_v2] [--iterations 100] [--samples 64] [--batch 32] [--threads 2]

Both tools get the same work: the same model (qkdev/export_torchvision.py, random weights, opset
13), the same --samples N(0, 1) images of [3, 224, 224] (the distribution the exports' BatchNorm
statistics were set on; seed 7), AdaRound with the same iterations per layer and the same batch
(quantkit: --ptq-samples N --ptq-batch B; aimet-onnx: the samples given as N/B batches of B, which
apply_adaround draws one of per iteration), the same thread count (OMP/MKL and onnxruntime).
quantkit: `calibrate --method max --ptq adaround:iterations=I` (per-channel weights, the TensorRT
placement); aimet-onnx 2.42: qkdev/peers/aimet_ptq.py (its per-channel config, min-max encodings).
Reported: the process wall time and peak RSS, the technique's own seconds (quantkit: the stage
line of the summary; aimet: around apply_adaround), and for context the written model.qdq.onnx's
output relative MSE against FP32 in onnxruntime on 32 other images (random weights: not an
accuracy figure; the two tools also place Q/DQ differently, docs/ptq.md).
"""
import argparse
import os
import re
import tempfile

import numpy as np

from qkdev import export_torchvision
from qkdev.ptq_table import timed
from qkdev.realmodels_table import run_outputs

SEED = 7
TEST = 32


def rel_mse(model, path, feeds):
    ref, out = run_outputs(model, feeds), run_outputs(path, feeds)
    return float(sum(((o - r) ** 2).sum() for r, o in zip(ref, out)) / sum((r ** 2).sum() for r in ref))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("quantkit")
    ap.add_argument("--aimet-python", required=True)
    ap.add_argument("--models", default="resnet18,mobilenet_v2")
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    assert a.samples % a.batch == 0, "--samples must be a multiple of --batch"
    threads = str(a.threads)
    os.environ.update(OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads, ORT_NUM_THREADS=threads)
    rng = np.random.default_rng(SEED)
    calib = rng.standard_normal((a.samples, 3, 224, 224)).astype(np.float32)
    test = [{"input": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)} for _ in range(TEST)]
    print(f"AdaRound, {a.iterations} iterations per layer, {a.samples} samples in batches of {a.batch}, "
          f"{a.threads} threads\n")
    print("| model | tool | process wall s | AdaRound s | peak RSS MiB | output rel MSE vs FP32 (32 images) |")
    print("|---|---|---|---|---|---|")
    for name in a.models.split(","):
        model = export_torchvision.ensure(name, 13)
        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(tmp, "calib.npy")
            np.save(data, calib)
            out = os.path.join(tmp, "qk")
            rc, stdout, stderr, wall, rss = timed(
                [a.quantkit, "calibrate", model, "--data", data, "--method", "max", "--float-dtype", "fp32",
                 "--ptq", f"adaround:iterations={a.iterations}", "--ptq-samples", str(a.samples), "--ptq-batch",
                 str(a.batch), "--threads", threads, "-o", out])
            if rc != 0:
                raise RuntimeError(f"quantkit on {name}: exit {rc}: {stderr.strip()[-400:]}")
            stage = re.search(r"ptq adaround\(.*?\): .* in ([0-9.]+) s", stdout)
            qk = (wall, float(stage.group(1)) if stage else float("nan"), rss,
                  rel_mse(model, os.path.join(out, "model.qdq.onnx"), test))
            feeds = os.path.join(tmp, "feeds.npz")
            batches = calib.reshape(a.samples // a.batch, a.batch, 3, 224, 224)
            np.savez(feeds, **{f"{i}__input": b for i, b in enumerate(batches)})
            out = os.path.join(tmp, "aimet")
            rc, stdout, stderr, wall, rss = timed(
                [a.aimet_python, os.path.join(os.path.dirname(__file__), "peers", "aimet_ptq.py"), model,
                 "--technique", "adaround", "--feeds", feeds, "--out", out, "--iterations", str(a.iterations)])
            if rc != 0:
                raise RuntimeError(f"aimet-onnx on {name}: exit {rc}: {stderr.strip()[-400:]}")
            import json
            technique = json.loads(stdout.strip().splitlines()[-1])["technique_seconds"]
            am = (wall, technique, rss, rel_mse(model, os.path.join(out, "model.qdq.onnx"), test))
        for tool, (w, t, r, e) in (("quantkit", qk), ("aimet-onnx 2.42", am)):
            print(f"| {name} | {tool} | {w:.1f} | {t:.1f} | {r:.0f} | {e:.3e} |")
        print(f"| {name} | quantkit / aimet | {qk[0] / am[0]:.2f}x | {qk[1] / am[1]:.2f}x | {qk[2] / am[2]:.2f}x | |",
              flush=True)


if __name__ == "__main__":
    main()
