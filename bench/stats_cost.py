"""The statistics' cost per element as a multiple of one read of the tensor (issue 45, item 3):

    .venv/bin/python bench/stats_cost.py build/dev/bench/quant/quant_bench

Runs quant_bench's BM_OneRead (an OR over every element's bits: the tensor read once, vectorised),
BM_RangeCollectorObserveOneThread (the max path: ranges only) and BM_TensorCollectorObserve (range +
histogram: entropy, percentile, mse) on one thread, at each size they share, and prints ns/element
and the ratios. Targets: max path <= 1.5x one read, histogram path <= 3x.
"""
import json
import subprocess
import sys


def main():
    binary = sys.argv[1]
    out = subprocess.run([binary, "--benchmark_filter=BM_OneRead|BM_RangeCollectorObserveOneThread|"
                          "BM_TensorCollectorObserve/", "--benchmark_format=json", "--benchmark_min_time=0.2"],
                         capture_output=True, text=True, check=True).stdout
    rows = {}
    for b in json.loads(out)["benchmarks"]:
        name, size = b["name"].split("/")[0], int(b["name"].split("/")[1])
        rows[(name, size)] = b["ns_per_element"]
    print(f"{'elements':>9} {'read ns/el':>10} {'max ns/el':>10} {'max/read':>9} {'hist ns/el':>10} {'hist/read':>9}")
    for size in sorted({s for (_, s) in rows}):
        read = rows.get(("BM_OneRead", size))
        mx = rows.get(("BM_RangeCollectorObserveOneThread", size))
        hist = rows.get(("BM_TensorCollectorObserve", size))
        if not read:
            continue
        def cell(v, w=10):
            return f"{v:{w}.3f}" if v else " " * (w - 3) + "n/a"
        def ratio(v):
            return f"{v / read:8.2f}x" if v else "      n/a"
        print(f"{size:>9} {cell(read)} {cell(mx)} {ratio(mx)} {cell(hist)} {ratio(hist)}")
    print("targets: max path <= 1.5x one read, histogram path <= 3x")


if __name__ == "__main__":
    main()
