"""FP8 (E4M3FN) Q/DQ models run by `quantkit eval` equal onnxruntime's CPU run, bit for bit.

The interpreter has no FP8 dtype: passes/lower_float8.h turns each E4M3FN QuantizeLinear ->
DequantizeLinear pair into com.quantkit::FakeQuantizeE4M3 and each FP8 weight under
DequantizeLinear into a float initializer, with ir/float8.h's rounding. Checked here against
onnxruntime (an independent implementation of the ONNX spec, opset 19):
  1. decode: all 256 codes of a stored FP8 weight, per tensor and per channel (NaN codes included);
  2. encode + decode: every code's value, every midpoint between neighbouring codes (round half
     to even), one float32 ulp either side of each midpoint, the subnormal range, saturation from
     448 up to +-inf, NaN, -0, and random values, through a scale that is not a power of two;
  3. a two-layer MLP as ModelOpt writes FP8 (activations per tensor, weights per output channel
     stored as FP8): outputs equal within float32 summation-order error;
  4. what quantkit does not run (an FP8 graph input, a QuantizeLinear read by something else) is
     exit 3 naming the node, and an E5M2 weight is refused alike.
"""
import os
import subprocess
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper
from qktest import QK, ort_session  # tests/e2e/qktest.py

FP8 = TensorProto.FLOAT8E4M3FN
OPSET = [helper.make_opsetid("", 19)]
# Summation order only (MatMul accumulation), relative to the output's magnitude.
MLP_RTOL = 1e-5


def decode(codes):
    """E4M3FN codes -> float32 by the format's definition (not by either implementation)."""
    codes = np.asarray(codes, np.uint8)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    e = (codes >> 3) & 0xF
    m = (codes & 7).astype(np.float64)
    v = np.where(e == 0, m * 2.0 ** -9, (8 + m) * 2.0 ** (e.astype(np.float64) - 10))
    v = np.where((e == 0xF) & (m == 7), np.nan, v)
    return (sign * v).astype(np.float32)


def fp8_tensor(name, codes, dims):
    return helper.make_tensor(name, FP8, dims, np.asarray(codes, np.uint8).tobytes(), raw=True)


def save(model, path):
    onnx.checker.check_model(model)
    onnx.save(model, path)


def ort_run(path, x):
    # qktest's session has graph optimizations off: onnxruntime 1.19 fuses DequantizeLinear ->
    # MatMul into MatMulIntegerToFloat, which refuses FP8 inputs (an error of the fusion).
    sess = ort_session(path)
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def quantkit_run(tmp, path, x):
    data, out = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
    np.save(data, x)
    p = subprocess.run([QK, "eval", path, "--data", data, "--save-outputs", out, "-q"],
                       capture_output=True, text=True)
    assert p.returncode == 0, f"eval {path}: exit {p.returncode}\n{p.stderr}"
    return np.load(out).reshape(x.shape[0], -1)


def same_bits(a, b):
    a, b = np.asarray(a, np.float32).ravel(), np.asarray(b, np.float32).ravel()
    both_nan = np.isnan(a) & np.isnan(b)
    diff = np.nonzero(~both_nan & (a.view(np.uint32) != b.view(np.uint32)))[0]
    return diff


def test_every_code_decodes_as_onnxruntime_does():
    codes = np.arange(256, dtype=np.uint8)
    with tempfile.TemporaryDirectory() as tmp:
        for per_channel in (False, True):
            # [2, 256]: per channel, axis 0 takes a scale per row.
            scale = np.array([0.5, 3.0], np.float32) if per_channel else np.array(0.37, np.float32)
            w = fp8_tensor("w", np.tile(codes, 2), [2, 256])
            dq = helper.make_node("DequantizeLinear", ["w", "s", "z"], ["wf"], axis=0)
            zp = fp8_tensor("z", np.zeros(scale.size, np.uint8), list(scale.shape))
            add = helper.make_node("Add", ["x", "wf"], ["y"])
            graph = helper.make_graph([dq, add], "decode",
                                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 256])],
                                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 256])],
                                      [w, zp, onnx.numpy_helper.from_array(scale, "s")])
            path = os.path.join(tmp, f"decode{int(per_channel)}.onnx")
            save(helper.make_model(graph, opset_imports=OPSET), path)
            x = np.zeros((1, 2, 256), np.float32)
            ours, theirs = quantkit_run(tmp, path, x), ort_run(path, x).reshape(1, -1)
            assert same_bits(ours, theirs).size == 0, same_bits(ours, theirs)[:10]
            # Both equal the format's definition times the scale (in float32), plus the zeros of x
            # (which turn -0 into +0).
            want = x.reshape(1, -1) + (decode(np.tile(codes, 2)).reshape(2, 256) * scale.reshape(-1, 1)).reshape(1, -1)
            assert same_bits(ours, want).size == 0


def sweep():
    finite = decode(np.arange(0, 0x7F, dtype=np.uint8)).astype(np.float64)  # 0 .. 448
    mids = (finite[1:] + finite[:-1]) / 2
    ulp_up = np.nextafter(mids.astype(np.float32), np.float32(np.inf))
    ulp_down = np.nextafter(mids.astype(np.float32), np.float32(0))
    special = [448, 449, 463.99, 464, 465, 479, 480, 500, 1e6, 3e38, np.inf, np.nan, 0.0, 2.0 ** -10,
               2.0 ** -11, 3 * 2.0 ** -10, 1e-30, 1.4e-45]
    rng = np.random.default_rng(0)
    values = np.concatenate([finite, mids, ulp_up, ulp_down, special,
                             rng.standard_normal(2000) * 50, rng.standard_normal(500) * 0.01])
    values = np.concatenate([values, -values]).astype(np.float32)
    values = np.concatenate([values, np.array([-0.0], np.float32)])
    pad = (-values.size) % 64
    return np.concatenate([values, np.zeros(pad, np.float32)]).reshape(-1, 64)


def test_quantize_dequantize_rounds_saturates_and_keeps_nan_as_onnxruntime_does():
    with tempfile.TemporaryDirectory() as tmp:
        for scale in (1.0, 0.37, 2.0 ** -7):
            q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"])
            dq = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])
            graph = helper.make_graph([q, dq], "qdq",
                                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
                                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 64])],
                                      [onnx.numpy_helper.from_array(np.array(scale, np.float32), "s"),
                                       fp8_tensor("z", [0], [])])
            path = os.path.join(tmp, "qdq.onnx")
            save(helper.make_model(graph, opset_imports=OPSET), path)
            x = sweep() * np.float32(scale)
            ours, theirs = quantkit_run(tmp, path, x), ort_run(path, x)
            bad = same_bits(ours, theirs)
            assert bad.size == 0, (scale, [(x.ravel()[i], ours.ravel()[i], theirs.ravel()[i]) for i in bad[:8]])
            # Saturation and NaN, by the format: +-448 * scale past the range, NaN stays NaN.
            flat_x, flat = x.ravel(), ours.ravel()
            big = np.abs(flat_x) >= 464 * scale
            assert np.all(np.abs(flat[big]) == np.float32(448) * np.float32(scale))
            assert np.all(np.isnan(flat[np.isnan(flat_x)]))


def mlp(tmp, rng):
    """x[N,32] -> FP8 Q/DQ -> MatMul(W1 FP8 per channel) + b1 -> Relu -> Q/DQ -> MatMul(W2) -> y[N,10]."""
    inits, nodes = [], []

    def fp8_weight(name, w):
        amax = np.abs(w).max(axis=0)
        scale = (amax / 448).astype(np.float32)
        codes = [onnx.helper.float32_to_float8e4m3(float(v)) for v in (w / scale).ravel()]
        inits.extend([fp8_tensor(name + "_q", codes, list(w.shape)),
                      onnx.numpy_helper.from_array(scale, name + "_s"),
                      fp8_tensor(name + "_z", np.zeros(scale.size, np.uint8), [scale.size])])
        nodes.append(helper.make_node("DequantizeLinear", [name + "_q", name + "_s", name + "_z"], [name],
                                      axis=1))

    def fp8_activation(x, name, amax):
        inits.extend([onnx.numpy_helper.from_array(np.array(amax / 448, np.float32), name + "_s"),
                      fp8_tensor(name + "_z", [0], [])])
        nodes.append(helper.make_node("QuantizeLinear", [x, name + "_s", name + "_z"], [name + "_q"]))
        nodes.append(helper.make_node("DequantizeLinear", [name + "_q", name + "_s", name + "_z"], [name]))

    fp8_weight("w1", rng.standard_normal((32, 64)).astype(np.float32))
    fp8_weight("w2", rng.standard_normal((64, 10)).astype(np.float32) * 0.2)
    inits.append(onnx.numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "b1"))
    fp8_activation("x", "xq", 3.0)
    nodes += [helper.make_node("MatMul", ["xq", "w1"], ["h0"]), helper.make_node("Add", ["h0", "b1"], ["h1"]),
              helper.make_node("Relu", ["h1"], ["h"])]
    fp8_activation("h", "hq", 12.0)
    nodes.append(helper.make_node("MatMul", ["hq", "w2"], ["y"]))
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    path = os.path.join(tmp, "mlp.onnx")
    save(helper.make_model(graph, opset_imports=OPSET), path)
    return path


def test_an_fp8_mlp_as_modelopt_writes_it_matches_onnxruntime():
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        path = mlp(tmp, rng)
        x = rng.standard_normal((256, 32)).astype(np.float32)
        ours, theirs = quantkit_run(tmp, path, x), ort_run(path, x)
        err = np.abs(ours - theirs).max() / np.abs(theirs).max()
        assert err <= MLP_RTOL, err
        # The FP8 model is not its float twin: quantization did happen.
        assert np.abs(ours - theirs).max() < np.abs(theirs).max() * 0.5


def test_what_quantkit_does_not_run_is_refused_naming_the_node():
    with tempfile.TemporaryDirectory() as tmp:
        cases = {}
        # An FP8 graph input read by DequantizeLinear.
        dq = helper.make_node("DequantizeLinear", ["x8", "s"], ["y"], name="dq_input")
        cases["input"] = helper.make_graph(
            [dq], "g", [helper.make_tensor_value_info("x8", FP8, ["N", 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
            [onnx.numpy_helper.from_array(np.array(1.0, np.float32), "s")])
        # A QuantizeLinear whose FP8 output is also a graph output.
        q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q_shared")
        dq = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq_shared")
        cases["shared"] = helper.make_graph(
            [q, dq], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4]),
             helper.make_tensor_value_info("q", FP8, ["N", 4])],
            [onnx.numpy_helper.from_array(np.array(1.0, np.float32), "s"), fp8_tensor("z", [0], [])])
        # An E5M2 weight.
        w = helper.make_tensor("w", TensorProto.FLOAT8E5M2, [4], bytes([0x3C] * 4), raw=True)
        dq = helper.make_node("DequantizeLinear", ["w", "s"], ["wf"], name="dq_e5m2")
        add = helper.make_node("Add", ["x", "wf"], ["y"])
        cases["e5m2"] = helper.make_graph(
            [dq, add], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
            [w, onnx.numpy_helper.from_array(np.array(1.0, np.float32), "s")])
        names = {"input": "x8", "shared": "q_shared", "e5m2": "dq_e5m2"}
        for case, graph in cases.items():
            path = os.path.join(tmp, case + ".onnx")
            onnx.save(helper.make_model(graph, opset_imports=OPSET), path)
            data = os.path.join(tmp, "x.npy")
            np.save(data, np.zeros((2, 4), np.float32))
            p = subprocess.run([QK, "eval", path, "--data", data, "-q"], capture_output=True, text=True)
            assert p.returncode == 3, (case, p.returncode, p.stderr)
            assert names[case] in p.stderr and "FP8" in p.stderr, (case, p.stderr)
            assert len(p.stderr.strip().splitlines()) == 1, p.stderr
