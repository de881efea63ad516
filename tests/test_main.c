// The test program: one translation unit with the implementation, every test file, and the table.
//     make test            all tests (GPU tests skip without a device)
//     tests/run_tests NAME only the tests whose name contains NAME
#define FAT5_IMPLEMENTATION
#define FAT5__BPE_PAR_MIN 4    // the BPE trainer replaces a merge's words on the threads from 4 words on
#define FAT5__ENC_FFN_ROWS 16  // the encoder-only FFN in chunks of 16 tokens: the fixtures' inputs take several
#define FAT5_TEST_FAULTS       // the file-system calls of saves ask a hook first (tests/test_crash.c)
#include "fat5.h"  // the developer build, build/dev/fat5.h (make adds -Ibuild/dev)
#include "fat5_test.h"

#include <sys/stat.h>
#include <dirent.h>

#include "test_base.c"
#include "test_io.c"
#include "test_cpu_ops.c"
#include "test_model.c"
#include "test_heads_config.c"
#include "test_posenc.c"
#include "test_data.c"
#include "test_optim.c"
#include "test_train.c"
#include "test_crash.c"      // after test_train.c: its corpus and configuration
#include "test_decode.c"
#include "test_generate.c"
#include "test_generate_options.c"  // after test_generate.c: its tgen_ helpers
#include "test_engine.c"     // after test_generate.c: its tgen_ helpers
#include "test_longt5.c"     // after test_decode.c: reuses its inputs and forward
#include "test_unicode.c"
#include "test_tokenizer.c"
#include "test_toktrain.c"
#include "test_toktrain_bpe.c"
#include "test_toktrain_charsmap.c"
#include "test_metrics.c"
#include "test_pairs.c"
#include "test_finetune.c"
#include "test_toktrain_unigram.c"
#ifndef FAT5_NO_CUDA
#include "test_gpu_dev.c"
#include "test_gpu_ops.c"
#include "test_gpu_model.c"
#else
#define FAT5_TESTS_GPU_DEV(X)
#define FAT5_TESTS_GPU_OPS(X)
#define FAT5_TESTS_GPU_MODEL(X)
#endif
#include "test_freeze.c"
#include "test_export.c"     // after test_train.c and test_model.c: their helpers     // after test_train.c and test_gpu_model.c: their helpers
#include "test_ops_table.c"  // after test_gpu_ops.c (its tolerances, tg_open); without CUDA: ops_table_cpu_a, _b
#include "test_dropout.c"
#include "test_heads.c"
#include "test_tasks.c"      // after test_finetune.c and test_model.c (tft_, tm_ helpers)      // after test_model.c and test_cpu_ops.c (tm_, tc_ helpers)    // after the files whose helpers it uses (tc_, tm_, ttr_, tgm_)

static const fat5_test_case fat5_cases[] = {
    FAT5_TESTS_BASE(FAT5_TEST_ENTRY)
    FAT5_TESTS_IO(FAT5_TEST_ENTRY)
    FAT5_TESTS_CPU_OPS(FAT5_TEST_ENTRY)
    FAT5_TESTS_MODEL(FAT5_TEST_ENTRY)
    FAT5_TESTS_HEADS_CONFIG(FAT5_TEST_ENTRY)
    FAT5_TESTS_POSENC(FAT5_TEST_ENTRY)
    FAT5_TESTS_LONGT5(FAT5_TEST_ENTRY)
    FAT5_TESTS_DATA(FAT5_TEST_ENTRY)
    FAT5_TESTS_OPTIM(FAT5_TEST_ENTRY)
    FAT5_TESTS_TRAIN(FAT5_TEST_ENTRY)
    FAT5_TESTS_CRASH(FAT5_TEST_ENTRY)
    FAT5_TESTS_DECODE(FAT5_TEST_ENTRY)
    FAT5_TESTS_GENERATE(FAT5_TEST_ENTRY)
    FAT5_TESTS_GENERATE_OPTIONS(FAT5_TEST_ENTRY)
    FAT5_TESTS_ENGINE(FAT5_TEST_ENTRY)
    FAT5_TESTS_UNICODE(FAT5_TEST_ENTRY)
    FAT5_TESTS_TOKENIZER(FAT5_TEST_ENTRY)
    FAT5_TESTS_TOKTRAIN(FAT5_TEST_ENTRY)
    FAT5_TESTS_TOKTRAIN_BPE(FAT5_TEST_ENTRY)
    FAT5_TESTS_TOKTRAIN_CHARSMAP(FAT5_TEST_ENTRY)
    FAT5_TESTS_METRICS(FAT5_TEST_ENTRY)
    FAT5_TESTS_PAIRS(FAT5_TEST_ENTRY)
    FAT5_TESTS_FINETUNE(FAT5_TEST_ENTRY)
    FAT5_TESTS_TOKTRAIN_UNIGRAM(FAT5_TEST_ENTRY)
    FAT5_TESTS_GPU_DEV(FAT5_TEST_ENTRY)
    FAT5_TESTS_GPU_OPS(FAT5_TEST_ENTRY)
    FAT5_TESTS_OPS_TABLE(FAT5_TEST_ENTRY)
    FAT5_TESTS_GPU_MODEL(FAT5_TEST_ENTRY)
    FAT5_TESTS_FREEZE(FAT5_TEST_ENTRY)
    FAT5_TESTS_EXPORT(FAT5_TEST_ENTRY)
    FAT5_TESTS_DROPOUT(FAT5_TEST_ENTRY)
    FAT5_TESTS_HEADS(FAT5_TEST_ENTRY)
    FAT5_TESTS_TASKS(FAT5_TEST_ENTRY)
};

int main(int argc, char **argv) {
    return fat5_test_main(fat5_cases, sizeof fat5_cases / sizeof fat5_cases[0], argc, argv);
}
