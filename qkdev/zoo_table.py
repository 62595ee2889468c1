"""The zoo accuracy table (issue #8, item 5): FP32 vs INT8 top-1 for every zoo model with every
calibration method, per-channel vs per-tensor weights, and the mixed-precision fallback plan.
Every INT8 model is what quantkit writes by default: INT8 Q/DQ with FP16 float parts (`--float-dtype
fp16`, issue 29), scored by `quantkit eval` as TensorRT 11 computes it (FP16 storage, FP32
accumulation); one column gives the best method with FP32 float parts (`--float-dtype fp32`) beside it.

Everything goes through the quantkit CLI, exactly as a user would run it:
  1. `calibrate --stats` once per model on fashion-mnist:calib (one pass of the model);
  2. `calibrate --from-stats --method M` for every method (no model run), per-channel weights, and
     per-tensor weights and `--float-dtype fp32` for the best method;
  3. `eval` of each Q/DQ model on fashion-mnist:test (INT8 simulated by running the Q/DQ model);
  4. `fallback --budget B` on fashion-mnist:val (held out from both) for the best method's plan,
     then `eval` of its Q/DQ model on the test split.
The best method is chosen on the validation split (`calibrate --compare-methods` style), never on
the test split it is reported on.

  python -m qkdev.zoo_table QUANTKIT [--calib N] [--val N] [--test N] [--budget B]
                             [--markdown docs/zoo-table.md] [--json out.json] [--check]

--check asserts what issue #8 asks of CI: for every model, the best method (with the fallback plan
where the plain INT8 plan misses the budget) is within the budget of FP32 on the test split, up to
the statistical slack of the sample count (TEST_SLACK_POINTS below).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METHODS = ["max", "entropy", "percentile:99.99", "mse"]
# The fallback search meets its budget on the validation split; on an independent test split of
# n samples the difference of two top-1 estimates moves by about sqrt(2 p (1-p) / n): 0.6 points
# at n = 1000, p = 0.9. The CI check allows budget + this slack.
TEST_SLACK_POINTS = 1.0


def run(qk, args):
    p = subprocess.run([qk] + args, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"quantkit {' '.join(args)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p.stdout


def top1(qk, model, split, samples):
    out = json.loads(run(qk, ["eval", model, "--data", f"fashion-mnist:{split}", "--samples", str(samples),
                              "--json", "-q"]))
    return 100.0 * out["top1"]


def plan_dtype(out):
    """The float dtype of the non-quantized tensors of the Q/DQ model written to OUT (its plan.json)."""
    return json.load(open(os.path.join(out, "plan.json")))["float_precision"]["dtype"]


def model_row(qk, name, path, a, work):
    row = {"model": name, "methods": {}, "val": {}, "float_dtypes": set()}
    stats = os.path.join(work, f"{name}.qkstats")
    t0 = time.time()
    run(qk, ["calibrate", path, "--data", "fashion-mnist:calib", "--samples", str(a.calib), "--stats", stats, "-q"])
    row["fp32"] = top1(qk, path, "test", a.test)
    fp32_val = top1(qk, path, "val", a.val)
    for m in METHODS:
        out = os.path.join(work, name, m.replace(":", "_"))
        run(qk, ["calibrate", path, "--from-stats", stats, "--method", m, "-o", out, "-q"])
        qdq = os.path.join(out, "model.qdq.onnx")
        row["float_dtypes"].add(plan_dtype(out))
        row["methods"][m] = top1(qk, qdq, "test", a.test)
        row["val"][m] = top1(qk, qdq, "val", a.val)
    best = max(METHODS, key=lambda m: (row["val"][m], -METHODS.index(m)))
    row["best"] = best
    out = os.path.join(work, name, "per_tensor")
    run(qk, ["calibrate", path, "--from-stats", stats, "--method", best, "--weights", "per-tensor", "-o", out, "-q"])
    row["float_dtypes"].add(plan_dtype(out))
    row["per_tensor"] = top1(qk, os.path.join(out, "model.qdq.onnx"), "test", a.test)
    # The best method's plan with FP32 float parts (the pre-issue-29 default), for comparison.
    out = os.path.join(work, name, "fp32_float")
    run(qk, ["calibrate", path, "--from-stats", stats, "--method", best, "--float-dtype", "fp32", "-o", out, "-q"])
    if plan_dtype(out) != "fp32":
        raise SystemExit(f"{name}: calibrate --float-dtype fp32 wrote a {plan_dtype(out)} plan")
    row["best_fp32_float"] = top1(qk, os.path.join(out, "model.qdq.onnx"), "test", a.test)
    # Fallback on the validation split, reported on the test split: on the best method's plan
    # (what a user ships) and on the entropy plan (where PTQ hurts most, to show what it recovers).
    for key, method in (("fallback", best), ("entropy_fallback", "entropy")):
        plan = os.path.join(work, name, method.replace(":", "_"), "plan.json")
        fb = os.path.join(work, name, key)
        p = subprocess.run([qk, "fallback", path, "--plan", plan, "--data", "fashion-mnist:val", "--samples",
                            str(a.val), "--budget", str(a.budget), "-o", fb, "--json", "-q"],
                           capture_output=True, text=True)
        if p.returncode not in (0, 1):  # 1: budget not reachable (reported, not an error here)
            raise SystemExit(f"quantkit fallback {path}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
        report = json.loads(p.stdout)
        row["float_dtypes"].add(plan_dtype(fb))
        row[key] = {"top1": top1(qk, os.path.join(fb, "model.qdq.onnx"), "test", a.test),
                    "float_nodes": report["float_nodes"],
                    "within_budget_on_val": report["within_budget"],
                    "layer_precisions": report["layer_precisions"],
                    "trials": report["trials"],
                    "search_seconds": report["search_seconds"],
                    "trial_seconds": report["trial_seconds"]}
    row["fp32_val"] = fp32_val
    if len(row["float_dtypes"]) != 1:  # the header states one float dtype for every INT8 column but one
        raise SystemExit(f"{name}: INT8 models written with float dtypes {sorted(row['float_dtypes'])}")
    row["float_dtype"] = row.pop("float_dtypes").pop()
    row["seconds"] = time.time() - t0
    return row


def markdown(rows, a):
    dtypes = {r["float_dtype"] for r in rows}
    if len(dtypes) > 1:
        raise SystemExit(f"rows written with different float dtypes: {sorted(dtypes)}")
    dtype = dtypes.pop() if dtypes else "fp16"
    dt = dtype.upper()
    lines = [
        "# Zoo accuracy table",
        "",
        "Generated by `make zoo-table` (`qkdev/zoo_table.py`); do not edit by hand.",
        f"Calibration: first {a.calib} samples of fashion-mnist:calib. Best method and fallback chosen on the",
        f"first {a.val} samples of fashion-mnist:val; every top-1 below is on the first {a.test} samples of",
        f"fashion-mnist:test. FP32 = the original model. INT8 = the Q/DQ model quantkit writes by default: INT8",
        f"with {dt} float parts (`--float-dtype {dtype}`, what TensorRT 11 builds strongly typed), scored by",
        f"`quantkit eval`, which computes it as TensorRT does ({dt} storage, FP32 accumulation); the column",
        "\"best, FP32 float parts\" is the best method's plan written with `--float-dtype fp32`, for comparison.",
        f"Weights per channel unless stated. Fallback: `quantkit fallback --budget {a.budget}` on the best method's",
        "plan.",
        "",
        "| model | FP32 | " + " | ".join(METHODS) + " | best (val) | best, per-tensor weights |"
        " best, FP32 float parts | best + fallback | entropy + fallback | float layers (entropy + fallback) | search |",
        "|---|---|" + "---|" * len(METHODS) + "---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [f"{r['methods'][m]:.2f}" for m in METHODS]
        fb, efb = r["fallback"], r["entropy_fallback"]
        floats = ", ".join(f"`{n}`" for n in efb["float_nodes"]) or "none"
        lines.append(f"| {r['model']} | {r['fp32']:.2f} | " + " | ".join(cells) +
                     f" | {r['best']} | {r['per_tensor']:.2f} | {r['best_fp32_float']:.2f}"
                     f" | {fb['top1']:.2f} ({len(fb['float_nodes'])} float)"
                     f" | {efb['top1']:.2f} | {floats} | {efb['trials']} trials, {efb['search_seconds']:.1f} s |")
    lines += ["", "Search: trials of the entropy + fallback search (each a full INT8 simulation of the "
              f"{a.val} validation samples against cached FP32 outputs) and its wall time."]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("quantkit")
    p.add_argument("--calib", type=int, default=1024)
    p.add_argument("--val", type=int, default=1000)
    p.add_argument("--test", type=int, default=10000)
    p.add_argument("--budget", type=float, default=0.5)
    p.add_argument("--models", default="", help="comma-separated subset of the zoo")
    p.add_argument("--markdown")
    p.add_argument("--json")
    p.add_argument("--check", action="store_true")
    a = p.parse_args()
    manifest = json.load(open(os.path.join(ROOT, "models", "zoo", "manifest.json")))["models"]
    names = [n for n in manifest if not manifest[n].get("qat") and "qat" not in n]
    if a.models:
        names = [n for n in names if n in a.models.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for n in names:
            r = model_row(a.quantkit, n, os.path.join(ROOT, "models", "zoo", f"{n}.onnx"), a, work)
            print(f"{n}: FP32 {r['fp32']:.2f}  " + "  ".join(f"{m} {r['methods'][m]:.2f}" for m in METHODS) +
                  f"  best {r['best']}  per-tensor {r['per_tensor']:.2f}  best fp32-float {r['best_fp32_float']:.2f}"
                  f"  fallback {r['fallback']['top1']:.2f}"
                  f"  entropy+fallback {r['entropy_fallback']['top1']:.2f}"
                  f" ({len(r['entropy_fallback']['float_nodes'])} float)  {r['seconds']:.0f} s", flush=True)
            rows.append(r)
    if a.markdown:
        with open(a.markdown + ".tmp", "w") as f:
            f.write(markdown(rows, a))
        os.replace(a.markdown + ".tmp", a.markdown)
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump({"calib": a.calib, "val": a.val, "test": a.test, "budget": a.budget,
                       "float_dtype": rows[0]["float_dtype"] if rows else None, "rows": rows}, f, indent=1)
        os.replace(a.json + ".tmp", a.json)
    if a.check:
        bad = []
        for r in rows:
            best_plain = r["methods"][r["best"]]
            final = max(best_plain, r["fallback"]["top1"]) if r["fp32"] - best_plain > a.budget else best_plain
            if r["fp32"] - final > a.budget + TEST_SLACK_POINTS:
                bad.append(f"{r['model']}: FP32 {r['fp32']:.2f}, best INT8 {final:.2f} (budget {a.budget} "
                           f"+ slack {TEST_SLACK_POINTS})")
        if bad:
            raise SystemExit("zoo table check failed:\n  " + "\n  ".join(bad))
        print(f"zoo table check: {len(rows)} models within {a.budget} + {TEST_SLACK_POINTS} points of FP32")


if __name__ == "__main__":
    main()
