"""Hostile input to `quantkit qat`, round 3 (issue #48), on the zoo's plain CNN:

  1. --resume of a checkpoint whose recorded numbers cannot be (value/holdout 1e30, value/best_metric
     1e308, value/lr 1e30, value/best_step past the checkpoint's step, an AdamW step of 2^63-1)
     exits 2 with one line naming the file and the member, and -o is not created;
  2. a model with one output per sample trained on labelled data (fashion-mnist) completes: its
     labels do not apply to a score (it used to fail after training, "label 3 is outside the
     model's 1 classes", leaving checkpoint.npz behind);
  3. a checkpoint with two members of one name is refused naming that, not libzip's "File already
     exists".
Run by pytest under ctest; quantkit and the repository come from tests/e2e/qktest.py.
"""
import os
import tempfile
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from qktest import ROOT, run_process  # noqa: E402  (tests/e2e/qktest.py)

MODEL = os.path.join(ROOT, "models", "zoo", "plain_cnn.onnx")
COMMON = ["--data", "fashion-mnist:train", "--samples", "256", "--calib-samples", "64", "--batch-size", "32",
          "--eval-every", "2", "--holdout", "32", "-q"]


def tampered(src, dst, key, value):
    """src's members with `key` (or the first AdamW step when key is 'adamw-step') set to value."""
    with np.load(src) as z:
        members = {k: z[k] for k in z.files}
    if key == "adamw-step":
        key = next(k for k in sorted(members) if k.startswith("optimizer/adamw/step/"))
        members[key] = np.array(value, dtype=np.int64)
    else:
        members[key] = np.array(value, dtype=np.float64)
    np.savez(dst, **members)
    return key


def test_resume_refuses_impossible_numbers():
    with tempfile.TemporaryDirectory() as d:
        first = os.path.join(d, "first")
        run_process(["qat", MODEL, *COMMON, "--steps", "4", "-o", first])
        ckpt = os.path.join(first, "checkpoint.npz")
        cases = [("value/holdout", 1e30, "not a count"),
                 ("value/best_metric", 1e308, "not a share in [0, 1]"),
                 ("value/lr", 1e30, "not a learning rate"),
                 ("value/best_step", 1e9, "after the checkpoint's step"),
                 ("adamw-step", 2 ** 63 - 1, "the checkpoint's step")]
        for key, value, expected in cases:
            bad = os.path.join(d, "bad.npz")
            member = tampered(ckpt, bad, key, value)
            out = os.path.join(d, "resumed")
            p = run_process(["qat", MODEL, *COMMON, "--steps", "8", "--resume", bad, "-o", out], expect=2)
            line = p.stderr.strip()
            assert "\n" not in line and expected in line and "bad.npz" in line, (key, p.stderr)
            assert member.split("/")[-1] in line or member.replace("value/", "") in line, (key, line)
            assert not os.path.exists(out), f"{key}: -o was created"


def test_one_output_model_on_labelled_data():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "score.onnx")
        w = numpy_helper.from_array(np.random.RandomState(0).randn(784, 1).astype(np.float32) * 0.01, "W")
        shape = numpy_helper.from_array(np.array([-1, 784], dtype=np.int64), "shape")
        graph = helper.make_graph(
            [helper.make_node("Reshape", ["input", "shape"], ["flat"]), helper.make_node("MatMul", ["flat", "W"], ["y"])],
            "score", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 1, 28, 28])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])], [w, shape])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        onnx.save(model, path)
        out = os.path.join(d, "out")
        p = run_process(["qat", path, *COMMON, "--steps", "4", "-o", out])
        assert os.path.exists(os.path.join(out, "model.qdq.onnx")), p.stdout + p.stderr
        assert "rel_mse" in p.stdout, p.stdout  # a score is judged by its error, not by labels


def test_checkpoint_with_a_duplicated_member():
    with tempfile.TemporaryDirectory() as d:
        first = os.path.join(d, "first")
        run_process(["qat", MODEL, *COMMON, "--steps", "2", "-o", first])
        dup = os.path.join(d, "dup.npz")
        with zipfile.ZipFile(os.path.join(first, "checkpoint.npz")) as src, zipfile.ZipFile(dup, "w") as dst:
            names = src.namelist()
            for name in names:
                dst.writestr(name, src.read(name))
            step = next(n for n in names if n == "step.npy")
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # zipfile warns of the duplicate it writes
                dst.writestr(step, src.read(step))
        p = run_process(["qat", MODEL, *COMMON, "--steps", "4", "--resume", dup, "-o", os.path.join(d, "o")], expect=2)
        assert "same name" in p.stderr or "second member" in p.stderr, p.stderr
        assert "File already exists" not in p.stderr, p.stderr
