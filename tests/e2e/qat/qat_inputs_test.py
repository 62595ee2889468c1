"""End-to-end `quantkit qat --labels FILE.npy` and `--feature TENSOR` on the zoo's plain CNN, with
training data the CLI gets as a bare .npy array (no labels of its own). A few seconds of CPU each.

  labels:  1. the first step's cross-entropy equals the one onnxruntime computes from calibrate's
              Q/DQ model with the same labels, for the true labels and for shuffled ones (the file
              is read, in sample order, and used);
           2. fine-tuning with the true labels keeps the held-out top-1; with shuffled labels it
              falls far below, and the loss falls while the model fits them;
           3. bad labels (wrong length, out of range, given to a label-free loss) exit 2 with one
              line and write no model.
  feature: 1. the first step's feature MSE equals onnxruntime's MSE between calibrate's Q/DQ
              model and the FP32 model on that tensor, and its logit MSE likewise;
           2. the feature loss falls during training;
           3. the exported model sits closer to the FP32 model on that tensor (held-out data, in
              onnxruntime) than one fine-tuned without --feature.
Run by pytest under ctest (test_labels, test_feature); quantkit and the repository come from tests/e2e/qktest.py.
"""
import json
import os
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

from qktest import ROOT, run_process, zoo_data  # noqa: E402  (tests/e2e/qktest.py)

MODEL = os.path.join(ROOT, "models", "zoo", "plain_cnn.onnx")
FEATURE = "/features/features.2/features.2.2/Relu_output_0"  # the second conv block's ReLU
TRAIN = slice(0, 512)         # test-split images used as training data (the CLI sees a bare array)
HELD_OUT = slice(5000, 6000)  # disjoint images for the accuracy and feature checks
CHECK_BATCH = 128             # first-step cross-checks: one batch holding the first 128 samples
STEPS, BATCH = 30, 64
LR = "1e-3"          # labels: high enough for shuffled labels to undo the training within STEPS
FEATURE_LR = "1e-4"  # feature: the qat default
# quantkit's and onnxruntime's int8 simulations may differ by one quantization step on rare
# elements (conv sums in another order); the losses over a batch agree far closer than that.
LOSS_RTOL = 0.02
MIN_SHUFFLE_DROP = 0.20       # shuffled labels must cost >= 20 top-1 points against the true ones
MAX_TRUE_LABEL_DROP = 0.03    # the true labels keep top-1 within 3 points of the starting model
MIN_FEATURE_GAIN = 0.9        # with --feature the held-out feature MSE is <= 90% of that without (0.78 measured)


def run(args, expect=0):
    # One compute thread: on a busy 2-core machine OpenMP's spin-waiting multiplies the CPU time.
    return run_process(["--threads", "1"] + args, expect)


def session(path, extra_outputs=()):
    """onnxruntime session (optimizations off) that also returns the named intermediate tensors."""
    m = onnx.load(path)
    for name in extra_outputs:
        m.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def outputs(path, x, extra_outputs=()):
    s = session(path, extra_outputs)
    parts = [s.run(None, {"input": x[i:i + 500]}) for i in range(0, len(x), 500)]
    return [np.concatenate([p[k] for p in parts]) for k in range(len(parts[0]))]


def cross_entropy(logits, labels):
    z = logits - logits.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    return float(-logp[np.arange(len(labels)), labels].mean())


def top1(path, x, y):
    return float(np.mean(outputs(path, x)[0].argmax(1) == y))


def history(out_dir):
    return json.load(open(os.path.join(out_dir, "training_log.json")))["history"]


def close(a, b):
    return abs(a - b) <= LOSS_RTOL * max(abs(a), abs(b))


def check_labels(tmp, train, plan, qdq_ptq, x, y, hx, hy):
    rng = np.random.default_rng(7)
    shuffled = rng.permutation(y)
    assert np.mean(shuffled == y) < 0.2
    files = {}
    for name, labels in (("true", y), ("shuffled", shuffled)):
        files[name] = os.path.join(tmp, name + ".npy")
        np.save(files[name], labels.astype(np.int64))

    # 1. The first step's cross-entropy is onnxruntime's, with the labels of the file, in order.
    ptq_logits = outputs(qdq_ptq, x[:CHECK_BATCH])[0]
    for name, labels in (("true", y), ("shuffled", shuffled)):
        out = os.path.join(tmp, "check_" + name)
        run(["qat", MODEL, "--plan", plan, "--data", train, "--labels", files[name], "--loss", "ce", "--samples",
             str(CHECK_BATCH), "--batch-size", str(CHECK_BATCH), "--steps", "1", "-o", out, "-q"])
        got, want = history(out)[0]["label"], cross_entropy(ptq_logits, labels[:CHECK_BATCH])
        print(f"{name} labels: first-step cross-entropy {got:.5f}, onnxruntime {want:.5f}")
        assert close(got, want), (name, got, want)

    # 2. Fine-tuning uses them: the true labels keep top-1, shuffled ones destroy it.
    start = top1(qdq_ptq, hx, hy)
    acc, runs = {}, {}
    for name in ("true", "shuffled"):
        runs[name] = os.path.join(tmp, "train_" + name)
        # --holdout 0: the last step is written whatever it scores. With the default hold-out,
        # keep-the-best would (rightly) write the PTQ start for the shuffled labels, and this test
        # is about the labels being used, not about keep-the-best (tests/e2e/qat/qat_validation_test.py).
        run(["qat", MODEL, "--plan", plan, "--data", train, "--labels", files[name], "--loss", "ce", "--steps",
             str(STEPS), "--batch-size", str(BATCH), "--lr", LR, "--seed", "1", "--holdout", "0", "-o", runs[name],
             "-q"])
        acc[name] = top1(os.path.join(runs[name], "model.qdq.onnx"), hx, hy)
    print(f"held-out top-1: start {start:.4f}, true labels {acc['true']:.4f}, shuffled {acc['shuffled']:.4f}")
    assert acc["true"] >= start - MAX_TRUE_LABEL_DROP, (start, acc)
    assert acc["true"] - acc["shuffled"] >= MIN_SHUFFLE_DROP, acc
    h = [s["label"] for s in history(runs["shuffled"])]
    assert len(h) == STEPS and np.mean(h[-5:]) < np.mean(h[:5]), h

    # 3. Bad labels: one line, exit 2, no model.
    cases = [(["--labels", files["true"], "--loss", "mse"], "uses no labels")]
    for name, labels, needle in (("short", y[:-1], "short.npy"),
                                 ("range", np.where(np.arange(len(y)) == 3, 10, y), "out of range"),
                                 ("negative", np.where(np.arange(len(y)) == 3, -1, y), "negative.npy")):
        np.save(os.path.join(tmp, name + ".npy"), np.asarray(labels, np.int64))
        cases.append((["--labels", os.path.join(tmp, name + ".npy"), "--loss", "ce"], needle))
    for args, needle in cases:
        out = os.path.join(tmp, "bad")
        p = run(["qat", MODEL, "--plan", plan, "--data", train, "--steps", "2", "--batch-size", str(BATCH),
                 "-o", out, "-q", *args], expect=2)
        assert len(p.stderr.strip().splitlines()) == 1 and needle in p.stderr, (args, p.stderr)
        assert not os.path.exists(os.path.join(out, "model.qdq.onnx")), args


def check_feature(tmp, train, plan, qdq_ptq, x, hx):
    # 1. The first step's feature and logit MSEs are onnxruntime's.
    fp32_logits, fp32_f = outputs(MODEL, x[:CHECK_BATCH], [FEATURE])
    ptq_logits, ptq_f = outputs(qdq_ptq, x[:CHECK_BATCH], [FEATURE])
    out = os.path.join(tmp, "check")
    run(["qat", MODEL, "--plan", plan, "--data", train, "--feature", FEATURE, "--loss", "mse", "--samples",
         str(CHECK_BATCH), "--batch-size", str(CHECK_BATCH), "--steps", "1", "-o", out, "-q"])
    first = history(out)[0]
    want_f, want_d = float(np.mean((ptq_f - fp32_f) ** 2)), float(np.mean((ptq_logits - fp32_logits) ** 2))
    print(f"first step: feature MSE {first['feature']:.6g} (onnxruntime {want_f:.6g}), "
          f"logit MSE {first['distill']:.6g} (onnxruntime {want_d:.6g})")
    assert close(first["feature"], want_f) and close(first["distill"], want_d), (first, want_f, want_d)

    # 2./3. The feature loss falls, and the feature ends closer to FP32 than without --feature.
    mse = {}
    _, ref = outputs(MODEL, hx, [FEATURE])
    for name, extra in (("with", ["--feature", FEATURE, "--feature-weight", "100"]), ("without", [])):
        out = os.path.join(tmp, name)
        run(["qat", MODEL, "--plan", plan, "--data", train, "--loss", "mse", "--steps", str(STEPS), "--batch-size",
             str(BATCH), "--lr", FEATURE_LR, "--seed", "1", "--holdout", "0", "-o", out, "-q", *extra])
        _, f = outputs(os.path.join(out, "model.qdq.onnx"), hx, [FEATURE])
        mse[name] = float(np.mean((f - ref) ** 2))
        if name == "with":
            h = [s["feature"] for s in history(out)]
            assert np.mean(h[-5:]) < np.mean(h[:5]), h
    print(f"held-out feature MSE to FP32: with --feature {mse['with']:.6g}, without {mse['without']:.6g}")
    assert mse["with"] <= MIN_FEATURE_GAIN * mse["without"], mse


def check(mode):
    x, y = zoo_data.load_split("test")
    hx, hy = x[HELD_OUT], y[HELD_OUT]
    x, y = x[TRAIN], y[TRAIN].astype(np.int64)
    with tempfile.TemporaryDirectory() as tmp:
        train = os.path.join(tmp, "train.npy")
        np.save(train, x)
        # labels: a max plan, close to FP32, so that only the labels move top-1; feature: an entropy
        # plan, whose clipped input leaves the feature far from FP32 for QAT to pull back.
        ptq = os.path.join(tmp, "ptq")
        method = "max" if mode == "labels" else "entropy"
        # FP32 float part: QAT trains in FP32, and its first-step losses are checked against
        # onnxruntime's run of calibrate's Q/DQ model (whose CPU FP16 QuantizeLinear truncates
        # where TensorRT rounds: docs/strongly-typed.md); the plan's dtype is the export's too.
        run(["calibrate", MODEL, "--data", train, "--samples", "256", "--method", method, "--float-dtype", "fp32",
             "-o", ptq, "-q"])
        plan, qdq_ptq = os.path.join(ptq, "plan.json"), os.path.join(ptq, "model.qdq.onnx")
        if mode == "labels":
            check_labels(tmp, train, plan, qdq_ptq, x, y, hx, hy)
        elif mode == "feature":
            check_feature(tmp, train, plan, qdq_ptq, x, hx)


def test_labels():
    check("labels")


def test_feature():
    check("feature")


if __name__ == "__main__":
    test_labels()
    test_feature()
