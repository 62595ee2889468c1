"""Trains, exports and measures the quantkit model zoo (make zoo). Not part of CI.

    .venv/bin/python -m qkdev.zoo.train_all                 # everything, in order
    .venv/bin/python -m qkdev.zoo.train_all --models plain_cnn,resnet_small

Reproducible: fixed seeds, deterministic algorithms, one CPU thread, the committed splits
(training uses the 52,952-image 'train' split: the calibration and validation splits are held out).
Each model is written to models/zoo/<name>.onnx with its argmax predictions on the test set
(<name>.test_pred.npy, int16) and an entry in models/zoo/manifest.json (accuracy measured with
onnxruntime by eval_ort.evaluate). 'resnet_small_qat' fine-tunes resnet_small with fake
quantization (qat.py) and needs resnet_small trained in the same checkout (out/zoo/*.pt).
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from qkdev.zoo import data, eval_ort, models
from qkdev.zoo.onnx_util import onnx_summary, sha256

ZOO_DIR = os.path.join(data.REPO, "models", "zoo")
WORK_DIR = os.path.join(data.REPO, "out", "zoo")  # checkpoints for QAT (ignored by git)
MANIFEST = os.path.join(ZOO_DIR, "manifest.json")
THREADS = 1

# One recipe per model: AdamW + OneCycle (cosine anneal), no augmentation, batch 128.
# Epoch counts are sized for a 2-core CPU shared with C++ builds (about an hour for the whole zoo,
# run as two single-thread processes); more epochs would add about a point to the small models.
RECIPES = {
    "plain_cnn": dict(epochs=4, lr=3e-3, wd=1e-4, seed=1, opset=13, keep_bn=False),
    "resnet_small": dict(epochs=2, lr=3e-3, wd=1e-4, seed=2, opset=13, keep_bn=False),
    "mobilenetv2_small": dict(epochs=1, lr=4e-3, wd=1e-4, seed=3, opset=13, keep_bn=False),
    "efficientnet_small": dict(epochs=1, lr=4e-3, wd=1e-4, seed=4, opset=13, keep_bn=True),
    "vit_tiny": dict(epochs=1, lr=2e-3, wd=5e-2, seed=5, opset=17, keep_bn=False),
}
BATCH = 128
ORDER = ["plain_cnn", "resnet_small", "resnet_small_qat", "efficientnet_small", "mobilenetv2_small", "vit_tiny"]


def setup_determinism(seed):
    torch.set_num_threads(THREADS)
    torch.manual_seed(seed)
    np.random.seed(seed)
    torch.use_deterministic_algorithms(True)


def log(msg):
    print(time.strftime("%H:%M:%S"), msg, flush=True)


def train(model, x, y, recipe, log_every=100):
    """Plain supervised training; returns wall seconds."""
    g = torch.Generator().manual_seed(recipe["seed"])
    opt = torch.optim.AdamW(model.parameters(), lr=recipe["lr"], weight_decay=recipe["wd"])
    steps_per_epoch = math.ceil(len(x) / BATCH)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=recipe["lr"], epochs=recipe["epochs"],
                                                steps_per_epoch=steps_per_epoch, pct_start=0.2)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    t0 = time.time()
    for epoch in range(recipe["epochs"]):
        model.train()
        perm = torch.randperm(len(x), generator=g)
        total, correct, loss_sum = 0, 0, 0.0
        for step in range(steps_per_epoch):
            idx = perm[step * BATCH:(step + 1) * BATCH]
            out = model(xt[idx])
            loss = F.cross_entropy(out, yt[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total += len(idx)
            correct += int((out.argmax(1) == yt[idx]).sum())
            loss_sum += float(loss) * len(idx)
            if step % log_every == 0:
                log(f"  epoch {epoch + 1} step {step}/{steps_per_epoch} loss {loss_sum / total:.4f} "
                    f"acc {correct / total:.4f} ({time.time() - t0:.0f}s)")
        log(f"  epoch {epoch + 1} done: train loss {loss_sum / total:.4f} acc {correct / total:.4f}")
    return time.time() - t0


@torch.no_grad()
def torch_accuracy(model, x, y):
    model.eval()
    pred = torch.cat([model(torch.from_numpy(x[i:i + 500])).argmax(1) for i in range(0, len(x), 500)])
    return float((pred.numpy() == y).mean())


def export_onnx(model, path, opset, keep_bn):
    """Exports with a dynamic batch, written atomically. keep_bn keeps BatchNormalization nodes
    (TrainingMode.PRESERVE on an eval-mode model skips the exporter's Conv+BN folding)."""
    model.eval()
    mode = torch.onnx.TrainingMode.PRESERVE if keep_bn else torch.onnx.TrainingMode.EVAL
    tmp = path + ".tmp"
    torch.onnx.export(model, torch.zeros(1, 1, 28, 28), tmp, opset_version=opset,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}},
                      training=mode, do_constant_folding=True)
    os.replace(tmp, path)


def load_manifest():
    if os.path.exists(MANIFEST):
        with open(MANIFEST) as f:
            return json.load(f)
    return {"version": 1, "models": {}}


def record_entry(name, entry):
    """Re-reads the manifest and replaces one entry, so separate runs (e.g. QAT) do not clobber it."""
    manifest = load_manifest()
    manifest["models"][name] = entry
    save_manifest(manifest)


def save_manifest(manifest):
    manifest["dataset"] = {
        "name": "fashion-mnist",
        "source": "Debian dataset-fashion-mnist, /usr/share/datasets/fashion-mnist",
        "splits": "data/fashion_mnist_splits.json (docs/fashion-mnist-splits.md)",
        "test_images": 10000,
    }
    manifest["preprocessing"] = data.PREPROCESSING
    manifest["evaluator"] = ("qkdev/zoo/eval_ort.py: onnxruntime 1.19.2 CPU, ORT_DISABLE_ALL, 1 thread, "
                             "argmax of logits; test_pred files hold those argmaxes (int16, test order)")
    tmp = MANIFEST + ".tmp"
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, MANIFEST)


def measure_and_record(name, path, entry, xs):
    """Fills accuracy, hash, size and op counts of `entry` and saves the test predictions."""
    (x_test, y_test), (x_val, y_val) = xs
    top1, top5, pred = eval_ort.evaluate(path, x_test, y_test)
    val1, _, _ = eval_ort.evaluate(path, x_val, y_val)
    np.save(os.path.join(ZOO_DIR, f"{name}.test_pred.npy"), pred)
    ops, opset = onnx_summary(path)
    entry.update({
        "file": os.path.relpath(path, data.REPO),
        "sha256": sha256(path),
        "size_bytes": os.path.getsize(path),
        "opset": opset,
        "ops": ops,
        "input": {"name": "input", "shape": ["N", 1, 28, 28], "dtype": "float32"},
        "output": {"name": "logits", "shape": ["N", 10], "dtype": "float32"},
        "test_top1": round(top1, 4),
        "test_top5": round(top5, 4),
        "test_correct": int(round(top1 * len(y_test))),
        "val_top1": round(val1, 4),
        "test_pred": f"models/zoo/{name}.test_pred.npy",
    })
    log(f"{name}: ORT test top-1 {100 * top1:.2f}% top-5 {100 * top5:.2f}% val top-1 {100 * val1:.2f}%")


def run_fp32(name, train_xy, xs):
    recipe = RECIPES[name]
    setup_determinism(recipe["seed"])
    model = getattr(models, "ARCHS")[name]()
    params = sum(p.numel() for p in model.parameters())
    log(f"{name}: {params} parameters, recipe {recipe}")
    wall = train(model, *train_xy, recipe)
    os.makedirs(WORK_DIR, exist_ok=True)
    torch.save(model.state_dict(), os.path.join(WORK_DIR, f"{name}.pt"))
    path = os.path.join(ZOO_DIR, f"{name}.onnx")
    export_onnx(model, path, recipe["opset"], recipe["keep_bn"])
    entry = {
        "architecture": name,
        "description": models.DESCRIPTIONS[name],
        "params": params,
        "keeps_batchnorm": recipe["keep_bn"],
        "training": {
            "recipe": f"AdamW(lr={recipe['lr']}, weight_decay={recipe['wd']}), OneCycleLR(pct_start=0.2), "
                      f"{recipe['epochs']} epochs, batch {BATCH}, cross-entropy, no augmentation",
            "epochs": recipe["epochs"], "seed": recipe["seed"], "train_split": "train (52,952 images)",
            "torch": torch.__version__, "threads": THREADS, "wall_s": round(wall),
        },
        "torch_test_top1": round(torch_accuracy(model, *xs[0]), 4),
    }
    measure_and_record(name, path, entry, xs)
    record_entry(name, entry)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(ORDER), help="comma-separated subset of " + ",".join(ORDER))
    args = ap.parse_args()
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in ORDER]
    if unknown:
        sys.exit(f"unknown models: {unknown}")
    os.makedirs(ZOO_DIR, exist_ok=True)
    train_xy = data.load_split("train")
    xs = (data.load_split("test"), data.load_split("val"))
    for name in names:
        if name == "resnet_small_qat":
            from qkdev.zoo import qat
            qat.run(train_xy, xs, sys.modules[__name__])
        else:
            run_fp32(name, train_xy, xs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
