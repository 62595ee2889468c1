"""The README's tour (issue 46 item 5): every `quantkit` line of its "A tour of the main job" block
runs as written, from a folder that sees the repository's models/ (so out/ lands in a temporary
folder), and exits 0; what they write is what the tour says they write. A README edit that breaks
a command, or a command that changes under the README, fails here.
"""
import os
import re
import shlex
import subprocess
import tempfile

from qktest import QK, ROOT  # noqa: E402  (tests/e2e/qktest.py)


def tour_commands():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    block = re.search(r"^## A tour of the main job\n.*?^```sh\n(.*?)^```$", text, re.M | re.S)
    assert block, "README.md has no '## A tour of the main job' with a ```sh block"
    commands = []
    for line in block.group(1).splitlines():
        if line.startswith("quantkit "):
            commands.append(shlex.split(line, comments=True))
    return commands


def main():
    commands = tour_commands()
    assert len(commands) >= 6, commands
    names = [c[1] for c in commands]
    assert {"calibrate", "eval", "lint"} <= set(names), names
    with tempfile.TemporaryDirectory() as d:
        os.symlink(os.path.join(ROOT, "models"), os.path.join(d, "models"))
        for args in commands:
            p = subprocess.run([QK] + args[1:], capture_output=True, text=True, cwd=d)
            assert p.returncode == 0, f"README tour: {' '.join(args)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}"
            print(f"ok: {' '.join(args[:2])}", flush=True)
            outputs = [a for prev, a in zip(args, args[1:]) if prev == "-o"]
            for out in outputs:
                assert os.listdir(os.path.join(d, out)), f"{' '.join(args)}: {out} is empty"
        # The tour's calibration is checked and, entropy clipping the input, repaired.
        with open(os.path.join(d, "out", "tour", "summary.txt")) as f:
            summary = f.read()
        assert re.search(r"^repair: written: rung \d \(", summary, re.M), summary
    print(f"README tour: {len(commands)} commands ran")


def test_readme_tour():
    main()


if __name__ == "__main__":
    main()
