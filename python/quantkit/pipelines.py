"""The workflows: calibrate, evaluate, analyze, fallback, diagnose."""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Optional, Union

from . import _core, _data, _torchcheck
from .plan import DEFAULT_CALIBRATOR, DEFAULT_TRT_VERSION, CalibrationReport, Plan, PathLike
from .errors import InvalidArgumentError, argument_types_checked
from .stats import Statistics, _placement, _run_batch

PlanLike = Union[Plan, PathLike]


@argument_types_checked
def calibrate(model: PathLike, data: Union[_data.DataLike, Statistics], method: str = "max",
              output_dir: Optional[PathLike] = None, *, samples: int = 0, batch_size: int = 32,
              overrides: Optional[Mapping[str, str]] = None, exclude: Iterable[str] = (),
              weights: str = "per-channel", trt_version: str = DEFAULT_TRT_VERSION,
              calibrator: str = DEFAULT_CALIBRATOR, stats_out: Optional[PathLike] = None,
              progress: bool = True, run_batch: Optional[int] = None, check_samples: int = -1,
              holdout: Optional[PathLike] = None, holdout_samples: int = 0,
              compare_methods: bool = False, budget: Optional[float] = None, metric: str = "",
              float_dtype: str = "", keep_fp32: Iterable[str] = (), cast_io: bool = False,
              weight_storage: str = "int8", int8: bool = True, ptq: str = "", ptq_samples: int = 256,
              ptq_batch: int = 32, ptq_memory_mib: int = 1024, seed: int = 0, repair: str = "auto",
              repair_time: float = 0.0) -> Plan:
    """Calibrates the FP32 ONNX ``model`` on ``data`` and returns the plan; with ``output_dir``,
    also writes TensorRT's artifacts there, atomically, as ``quantkit calibrate -o`` does:
    model.qdq.onnx, calib.cache, ranges.txt, plan.json, summary.txt.

    data      a CLI data spec (``"x=calib.npy"``, a folder, ``data.json``, ``"fashion-mnist:calib"``),
              an iterable of ``{input_name: array}`` batches (a torch DataLoader yielding such
              dicts, or bare arrays / ``(inputs, labels)`` tuples for a single-input model), an
              onnxruntime ``CalibrationDataReader`` (``get_next()``), or ``Statistics``.
    method    max | entropy | percentile[:P] | mse (``overrides``: ``{tensor or op type: method}``),
              or auto: every method from one statistics pass, the best on held-out data vs FP32,
              refined per tensor (with ``ptq``: each stage tried too, kept only if it helps).
    samples   use the first N samples (0: all). ``batch_size`` applies to a data spec only.
    exclude   node names or op types kept in float. ``weights``: per-channel | per-tensor.
    run_batch samples per model run, as the CLI's ``--run-batch`` (None: its default, 8 on the CPU).
    check_samples  the accuracy check of the plan vs FP32 (``report.check``, a line of the summary,
              a warning beyond its thresholds; docs/accuracy.md): -1 sizes it, 0 turns it off.
    holdout   held-out data (a spec; ``holdout_samples``: its first N) for the check (default:
              samples of a ``data`` spec after ``samples``, else its last ones, "in-sample"; Python
              data or ``Statistics`` need it for a check), ``method="auto"``, ``compare_methods``
              and ``budget`` (default: the last quarter of ``data``, left out of calibration).
    compare_methods  evaluate max/entropy/percentile/mse on held-out data and keep the best.
    budget    then keep the fewest layers in float that bring INT8 within ``budget`` of FP32 on
              held-out data (points of top1/agreement, a ratio of rel_mse: ``metric``); needs
              ``output_dir``. ``plan.report.within_budget`` says whether it was reached.
    float_dtype, keep_fp32, cast_io, weight_storage, int8
              the float part of the written model, as the CLI's --float-dtype (fp16 | bf16 |
              fp32; default fp16), --keep-fp32, --cast-io, --weight-storage, --int8 on|off
              (docs/strongly-typed.md).
    ptq       PTQ stages after the range choice, e.g. ``"smoothquant,seqmse,adaround"`` or
              ``"adaround:iterations=500"`` (docs/ptq.md); ``ptq_samples``, ``ptq_batch``,
              ``ptq_memory_mib`` and ``seed`` as the CLI's --ptq-samples ... --seed.
    repair    "auto" (default): when the check misses its target, try the repair ladder (method
              auto, the PTQ stages, the fewest layers in float) on held-out samples and write the
              first plan that meets it, else the best (``plan.report.repair``: each rung, the one
              kept, the next step; ``met`` False is the CLI's exit 1); ``repair_time`` caps it in
              seconds (0: automatic). "off": the plan as asked, only checked (docs/accuracy.md).

    The same data gives the same plan and byte-identical artifacts as the CLI, whatever the
    batching. Arrays are read in place (no copy) when C-contiguous; the GIL is released while the
    model runs. Errors raise ``quantkit.errors.QuantkitError`` subclasses."""
    _torchcheck.check()
    exclude = list(exclude)  # read twice below: a generator must not run dry
    options = _core.CalibrateOptions()  # quantkit::CalibrateOptions (include/quantkit/calibration.h)
    options.model = os.fspath(model)
    options.methods.method = method
    options.methods.overrides = dict(overrides or {})
    options.placement = _placement(exclude, weights)
    options.output_dir = os.fspath(output_dir) if output_dir is not None else ""
    options.stats_out = os.fspath(stats_out) if stats_out is not None else ""
    options.cache.trt_version = trt_version
    options.cache.calibrator = calibrator
    options.data_options.samples = samples
    options.data_options.batch_size = batch_size
    options.progress = progress
    options.run_batch = _run_batch(run_batch)
    options.check_samples = check_samples
    options.holdout = os.fspath(holdout) if holdout is not None else ""
    options.holdout_samples = holdout_samples
    options.compare_methods = compare_methods
    options.budget = budget
    options.metric = metric
    floats = options.floats
    floats.dtype, floats.keep_fp32, floats.cast_io = float_dtype, list(keep_fp32), cast_io
    floats.weight_storage, floats.int8 = weight_storage, int8
    stages = options.ptq
    stages.stages, stages.samples, stages.batch = ptq, ptq_samples, ptq_batch
    stages.memory_mib, stages.seed = ptq_memory_mib, seed
    options.repair, options.repair_time_seconds = repair, repair_time
    _core.check_calibrate_options(options)  # bad options fail before the data is read
    start = time.perf_counter()
    # method="auto", compare_methods, budget and the PTQ stages hold out part of the data or read it
    # again: Python data then goes through a temporary folder of .npy files, as the CLI would read
    # it (statistics alone would leave them "no data given").
    # So does the repair ladder, which runs when a plan is written and checked.
    ladder = (repair == "auto" and output_dir is not None and check_samples != 0 and int8 and method != "auto"
              and not compare_methods and budget is None)
    reads_data = method == "auto" or compare_methods or budget is not None or bool(ptq) or ladder
    with contextlib.ExitStack() as stack:
        if _data.is_spec(data) or (reads_data and not isinstance(data, Statistics)):
            options.data = stack.enter_context(_as_spec(model, data, samples))
        else:
            if not isinstance(data, Statistics):
                data = Statistics.collect(model, data, samples=samples, exclude=exclude, weights=weights,
                                          progress=progress, run_batch=run_batch)
            options.statistics = data._core
        r = _core.calibrate(options)
    # With Python data the C++ side only built the plan: count the statistics pass too.
    report = CalibrationReport(written=list(r.written), warnings=list(r.warnings), summary=r.summary,
                               samples=r.samples, seconds=time.perf_counter() - start,
                               peak_rss_bytes=r.peak_rss_bytes, check=_check_dict(r.check),
                               text=r.text, within_budget=r.within_budget,
                               repair=json.loads(r.json).get("repair") if r.json else None)
    return Plan(r.plan, report)


def _check_dict(check: Any) -> Optional[dict[str, Any]]:
    """The accuracy check as a dict (None when it did not run); NaN figures become None."""
    if not check.ran:
        return None
    def number(v: float) -> Optional[float]:
        return None if v != v else v
    return {"data": check.data, "origin": check.origin, "samples": check.samples,
            "agreement": number(check.agreement), "top1": number(check.top1),
            "fp32_top1": number(check.fp32_top1), "rel_mse": check.rel_mse, "seconds": check.seconds,
            "warning": check.warning}


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


@argument_types_checked
def evaluate(model: PathLike, data: _data.DataLike, plan: Optional[PlanLike] = None, *,
             reference: Optional[PathLike] = None, samples: int = 0, batch_size: int = 64,
             progress: bool = True) -> EvalResult:
    """Runs ``model`` over ``data``: top-1/top-5 with labels (a data spec with labels, e.g.
    ``fashion-mnist:val``), and agreement with ``reference`` or, with ``plan``, INT8 simulation
    of the plan on the FP32 model compared with FP32. Python data is evaluated without labels."""
    _torchcheck.check()
    options = _core.EvaluateOptions()
    options.model = os.fspath(model)
    options.reference_model = os.fspath(reference) if reference else ""
    options.samples = samples if _data.is_spec(data) else 0
    options.batch_size = batch_size
    options.progress = progress
    if isinstance(plan, Plan):
        options.loaded_plan = plan._core
    elif plan is not None:
        options.plan = os.fspath(plan)
    with _as_spec(model, data, samples) as spec:
        options.data = spec
        r = _core.evaluate(options)
    agreement = None
    if r.argmax_agreement is not None:
        agreement = {"argmax_agreement": r.argmax_agreement, "cosine": r.cosine, "sqnr_db": r.sqnr_db,
                     "max_abs_error": r.max_abs_error}
    return EvalResult(samples=r.samples, top1=r.top1, top5=r.top5, agreement=agreement,
                      metrics=dict(r.metrics), seconds=r.seconds, report=r.text)


@argument_types_checked
def analyze(model: PathLike, plan: PlanLike, data: _data.DataLike, *, metrics: Iterable[str] = (),
            samples: int = 256, batch_size: int = 64, placement: str = "auto", accumulated: bool = True,
            layers: str = "int8", progress: bool = True) -> Report:
    """Per-tensor INT8 error of ``plan``: each quantized tensor alone and accumulated along the
    graph (SQNR, cosine, relative MSE at the tensor and the output), worst first. ``layers``
    "float" (or "both") checks the FP16/BF16 float part tensor by tensor instead (or as well):
    ``Report.data["float_layers"]["keep_fp32"]`` is the verified --keep-fp32 fix, empty when no
    tensor needs FP32 (docs/strongly-typed.md)."""
    _torchcheck.check()
    options = _core.AnalyzeOptions()
    options.evaluation = _plan_evaluation(model, plan, data, list(metrics), samples, batch_size, placement)
    options.accumulated = accumulated
    options.layers = layers
    options.progress = progress
    with _as_spec(model, data, samples) as spec:
        options.evaluation.data = spec
        r = _core.analyze(options)
    return Report(json.loads(r.json), r.text)


@argument_types_checked
def fallback(model: PathLike, plan: PlanLike, data: _data.DataLike, *, budget: float = 0.5,
             metric: str = "", max_float_layers: int = 0, output_dir: Optional[PathLike] = None,
             samples: int = 0, batch_size: int = 64, placement: str = "auto") -> Report:
    """The fewest layers to keep in float so that the INT8 simulation comes within ``budget`` of
    FP32 (points of ``metric``). ``Report.plan`` is the plan with those float nodes; with
    ``output_dir``, writes plan.json, model.qdq.onnx, layer_precisions.txt and fallback.json."""
    _torchcheck.check()
    options = _core.FallbackOptions()
    options.evaluation = _plan_evaluation(model, plan, data, [metric] if metric else [], samples, batch_size,
                                          placement)
    options.budget = budget
    options.max_float_layers = max_float_layers
    options.output_dir = os.fspath(output_dir) if output_dir else ""
    with _as_spec(model, data, samples) as spec:
        options.evaluation.data = spec
        r = _core.fallback(options)
    return Report(json.loads(r.json), r.text, Plan(r.plan), list(r.written))


@argument_types_checked
def diagnose(model: PathLike, data: _data.DataLike, *, reference: Optional[_data.DataLike] = None,
             method: str = "max", samples: int = 0, batch_size: int = 32,
             output_dir: Optional[PathLike] = None, progress: bool = True) -> Report:
    """Is the calibration data enough, stable, representative and preprocessed as the model
    expects? (docs/diagnose.md). ``Report.data["clean"]``: no warning finding."""
    _torchcheck.check()
    options = _core.DiagnoseOptions()
    options.model = os.fspath(model)
    options.method = method
    options.samples = samples if _data.is_spec(data) else 0
    options.batch_size = batch_size
    options.output_dir = os.fspath(output_dir) if output_dir else ""
    options.progress = progress
    with _as_spec(model, data, samples) as spec, \
            (_as_spec(model, reference, 0) if reference is not None else contextlib.nullcontext("")) as ref:
        options.data, options.reference_data = spec, ref
        r = _core.diagnose(options)
    return Report(json.loads(r.json), r.text)


@argument_types_checked
def qat(model: PathLike, data: _data.DataLike, output_dir: PathLike, *, plan: Optional[PathLike] = None,
        method: str = "max", steps: int = 0, epochs: int = 0, batch_size: int = 64,
        lr: Union[float, str, None] = None, loss: str = "mse", val: Optional[_data.DataLike] = None,
        val_samples: int = 0, holdout: int = -1, metric: str = "", eval_every: int = 0, samples: int = 0,
        labels: Optional[PathLike] = None, seed: int = 0, optimizer: str = "adamw", weight_decay: float = 0.0,
        warmup_steps: int = 0, weights: str = "per-channel", learn_activation_scales: bool = True,
        calib_data: Optional[_data.DataLike] = None, calib_samples: int = 1024, float_dtype: str = "",
        keep_fp32: Iterable[str] = (), resume: Optional[PathLike] = None, stop_after: int = 0,
        progress: bool = True, teacher: Optional[PathLike] = None) -> Report:
    """Quantization-aware fine-tuning of the ONNX model itself, as ``quantkit qat`` (docs/qat.md):
    from ``plan`` (or calibrated first with ``method``), fake-quantized training against the FP32
    model (label-free ``loss="mse"``/``"kl"``, kl on a Softmax output's logits, or
    ``"ce"``/``"ce+mse"`` with labels), validated on ``val`` or a held-out tail of ``data`` with
    keep-the-best; writes model.qdq.onnx, plan.json, calib.cache, training_log.json, ... into
    ``output_dir``.

    lr        the peak learning rate (> 0), or ``"auto"``: chosen on the validation data by five
              short trial runs (1e-5 .. 1e-3; then 3e-6, 1e-6 when none of those beats the PTQ
              start). None (the default): ``"auto"`` when the run is validated (``val`` or the
              held-out tail), else 1e-4; with ``resume`` the checkpoint's.
    teacher   the FP32 model to distil from and validate against (default: ``model``); give the
              original when ``model`` is calibrate's model.float.onnx from weight-changing stages.
    Returns a Report: ``data`` is training_log.json (history, validation, ``lr_search``),
    ``text`` what the CLI prints, ``plan`` the written plan (None after ``stop_after``)."""
    _torchcheck.check()
    options = _core.QatOptions()
    options.model = os.fspath(model)
    options.output_dir = os.fspath(output_dir)
    options.plan = os.fspath(plan) if plan is not None else ""
    options.method, options.steps, options.epochs, options.batch_size = method, steps, epochs, batch_size
    if isinstance(lr, str):
        if lr != "auto":
            raise InvalidArgumentError(f"lr '{lr}': a number or 'auto'")
        options.lr_auto = True
    elif lr is not None:
        options.lr = float(lr)
        if not options.lr > 0:  # 0 would mean "the default rule" to the C++ options
            raise InvalidArgumentError(f"lr {lr}: must be > 0 (or 'auto', or None for the default)")
    options.loss, options.metric, options.eval_every = loss, metric, eval_every
    options.val_samples, options.holdout, options.seed = val_samples, holdout, seed
    options.samples = samples if _data.is_spec(data) else 0
    options.labels = os.fspath(labels) if labels is not None else ""
    options.optimizer, options.weight_decay, options.warmup_steps = optimizer, weight_decay, warmup_steps
    options.weights, options.learn_activation_scales = weights, learn_activation_scales
    options.calib_samples = calib_samples
    options.floats.dtype, options.floats.keep_fp32 = float_dtype, list(keep_fp32)
    options.resume = os.fspath(resume) if resume is not None else ""
    options.teacher = os.fspath(teacher) if teacher is not None else ""
    options.stop_after, options.progress = stop_after, progress
    with _as_spec(model, data, samples) as spec, \
            (_as_spec(model, val, 0) if val is not None else contextlib.nullcontext("")) as val_spec, \
            (_as_spec(model, calib_data, 0) if calib_data is not None else contextlib.nullcontext("")) as calib:
        options.data, options.val, options.calib_data = spec, val_spec, calib
        r = _core.qat(options)
    log_path = os.path.join(options.output_dir, "training_log.json")
    data_log: dict[str, Any] = {}
    if not r.paused and os.path.exists(log_path):
        with open(log_path) as f:
            data_log = json.load(f)
    data_log.setdefault("lr", r.lr)
    written_plan = None if r.paused else Plan.load(os.path.join(options.output_dir, "plan.json"))
    return Report(data_log, r.text, written_plan, list(r.written))


def _to_plan(plan: PlanLike) -> Plan:
    return plan if isinstance(plan, Plan) else Plan.load(plan)


def _plan_evaluation(model: PathLike, plan: PlanLike, data: Any, metrics: list[str], samples: int,
                     batch_size: int, placement: str) -> Any:
    """quantkit::PlanEvaluationOptions of analyze and fallback (the data spec is set by the caller)."""
    evaluation = _core.PlanEvaluationOptions()
    evaluation.model = os.fspath(model)
    evaluation.loaded_plan = _to_plan(plan)._core
    evaluation.metrics = metrics
    evaluation.samples = samples if _data.is_spec(data) else 0
    evaluation.batch_size = batch_size
    evaluation.placement = placement
    return evaluation


@contextlib.contextmanager
def _as_spec(model: PathLike, data: Any, samples: int) -> Iterator[str]:
    """A data spec for ``data``: itself, or a temporary folder of .npy files holding Python data
    (these workflows read their data more than once)."""
    if _data.is_spec(data):
        yield os.fspath(data)
        return
    names = _core.model_inputs(os.fspath(model))
    # The folder's name carries the data's type into the plan's provenance ("DataLoader").
    kind = re.sub(r"[^A-Za-z0-9_]", "", type(data).__name__)[:40] or "data"
    with tempfile.TemporaryDirectory(prefix=f"quantkit-{kind}-") as d:
        yield _data.materialize(data, list(names), d, samples)
