#!/usr/bin/env bash
# The format check (issue 28; the whole tree since issue 46 item 4): every C++ file of the
# project's own code (src, include, tools, python/src, tests, fuzz, bench) is as .clang-format
# formats it. The tree was formatted once in one commit, so a file that differs was changed since.
#
#   bash scripts/check_format.sh          exit 0: formatted; 1: the files and the first lines of
#                                         the change clang-format would make are printed
#   bash scripts/check_format.sh --fix    formats them in place (clang-format -i)
set -euo pipefail
cd "$(dirname "$0")/.."
binary=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$binary" ]; then
  echo "check_format: clang-format is not installed (scripts/setup.sh installs it)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files -- '*.cc' '*.h' '*.cu' '*.cuh' '*.cpp' |
                     grep -E '^(src|include|tools|python/src|tests|fuzz|bench)/')
if [ "${1:-}" = "--fix" ]; then
  "$binary" -i "${files[@]}"
  echo "check_format: formatted ${#files[@]} C++ file(s)"
  exit 0
fi
unformatted=()
for f in "${files[@]}"; do
  if ! "$binary" "$f" | cmp -s - "$f"; then unformatted+=("$f"); fi
done
if [ "${#unformatted[@]}" -ne 0 ]; then
  for f in "${unformatted[@]}"; do
    "$binary" "$f" | diff -u --label "$f" --label "$f (formatted)" "$f" - | head -n 20 || true
  done
  echo "check_format: ${#unformatted[@]} of ${#files[@]} C++ file(s) are not formatted as .clang-format" \
       "says: bash scripts/check_format.sh --fix" >&2
  exit 1
fi
echo "check_format: ${#files[@]} C++ file(s): formatted"
