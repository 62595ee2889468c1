"""Issue 20 item 10: how far quantkit's execution of a Q/DQ model drifts from onnxruntime's, beside
onnxruntime's own sensitivity to float rounding, on the real-model test set.

    .venv/bin/python -m qkdev.realmodels_drift build/dev/tools/quantkit/quantkit QDQ_DIR [--models a,b]
        [--first-flip]

QDQ_DIR/<model>/model.qdq.onnx must exist (qkdev/realmodels_table.py --keep QDQ_DIR writes them).
For each val sample, relative RMS of the first output between
  - quantkit (`quantkit run`) and onnxruntime with graph optimizations disabled (it then executes the
    Q/DQ arithmetic as written);
  - onnxruntime disabled vs all optimizations;
  - onnxruntime vs onnxruntime on the same model with the output of every float op (Conv, MatMul,
    BatchNormalization, Add, Mul, Div, activations, pooling, Resize...) multiplied by
    float32(1 + 2^-23), which moves each value by one or two ulps: how far the rounding differences
    between two correct implementations of those ops (another summation order, FMA or not) carry
    to the output of this Q/DQ model.
--first-flip also names, per sample, the first QuantizeLinear whose int8 output differs between
quantkit and onnxruntime, with the two float inputs of the flipped element and their x / scale.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

from qkdev import realmodels
from qkdev import realmodels_table as table


def rel_rms(a, b):
    return float(np.sqrt(np.mean((a - b) ** 2)) / max(np.sqrt(np.mean(b ** 2)), 1e-12))


def safe_name(name):
    return "".join(c if c.isalnum() or c in ".-_" else "_" for c in name) or "_"


def session(path, level):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def run_quantkit(quantkit, model, feed, tmp, tag, dump=None):
    inputs = []
    for k, v in feed.items():
        p = os.path.join(tmp, f"{tag}_{safe_name(k)}.npy")
        np.save(p, v)
        inputs += ["--input", f"{k}={p}"]
    out_dir = os.path.join(tmp, f"out_{tag}")
    extra = ["--dump", dump] if dump else []
    subprocess.run([quantkit, "run", model, *inputs, "-o", out_dir, *extra], check=True, capture_output=True)
    return out_dir


# Ops whose float result depends on the implementation's rounding (exact ops such as Relu, Clip,
# Reshape, MaxPool are left out: every implementation gives the same bits).
NUDGED_OPS = {"Conv", "ConvTranspose", "MatMul", "Gemm", "BatchNormalization", "Add", "Sub", "Mul", "Div",
              "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Exp", "Log", "Sqrt", "Pow", "Softmax", "Resize",
              "AveragePool", "GlobalAveragePool", "ReduceMean", "LayerNormalization"}


def ulp_nudged(qdq, tmp):
    """A copy of the model whose float op outputs are multiplied by float32(1 + 2^-23)."""
    import onnx
    from onnx import helper, numpy_helper
    model = onnx.shape_inference.infer_shapes(onnx.load(qdq))
    graph = model.graph
    floats = {v.name for v in list(graph.value_info) + list(graph.output)
              if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT}
    one_up = numpy_helper.from_array(np.array(np.nextafter(np.float32(1), np.float32(2)), np.float32), "ulp_one_up")
    graph.initializer.append(one_up)
    nodes = []
    for n in graph.node:
        nodes.append(n)
        if n.op_type in NUDGED_OPS and n.output[0] in floats:
            raw = n.output[0] + "_before_ulp"
            final = n.output[0]
            n.output[0] = raw
            nodes.append(helper.make_node("Mul", [raw, "ulp_one_up"], [final]))
    del graph.node[:]
    graph.node.extend(nodes)
    path = os.path.join(tmp, "ulp_nudged.onnx")
    onnx.save(model, path)
    return path


def first_flip(quantkit, qdq, feed, tmp, tag):
    """The first QuantizeLinear (in graph order) whose output differs, as one line."""
    import onnx
    import onnxruntime as ort
    model = onnx.load(qdq)
    quants = [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    known = {o.name for o in model.graph.output}
    for n in quants:
        for name in (n.input[0], n.output[0]):
            if name not in known:
                model.graph.output.append(onnx.ValueInfoProto(name=name))
                known.add(name)
    path = os.path.join(tmp, f"{tag}_all_outputs.onnx")
    onnx.save(model, path)
    sess = session(path, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    ref = {o.name: v for o, v in zip(sess.get_outputs(), sess.run(None, feed))}
    out_dir = run_quantkit(quantkit, qdq, feed, tmp, tag + "_dump", dump="all")
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    flipped = 0
    first = None
    for n in quants:
        path_q = os.path.join(out_dir, safe_name(n.output[0]) + ".npy")
        if not os.path.exists(path_q):
            continue
        qk_q = np.load(path_q)
        if np.array_equal(qk_q, ref[n.output[0]]):
            continue
        flipped += 1
        if first is None and n.input[1] in inits:
            qk_x = np.load(os.path.join(out_dir, safe_name(n.input[0]) + ".npy"))
            ort_x = ref[n.input[0]]
            idx = tuple(np.argwhere(qk_q != ref[n.output[0]])[0])
            scale = np.float32(inits[n.input[1]].reshape(-1)[0])
            count = int(np.sum(qk_q != ref[n.output[0]]))
            first = (f"first flip {n.output[0]} ({count} of {qk_q.size} values): input {qk_x[idx]!r} vs "
                     f"{ort_x[idx]!r} ({int(np.sum(qk_x != ort_x))} of {qk_x.size} inputs differ), "
                     f"x/scale {np.float32(qk_x[idx]) / scale!r} vs {np.float32(ort_x[idx]) / scale!r}, "
                     f"q {qk_q[idx]} vs {ref[n.output[0]][idx]}")
    return f"{flipped} of {len(quants)} QuantizeLinear outputs differ; " + (first or "no flip")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("quantkit")
    ap.add_argument("qdq_dir")
    ap.add_argument("--models", default="ppocr_rec,ppocr_det,textline,seg_opset11")
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--first-flip", action="store_true")
    args = ap.parse_args()
    import onnxruntime as ort
    for name in [m for m in args.models.split(",") if m]:
        folder = realmodels.ensure(name)
        qdq = os.path.join(args.qdq_dir, name, "model.qdq.onnx")
        if not os.path.exists(qdq):
            print(f"{name}: no {qdq}")
            continue
        feeds = table.load_feeds(os.path.join(folder, "model.onnx"), os.path.join(folder, "val"))[:args.samples]
        disabled = session(qdq, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
        full = session(qdq, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
        first = disabled.get_outputs()[0].name
        qk_vs_ort, ort_vs_ort, ulp = [], [], []
        with tempfile.TemporaryDirectory() as tmp:
            nudged_session = session(ulp_nudged(qdq, tmp), ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
            for i, feed in enumerate(feeds):
                out_dir = run_quantkit(args.quantkit, qdq, feed, tmp, str(i))
                qk = np.load(os.path.join(out_dir, safe_name(first) + ".npy"))
                dis = disabled.run(None, feed)[0]
                qk_vs_ort.append(rel_rms(qk, dis))
                ort_vs_ort.append(rel_rms(full.run(None, feed)[0], dis))
                ulp.append(rel_rms(nudged_session.run(None, feed)[0], dis))
                if args.first_flip:
                    print(f"  {name} sample {i}: {first_flip(args.quantkit, qdq, feed, tmp, str(i))}")
        print(f"{name}: rel RMS quantkit vs ORT(disabled) {np.mean(qk_vs_ort):.4f} (max {np.max(qk_vs_ort):.4f}); "
              f"ORT(all) vs ORT(disabled) {np.mean(ort_vs_ort):.4f} (max {np.max(ort_vs_ort):.4f}); "
              f"ORT(float ops +1 ulp) vs ORT {np.mean(ulp):.4f} (max {np.max(ulp):.4f}); {len(feeds)} samples", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
