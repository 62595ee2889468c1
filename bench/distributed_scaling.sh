#!/usr/bin/env bash
# Scaling of `quantkit calibrate` under torchrun: 1 process vs N (docs/distributed.md "Scaling").
# For each method and process count it records wall time, CPU time (user+sys of every process,
# torchrun's agent included), the job's throughput and each rank's own line (its samples/s, and
# rank 0's merge + write time), and writes a markdown table.
#
# usage: bench/distributed_scaling.sh [--out DIR] QUANTKIT [NPROCS...]   (default NPROCS: 1t 1 2 4)
#   1t = one process with one compute thread: the baseline of the efficiency (N ranks run with
#        THREADS_PER_RANK threads each, 1 by default, so N ranks use N cores like N x 1t);
#   1  = one process with its default threads (every usable CPU).
#   --out DIR: write DIR/distributed_scaling.md (the table, "generated, do not edit") and
#        DIR/distributed_scaling.log (every run's lines) besides printing them.
# Environment (all optional):
#   TORCHRUN          torchrun command (default: .venv-torch/bin/torchrun if present, else
#                     "python3 -m torch.distributed.run": PyPI torch's, no venv needed)
#   DATA, SAMPLES     calibration data and sample count (default fashion-mnist:train, 8192; when
#                     Debian's Fashion-MNIST is missing, a generated [N,1,28,28] .npy of that size)
#   METHODS           space-separated methods (default "entropy max": max takes the max-only fast
#                     path, range-only statistics between ranks)
#   BATCH             --batch-size (default 64); THREADS_PER_RANK (default 1)
#   DEVICE            e.g. cuda:0 — every run computes there (N ranks then share that GPU; plain
#                     `cuda` would give rank r cuda:LOCAL_RANK, which needs N GPUs)
# Example on a 16-core machine with the CUDA build (about 3 minutes):
#   bench/distributed_scaling.sh --out out/scaling build/cuda/tools/quantkit/quantkit 1t 1 2 4 8
set -euo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=""
if [ "${1:-}" = "--out" ]; then
  OUT_DIR=$2
  shift 2
fi
[ $# -ge 1 ] || { echo "usage: $0 [--out DIR] QUANTKIT [NPROCS...]" >&2; exit 2; }
QK=$(realpath "$1"); shift
NPROCS=("$@")
[ ${#NPROCS[@]} -eq 0 ] && NPROCS=(1t 1 2 4)
if [ -n "${TORCHRUN:-}" ]; then
  read -r -a TR <<<"$TORCHRUN"
elif [ -x .venv-torch/bin/torchrun ]; then
  TR=(.venv-torch/bin/torchrun)
else
  TR=(python3 -m torch.distributed.run)
fi
# A quantkit on libtorch 1.13 cannot join torchrun 2.x's agent store: rank 0 hosts the store
# instead (harmless for a build on libtorch 2.x).
export TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1
MODEL=models/zoo/resnet_small.onnx
SAMPLES=${SAMPLES:-8192}
BATCH=${BATCH:-64}
THREADS_PER_RANK=${THREADS_PER_RANK:-1}
read -r -a METHODS <<<"${METHODS:-entropy max}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
DATA=${DATA:-}
if [ -z "$DATA" ]; then
  if [ -e /usr/share/datasets/fashion-mnist ]; then
    DATA=fashion-mnist:train
  else  # no Debian dataset (a bare GPU machine): images of the same shape, generated once
    DATA=$work/images.npy
    python3 - "$DATA" "$SAMPLES" <<'EOF'
import array, random, struct, sys
path, n = sys.argv[1], int(sys.argv[2])
random.seed(0)
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, 1, 28, 28), }" % n
header += " " * (63 - (len(header) + 10) % 64) + "\n"
with open(path, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    array.array("f", (random.gauss(0.0, 1.0) for _ in range(n * 784))).tofile(f)
EOF
  fi
fi
EXTRA=()
[ -n "${DEVICE:-}" ] && EXTRA=(--device "$DEVICE")
LOG=$work/log
ROWS=$work/rows
: >"$LOG"
: >"$ROWS"
base_wall=""  # wall seconds of the 1t run of the current method
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }  # no bc on a bare machine
measure() {  # method, label, ranks, command...
  local method=$1 label=$2 ranks=$3; shift 3
  # bash's own `time`: wall, and user+sys of every waited-for descendant (the ranks under
  # torchrun included); no /usr/bin/time needed.
  local TIMEFORMAT='%R %U %S' status=0
  { time "$@" >"$work/stdout" 2>"$work/stderr" || status=$?; } 2>"$work/time"
  if [ "$status" != 0 ]; then
    echo "FAILED (exit $status): $*" >&2
    cat "$work/stderr" >&2
    exit 1
  fi
  local wall user sys cpu rank0 mw share speed eff
  read -r wall user sys <"$work/time"
  cpu=$(calc "$user + $sys")
  rank0=$(grep -o 'rank 0/.*' "$work/stderr" | head -1 || true)
  {
    printf '%-8s %-26s wall %7.2f s  cpu %7.2f s  %8.1f samples/s  %s\n' "$method" "$label" "$wall" "$cpu" \
      "$(calc "$SAMPLES / $wall")" "$rank0"
    grep -o 'rank [1-9][0-9]*/.*' "$work/stderr" | sed 's/^/    /' || true
    grep 'samples/s' "$work/stdout" | sed 's/^/    /' || true
  } | tee -a "$LOG"
  # rank 0's own run time (its summary) and its merge + write, from "... in T s (...); merge M s, write W s"
  mw="" share=""
  if [[ $rank0 =~ in\ ([0-9.]+)\ s.*merge\ ([0-9.]+)\ s,\ write\ ([0-9.]+)\ s ]]; then
    mw=$(calc "${BASH_REMATCH[2]} + ${BASH_REMATCH[3]}")
    share=$(calc "100 * $mw / (${BASH_REMATCH[1]} + $mw)")
  fi
  if [ "$label" = "1 process, 1 thread" ]; then base_wall=$wall; fi
  speed="" eff=""
  if [ -n "$base_wall" ]; then
    speed=$(calc "$base_wall / $wall")
    eff=$(calc "$base_wall / ($wall * $ranks)")
  fi
  printf '| %s | %s | %.2f | %.2f | %.1f | %s | %s | %s |\n' "$method" "$label" "$wall" "$cpu" \
    "$(calc "$SAMPLES / $wall")" "${speed:+$(printf '%.2f' "$speed")}" \
    "${eff:+$(printf '%.2f' "$eff")}" "${mw:+$(printf '%.3f s (%.1f%%)' "$mw" "$share")}" >>"$ROWS"
}
measure "-" "torchrun alone (true)" 2 "${TR[@]}" --standalone --nproc_per_node=2 --no_python true
for method in "${METHODS[@]}"; do
  base_wall=""
  args=(calibrate "$MODEL" --data "$DATA" --samples "$SAMPLES" --method "$method" --batch-size "$BATCH" -q
        "${EXTRA[@]}")
  for n in "${NPROCS[@]}"; do
    out=$work/o_${method}_$n
    if [ "$n" = 1t ]; then
      # OMP_NUM_THREADS=1 as torchrun sets it for every rank: the same runtime in both.
      measure "$method" "1 process, 1 thread" 1 env OMP_NUM_THREADS=1 "$QK" "${args[@]}" --threads 1 -o "$out"
    elif [ "$n" = 1 ]; then
      measure "$method" "1 process, default threads" 1 "$QK" "${args[@]}" -o "$out"
    else
      measure "$method" "$n processes x $THREADS_PER_RANK thread" "$n" "${TR[@]}" --standalone \
        --nproc_per_node="$n" --no_python "$QK" "${args[@]}" --threads "$THREADS_PER_RANK" -o "$out"
    fi
  done
done
table() {
  echo "<!-- generated by bench/distributed_scaling.sh, do not edit -->"
  echo "quantkit calibrate, $MODEL, data $DATA, $SAMPLES samples, --batch-size $BATCH${DEVICE:+, --device $DEVICE};"
  echo "$(nproc) usable CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  command -v nvidia-smi >/dev/null && echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
  echo "$(date -u +%Y-%m-%dT%H:%MZ), quantkit $("$QK" --version 2>/dev/null | head -1)"
  echo
  echo "Speed-up and efficiency against 1 process with 1 thread, from wall time (efficiency = speed-up / ranks)."
  echo
  echo "| method | run | wall (s) | CPU user+sys (s) | samples/s (job) | speed-up | efficiency | rank 0 merge + write (share of its collect + merge + write) |"
  echo "|---|---|---|---|---|---|---|---|"
  cat "$ROWS"
}
table | tee "$work/table.md"
if [ -n "$OUT_DIR" ]; then
  mkdir -p "$OUT_DIR"
  cp "$work/table.md" "$OUT_DIR/distributed_scaling.md"
  cp "$LOG" "$OUT_DIR/distributed_scaling.log"
  echo "wrote $OUT_DIR/distributed_scaling.md and distributed_scaling.log"
fi
