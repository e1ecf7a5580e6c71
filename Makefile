# The two commands a new user needs: `make demo` and `make test`. Each installs missing Debian
# packages, configures CMake into build/, builds, then runs.
BUILD ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CTEST_ARGS ?=

.PHONY: all deps configure build install demo test test-fast bench torch-compat python-compat format clean

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Installs faultline, faultline-train, the recipes and the Python helper under $(PREFIX).
PREFIX ?= /usr/local
install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

demo: build
	@bash scripts/demo.sh $(BUILD)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# Everything except tests labelled slow.
test-fast: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE slow $(CTEST_ARGS)

bench: build
	@bash tests/bench/trainer_throughput $(BUILD)

# Compiles and links faultline-train against Debian's newest CPU LibTorch and its CUDA LibTorch
# (fetched into ~/.cache/faultline/torch-compat): the GPU machine's LibTorch is not 1.13.
torch-compat: build
	@python3 tests/gpu/torch_compat.py --build $(BUILD) -j $(JOBS)

# The Python helper's suite on Debian sid's torch and Python, in a chroot made once in
# ~/.cache/faultline/python-compat (root): users run a current torch, not bookworm's 1.13.
python-compat:
	@bash tests/python/current_torch.sh

format:
	@find src probes bisect harness tests -name '*.cpp' -o -name '*.hpp' | xargs clang-format -i

clean:
	@rm -rf $(BUILD)
