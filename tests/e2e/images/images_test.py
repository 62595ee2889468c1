"""Image-folder data sources against torchvision, and their bad-input errors.

  1. `quantkit data` on an ImageFolder tree (PNG and JPEG, random pixels, assorted sizes) equals
     torchvision's Resize -> CenterCrop -> ToTensor -> Normalize on the same files, and the labels
     equal torchvision.datasets.ImageFolder's targets. Also: exact HxW resize, BGR, NHWC, gray
     (PIL convert('L')), and a JSON data config mapping two inputs (images + a .npy).
  2. calibrate and eval accept the same folder and options (eval reports top-1 from the labels).
  3. Bad input: corrupt image, non-image bytes, empty folder, a different size without a resize,
     a grayscale image for a 3-channel input, preprocessing options on .npy data -> exit 2 and
     one line naming the file.
Run by pytest under ctest; quantkit comes from tests/e2e/qktest.py.
"""
import json
import os
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper
from PIL import Image
import torch
import torchvision
from torchvision import transforms
from qktest import run_process as run  # noqa: E402  (tests/e2e/qktest.py)

# quantkit's resize is a port of Pillow's fixed-point bilinear filter and decodes with the same
# libpng/libjpeg-turbo, so pixels agree exactly; what remains is float32 rounding of
# x * (1/255) vs x / 255 and * (1/std) vs / std (a few ulp). One uint8 level would be
# (1/255)/std ~ 0.017, so this bound still catches any pixel that differs.
PIXEL_ATOL = 1e-5
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
SEED = 0


def identity_model(path, inputs):
    """inputs: [(name, dims)] -> a model whose outputs are its inputs (only the signature matters)."""
    nodes, vin, vout = [], [], []
    for name, dims in inputs:
        vin.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N"] + dims))
        vout.append(helper.make_tensor_value_info(name + "_out", TensorProto.FLOAT, ["N"] + dims))
        nodes.append(helper.make_node("Identity", [name], [name + "_out"]))
    g = helper.make_graph(nodes, "g", vin, vout)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def classifier_model(path, classes):
    """[N,3,32,32] -> Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> [N, classes]."""
    rng = np.random.RandomState(SEED)
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 3, 3, 3], rng.randn(8, 3, 3, 3).astype(np.float32).ravel())
    fc = helper.make_tensor("fc", TensorProto.FLOAT, [classes, 8], rng.randn(classes, 8).astype(np.float32).ravel())
    nodes = [helper.make_node("Conv", ["input", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc"], ["logits"], transB=1)]
    g = helper.make_graph(nodes, "cls", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 32, 32])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])], [w, fc])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def write_tree(root):
    """ImageFolder layout: 3 classes, PNG and JPEG, sizes that exercise down- and up-scaling and
    odd crop offsets (Python's round-half-even)."""
    rng = np.random.RandomState(SEED)
    sizes = [(37, 50), (64, 45), (40, 40), (20, 30), (33, 81), (36, 37)]
    i = 0
    for cls in ["cat", "dog", "eel"]:
        os.makedirs(os.path.join(root, cls))
        for k in range(2):
            h, w = sizes[i % len(sizes)]
            px = rng.randint(0, 256, size=(h, w, 3), dtype=np.uint8)
            ext = "jpg" if (i % 3 == 2) else "png"
            Image.fromarray(px, "RGB").save(os.path.join(root, cls, f"img{k}.{ext}"), quality=90)
            i += 1


def compare(name, ours, ref):
    assert ours.shape == ref.shape, (name, ours.shape, ref.shape)
    diff = float(np.abs(ours - ref).max())
    print(f"{name}: {ours.shape} max |quantkit - torchvision| = {diff:.3g}")
    assert diff <= PIXEL_ATOL, (name, diff)


def check_against_torchvision(d):
    tree = os.path.join(d, "tree")
    write_tree(tree)
    model = os.path.join(d, "id.onnx")
    identity_model(model, [("input", [3, 32, 32])])
    out = os.path.join(d, "dump")
    run(["data", model, "--data", tree, "--resize", "36", "--center-crop", "32", "--mean", ",".join(map(str, MEAN)),
         "--std", ",".join(map(str, STD)), "--samples", "0", "-o", out])
    tf = transforms.Compose([transforms.Resize(36), transforms.CenterCrop(32), transforms.ToTensor(),
                             transforms.Normalize(MEAN, STD)])
    ds = torchvision.datasets.ImageFolder(tree, transform=tf)
    ref = torch.stack([x for x, _ in ds]).numpy()
    compare("Resize(36)+CenterCrop(32)+Normalize", np.load(os.path.join(out, "input.npy")), ref)
    labels = np.load(os.path.join(out, "labels.npy"))
    assert labels.tolist() == [t for _, t in ds.samples], (labels, ds.samples)

    # Exact HxW resize, BGR, NHWC, default scale and no normalization.
    identity_model(model, [("input", [24, 20, 3])])
    run(["data", model, "--data", tree, "--resize", "24x20", "--color", "bgr", "--samples", "0", "-o", out])
    ds = torchvision.datasets.ImageFolder(tree, transform=transforms.Compose(
        [transforms.Resize((24, 20)), transforms.ToTensor()]))
    ref = torch.stack([x for x, _ in ds]).numpy()[:, ::-1].transpose(0, 2, 3, 1)  # BGR, NHWC
    compare("Resize((24,20)) BGR NHWC", np.load(os.path.join(out, "input.npy")), ref)

    # A 1-channel input: gray (PIL convert('L')) picked automatically, then resize and crop.
    identity_model(model, [("input", [1, 30, 30])])
    run(["data", model, "--data", tree, "--resize", "31", "--center-crop", "30", "--mean", "0.5", "--std", "0.25",
         "--samples", "0", "-o", out])
    ds = torchvision.datasets.ImageFolder(tree, loader=lambda p: Image.open(p).convert("L"), transform=transforms.Compose(
        [transforms.Resize(31), transforms.CenterCrop(30), transforms.ToTensor(), transforms.Normalize([0.5], [0.25])]))
    compare("gray Resize(31)+CenterCrop(30)", np.load(os.path.join(out, "input.npy")),
            torch.stack([x for x, _ in ds]).numpy())

    # JSON config, two inputs: images with preprocessing + a .npy (paths relative to the config).
    identity_model(model, [("image", [3, 32, 32]), ("aux", [4])])
    aux = np.random.RandomState(SEED).randn(6, 4).astype(np.float32)
    np.save(os.path.join(d, "aux.npy"), aux)
    config = {"inputs": {"image": {"images": "tree", "resize": 36, "center_crop": [32, 32], "mean": MEAN, "std": STD},
                         "aux": {"data": "aux.npy"}}}
    with open(os.path.join(d, "data.json"), "w") as f:
        json.dump(config, f)
    run(["data", model, "--data", os.path.join(d, "data.json"), "--samples", "0", "-o", out])
    ds = torchvision.datasets.ImageFolder(tree, transform=tf)
    compare("JSON config image", np.load(os.path.join(out, "image.npy")), torch.stack([x for x, _ in ds]).numpy())
    assert (np.load(os.path.join(out, "aux.npy")) == aux).all()
    # The config must map every input, and only existing ones; options and a config don't mix.
    del config["inputs"]["aux"]
    with open(os.path.join(d, "partial.json"), "w") as f:
        json.dump(config, f)
    p = run(["data", model, "--data", os.path.join(d, "partial.json"), "-o", out], expect=2)
    assert "no data for model input 'aux'" in p.stderr, p.stderr
    p = run(["data", model, "--data", os.path.join(d, "data.json"), "--resize", "36", "-o", out], expect=2)
    assert "JSON config" in p.stderr, p.stderr
    # A misspelt key is an error, not a silently skipped preprocessing step.
    with open(os.path.join(d, "typo.json"), "w") as f:
        json.dump({"inputs": {"image": {"images": "tree", "resise": 36}, "aux": "aux.npy"}}, f)
    p = run(["data", model, "--data", os.path.join(d, "typo.json"), "-o", out], expect=2)
    assert "inputs.image.resise: unknown key" in p.stderr, p.stderr
    return tree


def check_calibrate_eval(d, tree):
    model = os.path.join(d, "cls.onnx")
    classifier_model(model, 3)
    pre = ["--resize", "36", "--center-crop", "32", "--mean", ",".join(map(str, MEAN)), "--std", ",".join(map(str, STD))]
    out = os.path.join(d, "calib")
    run(["calibrate", model, "--data", tree, "-o", out, "-q", "--batch-size", "4"] + pre)
    for f in ["model.qdq.onnx", "calib.cache", "ranges.txt", "plan.json", "summary.txt"]:
        assert os.path.getsize(os.path.join(out, f)) > 0, f
    assert "center crop 32x32" in open(os.path.join(out, "plan.json")).read(), "provenance names the preprocessing"
    r = json.loads(run(["eval", model, "--data", tree, "--json", "-q"] + pre).stdout)
    assert r["samples"] == 6 and "top1" in r, r


def one_line_naming(p, what):
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and what in lines[0], p.stderr


def check_bad_input(d):
    model = os.path.join(d, "cls.onnx")
    rng = np.random.RandomState(SEED)

    def folder(name, files):
        root = os.path.join(d, name)
        os.makedirs(root)
        for fname, content in files:
            path = os.path.join(root, fname)
            if isinstance(content, bytes):
                open(path, "wb").write(content)
            else:
                content.save(path)
        return root

    good = Image.fromarray(rng.randint(0, 256, (32, 32, 3), dtype=np.uint8), "RGB")
    png = open(os.path.join(d, "good.png"), "wb")
    good.save(png, format="PNG")
    png.close()
    png_bytes = open(os.path.join(d, "good.png"), "rb").read()
    # Corrupt: a valid PNG signature and header, then garbage; found while reading (2nd image).
    root = folder("corrupt", [("a.png", good), ("b.png", png_bytes[:60] + b"\x00" * 40)])
    p = run(["calibrate", model, "--data", root, "-o", os.path.join(d, "never"), "-q"], expect=2)
    one_line_naming(p, os.path.join(root, "b.png"))
    # A truncated JPEG: libjpeg would pad it with gray; PIL and quantkit refuse it.
    jpg = os.path.join(d, "good.jpg")
    good.save(jpg, quality=90)
    jpg_bytes = open(jpg, "rb").read()
    root = folder("truncated", [("a.png", good), ("b.jpg", jpg_bytes[:len(jpg_bytes) // 2])])
    p = run(["eval", model, "--data", root, "-q"], expect=2)
    one_line_naming(p, os.path.join(root, "b.jpg"))
    root = folder("notimage", [("a.jpg", b"this is not a JPEG")])
    p = run(["calibrate", model, "--data", root, "-o", os.path.join(d, "never"), "-q"], expect=2)
    one_line_naming(p, os.path.join(root, "a.jpg"))
    root = folder("empty", [])
    p = run(["calibrate", model, "--data", root, "-o", os.path.join(d, "never"), "-q", "--resize", "32"], expect=2)
    one_line_naming(p, "empty data directory")
    big = Image.fromarray(rng.randint(0, 256, (40, 32, 3), dtype=np.uint8), "RGB")
    root = folder("sizes", [("a.png", good), ("b.png", big)])
    p = run(["eval", model, "--data", root, "-q"], expect=2)
    one_line_naming(p, os.path.join(root, "b.png"))
    assert "40x32" in p.stderr and "--resize" in p.stderr, p.stderr
    gray = Image.fromarray(rng.randint(0, 256, (32, 32), dtype=np.uint8), "L")
    root = folder("gray", [("a.png", gray)])
    p = run(["calibrate", model, "--data", root, "-o", os.path.join(d, "never"), "-q"], expect=2)
    one_line_naming(p, os.path.join(root, "a.png"))
    assert "grayscale" in p.stderr, p.stderr
    np.save(os.path.join(d, "x.npy"), np.zeros((2, 3, 32, 32), np.float32))
    p = run(["calibrate", model, "--data", os.path.join(d, "x.npy"), "--mean", "0.5", "-o", os.path.join(d, "never"), "-q"], expect=2)
    one_line_naming(p, "image folders only")


def main():
    with tempfile.TemporaryDirectory() as d:
        tree = check_against_torchvision(d)
        check_calibrate_eval(d, tree)
        check_bad_input(d)
    print("images_test: passed")


def test_images():
    main()


if __name__ == "__main__":
    main()
