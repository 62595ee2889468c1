"""Turning what Python users calibrate with into quantkit batches.

Accepted data (``quantkit.calibrate(model, data)``, ``Statistics.collect``):

* a CLI data spec (``str`` / ``os.PathLike``): ``x=calib.npy``, ``DIR``, ``data.json``,
  ``fashion-mnist:calib`` ... read by the C++ data layer, exactly as ``quantkit calibrate --data``;
* an onnxruntime ``CalibrationDataReader`` (anything with ``get_next()`` returning one
  ``{input_name: ndarray}`` dict per call and ``None``, ``{}`` or ``[]`` at the end), unchanged;
* one array (a numpy array or torch tensor holding every sample, for a single-input model) or
  one ``{input_name: array}`` mapping: the whole set as a single batch;
* any iterable of batches (a torch ``DataLoader``, a generator, a list). A batch is a
  ``{input_name: array}`` mapping, or for a single-input model a bare array, or a tuple/list whose
  first element is one of those (``(images, labels)`` from a DataLoader: the labels are ignored).

Arrays are numpy arrays or anything exporting DLPack (torch tensors: ``requires_grad`` tensors
are detached, non-CPU tensors are copied to the host). A C-contiguous numpy array or CPU tensor
of the model's dtype is read in place, never copied; other layouts are copied once.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Union

import numpy as np

from .errors import InvalidArgumentError

#: What ``data`` may be (see the module docstring).
DataLike = Union[str, "os.PathLike[str]", Iterable[Any], Any]

_DLPACK_CPU = 1  # DLDeviceType kDLCPU


def is_spec(data: Any) -> bool:
    """Whether ``data`` is a CLI data spec (a string or a path)."""
    return isinstance(data, (str, os.PathLike))


def to_numpy(value: Any, what: str) -> np.ndarray:
    """A numpy view of an array-like: no copy for numpy arrays and CPU DLPack tensors."""
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "__dlpack__"):
        if getattr(value, "requires_grad", False):
            value = value.detach()
        device = value.__dlpack_device__()[0] if hasattr(value, "__dlpack_device__") else _DLPACK_CPU
        if device != _DLPACK_CPU:
            if not hasattr(value, "cpu"):
                raise InvalidArgumentError(f"{what}: the array is not in host memory and has no .cpu()")
            value = value.cpu()
        return np.from_dlpack(value)
    try:
        return np.asarray(value)
    except Exception as e:  # noqa: BLE001 - any failure of a foreign object's conversion
        raise InvalidArgumentError(f"{what}: cannot read {type(value).__name__} as an array: {e}") from e


def normalize_batch(batch: Any, input_names: list[str], what: str) -> dict[str, np.ndarray]:
    """One batch as ``{input_name: ndarray}`` (see the module docstring for the accepted forms)."""
    if isinstance(batch, (tuple, list)):
        if not batch:
            raise InvalidArgumentError(f"{what}: empty tuple/list instead of a batch")
        batch = batch[0]
    if isinstance(batch, Mapping):
        return {str(k): to_numpy(v, f"{what}: input '{k}'") for k, v in batch.items()}
    if batch is None:
        raise InvalidArgumentError(f"{what}: got None instead of a batch")
    if len(input_names) != 1:
        raise InvalidArgumentError(
            f"{what}: a bare array can only feed a single-input model; this model has inputs "
            f"{input_names}: yield {{name: array}} dicts")
    return {input_names[0]: to_numpy(batch, f"{what}: input '{input_names[0]}'")}


def iter_batches(data: Any, input_names: list[str], samples: int = 0) -> Iterator[dict[str, np.ndarray]]:
    """Yields normalized batches from an iterable or a CalibrationDataReader, at most ``samples``
    samples in all (0: everything; the last batch is cut, as a view)."""
    if isinstance(data, (np.ndarray, Mapping)) or hasattr(data, "__dlpack__"):
        data = [data]  # the whole set as one batch: an array (single-input model) or {name: array}
    if hasattr(data, "get_next") and callable(data.get_next):
        def reader() -> Iterator[Any]:
            # As onnxruntime's quantizer loops: None, or an empty dict or list, ends the data.
            while True:
                item = data.get_next()
                if item is None or (isinstance(item, (dict, list, tuple)) and len(item) == 0):
                    return
                yield item
        source: Iterable[Any] = reader()
    elif isinstance(data, Iterable) and not isinstance(data, (bytes, bytearray)):
        source = data
    else:
        raise InvalidArgumentError(
            f"data must be a data spec (str/path), an array, an iterable of batches or an object "
            f"with get_next() (onnxruntime CalibrationDataReader); got {type(data).__name__}")
    seen = 0
    for index, raw in enumerate(source):
        batch = normalize_batch(raw, input_names, f"batch {index}")
        if samples > 0:
            left = samples - seen
            if left <= 0:
                break
            batch = {k: (v[:left] if v.ndim and v.shape[0] > left else v) for k, v in batch.items()}
        yield batch
        first = next(iter(batch.values()), None)
        seen += first.shape[0] if first is not None and first.ndim else 0
        if samples > 0 and seen >= samples:
            break


def expected_samples(data: Any, samples: int) -> int:
    """Sample count for the progress bar (0: unknown): a DataLoader knows its dataset's length."""
    if samples > 0:
        return samples
    dataset = getattr(data, "dataset", None)
    try:
        return len(dataset) if dataset is not None else 0
    except TypeError:
        return 0


def describe(data: Any) -> str:
    """Where Python data came from, for the plan's provenance."""
    kind = "onnxruntime CalibrationDataReader" if hasattr(data, "get_next") else "Python iterable"
    return f"python: {type(data).__module__}.{type(data).__qualname__} ({kind})"


def materialize(data: Any, input_names: list[str], directory: str, samples: int = 0) -> str:
    """Writes Python data as ``directory/<input>.npy`` (all batches stacked) and returns the spec
    of that directory: how evaluate/analyze/fallback/diagnose, which read their data several times,
    take Python data. Holds the whole set in memory once; labels are not carried."""
    parts: dict[str, list[np.ndarray]] = {}
    for batch in iter_batches(data, input_names, samples):
        for name, array in batch.items():
            parts.setdefault(name, []).append(array)
    if not parts:
        raise InvalidArgumentError("the data yielded no batch")
    for name, arrays in parts.items():
        if "/" in name or name.startswith("."):
            raise InvalidArgumentError(f"input name '{name}' cannot be stored as a file name")
        np.save(os.path.join(directory, f"{name}.npy"), np.concatenate(arrays, axis=0))
    return directory
