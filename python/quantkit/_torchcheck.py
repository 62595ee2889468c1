"""Which torch quantkit runs beside, and loading its libraries.

quantkit's extension links one libtorch. Two libtorch builds in one process crash or silently
corrupt results (two operator registries, allocators, thread pools), and a libtorch of another
release breaks the C++ ABI the extension was compiled against. So:

* A wheel built against PyPI torch (``_build_info.TORCH_SOURCE == "pypi"``) finds the ``torch``
  package of this environment without importing it, compares its identity with the one it was
  built against (the release line X.Y, CUDA or not; then, once loaded, the C++11 ABI), and then
  imports it, which loads its libraries as torch itself does (CUDA libraries from the nvidia
  wheels, its bundled OpenMP): the extension's libtorch dependencies then resolve to that torch
  wherever it is installed, in any import order, without the user importing torch.
* A build against a libtorch outside any torch package (Debian's libtorch-dev) needs nothing
  loaded first; its identity is the library's path, the only libtorch of that system.

A mismatch raises ImportError saying what was found, what is needed and how to fix it
(docs/python.md, "Which libtorch"). ``check()`` runs at every workflow call: a libtorch other than
the one quantkit loaded must not appear later either.

Run as a script (``python _torchcheck.py``) it prints the identity of the importable torch, one
field per line, without importing it: how the build records what it was built against.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import sys
from typing import NamedTuple, Optional


class TorchIdentity(NamedTuple):
    version: str           # torch.__version__, "2.15.0+cu132"
    git_version: str       # the commit torch was built from
    cuda: Optional[str]    # torch.version.cuda, None for a CPU build
    directory: str         # the torch package's folder

    @property
    def line(self) -> str:
        return release_line(self.version)


def release_line(version: str) -> str:
    """The release line "X.Y" of a torch version (wheels are built per line: torch==X.Y.*)."""
    return ".".join(version.split("+")[0].split(".")[:2])


def read_identity(torch_dir: str) -> TorchIdentity:
    """The identity of the torch package in ``torch_dir`` from its version.py, without importing it
    (importing a mismatched torch could itself fail or load a second libtorch)."""
    fields: dict[str, object] = {}
    with open(os.path.join(torch_dir, "version.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and value is not None:
            try:
                fields[target.id] = ast.literal_eval(value)
            except ValueError:
                continue
    return TorchIdentity(str(fields.get("__version__", "unknown")), str(fields.get("git_version", "")),
                         fields.get("cuda") or None, torch_dir)  # type: ignore[arg-type]


def find_torch() -> Optional[TorchIdentity]:
    """The torch this environment would import (already imported, or found on sys.path)."""
    module = sys.modules.get("torch")
    if module is not None and getattr(module, "__file__", None):
        version = getattr(module, "version", None)
        return TorchIdentity(str(module.__version__), str(getattr(version, "git_version", "")),
                             getattr(version, "cuda", None) or None, os.path.dirname(module.__file__))
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin or not os.path.isfile(os.path.join(os.path.dirname(spec.origin), "version.py")):
        return None
    return read_identity(os.path.dirname(spec.origin))


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


def _mismatch(found: str, how: str) -> ImportError:
    from . import _build_info
    line = release_line(_build_info.TORCH_VERSION)
    return ImportError(
        f"quantkit was built against torch {_build_info.TORCH_VERSION} (release line {line}, C++11 ABI "
        f"{_build_info.TORCH_CXX11_ABI}) but {found}. {how} (docs/python.md, 'Which libtorch')")


def _require_compatible(torch: TorchIdentity) -> None:
    from . import _build_info
    line = release_line(_build_info.TORCH_VERSION)
    fix = (f"Install the torch it needs (pip install 'torch=={line}.*') or a quantkit wheel built for "
           f"torch {torch.line}")
    if torch.line != line:
        raise _mismatch(f"this environment's torch is {torch.version} ({torch.directory})", fix)
    if _build_info.TORCH_CUDA and not torch.cuda:
        raise _mismatch(f"this environment's torch {torch.version} ({torch.directory}) is a CPU-only build "
                        "without the CUDA libraries quantkit links", fix + " (or a CPU build of quantkit)")


_ours: set[str] = set()


def load_torch() -> None:
    """Before the extension loads: makes its libtorch resolve to the right, compatible torch."""
    from . import _build_info
    if _build_info.TORCH_SOURCE != "pypi":
        check_system()
        return
    torch = find_torch()
    if torch is None:
        line = release_line(_build_info.TORCH_VERSION)
        raise ImportError(f"quantkit needs PyPI torch {line}.* (it was built against torch "
                          f"{_build_info.TORCH_VERSION}) and this environment has no torch: "
                          f"pip install 'torch=={line}.*' (docs/python.md, 'Which libtorch')")
    _require_compatible(torch)
    import torch as torch_module  # loads libtorch (and its CUDA and OpenMP libraries) as torch does
    abi = int(bool(torch_module._C._GLIBCXX_USE_CXX11_ABI))
    if abi != _build_info.TORCH_CXX11_ABI:
        raise _mismatch(f"this environment's torch {torch_module.__version__} uses C++11 ABI {abi}",
                        "Install a torch of the same ABI (PyPI's) or rebuild quantkit against this one")


def check_system() -> None:
    """A system-libtorch build: no other libtorch may be loaded (before or after the extension)."""
    from . import _build_info
    ours = {os.path.realpath(_build_info.LIBTORCH_CPU)}
    others = sorted(loaded_libtorch() - ours)
    if others:
        raise ImportError(
            f"quantkit was built against {sorted(ours)[0]} but this process has also loaded {others[0]} "
            "(another torch): two libtorch builds in one process crash. Build quantkit against "
            "the torch you import (pip install . in this environment, with that torch installed: "
            "it is found through torch.utils.cmake_prefix_path), or use the torch quantkit was "
            "built with (docs/python.md, 'Which libtorch')")


def after_load() -> None:
    """Once the extension is loaded: remembers the one libtorch mapped (the identity every later
    check compares with)."""
    mapped = loaded_libtorch()
    if len(mapped) > 1:
        raise ImportError(f"this process holds {len(mapped)} libtorch builds ({', '.join(sorted(mapped))}): "
                          "two libtorch builds in one process crash (docs/python.md, 'Which libtorch')")
    _ours.clear()
    _ours.update(mapped)


def check() -> None:
    """Raises ImportError when a libtorch other than the one quantkit loaded is mapped."""
    others = sorted(loaded_libtorch() - _ours) if _ours else []
    if others:
        raise ImportError(
            f"quantkit runs on {sorted(_ours)[0]} but this process has since loaded {others[0]} "
            "(another torch): two libtorch builds in one process crash (docs/python.md, 'Which libtorch')")


if __name__ == "__main__":
    found = find_torch()
    if found is None:
        sys.exit("no torch importable")
    print(found.version)
    print(found.git_version)
    print(found.cuda or "")
