"""quantkit.ort.quantize_static against onnxruntime 1.32's quantize_static: the same parameters
in the same order (a positional call binds the same way), ModelProto input, the calibration
cache, providers, and every extra option either honoured or refused by name."""

from __future__ import annotations

import inspect

import pytest

import quantkit
from quantkit.ort import EXTRA_OPTION_DEFAULTS, quantize_static

# onnxruntime 1.32.0's signature (onnxruntime/quantization/quantize.py of the cp311 wheel):
# name and default, in order. The enum defaults are compared by member name.
ORT_1_32_PARAMETERS = [
    ("model_input", inspect.Parameter.empty), ("model_output", inspect.Parameter.empty),
    ("calibration_data_reader", None), ("quant_format", "QDQ"), ("op_types_to_quantize", None),
    ("per_channel", False), ("reduce_range", False), ("activation_type", "QInt8"),
    ("weight_type", "QInt8"), ("nodes_to_quantize", None), ("nodes_to_exclude", None),
    ("use_external_data_format", False), ("calibrate_method", "MinMax"), ("calibration_providers", None),
    ("extra_options", None), ("calibration_cache_path", None),
]


def default_name(value):
    return getattr(value, "name", value)


def test_the_signature_is_onnxruntime_1_32s():
    ours = [(p.name, p.default) for p in inspect.signature(quantize_static).parameters.values()
            if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    assert ours == ORT_1_32_PARAMETERS


def test_the_installed_onnxruntime_has_no_parameter_we_lack():
    q = pytest.importorskip("onnxruntime.quantization")
    theirs = [(p.name, default_name(p.default)) for p in inspect.signature(q.quantize_static).parameters.values()]
    ours = dict(ORT_1_32_PARAMETERS)
    # Older onnxruntime (the venv's 1.19) has a prefix-compatible subset; newer must not add any.
    assert all(name in ours for name, _ in theirs), [n for n, _ in theirs if n not in ours]
    assert [n for n, _ in theirs] == [n for n, _ in ORT_1_32_PARAMETERS if n in dict(theirs)]


class Reader:
    def __init__(self, x, batch=8):
        self.batches = iter([{"input": x[i:i + batch]} for i in range(0, len(x), batch)])

    def get_next(self):
        return next(self.batches, None)


def test_positional_arguments_bind_as_in_onnxruntime(model, calib_array, tmp_path):
    """All sixteen positionally: extra_options is the 15th, after calibration_providers."""
    out = tmp_path / "pos.onnx"
    plan = quantize_static(model, out, Reader(calib_array), "QDQ", None, True, False, "QInt8", "QInt8",
                           None, None, False, "Percentile", ["CPUExecutionProvider"],
                           {"CalibPercentile": 99.9}, None, progress=False)
    assert out.exists() and plan.to_dict()["provenance"]["method"].startswith("percentile:99.9")


def test_model_proto_input_gives_the_same_model(model, calib_array, tmp_path):
    onnx = pytest.importorskip("onnx")
    quantize_static(model, tmp_path / "from_path.onnx", Reader(calib_array), progress=False)
    quantize_static(onnx.load(model), tmp_path / "from_proto.onnx", Reader(calib_array), progress=False)
    a = onnx.load(str(tmp_path / "from_path.onnx"))
    b = onnx.load(str(tmp_path / "from_proto.onnx"))
    assert [n.op_type for n in a.graph.node] == [n.op_type for n in b.graph.node]
    assert {i.name: i.raw_data for i in a.graph.initializer} == {i.name: i.raw_data for i in b.graph.initializer}


def test_calibration_cache_is_written_then_read_without_data(model, calib_array, tmp_path):
    cache = tmp_path / "calib.qkstats"
    quantize_static(model, tmp_path / "a.onnx", Reader(calib_array), calibration_cache_path=cache, progress=False)
    assert cache.exists()
    # No reader: the ranges come from the cache, and give the same model.
    quantize_static(model, tmp_path / "b.onnx", None, calibration_cache_path=cache, progress=False)
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()
    onnxruntime_cache = tmp_path / "ort.json"
    onnxruntime_cache.write_text('{"CLS": "TensorsData", "data": {}}')
    with pytest.raises(quantkit.UnsupportedError, match="calibration_cache_path.*onnxruntime's JSON"):
        quantize_static(model, tmp_path / "c.onnx", None, calibration_cache_path=onnxruntime_cache)
    with pytest.raises(quantkit.UnsupportedError, match="calibration_data_reader"):
        quantize_static(model, tmp_path / "c.onnx", None)
    assert not (tmp_path / "c.onnx").exists()


@pytest.mark.parametrize("providers", [None, ["CPUExecutionProvider"], [("CPUExecutionProvider", {})]])
def test_cpu_providers_are_honoured(model, calib_array, tmp_path, providers):
    quantize_static(model, tmp_path / "m.onnx", Reader(calib_array[:16]), calibration_providers=providers,
                    progress=False)


@pytest.mark.parametrize("option,value", [
    ("calibration_providers", ["CUDAExecutionProvider", "CPUExecutionProvider"]),
    ("quant_format", "QOperator"), ("activation_type", "QUInt8"), ("weight_type", "QInt16"),
    ("reduce_range", True), ("op_types_to_quantize", ["Conv"]), ("nodes_to_quantize", ["conv1"]),
    ("use_external_data_format", True), ("calibrate_method", "Distribution"),
])
def test_what_would_change_the_result_is_refused_by_name(model, calib_array, tmp_path, option, value):
    with pytest.raises(quantkit.UnsupportedError, match=option) as info:
        quantize_static(model, tmp_path / "m.onnx", Reader(calib_array[:16]), **{option: value})
    assert info.value.exit_code == 3
    assert not (tmp_path / "m.onnx").exists()


def test_every_extra_option_at_its_default_is_accepted(model, calib_array, tmp_path):
    quantize_static(model, tmp_path / "m.onnx", Reader(calib_array[:16]), extra_options=dict(EXTRA_OPTION_DEFAULTS),
                    progress=False)


@pytest.mark.parametrize("key,value", [
    ("SmoothQuant", True), ("CalibMovingAverage", True), ("WeightSymmetric", False), ("DedicatedQDQPair", True), ("TensorQuantOverrides", {"x": [{"scale": 1.0}]}),
    ("NotAnOption", 1),
])
def test_other_extra_option_values_are_refused_by_name(model, calib_array, tmp_path, key, value):
    with pytest.raises(quantkit.UnsupportedError, match=f"extra_options\\['{key}'\\]"):
        quantize_static(model, tmp_path / "m.onnx", Reader(calib_array[:16]), extra_options={key: value})


def test_memory_only_options_do_not_change_the_model(model, calib_array, tmp_path):
    quantize_static(model, tmp_path / "a.onnx", Reader(calib_array), progress=False)
    quantize_static(model, tmp_path / "b.onnx", Reader(calib_array), progress=False,
                    extra_options={"CalibStridedMinMax": 16, "CalibMaxIntermediateOutputs": 2})
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()
