"""eval and analyze report the same output statistics (analysis::ErrorStats, issue 28 item 3).

A model whose output is all zeros, compared with itself: the outputs agree exactly, so the cosine
is 1 and the SQNR infinite, as analyze (ErrorStats) says (eval used to say cosine 0 there, from its
own copy of the formulas). And a model compared with a scaled copy of itself: eval's cosine and SQNR equal the
closed form (cosine 1: same direction; SQNR of y against 1.5 y is 10 log10(1 / 0.25) = 6.02 dB).
Run by pytest under ctest; quantkit comes from tests/e2e/qktest.py.
"""
import json
import math
import os
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from qktest import run  # noqa: E402

SQNR_TOLERANCE_DB = 1e-4  # float32 outputs summed in double


def scaled_model(path, factor):
    """y = x * factor for x [N, 8]."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])
    k = numpy_helper.from_array(np.array(factor, dtype=np.float32), "k")
    graph = helper.make_graph([helper.make_node("Mul", ["x", "k"], ["y"])], "scaled", [x], [y], [k])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def eval_json(model, reference, data):
    return json.loads(run(["eval", model, "--reference", reference, "--data", data, "--json", "-q"]))


def main():
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "x.npy")
        np.save(data, np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32))
        zero, one, more = (os.path.join(d, f"{n}.onnx") for n in ("zero", "one", "more"))
        scaled_model(zero, 0.0)
        scaled_model(one, 1.0)
        scaled_model(more, 1.5)
        j = eval_json(zero, zero, data)
        agreement = j["agreement"]
        assert agreement["cosine"] == 1.0, j
        assert agreement["sqnr_db"] is None, j  # +inf: JSON has no infinity, quantkit writes null
        j = eval_json(more, one, data)
        assert abs(j["agreement"]["cosine"] - 1.0) < 1e-9, j
        assert abs(j["agreement"]["sqnr_db"] - 10 * math.log10(4.0)) < SQNR_TOLERANCE_DB, j


def test_eval_metrics():
    main()


if __name__ == "__main__":
    main()
