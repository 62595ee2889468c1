"""Side by side, in one run: ModelOpt's ONNX INT8 mode vs quantkit's strongly typed writer.

    .venv/bin/python bench/modelopt_side_by_side.py --quantkit build/dev/tools/quantkit/quantkit \
        [--models plain_cnn,resnet_small,...,resnet18,mobilenet_v2,vit_b_16] [--samples 256] \
        [--markdown docs/strongly-typed-bench.md]

Both tools get the same calibration bytes (one .npy: the zoo's calibration split, or seeded N(0, 1)
images for the torchvision exports of export_torchvision.py) and the max calibrator:
  ModelOpt 0.47  python -m modelopt.onnx.quantization --quantize_mode int8 --calibration_method max
                 (its default high-precision dtype, fp16), from .venv-peers (scripts/setup_peers.sh)
  quantkit       quantkit calibrate --method max --float-dtype fp16
For each written model: tensors per dtype, Cast / QuantizeLinear / DequantizeLinear counts, Casts
right after a DequantizeLinear (a blocked fusion), `quantkit lint` findings, accuracy against the
FP32 model in onnxruntime (top-1 with labels, else argmax agreement; both tools' models run by the
same onnxruntime), file size, wall time and peak RSS of the tool's process.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _d in ("python", os.path.join("python", "zoo"), "qkdev", os.path.join("qkdev", "zoo")):  # before / after the reorg
    sys.path.insert(0, os.path.join(ROOT, _d))
sys.path.insert(0, ROOT)  # qkdev as a package (export_torchvision imports qkdev.zoo)
ZOO = ["efficientnet_small", "mobilenetv2_small", "plain_cnn", "resnet_small", "vit_tiny"]
TORCHVISION = ["resnet18", "mobilenet_v2", "vit_b_16"]
PEERS_PY = os.path.join(ROOT, ".venv-peers", "bin", "python")
EVAL_SAMPLES = 512


def measure(cmd, env=None):
    """(wall seconds, peak RSS bytes of that child, stdout+stderr) of one command."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    out = p.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} failed:\n{out[-3000:]}")
    return dt, usage.ru_maxrss * 1024, out


def model_and_data(name, n, workdir):
    """(model path, calibration .npy, evaluation inputs, labels or None)."""
    import numpy as np
    if name in ZOO:
        import data as zoo_data
        calib, _ = zoo_data.load_split("calib")
        x, y = zoo_data.load_split("test")
        model = os.path.join(ROOT, "models", "zoo", name + ".onnx")
        calib, x, y = calib[:n], x[:EVAL_SAMPLES], y[:EVAL_SAMPLES]
    else:
        import export_torchvision
        model = export_torchvision.ensure(name, 13)
        rng = np.random.default_rng(0)
        calib = rng.standard_normal((n, 3, 224, 224), dtype=np.float32)
        x, y = rng.standard_normal((64, 3, 224, 224), dtype=np.float32), None
    path = os.path.join(workdir, f"{name}_calib.npy")
    np.save(path, calib)
    return model, path, x, y


def structure(path):
    import onnx
    m = onnx.load(path)
    inferred = onnx.shape_inference.infer_shapes(m)
    names = {1: "fp32", 10: "fp16", 16: "bf16", 3: "int8", 7: "int64", 6: "int32", 9: "bool"}
    dtypes = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output) + list(inferred.graph.input):
        dtypes[vi.name] = vi.type.tensor_type.elem_type
    for init in inferred.graph.initializer:
        dtypes[init.name] = init.data_type
    count = {}
    for t in dtypes.values():
        count[names.get(t, str(t))] = count.get(names.get(t, str(t)), 0) + 1
    producer = {o: n for n in m.graph.node for o in n.output}
    ops = [n.op_type for n in m.graph.node]
    blocked = sum(1 for n in m.graph.node if n.op_type == "Cast" and
                  producer.get(n.input[0]) is not None and producer[n.input[0]].op_type == "DequantizeLinear")
    opset = max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
    return {"dtypes": count, "casts": ops.count("Cast"), "q": ops.count("QuantizeLinear"),
            "dq": ops.count("DequantizeLinear"), "cast_after_dq": blocked, "opset": opset,
            "bytes": os.path.getsize(path)}


def lint(quantkit, path):
    """`quantkit lint` on the written model: exit code and findings by severity (or its error)."""
    p = subprocess.run([quantkit, "lint", path, "--json"], capture_output=True, text=True)
    try:
        findings = json.loads(p.stdout).get("findings", [])
    except json.JSONDecodeError:
        lines = (p.stderr or p.stdout).strip().splitlines()
        why = lines[-1].split(": ", 2)[-1] if lines else ""  # the reason, without the file name
        return f"exit {p.returncode}: {why[:60]}"
    by = {}
    for f in findings:
        by[f.get("severity", "?")] = by.get(f.get("severity", "?"), 0) + 1
    return f"exit {p.returncode}" + "".join(f", {n} {k}" for k, n in sorted(by.items()))


def fp32_twin(path, out):
    """The model with its FP16 tensors widened to float32 (values unchanged) and Casts to FP16 made
    float32: onnxruntime 1.19's CPU QuantizeLinear truncates float16 x / scale toward zero instead
    of rounding half to even, so the twin is the fair onnxruntime judge of either tool's graph."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    for init in m.graph.initializer:
        if init.data_type == onnx.TensorProto.FLOAT16:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float32), init.name))
    for vi in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        if vi.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16:
            vi.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    for n in m.graph.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == onnx.TensorProto.FLOAT16:
                a.i = onnx.TensorProto.FLOAT
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == onnx.TensorProto.FLOAT16:  # Constant
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float32), a.t.name))
    onnx.save(m, out)
    return out


def accuracy(path, reference, x, y):
    import numpy as np
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL

    def run(p):
        s = ort.InferenceSession(p, so, providers=["CPUExecutionProvider"])
        name = s.get_inputs()[0].name
        return np.concatenate([s.run(None, {name: x[i:i + 32]})[0] for i in range(0, len(x), 32)])
    out, ref = run(path), run(reference)
    agree = float((out.argmax(1) == ref.argmax(1)).mean())
    if y is None:
        return {"agreement": agree}
    return {"agreement": agree, "top1": float((out.argmax(1) == y).mean()),
            "fp32_top1": float((ref.argmax(1) == y).mean())}


def write_markdown(rows, path):
    """The table of docs/strongly-typed-bench.md, one row per (model, tool)."""
    lines = ["<!-- generated by bench/modelopt_side_by_side.py, do not edit -->",
             "| model | tool | top-1 ORT as written (FP32) | argmax agreement as written | top-1 / agreement, FP16 "
             "numbers in float32 | tensors by dtype | Casts | Q / DQ | Cast after DQ | lint | opset | bytes | s | "
             "peak RSS MiB |", "|" + "---|" * 14]
    for r in rows:
        top1 = f"{100 * r['top1']:.2f} ({100 * r['fp32_top1']:.2f})" if "top1" in r else "-"
        dt = ", ".join(f"{k} {v}" for k, v in sorted(r["dtypes"].items()))
        twin = (f"{100 * r['twin_top1']:.2f} / " if "twin_top1" in r else "") + f"{100 * r['twin_agreement']:.2f}%"
        lines.append(f"| {r['model']} | {r['tool']} | {top1} | {100 * r['agreement']:.2f}% | {twin} | {dt} | {r['casts']} | "
                     f"{r['q']} / {r['dq']} | {r['cast_after_dq']} | {r['lint']} | {r['opset']} | {r['bytes']} | "
                     f"{r['seconds']:.1f} | {r['peak_rss_mib']:.0f} |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quantkit", required=True)
    ap.add_argument("--models", default=",".join(ZOO + TORCHVISION))
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--markdown", default="")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    if not os.path.exists(PEERS_PY):
        subprocess.run(["bash", os.path.join(ROOT, "scripts", "setup_peers.sh")], check=True)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name in args.models.split(","):
            model, calib, x, y = model_and_data(name, args.samples, d)
            out_mo = os.path.join(d, f"{name}.modelopt.onnx")
            # ModelOpt 0.47 rewrites its --onnx_path in place (it adds the inferred value_info): it
            # gets a copy, the repository's model stays as it is.
            mo_input = os.path.join(d, f"{name}.input.onnx")
            shutil.copyfile(model, mo_input)
            t_mo, m_mo, _ = measure([PEERS_PY, "-m", "modelopt.onnx.quantization", "--onnx_path", mo_input,
                                     "--quantize_mode", "int8", "--calibration_data_path", calib,
                                     "--calibration_method", "max", "--output_path", out_mo])
            out_qk = os.path.join(d, f"{name}.quantkit")
            t_qk, m_qk, _ = measure([args.quantkit, "calibrate", model, "--data", calib, "--method", "max",
                                     "--float-dtype", "fp16", "-o", out_qk, "-q"])
            for tool, path, t, mem in (("ModelOpt 0.47", out_mo, t_mo, m_mo),
                                       ("quantkit", os.path.join(out_qk, "model.qdq.onnx"), t_qk, m_qk)):
                row = {"model": name, "tool": tool, "seconds": t, "peak_rss_mib": mem / 2**20}
                row.update(structure(path))
                row["lint"] = lint(args.quantkit, path)
                row.update(accuracy(path, model, x, y))
                try:
                    twin = accuracy(fp32_twin(path, path + ".twin.onnx"), model, x, y)
                except Exception as e:  # noqa: BLE001  (a graph the twin cannot widen: reported, not fatal)
                    twin = {"agreement": float("nan"), "error": str(e).splitlines()[0][:120]}
                row["twin_agreement"] = twin["agreement"]
                if "top1" in twin:
                    row["twin_top1"] = twin["top1"]
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.markdown:
        write_markdown(rows, args.markdown)

if __name__ == "__main__":
    main()
