"""`import quantkit` in any order with torch, without torch, and the checks on which torch it
runs beside (quantkit/_torchcheck.py), and the OpenMP waiting it configures (quantkit/_openmp.py).
Each import runs in a fresh interpreter: what is loaded first is the point."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from quantkit import _build_info, _torchcheck

IMPORT_TIMEOUT_S = 300  # a cold libtorch load on a loaded 2-core machine


def python(code: str, **env: str) -> subprocess.CompletedProcess:
    full = dict(os.environ)
    full.pop("OMP_WAIT_POLICY", None)
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full,
                          timeout=IMPORT_TIMEOUT_S)


# A calibration in the child proves the extension and its libtorch work, not only the import.
CALIBRATE = ("import numpy as np\n"
             "plan = quantkit.calibrate(MODEL, np.zeros((4, 1, 28, 28), np.float32) + 0.5, progress=False)\n"
             "assert plan.num_quantized > 0\n"
             "print('libtorch', len(quantkit._torchcheck.loaded_libtorch()), 'torch' in sys.modules)\n")


@pytest.mark.parametrize("imports", ["import quantkit", "import quantkit, torch", "import torch, quantkit"])
def test_import_orders(model, imports):
    if "torch" in imports:
        pytest.importorskip("torch")
    r = python(f"import sys\n{imports}\nMODEL = {model!r}\n{CALIBRATE}")
    assert r.returncode == 0, r.stderr[-3000:]
    _, libtorch, torch_imported = r.stdout.split()[-3:]
    assert libtorch == "1"  # one libtorch in the process, whoever loaded it first
    if imports == "import quantkit":
        # A PyPI-torch build imports torch itself (its libraries' loader); a system one needs none.
        assert torch_imported == str(_build_info.TORCH_SOURCE == "pypi")


def test_openmp_waits_passively_unless_told():
    show = "import os, quantkit; print(os.environ.get('OMP_WAIT_POLICY')); print(quantkit.openmp_wait_policy())"
    r = python(show)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines()[0] == "PASSIVE" and "set by quantkit" in r.stdout
    r = python(show, OMP_WAIT_POLICY="active")
    assert r.stdout.splitlines()[0] == "active" and "set by the user" in r.stdout


def test_openmp_already_loaded_is_left_alone_and_said():
    pytest.importorskip("torch")
    r = python("import os, torch, quantkit; print(os.environ.get('OMP_WAIT_POLICY')); "
               "print(quantkit.openmp_wait_policy())")
    assert r.returncode == 0, r.stderr[-2000:]
    # torch's libtorch brought libgomp, which read the environment already: quantkit says so.
    assert r.stdout.splitlines()[0] == "None" and "OMP_WAIT_POLICY=passive" in r.stdout


def fake_torch(tmp_path, version: str, cuda: str | None = "13.2"):
    d = tmp_path / "torch"
    d.mkdir(parents=True)
    (d / "version.py").write_text(f"from typing import Optional\n__version__ = '{version}'\ndebug = False\n"
                                  f"cuda: Optional[str] = {cuda!r}\ngit_version = 'abc123'\n")
    return str(d)


def test_torch_identity_is_read_without_importing_it(tmp_path):
    t = _torchcheck.read_identity(fake_torch(tmp_path, "2.15.1+cu132"))
    assert (t.version, t.line, t.cuda, t.git_version) == ("2.15.1+cu132", "2.15", "13.2", "abc123")


@pytest.mark.parametrize("version,cuda,says", [
    ("2.11.0+cu128", "12.8", "this environment's torch is 2.11.0+cu128"),
    ("2.15.0+cpu", None, "is a CPU-only build"),
])
def test_another_torch_is_refused_with_the_fix(tmp_path, monkeypatch, version, cuda, says):
    monkeypatch.setattr(_build_info, "TORCH_VERSION", "2.15.0+cu132")
    monkeypatch.setattr(_build_info, "TORCH_CUDA", "13.2")
    torch = _torchcheck.read_identity(fake_torch(tmp_path, version, cuda))
    with pytest.raises(ImportError) as info:
        _torchcheck._require_compatible(torch)
    assert says in str(info.value) and "built against torch 2.15.0+cu132 (release line 2.15" in str(info.value)
    assert "pip install 'torch==2.15.*'" in str(info.value)


def test_same_release_line_is_accepted(tmp_path, monkeypatch):
    monkeypatch.setattr(_build_info, "TORCH_VERSION", "2.15.0+cu132")
    monkeypatch.setattr(_build_info, "TORCH_CUDA", "13.2")
    _torchcheck._require_compatible(_torchcheck.read_identity(fake_torch(tmp_path, "2.15.1+cu130", "13.0")))
    monkeypatch.setattr(_build_info, "TORCH_CUDA", "")  # a CPU build runs beside a CUDA torch too
    _torchcheck._require_compatible(_torchcheck.read_identity(fake_torch(tmp_path / "x", "2.15.0+cpu", None)))


def test_no_torch_at_all_says_what_to_install(tmp_path):
    """A PyPI-torch build in an environment without torch: the message names the line to install."""
    code = ("import sys, importlib.util\n"
            "from quantkit import _build_info, _torchcheck\n"
            "_build_info.TORCH_SOURCE, _build_info.TORCH_VERSION = 'pypi', '2.15.0+cu132'\n"
            "importlib.util.find_spec = lambda name, *a: None\n"
            "try:\n    _torchcheck.load_torch()\nexcept ImportError as e:\n    print(e)\n")
    r = python(code)
    assert "has no torch: pip install 'torch==2.15.*'" in r.stdout, r.stdout + r.stderr[-2000:]
