"""The measurements of issue 16 on a GPU machine, in one run (docs/gpu.md):

    python3 bench/gpu/gpu_bench.py build/cuda/tools/quantkit/quantkit --out results/

For resnet50 and vit_b_16 (224x224, batch 64, FP32, random torchvision weights from
qkdev/export_torchvision.py) and the zoo's resnet_small (Fashion-MNIST):
  - quantkit eval FP32 throughput on the GPU (samples/s; wall time includes model load),
  - quantkit calibrate throughput on the GPU, --method max and --method entropy,
  - a bare PyTorch CUDA eager forward pass of the same architecture (TF32 off, as quantkit),
  - onnxruntime CPU quantize_static on the same data (MinMax; contrast only),
  - peak GPU memory of each quantkit run (nvidia-smi, sampled every 50 ms),
and the issue's targets: calibrate >= 0.67x the eager forward throughput (max and entropy), and
1024 resnet50 samples calibrated in under 10 s wall, model load included.
Writes results.json and results.md (the table for docs/gpu.md) into --out.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)  # qkdev: the repository's development scripts
BATCH = 64
SAMPLES = 1024
SEED = 0


class GpuMemory:
    """Peak 'memory.used' of GPU 0 while the block runs (MiB), from nvidia-smi."""

    def __enter__(self):
        self.peak, self.stop = 0, False
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()
        return self

    def _poll(self):
        while not self.stop:
            out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                                  "-i", "0"], capture_output=True, text=True).stdout.strip()
            if out:
                self.peak = max(self.peak, int(out.splitlines()[0]))
            time.sleep(0.05)

    def __exit__(self, *exc):
        self.stop = True
        self.thread.join()


def timed(cmd):
    with GpuMemory() as mem:
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
    return wall, mem.peak


def eager_throughput(arch, data):
    import torch
    import torchvision
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(SEED)
    model = getattr(torchvision.models, arch)().cuda().eval()
    x = torch.from_numpy(data[:BATCH]).cuda()
    with torch.inference_mode():
        for _ in range(3):
            model(x)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        n = 0
        for start in range(0, len(data), BATCH):
            model(torch.from_numpy(data[start:start + BATCH]).cuda(non_blocking=False))
            n += min(BATCH, len(data) - start)
        torch.cuda.synchronize()
    return n / (time.perf_counter() - t0)


def ort_quantize_static(model_path, data, samples):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(range(0, samples, BATCH))

        def get_next(self):
            s = next(self.it, None)
            return None if s is None else {"input": data[s:s + BATCH]}

    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        quantize_static(model_path, os.path.join(d, "q.onnx"), Reader(), quant_format=QuantFormat.QDQ)
        return samples / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("quantkit")
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="resnet50,vit_b_16,resnet_small")
    ap.add_argument("--ort-samples", type=int, default=128, help="samples for onnxruntime (CPU, slow)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    from qkdev import export_torchvision
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for name in args.models.split(","):
            if name == "resnet_small":
                model, data_spec, arch = os.path.join(ROOT, "models/zoo/resnet_small.onnx"), "fashion-mnist:train", None
                data = None
            else:
                model = export_torchvision.ensure(name, 17)
                rng = np.random.default_rng(SEED)
                data = rng.standard_normal((SAMPLES, 3, 224, 224), dtype=np.float32)
                data_spec = os.path.join(work, f"{name}.npy")
                np.save(data_spec, data)
                arch = name
            row = {"model": name}
            common = ["--data", data_spec, "--samples", str(SAMPLES), "--batch-size", str(BATCH), "-q",
                      "--device", "cuda"]
            wall, mem = timed([args.quantkit, "eval", model] + common)
            row["eval_samples_per_s"], row["eval_wall_s"], row["eval_peak_mib"] = SAMPLES / wall, wall, mem
            for method in ("max", "entropy"):
                wall, mem = timed([args.quantkit, "calibrate", model, "--method", method, "-o",
                                   os.path.join(work, f"{name}.{method}")] + common)
                row[f"calibrate_{method}_samples_per_s"] = SAMPLES / wall
                row[f"calibrate_{method}_wall_s"], row[f"calibrate_{method}_peak_mib"] = wall, mem
            if arch is not None:
                row["eager_samples_per_s"] = eager_throughput(arch, data)
                row["ort_cpu_quantize_static_samples_per_s"] = ort_quantize_static(model, data, args.ort_samples)
                for method in ("max", "entropy"):
                    row[f"target_{method}_ratio"] = row[f"calibrate_{method}_samples_per_s"] / row["eager_samples_per_s"]
            rows.append(row)
            print(json.dumps(row), flush=True)
            write_results(args.out, rows)  # after each model: a run cut short keeps what it measured


def write_results(out, rows):
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"batch": BATCH, "samples": SAMPLES, "rows": rows}, f, indent=2, sort_keys=True)
    cols = ["eval_samples_per_s", "calibrate_max_samples_per_s", "calibrate_entropy_samples_per_s",
            "eager_samples_per_s", "target_max_ratio", "target_entropy_ratio", "calibrate_max_wall_s",
            "ort_cpu_quantize_static_samples_per_s", "eval_peak_mib", "calibrate_entropy_peak_mib"]
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("| model | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols) + "\n")
        for r in rows:
            f.write(f"| {r['model']} | " + " | ".join(f"{r[c]:.3g}" if c in r else "-" for c in cols) + " |\n")


if __name__ == "__main__":
    main()
