#!/usr/bin/env bash
# Scaling of `quantkit calibrate` under torchrun: 1 process vs N (docs/distributed.md "Scaling").
# Prints wall time, CPU time (user+sys of all ranks, torchrun's agent included) and each rank's
# own line (its samples/s, and rank 0's merge + write time).
# usage: bench/distributed_scaling.sh QUANTKIT [NPROCS...]   (default NPROCS: 1t 1 2 4)
#   1t = one process with one compute thread (what each rank of a full machine gets)
# Every run ends with its throughput over the whole job (samples / wall) beside rank 0's line.
set -euo pipefail
cd "$(dirname "$0")/.."
QK=$(realpath "$1"); shift
NPROCS=("$@")
[ ${#NPROCS[@]} -eq 0 ] && NPROCS=(1t 1 2 4)
TORCHRUN=.venv-torch/bin/torchrun
export TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1  # libtorch 1.13 build: rank 0 hosts the store
MODEL=models/zoo/resnet_small.onnx
SAMPLES=2048
ARGS=(calibrate "$MODEL" --data fashion-mnist:calib --samples "$SAMPLES" --method entropy --batch-size 64 -q)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
measure() {  # label, command...
  local label=$1; shift
  /usr/bin/time -f "%e %U %S" -o "$out/time" "$@" >"$out/stdout" 2>"$out/stderr"
  read -r wall user sys <"$out/time"
  printf '%-28s wall %6.2f s  cpu %6.2f s  %7.1f samples/s  %s\n' "$label" "$wall" \
    "$(echo "$user + $sys" | bc)" "$(echo "$SAMPLES / $wall" | bc -l)" "$(grep -o 'rank 0/.*' "$out/stderr" | head -1)"
  grep -o 'rank [1-9][0-9]*/.*' "$out/stderr" | sed 's/^/    /' || true
}
measure "torchrun overhead (true)" "$TORCHRUN" --standalone --nproc_per_node=2 --no_python true
for n in "${NPROCS[@]}"; do
  if [ "$n" = 1t ]; then
    measure "1 process, 1 thread" "$QK" "${ARGS[@]}" --threads 1 -o "$out/o1t"
    grep 'samples/s' "$out/stdout" | sed 's/^/    /'
  elif [ "$n" = 1 ]; then
    measure "1 process" "$QK" "${ARGS[@]}" -o "$out/o1"
    grep 'samples/s' "$out/stdout" | sed 's/^/    /'
  else
    measure "$n processes (torchrun)" "$TORCHRUN" --standalone --nproc_per_node="$n" --no_python \
      "$QK" "${ARGS[@]}" -o "$out/o$n"
  fi
done
