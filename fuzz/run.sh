#!/usr/bin/env bash
# Builds the fuzz preset (clang, libFuzzer + ASan/UBSan) and runs each fuzz target for SECONDS,
# starting from the committed seeds in fuzz/corpus/<target>/ (copied into build/fuzz/corpus/, which
# keeps what the fuzzer finds between runs). Crashing inputs land in build/fuzz/artifacts/<target>/.
#   fuzz/run.sh [SECONDS] [TARGET...]   (default 600 s, every target)
#   make fuzz-smoke                      (10 s per target: what CI can afford)
# Exits non-zero when any target finds a crash, leak, timeout or out-of-memory input.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  # checkpoint_fuzzer is run by name only: it reaches libtorch's TorchScript parser (a checkpoint is
  # a TorchScript archive), which crashes on edited code records (docs/fuzzing.md, "Record").
  targets=(model_loader_fuzzer npy_fuzzer npz_fuzzer text_formats_fuzzer image_fuzzer)
fi
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "${JOBS:-2}" --target "${targets[@]}"
status=0
for t in "${targets[@]}"; do
  corpus=build/fuzz/corpus/$t
  artifacts=build/fuzz/artifacts/$t
  mkdir -p "$corpus" "$artifacts"
  cp -n fuzz/corpus/$t/* "$corpus/" 2>/dev/null || true
  echo "== $t: ${seconds} s"
  # -malloc_limit_mb: a single allocation above 1 GB from inputs of at most 64 KB is a bug
  # (declared sizes must be checked against the bytes present before allocating).
  # The fuzzer's own exit status counts too (a binary that cannot start writes no artifact).
  rc=0
  "build/fuzz/fuzz/$t" "$corpus" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1024 \
      -timeout=10 -max_len=65536 -artifact_prefix="$artifacts/" -print_final_stats=1 2>&1 |
      { grep -E "^(stat::|==|INFO: Done|SUMMARY|artifact_prefix|Test unit written|.*ERROR)" || true; } || rc=$?
  if ((rc != 0)); then
    echo "$t: exit status $rc"
    status=1
  fi
  if compgen -G "$artifacts/*" >/dev/null; then
    echo "$t: crashing inputs in $artifacts/"
    status=1
  fi
done
exit $status
