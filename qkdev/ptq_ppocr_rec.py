"""Issue 31's PTQ target on the shipped PP-OCRv4 recognizer: `calibrate --ptq` stages against plain
max, without float layers and without QAT, each written model.qdq.onnx judged by greedy-decode exact
match with the FP32 model (and the logits' relative RMS error) in onnxruntime on held-out text lines.

    .venv/bin/python -m qkdev.ptq_ppocr_rec build/dev/tools/quantkit/quantkit [--threads 2]
        [--configs "none;bias-correction;seqmse;seqmse,adaround:iterations=200"] [--ptq-samples 32]

The lines are qat_ppocr_rec's (qkdev/realmodels.py's generator, 48 x 320, seed 31): the first 128 to
calibrate on, 200 others to judge. FP32 float part (onnxruntime's CPU FP16 QuantizeLinear truncates,
docs/strongly-typed.md). One line per configuration: exact match, rel RMS, calibrate wall seconds.
"""
import argparse
import os
import tempfile

import numpy as np

from qkdev import realmodels
from qkdev.qat_ppocr_rec import SEED, TEST, TRAIN, VAL, lines, quantkit
from qkdev.realmodels_table import metric, run_outputs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("quantkit")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--method", default="max")
    ap.add_argument("--configs", default="none;bias-correction;seqmse;seqmse,adaround:iterations=200",
                    help="--ptq values separated by ';' (none: no stage)")
    ap.add_argument("--ptq-samples", type=int, default=32)
    a = ap.parse_args()
    model = os.path.join(realmodels.ensure("ppocr_rec"), "model.onnx")
    rng = np.random.default_rng(SEED)
    train = lines(rng, TRAIN)
    lines(rng, VAL)  # qat_ppocr_rec's validation lines: skipped, so the test lines are the same
    test = lines(rng, TEST)
    import onnxruntime as ort
    name = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).get_inputs()[0].name
    feeds = [{name: test[i:i + 1]} for i in range(len(test))]
    ref = run_outputs(model, feeds)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "train.npy")
        np.save(data, train)
        print(f"| --ptq | exact match (FP32 1.000) | rel RMS | calibrate s |\n|---|---|---|---|", flush=True)
        for i, config in enumerate(c for c in a.configs.split(";") if c):
            out = os.path.join(tmp, f"c{i}")
            extra = [] if config == "none" else ["--ptq", config, "--ptq-samples", str(a.ptq_samples),
                                                 "--ptq-batch", "8"]
            _, secs = quantkit(a.quantkit, ["calibrate", model, "--data", data, "--method", a.method,
                                            "--float-dtype", "fp32", "--threads", str(a.threads), "-q", "-o", out,
                                            *extra])
            _, match, rel = metric("sequence", ref, run_outputs(os.path.join(out, "model.qdq.onnx"), feeds))
            print(f"| {config} | {match:.3f} | {rel:.4f} | {secs:.0f} |", flush=True)


if __name__ == "__main__":
    main()
