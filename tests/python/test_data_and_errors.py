"""Zero-copy input, the GIL released during compute, and bad input raising typed exceptions
with the CLI's one-line message and exit code."""

from __future__ import annotations

import os
import subprocess
import threading
import time

import numpy as np
import pytest

import quantkit
from quantkit import _core


@pytest.fixture(scope="module")
def collector(model):
    return _core.StatsCollector(model, [], True, 0, False)


def pointer(collector, array):
    return dict(collector.conformed_pointers({"input": array}))["input"]


def test_numpy_and_torch_inputs_are_not_copied(collector, calib_array):
    batch = calib_array[:8]
    assert pointer(collector, batch) == batch.ctypes.data
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(calib_array[8:16].copy())
    from quantkit._data import to_numpy
    assert pointer(collector, to_numpy(t, "t")) == t.data_ptr()
    # The check can fail: layouts that need a copy do get a new buffer.
    fortran = np.asfortranarray(batch)
    assert pointer(collector, fortran) != fortran.ctypes.data
    # float64 is refused, not silently converted: one dtype rule everywhere (#13 item 9).
    with pytest.raises(quantkit.InvalidArgumentError, match="expects float but the data is double"):
        pointer(collector, batch.astype(np.float64))


def test_gil_is_released_while_the_model_runs(model, calib_array):
    """A Python thread keeps running while observe() computes: with the GIL held through the
    model run it could not execute a single bytecode until observe() returned."""
    collector = _core.StatsCollector(model, [], True, 0, False)
    big = np.ascontiguousarray(np.concatenate([calib_array] * 4))
    ticks = 0
    running = True

    def count():
        nonlocal ticks
        while running:
            ticks += 1

    thread = threading.Thread(target=count)
    thread.start()
    try:
        time.sleep(0.05)
        before = ticks
        start = time.perf_counter()
        collector.observe({"input": big})
        seconds = time.perf_counter() - start
        during = ticks - before
    finally:
        running = False
        thread.join()
    assert seconds > 0.02
    assert during > 1000, (during, seconds)


@pytest.mark.parametrize("batch, cls, text", [
    ({"x": None}, quantkit.InvalidArgumentError, "'x' is not an input of the model (inputs: input)"),
    ({}, quantkit.InvalidArgumentError, "no array for model input 'input'"),
    ({"input": np.zeros((2, 1, 27, 28), np.float32)}, quantkit.InvalidArgumentError, "[1,28,28]"),
    ({"input": np.zeros((2, 1, 28, 28), np.int32)}, quantkit.InvalidArgumentError, "expects float but the data is int32"),
    ({"input": np.zeros((2, 1, 28, 28), np.complex64)}, quantkit.InvalidArgumentError, "complex64"),
])
def test_bad_batches_raise_one_line_errors(model, batch, cls, text):
    batch = {k: (np.zeros((2, 1, 28, 28), np.float32) if v is None else v) for k, v in batch.items()}
    with pytest.raises(cls) as info:
        quantkit.Statistics.collect(model, [batch], progress=False)
    assert text in str(info.value) and "batch 0" in str(info.value)
    assert "\n" not in str(info.value)
    assert info.value.exit_code == 2 and info.value.code == "invalid argument"
    assert isinstance(info.value, ValueError)


def test_bad_calls_raise_typed_errors(model, calib_array, tmp_path):
    with pytest.raises(quantkit.QuantkitError) as info:
        quantkit.calibrate(tmp_path / "missing.onnx", [calib_array])
    assert "missing.onnx" in str(info.value) and info.value.exit_code in (2, 4)
    with pytest.raises(quantkit.InvalidArgumentError, match="method"):
        quantkit.calibrate(model, [calib_array], method="median", output_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written on failure
    with pytest.raises(quantkit.InvalidArgumentError, match="get_next"):
        quantkit.calibrate(model, 42)
    with pytest.raises(quantkit.InvalidArgumentError, match="no batch"):
        quantkit.calibrate(model, [])
    with pytest.raises(quantkit.InvalidArgumentError, match="bare array"):
        from quantkit._data import normalize_batch
        normalize_batch(calib_array, ["a", "b"], "batch 0")
    for code, cls, exit_code in [(4, quantkit.NotFoundError, 2), (5, quantkit.QuantkitIOError, 4),
                                 (3, quantkit.UnsupportedError, 3), (7, quantkit.InternalError, 70)]:
        with pytest.raises(cls) as info:
            _core._raise_status(code, "boom")
        assert info.value.exit_code == exit_code and str(info.value) == "boom"


def test_errors_raised_in_python_carry_their_exit_code(model):
    # Issue #27 item 8: a None batch is refused by the Python side; it used to carry the base
    # class's exit_code 70 ("internal error, please report") for plain bad input.
    with pytest.raises(quantkit.InvalidArgumentError) as info:
        quantkit.calibrate(model, [None])
    assert "None" in str(info.value)
    assert info.value.exit_code == 2 and info.value.code == "invalid argument"
    for cls, code, exit_code in [(quantkit.InvalidArgumentError, "invalid argument", 2),
                                 (quantkit.InvalidModelError, "invalid model", 2),
                                 (quantkit.NotFoundError, "not found", 2),
                                 (quantkit.UnsupportedError, "unsupported", 3),
                                 (quantkit.QuantkitIOError, "I/O error", 4),
                                 (quantkit.ResourceExhaustedError, "resource exhausted", 5),
                                 (quantkit.InternalError, "internal error", 70)]:
        e = cls("x")
        assert (e.code, e.exit_code) == (code, exit_code), cls


def test_inputs_are_not_modified(model, calib_array):
    before = calib_array.copy()
    quantkit.Statistics.collect(model, [calib_array[:16]], progress=False)
    assert np.array_equal(before, calib_array)


def test_a_second_libtorch_is_refused(tmp_path):
    """PyPI torch (its own libtorch) imported first: `import quantkit` must refuse, not crash."""
    python = os.path.join(os.environ.get("QK_SOURCE_DIR", "."), ".venv-torch", "bin", "python")
    if not os.path.exists(python):
        pytest.skip("no .venv-torch (PyPI torch) in this checkout")
    code = "import torch, quantkit"
    env = dict(os.environ)
    r = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    if "No module named 'torch'" in r.stderr:
        pytest.skip(".venv-torch has no torch")
    assert r.returncode != 0
    assert "ImportError" in r.stderr and "two libtorch builds" in r.stderr, r.stderr[-2000:]
