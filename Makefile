# Thin wrapper over CMake. `make` builds, `make test` builds and runs every test,
# `make quickstart` builds, starts a server with the embedded defaults and runs the walkthrough.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps configure build test quickstart bench clean

all: build

deps:
	scripts/install-deps

configure: deps
	@test -f $(BUILD)/build.ninja || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --repeat until-pass:2

quickstart: build
	examples/quickstart/run.sh

bench: build
	bench/run.sh

clean:
	rm -rf $(BUILD)
