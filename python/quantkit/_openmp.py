"""How OpenMP threads wait: passive unless the user says otherwise.

ATen runs its intra-op parallel loops on OpenMP (libgomp). By default a libgomp thread that has
finished its share spins for a while before sleeping, so that the next parallel region starts
faster. On an idle machine that saves a little; on a shared or oversubscribed one the spinning
threads take the CPUs the other threads need, and a call made of many small parallel regions
crawls: ``quantkit.ort.quantize_static`` on resnet_small took 28-29 s against 0.48 s with
``OMP_WAIT_POLICY=passive`` on a loaded 2-core machine (docs/python.md, "Threads").

libgomp reads ``OMP_WAIT_POLICY`` once, when it is loaded. ``import quantkit`` runs before the
extension (and torch) load it, so when no OpenMP runtime is loaded yet and the user has not set
the variable, quantkit sets it to PASSIVE. A process that imported torch first already has its
OpenMP runtime: quantkit cannot change it then, and ``wait_policy()`` says so.
"""

from __future__ import annotations

import os

_OPENMP_RUNTIMES = ("libgomp", "libiomp", "libomp")
_state = "not configured"


def _openmp_loaded() -> bool:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            text = maps.read()
    except OSError:
        return False
    for line in text.splitlines():
        name = os.path.basename(line.split(maxsplit=5)[-1]) if line.count(" ") >= 5 else ""
        if name.startswith(_OPENMP_RUNTIMES):
            return True
    return False


def configure() -> None:
    """Sets OMP_WAIT_POLICY=PASSIVE when it is unset and no OpenMP runtime is loaded yet."""
    global _state
    if os.environ.get("OMP_WAIT_POLICY"):
        _state = f"{os.environ['OMP_WAIT_POLICY'].lower()} (OMP_WAIT_POLICY set by the user)"
    elif _openmp_loaded():
        _state = ("libgomp's default, spin then sleep (an OpenMP runtime was loaded before quantkit, e.g. by "
                  "torch: set OMP_WAIT_POLICY=passive in the environment, or import quantkit first)")
    else:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        _state = "passive (set by quantkit: OMP_WAIT_POLICY was unset)"


def wait_policy() -> str:
    """How this process's OpenMP threads wait, and who decided it."""
    return _state
