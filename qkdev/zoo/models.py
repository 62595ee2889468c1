"""Small architectures of the quantkit zoo, each chosen for what makes INT8 hard.

All take float32 [N,1,28,28] (preprocessed Fashion-MNIST) and return logits [N,10].
Activations are written so that torch 1.13's ONNX exporter emits the intended ops:
ReLU6 -> Clip, SiLU -> Sigmoid + Mul (explicit x * sigmoid(x)), GELU -> Erf pattern,
LayerNorm -> LayerNormalization (opset 17).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def conv_bn(cin, cout, k=3, stride=1, groups=1, act=None):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


# ---- plain CNN: Conv-BN-ReLU, MaxPool, Gemm -------------------------------------------------------
class PlainCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            conv_bn(1, 32, act=nn.ReLU), nn.MaxPool2d(2),   # 14x14
            conv_bn(32, 64, act=nn.ReLU), nn.MaxPool2d(2),  # 7x7
            conv_bn(64, 64, act=nn.ReLU),
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
                                        nn.Linear(128, 10))

    def forward(self, x):
        return self.classifier(self.features(x))


# ---- ResNet-style: residual Adds, strided convs, 1x1 projection shortcuts ------------------------
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = conv_bn(cin, cout, 3, stride, act=nn.ReLU)
        self.conv2 = conv_bn(cout, cout, 3, 1)
        self.shortcut = nn.Identity() if stride == 1 and cin == cout else conv_bn(cin, cout, 1, stride)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.conv2(self.conv1(x)) + self.shortcut(x))


class ResNetSmall(nn.Module):
    def __init__(self, widths=(16, 32, 64)):
        super().__init__()
        self.stem = conv_bn(1, widths[0], act=nn.ReLU)
        self.layers = nn.Sequential(
            BasicBlock(widths[0], widths[0], 1), BasicBlock(widths[0], widths[1], 2),
            BasicBlock(widths[1], widths[1], 1), BasicBlock(widths[1], widths[2], 2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(widths[2], 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


# ---- MobileNetV2-style: depthwise convs, ReLU6 (Clip), inverted residuals ------------------------
class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        layers = [] if expand == 1 else [conv_bn(cin, hidden, 1, act=nn.ReLU6)]
        layers += [conv_bn(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6), conv_bn(hidden, cout, 1)]
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.block(x)
        return x + y if self.residual else y


class MobileNetV2Small(nn.Module):
    # (expand, cout, repeats, first stride)
    CFG = [(1, 16, 1, 1), (4, 24, 1, 1), (4, 32, 2, 2), (4, 64, 2, 1)]

    def __init__(self):
        super().__init__()
        layers = [conv_bn(1, 16, 3, 2, act=nn.ReLU6)]  # 14x14, as real MobileNets at 224
        cin = 16
        for t, c, n, s in self.CFG:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(conv_bn(cin, 256, 1, act=nn.ReLU6))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(256, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


# ---- EfficientNet-style: MBConv with SiLU (Sigmoid+Mul) and squeeze-excitation -------------------
class SiLU(nn.Module):
    """x * sigmoid(x), written out so the exporter emits Sigmoid + Mul (not a fused op)."""

    def forward(self, x):
        return x * torch.sigmoid(x)


class SqueezeExcite(nn.Module):
    def __init__(self, channels, reduced):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)  # exported as GlobalAveragePool
        self.reduce = nn.Conv2d(channels, reduced, 1)
        self.act = SiLU()
        self.expand = nn.Conv2d(reduced, channels, 1)

    def forward(self, x):
        return x * torch.sigmoid(self.expand(self.act(self.reduce(self.pool(x)))))


class MBConv(nn.Module):
    def __init__(self, cin, cout, stride, expand, se_ratio=0.25):
        super().__init__()
        hidden = cin * expand
        layers = [] if expand == 1 else [conv_bn(cin, hidden, 1, act=SiLU)]
        layers += [conv_bn(hidden, hidden, 3, stride, groups=hidden, act=SiLU),
                   SqueezeExcite(hidden, max(4, int(cin * se_ratio))), conv_bn(hidden, cout, 1)]
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.block(x)
        return x + y if self.residual else y


class EfficientNetSmall(nn.Module):
    CFG = [(1, 16, 1, 1), (4, 24, 1, 1), (4, 40, 2, 2), (4, 64, 1, 1)]

    def __init__(self):
        super().__init__()
        layers = [conv_bn(1, 16, 3, 2, act=SiLU)]  # 14x14
        cin = 16
        for t, c, n, s in self.CFG:
            for i in range(n):
                layers.append(MBConv(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(conv_bn(cin, 256, 1, act=SiLU))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(256, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


# ---- small ViT: patch Conv, LayerNormalization, MatMul/Softmax attention, GELU (Erf) -------------
class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        n, t, d = x.shape
        qkv = self.qkv(x).reshape(n, t, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim)), dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(n, t, d)
        return self.proj(y)


class EncoderLayer(nn.Module):
    def __init__(self, dim, heads, mlp):
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(dim), Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViTTiny(nn.Module):
    def __init__(self, patch=7, dim=64, depth=4, heads=4, mlp=128):
        super().__init__()
        tokens = (28 // patch) ** 2
        self.patch = nn.Conv2d(1, dim, patch, patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, tokens + 1, dim) * 0.02)
        self.layers = nn.Sequential(*[EncoderLayer(dim, heads, mlp) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)  # [N, tokens, dim]
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        x = self.norm(self.layers(x))
        return self.head(x[:, 0])


ARCHS = {
    "plain_cnn": PlainCNN,
    "resnet_small": ResNetSmall,
    "mobilenetv2_small": MobileNetV2Small,
    "efficientnet_small": EfficientNetSmall,
    "vit_tiny": ViTTiny,
}


DESCRIPTIONS = {
    "plain_cnn": "Conv-BN-ReLU x3 with MaxPool, Flatten, Gemm-ReLU-Gemm (BN folded into Conv at export)",
    "resnet_small": "ResNet-style: 4 BasicBlocks (16-32-64), residual Adds, strided 3x3 and 1x1 projection convs, GlobalAveragePool",
    "mobilenetv2_small": "MobileNetV2-style: stride-2 stem, inverted residuals with depthwise 3x3, ReLU6 (Clip), linear bottlenecks",
    "efficientnet_small": "EfficientNet-style: MBConv with depthwise 3x3, SiLU as Sigmoid+Mul, squeeze-excitation (GlobalAveragePool, Mul); BatchNormalization kept as nodes",
    "vit_tiny": "ViT: 7x7 patch-embedding Conv (16 tokens + cls), 4 pre-norm encoder layers, dim 64, 4 heads, MatMul/Softmax attention, GELU (Erf), LayerNormalization (opset 17)",
}
