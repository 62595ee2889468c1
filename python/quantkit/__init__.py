"""quantkit: INT8 calibration for TensorRT from Python.

    import quantkit
    plan = quantkit.calibrate("model.onnx", loader, method="entropy", output_dir="trt")
    # trt/model.qdq.onnx, calib.cache, ranges.txt, plan.json, summary.txt

``loader`` is a torch DataLoader yielding ``{input_name: tensor}`` dicts (or an onnxruntime
CalibrationDataReader, or a CLI data spec such as ``"input=calib.npy"``). See docs/python.md.

Import it before or after torch, or without torch: a wheel built against PyPI torch loads the
environment's torch itself after checking it is the release line it was built for; importing it
into a process that holds a different libtorch raises ImportError (docs/python.md, "Which
libtorch"). OpenMP threads wait passively unless OMP_WAIT_POLICY says otherwise
(``quantkit.openmp_wait_policy()``; docs/python.md, "Threads").
"""

from __future__ import annotations

from . import _openmp, _torchcheck

_openmp.configure()       # before any OpenMP runtime loads (torch's libgomp reads it once)
_torchcheck.load_torch()  # the compatible torch's libraries, before the extension needs them

from . import _core  # noqa: E402

_torchcheck.after_load()
from .errors import (CancelledError, InternalError, InvalidArgumentError, InvalidArgumentTypeError,  # noqa: E402
                     InvalidModelError, NotFoundError, QuantkitError, QuantkitIOError, ResourceExhaustedError, UnsupportedError)
from .pipelines import EvalResult, Report, analyze, calibrate, diagnose, evaluate, fallback, qat  # noqa: E402
from .plan import CalibrationReport, Plan  # noqa: E402
from .stats import Statistics  # noqa: E402

__version__ = _core.__version__
openmp_wait_policy = _openmp.wait_policy

__all__ = [
    "calibrate", "evaluate", "analyze", "fallback", "diagnose", "qat",
    "Plan", "Statistics", "CalibrationReport", "EvalResult", "Report",
    "QuantkitError", "InvalidArgumentError", "InvalidArgumentTypeError", "InvalidModelError", "UnsupportedError",
    "NotFoundError", "QuantkitIOError", "ResourceExhaustedError", "InternalError", "CancelledError",
    "openmp_wait_policy",
]
