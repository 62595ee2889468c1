"""quantkit: INT8 calibration for TensorRT from Python.

    import quantkit
    plan = quantkit.calibrate("model.onnx", loader, method="entropy", output_dir="trt")
    # trt/model.qdq.onnx, calib.cache, ranges.txt, plan.json, summary.txt

``loader`` is a torch DataLoader yielding ``{input_name: tensor}`` dicts (or an onnxruntime
CalibrationDataReader, or a CLI data spec such as ``"input=calib.npy"``). See docs/python.md.

The package links the same libtorch as the ``torch`` you import; importing it into a process
that holds a different libtorch raises ImportError (docs/python.md, "Which libtorch").
"""

from __future__ import annotations

from . import _torchcheck

_torchcheck.check()  # before the extension maps its libtorch

from . import _core  # noqa: E402
from .errors import (InternalError, InvalidArgumentError, InvalidModelError, NotFoundError,  # noqa: E402
                     QuantkitError, QuantkitIOError, ResourceExhaustedError, UnsupportedError)
from .pipelines import EvalResult, Report, analyze, calibrate, diagnose, evaluate, fallback  # noqa: E402
from .plan import CalibrationReport, Plan  # noqa: E402
from .stats import Statistics  # noqa: E402

__version__ = _core.__version__

__all__ = [
    "calibrate", "evaluate", "analyze", "fallback", "diagnose",
    "Plan", "Statistics", "CalibrationReport", "EvalResult", "Report",
    "QuantkitError", "InvalidArgumentError", "InvalidModelError", "UnsupportedError",
    "NotFoundError", "QuantkitIOError", "ResourceExhaustedError", "InternalError",
]
