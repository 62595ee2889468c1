"""``quantize_static`` with onnxruntime 1.32's signature, so switching is a one-line change::

    # from onnxruntime.quantization import quantize_static
    from quantkit.ort import quantize_static

    quantize_static("model.onnx", "model.qdq.onnx", reader, per_channel=True)

Every parameter of ``onnxruntime.quantization.quantize_static`` (1.32), in its order, so positional
calls bind as they do there. It calibrates with quantkit (TensorRT's Q/DQ placement, symmetric
INT8) and writes the Q/DQ model to ``model_output``. Honoured (docs/python.md lists each with
onnxruntime's default):

* ``model_input`` (a path or an ``onnx.ModelProto``), ``model_output``,
  ``calibration_data_reader`` (any ``get_next()`` reader, or anything ``quantkit.calibrate``
  takes as data; may be None when ``calibration_cache_path`` holds the statistics);
* ``calibrate_method``: MinMax -> max, Entropy -> entropy, Percentile -> percentile:P with
  ``extra_options["CalibPercentile"]`` (default 99.999, as onnxruntime);
* ``per_channel``, ``nodes_to_exclude`` (kept in float);
* ``calibration_cache_path``: quantkit's statistics (.qkstats) for this model: read when the file
  exists (no calibration run, any method), written after calibrating when it does not;
* ``calibration_providers``: None or CPUExecutionProvider first (quantkit calibrates on the CPU);
* ``extra_options``: every key onnxruntime 1.32 documents is accepted at its default value or
  at a value that is what quantkit does (``ActivationSymmetric`` / ``WeightSymmetric`` /
  ``CalibTensorRangeSymmetric`` True, ``AddQDQPairToWeight`` True); ``CalibPercentile`` is used;
  ``CalibStridedMinMax`` and ``CalibMaxIntermediateOutputs`` only bound onnxruntime's memory and
  do not change its result, so any value is accepted.

Anything else that would change the result (QOperator format, unsigned or 16-bit types,
``reduce_range``, ``op_types_to_quantize``, ``nodes_to_quantize``, external data, Distribution
calibration, a GPU provider, any other ``extra_options`` value, an unknown key) raises
``UnsupportedError`` naming the option instead of being ignored.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Optional, Union

from .errors import UnsupportedError
from .pipelines import calibrate
from .plan import Plan, PathLike
from .stats import Statistics

#: onnxruntime 1.32's documented extra_options and their defaults (a value equal to the default
#: changes nothing).
EXTRA_OPTION_DEFAULTS: dict[str, Any] = {
    "extra.Sigmoid.nnapi": False, "ActivationSymmetric": False, "ActivationRestrictedAsymmetric": False,
    "WeightSymmetric": True, "EnableSubgraph": False, "ForceQuantizeNoInputCheck": False,
    "MatMulConstBOnly": False, "AddQDQPairToWeight": False, "OpTypesToExcludeOutputQuantization": [],
    "DedicatedQDQPair": False, "QDQOpTypePerChannelSupportToAxis": {}, "CalibTensorRangeSymmetric": False,
    "CalibStridedMinMax": None, "CalibMovingAverage": False, "CalibMovingAverageConstant": 0.01,
    "CalibMaxIntermediateOutputs": None, "SmoothQuant": False, "SmoothQuantAlpha": 0.5,
    "SmoothQuantFolding": True, "UseQDQContribOps": False, "MinimumRealRange": None,
    "TensorQuantOverrides": {}, "QDQKeepRemovableActivations": False,
    "QDQDisableWeightAdjustForInt32Bias": False, "CalibPercentile": 99.999,
}
#: Values that are what quantkit does anyway (symmetric INT8, Q/DQ pairs on float weights today).
_QUANTKIT_VALUES: dict[str, Any] = {"ActivationSymmetric": True, "WeightSymmetric": True,
                                    "CalibTensorRangeSymmetric": True, "AddQDQPairToWeight": True}
#: Keys that only bound onnxruntime's memory: any value gives onnxruntime's result.
_MEMORY_ONLY = {"CalibStridedMinMax", "CalibMaxIntermediateOutputs"}
_CPU_PROVIDER = "CPUExecutionProvider"


def _name(value: Any) -> str:
    """An onnxruntime enum member's name (without importing onnxruntime), or the string given."""
    return getattr(value, "name", str(value)).split(".")[-1]


def _refuse(option: str, value: Any, why: str) -> None:
    raise UnsupportedError(f"quantize_static: {option}={value!r} is not supported: {why}")


def _check_extra_options(extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if key not in EXTRA_OPTION_DEFAULTS:
            _refuse(f"extra_options['{key}']", value, "not an extra option of onnxruntime 1.32's quantize_static")
        if key == "CalibPercentile" or key in _MEMORY_ONLY:
            continue
        if value == EXTRA_OPTION_DEFAULTS[key] or (key in _QUANTKIT_VALUES and value == _QUANTKIT_VALUES[key]):
            continue
        why = ("quantkit's INT8 is symmetric (TensorRT)" if "Symmetric" in key
               else "it changes the quantized model in a way quantkit does not reproduce")
        _refuse(f"extra_options['{key}']", value, why)


def _check_providers(providers: Any) -> None:
    if providers is None:
        return
    names = [p[0] if isinstance(p, (tuple, list)) else p for p in providers]
    if not names or names[0] != _CPU_PROVIDER:
        _refuse("calibration_providers", names, f"quantkit.ort calibrates on the CPU ({_CPU_PROVIDER})")


def _cached_statistics(path: str, model: str) -> Optional[Statistics]:
    """quantkit's statistics at ``calibration_cache_path``, None when there is no file yet."""
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        head = f.read(4096)
    if b'"CLS"' in head and b"TensorsData" in head:
        _refuse("calibration_cache_path", path, "it holds onnxruntime's JSON ranges; quantkit keeps its "
                "own statistics (.qkstats) there: give a path of its own")
    return Statistics.load(path, model=model)


def quantize_static(model_input: Union[PathLike, Any], model_output: PathLike,
                    calibration_data_reader: Any = None, quant_format: Any = "QDQ",
                    op_types_to_quantize: Optional[list[str]] = None, per_channel: bool = False,
                    reduce_range: bool = False, activation_type: Any = "QInt8", weight_type: Any = "QInt8",
                    nodes_to_quantize: Optional[list[str]] = None, nodes_to_exclude: Optional[list[str]] = None,
                    use_external_data_format: bool = False, calibrate_method: Any = "MinMax",
                    calibration_providers: Optional[list[Any]] = None,
                    extra_options: Optional[dict[str, Any]] = None,
                    calibration_cache_path: Optional[PathLike] = None,
                    *, output_dir: Optional[PathLike] = None, progress: bool = True) -> Plan:
    """onnxruntime.quantization.quantize_static (1.32) over quantkit.calibrate; returns the plan.
    ``output_dir`` (quantkit only) also writes calib.cache, ranges.txt, plan.json there."""
    extra = dict(extra_options or {})
    if _name(quant_format) != "QDQ":
        _refuse("quant_format", _name(quant_format), "quantkit writes Q/DQ models (TensorRT's explicit quantization)")
    for option, value in (("activation_type", activation_type), ("weight_type", weight_type)):
        if _name(value) != "QInt8":
            _refuse(option, _name(value), "TensorRT takes symmetric signed INT8 (QInt8)")
    if reduce_range:
        _refuse("reduce_range", reduce_range, "TensorRT uses the full INT8 range")
    if op_types_to_quantize:
        _refuse("op_types_to_quantize", op_types_to_quantize,
                "quantkit places Q/DQ as TensorRT fuses them; keep ops in float with nodes_to_exclude")
    if nodes_to_quantize:
        _refuse("nodes_to_quantize", nodes_to_quantize, "use nodes_to_exclude for the nodes to keep in float")
    if use_external_data_format:
        _refuse("use_external_data_format", use_external_data_format,
                "quantkit.ort writes the Q/DQ model as one file (use the quantkit CLI for models over 2 GB)")
    _check_providers(calibration_providers)
    _check_extra_options(extra)
    method = {"MinMax": "max", "Entropy": "entropy"}.get(_name(calibrate_method))
    if _name(calibrate_method) == "Percentile":
        method = f"percentile:{float(extra.get('CalibPercentile', 99.999))}"
    if method is None:
        _refuse("calibrate_method", _name(calibrate_method), "use MinMax, Entropy or Percentile")
    weights = "per-channel" if per_channel else "per-tensor"
    with tempfile.TemporaryDirectory(prefix="quantkit-ort-") as scratch:
        model = _model_path(model_input, scratch)
        cache = os.fspath(calibration_cache_path) if calibration_cache_path is not None else None
        data: Any = _cached_statistics(cache, model) if cache else None
        if data is None:
            if calibration_data_reader is None:
                raise UnsupportedError("quantize_static: give calibration_data_reader, or a calibration_cache_path "
                                       "that holds quantkit statistics of this model")
            data = calibration_data_reader
            if cache:
                data = Statistics.collect(model, data, exclude=list(nodes_to_exclude or []), weights=weights,
                                          progress=progress)
        plan = calibrate(model, data, method, output_dir, exclude=list(nodes_to_exclude or []),
                         weights=weights, progress=progress)
        plan.write_qdq(model, model_output, weights)
        if cache and not os.path.exists(cache):
            data.save(cache)
    if plan.report is not None:
        plan.report.written.append(os.fspath(model_output))
    return plan


def _model_path(model_input: Any, scratch: str) -> str:
    """A path for ``model_input``: itself, or an ``onnx.ModelProto`` written into ``scratch``."""
    if hasattr(model_input, "SerializeToString"):
        path = os.path.join(scratch, "model_input.onnx")
        with open(path, "wb") as f:
            f.write(model_input.SerializeToString())
        return path
    return os.fspath(model_input)
