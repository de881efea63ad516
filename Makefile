# fat5.h — build, test and check. No CUDA headers or libraries are needed to build: the GPU
# libraries are opened at run time.
CC      ?= cc
CXX     ?= c++
WARN     = -Wall -Wextra -Wpedantic -Werror
CFLAGS  ?= -O2 -g
LDLIBS   = -lm -ldl -lpthread
ASAN     = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

KERNELS  = $(sort $(wildcard kernels/*.cu))
# The library's source: src/manifest lists the files of fat5.h in order (dev/amalgamate joins them).
SRC      = src/manifest $(shell sed -n 's/^[a-z-]* *\(src\/[^ ]*\)$$/\1/p' src/manifest)
# The developer build of fat5.h: the same text with #line directives, so that compiler messages
# and debuggers point at src/. Every program make builds compiles the library from it.
DEV_H    = build/dev/fat5.h
TESTSRC  = tests/test_main.c tests/fat5_test.h $(wildcard tests/test_*.c)
# tools/: the user programs; dev/: the generators, checks and benchmarks of the people who work on
# fat5 (ref/: the Python oracles and peers, run by hand where PyTorch is installed)
TOOLS    = tools/fat5_inspect tools/fat5_forward tools/fat5_init tools/pretokenize tools/plot_metrics \
           tools/fat5_tokenize tools/fat5_convert tools/fat5_tokenizer_train tools/load_test
DEVPROGS = dev/bench dev/dist_check dev/cpu_step dev/embed_kernels dev/check_kernels dev/cold_open
EXAMPLES = examples/quickstart examples/gpu_step examples/train examples/finetune examples/generate examples/serve

.PHONY: all dev train finetune classify bench fuzz amalgamate check-amalgamate check-layers check check-readme test run-tests test-asan test-quick test-cpp test-tools test-serve test-abi test-nocuda test-options check-embed check-kernels check-unicode embed clean

all: $(TOOLS) $(EXAMPLES)

build/amalgamate: dev/amalgamate.c
	@mkdir -p build
	$(CC) -std=c99 $(WARN) $(CFLAGS) -o $@ $<

# fat5.h is generated from src/ and committed: edit src/, then run make amalgamate
amalgamate: build/amalgamate
	build/amalgamate -o fat5.h src/manifest

check-amalgamate: build/amalgamate
	@build/amalgamate --check -o fat5.h src/manifest
	@echo "check-amalgamate: fat5.h is the amalgamation of src/"

$(DEV_H): build/amalgamate $(SRC)
	@mkdir -p build/dev
	build/amalgamate --lines -o $@ src/manifest

# the layer rules of DESIGN §3 over src/ (the layers are src/manifest's)
build/check_layers: dev/check_layers.c
	@mkdir -p build
	$(CC) -std=c99 $(WARN) $(CFLAGS) -o $@ $<

check-layers: build/check_layers $(SRC)
	build/check_layers src/manifest

# The implementation compiled once, from the developer build (its messages and debug lines point
# at src/); the examples, the tools and the dev programs link against it (-DFAT5__IMPL_DONE skips
# the copy their own #define FAT5_IMPLEMENTATION would compile) and read the declarations of the
# committed fat5.h, as users do (make check-amalgamate keeps the two the same text). Each still
# builds alone with the command on its first line. Examples and tools use the public API only; the
# benchmarks and checks of dev/ also reach the developer interface dev/fat5_internal.h declares
# (src/internal_api.c, compiled into the same object).
build/fat5_impl.o: $(DEV_H) fat5_kernels.cuh
	$(CC) -std=c99 $(WARN) $(CFLAGS) -DFAT5_IMPLEMENTATION -DFAT5_DEV_INTERFACE -I. -x c -c -o $@ $(DEV_H)

LINK_IMPL = $(CC) -std=c99 $(WARN) $(CFLAGS) -DFAT5__IMPL_DONE -o $@ $< build/fat5_impl.o $(LDLIBS)

examples/%: examples/%.c tools/cli.h fat5.h build/fat5_impl.o
	$(LINK_IMPL)

tools/%: tools/%.c tools/cli.h fat5.h build/fat5_impl.o
	$(LINK_IMPL)

# examples/finetune is examples/train.c built as fine-tuning's program
examples/finetune: examples/train.c

# examples/serve reads its requests with examples/serve_request.h (also the fuzz target's)
examples/serve: examples/serve_request.h

# plot_metrics needs nothing of fat5 (libc and libm; fat5.h's version string, through cli.h)
tools/plot_metrics: tools/plot_metrics.c tools/cli.h fat5.h
	$(CC) -std=c99 $(WARN) $(CFLAGS) -o $@ $< -lm

dev/bench dev/dist_check dev/cpu_step dev/cold_open: dev/%: dev/%.c dev/fat5_internal.h fat5.h build/fat5_impl.o
	$(LINK_IMPL)

# the generators, checks and benchmarks of dev/, built without running them
dev: $(DEVPROGS)

# The main job: pre-trains a T5 with the UL2 mixture on the bundled corpus (data/fortunes), on the
# GPU when there is one (FAT5-small shape, a few minutes), else on the CPU (a tiny model, a few
# minutes on two cores). Checkpoints, metrics.jsonl and loss.png go to $(TRAIN_OUT)/run; run again,
# it continues where it stopped, with the run's own model and step count (or says the run is
# complete). TRAIN_ARGS adds options (examples/train --help lists them; --max-steps N extends a run).
# TOKENIZER=unigram:N or bpe:N first trains a tokenizer of N pieces (plus T5's 100 sentinels) on the
# corpus with tools/fat5_tokenizer_train, pre-tokenizes with it and saves it with every checkpoint
# (AutoTokenizer loads the checkpoint); the run then goes to $(TRAIN_OUT)/run-unigram-N. TRAIN_TEXT
# names another corpus (gzip'd or plain; fortune files split at "%" lines, else at blank lines),
# e.g. data/fortunes-fr/fortunes-fr.txt.gz.
TRAIN_OUT ?= build/train
TRAIN_ARGS ?=
TRAIN_TEXT ?= data/fortunes/fortunes.txt.gz
TOKENIZER ?=
TOK_KIND = $(word 1,$(subst :, ,$(TOKENIZER)))
TOK_SIZE = $(word 2,$(subst :, ,$(TOKENIZER)))
TOK_NAME = $(TOK_KIND)-$(TOK_SIZE)$(if $(filter data/fortunes/fortunes.txt.gz,$(TRAIN_TEXT)),,-$(basename $(basename $(notdir $(TRAIN_TEXT)))))
TRAIN_RUN = $(TRAIN_OUT)/run$(if $(TOKENIZER),-$(TOK_NAME),$(if $(filter data/fortunes/fortunes.txt.gz,$(TRAIN_TEXT)),,-$(basename $(basename $(notdir $(TRAIN_TEXT))))))
TRAIN_TOK = $(TRAIN_OUT)/$(if $(TOKENIZER),$(TOK_NAME),$(basename $(basename $(notdir $(TRAIN_TEXT))))).tok
TOK_DIR = $(TRAIN_OUT)/tokenizer-$(TOK_NAME)
CAT_TEXT = $(if $(filter %.gz,$(TRAIN_TEXT)),gzip -dc,cat) $(TRAIN_TEXT)
TEXT_SEP = $$($(CAT_TEXT) | grep -qx '%' && echo % || echo blank)
$(TOK_DIR)/tokenizer.json: $(TRAIN_TEXT) tools/fat5_tokenizer_train
	@case "$(TOKENIZER)" in unigram:[1-9]*|bpe:[1-9]*) ;; \
	  *) echo "make train: TOKENIZER=$(TOKENIZER): expected unigram:N or bpe:N (e.g. unigram:8000)"; exit 2;; esac
	@mkdir -p $(TRAIN_OUT)
	$(CAT_TEXT) > $(TRAIN_OUT)/corpus.txt
	tools/fat5_tokenizer_train --model_type $(TOK_KIND) --vocab_size $(TOK_SIZE) --input $(TRAIN_OUT)/corpus.txt \
	    --model_prefix $(TOK_DIR)
	rm -f $(TRAIN_OUT)/corpus.txt

$(TRAIN_TOK): $(TRAIN_TEXT) tools/pretokenize $(if $(TOKENIZER),$(TOK_DIR)/tokenizer.json)
	@mkdir -p $(TRAIN_OUT)
	$(CAT_TEXT) | tools/pretokenize --sep $(TEXT_SEP) $(if $(TOKENIZER),--tokenizer $(TOK_DIR)) -o $@ -

train: examples/train tools/plot_metrics $(TRAIN_TOK)
	examples/train --data $(TRAIN_TOK) --output-dir $(TRAIN_RUN) $(if $(TOKENIZER),--save-tokenizer $(TOK_DIR)) \
	    $$(test -f $(TRAIN_RUN)/latest && echo --resume $(TRAIN_RUN)) $(TRAIN_ARGS)
	tools/plot_metrics $(TRAIN_RUN)/metrics.jsonl $(TRAIN_RUN)/loss.png
	@echo "train: checkpoint $(TRAIN_RUN)/$$(cat $(TRAIN_RUN)/latest), loss curve $(TRAIN_RUN)/loss.png"

# Fine-tuning: make train's checkpoint (made first when there is none) fine-tuned on the bundled
# WordNet task (data/wordnet: "define: <lemma> (<pos>)" -> its gloss), validated on the first
# FINETUNE_EVAL rows of the validation split with generated definitions scored (exact match, F1,
# ROUGE, BLEU). A few minutes on two CPU cores. Checkpoints, metrics.jsonl, eval_predictions.jsonl,
# best and loss.png go to $(FINETUNE_OUT); run again, it continues where it stopped (or says the
# run is complete). FINETUNE_ARGS adds options (examples/finetune --help lists them).
FINETUNE_OUT ?= build/finetune
FINETUNE_ARGS ?=
FINETUNE_EVAL ?= 100
WORDNET ?= data/wordnet
$(TRAIN_OUT)/run/latest:
	$(MAKE) --no-print-directory train

finetune: examples/finetune tools/plot_metrics $(TRAIN_OUT)/run/latest
	examples/finetune --model_name_or_path $(TRAIN_OUT)/run/$$(cat $(TRAIN_OUT)/run/latest) \
	    --train_file $(WORDNET)/train.jsonl --validation_file $(WORDNET)/validation.jsonl --source_prefix "define: " \
	    --output_dir $(FINETUNE_OUT) --max_steps 240 --eval_steps 80 --save_steps 80 --max_eval_samples $(FINETUNE_EVAL) \
	    --max_target_length 128 $$(test -f $(FINETUNE_OUT)/latest && echo --resume $(FINETUNE_OUT)) $(FINETUNE_ARGS)
	tools/plot_metrics $(FINETUNE_OUT)/metrics.jsonl $(FINETUNE_OUT)/loss.png --title "fine-tuning: WordNet definitions"
	@echo "finetune: checkpoint $(FINETUNE_OUT)/$$(cat $(FINETUNE_OUT)/latest), best $(FINETUNE_OUT)/$$(cat $(FINETUNE_OUT)/best), predictions $(FINETUNE_OUT)/eval_predictions.jsonl, loss curve $(FINETUNE_OUT)/loss.png"

# Classification: make train's checkpoint (made first when there is none) under fat5's encoder-only
# classifier (docs/tasks.md), trained on the bundled WordNet rows: a word, its part of speech and
# its definition -> the synset's lexicographer class (45, data/wordnet/labels.txt). Accuracy and
# macro-F1 on the first CLASSIFY_EVAL validation rows every 100 steps; a few minutes on two CPU
# cores. Checkpoints, metrics.jsonl, eval_predictions.jsonl, best and loss.png go to
# $(CLASSIFY_OUT); run again, it continues where it stopped. CLASSIFY_ARGS adds options.
CLASSIFY_OUT ?= build/classify
CLASSIFY_ARGS ?=
CLASSIFY_EVAL ?= 1000
classify: examples/finetune tools/plot_metrics $(TRAIN_OUT)/run/latest
	examples/finetune --model_name_or_path $(TRAIN_OUT)/run/$$(cat $(TRAIN_OUT)/run/latest) --task classify \
	    --train_file $(WORDNET)/train.jsonl --validation_file $(WORDNET)/validation.jsonl \
	    --text_column_names input,target --label_column_name lexname --label_file $(WORDNET)/labels.txt \
	    --pooling mean --output_dir $(CLASSIFY_OUT) --max_steps 300 --eval_steps 100 --save_steps 100 \
	    --max_eval_samples $(CLASSIFY_EVAL) --per_device_train_batch_size 32 \
	    --metric_for_best_model accuracy $$(test -f $(CLASSIFY_OUT)/latest && echo --resume $(CLASSIFY_OUT)) $(CLASSIFY_ARGS)
	tools/plot_metrics $(CLASSIFY_OUT)/metrics.jsonl $(CLASSIFY_OUT)/loss.png --title "classification: WordNet lexicographer classes"
	@awk '/"eval_accuracy"/ { a = $$0; sub(/.*"eval_accuracy": /, "", a); sub(/[,}].*/, "", a); \
	     f = $$0; sub(/.*"eval_macro_f1": /, "", f); sub(/[,}].*/, "", f) } \
	     END { printf "classify: validation accuracy %.1f%%, macro-F1 %.1f%% on $(CLASSIFY_EVAL) rows\n", a, f }' \
	    $(CLASSIFY_OUT)/metrics.jsonl
	@echo "classify: best checkpoint $(CLASSIFY_OUT)/$$(cat $(CLASSIFY_OUT)/best), predictions $(CLASSIFY_OUT)/eval_predictions.jsonl"

# GPU benchmarks, JSON lines on stdout (needs a GPU)
bench: dev/bench
	dev/bench all

dev/embed_kernels: dev/embed_kernels.c
	$(CC) -std=c99 $(WARN) $(CFLAGS) -o $@ $<

dev/check_kernels: dev/check_kernels.c fat5_kernels.cuh
	$(CC) -std=c99 $(WARN) $(CFLAGS) -I. -o $@ $< -ldl

# fat5_kernels.cuh is generated from kernels/*.cu and committed
embed: dev/embed_kernels
	dev/embed_kernels fat5_kernels.cuh $(KERNELS)

check-embed: dev/embed_kernels
	@dev/embed_kernels build/fat5_kernels.cuh.check $(KERNELS) 2>/dev/null || { mkdir -p build && dev/embed_kernels build/fat5_kernels.cuh.check $(KERNELS); }
	@cmp -s build/fat5_kernels.cuh.check fat5_kernels.cuh || { echo "fat5_kernels.cuh is stale: run make embed"; exit 1; }
	@echo "check-embed: fat5_kernels.cuh matches kernels/"

# the Unicode tables (src/text_unicode_tables.c) against dev/gen_unicode.py and the UCD (Debian unicode-data)
check-unicode:
	@if [ -f /usr/share/unicode/UnicodeData.txt ]; then python3 dev/gen_unicode.py --check --fixtures; \
	else echo "check-unicode: SKIP (no /usr/share/unicode; apt-get install unicode-data)"; fi

# compiles every kernel file with NVRTC for sm_80 and sm_90; needs the CUDA toolkit, not a GPU
check-kernels: dev/check_kernels
	dev/check_kernels

# the test program compiles the developer build (tests/test_main.c includes "fat5.h": build/dev's)
TEST_INC = -Ibuild/dev -I.
tests/run_tests: $(TESTSRC) $(DEV_H) fat5_kernels.cuh
	$(CC) -std=c99 $(WARN) $(CFLAGS) $(TEST_INC) -o $@ tests/test_main.c $(LDLIBS)

# clang when it is installed (its UBSan checks more, e.g. arithmetic on null pointers), else $(CC)
ASAN_CC ?= $(if $(shell command -v clang 2>/dev/null),clang,$(CC))
tests/run_tests_asan: $(TESTSRC) $(DEV_H) fat5_kernels.cuh
	$(ASAN_CC) -std=c99 $(WARN) -O1 -g $(ASAN) $(TEST_INC) -o $@ tests/test_main.c $(LDLIBS)

tests/test_cpp: tests/test_cpp.cpp fat5.h fat5_kernels.cuh
	$(CXX) -std=c++11 $(WARN) $(CFLAGS) -o $@ $< $(LDLIBS)

test-cpp: tests/test_cpp
	tests/test_cpp

# the mirrored CUDA constants and prototypes against the real headers, when they are installed
CUDA_INC ?= $(firstword $(wildcard $(CUDA_HOME)/include/cuda.h /usr/local/cuda/include/cuda.h))
# nccl.h, where installed: the NCCL mirrors are checked too
NCCL_INC ?= $(firstword $(wildcard $(NCCL_HOME)/include/nccl.h $(dir $(CUDA_INC))nccl.h /usr/include/nccl.h))
test-abi:
ifneq ($(CUDA_INC),)
	$(CC) -std=c99 $(WARN) -O1 -I$(dir $(CUDA_INC)) $(if $(NCCL_INC),-DFAT5_ABI_NCCL -I$(dir $(NCCL_INC))) \
	    -o tests/test_abi tests/test_abi.c -ldl -lm -lpthread
	tests/test_abi
else
	@echo "test-abi: SKIP (no CUDA headers found)"
endif

# the CPU-only build (FAT5_NO_CUDA): compiles and runs the quick start on a fixture; again with
# FAT5_NO_THREADS, linked with -lm alone; and FAT5_NO_THREADS with the GPU path compiled in (at
# -O1, where gcc's truncation warnings see other inlining)
test-nocuda: examples/quickstart.c fat5.h
	@mkdir -p build
	$(CC) -std=c99 $(WARN) $(CFLAGS) -DFAT5_NO_CUDA -o build/quickstart_nocuda examples/quickstart.c -lm -lpthread
	build/quickstart_nocuda tests/data/t5_v11_gated_gelu_untied
	$(CC) -std=c99 $(WARN) $(CFLAGS) -DFAT5_NO_CUDA -DFAT5_NO_THREADS -o build/quickstart_nothreads examples/quickstart.c -lm
	build/quickstart_nothreads tests/data/t5_v11_gated_gelu_untied
	$(CC) -std=c99 $(WARN) -O1 -DFAT5_NO_THREADS -o build/quickstart_nothreads_gpu examples/quickstart.c -lm -ldl
	build/quickstart_nothreads_gpu tests/data/t5_v11_gated_gelu_untied

test-tools: $(TOOLS) $(EXAMPLES) dev/dist_check
	tests/test_tools.sh

# The README's ```c blocks compile exactly as written (C99, -Wall -Wextra -Wpedantic -Werror) against
# fat5.h, linked with build/fat5_impl.o, and run on tests/data/t5_spiece (a tiny model with its own
# tokenizer; dev/make_text_fixture.sh rewrites it). Under a second.
check-readme: tests/check_readme.sh README.md fat5.h build/fat5_impl.o
	CC="$(CC)" tests/check_readme.sh README.md

# Build options (tests/test_options.c): FAT5_STATIC warning-free and running, a user FAT5_API
# (exports of a -fvisibility=hidden shared object), and a system header before the
# implementation: working with _POSIX_C_SOURCE, else the #error that names the fix (glibc).
OPT_CC = $(CC) -std=c99 $(WARN) -O0
test-options: tests/test_options.c fat5.h fat5_kernels.cuh
	@mkdir -p build
	$(OPT_CC) -DOPT_STATIC -o build/test_options_static tests/test_options.c $(LDLIBS)
	build/test_options_static
	$(OPT_CC) -DOPT_SYSFIRST -DOPT_POSIX -o build/test_options_sysfirst tests/test_options.c $(LDLIBS)
	build/test_options_sysfirst
	$(OPT_CC) -DOPT_API -fPIC -shared -fvisibility=hidden -o build/test_options_api.so tests/test_options.c $(LDLIBS)
	@nm -D --defined-only build/test_options_api.so | grep -q ' T fat5_model_load$$' || \
	    { echo "test-options: a user FAT5_API did not export fat5_model_load"; exit 1; }
	@if $(OPT_CC) -DOPT_SYSFIRST -fsyntax-only tests/test_options.c > build/test_options_err.txt 2>&1; then \
	    echo "test-options: stdio.h first compiled under -std=c99 (fine unless glibc)"; \
	elif grep -q '_POSIX_C_SOURCE 200809L before' build/test_options_err.txt; then \
	    echo "test-options: stdio.h first without _POSIX_C_SOURCE: the #error names the fix"; \
	else cat build/test_options_err.txt; echo "test-options: FAILED (no #error naming the fix)"; exit 1; fi
	@echo "test-options: ok"

# The edit loop: the CPU tests only (FAT5_NO_CUDA: no NVRTC, no C++/static builds, no tools).
tests/run_tests_quick: $(TESTSRC) $(DEV_H)
	$(CC) -std=c99 $(WARN) -O1 -DFAT5_NO_CUDA $(TEST_INC) -o $@ tests/test_main.c -lm -lpthread

test-quick: tests/run_tests_quick
	tests/run_tests_quick

# make test: every check below, as many at a time as the machine has cores (each one's output kept
# together), then the test runner's summary, whose last line is "N passed, N failed"
NPROC := $(shell nproc 2>/dev/null || echo 2)
TEST_PARTS = check-amalgamate check-layers check-embed check-unicode check-readme test-abi all test-cpp \
             test-nocuda test-options test-tools test-serve run-tests
test:
	@$(MAKE) --no-print-directory -j$(NPROC) -Otarget $(TEST_PARTS)
	@tail -n 2 build/run_tests.log

# the test runner in two shards at once (FAT5_TEST_SHARD), their output kept in build/run_tests.log
# (printed whole on a failure), its last two lines the sums of both
run-tests: tests/run_tests
	@mkdir -p build
	@(FAT5_TEST_SHARD=0/2 tests/run_tests > build/run_tests.0.log 2>&1; echo $$? > build/run_tests.0.rc) & \
	 (FAT5_TEST_SHARD=1/2 tests/run_tests > build/run_tests.1.log 2>&1; echo $$? > build/run_tests.1.rc); wait
	@cat build/run_tests.0.log build/run_tests.1.log | awk '/^[0-9]+ skipped$$/ { s += $$1; next } \
	     /^[0-9]+ passed, [0-9]+ failed$$/ { p += $$1; f += $$3; next } { print } \
	     END { print s " skipped"; print p " passed, " f " failed" }' > build/run_tests.log
	@test "$$(cat build/run_tests.0.rc build/run_tests.1.rc)" = "$$(printf '0\n0')" || { cat build/run_tests.log; exit 1; }
	@grep -E '^\[(SKIP|FAIL)\]' build/run_tests.log || true

# examples/serve end to end over loopback HTTP (CPU, a few seconds): tests/test_serve.c says what
# it checks; tests/test_serve SERVE_BINARY runs it against another build (e.g. a sanitized one)
tests/test_serve: tests/test_serve.c examples/serve_request.h fat5.h build/fat5_impl.o
	$(CC) -std=c99 $(WARN) $(CFLAGS) -DFAT5__IMPL_DONE -o $@ $< build/fat5_impl.o $(LDLIBS)

test-serve: examples/serve tests/test_serve
	tests/test_serve examples/serve

# make test and the slow checks: every kernel compiled by NVRTC, part by part as the runtime does (7 minutes on two cores)
check: test check-kernels

test-asan: tests/run_tests_asan
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 tests/run_tests_asan

# libFuzzer targets (clang): each runs FUZZ_SECONDS on a seed corpus built from tests/data, after
# replaying its saved crash inputs in tests/fuzz/regressions/<target>/. Any crash, leak, UB or
# timeout fails. New findings are written to build/fuzz/crash-<target>-*. The library is compiled
# once (build/fuzz/fat5_fuzz.o, instrumented) and linked into every target's harness.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 30
FUZZ_TARGETS  = safetensors config index batch model_dir tokenizer tokenizer_dir tokens generation_config resume pairs tasks toktrain \
                serve_request
FUZZ_COMMON   = -std=c99 -O1 -g -fno-sanitize-recover=all -fno-omit-frame-pointer -D_POSIX_C_SOURCE=200809L \
                -DFUZZ_DATA_DIR='"$(CURDIR)/tests/data/t5_v10_relu_tied"' -Wall -Wextra -Werror
FUZZ_FLAGS    = -fsanitize=fuzzer,address,undefined $(FUZZ_COMMON)
FUZZ_BINS     = $(FUZZ_TARGETS:%=build/fuzz/fuzz_%)

build/fuzz/fat5_fuzz.o: tests/fuzz/fat5_impl.c fat5.h
	@mkdir -p build/fuzz
	$(FUZZ_CC) -fsanitize=fuzzer-no-link,address,undefined $(FUZZ_COMMON) -c -o $@ $<

build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_util.h fat5.h build/fuzz/fat5_fuzz.o
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< build/fuzz/fat5_fuzz.o -lm -lpthread

build/fuzz/make_seeds: tests/fuzz/make_seeds.c tests/fuzz/fuzz_util.h fat5.h
	@mkdir -p build/fuzz
	$(CC) -std=c99 $(WARN) -O1 -g -DFUZZ_DATA_DIR='"$(CURDIR)/tests/data/t5_v10_relu_tied"' -o $@ $< -lm -lpthread

build/fuzz/fuzz_serve_request: examples/serve_request.h

# hand-written seeds: tests/fuzz/seeds/<target>/ join that target's corpus
build/fuzz/seeds.stamp: build/fuzz/make_seeds $(wildcard tests/data/*/*) $(wildcard tests/data/tokenizers/*/*) \
                        $(wildcard tests/fuzz/seeds/*/*)
	build/fuzz/make_seeds build/fuzz $(patsubst %/,%,$(sort $(dir $(wildcard tests/data/*/config.json))))
	@for d in tests/fuzz/seeds/*/; do t=$$(basename $$d); mkdir -p build/fuzz/corpus_$$t; cp $$d* build/fuzz/corpus_$$t/; done
	@touch $@

# Each target's scratch directory lives under build/fuzz/tmp (a target removes its own at exit;
# a process killed by libFuzzer cannot, so the directory is emptied after every run too).
fuzz: $(FUZZ_BINS) build/fuzz/seeds.stamp
	@set -e; export TMPDIR=$(CURDIR)/build/fuzz/tmp; mkdir -p $$TMPDIR; \
	for t in $(FUZZ_TARGETS); do \
	    reg=$$(ls -d tests/fuzz/regressions/$$t/* 2>/dev/null || true); \
	    if [ -n "$$reg" ]; then echo "fuzz_$$t: replaying $$(echo $$reg | wc -w) saved inputs"; \
	        ASAN_OPTIONS=detect_leaks=1 build/fuzz/fuzz_$$t $$reg > build/fuzz/$$t.replay.log 2>&1 || \
	        { tail -40 build/fuzz/$$t.replay.log; echo "fuzz_$$t: a saved input fails"; exit 1; }; fi; \
	    echo "fuzz_$$t: $(FUZZ_SECONDS) s"; \
	    ASAN_OPTIONS=detect_leaks=1 build/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=20 \
	        -print_final_stats=1 -artifact_prefix=build/fuzz/crash-$$t- build/fuzz/corpus_$$t \
	        > build/fuzz/$$t.log 2>&1 || { tail -60 build/fuzz/$$t.log; echo "fuzz_$$t: FAILED"; exit 1; }; \
	    grep -E '^stat::number_of_executed_units|^Done' build/fuzz/$$t.log | tr '\n' ' '; echo; \
	    rm -rf $$TMPDIR/fat5_fuzz_*; \
	done

clean:
	rm -rf build $(TOOLS) $(EXAMPLES) $(DEVPROGS) tests/run_tests tests/run_tests_asan tests/run_tests_quick tests/test_cpp tests/test_abi \
	      tests/test_serve
