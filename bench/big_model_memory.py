"""Big models in bounded memory (issue 45 item 5): peak RSS of calibrating a multi-GB ONNX model.

A random-weight ViT-H/14 (torchvision 0.14, 632M parameters: 2.53 GB of float32 weights, so the
ONNX file must keep them as external data) calibrated on the same N seeded 224x224 images by

  quantkit calibrate --method max --repair off -o DIR   (the plain calibration, all artifacts)
  quantkit calibrate -o DIR                              (the default: held-out check and repair)
  onnxruntime.quantization.quantize_static (MinMax, QDQ, per-channel, external data)
  ModelOpt 0.47 (python -m modelopt.onnx.quantization --quantize_mode int8, max calibration;
                 .venv-peers, scripts/setup_peers.sh)

each in its own process, peak RSS read from the child's getrusage (ru_maxrss). Target: quantkit's
peak <= 1.3 x the weights + 1 GB. The peers' collection keeps activations of every observed tensor
for all samples (users report out-of-memory kills); quantkit streams its statistics.

    .venv/bin/python bench/big_model_memory.py --quantkit build/dev/tools/quantkit/quantkit [--samples 16]

The model is exported once into ${QUANTKIT_CACHE:-~/.cache/quantkit}/models/vit_h_14.opset17/
(model.onnx + model.onnx.data, about 2.5 GB; 10 minutes and ~12 GB of memory on a 2-core machine).
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = 0
GIB = 1 << 30
TARGET_FACTOR, TARGET_EXTRA_GIB = 1.3, 1.0
OPSET = 17


def cache_dir():
    root = os.environ.get("QUANTKIT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "quantkit")
    return os.path.join(root, "models", f"vit_h_14.opset{OPSET}")


def ensure_model():
    """model.onnx with its weights in one external file, exported once (random weights, seeded)."""
    folder = cache_dir()
    path = os.path.join(folder, "model.onnx")
    if os.path.exists(os.path.join(folder, "done")):
        return path
    import torch
    import torchvision
    import onnx
    torch.manual_seed(SEED)
    model = torchvision.models.vit_h_14(weights=None).eval()
    with torch.no_grad():  # the head is all zeros in torchvision's init: outputs would be constant
        model.heads.head.weight.normal_(0.0, 0.02)
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(folder)) as tmp:
        raw = os.path.join(tmp, "raw", "model.onnx")
        os.makedirs(os.path.dirname(raw))
        # With gradients on, as qkdev/export_torchvision.py exports vit_b_16: under no_grad torch
        # 1.13 takes its fused attention (aten::_native_multi_head_attention), which has no ONNX.
        torch.onnx.export(model, torch.randn(2, 3, 224, 224), raw, opset_version=OPSET,
                          input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "N"}, "output": {0: "N"}})
        del model
        # torch writes one file per tensor past 2 GB: gather them into one external file.
        m = onnx.load(raw)
        out = os.path.join(tmp, "out")
        os.makedirs(out)
        onnx.save_model(m, os.path.join(out, "model.onnx"), save_as_external_data=True,
                        all_tensors_to_one_file=True, location="model.onnx.data", size_threshold=1024)
        del m
        open(os.path.join(out, "done"), "w").close()
        if os.path.exists(folder):
            import shutil
            shutil.rmtree(folder)
        os.replace(out, folder)
    return path


def weights_bytes(folder):
    return os.path.getsize(os.path.join(folder, "model.onnx.data"))


def data(samples, path):
    import numpy as np
    x = np.random.default_rng(SEED).standard_normal((samples, 3, 224, 224)).astype(np.float32)
    np.save(path, x)
    return path


def measured(cmd, env=None):
    """(exit code, wall seconds, peak RSS bytes of the child, last stderr lines)."""
    start = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    out, err = p.communicate()
    wall = time.perf_counter() - start
    # RUSAGE_CHILDREN holds the largest child waited for so far: each tool is measured from a
    # process of its own (main's --one), so this is that tool's peak.
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return p.returncode, wall, peak, (err or out).strip().splitlines()[-3:]


ORT = r'''
import sys, numpy as np
from onnxruntime.quantization import quantize_static, CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType
model, data, out = sys.argv[1:4]
x = np.load(data, mmap_mode="r")
class R(CalibrationDataReader):
    def __init__(self): self.i = 0
    def get_next(self):
        if self.i >= len(x): return None
        b = np.ascontiguousarray(x[self.i:self.i + 1]); self.i += 1
        return {"input": b}
quantize_static(model, out, R(), quant_format=QuantFormat.QDQ, per_channel=True,
                activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                calibrate_method=CalibrationMethod.MinMax, use_external_data_format=True)
'''


def run_one(name, args, model, npy, tmp):
    if name == "quantkit max, --repair off":
        cmd = [args.quantkit, "calibrate", model, "--data", npy, "--method", "max", "--repair", "off",
               "-o", os.path.join(tmp, "qk_off"), "-q"]
    elif name == "quantkit default":
        cmd = [args.quantkit, "calibrate", model, "--data", npy, "-o", os.path.join(tmp, "qk_default"), "-q"]
    elif name == "onnxruntime quantize_static":
        cmd = [os.path.join(ROOT, ".venv", "bin", "python"), "-c", ORT, model, npy, os.path.join(tmp, "ort.onnx")]
    else:
        # ModelOpt 0.47 rewrites its --onnx_path in place: it gets a copy (weights included).
        import shutil
        copy = os.path.join(tmp, "modelopt_input")
        os.makedirs(copy, exist_ok=True)
        for f in ("model.onnx", "model.onnx.data"):
            shutil.copyfile(os.path.join(os.path.dirname(model), f), os.path.join(copy, f))
        peers = os.path.join(ROOT, ".venv-peers", "bin", "python")
        cmd = [peers, "-m", "modelopt.onnx.quantization", "--onnx_path", os.path.join(copy, "model.onnx"), "--quantize_mode", "int8",
               "--calibration_data_path", npy, "--calibration_method", "max", "--output_path",
               os.path.join(tmp, "modelopt.onnx"), "--use_external_data_format"]
    return measured(cmd)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quantkit", required=True)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--peers", default="onnxruntime,modelopt")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one tool in this process
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    args = ap.parse_args()
    model = ensure_model()
    folder = os.path.dirname(model)
    if args.one:
        rc, wall, peak, tail = run_one(args.one, args, model, os.path.join(args.tmp, "x.npy"), args.tmp)
        print(json.dumps({"rc": rc, "wall": wall, "peak": peak, "tail": tail}))
        return 0
    weights = weights_bytes(folder)
    target = TARGET_FACTOR * weights + TARGET_EXTRA_GIB * GIB
    names = ["quantkit max, --repair off", "quantkit default"]
    for peer in [p for p in args.peers.split(",") if p]:
        names.append({"onnxruntime": "onnxruntime quantize_static", "modelopt": "ModelOpt 0.47 int8"}[peer])
    print(f"ViT-H/14 (random weights), {weights / GIB:.2f} GiB of weights (external data), {args.samples} "
          f"samples 3x224x224; target for quantkit: peak RSS <= {TARGET_FACTOR} x weights + "
          f"{TARGET_EXTRA_GIB:g} GiB = {target / GIB:.2f} GiB")
    print(f"{'tool':<30} {'exit':>4} {'wall s':>8} {'peak RSS GiB':>13} {'x weights':>10}")
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        data(args.samples, os.path.join(tmp, "x.npy"))
        for name in names:
            # One measuring process per tool: ru_maxrss of RUSAGE_CHILDREN is a running maximum.
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--quantkit", args.quantkit,
                                "--one", name, "--tmp", tmp], capture_output=True, text=True)
            try:
                r = json.loads(p.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                r = {"rc": p.returncode, "wall": 0.0, "peak": 0, "tail": p.stderr.strip().splitlines()[-3:]}
            rows[name] = r
            print(f"{name:<30} {r['rc']:>4} {r['wall']:>8.1f} {r['peak'] / GIB:>13.2f} "
                  f"{r['peak'] / weights:>10.2f}" + ("" if r["rc"] == 0 else f"  {' | '.join(r['tail'])}"),
                  flush=True)
    qk = rows["quantkit max, --repair off"]
    for name, r in rows.items():
        if r["rc"] == 0 and name != "quantkit max, --repair off" and qk["peak"] > 0:
            print(f"peak RSS {name} / quantkit max: {r['peak'] / qk['peak']:.2f}x")
    met = all(rows[n]["rc"] == 0 and rows[n]["peak"] <= target for n in names if n.startswith("quantkit"))
    print(f"target (quantkit <= {target / GIB:.2f} GiB): {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
