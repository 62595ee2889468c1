"""Bounded end-to-end `quantkit qat` on the zoo's plain CNN (about a minute of CPU).

  1. An entropy plan (1024 calibration samples) loses several top-1 points on the first 1000 test
     images (onnxruntime running calibrate's model.qdq.onnx).
  2. Label-free QAT (FP32 teacher, MSE on the logits) from that plan recovers most of the loss:
     onnxruntime running qat's model.qdq.onnx on the same 1000 images.
  3. The exported Q/DQ model in onnxruntime agrees with quantkit's own simulation of it
     (`quantkit eval --save-outputs`), within the bounds calibrate's e2e test uses.
  4. Every artifact is there: model.float.onnx (no Q/DQ), calib.cache, plan.json with the QAT
     provenance, training_log.json with one entry per step; the input model is not modified.
  5. --resume: 4 steps stopped after 2 (--stop-after), then resumed, write the same Q/DQ model as
     4 steps in one run.
  6. Bad input: an unknown --feature tensor (exit 2), --device cuda (exit 3), a missing plan
     (exit 2 or 4) leave no model.qdq.onnx behind.
argv[1] = quantkit binary, argv[2] = repository root.
"""
import hashlib
import json
import os
import subprocess
import tempfile
import xml.etree.ElementTree as ET

import numpy as np
import onnx

from qktest import QK, ROOT, ort_run, run_process, zoo_data  # noqa: E402  (tests/e2e/qktest.py)

MODEL = os.path.join(ROOT, "models", "zoo", "plain_cnn.onnx")
TEST_SAMPLES = 1000
STEPS = 60                   # batches of 64: 7% of one epoch, 1.8% of plain_cnn's 4-epoch training
MIN_PTQ_LOSS = 0.03          # the starting plan must cost at least 3 top-1 points
MIN_RECOVERED_SHARE = 0.6    # QAT must win back at least 60% of them
# Same bounds as tests/e2e/calibrate: conv sums in another order may move a value across an int8
# rounding boundary, moving a logit by about one activation step.
LOGIT_ATOL = 0.05
MISMATCH_FRACTION_MAX = 0.01
ARGMAX_AGREEMENT_MIN = 0.995


def run(args, expect=0):
    # One compute thread: on a busy 2-core machine OpenMP's spin-waiting multiplies the CPU time.
    return run_process(["--threads", "1"] + args, expect)


def ort_logits(path, x):
    return ort_run(path, x, batch=500)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    x, y = zoo_data.load_split("test")
    x, y = x[:TEST_SAMPLES], y[:TEST_SAMPLES]
    model_sha = sha(MODEL)
    fp32 = float(np.mean(ort_logits(MODEL, x).argmax(1) == y))
    with tempfile.TemporaryDirectory() as tmp:
        ptq_dir, qat_dir = os.path.join(tmp, "ptq"), os.path.join(tmp, "qat")
        # FP32 float part (the plan's, so the QAT export's too): every model here is scored in
        # onnxruntime and compared with the simulation to float32 noise, and onnxruntime's CPU FP16
        # QuantizeLinear truncates where TensorRT rounds (docs/strongly-typed.md).
        # --repair off: the entropy plan as asked (the default ladder would repair it first).
        run(["calibrate", MODEL, "--data", "fashion-mnist:calib", "--samples", "1024", "--method", "entropy",
             "--float-dtype", "fp32", "--repair", "off", "-o", ptq_dir])
        ptq = float(np.mean(ort_logits(os.path.join(ptq_dir, "model.qdq.onnx"), x).argmax(1) == y))
        print(f"FP32 {fp32:.4f}  PTQ(entropy) {ptq:.4f}")
        assert fp32 - ptq >= MIN_PTQ_LOSS, f"the entropy plan loses only {fp32 - ptq:.4f}: not a QAT test"

        p = run(["qat", MODEL, "--plan", os.path.join(ptq_dir, "plan.json"), "--data", "fashion-mnist:train",
                 "--steps", str(STEPS), "--batch-size", "64", "--lr", "1e-4", "--seed", "1", "-o", qat_dir, "-q"])
        print(p.stdout)
        qdq = os.path.join(qat_dir, "model.qdq.onnx")
        onnx.checker.check_model(onnx.load(qdq))
        ort_out = ort_logits(qdq, x)
        qat = float(np.mean(ort_out.argmax(1) == y))
        print(f"QAT label-free {qat:.4f} (recovered {(qat - ptq) / (fp32 - ptq):.0%} of the loss)")
        assert qat - ptq >= MIN_RECOVERED_SHARE * (fp32 - ptq), (fp32, ptq, qat)

        # 3. onnxruntime vs quantkit's simulation of the same exported model.
        sim_path = os.path.join(tmp, "sim.npy")
        run(["eval", qdq, "--data", "fashion-mnist:test", "--samples", str(TEST_SAMPLES), "--save-outputs",
             sim_path, "-q"])
        sim = np.load(sim_path)
        assert sim.shape == ort_out.shape, (sim.shape, ort_out.shape)
        agreement = float(np.mean(sim.argmax(1) == ort_out.argmax(1)))
        mismatch = float(np.mean(np.abs(sim - ort_out) > LOGIT_ATOL))
        print(f"onnxruntime vs quantkit simulation: argmax agreement {agreement:.4f}, "
              f"logits beyond {LOGIT_ATOL}: {mismatch:.4%}")
        assert agreement >= ARGMAX_AGREEMENT_MIN and mismatch <= MISMATCH_FRACTION_MAX

        # 4. Artifacts.
        flt = onnx.load(os.path.join(qat_dir, "model.float.onnx"))
        assert not any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in flt.graph.node)
        q_nodes = [n for n in onnx.load(qdq).graph.node if n.op_type == "QuantizeLinear"]
        assert len(q_nodes) >= 5, len(q_nodes)
        plan = json.load(open(os.path.join(qat_dir, "plan.json")))
        assert "qat(" in json.dumps(plan) and f"steps={STEPS}" in json.dumps(plan), "provenance lacks the QAT run"
        log = json.load(open(os.path.join(qat_dir, "training_log.json")))
        assert len(log["history"]) == STEPS and log["history"][-1]["loss"] < log["history"][0]["loss"]
        # training.svg: the loss curve with one point per step, and the validation curve.
        svg = ET.parse(os.path.join(qat_dir, "training.svg")).getroot()
        curves = {p.get("class"): p.get("points").split() for p in svg.iter("{http://www.w3.org/2000/svg}polyline")}
        assert len(curves.get("loss", [])) == STEPS, curves.keys()
        assert ("val" in curves) == bool(log["evals"]) and len(curves.get("val", [])) == len(log["evals"])
        assert open(os.path.join(qat_dir, "calib.cache")).readline().startswith("TRT-")
        assert sha(MODEL) == model_sha, "the input model was modified"

        # 5. Resume reproduces an uninterrupted run.
        common = ["--plan", os.path.join(ptq_dir, "plan.json"), "--data", "fashion-mnist:train", "--samples",
                  "2048", "--batch-size", "32", "--seed", "3", "-q"]
        a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
        run(["qat", MODEL, *common, "--steps", "4", "-o", a])
        p = run(["qat", MODEL, *common, "--steps", "4", "--stop-after", "2", "-o", b])
        assert "stopped at step 2 of 4" in p.stdout and not os.path.exists(os.path.join(b, "model.qdq.onnx"))
        # The checkpoint is an .npz that numpy reads (docs/qat.md): step, parameters, AdamW state.
        with np.load(os.path.join(b, "checkpoint.npz")) as ckpt:
            assert int(ckpt["format_version"]) == 1 and int(ckpt["step"]) == 2, dict(ckpt)
            params = [k[len("param/"):] for k in ckpt.files if k.startswith("param/")]
            assert params and int(ckpt["optimizer/adamw"]) == 1, ckpt.files
            for name in params:
                assert ckpt["param/" + name].dtype == np.float32
                assert ckpt["optimizer/adamw/exp_avg/" + name].shape == ckpt["param/" + name].shape
                assert int(ckpt["optimizer/adamw/step/" + name]) == 2
        run(["qat", MODEL, *common, "--steps", "4", "--resume", os.path.join(b, "checkpoint.npz"), "-o", b])
        assert sha(os.path.join(a, "model.qdq.onnx")) == sha(os.path.join(b, "model.qdq.onnx")), \
            "resumed run differs from the uninterrupted one"

        # 5b. The export is written as every writer writes (issue 29): --float-dtype fp16 over the FP32
        # plan gives an FP16 + INT8 model.qdq.onnx, and --val checks that model as TensorRT computes
        # it (val_exported): the same number `quantkit eval` gives for the written file.
        fp16_dir = os.path.join(tmp, "fp16")
        p = run(["qat", MODEL, *common, "--steps", "2", "--float-dtype", "fp16", "--val", "fashion-mnist:val",
                 "--val-samples", "300", "-o", fp16_dir])
        assert "float part in fp16" in p.stdout and "as TensorRT computes it (float part in fp16)" in p.stdout, p.stdout
        m = onnx.load(os.path.join(fp16_dir, "model.qdq.onnx"))
        inits = {i.name: i.data_type for i in m.graph.initializer}
        q_scales = [inits[n.input[1]] for n in m.graph.node if n.op_type == "QuantizeLinear"]
        assert q_scales and all(t == onnx.TensorProto.FLOAT16 for t in q_scales), q_scales
        assert any(n.op_type == "DequantizeLinear" and inits.get(n.input[0]) == onnx.TensorProto.INT8
                   for n in m.graph.node), "weights not stored as INT8"
        assert json.load(open(os.path.join(fp16_dir, "plan.json")))["float_precision"]["dtype"] == "fp16"
        exported = json.load(open(os.path.join(fp16_dir, "training_log.json")))["val_exported"]
        ev = json.loads(run(["eval", os.path.join(fp16_dir, "model.qdq.onnx"), "--data", "fashion-mnist:val",
                             "--samples", "300", "--batch-size", "32", "--json", "-q"]).stdout)
        print(f"QAT export in FP16: val_exported {exported:.4f}, eval of the written model {ev['top1']:.4f}")
        assert exported == ev["top1"], (exported, ev["top1"])

        # 6. Bad input: one line, documented exit code, no model written.
        for args, code in ((["--feature", "no_such_tensor"], 2), (["--device", "cuda"], 3)):
            out = os.path.join(tmp, "bad" + str(code))
            p = run(["qat", MODEL, *common, "--steps", "1", "-o", out, *args], expect=code)
            assert len(p.stderr.strip().splitlines()) == 1, p.stderr
            assert not os.path.exists(os.path.join(out, "model.qdq.onnx"))
        p = subprocess.run([QK, "qat", MODEL, "--plan", os.path.join(tmp, "missing.json"), "--data",
                            "fashion-mnist:train", "-o", os.path.join(tmp, "bad"), "-q"], capture_output=True, text=True)
        assert p.returncode in (2, 4) and "missing.json" in p.stderr, (p.returncode, p.stderr)
    print("ok")


def test_qat():
    main()


if __name__ == "__main__":
    main()
