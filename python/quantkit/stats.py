"""quantkit.Statistics: calibration statistics, mergeable and saved as .qkstats."""

from __future__ import annotations

import hashlib
import os
from typing import Any, Iterable, Optional, Union

from . import _core, _data, _torchcheck

PathLike = Union[str, "os.PathLike[str]"]


def file_sha256(path: PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class Statistics:
    """Per-activation statistics of one or more calibration passes (range and histogram of every
    tensor TensorRT will quantize). Memory does not grow with the number of samples; merging the
    statistics of shards gives exactly those of one pass over all their data, so any method's
    amax can be computed later without running the model again."""

    def __init__(self, core: Any):
        self._core = core

    @classmethod
    def collect(cls, model: PathLike, data: _data.DataLike, *, samples: int = 0, batch_size: int = 32,
                exclude: Iterable[str] = (), weights: str = "per-channel",
                progress: bool = True, run_batch: Optional[int] = None) -> "Statistics":
        """Runs ``data`` through the FP32 ``model`` once (see ``quantkit.calibrate`` for ``data``).

        ``batch_size`` applies to a data spec; Python data keeps its own batches. ``samples``
        (0: all) stops after that many samples. ``run_batch``: samples per model run, as the
        CLI's ``--run-batch`` (None: its default); the statistics are the CLI's at the same run
        batch whatever the batches of ``data``. The GIL is released while the model runs."""
        _torchcheck.check()
        model = os.fspath(model)
        collector = _core.StatsCollector(model, list(exclude), _per_channel(weights),
                                         0 if _data.is_spec(data) else _data.expected_samples(data, samples),
                                         progress, _run_batch(run_batch))
        if _data.is_spec(data):
            collector.observe_source(os.fspath(data), samples, batch_size)
            return cls(collector.finish(""))
        names = collector.input_names
        for batch in _data.iter_batches(data, names, samples):
            collector.observe(batch)
        if collector.samples == 0:
            raise _core_error("the data yielded no batch")
        return cls(collector.finish(_data.describe(data)))

    @classmethod
    def load(cls, *paths: PathLike, model: Optional[PathLike] = None) -> "Statistics":
        """Reads and merges .qkstats files; with ``model``, each must have been collected on it."""
        if not paths:
            raise _core_error("give at least one .qkstats file")
        sha = file_sha256(model) if model is not None else ""
        return cls(_core.Statistics.load([os.fspath(p) for p in paths], sha))

    def save(self, path: PathLike) -> None:
        """Writes the statistics (.qkstats, versioned text; atomically)."""
        self._core.save(os.fspath(path))

    def merge(self, other: "Statistics") -> "Statistics":
        """The statistics of both passes together (exact; both must come from the same model)."""
        return Statistics(self._core.merged(other._core))

    __add__ = merge

    def amax(self, method: str = "max") -> dict[str, float]:
        """Each tensor's amax under ``method``: max | entropy | percentile[:P] | mse."""
        return dict(self._core.amax(method))

    def range(self, tensor: str) -> dict[str, Any]:
        """min, max, amax, count, NaN and Inf counts of one tensor."""
        return self._core.range(tensor)

    @property
    def tensors(self) -> list[str]:
        return list(self._core.tensors)

    @property
    def samples(self) -> int:
        """Samples observed (0 when loaded from .qkstats files, which do not record it)."""
        return self._core.samples

    @property
    def description(self) -> str:
        return self._core.description

    @property
    def model_sha256(self) -> str:
        return self._core.model_sha256

    def to_dict(self) -> dict[str, Any]:
        return {"model_sha256": self.model_sha256, "description": self.description,
                "samples": self.samples, "tensors": {t: self.range(t) for t in self.tensors}}

    def __repr__(self) -> str:
        return f"<quantkit.Statistics: {len(self.tensors)} tensors, {self.samples} samples>"


def _per_channel(weights: str) -> bool:
    if weights not in ("per-channel", "per-tensor"):
        raise _core_error(f"weights must be 'per-channel' or 'per-tensor', got {weights!r}")
    return weights == "per-channel"


def _run_batch(run_batch: Optional[int]) -> int:
    """The public CollectOptions::run_batch of ``run_batch`` (None: 0, the CLI's default)."""
    if run_batch is None:
        return 0
    if isinstance(run_batch, bool) or not isinstance(run_batch, int) or run_batch <= 0:
        raise _core_error(f"run_batch must be a positive integer or None, got {run_batch!r}")
    return run_batch


def _placement(exclude: Iterable[str], weights: str) -> Any:
    """quantkit::Placement of ``exclude`` (node names or op types) and ``weights``."""
    return _core.placement(list(exclude), _per_channel(weights))


def _core_error(message: str) -> Exception:
    from .errors import InvalidArgumentError
    return InvalidArgumentError(message)
