"""quantkit.calibrate from a torch DataLoader, an onnxruntime CalibrationDataReader and a path
spec gives the CLI's plan on the same data: byte-identical calib.cache and ranges.txt."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest

import quantkit
from quantkit import _core

ARTIFACTS = ["model.qdq.onnx", "calib.cache", "ranges.txt", "plan.json", "summary.txt"]


def plan_tensors(path):
    return json.loads(path.read_text())["tensors"]


def assert_same_as_cli(out, cli):
    for name in ("calib.cache", "ranges.txt"):
        assert (out / name).read_bytes() == (cli / name).read_bytes(), name
    assert plan_tensors(out / "plan.json") == plan_tensors(cli / "plan.json")
    # The Q/DQ model holds the same graph and scales (bytes may differ only in metadata).
    a, b = onnx.load(str(out / "model.qdq.onnx")), onnx.load(str(cli / "model.qdq.onnx"))
    assert a.graph.SerializeToString() == b.graph.SerializeToString()


class DictDataset:
    def __init__(self, array):
        import torch
        self.x = torch.from_numpy(array)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"input": self.x[i]}


def test_dataloader_gives_the_cli_artifacts(model, calib_array, cli_entropy, tmp_path):
    torch = pytest.importorskip("torch")
    loader = torch.utils.data.DataLoader(DictDataset(calib_array), batch_size=20)  # not the CLI's 32
    plan = quantkit.calibrate(model, loader, method="entropy", output_dir=tmp_path, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(ARTIFACTS)
    assert_same_as_cli(tmp_path, cli_entropy)
    # The repair ladder (the default) held the last samples out of the calibration, as the CLI does.
    assert plan.report.samples == len(calib_array) - plan.report.check["samples"], plan.report.check
    assert "DataLoader" in plan.provenance["data_description"]
    assert plan.num_quantized > 0 and plan.scales


class ArrayReader:
    """An onnxruntime-style CalibrationDataReader: get_next() gives {"input": rows} of `batch` rows."""

    def __init__(self, array, batch):
        self.it = iter(array[i:i + batch] for i in range(0, len(array), batch))

    def get_next(self):
        x = next(self.it, None)
        return None if x is None else {"input": x}


def test_run_batch_gives_the_cli_bytes_at_that_run_batch(model, calib_array, calib_dir, quantkit_cli, tmp_path):
    """run_batch is the CLI's --run-batch: at run_batch=1, readers of batches of 1 and of 32 give
    the bytes of `quantkit calibrate --run-batch 1`, and so does the data spec."""
    cli = tmp_path / "cli"
    spec = f"input={calib_dir / 'input.npy'}"
    # --repair off: the statistics' equivalence, in-process against the CLI (the ladder may pick max
    # ranges, whose last bit follows the thread count of the process: docs/accuracy.md).
    quantkit_cli("calibrate", model, "--data", spec, "--method", "entropy", "--batch-size", "32",
            "--run-batch", "1", "-o", str(cli), "-q", "--repair", "off")
    for batch in (1, 32):
        out = tmp_path / f"reader{batch}"
        plan = quantkit.calibrate(model, ArrayReader(calib_array, batch), method="entropy", output_dir=out,
                                  progress=False, run_batch=1, repair="off")
        assert_same_as_cli(out, cli)
        assert plan.report.samples == len(calib_array)
    quantkit.calibrate(model, spec, method="entropy", output_dir=tmp_path / "spec", progress=False, run_batch=1,
                       repair="off")
    assert_same_as_cli(tmp_path / "spec", cli)
    assert _core.StatsCollector(model, [], True, 0, False, 1).run_batch == 1
    assert _core.StatsCollector(model, [], True, 0, False).run_batch in (8, 128)  # the CLI's CPU / GPU default


@pytest.mark.parametrize("run_batch", [0, -3, 2.5])
def test_run_batch_must_be_positive(model, calib_array, calib_dir, tmp_path, run_batch):
    for data in (ArrayReader(calib_array, 32), f"input={calib_dir / 'input.npy'}"):
        with pytest.raises(quantkit.InvalidArgumentError, match="run_batch") as info:
            quantkit.calibrate(model, data, output_dir=tmp_path / "out", progress=False, run_batch=run_batch)
        assert isinstance(info.value, ValueError) and info.value.exit_code == 2
        with pytest.raises(ValueError, match="run_batch"):
            quantkit.Statistics.collect(model, data, progress=False, run_batch=run_batch)
    assert not (tmp_path / "out").exists()


# The model runs on the CLI's runs (data/run_chunks.h: cut at multiples of the run batch in sample
# order) whatever the reader's batches, so batches of 32 and batches of one give the CLI's bytes.
def test_calibration_data_reader_gives_the_cli_artifacts(model, calib_array, cli_entropy, tmp_path):
    ort_quant = pytest.importorskip("onnxruntime.quantization")

    class Reader(ort_quant.CalibrationDataReader):
        def __init__(self, batch):
            self.it = iter(calib_array[i:i + batch] for i in range(0, len(calib_array), batch))

        def get_next(self):
            x = next(self.it, None)
            return None if x is None else {"input": x}

    quantkit.calibrate(model, Reader(32), method="entropy", output_dir=tmp_path, progress=False)
    assert_same_as_cli(tmp_path, cli_entropy)
    quantkit.calibrate(model, Reader(1), method="entropy", output_dir=tmp_path / "one", progress=False)
    assert_same_as_cli(tmp_path / "one", cli_entropy)


def test_path_spec_gives_the_cli_artifacts(model, calib_dir, cli_entropy, tmp_path):
    quantkit.calibrate(model, f"input={calib_dir / 'input.npy'}", method="entropy", output_dir=tmp_path,
                       progress=False)
    assert_same_as_cli(tmp_path, cli_entropy)
    # Same source and method: even the provenance matches.
    assert (tmp_path / "plan.json").read_bytes() == (cli_entropy / "plan.json").read_bytes()


def test_statistics_merge_is_one_pass_and_round_trips(model, calib_array, tmp_path):
    whole = quantkit.Statistics.collect(model, [{"input": calib_array}], progress=False)
    a = quantkit.Statistics.collect(model, [{"input": calib_array[:40]}], progress=False)
    b = quantkit.Statistics.collect(model, iter([calib_array[40:]]), progress=False)  # bare arrays
    merged = a.merge(b)
    assert merged.samples == whole.samples == len(calib_array)
    for method in ("max", "entropy", "percentile:99.9"):
        assert merged.amax(method) == whole.amax(method), method
    a.save(tmp_path / "a.qkstats")
    b.save(tmp_path / "b.qkstats")
    loaded = quantkit.Statistics.load(tmp_path / "a.qkstats", tmp_path / "b.qkstats", model=model)
    assert loaded.amax("mse") == whole.amax("mse")
    plan = quantkit.calibrate(model, loaded, method="max")
    for tensor, amax in whole.amax("max").items():
        assert plan.tensor(tensor)["amax"] == [pytest.approx(amax, rel=1e-6)]
    assert set(whole.to_dict()["tensors"]) == set(whole.tensors)


def test_samples_cap_and_plan_round_trip(model, calib_array, tmp_path):
    plan = quantkit.calibrate(model, [{"input": calib_array}], samples=50, progress=False)
    assert plan.report.samples == 50
    again = quantkit.Plan.from_json(plan.to_json())
    assert again.to_dict() == plan.to_dict()
    plan.write_cache(tmp_path / "c.cache")
    assert quantkit.Plan.load(tmp_path / "c.cache").scales.keys() <= plan.scales.keys()
    act, weights = plan.write_qdq(model, tmp_path / "q.onnx")
    assert act > 0 and weights > 0
    q = onnx.load(str(tmp_path / "q.onnx"))
    onnx.checker.check_model(q)
    # Activations behind Q -> DQ, weights stored as INT8 behind a DequantizeLinear.
    inits = {i.name for i in q.graph.initializer}
    assert sum(n.op_type == "QuantizeLinear" for n in q.graph.node) == act
    assert sum(n.op_type == "DequantizeLinear" and n.input[0] in inits for n in q.graph.node) == weights
    first_node = next(n.name for n in q.graph.node if n.op_type == "Conv")
    plan.keep_float(first_node)
    act2, _ = plan.write_qdq(model, tmp_path / "q2.onnx")
    assert act2 < act and first_node in plan.float_nodes


def test_torch_tensors_and_numpy_give_equal_statistics(model, calib_array):
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(calib_array.copy()).requires_grad_(True)  # detached, not copied
    from_torch = quantkit.Statistics.collect(model, [(t, torch.zeros(len(t)))], progress=False)
    from_numpy = quantkit.Statistics.collect(model, [calib_array], progress=False)
    assert from_torch.amax("max") == from_numpy.amax("max")
    assert np.isfinite(list(from_numpy.amax("entropy").values())).all()


def test_clipping_method_is_warned_about_whatever_the_data_path(model, calib_array, calib_dir):
    """The plan building is one (pipelines::BuildPlan): a method that clips more than 1% of a
    tensor's values is reported from Python data, from a spec and from Statistics alike."""
    def clipping(plan):
        return [w for w in plan.report.warnings if "clip more than 1% of their values" in w]

    batches = [{"input": calib_array[:32]}]
    assert clipping(quantkit.calibrate(model, batches, method="max", progress=False)) == []
    from_arrays = clipping(quantkit.calibrate(model, batches, method="percentile:90", progress=False))
    assert len(from_arrays) == 1 and "with percentile:90" in from_arrays[0]
    stats = quantkit.Statistics.collect(model, batches, progress=False)
    assert clipping(quantkit.calibrate(model, stats, method="percentile:90", progress=False)) == from_arrays
    spec = f"input={calib_dir / 'input.npy'}"
    from_spec = clipping(quantkit.calibrate(model, spec, method="percentile:90", samples=32, progress=False))
    assert from_spec == from_arrays


# The accuracy check's thresholds (pipelines/calibrate/check.h: kCheckMinAgreement,
# kCheckMaxRelMse): max on 64 samples of plain_cnn is within both (entropy on so few is not:
# 69% agreement, and the check warns).
CHECK_MIN_AGREEMENT = 0.97
CHECK_MAX_REL_MSE = 1e-2


def test_calibrate_report_carries_the_accuracy_check(model, calib_dir, calib_array, tmp_path):
    """report.check: the plan vs FP32 on the samples after the calibrated ones (a data spec), on
    --holdout for Python data, None when turned off; a bad size is InvalidArgumentError."""
    spec = f"input={calib_dir / 'input.npy'}"
    plan = quantkit.calibrate(model, spec, method="max", samples=64, check_samples=16,
                              output_dir=tmp_path / "spec", progress=False)
    check = plan.report.check
    assert check is not None, plan.report.summary
    assert check["origin"] == "held-out" and check["samples"] == 16, check
    assert check["agreement"] >= CHECK_MIN_AGREEMENT and 0 <= check["rel_mse"] < CHECK_MAX_REL_MSE, check
    assert check["top1"] is None and check["warning"] == "", check  # no labels in an .npy spec
    assert "check: 16 held-out samples" in (tmp_path / "spec" / "summary.txt").read_text()

    # Python data: nothing to slice a holdout from unless one is given.
    plan = quantkit.calibrate(model, [calib_array], method="entropy", progress=False,
                              holdout=spec, check_samples=8)
    assert plan.report.check["origin"] == "held-out (--holdout)" and plan.report.check["samples"] == 8
    plan = quantkit.calibrate(model, [calib_array], method="entropy", progress=False, check_samples=0)
    assert plan.report.check is None

    with pytest.raises(quantkit.InvalidArgumentError, match="check_samples"):
        quantkit.calibrate(model, [calib_array], progress=False, check_samples=-2)


def test_the_repair_ladder_reaches_python(model, tmp_path):
    """repair="auto" (the default) repairs entropy's clipped input as the CLI does and reports
    every rung in plan.report.repair; "off" writes the plan as asked; a bad mode or cap is an
    InvalidArgumentError before anything is read (issue 47)."""
    spec = "fashion-mnist:calib"
    plan = quantkit.calibrate(model, spec, method="entropy", samples=512, output_dir=tmp_path / "auto",
                              progress=False)
    repair = plan.report.repair
    assert repair["ran"] and repair["met"], repair
    assert [g["name"] for g in repair["rungs"]][:2] == ["as asked", "auto"], repair
    assert repair["kept"] == 1 and not repair["rungs"][0]["passes"] and repair["rungs"][1]["passes"], repair
    assert plan.report.check["agreement"] >= CHECK_MIN_AGREEMENT, plan.report.check
    assert "repair: written: rung 1 (auto)" in (tmp_path / "auto" / "summary.txt").read_text()

    off = quantkit.calibrate(model, spec, method="entropy", samples=512, output_dir=tmp_path / "off",
                             progress=False, repair="off")
    assert not off.report.repair["ran"] and off.report.check["warning"], off.report.check
    for bad in ({"repair": "maybe"}, {"repair_time": -1.0}, {"repair_time": float("nan")}):
        with pytest.raises(quantkit.InvalidArgumentError, match="repair"):
            quantkit.calibrate(model, spec, output_dir=tmp_path / "bad", progress=False, **bad)
    assert not (tmp_path / "bad").exists()


def test_calibrate_takes_every_cli_option_and_writes_the_cli_files(model, calib_dir, quantkit_cli, tmp_path):
    """The PTQ stages, the float part and --method auto reach Python through the same options
    struct as the CLI (issues 28, 31): the same spec gives the CLI's calib.cache and plan, and
    report.text is what `quantkit calibrate` prints."""
    spec = f"input={calib_dir / 'input.npy'}"
    common = ["--samples", "48", "--ptq", "bias-correction", "--ptq-samples", "16", "--ptq-batch", "8",
              "--float-dtype", "fp32", "--check-samples", "16", "-q"]
    cli = tmp_path / "cli"
    run = quantkit_cli("calibrate", model, "--data", spec, "-o", str(cli), *common)
    plan = quantkit.calibrate(model, spec, samples=48, output_dir=tmp_path / "py", progress=False,
                              ptq="bias-correction", ptq_samples=16, ptq_batch=8, float_dtype="fp32",
                              check_samples=16)
    out = tmp_path / "py"
    assert (out / "model.float.onnx").exists() and (cli / "model.float.onnx").exists()
    assert_same_as_cli(out, cli)
    assert "bias-correction" in plan.report.summary and "float dtype: fp32" in plan.report.summary
    # The CLI printed the report's text: the same lines but for the output folder and the times
    # and memory measured.
    def masked(text):
        return re.sub(r"[0-9.]+ (s|ms|KiB|MiB|GiB|samples/s)\b", "N \\1", text)
    assert masked(run.stdout) == masked(plan.report.text.replace(str(out), str(cli)))
    assert plan.report.within_budget is None

    # auto through Python: the comparison table comes first, the plan written is the best one.
    auto = quantkit.calibrate(model, spec, method="auto", samples=48, holdout=spec, holdout_samples=32,
                              output_dir=tmp_path / "auto", progress=False, check_samples=0)
    assert auto.report.text.splitlines()[0] != auto.report.summary.splitlines()[0]
    assert "wrote" in auto.report.text and (tmp_path / "auto" / "model.qdq.onnx").exists()

    with pytest.raises(quantkit.InvalidArgumentError, match="rounding"):
        quantkit.calibrate(model, spec, ptq="rounding", progress=False)
    with pytest.raises(quantkit.InvalidArgumentError, match="--budget"):
        quantkit.calibrate(model, spec, method="auto", budget=0.5, output_dir=tmp_path / "x", progress=False)
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("end", [None, {}, []])
def test_a_reader_ends_as_onnxruntime_reads_it(model, calib_array, cli_entropy, tmp_path, end):
    """onnxruntime's quantizer stops at a falsy get_next(): None, {} or [] (issue #48: {} and []
    were fed to the model as a batch)."""
    class Reader:
        def __init__(self):
            self.it = iter(calib_array[i:i + 32] for i in range(0, len(calib_array), 32))

        def get_next(self):
            x = next(self.it, None)
            return end if x is None else {"input": x}

    quantkit.calibrate(model, Reader(), method="entropy", output_dir=tmp_path, progress=False)
    assert_same_as_cli(tmp_path, cli_entropy)


def test_auto_method_with_python_data_holds_out_as_the_cli(model, calib_array, calib_dir, quantkit_cli, tmp_path):
    """method="auto" with an array reads the data as the CLI does (issue #48: "no data given")."""
    plan = quantkit.calibrate(model, calib_array, method="auto", output_dir=tmp_path / "py", progress=False)
    assert plan.report.samples > 0
    quantkit_cli("calibrate", model, "--data", f"input={calib_dir / 'input.npy'}", "--method", "auto", "-q",
                 "-o", str(tmp_path / "cli"))
    assert (tmp_path / "py" / "calib.cache").read_bytes() == (tmp_path / "cli" / "calib.cache").read_bytes()


@pytest.mark.parametrize("bad", [dict(samples="abc"), dict(batch_size=2.5), dict(output_dir=3)])
def test_an_argument_of_the_wrong_type_is_a_quantkit_error(model, calib_array, tmp_path, bad):
    """Issue #48: bad arguments raised pybind11's bare TypeError ("incompatible function arguments");
    they raise quantkit's error (exit code 2), still a TypeError, naming the function."""
    args = dict(output_dir=tmp_path, progress=False)
    args.update(bad)
    with pytest.raises(quantkit.InvalidArgumentTypeError) as e:
        quantkit.calibrate(model, calib_array, **args)
    assert isinstance(e.value, TypeError) and e.value.exit_code == 2
    assert str(e.value).startswith("calibrate: "), str(e.value)
    assert "incompatible function arguments" not in str(e.value), str(e.value)
