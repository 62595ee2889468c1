"""onnxruntime peer for bench/runtime/runtime_bench: median latency, batch 1, same models.

    .venv/bin/python bench/runtime/ort_latency.py [--threads N]
"""
import argparse
import glob
import os
import time

import numpy as np
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads (0: ORT default)")
    args = ap.parse_args()
    root = os.environ.get("QUANTKIT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "quantkit")
    for path in sorted(glob.glob(os.path.join(root, "models", "*.onnx"))):
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        x = np.random.RandomState(0).rand(1, 3, 224, 224).astype(np.float32)
        sess.run(None, {name: x})
        times = []
        deadline = time.time() + 2.0
        while time.time() < deadline or len(times) < 5:
            t0 = time.perf_counter()
            sess.run(None, {name: x})
            times.append(time.perf_counter() - t0)
        print(f"{os.path.basename(path)[:-5]:32s} ort median {1000 * np.median(times):8.2f} ms ({len(times)} runs)")


if __name__ == "__main__":
    main()
