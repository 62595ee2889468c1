"""The shipped real models calibrated on a device and on the CPU, activation scales compared
(issue 26, item 5: within 1e-5 relative):

    python3 bench/gpu/realmodels_device.py build/cuda/tools/quantkit/quantkit --device cuda --out results/

For each model of --models (default: the shipped ones of docs/realmodels-table.md, PP-OCRv4
det/rec/cls and Silero VAD) under --root (default ${QUANTKIT_CACHE:-~/.cache/quantkit}/realmodels,
made by `python -m qkdev.realmodels`), `quantkit calibrate` runs twice with the same data
(<model>/calib, the first --samples samples), --device cpu and --device DEVICE, for each method of
--methods (quantkit's default, and max). The activation ranges (ranges.txt: one "tensor: amax"
line per quantized activation) are compared tensor by tensor: the largest relative difference,
and how many exceed TOLERANCE. Prints one line per model and method and writes
realmodels.json / realmodels.md under --out. Exit 1 when a run fails or a difference
exceeds the tolerance (every model is still run).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

SHIPPED = ["ppocr_det", "ppocr_rec", "ppocr_cls", "silero_vad"]
TOLERANCE = 1e-5  # relative, per activation amax (the bound)


def read_ranges(path):
    ranges = {}
    with open(path) as f:
        for line in f:
            name, sep, value = line.rpartition(":")
            if sep:
                ranges[name.strip()] = float(value)
    return ranges


def calibrate(quantkit, model, data, samples, method, device, out):
    cmd = [quantkit, "calibrate", model, "--data", data, "--samples", str(samples), "-q", "-o", out,
           "--device", device]
    if method != "default":
        cmd += ["--method", method]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        return None, wall, f"exit {r.returncode}: {r.stderr.strip()[-600:]}"
    return read_ranges(os.path.join(out, "ranges.txt")), wall, ""


def compare(cpu, dev):
    """(largest relative difference, tensors beyond TOLERANCE, tensors compared, missing names)."""
    missing = sorted(set(cpu) ^ set(dev))
    worst, beyond = 0.0, 0
    for name, a in cpu.items():
        if name not in dev:
            continue
        rel = abs(dev[name] - a) / max(abs(a), 1e-30)
        worst = max(worst, rel)
        beyond += rel > TOLERANCE
    return worst, beyond, len(cpu), missing


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("quantkit")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default=",".join(SHIPPED))
    ap.add_argument("--methods", default="default,max")
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--root", default=os.path.join(os.environ.get("QUANTKIT_CACHE") or
                                                   os.path.join(os.path.expanduser("~"), ".cache", "quantkit"),
                                                   "realmodels"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows, failed = [], False
    with tempfile.TemporaryDirectory() as work:
        for name in [m for m in args.models.split(",") if m]:
            folder = os.path.join(args.root, name)
            model, data = os.path.join(folder, "model.onnx"), os.path.join(folder, "calib")
            if not os.path.exists(model):
                print(f"{name}: not found under {args.root} (python -m qkdev.realmodels; scripts/fetch_debs.sh packs "
                      "them for the GPU machine)", flush=True)
                rows.append({"model": name, "error": "not found"})
                failed = True
                continue
            for method in [m for m in args.methods.split(",") if m]:
                row = {"model": name, "method": method, "device": args.device, "samples": args.samples}
                res = {}
                # Keyed by role, not by name: the CPU dry run compares cpu with cpu.
                for role, device in (("cpu", "cpu"), ("device", args.device)):
                    out = os.path.join(work, f"{name}.{method}.{role}")
                    ranges, wall, err = calibrate(args.quantkit, model, data, args.samples, method, device, out)
                    row[f"wall_s_{role}"] = round(wall, 2)
                    if err:
                        row["error"] = f"--device {device}: {err}"
                        break
                    res[role] = ranges
                if "error" not in row:
                    worst, beyond, n, missing = compare(res["cpu"], res["device"])
                    row.update(max_rel_diff=worst, beyond_tolerance=beyond, tensors=n, missing=missing,
                               ok=beyond == 0 and not missing)
                failed |= not row.get("ok", False)
                rows.append(row)
                if "error" in row:
                    print(f"{name} ({method}): FAILED {row['error']}", flush=True)
                else:
                    print(f"{name} ({method}): {n} activations, largest relative difference {worst:.3g} "
                          f"({beyond} beyond {TOLERANCE:g}{'; names differ: ' + ', '.join(missing[:5]) if missing else ''}); "
                          f"wall cpu {row['wall_s_cpu']} s, {args.device} {row['wall_s_device']} s", flush=True)
    with open(os.path.join(args.out, "realmodels.json"), "w") as f:
        json.dump({"tolerance": TOLERANCE, "rows": rows}, f, indent=2, sort_keys=True)
    with open(os.path.join(args.out, "realmodels.md"), "w") as f:
        f.write(f"### Real models: calibrate --device {args.device} vs cpu ({args.samples} samples; bound "
                f"{TOLERANCE:g} relative per activation amax)\n\n| model | method | activations | largest rel. diff | "
                "beyond bound | wall cpu / device (s) |\n|---|---|---|---|---|---|\n")
        for r in rows:
            if "max_rel_diff" in r:
                f.write(f"| {r['model']} | {r['method']} | {r['tensors']} | {r['max_rel_diff']:.3g} | "
                        f"{r['beyond_tolerance']} | {r['wall_s_cpu']} / {r['wall_s_device']} |\n")
            else:
                f.write(f"| {r['model']} | {r.get('method', '-')} | - | - | {r.get('error', '')[:80]} | - |\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
