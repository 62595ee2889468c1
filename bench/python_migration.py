"""onnxruntime -> quantkit migration, measured side by side (docs/python.md).

The same script calls quantize_static twice with the same arguments; only the import differs:

    from onnxruntime.quantization import quantize_static     # peer
    from quantkit.ort import quantize_static                  # quantkit

Each run is a child process (its own peak RSS and CPU time). Accuracy: top-1 of each Q/DQ model
on the Fashion-MNIST test split with onnxruntime (qkdev/zoo/eval_ort.py), and the file size of
each model, next to FP32. Run it with the interpreter of the onnxruntime to compare with (a venv
with the quantkit wheel and onnxruntime 1.32: docs/python.md, "Side by side").

  PYTHONPATH=build/dev/python .venv/bin/python bench/python_migration.py [--model resnet_small]
      [--calib 512] [--per-channel] [--omp-wait-policy active|passive]
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


def run(tool, model, out, calib, per_channel, wait_policy=None):
    """Wall time, CPU time (user+sys) and peak RSS of one child (os.wait4: that child's own).
    ``wait_policy``: OMP_WAIT_POLICY for the child (None: unset, each library's default)."""
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    if wait_policy:
        env["OMP_WAIT_POLICY"] = wait_policy
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", CHILD, tool, model, out, str(calib),
                              ROOT, "1" if per_channel else "0"], env=env)
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
    ap.add_argument("--omp-wait-policy", choices=["active", "passive"],
                    help="OMP_WAIT_POLICY of both runs (default: unset; quantkit then sets passive)")
    args = ap.parse_args()
    from qkdev.zoo import data, eval_ort
    model = os.path.join(ROOT, "models", "zoo", f"{args.model}.onnx")
    x, y = data.load_split("test")
    rows = {"fp32": {"top1": eval_ort.evaluate(model, x, y)[0], "size_kib": round(os.path.getsize(model) / 1024)}}
    with tempfile.TemporaryDirectory() as d:
        for tool in ("ort", "quantkit"):
            out = os.path.join(d, f"{tool}.qdq.onnx")
            rows[tool] = run(tool, model, out, args.calib, args.per_channel, args.omp_wait_policy)
            rows[tool]["top1"] = eval_ort.evaluate(out, x, y)[0]
            rows[tool]["size_kib"] = round(os.path.getsize(out) / 1024)
    import onnxruntime
    print(json.dumps({"onnxruntime": onnxruntime.__version__, "model": args.model, "calib_samples": args.calib, "per_channel": args.per_channel, "omp_wait_policy": args.omp_wait_policy,
                      "test_samples": len(y), "results": rows}, indent=1))


if __name__ == "__main__":
    main()
