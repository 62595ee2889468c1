"""Issue 20 item 10: how far quantkit's execution of a Q/DQ model drifts from onnxruntime's, beside
onnxruntime's own disagreement between its optimization levels, on the real-model test set.

    .venv/bin/python python/realmodels_drift.py build/dev/tools/quantkit/quantkit QDQ_DIR [--models a,b]

QDQ_DIR/<model>/model.qdq.onnx must exist (python/realmodels_table.py --keep QDQ_DIR writes them).
For each val sample: relative RMS of the first output between quantkit (`quantkit run`) and
onnxruntime with graph optimizations disabled (it then executes the Q/DQ arithmetic as written),
and between onnxruntime disabled vs all optimizations (its fused int8 kernels).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import realmodels  # noqa: E402
import realmodels_table as table  # noqa: E402


def rel_rms(a, b):
    return float(np.sqrt(np.mean((a - b) ** 2)) / max(np.sqrt(np.mean(b ** 2)), 1e-12))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("quantkit")
    ap.add_argument("qdq_dir")
    ap.add_argument("--models", default="ppocr_rec,ppocr_det,textline,seg_opset11")
    ap.add_argument("--samples", type=int, default=4)
    args = ap.parse_args()
    import onnxruntime as ort
    for name in [m for m in args.models.split(",") if m]:
        folder = realmodels.ensure(name)
        qdq = os.path.join(args.qdq_dir, name, "model.qdq.onnx")
        if not os.path.exists(qdq):
            print(f"{name}: no {qdq}")
            continue
        feeds = table.load_feeds(os.path.join(folder, "model.onnx"), os.path.join(folder, "val"))[:args.samples]
        sessions = {}
        for level, opt in (("disabled", ort.GraphOptimizationLevel.ORT_DISABLE_ALL),
                           ("all", ort.GraphOptimizationLevel.ORT_ENABLE_ALL)):
            so = ort.SessionOptions()
            so.graph_optimization_level = opt
            so.intra_op_num_threads = 1
            sessions[level] = ort.InferenceSession(qdq, so, providers=["CPUExecutionProvider"])
        qk_vs_ort, ort_vs_ort = [], []
        with tempfile.TemporaryDirectory() as tmp:
            for i, feed in enumerate(feeds):
                inputs = []
                for k, v in feed.items():
                    p = os.path.join(tmp, f"{i}_{k}.npy")
                    np.save(p, v)
                    inputs += ["--input", f"{k}={p}"]
                out_dir = os.path.join(tmp, f"out{i}")
                subprocess.run([args.quantkit, "run", qdq, *inputs, "-o", out_dir], check=True, capture_output=True)
                first = sessions["disabled"].get_outputs()[0].name
                safe = "".join(c if c.isalnum() or c in ".-_" else "_" for c in first) or "_"
                qk = np.load(os.path.join(out_dir, safe + ".npy"))
                dis = sessions["disabled"].run(None, feed)[0]
                full = sessions["all"].run(None, feed)[0]
                qk_vs_ort.append(rel_rms(qk, dis))
                ort_vs_ort.append(rel_rms(full, dis))
        print(f"{name}: rel RMS quantkit vs ORT(disabled) {np.mean(qk_vs_ort):.4f} (max {np.max(qk_vs_ort):.4f}); "
              f"ORT(all) vs ORT(disabled) {np.mean(ort_vs_ort):.4f} (max {np.max(ort_vs_ort):.4f}); "
              f"{len(feeds)} samples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
