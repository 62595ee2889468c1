#!/usr/bin/env python3
"""Where a `quantkit --profile FILE` run spent its time: the trace summed by name.

    quantkit calibrate model.onnx --data d.npy --device cuda -o out --profile trace.json
    python bench/gpu/trace_summary.py trace.json [--top 25] [--markdown]

Four tables, each by total duration: model nodes by op type (the interpreter's scopes,
"node 'x' (Conv, opset 13)" -> Conv), quantkit's other scopes (qk::observe: what observers take
from a tensor, statistics and copies included), host ATen ops, and device activity (CUDA kernels,
copies, runtime calls such as cudaStreamSynchronize; only in a GPU run). Times are inclusive (a
scope contains the ops it ran), so columns of different tables do not add up.
"""
import argparse
import collections
import json
import re
import sys

NODE = re.compile(r"^node '.*' \(([A-Za-z0-9_.]+), opset \d+\)$")


def summarize(events):
    tables = {"model nodes by op type": collections.defaultdict(lambda: [0.0, 0]),
              "quantkit scopes": collections.defaultdict(lambda: [0.0, 0]),
              "host ATen ops": collections.defaultdict(lambda: [0.0, 0]),
              "device (kernels, copies, CUDA runtime)": collections.defaultdict(lambda: [0.0, 0])}
    for e in events:
        if e.get("ph") != "X" or "dur" not in e:
            continue
        name, cat, dur = e.get("name", "?"), e.get("cat", ""), float(e["dur"])
        node = NODE.match(name)
        if node:
            key, table = node.group(1), "model nodes by op type"
        elif name.startswith("qk::"):
            key, table = name, "quantkit scopes"
        elif cat in ("cpu_op", "operator") or name.startswith("aten::"):
            key, table = name, "host ATen ops"
        elif cat in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver"):
            key, table = name, "device (kernels, copies, CUDA runtime)"
        else:
            continue
        row = tables[table][key]
        row[0] += dur
        row[1] += 1
    return tables


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--markdown", action="store_true", help="markdown tables (for docs/gpu.md)")
    args = ap.parse_args()
    if args.top < 1:
        ap.error("--top must be >= 1")
    try:
        with open(args.trace) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"{args.trace}: not a Chrome trace ({e})")
    for title, rows in summarize(events).items():
        if not rows:
            continue
        ranked = sorted(rows.items(), key=lambda kv: -kv[1][0])[:args.top]
        total = sum(v[0] for v in rows.values())
        print(f"\n### {title}: {total / 1e3:.1f} ms in {sum(v[1] for v in rows.values())} events\n")
        if args.markdown:
            print("| name | total ms | count | mean us |\n|---|---|---|---|")
        for name, (dur, n) in ranked:
            label = name if len(name) <= 70 else name[:67] + "..."
            if args.markdown:
                print(f"| `{label}` | {dur / 1e3:.2f} | {n} | {dur / n:.1f} |")
            else:
                print(f"{dur / 1e3:10.2f} ms {n:8d} x {dur / n:9.1f} us  {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
