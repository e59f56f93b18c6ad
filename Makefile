# Thin wrapper over CMake. `make` builds, `make test` builds and runs every test,
# `make quickstart` builds, starts a server with the embedded defaults and runs the walkthrough.
# `make fuzz` builds the libFuzzer targets with clang in $(FUZZ_BUILD) and runs each for
# FUZZ_SECONDS, then replays the crash inputs kept in fuzz/regressions/ (docs/fuzzing.md).
BUILD ?= build
JOBS ?= $(shell nproc)
# Tests wait on processes, sockets and disks as much as they compute: one more test than cores
# keeps the cores busy (the PostgreSQL pass on 2 cores: 443 s with 2 at a time, 365 s with 3, at
# 86% of both cores).
TEST_JOBS ?= $(shell echo $$(( $(JOBS) + 1 )))
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 20

.PHONY: all deps configure build test test-quick test-postgres fuzz quickstart bench clean

all: build

deps:
	scripts/install-deps
	scripts/install-console-deps

configure: deps
	@test -f $(BUILD)/build.ninja || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(TEST_JOBS)

# The fast tier, for every edit: unit tests, scenarios, the fuzz regressions and the integration
# tests labelled smoke (one server per area: Batch, SageMaker, containers, restart); a few minutes.
test-quick: build
	cd $(BUILD) && ctest --output-on-failure -j $(TEST_JOBS) -L '^(unit|scenario|fuzz|smoke)$$'

# The integration suite again with the state in a private PostgreSQL ([store] url) instead of
# SQLite. Tests labelled store_neutral (tests/CMakeLists.txt says why each is) exercise the same
# store calls as the rest and run once, in `make test`; PG_ALL=1 runs them here too.
test-postgres: build
	cd $(BUILD) && TRAINYARD_TEST_STORE=postgres ctest --output-on-failure -j $(TEST_JOBS) -L integration \
	  $(if $(PG_ALL),,-LE store_neutral)

fuzz: deps
	@test -f $(FUZZ_BUILD)/build.ninja || CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTY_FUZZ=ON
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz-targets
	fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

quickstart: build
	examples/quickstart/run.sh

bench: build
	bench/run.sh

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD)
