"""calibrate --ptq on a zoo model: the stages measurably bring the written Q/DQ model closer to FP32.

plain_cnn calibrated with max on 64 samples, then with --ptq seqmse,adaround (100 AdaRound steps
per layer on 32 samples). Each Q/DQ model runs in onnxruntime on 2000 fashion-mnist:test images;
the stages must cut the relative MSE of the logits against FP32 by MIN_REL_MSE_GAIN (measured:
2.03e-4 -> 1.71e-4, -16%) without losing top-1. The plan file pairs with model.float.onnx: eval of
that pair is the Q/DQ model prediction for prediction, and eval with the original model is refused.
--method auto --ptq keeps the stage set that scores best on held-out data, and writes exactly it.
Bias correction on mobilenetv2_small (depthwise convolutions, where the mean shift of quantized
weights is largest): the logits' relative MSE against FP32 must fall by MIN_BIAS_CORRECTION_GAIN
(measured 5.97e-4 -> 2.56e-4, -57%) without losing top-1.
Run by pytest under ctest; quantkit and the repository come from tests/e2e/qktest.py.
"""
import json
import os
import tempfile

import numpy as np
from qktest import run, run_process, ort_run, zoo_data as data, zoo_model  # noqa: E402

TEST_SAMPLES = 2000
# FP32 float part: the models are scored in onnxruntime, whose CPU FP16 QuantizeLinear truncates
# where TensorRT rounds (docs/strongly-typed.md); the stages fit weights, not the float dtype.
CALIB = ["--data", "fashion-mnist:calib", "--samples", "64", "--float-dtype", "fp32", "-q"]
PTQ = ["--ptq", "seqmse,adaround:iterations=100", "--ptq-samples", "32", "--ptq-batch", "16"]
# Share of the max plan's output error the stages must remove (measured 16%; deterministic runs).
MIN_REL_MSE_GAIN = 0.10
MIN_BIAS_CORRECTION_GAIN = 0.40


def calibrate_and_score(model, d, configs):
    """Calibrates `model` once per (name, extra options) into d/name and scores each model.qdq.onnx
    in onnxruntime on the first TEST_SAMPLES test images: {name: (logits rel MSE vs FP32, top-1)},
    and the last summary."""
    x, y = data.load_split("test")
    x, y = x[:TEST_SAMPLES], y[:TEST_SAMPLES]
    ref = ort_run(model, x, batch=500, threads=1)
    scores, summary = {}, ""
    for name, extra in configs:
        out = os.path.join(d, name)
        summary = run(["calibrate", model, *CALIB, "-o", out, *extra])
        logits = ort_run(os.path.join(out, "model.qdq.onnx"), x, batch=500, threads=1)
        rel = float(np.mean((logits - ref) ** 2) / np.mean(ref ** 2))
        scores[name] = (rel, float(np.mean(logits.argmax(1) == y)))
        print(f"{name}: output rel MSE {rel:.3e}, top-1 {scores[name][1]:.4f} (FP32 {np.mean(ref.argmax(1) == y):.4f})")
    return scores, summary


def main():
    model = zoo_model("plain_cnn")
    x = data.load_split("test")[0][:TEST_SAMPLES]
    with tempfile.TemporaryDirectory() as d:
        scores, summary = calibrate_and_score(model, d, (("max", []), ("ptq", PTQ)))
        plan = json.load(open(os.path.join(d, "ptq", "plan.json")))
        stages = plan["provenance"]["stages"]
        assert [s.split("(")[0] for s in stages] == ["seqmse", "adaround"], stages
        assert "ptq adaround(" in summary and "model.float.onnx" in summary, summary
        assert scores["ptq"][0] <= (1 - MIN_REL_MSE_GAIN) * scores["max"][0], scores
        assert scores["ptq"][1] >= scores["max"][1], scores

        # The plan file pairs with model.float.onnx: the simulation of that pair is the Q/DQ model.
        out = os.path.join(d, "ptq")
        pred = os.path.join(d, "pred.npy")
        run(["eval", os.path.join(out, "model.float.onnx"), "--plan", os.path.join(out, "plan.json"), "--data",
             "fashion-mnist:test", "--samples", "500", "--json", "-q", "--save-predictions", pred])
        theirs = ort_run(os.path.join(out, "model.qdq.onnx"), x[:500], batch=500, threads=1).argmax(1)
        assert int((np.load(pred) != theirs).sum()) == 0
        # ... and refuses the original model, whose weights are not the ones the stages chose.
        p = run_process(["eval", model, "--plan", os.path.join(out, "plan.json"), "--data", "fashion-mnist:test",
                         "--samples", "10", "-q"], expect=2)
        assert "model.float.onnx" in p.stderr, p.stderr

        # --method auto --ptq: each stage alone and both tried on held-out data; the one kept (or
        # none) has the best score, and the written plan carries exactly its stages.
        auto = os.path.join(d, "auto")
        j = json.loads(run(["calibrate", model, "--data", "fashion-mnist:calib", "--samples", "128", "--method", "auto",
                            "--holdout-samples", "200", "--ptq", "seqmse,adaround:iterations=20", "--ptq-samples",
                            "16", "--ptq-batch", "16", "--json", "-q", "-o", auto]))
        trials = j["ptq"]["trials"]
        assert [t["stages"] for t in trials] == ["", "seqmse", "adaround", "seqmse,adaround"], trials
        best = min(trials, key=lambda t: (t["loss"], t["rel_mse"]))
        assert j["ptq"]["kept"] == best["stages"], j["ptq"]
        written = json.load(open(os.path.join(auto, "plan.json")))["provenance"].get("stages", [])
        assert [s.split("(")[0] for s in written] == [x for x in best["stages"].split(",") if x], (written, best)


def bias_correction():
    model = zoo_model("mobilenetv2_small")
    with tempfile.TemporaryDirectory() as d:
        scores, summary = calibrate_and_score(
            model, d, (("max", []), ("bias", ["--ptq", "bias-correction", "--ptq-samples", "64"])))
        assert "ptq bias-correction:" in summary and "0 left as they were" in summary, summary
        stages = json.load(open(os.path.join(d, "bias", "plan.json")))["provenance"]["stages"]
        assert [s.split(" ")[0] for s in stages] == ["bias-correction"], stages
        assert scores["bias"][0] <= (1 - MIN_BIAS_CORRECTION_GAIN) * scores["max"][0], scores
        assert scores["bias"][1] >= scores["max"][1], scores


def test_ptq():
    main()


def test_bias_correction():
    bias_correction()


if __name__ == "__main__":
    main()
    bias_correction()
