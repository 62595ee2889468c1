"""Where the CPU time of a quantkit run goes, by category, from `perf record` data (top frame).

    bench/profile/profile.sh build/dev/tools/quantkit/quantkit after     # writes after.<model>.<cmd>.*
    python3 bench/profile/perf_categories.py --markdown after.*.data

Categories: oneDNN JIT kernels (convolutions; the JIT code has no symbols), OpenBLAS sgemm (MatMul/
Gemm, and 1x1 convolutions ATen sends there at one thread and batch < 16), other ATen ops (pooling,
elementwise, copies, dispatch), kernel (page faults and page zeroing of fresh activation memory,
I/O), collectors (quantkit::quant statistics), startup (dynamic linking + ATen operator
registration: a fixed ~0.4 s CPU per process), libc (malloc, memcpy), the rest.
"""
import argparse
import collections
import re
import subprocess

ORDER = ["oneDNN JIT", "OpenBLAS", "ATen other", "kernel", "collectors", "startup", "libc", "rest"]


def category(dso, sym):
    if dso.startswith("[JIT]"):
        return "oneDNN JIT"
    if "openblas" in dso:
        return "OpenBLAS"
    if "ld-linux" in dso or any(k in sym for k in ("OperatorEntry", "Dispatcher::findOp", "registerKernel",
                                                     "DispatchKeyExtractor", "registerSchema")):
        return "startup"
    if dso == "[kernel.kallsyms]":
        return "kernel"
    if "quant::" in sym and ("Observe" in sym or "scan::" in sym or "Summar" in sym or "Bin" in sym):
        return "collectors"
    if "libtorch_cpu" in dso or "libc10" in dso or "libdnnl" in dso:
        return "ATen other"
    if dso.startswith("libc.so") or dso.startswith("libstdc++"):
        return "libc"
    return "rest"


def shares(path):
    out = subprocess.run(["perf", "report", "-i", path, "--no-children", "-g", "none", "--sort", "dso,symbol",
                          "--stdio", "--percent-limit", "0"], capture_output=True, text=True).stdout
    c = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"\s+([\d.]+)%\s+(\[JIT\] tid \d+|\S+)\s+\[.\]\s+(.*?)\s*(?:-\s+-\s*)?$", line)
        if m:
            c[category(m.group(2), m.group(3))] += float(m.group(1))
    return c


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="+")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    if args.markdown:
        print("| run | " + " | ".join(ORDER) + " |")
        print("|---" * (len(ORDER) + 1) + "|")
    for path in args.data:
        c = shares(path)
        name = path.rsplit("/", 1)[-1].removesuffix(".data")
        if args.markdown:
            print(f"| {name} | " + " | ".join(f"{c[k]:.0f}%" for k in ORDER) + " |")
        else:
            print(name, "  ".join(f"{k} {c[k]:.0f}%" for k in ORDER))


if __name__ == "__main__":
    main()
