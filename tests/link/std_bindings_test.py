#!/usr/bin/env python3
"""No C++ standard library symbol binds into a libtorch library (issue 26).

    std_bindings_test.py [--stdcxx-first] BINARY [BINARY...]

PyPI's torch wheels are built on manylinux (RHEL 8: GCC 8's libstdc++ plus gcc-toolset's static
pieces) and export their embedded copies of libstdc++ code from libtorch_cpu.so, std::filesystem
among them. When an executable lists a torch library before libstdc++.so.6 among its DT_NEEDED
entries, the dynamic linker's global lookup finds torch's copy first, and quantkit's calls (and
torch's own calls through the PLT) run one standard library's code on the other's objects: on an
H200 (Ubuntu 24.04, torch 2.11) std::filesystem::remove_all(path const&, error_code&) bound into
libtorch.so segfaulted the GPU tests. cmake/Dependencies.cmake puts libstdc++ first; this test
proves it on the built binaries, on any machine (no GPU needed):

Each BINARY runs once with LD_BIND_NOW=1 (every PLT reference binds at start-up, whatever code
runs) and LD_DEBUG=bindings, with --help. A binding of a symbol that libstdc++.so.6 defines, made
to a torch library (libtorch*.so, libc10*.so) that defines it strongly (not a weak template
instantiation), fails the test with the referrer and the symbol.
"""
import os
import re
import subprocess
import sys
import tempfile

BINDING = re.compile(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: normal symbol `([^']+)'")
TORCH_LIB = re.compile(r"/lib(torch[^/]*|c10[^/]*)\.so[^/]*$")


def defined_symbols(library, strong_only=False):
    """The dynamic symbols LIBRARY defines; with strong_only, without weak and unique ones (W, V, u)."""
    out = subprocess.run(["nm", "-D", "--defined-only", library], check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2 or (strong_only and parts[-2] in ("W", "w", "V", "v", "u")):
            continue
        names.add(parts[-1].split("@")[0])
    return names


def bindings(binary):
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, LD_BIND_NOW="1", LD_DEBUG="bindings", LD_DEBUG_OUTPUT=os.path.join(tmp, "ld"))
        subprocess.run([binary, "--help"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=120)
        lines = []
        for name in os.listdir(tmp):
            with open(os.path.join(tmp, name), errors="replace") as f:
                lines.extend(f.readlines())
    return [m.groups() for m in map(BINDING.search, lines) if m]


def check(binary):
    """Returns (number of bindings, violations, the libstdc++ and torch libraries seen)."""
    found = bindings(binary)
    libstdcxx = sorted({d for _, d, _ in found if os.path.basename(d).startswith("libstdc++.so")})
    torch_libs = sorted({d for _, d, _ in found if TORCH_LIB.search(d)})
    if not found:
        raise RuntimeError(f"{binary}: LD_DEBUG=bindings printed nothing (static binary, or ld.so ignores LD_DEBUG)")
    if not libstdcxx:
        raise RuntimeError(f"{binary}: no binding to libstdc++.so.6 seen")
    std = set()
    for lib in libstdcxx:
        std |= defined_symbols(lib)
    # A weak definition in torch is a template or inline instantiation (std::operator+ on strings):
    # every library that instantiates it carries an equivalent copy (the ODR), so binding to torch's
    # is harmless; Debian's libtorch has only such. A strong one is a copy of libstdc++'s own
    # compiled code (PyPI's std::filesystem): binding to it mixes two standard libraries.
    strong = {d: defined_symbols(d, strong_only=True) for d in torch_libs}
    bad = [(r, d, s) for r, d, s in found if TORCH_LIB.search(d) and s in std and s in strong[d]]
    return len(found), bad, libstdcxx, torch_libs


def needed(binary):
    """The binary's DT_NEEDED entries, in order (readelf -d)."""
    out = subprocess.run(["readelf", "-d", binary], check=True, capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def main(args):
    # --stdcxx-first: the build links libstdc++.so.6 ahead of everything (cmake/Dependencies.cmake);
    # then it must be the binary's first DT_NEEDED entry. On the H200's toolchain it was missing
    # from the list altogether (its g++ found no libstdc++.so), which the bindings of Debian's
    # libtorch cannot show: this order check catches that link on any machine.
    order = "--stdcxx-first" in args
    binaries = [a for a in args if a != "--stdcxx-first"]
    if not binaries:
        print(__doc__)
        return 2
    failed = False
    for binary in binaries:
        if order:
            entries = needed(binary)
            first = entries[0] if entries else "(none)"
            print(f"{binary}: DT_NEEDED starts with {first} ({len(entries)} entries)")
            if not first.startswith("libstdc++.so"):
                print(f"  libstdc++.so.6 is not the first DT_NEEDED entry: {', '.join(entries[:6])}")
                failed = True
        n, bad, libstdcxx, torch_libs = check(binary)
        print(f"{binary}: {n} bindings; libstdc++: {', '.join(libstdcxx)}; torch libraries: {len(torch_libs)}; "
              f"libstdc++ symbols bound into torch: {len(bad)}")
        for referrer, definer, symbol in bad[:20]:
            demangled = subprocess.run(["c++filt", symbol], capture_output=True, text=True).stdout.strip() or symbol
            print(f"  {os.path.basename(referrer)} -> {os.path.basename(definer)}: {demangled}")
        if len(bad) > 20:
            print(f"  ... and {len(bad) - 20} more")
        failed |= bool(bad)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
