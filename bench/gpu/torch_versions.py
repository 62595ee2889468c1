"""ATen CPU speed of two torch builds on the same models: Debian's 1.13 (.venv) vs PyPI's 2.x (.venv-torch).

    .venv/bin/python bench/gpu/torch_versions.py export --dir /tmp/tv        # TorchScript files (torch 1.13)
    for i in 1 2 3; do for py in .venv/bin/python .venv-torch/bin/python; do
      $py bench/gpu/torch_versions.py time --dir /tmp/tv; done; done          # interleaved, one JSON line each

quantkit's interpreter calls the same ATen kernels (convolution, GEMM, pooling) that an eager
forward pass does, so this isolates the library's share of a quantkit eval/calibrate run on the
CPU; it is the stand-in for docs/gpu.md's table until a PyPI-torch build of quantkit exists. The
models are traced once with torch 1.13 (torchvision resnet18, random weights; the zoo's
resnet_small architecture) and loaded by both versions (TorchScript loads forward), so both run
the very same graph and weights. One thread (QUANTKIT_THREADS=1 in the suite), inference mode;
CPU time (user+sys of this process during the timed loop) and wall time are reported.
"""
import argparse
import json
import os
import resource
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BATCH = 32
SAMPLES = {"resnet18": 256, "resnet_small": 2048}
SHAPES = {"resnet18": (3, 224, 224), "resnet_small": (1, 28, 28)}
WARMUP_BATCHES = 2


def export(out_dir):
    import torch
    import torchvision
    sys.path.insert(0, ROOT)  # qkdev: the repository's development scripts
    from qkdev.zoo import models  # the zoo's architectures

    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    for name, net in (("resnet18", torchvision.models.resnet18()), ("resnet_small", models.ARCHS["resnet_small"]())):
        net.eval()
        x = torch.randn((BATCH,) + SHAPES[name])
        torch.jit.trace(net, x).save(os.path.join(out_dir, name + ".pt"))
        print(os.path.join(out_dir, name + ".pt"))


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timing(model_dir):
    import torch

    torch.set_num_threads(1)
    for name in ("resnet_small", "resnet18"):
        net = torch.jit.load(os.path.join(model_dir, name + ".pt")).eval()
        gen = torch.Generator().manual_seed(0)
        x = torch.randn((BATCH,) + SHAPES[name], generator=gen)
        with torch.inference_mode():
            for _ in range(WARMUP_BATCHES):
                net(x)
            c0, w0 = cpu_seconds(), time.perf_counter()
            for _ in range(SAMPLES[name] // BATCH):
                net(x)
            cpu, wall = cpu_seconds() - c0, time.perf_counter() - w0
        print(json.dumps({"torch": torch.__version__, "model": name, "samples": SAMPLES[name], "batch": BATCH,
                          "cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
                          "samples_per_cpu_s": round(SAMPLES[name] / cpu, 1)}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["export", "time"])
    ap.add_argument("--dir", required=True)
    args = ap.parse_args()
    export(args.dir) if args.what == "export" else timing(args.dir)


if __name__ == "__main__":
    main()
