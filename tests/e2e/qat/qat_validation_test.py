"""`quantkit qat` validation (docs/qat.md, "Validation"): which step is kept, by which measure, and
what the summary says about it. Issue 31: on a [batch, time, classes] output argmax agreement
stayed at 1 of 8 and on a saturated classifier at 100%, so keep-the-best silently returned the
PTQ model after the loss fell 3.6x; without --val a run that made the model worse wrote it.

Plain CNN of the zoo, 1 compute thread, a few seconds of CPU per run:
  1. a non-class output (the logits reshaped to [batch, 2, 5], a sequence of two 5-way steps) is
     validated by rel_mse vs FP32 (no tie-breaker), the summary names it, and the kept step is
     the one of lowest rel_mse; with --metric frame_agreement by the share of frames whose argmax
     is FP32's, rel_mse breaking ties;
  2. a class output with unlabelled validation data is validated by agreement with rel_mse
     breaking ties: on a saturated agreement (confident images, chosen by the FP32 logits in
     onnxruntime) the kept step is the one of lowest rel_mse, not step 0, and the summary says
     "ties the PTQ start on agreement and beats it on rel_mse";
  3. without --val, a tail of --data is held out (labelled: top-1, ties broken by rel_mse);
     training that makes the model worse (lr 1e-2) keeps and writes the PTQ start, and the
     summary and stderr say so;
  4. --holdout 0 warns that nothing validated the run; an unknown --metric, and --metric top1
     on unlabelled data, exit 2 with one line;
  5. --lr auto: trial runs from the PTQ start scored on the held-out tail, the best trial's lr
     used and reported (training_log.json's lr_search, the summary); refused without validation;
  6. no --lr: chosen as --lr auto chooses when the run is validated (the same bytes), 1e-4 when
     nothing validates it (and the summary says why), and a resumed run continues at its
     checkpoint's lr without new trials, ending where the run that never stopped ends;
  7. a start from calibrate's model.float.onnx after bias correction warns that it is no FP32
     teacher; --teacher MODEL scores the start as eval does against MODEL; a teacher with another
     interface is refused.
Run by pytest under ctest; quantkit and the repository come from tests/e2e/qktest.py.
"""
import json
import os
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from qktest import ROOT, ort_run, run_process, zoo_data  # noqa: E402  (tests/e2e/qktest.py)

MODEL = os.path.join(ROOT, "models", "zoo", "plain_cnn.onnx")
STEPS, BATCH, EVAL_EVERY = 8, 32, 2
# The same evaluation of the same file, at the same batch size: equal up to float summation order.
EXPORTED_TOLERANCE = 1e-4
TRAIN = ["--data", "fashion-mnist:calib", "--samples", "512", "--batch-size", str(BATCH), "--seed", "1"]
VAL_SAMPLES = 16
# Case 2's validation images: the VAL_SAMPLES of the first CONFIDENT_POOL whose FP32 top-1 logit
# leads the runner-up the most, so that agreement stays saturated (100%) at every step and the
# steps tie on it. On the first 16 images one of them flips during training (100% -> 93.75%) and
# keep-the-best rightly keeps step 0: a test of the metric, not of the tie.
CONFIDENT_POOL = 256


def run(args, expect=0):
    # One compute thread: on a busy 2-core machine OpenMP's spin-waiting multiplies the CPU time.
    return run_process(["--threads", "1"] + args, expect)


def untimed(search):
    """An lr_search record without its wall times."""
    trials = [{k: v for k, v in t.items() if k != "seconds"} for t in search["trials"]]
    return {k: v for k, v in search.items() if k != "seconds"} | {"trials": trials}


def read(path):
    with open(path, "rb") as f:
        return f.read()


def log_of(out):
    with open(os.path.join(out, "training_log.json")) as f:
        return json.load(f)


def lexicographic_best(log):
    """The step the rule must keep: best metric, then lowest tie-breaker; the earliest on a full tie."""
    sign = 1 if log["higher_is_better"] else -1
    best = None
    for e in log["evals"]:
        key = (sign * e["value"], -e.get("tiebreak", 0.0))
        if best is None or key > best[0]:
            best = (key, e["step"])
    return best[1]


def seq_model(path):
    """The plain CNN with its logits reshaped to [N, 2, 5]: not a [batch, classes] output."""
    m = onnx.load(MODEL)
    g = m.graph
    g.initializer.append(numpy_helper.from_array(np.array([-1, 2, 5], np.int64), "seq_shape"))
    g.node.append(helper.make_node("Reshape", [g.output[0].name, "seq_shape"], ["seq"], name="to_seq"))
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("seq", TensorProto.FLOAT, ["N", 2, 5]))
    onnx.save(m, path)
    return path


def initializers(path):
    return {i.name: numpy_helper.to_array(i) for i in onnx.load(path).graph.initializer}


def main():
    with tempfile.TemporaryDirectory() as tmp:
        x, _ = zoo_data.load_split("val")
        val = os.path.join(tmp, "val.npy")  # a bare array: no labels
        np.save(val, x[:VAL_SAMPLES])
        plan = os.path.join(tmp, "ptq", "plan.json")
        run(["calibrate", MODEL, "--data", "fashion-mnist:calib", "--samples", "256", "--method", "max",
             "--float-dtype", "fp32", "-o", os.path.dirname(plan), "-q"])

        # 1. Non-class output: rel_mse vs FP32.
        seq = seq_model(os.path.join(tmp, "seq.onnx"))
        out = os.path.join(tmp, "seq")
        # From an entropy plan, which clips the input (docs/qat.md): training has an error to remove.
        p = run(["qat", seq, *TRAIN, "--calib-samples", "256", "--method", "entropy", "--steps", str(STEPS),
                 "--eval-every", str(EVAL_EVERY), "--val", val, "-q", "-o", out])
        print(p.stdout)
        log = log_of(out)
        assert log["metric"] == "rel_mse" and log["tiebreak"] == "" and not log["higher_is_better"], log["metric"]
        assert "validation (rel_mse vs FP32, lower is better) on " in p.stdout, p.stdout
        assert log["best_step"] == lexicographic_best(log), (log["best_step"], log["evals"])
        assert log["val_best"] == min(e["value"] for e in log["evals"])
        assert log["best_step"] > 0 and "beats the PTQ start on rel_mse" in p.stdout, p.stdout
        # ... or by --metric frame_agreement: the share of the 2 frames per sample whose 5-way argmax
        # is FP32's (what a greedy decode reads), ties broken by rel_mse, kept by the same rule.
        out = os.path.join(tmp, "seq_frames")
        p = run(["qat", seq, *TRAIN, "--calib-samples", "256", "--method", "entropy", "--steps", str(STEPS),
                 "--eval-every", str(EVAL_EVERY), "--val", val, "--metric", "frame_agreement", "-q", "-o", out])
        log = log_of(out)
        assert log["metric"] == "frame_agreement" and log["tiebreak"] == "rel_mse" and log["higher_is_better"], log
        assert "validation (frame_agreement with FP32, higher is better; ties broken by rel_mse" in p.stdout, p.stdout
        assert log["best_step"] == lexicographic_best(log), (log["best_step"], log["evals"])
        # Shares of 2 x VAL_SAMPLES frames.
        assert all(abs(e["value"] * 2 * VAL_SAMPLES - round(e["value"] * 2 * VAL_SAMPLES)) < 1e-9 for e in log["evals"])

        # 2. Class output, unlabelled validation data: agreement, ties broken by rel_mse. From an
        # entropy plan (an output error for training to remove), on confident images.
        pool = x[:CONFIDENT_POOL]
        logits = np.sort(ort_run(MODEL, pool), axis=1)
        confident = np.sort(np.argsort(logits[:, -2] - logits[:, -1])[:VAL_SAMPLES])
        val_confident = os.path.join(tmp, "val_confident.npy")
        np.save(val_confident, pool[confident])
        entropy_plan = os.path.join(tmp, "entropy", "plan.json")
        run(["calibrate", MODEL, "--data", "fashion-mnist:calib", "--samples", "256", "--method", "entropy",
             "--float-dtype", "fp32", "-o", os.path.dirname(entropy_plan), "-q"])
        out = os.path.join(tmp, "ties")
        p = run(["qat", MODEL, "--plan", entropy_plan, *TRAIN, "--steps", str(STEPS), "--eval-every",
                 str(EVAL_EVERY), "--val", val_confident, "-q", "-o", out])
        print(p.stdout)
        log = log_of(out)
        assert log["metric"] == "agreement" and log["tiebreak"] == "rel_mse", (log["metric"], log["tiebreak"])
        assert "validation (agreement with FP32, higher is better; ties broken by rel_mse vs FP32)" in p.stdout
        values = [e["value"] for e in log["evals"]]
        assert len(set(values)) == 1, f"agreement did not tie over the steps, not a tie test: {log['evals']}"
        assert log["best_step"] == lexicographic_best(log) and log["best_step"] > 0, log["evals"]
        assert log["val_best_tiebreak"] < log["val_ptq_tiebreak"], log["evals"]
        assert "ties the PTQ start on agreement and beats it on rel_mse" in p.stdout, p.stdout
        assert log["val_exported"] is not None and log["val_exported_tiebreak"] is not None

        # 3. No --val: a held-out tail of --data (fashion-mnist carries labels: top-1). Training
        # that ruins the model keeps the PTQ start, says so, and writes it.
        out = os.path.join(tmp, "worse")
        p = run(["qat", MODEL, "--plan", plan, *TRAIN, "--steps", "4", "--eval-every", "2", "--lr", "1e-2",
                 "--frozen-activation-scales",
                 "-q", "-o", out])
        print(p.stdout, p.stderr)
        log = log_of(out)
        assert log["holdout"] == 51 and log["metric"] == "top1" and log["tiebreak"] == "rel_mse", log
        assert "the last 51 samples of --data, held out" in p.stdout, p.stdout
        assert log["best_step"] == 0 and len(log["evals"]) == 3, log["evals"]
        warning = "no step beat the PTQ start on top1 (then rel_mse vs FP32): wrote the PTQ model"
        assert warning in p.stdout and "warning: " + warning in p.stderr, (p.stdout, p.stderr)
        assert "the PTQ start was kept" in p.stdout
        # ... and what the last step, which is not written, scored.
        last = log["evals"][-1]
        assert last["step"] == 4 and f"(last validation, step 4: {100 * last['value']:.2f}%" in p.stdout, p.stdout
        # The written float model holds the start's weights (BatchNormalization folding aside).
        start, written = initializers(MODEL), initializers(os.path.join(out, "model.float.onnx"))
        shared = [k for k in written if k in start and start[k].dtype == np.float32]
        assert shared and all(np.array_equal(start[k], written[k]) for k in shared), "the trained weights were written"

        # 5. --lr auto: five short trials from the PTQ start on the same held-out tail, the best
        # one's lr (the smallest when none beats the start) is the run's, and the summary says so.
        out = os.path.join(tmp, "lr_auto")
        p = run(["qat", MODEL, "--plan", plan, *TRAIN, "--steps", str(STEPS), "--eval-every", str(EVAL_EVERY),
                 "--lr", "auto", "-q", "-o", out])
        print(p.stdout)
        log = log_of(out)
        search = log["lr_search"]
        trials = search["trials"]
        grid, below = trials[:5], trials[5:]
        assert [t["lr"] for t in grid] == [1e-5, 3e-5, 1e-4, 3e-4, 1e-3] and search["steps"] == 2, search
        sign = 1 if log["higher_is_better"] else -1
        def key(value, tiebreak):
            return (sign * value, -tiebreak)
        ptq_key = key(search["ptq"], search["ptq_tiebreak"])
        best = max(grid, key=lambda t: (key(t["value"], t["tiebreak"]), -t["lr"]))  # ties: the smaller lr
        if key(best["value"], best["tiebreak"]) > ptq_key:
            assert below == [] and search["beat_ptq"] and search["chosen"] == best["lr"], search
        else:
            # Down 3e-6, 1e-6 until one beats the start; none: the last.
            assert [t["lr"] for t in below] in ([3e-6], [3e-6, 1e-6]), search
            beats = [key(t["value"], t["tiebreak"]) > ptq_key for t in below]
            assert beats == [False] * (len(below) - 1) + [beats[-1]] and search["beat_ptq"] == beats[-1], search
            assert search["chosen"] == below[-1]["lr"], search
        assert log["lr"] == search["chosen"], search
        # The trials start where the run starts: the same PTQ score as the run's step 0.
        assert search["ptq"] == log["val_ptq"] and search["ptq_tiebreak"] == log["val_ptq_tiebreak"], search
        assert f"lr auto: {search['chosen']:g} chosen on top1 from {len(trials)} trials of 2 steps" in p.stdout, p.stdout
        p = run(["qat", MODEL, "--plan", plan, *TRAIN, "--steps", "1", "--lr", "auto", "--holdout", "0", "-q",
                 "-o", os.path.join(tmp, "bad")], expect=2)
        assert "--lr auto chooses on validation data" in p.stderr and len(p.stderr.strip().splitlines()) == 1

        # ... and when no lr of the grid beats the PTQ start (cross-entropy toward wrong labels: every
        # trial moves the model away from FP32, 1e-5 by +40% rel_mse), the smaller ones are tried
        # down to 1e-6, and the first to beat the start is chosen, else 1e-6.
        labels = os.path.join(tmp, "wrong_labels.npy")
        np.save(labels, (np.arange(2048) * 7 + 3) % 10)
        low_run = os.path.join(tmp, "lr_below")
        p = run(["qat", MODEL, "--plan", plan, *TRAIN, "--steps", str(STEPS), "--labels", labels, "--loss", "ce",
                 "--lr", "auto", "-q", "-o", low_run])
        low = log_of(low_run)["lr_search"]
        below = low["trials"][5:]
        assert [t["lr"] for t in low["trials"][:5]] == [1e-5, 3e-5, 1e-4, 3e-4, 1e-3], low
        assert [t["lr"] for t in below] in ([3e-6], [3e-6, 1e-6]), low
        ptq_key = key(low["ptq"], low["ptq_tiebreak"])
        beats = [key(t["value"], t["tiebreak"]) > ptq_key for t in below]
        assert beats[:-1] == [False] * (len(below) - 1) and low["beat_ptq"] == beats[-1], low
        assert low["chosen"] == below[-1]["lr"] == log_of(low_run)["lr"], low
        assert f"from {len(low['trials'])} trials" in p.stdout, p.stdout

        # 6. No --lr on a validated run: chosen exactly as --lr auto chooses.
        chosen_run = os.path.join(tmp, "lr_default")
        args = ["qat", MODEL, "--plan", plan, *TRAIN, "--steps", str(STEPS), "--eval-every", str(EVAL_EVERY), "-q"]
        p = run([*args, "-o", chosen_run])
        default_log = log_of(chosen_run)
        assert default_log["lr_source"] == "chosen"
        assert untimed(default_log["lr_search"]) == untimed(search), (default_log["lr_search"], search)
        assert default_log["lr"] == log["lr"] and "lr auto: " in p.stdout, p.stdout
        assert read(os.path.join(chosen_run, "model.qdq.onnx")) == read(os.path.join(out, "model.qdq.onnx"))
        # ... paused half-way and resumed without --lr: the checkpoint's lr, no new trials, the same end.
        resumed = os.path.join(tmp, "lr_resumed")
        run([*args, "--stop-after", str(STEPS // 2), "-o", resumed])
        p = run([*args, "--resume", os.path.join(resumed, "checkpoint.npz"), "-o", resumed])
        resumed_log = log_of(resumed)
        assert "lr_search" not in resumed_log and resumed_log["lr"] == default_log["lr"], resumed_log
        assert f"lr {default_log['lr']:g}: the checkpoint's (--resume" in p.stdout, p.stdout
        assert read(os.path.join(resumed, "model.qdq.onnx")) == read(os.path.join(chosen_run, "model.qdq.onnx"))

        # 7. The teacher. calibrate --ptq bias-correction writes model.float.onnx, QAT's start, whose
        # biases are shifted toward the quantized model: as the teacher it is not the FP32 function.
        staged = os.path.join(tmp, "staged")
        run(["calibrate", MODEL, "--data", "fashion-mnist:calib", "--samples", "256", "--method", "max",
             "--float-dtype", "fp32", "--ptq", "bias-correction", "--ptq-samples", "32", "-o", staged, "-q"])
        start = [os.path.join(staged, "model.float.onnx"), "--plan", os.path.join(staged, "plan.json")]
        args = ["qat", *start, *TRAIN, "--steps", "2", "--lr", "1e-4", "--val", val, "-q"]
        p = run([*args, "-o", os.path.join(tmp, "teacher_staged")])
        warning = "whose weights the PTQ stages bias-correction changed: it is not the FP32 model's function"
        assert warning in p.stdout and "warning: the teacher is " in p.stderr, (p.stdout, p.stderr)
        # --teacher MODEL: no warning, and the PTQ start is scored against the FP32 model: the same
        # rel_mse as `eval` of the PTQ model.qdq.onnx against MODEL on these samples.
        out = os.path.join(tmp, "teacher_fp32")
        p = run([*args, "--teacher", MODEL, "--metric", "rel_mse", "-o", out])
        assert warning not in p.stdout, p.stdout
        e = run(["eval", os.path.join(staged, "model.qdq.onnx"), "--data", val, "--reference", MODEL,
                 "--metric", "rel_mse", "--json"])
        rel = json.loads(e.stdout)["metrics"]["rel_mse"]
        assert abs(log_of(out)["val_ptq"] - rel) <= 0.05 * rel, (log_of(out)["val_ptq"], rel)
        # ... and the written model is validated against the same teacher: `eval` of it against MODEL
        # at the same batch size gives its score (the run scored it against the staged float model
        # before, and warned of an export difference that was a change of reference).
        e = run(["eval", os.path.join(out, "model.qdq.onnx"), "--data", val, "--reference", MODEL,
                 "--metric", "rel_mse", "--batch-size", str(BATCH), "--json"])
        rel = json.loads(e.stdout)["metrics"]["rel_mse"]
        assert abs(log_of(out)["val_exported"] - rel) <= EXPORTED_TOLERANCE * rel, (log_of(out)["val_exported"], rel)
        assert "the exported model computes otherwise" not in p.stdout, p.stdout
        # A teacher whose interface is another one: exit 2 naming it, nothing written.
        p = run([*args, "--teacher", seq, "-o", os.path.join(tmp, "bad")], expect=2)
        assert "--teacher " + seq in p.stderr and "first output" in p.stderr, p.stderr
        assert not os.path.exists(os.path.join(tmp, "bad", "model.qdq.onnx"))

        # 4. No validation at all, and bad metrics.
        out = os.path.join(tmp, "none")
        p = run(["qat", MODEL, "--plan", plan, *TRAIN, "--steps", "1", "--holdout", "0", "-q", "-o", out])
        assert "WARNING: not validated (no --val, --holdout 0)" in p.stdout and "warning: not validated" in p.stderr
        assert log_of(out)["metric"] == "" and log_of(out)["evals"] == []
        # 6. ... and with nothing to validate on, no --lr is 1e-4, and the summary says why.
        assert log_of(out)["lr"] == 1e-4 and "lr_search" not in log_of(out)
        assert "lr 0.0001: the default, not chosen: nothing to validate on (--val, or --lr)" in p.stdout, p.stdout
        for args, needle in ((["--metric", "bogus"], "unknown metric 'bogus'"),
                             (["--metric", "top1", "--val", val], "needs labelled validation data"),
                             (["--metric", "rel_mse", "--holdout", "0"], "nothing validates this run")):
            out = os.path.join(tmp, "bad")
            p = run(["qat", MODEL, "--plan", plan, *TRAIN, "--steps", "1", *args, "-q", "-o", out], expect=2)
            assert needle in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
            assert not os.path.exists(os.path.join(out, "model.qdq.onnx"))
    print("ok")


def test_qat_validation():
    main()


if __name__ == "__main__":
    main()
