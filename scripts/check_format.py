#!/usr/bin/env python3
"""Format check (.clang-format, clang-format 14: Debian 12's), run by .ci/run and `make format-check`.

Three rules, on the C++ files git tracks (*.h, *.cc):
  1. Every file not listed in scripts/format_exceptions.txt is clang-format clean, whole.
  2. The lines a change touched are clean in every file, listed ones included: `git diff -M
     BASE` (renames followed, so a moved file counts only its edited lines) through
     clang-format-diff. BASE is $FORMAT_BASE, else HEAD~1: on CI's fresh clone of main that is
     everything the last landing brought (a merge commit's first parent is main before it).
  3. The exception list only shrinks: a listed file that is clean now must leave the list, and
     a name BASE's list did not hold may not join it.
Without a BASE (a shallow clone) rules 2 and 3's comparison are skipped, saying so.

Fix: `clang-format-14 -i FILE` for a whole file; `git clang-format-14 BASE` for changed lines.
Exit 0 when clean, 1 with one line per problem (then the diff clang-format wants for rule 2).
"""
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXCEPTIONS = "scripts/format_exceptions.txt"
SUFFIXES = (".h", ".cc")


def tool(names):
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


def git(*args, check=True):
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=check)


def read_list(text):
    return {line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")}


def main():
    clang_format = tool(["clang-format-14", "clang-format"])
    clang_format_diff = tool(["clang-format-diff-14", "clang-format-diff"])
    if not clang_format or not clang_format_diff:
        print("check_format: clang-format-14 not found (apt-get install clang-format-14)")
        return 1
    version = subprocess.run([clang_format, "--version"], capture_output=True, text=True).stdout
    if "version 14." not in version:
        print(f"check_format: needs clang-format 14 (Debian 12's, what CI runs), found: {version.strip()}")
        return 1
    files = [f for f in git("ls-files").stdout.split("\n") if f.endswith(SUFFIXES)]
    exceptions = read_list((ROOT / EXCEPTIONS).read_text())
    problems = []

    def clean(path):
        r = subprocess.run([clang_format, "--dry-run", "--Werror", path], cwd=ROOT, capture_output=True)
        return r.returncode == 0

    for f in files:
        listed = f in exceptions
        if not listed and not clean(f):
            problems.append(f"{f}: not clang-format clean (clang-format-14 -i {f})")
        elif listed and clean(f):
            problems.append(f"{f}: now clean: remove it from {EXCEPTIONS}")
    for f in sorted(exceptions - set(files)):
        problems.append(f"{EXCEPTIONS}: {f} is no tracked C++ file: remove it")

    base = os.environ.get("FORMAT_BASE", "HEAD~1")
    diff_text = ""
    if git("rev-parse", "--verify", "--quiet", base + "^{commit}", check=False).returncode != 0:
        print(f"check_format: no base commit {base} (shallow clone?): changed lines and the list's "
              f"history not checked")
    else:
        old = git("show", f"{base}:{EXCEPTIONS}", check=False)
        if old.returncode == 0:
            for f in sorted(exceptions - read_list(old.stdout)):
                problems.append(f"{EXCEPTIONS}: {f} joined the list (it only shrinks: format the file)")
        diff = git("diff", "-M", "-U0", "--no-color", base, "--", *[f"*{s}" for s in SUFFIXES]).stdout
        r = subprocess.run([clang_format_diff, "-p1", "-binary", clang_format], cwd=ROOT, input=diff,
                           capture_output=True, text=True)
        diff_text = r.stdout
        touched = sorted({line[4:].split("\t")[0] for line in diff_text.splitlines() if line.startswith("+++ ")})
        for f in touched:
            problems.append(f"{f}: lines changed since {base} are not clang-format clean "
                            f"(git clang-format-14 {base})")
    for p in problems:
        print(p)
    print(f"format: {len(files)} files, {len(exceptions)} listed as not yet formatted, "
          f"{len(problems)} problem(s)")
    if diff_text:
        print(diff_text)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
