"""calibrate's default before and after the repair ladder (issue 47 item 6; docs/accuracy.md).

For each zoo model (Fashion-MNIST, scored on the test set's first --test-samples against labels)
and each cached real model (~/.cache/quantkit/realmodels/<name>/{model.onnx,calib,val}, scored by
output SQNR and rel MSE against FP32 on val): `quantkit calibrate` with the default options and
`--repair off` (today's default), each timed, then the written model evaluated.

    .venv/bin/python -m qkdev.repair_table build/dev/tools/quantkit/quantkit [--methods max,entropy]
        [--models ppocr_rec,minilm]
"""
import argparse
import json
import os
import re
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REALMODELS = os.path.expanduser("~/.cache/quantkit/realmodels")


def calibrate(qk, model, data, out, method, repair):
    start = time.perf_counter()
    p = subprocess.run([qk, "calibrate", model, "--data", data, "--method", method, "-o", out, "-q",
                        "--repair", repair], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if p.returncode not in (0, 1):
        raise RuntimeError(f"{model} {method} {repair}: exit {p.returncode}\n{p.stderr}")
    rung = re.search(r"^repair: .*written: rung \d \(([^)]*)\)", p.stdout, re.M)
    return seconds, (rung.group(1) if rung else "-"), p.returncode, "warning: check" in p.stdout


def evaluate(qk, written, reference, data, samples):
    p = subprocess.run([qk, "eval", written, "--data", data, "--reference", reference, "--samples", str(samples),
                        "--json", "-q"], capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("quantkit")
    ap.add_argument("--methods", default="max,entropy")
    ap.add_argument("--test-samples", type=int, default=2000)
    ap.add_argument("--models", help="comma-separated names (zoo or cached real models); default: all")
    args = ap.parse_args()
    rows = []
    cases = [(os.path.join(ROOT, "models", "zoo", f"{n}.onnx"), "fashion-mnist:calib", "fashion-mnist:test", n)
             for n in ("plain_cnn", "resnet_small", "mobilenetv2_small", "efficientnet_small", "vit_tiny")]
    if os.path.isdir(REALMODELS):
        for n in sorted(os.listdir(REALMODELS)):
            d = os.path.join(REALMODELS, n)
            if all(os.path.exists(os.path.join(d, f)) for f in ("model.onnx", "calib", "val")):
                cases.append((os.path.join(d, "model.onnx"), os.path.join(d, "calib"), os.path.join(d, "val"), n))
    if args.models:
        wanted = set(args.models.split(","))
        unknown = wanted - {c[3] for c in cases}
        if unknown:
            ap.error(f"--models: {', '.join(sorted(unknown))}: neither a zoo model nor a cached real model")
        cases = [c for c in cases if c[3] in wanted]
    print(f"{'model':<20} {'method':<8} {'FP32':>7} {'off: score':>11} {'s':>6} {'auto: score':>12} {'s':>6} "
          f"{'x':>5}  rung")
    with tempfile.TemporaryDirectory() as tmp:
        for model, calib, val, name in cases:
            fp32 = "-"
            if "fashion" in val:
                p = subprocess.run([args.quantkit, "eval", model, "--data", val, "--samples", str(args.test_samples),
                                    "--json", "-q"], capture_output=True, text=True, check=True)
                fp32 = f"{100 * json.loads(p.stdout)['top1']:.2f}%"
            for method in args.methods.split(","):
                result = {}
                for repair in ("off", "auto"):
                    out = os.path.join(tmp, f"{name}-{method}-{repair}")
                    try:
                        seconds, rung, rc, warned = calibrate(args.quantkit, model, calib, out, method, repair)
                        written = os.path.join(out, "model.qdq.onnx")
                        e = evaluate(args.quantkit, written, model, val, args.test_samples)
                    except (RuntimeError, subprocess.CalledProcessError) as err:
                        print(f"{name:<20} {method:<8} {repair}: {str(err).splitlines()[0]}")
                        break
                    # Labelled zoo data: top-1 points; otherwise output SQNR (dB) vs FP32.
                    score = f"{100 * e['top1']:.2f}%" if e.get("top1") is not None and "fashion" in val \
                        else f"{e['agreement']['sqnr_db']:.1f}dB"
                    result[repair] = (score, seconds, rung, rc, warned)
                if len(result) == 2:
                    off, auto = result["off"], result["auto"]
                    rows.append((name, method, off, auto))
                    print(f"{name:<20} {method:<8} {fp32:>7} {off[0]:>11}{'!' if off[4] else ' '}{off[1]:>6.1f} "
                          f"{auto[0]:>12}{'!' if auto[3] else ' '}{auto[1]:>6.1f} {auto[1] / off[1]:>5.2f}  {auto[2]}",
                          flush=True)
    print("(! after a score: off warned of a failed check / auto missed the target, exit 1; rung '-': no ladder)")


if __name__ == "__main__":
    main()
