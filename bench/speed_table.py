"""Engine speed, side by side in one run: FP32 pass, calibration and INT8 simulation (make bench).

    .venv/bin/python bench/speed_table.py --quantkit build/dev/tools/quantkit/quantkit [--quick]
        [--models resnet18,mobilenet_v2,efficientnet_b0,vit_b_16,resnet_small] [--samples 256,1024]

Every measurement is one child process over the same .npy data (seeded N(0, 1), the model's input
shape), batch --batch, every runner at its default thread count (all cores), so each row is what a
user's command costs end to end: load + passes + writing results. Per child: wall seconds, CPU
seconds (user + sys: the honest number on a shared machine) and peak RSS (getrusage of the child
alone; data are written by a separate process so the parent stays small).

Runners (FP32 table): quantkit eval; onnxruntime InferenceSession (default graph optimizations);
PyTorch eager (Debian torch 1.13 + torchvision, .venv); the same model traced to TorchScript, run by
torch 1.13 (.venv) and by PyPI torch 2.x (.venv-torch, when present): the libtorch comparison on
identical ops. Calibration table: quantkit calibrate --method max / entropy, quantkit eval --plan
(FP32 reference + simulated INT8 pass with the max plan), and onnxruntime.quantization.quantize_static (MinMax,
Entropy; its memory grows with the sample count, so it runs up to --max-ort-samples only).
Simulation table: the simulated and the FP32 pass timed inside one eval --plan (its model_seconds and
reference_seconds), and on the zoo model a fallback search (rel_mse, 3 float layers at most): its mean
trial time against one whole simulated pass (trials start from cached activations of the prefix).
Ratios: quantkit/ort for FP32 (target <= 1.5), calibrate/quantkit-FP32 (max <= 1.15, entropy <= 1.3),
simulated/FP32 (<= 1.3), trial/simulated (<= 0.7), ORT-quantize/quantkit-calibrate (>= 3 MinMax, >= 10
Entropy; peak RSS >= 10x).
Torchvision models have random weights (qkdev/export_torchvision.py); resnet_small is a zoo model.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # qkdev: the repository's development scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_calibrate  # noqa: E402

TORCHVISION = ["resnet18", "mobilenet_v2", "efficientnet_b0", "vit_b_16"]
ZOO = {"resnet_small": os.path.join(ROOT, "models", "zoo", "resnet_small.onnx")}
# vit_b_16 is ~10x resnet18's FLOPs: its 1024-sample rows would take most of an hour on 2 cores.
SAMPLE_CAP = {"vit_b_16": 256}

ORT_EVAL = r'''
import sys, numpy as np, onnxruntime as ort
model, data, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
x = np.load(data, mmap_mode="r")
sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
name = sess.get_inputs()[0].name
for i in range(0, len(x), batch):
    sess.run(None, {name: np.ascontiguousarray(x[i:i + batch])})
'''

TORCH_RUN = r'''
import sys, numpy as np, torch
kind, model, data, batch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
x = np.load(data, mmap_mode="r")
if kind == "eager":
    import torchvision
    torch.manual_seed(0)
    m = getattr(torchvision.models, model)(weights=None).eval()
else:
    m = torch.jit.load(model).eval()
with torch.inference_mode():
    for i in range(0, len(x), batch):
        m(torch.from_numpy(np.ascontiguousarray(x[i:i + batch])))
'''

TRACE = r'''
import sys, torch, torchvision
name, out = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
m = getattr(torchvision.models, name)(weights=None).eval()
with torch.no_grad():
    torch.jit.save(torch.jit.trace(m, torch.randn(1, 3, 224, 224)), out)
'''

ORT_QUANTIZE = peer_calibrate.ORT_CHILD  # quantize_static, QDQ, per-channel, symmetric activations

MAKE_DATA = r'''
import sys, numpy as np, onnx
model, n, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
dims = [d.dim_value for d in onnx.load(model, load_external_data=False).graph.input[0].type.tensor_type.shape.dim]
np.save(path, np.random.default_rng(0).standard_normal((n, *dims[1:]), dtype=np.float32))
'''


class Run:
    def __init__(self, wall, cpu, rss, out=""):
        self.wall, self.cpu, self.rss, self.out = wall, cpu, rss, out

    def cell(self):
        return f"{self.wall:7.1f}s {self.cpu:7.1f}c {self.rss / 2**20:6.0f}M"


def measure(cmd, env=None, ok=(0,)):
    """Runs cmd as a child; returns its wall seconds, CPU seconds and peak RSS, or None when its exit
    code is not in `ok`."""
    t = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as errf:
        p = subprocess.Popen(cmd, stdout=out, stderr=errf, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        dt = time.perf_counter() - t
        out.seek(0)
        errf.seek(0)
        text, err = out.read().decode(errors="replace"), errf.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) not in ok:
        print(f"  ! {' '.join(cmd[:3])} failed: {err.strip().splitlines()[-1] if err.strip() else '?'}",
              file=sys.stderr)
        return None
    return Run(dt, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, text)


def json_field(run, *keys):
    """A number from a child's --json output (None when the child failed)."""
    if not run:
        return None
    try:
        v = json.loads(run.out)
        for k in keys:
            v = v[k]
        return v
    except (ValueError, KeyError):  # an older quantkit without the field
        return None


RATIO_ON = "wall"


def ratio(a, b):
    if not (a and b):
        return "    n/a"
    return f"{getattr(a, RATIO_ON) / getattr(b, RATIO_ON):6.2f}x"


def model_path(name):
    if name in ZOO:
        return ZOO[name]
    from qkdev import export_torchvision
    return export_torchvision.ensure(name, 13, log=lambda *a, **k: None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quantkit", required=True)
    ap.add_argument("--models", default=",".join(TORCHVISION + list(ZOO)))
    ap.add_argument("--samples", default="256,1024")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--max-ort-samples", type=int, default=256,
                    help="quantize_static keeps every activation of every batch: skip it above this")
    ap.add_argument("--quick", action="store_true", help="resnet18 and resnet_small, 64 samples")
    ap.add_argument("--ratio-on", choices=["wall", "cpu"], default="wall",
                    help="ratios of wall time (the targets) or of CPU time (meaningful on a loaded machine)")
    args = ap.parse_args()
    global RATIO_ON
    RATIO_ON = args.ratio_on
    if args.quick:
        args.models, args.samples = "resnet18,resnet_small", "64"
    py, py_new = os.path.join(ROOT, ".venv", "bin", "python"), os.path.join(ROOT, ".venv-torch", "bin", "python")
    has_new = os.path.exists(py_new)
    qk = args.quantkit
    fp32, calib = [], []
    with tempfile.TemporaryDirectory() as d:
        for name in args.models.split(","):
            model = model_path(name)
            ts = None
            if name in TORCHVISION:
                ts = os.path.join(d, f"{name}.pt")
                subprocess.run([py, "-c", TRACE, name, ts], check=True, capture_output=True)
            sample_counts = [n for n in map(int, args.samples.split(",")) if n <= SAMPLE_CAP.get(name, 1 << 30)]
            for i, n in enumerate(sample_counts):
                data = os.path.join(d, f"{name}_{n}.npy")
                subprocess.run([py, "-c", MAKE_DATA, model, str(n), data], check=True)
                b = str(args.batch)
                common = ["--data", data, "--batch-size", b, "-q"]
                q_eval = measure([qk, "eval", model] + common)
                if i == 0:  # FP32 peers at the first sample count
                    o_eval = measure([py, "-c", ORT_EVAL, model, data, b])
                    eager = ts_old = ts_new = None
                    if ts:
                        eager = measure([py, "-c", TORCH_RUN, "eager", name, data, b])
                        ts_old = measure([py, "-c", TORCH_RUN, "ts", ts, data, b])
                        ts_new = measure([py_new, "-c", TORCH_RUN, "ts", ts, data, b]) if has_new else None
                    fp32.append((name, n, q_eval, o_eval, eager, ts_old, ts_new))
                    print(f"fp32  {name} {n}: qk {q_eval.cell() if q_eval else 'failed'} | "
                          f"ort {o_eval.cell() if o_eval else 'failed'}", flush=True)
                out = os.path.join(d, "qk")
                q_max = measure([qk, "calibrate", model, "--method", "max", "-o", out] + common)
                plan = os.path.join(out, "plan.json")
                q_sim = measure([qk, "eval", model, "--plan", plan, "--json"] + common) if os.path.exists(plan) else None
                fb = None
                if name in ZOO and os.path.exists(plan):  # fallback trials from cached prefixes (zoo model)
                    fb = measure([qk, "fallback", model, "--plan", plan, "--data", data, "--batch-size", b,
                                  "--samples", str(n), "--metric", "rel_mse", "--budget", "0", "--max-float", "3",
                                  "--json", "-q"], ok=(0, 1))  # budget 0 is never met: exit 1
                q_ent = measure([qk, "calibrate", model, "--method", "entropy", "-o", out + "e"] + common)
                o_max = o_ent = None
                if n <= args.max_ort_samples:
                    o_max = measure([py, "-c", ORT_QUANTIZE, model, data, os.path.join(d, "o.onnx"), "max", b])
                    o_ent = measure([py, "-c", ORT_QUANTIZE, model, data, os.path.join(d, "o.onnx"), "entropy", b])
                calib.append((name, n, q_eval, q_max, q_ent, q_sim, o_max, o_ent, fb))
                print(f"calib {name} {n}: max {q_max.cell() if q_max else 'failed'} | "
                      f"entropy {q_ent.cell() if q_ent else 'failed'}", flush=True)
                os.remove(data)

    cell = lambda r: r.cell() if r else f"{'n/a':>23}"  # noqa: E731
    print(f"\nFP32 pass (wall s, CPU s = user+sys, peak RSS MiB; batch {args.batch}; ratios of {RATIO_ON} time)")
    print(f"{'model':<16}{'n':>5}  {'quantkit eval':>23}  {'onnxruntime':>23}  {'torch 1.13 eager':>23}  "
          f"{'torch 1.13 script':>23}  {'torch 2.x script':>23}  qk/ort  qk/eager  2.x/1.13")
    for name, n, q, o, e, t1, t2 in fp32:
        print(f"{name:<16}{n:>5}  {cell(q)}  {cell(o)}  {cell(e)}  {cell(t1)}  {cell(t2)}  {ratio(q, o)}  "
              f"{ratio(q, e)}   {ratio(t2, t1)}")
    print("\nCalibration (same columns; eval --plan = FP32 reference + simulated INT8 with the max plan)")
    print(f"{'model':<16}{'n':>5}  {'calibrate max':>23}  {'calibrate entropy':>23}  {'eval --plan':>23}  "
          f"{'ORT MinMax':>23}  {'ORT Entropy':>23}  max/fp32 ent/fp32 ortMM/max ortEnt/ent  RSS ortMM/max")
    for name, n, q, mx, en, sim, om, oe, _ in calib:
        rss = f"{om.rss / mx.rss:10.1f}x" if om and mx else f"{'n/a':>11}"
        print(f"{name:<16}{n:>5}  {cell(mx)}  {cell(en)}  {cell(sim)}  {cell(om)}  {cell(oe)}  "
              f"{ratio(mx, q)}  {ratio(en, q)}  {ratio(om, mx)}  {ratio(oe, en)}  {rss}")
    print("\nSimulation: simulated INT8 pass / FP32 pass, both timed inside one `eval --plan` (batch by batch, "
          "so load hits both alike; target <= 1.3); fallback trial / the simulated pass that filled its cache "
          "(zoo, target <= 0.7)")
    print(f"{'model':<16}{'n':>5}  {'simulated s':>11}  {'FP32 s':>8}  sim/fp32  {'trial s':>8}  {'sim pass s':>10}  "
          f"trial/sim  trials  checkpoints")
    for name, n, _, _, _, sim, _, _, fb in calib:
        s_sec, f_sec = json_field(sim, "model_seconds"), json_field(sim, "reference_seconds")
        row = f"{name:<16}{n:>5}  " + (f"{s_sec:11.2f}  {f_sec:8.2f}  {s_sec / f_sec:7.2f}x" if s_sec and f_sec
                                        else f"{'n/a':>29}")
        if fb and json_field(fb, "simulated_pass_seconds"):
            t, p = json_field(fb, "trial_seconds"), json_field(fb, "simulated_pass_seconds")
            row += (f"  {t:8.3f}  {p:10.3f}  {t / p:8.2f}x  {json_field(fb, 'trials'):6d}  "
                    f"{json_field(fb, 'trial_cache', 'checkpoints'):11d}")
        print(row)


if __name__ == "__main__":
    main()
