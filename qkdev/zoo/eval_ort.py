"""Top-1 / top-5 of an ONNX classifier on a Fashion-MNIST split, with onnxruntime.

    .venv/bin/python -m qkdev.zoo.eval_ort models/zoo/plain_cnn.onnx --split test

The numbers in models/zoo/manifest.json come from this function: onnxruntime 1.19.2 on CPU,
graph optimizations disabled (ORT_DISABLE_ALL), one intra-op thread, batches of 500, the declared
preprocessing of data.py. Predictions are the argmax of the logits (first index on ties).
"""
import argparse
import sys

import numpy as np

from qkdev.zoo import data

BATCH = 500


def make_session(path):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def evaluate(path, x, y):
    """Returns (top1, top5, predictions int16 [N]); top-k as fractions in [0, 1]."""
    sess = make_session(path)
    name = sess.get_inputs()[0].name
    logits = np.concatenate([sess.run(None, {name: x[i:i + BATCH]})[0] for i in range(0, len(x), BATCH)])
    if not np.all(np.isfinite(logits)):
        raise ValueError(f"{path}: non-finite logits")
    pred = np.argmax(logits, axis=1)
    top5 = np.argsort(-logits, axis=1, kind="stable")[:, :5]
    top1_acc = float(np.mean(pred == y))
    top5_acc = float(np.mean(np.any(top5 == y[:, None], axis=1)))
    return top1_acc, top5_acc, pred.astype(np.int16)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--split", default="test", choices=["test", "val", "calib", "train"])
    ap.add_argument("--save-pred", help="write argmax predictions (int16 .npy) here")
    args = ap.parse_args()
    x, y = data.load_split(args.split)
    top1, top5, pred = evaluate(args.model, x, y)
    print(f"{args.model} {args.split} ({len(y)} images): top-1 {100 * top1:.2f}%  top-5 {100 * top5:.2f}%")
    if args.save_pred:
        np.save(args.save_pred, pred)
    return 0


if __name__ == "__main__":
    sys.exit(main())
