"""One libtorch per process.

quantkit's extension links one libtorch (``_build_info.LIBTORCH_CPU``). If the process also holds
another build of libtorch (PyPI ``torch`` in a venv while quantkit was built against Debian's
libtorch, or the reverse), both sets of global registries (operators, allocators, thread pools)
are live at once: that crashes or silently corrupts results. So quantkit refuses to load, or to
run, beside a different libtorch, and says how to fix it (docs/python.md, "Which libtorch").
"""

from __future__ import annotations

import os

from . import _build_info


def loaded_libtorch() -> set[str]:
    """Real paths of the libtorch_cpu libraries mapped into this process (Linux; else empty)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return set()
    found = set()
    for line in lines:
        path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        if os.path.basename(path).startswith("libtorch_cpu.so"):
            found.add(os.path.realpath(path))
    return found


def check() -> None:
    """Raises ImportError when a libtorch other than quantkit's own is loaded."""
    ours = os.path.realpath(_build_info.LIBTORCH_CPU)
    others = sorted(p for p in loaded_libtorch() if p != ours)
    if others:
        raise ImportError(
            f"quantkit was built against {ours} but this process has also loaded {others[0]} "
            "(another torch): two libtorch builds in one process crash. Build quantkit against "
            "the torch you import (pip install . in this environment, with that torch installed: "
            "it is found through torch.utils.cmake_prefix_path), or use the torch quantkit was "
            "built with (docs/python.md, 'Which libtorch')")
