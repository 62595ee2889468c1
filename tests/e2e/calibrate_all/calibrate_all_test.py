"""Issue 6 done-when: `quantkit calibrate` writes every artifact for every zoo model and every
torchvision export (qkdev/export_torchvision.py MODELS, opset 13, exported on demand into the
cache like tests/ort/ort_diff.py), and the Q/DQ model passes onnx.checker and loads and runs in
onnxruntime. A model that already holds Q/DQ (the zoo's QAT export) is refused with one line
(exit 3) that points to `quantkit convert`, instead of getting a second quantization stacked on
its own; for the others no QuantizeLinear may consume a DequantizeLinear's output.

Data: SAMPLES seeded N(0, 1) samples at the model's input shape (the batch dim fixed to SAMPLES):
enough to exercise every collector and writer while keeping the test within its CI budget
(~6 minutes on 2 cores); accuracy is the calibrate/eval tests' job, not this one's.
Run by pytest under ctest; quantkit and the repository come from tests/e2e/qktest.py.
"""
import glob
import os
import tempfile
import time

import numpy as np
import onnx

from qkdev import export_torchvision
from qktest import ROOT, run_process, ort_session  # tests/e2e/qktest.py

SAMPLES = 8
SEED = 0
ARTIFACTS = ["model.qdq.onnx", "calib.cache", "ranges.txt", "plan.json", "summary.txt"]


def input_sample(model_path):
    m = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    inp = [i for i in m.graph.input if i.name not in inits][0]
    dims = [d.dim_value if d.HasField("dim_value") else SAMPLES for d in inp.type.tensor_type.shape.dim]
    dims[0] = SAMPLES
    return inp.name, np.random.RandomState(SEED).randn(*dims).astype(np.float32)


def has_qdq(model_path):
    m = onnx.load(model_path, load_external_data=False)
    return any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in m.graph.node)


def check(model_path, d):
    name = os.path.basename(model_path)
    inp, x = input_sample(model_path)
    quantized = has_qdq(model_path)
    xpath = os.path.join(d, "x.npy")
    np.save(xpath, x)
    out = os.path.join(d, name + ".out")
    t0 = time.time()
    args = ["calibrate", model_path, "--data", xpath, "--samples", str(SAMPLES), "--batch-size", str(SAMPLES),
            "-o", out, "-q"]
    p = run_process(args, expect=3 if quantized else 0)
    seconds = time.time() - t0
    if quantized:
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 3 and len(lines) == 1 and "quantkit convert" in lines[0], \
            f"{name}: expected a one-line refusal (exit 3), got exit {p.returncode}\n{p.stderr}"
        assert not os.path.exists(out), f"{name}: refused but wrote {out}"
        print(f"{name}: already quantized, refused: {lines[0]}", flush=True)
        return
    for f in ARTIFACTS:
        assert os.path.getsize(os.path.join(out, f)) > 0, f"{name}: {f} missing or empty"
    qdq = os.path.join(out, "model.qdq.onnx")
    m = onnx.load(qdq)
    onnx.checker.check_model(m, full_check=True)
    nq = sum(n.op_type == "QuantizeLinear" for n in m.graph.node)
    assert nq > 0, f"{name}: no QuantizeLinear in the Q/DQ model"
    dq_out = {o for n in m.graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    stacked = [n.name for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] in dq_out]
    assert not stacked, f"{name}: Q/DQ stacked on Q/DQ at {stacked[:3]}"
    sess = ort_session(qdq)
    y = sess.run(None, {inp: x[:2]})[0]
    assert np.isfinite(y).all(), f"{name}: non-finite outputs from the Q/DQ model"
    cache_lines = len(open(os.path.join(out, "calib.cache")).read().splitlines()) - 1
    print(f"{name}: ok, {nq} QuantizeLinear, {cache_lines} cache entries, calibrate {seconds:.1f} s", flush=True)


def main():
    zoo = sorted(glob.glob(os.path.join(ROOT, "models", "zoo", "*.onnx")))
    assert len(zoo) >= 6, zoo
    exports = [export_torchvision.ensure(n, 13, log=lambda *a, **k: None) for n in export_torchvision.MODELS]
    failed = []
    t0 = time.time()
    with tempfile.TemporaryDirectory() as d:
        for path in zoo + exports:
            try:
                check(path, d)
            except AssertionError as e:  # report every model, then fail
                print(f"FAIL {e}", flush=True)
                failed.append(os.path.basename(path))
    print(f"calibrate_all: {len(zoo) + len(exports) - len(failed)} passed, {len(failed)} failed "
          f"({time.time() - t0:.0f} s)")
    assert not failed, f"calibrate_all: failed: {failed}"


def test_calibrate_all():
    main()


if __name__ == "__main__":
    main()
