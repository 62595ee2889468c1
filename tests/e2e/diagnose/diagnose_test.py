"""End-to-end `quantkit diagnose`: each calibration-data failure is built on purpose and the
diagnosis must name it (finding codes in --json); a clean calibration set gets a clean bill.

Cases (small: few samples, the zoo's plain CNN and two tiny models written with onnx.helper):
  clean         fashion-mnist:calib (all 2048) vs fashion-mnist:val: clean, sufficient, SVGs parse
  too few       8 samples -> too_few_samples, suggested N > 8
  rescaled      calib x255 / x+1 / x0.5 vs the normalized reference -> scale_mismatch /
                shift_mismatch, distribution_shift, reference_clipping
  0-255         raw pixels vs normalized reference, 0-1 vs normalized, --expect range=0:1
  entropy       plain CNN with --method entropy: the input's entropy amax clips the foreground
                (known finding, ~7.7 top-1 points) -> entropy_clips, recommended max
  channels      3-channel model: BGR calibration vs RGB reference / --expect mean -> channel_order_swapped;
                NHWC bytes reshaped to NCHW -> layout_swapped; an NHWC .npy for NCHW -> exit 2 naming it
  bn-train      BatchNormalization training_mode=1 -> batch_dependent_graph + batch_dependent
  samples       constant, duplicated, noise and outlier samples -> their codes
  degenerate    one extreme pixel -> outliers_dominate_max (percentile), NaN -> nonfinite, a
                dead Relu channel -> dead_channels
  bad input     missing model, bad --expect -> one line, nonzero exit (2 for --expect)
Run by pytest under ctest; quantkit and the repository come from tests/e2e/qktest.py.
"""
import json
import os
import subprocess
import tempfile
import xml.etree.ElementTree as ET

import numpy as np
import onnx
from onnx import TensorProto, helper

from qktest import QK, ROOT, zoo_data  # noqa: E402  (tests/e2e/qktest.py)

PLAIN = os.path.join(ROOT, "models", "zoo", "plain_cnn.onnx")
FAILURES = []


def diagnose(args, expect_rc=0):
    p = subprocess.run([QK, "diagnose", "--json", "-q"] + args, capture_output=True, text=True)
    ok = p.returncode != 0 if expect_rc is None else p.returncode == expect_rc
    assert ok, f"{args}: exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    return json.loads(p.stdout) if p.returncode == 0 else p


def codes(report, severities=("error", "warning", "info")):
    return {f["code"] for f in report["findings"] if f["severity"] in severities}


def problems(report):
    return codes(report, ("error", "warning"))


def check(name, cond, report=None):
    if not cond:
        detail = "\n".join(f"  {f['severity']} {f['code']}: {f['message']}" for f in report["findings"]) if report else ""
        FAILURES.append(name)
        print(f"FAIL {name}\n{detail}")
    else:
        print(f"ok   {name}")


def save(d, name, x):
    path = os.path.join(d, name)
    np.save(path, np.ascontiguousarray(x, dtype=np.float32))
    return path


def tiny_model(path, channels=3, size=16, bn_training=False, dead_channel=False):
    """x[N,C,H,W] -> Conv(4) [-> BatchNormalization] -> Relu -> GlobalAveragePool -> Flatten -> Gemm(2)."""
    rng = np.random.default_rng(0)
    inits = [helper.make_tensor("w", TensorProto.FLOAT, [4, channels, 3, 3], rng.normal(0, 0.3, (4, channels, 3, 3)).astype(np.float32).ravel()),
             # dead_channel: a bias no input overcomes -> Relu output channel 0 is always zero
             helper.make_tensor("b", TensorProto.FLOAT, [4], np.array([-100.0 if dead_channel else 0.0, 0, 0, 0], np.float32)),
             helper.make_tensor("fw", TensorProto.FLOAT, [2, 4], rng.normal(0, 0.5, (2, 4)).astype(np.float32).ravel()),
             helper.make_tensor("fb", TensorProto.FLOAT, [2], np.zeros(2, np.float32))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv")]
    act_in = "c"
    if bn_training:
        for n, v in [("s", 1.0), ("o", 0.0), ("m", 0.0), ("v", 1.0)]:
            inits.append(helper.make_tensor(n, TensorProto.FLOAT, [4], np.full(4, v, np.float32)))
        nodes.append(helper.make_node("BatchNormalization", ["c", "s", "o", "m", "v"], ["bn"], training_mode=1, name="bn"))
        act_in = "bn"
    nodes += [helper.make_node("Relu", [act_in], ["r"], name="relu"),
              helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gap"),
              helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
              helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1, name="fc")]
    g = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", channels, size, size])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return path


def smooth_rgb(n, size=16, means=(0.2, 0.5, 0.8), seed=0):
    """Image-like 0-1 data: per-channel level + a smooth random pattern (adjacent pixels correlate)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    out = np.empty((n, 3, size, size), np.float32)
    for s in range(n):
        # Several periods per image (stable per-sample statistics) plus a natural brightness spread.
        fx, fy, ph = rng.uniform(0.4, 0.8), rng.uniform(0.4, 0.8), rng.uniform(0, 6)
        pattern = 0.15 * np.sin(fx * xx + fy * yy + ph) + rng.normal(0, 0.03)
        for c in range(3):
            out[s, c] = means[c] + pattern * (1 + 0.3 * c)
    return out


def main():
    val, _ = zoo_data.load_split("val")
    calib, _ = zoo_data.load_split("calib")
    with tempfile.TemporaryDirectory() as d:
        # clean: enough samples, same distribution as the reference, SVG pictures well formed.
        out = os.path.join(d, "clean")
        r = diagnose([PLAIN, "--data", "fashion-mnist:calib", "--reference-data",
                      "fashion-mnist:val", "--reference-samples", "256", "-o", out])
        check("clean: clean bill", r["clean"] and not problems(r), r)
        check("clean: samples enough", r["sufficiency"]["enough"] and "samples_enough" in codes(r), r)
        check("clean: input scale normalized", r["inputs"][0]["scale"] == "normalized", r)
        svgs = [f for f in os.listdir(out) if f.endswith(".svg")]
        check("clean: convergence + histogram SVGs", "convergence.svg" in svgs and len(svgs) >= 2)
        for f in svgs:
            ET.parse(os.path.join(out, f))  # raises on malformed XML
        check("clean: report.json equals --json", json.load(open(os.path.join(out, "report.json")))["findings"] == r["findings"])

        # the report does not depend on the batch size (mergeable collectors, chunk-aligned batches)
        a = diagnose([PLAIN, "--data", "fashion-mnist:calib", "--samples", "128", "--batch-size", "7"])
        b = diagnose([PLAIN, "--data", "fashion-mnist:calib", "--samples", "128", "--batch-size", "32"])
        for x in (a, b):
            x.pop("seconds")
            for k in ("batch", "max_rel_amax_diff", "max_output_diff", "worst_tensor"):
                x["batch"].pop(k)  # the batch-1 vs batch-B check itself uses B = min(--batch-size, 16)
        check("report independent of --batch-size", a == b)

        # too few samples
        r = diagnose([PLAIN, "--data", "fashion-mnist:calib", "--samples", "8", "--batch-check-samples", "0"])
        check("too few: too_few_samples", "too_few_samples" in problems(r) and not r["sufficiency"]["enough"], r)
        check("too few: suggests more", r["sufficiency"]["suggested_samples"] > 8, r)

        # rescaled / shifted calibration data against the normalized reference
        x255 = save(d, "x255.npy", calib[:128] * 255.0)
        xp1 = save(d, "xp1.npy", calib[:128] + 1.0)
        r = diagnose([PLAIN, "--data", x255, "--reference-data", "fashion-mnist:val", "--reference-samples", "128"])
        check("x255: scale_mismatch naming 0-255", "scale_mismatch" in problems(r) and any(
            "0-255" in f["message"] for f in r["findings"] if f["code"] == "scale_mismatch"), r)
        check("x255: distribution_shift", "distribution_shift" in problems(r), r)
        r = diagnose([PLAIN, "--data", xp1, "--reference-data", "fashion-mnist:val", "--reference-samples", "128"])
        check("x+1: shift_mismatch", "shift_mismatch" in problems(r) and "scale_mismatch" not in problems(r), r)
        check("x+1: distribution_shift", "distribution_shift" in problems(r), r)
        # a compressed calibration set: the reference's larger values would be clipped
        xhalf = save(d, "xhalf.npy", calib[:128] * 0.5)
        r = diagnose([PLAIN, "--data", xhalf, "--reference-data", "fashion-mnist:val", "--reference-samples", "128",
                      "--batch-check-samples", "0"])
        check("x0.5: reference_clipping on input", any(f["code"] == "reference_clipping" and f["subject"] == "input"
                                                       for f in r["findings"]) and "scale_mismatch" in problems(r), r)

        # 0-255 raw pixels, 0-1 without normalization, against normalized data and an expectation
        raw01 = calib[:128] * zoo_data.STD + zoo_data.MEAN
        raw255 = save(d, "raw255.npy", np.round(raw01 * 255.0))
        raw01p = save(d, "raw01.npy", raw01)
        r = diagnose([PLAIN, "--data", raw255, "--reference-data", "fashion-mnist:val", "--reference-samples", "128"])
        check("0-255 vs normalized: scale_mismatch", "scale_mismatch" in problems(r) and r["inputs"][0]["scale"] == "0-255", r)
        r = diagnose([PLAIN, "--data", raw01p, "--reference-data", "fashion-mnist:val", "--reference-samples", "128"])
        check("0-1 vs normalized: normalization_mismatch", "normalization_mismatch" in problems(r), r)
        r = diagnose([PLAIN, "--data", raw255, "--expect", "range=0:1", "--batch-check-samples", "0"])
        check("0-255 vs expected 0:1: expectation_mismatch", any(
            f["code"] == "expectation_mismatch" and "0-255 data for a 0-1 model" in f["message"] for f in r["findings"]), r)
        r = diagnose([PLAIN, "--data", "fashion-mnist:calib", "--samples", "256", "--expect", "mean=0,std=1",
                      "--batch-check-samples", "0"])
        check("normalized vs expected mean=0,std=1: no mismatch", "expectation_mismatch" not in codes(r), r)

        # the known entropy finding on the normalized input (background spike at -0.81)
        r = diagnose([PLAIN, "--data", "fashion-mnist:calib", "--samples", "512", "--method", "entropy",
                      "--batch-check-samples", "0"])
        inp = next(t for t in r["tensors"] if t["name"] == "input")
        check("entropy: entropy_clips on input", any(f["code"] == "entropy_clips" and f["subject"] == "input"
                                                     and f["severity"] == "warning" for f in r["findings"]), r)
        check("entropy: input recommended max", inp["recommended_method"] == "max"
              and inp["method_amax"]["entropy"] < 0.5 * inp["method_amax"]["max"], r)

        # channel order and layout on a 3-channel model
        tiny = tiny_model(os.path.join(d, "tiny3.onnx"))
        rgb = smooth_rgb(64, seed=1)
        rgb_ref = save(d, "rgb_ref.npy", smooth_rgb(64, seed=2))
        bgr = save(d, "bgr.npy", rgb[:, ::-1])
        r = diagnose([tiny, "--data", save(d, "rgb.npy", rgb), "--reference-data", rgb_ref])
        check("3ch clean: clean bill", not problems(r), r)
        r = diagnose([tiny, "--data", bgr, "--reference-data", rgb_ref])
        check("BGR vs RGB: channel_order_swapped", "channel_order_swapped" in problems(r), r)
        r = diagnose([tiny, "--data", bgr, "--expect", "mean=0.2/0.5/0.8,std=0.1/0.1/0.1"])
        check("BGR vs expected mean: channel_order_swapped", "channel_order_swapped" in problems(r), r)
        nhwc = np.ascontiguousarray(rgb.transpose(0, 2, 3, 1)).reshape(rgb.shape)  # reshape, not transpose
        r = diagnose([tiny, "--data", save(d, "nhwc.npy", nhwc)])
        check("NHWC reshaped: layout_swapped", "layout_swapped" in problems(r), r)

        # NHWC images for the NCHW zoo model fail the shape check; the error says why
        p = diagnose([PLAIN, "--data", save(d, "calib_nhwc.npy", calib[:16].transpose(0, 2, 3, 1))], expect_rc=2)
        check("NHWC file for NCHW model: layout hint", len(p.stderr.strip().splitlines()) == 1
              and "NHWC" in p.stderr and "layout_swapped" in p.stderr)

        # training-mode BatchNormalization: graph check and measured batch-1 vs batch-B difference
        bn = tiny_model(os.path.join(d, "bn_train.onnx"), bn_training=True)
        r = diagnose([bn, "--data", save(d, "rgb2.npy", rgb[:32]), "--batch-size", "16"])
        check("BN training: batch_dependent_graph", "batch_dependent_graph" in problems(r), r)
        check("BN training: batch_dependent measured", "batch_dependent" in problems(r) and r["batch"]["measured"], r)
        r = diagnose([tiny, "--data", save(d, "rgb3.npy", rgb[:32]), "--batch-size", "16"])
        check("eval-mode model: no batch finding", not ({"batch_dependent", "batch_dependent_graph"} & codes(r)), r)

        # constant, duplicated, noise and outlier samples
        bad = calib[:256].copy()
        bad[:8] = bad[0, 0, 0, 0]            # blank images
        bad[8:40] = bad[40]                  # 32 copies of one image
        bad[100:104] *= 8.0                  # a few wildly different samples
        r = diagnose([PLAIN, "--data", save(d, "bad.npy", bad), "--batch-check-samples", "0"])
        check("constant_samples", "constant_samples" in problems(r), r)
        check("duplicate_samples", "duplicate_samples" in problems(r), r)
        idx = {o["index"] for o in r["outlier_samples"]}
        check("outlier_samples names 100-103", "outlier_samples" in problems(r) and {100, 101, 102, 103} <= idx, r)
        noise = np.random.default_rng(0).normal(0, 1, (128, 1, 28, 28))
        r = diagnose([PLAIN, "--data", save(d, "noise.npy", noise), "--batch-check-samples", "0"])
        check("gaussian noise: random_data", any(f["code"] == "random_data" and "gaussian" in f["message"]
                                                  for f in r["findings"]), r)

        # degenerate tensors: one extreme pixel, a NaN, a dead channel
        spike = calib[:128].copy()
        spike[7, 0, 0, 0] = 500.0
        r = diagnose([PLAIN, "--data", save(d, "spike.npy", spike), "--batch-check-samples", "0"])
        inp = next(t for t in r["tensors"] if t["name"] == "input")
        check("one extreme value: outliers_dominate_max, percentile recommended", any(
            f["code"] == "outliers_dominate_max" and f["subject"] == "input" for f in r["findings"])
            and inp["recommended_method"].startswith("percentile"), r)
        nan = calib[:64].copy()
        nan[5, 0, 3, 3] = np.nan
        r = diagnose([PLAIN, "--data", save(d, "nan.npy", nan), "--batch-check-samples", "0"])
        check("NaN: nonfinite error on input", any(f["code"] == "nonfinite" and f["subject"] == "input"
                                                   and f["severity"] == "error" for f in r["findings"]), r)
        dead = tiny_model(os.path.join(d, "dead.onnx"), dead_channel=True)
        r = diagnose([dead, "--data", os.path.join(d, "rgb.npy"), "--batch-check-samples", "0"])
        relu = next(t for t in r["tensors"] if t["name"] == "r")
        check("dead channel: dead_channels 1 of 4 on the Relu output", "dead_channels" in codes(r)
              and relu["dead_channels"] == 1 and relu["channels"] == 4, r)

        # bad input: one line, documented exit codes
        p = diagnose([os.path.join(d, "missing.onnx"), "--data", "fashion-mnist:calib"], expect_rc=None)
        check("missing model: one line", len(p.stderr.strip().splitlines()) == 1 and "missing.onnx" in p.stderr)
        p = diagnose([PLAIN, "--data", "fashion-mnist:calib", "--expect", "range=1"], expect_rc=2)
        check("bad --expect: one line", len(p.stderr.strip().splitlines()) == 1 and "--expect" in p.stderr)
    assert not FAILURES, f"{len(FAILURES)} failed: {FAILURES}"
    print("all diagnose cases passed")


def test_diagnose():
    main()


if __name__ == "__main__":
    main()
