"""End-to-end: third-party Q/DQ models through `quantkit convert` and `quantkit lint`.

A small residual CNN is exported by torch, quantized by onnxruntime's quantize_static (the peer
tool people use today), then
  1. `quantkit convert ort_qdq.onnx plan.cache` extracts its scales; the cache round-trips through
     `.json` and `.txt` exactly;
  2. `quantkit convert plan.cache requant.onnx --model float.onnx` writes a TensorRT-placed Q/DQ
     model that passes onnx.checker, loads in onnxruntime, lints clean, and computes nearly what
     the onnxruntime Q/DQ model computes (same activation scales, same weight scales);
  3. `quantkit convert ort_qdq.onnx stripped.onnx` removes every Q/DQ and its outputs stay within
     quantization noise of the Q/DQ model;
  4. `quantkit lint` flags ORT's default uint8 asymmetric output as TensorRT-incompatible (exit 2).
Run by pytest under ctest; quantkit comes from tests/e2e/qktest.py.
"""
import os
import tempfile

import numpy as np
import onnx
import torch
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_static)
from qktest import cosine, ort_run as infer, run  # noqa: E402  (tests/e2e/qktest.py)

# Quantization noise of an 8-bit model relative to the output scale: a Q/DQ model and its float
# twin differ by a few quantization steps; two Q/DQ placements of the same scales by less.
COSINE_STRIPPED_MIN = 0.98
COSINE_REQUANT_MIN = 0.98



class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(8, 10)

    def forward(self, x):
        a = torch.relu(self.c1(x))
        b = self.c2(a) + a
        return self.fc(torch.flatten(self.pool(torch.relu(b)), 1))


class Reader(CalibrationDataReader):
    def __init__(self, data):
        self.it = iter([{"x": d[None]} for d in data])

    def get_next(self):
        return next(self.it, None)


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    data = rng.standard_normal((16, 1, 12, 12)).astype(np.float32)
    with tempfile.TemporaryDirectory() as d:
        fp = os.path.join(d, "float.onnx")
        torch.onnx.export(Net().eval(), torch.from_numpy(data[:1]), fp, input_names=["x"],
                          output_names=["y"], opset_version=13,
                          dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
        sym = os.path.join(d, "ort_qdq.onnx")
        quantize_static(fp, sym, Reader(data), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        extra_options={"ActivationSymmetric": True, "WeightSymmetric": True})
        asym = os.path.join(d, "ort_uint8.onnx")
        quantize_static(fp, asym, Reader(data), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QUInt8)
        asym_int8 = os.path.join(d, "ort_int8_asym.onnx")
        quantize_static(fp, asym_int8, Reader(data), quant_format=QuantFormat.QDQ)

        # 1. extract and round-trip the plan formats.
        cache = os.path.join(d, "plan.cache")
        out = run(["convert", sym, cache])
        assert "extracted" in out, out
        lines = open(cache).read().splitlines()
        assert lines[0] == "TRT-8601-EntropyCalibration2", lines[0]
        assert any(l.startswith("x: ") for l in lines), "the network input needs a scale"
        run(["convert", cache, os.path.join(d, "plan.json")])
        run(["convert", os.path.join(d, "plan.json"), os.path.join(d, "plan.txt")])
        run(["convert", os.path.join(d, "plan.txt"), os.path.join(d, "again.cache")])
        again = open(os.path.join(d, "again.cache")).read().splitlines()
        # text ranges carry amax as shortest decimal, which reads back to the same float32 amax;
        # scale = amax/127 may then differ by one ulp from the stored scale at most.
        assert [l.split(": ")[0] for l in again] == [l.split(": ")[0] for l in lines]
        for a, b in zip(lines[1:], again[1:]):
            assert abs(int(a.split(": ")[1], 16) - int(b.split(": ")[1], 16)) <= 1, (a, b)
        run(["convert", os.path.join(d, "plan.json"), os.path.join(d, "json.cache")])
        assert open(os.path.join(d, "json.cache")).read().splitlines() == lines, "json must be exact"

        # 2. plan + float model -> TensorRT-placed Q/DQ model.
        requant = os.path.join(d, "requant.onnx")
        out = run(["convert", cache, requant, "--model", fp, "--layer-precisions"])
        assert "inserted" in out, out
        m = onnx.load(requant)
        onnx.checker.check_model(m, full_check=True)
        ops = [n.op_type for n in m.graph.node]
        # Activations get Q -> DQ (the input, two Conv+Relu outputs, the pool output); the three
        # weights are stored as INT8 initializers behind a DequantizeLinear (--weight-storage int8).
        assert ops.count("QuantizeLinear") >= 4, ops
        assert ops.count("DequantizeLinear") >= 7, ops
        inits = {i.name: i for i in m.graph.initializer}
        int8_weights = [n for n in m.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in inits
                        and inits[n.input[0]].data_type == onnx.TensorProto.INT8]
        assert len(int8_weights) == 3, [n.input[0] for n in int8_weights]
        for n in m.graph.node:
            if n.op_type == "QuantizeLinear":
                zp = [i for i in m.graph.initializer if i.name == n.input[2]][0]
                assert zp.data_type == onnx.TensorProto.INT8
        run(["lint", requant])  # exit 0: clean
        x = data[:4]
        y_ort_qdq = infer(sym, x)
        y_requant = infer(requant, x)
        c = cosine(y_ort_qdq, y_requant)
        assert c > COSINE_REQUANT_MIN, f"requantized model drifted: cosine {c}"

        # 3. strip.
        stripped = os.path.join(d, "stripped.onnx")
        out = run(["convert", sym, stripped])
        assert os.path.exists(os.path.join(d, "stripped.cache"))
        ms = onnx.load(stripped)
        onnx.checker.check_model(ms, full_check=True)
        assert not [n for n in ms.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
        c = cosine(infer(stripped, x), y_ort_qdq)
        assert c > COSINE_STRIPPED_MIN, f"stripped model drifted: cosine {c}"
        c_float = cosine(infer(stripped, x), infer(fp, x))
        assert c_float > COSINE_STRIPPED_MIN, f"stripped vs float: cosine {c_float}"

        # 4. lint flags ORT's default (uint8, asymmetric) output.
        out = run(["lint", asym], expect=2)  # uint8
        assert "QK002" in out, out
        out = run(["lint", asym, "--json"], expect=2)
        assert '"worst": "error"' in out
        out = run(["lint", asym_int8], expect=2)  # ORT's default: int8 but asymmetric
        assert "QK001" in out, out
        # ...and convert turns it into a symmetric int8 plan TensorRT accepts.
        out = run(["convert", asym_int8, os.path.join(d, "asym.cache")])
        assert "converted from asymmetric" in out and " 0 converted" not in out, out
        # inputs are never modified
        assert onnx.load(sym).SerializeToString() == open(sym, "rb").read()
    print("qdq_roundtrip_test: 1 passed, 0 failed")


def test_qdq_roundtrip():
    main()


if __name__ == "__main__":
    main()
