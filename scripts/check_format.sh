#!/usr/bin/env bash
# The format check of issue 28 ("clang-format checked in .ci/run on changed lines at least"): the
# C++ lines changed since BASE (default: the commit before HEAD, i.e. what the last commit
# changed) must be as .clang-format formats them. Only changed lines are judged, so older code
# that predates the check does not fail it; a line a commit touches must be formatted.
#
#   bash scripts/check_format.sh [BASE]        exit 0: formatted; 1: the diff to apply is printed
#   git clang-format BASE                      formats those lines in place
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-HEAD~1}
if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
  echo "check_format: no commit '$base' to compare with (a repository of one commit): nothing to check"
  exit 0
fi
binary=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$binary" ]; then
  echo "check_format: clang-format is not installed (scripts/setup.sh installs it)" >&2
  exit 1
fi
files=$(git diff --name-only --diff-filter=AM "$base" -- '*.cc' '*.h' | grep -E '^(src|include|tools|python/src|tests|fuzz|bench)/' || true)
if [ -z "$files" ]; then
  echo "check_format: no C++ file changed since $(git rev-parse --short "$base")"
  exit 0
fi
# git clang-format prints "no modified files to format" / "clang-format did not modify any files"
# when the changed lines are formatted, else the diff that would format them.
out=$(git clang-format --binary "$binary" --diff "$base" -- $files 2>&1 || true)
if echo "$out" | grep -q '^diff '; then
  echo "$out"
  echo "check_format: the lines above, changed since $(git rev-parse --short "$base"), are not formatted:" \
       "run 'git clang-format $base' and commit" >&2
  exit 1
fi
echo "check_format: $(echo "$files" | wc -l) changed C++ file(s) since $(git rev-parse --short "$base"): formatted"
