"""aimet-onnx's AdaRound / SeqMSE on one model, as the reference peer of qkdev/ptq_table.py.

    PEERS_VENV/bin/python qkdev/peers/aimet_ptq.py MODEL.onnx --technique adaround|seqmse \
        --feeds FEEDS.npz --out DIR [--iterations N] [--samples N]

Runs in its own venv (aimet-onnx pins its own onnx/onnxruntime/torch), never imported by quantkit.
The sim: 8-bit weights, symmetric and per channel for Conv/ConvTranspose/Gemm/MatMul (aimet's
default_config_per_channel.json), 8-bit activations, min-max encodings; the technique on the
calibration feeds, then encodings computed on the same feeds and the model written as Q/DQ ONNX
(DIR/model.qdq.onnx). Prints one JSON line: {"technique_seconds": ...}.
FEEDS.npz holds one entry per sample and input, named "<sample>__<input name>".
"""
import argparse
import json
import os
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--technique", choices=["adaround", "seqmse"], required=True)
    ap.add_argument("--feeds", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--iterations", type=int, default=10000)
    ap.add_argument("--samples", type=int, default=0)
    args = ap.parse_args()
    import onnx
    import aimet_onnx
    from aimet_onnx import QuantizationSimModel, apply_adaround, apply_seq_mse

    raw = np.load(args.feeds)
    feeds = {}
    for key in raw.files:
        i, name = key.split("__", 1)
        feeds.setdefault(int(i), {})[name] = raw[key]
    feeds = [feeds[i] for i in sorted(feeds)]
    if args.samples:
        feeds = feeds[:args.samples]
    config = os.path.join(os.path.dirname(aimet_onnx.__file__), "common", "quantsim_config",
                          "default_config_per_channel.json")
    sim = QuantizationSimModel(onnx.load(args.model), param_type="int8", activation_type="int8",
                               config_file=config)
    t0 = time.time()
    if args.technique == "adaround":
        apply_adaround(sim, feeds, num_iterations=args.iterations)
    else:
        apply_seq_mse(sim, feeds, num_candidates=20)
    seconds = time.time() - t0
    sim.compute_encodings(feeds)
    os.makedirs(args.out, exist_ok=True)
    onnx.save(sim.to_onnx_qdq(), os.path.join(args.out, "model.qdq.onnx"))
    print(json.dumps({"technique_seconds": seconds, "samples": len(feeds)}))


if __name__ == "__main__":
    main()
