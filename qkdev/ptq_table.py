"""The issue-31 table: PTQ stages (calibrate --ptq) side by side with today's best range choice and
with aimet-onnx's AdaRound / SeqMSE, on the zoo and the real models, one run each.

    .venv/bin/python -m qkdev.ptq_table build/dev/tools/quantkit/quantkit --md docs/ptq-table.md \
        [--models plain_cnn,ppocr_rec,...] [--aimet-python /path/to/peers/bin/python] [--iterations 500]

Per model:
  * today's best: `calibrate --method auto` (the method, then per-tensor refinement, on held-out data);
  * each stage alone (smoothquant, seqmse, adaround, bias-correction) and all four, on auto's
    method: `calibrate --method M --ptq S`;
  * with --auto-ptq, `--method auto --ptq seqmse,adaround` (auto keeps a stage only when held-out
    data says it helps);
  * aimet-onnx apply_seq_mse / apply_adaround (qkdev/peers/aimet_ptq.py, its own venv), 8-bit
    symmetric per-channel weights and 8-bit activations, min-max encodings, the same calibration
    samples, the same AdaRound iterations;
each judged in onnxruntime (graph optimizations off) on held-out data: zoo models on the first
--test-samples of fashion-mnist:test (top-1), real models on their val/ split against FP32 (the
metric of qkdev/realmodels_table.py). Wall time and peak RSS of the process that quantized.
"""
import argparse
import json
import os
import re
import subprocess
import tempfile
import time

import numpy as np

from qkdev import realmodels
from qkdev import realmodels_table as rt

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

ZOO = ["plain_cnn", "resnet_small", "mobilenetv2_small", "efficientnet_small", "vit_tiny"]
REAL = ["ppocr_rec", "textline", "ppocr_cls", "ppocr_det"]


def timed(cmd):
    """(returncode, stdout, stderr, wall seconds, peak RSS MiB of the child) via /usr/bin/time;
    the stderr returned is the child's, without /usr/bin/time's lines (a failure's last line is
    then the child's reason)."""
    t0 = time.time()
    r = subprocess.run(["/usr/bin/time", "-f", "QK_MAXRSS=%M", *cmd], capture_output=True, text=True)
    wall = time.time() - t0
    m = re.search(r"QK_MAXRSS=(\d+)", r.stderr)
    stderr = "\n".join(l for l in r.stderr.splitlines()
                       if not l.startswith("QK_MAXRSS=") and not l.startswith("Command exited with non-zero status"))
    return r.returncode, r.stdout, stderr, wall, (int(m.group(1)) / 1024.0 if m else float("nan"))


class Zoo:
    def __init__(self, name, args):
        from qkdev.zoo import data as zoo_data
        self.name = name
        self.model = os.path.join(ROOT, "models", "zoo", name + ".onnx")
        x, y = zoo_data.load_split("test")
        self.x, self.y = x[:args.test_samples], y[:args.test_samples]
        self.calib = ["--data", "fashion-mnist:calib", "--samples", str(args.calib_samples)]
        self.metric = "top-1 (test)"
        xc, _ = zoo_data.load_split("calib")
        self.calib_feeds = [{"input": xc[i:i + 1]} for i in range(args.calib_samples)]

    def fp32(self):
        return self.score(self.model)

    def score(self, path):
        from qkdev.zoo import eval_ort
        return eval_ort.evaluate(path, self.x, self.y)[0]


class Real:
    def __init__(self, name, args):
        folder = realmodels.ensure(name)
        self.name = name
        with open(os.path.join(folder, "kind.json")) as f:
            self.output = json.load(f)["output"]
        self.model = os.path.join(folder, "model.onnx")
        self.val = rt.load_feeds(self.model, os.path.join(folder, "val"))
        self.ref = rt.run_outputs(self.model, self.val)
        self.calib = ["--data", os.path.join(folder, "calib")]
        self.calib_feeds = rt.load_feeds(self.model, os.path.join(folder, "calib"))
        self.metric = rt.metric(self.output, self.ref, self.ref)[0]

    def fp32(self):
        return rt.metric(self.output, self.ref, self.ref)[1]

    def score(self, path):
        return rt.metric(self.output, self.ref, rt.run_outputs(path, self.val))[1]


def quantkit_row(qk, m, out, extra):
    # FP32 float part: onnxruntime's CPU FP16 QuantizeLinear truncates where TensorRT rounds
    # (docs/strongly-typed.md), which would score quantkit's models below what TensorRT computes.
    rc, stdout, stderr, wall, rss = timed([qk, "calibrate", m.model, *m.calib, "-o", out, "-q", "--float-dtype", "fp32",
                                           *extra])
    row = {"args": " ".join(extra), "seconds": wall, "rss_mib": rss}
    if rc != 0:
        row["error"] = (stderr.strip().splitlines() or ["?"])[-1][:160]
        return row, stdout
    row["value"] = m.score(os.path.join(out, "model.qdq.onnx"))
    return row, stdout


def aimet_row(py, m, out, technique, iterations, calib_samples):
    cmd = [py, os.path.join(HERE, "peers", "aimet_ptq.py"), m.model, "--technique", technique, "--out", out,
           "--iterations", str(iterations), "--samples", str(calib_samples)]
    with tempfile.NamedTemporaryFile(suffix=".npz", delete=False) as f:
        feeds = f.name
    np.savez(feeds, **{f"{i}__{k}": v for i, feed in enumerate(m.calib_feeds[:calib_samples]) for k, v in feed.items()})
    cmd += ["--feeds", feeds]
    rc, stdout, stderr, wall, rss = timed(cmd)
    os.unlink(feeds)
    row = {"args": f"aimet {technique}", "seconds": wall, "rss_mib": rss}
    if rc != 0:
        row["error"] = (stderr.strip().splitlines() or ["?"])[-1][:160]
        return row
    stats = json.loads(stdout.strip().splitlines()[-1])
    row["technique_seconds"] = stats.get("technique_seconds")
    row["value"] = m.score(os.path.join(out, "model.qdq.onnx"))
    return row


def evaluate(name, args, tmp):
    m = Zoo(name, args) if name in ZOO else Real(name, args)
    rows = {"model": name, "metric": m.metric, "fp32": m.fp32(), "runs": []}
    d = os.path.join(tmp, name)
    base, stdout = quantkit_row(args.quantkit, m, os.path.join(d, "auto"), ["--method", "auto"])
    base["label"] = "today's best (--method auto)"
    best = [l for l in stdout.splitlines() if l.startswith("best: ")]
    method = best[0].split()[1] if best else "max"
    base["label"] += f": {method}"
    rows["runs"].append(base)
    it = f"adaround:iterations={args.iterations}"
    every = f"smoothquant,seqmse,{it},bias-correction"
    for label, ptq in (("smoothquant", "smoothquant"), ("seqmse", "seqmse"), ("adaround", it),
                       ("bias-correction", "bias-correction"), ("all four", every)):
        r, _ = quantkit_row(args.quantkit, m, os.path.join(d, label.replace(" ", "_")),
                            ["--method", method, "--ptq", ptq, "--ptq-samples", str(args.ptq_samples)])
        r["label"] = f"{method} + {label}"
        rows["runs"].append(r)
    if args.auto_ptq:
        r, stdout = quantkit_row(args.quantkit, m, os.path.join(d, "auto_ptq"),
                                 ["--method", "auto", "--ptq", "seqmse," + it, "--ptq-samples", str(args.ptq_samples)])
        kept = [l for l in stdout.splitlines() if "<- kept" in l]
        r["label"] = "--method auto --ptq seqmse,adaround" + (f" (kept: {kept[0].split()[0]})" if kept else " (kept: none)")
        rows["runs"].append(r)
    if args.aimet_python:
        for technique in ("seqmse", "adaround"):
            r = aimet_row(args.aimet_python, m, os.path.join(d, "aimet_" + technique), technique, args.iterations,
                          min(args.ptq_samples, len(m.calib_feeds)))
            r["label"] = f"aimet-onnx {technique}"
            rows["runs"].append(r)
    return rows


def markdown(all_rows, args):
    out = [f"<!-- generated by qkdev/ptq_table.py, do not edit; AdaRound {args.iterations} iterations per layer, "
           f"PTQ stages on {args.ptq_samples} calibration samples -->",
           "| model | metric | FP32 | configuration | INT8 | wall s | peak RSS MiB |", "|---|---|---|---|---|---|---|"]
    for r in all_rows:
        for i, run in enumerate(r["runs"]):
            v = f"{run['value']:.4f}" if "value" in run else run.get("error", "")
            head = f"| {r['model']} | {r['metric']} | {r['fp32']:.4f} " if i == 0 else "| | | "
            out.append(f"{head}| {run['label']} | {v} | {run['seconds']:.1f} | {run['rss_mib']:.0f} |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("quantkit")
    ap.add_argument("--models", default=",".join(ZOO + REAL))
    ap.add_argument("--iterations", type=int, default=500)
    ap.add_argument("--ptq-samples", type=int, default=128)
    ap.add_argument("--calib-samples", type=int, default=512, help="zoo: fashion-mnist:calib samples")
    ap.add_argument("--test-samples", type=int, default=2000, help="zoo: fashion-mnist:test samples scored")
    ap.add_argument("--aimet-python", help="python of a venv with aimet-onnx (qkdev/peers/aimet_ptq.py)")
    ap.add_argument("--auto-ptq", action="store_true", help="also --method auto --ptq seqmse,adaround")
    ap.add_argument("--md")
    ap.add_argument("--json")
    args = ap.parse_args()
    all_rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in [n for n in args.models.split(",") if n]:
            all_rows.append(evaluate(name, args, tmp))
            print(json.dumps(all_rows[-1]), flush=True)
    md = markdown(all_rows, args)
    if args.md:
        with open(args.md, "w") as f:
            f.write(md)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(all_rows, f, indent=1)
    print(md)


if __name__ == "__main__":
    main()
