"""Issue 31's PTQ target on the shipped PP-OCRv4 detector (relative RMS error of the probability
map halved): `calibrate --method M --ptq S` on the model's calibration pages, each written
model.qdq.onnx judged in onnxruntime against FP32 on its held-out pages (qkdev/realmodels.py's
ppocr_det folder: calib/ and val/; FP32 float part, as qkdev/realmodels_table.py scores).

    .venv/bin/python -m qkdev.ptq_ppocr_det build/dev/tools/quantkit/quantkit
        [--configs "max|none;max|bias-correction;percentile:99.99|bias-correction"] [--ptq-samples 8]

One markdown row per configuration: method, stages, rel RMS, calibrate wall seconds.
"""
import argparse
import tempfile

from qkdev.realmodels_table import evaluate

CONFIGS = ("max|none;max|bias-correction;max|seqmse;max|seqmse,adaround:iterations=100;"
           "max|seqmse,adaround:iterations=100,bias-correction;max|smoothquant;percentile:99.99|none;"
           "percentile:99.99|bias-correction;percentile:99.99|adaround:iterations=100,bias-correction;"
           "mse|none;mse|bias-correction")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("quantkit")
    ap.add_argument("--configs", default=CONFIGS, help="METHOD|STAGES pairs separated by ';' (none: no stage)")
    ap.add_argument("--ptq-samples", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    print("| --method | --ptq | rel RMS vs FP32 | calibrate s |\n|---|---|---|---|", flush=True)
    for pair in (c for c in a.configs.split(";") if c):
        method, stages = pair.split("|")
        extra = ["--threads", str(a.threads), "--method", method]
        if stages != "none":
            extra += ["--ptq", stages, "--ptq-samples", str(a.ptq_samples), "--ptq-batch", "4"]
        with tempfile.TemporaryDirectory() as tmp:
            r = evaluate(a.quantkit, "ppocr_det", tmp, with_ort=False, extra=extra)
        score = f"{r['quantkit_rel_rms']:.4f}" if "quantkit_rel_rms" in r else r.get("quantkit_error", "failed")
        print(f"| {method} | {stages} | {score} | {r['quantkit_seconds']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
