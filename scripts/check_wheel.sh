#!/usr/bin/env bash
# The wheel as a user gets it (docs/python.md, "Install"): dist/quantkit-*.whl into fresh venvs.
#
#   scripts/check_wheel.sh [WHEELHOUSE]
#
#   venvs a and b   python3 -m venv, then `pip install <wheel>`: pip brings torch==X.Y.* and numpy
#                   (from WHEELHOUSE when given, e.g. a `pip download torch==2.15.0 numpy -d DIR`,
#                   so the 3 GB of torch are fetched once), then docs/python.md's five-line example
#                   exactly as written (extracted from the file), the `quantkit` console script,
#                   and what `import quantkit` loaded;
#   venv c          Debian's python3 with --system-site-packages (Debian's torch 1.13, another
#                   release line), the wheel installed with --no-deps: `import quantkit` and the
#                   console script must refuse with the torch found and the fix.
# Folders: build/wheel-check/. Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WHEELHOUSE=${1:-}
WHL=$(ls -t dist/quantkit-*.whl 2>/dev/null | head -1)
[[ -n $WHL ]] || { echo "check_wheel: no dist/quantkit-*.whl (scripts/build_wheel.sh)" >&2; exit 2; }
WHL=$ROOT/$WHL
OUT=$ROOT/build/wheel-check
mkdir -p "$OUT"
pip_from=()
[[ -n $WHEELHOUSE ]] && pip_from=(--find-links "$(realpath "$WHEELHOUSE")")
python3 - > "$OUT/example.py" <<'EOF'
import re
doc = open("docs/python.md").read()
print(re.search(r"```python\n(.*?)```", doc[doc.index("## Five lines"):], re.S).group(1))
EOF
echo "check_wheel: $(basename "$WHL")"
for v in a b; do
  venv=$OUT/venv-$v
  rm -rf "$venv"
  t0=$SECONDS
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "${pip_from[@]}" "$WHL"
  echo "venv $v: installed in $((SECONDS - t0)) s; $("$venv/bin/pip" show quantkit | grep '^Requires')"
  run=$(mktemp -d)
  ln -s "$ROOT/models" "$run/models"
  (cd "$run" && t0=$SECONDS && "$venv/bin/python" "$OUT/example.py" &&
   echo "venv $v: the five-line example ran in $((SECONDS - t0)) s, wrote: $(ls trt | tr '\n' ' ')")
  [[ -s $run/trt/calib.cache && -s $run/trt/model.qdq.onnx ]]
  "$venv/bin/quantkit" --version
  "$venv/bin/quantkit" inspect "$ROOT/models/zoo/resnet_small.onnx" > /dev/null
  "$venv/bin/python" -c "import quantkit; print('venv $v: libtorch', *quantkit._torchcheck.loaded_libtorch(),
    '| OpenMP:', quantkit.openmp_wait_policy())"
  rm -rf "$run"
done
venv=$OUT/venv-c
rm -rf "$venv"
/usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/pip" install -q --no-deps "$WHL"
if msg=$("$venv/bin/python" -c "import quantkit" 2>&1); then
  echo "check_wheel: venv c (Debian torch 1.13) imported quantkit" >&2
  exit 1
fi
echo "venv c: $(echo "$msg" | tail -1)"
echo "$msg" | grep -q "torch==" || { echo "check_wheel: the message does not say which torch to install" >&2; exit 1; }
if msg=$("$venv/bin/quantkit" --version 2>&1); then exit 1; fi
echo "venv c, console script: $msg"
echo "check_wheel: ok"
