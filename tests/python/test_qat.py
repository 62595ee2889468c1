"""quantkit.qat: the CLI's `qat` through the same public options struct (issue 28): the same start,
steps and validation as the command line, --lr auto, and bad options refused before any work."""

from __future__ import annotations

import json

import pytest

import quantkit

STEPS, BATCH = 4, 16


def test_qat_matches_the_cli_run(model, calib_dir, quantkit_cli, tmp_path):
    spec = f"input={calib_dir / 'input.npy'}"
    cli = tmp_path / "cli"
    quantkit_cli("qat", model, "--data", spec, "--steps", str(STEPS), "--batch-size", str(BATCH),
                 "--calib-samples", "64", "--seed", "3", "--float-dtype", "fp32", "-q", "-o", str(cli))
    r = quantkit.qat(model, spec, tmp_path / "py", steps=STEPS, batch_size=BATCH, calib_samples=64, seed=3,
                     float_dtype="fp32", progress=False)
    cli_log = json.loads((cli / "training_log.json").read_text())
    # The same start (calibration, hold-out, PTQ score) and the same number of steps.
    assert r.data["holdout"] == cli_log["holdout"] > 0 and r.data["metric"] == cli_log["metric"]
    assert r.data["val_ptq"] == cli_log["val_ptq"], (r.data["val_ptq"], cli_log["val_ptq"])
    assert r.data["steps"] == cli_log["steps"] == STEPS
    # No lr given and a held-out tail: both chose it, the same way.
    assert r.data["lr"] == cli_log["lr"] and r.data["lr_source"] == cli_log["lr_source"] == "chosen"
    assert r.data["lr_search"]["chosen"] == cli_log["lr_search"]["chosen"] == r.data["lr"]
    assert (tmp_path / "py" / "model.qdq.onnx").exists() and r.plan is not None
    assert r.text.startswith("qat: 4 steps") and "wrote " in r.text, r.text
    assert all(str(tmp_path / "py") in f for f in r.written), r.written


def test_qat_lr_auto_and_bad_options(model, calib_dir, tmp_path):
    spec = f"input={calib_dir / 'input.npy'}"
    r = quantkit.qat(model, spec, tmp_path / "auto", steps=STEPS, batch_size=BATCH, calib_samples=64,
                     lr="auto", progress=False)
    search = r.data["lr_search"]
    lrs = [t["lr"] for t in search["trials"]]
    # The grid, then the smaller ones only when the grid did not beat the PTQ start.
    assert lrs[:5] == [1e-5, 3e-5, 1e-4, 3e-4, 1e-3] and lrs[5:] in ([], [3e-6], [3e-6, 1e-6]), lrs
    assert r.data["lr"] == search["chosen"] and "lr auto: " in r.text, r.text
    for kwargs, match in (({"lr": "fast"}, "lr 'fast'"), ({"loss": "hinge"}, "--loss"),
                          ({"optimizer": "lamb"}, "--optimizer"), ({"float_dtype": "fp8"}, "fp8"),
                          ({"lr": "auto", "holdout": 0}, "--lr auto"), ({"lr": 0}, "must be > 0"),
                          ({"lr": float("nan")}, "must be > 0")):
        out = tmp_path / "bad"
        with pytest.raises(quantkit.InvalidArgumentError, match=match):
            quantkit.qat(model, spec, out, steps=1, batch_size=BATCH, progress=False, **kwargs)
        assert not (out / "model.qdq.onnx").exists()
