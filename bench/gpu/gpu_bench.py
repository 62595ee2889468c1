"""The throughput table of issue 26 on a GPU machine, in one run (docs/gpu.md):

    python3 bench/gpu/gpu_bench.py build/cuda/tools/quantkit/quantkit --out results/

For resnet50 and vit_b_16 (224x224, FP32, random torchvision weights from
qkdev/export_torchvision.py, N(0, 1) inputs, batch --batch = 64):
  - quantkit eval (FP32), calibrate --method max, calibrate --method entropy, and eval of the
    calibrated Q/DQ model (the simulated INT8 pass), each run at --short (1024) and --samples
    (8192) samples: the steady-state throughput is (8192 - 1024) / (wall(8192) - wall(1024)),
    so process start, CUDA/cuDNN start-up and model load cancel out; the fixed start-up is
    wall(1024) - 1024 / steady (reported separately);
  - a bare PyTorch eager forward pass of the same architecture on the same device and data
    (TF32 off, as quantkit), timed over the --samples after three warm-up batches;
  - peak GPU memory of each quantkit run (nvidia-smi, every 50 ms; CUDA only);
and the targets: calibrate max >= 0.67x eager, entropy >= 0.5x, eval >= 0.8x, simulated INT8
pass <= 1.3x the FP32 pass (time per sample), start-up <= 1.5 s, and 1024 resnet50 samples
calibrated (max) in < 2 s wall, start-up included. throughput.json / throughput.md under --out
are rewritten after each model, so a run cut short keeps what it measured.
--device cpu with small --samples/--short/--batch runs every piece on a CPU machine (a dry run).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)  # qkdev: the repository's development scripts
SEED = 0
TARGETS = {"calibrate_max": 0.67, "calibrate_entropy": 0.5, "eval": 0.8}  # x eager throughput
SIM_TARGET = 1.3   # simulated INT8 pass time / FP32 pass time
STARTUP_TARGET = 1.5  # seconds
CALIB_1024_TARGET = 2.0  # seconds, resnet50, calibrate max, start-up included


class GpuMemory:
    """Peak 'memory.used' of GPU 0 while the block runs (MiB), from nvidia-smi; None without one."""

    def __init__(self, enabled):
        self.enabled = enabled and shutil.which("nvidia-smi") is not None

    def __enter__(self):
        self.peak, self.stop = None, False
        if self.enabled:
            self.thread = threading.Thread(target=self._poll, daemon=True)
            self.thread.start()
        return self

    def _poll(self):
        while not self.stop:
            out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                                  "-i", "0"], capture_output=True, text=True).stdout.strip()
            if out:
                self.peak = max(self.peak or 0, int(out.splitlines()[0]))
            time.sleep(0.05)

    def __exit__(self, *exc):
        self.stop = True
        if self.enabled:
            self.thread.join()


def timed(cmd, gpu):
    with GpuMemory(gpu) as mem:
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return wall, mem.peak


def eager_throughput(arch, data, batch, device):
    import torch
    import torchvision
    if device.startswith("cuda"):
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    torch.manual_seed(SEED)
    model = getattr(torchvision.models, arch)().to(device).eval()
    with torch.inference_mode():
        for _ in range(3):
            model(torch.from_numpy(data[:batch]).to(device))
        sync()
        t0 = time.perf_counter()
        for start in range(0, len(data), batch):
            model(torch.from_numpy(data[start:start + batch]).to(device))
        sync()
    return len(data) / (time.perf_counter() - t0)


def random_inputs(path, samples):
    """N(0, 1) float32 [samples, 3, 224, 224] as .npy, written in chunks (8192 samples: 4.9 GB)."""
    arr = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(samples, 3, 224, 224))
    rng = np.random.default_rng(SEED)
    for s in range(0, samples, 256):
        arr[s:s + 256] = rng.standard_normal((min(256, samples - s), 3, 224, 224), dtype=np.float32)
    arr.flush()
    del arr
    return np.load(path, mmap_mode="r")


def steady(args, cmd_for, key, row, gpu):
    """Runs cmd_for(samples) at --short and --samples; records steady throughput and start-up."""
    walls, peaks = [], []
    for n in (args.short, args.samples):
        wall, peak = timed(cmd_for(n), gpu)
        walls.append(wall)
        peaks.append(peak)
    per_s = (args.samples - args.short) / max(walls[1] - walls[0], 1e-9)
    row[f"{key}_samples_per_s"] = per_s
    row[f"{key}_startup_s"] = walls[0] - args.short / per_s
    row[f"{key}_wall_short_s"], row[f"{key}_wall_long_s"] = walls
    if peaks[1] is not None:
        row[f"{key}_peak_mib"] = max(p for p in peaks if p is not None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("quantkit")
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--models", default="resnet50,vit_b_16")
    ap.add_argument("--samples", type=int, default=8192)
    ap.add_argument("--short", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--profile", help="write where calibrate's time goes (first model; quantkit --profile) here")
    args = ap.parse_args()
    if not 0 < args.short < args.samples:
        raise SystemExit("need 0 < --short < --samples")
    os.makedirs(args.out, exist_ok=True)
    from qkdev import export_torchvision
    gpu = args.device.startswith("cuda")
    rows = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("QK_BENCH_TMP")) as work:
        data = random_inputs(os.path.join(work, "inputs.npy"), args.samples)
        spec = os.path.join(work, "inputs.npy")
        for name in [m for m in args.models.split(",") if m]:
            row = {"model": name, "device": args.device, "batch": args.batch, "samples": args.samples,
                   "short": args.short}
            try:
                t0 = time.perf_counter()
                model = export_torchvision.ensure(name, args.opset, log=lambda *a, **k: None)
                row["export_s"] = time.perf_counter() - t0
                common = ["--data", spec, "--batch-size", str(args.batch), "-q", "--device", args.device]
                steady(args, lambda n: [args.quantkit, "eval", model, "--samples", str(n)] + common, "eval", row, gpu)
                for method in ("max", "entropy"):
                    out = os.path.join(work, f"{name}.{method}")
                    steady(args, lambda n: [args.quantkit, "calibrate", model, "--method", method, "--samples", str(n),
                                            "--run-batch", str(args.batch), "-o", out] + common,
                           f"calibrate_{method}", row, gpu)
                qdq = os.path.join(work, f"{name}.max", "model.qdq.onnx")
                steady(args, lambda n: [args.quantkit, "eval", qdq, "--samples", str(n)] + common, "sim_int8", row, gpu)
                row["eager_samples_per_s"] = eager_throughput(name, data, args.batch, args.device)
                for key, target in TARGETS.items():
                    row[f"{key}_vs_eager"] = row[f"{key}_samples_per_s"] / row["eager_samples_per_s"]
                row["sim_vs_fp32_time"] = row["eval_samples_per_s"] / row["sim_int8_samples_per_s"]
                if args.short == 1024:
                    row["calibrate_max_1024_wall_s"] = row["calibrate_max_wall_short_s"]
            except Exception as e:  # keep the other model's row
                row["error"] = str(e)[-1500:]
            rows.append(row)
            print(json.dumps(row), flush=True)
            write_results(args.out, rows)
            if args.profile and len(rows) == 1 and "error" not in row:  # before the next model's rows
                profile(args, model, spec, work)
    return 1 if any("error" in r for r in rows) else 0


def profile(args, model, spec, work):
    """Where calibrate's time goes: `quantkit --profile` (torch's profiler: host ATen ops, CUDA
    kernels, copies, synchronisations, one scope per node) around one calibrate --method max run
    of 2048 samples, summed by bench/gpu/trace_summary.py into --profile's file (markdown)."""
    trace = os.path.join(work, "calibrate.trace.json")
    cmd = [args.quantkit, "calibrate", model, "--method", "max", "--samples", "2048", "--run-batch",
           str(args.batch), "--data", spec, "--batch-size", str(args.batch), "-q", "--device", args.device,
           "-o", os.path.join(work, "profiled"), "--profile", trace]
    summary = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trace_summary.py")
    with open(args.profile, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        t0 = time.perf_counter()
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        f.write(f"exit {r.returncode} after {time.perf_counter() - t0:.1f} s\n{r.stdout[-4000:]}\n")
        f.flush()
        if r.returncode == 0:
            s = subprocess.run([sys.executable, summary, trace, "--markdown", "--top", "30"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
            f.write(s.stdout)


def write_results(out, rows):
    with open(os.path.join(out, "throughput.json"), "w") as f:
        json.dump({"rows": rows, "targets": {**{f"{k}_vs_eager": v for k, v in TARGETS.items()},
                                              "sim_vs_fp32_time": SIM_TARGET, "startup_s": STARTUP_TARGET,
                                              "calibrate_max_1024_wall_s (resnet50)": CALIB_1024_TARGET}},
                  f, indent=2, sort_keys=True)

    def cell(r, k, fmt="{:.3g}"):
        return fmt.format(r[k]) if k in r else "-"

    lines = ["| model | eval | calibrate max | calibrate entropy | sim. INT8 | eager | max / eager (>= 0.67) | "
             "entropy / eager (>= 0.5) | eval / eager (>= 0.8) | sim / FP32 time (<= 1.3) | start-up s "
             "(eval / max / entropy, <= 1.5) | calibrate max 1024 wall s | peak MiB (max / entropy) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | failed: {r['error'].splitlines()[0][:120]} |" + " |" * 11)
            continue
        lines.append(" | ".join([
            f"| {r['model']}", cell(r, "eval_samples_per_s"), cell(r, "calibrate_max_samples_per_s"),
            cell(r, "calibrate_entropy_samples_per_s"), cell(r, "sim_int8_samples_per_s"), cell(r, "eager_samples_per_s"),
            cell(r, "calibrate_max_vs_eager", "{:.2f}"), cell(r, "calibrate_entropy_vs_eager", "{:.2f}"),
            cell(r, "eval_vs_eager", "{:.2f}"), cell(r, "sim_vs_fp32_time", "{:.2f}"),
            " / ".join(cell(r, f"{k}_startup_s", "{:.2f}") for k in ("eval", "calibrate_max", "calibrate_entropy")),
            cell(r, "calibrate_max_1024_wall_s", "{:.2f}"),
            f"{cell(r, 'calibrate_max_peak_mib', '{:.0f}')} / {cell(r, 'calibrate_entropy_peak_mib', '{:.0f}')} |"]))
    with open(os.path.join(out, "throughput.md"), "w") as f:
        f.write(f"### Throughput, samples/s steady state ({rows[0]['short']} -> {rows[0]['samples']} samples, batch "
                f"{rows[0]['batch']}, {rows[0]['device']})\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
