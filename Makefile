# fat5.h — build, test and check. No CUDA headers or libraries are needed to build: the GPU
# libraries are opened at run time.
CC      ?= cc
CXX     ?= c++
WARN     = -Wall -Wextra -Wpedantic -Werror
CFLAGS  ?= -O2 -g
LDLIBS   = -lm -ldl
ASAN     = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

KERNELS  = $(sort $(wildcard kernels/*.cu))
TESTSRC  = tests/test_main.c tests/fat5_test.h $(wildcard tests/test_*.c)
TOOLS    = tools/fat5_inspect tools/fat5_forward tools/fat5_init
EXAMPLES = examples/quickstart examples/gpu_step

.PHONY: all bench test test-asan test-cpp test-tools test-abi test-nocuda check-embed check-kernels embed clean

all: $(TOOLS) $(EXAMPLES)

tools/%: tools/%.c fat5.h fat5_kernels.cuh
	$(CC) -std=c99 $(WARN) $(CFLAGS) -o $@ $< $(LDLIBS)

examples/%: examples/%.c fat5.h fat5_kernels.cuh
	$(CC) -std=c99 $(WARN) $(CFLAGS) -o $@ $< $(LDLIBS)

# GPU benchmarks, JSON lines on stdout (needs a GPU)
bench: tools/bench
	tools/bench all

tools/embed_kernels: tools/embed_kernels.c
	$(CC) -std=c99 $(WARN) $(CFLAGS) -o $@ $<

tools/check_kernels: tools/check_kernels.c fat5_kernels.cuh
	$(CC) -std=c99 $(WARN) $(CFLAGS) -I. -o $@ $< -ldl

# fat5_kernels.cuh is generated from kernels/*.cu and committed
embed: tools/embed_kernels
	tools/embed_kernels fat5_kernels.cuh $(KERNELS)

check-embed: tools/embed_kernels
	@tools/embed_kernels build/fat5_kernels.cuh.check $(KERNELS) 2>/dev/null || { mkdir -p build && tools/embed_kernels build/fat5_kernels.cuh.check $(KERNELS); }
	@cmp -s build/fat5_kernels.cuh.check fat5_kernels.cuh || { echo "fat5_kernels.cuh is stale: run make embed"; exit 1; }
	@echo "check-embed: fat5_kernels.cuh matches kernels/"

# compiles every kernel file with NVRTC for sm_80 and sm_90; needs the CUDA toolkit, not a GPU
check-kernels: tools/check_kernels
	tools/check_kernels

tests/run_tests: $(TESTSRC) fat5.h fat5_kernels.cuh
	$(CC) -std=c99 $(WARN) $(CFLAGS) -o $@ tests/test_main.c $(LDLIBS)

tests/run_tests_asan: $(TESTSRC) fat5.h fat5_kernels.cuh
	$(CC) -std=c99 $(WARN) -O1 -g $(ASAN) -o $@ tests/test_main.c $(LDLIBS)

tests/test_cpp: tests/test_cpp.cpp fat5.h fat5_kernels.cuh
	$(CXX) -std=c++11 $(WARN) $(CFLAGS) -o $@ $< $(LDLIBS)

test-cpp: tests/test_cpp
	tests/test_cpp

# the mirrored CUDA constants and prototypes against the real headers, when they are installed
CUDA_INC ?= $(firstword $(wildcard $(CUDA_HOME)/include/cuda.h /usr/local/cuda/include/cuda.h))
test-abi:
ifneq ($(CUDA_INC),)
	$(CC) -std=c99 $(WARN) -O1 -I$(dir $(CUDA_INC)) -o tests/test_abi tests/test_abi.c -ldl -lm
	tests/test_abi
else
	@echo "test-abi: SKIP (no CUDA headers found)"
endif

# the CPU-only build (FAT5_NO_CUDA): compiles and runs the quick start on a fixture
test-nocuda: examples/quickstart.c fat5.h
	@mkdir -p build
	$(CC) -std=c99 $(WARN) $(CFLAGS) -DFAT5_NO_CUDA -o build/quickstart_nocuda examples/quickstart.c -lm
	build/quickstart_nocuda tests/data/t5_v11_gated_gelu_untied

test-tools: $(TOOLS)
	tests/test_tools.sh

# the runner's last line is "N passed, N failed"
test: check-embed check-kernels test-abi all test-cpp test-nocuda test-tools tests/run_tests
	tests/run_tests

test-asan: tests/run_tests_asan
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 tests/run_tests_asan

clean:
	rm -rf build $(TOOLS) $(EXAMPLES) tools/bench tools/embed_kernels tools/check_kernels tests/run_tests tests/run_tests_asan tests/test_cpp tests/test_abi
