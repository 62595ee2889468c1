"""analyze / fallback / calibrate --compare-methods on a real failure (issue 8).

plain_cnn calibrated with entropy clips the network input at ~0.81 and loses several top-1 points:
  * `analyze` must rank the input tensor first;
  * `fallback --budget 0.5` must find a plan within 0.5 top-1 points of FP32 on its data, keeping
    the node that reads the input in float; its Q/DQ model run in onnxruntime must give the same
    predictions as quantkit's simulation of the plan (float nodes really left without Q/DQ), and
    its --layerPrecisions string must name the float node;
  * `calibrate --compare-methods` must not pick entropy for this model, and `--method auto` (the same
    choice, the held-out data defaulting to fashion-mnist:val) must write the plan of that best method.
Run by pytest under ctest; quantkit and the repository come from tests/e2e/qktest.py.
"""
import json
import os
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from qktest import ROOT, run, zoo_data as data  # noqa: E402  (tests/e2e/qktest.py)


BUDGET_POINTS = 0.5
SEARCH_SAMPLES = 1000  # fashion-mnist:val samples the search evaluates on
CHECK_SAMPLES = 1000   # fashion-mnist:test samples for the ORT cross-check


def main():
    model = os.path.join(ROOT, "models", "zoo", "plain_cnn.onnx")
    graph = onnx.load(model).graph
    net_input = graph.input[0].name
    readers = [n.name for n in graph.node if net_input in n.input]
    with tempfile.TemporaryDirectory() as d:
        ent = os.path.join(d, "entropy")
        # FP32 float part: the fallback's Q/DQ model is checked prediction for prediction against
        # onnxruntime below, whose CPU FP16 QuantizeLinear truncates where TensorRT rounds
        # (docs/strongly-typed.md). The default FP16 part is searched in check_cache_on_residual_model.
        # --repair off: the entropy plan as asked (the default ladder repairs its clipped input).
        run(["calibrate", model, "--data", "fashion-mnist:calib", "--method", "entropy", "--float-dtype", "fp32",
             "--repair", "off", "-o", ent, "-q"])
        plan = os.path.join(ent, "plan.json")

        a = json.loads(run(["analyze", model, "--plan", plan, "--data", "fashion-mnist:val", "--samples", "500",
                            "--json", "-q"]))
        top = a["tensors"][0]
        print(f"analyze: worst tensor {top['tensor']} (isolated output SQNR {top['isolated']['output']['sqnr_db']}, "
              f"saturation {top['saturation']:.4f}); INT8 top-1 {a['int8_metrics']['top1']:.4f} vs FP32 "
              f"{a['fp32_metrics']['top1']:.4f}; {a['trials']} trials in {a['seconds']:.1f} s")
        assert top["tensor"] == net_input, [t["tensor"] for t in a["tensors"][:3]]
        assert top["saturation"] > 0 and top["range_used"] > 1.0, top
        assert set(top["nodes"]) == set(readers), (top["nodes"], readers)
        # Accumulated output error can only be reported for what was run: every row has it.
        assert all(t["accumulated"]["output"]["rel_mse"] is not None for t in a["tensors"])

        fb = os.path.join(d, "fallback")
        r = json.loads(run(["fallback", model, "--plan", plan, "--data", "fashion-mnist:val", "--samples",
                            str(SEARCH_SAMPLES), "--budget", str(BUDGET_POINTS), "-o", fb, "--json", "-q"]))
        print(f"fallback: top-1 FP32 {r['fp32']:.4f}, INT8 {r['int8']:.4f}, with fallback {r['final']:.4f}; "
              f"float {r['float_nodes']}; {r['trials']} trials in {r['search_seconds']:.1f} s "
              f"({r['trial_seconds']:.3f} s each, FP32 pass {r['fp32_pass_seconds']:.3f} s)")
        assert r["baseline_loss"] > BUDGET_POINTS, r["baseline_loss"]
        assert r["within_budget"] and (r["fp32"] - r["final"]) * 100 <= BUDGET_POINTS + 1e-9, r
        assert set(readers) & set(r["float_nodes"]), (readers, r["float_nodes"])
        assert r["ranking"][0]["node"] in readers, r["ranking"][:3]
        # Trials start from cached activations of the unchanged prefix (analysis/prefix_cache.h);
        # every trial must give exactly the numbers of a whole-model run.
        assert r["trial_cache"]["checkpoints"] > 0, r["trial_cache"]
        whole = json.loads(run(["fallback", model, "--plan", plan, "--data", "fashion-mnist:val", "--samples",
                                str(SEARCH_SAMPLES), "--budget", str(BUDGET_POINTS), "--trial-cache-mb", "0",
                                "--json", "-q"]))
        assert whole["trial_cache"]["checkpoints"] == 0, whole["trial_cache"]
        assert [(s["float_nodes"], s["loss"]) for s in whole["steps"]] == \
            [(s["float_nodes"], s["loss"]) for s in r["steps"]], "cached-prefix trials changed a loss"
        print(f"fallback trial cache: {r['trial_cache']}; trial {r['trial_seconds']:.3f} s vs "
              f"{whole['trial_seconds']:.3f} s whole (simulated pass {r['simulated_pass_seconds']:.3f} s)")
        check_cache_on_residual_model(d)
        lp = open(os.path.join(fb, "layer_precisions.txt")).read().strip()
        for n in r["float_nodes"]:
            assert f"{n}:fp16" in lp, (n, lp)
        saved = json.load(open(os.path.join(fb, "plan.json")))
        assert set(saved["float_nodes"]) == set(r["float_nodes"]), saved["float_nodes"]

        # The written Q/DQ model == the simulation of the written plan (float nodes without Q/DQ).
        qdq = os.path.join(fb, "model.qdq.onnx")
        q = onnx.load(qdq)
        for n in q.graph.node:
            if n.name in r["float_nodes"]:
                producers = {o: m.op_type for m in q.graph.node for o in m.output}
                assert all(producers.get(i) != "DequantizeLinear" for i in n.input), n.name
        pred = os.path.join(d, "sim_pred.npy")
        ev = json.loads(run(["eval", model, "--plan", os.path.join(fb, "plan.json"), "--data", "fashion-mnist:test",
                             "--samples", str(CHECK_SAMPLES), "--json", "-q", "--save-predictions", pred]))
        x, _ = data.load_split("test")
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        s = ort.InferenceSession(qdq, so, providers=["CPUExecutionProvider"])
        theirs = s.run(None, {s.get_inputs()[0].name: np.ascontiguousarray(x[:CHECK_SAMPLES])})[0].argmax(1)
        differ = int((np.load(pred) != theirs).sum())
        print(f"fallback plan on test: simulated top-1 {ev['top1']:.4f}, argmax agreement with FP32 "
              f"{ev['agreement']['argmax']:.4f}; {differ} predictions differ from onnxruntime's Q/DQ model")
        assert differ == 0, differ

        # calibrate --exclude travels in the plan, so simulating the plan leaves that node float too.
        ex = os.path.join(d, "exclude")
        run(["calibrate", model, "--data", "fashion-mnist:calib", "--samples", "64", "--exclude", readers[0],
             "--float-dtype", "fp32", "-o", ex, "-q"])  # checked against onnxruntime too: FP32, as above
        assert readers[0] in json.load(open(os.path.join(ex, "plan.json")))["float_nodes"]
        ex_pred = os.path.join(d, "ex_pred.npy")
        run(["eval", model, "--plan", os.path.join(ex, "plan.json"), "--data", "fashion-mnist:test", "--samples",
             "500", "-q", "--json", "--save-predictions", ex_pred])
        s = ort.InferenceSession(os.path.join(ex, "model.qdq.onnx"), so, providers=["CPUExecutionProvider"])
        theirs = s.run(None, {s.get_inputs()[0].name: np.ascontiguousarray(x[:500])})[0].argmax(1)
        assert int((np.load(ex_pred) != theirs).sum()) == 0

        cm = json.loads(run(["calibrate", model, "--data", "fashion-mnist:calib", "--compare-methods",
                             "--holdout", "fashion-mnist:val", "--holdout-samples", "1000", "-o",
                             os.path.join(d, "best"), "--json", "-q"]))
        losses = {m["method"]: m["loss"] for m in cm["methods"]}
        print(f"compare-methods: {losses}, best {cm['best']}")
        assert set(losses) == {"max", "entropy", "percentile:99.99", "mse"}, losses
        assert cm["best"] != "entropy" and losses["entropy"] > losses[cm["best"]] + 1.0, losses
        assert min(losses.values()) == losses[cm["best"]]
        best_plan = json.load(open(os.path.join(d, "best", "plan.json")))
        assert best_plan["provenance"]["method"] == cm["best"], best_plan["provenance"]
        auto = os.path.join(d, "auto")
        run(["calibrate", model, "--data", "fashion-mnist:calib", "--method", "auto", "--holdout-samples", "1000",
             "-o", auto, "-q"])
        auto_plan = json.load(open(os.path.join(auto, "plan.json")))
        assert auto_plan["provenance"]["method"] == cm["best"], (auto_plan["provenance"], cm["best"])
    print("fallback_test: passed")


def check_cache_on_residual_model(d):
    """resnet_small (residual Adds: two live branches at most checkpoints) with its max plan, in the
    default FP16 float part: the search's every loss is identical with and without the trial cache.
    In FP16 a value's bits depend on its readers too (TensorRT's fusions keep some in FP32): a trial
    that keeps an Add or a Conv in float changed them, and the cache fed the base's (fixed)."""
    model = os.path.join(ROOT, "models", "zoo", "resnet_small.onnx")
    out = os.path.join(d, "rs")
    summary = run(["calibrate", model, "--data", "fashion-mnist:calib", "--samples", "64", "-o", out, "-q"])
    assert "float dtype: fp16" in summary, summary
    args = ["fallback", model, "--plan", os.path.join(out, "plan.json"), "--data", "fashion-mnist:val",
            "--samples", "200", "--metric", "rel_mse", "--budget", "0", "--max-float", "3", "--json", "-q"]
    # Budget 0 cannot be met (exit 1): the search runs every phase up to --max-float.
    cached = json.loads(run(args, expect=1))
    whole = json.loads(run(args + ["--trial-cache-mb", "0"], expect=1))
    assert cached["trial_cache"]["checkpoints"] > 0, cached["trial_cache"]
    assert len(cached["steps"]) > 3, cached["steps"]
    assert [(s["float_nodes"], s["loss"]) for s in whole["steps"]] == \
        [(s["float_nodes"], s["loss"]) for s in cached["steps"]], "cached-prefix trials changed a loss"
    print(f"resnet_small fallback: {cached['trials']} trials, {cached['trial_seconds']:.3f} s each with the "
          f"cache vs {whole['trial_seconds']:.3f} s whole; simulated pass {cached['simulated_pass_seconds']:.3f} s")


def test_fallback():
    main()


if __name__ == "__main__":
    main()
