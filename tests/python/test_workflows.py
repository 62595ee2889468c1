"""evaluate / analyze / fallback / diagnose and the onnxruntime quantize_static helper."""

from __future__ import annotations

import numpy as np
import pytest

import quantkit
from quantkit.ort import quantize_static


MIN_AGREEMENT = 0.75  # share of test samples whose INT8 argmax equals FP32's
MIN_SQNR_DB = 10.0


@pytest.fixture(scope="module")
def plan(model, calib_array):
    return quantkit.calibrate(model, [calib_array], method="entropy", progress=False)


def test_evaluate_a_plan_on_labelled_data(model, plan):
    r = quantkit.evaluate(model, "fashion-mnist:val", plan, samples=128, progress=False)
    assert r.samples == 128 and 0.5 < r.top1 <= 1.0
    # 96 calibration samples, entropy: INT8 keeps most FP32 decisions (measured 0.86 here).
    assert r.agreement["argmax_agreement"] > MIN_AGREEMENT and r.agreement["sqnr_db"] > MIN_SQNR_DB
    assert r.to_dict()["top1"] == r.top1


def test_a_plan_in_memory_is_simulated_as_its_saved_file(model, plan, tmp_path):
    path = tmp_path / "plan.json"
    plan.save(path)
    in_memory = quantkit.evaluate(model, "fashion-mnist:val", plan, samples=64, progress=False)
    from_file = quantkit.evaluate(model, "fashion-mnist:val", path, samples=64, progress=False)
    assert in_memory.agreement == from_file.agreement and in_memory.top1 == from_file.top1
    assert "plan: in memory" in in_memory.report and f"plan: {path}" in from_file.report


def test_evaluate_python_data_against_fp32(model, plan, calib_array):
    r = quantkit.evaluate(model, [{"input": calib_array[:64]}], plan, progress=False)
    assert r.samples == 64 and r.top1 is None and r.agreement["cosine"] > 0.9


def test_analyze_and_fallback(model, plan, tmp_path):
    a = quantkit.analyze(model, plan, "fashion-mnist:val", samples=64, accumulated=False, progress=False)
    rows = a.to_dict()["tensors"]
    assert len(rows) == sum(plan.tensor(t)["quantized"] for t in plan.tensors)
    f = quantkit.fallback(model, plan, "fashion-mnist:val", samples=64, max_float_layers=2,
                          output_dir=tmp_path)
    assert isinstance(f.plan, quantkit.Plan) and (tmp_path / "plan.json").exists()
    assert len(f.plan.float_nodes) <= 2


def test_analyze_the_float_part(model, plan):
    """layers="float": the FP16 float part tensor by tensor (the plan's default float dtype)."""
    a = quantkit.analyze(model, plan, "fashion-mnist:val", samples=32, layers="float", progress=False)
    d = a.to_dict()
    assert set(d) == {"float_layers"}, list(d)
    fl = d["float_layers"]
    assert fl["dtype"] == "fp16" and fl["tensors"] and fl["samples"] == 32
    # Every checked tensor names the nodes that keep it in FP32; recommendations come from them.
    named = {n for t in fl["tensors"] for n in t["nodes"]}
    assert all(t["nodes"] for t in fl["tensors"]) and set(fl["keep_fp32"]) <= named
    assert "float part (fp16)" in str(a)
    with pytest.raises(quantkit.QuantkitError, match="layers"):
        quantkit.analyze(model, plan, "fashion-mnist:val", samples=8, layers="fp16", progress=False)


def test_diagnose_reports(model, calib_array):
    r = quantkit.diagnose(model, [calib_array], progress=False)
    d = r.to_dict()
    assert d["samples"] == len(calib_array) and "findings" in d and str(r)


def test_quantize_static_shape_and_refusals(model, calib_array, tmp_path):
    ort = pytest.importorskip("onnxruntime")

    class Reader:
        def __init__(self):
            self.batches = iter([{"input": calib_array[i:i + 8]} for i in range(0, len(calib_array), 8)])

        def get_next(self):
            return next(self.batches, None)

    out = tmp_path / "model.qdq.onnx"
    plan = quantize_static(model, out, Reader(), per_channel=True, progress=False)
    assert plan.report.samples == len(calib_array)
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    x = calib_array[:32]
    q, f = sess.run(None, {"input": x})[0], ref.run(None, {"input": x})[0]
    assert (q.argmax(1) == f.argmax(1)).mean() > MIN_AGREEMENT
    with pytest.raises(quantkit.UnsupportedError, match="reduce_range"):
        quantize_static(model, tmp_path / "x.onnx", Reader(), reduce_range=True)
    with pytest.raises(quantkit.UnsupportedError, match="extra_options"):
        quantize_static(model, tmp_path / "x.onnx", Reader(), extra_options={"EnableSubgraph": True})
    assert not (tmp_path / "x.onnx").exists()
    assert np.isfinite(q).all()
