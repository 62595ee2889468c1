"""End-to-end: models as they are exported, through `quantkit calibrate` with its defaults.

For every exported model of qkdev/realmodels.py (opset 9 and 11 segmentation CNNs over pages of
three sizes, a fixed-batch-1 classifier, a CTC text-line recogniser over three widths, a GRU with a
[2,B,32] state input and a scalar input from recorded calls, an If on a scalar input and an If on a
static dimension, both holding convolutions, an STFT-as-convolution audio front-end):
  1. calibrate accepts the model file and the data as they are (exit 0; no --batch-size, no opset
     conversion by hand, no data reshaping);
  2. the INT8 Q/DQ model, run in onnxruntime, agrees with the FP32 model on held-out data within
     the named budget of its output kind;
  4. `calibrate --budget` repairs the audio front-end (ruined by symmetric int8 under every method)
     in one command: the fallback search on the held-out tail of its calibration data brings the
     INT8 model within BUDGET_BOUND of FP32 on the val split;
  5. `calibrate --method auto` on the text-line recogniser (a CTC sequence output, where the issue saw
     entropy collapse) picks a method on the held-out tail of its calibration data and stays within
     the model's budget on val;
  3. the summary says what was done: the opset upgrade (opset 9/11), the convolutions quantized
     inside the branch of an If on data, and the If on a static dimension replaced by its taken
     branch, whose convolutions are then quantized (MIN_Q_NODES).
The shipped PyPI models (PP-OCR, Silero VAD) are in qkdev/realmodels_table.py, which needs pip.
Run by pytest under ctest; quantkit and the repository come from tests/e2e/qktest.py.
"""
import os
import subprocess
import tempfile

import numpy as np
from qkdev import realmodels
from qkdev import realmodels_table as table
from qktest import QK  # tests/e2e/qktest.py

# Budgets per model, INT8 (quantkit defaults) vs FP32 in onnxruntime on the val split: about 2x the
# values measured when this test was written (docs/realmodels-table.md). A collapsed calibration
# (the entropy failures) misses them by an order of magnitude. The models have random
# weights, so a sequence model's greedy decode sits on near-ties (FP32 vs INT8 exact match 0.53
# for quantkit and onnxruntime alike): its output error is the stable measure.
#   (measure, bound, "min"|"max"); measures: agreement, score_abs, rel_rms
BUDGETS = {
    "seg_opset9": ("rel_rms", 0.03, "max"),       # measured 0.012
    "seg_opset11": ("rel_rms", 0.03, "max"),      # measured 0.012
    "fixed_b1": ("agreement", 0.9, "min"),        # measured 1.0
    "textline": ("rel_rms", 0.01, "max"),         # measured 0.0027
    "gru_state": ("score_abs", 0.002, "max"),     # measured 0.00017
    "if_model": ("agreement", 0.9, "min"),        # measured 1.0 (the taken branch's convolutions quantized)
    "if_static": ("agreement", 0.9, "min"),       # measured 1.0 (the taken branch is quantized)
    # Max calibration on a log-power front-end loses resolution (symmetric int8 on a power
    # spectrum): measured 0.063, onnxruntime's asymmetric uint8 0.013. `quantkit fallback` is the
    # remedy today (calibrate --budget is not done); the bound guards against collapse.
    "audio_frontend": ("score_abs", 0.13, "max"),
}
BUDGET_BOUND = 0.02  # calibrate --budget on audio_frontend, mean abs score diff on val
EXPECTED_NOTES = {
    "seg_opset9": "model upgraded from opset 9 to 13",
    "seg_opset11": "model upgraded from opset 11 to 13",
    "if_model": "inside If/Loop/Scan bodies quantized",
    "if_static": "replaced by the branch taken",
}
# The folded If's branch holds two Conv (input, weights) and a Relu -> Conv edge: without the fold
# only the head's Gemm (2 QuantizeLinear) is quantized.
# Issue 48: the PTQ stages on the multi-input models (AdaRound shortened: the run checks that every
# stage accepts the inputs, not AdaRound's convergence).
PTQ_STAGES = ["smoothquant", "bias-correction", "seqmse", "adaround:iterations=50",
              "smoothquant,seqmse,adaround:iterations=50,bias-correction"]
# Silero VAD's speech score (mean abs difference from FP32 on val) when it is cached (pip).
SILERO_SCORE_BOUND = 0.05
# The If on data: the taken branch (sr == 16000 in every sample) has two Conv, quantized inside the
# branch (input and weights each), beside the head's Gemm.
MIN_Q_NODES = {"if_static": 6, "if_model": 6}


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in realmodels.EXPORTED:
            row = table.evaluate(QK, name, tmp, with_ort=False)
            label = f"{name} ({row['kind']})"
            if not row["accepted"]:
                failures.append(f"{label}: not accepted as exported: {row['quantkit_error']}")
                continue
            measure, bound, side = BUDGETS[name]
            value = row["quantkit_rel_rms"] if measure == "rel_rms" else row["quantkit"]
            ok = value >= bound if side == "min" else value <= bound
            print(f"{label}: {measure} {value:.4f} (bound {side} {bound}; {row['metric']} {row['quantkit']:.4f}, "
                  f"{row['quantkit_q_nodes']} QuantizeLinear, {row['quantkit_seconds']:.1f} s)")
            if row["quantkit_q_nodes"] == 0:
                failures.append(f"{label}: nothing was quantized")
            if row["quantkit_q_nodes"] < MIN_Q_NODES.get(name, 0):
                failures.append(f"{label}: {row['quantkit_q_nodes']} QuantizeLinear, expected at least {MIN_Q_NODES[name]}")
            if not ok:
                failures.append(f"{label}: {measure} {value:.4f} outside its budget ({side} {bound})")
            want = EXPECTED_NOTES.get(name)
            if want and not any(want in n for n in row["notes"]):
                failures.append(f"{label}: summary lacks '{want}': {row['notes']}")
        # Item 6: calibrate --budget on the model INT8 ruins. rel_mse budget 0.001 = rel RMS ~3% on the
        # held-out calibration tail; on val the repaired model must beat the plain calibration's error
        # (measured 0.063) by far.
        folder = realmodels.ensure("audio_frontend")
        model = os.path.join(folder, "model.onnx")
        budget_dir = os.path.join(tmp, "audio_budget")
        r = subprocess.run([QK, "calibrate", model, "--data", os.path.join(folder, "calib"), "--budget", "0.001",
                            "-o", budget_dir, "-q"], capture_output=True, text=True)
        if r.returncode != 0 or "within budget" not in r.stdout:
            failures.append(f"audio_frontend --budget: exit {r.returncode}: {(r.stderr or r.stdout).strip()[-300:]!r}")
        else:
            for f in ("model.qdq.onnx", "plan.json", "calib.cache", "layer_precisions.txt", "fallback.json"):
                if not os.path.exists(os.path.join(budget_dir, f)):
                    failures.append(f"audio_frontend --budget: {f} not written")
            val = table.load_feeds(model, os.path.join(folder, "val"))
            _, score_abs, rel = table.metric("score", table.run_outputs(model, val),
                                             table.run_outputs(os.path.join(budget_dir, "model.qdq.onnx"), val))
            print(f"audio_frontend --budget 0.001: score_abs {score_abs:.4f}, rel RMS {rel:.4f} (bound {BUDGET_BOUND})")
            if score_abs > BUDGET_BOUND:
                failures.append(f"audio_frontend --budget: score_abs {score_abs:.4f} > {BUDGET_BOUND}")
        # Item 5: --method auto. The choice is made on held-out calibration data (not on val), so val
        # checks that the chosen plan generalises: within the budget max meets.
        folder = realmodels.ensure("textline")
        row = table.evaluate(QK, "textline", os.path.join(tmp, "auto"), with_ort=False, extra=["--method", "auto"])
        measure, bound, _ = BUDGETS["textline"]
        if not row["accepted"] or "quantkit_method" not in row:
            failures.append(f"textline --method auto: {row.get('quantkit_error', 'no method chosen')}")
        else:
            print(f"textline --method auto: chose {row['quantkit_method']}, rel RMS {row['quantkit_rel_rms']:.4f} "
                  f"(bound {bound}), {row['quantkit_cpu_seconds']:.1f} s CPU")
            if row["quantkit_rel_rms"] > bound:
                failures.append(f"textline --method auto: rel RMS {row['quantkit_rel_rms']:.4f} > {bound}")
        # Item 5 under --from-stats: the statistics carry histograms, so auto builds every method's plan
        # from them; the held-out data must then be given (the shards hold no samples), else exit 2
        # naming --holdout. The per-tensor pass reports its trials.
        stats = os.path.join(tmp, "textline.qkstats")
        model = os.path.join(folder, "model.onnx")
        r = subprocess.run([QK, "calibrate", model, "--data", os.path.join(folder, "calib"), "--stats", stats, "-q"],
                           capture_output=True, text=True)
        r_auto = subprocess.run([QK, "calibrate", model, "--from-stats", stats, "--method", "auto", "--holdout",
                                 os.path.join(folder, "val"), "-o", os.path.join(tmp, "auto_stats"), "-q"],
                                capture_output=True, text=True)
        r_bare = subprocess.run([QK, "calibrate", model, "--from-stats", stats, "--method", "auto", "-o",
                                 os.path.join(tmp, "auto_bare"), "-q"], capture_output=True, text=True)
        if r.returncode != 0 or r_auto.returncode != 0 or "per tensor:" not in r_auto.stdout:
            failures.append(f"textline --from-stats --method auto: exit {r.returncode}/{r_auto.returncode}: "
                            f"{(r.stderr + r_auto.stderr).strip()[-300:]!r}")
        if r_bare.returncode != 2 or "--holdout" not in r_bare.stderr:
            failures.append(f"--from-stats --method auto without --holdout: exit {r_bare.returncode}, {r_bare.stderr!r}")
        # Issue 48: every --ptq stage on the models whose extra inputs the stages used to feed to the
        # wrong sub-model (gru_state: a GRU state [2,B,32] and a scalar gain; if_model: a scalar input
        # read only by an If holding convolutions), and Silero VAD (state, scalar sr, If + LSTM) when
        # qkdev/realmodels.py has cached it: accepted, and within the model's budget on val.
        ptq_models = ["gru_state", "if_model"]
        if os.path.exists(os.path.join(realmodels.cache_dir(), "silero_vad", "stamp.json")):
            ptq_models.append("silero_vad")
        for name in ptq_models:
            for stages in PTQ_STAGES:
                row = table.evaluate(QK, name, os.path.join(tmp, "ptq", stages.replace(",", "+").replace(":", "_")),
                                     with_ort=False, extra=["--ptq", stages])
                label = f"{name} --ptq {stages}"
                if not row["accepted"]:
                    failures.append(f"{label}: {row.get('quantkit_error', 'not accepted')}")
                    continue
                measure, bound, side = BUDGETS.get(name, ("score_abs", SILERO_SCORE_BOUND, "max"))
                value = row["quantkit_rel_rms"] if measure == "rel_rms" else row["quantkit"]
                print(f"{label}: {measure} {value:.4f} (bound {side} {bound}), {row['quantkit_seconds']:.1f} s")
                if not (value >= bound if side == "min" else value <= bound):
                    failures.append(f"{label}: {measure} {value:.4f} outside its budget ({side} {bound})")
        # Item 2's error text: a wrong per-sample shape on a dynamic-shape model names '?' for the
        # dynamic dims instead of a size taken from the first sample.
        folder = realmodels.ensure("textline")
        bad = os.path.join(tmp, "bad.npy")
        np.save(bad, np.zeros((2, 3, 32, 100), np.float32))
        r = subprocess.run([QK, "calibrate", os.path.join(folder, "model.onnx"), "--data", bad, "-o",
                            os.path.join(tmp, "bad_out")], capture_output=True,
                           text=True)
        if r.returncode != 2 or "[1,32,?]" not in r.stderr:
            failures.append(f"textline wrong-channel data: exit {r.returncode}, {r.stderr.strip()!r}")

    for f in failures:
        print("FAIL", f)
    checks = len(realmodels.EXPORTED) + 4 + len(ptq_models) * len(PTQ_STAGES)
    print(f"{checks - len(failures)} passed, {len(failures)} failed")
    assert not failures, failures


def test_realmodels():
    main()


if __name__ == "__main__":
    main()
