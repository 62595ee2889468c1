"""PyTorch eager reference for `quantkit qat` (issue #17, item 5): the same recipe on the same graph.

The graph is the Q/DQ model `quantkit calibrate` wrote (BatchNorm already folded by the exporter
for the models this supports: plain_cnn, resnet_small, mobilenetv2_small), executed op by op with
torch.nn.functional. Each QuantizeLinear -> DequantizeLinear pair becomes the fake quantization
quantkit trains with: x / s, round half to even, clamp to [-128, 127], times s, straight-through
gradient inside the range; weight scales recomputed per output channel from the current weights
(max|w| / 127), activation scales frozen from the plan. Teacher = the FP32 model (same executor,
no grad), loss = MSE on the logits (label-free), AdamW, 5% linear warm-up then cosine to 0.

  .venv/bin/python -m qkdev.zoo.qat_reference CALIB_OUT/model.qdq.onnx models/zoo/plain_cnn.onnx \
      --steps 300 --batch 64 --lr 1e-4 [--threads 2]

Prints the FP32 / PTQ / QAT top-1 on the full test split and the median time per training step
(teacher forward + student forward + backward + optimizer) and its mean CPU time, the numbers to
compare with `quantkit qat`'s training_log.json "seconds_per_step" / "cpu_seconds_per_step" on the
same machine.
"""
import argparse
import math
import os
import time

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

from qkdev.zoo import data

QMIN, QMAX = -128.0, 127.0


class FakeQuant(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, s):
        r = torch.round(x / s)
        inside = (r >= QMIN) & (r <= QMAX)
        ctx.save_for_backward(inside)
        return torch.clamp(r, QMIN, QMAX) * s

    @staticmethod
    def backward(ctx, g):
        (inside,) = ctx.saved_tensors
        return g * inside, None


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


class Graph:
    """Executes an ONNX graph (the ops of the supported zoo models) with torch functional ops."""

    def __init__(self, path):
        m = onnx.load(path)
        self.nodes = list(m.graph.node)
        self.input = m.graph.input[0].name
        self.output = m.graph.output[0].name
        self.consts = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in m.graph.initializer}
        for n in self.nodes:
            if n.op_type == "Constant":
                self.consts[n.output[0]] = torch.from_numpy(numpy_helper.to_array(attrs(n)["value"]).copy())
        self.dq_of_q = {}
        for n in self.nodes:
            if n.op_type == "DequantizeLinear":
                self.dq_of_q[n.input[0]] = n
        trainable = set()
        for n in self.nodes:
            if n.op_type in ("Conv", "Gemm"):
                for name in n.input[1:]:
                    trainable.add(name)
        for n in self.nodes:  # weights behind their Q/DQ pair
            if n.op_type == "QuantizeLinear" and self.dq_of_q[n.output[0]].output[0] in trainable:
                trainable.add(n.input[0])
        self.params = {k: torch.nn.Parameter(v.float()) for k, v in self.consts.items()
                       if k in trainable and v.dtype == torch.float32}

    def value(self, env, name):
        if name in self.params:
            return self.params[name]
        return env[name] if name in env else self.consts[name]

    def __call__(self, x):
        env = {self.input: x}
        for n in self.nodes:
            a = attrs(n)
            ins = [self.value(env, i) if i else None for i in n.input]
            t = n.op_type
            if t == "Constant":
                continue
            if t == "QuantizeLinear":
                env[n.output[0]] = ("fq", n)
                continue
            if t == "DequantizeLinear":
                q = self.nodes_by_output(n.input[0])
                xin = self.value(env, q.input[0])
                s = self.consts[q.input[1]].float()
                if q.input[0] in self.params and s.numel() > 1:  # weight: scale from the current weights
                    amax = xin.detach().abs().flatten(1).amax(1)
                    s = torch.where(amax > 0, amax / 127.0, torch.ones_like(amax))
                if s.numel() > 1:
                    s = s.reshape([-1] + [1] * (xin.dim() - 1))
                y = FakeQuant.apply(xin, s)
            elif t == "Conv":
                p = a.get("pads", [0, 0, 0, 0])
                y = F.conv2d(ins[0], ins[1], ins[2] if len(ins) > 2 else None, a.get("strides", [1, 1]),
                             (p[0], p[1]), a.get("dilations", [1, 1]), a.get("group", 1))
            elif t == "Relu":
                y = F.relu(ins[0])
            elif t == "Clip":
                y = torch.clamp(ins[0], float(ins[1]), float(ins[2]))
            elif t == "MaxPool":
                p = a.get("pads", [0, 0, 0, 0])
                y = F.max_pool2d(ins[0], a["kernel_shape"], a.get("strides", a["kernel_shape"]), (p[0], p[1]))
            elif t == "Add":
                y = ins[0] + ins[1]
            elif t == "Mul":
                y = ins[0] * ins[1]
            elif t == "Sigmoid":
                y = torch.sigmoid(ins[0])
            elif t == "GlobalAveragePool":
                y = ins[0].mean((2, 3), keepdim=True)
            elif t == "Flatten":
                y = ins[0].flatten(a.get("axis", 1))
            elif t == "Reshape":
                y = ins[0].reshape([int(v) for v in ins[1]])
            elif t == "Gemm":
                w = ins[1].t() if a.get("transB", 0) else ins[1]
                y = ins[0] @ w
                if len(ins) > 2:
                    y = y + ins[2]
            else:
                raise SystemExit(f"qat_reference: op {t} is not supported (node {n.name})")
            env[n.output[0]] = y
        return env[self.output]

    def nodes_by_output(self, name):
        if not hasattr(self, "_producer"):
            self._producer = {o: n for n in self.nodes for o in n.output}
        return self._producer[name]


def top1(graph, x, y):
    with torch.no_grad():
        pred = torch.cat([graph(torch.from_numpy(x[i:i + 500])).argmax(1) for i in range(0, len(x), 500)])
    return 100.0 * float((pred.numpy() == y).mean())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("qdq")
    ap.add_argument("fp32")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    student, teacher = Graph(a.qdq), Graph(a.fp32)
    for p in teacher.params.values():
        p.requires_grad_(False)
    xt, yt = data.load_split("test")
    xtr, _ = data.load_split("train")
    ptq = top1(student, xt, yt)
    opt = torch.optim.AdamW(list(student.params.values()), lr=a.lr, weight_decay=0.0)
    warm = int(0.05 * a.steps)
    rng = np.random.default_rng(a.seed)
    perm = rng.permutation(len(xtr))
    times, cpu, losses = [], [], []
    for step in range(a.steps):
        lr = a.lr * (step + 1) / warm if step < warm else \
            0.5 * a.lr * (1 + math.cos(math.pi * (step - warm) / max(a.steps - warm, 1)))
        for g in opt.param_groups:
            g["lr"] = lr
        off = (step * a.batch) % (len(perm) - a.batch)
        xb = torch.from_numpy(xtr[perm[off:off + a.batch]])
        t0, c0 = time.perf_counter(), time.process_time()
        with torch.no_grad():
            target = teacher(xb)
        loss = F.mse_loss(student(xb), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        losses.append(float(loss))
    qat = top1(student, xt, yt)
    fp32 = top1(teacher, xt, yt)
    print(f"fp32 {fp32:.2f}  ptq {ptq:.2f}  qat {qat:.2f}  loss {losses[0]:.4g} -> {losses[-1]:.4g}  "
          f"step: median wall {1000 * float(np.median(times[5:])):.1f} ms, mean CPU (user+sys) "
          f"{1000 * float(np.mean(cpu[5:])):.1f} ms ({a.threads} threads, batch {a.batch})")


if __name__ == "__main__":
    main()
