#!/usr/bin/env python3
"""Source audit of the kernels (src/runtime/ops, kernel.cc) for what the emulated device cannot see.

    device_audit_test.py SOURCE_DIR

The emulated device (tests/testing/emulated_device.h) runs every node case, zoo and real model with
tensors on a non-CPU device and fails any kernel that mixes host tensors into device math: that
is the dynamic check, and it sees only the paths the cases take. Two things it cannot see at all,
because its memory is host memory: a raw host read of device memory (x.data_ptr<float>()[i] on a
CUDA tensor reads garbage or faults), and a host temporary on a path no case reaches. So, over the
kernels' sources:

  1. every data_ptr use is listed below with the reason its tensor is on the host (a device check
     guards it, or the kernel made the tensor on the host itself);
  2. every ATen factory call (at::zeros, ones, empty, full, arange, tensor, scalar_tensor, eye,
     linspace, rand*, from_blob, ...) either takes an input's options / device, or is moved to a
     device right away (`.to(x.device()...)`), or is listed below with its reason.

An entry that no longer matches anything fails the test too, so the lists stay exact.
"""
import os
import re
import sys

# (file, text the call or line contains) -> why the tensor is on the host.
HOST_READS = {
    ("conv.cc", "w.data_ptr() == channels_last->source"): "compares addresses, reads nothing",
    ("float_gemm.cc", "a.data_ptr<float>(), lda, b.data_ptr<float>()"): "DnnlApplies: both on the CPU",
    ("float_gemm.cc", "DnnlGemm(a, b, c.data_ptr<float>())"): "DnnlApplies: on the CPU",
    ("float_gemm.cc", "float* out = c.data_ptr<float>()"): "DnnlApplies: on the CPU",
    ("quant.cc", "const float* src = x.data_ptr<float>()"): "PerTensor8Bit: x on the CPU",
    ("quant.cc", "void* dst = q.data_ptr()"): "PerTensor8Bit: empty_like(x) of a CPU x",
    ("quant.cc", "const void* src = q.data_ptr()"): "PerTensor8Bit: q on the CPU",
    ("quant.cc", "float* dst = r.data_ptr<float>()"): "PerTensor8Bit: empty_like(q) of a CPU q",
    ("quant.cc", "const float* in = src.data_ptr<float>()"): "PerTensor8Bit: x on the CPU",
    ("quant.cc", "float* dst = out.data_ptr<float>()"): "PerTensor8Bit: x on the CPU",
    ("quant.cc", "float* p = q.data_ptr<float>()"):
        "FakeQuantizeE4M3: q copied to the host (.to(at::kCPU)) for the FP8 rounding, then back",
    ("resize.cc", "double* p = w.data_ptr<double>()"): "AxisWeights builds w on the host (see below)",
    ("misc.cc", "const float* bp = boxes.data_ptr<float>()"): "NonMaxSuppression copies boxes to the host",
    ("misc.cc", "const float* sp = scores.data_ptr<float>()"): "NonMaxSuppression copies scores to the host",
    ("kernel.cc", "const int64_t* p = c.data_ptr<int64_t>()"): "ToInt64Vector copies to the host first",
    ("kernel.cc", "const double* p = c.data_ptr<double>()"): "ToDoubleVector copies to the host first",
}
HOST_TEMPORARIES = {
    ("resize.cc", "at::zeros({out, in}, at::kDouble)"):
        "the interpolation matrix is built on the host, then moved to y's device at its use",
    ("shape_ops.cc", "at::tensor(dims, at::kLong)"): "Shape: a host shape tensor by design (KeepOnHost)",
    ("shape_ops.cc", "at::scalar_tensor(c.in(0).numel(), at::kLong)"): "Size: a host shape scalar by design",
    ("shape_ops.cc", "at::zeros({1}, at::kFloat)"):
        "ConstantOfShape's default value: the output is made from a host shape on the host and joins "
        "the device at its first use (interpreter.cc, ComputeStep)",
    ("shape_ops.cc", "at::scalar_tensor(n.GetFloat(\"value_float\", 0), at::kFloat)"):
        "Constant: built once at load on the host; joins the device at first use, like an initializer",
    ("shape_ops.cc", "at::scalar_tensor(n.GetInt(\"value_int\", 0), at::kLong)"): "Constant (as above)",
    ("shape_ops.cc", "at::tensor(v, at::kFloat)"): "Constant (as above)",
    ("shape_ops.cc", "at::tensor(v, at::kLong)"): "Constant (as above)",
    ("control_flow.cc", "at::scalar_tensor(it, at::kLong)"): "Loop's iteration number: a 0-dim host scalar",
    ("control_flow.cc", "at::scalar_tensor(cond, at::kBool)"): "Loop's condition: a 0-dim host scalar",
    ("control_flow.cc", "at::empty({0}, scan_types[i])"): "a zero-trip Loop's empty scan output",
    ("misc.cc", "at::arange(n, at::kDouble)"): "window functions take only a size (a host scalar)",
}

FACTORY = re.compile(r"\bat::(zeros|ones|empty|full|arange|tensor|scalar_tensor|eye|linspace|logspace|rand|randn|"
                     r"randint|randperm|empty_strided|from_blob)\s*\(")
FOLLOWS_DEVICE = re.compile(r"options\(|\bopts\b|\blongs\b|\.device\(\)")


def strip_comments(text):
    return re.sub(r"//[^\n]*", lambda m: " " * len(m.group(0)), text)


def call_text(text, open_paren):
    """The text from `open_paren` to its matching ')' inclusive."""
    depth = 0
    for i in range(open_paren, len(text)):
        depth += text[i] == "("
        depth -= text[i] == ")"
        if depth == 0:
            return text[open_paren:i + 1]
    return text[open_paren:]


def audit(src_dir):
    files = sorted(os.path.join(src_dir, "src/runtime/ops", f) for f in os.listdir(os.path.join(src_dir, "src/runtime/ops"))
                   if f.endswith(".cc"))
    files.append(os.path.join(src_dir, "src/runtime/kernel.cc"))
    problems, used = [], set()

    def listed(table, name, text):
        for (f, snippet), _ in table.items():
            if f == name and snippet in text:
                used.add((id(table), f, snippet))
                return True
        return False

    for path in files:
        name = os.path.basename(path)
        with open(path) as fh:
            text = strip_comments(fh.read())
        for m in re.finditer(r"\bdata_ptr\b", text):
            line_no = text.count("\n", 0, m.start()) + 1
            line = text.splitlines()[line_no - 1]
            if not listed(HOST_READS, name, line):
                problems.append(f"{name}:{line_no}: raw host read (data_ptr) of a tensor not known to be on the host: "
                                f"{line.strip()}")
        for m in FACTORY.finditer(text):
            args = call_text(text, m.end() - 1)
            call = m.group(0) + args[1:]
            after = text[m.end() - 1 + len(args):m.end() - 1 + len(args) + 120]
            moved = re.match(r"\s*(\.[a-z_]+\([^;]*?\))*?\s*\.to\([^;]*device", after) is not None
            if not listed(HOST_TEMPORARIES, name, call) and not FOLLOWS_DEVICE.search(args) and not moved:
                line_no = text.count("\n", 0, m.start()) + 1
                problems.append(f"{name}:{line_no}: {call.strip()[:100]} makes a host tensor: take an input's "
                                "options (x.options().dtype(...)) or list it with its reason")
    for table, kind in ((HOST_READS, "HOST_READS"), (HOST_TEMPORARIES, "HOST_TEMPORARIES")):
        for f, snippet in table:
            if (id(table), f, snippet) not in used:
                problems.append(f"{kind} entry ({f!r}, {snippet!r}) matches nothing: remove it")
    return files, problems


def main(argv):
    src = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    files, problems = audit(src)
    for p in problems:
        print(p)
    print(f"device audit: {len(files)} files, {len(HOST_READS)} listed host reads, "
          f"{len(HOST_TEMPORARIES)} listed host temporaries, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
