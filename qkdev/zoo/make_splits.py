"""Writes (or with --check, verifies) data/fashion_mnist_splits.json from the documented rule."""
import argparse
import json
import os
import sys

from qkdev.zoo import data


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="fail if the committed file differs")
    args = ap.parse_args()
    _, labels = data.load_raw("train")
    s = data.compute_splits(labels)
    doc = {
        "version": 1,
        "dataset": "fashion-mnist",
        "source": "train-images-idx3-ubyte.gz / train-labels-idx1-ubyte.gz (Debian dataset-fashion-mnist)",
        "source_count": int(len(labels)),
        "rule": "docs/fashion-mnist-splits.md: per class, rank training indices by the i-th output of "
                "splitmix64 seeded with 20240604 (ties by index); the first calib_per_class go to calib, "
                "the next val_per_class to val; lists sorted ascending",
        "seed": data.SPLIT_SEED,
        "calib_per_class": data.CALIB_PER_CLASS,
        "val_per_class": data.VAL_PER_CLASS,
        "calib": s["calib"],
        "val": s["val"],
    }
    text = json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n"
    if args.check:
        with open(data.SPLITS_JSON) as f:
            same = f.read() == text
        print("splits: identical" if same else "splits: DIFFERENT")
        return 0 if same else 1
    tmp = data.SPLITS_JSON + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, data.SPLITS_JSON)
    print(f"wrote {data.SPLITS_JSON}: calib {len(s['calib'])}, val {len(s['val'])}, train {len(s['train'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
