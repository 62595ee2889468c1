# quantkit — the two commands of the README:
#   make demo   install what is missing, build, run the main job on the bundled model and data
#   make test   the whole test suite (what CI runs)
# Other targets: build, python (the extension in-tree), wheel (dist/: docs/python.md), asan (sanitizer build + unit tests), bench, zoo, zoo-table,
# fuzz, fuzz-smoke, clean,
#   cuda (build against PyPI torch in .venv-torch: the GPU route, docs/gpu.md), cuda-test.

PRESET ?= dev
BUILD_DIR := build/$(PRESET)
JOBS ?= $(shell nproc)
# ccache keeps its default directory (~/.cache/ccache) so fresh clones (CI) and worktrees share it;
# paths are made relative to the checkout so they hit across clone locations.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
export CCACHE_MAXSIZE ?= 5G

.PHONY: all setup build python wheel test demo asan bench zoo zoo-table qat-table fuzz fuzz-smoke clean cuda cuda-test

all: build

setup:
	@bash scripts/setup.sh

build: setup
	@cmake --preset $(PRESET) >/dev/null
	@cmake --build --preset $(PRESET) -j $(JOBS)

# The Python extension in-tree: PYTHONPATH=build/$(PRESET)/python .venv/bin/python -c "import quantkit"
# (`make build` builds it too; `pip install .` builds a wheel: docs/python.md).
python: setup
	@cmake --preset $(PRESET) >/dev/null
	@cmake --build --preset $(PRESET) -j $(JOBS) --target quantkit_core

# The distributable wheel for .venv-torch's torch release line (scripts/build_wheel.sh): dist/.
wheel: setup
	@bash scripts/setup_torch.sh
	@JOBS=$(JOBS) bash scripts/build_wheel.sh

test: build
	@bash scripts/setup_torch.sh
	@PATH=$(CURDIR)/.venv/bin:$$PATH ctest --preset $(PRESET) --timeout 1800

# Only what the demo runs (the CLI and its libraries; tests and benchmarks come with `make test`),
# so a cold machine starts printing sooner (issue 46).
demo: setup
	@cmake --preset $(PRESET) >/dev/null
	@cmake --build --preset $(PRESET) -j $(JOBS) --target quantkit
	@bash scripts/demo.sh $(BUILD_DIR)

# ASan + UBSan (Debug, build/asan): builds only the quantkit CLI and the `unit` test binaries
# (target unit_tests), then runs the `unit` tests (the Hostile.* suite among them) and
# e2e.reliability (label `asan`); the placeholders of the binaries it does not build (*_NOT_BUILT:
# slow or conformance tests that share a directory with unit tests) are left out. The asan-ubsan test preset sets halt_on_error, LSan on, UBSan
# print_stacktrace, and allocator_may_return_null=1 so that huge requests fail like the real
# allocator and the out-of-memory tests exercise quantkit's own error path.
asan: setup
	@cmake --preset asan-ubsan >/dev/null
	@cmake --build --preset asan-ubsan -j $(JOBS) --target unit_tests
	@PATH=$(CURDIR)/.venv/bin:$$PATH ctest --preset asan-ubsan --timeout 1800

# The GPU route: the same sources against PyPI torch's libtorch (scripts/setup_torch.sh makes
# .venv-torch). Runs on a CPU-only machine too (CUDA tests then say "skipped: no CUDA device").
cuda: setup
	@bash scripts/setup_torch.sh
	@cmake --preset cuda >/dev/null
	@cmake --build --preset cuda -j $(JOBS)

cuda-test: cuda
	@PATH=$(CURDIR)/.venv/bin:$$PATH ctest --preset cuda --timeout 1800

bench: build
	@bash bench/run.sh $(BUILD_DIR)

zoo: setup
	@.venv/bin/python -m qkdev.zoo.train_all

# docs/zoo-table.md: every zoo model x every method, per-tensor weights, fallback (full test split).
zoo-table: build
	@.venv/bin/python -m qkdev.zoo_table $(BUILD_DIR)/tools/quantkit/quantkit --markdown docs/zoo-table.md \
		--json docs/zoo-table.json

# docs/qat-table.md: PTQ plan losing points -> quantkit qat, label-free and with labels (full test split).
qat-table: build
	@.venv/bin/python -m qkdev.qat_table $(BUILD_DIR)/tools/quantkit/quantkit --markdown docs/qat-table.md \
		--json docs/qat-table.json

fuzz: setup
	@cmake --preset fuzz >/dev/null
	@cmake --build --preset fuzz -j $(JOBS)

# Every libFuzzer target for 10 s from the committed seeds (fuzz/corpus/); fails on any finding.
fuzz-smoke: setup
	@JOBS=$(JOBS) bash fuzz/run.sh 10

clean:
	rm -rf build
