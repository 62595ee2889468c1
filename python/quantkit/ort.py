"""``quantize_static`` with onnxruntime's call shape, so switching is a one-line change::

    # from onnxruntime.quantization import quantize_static
    from quantkit.ort import quantize_static

    quantize_static("model.onnx", "model.qdq.onnx", reader, per_channel=True)

It calibrates with quantkit (TensorRT's Q/DQ placement, symmetric INT8) and writes the Q/DQ model
to ``model_output``. Options honoured (docs/python.md lists them with onnxruntime's defaults):

* ``model_input``, ``model_output``, ``calibration_data_reader`` (any ``get_next()`` reader, or
  anything ``quantkit.calibrate`` takes as data);
* ``calibrate_method``: MinMax -> max, Entropy -> entropy, Percentile -> percentile:P with
  ``extra_options["CalibPercentile"]`` (default 99.999, as onnxruntime);
* ``per_channel`` (weights per channel along the output axis; default False, as onnxruntime);
* ``nodes_to_exclude`` (kept in float);
* ``quant_format`` QDQ, ``activation_type`` / ``weight_type`` QInt8, ``reduce_range=False``,
  ``extra_options`` ``ActivationSymmetric`` / ``WeightSymmetric`` True: accepted, being what
  quantkit does (TensorRT takes symmetric signed INT8 only).

Anything else that would change the result (QOperator format, unsigned or 16-bit types,
``reduce_range``, ``op_types_to_quantize``, ``nodes_to_quantize``, Distribution calibration,
asymmetric activations, other ``extra_options``) raises ``UnsupportedError`` naming the option,
instead of being ignored.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from .errors import UnsupportedError
from .pipelines import calibrate
from .plan import Plan, PathLike

_HONOURED_EXTRA = {"CalibPercentile", "ActivationSymmetric", "WeightSymmetric"}


def _name(value: Any) -> str:
    """An onnxruntime enum member's name (without importing onnxruntime), or the string given."""
    return getattr(value, "name", str(value)).split(".")[-1]


def _refuse(option: str, value: Any, why: str) -> None:
    raise UnsupportedError(f"quantize_static: {option}={value!r} is not supported: {why}",
                           "unsupported", 3)


def quantize_static(model_input: PathLike, model_output: PathLike, calibration_data_reader: Any,
                    quant_format: Any = "QDQ", op_types_to_quantize: Optional[list[str]] = None,
                    per_channel: bool = False, reduce_range: bool = False,
                    activation_type: Any = "QInt8", weight_type: Any = "QInt8",
                    nodes_to_quantize: Optional[list[str]] = None,
                    nodes_to_exclude: Optional[list[str]] = None, use_external_data_format: bool = False,
                    calibrate_method: Any = "MinMax", extra_options: Optional[dict[str, Any]] = None,
                    *, output_dir: Optional[PathLike] = None, progress: bool = True) -> Plan:
    """onnxruntime.quantization.quantize_static's signature over quantkit.calibrate; returns the
    plan. ``output_dir`` (quantkit only) also writes calib.cache, ranges.txt, plan.json there."""
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
        _refuse("use_external_data_format", use_external_data_format, "not implemented by this helper")
    for key in ("ActivationSymmetric", "WeightSymmetric"):
        if key in extra and not extra[key]:
            _refuse(f"extra_options['{key}']", extra[key], "quantkit's INT8 is symmetric (TensorRT)")
    unknown = sorted(set(extra) - _HONOURED_EXTRA)
    if unknown:
        _refuse("extra_options", unknown, f"only {sorted(_HONOURED_EXTRA)} are honoured")
    method = {"MinMax": "max", "Entropy": "entropy"}.get(_name(calibrate_method))
    if _name(calibrate_method) == "Percentile":
        method = f"percentile:{float(extra.get('CalibPercentile', 99.999))}"
    if method is None:
        _refuse("calibrate_method", _name(calibrate_method), "use MinMax, Entropy or Percentile")
    weights = "per-channel" if per_channel else "per-tensor"
    plan = calibrate(model_input, calibration_data_reader, method, output_dir,
                     exclude=list(nodes_to_exclude or []), weights=weights, progress=progress)
    plan.write_qdq(model_input, model_output, weights)
    if plan.report is not None:
        plan.report.written.append(os.fspath(model_output))
    return plan
