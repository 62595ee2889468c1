"""Labelled text lines for the shipped PP-OCRv4 recognizer, and its decoding and metrics.

Why a second set beside realmodels' `_text_image` lines: those draw three words at a random offset
into a 320-pixel line, so nearly every line ends in a glyph cut by the right edge and starts with
an empty margin. Greedy-decode exact match with FP32 on them counts, as disagreements, a space
the recognizer emits in the margin and a guess at the cut glyph, where the FP32 model is itself
unsure (docs/ptq.md, "What the exact match counted"). A text-line crop as a detector hands it to
the recognizer holds the whole text, so here the words always fit (the crop, 48 pixels high, padded
with zeros to 320 as PaddleOCR's `resize_norm_img` does); the fonts, sizes, colours,
noise and blur vary as in a user's crops, and each line keeps its text for accuracy against the
truth. Accuracy follows PaddleOCR's `RecMetric` default (`ignore_space=True`): spaces are not
compared.
"""
import re

import numpy as np

FONT_DIR = "/usr/share/fonts/truetype/dejavu/"
FONTS = ["DejaVuSans.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf", "DejaVuSansCondensed.ttf",
         "DejaVuSans-Bold.ttf", "DejaVuSerif-Italic.ttf"]
JUDGED, JUDGED_SEED = 500, 41  # the crops the recognizer is judged on (JUDGED_SEED + 1, + 2: training, val)
WORDS = ["quantkit", "INT8", "TensorRT", "calib", "ONNX", "model", "shape", "opset", "data", "layer",
         "scale", "range", "engine", "batch", "tensor", "Jetson", "export", "kernel"]


def _words(rng):
    kind = rng.integers(0, 3)
    if kind == 0:
        return str(int(rng.integers(0, 100000)))
    word = str(rng.choice(WORDS))
    return word.upper() if kind == 1 and rng.random() < 0.3 else word


def labelled_lines(rng, n, height=48, width=320):
    """(images float32 [n, 3, height, width] in PP-OCR's (x - 0.5) / 0.5, texts): whole lines."""
    from PIL import Image, ImageDraw, ImageFilter, ImageFont
    images, texts = [], []
    while len(images) < n:
        font = ImageFont.truetype(FONT_DIR + str(rng.choice(FONTS)), int(rng.integers(24, 37)))
        text = " ".join(_words(rng) for _ in range(int(rng.integers(1, 5))))
        x0, y0, x1, y1 = font.getbbox(text)
        margin = int(rng.integers(2, 9))
        if x1 - x0 + 2 * margin > width or y1 - y0 > height - 2:
            continue  # a crop holds its whole text: draw another
        crop = x1 - x0 + 2 * margin
        img = Image.new("RGB", (crop, height), tuple(int(v) for v in rng.integers(190, 256, 3)))
        y = (height - (y1 - y0)) // 2 - y0 + int(rng.integers(-2, 3))
        ImageDraw.Draw(img).text((margin - x0, y), text, font=font,
                                 fill=tuple(int(v) for v in rng.integers(0, 90, 3)))
        blur = float(rng.uniform(0.0, 0.8))
        if blur > 0.2:
            img = img.filter(ImageFilter.GaussianBlur(blur))
        a = np.asarray(img, np.float32) / 255.0
        a = np.clip(a + rng.normal(0.0, rng.uniform(0.0, 0.03), a.shape), 0.0, 1.0)
        line = np.zeros((3, height, width), np.float32)  # PaddleOCR's resize_norm_img pads with 0
        line[:, :, :crop] = ((a - 0.5) / 0.5).transpose(2, 0, 1)
        images.append(line)
        texts.append(text)
    return np.stack(images), texts


def characters(model_path):
    """The recognizer's classes: blank, the dictionary in its metadata, then the space."""
    import onnx
    model = onnx.load(model_path, load_external_data=False)
    table = [p.value for p in model.metadata_props if p.key == "character"]
    if not table:
        raise ValueError(f"{model_path}: no 'character' metadata to decode with")
    return [""] + table[0].splitlines() + [" "]


def decode(probs, chars):
    """Greedy CTC decode of one [time, classes] output."""
    ids = probs.reshape(-1, probs.shape[-1]).argmax(-1)
    return "".join(chars[i] for j, i in enumerate(ids) if i != 0 and (j == 0 or ids[j - 1] != i))


def no_space(text):
    return re.sub(r"\s", "", text)


def exact_match(texts, refs, ignore_space=True):
    """Share of texts equal to their reference (PaddleOCR's default: spaces not compared)."""
    if ignore_space:
        texts, refs = [no_space(t) for t in texts], [no_space(r) for r in refs]
    return float(np.mean([t == r for t, r in zip(texts, refs)]))


class RecJudge:
    """Scores a written recognizer against the shipped FP32 one on both kinds of lines.

    `tests_lines`: realmodels' lines (strict and space-free exact match with FP32, rel RMS);
    `labelled`: (images, texts) of `labelled_lines` (accuracy against the text, agreement with FP32)."""

    def __init__(self, model, tests_lines, labelled):
        from qkdev.realmodels_table import run_outputs
        import onnxruntime as ort
        self._run = run_outputs
        self.chars = characters(model)
        name = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).get_inputs()[0].name
        self.feeds = [{name: tests_lines[i:i + 1]} for i in range(len(tests_lines))]
        self.labelled_feeds = [{name: labelled[0][i:i + 1]} for i in range(len(labelled[0]))]
        self.truth = labelled[1]
        self.ref = run_outputs(model, self.feeds)
        self.ref_texts = self._texts(self.ref)
        self.ref_labelled = self._texts(run_outputs(model, self.labelled_feeds))
        self.fp32_accuracy = exact_match(self.ref_labelled, self.truth)

    def _texts(self, outputs):
        return [decode(o[0], self.chars) for o in outputs]

    def __call__(self, path):
        """{strict, no_space, rel_rms, accuracy, agreement} of the model at `path`."""
        from qkdev.realmodels_table import metric
        outputs = self._run(path, self.feeds)
        _, strict, rel = metric("sequence", self.ref, outputs)
        got = self._texts(self._run(path, self.labelled_feeds))
        return {"strict": strict, "no_space": exact_match(self._texts(outputs), self.ref_texts), "rel_rms": rel,
                "accuracy": exact_match(got, self.truth), "agreement": exact_match(got, self.ref_labelled)}

    @staticmethod
    def describe(s):
        return (f"exact match with FP32 {s['strict']:.3f} (spaces not compared {s['no_space']:.3f}), "
                f"rel RMS {s['rel_rms']:.3f}; labelled: accuracy {s['accuracy']:.3f}, "
                f"agreement with FP32 {s['agreement']:.3f}")
