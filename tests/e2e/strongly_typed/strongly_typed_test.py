"""Strongly typed output (issue 29, docs/strongly-typed.md), on the zoo and on made-up models:

  * every zoo model calibrated with --float-dtype fp16: the written model passes onnx's full check
    (strict type inference), every tensor is FP16 or INT8 except the model's own inputs/outputs
    and the FP32 islands the summary names, the only Casts are the ones at the inputs/outputs
    (plus an island's boundaries), no Cast sits between a DequantizeLinear and its consumer, scales
    have the dtype of their Q input / DQ output, weights are INT8 initializers;
  * onnxruntime loads and runs every written model (finite outputs, the FP32 model's argmax on
    most samples);
  * a model whose activation exceeds FP16's range keeps that region in FP32 (fails if FP16);
  * INT8 weight storage: resnet_small's Q/DQ model is about a quarter of its FP32 file;
  * --int8 off: the FP16 model from the same statistics, no Q/DQ;
  * convert CACHE OUT.onnx --model FLOAT --data: the migration check prints the accuracy;
  * the default float dtype is FP16 (inputs/outputs keep their types); a cache's own ranges keep
    the tensors FP16 cannot hold in FP32 without data (convert, eval --plan CACHE).
"""
import json
import os
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from qktest import ROOT, ort_session, run, zoo_data  # noqa: E402  (tests/e2e/qktest.py)

CALIB = ["--data", "fashion-mnist:calib", "--samples", "256", "-q"]
ORT_SAMPLES = 256
# onnxruntime's CPU FP16 arithmetic is not TensorRT's (docs/strongly-typed.md): the written model
# must still give the FP32 model's class on nearly every image.
MIN_ORT_AGREEMENT = 0.95
# INT8 weight storage: initializer bytes a quarter of FP32's plus per-channel scales (measured 0.259
# on resnet_small), the whole file 0.30 (the Q/DQ nodes and their names; onnxruntime's 0.33).
MAX_INT8_WEIGHT_SHARE = 0.27
MAX_INT8_FILE_SHARE = 0.32
FP16 = TensorProto.FLOAT16
FP32 = TensorProto.FLOAT


def value_types(model):
    """name -> elem_type for every tensor of the main graph, from strict shape inference."""
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    types = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        types[vi.name] = vi.type.tensor_type.elem_type
    for init in inferred.graph.initializer:
        types[init.name] = init.data_type
    return types


def check_typed(path, summary, dtype=FP16, int8=True):
    """The structural rules of a strongly typed model; returns (casts, fp32 tensors)."""
    m = onnx.load(path)
    onnx.checker.check_model(m, full_check=True)
    opset = {o.domain: o.version for o in m.opset_import}
    assert opset.get("", opset.get("ai.onnx")) >= 19, opset
    types = value_types(m)
    io = {v.name for v in m.graph.input} | {v.name for v in m.graph.output}
    producer = {o: n for n in m.graph.node for o in n.output}
    fp32 = {name for name, t in types.items() if t == FP32 and name not in io}
    islands = "fp32:" in summary
    if not islands:
        # Besides the model's own inputs/outputs, float32 only on the Cast outputs that write them.
        assert not fp32, f"{path}: float32 tensors without an FP32 island: {sorted(fp32)[:10]}"
    assert all(types[name] in (dtype, FP32) for name in io), [(n, types[n]) for n in io]
    casts = [n for n in m.graph.node if n.op_type == "Cast"]
    for c in casts:
        p = producer.get(c.input[0])
        assert p is None or p.op_type != "DequantizeLinear", f"Cast {c.name} after DequantizeLinear {p.name}"
    if not islands:
        assert len(casts) <= len(m.graph.input) + len(m.graph.output), [c.name for c in casts]
    inits = {i.name: i for i in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear":
            assert inits[n.input[1]].data_type == types[n.output[0]], n.name
            if n.input[0] in inits:
                assert inits[n.input[0]].data_type == TensorProto.INT8, n.name
        if n.op_type == "QuantizeLinear":
            assert inits[n.input[1]].data_type == types[n.input[0]], n.name
            if int8:
                assert n.input[0] not in inits, f"{n.name}: a weight behind Q -> DQ, expected INT8 storage"
    return casts, fp32


def ort_outputs(path, x):
    s = ort_session(path)
    return np.concatenate([s.run(None, {s.get_inputs()[0].name: x[i:i + 64]})[0] for i in range(0, len(x), 64)])


def ort_agreement(path, reference, x):
    """Argmax agreement of `path` with `reference` in onnxruntime (asserting finite outputs)."""
    ours, ref = ort_outputs(path, x), ort_outputs(reference, x)
    assert np.isfinite(ours).all(), path
    assert ours.shape == ref.shape
    return float((ours.argmax(1) == ref.argmax(1)).mean())


def fp32_twin(path, out):
    """The written model with every FP16 tensor widened back to float32 (values unchanged: FP16
    weights, biases and scales exactly), Casts to FP16 turned into float32 ones. onnxruntime
    1.19's CPU QuantizeLinear truncates x / scale toward zero in float16 (ort_truncates_fp16_q)
    instead of rounding half to even, so the twin is what checks the written graph in onnxruntime:
    the same model computed in float32 with the written (FP16-rounded) numbers."""
    m = onnx.load(path)
    for init in m.graph.initializer:
        if init.data_type == FP16:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float32), init.name))
    for vi in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        if vi.type.tensor_type.elem_type == FP16:
            vi.type.tensor_type.elem_type = FP32
    for n in m.graph.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == FP16:
                a.i = FP32
    onnx.save(m, out)
    return out


def ort_truncates_fp16_q():
    """True when onnxruntime's CPU QuantizeLinear on float16 rounds 0.3 / 0.5 = 0.6 to 0 (it should be 1)."""
    import onnxruntime as ort
    g = helper.make_graph([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], "q",
                          [helper.make_tensor_value_info("x", FP16, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.INT8, [2])],
                          [numpy_helper.from_array(np.array(0.5, np.float16), "s"),
                           numpy_helper.from_array(np.array(0, np.int8), "z")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    m.ir_version = 9
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, {"x": np.array([0.3, -0.3], np.float16)})[0].tolist() == [0, 0]


def test_zoo_fp16_int8():
    manifest = json.load(open(os.path.join(ROOT, "models", "zoo", "manifest.json")))
    x, _ = zoo_data.load_split("test")
    x = x[:ORT_SAMPLES]
    truncates = ort_truncates_fp16_q()
    with tempfile.TemporaryDirectory() as d:
        for name, entry in manifest["models"].items():
            if name.endswith("_qat"):
                continue
            model = os.path.join(ROOT, entry["file"])
            out = os.path.join(d, name)
            summary = run(["calibrate", model, *CALIB, "--float-dtype", "fp16", "-o", out])
            assert "float dtype: fp16" in summary, summary
            qdq = os.path.join(out, "model.qdq.onnx")
            casts, fp32 = check_typed(qdq, summary)
            as_written = ort_agreement(qdq, model, x)  # onnxruntime loads and runs it
            twin = ort_agreement(fp32_twin(qdq, os.path.join(out, "twin.onnx")), model, x)
            size, fp32_size = os.path.getsize(qdq), os.path.getsize(model)
            print(f"{name}: {len(casts)} Casts, {len(fp32)} FP32 tensors, onnxruntime argmax agreement {as_written:.4f} "
                  f"as written (its FP16 QuantizeLinear truncates: {truncates}), {twin:.4f} in float32; {size} bytes "
                  f"({size / fp32_size:.2f} of FP32)")
            assert twin >= MIN_ORT_AGREEMENT, (name, twin)
            if not truncates:
                assert as_written >= MIN_ORT_AGREEMENT, (name, as_written)
            plan = json.load(open(os.path.join(out, "plan.json")))
            assert plan["float_precision"]["dtype"] == "fp16"


def test_int8_weights_are_a_quarter_of_the_file():
    model = os.path.join(ROOT, "models", "zoo", "resnet_small.onnx")
    with tempfile.TemporaryDirectory() as d:
        run(["calibrate", model, *CALIB, "--float-dtype", "fp32", "-o", os.path.join(d, "int8")])
        run(["calibrate", model, *CALIB, "--float-dtype", "fp32", "--weight-storage", "float", "-o",
             os.path.join(d, "float")])
        fp32 = os.path.getsize(model)
        int8 = os.path.getsize(os.path.join(d, "int8", "model.qdq.onnx"))
        fake = os.path.getsize(os.path.join(d, "float", "model.qdq.onnx"))
        weight_bytes = [sum(len(i.raw_data) for i in onnx.load(p).graph.initializer)
                         for p in (model, os.path.join(d, "int8", "model.qdq.onnx"))]
        print(f"resnet_small: FP32 {fp32} bytes, Q/DQ with float weights {fake}, with INT8 weights {int8} "
              f"(initializers {weight_bytes[1]} of {weight_bytes[0]})")
        # The weights a quarter (plus the scales); the file also holds the Q/DQ nodes' structure.
        assert weight_bytes[1] < MAX_INT8_WEIGHT_SHARE * weight_bytes[0], weight_bytes
        assert int8 < MAX_INT8_FILE_SHARE * fp32, (int8, fp32)
        assert fake > fp32
        # Both storages are the same model: identical outputs in onnxruntime.
        x, _ = zoo_data.load_split("test")
        a = ort_session(os.path.join(d, "int8", "model.qdq.onnx")).run(None, {"input": x[:64]})[0]
        b = ort_session(os.path.join(d, "float", "model.qdq.onnx")).run(None, {"input": x[:64]})[0]
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        # Every reader takes either: lint finds nothing, extract gives the same plan (weights keyed by
        # their own names), strip the same float model.
        for kind in ("int8", "float"):
            qdq = os.path.join(d, kind, "model.qdq.onnx")
            run(["lint", qdq])
            run(["convert", qdq, os.path.join(d, kind + ".json")])
            run(["convert", qdq, os.path.join(d, kind + "_float.onnx")])
        plans = [json.load(open(os.path.join(d, k + ".json")))["tensors"] for k in ("int8", "float")]
        assert plans[0].keys() == plans[1].keys(), sorted(set(plans[0]) ^ set(plans[1]))
        assert sum(t["role"] == "weight" for t in plans[0].values()) > 5
        for name in plans[0]:
            assert plans[0][name]["scale"] == plans[1][name]["scale"], name
        # Stripped, INT8 storage gives back the fake-quantized weights (the float ones are not in the
        # file): same names and shapes, each within half a step of its channel's scale.
        stripped = [{i.name: numpy_helper.to_array(i) for i in onnx.load(os.path.join(d, k + "_float.onnx")).graph.initializer}
                    for k in ("int8", "float")]
        assert stripped[0].keys() == stripped[1].keys()
        for name, w in stripped[1].items():
            entry = plans[1].get(name)
            if entry is None or entry["role"] != "weight":
                np.testing.assert_array_equal(stripped[0][name], w)
                continue
            step = np.asarray(entry["scale"], np.float32).reshape([-1] + [1] * (w.ndim - 1))
            assert np.all(np.abs(stripped[0][name] - w) <= step / 2 * (1 + 1e-6)), name


def overflow_model(path):
    """input -> Conv -> Mul(3e4) = big -> Relu -> Mul(1e-4) -> Flatten -> Gemm -> Softmax: `big`
    reaches far beyond FP16's 65504 / 16 on Fashion-MNIST."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.normal(0, 0.5, (4, 1, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(np.array([3e4], np.float32), "up"),
        numpy_helper.from_array(np.array([1e-4], np.float32), "down"),
        numpy_helper.from_array(rng.normal(0, 0.05, (10, 4 * 26 * 26)).astype(np.float32), "fc"),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "w"], ["conv"], name="conv"),
        helper.make_node("Mul", ["conv", "up"], ["big"], name="scale_up"),
        helper.make_node("Relu", ["big"], ["big_relu"], name="relu"),
        helper.make_node("Mul", ["big_relu", "down"], ["small"], name="scale_down"),
        helper.make_node("Flatten", ["small"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["output"], name="softmax"),
    ]
    g = helper.make_graph(nodes, "overflow", [helper.make_tensor_value_info("input", FP32, ["N", 1, 28, 28])],
                          [helper.make_tensor_value_info("output", FP32, ["N", 10])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def test_activation_beyond_fp16_keeps_its_region_fp32():
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "overflow.onnx")
        overflow_model(model)
        summary = run(["calibrate", model, *CALIB, "--float-dtype", "fp16", "-o", os.path.join(d, "out")])
        qdq = os.path.join(d, "out", "model.qdq.onnx")
        casts, fp32 = check_typed(qdq, summary)
        types = value_types(onnx.load(qdq))
        # Written by the FP32 Mul and read by the FP32 Relu: the overflowing tensors stay FP32.
        assert types["big"] == FP32 and types["big_relu"] == FP32, "the overflowing region went FP16"
        assert types["flat"] == FP16 or types.get("small") == FP32
        plan = json.load(open(os.path.join(d, "out", "plan.json")))
        assert "big" in plan["float_precision"]["fp32_tensors"], plan["float_precision"]
        x, _ = zoo_data.load_split("test")
        agreement = ort_agreement(fp32_twin(qdq, os.path.join(d, "twin.onnx")), model, x[:ORT_SAMPLES])
        ort_agreement(qdq, model, x[:ORT_SAMPLES])  # loads and runs as written
        print(f"overflow model: FP32 tensors {sorted(fp32)}, {len(casts)} Casts, agreement {agreement:.4f}")
        assert agreement >= MIN_ORT_AGREEMENT


def test_fp16_without_int8():
    model = os.path.join(ROOT, "models", "zoo", "resnet_small.onnx")
    with tempfile.TemporaryDirectory() as d:
        summary = run(["calibrate", model, *CALIB, "--int8", "off", "--float-dtype", "fp16", "-o", d])
        assert sorted(os.listdir(d)) == ["model.fp16.onnx", "plan.json", "summary.txt"], os.listdir(d)
        path = os.path.join(d, "model.fp16.onnx")
        m = onnx.load(path)
        assert not [n for n in m.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
        check_typed(path, summary)
        x, _ = zoo_data.load_split("test")
        agreement = ort_agreement(path, model, x[:ORT_SAMPLES])
        print(f"resnet_small FP16 without INT8: onnxruntime agreement {agreement:.4f}")
        assert agreement >= 0.99
        run(["calibrate", model, *CALIB, "--int8", "off", "--float-dtype", "fp32", "-o", d], expect=2)


def test_convert_cache_migration_reports_accuracy():
    model = os.path.join(ROOT, "models", "zoo", "plain_cnn.onnx")
    with tempfile.TemporaryDirectory() as d:
        run(["calibrate", model, *CALIB, "-o", d])
        out = run(["convert", os.path.join(d, "calib.cache"), os.path.join(d, "trt11.onnx"), "--model", model,
                   "--data", "fashion-mnist:test", "--samples", "200", "--float-dtype", "fp32"])
        assert "accuracy of" in out and "top-1" in out, out
        # A name that matches nothing is an error, before anything is written.
        run(["convert", os.path.join(d, "calib.cache"), os.path.join(d, "x.onnx"), "--model", model,
             "--keep-fp32", "NoSuchOp"], expect=2)
        assert not os.path.exists(os.path.join(d, "x.onnx"))


def test_default_float_dtype_is_fp16():
    """Issue 29: with no --float-dtype, calibrate writes FP16 outside the INT8 layers (what a
    TensorRT 11 engine should run) while the graph inputs and outputs keep the model's FP32 types."""
    model = os.path.join(ROOT, "models", "zoo", "plain_cnn.onnx")
    with tempfile.TemporaryDirectory() as d:
        summary = run(["calibrate", model, *CALIB, "-o", d])
        assert "float dtype: fp16 (inputs and outputs keep their types)" in summary, summary
        qdq = os.path.join(d, "model.qdq.onnx")
        casts, fp32 = check_typed(qdq, summary)
        assert not fp32, sorted(fp32)
        m, src = onnx.load(qdq), onnx.load(model)
        assert [(v.name, v.type.tensor_type.elem_type) for v in m.graph.input] == \
            [(v.name, v.type.tensor_type.elem_type) for v in src.graph.input if v.type.tensor_type.elem_type == FP32]
        assert [(v.name, v.type.tensor_type.elem_type) for v in m.graph.output] == \
            [(v.name, v.type.tensor_type.elem_type) for v in src.graph.output]
        types = value_types(m)
        assert any(t == FP16 for t in types.values()), "no FP16 tensor in the default output"
        assert json.load(open(os.path.join(d, "plan.json")))["float_precision"]["dtype"] == "fp16"


def test_cache_without_data_keeps_its_out_of_range_tensors_fp32():
    """A TensorRT implicit-INT8 cache holds a range for every tensor: `convert CACHE OUT --model`
    without --data (and `eval --plan CACHE`) use it, in the FP16 default, to keep the tensors FP16
    cannot hold in FP32 (passes::MarkPlanRangeFp32Tensors). The cache here is calibrate's, with
    the ranges of the overflow model's `big` and `big_relu` added as TensorRT writes them (measured
    in onnxruntime)."""
    import struct
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "overflow.onnx")
        overflow_model(model)
        run(["calibrate", model, *CALIB, "--float-dtype", "fp32", "-o", os.path.join(d, "c")])
        # |big|, |big_relu| on the calibration samples, from onnxruntime with them as extra outputs.
        m = onnx.load(model)
        wide = ["big", "big_relu"]
        for name in wide:
            m.graph.output.append(helper.make_tensor_value_info(name, FP32, None))
        probe = os.path.join(d, "probe.onnx")
        onnx.save(m, probe)
        x, _ = zoo_data.load_split("calib")
        values = ort_session(probe).run(wide, {"input": x[:256]})
        with open(os.path.join(d, "c", "calib.cache")) as f:
            lines = f.read().rstrip("\n").split("\n")
        amax = {}
        for name, v in zip(wide, values):
            amax[name] = float(np.abs(v).max())
            assert amax[name] > 65504 / 16, amax  # beyond FP16 with the margin: the point of the test
            scale = struct.unpack(">I", struct.pack(">f", np.float32(amax[name]) / np.float32(127)))[0]
            lines.append(f"{name}: {scale:08x}")
        cache = os.path.join(d, "trt.cache")
        with open(cache, "w") as f:
            f.write("\n".join(lines) + "\n")
        out = run(["convert", cache, os.path.join(d, "trt11.onnx"), "--model", model])
        assert "float dtype fp16: 2 tensor(s) stay FP32 from the plan's ranges" in out, out
        types = value_types(onnx.load(os.path.join(d, "trt11.onnx")))
        assert types["big"] == FP32 and types["big_relu"] == FP32, "the overflowing region went FP16"
        assert types["flat"] == FP16 or types.get("small") == FP32
        # eval reads the cache the same way: the simulated FP16 model agrees with FP32.
        ev = json.loads(run(["eval", model, "--plan", cache, "--data", "fashion-mnist:test", "--samples", "256",
                             "--json", "-q"]))
        print(f"cache -> FP16 + INT8 without data: amax {amax}, eval argmax agreement "
              f"{ev['agreement']['argmax']:.4f}")
        assert ev["agreement"]["argmax"] >= MIN_ORT_AGREEMENT, ev["agreement"]
        # Without that range the same cache would let `big` go FP16: the island comes from it.
        out = run(["convert", os.path.join(d, "c", "calib.cache"), os.path.join(d, "plain.onnx"), "--model", model])
        assert "0 tensor(s) stay FP32 from the plan's ranges" in out, out
