"""Exports standard torchvision architectures to ONNX, on demand, into the quantkit cache.

    .venv/bin/python -m qkdev.export_torchvision --models resnet18,mobilenet_v2 --opset 13
    .venv/bin/python -m qkdev.export_torchvision --opset 13,17          # every model, both opsets

Writes ${QUANTKIT_CACHE:-$HOME/.cache/quantkit}/models/<name>.opset<N>.onnx and prints one path
per line (tests and benchmarks call this, or import ensure()). Nothing is downloaded: weights are
random (torch.manual_seed(SEED), torchvision's own initialisation, except that all-zero Linear
weights, such as vit_b_16's head, are redrawn from N(0, 0.02) so that outputs are not constant
zeros, and BatchNorm running statistics are set by one train-mode pass over CALIB_IMAGES seeded
N(0, 1) images: with the default statistics (mean 0, var 1) random MobileNets and EfficientNets
shrink their activations to ~1e-9..1e-14, useless for range calibration), the model is in eval
mode, the
input is float32 [N, 3, 224, 224] with a dynamic batch N, named 'input'; the output 'output'.

The same exporter on every torch: the TorchScript exporter (torch.onnx.export(dynamo=False) on
torch 2.x, the only one on 1.13), traced at an example batch of EXAMPLE_BATCH with the batch
axis declared dynamic. torch >= 2.9 defaults to the dynamo exporter, which specialises a batch of
1 (vit_b_16's Reshape to [197, 768] then fails in onnxruntime at any other batch), keeps opset 18
where 13 was asked and took 6x longer on resnet18. Where a future torch has no TorchScript
exporter, the dynamo one runs with the same example and the batch as a torch.export.Dim, and the
file must still come out at the requested opset. The stamp names the exporter.

A file is reused when its stamp (<file>.stamp.json) names the same torch/torchvision versions,
seed and opset and the file's sha256 matches; otherwise it is re-exported. Files are written to a
temporary name, checked with onnxruntime (loads, runs batches of CHECK_BATCHES, none of them the
example's, finite outputs that match torch within EXPORT_TOLERANCE, and the requested opset),
then renamed, so the cache never holds a partial or unchecked file.
"""
import argparse
import contextlib
import json
import os
import sys
import time

from qkdev.zoo.onnx_util import sha256

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_1",
          "shufflenet_v2_x1_0", "vit_b_16"]
OPSETS = [13, 17]
SEED = 0
# Max |ORT - torch| relative to max |torch| on the check batch: float32 reassociation across
# dozens of layers of random-weight networks, not an accuracy claim.
EXPORT_TOLERANCE = 1e-3
CALIB_IMAGES = 8
# The traced example's batch (not 1: exporters specialise size-1 dimensions) and the batches the
# check runs in onnxruntime (none equal to the example's: the batch axis must really be dynamic).
EXAMPLE_BATCH = 2
CHECK_BATCHES = (1, 3)
INIT = ("torchvision default; all-zero Linear weights redrawn from N(0, 0.02); BatchNorm running stats "
        f"from one train-mode pass over {CALIB_IMAGES} seeded N(0, 1) images")


def cache_dir():
    root = os.environ.get("QUANTKIT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "quantkit")
    return os.path.join(root, "models")


def _stamp_expected(name, opset):
    # Package metadata, not torch.__version__: checking a cached file must not pay for importing torch.
    from importlib.metadata import version
    return {"model": name, "opset": opset, "seed": SEED, "torch": version("torch"),
            "torchvision": version("torchvision"), "input": ["N", 3, 224, 224], "init": INIT,
            "example_batch": EXAMPLE_BATCH}


def _is_current(path, name, opset):
    stamp_path = path + ".stamp.json"
    if not (os.path.exists(path) and os.path.exists(stamp_path)):
        return False
    try:
        with open(stamp_path) as f:
            stamp = json.load(f)
    except (OSError, ValueError):
        return False
    want = _stamp_expected(name, opset)
    return all(stamp.get(k) == v for k, v in want.items()) and stamp.get("sha256") == sha256(path)


def _check(path, model, opset):
    """Loads `path` in onnxruntime and compares batches of CHECK_BATCHES with torch; returns the
    largest max abs difference."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch
    got_opset = {o.domain: o.version for o in onnx.load(path, load_external_data=False).opset_import}.get("", None)
    if got_opset != opset:
        raise RuntimeError(f"{path}: exported at opset {got_opset}, {opset} was asked")
    so = ort.SessionOptions()
    so.intra_op_num_threads = int(os.environ.get("QUANTKIT_THREADS", "1"))
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    worst = 0.0
    for batch in CHECK_BATCHES:
        x = torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(SEED + 1))
        got = sess.run(None, {"input": x.numpy()})[0]
        with torch.no_grad():
            want = model(x).numpy()
        if got.shape != want.shape or not np.all(np.isfinite(got)):
            raise RuntimeError(f"{path}: batch {batch}: output shape {got.shape} (torch {want.shape}) or non-finite values")
        diff = float(np.abs(got - want).max())
        scale = max(float(np.abs(want).max()), 1e-6)
        if diff > EXPORT_TOLERANCE * scale:
            raise RuntimeError(f"{path}: batch {batch}: onnxruntime differs from torch by {diff:g} (max |torch| {scale:g})")
        worst = max(worst, diff)
    return worst


@contextlib.contextmanager
def _attention_as_matmuls(opset):
    """torch >= 2.0 computes nn.MultiheadAttention (vit_b_16) with F.scaled_dot_product_attention,
    which the TorchScript exporter maps only from opset 14: below that, export the same math as
    MatMul/Softmax (what torch 1.13's MultiheadAttention was made of)."""
    import math
    import torch
    import torch.nn.functional as F
    original = getattr(F, "scaled_dot_product_attention", None)
    if original is None or opset >= 14:
        yield
        return

    def matmuls(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kwargs):
        if dropout_p or is_causal or kwargs:
            raise NotImplementedError("attention with dropout, causal mask or extra options")
        scores = q @ k.transpose(-2, -1) * (scale if scale is not None else 1.0 / math.sqrt(q.shape[-1]))
        if attn_mask is not None:
            scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
        return F.softmax(scores, dim=-1) @ v

    F.scaled_dot_product_attention = matmuls
    try:
        yield
    finally:
        F.scaled_dot_product_attention = original


def _export(model, x, path, opset):
    """Exports with the TorchScript exporter where torch has it; returns the exporter's name."""
    import inspect
    import torch
    names = {"input_names": ["input"], "output_names": ["output"], "opset_version": opset}
    params = inspect.signature(torch.onnx.export).parameters
    if "dynamo" not in params:  # torch 1.x: the TorchScript exporter is the only one
        torch.onnx.export(model, x, path, dynamic_axes={"input": {0: "N"}, "output": {0: "N"}},
                          do_constant_folding=True, **names)
        return "torchscript"
    torchscript_error = "skipped (QK_EXPORTER=dynamo)"
    if os.environ.get("QK_EXPORTER") != "dynamo":  # QK_EXPORTER=dynamo: try the fallback on purpose
        try:
            with _attention_as_matmuls(opset):
                torch.onnx.export(model, x, path, dynamic_axes={"input": {0: "N"}, "output": {0: "N"}},
                                  do_constant_folding=True, dynamo=False, **names)
            return "torchscript"
        except Exception as e:  # a torch without the TorchScript exporter: the dynamo one below
            torchscript_error = e
    try:
        batch = torch.export.Dim("N", min=1, max=4096)
        torch.onnx.export(model, (x,), path, dynamic_shapes=({0: batch},), dynamo=True, external_data=False,
                          **names)
    except Exception as e:
        raise RuntimeError(f"TorchScript exporter: {torchscript_error}; dynamo exporter: {e}") from e
    return "dynamo"


def ensure(name, opset, force=False, log=print):
    """Returns the path of <name>.opset<opset>.onnx in the cache, exporting it if needed."""
    if name not in MODELS:
        raise ValueError(f"unknown model '{name}' (known: {', '.join(MODELS)})")
    if opset not in OPSETS:
        raise ValueError(f"opset {opset} not offered (choose from {OPSETS})")
    path = os.path.join(cache_dir(), f"{name}.opset{opset}.onnx")
    if not force and _is_current(path, name, opset):
        return path
    os.makedirs(cache_dir(), exist_ok=True)
    import torch
    import torchvision
    torch.set_num_threads(int(os.environ.get("QUANTKIT_THREADS", "1")))
    torch.manual_seed(SEED)
    model = getattr(torchvision.models, name)(weights=None).eval()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Linear) and not module.weight.any():
                module.weight.normal_(0.0, 0.02)
        norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
        if norms:
            for m in norms:
                m.reset_running_stats()
                m.momentum = None  # cumulative average: the statistics of exactly this pass
            model.train()
            model(torch.randn(CALIB_IMAGES, 3, 224, 224, generator=torch.Generator().manual_seed(SEED + 2)))
            model.eval()
    x = torch.randn(EXAMPLE_BATCH, 3, 224, 224, generator=torch.Generator().manual_seed(SEED + 3))
    tmp = f"{path}.tmp{os.getpid()}"
    t0 = time.time()
    try:
        import warnings
        with warnings.catch_warnings():  # torch 2.x: the TorchScript exporter's deprecation notice
            warnings.simplefilter("ignore", DeprecationWarning)
            exporter = _export(model, x, tmp, opset)
        diff = _check(tmp, model, opset)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    stamp = dict(_stamp_expected(name, opset), sha256=sha256(path), max_abs_diff_vs_torch=diff, exporter=exporter,
                 example_batch=EXAMPLE_BATCH, checked_batches=list(CHECK_BATCHES))
    with open(path + ".stamp.json.tmp", "w") as f:
        json.dump(stamp, f, indent=2, sort_keys=True)
    os.replace(path + ".stamp.json.tmp", path + ".stamp.json")
    log(f"exported {path} ({os.path.getsize(path) / 1e6:.1f} MB, {time.time() - t0:.0f}s, "
        f"{exporter} exporter, ORT vs torch max |diff| {diff:.2g} at batches {CHECK_BATCHES})", file=sys.stderr)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of " + ",".join(MODELS))
    ap.add_argument("--opset", default="13", help="13, 17 or 13,17")
    ap.add_argument("--force", action="store_true", help="re-export even when the cached file is current")
    args = ap.parse_args()
    try:
        opsets = [int(o) for o in args.opset.split(",") if o]
        for name in [m for m in args.models.split(",") if m]:
            for opset in opsets:
                print(ensure(name, opset, force=args.force))
    except (ValueError, RuntimeError) as e:
        print(f"export_torchvision: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
