"""End-to-end: integer-operator (QOperator) models through `quantkit convert`.

Zoo models are quantized by onnxruntime.quantization (the peer people use): quantize_static with
QuantFormat.QOperator (uint8 asymmetric activations, the default; per-tensor and per-channel
weights) calibrated on a few Fashion-MNIST samples, and quantize_dynamic. For each:
  1. `convert qop.onnx float.onnx --json`: the float model passes onnx.checker, its weights are
     the integer weights dequantized, and in onnxruntime it computes what the QOperator model
     computes within quantization noise; the JSON reports a cost per converted tensor, with the
     sign bit wasted for non-negative uint8 ranges;
  2. `convert qop.onnx plan.json`: every activation scale follows the rule
     amax = max(|s*(qmin-z)|, |s*(qmax-z)|), scale = float32(amax)/127, zero point 0;
  3. `convert qop.onnx qdq.onnx --qdq`: loads in onnxruntime, `quantkit lint` has no errors
     (plain_cnn: clean; resnet_small: the projection-shortcut QK009 warnings), and its
     top-1 simulated by `quantkit eval` on fashion-mnist:test is close to the QOperator model's
     top-1 in onnxruntime;
  3b. mobilenetv2/efficientnet/vit_tiny (QLinearAdd/Mul/Sigmoid/Softmax/Concat, QGemm,
     QLinearGlobalAveragePool): float and Q/DQ models agree with the QOperator model;
  3c. a PyTorch FX convert_fx export (torch 1.13: Q/DQ with no-op Casts) converts and lints clean;
  4. dynamic models: activations are reported as dynamic and marked not quantized in the plan;
  5. a hand-made opset-10 QLinearConv (per-channel weights, uint8 zp 128) converts to float;
     writing Q/DQ for it fails with exit 3 (TensorRT Q/DQ needs opset 13).
argv[1] is the quantkit binary.
"""
import json
import os
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_dynamic, quantize_static)

import qktest  # noqa: E402  (tests/e2e/qktest.py)
from qktest import ROOT, cosine, ort_run, ort_session, zoo_data  # noqa: E402

# The float model drops the integer model's rounding (8-bit activations): outputs agree in
# direction, not bit for bit.
COSINE_FLOAT_VS_QOP_MIN = 0.98
# Symmetric int8 costs up to one bit per uint8 activation (sign bit): on a few hundred test
# samples top-1 may move by a few samples.
TOP1_DIFF_MAX = 0.03
EVAL_SAMPLES = 300
CALIB_SAMPLES = 32
# float32 weights dequantized by quantkit vs numpy: (q - z) * s in float32 on both sides.
WEIGHT_ATOL = 1e-7


def run(args, expect=0):
    return qktest.run(args, expect, with_stderr=True)


def infer(path, x):
    return ort_run(path, x)


class Reader(CalibrationDataReader):
    def __init__(self, name, x):
        self.it = iter([{name: x[i:i + 8]} for i in range(0, len(x), 8)])

    def get_next(self):
        return next(self.it, None)


def inits(model):
    return {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}


def check_float_weights(qop, flt):
    """Every integer weight of the QOperator model appears dequantized under its float name."""
    qi, fi = inits(qop), inits(flt)
    checked = 0
    for n in qop.graph.node:
        if n.op_type not in ("QLinearConv", "QGemm", "QLinearMatMul"):
            continue
        w, s, z = n.input[3], n.input[4], n.input[5]
        name = w[:-len("_quantized")] if w.endswith("_quantized") else w
        assert name in fi, f"float weight {name} missing"
        scale, zp = qi[s].astype(np.float32), qi[z].astype(np.int32)
        axis = 0 if n.op_type == "QLinearConv" or dict((a.name, a.i) for a in n.attribute).get("transB", 0) else 1
        shape = [1] * qi[w].ndim
        shape[axis] = -1
        ref = (qi[w].astype(np.int32) - zp.reshape(shape if zp.size > 1 else ())).astype(np.float32) * \
            scale.reshape(shape if scale.size > 1 else ())
        np.testing.assert_allclose(fi[name], ref, rtol=0, atol=WEIGHT_ATOL)
        checked += 1
    assert checked > 0


def check_plan_rule(qop, plan_path):
    """Activation scales in the plan follow the documented rule."""
    plan = json.load(open(plan_path))["tensors"]
    qi = inits(qop)
    checked = 0
    for n in qop.graph.node:
        if n.op_type != "QuantizeLinear" or n.input[0] in qi:
            continue
        s = np.float32(qi[n.input[1]])
        z = int(qi[n.input[2]])
        info = np.iinfo(qi[n.input[2]].dtype)  # uint8 [0, 255] or int8 [-128, 127]
        lo, hi = float(s) * (info.min - z), float(s) * (info.max - z)
        want = np.float32(max(abs(lo), abs(hi))) / np.float32(127)
        entry = plan[n.input[0]]
        assert entry["quantized"], n.input[0]
        assert np.float32(entry["scale"][0]) == want, (n.input[0], entry["scale"], want)
        checked += 1
    assert checked > 0


def ort_top1(path, x, y):
    s = ort_session(path)
    name = s.get_inputs()[0].name
    pred = np.concatenate([s.run(None, {name: x[i:i + 50]})[0].argmax(1) for i in range(0, len(x), 50)])
    return float((pred == y).mean())


def static_case(d, zoo, per_channel, activation_type, calib, xt, yt, lint_rc=0):
    tag = f"{zoo}{'_pc' if per_channel else ''}_{activation_type.name}"
    fp = os.path.join(ROOT, "models", "zoo", f"{zoo}.onnx")
    qop_path = os.path.join(d, f"{tag}_qop.onnx")
    name = onnx.load(fp).graph.input[0].name
    quantize_static(fp, qop_path, Reader(name, calib), quant_format=QuantFormat.QOperator,
                    per_channel=per_channel, activation_type=activation_type)
    qop = onnx.load(qop_path)
    assert any(n.op_type == "QLinearConv" for n in qop.graph.node)

    # 1. float model + cost report.
    flt_path = os.path.join(d, f"{tag}_float.onnx")
    res = json.loads(run(["convert", qop_path, flt_path, "--json"]))
    assert res["integer_ops"] is True
    flt = onnx.load(flt_path)
    onnx.checker.check_model(flt, full_check=True)
    assert not [n for n in flt.graph.node if n.domain == "com.microsoft" or "Integer" in n.op_type
                or n.op_type.startswith("QLinear") or n.op_type in ("QuantizeLinear", "DequantizeLinear")]
    check_float_weights(qop, flt)
    x = xt[:64]
    c = cosine(infer(flt_path, x), infer(qop_path, x))
    assert c > COSINE_FLOAT_VS_QOP_MIN, f"{tag}: float model vs QOperator model cosine {c}"
    costs = res["conversion_costs"]
    assert costs, "uint8 activations must be reported"
    for cost in costs:
        # uint8 zp 0 / int8 zp -128: the range starts at 0 (a fused Relu): one bit lost.
        lowest = {"uint8": 0, "int8": -128}[cost["source_dtype"]]
        assert cost["sign_bit_wasted"] == (cost["zero_point"] == lowest), cost
        if cost["sign_bit_wasted"]:
            assert abs(cost["scale_ratio"] - 255 / 127) < 1e-4, cost
            assert abs(cost["wasted_share"] - 0.5) < 0.01, cost  # 128 or 129 codes unused
        assert cost["clipped_share"] == 0.0, cost
    assert any(c["sign_bit_wasted"] for c in costs), "every zoo CNN has Relu outputs"
    text = run(["convert", qop_path, os.path.join(d, f"{tag}_again.onnx")])
    assert "sign bit wasted" in text or all(not c["sign_bit_wasted"] for c in costs), text

    # 2. plan scales follow the rule.
    plan_path = os.path.join(d, f"{tag}.plan.json")
    run(["convert", qop_path, plan_path])
    check_plan_rule(qop, plan_path)

    # 3. TensorRT Q/DQ model: loads, lints clean, simulated top-1 close to the QOperator model's.
    qdq_path = os.path.join(d, f"{tag}_qdq.onnx")
    run(["convert", qop_path, qdq_path, "--qdq"])
    qdq = onnx.load(qdq_path)
    onnx.checker.check_model(qdq, full_check=True)
    assert sum(n.op_type == "QuantizeLinear" for n in qdq.graph.node) >= 3
    infer(qdq_path, x)
    # TensorRT placement of the extracted scales lints clean, resnet's projection shortcuts included
    # (the Add's backbone Conv stays unquantized at its output, #13 item 10).
    run(["lint", qdq_path], expect=lint_rc)
    ev = json.loads(run(["eval", qdq_path, "--data", "fashion-mnist:test", "--samples",
                         str(EVAL_SAMPLES), "--json", "-q"]))
    ref = ort_top1(qop_path, xt[:EVAL_SAMPLES], yt[:EVAL_SAMPLES])
    print(f"{tag}: top-1 QOperator (onnxruntime) {ref:.4f}, converted Q/DQ (quantkit eval) "
          f"{ev['top1']:.4f} on {EVAL_SAMPLES} fashion-mnist:test samples; {len(costs)} tensors converted")
    assert abs(ev["top1"] - ref) <= TOP1_DIFF_MAX, (tag, ev["top1"], ref)


def float_only_case(d, zoo, calib, xt):
    """The other zoo models exercise the com.microsoft ops (QLinearAdd/Mul/Sigmoid/Softmax/Concat/
    GlobalAveragePool, QGemm) and QLinearMatMul: float model and Q/DQ model only (no eval)."""
    fp = os.path.join(ROOT, "models", "zoo", f"{zoo}.onnx")
    qop_path = os.path.join(d, f"{zoo}_qop.onnx")
    name = onnx.load(fp).graph.input[0].name
    quantize_static(fp, qop_path, Reader(name, calib), quant_format=QuantFormat.QOperator)
    ms_ops = sorted({n.op_type for n in onnx.load(qop_path).graph.node if n.domain == "com.microsoft"})
    flt_path = os.path.join(d, f"{zoo}_qop_float.onnx")
    run(["convert", qop_path, flt_path])
    onnx.checker.check_model(onnx.load(flt_path), full_check=True)
    x = xt[:64]
    c = cosine(infer(flt_path, x), infer(qop_path, x))
    assert c > COSINE_FLOAT_VS_QOP_MIN, f"{zoo}: float model vs QOperator model cosine {c}"
    qdq_path = os.path.join(d, f"{zoo}_qop_qdq.onnx")
    # FP32 float part: the cosine is taken in onnxruntime, whose CPU FP16 QuantizeLinear truncates
    # where TensorRT rounds (docs/strongly-typed.md); static_case judges the FP16 default with eval.
    run(["convert", qop_path, qdq_path, "--qdq", "--float-dtype", "fp32"])
    c2 = cosine(infer(qdq_path, x), infer(qop_path, x))
    assert c2 > COSINE_FLOAT_VS_QOP_MIN, f"{zoo}: Q/DQ model vs QOperator model cosine {c2}"
    print(f"{zoo}: {ms_ops}: float cosine {c:.5f}, symmetric int8 Q/DQ cosine {c2:.5f}")


def dynamic_case(d, zoo, xt):
    fp = os.path.join(ROOT, "models", "zoo", f"{zoo}.onnx")
    dyn = os.path.join(d, f"{zoo}_dyn.onnx")
    # uint8 weights: onnxruntime's CPU ConvInteger has no int8-weight kernel.
    quantize_dynamic(fp, dyn, weight_type=QuantType.QUInt8)
    flt_path = os.path.join(d, f"{zoo}_dyn_float.onnx")
    res = json.loads(run(["convert", dyn, flt_path, "--json"]))
    assert res["dynamic_tensors"], res
    flt = onnx.load(flt_path)
    onnx.checker.check_model(flt, full_check=True)
    assert not [n for n in flt.graph.node if n.op_type in ("DynamicQuantizeLinear", "ConvInteger", "MatMulInteger")]
    x = xt[:64]
    c = cosine(infer(flt_path, x), infer(dyn, x))
    assert c > COSINE_FLOAT_VS_QOP_MIN, f"{zoo} dynamic: cosine {c}"
    plan = json.load(open(os.path.splitext(flt_path)[0] + ".plan.json"))["tensors"]
    for t in res["dynamic_tensors"]:
        assert plan[t]["quantized"] is False and "dynamic" in plan[t]["reason"], plan[t]
    print(f"{zoo} dynamic: {len(res['dynamic_tensors'])} dynamic activations, cosine {c:.5f}")


def opset10_case(d):
    rng = np.random.default_rng(0)
    w = rng.integers(-60, 60, size=(4, 1, 3, 3)).astype(np.int8)
    ws = np.array([0.01, 0.02, 0.015, 0.005], np.float32)
    b = rng.integers(-500, 500, size=4).astype(np.int32)
    init = [numpy_helper.from_array(np.array(0.05, np.float32), "xs"),
            numpy_helper.from_array(np.array(128, np.uint8), "xz"),
            numpy_helper.from_array(w, "W_quantized"), numpy_helper.from_array(ws, "ws"),
            numpy_helper.from_array(np.zeros(4, np.int8), "wz"),
            numpy_helper.from_array(np.array(0.1, np.float32), "ys"),
            numpy_helper.from_array(np.array(128, np.uint8), "yz"),
            numpy_helper.from_array(b, "B_quantized")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["x_quantized"]),
             helper.make_node("QLinearConv", ["x_quantized", "xs", "xz", "W_quantized", "ws", "wz", "ys", "yz",
                                              "B_quantized"], ["y_quantized"], pads=[1, 1, 1, 1]),
             helper.make_node("DequantizeLinear", ["y_quantized", "ys", "yz"], ["y"])]
    g = helper.make_graph(nodes, "qop10", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 10)])
    m.ir_version = 7
    onnx.checker.check_model(m)
    path = os.path.join(d, "qop10.onnx")
    onnx.save(m, path)
    flt = os.path.join(d, "qop10_float.onnx")
    run(["convert", path, flt])
    x = (rng.integers(108, 148, size=(1, 1, 8, 8)).astype(np.float32) - 128) * np.float32(0.05)
    diff = np.abs(infer(flt, x) - infer(path, x)).max()
    # Inputs on the grid: only the output rounding (half a step of 0.1) separates them.
    assert diff <= 0.05 + 1e-4, diff
    # Q/DQ with per-axis scales needs opset 13: the model is upgraded in memory (#20 item 1) and the
    # written Q/DQ model declares it and runs.
    # FP32 float part for the comparison in onnxruntime (its CPU FP16 QuantizeLinear truncates where
    # TensorRT rounds: docs/strongly-typed.md); the FP16 default needs opset 19 and runs too.
    qdq10 = os.path.join(d, "qop10_qdq.onnx")
    run(["convert", path, qdq10, "--qdq", "--float-dtype", "fp32"])
    opset = max(o.version for o in onnx.load(qdq10).opset_import if o.domain in ("", "ai.onnx"))
    assert opset >= 13, opset
    assert np.abs(infer(qdq10, x) - infer(path, x)).max() <= 0.1 + 1e-4
    qdq10_fp16 = os.path.join(d, "qop10_qdq_fp16.onnx")
    run(["convert", path, qdq10_fp16, "--qdq"])
    opset = max(o.version for o in onnx.load(qdq10_fp16).opset_import if o.domain in ("", "ai.onnx"))
    assert opset >= 19, opset
    assert np.isfinite(infer(qdq10_fp16, x)).all()


def fx_case(d):
    """PyTorch FX convert_fx exported by torch 1.13: Q/DQ with Q -> Cast -> DQ and run-time bias
    zero points; convert folds them and handles it as a Q/DQ model."""
    import torch
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c = torch.nn.Conv2d(1, 4, 3)
            self.fc = torch.nn.Linear(4 * 6 * 6, 10)

        def forward(self, x):
            return self.fc(torch.flatten(torch.relu(self.c(x)), 1))

    torch.manual_seed(0)
    torch.backends.quantized.engine = "qnnpack"
    x = torch.randn(8, 1, 8, 8)
    m = prepare_fx(Net().eval(), get_default_qconfig_mapping("qnnpack"), example_inputs=(x,))
    m(x)
    fx = os.path.join(d, "fx.onnx")
    torch.onnx.export(convert_fx(m), x, fx, opset_version=13, input_names=["x"])
    flt = os.path.join(d, "fx_float.onnx")
    out = run(["convert", fx, flt])
    assert "folded" in out and "sign bit wasted" in out, out
    xn = x.numpy()
    c = cosine(infer(flt, xn), infer(fx, xn))
    assert c > COSINE_FLOAT_VS_QOP_MIN, f"fx: cosine {c}"
    qdq = os.path.join(d, "fx_qdq.onnx")
    run(["convert", fx, qdq, "--qdq"])
    run(["lint", qdq])
    print(f"fx: float vs torch-exported model cosine {c:.5f}")


def main():
    calib, _ = zoo_data.load_split("calib")
    xt, yt = zoo_data.load_split("test")
    calib = calib[:CALIB_SAMPLES]
    with tempfile.TemporaryDirectory() as d:
        static_case(d, "plain_cnn", False, QuantType.QUInt8, calib, xt, yt)
        static_case(d, "resnet_small", True, QuantType.QInt8, calib, xt, yt)
        for zoo in ("mobilenetv2_small", "efficientnet_small", "vit_tiny"):
            float_only_case(d, zoo, calib, xt)
        fx_case(d)
        dynamic_case(d, "plain_cnn", xt)
        dynamic_case(d, "resnet_small", xt)
        opset10_case(d)
    print("ok")


def test_qop_convert():
    main()


if __name__ == "__main__":
    main()
