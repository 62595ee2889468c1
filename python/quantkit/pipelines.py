"""The workflows: calibrate, evaluate, analyze, fallback, diagnose."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Optional, Union

from . import _core, _data, _torchcheck
from .plan import DEFAULT_CALIBRATOR, DEFAULT_TRT_VERSION, CalibrationReport, Plan, PathLike
from .stats import Statistics, _per_channel

PlanLike = Union[Plan, PathLike]


def calibrate(model: PathLike, data: Union[_data.DataLike, Statistics], method: str = "max",
              output_dir: Optional[PathLike] = None, *, samples: int = 0, batch_size: int = 32,
              overrides: Optional[Mapping[str, str]] = None, exclude: Iterable[str] = (),
              weights: str = "per-channel", trt_version: str = DEFAULT_TRT_VERSION,
              calibrator: str = DEFAULT_CALIBRATOR, stats_out: Optional[PathLike] = None,
              progress: bool = True) -> Plan:
    """Calibrates the FP32 ONNX ``model`` on ``data`` and returns the plan; with ``output_dir``,
    also writes TensorRT's artifacts there, atomically, as ``quantkit calibrate -o`` does:
    model.qdq.onnx, calib.cache, ranges.txt, plan.json, summary.txt.

    data      a CLI data spec (``"x=calib.npy"``, a folder, ``data.json``, ``"fashion-mnist:calib"``),
              an iterable of ``{input_name: array}`` batches (a torch DataLoader yielding such
              dicts, or bare arrays / ``(inputs, labels)`` tuples for a single-input model), an
              onnxruntime ``CalibrationDataReader`` (``get_next()``), or ``Statistics``.
    method    max | entropy | percentile[:P] | mse (``overrides``: ``{tensor or op type: method}``).
    samples   use the first N samples (0: all). ``batch_size`` applies to a data spec only.
    exclude   node names or op types kept in float. ``weights``: per-channel | per-tensor.

    The same data gives the same plan and byte-identical artifacts as the CLI, whatever the
    batching. Arrays are read in place (no copy) when C-contiguous; the GIL is released while the
    model runs. Errors raise ``quantkit.errors.QuantkitError`` subclasses."""
    _torchcheck.check()
    args = _core.CalibrateArgs()
    args.model = os.fspath(model)
    args.method = method
    args.overrides = dict(overrides or {})
    args.exclude = list(exclude)
    args.per_channel = _per_channel(weights)
    args.output_dir = os.fspath(output_dir) if output_dir is not None else ""
    args.stats_out = os.fspath(stats_out) if stats_out is not None else ""
    args.trt_version = trt_version
    args.calibrator = calibrator
    args.samples = samples
    args.batch_size = batch_size
    args.progress = progress
    _core.check_calibrate_args(args)  # bad options fail before the data is read
    start = time.perf_counter()
    if _data.is_spec(data):
        args.data = os.fspath(data)
        core_plan, info = _core.calibrate(args)
    else:
        if not isinstance(data, Statistics):
            data = Statistics.collect(model, data, samples=samples, exclude=exclude, weights=weights,
                                      progress=progress)
        core_plan, info = _core.calibrate_from_stats(args, data._core)
    # With Python data the C++ side only built the plan: count the statistics pass too.
    info["seconds"] = time.perf_counter() - start
    return Plan(core_plan, CalibrationReport(**info))


@dataclass
class EvalResult:
    """Accuracy of a model (or of a plan simulated in INT8) on data."""

    samples: int = 0
    top1: Optional[float] = None
    top5: Optional[float] = None
    agreement: Optional[dict[str, float]] = None  # argmax_agreement, cosine, sqnr_db, max_abs_error
    metrics: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    report: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Report:
    """A JSON report (analyze, fallback, diagnose) with its text rendering."""

    data: dict[str, Any]
    text: str
    plan: Optional[Plan] = None
    written: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return self.data

    def __str__(self) -> str:
        return self.text


def evaluate(model: PathLike, data: _data.DataLike, plan: Optional[PlanLike] = None, *,
             reference: Optional[PathLike] = None, samples: int = 0, batch_size: int = 64,
             progress: bool = True) -> EvalResult:
    """Runs ``model`` over ``data``: top-1/top-5 with labels (a data spec with labels, e.g.
    ``fashion-mnist:val``), and agreement with ``reference`` or, with ``plan``, INT8 simulation
    of the plan on the FP32 model compared with FP32. Python data is evaluated without labels."""
    _torchcheck.check()
    with _as_spec(model, data, samples) as spec, _plan_path(plan) as plan_path:
        d = _core.evaluate(os.fspath(model), spec, plan_path, os.fspath(reference) if reference else "",
                           0 if not _data.is_spec(data) else samples, batch_size, progress)
    return EvalResult(**d)


def analyze(model: PathLike, plan: PlanLike, data: _data.DataLike, *, metrics: Iterable[str] = (),
            samples: int = 256, batch_size: int = 64, placement: str = "auto", accumulated: bool = True,
            progress: bool = True) -> Report:
    """Per-tensor INT8 error of ``plan``: each quantized tensor alone and accumulated along the
    graph (SQNR, cosine, relative MSE at the tensor and the output), worst first."""
    _torchcheck.check()
    with _as_spec(model, data, samples) as spec:
        js, text = _core.analyze(os.fspath(model), _to_plan(plan)._core, spec, list(metrics),
                                 samples if _data.is_spec(data) else 0, batch_size, placement,
                                 accumulated, progress)
    return Report(json.loads(js), text)


def fallback(model: PathLike, plan: PlanLike, data: _data.DataLike, *, budget: float = 0.5,
             metric: str = "", max_float_layers: int = 0, output_dir: Optional[PathLike] = None,
             samples: int = 0, batch_size: int = 64, placement: str = "auto") -> Report:
    """The fewest layers to keep in float so that the INT8 simulation comes within ``budget`` of
    FP32 (points of ``metric``). ``Report.plan`` is the plan with those float nodes; with
    ``output_dir``, writes plan.json, model.qdq.onnx, layer_precisions.txt and fallback.json."""
    _torchcheck.check()
    with _as_spec(model, data, samples) as spec:
        core_plan, js, text, written = _core.fallback(
            os.fspath(model), _to_plan(plan)._core, spec, metric, budget, max_float_layers,
            os.fspath(output_dir) if output_dir else "", samples if _data.is_spec(data) else 0,
            batch_size, placement)
    return Report(json.loads(js), text, Plan(core_plan), list(written))


def diagnose(model: PathLike, data: _data.DataLike, *, reference: Optional[_data.DataLike] = None,
             method: str = "max", samples: int = 0, batch_size: int = 32,
             output_dir: Optional[PathLike] = None, progress: bool = True) -> Report:
    """Is the calibration data enough, stable, representative and preprocessed as the model
    expects? (docs/diagnose.md). ``Report.data["clean"]``: no warning finding."""
    _torchcheck.check()
    with _as_spec(model, data, samples) as spec, \
            (_as_spec(model, reference, 0) if reference is not None else contextlib.nullcontext("")) as ref:
        js, text, _clean = _core.diagnose(os.fspath(model), spec, ref, method,
                                          samples if _data.is_spec(data) else 0, batch_size,
                                          os.fspath(output_dir) if output_dir else "", progress)
    return Report(json.loads(js), text)


def _to_plan(plan: PlanLike) -> Plan:
    return plan if isinstance(plan, Plan) else Plan.load(plan)


@contextlib.contextmanager
def _plan_path(plan: Optional[PlanLike]) -> Iterator[str]:
    if plan is None:
        yield ""
    elif isinstance(plan, Plan):
        with tempfile.TemporaryDirectory(prefix="quantkit-") as d:
            path = os.path.join(d, "plan.json")
            plan.save(path)
            yield path
    else:
        yield os.fspath(plan)


@contextlib.contextmanager
def _as_spec(model: PathLike, data: Any, samples: int) -> Iterator[str]:
    """A data spec for ``data``: itself, or a temporary folder of .npy files holding Python data
    (these workflows read their data more than once)."""
    if _data.is_spec(data):
        yield os.fspath(data)
        return
    names = _core.model_inputs(os.fspath(model))
    with tempfile.TemporaryDirectory(prefix="quantkit-data-") as d:
        yield _data.materialize(data, list(names), d, samples)
