// fat5_impl.c — the library, compiled once for every libFuzzer target (make fuzz builds it with
// -fsanitize=fuzzer-no-link,address,undefined into build/fuzz/fat5_fuzz.o and links each target's
// harness against it), so that adding a target costs a harness, not another build of fat5.h.
#define FAT5_IMPLEMENTATION
#define FAT5_NO_CUDA
#include "../../fat5.h"
