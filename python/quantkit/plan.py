"""quantkit.Plan: the quantization plan, from which every TensorRT artifact is written."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from . import _core
from .errors import InvalidArgumentError

PathLike = Union[str, "os.PathLike[str]"]

#: TensorRT version written into calibration-cache headers unless told otherwise.
DEFAULT_TRT_VERSION = "8.6.1"
DEFAULT_CALIBRATOR = "EntropyCalibration2"


@dataclass
class CalibrationReport:
    """What a calibration did: files written, warnings, the summary.txt text, samples, time."""

    written: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    summary: str = ""
    samples: int = 0
    seconds: float = 0.0
    peak_rss_bytes: int = 0
    #: The accuracy check of the plan vs FP32 (data, origin, samples, agreement, top1, fp32_top1,
    #: rel_mse, seconds, warning); None when it did not run (docs/accuracy.md).
    check: Optional[dict[str, Any]] = None
    #: What ``quantkit calibrate`` prints: the comparison table (``method="auto"``,
    #: ``compare_methods``) or the budget search's report, the summary, the files written.
    text: str = ""
    #: ``budget``: whether the search brought the plan within it (None without a budget).
    within_budget: Optional[bool] = None
    #: The repair ladder (``repair="auto"``, docs/accuracy.md): ran, not_run, target, holdout,
    #: cap_seconds, seconds, rungs (name, detail, skipped, passes, agreement, rel_mse, seconds),
    #: kept, met, next; None in the modes that choose the plan themselves.
    repair: Optional[dict[str, Any]] = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Plan:
    """Per-tensor INT8 scales (activations per tensor, weights per channel), the nodes kept in
    float and the provenance (model hash, data, method). Build one with ``quantkit.calibrate``, or
    read one with ``Plan.load`` (plan .json, TensorRT cache, ranges .txt, or a Q/DQ .onnx)."""

    def __init__(self, core: Optional[Any] = None, report: Optional[CalibrationReport] = None):
        self._core = core if core is not None else _core.Plan()
        #: Set by ``calibrate`` / ``fallback``; ``None`` for a loaded plan.
        self.report = report

    # --- reading and writing -------------------------------------------------------------------
    @classmethod
    def load(cls, path: PathLike) -> "Plan":
        """Reads a plan .json, a TensorRT calibration cache, a ranges .txt or a Q/DQ .onnx."""
        return cls(_core.Plan.load(os.fspath(path)))

    @classmethod
    def from_json(cls, text: str) -> "Plan":
        """Parses quantkit's plan JSON (``to_json``); unknown versions and keys are rejected."""
        return cls(_core.Plan.from_json(text))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Plan":
        return cls.from_json(json.dumps(data))

    def to_json(self) -> str:
        """The lossless, key-sorted plan JSON (what ``plan.json`` holds)."""
        return self._core.to_json()

    def to_dict(self) -> dict[str, Any]:
        return json.loads(self.to_json())

    def save(self, path: PathLike) -> None:
        """Writes the plan JSON (atomically)."""
        self._core.save(os.fspath(path))

    def write_cache(self, path: PathLike, trt_version: str = DEFAULT_TRT_VERSION,
                    calibrator: str = DEFAULT_CALIBRATOR) -> None:
        """Writes a TensorRT calibration cache (implicit quantization, TensorRT <= 10, DLA)."""
        self._core.write_cache(os.fspath(path), trt_version, calibrator)

    def cache_text(self, trt_version: str = DEFAULT_TRT_VERSION, calibrator: str = DEFAULT_CALIBRATOR) -> str:
        """The calibration cache's text, as ``write_cache`` would write it."""
        return self._core.cache_text(trt_version, calibrator)

    def write_ranges(self, path: PathLike) -> None:
        """Writes sampleINT8API dynamic ranges, one ``tensor:amax`` line per tensor."""
        self._core.write_ranges(os.fspath(path))

    def write_qdq(self, model: PathLike, path: PathLike, weights: str = "per-channel") -> tuple[int, int]:
        """Writes ``model`` with this plan's QuantizeLinear/DequantizeLinear pairs (explicit
        quantization, TensorRT >= 8). Returns (activation pairs, weight pairs) inserted."""
        if weights not in ("per-channel", "per-tensor"):
            raise InvalidArgumentError(f"weights must be 'per-channel' or 'per-tensor', got {weights!r}")
        return tuple(self._core.write_qdq(os.fspath(model), os.fspath(path), weights == "per-channel"))

    # --- contents ------------------------------------------------------------------------------
    @property
    def tensors(self) -> list[str]:
        """Names of the tensors the plan has an entry for (quantized or kept in float)."""
        return list(self._core.tensor_names)

    def tensor(self, name: str) -> dict[str, Any]:
        """One entry: quantized, role, dtype, scale(s), amax, zero point(s), axis, source, reason."""
        return self._core.tensor(name)

    @property
    def scales(self) -> dict[str, Union[float, list[float]]]:
        """Quantized tensors' scales: a float per tensor, a list for per-channel weights."""
        out: dict[str, Union[float, list[float]]] = {}
        for name in self._core.tensor_names:
            t = self._core.tensor(name)
            if t["quantized"]:
                out[name] = t["scale"][0] if len(t["scale"]) == 1 and t["axis"] < 0 else list(t["scale"])
        return out

    @property
    def float_nodes(self) -> dict[str, str]:
        """Nodes kept in float, with the reason."""
        return dict(self._core.float_nodes)

    def keep_float(self, node: str, reason: str = "kept in float by request") -> None:
        """Keeps ``node`` in float: its inputs get no Q/DQ in ``write_qdq`` and simulations."""
        self._core.keep_float(node, reason)

    def set_activation_amax(self, tensor: str, amax: float, source: str = "python") -> None:
        """Sets one activation's range by hand (scale = amax / 127)."""
        self._core.set_activation_amax(tensor, float(amax), source)

    @property
    def num_quantized(self) -> int:
        return self._core.num_quantized

    @property
    def provenance(self) -> dict[str, Any]:
        return self.to_dict().get("provenance", {})

    def __repr__(self) -> str:
        return f"<quantkit.Plan: {self.num_quantized} quantized tensors, {len(self.float_nodes)} float nodes>"
