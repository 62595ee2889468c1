"""Ctrl-C during a long call: a child process runs a call that takes minutes, gets SIGINT while
the C++ side is running (the GIL released), and must stop promptly with KeyboardInterrupt raised
from that very call, leaving no output behind (python/src/interrupt.h, quantkit/cancel.h)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

RUNNING_S = 4.0         # SIGINT this long after the call started: well inside its model runs
PROMPT_S = 20.0         # the longest a stop may take on a loaded machine (one model run, cleanup)
# fashion-mnist:train (52,952 samples) through resnet_small on one thread: minutes uninterrupted.
CALLS = {
    "calibrate": "quantkit.calibrate(MODEL, 'fashion-mnist:train', 'max', OUT, progress=False)",
    "statistics": "quantkit.Statistics.collect(MODEL, 'fashion-mnist:train', progress=False).save(OUT)",
    "evaluate": "quantkit.evaluate(MODEL, 'fashion-mnist:train', progress=False)",
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_sigint_stops_a_long_call_and_writes_nothing(call, tmp_path):
    model = os.path.join(os.environ.get("QK_SOURCE_DIR", "."), "models", "zoo", "resnet_small.onnx")
    out = tmp_path / "out"
    code = (f"import sys, quantkit\nMODEL, OUT = {model!r}, {str(out)!r}\n"
            f"print('calling', flush=True)\n{CALLS[call]}\nprint('finished', flush=True)\n")
    env = dict(os.environ, QUANTKIT_THREADS="1")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
    assert child.stdout.readline().strip() == "calling"
    time.sleep(RUNNING_S)
    assert child.poll() is None, "the call ended before it could be interrupted"
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    try:
        stdout, stderr = child.communicate(timeout=PROMPT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        pytest.fail(f"{call}: still running {PROMPT_S} s after SIGINT")
    stopped = time.monotonic() - sent
    assert "finished" not in stdout
    assert child.returncode != 0 and stderr.rstrip().endswith("KeyboardInterrupt"), stderr[-2000:]
    # Raised by the C++ call itself (the innermost frame is the binding's call), not by Python
    # code before or after it.
    lines = stderr.splitlines()
    last = max(i for i, line in enumerate(lines) if line.lstrip().startswith("File "))
    assert "quantkit" in lines[last] and ("_core." in lines[last + 1] or "collector." in lines[last + 1]), stderr
    assert not out.exists() and os.listdir(tmp_path) == [], f"{call} left {os.listdir(tmp_path)}"
    print(f"{call}: stopped {stopped:.2f} s after SIGINT")
