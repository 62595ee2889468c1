"""FP32 latency, quantkit's interpreter vs onnxruntime, side by side in one run.

    .venv/bin/python bench/runtime/ort_latency.py --runtime-bench build/dev/bench/runtime/runtime_bench \
        [--models resnet18,mobilenet_v2,...] [--threads 2]

Both run the same exported torchvision models (qkdev/export_torchvision.py, opset 13, random
weights) on the same float32 [B, 3, 224, 224] input at batch 1 and 8 with the same number of
threads (ATen's default is the core count; onnxruntime is given --threads intra-op threads,
default the core count). quantkit's numbers come from runtime_bench (Google Benchmark, mean
over >= 2 s), onnxruntime's from the median of repeated runs after a warm-up, graph
optimizations at ORT's default level (what users run). Prints ms per batch and ort/quantkit.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))  # qkdev
from qkdev import export_torchvision  # noqa: E402

CNNS = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_1", "shufflenet_v2_x1_0"]


def ort_ms(path, batch, threads, min_seconds=2.0):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    x = np.random.RandomState(0).rand(batch, 3, 224, 224).astype(np.float32)
    sess.run(None, {name: x})
    times = []
    start = time.perf_counter()
    while time.perf_counter() - start < min_seconds or len(times) < 3:
        t = time.perf_counter()
        sess.run(None, {name: x})
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runtime-bench", required=True)
    ap.add_argument("--models", default=",".join(CNNS))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    names = args.models.split(",")
    paths = {n: export_torchvision.ensure(n, 13, log=lambda *a, **k: None) for n in names}
    stems = "|".join(os.path.splitext(os.path.basename(p))[0].replace(".", "\\.") for p in paths.values())
    env = dict(os.environ, QUANTKIT_CACHE=os.path.dirname(os.path.dirname(next(iter(paths.values())))))
    out = subprocess.run([args.runtime_bench, f"--benchmark_filter=^({stems})/", "--benchmark_format=json"],
                         check=True, capture_output=True, text=True, env=env).stdout
    # Names look like "resnet18.opset13/8/min_time:2.000"; times are in ms (Unit set in C++).
    qk = {b["name"].split("/min_time")[0]: b["real_time"] for b in json.loads(out)["benchmarks"]}
    print(f"{'model':<22}{'batch':>6}{'quantkit ms':>13}{'ort ms':>10}{'quantkit/ort':>14}")
    for n, p in paths.items():
        stem = os.path.splitext(os.path.basename(p))[0]
        for batch in (1, 8):
            q = qk.get(f"{stem}/{batch}")
            o = ort_ms(p, batch, args.threads)
            ratio = f"{q / o:13.2f}x" if q else "          n/a"
            print(f"{n:<22}{batch:>6}{(q or float('nan')):>13.1f}{o:>10.1f}{ratio}", flush=True)


if __name__ == "__main__":
    main()
