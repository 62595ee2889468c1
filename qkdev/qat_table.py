"""The QAT table of docs/qat.md (issue #17): for each zoo model, a PTQ plan that loses top-1
points, and what `quantkit qat` makes of it, label-free and with labels.

Everything goes through the quantkit CLI, as a user would run it:
  1. `calibrate` on 1024 samples of fashion-mnist:calib, trying in order entropy with per-channel
     weights, max with per-tensor weights, entropy with per-tensor weights, and keeping the first
     that loses >= 2 top-1 points (when none does, the row says so and QAT starts from the last);
  2. `qat --plan` on fashion-mnist:train for SHARE of the model's original training (images seen,
     models/zoo/manifest.json; steps rounded down), label-free (FP32 teacher, MSE on the logits)
     and with labels (cross-entropy + MSE to the teacher logits by default), with the recipe's options;
  3. every top-1 by onnxruntime (graph optimizations off) running the model.qdq.onnx files on
     the full fashion-mnist:test split (10,000 images).

  python -m qkdev.qat_table QUANTKIT [--models a,b] [--share 0.1] [--batch 64] [--lr 1e-4]
         [--no-learn-scales] [--labels-loss ce+mse] [--reuse] [--update] [--render]
         [--markdown docs/qat-table.md] [--json docs/qat-table.json]

--reuse keeps PTQ plans already in --work (calibration is the slow part on a busy machine);
--update keeps the rows of other models already in --json, so the table can be built model by
model; --render rewrites the markdown from the JSON alone. Each row records the exact qat options
it was made with.
"""
import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time

from qkdev.zoo import data as zoo_data, eval_ort

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TRAIN_SAMPLES = 52952  # the zoo's train split
MIN_PTQ_LOSS = 2.0     # points: the bar for a "PTQ configuration that loses"
PTQ_CONFIGS = (("entropy", "per-channel"), ("max", "per-tensor"), ("entropy", "per-tensor"))
ALL_MODELS = "plain_cnn,resnet_small,mobilenetv2_small,efficientnet_small,vit_tiny"
# Peak learning rate per model where 1e-4 is too slow: AdamW moves a learned scale by about the lr
# per step, and the short schedules of these two end with the input scale far below the 0.016 it
# needs (resnet_small 0.0106, mobilenetv2_small 0.0087 at 1e-4). --lr overrides every model.
MODEL_LR = {"resnet_small": 3e-4, "mobilenetv2_small": 1e-3}
DEFAULT_LR = 1e-4


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(qk, args):
    """Runs quantkit; returns (stdout, wall seconds, CPU seconds user+sys)."""
    t0, c0 = time.time(), children_cpu()
    p = subprocess.run([qk] + args, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"quantkit {' '.join(args)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p.stdout, time.time() - t0, children_cpu() - c0


def top1(path, x, y):
    return 100.0 * eval_ort.evaluate(path, x, y)[0]


def qat_args(a, name, steps, loss):
    lr = a.lr if a.lr is not None else MODEL_LR.get(name, DEFAULT_LR)
    args = ["--data", "fashion-mnist:train", "--steps", str(steps), "--batch-size", str(a.batch), "--lr", str(lr),
            "--loss", loss, "--seed", "1", "--threads", str(a.threads)]
    if a.learn_scales:
        args.append("--learn-scales")
    return args + a.extra


def ptq_row(qk, name, path, fp32, x, y, a):
    tried = []
    for method, weights in PTQ_CONFIGS:
        out = os.path.join(a.work, name, f"ptq_{method}_{weights}")
        if not (a.reuse and os.path.exists(os.path.join(out, "model.qdq.onnx"))):
            run(qk, ["calibrate", path, "--data", "fashion-mnist:calib", "--samples", "1024", "--method", method,
                     "--weights", weights, "--threads", str(a.threads), "-o", out, "-q"])
        acc = top1(os.path.join(out, "model.qdq.onnx"), x, y)
        tried.append({"config": f"{method}, {weights} weights", "top1": acc, "plan": os.path.join(out, "plan.json"),
                      "weights": weights})
        print(f"{name} PTQ {method} {weights}: {acc:.2f} (FP32 {fp32:.2f})", file=sys.stderr, flush=True)
        if fp32 - acc >= MIN_PTQ_LOSS:
            break
    return tried[-1], tried


def model_row(qk, name, a, x, y, manifest):
    path = os.path.join(ROOT, "models", "zoo", name + ".onnx")
    row = {"model": name, "fp32": top1(path, x, y)}
    row["ptq"], row["ptq_tried"] = ptq_row(qk, name, path, row["fp32"], x, y, a)
    row["ptq_loses"] = row["fp32"] - row["ptq"]["top1"] >= MIN_PTQ_LOSS
    original_images = manifest["models"][name]["training"].get("epochs", 1) * TRAIN_SAMPLES
    steps = max(1, math.floor(a.share * original_images / a.batch))
    row.update(steps=steps, batch=a.batch, share=steps * a.batch / original_images)
    for kind, loss in (("label_free", "mse"), ("labels", a.labels_loss)):
        out = os.path.join(a.work, name, "qat_" + kind)
        args = qat_args(a, name, steps, loss)
        stdout, wall, cpu = run(qk, ["qat", path, "--plan", row["ptq"]["plan"], "--weights", row["ptq"]["weights"],
                                     *args, "-o", out, "-q"])
        log = json.load(open(os.path.join(out, "training_log.json")))
        row[kind] = {"top1": top1(os.path.join(out, "model.qdq.onnx"), x, y), "wall_s": wall, "cpu_s": cpu,
                     "cpu_s_per_step": log["cpu_seconds_per_step"], "peak_rss": log["peak_rss_bytes"],
                     "command": " ".join(["quantkit", "qat", f"models/zoo/{name}.onnx", "--plan", "PTQ/plan.json",
                                          "--weights", row["ptq"]["weights"], *args, "-o", "OUT"])}
        print(f"{name} QAT {kind}: {row[kind]['top1']:.2f} ({wall:.0f} s wall, {cpu:.0f} s CPU)", file=sys.stderr,
              flush=True)
    return row


def markdown(rows):
    lines = [
        "Generated by `make qat-table` (`qkdev/qat_table.py`); do not edit by hand. Every top-1 is onnxruntime "
        "running the exported model.qdq.onnx on the full 10,000-image fashion-mnist test split. QAT label-free = MSE "
        "to the FP32 logits; labels = cross-entropy mixed with distillation (each row's --loss, listed below). "
        "Steps are batches of fashion-mnist:train images, as a share of the images the model's original training saw. Wall times on a 2-core machine shared "
        "with other engineers' builds: CPU time (user+sys) is the comparable number.",
        "",
        "| model | FP32 | PTQ config | PTQ | QAT label-free | QAT labels | steps (share of training) | "
        "CPU label-free / labels | wall label-free / labels | peak RSS |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ptq = f"{r['ptq']['top1']:.2f}" if r["ptq_loses"] else f"{r['ptq']['top1']:.2f} (no config loses >= 2)"
        lf, lb = r["label_free"], r["labels"]
        lines.append(
            f"| {r['model']} | {r['fp32']:.2f} | {r['ptq']['config']} | {ptq} | {lf['top1']:.2f} | {lb['top1']:.2f} | "
            f"{r['steps']} x {r['batch']} ({100 * r['share']:.1f}%) | {lf['cpu_s']:.0f} s / {lb['cpu_s']:.0f} s | "
            f"{lf['wall_s']:.0f} s / {lb['wall_s']:.0f} s | {max(lf['peak_rss'], lb['peak_rss']) / 2**20:.0f} MiB |")
    for r in rows:
        if not r["ptq_loses"]:
            tried = ", ".join(f"{t['config']} {t['top1']:.2f}" for t in r["ptq_tried"])
            lines += ["", f"{r['model']}: no PTQ configuration loses >= {MIN_PTQ_LOSS:g} points (FP32 {r['fp32']:.2f}; "
                          f"{tried}); QAT starts from the last."]
    lines += ["", "Commands (PTQ = the row's calibrate output):", ""]
    for r in rows:
        lines += [f"- {r['model']}: `{r['label_free']['command']}`; labels: `--loss "
                  f"{r['labels']['command'].split('--loss ')[1].split(' ')[0]}`"]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("quantkit")
    ap.add_argument("--models", default=ALL_MODELS)
    ap.add_argument("--share", type=float, default=0.10, help="share of the original training's images")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=None, help="peak lr for every model (default: MODEL_LR, else 1e-4)")
    ap.add_argument("--no-learn-scales", dest="learn_scales", action="store_false")
    ap.add_argument("--labels-loss", default="ce+mse")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more qat options (last)")
    ap.add_argument("--work", default=os.path.join(ROOT, "out", "qat-table"))
    ap.add_argument("--reuse", action="store_true", help="keep PTQ outputs already in --work")
    ap.add_argument("--update", action="store_true", help="keep other models' rows already in --json")
    ap.add_argument("--markdown")
    ap.add_argument("--json")
    ap.add_argument("--render", action="store_true", help="only rewrite --markdown from the rows in --json")
    a = ap.parse_args()
    if a.render:
        rows = {r["model"]: r for r in json.load(open(a.json))["rows"]}
        write(rows, a)
        return
    x, y = zoo_data.load_split("test")
    manifest = json.load(open(os.path.join(ROOT, "models", "zoo", "manifest.json")))
    names = a.models.split(",")
    unknown = [n for n in names if n not in manifest["models"]]
    if unknown:
        raise SystemExit(f"unknown zoo model(s): {', '.join(unknown)} (models/zoo/manifest.json)")
    rows = {}
    if a.update and a.json and os.path.exists(a.json):
        rows = {r["model"]: r for r in json.load(open(a.json))["rows"] if "ptq_tried" in r}
    for n in names:
        rows[n] = model_row(a.quantkit, n, a, x, y, manifest)
        write(rows, a)  # after every model: a long run interrupted keeps the rows it finished


def write(rows, a):
    ordered = [rows[n] for n in ALL_MODELS.split(",") if n in rows]
    ordered += [r for n, r in sorted(rows.items()) if n not in ALL_MODELS.split(",")]
    md = markdown(ordered)
    print(md, flush=True)
    if a.markdown:
        with open(a.markdown + ".tmp", "w") as f:
            f.write(md)
        os.replace(a.markdown + ".tmp", a.markdown)
    if a.json:
        with open(a.json + ".tmp", "w") as f:  # paths relative to the repository
            f.write(json.dumps({"rows": ordered}, indent=1).replace(ROOT + os.sep, ""))
        os.replace(a.json + ".tmp", a.json)

if __name__ == "__main__":
    main()
