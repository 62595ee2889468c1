"""Issue 31's PTQ target on the shipped PP-OCRv4 recognizer: `calibrate --ptq` stages against plain
max, without float layers and without QAT, each written model.qdq.onnx judged in onnxruntime on
held-out text lines of two kinds.

    .venv/bin/python -m qkdev.ptq_ppocr_rec build/dev/tools/quantkit/quantkit [--threads 2]
        [--configs "none;bias-correction;seqmse;seqmse,adaround:iterations=200"] [--ptq-samples 32]
        [--calib lines|labelled]
    .venv/bin/python -m qkdev.ptq_ppocr_rec QUANTKIT --input-noise 0.5,1,2   # FP32 vs itself under pixel noise

The tests' lines are qat_ppocr_rec's (qkdev/realmodels.py's generator, 48 x 320, seed 31): the first
128 to calibrate on (--calib lines), 200 others to judge by greedy-decode exact match with the FP32
model, strict (every decoded class, as before) and with spaces not compared, and the logits'
relative RMS error. The labelled lines are qkdev/ocr_lines.py's whole-text crops (seed 41): 500 to
judge by accuracy against their text (PaddleOCR's metric: spaces not compared), and 128 others to
calibrate on with --calib labelled. FP32 float part (onnxruntime's CPU FP16 QuantizeLinear
truncates, docs/strongly-typed.md). One line per configuration.
"""
import argparse
import os
import tempfile

import numpy as np

from qkdev import ocr_lines, realmodels
from qkdev.qat_ppocr_rec import SEED, TEST, TRAIN, VAL, lines, quantkit


def input_noise(model, test, crops, levels, seeds=3):
    """FP32 against itself under Gaussian pixel noise (std in grey levels of 255): the share of
    decodes kept, strict and spaces not compared on the tests' lines, and on the crops (whose zero
    padding stays zero). What a metric that noise moves cannot tell from quantization."""
    import onnxruntime as ort
    chars = ocr_lines.characters(model)
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name

    def texts(x):
        return [ocr_lines.decode(sess.run(None, {name: x[i:i + 1]})[0][0], chars) for i in range(len(x))]

    ref, ref_crops = texts(test), texts(crops)
    print("| pixel noise std | tests' lines: strict | spaces not compared | crops |\n|---|---|---|---|", flush=True)
    for level in levels:
        strict, loose, kept = [], [], []
        for k in range(seeds):
            rng = np.random.default_rng(100 + k)
            std = 2 * level / 255  # the images are (x - 0.5) / 0.5
            got = texts((test + rng.normal(0, std, test.shape)).astype(np.float32))
            strict.append(np.mean([a == b for a, b in zip(got, ref)]))
            loose.append(ocr_lines.exact_match(got, ref))
            noisy = np.where(crops == 0, 0, crops + rng.normal(0, std, crops.shape)).astype(np.float32)
            kept.append(ocr_lines.exact_match(texts(noisy), ref_crops))
        print(f"| {level} / 255 | {np.mean(strict):.3f} | {np.mean(loose):.3f} | {np.mean(kept):.3f} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("quantkit")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--method", default="max")
    ap.add_argument("--configs", default="none;bias-correction;seqmse;seqmse,adaround:iterations=200",
                    help="--ptq values separated by ';' (none: no stage)")
    ap.add_argument("--ptq-samples", type=int, default=32)
    ap.add_argument("--calib", choices=["lines", "labelled"], default="lines",
                    help="calibrate on the tests' 128 lines or on 128 labelled whole-text crops")
    ap.add_argument("--judged-seed", type=int, default=ocr_lines.JUDGED_SEED,
                    help="seed of the judged crops (those to calibrate on: seed + 1)")
    ap.add_argument("--input-noise", default=None,
                    help="instead of calibrating: FP32 against itself under pixel noise of these stds (e.g. 0.5,1,2)")
    a = ap.parse_args()
    model = os.path.join(realmodels.ensure("ppocr_rec"), "model.onnx")
    rng = np.random.default_rng(SEED)
    train = lines(rng, TRAIN)
    lines(rng, VAL)  # qat_ppocr_rec's validation lines: skipped, so the test lines are the same
    test = lines(rng, TEST)
    labelled, truth = ocr_lines.labelled_lines(np.random.default_rng(a.judged_seed), ocr_lines.JUDGED)
    if a.calib == "labelled":
        train, _ = ocr_lines.labelled_lines(np.random.default_rng(a.judged_seed + 1), TRAIN)
    if a.input_noise:
        input_noise(model, test, labelled, [float(v) for v in a.input_noise.split(",")])
        return
    judge = ocr_lines.RecJudge(model, test, (labelled, truth))
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "train.npy")
        np.save(data, train)
        source = "the tests' lines" if a.calib == "lines" else "labelled crops"
        print(f"calibration: {source}; FP32 accuracy on {len(truth)} labelled lines {judge.fp32_accuracy:.3f}",
              flush=True)
        print("| --ptq | exact match with FP32 (strict) | no spaces | rel RMS | labelled: accuracy "
              f"(FP32 {judge.fp32_accuracy:.3f}) | labelled: agreement with FP32 | calibrate s |\n"
              "|---|---|---|---|---|---|---|", flush=True)
        for i, config in enumerate(c for c in a.configs.split(";") if c):
            out = os.path.join(tmp, f"c{i}")
            extra = [] if config == "none" else ["--ptq", config, "--ptq-samples", str(a.ptq_samples),
                                                 "--ptq-batch", "8"]
            _, secs = quantkit(a.quantkit, ["calibrate", model, "--data", data, "--method", a.method,
                                            "--float-dtype", "fp32", "--threads", str(a.threads), "-q", "-o", out,
                                            *extra])
            r = judge(os.path.join(out, "model.qdq.onnx"))
            print(f"| {config} | {r['strict']:.3f} | {r['no_space']:.3f} | {r['rel_rms']:.4f} | {r['accuracy']:.3f} | "
                  f"{r['agreement']:.3f} | {secs:.0f} |", flush=True)

if __name__ == "__main__":
    main()
