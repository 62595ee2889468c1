"""ONNX file helpers of the zoo that need no torch (the e2e check imports them)."""
import collections
import hashlib

import numpy as np


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def onnx_summary(path):
    import onnx
    m = onnx.load(path)
    ops = collections.Counter(n.op_type for n in m.graph.node)
    opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
    return dict(sorted(ops.items())), opset


def qdq_summary(path):
    """Counts Q/DQ nodes and checks their zero points (int8 and all zero). Works on the raw ONNX."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    consts = {t.name: t for t in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "Constant":
            consts[n.output[0]] = next(a.t for a in n.attribute if a.name == "value")
    # torch's exporter shares deduplicated constants through Identity nodes: follow them.
    alias = {n.output[0]: n.input[0] for n in m.graph.node if n.op_type == "Identity"}

    def const(name):
        while name in alias:
            name = alias[name]
        return consts[name]

    ops = collections.Counter(n.op_type for n in m.graph.node)
    zp_types, nonzero, per_axis = set(), 0, 0
    for n in m.graph.node:
        if n.op_type not in ("QuantizeLinear", "DequantizeLinear"):
            continue
        zp = const(n.input[2])
        zp_types.add(onnx.TensorProto.DataType.Name(zp.data_type))
        nonzero += int(np.count_nonzero(numpy_helper.to_array(zp)))
        per_axis += int(len(zp.dims) == 1 and zp.dims[0] > 1)
    return {"quantize_linear": ops["QuantizeLinear"], "dequantize_linear": ops["DequantizeLinear"],
            "zero_point_dtypes": sorted(zp_types), "nonzero_zero_points": nonzero,
            "per_axis_qdq_nodes": per_axis}
