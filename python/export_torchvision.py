"""Export a torchvision classifier to ONNX for tests (random weights: no download needed).

Usage: export_torchvision.py MODEL OUT.onnx [--opset N] [--dynamic-batch]

Deliberately minimal: the model zoo has its own export script. The output is written to a temp
file and renamed, so an interrupted export never leaves a partial model behind.
"""
import argparse
import os
import tempfile

import torch
import torchvision


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model", help="torchvision.models constructor, e.g. resnet18")
    parser.add_argument("out")
    parser.add_argument("--opset", type=int, default=13)
    parser.add_argument("--dynamic-batch", action="store_true")
    args = parser.parse_args()

    torch.manual_seed(0)
    net = getattr(torchvision.models, args.model)(weights=None).eval()
    example = torch.randn(1, 3, 224, 224)
    dynamic = {"input": {0: "N"}, "logits": {0: "N"}} if args.dynamic_batch else None
    out_dir = os.path.dirname(os.path.abspath(args.out))
    fd, tmp = tempfile.mkstemp(suffix=".onnx", dir=out_dir)
    os.close(fd)
    try:
        torch.onnx.export(net, example, tmp, opset_version=args.opset, input_names=["input"],
                          output_names=["logits"], dynamic_axes=dynamic)
        os.replace(tmp, args.out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


if __name__ == "__main__":
    main()
