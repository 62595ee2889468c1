"""Shared helpers of the Python end-to-end tests (run by pytest under ctest).

  QK, ROOT          the quantkit binary and the repository root: $QUANTKIT_BIN / $QUANTKIT_ROOT
                    (set by ctest, see quantkit_add_pytest in tests/e2e/CMakeLists.txt), else
                    argv[1] / argv[2] when a test file is run directly with python
  run(args)         quantkit with args; asserts the exit code; returns stdout (+ stderr with
                    `with_stderr`)
  run_process(args) the same, returning the CompletedProcess (for tests that read stderr apart)
  ort_session(path) an onnxruntime CPU session with graph optimizations off, so a Q/DQ model runs
                    its Q/DQ arithmetic as written
  ort_run(path, x)  the first output for x fed to the first input (in batches of `batch`)
  cosine(a, b)      cosine similarity in float64
  zoo_data          qkdev/zoo/data.py (Fashion-MNIST with the fixed splits)
  zoo_model(name)   models/zoo/<name>.onnx
"""
import os
import subprocess
import sys

import numpy as np

from qkdev.zoo import data as zoo_data  # noqa: F401  (re-exported)

__all__ = ["QK", "ROOT", "run", "run_process", "ort_session", "ort_run", "cosine", "zoo_data", "zoo_model"]


def _setting(env, index):
    value = os.environ.get(env)
    if value:
        return value
    if len(sys.argv) > index and not sys.argv[index].startswith("-"):
        return sys.argv[index]
    raise RuntimeError(f"set {env} (ctest does) or pass it as argv[{index}]")


QK = _setting("QUANTKIT_BIN", 1)
ROOT = os.environ.get("QUANTKIT_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_process(args, expect=0, env=None):
    p = subprocess.run([QK] + list(args), capture_output=True, text=True, env=env)
    assert p.returncode == expect, f"{args}: exit {p.returncode}, expected {expect}\n{p.stdout}\n{p.stderr}"
    return p


def run(args, expect=0, with_stderr=False):
    p = run_process(args, expect)
    return p.stdout + p.stderr if with_stderr else p.stdout


def ort_session(path, threads=0):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if threads:
        so.intra_op_num_threads = threads
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ort_run(path, x, batch=0, threads=0):
    s = ort_session(path, threads)
    name = s.get_inputs()[0].name
    if not batch:
        return s.run(None, {name: x})[0]
    return np.concatenate([s.run(None, {name: x[i:i + batch]})[0] for i in range(0, len(x), batch)])


def cosine(a, b):
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def zoo_model(name):
    return os.path.join(ROOT, "models", "zoo", name + ".onnx")
