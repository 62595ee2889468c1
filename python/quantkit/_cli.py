"""The ``quantkit`` console script of the wheel: runs the packaged CLI binary (quantkit/_bin).

The binary links the same libtorch as the extension. In a wheel built against PyPI torch that
libtorch lives in the environment's torch package, wherever pip put it, so the script checks that
torch's identity as ``import quantkit`` does (without importing torch), puts its lib folder on
LD_LIBRARY_PATH and replaces itself with the binary: exit codes, signals (Ctrl-C), progress bars
and output are the CLI's own.
"""

from __future__ import annotations

import os
import sys


def binary() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "quantkit")


def environment() -> dict[str, str]:
    """The environment the binary needs: LD_LIBRARY_PATH reaching the torch it was built against."""
    from . import _build_info, _torchcheck
    env = dict(os.environ)
    if _build_info.TORCH_SOURCE == "pypi":
        torch = _torchcheck.find_torch()
        if torch is None:
            raise SystemExit(f"quantkit: needs PyPI torch {_torchcheck.release_line(_build_info.TORCH_VERSION)}.* "
                             "and this environment has no torch")
        try:
            _torchcheck._require_compatible(torch)
        except ImportError as e:
            raise SystemExit(f"quantkit: {e}") from None
        paths = [os.path.join(torch.directory, "lib")] + [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]
        env["LD_LIBRARY_PATH"] = ":".join(paths)
    return env


def main() -> None:
    path = binary()
    if not os.access(path, os.X_OK):
        raise SystemExit(f"quantkit: the CLI binary is missing from this installation ({path})")
    os.execve(path, [path] + sys.argv[1:], environment())


if __name__ == "__main__":
    main()
