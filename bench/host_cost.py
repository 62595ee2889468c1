"""Host costs a user feels before and around the compute (issue 45), measured on the CPU:

    .venv/bin/python bench/host_cost.py --quantkit build/dev/tools/quantkit/quantkit [--quick]

1. Start-up, by differences of commands that each do one step more (median of --repeats children,
   wall seconds):
     version     `quantkit --version`: the process and its libraries (libtorch) loaded
     inspect     `quantkit inspect M`: + the model read and imported (protobuf -> IR)
     eval 1      `quantkit eval M --data X --samples 1`: + the interpreter built, the data opened, one
                 sample run (the first batch done)
     calibrate 1 `quantkit calibrate M --data X --samples 1 --no-check`: + statistics, the plan and
                 every artifact written (the fixed cost after the last batch)
   on the zoo's plain CNN and torchvision resnet50 (random weights). Target: process start -> first
   batch <= 0.5 s, calibrate's fixed cost after the last batch <= 0.5 s.
2. Host cost per node: a chain of 1000 tiny nodes (Add/Mul on [1] tensors) where a run is pure
   dispatch. Per run: quantkit eval (batch 1; (wall(N) - wall(1)) / (N - 1), start-up cancelled),
   quantkit calibrate --method max (every tensor observed), and onnxruntime's session.run (timed in
   process over the same N runs). Target: quantkit within 2x of onnxruntime per node.
Each row prints the ratio against its peer or target; nothing here is asserted (benchmarks, not tests).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # qkdev

CHAIN_NODES = 1000
START_TARGET_S = 0.5


def wall(cmd, repeats):
    """Median wall seconds of `repeats` children running cmd (each must exit 0)."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        times.append(time.perf_counter() - t)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:4])}: exit {p.returncode}: {p.stderr.strip()[-300:]}")
    return statistics.median(times)


def model_input(path):
    import onnx
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    inp = next(i for i in m.graph.input if i.name not in inits)
    dims = [d.dim_value if d.dim_value > 0 else 1 for d in inp.type.tensor_type.shape.dim]
    return inp.name, dims


def startup_rows(qk, name, path, tmp, repeats):
    import numpy as np
    _, dims = model_input(path)
    data = os.path.join(tmp, f"{name}.npy")
    np.save(data, np.random.default_rng(0).standard_normal([2] + dims[1:]).astype(np.float32))
    steps = [
        ("version", [qk, "--version"]),
        ("inspect", [qk, "inspect", path]),
        ("eval 1", [qk, "eval", path, "--data", data, "--samples", "1", "-q"]),
        ("calibrate 1", [qk, "calibrate", path, "--data", data, "--samples", "1", "--no-check", "-q", "-o",
                         os.path.join(tmp, f"{name}_out")]),
    ]
    previous = 0.0
    print(f"{name}:")
    totals = {}
    for label, cmd in steps:
        t = wall(cmd, repeats)
        totals[label] = t
        print(f"  {label:<12} {t:6.3f} s  (+{t - previous:6.3f} s)")
        previous = t
    first = totals["eval 1"]
    fixed = totals["calibrate 1"] - totals["eval 1"]
    print(f"  start -> first batch {first:.3f} s: {first / START_TARGET_S:.2f}x the {START_TARGET_S} s target; "
          f"calibrate's fixed cost after it {fixed:.3f} s: {fixed / START_TARGET_S:.2f}x the target")


def chain_model(path):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    nodes, inits = [], []
    prev = "x"
    for i in range(CHAIN_NODES):
        c = f"c{i}"
        inits.append(numpy_helper.from_array(np.array([1.0 + 1e-4 * (i % 7)], np.float32), c))
        out = f"t{i}" if i + 1 < CHAIN_NODES else "y"
        nodes.append(helper.make_node("Add" if i % 2 == 0 else "Mul", [prev, c], [out], name=f"n{i}"))
        prev = out
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)


def per_node_rows(qk, tmp, runs, repeats):
    import numpy as np
    import onnxruntime as ort
    path = os.path.join(tmp, "chain.onnx")
    chain_model(path)
    data = os.path.join(tmp, "chain.npy")
    np.save(data, np.random.default_rng(0).standard_normal((runs, 1)).astype(np.float32))

    def per_run(cmd_for):
        one, many = wall(cmd_for(1), repeats), wall(cmd_for(runs), repeats)
        return (many - one) / (runs - 1)

    ev = per_run(lambda n: [qk, "eval", path, "--data", data, "--samples", str(n), "--batch-size", "1", "-q"])
    cal = per_run(lambda n: [qk, "calibrate", path, "--data", data, "--samples", str(n), "--batch-size", "1",
                             "--run-batch", "1", "--no-check", "-q", "-o", os.path.join(tmp, f"chain_{n}")])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    x = np.load(data)
    for i in range(20):  # warm-up
        sess.run(None, {"x": x[i:i + 1]})
    t = time.perf_counter()
    for i in range(runs):
        sess.run(None, {"x": x[i:i + 1]})
    ort_run = (time.perf_counter() - t) / runs
    us = 1e6 / CHAIN_NODES
    print(f"chain of {CHAIN_NODES} [1]-element nodes, {runs} runs of batch 1 (per node, host only):")
    print(f"  onnxruntime session.run          {ort_run * us:7.2f} us")
    print(f"  quantkit eval                    {ev * us:7.2f} us  {ev / ort_run:5.2f}x onnxruntime (target <= 2x)")
    print(f"  quantkit calibrate (all observed) {cal * us:6.2f} us  {cal / ort_run:5.2f}x onnxruntime, "
          f"{cal / ev:4.2f}x its eval")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quantkit", required=True)
    ap.add_argument("--quick", action="store_true", help="the zoo model only, fewer repeats and runs")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--runs", type=int, default=200)
    a = ap.parse_args()
    repeats, runs = (3, 100) if a.quick else (a.repeats, a.runs)
    models = [("plain_cnn", os.path.join(ROOT, "models", "zoo", "plain_cnn.onnx"))]
    if not a.quick:
        from qkdev import export_torchvision
        models.append(("resnet50", export_torchvision.ensure("resnet50", 13, log=lambda *x, **k: None)))
    with tempfile.TemporaryDirectory(prefix="qk_host_") as tmp:
        print(f"== start-up (median of {repeats} children)")
        for name, path in models:
            startup_rows(a.quantkit, name, path, tmp, repeats)
        print("== host cost per node")
        per_node_rows(a.quantkit, tmp, runs, repeats)


if __name__ == "__main__":
    main()
