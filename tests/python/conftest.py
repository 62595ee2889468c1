"""Fixtures for the Python API tests (run by CTest as python.pytest, or by hand:
PYTHONPATH=build/dev/python QK_BINARY_DIR=build/dev .venv/bin/python -m pytest tests/python)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

SOURCE_DIR = Path(os.environ.get("QK_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BINARY_DIR = Path(os.environ.get("QK_BINARY_DIR", SOURCE_DIR / "build" / "dev"))
CLI = BINARY_DIR / "tools" / "quantkit" / "quantkit"
MODEL = SOURCE_DIR / "models" / "zoo" / "plain_cnn.onnx"
CALIB_SAMPLES = 96


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), *args], check=True, capture_output=True, text=True)


@pytest.fixture(scope="session")
def quantkit_cli():
    """run_cli: the built `quantkit` command, for tests that compare with it."""
    return run_cli


@pytest.fixture(scope="session")
def model() -> str:
    return str(MODEL)


@pytest.fixture(scope="session")
def calib_dir(tmp_path_factory) -> Path:
    """The first CALIB_SAMPLES Fashion-MNIST calibration samples as the model sees them
    (input.npy [N,1,28,28] float32), written by `quantkit data`."""
    d = tmp_path_factory.mktemp("calib")
    run_cli("data", str(MODEL), "--data", "fashion-mnist:calib", "-o", str(d), "--samples", str(CALIB_SAMPLES))
    return d


@pytest.fixture(scope="session")
def calib_array(calib_dir) -> np.ndarray:
    a = np.load(calib_dir / "input.npy")
    assert a.shape == (CALIB_SAMPLES, 1, 28, 28) and a.dtype == np.float32
    return a


@pytest.fixture(scope="session")
def cli_entropy(calib_dir, tmp_path_factory) -> Path:
    """`quantkit calibrate --method entropy` on calib_dir: the artifacts the API must reproduce."""
    out = tmp_path_factory.mktemp("cli")
    run_cli("calibrate", str(MODEL), "--data", f"input={calib_dir / 'input.npy'}", "--method", "entropy",
            "--batch-size", "32", "-o", str(out), "-q")
    return out
