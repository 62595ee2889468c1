"""onnxruntime's SmoothQuant option (quantize_static extra_options SmoothQuant, Intel
neural-compressor 2.x underneath) on the shipped PP-OCRv4 recognizer, beside quantkit's
`calibrate --ptq smoothquant`: issue 31's peer row.

    PYTHONPATH=/work/main:/tmp/incpkgs .venv/bin/python -m qkdev.peers.ort_smoothquant \
        build/dev/tools/quantkit/quantkit [--alphas 0.3,0.5,0.7] [--threads 2]

neural-compressor is not in the project venv (it pulls opencv, scikit-learn, pycocotools and a
numpy 2); `pip install --target /tmp/incpkgs "neural-compressor<3"` and its imports, then this
PYTHONPATH. Never imported by quantkit or its tests.

The same data as qkdev/qat_ppocr_rec.py (seed 31: 128 calibration lines, 200 judged). onnxruntime
is asked for what quantkit writes for TensorRT: QDQ, INT8 symmetric activations and per-channel
symmetric weights, MinMax ranges; then once more with SmoothQuant at each alpha (onnxruntime takes
alpha as given; it has no search). quantkit: `--method max`, then `--ptq smoothquant` (alpha chosen
on held-out lines). Each written model judged in onnxruntime against FP32: greedy-decode exact
match and relative RMS error on the 200 lines; wall time of the quantizing call.
"""
import argparse
import os
import subprocess
import tempfile
import time

import numpy as np

from qkdev import realmodels
from qkdev.qat_ppocr_rec import SEED, TEST, TRAIN, VAL, lines
from qkdev.realmodels_table import metric, run_outputs


def ort_quantize(model, feeds, out, smoothquant_alpha=None):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.samples = list(feeds)
            self.at = 0

        def get_next(self):
            if self.at >= len(self.samples):
                return None
            self.at += 1
            return self.samples[self.at - 1]

    extra = {"ActivationSymmetric": True, "WeightSymmetric": True}
    if smoothquant_alpha is not None:
        extra.update({"SmoothQuant": True, "SmoothQuantAlpha": smoothquant_alpha})
    t0 = time.time()
    quantize_static(model, out, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, extra_options=extra)
    return time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("quantkit")
    ap.add_argument("--alphas", default="0.3,0.5,0.7")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    model = os.path.join(realmodels.ensure("ppocr_rec"), "model.onnx")
    rng = np.random.default_rng(SEED)
    train, _, test = lines(rng, TRAIN), lines(rng, VAL), lines(rng, TEST)
    import onnxruntime as ort
    name = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).get_inputs()[0].name
    test_feeds = [{name: test[i:i + 1]} for i in range(len(test))]
    ref = run_outputs(model, test_feeds)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        def judge(label, path, seconds):
            _, match, rel = metric("sequence", ref, run_outputs(path, test_feeds))
            rows.append((label, match, rel, seconds))
            print(f"{label}: exact match {match:.3f}, rel RMS {rel:.3f}, {seconds:.0f} s", flush=True)

        calib = [{name: train[i:i + 1]} for i in range(len(train))]
        out = os.path.join(tmp, "ort.onnx")
        judge("onnxruntime MinMax", out, ort_quantize(model, calib, out))
        for alpha in [float(x) for x in a.alphas.split(",") if x]:
            out = os.path.join(tmp, f"ort_sq{alpha}.onnx")
            try:
                judge(f"onnxruntime MinMax + SmoothQuant alpha {alpha:g}", out, ort_quantize(model, calib, out, alpha))
            except Exception as e:  # a peer's failure is a row, not the end of the table
                rows.append((f"onnxruntime SmoothQuant alpha {alpha:g}", None, None, 0.0))
                print(f"onnxruntime SmoothQuant alpha {alpha:g}: failed: {type(e).__name__}: {str(e)[:300]}")
        data = os.path.join(tmp, "train.npy")
        np.save(data, train)
        for label, stages in (("quantkit max", []), ("quantkit max + smoothquant", ["--ptq", "smoothquant"])):
            d = os.path.join(tmp, label.replace(" ", "_").replace("+", ""))
            t0 = time.time()
            args = [a.quantkit, "calibrate", model, "--data", data, "--method", "max", "--float-dtype", "fp32",
                    "--threads", str(a.threads), "-q", "-o", d]
            if stages:
                args += [*stages, "--ptq-samples", "32", "--ptq-batch", "8"]
            subprocess.run(args, check=True, capture_output=True)
            judge(label, os.path.join(d, "model.qdq.onnx"), time.time() - t0)
    print("\n| configuration | exact match | rel RMS | wall s |\n|---|---|---|---|")
    for label, match, rel, secs in rows:
        print(f"| {label} | {'failed' if match is None else f'{match:.3f}'} | "
              f"{'' if rel is None else f'{rel:.3f}'} | {secs:.0f} |")


if __name__ == "__main__":
    main()
