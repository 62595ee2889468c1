"""Issue 31's CTC text-line target on a trained model: realmodels' `textline` architecture, trained.

`textline` in qkdev/realmodels.py has random weights (it exists for the hostile and real-model
suites' dynamic-width sequence output), so exact match with FP32 measures how often a coin-flip
frame flips (docs/ptq.md). Here the same network (three Conv layers, BatchNorm, a Linear to 37
classes: CTC blank, 0-9, a-z) is trained with CTC loss on rendered text lines (32 px high, 160
wide, qkdev/ocr_lines.py's vocabulary in lower case and numbers, six DejaVu faces, noise, blur),
exported as `textline` is, calibrated by quantkit on 128 unlabelled lines, and each written
model.qdq.onnx judged in onnxruntime on 500 other lines: accuracy against the text and greedy-
decode exact match with the FP32 model.

    .venv/bin/python -m qkdev.textline_trained build/dev/tools/quantkit/quantkit [--steps 3000]
        [--configs "max|none;max|bias-correction;percentile:99.99|none"] [--threads 2] [--keep DIR]

With --keep DIR, a model trained into DIR before is reused (the configurations run again).

Deterministic for a seed on one machine (torch's CPU kernels; --threads changes the sums' order).
"""
import argparse
import os
import string
import tempfile
import time

import numpy as np

from qkdev import ocr_lines, realmodels
from qkdev.qat_ppocr_rec import quantkit

CHARS = string.digits + string.ascii_lowercase  # class k + 1; 0 is the CTC blank
HEIGHT, WIDTH = 32, 160
SEED = 53


def render(rng, n):
    """(images float32 [n, 1, 32, 160] in [0, 1], texts): whole lines, dark text on light paper."""
    from PIL import Image, ImageDraw, ImageFilter, ImageFont
    images, texts = [], []
    while len(images) < n:
        font = ImageFont.truetype(ocr_lines.FONT_DIR + str(rng.choice(ocr_lines.FONTS)), int(rng.integers(16, 25)))
        words = [str(int(rng.integers(0, 10000))) if rng.random() < 0.3 else str(rng.choice(ocr_lines.WORDS)).lower()
                 for _ in range(int(rng.integers(1, 3)))]
        text = " ".join(words)
        x0, y0, x1, y1 = font.getbbox(text)
        margin = int(rng.integers(1, 6))
        if x1 - x0 + 2 * margin > WIDTH or y1 - y0 > HEIGHT - 2:
            continue
        img = Image.new("L", (WIDTH, HEIGHT), int(rng.integers(190, 256)))
        ImageDraw.Draw(img).text((margin - x0, (HEIGHT - (y1 - y0)) // 2 - y0 + int(rng.integers(-1, 2))), text,
                                 font=font, fill=int(rng.integers(0, 90)))
        blur = float(rng.uniform(0.0, 0.7))
        if blur > 0.2:
            img = img.filter(ImageFilter.GaussianBlur(blur))
        a = np.asarray(img, np.float32)[None] / 255.0
        images.append(np.clip(a + rng.normal(0.0, rng.uniform(0.0, 0.04), a.shape), 0.0, 1.0).astype(np.float32))
        texts.append(text.replace(" ", ""))  # no space class: the model reads the characters
    return np.stack(images), texts


def decode(log_probs):
    return ocr_lines.decode(log_probs, [""] + list(CHARS))  # class 0: the CTC blank


def train(steps, threads, log):
    import torch
    from torch import nn
    torch.manual_seed(SEED)
    torch.set_num_threads(threads)

    model = realmodels.textline_network()  # `textline`, unchanged
    images, texts = render(np.random.default_rng(SEED), 20000)
    targets = [torch.tensor([CHARS.index(c) + 1 for c in t]) for t in texts]
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps)
    ctc = nn.CTCLoss(blank=0, zero_infinity=True)
    rng = np.random.default_rng(SEED + 1)
    t0 = time.time()
    for step in range(steps):
        idx = rng.integers(0, len(images), 64)
        out = model(torch.from_numpy(images[idx]))  # [N, T, C]
        tgt = [targets[i] for i in idx]
        loss = ctc(out.permute(1, 0, 2), torch.cat(tgt), torch.full((len(idx),), out.shape[1], dtype=torch.long),
                   torch.tensor([len(t) for t in tgt]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 500 == 0 or step == steps - 1:
            log(f"step {step}: CTC loss {loss.item():.3f} ({time.time() - t0:.0f} s)")
    model.eval()
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("quantkit")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--configs", default="max|none;max|bias-correction;max|smoothquant,bias-correction;"
                                         "percentile:99.99|none;mse|none;entropy|none",
                    help="METHOD|PTQ pairs separated by ';' (PTQ none: no stage)")
    ap.add_argument("--keep", default=None,
                    help="write the model and runs here instead of a temporary folder (a model trained there is reused)")
    a = ap.parse_args()
    import onnxruntime as ort
    import torch
    with tempfile.TemporaryDirectory() as scratch:
        tmp = a.keep or scratch
        os.makedirs(tmp, exist_ok=True)
        path = os.path.join(tmp, "textline_trained.onnx")
        if os.path.exists(path):
            print(f"{path}: trained before, reused", flush=True)
        else:
            model = train(a.steps, a.threads, lambda s: print(s, flush=True))
            torch.onnx.export(model, torch.zeros(1, 1, HEIGHT, WIDTH), path, opset_version=13, input_names=["image"],
                              output_names=["log_probs"],
                              dynamic_axes={"image": {0: "N", 3: "W"}, "log_probs": {0: "N", 1: "T"}})
        calib, _ = render(np.random.default_rng(SEED + 2), 128)
        test, truth = render(np.random.default_rng(SEED + 3), 500)
        data = os.path.join(tmp, "calib.npy")
        np.save(data, calib)

        def texts(p):
            sess = ort.InferenceSession(p, providers=["CPUExecutionProvider"])
            return [decode(sess.run(None, {"image": test[i:i + 1]})[0][0]) for i in range(len(test))]

        ref = texts(path)
        fp32 = ocr_lines.exact_match(ref, truth)
        print(f"FP32 accuracy on {len(truth)} lines {fp32:.3f}\n"
              f"| --method | --ptq | accuracy (FP32 {fp32:.3f}) | exact match with FP32 | calibrate s |\n"
              "|---|---|---|---|---|", flush=True)
        for i, config in enumerate(c for c in a.configs.split(";") if c):
            method, stages = config.split("|")
            out = os.path.join(tmp, f"c{i}")
            extra = [] if stages == "none" else ["--ptq", stages, "--ptq-samples", "64", "--ptq-batch", "16"]
            _, secs = quantkit(a.quantkit, ["calibrate", path, "--data", data, "--method", method, "--float-dtype",
                                            "fp32", "--threads", str(a.threads), "-q", "-o", out, *extra])
            got = texts(os.path.join(out, "model.qdq.onnx"))
            print(f"| {method} | {stages} | {ocr_lines.exact_match(got, truth):.3f} | "
                  f"{ocr_lines.exact_match(got, ref):.3f} | {secs:.0f} |", flush=True)


if __name__ == "__main__":
    main()
