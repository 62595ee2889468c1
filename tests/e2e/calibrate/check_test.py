"""The accuracy check every `quantkit calibrate` ends with (issue 31, item 5; docs/accuracy.md).

  1. A good calibration (plain_cnn, max, 256 of fashion-mnist:calib's 2048 samples) prints
     `check: N held-out samples (... 256..), top-1 agreement ...` in the summary and summary.txt,
     measured on the samples that follow the calibrated ones (disjoint from them), and no warning;
     the exit code is 0.
  2. All of the data calibrated on (--repair off): the check says in-sample; by default the last
     samples are held out of the calibration instead.
  3. A ruined calibration (--repair off) (one sample blown up 1000x, so max's ranges leave every real activation
     a level or two) warns loudly on stderr and in the summary, naming --ptq smoothquant,bias-correction
     (only where no stage ran), --method auto, --budget and
     `quantkit analyze`; the exit code stays 0.
  4. --check-samples is range-checked (negative: exit 2; --no-check with a count: exit 2); 0 and
     --no-check print no check line; --check-samples sizes it; --holdout is used when given.
  5. --budget: summary.txt carries the search and names the layers the written plan keeps in float,
     with the check of the repaired plan.
Run by pytest under ctest; quantkit and the repository come from tests/e2e/qktest.py.
"""
import os
import re
import tempfile

import numpy as np
from qktest import ROOT, run, run_process, zoo_data  # noqa: E402  (tests/e2e/qktest.py)

MODEL = os.path.join(ROOT, "models", "zoo", "plain_cnn.onnx")
CHECK_LINE = re.compile(r"^check: (\d+) (held-out|held-out \(--holdout\)|in-sample) samples \((.*)\), "
                        r"top-1 agreement ([\d.]+)%.*output rel MSE (\S+) vs FP32", re.M)


def check_line(text):
    m = CHECK_LINE.search(text)
    assert m, text
    return int(m.group(1)), m.group(2), m.group(3), float(m.group(4)), float(m.group(5))


def summary(out):
    with open(os.path.join(out, "summary.txt")) as f:
        return f.read()


def main():
    with tempfile.TemporaryDirectory() as d:
        # 1. Held out: the 16 samples (1 in 16 of 256) after the calibrated ones.
        good = os.path.join(d, "good")
        p = run_process(["calibrate", MODEL, "--data", "fashion-mnist:calib", "--samples", "256", "-o", good, "-q"])
        n, origin, data, agreement, rel_mse = check_line(p.stdout)
        assert (n, origin) == (16, "held-out"), p.stdout
        # Disjoint: the slice starts where the calibration stopped.
        assert data.startswith("samples 256-271 of fashion-mnist:calib"), data
        assert agreement >= 97 and rel_mse < 1e-2, p.stdout
        assert "warning" not in p.stdout + p.stderr, p.stdout + p.stderr
        assert check_line(summary(good))[:3] == (n, origin, data)
        sized = run(["calibrate", MODEL, "--data", "fashion-mnist:calib", "--samples", "256", "--check-samples", "64",
                     "-o", os.path.join(d, "sized"), "-q"])
        assert check_line(sized)[0] == 64, sized

        # 2. Every sample calibrated on: the tail, labelled in-sample.
        x, _ = zoo_data.load_split("calib")
        x = np.ascontiguousarray(x[:96])
        xin = os.path.join(d, "x.npy")
        np.save(xin, x)
        out = run(["calibrate", MODEL, "--data", f"input={xin}", "-o", os.path.join(d, "all"), "-q", "--repair", "off"])
        n, origin, _, _, _ = check_line(out)
        assert (n, origin) == (16, "in-sample"), out
        assert "give --holdout SPEC" in out, out
        # By default (--repair auto) the last 16 are held out of the calibration instead.
        out = run(["calibrate", MODEL, "--data", f"input={xin}", "-o", os.path.join(d, "split"), "-q"])
        n, origin, data, _, _ = check_line(out)
        assert (n, origin) == (16, "held-out") and data.startswith("samples 80-95 of "), out
        assert "the calibration uses the first 80 of the 96 samples" in out, out

        # 3. One outlier sample ruins max's ranges: under --repair off (the default repairs it:
        # repair_test.py) a loud warning naming the fixes, exit 0.
        blown = x.copy()
        blown[0] *= 1000.0
        bin_ = os.path.join(d, "blown.npy")
        np.save(bin_, blown)
        bad = os.path.join(d, "bad")
        p = run_process(["calibrate", MODEL, "--data", f"input={bin_}", "--samples", "64", "-o", bad, "-q",
                         "--repair", "off"])
        n, origin, _, agreement, _ = check_line(p.stdout)
        assert origin == "held-out" and agreement < 90, p.stdout
        for text in (p.stdout, p.stderr, summary(bad)):
            assert "warning: check: the written model loses accuracy" in text, text
            for fix in ("--ptq smoothquant,bias-correction", "--method auto", "--budget", "quantkit analyze"):
                assert fix in text, (fix, text)
        # The PTQ stages are named as a fix only where none ran.
        staged = os.path.join(d, "staged")
        p = run_process(["calibrate", MODEL, "--data", f"input={bin_}", "--samples", "64", "--ptq",
                         "bias-correction", "--ptq-samples", "16", "-o", staged, "-q", "--repair", "off"])
        assert "warning: check: the written model loses accuracy" in p.stderr, p.stderr
        assert "--ptq smoothquant" not in p.stderr and "--method auto" in p.stderr, p.stderr

        # 4. Ranges and switches.
        base = ["calibrate", MODEL, "--data", "fashion-mnist:calib", "--samples", "64", "-q"]
        p = run_process(base + ["--check-samples", "-1", "-o", os.path.join(d, "neg")], expect=2)
        assert "--check-samples" in p.stderr, p.stderr
        p = run_process(base + ["--no-check", "--check-samples", "8", "-o", os.path.join(d, "both")], expect=2)
        assert "--no-check" in p.stderr, p.stderr
        for off in (["--no-check"], ["--check-samples", "0"]):
            out = run(base + off + ["-o", os.path.join(d, "off")])
            assert "check:" not in out, out
        out = run(base + ["--holdout", "fashion-mnist:val", "--holdout-samples", "32", "-o", os.path.join(d, "val")])
        n, origin, data, _, _ = check_line(out)
        assert (n, origin) == (32, "held-out (--holdout)") and "val" in data, out

        # 5. --budget: the layers the written plan keeps in float are in summary.txt.
        fb = os.path.join(d, "budget")
        p = run_process(["calibrate", MODEL, "--data", "fashion-mnist:calib", "--samples", "512", "--method",
                         "entropy", "--budget", "0.5", "-o", fb, "-q"])
        text = summary(fb)
        m = re.search(r"^final plan: (\d+) layer\(s\) kept in float \((\w+) in model.qdq.onnx[^)]*\):(.*)$", text, re.M)
        assert m and int(m.group(1)) >= 1, text
        kept = m.group(3).split()
        assert len(kept) == int(m.group(1)), text
        with open(os.path.join(fb, "layer_precisions.txt")) as f:
            precisions = f.read()
        for layer in kept:
            assert layer in precisions, (layer, precisions)
        assert "budget: fallback search" in text and "wrote " not in text, text
        check_line(text)
        assert p.stdout.count("check:") == 1, p.stdout


def test_calibrate_check():
    main()


if __name__ == "__main__":
    main()
