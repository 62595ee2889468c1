"""Checks every model of models/zoo/manifest.json with onnxruntime (ctest e2e_zoo_manifest_ort).

For each model: the file's sha256 equals the manifest's; onnxruntime (ORT_DISABLE_ALL, one
thread, qkdev/zoo/eval_ort.py) gives the manifest's test top-1 and top-5 exactly and the same
argmax for every test image as the committed <name>.test_pred.npy. For QAT models: the file
holds QuantizeLinear/DequantizeLinear pairs with int8 zero points that are all 0, as recorded.
Exits 1 with one line per failure.
"""
import json
import os
import sys
import time

import numpy as np

from qkdev.zoo import data, eval_ort
from qkdev.zoo.onnx_util import qdq_summary, sha256

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def main():
    t0 = time.time()
    with open(os.path.join(REPO, "models", "zoo", "manifest.json")) as f:
        manifest = json.load(f)
    x, y = data.load_split("test")
    failures = []
    if not manifest["models"]:
        failures.append("manifest lists no models")
    for name, entry in sorted(manifest["models"].items()):
        path = os.path.join(REPO, entry["file"])
        if sha256(path) != entry["sha256"]:
            failures.append(f"{name}: sha256 of {entry['file']} differs from the manifest")
            continue
        top1, top5, pred = eval_ort.evaluate(path, x, y)
        want = np.load(os.path.join(REPO, entry["test_pred"]))
        flips = int(np.count_nonzero(pred != want))
        ok = round(top1, 4) == entry["test_top1"] and round(top5, 4) == entry["test_top5"] and flips == 0
        print(f"{name}: top-1 {100 * top1:.2f}% (manifest {100 * entry['test_top1']:.2f}%), "
              f"top-5 {100 * top5:.2f}%, {flips} predictions differ {'OK' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"{name}: onnxruntime top-1 {top1:.4f} top-5 {top5:.4f}, {flips} changed predictions; "
                            f"manifest top-1 {entry['test_top1']} top-5 {entry['test_top5']}")
        if "qat" in entry:
            qdq = qdq_summary(path)
            print(f"{name}: {qdq}")
            if qdq["quantize_linear"] == 0 or qdq["quantize_linear"] != qdq["dequantize_linear"]:
                failures.append(f"{name}: expected Q/DQ pairs, found {qdq}")
            if qdq["zero_point_dtypes"] != ["INT8"] or qdq["nonzero_zero_points"] != 0:
                failures.append(f"{name}: zero points must be int8 and 0, found {qdq}")
            if qdq != entry["qat"]["qdq"]:
                failures.append(f"{name}: Q/DQ summary {qdq} differs from the manifest {entry['qat']['qdq']}")
    print(f"checked {len(manifest['models'])} models in {time.time() - t0:.1f}s")
    for line in failures:
        print("FAIL", line, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
