"""scikit-build-core dynamic metadata (pyproject.toml): the wheel's dependencies.

The extension links the libtorch of the build interpreter's torch when that is a PyPI torch
(cmake/QuantkitPython.cmake), and runs only beside a torch of the same release line
(python/quantkit/_torchcheck.py). So the wheel requires ``torch==X.Y.*`` of that torch, found
the way the build finds it and without importing it; a build against Debian's libtorch-dev (no
pip-installed torch with a CMake package) requires numpy only.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any, Mapping, Optional


def pypi_torch_line() -> Optional[str]:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return None
    torch_dir = os.path.dirname(spec.origin)
    if not os.path.isdir(os.path.join(torch_dir, "share", "cmake", "Torch")):
        return None  # Debian's python3-torch: quantkit links libtorch-dev's libtorch
    version = {}
    with open(os.path.join(torch_dir, "version.py"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("__version__"):
                version["v"] = line.split("=", 1)[1].strip().strip("'\"")
    release = version.get("v", "").split("+")[0].split(".")
    return ".".join(release[:2]) if len(release) >= 2 else None


def dynamic_metadata(settings: Mapping[str, Any], project: Mapping[str, Any]) -> dict[str, list[str]]:
    """The [[tool.dynamic-metadata]] hook (scikit-build-core 1.0+): the [project] fragment."""
    line = pypi_torch_line()
    return {"dependencies": ["numpy"] + ([f"torch=={line}.*"] if line else [])}
