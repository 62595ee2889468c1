"""onnxruntime -> quantkit migration, measured side by side (docs/python.md).

The same script calls quantize_static twice with the same arguments; only the import differs:

    from onnxruntime.quantization import quantize_static     # peer
    from quantkit.ort import quantize_static                  # quantkit

Each run is a child process (its own peak RSS and CPU time). Accuracy: top-1 of each Q/DQ model
on the Fashion-MNIST test split with onnxruntime (qkdev/zoo/eval_ort.py), next to FP32.

  PYTHONPATH=build/dev/python .venv/bin/python bench/python_migration.py [--model resnet_small]
      [--calib 512] [--per-channel]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # qkdev: the repository's development scripts

CHILD = r'''
import sys
import numpy as np
sys.path.insert(0, sys.argv[5])
from qkdev.zoo import data
from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType
if sys.argv[1] == "ort":
    from onnxruntime.quantization import quantize_static
else:
    from quantkit.ort import quantize_static

class Reader(CalibrationDataReader):
    def __init__(self, x, batch=32):
        self.batches = iter([x[i:i + batch] for i in range(0, len(x), batch)])
    def get_next(self):
        b = next(self.batches, None)
        return None if b is None else {"input": b}

x, _ = data.load_split("calib")
x = np.ascontiguousarray(x[:int(sys.argv[4])])
quantize_static(sys.argv[2], sys.argv[3], Reader(x), quant_format=QuantFormat.QDQ,
                per_channel=sys.argv[6] == "1", activation_type=QuantType.QInt8,
                weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax)
'''


def run(tool, model, out, calib, per_channel):
    """Wall time, CPU time (user+sys) and peak RSS of one child (os.wait4: that child's own)."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", CHILD, tool, model, out, str(calib),
                              ROOT, "1" if per_channel else "0"])
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if child.returncode != 0:
        raise SystemExit(f"{tool} failed with exit code {child.returncode}")
    return {"wall_s": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mib": round(usage.ru_maxrss / 1024)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet_small")
    ap.add_argument("--calib", type=int, default=512)
    ap.add_argument("--per-channel", action="store_true")
    args = ap.parse_args()
    from qkdev.zoo import data, eval_ort
    model = os.path.join(ROOT, "models", "zoo", f"{args.model}.onnx")
    x, y = data.load_split("test")
    rows = {"fp32": {"top1": eval_ort.evaluate(model, x, y)[0]}}
    with tempfile.TemporaryDirectory() as d:
        for tool in ("ort", "quantkit"):
            out = os.path.join(d, f"{tool}.qdq.onnx")
            rows[tool] = run(tool, model, out, args.calib, args.per_channel)
            rows[tool]["top1"] = eval_ort.evaluate(out, x, y)[0]
    print(json.dumps({"model": args.model, "calib_samples": args.calib, "per_channel": args.per_channel,
                      "test_samples": len(y), "results": rows}, indent=1))


if __name__ == "__main__":
    main()
