"""Every command reads ModelOpt 0.47's default FP16 + INT8 output (issue 29: `quantkit lint` used
to exit 2 on it, "round_vml_cpu not implemented for 'Half'").

The fixture (tests/data/modelopt/resnet_small.modelopt.onnx, tests/data/modelopt/README.md) has
float16 weights, float16 Q/DQ scales (opset 19), float16 activations and a Cast at each end of
the float32 graph input and output. Each command must succeed and say something that could be
wrong: lint finds no error, eval's accuracy is the FP32 model's within a named tolerance, the
extracted plan holds the float16 scales' exact values, the stripped model is a valid float16
model that runs, analyze ranks the plan's tensors.
"""
import json
import os
import subprocess
import tempfile

import numpy as np
import onnx
import onnx.numpy_helper

from qktest import QK, ROOT, run, zoo_model

FIXTURE = os.path.join(ROOT, "tests", "data", "modelopt", "resnet_small.modelopt.onnx")
FP32 = zoo_model("resnet_small")
SAMPLES = 500
# INT8 with max calibration on resnet_small costs ~0.5 point top-1 in FP32 simulation; FP16
# storage of the float tensors adds rounding noise well below that. Beyond 2 points something
# is computed wrong (onnxruntime's CPU float16 QuantizeLinear loses 7.6 points on this model).
MAX_TOP1_DROP = 0.02


def fashion(split_samples):
    return ["--data", "fashion-mnist:test", "--samples", str(split_samples)]


def test_lint_reads_float16_scales_and_finds_no_error():
    proc = subprocess.run([QK, "lint", FIXTURE, "--json"], capture_output=True, text=True)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["summary"]["errors"] == 0, report["findings"]
    assert report["summary"]["quantize_linear"] == 23 and report["summary"]["dequantize_linear"] == 23
    # The float16 scales are read: a scale check that skipped them would also find nothing, so
    # a zeroed float16 scale must be reported (QK003).
    m = onnx.load(FIXTURE)
    scale = next(i for i in m.graph.initializer if i.name == "input_scale_1")
    assert scale.data_type == onnx.TensorProto.FLOAT16
    scale.CopyFrom(onnx.numpy_helper.from_array(np.zeros((), np.float16), scale.name))
    with tempfile.TemporaryDirectory() as d:
        bad = os.path.join(d, "bad.onnx")
        onnx.save(m, bad)
        out = run(["lint", bad], expect=2)
        assert "QK003" in out and "input_scale_1" in out, out


def test_inspect_and_run():
    out = run(["inspect", FIXTURE])
    assert "QuantizeLinear 23" in out and "Cast 2" in out, out
    with tempfile.TemporaryDirectory() as d:
        xs = np.random.RandomState(0).randn(4, 1, 28, 28).astype(np.float32)
        np.save(os.path.join(d, "x.npy"), xs)
        run(["run", FIXTURE, "-i", "input=" + os.path.join(d, "x.npy"), "-o", os.path.join(d, "out")])
        logits = np.load(os.path.join(d, "out", "logits.npy"))
        assert logits.dtype == np.float32 and logits.shape == (4, 10)
        assert np.isfinite(logits).all()


def test_eval_accuracy_is_the_fp32_models_within_tolerance():
    fp32 = json.loads(run(["eval", FP32] + fashion(SAMPLES) + ["--json", "-q"]))
    mixed = json.loads(run(["eval", FIXTURE] + fashion(SAMPLES) + ["--reference", FP32, "--json", "-q"]))
    assert mixed["top1"] >= fp32["top1"] - MAX_TOP1_DROP, (fp32, mixed)
    assert mixed["agreement"]["argmax"] >= 0.95, mixed


def test_convert_extracts_exact_float16_scales_and_strips_to_a_float16_model():
    m = onnx.load(FIXTURE)
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in m.graph.initializer}
    with tempfile.TemporaryDirectory() as d:
        plan_path = os.path.join(d, "plan.json")
        run(["convert", FIXTURE, plan_path])
        plan = json.load(open(plan_path))
        tensors = plan["tensors"]
        # The network input's scale (its Q reads the Cast output): the float16 value, exactly.
        want = float(inits["input_scale_1"].astype(np.float32))
        assert tensors["input_cast_to_fp16"]["scale"] == [want], tensors["input_cast_to_fp16"]
        # A per-channel weight: every float16 channel scale, exactly.
        w = tensors["onnx::Conv_108"]
        assert w["role"] == "weight" and w["scale"] == [float(v) for v in inits["onnx::Conv_108_scale_1"].astype(np.float32)]
        stripped = os.path.join(d, "float.onnx")
        run(["convert", FIXTURE, stripped])
        s = onnx.load(stripped)
        onnx.checker.check_model(s, full_check=True)
        ops = {n.op_type for n in s.graph.node}
        assert "QuantizeLinear" not in ops and "DequantizeLinear" not in ops, ops
        weights = [i for i in s.graph.initializer if len(i.dims) == 4]
        assert weights and all(w.data_type == onnx.TensorProto.FLOAT16 for w in weights)
        xs = np.random.RandomState(1).randn(2, 1, 28, 28).astype(np.float32)
        np.save(os.path.join(d, "x.npy"), xs)
        run(["run", stripped, "-i", "input=" + os.path.join(d, "x.npy"), "-o", os.path.join(d, "out")])


def test_analyze_ranks_the_tensors_of_the_float16_plan():
    out = json.loads(run(["analyze", FP32, "--plan", FIXTURE] + fashion(64) + ["--no-accumulated", "--json", "-q"]))
    names = {r["tensor"] for r in out["tensors"]}
    # ModelOpt quantizes the network input through its Cast to float16 ('input_cast_to_fp16'):
    # applied to the FP32 model, that scale is the scale of 'input' itself.
    assert "input" in names, sorted(names)
    assert len(names) == 23, sorted(names)  # 12 activations and 11 weights, as ModelOpt wrote them
    assert all(r["isolated"]["output"]["rel_mse"] is not None for r in out["tensors"])
