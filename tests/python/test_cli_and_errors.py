"""The `quantkit` console script (quantkit/_cli.py runs the packaged CLI), the exit codes of
errors raised on the Python side, and whole arrays as data."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import quantkit

SOURCE_DIR = Path(os.environ.get("QK_SOURCE_DIR", Path(__file__).resolve().parents[2]))


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "quantkit._cli", *args], capture_output=True, text=True,
                          timeout=300)


def test_the_wheel_declares_the_console_script():
    import tomllib
    project = tomllib.loads((SOURCE_DIR / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["quantkit"] == "quantkit._cli:main"


def test_console_script_runs_the_cli(quantkit_cli):
    r = cli("--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout == quantkit_cli("--version").stdout


def test_console_script_keeps_the_cli_exit_codes(tmp_path):
    r = cli("inspect", str(tmp_path / "missing.onnx"))
    assert r.returncode == 2 and r.stderr.startswith("quantkit: ") and len(r.stderr.splitlines()) == 1, r.stderr


@pytest.mark.parametrize("data,exit_code", [([None], 2), (42, 2), ([np.zeros((2, 3), np.float32)], 2)])
def test_python_side_errors_carry_their_exit_code(model, data, exit_code):
    with pytest.raises(quantkit.InvalidArgumentError) as info:
        quantkit.calibrate(model, data, progress=False)
    assert info.value.exit_code == exit_code and info.value.code == "invalid argument"


def test_every_error_class_has_its_own_exit_code():
    expected = {quantkit.InvalidArgumentError: 2, quantkit.InvalidModelError: 2, quantkit.NotFoundError: 2,
                quantkit.UnsupportedError: 3, quantkit.QuantkitIOError: 4, quantkit.ResourceExhaustedError: 5,
                quantkit.InternalError: 70, quantkit.CancelledError: 130}
    assert {cls: cls("x").exit_code for cls in expected} == expected


def test_a_whole_array_is_data(model, calib_array):
    """One array (or one {name: array}) holding every sample gives the CLI's statistics."""
    as_batches = quantkit.Statistics.collect(model, [calib_array[:48], calib_array[48:]], progress=False)
    as_array = quantkit.Statistics.collect(model, calib_array, progress=False)
    as_mapping = quantkit.Statistics.collect(model, {"input": calib_array}, progress=False)
    assert as_array.amax("entropy") == as_batches.amax("entropy") == as_mapping.amax("entropy")
    assert as_array.samples == len(calib_array)
