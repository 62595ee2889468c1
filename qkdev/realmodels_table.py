"""The issue-20 closing table: each real model as shipped, through `quantkit calibrate` with its
defaults and through onnxruntime's quantize_static on the same calibration data, both judged
against the FP32 model in onnxruntime on held-out data.

    .venv/bin/python -m qkdev.realmodels_table build/dev/tools/quantkit/quantkit [--models a,b] [--md out.md]

Columns: accepted as shipped (quantkit calibrate exit code 0 on the model file and data as they
are, no options beyond --data and -o), the metric that fits the output (class: argmax agreement
with FP32; score: mean |INT8 - FP32|; sequence: greedy-decode exact match with FP32; map: relative
RMS error), and relative RMS error of the first output for every model. Models and data come from
qkdev/realmodels.py (cached).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from qkdev import realmodels


def _session(path):
    import onnxruntime as ort
    so = ort.SessionOptions()
    # Basic optimizations only (constant folding, no Q/DQ fusion): onnxruntime's extended level turns
    # DQ -> MatMul <- DQ with per-column weight scales into its own integer kernel, whose numbers are
    # not the Q/DQ arithmetic TensorRT implements (textline: rel RMS 0.0218 fused vs 0.0027 unfused,
    # the same model; the unfused figure is what the ONNX Q/DQ semantics give).
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.intra_op_num_threads = int(os.environ.get("QUANTKIT_THREADS", "1"))
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def load_feeds(model_path, folder):
    """Per-sample feed dicts in the model's layout, from any of the folder layouts realmodels.py writes."""
    import onnx.numpy_helper
    sess = _session(model_path)
    inputs = sess.get_inputs()
    entries = sorted(os.listdir(folder))
    sets = [e for e in entries if e.startswith("test_data_set_")]
    if sets:
        sets.sort(key=lambda e: int(e[len("test_data_set_"):]))
        feeds = []
        for s in sets:
            feed = {}
            for k, inp in enumerate(inputs):
                with open(os.path.join(folder, s, f"input_{k}.pb"), "rb") as f:
                    t = onnx.TensorProto()
                    t.ParseFromString(f.read())
                feed[inp.name] = onnx.numpy_helper.to_array(t)
            feeds.append(feed)
        return feeds
    named = {i.name: os.path.join(folder, i.name + ".npy") for i in inputs}
    if all(os.path.exists(p) for p in named.values()):
        arrays = {n: np.load(p) for n, p in named.items()}
        count = len(next(iter(arrays.values())))
        return [{i.name: (np.asarray(arrays[i.name][j]) if len(i.shape) == 0 else arrays[i.name][j][None]) for i in inputs}
                for j in range(count)]
    (inp,) = inputs
    return [{inp.name: np.load(os.path.join(folder, e))[None]} for e in entries if e.endswith(".npy")]


def metric(kind, ref, out):
    """(name, value) of the metric that fits the output, and the relative RMS error."""
    rel = [float(np.sqrt(np.mean((o - r) ** 2)) / max(np.sqrt(np.mean(r ** 2)), 1e-12)) for r, o in zip(ref, out)]
    rel_rms = float(np.mean(rel))
    if kind == "class":
        v = np.mean([int(np.argmax(r) == np.argmax(o)) for r, o in zip(ref, out)])
        return "argmax agreement", float(v), rel_rms
    if kind == "score":
        return "mean abs score diff", float(np.mean([np.abs(o - r).mean() for r, o in zip(ref, out)])), rel_rms
    if kind == "sequence":
        def greedy(a):
            ids = a.reshape(-1, a.shape[-1]).argmax(-1)
            return [int(i) for j, i in enumerate(ids) if i != 0 and (j == 0 or ids[j - 1] != i)]
        return "decode exact match", float(np.mean([greedy(r) == greedy(o) for r, o in zip(ref, out)])), rel_rms
    return "rel RMS error", rel_rms, rel_rms


def run_outputs(model_path, feeds):
    sess = _session(model_path)
    return [sess.run(None, feed)[0].astype(np.float64) for feed in feeds]


def quantkit_calibrate(quantkit, folder, out_dir, extra=()):
    """(exit code, stdout, last line, wall seconds, CPU seconds user+sys of the child).

    The float part is FP32 unless `extra` names --float-dtype: every column is scored in
    onnxruntime, whose CPU FP16 QuantizeLinear truncates where TensorRT rounds
    (docs/strongly-typed.md), and onnxruntime's own quantize_static column is FP32 too."""
    floats = [] if "--float-dtype" in extra else ["--float-dtype", "fp32"]
    cmd = [quantkit, "calibrate", os.path.join(folder, "model.onnx"), "--data", os.path.join(folder, "calib"),
           "-o", out_dir, "-q", *floats, *extra]
    t0 = time.time()
    before = os.times()
    r = subprocess.run(cmd, capture_output=True, text=True)
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    lines = (r.stderr.strip() or r.stdout.strip()).splitlines()
    return r.returncode, r.stdout, (lines[-1] if lines else ""), time.time() - t0, cpu


def ort_quantize(model_path, calib_feeds, out_path):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(calib_feeds)

        def get_next(self):
            return next(self.it, None)

    t0 = time.time()
    try:
        quantize_static(model_path, out_path, Reader(), quant_format=QuantFormat.QDQ, per_channel=True)
        return time.time() - t0, "per channel"
    except ValueError:
        # Below opset 13 onnxruntime refuses per-channel QDQ; per-tensor is what a user falls back to.
        quantize_static(model_path, out_path, Reader(), quant_format=QuantFormat.QDQ, per_channel=False)
        return time.time() - t0, "per tensor (per channel needs opset 13)"


def count_quantize_nodes(path):
    """Quantized tensors: QuantizeLinear nodes, and DequantizeLinear nodes of INT8-stored weights,
    in the graph and in every subgraph (If/Loop/Scan bodies)."""
    import onnx

    def walk(graph):
        n = 0
        inits = {i.name for i in graph.initializer}
        for node in graph.node:
            n += node.op_type == "QuantizeLinear" or (node.op_type == "DequantizeLinear" and node.input[0] in inits)
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    n += walk(a.g)
                for g in a.graphs:
                    n += walk(g)
        return n
    return walk(onnx.load(path).graph)


def open_model(name):
    """(folder, kind.json, model path, held-out feeds, FP32 first outputs in onnxruntime)."""
    folder = realmodels.ensure(name)
    with open(os.path.join(folder, "kind.json")) as f:
        info = json.load(f)
    model = os.path.join(folder, "model.onnx")
    val = load_feeds(model, os.path.join(folder, "val"))
    return folder, info, model, val, run_outputs(model, val)


def evaluate(quantkit, name, tmp, with_ort=True, extra=()):
    folder, info, model, val, ref = open_model(name)
    row = {"model": name, "kind": info["kind"], "output": info["output"]}
    out_dir = os.path.join(tmp, name)
    rc, stdout, last, secs, cpu = quantkit_calibrate(quantkit, folder, out_dir, extra)
    row["accepted"] = rc == 0
    row["quantkit_seconds"] = secs
    row["quantkit_cpu_seconds"] = cpu
    chosen = [l for l in stdout.splitlines() if l.startswith("best: ")]
    if chosen:
        row["quantkit_method"] = chosen[0].split()[1]
    row["notes"] = [l for l in stdout.splitlines() if l.startswith(("note:", "warning:", "quantized:"))]
    if rc == 0:
        row["quantkit_q_nodes"] = count_quantize_nodes(os.path.join(out_dir, "model.qdq.onnx"))
        out = run_outputs(os.path.join(out_dir, "model.qdq.onnx"), val)
        row["metric"], row["quantkit"], row["quantkit_rel_rms"] = metric(info["output"], ref, out)
    else:
        row["quantkit_error"] = f"exit {rc}: {last}"
    if not with_ort:
        return row
    try:
        ort_path = os.path.join(tmp, name + ".ort.onnx")
        row["ort_seconds"], row["ort_weights"] = ort_quantize(model, load_feeds(model, os.path.join(folder, "calib")),
                                                              ort_path)
        row["ort_q_nodes"] = count_quantize_nodes(ort_path)
        out = run_outputs(ort_path, val)
        row["metric"], row["ort"], row["ort_rel_rms"] = metric(info["output"], ref, out)
    except Exception as e:  # noqa: BLE001 -- a peer's failure is a table cell, not a crash
        row["ort_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
    return row


def markdown(rows):
    out = ["| model (kind) | accepted as shipped? | metric | FP32 | quantkit INT8 (Q nodes) | "
           "onnxruntime quantize_static (Q nodes) |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        fp32 = {"argmax agreement": "1.000", "decode exact match": "1.000"}.get(r.get("metric"), "0")
        q = (f"{r['quantkit']:.3f} (rel RMS {r['quantkit_rel_rms']:.3f}; {r['quantkit_q_nodes']})" if "quantkit" in r
             else r.get("quantkit_error", ""))
        o = (f"{r['ort']:.3f} (rel RMS {r['ort_rel_rms']:.3f}; {r['ort_q_nodes']}; {r['ort_weights']})" if "ort" in r
             else r.get("ort_error", ""))
        out.append(f"| {r['model']} ({r['kind']}) | {'yes' if r['accepted'] else 'no'} | {r.get('metric', '')} | "
                   f"{fp32} | {q} | {o} |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("quantkit")
    ap.add_argument("--models", default=",".join(realmodels.MODELS))
    ap.add_argument("--md", help="write the markdown table here")
    ap.add_argument("--json", help="write the rows as JSON here")
    ap.add_argument("--keep", help="keep quantkit's outputs in KEEP/<model>/ (for qkdev/realmodels_drift.py)")
    ap.add_argument("--quantkit-args", default="", help="extra calibrate options, e.g. '--method auto'")
    ap.add_argument("--no-ort", action="store_true", help="quantkit only (no quantize_static column)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or scratch
        os.makedirs(tmp, exist_ok=True)
        for name in [m for m in args.models.split(",") if m]:
            row = evaluate(args.quantkit, name, tmp, with_ort=not args.no_ort, extra=args.quantkit_args.split())
            print(json.dumps(row), file=sys.stderr)
            rows.append(row)
    table = markdown(rows)
    sys.stdout.write(table)
    if args.md:
        with open(args.md, "w") as f:
            f.write("<!-- generated by qkdev/realmodels_table.py, do not edit -->\n" + table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
