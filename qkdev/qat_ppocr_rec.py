"""Issue 31's QAT validation measure on the shipped PP-OCRv4 recognizer ([batch, time, classes]
output): label-free `quantkit qat` from a max plan, with --val and without (the default held-out
tail of --data), each written model.qdq.onnx judged in onnxruntime on held-out lines that neither
run saw: greedy-decode exact match with the FP32 model on the tests' lines, and accuracy against
the text on qkdev/ocr_lines.py's labelled whole-text crops (qkdev/ptq_ppocr_rec.py says why both).

    .venv/bin/python -m qkdev.qat_ppocr_rec build/dev/tools/quantkit/quantkit [--steps 200] [--threads 2]
        [--lr 1e-5 | --lr auto] [--runs val,noval] [--train 128]
        [--start-method percentile:99.99 --start-ptq seqmse,adaround:iterations=200] [--loss kl]

--lr is passed to both runs (default: qat's); --runs picks them (--val 64 lines; no --val: the
default held-out tail of the 128 training lines, or nothing with --holdout 0 via --no-holdout).
--start-method / --start-ptq choose the PTQ start (default: max, no stages); with stages that change
weights, qat starts from the calibrate run's model.float.onnx with `--teacher` the shipped model,
as docs/ptq.md says (--no-teacher leaves it out: the staged float model is then the teacher).

Text lines come from qkdev/realmodels.py's generator (48 x 320, seed 31): 128 to train on, 64
for --val, 200 to judge; with --calib labelled, training and --val use crops' images instead. The float part is FP32 (--float-dtype fp32): onnxruntime's CPU FP16
QuantizeLinear truncates where TensorRT rounds (docs/strongly-typed.md).

Cost: about 24 s of CPU per step at batch 8, and minutes for each validation of the 64 lines;
docs/qat.md records a 3-step run.
"""
import argparse
import os
import subprocess
import tempfile
import time

import numpy as np

from qkdev import ocr_lines, realmodels
from qkdev.realmodels import _text_image

SEED = 31
TRAIN, VAL, TEST = 128, 64, 200  # TRAIN: the first lines drawn (--train adds more after VAL and TEST)
HEIGHT, WIDTH = 48, 320


def lines(rng, n):
    return np.stack([_text_image(rng, HEIGHT, WIDTH) for _ in range(n)]).astype(np.float32)


def quantkit(qk, args):
    t0 = time.time()
    r = subprocess.run([qk, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"quantkit {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
    return r, time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("quantkit")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", default=None, help="qat --lr (a number or auto); default: qat's own")
    ap.add_argument("--runs", default="val,noval", help="which qat runs: val, noval or both")
    ap.add_argument("--no-holdout", action="store_true", help="the noval run with --holdout 0")
    ap.add_argument("--train", type=int, default=TRAIN, help="training lines (also the calibration data)")
    ap.add_argument("--start-method", default="max", help="calibrate --method of the PTQ start")
    ap.add_argument("--start-ptq", default=None, help="calibrate --ptq of the PTQ start (stages on 32 lines, runs of 8)")
    ap.add_argument("--eval-every", type=int, default=None, help="qat --eval-every")
    ap.add_argument("--metric", default=None, help="qat --metric (default: qat's own, rel_mse here)")
    ap.add_argument("--loss", default=None, help="qat --loss (default: qat's own, mse)")
    ap.add_argument("--no-teacher", action="store_true", help="no --teacher when starting from model.float.onnx")
    ap.add_argument("--calib", choices=["lines", "labelled"], default="lines",
                    help="train and validate on the tests' lines or on labelled whole-text crops (not their labels)")
    ap.add_argument("--keep", default=None, help="write the runs' directories here instead of a temporary one")
    a = ap.parse_args()
    model = os.path.join(realmodels.ensure("ppocr_rec"), "model.onnx")
    rng = np.random.default_rng(SEED)
    with tempfile.TemporaryDirectory() as scratch:
        tmp = a.keep or scratch
        os.makedirs(tmp, exist_ok=True)
        paths = {}
        # The draw order of the earlier measurements (128 train, 64 val, 200 test); lines beyond the
        # first 128 of --train are drawn after them, so val and test are the same whatever --train is.
        drawn = {name: lines(rng, n) for name, n in (("train", min(a.train, TRAIN)), ("val", VAL), ("test", TEST))}
        if a.train > TRAIN:
            drawn["train"] = np.concatenate([drawn["train"], lines(rng, a.train - TRAIN)])
        if a.calib == "labelled":  # the crops' images only: the runs stay label-free
            drawn["train"] = ocr_lines.labelled_lines(np.random.default_rng(ocr_lines.JUDGED_SEED + 1), a.train)[0]
            drawn["val"] = ocr_lines.labelled_lines(np.random.default_rng(ocr_lines.JUDGED_SEED + 2), VAL)[0]
        for name, arr in drawn.items():
            paths[name] = os.path.join(tmp, name + ".npy")
            np.save(paths[name], arr)
        ptq = os.path.join(tmp, "ptq")
        stages = ["--ptq", a.start_ptq, "--ptq-samples", "32", "--ptq-batch", "8"] if a.start_ptq else []
        _, ptq_secs = quantkit(a.quantkit, ["calibrate", model, "--data", paths["train"], "--method", a.start_method,
                                            "--float-dtype", "fp32", "--threads", str(a.threads), "-o", ptq, "-q",
                                            *stages])
        float_model = os.path.join(ptq, "model.float.onnx")
        start_model = float_model if os.path.exists(float_model) else model
        teacher = ["--teacher", model] if start_model != model and not a.no_teacher else []
        judge = ocr_lines.RecJudge(model, np.load(paths["test"]),
                                   ocr_lines.labelled_lines(np.random.default_rng(ocr_lines.JUDGED_SEED), ocr_lines.JUDGED))
        print(f"FP32 accuracy on {ocr_lines.JUDGED} labelled lines {judge.fp32_accuracy:.3f}; on {TEST} test lines:")
        print(f"PTQ ({a.start_method}, stages {a.start_ptq or 'none'}; {ptq_secs:.0f} s): "
              + judge.describe(judge(os.path.join(ptq, "model.qdq.onnx"))), flush=True)
        runs = {"val": ("--val", ["--val", paths["val"]]),
                "noval": ("no --val", ["--holdout", "0"] if a.no_holdout else [])}
        for key in a.runs.split(","):
            label, extra = runs[key]
            if a.lr is not None:
                extra = extra + ["--lr", a.lr]
            if a.eval_every is not None:
                extra = extra + ["--eval-every", str(a.eval_every)]
            if a.metric is not None:
                extra = extra + ["--metric", a.metric]
            if a.loss is not None:
                extra = extra + ["--loss", a.loss]
            out = os.path.join(tmp, "qat_" + key)
            args = ["qat", start_model, "--plan", os.path.join(ptq, "plan.json"), "--data", paths["train"], "--steps",
                    str(a.steps), "--batch-size", "8", "--float-dtype", "fp32", "--threads", str(a.threads), "-q",
                    "-o", out, *teacher, *extra]
            r, secs = quantkit(a.quantkit, args)
            print(f"\n== qat {label}: {secs:.0f} s\n{r.stdout}{r.stderr}"
                  "written model: " + judge.describe(judge(os.path.join(out, "model.qdq.onnx"))), flush=True)


if __name__ == "__main__":
    main()
