#!/usr/bin/env bash
# CPU profile of quantkit eval / calibrate max / calibrate entropy on the docs/performance.md models,
# one compute thread (--threads 1: no thread-pool spinning in the numbers), batch 8:
#   bench/profile/profile.sh QUANTKIT TAG [OUTDIR]
# writes OUTDIR/TAG.<model>.<cmd>.{data,time} (perf record -e cpu-clock; /usr/bin/time) and prints
# the CPU seconds (user+sys) and peak RSS of each run. Summarise with perf_categories.py.
set -euo pipefail
BIN=$(realpath "$1"); TAG=$2; OUT=${3:-.}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
M=${QUANTKIT_CACHE:-$HOME/.cache/quantkit}/models
mkdir -p "$OUT"; cd "$OUT"
"$ROOT/.venv/bin/python" - <<'PY'
import numpy as np, os
for name, shape in [("r32.npy", (32, 3, 224, 224)), ("r8.npy", (8, 3, 224, 224)), ("z256.npy", (256, 1, 28, 28))]:
    if not os.path.exists(name):
        np.save(name, np.random.default_rng(0).standard_normal(shape, dtype=np.float32))
PY
for m in resnet18 mobilenet_v2 efficientnet_b0 vit_b_16 resnet_small; do
  f=$M/$m.opset13.onnx; d=r32.npy
  [ "$m" = vit_b_16 ] && d=r8.npy
  [ "$m" = resnet_small ] && f=$ROOT/models/zoo/resnet_small.onnx && d=z256.npy
  for c in eval max entropy; do
    if [ "$c" = eval ]; then args=(eval "$f"); else args=(calibrate "$f" --method "$c" -o "out_$TAG"); fi
    /usr/bin/time -f "%U %S %M" -o "$TAG.$m.$c.time" perf record -q -e cpu-clock -F 999 -o "$TAG.$m.$c.data" \
      "$BIN" --threads "${THREADS:-1}" "${args[@]}" --data "$d" --batch-size 8 -q > /dev/null
    awk -v n="$TAG.$m.$c" '{printf "%-36s %6.2f CPU s  %5d MiB\n", n, $1 + $2, $3 / 1024}' "$TAG.$m.$c.time"
  done
done
