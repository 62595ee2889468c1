"""The model zoo through quantkit (issues 4 and 7 acceptance):

  * every zoo model, evaluated on the 10,000 Fashion-MNIST test images with quantkit's own
    interpreter (`quantkit eval`), gives the manifest's onnxruntime top-1 and the SAME prediction
    for every image (models/zoo/<name>.test_pred.npy);
  * the QAT export converts into a TensorRT cache plus a stripped float model, and re-inserting the
    extracted plan (`convert --placement plan`) simulates INT8 with exactly the manifest's
    fake-quant accuracy; the cache holds the QAT model's activation scales bit for bit.
Run by pytest under ctest; quantkit and the repository come from tests/e2e/qktest.py.
"""
import json
import os
import tempfile

import numpy as np
import onnx
from qktest import ROOT, run  # noqa: E402  (tests/e2e/qktest.py)



def eval_model(path, pred_path):
    out = run(["eval", path, "--data", "fashion-mnist:test", "--json", "-q", "--save-predictions", pred_path])
    return json.loads(out)


def main():
    manifest = json.load(open(os.path.join(ROOT, "models", "zoo", "manifest.json")))
    with tempfile.TemporaryDirectory() as d:
        for name, entry in manifest["models"].items():
            pred = os.path.join(d, name + ".npy")
            r = eval_model(os.path.join(ROOT, entry["file"]), pred)
            ours = np.load(pred)
            theirs = np.load(os.path.join(ROOT, entry["test_pred"])).astype(np.int64)
            differ = int((ours != theirs).sum())
            print(f"{name}: quantkit top-1 {r['top1']:.4f} (manifest {entry['test_top1']:.4f}), "
                  f"{differ} predictions differ, {r['seconds']:.1f} s")
            assert differ == 0, f"{name}: {differ} predictions differ from onnxruntime"
            assert abs(r["top1"] - entry["test_top1"]) < 1e-12, name

        qat = manifest["models"]["resnet_small_qat"]
        src = os.path.join(ROOT, qat["file"])
        stripped = os.path.join(d, "qat_float.onnx")
        out = run(["convert", src, stripped])
        assert "stripped 29 Q/DQ pairs" in out, out
        m = onnx.load(stripped)
        assert not [n for n in m.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
        requant = os.path.join(d, "qat_requant.onnx")
        run(["convert", os.path.join(d, "qat_float.plan.json"), requant, "--model", stripped, "--placement", "plan"])
        r = eval_model(requant, os.path.join(d, "qat_requant.npy"))
        expected = qat["qat"]["fakequant_test_top1_ort"]
        print(f"QAT: extracted plan simulated top-1 {r['top1']:.4f}, manifest fake-quant {expected:.4f}")
        assert abs(r["top1"] - expected) < 1e-12, (r["top1"], expected)
        # Cache == the QAT model's activation scales (its Q nodes on non-constant inputs).
        cache = dict(l.rsplit(": ", 1) for l in open(os.path.join(d, "qat_float.cache")).read().splitlines()[1:])
        q = onnx.load(src)
        inits = {i.name: onnx.numpy_helper.to_array(i) for i in q.graph.initializer}
        seen = 0
        for n in q.graph.node:
            if n.op_type == "QuantizeLinear" and n.input[0] not in inits:
                s = inits[n.input[1]].astype(np.float32).reshape(-1)
                assert s.size == 1 and f"{s.view(np.uint32)[0]:08x}" == cache[n.input[0]], n.input[0]
                seen += 1
        assert seen == 17, seen
        # Every Conv/Gemm of the QAT model reads a quantized activation: no layer for
        # --layerPrecisions, whether converted to a cache (the Q/DQ graph) or to a float model.
        for target in (os.path.join(d, "qat.cache"), os.path.join(d, "qat_float2.onnx")):
            out = run(["convert", src, target, "--layer-precisions"])
            assert "no layer kept in float" in out, out
        # torch QAT quantizes Conv outputs before residual Adds: lint warns (exit 1), no errors.
        out = run(["lint", src], expect=1)
        assert "QK009" in out and " 0 errors" in out, out
    print("zoo_quantkit_test: 1 passed, 0 failed")


def test_zoo_quantkit():
    main()


if __name__ == "__main__":
    main()
