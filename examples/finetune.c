// Fine-tunes a T5 on (input, target) pairs, with Hugging Face Seq2SeqTrainer / run_summarization's
// argument names: examples/train.c built as fine-tuning's program (its name, presets and options).
//     cc -std=c99 -O2 -o examples/finetune examples/finetune.c -lm -ldl -lpthread
//
//     examples/finetune --model_name_or_path path/to/t5 --train_file train.jsonl
//         --validation_file validation.jsonl --source_prefix "summarize: " --output_dir out   (one line)
//     examples/finetune --resume out                       # continue where it stopped, bit-identically
//     examples/finetune --help                             # every option, with its default
//
// The training loop is the library's (fat5_train_create with a train_file: docs/finetuning.md):
// rows read and tokenized with the checkpoint's tokenizer (or byte-level ids), packed into
// micro-batches of at most --per_device_train_batch_size rows and --batch-tokens /
// --batch-labels-tokens tokens, shuffled each epoch by --seed; evaluation every --eval_steps and
// at the end (validation loss; with --predict_with_generate, generated text scored by exact match,
// F1, ROUGE and BLEU, its predictions in OUTPUT_DIR/eval_predictions.jsonl); checkpoints every
// --save_steps, OUTPUT_DIR/best naming the best by --metric_for_best_model. Everything else
// (devices, ranks, --config, --resume, Ctrl-C) is as examples/train's header describes.
#define TRAIN_FINETUNE 1
#include "train.c"
