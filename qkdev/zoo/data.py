"""Fashion-MNIST for the quantkit zoo: IDX reading, the fixed splits, the declared preprocessing.

Everything here must agree bit for bit with the C++ side (src/data/idx.{h,cc}, src/data/splits.{h,cc}):

* IDX files are read from Debian's dataset-fashion-mnist (gzip), never downloaded.
* Splits are defined in docs/fashion-mnist-splits.md (splitmix64 ranking per class) and committed as
  data/fashion_mnist_splits.json; training code reads the committed list, and make_splits.py /
  the C++ tests check that the rule reproduces it.
* Preprocessing, in float32 and in this order: x = float(pixel) / 255; x = (x - MEAN) / STD.
"""
import gzip
import json
import os
import struct

import numpy as np

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA_DIR = os.environ.get("QUANTKIT_FASHION_MNIST", "/usr/share/datasets/fashion-mnist")
SPLITS_JSON = os.path.join(REPO, "data", "fashion_mnist_splits.json")

FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}

# Declared preprocessing (also written into models/zoo/manifest.json).
SCALE_DIVISOR = np.float32(255.0)
MEAN = np.float32(0.2860)
STD = np.float32(0.3530)
PREPROCESSING = {
    "layout": "NCHW",
    "dtype": "float32",
    "formula": "x = (float32(pixel) / 255 - mean) / std, float32 arithmetic in this order",
    "scale_divisor": 255.0,
    "mean": [0.2860],
    "std": [0.3530],
}

# Split rule (docs/fashion-mnist-splits.md).
SPLIT_SEED = 20240604
CALIB_PER_CLASS = [205] * 8 + [204] * 2  # 2,048 in all
VAL_PER_CLASS = [500] * 10  # 5,000 in all
MASK64 = (1 << 64) - 1


def read_idx(path):
    """Returns a uint8 numpy array with the IDX dims; checks magic and size like the C++ reader."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    n = int(np.prod(dims))
    if len(raw) != 4 + 4 * ndim + n:
        raise ValueError(f"{path}: {len(raw)} bytes, expected {4 + 4 * ndim + n} for dims {dims}")
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_raw(split_file):
    """('train'|'test') -> (uint8 images [N,28,28], int64 labels [N])."""
    img, lab = FILES[split_file]
    return read_idx(os.path.join(DATA_DIR, img)), read_idx(os.path.join(DATA_DIR, lab)).astype(np.int64)


def preprocess(images_u8):
    """uint8 [N,28,28] -> float32 [N,1,28,28] with the declared preprocessing."""
    x = images_u8.astype(np.float32) / SCALE_DIVISOR
    x = (x - MEAN) / STD
    return x[:, None, :, :].astype(np.float32, copy=False)


def splitmix64_outputs(seed, n):
    """The first n outputs of the splitmix64 generator seeded with `seed` (Steele et al. 2014)."""
    out = np.empty(n, dtype=np.uint64)
    state = seed & MASK64
    for i in range(n):
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        out[i] = z ^ (z >> 31)
    return out


def compute_splits(train_labels):
    """Applies the documented rule; returns dict of sorted index lists: calib, val, train."""
    keys = splitmix64_outputs(SPLIT_SEED, len(train_labels))
    calib, val = [], []
    for c in range(10):
        idx = [int(i) for i in np.nonzero(train_labels == c)[0]]
        idx.sort(key=lambda i: (int(keys[i]), i))
        calib += idx[:CALIB_PER_CLASS[c]]
        val += idx[CALIB_PER_CLASS[c]:CALIB_PER_CLASS[c] + VAL_PER_CLASS[c]]
    held = set(calib) | set(val)
    train = [i for i in range(len(train_labels)) if i not in held]
    return {"calib": sorted(calib), "val": sorted(val), "train": train}


def load_splits():
    """The committed split lists (calib, val) plus the derived training list."""
    with open(SPLITS_JSON) as f:
        js = json.load(f)
    held = set(js["calib"]) | set(js["val"])
    js["train"] = [i for i in range(js["source_count"]) if i not in held]
    return js


def load_split(name):
    """name in {train, calib, val, test} -> (float32 [N,1,28,28], int64 [N])."""
    if name == "test":
        img, lab = load_raw("test")
        return preprocess(img), lab
    img, lab = load_raw("train")
    idx = np.asarray(load_splits()[name], dtype=np.int64)
    return preprocess(img[idx]), lab[idx]
