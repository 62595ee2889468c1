"""The QAT table of docs/qat.md (issue #17): for each zoo model, a PTQ plan that loses top-1
points, and what `quantkit qat` makes of it, label-free and with labels.

Everything goes through the quantkit CLI, as a user would run it:
  1. `calibrate` on 1024 samples of fashion-mnist:calib, trying in order entropy with per-channel
     weights, max with per-tensor weights, entropy with per-tensor weights, and keeping the first
     that loses >= 2 top-1 points as written by default (FP16 float parts, scored by `quantkit
     eval`); when none does, the row says so and QAT starts from the last;
  2. `qat --plan` on fashion-mnist:train for SHARE of the model's original training (images seen,
     models/zoo/manifest.json; steps rounded down), label-free (FP32 teacher, MSE on the logits)
     and with labels (cross-entropy + MSE to the teacher logits by default), with the recipe's options;
  3. two top-1 per model.qdq.onnx, on the full fashion-mnist:test split (10,000 images):
     - FP16: the model as quantkit writes it by default (INT8 with FP16 float parts, `--float-dtype
       fp16`, issue 29), scored by `quantkit eval`, which computes it as TensorRT 11 does (FP16
       storage, FP32 accumulation);
     - FP32: the same plan (`convert PLAN --float-dtype fp32`) or the same fine-tuned parameters
       (`qat --resume OUT/checkpoint.npz --float-dtype fp32`, no further step) written with FP32
       float parts, scored by onnxruntime (graph optimizations off), as the table was before.
     onnxruntime does not score the FP16 models: its CPU FP16 QuantizeLinear truncates instead of
     rounding (docs/strongly-typed.md), which costs points TensorRT does not lose.

  python -m qkdev.qat_table QUANTKIT [--models a,b] [--share 0.1] [--batch 64] [--lr 1e-4]
         [--no-learn-scales] [--labels-loss ce+mse] [--reuse] [--update] [--render]
         [--markdown docs/qat-table.md] [--json docs/qat-table.json]

--reuse keeps PTQ plans already in --work (calibration is the slow part on a busy machine);
--update keeps the rows of other models already in --json, so the table can be built model by
model; --render rewrites the markdown from the JSON alone. Each row records the exact qat options
it was made with.
"""
import argparse
import filecmp
import importlib.metadata
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
DEFAULT_FLOAT_DTYPE = "fp16"  # what calibrate writes without --float-dtype (issue 29): --reuse keeps only such plans


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
    """onnxruntime's top-1 (for the FP32 model and the FP32-float exports)."""
    return 100.0 * eval_ort.evaluate(path, x, y)[0]


def top1_quantkit(qk, path, a):
    """quantkit's top-1 on the full test split: a Q/DQ model as TensorRT computes it (FP16 float parts)."""
    out, _, _ = run(qk, ["eval", path, "--data", "fashion-mnist:test", "--threads", str(a.threads), "--json", "-q"])
    out = json.loads(out)
    if out["samples"] != 10000:
        raise SystemExit(f"quantkit eval {path}: {out['samples']} test samples, expected 10000")
    return 100.0 * out["top1"]


def plan_dtype(plan):
    return json.load(open(plan))["float_precision"]["dtype"]


def qat_args(a, name, steps, loss):
    lr = a.lr if a.lr is not None else MODEL_LR.get(name, DEFAULT_LR)
    # --holdout 0: the recorded recipe trains on the whole share and is scored on the test split
    # (no keep-the-best); qat's default hold-out would take 1000 of these images out of training.
    args = ["--data", "fashion-mnist:train", "--steps", str(steps), "--batch-size", str(a.batch), "--lr", str(lr),
            "--loss", loss, "--seed", "1", "--threads", str(a.threads), "--holdout", "0"]
    if a.learn_scales:
        args.append("--learn-scales")
    return args + a.extra


def ptq_row(qk, name, path, fp32, x, y, a):
    """fp32: quantkit's top-1 of the FP32 model, what the default (FP16) export's loss is measured from."""
    tried = []
    for method, weights in PTQ_CONFIGS:
        out = os.path.join(a.work, name, f"ptq_{method}_{weights}")
        plan = os.path.join(out, "plan.json")
        if not (a.reuse and os.path.exists(os.path.join(out, "model.qdq.onnx"))
                and plan_dtype(plan) == DEFAULT_FLOAT_DTYPE):
            run(qk, ["calibrate", path, "--data", "fashion-mnist:calib", "--samples", "1024", "--method", method,
                     "--weights", weights, "--threads", str(a.threads), "-o", out, "-q"])
        # The same plan with FP32 float parts, for onnxruntime (no calibration: the plan's scales).
        fp32_model = os.path.join(out, "model.fp32.qdq.onnx")
        run(qk, ["convert", plan, fp32_model, "--model", path, "--float-dtype", "fp32"])
        acc = top1_quantkit(qk, os.path.join(out, "model.qdq.onnx"), a)
        acc_ort = top1(fp32_model, x, y)
        tried.append({"config": f"{method}, {weights} weights", "top1_fp16_quantkit": acc, "top1_fp32_ort": acc_ort,
                      "float_dtype": plan_dtype(plan), "plan": plan, "weights": weights})
        print(f"{name} PTQ {method} {weights}: FP16 (quantkit) {acc:.2f}, FP32 (onnxruntime) {acc_ort:.2f} "
              f"(FP32 {fp32:.2f})", file=sys.stderr, flush=True)
        if fp32 - acc >= MIN_PTQ_LOSS:
            break
    return tried[-1], tried


def model_row(qk, name, a, x, y, manifest):
    path = os.path.join(ROOT, "models", "zoo", name + ".onnx")
    row = {"model": name, "fp32": top1(path, x, y), "fp32_quantkit": top1_quantkit(qk, path, a)}
    row["ptq"], row["ptq_tried"] = ptq_row(qk, name, path, row["fp32_quantkit"], x, y, a)
    row["ptq_loses"] = row["fp32_quantkit"] - row["ptq"]["top1_fp16_quantkit"] >= MIN_PTQ_LOSS
    original_images = manifest["models"][name]["training"].get("epochs", 1) * TRAIN_SAMPLES
    steps = max(1, math.floor(a.share * original_images / a.batch))
    row.update(steps=steps, batch=a.batch, share=steps * a.batch / original_images)
    for kind, loss in (("label_free", "mse"), ("labels", a.labels_loss)):
        out = os.path.join(a.work, name, "qat_" + kind)
        args = qat_args(a, name, steps, loss)
        stdout, wall, cpu = run(qk, ["qat", path, "--plan", row["ptq"]["plan"], "--weights", row["ptq"]["weights"],
                                     *args, "-o", out, "-q"])
        log = json.load(open(os.path.join(out, "training_log.json")))
        # The same fine-tuned parameters exported with FP32 float parts: resumed at its last step, no step more.
        out32 = out + "_fp32"
        run(qk, ["qat", path, "--plan", row["ptq"]["plan"], "--weights", row["ptq"]["weights"], *args,
                 "--float-dtype", "fp32", "--resume", os.path.join(out, "checkpoint.npz"), "-o", out32, "-q"])
        if not filecmp.cmp(os.path.join(out, "model.float.onnx"), os.path.join(out32, "model.float.onnx"),
                           shallow=False):
            raise SystemExit(f"{name} QAT {kind}: the --float-dtype fp32 re-export has other parameters")
        if plan_dtype(os.path.join(out32, "plan.json")) != "fp32":
            raise SystemExit(f"{name} QAT {kind}: qat --float-dtype fp32 wrote a non-FP32 model")
        row[kind] = {"top1_fp16_quantkit": top1_quantkit(qk, os.path.join(out, "model.qdq.onnx"), a),
                     "top1_fp32_ort": top1(os.path.join(out32, "model.qdq.onnx"), x, y),
                     "float_dtype": plan_dtype(os.path.join(out, "plan.json")), "wall_s": wall, "cpu_s": cpu,
                     "cpu_s_per_step": log["cpu_seconds_per_step"], "peak_rss": log["peak_rss_bytes"],
                     "command": " ".join(["quantkit", "qat", f"models/zoo/{name}.onnx", "--plan", "PTQ/plan.json",
                                          "--weights", row["ptq"]["weights"], *args, "-o", "OUT"])}
        print(f"{name} QAT {kind}: FP16 (quantkit) {row[kind]['top1_fp16_quantkit']:.2f}, FP32 (onnxruntime) "
              f"{row[kind]['top1_fp32_ort']:.2f} ({wall:.0f} s wall, {cpu:.0f} s CPU)", file=sys.stderr, flush=True)
    return row


def markdown(rows, ort_version):
    dtypes = sorted({r["ptq"]["float_dtype"] for r in rows} | {r[k]["float_dtype"] for r in rows
                                                               for k in ("label_free", "labels")})
    if len(dtypes) > 1:
        raise SystemExit(f"models written with different float dtypes: {dtypes}")
    dt = dtypes[0].upper() if dtypes else "FP16"
    lines = [
        "Generated by `make qat-table` (`qkdev/qat_table.py`); do not edit by hand. Every top-1 is on the full "
        "10,000-image fashion-mnist test split, two per model.qdq.onnx: "
        f"**{dt} (quantkit)** = the model as quantkit writes it by default, INT8 with {dt} float parts "
        f"(`--float-dtype {dtypes[0] if dtypes else 'fp16'}`), scored by `quantkit eval`, which computes it as "
        f"TensorRT 11 does ({dt} storage, FP32 accumulation); **FP32 (onnxruntime)** = the same PTQ plan "
        "(`quantkit convert plan.json --float-dtype fp32`) or the same fine-tuned parameters (`quantkit qat "
        "--resume OUT/checkpoint.npz --float-dtype fp32`, no further step) written with FP32 float parts and run by "
        f"onnxruntime {ort_version} (CPU, graph optimizations off), as this table was measured before issue 29. "
        "onnxruntime does not score the FP16 models: its CPU FP16 QuantizeLinear truncates instead of rounding "
        "(docs/strongly-typed.md). FP32 = the original model in onnxruntime (quantkit's number in parentheses where "
        f"it differs). The PTQ config is the first that loses >= {MIN_PTQ_LOSS:g} points in the {dt} (quantkit) "
        "column. QAT label-free = MSE to the FP32 logits; labels = cross-entropy mixed with distillation (each row's "
        "--loss, listed below). Steps are batches of fashion-mnist:train images, as a share of the images the "
        "model's original training saw. Wall times (of the training run) on a 2-core machine shared with other "
        "engineers' builds: CPU time (user+sys) is the comparable number.",
        "",
        f"| model | FP32 | PTQ config | PTQ {dt} (quantkit) | PTQ FP32 (onnxruntime) | QAT label-free {dt} (quantkit) "
        f"| QAT label-free FP32 (onnxruntime) | QAT labels {dt} (quantkit) | QAT labels FP32 (onnxruntime) | "
        "steps (share of training) | CPU label-free / labels | wall label-free / labels | peak RSS |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        fp32 = f"{r['fp32']:.2f}" if f"{r['fp32']:.2f}" == f"{r['fp32_quantkit']:.2f}" else \
            f"{r['fp32']:.2f} ({r['fp32_quantkit']:.2f})"
        ptq = f"{r['ptq']['top1_fp16_quantkit']:.2f}"
        if not r["ptq_loses"]:
            ptq += f" (no config loses >= {MIN_PTQ_LOSS:g})"
        lf, lb = r["label_free"], r["labels"]
        lines.append(
            f"| {r['model']} | {fp32} | {r['ptq']['config']} | {ptq} | {r['ptq']['top1_fp32_ort']:.2f} | "
            f"{lf['top1_fp16_quantkit']:.2f} | {lf['top1_fp32_ort']:.2f} | {lb['top1_fp16_quantkit']:.2f} | "
            f"{lb['top1_fp32_ort']:.2f} | {r['steps']} x {r['batch']} ({100 * r['share']:.1f}%) | "
            f"{lf['cpu_s']:.0f} s / {lb['cpu_s']:.0f} s | {lf['wall_s']:.0f} s / {lb['wall_s']:.0f} s | "
            f"{max(lf['peak_rss'], lb['peak_rss']) / 2**20:.0f} MiB |")
    for r in rows:
        if not r["ptq_loses"]:
            tried = ", ".join(f"{t['config']} {t['top1_fp16_quantkit']:.2f} ({t['top1_fp32_ort']:.2f} FP32 in "
                              "onnxruntime)" for t in r["ptq_tried"])
            lines += ["", f"{r['model']}: no PTQ configuration loses >= {MIN_PTQ_LOSS:g} points (FP32 "
                          f"{r['fp32_quantkit']:.2f}; {dt} in quantkit: {tried}); QAT starts from the last."]
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
        doc = json.load(open(a.json))
        write({r["model"]: r for r in doc["rows"]}, a, doc["onnxruntime"])
        return
    x, y = zoo_data.load_split("test")
    ort_version = importlib.metadata.version("onnxruntime")
    manifest = json.load(open(os.path.join(ROOT, "models", "zoo", "manifest.json")))
    names = a.models.split(",")
    unknown = [n for n in names if n not in manifest["models"]]
    if unknown:
        raise SystemExit(f"unknown zoo model(s): {', '.join(unknown)} (models/zoo/manifest.json)")
    rows = {}
    if a.update and a.json and os.path.exists(a.json):
        doc = json.load(open(a.json))
        if doc.get("onnxruntime") == ort_version:  # rows from another onnxruntime, or before FP16: not kept
            rows = {r["model"]: r for r in doc["rows"] if "fp32_quantkit" in r}
    for n in names:
        rows[n] = model_row(a.quantkit, n, a, x, y, manifest)
        write(rows, a, ort_version)  # after every model: a long run interrupted keeps the rows it finished


def write(rows, a, ort_version):
    ordered = [rows[n] for n in ALL_MODELS.split(",") if n in rows]
    ordered += [r for n, r in sorted(rows.items()) if n not in ALL_MODELS.split(",")]
    md = markdown(ordered, ort_version)
    print(md, flush=True)
    if a.markdown:
        with open(a.markdown + ".tmp", "w") as f:
            f.write(md)
        os.replace(a.markdown + ".tmp", a.markdown)
    if a.json:
        with open(a.json + ".tmp", "w") as f:  # paths relative to the repository
            f.write(json.dumps({"onnxruntime": ort_version, "rows": ordered}, indent=1).replace(ROOT + os.sep, ""))
        os.replace(a.json + ".tmp", a.json)

if __name__ == "__main__":
    main()
