"""Quantization-aware fine-tuning of resnet_small -> models/zoo/resnet_small_qat.onnx (Q/DQ pairs).

Recipe (eager-mode torch.ao.quantization, torch 1.13):
  1. start from the trained FP32 resnet_small (out/zoo/resnet_small.pt, written by train_all.py);
  2. fold BatchNorm into Conv (fuse_modules in eval mode: Conv+BN[+ReLU] -> Conv[ReLU]);
  3. fake quantization, TensorRT-style int8 symmetric:
       weights     per_channel_symmetric, axis 0, qint8, quant range [-128, 127]
       activations per_tensor_symmetric, qint8, quant range [-128, 127], moving-average min/max
     scale = amax / 127.5 (torch's symmetric rule: amax / ((qmax - qmin) / 2)), zero_point = 0;
     the range is [-128, 127] rather than [-127, 127] because torch 1.13's ONNX exporter only
     accepts (-128, 127) or (0, 255) for FakeQuantize; ONNX QuantizeLinear saturates to the
     same range, so the exported model computes exactly what was trained.
     The logits (fc output) are not quantized; the fc input gets its own QuantStub.
  4. fine-tune 200 steps of 128 images (SGD momentum 0.9, cosine from 1e-3), observers frozen
     after 60% of them;
  5. export the prepared (not converted) model to ONNX opset 13: every FakeQuantize becomes a
     QuantizeLinear/DequantizeLinear pair with an int8 zero point of 0.
"""
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.ao import quantization as tq

from qkdev.zoo import eval_ort, models
from qkdev.zoo.onnx_util import qdq_summary

NAME = "resnet_small_qat"
BASE = "resnet_small"
SEED = 12
STEPS = 200  # batches of 128: about half an epoch of the training split
LR = 1e-3
OBSERVER_STEPS_FRACTION = 0.6

ACT_FQ = tq.FakeQuantize.with_args(observer=tq.MovingAverageMinMaxObserver, quant_min=-128, quant_max=127,
                                   dtype=torch.qint8, qscheme=torch.per_tensor_symmetric, reduce_range=False)
WEIGHT_FQ = tq.FakeQuantize.with_args(observer=tq.MovingAveragePerChannelMinMaxObserver, quant_min=-128,
                                      quant_max=127, dtype=torch.qint8, qscheme=torch.per_channel_symmetric,
                                      reduce_range=False, ch_axis=0)
QCONFIG = tq.QConfig(activation=ACT_FQ, weight=WEIGHT_FQ)
# Same weights, but no fake quantization on the module's output (used for the logits).
QCONFIG_NO_OUTPUT = tq.QConfig(activation=nn.Identity, weight=WEIGHT_FQ)


class QBlock(nn.Module):
    """models.BasicBlock with the residual add + ReLU as a FloatFunctional, so its output is observed."""

    def __init__(self, block):
        super().__init__()
        self.conv1, self.conv2, self.shortcut = block.conv1, block.conv2, block.shortcut
        self.skip = nn.quantized.FloatFunctional()

    def forward(self, x):
        return self.skip.add_relu(self.conv2(self.conv1(x)), self.shortcut(x))


class QResNetSmall(nn.Module):
    def __init__(self, fp32):
        super().__init__()
        self.quant = tq.QuantStub()
        self.stem = fp32.stem
        self.layers = nn.Sequential(*[QBlock(b) for b in fp32.layers])
        self.pool = fp32.pool
        self.quant_fc = tq.QuantStub()  # fc input: pooled activations, quantized per tensor
        self.fc = fp32.fc
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        x = self.pool(self.layers(self.stem(self.quant(x))))
        return self.dequant(self.fc(self.quant_fc(torch.flatten(x, 1))))


def fuse_groups(model):
    groups = [["stem.0", "stem.1", "stem.2"]]
    for i, block in enumerate(model.layers):
        p = f"layers.{i}"
        groups += [[f"{p}.conv1.0", f"{p}.conv1.1", f"{p}.conv1.2"], [f"{p}.conv2.0", f"{p}.conv2.1"]]
        if not isinstance(block.shortcut, nn.Identity):
            groups.append([f"{p}.shortcut.0", f"{p}.shortcut.1"])
    return groups


def build(state_dict):
    fp32 = models.ResNetSmall()
    fp32.load_state_dict(state_dict)
    model = QResNetSmall(fp32).eval()
    tq.fuse_modules(model, fuse_groups(model), inplace=True)  # eval mode: BN folded into the conv
    model.qconfig = QCONFIG
    model.fc.qconfig = QCONFIG_NO_OUTPUT
    model.train()
    tq.prepare_qat(model, inplace=True)
    return model


def run(train_xy, xs, ta):
    """ta: the train_all module (shared helpers)."""
    ta.setup_determinism(SEED)
    ckpt = os.path.join(ta.WORK_DIR, f"{BASE}.pt")
    if not os.path.exists(ckpt):
        raise SystemExit(f"{ckpt} missing: train {BASE} first (train_all.py --models {BASE},{NAME})")
    model = build(torch.load(ckpt))
    x, y = train_xy
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    steps = STEPS
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9, weight_decay=1e-5)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    g = torch.Generator().manual_seed(SEED)
    ta.log(f"{NAME}: fine-tuning {steps} steps from {ckpt}")
    t0 = time.time()
    perm = torch.randperm(len(x), generator=g)
    for step in range(steps):
        if step == int(OBSERVER_STEPS_FRACTION * steps):
            model.apply(tq.disable_observer)  # ranges fixed from here on; weights keep adapting
            ta.log(f"  step {step}: observers frozen")
        idx = perm[step * ta.BATCH:(step + 1) * ta.BATCH]
        loss = F.cross_entropy(model(xt[idx]), yt[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if step % 50 == 0:
            ta.log(f"  step {step}/{steps} loss {float(loss):.4f} ({time.time() - t0:.0f}s)")
    wall = time.time() - t0
    model.apply(tq.disable_observer)
    model.eval()
    torch_fq = ta.torch_accuracy(model, *xs[0])
    path = os.path.join(ta.ZOO_DIR, f"{NAME}.onnx")
    ta.export_onnx(model, path, opset=13, keep_bn=False)
    base = ta.load_manifest()["models"].get(BASE, {})
    entry = {
        "architecture": BASE,
        "description": "resnet_small after QAT: BN folded into Conv, Q/DQ on the input, on every Conv/Gemm "
                       "weight (per-channel, axis 0) and on every Conv/Add+ReLU output (per-tensor); logits not quantized",
        "params": sum(p.numel() for n, p in model.named_parameters()),
        "keeps_batchnorm": False,
        "training": {
            "recipe": f"from {BASE} FP32 weights; torch.ao.quantization eager QAT (FakeQuantize, qint8 [-128,127], "
                      f"weights per_channel_symmetric axis 0, activations per_tensor_symmetric MovingAverageMinMax); "
                      f"SGD(lr={LR}, momentum=0.9, wd=1e-5) cosine, {STEPS} steps of batch {ta.BATCH}, "
                      f"observers frozen after {int(OBSERVER_STEPS_FRACTION * 100)}% of the steps",
            "steps": STEPS, "seed": SEED, "train_split": "train (52,952 images)",
            "torch": torch.__version__, "threads": ta.THREADS, "wall_s": round(wall),
        },
        "qat": {
            "base_model": BASE,
            "fp32_test_top1": base.get("test_top1"),
            "torch_fakequant_test_top1": round(torch_fq, 4),
            "scale_rule": "amax / 127.5 (torch symmetric qint8 over [-128, 127]), zero_point 0",
        },
        "torch_test_top1": round(torch_fq, 4),
    }
    ta.measure_and_record(NAME, path, entry, xs)
    entry["qat"]["fakequant_test_top1_ort"] = entry["test_top1"]
    entry["qat"]["qdq"] = qdq_summary(path)
    ta.record_entry(NAME, entry)
    ta.log(f"{NAME}: FP32 {base.get('test_top1')} -> fake-quant ORT {entry['test_top1']} (torch {torch_fq:.4f}); "
           f"{entry['qat']['qdq']}")
