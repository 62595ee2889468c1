"""Differential check: `quantkit run` vs onnxruntime on whole models (torchvision exports).

    .venv/bin/python tests/ort/ort_diff.py --quantkit build/dev/tools/quantkit/quantkit [MODEL.onnx ...]

With no models, checks the issue's torchvision list (opset 13), exported on demand into
${QUANTKIT_CACHE:-~/.cache/quantkit}/models by qkdev/export_torchvision.py. Each model gets a
seeded random float32 batch for its first input ('input', [2, 3, 224, 224] when dynamic);
the outputs must agree within MAX_REL_DIFF of the largest |ORT| value. Prints one line per model
with the max difference and both wall times.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

# float32 sums reassociated across dozens of layers (ATen vs MLAS kernels); same budget as the
# exporter's own ORT-vs-torch check (qkdev/export_torchvision.py EXPORT_TOLERANCE).
MAX_REL_DIFF = 1e-3
SEED = 0


def input_for(sess):
    inp = sess.get_inputs()[0]
    shape = [d if isinstance(d, int) else 2 for d in inp.shape]
    return inp.name, np.random.RandomState(SEED).randn(*shape).astype(np.float32)


def check(quantkit, model):
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    name, x = input_for(sess)
    t0 = time.time()
    want = sess.run(None, {name: x})
    t_ort = time.time() - t0
    with tempfile.TemporaryDirectory() as tmp:
        np.save(os.path.join(tmp, "x.npy"), x)
        t0 = time.time()
        proc = subprocess.run([quantkit, "run", model, "--input", f"{name}=" + os.path.join(tmp, "x.npy"),
                               "--output-dir", os.path.join(tmp, "out")], capture_output=True, text=True)
        t_qk = time.time() - t0
        if proc.returncode != 0:
            return False, f"{os.path.basename(model)}: quantkit failed: {proc.stderr.strip()}"
        worst = 0.0
        for out, ref in zip(sess.get_outputs(), want):
            got = np.load(os.path.join(tmp, "out", out.name + ".npy"))
            if got.shape != ref.shape:
                return False, f"{os.path.basename(model)}: output {out.name} shape {got.shape} vs {ref.shape}"
            scale = max(float(np.abs(ref).max()), 1e-30)
            worst = max(worst, float(np.abs(got.astype(np.float64) - ref).max()) / scale)
    ok = worst <= MAX_REL_DIFF
    return ok, (f"{os.path.basename(model)}: max |quantkit - ort| / max|ort| = {worst:.2e} "
                f"(quantkit run {t_qk:.2f}s incl. process start, ort {t_ort:.2f}s) {'ok' if ok else 'FAIL'}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quantkit", required=True)
    ap.add_argument("models", nargs="*")
    args = ap.parse_args()
    models = args.models
    if not models:
        # The list, exported on demand into the cache (reused when current), so a fresh
        # machine runs the same check instead of skipping it.
        from qkdev import export_torchvision
        names = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_1",
                 "shufflenet_v2_x1_0", "vit_b_16"]
        models = [export_torchvision.ensure(n, 13, log=lambda *a, **k: None) for n in names]
    failed = 0
    for m in models:
        ok, line = check(args.quantkit, m)
        print(line, flush=True)
        failed += not ok
    print(f"{len(models) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
