"""quantkit calibrate / eval as N processes of one torch.distributed job (docs/distributed.md).

  1. calibrate under `torchrun --standalone --nproc_per_node=2` and 3 writes artifacts (and the
     .qkstats) byte-identical to one process over the same data; only rank 0 writes, every rank
     prints its one line.
  2. eval --plan under torchrun with 2 ranks: the same JSON report (timing aside), predictions
     and outputs .npy byte-identical to one process; analyze and fallback with 2 ranks: the same
     report and search as one process, fallback's files byte-identical (rank 0 writes); qat with
     2 ranks (gradients averaged) trains to one process's parameters within float rounding;
     calibrate --method max (the max-only fast path: range-only statistics between ranks) with 2
     ranks writes one process's artifacts; diagnose with 2 ranks (uneven: 2 and 3 chunks, and
     reference data on 2 and 3 batches) prints one process's JSON report (timing aside) and writes
     the same report.txt, report.json and pictures.
  3. Faults, with ranks started directly from RANK/WORLD_SIZE/MASTER_* (as srun or a PyTorchJob
     start them; torchrun's agent would kill the survivors itself and hide their behaviour):
     a rank that fails on its shard (a bad sample file) makes every rank exit non-zero naming
     that rank and its cause; a killed rank makes the survivor exit non-zero within a bounded
     time naming it; a rank that never starts ends the rendezvous after --dist-timeout; no
     artifact is written in any of them. And under torchrun the failing shard also exits non-zero.
     analyze and diagnose with the bad shard stop both ranks too (diagnose writes nothing).
  4. --distributed without a launch environment is exit 2 with one line; a subcommand that does
     not share work (lint here) refuses a launch with exit 3.
Run by pytest under ctest; quantkit and the repository come from tests/e2e/qktest.py, torchrun
from $QUANTKIT_TORCHRUN (default: the repository's .venv-torch).
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import numpy as np

from qktest import QK, ROOT, run_process  # noqa: E402  (tests/e2e/qktest.py)

TORCHRUN = os.environ.get("QUANTKIT_TORCHRUN") or os.path.join(ROOT, ".venv-torch", "bin", "torchrun")
MODEL = os.path.join(ROOT, "models", "zoo", "resnet_small.onnx")
ARTIFACTS = ["model.qdq.onnx", "calib.cache", "ranges.txt", "plan.json"]
# A failing or missing rank must end every rank within this time (timeout + start-up on a loaded
# 2-core CI machine).
DIST_TIMEOUT_S = 20
FAULT_BOUND_S = 90


# torchrun >= 2.x shares its agent's TCPStore with the workers; quantkit built on Debian's
# libtorch 1.13 cannot speak its protocol, so the agent is told to let rank 0 host the store.
TORCHRUN_ENV = dict(os.environ, TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1")


def torchrun(nproc, args, expect=0, env=TORCHRUN_ENV):
    cmd = [TORCHRUN, "--standalone", f"--nproc_per_node={nproc}", "--no_python", QK] + args
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert p.returncode == expect, f"{cmd}: exit {p.returncode}, expected {expect}\n{p.stdout}\n{p.stderr}"
    return p


def read(path):
    with open(path, "rb") as f:
        return f.read()


def assert_same_files(a, b, names):
    for n in names:
        assert read(os.path.join(a, n)) == read(os.path.join(b, n)), f"{n} differs: {a} vs {b}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def connected_to(pid, port):
    """Whether process `pid` holds an established TCP connection to 127.0.0.1:`port`."""
    inodes = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # the process has ended
        return False
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "01" and int(cols[2].split(":")[1], 16) == port and cols[9] in inodes:
                    return True
    return False


def spawn_ranks(world, args, ranks=None):
    """Starts ranks as srun/PyTorchJob would: environment only, no agent."""
    port = free_port()
    procs = {}
    for r in ranks if ranks is not None else range(world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r),
                   LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs[r] = subprocess.Popen([QK] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, env=env)
    return procs, port


def finish(procs):
    out = {}
    for r, p in procs.items():
        stdout, stderr = p.communicate(timeout=FAULT_BOUND_S)
        out[r] = (p.returncode, stdout, stderr)
    return out


def check_calibrate_equality(d):
    base = ["calibrate", MODEL, "--data", "fashion-mnist:calib", "--samples", "384", "--batch-size", "64",
            "--method", "entropy", "-q"]
    one = os.path.join(d, "one")
    run_process(base + ["-o", one, "--stats", one + ".qkstats"])
    for nproc in (2, 3):
        many = os.path.join(d, f"n{nproc}")
        p = torchrun(nproc, base + ["-o", many, "--stats", many + ".qkstats"])
        assert_same_files(one, many, ARTIFACTS)
        assert read(one + ".qkstats") == read(many + ".qkstats")
        # summary.txt differs from one process only in its timings (the rate line, the check's and
        # the repair ladder's seconds)
        # and in the output folder the check's warning names.
        def strip(t):
            t = re.sub(r"\([0-9.]+ s; calibration [0-9.]+ s\)", "(TIME)", t)
            # The repair ladder's times (and its cap, a multiple of the time to its first verdict).
            t = re.sub(r"\([0-9.]+ s of a [0-9.]+ s cap\)", "(TIME)", t)
            t = re.sub(r"\([0-9.]+ s\)", "(TIME)", t)
            t = re.sub(r"--plan \S+", "--plan PLAN", t)
            return [l for l in t.splitlines() if " samples/s" not in l]
        assert strip(read(os.path.join(one, "summary.txt")).decode()) == \
            strip(read(os.path.join(many, "summary.txt")).decode())
        assert sorted(os.listdir(many)) == sorted(ARTIFACTS + ["summary.txt"]), os.listdir(many)
        for r in range(nproc):
            assert f"rank {r}/{nproc}: samples" in p.stderr, p.stderr
        assert p.stdout.count("wrote ") == 6, p.stdout  # rank 0 only
    print("calibrate: 2 and 3 ranks byte-identical to one process (the repair ladder on rank 0)")
    # The checks below start from the entropy plan as asked (the ladder repaired the one above,
    # leaving QAT little to move).
    asked = os.path.join(d, "asked")
    run_process(base + ["-o", asked, "--repair", "off"])
    return os.path.join(asked, "plan.json")


def check_eval_equality(d, plan):
    base = ["eval", MODEL, "--plan", plan, "--data", "fashion-mnist:test", "--samples", "320",
            "--batch-size", "64", "--metric", "rel_mse", "--metric", "agreement", "--json", "-q"]
    reports = {}
    for nproc in (1, 2):
        pred, outs = os.path.join(d, f"pred{nproc}.npy"), os.path.join(d, f"out{nproc}.npy")
        args = base + ["--save-predictions", pred, "--save-outputs", outs]
        p = run_process(args) if nproc == 1 else torchrun(nproc, args)
        report = json.loads(p.stdout)
        for timing in [k for k in report if k.endswith("seconds")]:  # seconds, model_seconds, ...
            report.pop(timing)
        reports[nproc] = report
    assert reports[1] == reports[2], reports
    assert reports[1]["samples"] == 320 and "rel_mse" in reports[1]["metrics"]
    assert read(os.path.join(d, "pred1.npy")) == read(os.path.join(d, "pred2.npy"))
    assert read(os.path.join(d, "out1.npy")) == read(os.path.join(d, "out2.npy"))
    assert np.load(os.path.join(d, "out2.npy")).shape == (320, 10)
    print("eval: 2 ranks give the same report, predictions and outputs as one process")


# Fields that differ between one process and a launch by design: wall times (run to run), and the
# trial cache's size, which is rank 0's own shard's under a launch.
TIMING_KEYS = {"seconds", "fp32_seconds", "search_seconds", "trial_seconds", "fp32_pass_seconds",
               "simulated_pass_seconds", "model_seconds", "reference_seconds"}
PER_RANK_KEYS = {"trial_cache"}


def without_timing(j):
    """A report without the fields that differ by design (TIMING_KEYS, PER_RANK_KEYS)."""
    if isinstance(j, dict):
        return {k: without_timing(v) for k, v in j.items() if k not in TIMING_KEYS | PER_RANK_KEYS}
    if isinstance(j, list):
        return [without_timing(v) for v in j]
    return j


def check_plan_eval_equality(d, plan):
    """analyze and fallback: 2 ranks (uneven shards: 1 and 2 batches) decide and report as one process."""
    data = ["--data", "fashion-mnist:test", "--samples", "96", "--batch-size", "32", "-q"]
    base = ["analyze", MODEL, "--plan", plan, "--json"] + data
    one = json.loads(run_process(base).stdout)
    p = torchrun(2, base)
    assert without_timing(json.loads(p.stdout)) == without_timing(one), "analyze differs from one process"
    assert one["samples"] == 96 and len(one["tensors"]) > 3 and one["trials"] == 1 + 2 * len(one["tensors"])
    for r in range(2):
        assert f"rank {r}/2: samples" in p.stderr and "passes" in p.stderr, p.stderr
    # fallback: every trial's loss is the same bits on every rank, so the search takes the same
    # steps; rank 0 alone writes. Budget 0 is out of reach: the search runs every phase (exit 1).
    outs = {}
    for nproc in (1, 2):
        out = os.path.join(d, f"fallback{nproc}")
        args = ["fallback", MODEL, "--plan", plan, "--metric", "rel_mse", "--budget", "0", "--max-float", "2",
                "-o", out] + data
        p = run_process(args, expect=1) if nproc == 1 else torchrun(nproc, args, expect=1)
        outs[nproc] = out
    assert_same_files(outs[1], outs[2], ["plan.json", "model.qdq.onnx", "layer_precisions.txt"])
    reports = [json.loads(read(os.path.join(outs[n], "fallback.json"))) for n in (1, 2)]
    assert without_timing(reports[0]) == without_timing(reports[1]), "fallback search differs"
    assert reports[0]["trials"] > len(reports[0]["ranking"]) and reports[0]["float_nodes"]
    assert sorted(os.listdir(outs[2])) == ["fallback.json", "layer_precisions.txt", "model.qdq.onnx", "plan.json"]
    print("analyze, fallback: 2 ranks give the same report, search and files as one process")


# qat, 2 ranks vs 1 process on the same global batches: the runs may differ only by the order of
# float sums (one process sums the gradient over 32 samples in one kernel, two ranks over 16 each,
# then average), about 1e-7 of the gradient. After 4 SGD steps the parameters must stay apart by
# less than this share of how far training moved them (measured: 1.1e-5 and 1.6e-5 with two
# plans; a missing or wrong all-reduce, i.e. training on half the batch, is off by a share of
# order 1). The losses are a weaker check: fake quantization is discontinuous, so parameters 3e-8
# apart can put one value on the other side of a rounding boundary and move a step's loss by far
# more than the parameters differ (measured: 3e-8 with one plan; 2.3e-3 at step 4 with the plan
# of run batch 8, parameters 3e-8 apart). QAT_LOSS_RTOL allows a few such code flips.
QAT_DISAGREEMENT_MAX = 1e-4
QAT_LOSS_RTOL = 1e-2


def initializers(path):
    import onnx
    from onnx import numpy_helper
    return {i.name: numpy_helper.to_array(i).astype(np.float64) for i in onnx.load(path).graph.initializer}


def check_qat(d, plan):
    """qat: data-parallel gradients averaged over 2 ranks train as one process does."""
    outs = {}
    for nproc in (1, 2):
        out = os.path.join(d, f"qat{nproc}")
        args = ["qat", MODEL, "--plan", plan, "--data", "fashion-mnist:train", "--samples", "256",
                "--batch-size", "32", "--steps", "4", "--optimizer", "sgd", "--lr", "0.001", "--seed", "3",
                "--val", "fashion-mnist:val", "--val-samples", "96", "--eval-every", "2", "-q", "-o", out]
        p = run_process(args) if nproc == 1 else torchrun(nproc, args)
        outs[nproc] = out
    assert "rank 1/2: samples 16-31 (16), 4 passes" in p.stderr, p.stderr
    logs = [json.loads(read(os.path.join(outs[n], "training_log.json"))) for n in (1, 2)]
    losses = [[h["loss"] for h in log["history"]] for log in logs]
    assert len(losses[0]) == 4 and abs(losses[0][-1] - losses[0][0]) > 1e-3 * losses[0][0], losses  # it trained
    for a, b in zip(*losses):
        assert abs(a - b) <= QAT_LOSS_RTOL * abs(a), losses
    # Validation is sharded on whole batches and its counts summed: step 0 (same parameters
    # everywhere) is exactly one process's value.
    evals = [log["evals"] for log in logs]
    assert [e["step"] for e in evals[0]] == [e["step"] for e in evals[1]] == [0, 2, 4], evals
    assert evals[0][0] == evals[1][0], evals
    # The written model holds the kept (best) parameters: the same step in both runs.
    assert logs[0]["best_step"] == logs[1]["best_step"], (logs[0]["best_step"], logs[1]["best_step"])
    start = initializers(MODEL)
    one, two = (initializers(os.path.join(outs[n], "model.float.onnx")) for n in (1, 2))
    moved = max(np.abs(one[k] - start[k]).max() for k in one if k in start)
    apart = max(np.abs(one[k] - two[k]).max() for k in one)
    assert apart <= QAT_DISAGREEMENT_MAX * moved, (moved, apart)  # both 0 when step 0 was the best
    assert sorted(os.listdir(outs[1])) == sorted(os.listdir(outs[2]))
    print(f"qat: 2 ranks train as one process (losses {losses[0]}, parameters apart {apart:.2e}, "
          f"moved {moved:.2e})")


def check_max_fast_path(d):
    """calibrate --method max under a launch: range-only statistics travel, artifacts as one process."""
    base = ["calibrate", MODEL, "--data", "fashion-mnist:calib", "--samples", "320", "--batch-size", "64",
            "--method", "max", "-q"]
    one, two = os.path.join(d, "max1"), os.path.join(d, "max2")
    run_process(base + ["-o", one])
    p = torchrun(2, base + ["-o", two])
    assert_same_files(one, two, ARTIFACTS)
    assert "rank 1/2: samples 128-319 (192)" in p.stderr, p.stderr  # 5 batches: rank 0 gets 2, rank 1 3
    print("calibrate --method max: 2 ranks (range-only exchange) byte-identical to one process")


def check_diagnose_equality(d):
    """diagnose: 2 ranks (uneven: 2 and 3 chunks; reference on 2 and 3 batches) report as one process."""
    base = ["diagnose", MODEL, "--data", "fashion-mnist:calib", "--samples", "75", "--chunks", "5",
            "--batch-size", "8", "--reference-data", "fashion-mnist:val", "--reference-samples", "40",
            "--bootstrap", "16", "--subsets", "8", "--batch-check-samples", "8", "-q"]
    outs, reports = {}, {}
    # The batch-dependence check runs on rank 0 alone, and OpenBLAS (the Gemm) sums in another order
    # with one thread than with two (resnet_small: max output diff 3.9e-7 vs 2.6e-7): the one
    # process runs with OMP_NUM_THREADS=1, as torchrun starts every rank.
    one_env = dict(os.environ, OMP_NUM_THREADS="1")
    for nproc in (1, 2):
        out = os.path.join(d, f"diagnose{nproc}")
        args = base + ["--json", "-o", out]
        p = run_process(args, env=one_env) if nproc == 1 else torchrun(nproc, args)
        reports[nproc], outs[nproc] = json.loads(p.stdout), out
    assert without_timing(reports[1]) == without_timing(reports[2]), "diagnose differs from one process"
    assert reports[1]["samples"] == 75 and reports[1]["chunk_size"] == 15, reports[1]
    # rank 0: chunks 0-1 (samples 0-29), rank 1: chunks 2-4 (30-74); only rank 0 printed JSON.
    assert "rank 0/2: samples 0-29 (30)" in p.stderr and "rank 1/2: samples 30-74 (45)" in p.stderr, p.stderr
    files = sorted(os.listdir(outs[1]))
    assert files == sorted(os.listdir(outs[2])) and "report.json" in files and len(files) > 3, files
    strip = lambda t: [l for l in t.splitlines() if "seconds" not in l and " s)" not in l]  # noqa: E731
    for name in files:
        a, b = read(os.path.join(outs[1], name)), read(os.path.join(outs[2], name))
        if name == "report.json":
            assert without_timing(json.loads(a)) == without_timing(json.loads(b))
        elif name == "report.txt":
            assert strip(a.decode()) == strip(b.decode()), name
        else:
            assert a == b, f"{name} differs"
    print("diagnose: 2 ranks give one process's report and pictures")


def bad_sample_dir(d):
    """16 samples, one per .npy file; the last has the wrong shape (read by the last rank only)."""
    data = os.path.join(d, "bad_shard")
    os.makedirs(data)
    rng = np.random.default_rng(0)
    for i in range(16):
        shape = (1, 28, 27) if i == 15 else (1, 28, 28)
        np.save(os.path.join(data, f"s{i:02d}.npy"), rng.random(shape, dtype=np.float32))
    return data


def check_faults(d, plan):
    data = bad_sample_dir(d)
    out = os.path.join(d, "fault_out")
    # --repair off: all 16 samples are calibrated on, so s15 is in the last rank's shard (the default
    # would hold the last 4 out of the calibration, for rank 0 to judge the plan on).
    args = ["calibrate", MODEL, "--data", data, "--batch-size", "4", "-o", out, "-q", "--repair", "off",
            "--dist-timeout", str(DIST_TIMEOUT_S)]
    # a. The last rank's shard holds the bad file: every rank exits 2, naming rank 1 and the file.
    start = time.monotonic()
    res = finish(spawn_ranks(2, args)[0])
    assert time.monotonic() - start < FAULT_BOUND_S
    for r, (code, _, err) in res.items():
        assert code == 2, (r, code, err)
        assert "s15.npy" in err, (r, err)
    assert "rank 1 of 2 failed" in res[0][2], res[0][2]
    assert not os.path.exists(out), "no artifacts after a failure"
    p = torchrun(2, args, expect=1)  # torchrun reports a failed worker with exit 1
    assert "s15.npy" in p.stderr, p.stderr
    assert not os.path.exists(out)
    # analyze: the same bad shard stops both ranks while the FP32 outputs are cached.
    res = finish(spawn_ranks(2, ["analyze", MODEL, "--plan", plan, "--data", data, "--batch-size", "4", "-q",
                                 "--dist-timeout", str(DIST_TIMEOUT_S)])[0])
    for r, (code, out_text, err) in res.items():
        assert code == 2 and "s15.npy" in err and not out_text, (r, code, err)
    assert "rank 1 of 2 failed" in res[0][2], res[0][2]
    # diagnose: the same bad shard (rank 1's chunks) stops both ranks; rank 0 wrote nothing.
    res = finish(spawn_ranks(2, ["diagnose", MODEL, "--data", data, "--batch-size", "4", "-q", "-o", out,
                                 "--dist-timeout", str(DIST_TIMEOUT_S)])[0])
    for r, (code, out_text, err) in res.items():
        assert code == 2 and "s15.npy" in err and not out_text, (r, code, err)
    assert "rank 1 of 2 failed" in res[0][2], res[0][2]
    assert not os.path.exists(os.path.join(out, "report.json"))
    shutil.rmtree(out, ignore_errors=True)
    # b. A killed rank: the survivor stops within the bound and names it.
    # Long enough to be killed mid-work: runs of 8 calibrate 1024 samples in ~0.3 s, so one sample
    # per run over 16384 samples (about 4 s per rank at one thread).
    slow = ["calibrate", MODEL, "--data", "fashion-mnist:train", "--samples", "16384", "--batch-size", "64",
            "--run-batch", "1", "-o", out, "-q", "--dist-timeout", str(DIST_TIMEOUT_S)]
    procs, port = spawn_ranks(2, slow)
    deadline = time.monotonic() + FAULT_BOUND_S
    while not connected_to(procs[1].pid, port):  # rank 1 has joined: kill it mid-work
        assert procs[1].poll() is None and time.monotonic() < deadline, "rank 1 never joined"
        time.sleep(0.1)
    time.sleep(0.5)
    assert procs[1].poll() is None, "rank 1 ended before it could be killed"
    procs[1].send_signal(signal.SIGKILL)
    start = time.monotonic()
    res = finish(procs)
    assert time.monotonic() - start < FAULT_BOUND_S
    assert res[1][0] == -signal.SIGKILL
    assert res[0][0] != 0 and "rank 1 never reached" in res[0][2], res[0]
    assert not os.path.exists(out)
    # c. Rank 1 never starts: the rendezvous ends after --dist-timeout naming it.
    start = time.monotonic()
    res = finish(spawn_ranks(2, args[:-1] + ["3"], ranks=[0])[0])
    assert time.monotonic() - start < FAULT_BOUND_S
    assert res[0][0] == 4 and "rank 1 never joined" in res[0][2], res[0]
    assert not os.path.exists(out)
    # d. Without the opt-out, torchrun's agent store is refused up front, with the remedy.
    linked = subprocess.run(["ldd", QK], capture_output=True, text=True).stdout
    if "libtorch_cpu.so.1." in linked:
        env = {k: v for k, v in os.environ.items() if k != "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"}
        p = torchrun(2, args, expect=1, env=env)
        assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun" in p.stderr, p.stderr
        assert not os.path.exists(out)
    # qat under a launch needs --plan (calibrating first would open a second group): every rank
    # says so, exit 2, and nothing is written.
    res = finish(spawn_ranks(2, ["qat", MODEL, "--data", data, "--batch-size", "4", "--steps", "1", "-o", out,
                                 "-q", "--dist-timeout", str(DIST_TIMEOUT_S)])[0])
    for r, (code, _, err) in res.items():
        assert code == 2 and "needs --plan" in err, (r, code, err)
    assert not os.path.exists(out)
    # qat: a rank whose slice of a step holds the bad sample stops every rank at that step, naming
    # it (the others wait in the step's gradient exchange and get its error, not a timeout).
    res = finish(spawn_ranks(2, ["qat", MODEL, "--plan", plan, "--data", data, "--batch-size", "4", "--steps", "4",
                                 "-o", out, "-q", "--dist-timeout", str(DIST_TIMEOUT_S)])[0])
    for r, (code, _, err) in res.items():
        assert code == 2 and "s15.npy" in err and "rank 1 of 2" in err, (r, code, err)
    assert not os.path.exists(os.path.join(out, "model.qdq.onnx"))
    shutil.rmtree(out, ignore_errors=True)  # qat makes its -o directory up front (one process too)
    # e. Subcommands that do not share work refuse a launch instead of running N copies.
    res = finish(spawn_ranks(2, ["lint", MODEL])[0])
    for r, (code, _, err) in res.items():
        assert code == 3 and f"this is rank {r} of 2" in err, (r, code, err)
    # 4. --distributed outside a launch: one line, exit 2.
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    p = run_process(["calibrate", MODEL, "--data", data, "-o", out, "--distributed"], expect=2, env=env)
    assert "not launched by torchrun" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    print("faults: failing, killed and missing ranks end every rank with the rank named")


def main():
    assert os.path.exists(TORCHRUN), f"{TORCHRUN} missing: run scripts/setup_torch.sh (make test does)"
    with tempfile.TemporaryDirectory() as d:
        plan = check_calibrate_equality(d)
        check_eval_equality(d, plan)
        check_plan_eval_equality(d, plan)
        check_qat(d, plan)
        check_max_fast_path(d)
        check_diagnose_equality(d)
        check_faults(d, plan)


def test_distributed():
    main()


if __name__ == "__main__":
    main()
