"""Peer benchmark: calibration with quantkit vs onnxruntime.quantization.quantize_static.

Same model, same data, same method (entropy, max), one process per run so peak RSS is the run's
own (resource.getrusage of the child). Prints a table with the ratios ORT/quantkit.

  .venv/bin/python bench/peer_calibrate.py --quantkit build/dev/tools/quantkit/quantkit \
      [--models plain_cnn,resnet18] [--samples 256,1024,4096] [--methods entropy,max]

Data: plain_cnn uses the Fashion-MNIST training images (preprocessed as the zoo declares);
resnet18 (torchvision, random weights, 224x224) uses seeded random images: the benchmark is
about speed and memory, not accuracy. ORT runs with its defaults for the method (entropy:
num_bins=128 as quantize_static forwards no bin options; see calibration-spec §2.3) and per-tensor
symmetric activations, QDQ format; quantkit runs `calibrate -o` (all artifacts).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # qkdev: the repository's development scripts

ORT_CHILD = r'''
import sys, numpy as np
from onnxruntime.quantization import quantize_static, CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType
model, data, out, method, batch = sys.argv[1:6]
x = np.load(data, mmap_mode="r")
batch = int(batch)
class R(CalibrationDataReader):
    def __init__(self): self.i = 0
    def get_next(self):
        if self.i >= len(x): return None
        b = np.ascontiguousarray(x[self.i:self.i + batch]); self.i += batch
        return {NAME: b}
import onnx
NAME = onnx.load(model, load_external_data=False).graph.input[0].name
quantize_static(model, out, R(), quant_format=QuantFormat.QDQ, per_channel=True,
                activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                calibrate_method=CalibrationMethod.Entropy if method == "entropy" else CalibrationMethod.MinMax,
                extra_options={"ActivationSymmetric": True})
'''


def measure(cmd):
    """Runs cmd as a child; returns (wall seconds, peak RSS bytes of that child alone)."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{cmd[:3]} failed: {err[-2000:]}")
    return dt, usage.ru_maxrss * 1024  # Linux: KiB


def model_and_data(name, n, workdir):
    """Writes the data from a separate process: a forked child's peak RSS starts at its parent's,
    so the measuring process must stay small."""
    path = os.path.join(workdir, f"{name}_{n}.npy")
    out = subprocess.run([sys.executable, __file__, "--make-data", name, str(n), path],
                         check=True, capture_output=True, text=True).stdout.strip().splitlines()
    return out[-1], path


def make_data(name, n, path):
    import numpy as np
    if name == "plain_cnn":
        from qkdev.zoo import data as zoo_data
        x, _ = zoo_data.load_split("train")
        x = x[:n]
        model = os.path.join(ROOT, "models", "zoo", "plain_cnn.onnx")
    else:
        from qkdev import export_torchvision
        model = export_torchvision.ensure(name, 13)
        x = np.random.default_rng(0).standard_normal((n, 3, 224, 224), dtype=np.float32)
    np.save(path, x)
    print(model)


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--make-data":
        make_data(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--quantkit", required=True)
    ap.add_argument("--models", default="plain_cnn,resnet18")
    ap.add_argument("--samples", default="256,1024,4096")
    ap.add_argument("--methods", default="entropy,max")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--max-ort-samples", type=int, default=1 << 30,
                    help="skip ORT above this many samples (its memory grows with the sample count)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name in args.models.split(","):
            for n in map(int, args.samples.split(",")):
                model, data = model_and_data(name, n, d)
                for method in args.methods.split(","):
                    qk_t, qk_m = measure([args.quantkit, "calibrate", model, "--data", data, "--method", method,
                                               "--batch-size", str(args.batch), "-o", os.path.join(d, "qk"), "-q"])
                    if n <= args.max_ort_samples:
                        ort_t, ort_m = measure([sys.executable, "-c", ORT_CHILD, model, data,
                                                     os.path.join(d, "ort.onnx"), method, str(args.batch)])
                    else:
                        ort_t = ort_m = float("nan")
                    rows.append((name, n, method, qk_t, qk_m, ort_t, ort_m))
                    r = rows[-1]
                    print(f"{r[0]:<10} {r[1]:>6} {r[2]:<8} quantkit {r[3]:7.1f}s {r[4]/2**20:7.0f} MiB | "
                          f"onnxruntime {r[5]:7.1f}s {r[6]/2**20:7.0f} MiB | speedup {r[5]/r[3]:5.2f}x, "
                          f"memory {r[6]/r[4]:5.2f}x", flush=True)
    print("\nmodel      samples method   quantkit s  MiB    ORT s     MiB   ORT/qk time  ORT/qk memory")
    for r in rows:
        print(f"{r[0]:<10} {r[1]:>7} {r[2]:<8} {r[3]:9.1f} {r[4]/2**20:6.0f} {r[5]:8.1f} {r[6]/2**20:7.0f} "
              f"{r[5]/r[3]:11.2f} {r[6]/r[4]:13.2f}")


if __name__ == "__main__":
    main()
