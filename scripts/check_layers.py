#!/usr/bin/env python3
"""Layering check (docs/architecture.md "Layers"): fails when an include points upward.

Rules, checked on every C++ file of src/, include/, tools/ and python/ (the bindings):
  1. A file of layer L includes quantkit headers ("<layer>/...") only from layers at or below L.
     Order, lowest first: common, ir, onnx, data, runtime, quant, formats, passes, train,
     distributed, analysis, pipelines, api; tools/ and python/ sit on top. include/quantkit/ (the
     public headers) may include only the standard library and other quantkit/ public headers.
  2. ATen / c10 / torch headers only in src/runtime/, src/train/ and src/distributed/ (each keeps
     libtorch's include directories PRIVATE).
  3. protobuf and the ONNX protobuf classes (<onnx/...>, <google/protobuf/...>) only in src/onnx/.
  4. CLI11 only in tools/.
  5. Public headers (include/quantkit/) include no fmt, nlohmann, ATen, protobuf or CLI11.
  6. The Python bindings (python/src/) bind the public API only: they include the standard
     library, pybind11, fmt, quantkit/ public headers and their own headers ("errors.h"), never
     an internal header.
  7. The CLI (tools/, issue 28's front door) includes only the standard library, CLI11, fmt,
     quantkit/ public headers and its own helpers ("cli_util.h", "numeric_options.h", ...: no "/"
     in the name): each subcommand parses into a public options struct, makes one public call and
     prints its report; process settings go through quantkit/runtime.h.
  8. Rooms inside src/pipelines/ (docs/architecture.md "Layers"): the files directly in
     src/pipelines/ are the floor the workflows share (calibration steps, the artifact writer, plan
     evaluation, ...) and include no room's header ("pipelines/<room>/..."); each subfolder is a
     room, one workflow, and includes the floor, its own room and only the rooms of its row in
     ROOMS (an acyclic table, checked too):
       calibrate -> ptq, evaluate     convert -> evaluate     qat -> calibrate, evaluate
       ptq, evaluate, diagnose -> none
     A subfolder that is not in ROOMS is reported (a new room gets a row first).

Run by ctest (test `layering_check`, label unit); prints one line per violation
("src/quant/x.h:12: quant includes analysis/y.h (a layer above)") and exits 1 when any.
"""
import pathlib
import re
import sys

LAYERS = ["common", "ir", "onnx", "data", "runtime", "quant", "formats", "passes", "train",
          "distributed", "analysis", "pipelines", "api"]
TORCH_LAYERS = ("runtime", "train", "distributed")
RANK = {name: i for i, name in enumerate(LAYERS)}
# Rule 8: the rooms of src/pipelines/ and the other rooms each may include (besides the floor and
# itself). Derived from the includes; keep it acyclic (room_table_problems checks).
ROOMS = {
    "calibrate": ("ptq", "evaluate"),
    "ptq": (),
    "evaluate": (),
    "convert": ("evaluate",),
    "qat": ("calibrate", "evaluate"),
    "diagnose": (),
}
TOOLS_RANK = len(LAYERS)

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
ATEN = re.compile(r"^(ATen|c10|torch)/")
PROTOBUF = re.compile(r"^(google/protobuf/|onnx/(onnx|onnx-ml|onnx_pb|onnx-operators|defs|checker|"
                      r"shape_inference|proto_utils|common)\b)")
CLI11 = re.compile(r"^CLI/")
THIRD_PARTY_IN_PUBLIC = re.compile(r"^(fmt/|nlohmann/|ATen/|c10/|torch/|google/|CLI/|onnx/)")
SOURCE_SUFFIXES = {".h", ".hpp", ".cc", ".cpp", ".cxx"}
CLI_THIRD_PARTY = re.compile(r"^(CLI|fmt)/")
PYTHON_THIRD_PARTY = re.compile(r"^(pybind11|fmt)/")


def layer_of(rel: pathlib.PurePosixPath):
    """(layer name, rank) of a repository file, or None for files outside the layered tree."""
    parts = rel.parts
    if parts[0] == "src" and len(parts) > 2 and parts[1] in RANK:
        return parts[1], RANK[parts[1]]
    if parts[0] in ("tools", "python"):  # the CLI and the Python bindings both sit on top
        return parts[0], TOOLS_RANK
    if parts[:2] == ("include", "quantkit"):
        return "public", -1
    return None


def room_table_problems(rooms):
    """Rule 8's table itself: every listed room exists, none lists itself, and no cycle."""
    problems = []
    for room, allowed in rooms.items():
        for other in allowed:
            if other not in rooms:
                problems.append(f"ROOMS: {room} may include {other}, which is not a room")
            elif other == room:
                problems.append(f"ROOMS: {room} lists itself")
    state = {}  # room -> 1 while on the path, 2 when done

    def visit(room, path):
        state[room] = 1
        for other in rooms.get(room, ()):
            if other not in rooms or other == room:
                continue
            if state.get(other) == 1:
                cycle = path[path.index(other):] + [other]
                problems.append("ROOMS: cycle " + " -> ".join(cycle))
            elif other not in state:
                visit(other, path + [other])
        state[room] = 2

    for room in rooms:
        if room not in state:
            visit(room, [room])
    return problems


def room_of(parts):
    """For the parts of a path below pipelines/ ("x.h" or "<room>/x.h"): None for the floor, else
    the room's folder name."""
    return parts[0] if len(parts) > 1 else None


def check_rooms(at: str, rel: pathlib.PurePosixPath, header: str, rooms):
    """Rule 8 for one include of a file of src/pipelines/."""
    if not header.startswith("pipelines/"):
        return []
    mine = room_of(rel.parts[2:])
    theirs = room_of(header.split("/")[1:])
    if mine is not None and mine not in rooms:
        return [f"{at}: pipelines/{mine}/ is not a room (add it to ROOMS in scripts/check_layers.py)"]
    if theirs is None or theirs == mine:
        return []
    if theirs not in rooms:
        return [f"{at}: includes {header}: pipelines/{theirs}/ is not a room"]
    if mine is None:
        return [f"{at}: the pipelines floor includes {header} (room {theirs}/; the floor includes "
                f"no room)"]
    if theirs not in rooms[mine]:
        allowed = ", ".join(rooms[mine]) or "none"
        return [f"{at}: room {mine}/ includes {header} (room {theirs}/; {mine}/ may include the "
                f"floor and {allowed})"]
    return []


def check_file(root: pathlib.Path, path: pathlib.Path, rooms=ROOMS):
    rel = pathlib.PurePosixPath(path.relative_to(root).as_posix())
    where = layer_of(rel)
    if where is None:
        return []
    layer, rank = where
    problems = []
    for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        bracket, header = m.groups()
        at = f"{rel}:{lineno}"
        if layer == "public":
            if THIRD_PARTY_IN_PUBLIC.match(header):
                problems.append(f"{at}: public header includes {header} (std and quantkit/ only)")
            elif bracket == '"' and not header.startswith("quantkit/"):
                problems.append(f"{at}: public header includes {header} (std and quantkit/ only)")
            continue
        if rel.parts[:2] == ("python", "src"):
            own = bracket == '"' and "/" not in header  # checked as files of python/src themselves
            public = bracket == '"' and header.startswith("quantkit/")
            std = bracket == "<" and "/" not in header
            if not (own or public or std or (bracket == "<" and PYTHON_THIRD_PARTY.match(header))):
                problems.append(f"{at}: python bindings include {header} "
                                f"(quantkit/ public headers, pybind11, fmt, std and their own only)")
        if layer == "tools":
            own = bracket == '"' and "/" not in header
            public = bracket == '"' and header.startswith("quantkit/")
            std = bracket == "<" and "/" not in header
            if not (own or public or std or (bracket == "<" and CLI_THIRD_PARTY.match(header))):
                problems.append(f"{at}: the CLI includes {header} "
                                f"(quantkit/ public headers, CLI11, fmt, std and its own helpers only)")
        if ATEN.match(header) and layer not in TORCH_LAYERS:
            problems.append(f"{at}: {layer} includes {header} "
                            f"(ATen/c10/torch only in runtime/, train/, distributed/)")
        if PROTOBUF.match(header) and layer != "onnx" and bracket == "<":
            problems.append(f"{at}: {layer} includes {header} (protobuf only in onnx/)")
        if CLI11.match(header) and layer != "tools":
            problems.append(f"{at}: {layer} includes {header} (CLI11 only in tools/)")
        if bracket == '"':
            top = header.split("/", 1)[0]
            if top in RANK and RANK[top] > rank:
                problems.append(f"{at}: {layer} includes {header} (a layer above)")
            if layer == "pipelines":
                problems.extend(check_rooms(at, rel, header, rooms))
    return problems


def self_test():
    """Plants one violation of each rule in a temporary tree and checks each is reported."""
    import tempfile
    planted = {
        "src/quant/up.h": '#include "analysis/metrics.h"\n',
        "src/formats/aten.cc": "#include <ATen/ATen.h>\n",
        "src/data/pb.cc": "#include <onnx/onnx_pb.h>\n",
        "src/pipelines/cli.cc": "#include <CLI/CLI.hpp>\n",
        "include/quantkit/leak.h": '#include <fmt/format.h>\n#include "quant/plan.h"\n',
        "src/runtime/ok.cc": '#include <ATen/ATen.h>\n#include "ir/graph.h"\n',
        "src/train/ok.cc": '#include <torch/optim.h>\n#include "runtime/interpreter.h"\n',
        "src/distributed/ok.cc": ('#include <torch/csrc/distributed/c10d/TCPStore.hpp>\n'
                                  '#include "formats/qkstats.h"\n'),
        "src/analysis/c10d.cc": '#include <torch/csrc/distributed/c10d/Store.hpp>\n',
        "src/train/up.cc": '#include "distributed/communicator.h"\n',
        "src/pipelines/api_up.cc": '#include "api/internal.h"\n',
        "src/api/ok.cc": '#include "pipelines/calibrate/calibrate.h"\n#include "quantkit/pipelines.h"\n',
        "tools/quantkit/ok.cc": '#include <CLI/CLI.hpp>\n#include "quantkit/calibration.h"\n',
        "tools/quantkit/cmd_eval.cc": '#include "pipelines/evaluate/evaluate.h"\n#include "cli_util.h"\n',
        "tools/quantkit/cmd_run.cc": ('#include <CLI/CLI.hpp>\n#include <fmt/format.h>\n#include <cstdio>\n'
                                      '#include "cli_util.h"\n#include "quantkit/pipelines.h"\n'),
        "python/src/internal.cc": '#include "quant/plan.h"\n#include <nlohmann/json.hpp>\n',
        "python/src/ok.cc": ('#include <pybind11/stl.h>\n#include <fmt/format.h>\n#include <map>\n'
                             '#include "errors.h"\n#include "quantkit/calibration.h"\n'),
        "python/src/collector.cc": '#include "api/internal.h"\n#include "collector.h"\n',
        # Rule 8: a floor file including a room, a room including a room not in its row, a
        # folder that is no room; and the includes each room may make.
        "src/pipelines/floor_up.cc": ('#include "pipelines/calibration_steps.h"\n'
                                      '#include "pipelines/calibrate/calibrate.h"\n'),
        "src/pipelines/ptq/up.cc": ('#include "pipelines/ptq/stages.h"\n'
                                    '#include "pipelines/calibrate/holdout.h"\n'),
        "src/pipelines/evaluate/sideways.cc": '#include "pipelines/convert/convert.h"\n',
        "src/pipelines/attic/old.cc": '#include "pipelines/run_model.h"\n',
        "src/pipelines/calibrate/ok.cc": ('#include "pipelines/calibration_steps.h"\n'
                                          '#include "pipelines/calibrate/check.h"\n'
                                          '#include "pipelines/ptq/stages.h"\n'
                                          '#include "pipelines/evaluate/fallback.h"\n'),
        "src/pipelines/qat/ok.cc": ('#include "pipelines/calibrate/calibrate.h"\n'
                                    '#include "pipelines/quantized_artifacts.h"\n'),
        "src/api/rooms_ok.cc": '#include "pipelines/diagnose/diagnose.h"\n',
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for rel, text in planted.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        found = [p for rel in planted for p in check_file(root, root / rel)]
    expected = ["src/quant/up.h:1", "src/formats/aten.cc:1", "src/data/pb.cc:1",
                "src/analysis/c10d.cc:1", "src/train/up.cc:1", "src/pipelines/api_up.cc:1",
                "src/pipelines/cli.cc:1", "include/quantkit/leak.h:1", "include/quantkit/leak.h:2",
                "python/src/internal.cc:1", "python/src/internal.cc:2", "python/src/collector.cc:1",
                "tools/quantkit/cmd_eval.cc:1", "src/pipelines/floor_up.cc:2",
                "src/pipelines/ptq/up.cc:2", "src/pipelines/evaluate/sideways.cc:1",
                "src/pipelines/attic/old.cc:1"]
    got = [p.split(": ")[0] for p in found]
    if sorted(got) != sorted(expected):
        print(f"self-test FAILED: expected violations at {expected}, got {found}")
        return 1
    cyclic = {"calibrate": ("ptq",), "ptq": ("evaluate",), "evaluate": ("calibrate",), "qat": ("x",)}
    table = room_table_problems(cyclic)
    if len(table) != 2 or not any("cycle" in p for p in table) or room_table_problems(ROOMS):
        print(f"self-test FAILED: the room table check: {table}, {room_table_problems(ROOMS)}")
        return 1
    print(f"self-test: {len(found)} planted violations reported, clean files accepted; "
          f"a cyclic room table reported")
    return 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    root = pathlib.Path(argv[1] if len(argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    files = [p for d in ("src", "include", "tools", "python") for p in sorted((root / d).rglob("*"))
             if p.suffix in SOURCE_SUFFIXES and p.is_file()]
    problems = room_table_problems(ROOMS) + [p for f in files for p in check_file(root, f)]
    for p in problems:
        print(p)
    print(f"layering: {len(files)} files, {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
