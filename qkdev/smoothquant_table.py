"""SmoothQuant (calibrate --ptq smoothquant) on zoo models against the same method without it, one run each.

    .venv/bin/python -m qkdev.smoothquant_table build/dev/tools/quantkit/quantkit \
        [--models vit_tiny,plain_cnn] [--methods max,mse,auto] [--alphas 0.5] [--combos 'smoothquant,bias-correction']
        [--weights per-tensor] [--calib-samples 256] [--test-samples 2000]

Per model and method M (FP32 float parts, per-channel weights unless --weights per-tensor):
  * `calibrate --method M` (the baseline);
  * `calibrate --method M --ptq smoothquant` (alpha chosen on the held-out last quarter of the calibration data);
  * `calibrate --method M --ptq smoothquant:alpha=A` for each --alphas, and `--ptq C` for each --combos;
each written model.qdq.onnx run in onnxruntime (graph optimizations off) on the first --test-samples of
fashion-mnist:test: top-1 and the logits' relative MSE against the FP32 model's. Also the alpha the stage chose
and its wall time (the whole calibrate).
"""
import argparse
import os
import re
import tempfile

import numpy as np

from qkdev.ptq_table import Zoo, timed
from qkdev.zoo import eval_ort


def logits(path, x):
    sess = eval_ort.make_session(path)
    name = sess.get_inputs()[0].name
    return np.concatenate([sess.run(None, {name: x[i:i + eval_ort.BATCH]})[0] for i in range(0, len(x), eval_ort.BATCH)])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("quantkit")
    ap.add_argument("--models", default="vit_tiny")
    ap.add_argument("--methods", default="max")
    ap.add_argument("--alphas", default="0.5")
    ap.add_argument("--combos", default="", help="more --ptq values, ';'-separated (e.g. smoothquant,bias-correction)")
    ap.add_argument("--weights", default="per-channel", choices=["per-channel", "per-tensor"])
    ap.add_argument("--calib-samples", type=int, default=256)
    ap.add_argument("--test-samples", type=int, default=2000)
    args = ap.parse_args()
    lines = ["| model | method | configuration | top-1 | rel MSE vs FP32 | alpha | wall s |", "|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for name in [n for n in args.models.split(",") if n]:
            m = Zoo(name, args)
            ref = logits(m.model, m.x)
            lines.append(f"| {name} | FP32 | - | {np.mean(ref.argmax(1) == m.y):.4f} | - | - | - |")
            for method in args.methods.split(","):
                configs = [("none", []), ("smoothquant (alpha chosen)", ["--ptq", "smoothquant"])]
                configs += [(f"smoothquant:alpha={a}", ["--ptq", f"smoothquant:alpha={a}"]) for a in args.alphas.split(",") if a]
                configs += [(c, ["--ptq", c]) for c in args.combos.split(";") if c]
                for label, extra in configs:
                    out = os.path.join(tmp, f"{name}_{method}_{len(lines)}")
                    cmd = [args.quantkit, "calibrate", m.model, *m.calib, "--method", method, "--float-dtype", "fp32",
                           "--weights", args.weights, "-o", out, *extra]
                    rc, stdout, stderr, wall, _ = timed(cmd)
                    if rc != 0:
                        raise SystemExit(f"{' '.join(cmd)}: exit {rc}\n{stderr}")
                    chosen = re.search(r"ptq smoothquant: alpha (\S+)", stdout)
                    q = logits(os.path.join(out, "model.qdq.onnx"), m.x)
                    rel = float(np.mean((q - ref) ** 2) / np.mean(ref ** 2))
                    top1 = float(np.mean(q.argmax(1) == m.y))
                    lines.append(f"| {name} | {method} | {label} | {top1:.4f} | {rel:.3e} | "
                                 f"{chosen.group(1) if chosen else '-'} | {wall:.1f} |")
                    print(lines[-1], flush=True)
                    for line in stdout.splitlines():
                        if line.startswith("ptq"):
                            print("    " + line, flush=True)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
