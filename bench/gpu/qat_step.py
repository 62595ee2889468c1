"""One QAT step of quantkit against one eager PyTorch QAT step, same architecture, same device
(issue 26, item 4: quantkit <= 1.5x the eager step):

    python3 bench/gpu/qat_step.py build/cuda/tools/quantkit/quantkit --device cuda --out results/

quantkit: `quantkit qat` on the torchvision export of --arch (random weights,
qkdev/export_torchvision.py), label-free MSE distillation from the FP32 model, AdamW, batch
--batch, [3, 224, 224] N(0, 1) inputs, run twice (--steps S1 and S2, calibration on --calib
samples); the step time is the difference of the two wall times over S2 - S1, so process start,
model load, calibration and export cancel out. Eager: the same torchvision architecture with
fake quantization of weights (per channel) and activations (torch.ao.quantization's QAT
preparation, FX), the FP32 copy as teacher, one step = teacher forward (no grad) + student
forward + MSE + backward + AdamW step, timed over S2 - S1 steps after S1 warm-up steps
(synchronised). TF32 off on both sides. Writes qat.json and qat.md under --out.
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)  # qkdev
TARGET = 1.5  # quantkit step / eager step


def quantkit_wall(quantkit, model, data, steps, batch, calib, device, out):
    cmd = [quantkit, "qat", model, "--data", data, "--steps", str(steps), "--batch-size", str(batch),
           "--calib-samples", str(calib), "--method", "max", "--loss", "mse", "--warmup", "0", "-q", "-o", out,
           "--device", device]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return wall


def eager_step_seconds(arch, data, batch, warmup, steps, device):
    import torch
    import torchvision
    from torch.ao.quantization import get_default_qat_qconfig_mapping
    from torch.ao.quantization.quantize_fx import prepare_qat_fx
    if device.startswith("cuda"):
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    teacher = getattr(torchvision.models, arch)().eval()
    example = (torch.from_numpy(data[:batch]),)
    student = prepare_qat_fx(copy.deepcopy(teacher).train(), get_default_qat_qconfig_mapping("fbgemm"), example)
    teacher, student = teacher.to(device), student.to(device)
    opt = torch.optim.AdamW(student.parameters(), lr=1e-4)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def step(i):
        s = (i * batch) % (len(data) - batch + 1)
        x = torch.from_numpy(data[s:s + batch]).to(device, non_blocking=True)
        with torch.no_grad():
            t = teacher(x)
        loss = torch.nn.functional.mse_loss(student(x), t)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for i in range(warmup):
        step(i)
    sync()
    t0 = time.perf_counter()
    for i in range(steps):
        step(warmup + i)
    sync()
    return (time.perf_counter() - t0) / steps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("quantkit")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", required=True)
    ap.add_argument("--arch", default="resnet18")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", default="3,13", help="S1,S2: the two quantkit runs (eager: S1 warm-up, S2-S1 timed)")
    ap.add_argument("--calib", type=int, default=64, help="calibration samples of the quantkit runs")
    args = ap.parse_args()
    s1, s2 = (int(v) for v in args.steps.split(","))
    if not 0 < s1 < s2:
        raise SystemExit("--steps S1,S2 with 0 < S1 < S2")
    os.makedirs(args.out, exist_ok=True)
    from qkdev import export_torchvision
    model = export_torchvision.ensure(args.arch, 17, log=lambda *a, **k: None)
    rng = np.random.default_rng(0)
    data = rng.standard_normal((args.batch * s2, 3, 224, 224), dtype=np.float32)
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "train.npy")
        np.save(path, data)
        walls = [quantkit_wall(args.quantkit, model, path, s, args.batch, args.calib, args.device,
                               os.path.join(work, f"qat{s}")) for s in (s1, s2)]
    quantkit_step = (walls[1] - walls[0]) / (s2 - s1)
    eager_step = eager_step_seconds(args.arch, data, args.batch, s1, s2 - s1, args.device)
    row = {"arch": args.arch, "device": args.device, "batch": args.batch, "steps": [s1, s2],
           "quantkit_wall_s": walls, "quantkit_step_s": quantkit_step,
           "quantkit_fixed_s": walls[0] - s1 * quantkit_step, "eager_step_s": eager_step,
           "ratio": quantkit_step / eager_step, "target": TARGET}
    print(json.dumps(row), flush=True)
    with open(os.path.join(args.out, "qat.json"), "w") as f:
        json.dump(row, f, indent=2, sort_keys=True)
    with open(os.path.join(args.out, "qat.md"), "w") as f:
        f.write(f"### QAT step, {args.arch} 224x224 batch {args.batch}, {args.device}\n\n"
                f"quantkit {quantkit_step * 1e3:.1f} ms/step (fixed cost {row['quantkit_fixed_s']:.1f} s: start, "
                f"load, calibration, export), eager PyTorch with fake quantization {eager_step * 1e3:.1f} ms/step: "
                f"ratio {row['ratio']:.2f} (target <= {TARGET})\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
