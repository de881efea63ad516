#!/bin/sh
# The command-line tools on the fixtures: fat5_inspect on good and bad input, fat5_forward's loss
# against the loss of each fixture's reference (tests/data/*/reference.safetensors metadata:
# transformers, or for the posenc_* fixtures make_reference.py's position-encoding model).
# Then pretokenize, train, plot_metrics, generate, fat5_init, and the tokenizer tools (fat5_tokenize,
# pretokenize --tokenizer, generate --tokenizer) on tests/data/tokenizers.
set -u
out=${TMPDIR:-/tmp}/fat5_tools_$$
mkdir -p "$out"
trap 'rm -rf "$out"' EXIT
fail=0
check() { if "$@"; then :; else echo "test_tools: FAILED: $*"; fail=1; fi; }

for d in tests/data/*/; do
    d=${d%/}
    [ -f "$d/config.json" ] || continue   # tests/data/tokenizers, tests/data/unicode: not models
    check tools/fat5_inspect "$d" > "$out/inspect.txt"
    # T5 buckets: the bias table is listed (posenc fixtures of other encodings have none, or FIRE's MLP)
    if ! grep -q '"position_encoding_type"' "$d/config.json" || grep -q '"position_encoding_type": "t5"' "$d/config.json"; then
        check grep -q "relative_attention_bias" "$out/inspect.txt"
    elif grep -q '"position_encoding_type": "FIRE"' "$d/config.json"; then
        check grep -q "pe_encoding.mlp.0.weight" "$out/inspect.txt"
    fi
    [ -f "$d/reference.safetensors" ] || continue   # t5_spiece: no transformers reference (check-readme runs it)
    case $d in */heads_*) continue ;; esac           # task heads: their batches are tests/test_heads.c's
    check tools/fat5_forward "$d" "$d/batch.json" "$out/logits.safetensors" > "$out/fwd.txt"
    want=$(tools/fat5_inspect "$d/reference.safetensors" | sed -n 's/^  metadata loss = //p')
    got=$(tools/fat5_inspect "$out/logits.safetensors" | sed -n 's/^  metadata loss = //p')
    check awk -v a="$got" -v b="$want" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b != "" && d <= 1e-4 * (b < 0 ? -b : b)) }'
    echo "test_tools: $d: loss $got (transformers $want)"
done
# a truncated file: non-zero exit, one line on stderr naming the problem
head -c 100 tests/data/t5_v10_relu_tied/model.safetensors > "$out/trunc.safetensors"
if tools/fat5_inspect "$out/trunc.safetensors" > /dev/null 2> "$out/err.txt"; then
    echo "test_tools: FAILED: fat5_inspect accepted a truncated file"; fail=1
fi
check test "$(wc -l < "$out/err.txt")" -eq 1
check grep -q "past the end" "$out/err.txt"
if tools/fat5_inspect "$out/missing_dir" > /dev/null 2>&1; then
    echo "test_tools: FAILED: fat5_inspect accepted a missing path"; fail=1
fi
# st_file HEADER FILE: a safetensors file with that (ASCII) header and no data bytes
st_file() {
    n=${#1}
    printf "\\$(printf %03o $((n % 256)))\\$(printf %03o $((n / 256 % 256)))\\000\\000\\000\\000\\000\\000%s" "$1" > "$2"
}
# a zero-element tensor whose other dimensions multiply past int64: 0 elements, no overflow. The
# tool is also built with UBSan here, where the old unchecked product aborted.
big=4611686018427387904
st_file "{\"z\":{\"dtype\":\"F32\",\"shape\":[$big,$big,0],\"data_offsets\":[0,0]}}" "$out/zero.safetensors"
check tools/fat5_inspect "$out/zero.safetensors" > "$out/zero.txt"
check grep -q "^  z .*F32   \[$big, $big, 0\]$" "$out/zero.txt"
check grep -q "^0 elements$" "$out/zero.txt"
if ${CC:-cc} -std=c99 -O1 -g -fsanitize=undefined -fno-sanitize-recover=all -o "$out/inspect_ubsan" \
        tools/fat5_inspect.c -lm -ldl -lpthread 2> "$out/ubsan_build.txt"; then
    check "$out/inspect_ubsan" "$out/zero.safetensors" > "$out/zero_ubsan.txt"
    check grep -q "^0 elements$" "$out/zero_ubsan.txt"
else
    echo "test_tools: SKIP: the UBSan build of fat5_inspect (no -fsanitize=undefined here)"
fi
# names and metadata from the file never reach the terminal as control bytes
esc=$(printf '\033')
st_file '{"__metadata__":{"k\u001b[2J":"v\u001b]0;x\u0007"},"t\u001b[31m":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}' \
    "$out/esc.safetensors"
check tools/fat5_inspect "$out/esc.safetensors" > "$out/esc.txt"
check grep -q 'metadata k\\x1B\[2J = v\\x1B\]0;x\\x07$' "$out/esc.txt"
check grep -q '^  t?\[31m ' "$out/esc.txt"
if grep -q "$esc" "$out/esc.txt"; then echo "test_tools: FAILED: raw ESC in fat5_inspect output"; fail=1; fi
# a file of another kind: one line, no number made of its bytes
printf 'plain text, not a safetensors file\n' > "$out/text.safetensors"
if tools/fat5_inspect "$out/text.safetensors" > /dev/null 2> "$out/err.txt"; then
    echo "test_tools: FAILED: fat5_inspect accepted a text file"; fail=1
fi
check grep -q "not a safetensors file" "$out/err.txt"
if grep -q '[0-9]\{10\}' "$out/err.txt"; then echo "test_tools: FAILED: a header length of text bytes"; fail=1; fi
# tools/pretokenize: text -> token file, byte for byte against ids computed here from the text
# with od (byte + 3, eos 1 after each document) and the documented 32-byte header.
pt_want() {   # the ids of the documents given as arguments, one per line
    for doc in "$@"; do
        printf '%s' "$doc" | od -An -v -tu1 | tr -s ' \n' '\n\n' | grep -v '^$' | awk '{ print $1 + 3 }'
        echo 1
    done
}
pt_got() {    # the ids of a 2-byte token file, one per line
    od -An -v -tu1 -j32 "$1" | tr -s ' \n' '\n\n' | grep -v '^$' | awk 'NR % 2 == 1 { lo = $1; next } { print lo + 256 * $1 }'
}
pt_check() { # NAME FILE DOC...: the file's ids are those of the documents
    name=$1; f=$2; shift 2
    pt_want "$@" > "$out/pt_want.txt"
    pt_got "$f" > "$out/pt_got.txt"
    if ! cmp -s "$out/pt_want.txt" "$out/pt_got.txt"; then
        echo "test_tools: FAILED: pretokenize $name: ids differ"; diff "$out/pt_want.txt" "$out/pt_got.txt" | head -5; fail=1
    fi
}
printf 'h\303\251llo\nworld\n\nsecond para\n \n\nthird\n' > "$out/a.txt"
printf 'one\n%%\ntwo\n\nlines\n%%\n%%\nthree\n' > "$out/fortune.txt"
check tools/pretokenize --sep line -o "$out/line.tok" "$out/a.txt" 2> "$out/pt_err.txt"
check grep -q "5 documents" "$out/pt_err.txt"
pt_check line "$out/line.tok" "héllo" "world" "second para" " " "third"
check test "$(od -An -v -tx1 -N32 "$out/line.tok" | tr -d ' \n')" = \
    "46415435544f4b00010000000200000080010000000000000100000000000000"
check tools/pretokenize --sep blank -o "$out/blank.tok" "$out/a.txt" 2> /dev/null
pt_check blank "$out/blank.tok" "héllo
world" "second para" "third"
check tools/pretokenize -o "$out/pct.tok" --sep % "$out/fortune.txt" 2> /dev/null
pt_check % "$out/pct.tok" "one" "two

lines" "three"
check tools/pretokenize -o "$out/file.tok" "$out/a.txt" - < "$out/fortune.txt" 2> /dev/null
pt_check file "$out/file.tok" "$(cat "$out/a.txt")
" "$(cat "$out/fortune.txt")
"
check tools/pretokenize --width 4 --vocab 70000 -o "$out/w4.tok" "$out/a.txt" 2> /dev/null
check test "$(od -An -v -tx1 -N32 "$out/w4.tok" | tr -d ' \n')" = \
    "46415435544f4b00010000000400000070110100000000000100000000000000"
check test "$(wc -c < "$out/w4.tok")" -eq $((32 + 4 * ($(wc -c < "$out/a.txt") + 1)))
# errors: invalid UTF-8 names the file and the byte; no input, a FIFO, no output: non-zero, no file
printf 'ok\nbad \377 byte\n' > "$out/bad.txt"
if tools/pretokenize -o "$out/bad.tok" "$out/bad.txt" 2> "$out/pt_err.txt"; then
    echo "test_tools: FAILED: pretokenize accepted invalid UTF-8"; fail=1
fi
check grep -q "bad.txt: line 2, byte 7: not valid UTF-8" "$out/pt_err.txt"
check test ! -e "$out/bad.tok"
printf '\n\n' > "$out/empty.txt"
if tools/pretokenize --sep line -o "$out/empty.tok" "$out/empty.txt" 2> "$out/pt_err.txt"; then
    echo "test_tools: FAILED: pretokenize wrote a file without documents"; fail=1
fi
check grep -q "no document" "$out/pt_err.txt"
mkfifo "$out/fifo.txt"
if tools/pretokenize -o "$out/f.tok" "$out/fifo.txt" 2> "$out/pt_err.txt"; then
    echo "test_tools: FAILED: pretokenize read a FIFO"; fail=1
fi
check grep -q "not a regular file" "$out/pt_err.txt"
if tools/pretokenize "$out/a.txt" 2> "$out/pt_err.txt"; then echo "test_tools: FAILED: no -o accepted"; fail=1; fi
check grep -q "usage" "$out/pt_err.txt"
if tools/pretokenize --width 3 -o "$out/x.tok" "$out/a.txt" 2> /dev/null; then echo "test_tools: FAILED: --width 3"; fail=1; fi

# examples/train: Ctrl-C writes a checkpoint and exits 130; --resume finishes the run, and the
# metrics log then holds every step once
for i in $(seq 1 40); do echo "line $i of a small corpus: the quick brown fox jumps over the lazy dog"; done > "$out/c.txt"
check tools/pretokenize --sep line -o "$out/c.tok" "$out/c.txt" 2> /dev/null
topts="--device cpu --data $out/c.tok --output_dir $out/run --model tiny --d_model 32 --d_ff 64 --num_heads 2
  --d_kv 16 --num_layers 1 --num_decoder_layers 1 --max_length 48 --max_labels_length 48 --batch_tokens 192
  --batch_labels_tokens 192 --save_steps 0 --eval_fraction 0 --denoisers t5 --logging_steps 1 --warmup_steps 1"
examples/train $topts --max_steps 1000000 > "$out/train1.txt" 2>&1 &
tpid=$!
for i in $(seq 1 300); do
    [ -f "$out/run/metrics.jsonl" ] && [ "$(wc -l < "$out/run/metrics.jsonl")" -ge 3 ] && break
    sleep 0.1
done
kill -INT $tpid
wait $tpid
check test $? -eq 130
check grep -q "interrupted; checkpoint" "$out/train1.txt"
steps=$(sed -n 's/^step-0*//p' "$out/run/latest")
check test "${steps:-0}" -ge 3
check examples/train $topts --resume "$out/run" --max_steps $((steps + 2)) > "$out/train2.txt" 2>&1
check test "$(wc -l < "$out/run/metrics.jsonl")" -eq $((steps + 2))
check test "$(cat "$out/run/latest")" = "$(printf 'step-%08d' $((steps + 2)))"
echo "test_tools: examples/train: Ctrl-C at step $steps, resumed to $((steps + 2))"
# examples/train pre-trains a model of another position encoding (a FAT5 model); it saves and resumes
for pe in FIRE "RoPE --rotary_emb_fraction 0.5 --rotary_scale_base 64" "ALiBi --alibi_mode asymetric"; do
    rm -rf "$out/run_pe"
    examples/train $topts --output_dir "$out/run_pe" --max_steps 3 --save_steps 2 --position_encoding_type $pe \
        > "$out/train_pe.txt" 2>&1 || { echo "test_tools: FAILED: examples/train --position_encoding_type $pe"; fail=1; }
    check grep -q '"model_type": "flash_t5"' "$out/run_pe/step-00000003/config.json"
    check grep -q "\"position_encoding_type\": \"${pe%% *}\"" "$out/run_pe/step-00000003/config.json"
    check examples/train $topts --output_dir "$out/run_pe" --resume "$out/run_pe" --max_steps 4 \
        --position_encoding_type $pe > "$out/train_pe2.txt" 2>&1
    check grep -q "step 4/4" "$out/train_pe2.txt"
done
echo "test_tools: examples/train: FIRE, RoPE + xPos and asymmetric ALiBi models trained, saved and resumed"
# data parallel on CPU processes: the sums across ranks bit for bit, and failures that stop the run
check dev/dist_check --ranks 3 > "$out/dist.txt"
check grep -q "rank 2: .* bit-exact" "$out/dist.txt"
check dev/dist_check --ranks 2 --kill 1 > "$out/dist_kill.txt"
check grep -q "rank 0 stops: rank 1 failed: killed by signal 9" "$out/dist_kill.txt"
check dev/dist_check --ranks 3 --hang 2 --timeout 2 > "$out/dist_hang.txt"
# rank 0 either timed out itself or saw rank 1 time out first: either way it names rank 2
check grep -qE "rank 0 stops: rank 2 (did not answer|failed: did not answer)" "$out/dist_hang.txt"
check grep -q "rank 2's failure stopped the run" "$out/dist_hang.txt"
# examples/train --ranks 2 x batch B follows --gradient_accumulation_steps 2 x B on one rank (to
# rounding: the sums add in another order); a 2-rank run resumed from its step-3 checkpoint is
# bit-identical to the uninterrupted one; its checkpoint resumes on one rank too
dopts="--device cpu --data $out/c.tok --model tiny --d_model 32 --d_ff 64 --num_heads 2 --d_kv 16 --num_layers 1
  --num_decoder_layers 1 --max_length 48 --max_labels_length 48 --batch_tokens 96 --batch_labels_tokens 96
  --save_steps 3 --eval_fraction 0.2 --eval_steps 3 --eval_batches 3 --denoisers t5 --logging_steps 1
  --warmup_steps 1 --max_steps 6"
losses() { sed -n 's/.*"loss": \([^,]*\),.*/\1/p' "$1"; }
check examples/train $dopts --output_dir "$out/d1" --gradient_accumulation_steps 2 > "$out/d1.txt" 2>&1
check test "$(grep -c "nothing to do" "$out/d1.txt")" -eq 0   # a run that trained does not say it had nothing to do
check examples/train $dopts --output_dir "$out/d2" --ranks 2 > "$out/d2.txt" 2>&1
check grep -q "2 CPU ranks" "$out/d2.txt"
check grep -q "scaling" "$out/d2.txt"
check grep -q '"world_size": 2, "tokens_per_s_gpu"' "$out/d2/metrics.jsonl"
check test "$(grep -c '"eval_loss"' "$out/d2/metrics.jsonl")" -eq 2
losses "$out/d1/metrics.jsonl" > "$out/l1"
losses "$out/d2/metrics.jsonl" > "$out/l2"
check test "$(wc -l < "$out/l2")" -eq 6
check awk 'NR == FNR { a[FNR] = $1; next } { d = $1 - a[FNR]; if (d < 0) d = -d; if (d > 1e-5 * a[FNR]) bad = 1 }
  END { exit bad }' "$out/l1" "$out/l2"
mkdir -p "$out/d3"
cp -r "$out/d2/step-00000003" "$out/d3/"
echo step-00000003 > "$out/d3/latest"
check examples/train $dopts --output_dir "$out/d3" --ranks 2 --resume "$out/d3" > "$out/d3.txt" 2>&1
check cmp "$out/d2/step-00000006/model.safetensors" "$out/d3/step-00000006/model.safetensors"
# the optimizer moments at the end of the state file (its header holds the elapsed time)
tail -c 65536 "$out/d2/step-00000006/training_state.safetensors" > "$out/m2"
tail -c 65536 "$out/d3/step-00000006/training_state.safetensors" > "$out/m3"
check cmp "$out/m2" "$out/m3"
losses "$out/d3/metrics.jsonl" > "$out/l3"
check test "$(tail -n 3 "$out/l2")" = "$(cat "$out/l3")"
check examples/train $dopts --output_dir "$out/d4" --gradient_accumulation_steps 2 --resume "$out/d2/step-00000003" \
    > "$out/d4.txt" 2>&1
check grep -q "step 6/6" "$out/d4.txt"
echo "test_tools: examples/train --ranks 2: the curve of one rank x 2 micro-batches; resumed bit-identically on 2 ranks, and on 1"
# examples/finetune with Hugging Face's argument names: a JSONL file with a held-out share; the
# files it writes (eval_* scores in metrics.jsonl, predictions, best); --ranks 2 follows
# --gradient_accumulation_steps 2 on one rank; a resume extends the run, its log holding every step once
for i in $(seq 1 60); do printf '{"input": "w%d ab", "target": "ab w%d"}\n' $i $i; done > "$out/ft.jsonl"
fopts="--device cpu --model tiny --d_model 32 --d_ff 64 --num_heads 2 --d_kv 16 --num_layers 1 --num_decoder_layers 1
  --train_file $out/ft.jsonl --eval_fraction 0.25 --per_device_train_batch_size 4 --max_source_length 32
  --max_target_length 32 --generation_max_length 8 --logging_steps 1 --max_steps 4 --eval_steps 2 --save_steps 2
  --optim adamw --learning_rate 1e-3 --metric_for_best_model rougeL"
check examples/finetune $fopts --output_dir "$out/f1" --gradient_accumulation_steps 2 > "$out/f1.txt" 2>&1
check examples/finetune $fopts --output_dir "$out/f2" --ranks 2 > "$out/f2.txt" 2>&1
check grep -q "eval loss .* rougeL .* at step 4" "$out/f1.txt"
check grep -q "best checkpoint by rougeL" "$out/f1.txt"
check test "$(grep -c '"eval_rougeL"' "$out/f1/metrics.jsonl")" -eq 2
check test "$(grep -c '"eval_rougeL"' "$out/f2/metrics.jsonl")" -eq 2
check test "$(wc -l < "$out/f1/eval_predictions.jsonl")" -ge 5
check cmp -s "$out/f1/eval_predictions.jsonl" "$out/f1/step-00000004/predictions.jsonl"
check grep -q '^step-0000000[24]$' "$out/f1/best"
losses "$out/f1/metrics.jsonl" > "$out/fl1"
losses "$out/f2/metrics.jsonl" > "$out/fl2"
check test "$(wc -l < "$out/fl2")" -eq 4
check awk 'NR == FNR { a[FNR] = $1; next } { d = $1 - a[FNR]; if (d < 0) d = -d; if (d > 1e-5 * a[FNR]) bad = 1 }
  END { exit bad }' "$out/fl1" "$out/fl2"
# the same rows pretokenized (pretokenize --pairs) train the same curve, read from disk
check tools/pretokenize --pairs --max-source-length 32 --max-target-length 32 -o "$out/ft.tok" "$out/ft.jsonl" 2> "$out/ptp.txt"
check grep -q "60 rows (120 documents" "$out/ptp.txt"
check examples/finetune $fopts --output_dir "$out/f4" --train_file "$out/ft.tok" --gradient_accumulation_steps 2 \
    > "$out/f4.txt" 2>&1
losses "$out/f4/metrics.jsonl" > "$out/fl4"
check cmp -s "$out/fl1" "$out/fl4"
# Hugging Face's bare flag, and beams
check examples/finetune $fopts --output_dir "$out/f5" --max_steps 2 --predict_with_generate --generation_num_beams 2 \
    > "$out/f5.txt" 2>&1
check grep -q '"predict_with_generate": "true"' "$out/f5/train_args.json"
check grep -q "eval loss .* rougeL .* at step 2" "$out/f5.txt"
check examples/finetune $fopts --output_dir "$out/f1" --resume "$out/f1" --max_steps 6 > "$out/f3.txt" 2>&1
check grep -q "step 6/6" "$out/f3.txt"
check test "$(wc -l < "$out/f1/metrics.jsonl")" -eq 6
echo "test_tools: examples/finetune: scores, predictions and best written; --ranks 2 follows one rank x 2; pretokenized pairs train the same; resumed to step 6"
# the same two ranks started by hand with a rendezvous file
rm -rf "$out/d5"
examples/train $dopts --output_dir "$out/d5" --world_size 2 --rank 1 --rendezvous "$out/rdv" > "$out/d5b.txt" 2>&1 &
r1=$!
check examples/train $dopts --output_dir "$out/d5" --world_size 2 --rank 0 --rendezvous "$out/rdv" > "$out/d5a.txt" 2>&1
wait $r1
check test $? -eq 0
check cmp "$out/d2/step-00000006/model.safetensors" "$out/d5/step-00000006/model.safetensors"
check test ! -e "$out/rdv"
# a rendezvous file that a killed run left: rank 1 starts first and finds it, rank 0 replaces it,
# and both still meet and finish
examples/train $dopts --output_dir "$out/d5" --world_size 2 --rank 0 --rendezvous "$out/rdv" > /dev/null 2>&1 &
r0=$!
for i in $(seq 1 100); do [ -e "$out/rdv" ] && break; sleep 0.1; done
kill -9 $r0
wait $r0 2> /dev/null
check test -e "$out/rdv"
rm -rf "$out/d8"
examples/train $dopts --output_dir "$out/d8" --world_size 2 --rank 1 --rendezvous "$out/rdv" --dist_timeout 60 \
    > "$out/d8b.txt" 2>&1 &
r1=$!
sleep 0.5
check examples/train $dopts --output_dir "$out/d8" --world_size 2 --rank 0 --rendezvous "$out/rdv" > "$out/d8a.txt" 2>&1
wait $r1
check test $? -eq 0
check cmp "$out/d2/step-00000006/model.safetensors" "$out/d8/step-00000006/model.safetensors"
# a rank killed mid-run ends the run on every rank, naming it; Ctrl-C stops both ranks after the
# same step with one checkpoint
# start_ranks DIR: a long 2-rank run in the background (its launcher in $lpid), once 2 steps are logged
start_ranks() {
    examples/train $dopts --output_dir "$out/$1" --ranks 2 --max_steps 100000 --save_steps 0 > "$out/$1.txt" 2>&1 &
    lpid=$!
    for i in $(seq 1 300); do
        [ -f "$out/$1/metrics.jsonl" ] && [ "$(wc -l < "$out/$1/metrics.jsonl")" -ge 2 ] && break
        sleep 0.1
    done
}
start_ranks d6
workers=$(ps -o pid= --ppid $lpid | tr -d ' ')
w1=$(echo "$workers" | sed -n 2p)
kill -9 "$w1"
t0=$(date +%s)
wait $lpid
check test $? -eq 137
check test $(($(date +%s) - t0)) -le 20
check grep -q "rank 1 (pid $w1) killed by signal 9; all 2 ranks stopped" "$out/d6.txt"
check grep -q "train\[rank 0\]: step: rank 0 stops: rank 1 failed: killed by signal 9" "$out/d6.txt"
start_ranks d7
kill -INT $lpid   # the launcher passes it on to both workers
wait $lpid
check test $? -eq 130
check grep -q "interrupted after step" "$out/d7.txt"
if grep -q "ranks stopped" "$out/d7.txt"; then echo "test_tools: FAILED: Ctrl-C reported as a failure"; fail=1; fi
check test -f "$out/d7/$(cat "$out/d7/latest")/model.safetensors"
echo "test_tools: examples/train --ranks 2: a rendezvous file, a killed rank and Ctrl-C"
# make train, the target's own command: run again, it continues or says the run is complete (exit
# 0), with the run's own model and step count (train_args.json), not the device's defaults; after
# SIGTERM mid-run it continues from the saved step. A small model through TRAIN_ARGS on the first
# run only; --device cpu (not a run option) keeps a GPU machine on the CPU.
# (the programs as they are: make test built them; -o: never rebuilt here)
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -o examples/train -o tools/plot_metrics -o tools/pretokenize \
           train TRAIN_OUT="$out/mt" "$@"; }
mtiny="--device cpu --d-model 32 --d_ff 64 --num-heads=2 --d-kv 16 --num-layers 1 --num-decoder-layers 1"
mtiny="$mtiny --max-length 48 --max-labels-length 48 --batch-tokens 192 --batch-labels-tokens 192 --eval-batches 1"
check mk TRAIN_ARGS="$mtiny --max-steps 3" > "$out/mt1.txt" 2>&1
check grep -q "step 3/3" "$out/mt1.txt"
check mk TRAIN_ARGS="--device cpu" > "$out/mt2.txt" 2>&1
check grep -q "the run is complete at step 3" "$out/mt2.txt"
check grep -q "d_model 32, 1+1 layers" "$out/mt2.txt"
check mk TRAIN_ARGS="--device cpu --max_steps=5" > "$out/mt3.txt" 2>&1
check grep -q "train: loss .* (step 4) -> .* (step 5)" "$out/mt3.txt"
check test "$(wc -l < "$out/mt/run/metrics.jsonl")" -ge 5
# train's process below make's: `ps` walked from make's pid
train_pid() {
    ps -eo pid=,ppid=,comm= | awk -v root="$1" '{ up[$1] = $2; name[$1] = $3 }
        END { for (p in up) { q = p; while ((q in up) && q != root && q > 1) q = up[q]; if (q == root && name[p] == "train") print p } }'
}
rm -rf "$out/mt/run"
mk TRAIN_ARGS="$mtiny --max-steps 100000 --save-steps 0 --eval-fraction 0" > "$out/mt4.txt" 2>&1 &
mpid=$!
for i in $(seq 1 300); do
    [ -f "$out/mt/run/metrics.jsonl" ] && [ "$(wc -l < "$out/mt/run/metrics.jsonl")" -ge 3 ] && break
    sleep 0.1
done
tp=$(train_pid $mpid)
check test -n "$tp"
[ -n "$tp" ] && kill -TERM $tp
wait $mpid
check grep -q "interrupted; checkpoint" "$out/mt4.txt"
# the run's preset and the options given, not the preset's defaults (a default warm-up follows --max-steps)
check grep -q '"preset": "cpu"' "$out/mt/run/train_args.json"
check grep -q '"max_steps": "100000"' "$out/mt/run/train_args.json"
if grep -q '"warmup_steps"' "$out/mt/run/train_args.json"; then echo "test_tools: FAILED: a default in train_args.json"; fail=1; fi
steps=$(sed -n 's/^step-0*//p' "$out/mt/run/latest")
check test "${steps:-0}" -ge 3
check mk TRAIN_ARGS="--device cpu --max-steps $((steps + 2))" > "$out/mt5.txt" 2>&1
check grep -q "step $((steps + 2))/$((steps + 2))" "$out/mt5.txt"
check test "$(wc -l < "$out/mt/run/metrics.jsonl")" -eq $((steps + 2))
check test -f "$out/mt/run/loss.png"
echo "test_tools: make train: run again (complete at step 3, extended to 5), and after SIGTERM at step $steps"
# plot_metrics: a JSONL log as the trainer writes it (a warmup "lr" on every row, "eval_loss" on
# the rows of some steps) and also keys in any order, whitespace, 1e-3 numbers, nested values, NaN
# -> a compressed PNG that --check re-reads (signature, chunk CRCs, IHDR, the deflate stream
# inflated, Adler-32, the size of the pixel data, the row filters)
m="$out/metrics.jsonl"
awk 'BEGIN { for (s = 1; s <= 40; s++) {
        printf "{\"step\": %d, \"loss\": %.6f, \"lr\": %g, \"grad_norm\": 0.5%s}\n", s, 6 * exp(-s / 15) + 1,
            s < 10 ? 1e-4 * s : 1e-3, s == 5 || s == 35 ? sprintf(", \"eval_loss\": %.6f", 2 + 4 * exp(-s / 15)) : ""
        if (s % 10 == 0) printf "  { \"eval_loss\" : %.4e ,\"tokens_per_s\":1.5E+3, \"x\": {\"a\": [1, null, \"}\"]}, \"step\":%d }\n", 2 + 4 * exp(-s / 15), s
    }
    print ""; print "{\"step\": 41, \"loss\": NaN}"; print "{\"step\": 42, \"loss\": Infinity, \"eval_loss\": 1e999}" }' > "$m"
check tools/plot_metrics "$m" "$out/plot.png" --title "test: loss" > "$out/plot.txt" 2> "$out/plot_err.txt"
check grep -q "40 training and 6 eval points, 40 learning rates" "$out/plot.txt"
check grep -q "skipped 3 non-finite values" "$out/plot_err.txt"
check tools/plot_metrics --check "$out/plot.png" > "$out/check.txt"
check grep -q "^ok: 800x500, 3 chunks, 400000 pixels$" "$out/check.txt"
# compressed: a small part of its 1,200,500 bytes of pixel rows
check test "$(wc -c < "$out/plot.png")" -lt 60000
# signature and IHDR read with od: width and height big-endian at bytes 16..23
check test "$(od -An -tx1 -N8 "$out/plot.png" | tr -d ' \n')" = "89504e470d0a1a0a"
check test "$(od -An -tx1 -j12 -N12 "$out/plot.png" | tr -d ' \n')" = "4948445200000320000001f4"
check tools/plot_metrics "$m" "$out/plot_log.png" --log-y > /dev/null 2>&1
check tools/plot_metrics --check "$out/plot_log.png" > /dev/null
# a flipped pixel byte fails --check (its chunk CRC)
cp "$out/plot.png" "$out/bad.png"
printf 'X' | dd of="$out/bad.png" bs=1 seek=3000 conv=notrunc 2> /dev/null
if tools/plot_metrics --check "$out/bad.png" > /dev/null 2> "$out/err.txt"; then
    echo "test_tools: FAILED: plot_metrics --check accepted a damaged PNG"; fail=1
fi
check grep -q "IDAT.*CRC mismatch" "$out/err.txt"
# where there is python3, its zlib as a second reader: every CRC, the IDAT data inflates to exactly
# the rows (each with a filter byte 0..4); and a flipped deflate byte with a CRC made to match
# fails --check (the inflate or the Adler-32)
if command -v python3 > /dev/null 2>&1; then
    check python3 - "$out/plot.png" "$out/bad_deflate.png" <<'EOF'
import struct, sys, zlib
d = open(sys.argv[1], "rb").read()
assert d[:8] == b"\x89PNG\r\n\x1a\n"
pos, idat = 8, b""
while pos < len(d):
    n, t = struct.unpack(">I", d[pos:pos + 4])[0], d[pos + 4:pos + 8]
    assert zlib.crc32(d[pos + 4:pos + 8 + n]) == struct.unpack(">I", d[pos + 8 + n:pos + 12 + n])[0], t
    if t == b"IHDR":
        w, h = struct.unpack(">II", d[pos + 8:pos + 16])
    if t == b"IDAT":
        idat_at, idat = pos, idat + d[pos + 8:pos + 8 + n]
    pos += 12 + n
raw = zlib.decompress(idat)
assert len(raw) == h * (1 + 3 * w) and all(raw[y * (1 + 3 * w)] <= 4 for y in range(h)), len(raw)
assert len(idat) * 20 < len(raw), len(idat)
b = bytearray(d)
n = len(idat)
b[idat_at + 8 + n // 2] ^= 0x21
b[idat_at + 8 + n:idat_at + 12 + n] = struct.pack(">I", zlib.crc32(bytes(b[idat_at + 4:idat_at + 8 + n])))
open(sys.argv[2], "wb").write(b)
EOF
    if tools/plot_metrics --check "$out/bad_deflate.png" > /dev/null 2> "$out/err.txt"; then
        echo "test_tools: FAILED: plot_metrics --check accepted a damaged deflate stream"; fail=1
    fi
fi
# the command line: --help (every option, exit 0), --version, --key=value, underscores, an
# unknown option named with the closest one (exit 2)
check tools/plot_metrics --help > "$out/pm_help.txt"
check grep -q "^usage: plot_metrics METRICS.jsonl OUT.png" "$out/pm_help.txt"
for o in title log-y no-lr smooth width height check help version; do
    check grep -q -- "--$o" "$out/pm_help.txt"
done
check tools/plot_metrics --version > "$out/pm_ver.txt"
check grep -q "^plot_metrics (fat5) [0-9]" "$out/pm_ver.txt"
check tools/plot_metrics "$m" "$out/plot_opts.png" --title="sized" --width=640 --height 360 --no_lr --smooth 5 \
    > "$out/plot.txt" 2> /dev/null
check grep -q " 0 learning rates -> .*(640x360, " "$out/plot.txt"
check tools/plot_metrics --check="$out/plot_opts.png" > "$out/check.txt"
check grep -q "^ok: 640x360," "$out/check.txt"
tools/plot_metrics "$m" "$out/x.png" --widht 640 > /dev/null 2> "$out/err.txt"
check test $? -eq 2
check grep -q "did you mean --width" "$out/err.txt"
# a malformed line: non-zero exit, the file and line named
printf '{"step": 1, "loss": 2.5}\n{"step": 2, "loss": 2.4}\n{"step": 3, "loss": }\n' > "$out/bad.jsonl"
if tools/plot_metrics "$out/bad.jsonl" "$out/bad_plot.png" > /dev/null 2> "$out/err.txt"; then
    echo "test_tools: FAILED: plot_metrics accepted a malformed line"; fail=1
fi
check grep -q "bad.jsonl:3: malformed JSON line" "$out/err.txt"
printf '{"loss": 2.5}\n' > "$out/nostep.jsonl"
if tools/plot_metrics "$out/nostep.jsonl" "$out/bad_plot.png" > /dev/null 2> "$out/err.txt"; then
    echo "test_tools: FAILED: plot_metrics accepted a loss without a step"; fail=1
fi
check grep -q "nostep.jsonl:1: a loss without a \"step\"" "$out/err.txt"
# a missing file and an empty file: non-zero exit, a message naming the file
: > "$out/empty.jsonl"
for f in "$out/missing.jsonl" "$out/empty.jsonl"; do
    if tools/plot_metrics "$f" "$out/bad_plot.png" > /dev/null 2> "$out/err.txt"; then
        echo "test_tools: FAILED: plot_metrics accepted $f"; fail=1
    fi
    check grep -q "$(basename "$f")" "$out/err.txt"
done
# examples/generate: --help; one line on stderr and a non-zero exit for each bad invocation;
# --print-ids gives one line of ids per row as the last lines; a seeded sample repeats
g=tests/data/t5_v11_gated_gelu_untied
gen() { examples/generate --device cpu "$@"; }   # the CPU, whatever the machine: the same ids everywhere
check examples/generate --help > "$out/gen_help.txt"
check grep -q "^usage: generate CHECKPOINT_DIR" "$out/gen_help.txt"
gen_err() {  # WHAT ARGS...: refused, with one line on stderr that contains WHAT
    what=$1; shift
    if gen "$@" > /dev/null 2> "$out/gen_err.txt" < /dev/null; then
        echo "test_tools: FAILED: generate accepted $*"; fail=1
    fi
    check test "$(wc -l < "$out/gen_err.txt")" -eq 1
    check grep -q -- "$what" "$out/gen_err.txt"
}
gen_err "unknown option --bogus (--help lists the options)" $g --ids 3,4 --bogus 1
gen_err "max-new-tokens 0" $g --ids 3,4 --max-new-tokens 0
gen_err "num-beams 0" $g --ids 3,4 --num-beams 0
gen_err "top-p 1.5" $g --ids 3,4 --sample --top-p 1.5
gen_err "not an integer" $g --ids 3,4 --max-new-tokens 5x
gen_err "id 80 is not below the vocabulary size 80" $g --ids 3,80
gen_err "vocabulary size 80" $g "text needs byte ids up to 258"
gen_err "$out/no_such_model" "$out/no_such_model" --ids 3,4
gen_err "no input" $g
gen_err "missing value" $g --ids
check gen $g --ids 3,17,5 --ids 8,9,10,11 --max-new-tokens 6 --min-new-tokens 6 --print-ids \
    > "$out/gen_ids.txt" 2> "$out/gen_time.txt"
check test "$(tail -n 2 "$out/gen_ids.txt" | grep -c '^[0-9][0-9]*\( [0-9][0-9]*\)\{5\}$')" -eq 2
check test "$(wc -l < "$out/gen_ids.txt")" -eq 2
check grep -q "^generate: 12 tokens in [0-9.]* s" "$out/gen_time.txt"
if awk '{ for (i = 1; i <= NF; i++) if ($i >= 80) bad = 1 } END { exit !bad }' "$out/gen_ids.txt"; then
    echo "test_tools: FAILED: generate printed an id outside the vocabulary"; fail=1
fi
gen_sample="$g --ids 5,6,7 --ids 9 --sample --top-k 20 --temperature 1.5 --seed 7 --max-new-tokens 8 --print-ids"
check gen $gen_sample > "$out/gen_s1.txt" 2> /dev/null
check gen $gen_sample > "$out/gen_s2.txt" 2> /dev/null
check test -s "$out/gen_s1.txt"
check cmp -s "$out/gen_s1.txt" "$out/gen_s2.txt"
check gen $g --ids 5,6,7 --num-beams 3 --num-return-sequences 2 --max-new-tokens 4 --print-ids \
    > "$out/gen_beam.txt" 2> /dev/null
check test "$(wc -l < "$out/gen_beam.txt")" -eq 2
echo "test_tools: examples/generate: errors, --print-ids, seeded sampling, beam search"
# tools/fat5_tokenize: the ids of tests/data/tokenizers/cases.json (texts[1], the t5uni and bytebpe
# "encode" / "encode_plain" entries, i.e. tokenizers' and sentencepiece's ids), the decode round
# trip, --no-special, --lines, --pair, errors
tk=tests/data/tokenizers
fox="The quick brown fox jumps over the lazy dog."
fox_ids="56 624 141 66 414 18 44 17 181 333 175 38 3 322 6 380 170 19 84 43 4 1"
fox_bpe="0 321 620 607 277 671 81 283 82 91 462 392 83 86 664 267 304 68 93 92 369 74 17 2"
for t in $tk/t5uni $tk/t5uni/tokenizer.json $tk/t5uni/spiece.model; do
    check test "$(printf '%s' "$fox" | tools/fat5_tokenize $t)" = "$fox_ids"
    check test "$(printf '%s' "$fox" | tools/fat5_tokenize --no-special $t)" = "${fox_ids% 1}"
    check test "$(printf '%s' "$fox" | tools/fat5_tokenize $t | tools/fat5_tokenize --decode --skip-special $t)" = "$fox"
done
check test "$(printf '%s' "$fox" | tools/fat5_tokenize $tk/bytebpe)" = "$fox_bpe"
check test "$(printf '%s' "$fox" | tools/fat5_tokenize $tk/bytebpe | tools/fat5_tokenize --decode --skip-special $tk/bytebpe)" = "$fox"
# specials kept unless --skip-special; commas separate ids too
check test "$(echo "137, 224,17 350 1" | tools/fat5_tokenize --decode $tk/t5uni)" = "Hello world</s>"
# the whole input is one text, trailing newline included (bytebpe keeps it as a token)
check test "$(printf 'ab\n' | tools/fat5_tokenize $tk/bytebpe)" != "$(printf 'ab' | tools/fat5_tokenize $tk/bytebpe)"
printf 'Hello world\n%s\n\nhello\n' "$fox" | tools/fat5_tokenize --lines $tk/t5uni > "$out/tk_lines.txt"
check test "$(sed -n 1p "$out/tk_lines.txt")" = "137 224 17 350 1"
check test "$(sed -n 2p "$out/tk_lines.txt")" = "$fox_ids"
check test "$(sed -n 3p "$out/tk_lines.txt")" = "1"
check test "$(wc -l < "$out/tk_lines.txt")" -eq 4
check test "$(tools/fat5_tokenize --decode --lines --skip-special $tk/t5uni < "$out/tk_lines.txt" | sed -n 2p)" = "$fox"
check test "$(printf 'Hello world' | tools/fat5_tokenize --pair "$fox" $tk/bytebpe)" = \
    "0 43 483 82 682 2 2 ${fox_bpe#0 }"
if printf x | tools/fat5_tokenize "$out/no_such_tokenizer" > /dev/null 2> "$out/err.txt"; then
    echo "test_tools: FAILED: fat5_tokenize accepted a missing path"; fail=1
else
    check test $? -eq 1
fi
check grep -q "^fat5_tokenize: .*no_such_tokenizer" "$out/err.txt"
echo "137 5000" | tools/fat5_tokenize --decode $tk/t5uni > /dev/null 2> "$out/err.txt"
check test $? -eq 1
check grep -q "id 5000 is outside the vocabulary (size 1100)" "$out/err.txt"
echo "137 12x" | tools/fat5_tokenize --decode $tk/t5uni > /dev/null 2> "$out/err.txt"
check test $? -eq 1
check grep -q "'12x' is not an id" "$out/err.txt"
tools/fat5_tokenize --bogus $tk/t5uni < /dev/null > /dev/null 2>&1
check test $? -eq 2
printf 'Hello world\n%s\n' "$fox" > "$out/bench.txt"
check tools/fat5_tokenize --bench "$out/bench.txt" --repeat 2 $tk/t5uni > "$out/bench.json"
check grep -q '^{"bench":"tokenize","file":".*bench.txt","bytes":57,"lines":2,"tokens":27,"seconds":' "$out/bench.json"
echo "test_tools: fat5_tokenize: cases.json ids, decode round trip, --no-special, --lines, --pair, --bench, errors"
# pretokenize --tokenizer: each document tokenized without the post-processor, then the
# tokenizer's EOS; the ids read back equal fat5_tokenize's per document
printf 'Hello world\n%s\n \n' "$fox" > "$out/tk_docs.txt"
check tools/pretokenize --sep line --tokenizer $tk/t5uni -o "$out/tk.tok" "$out/tk_docs.txt" 2> "$out/pt_err.txt"
check grep -q "2 documents, 27 ids.*vocabulary 1100, eos 1" "$out/pt_err.txt"
printf '%s\n' 137 224 17 350 1 $fox_ids > "$out/pt_want.txt"
pt_got "$out/tk.tok" > "$out/pt_got.txt"
check cmp -s "$out/pt_want.txt" "$out/pt_got.txt"
# header: vocabulary 1100 (0x44c), eos 1, 2-byte ids
check test "$(od -An -v -tx1 -N32 "$out/tk.tok" | tr -d ' \n')" = \
    "46415435544f4b0001000000020000004c040000000000000100000000000000"
# spmbpe's EOS is 2 (its template adds <s>, left out here)
check tools/pretokenize --sep line --tokenizer $tk/spmbpe -o "$out/tk2.tok" "$out/tk_docs.txt" 2> /dev/null
check test "$(pt_got "$out/tk2.tok" | head -n 5 | tr '\n' ' ')" = "$(printf 'Hello world' | tools/fat5_tokenize --no-special $tk/spmbpe) 2 "
check test "$(od -An -v -tx1 -j24 -N4 "$out/tk2.tok" | tr -d ' \n')" = "02000000"
if tools/pretokenize --tokenizer $tk/t5uni --vocab 1000 -o "$out/x.tok" "$out/tk_docs.txt" 2> "$out/pt_err.txt"; then
    echo "test_tools: FAILED: pretokenize --vocab below the tokenizer's"; fail=1
fi
check grep -q "below the tokenizer's vocabulary size 1100" "$out/pt_err.txt"
if tools/pretokenize --tokenizer $tk/t5uni --vocab 70000 -o "$out/x.tok" "$out/tk_docs.txt" 2> "$out/pt_err.txt"; then
    echo "test_tools: FAILED: pretokenize --vocab 70000 with 2-byte ids"; fail=1
fi
check grep -q "use --width 4" "$out/pt_err.txt"
check tools/pretokenize --tokenizer $tk/t5uni --vocab 70000 --width 4 -o "$out/x.tok" "$out/tk_docs.txt" 2> /dev/null
if tools/pretokenize --tokenizer "$out/no_such_tokenizer" -o "$out/x2.tok" "$out/tk_docs.txt" 2> "$out/pt_err.txt"; then
    echo "test_tools: FAILED: pretokenize accepted a missing tokenizer"; fail=1
fi
check grep -q "no_such_tokenizer" "$out/pt_err.txt"
check test ! -e "$out/x2.tok"
echo "test_tools: pretokenize --tokenizer: ids, EOS, header, vocabulary and width checks"
# pretokenize --tokenizer on a 4 MB document on one line: the peak memory above a small document's
# stays under 3 times the document's size (the line as read and the document's text; the ids go
# to the file as they come and the tokenizer works in parts of 64 KiB; a whole-text tokenization
# took 30 to 60 times), and the ids are as many as fat5_tokenize gives, plus the EOS
if /usr/bin/time -f %M -o "$out/rss_small.txt" true 2> /dev/null; then   # GNU time's maximum resident set
    { gzip -dc data/fortunes/fortunes.txt.gz; gzip -dc data/fortunes/fortunes.txt.gz; } | tr '\n' ' ' |
        head -c 4000000 > "$out/big.txt"
    echo >> "$out/big.txt"
    printf 'a small document\n' > "$out/small.txt"
    for t in t5uni/spiece.model t5uni/tokenizer.json; do
        /usr/bin/time -f %M -o "$out/rss_small.txt" tools/pretokenize --tokenizer $tk/$t -o "$out/s.tok" "$out/small.txt" 2> /dev/null
        /usr/bin/time -f %M -o "$out/rss_big.txt" tools/pretokenize --tokenizer $tk/$t -o "$out/b.tok" "$out/big.txt" 2> "$out/pt_err.txt"
        small=$(tail -n 1 "$out/rss_small.txt"); big=$(tail -n 1 "$out/rss_big.txt")
        check test $(( (big - small) * 1024 )) -le $(( 3 * 4000001 ))
        n=$(tools/fat5_tokenize --no-special $tk/$t < "$out/big.txt" | wc -w)
        check grep -q "1 documents, $((n + 1)) ids" "$out/pt_err.txt"
        echo "test_tools: pretokenize --tokenizer $t, a 4 MB line: peak memory $(( (big - small) / 1024 )) MiB above a small document's"
    done
else
    echo "test_tools: SKIP: pretokenize's peak memory (no GNU /usr/bin/time)"
fi
# examples/generate --tokenizer: the fixture model's vocabulary (80) is smaller than t5uni's
# (1100): refused, naming both; a model of t5uni's size (fat5_init) generates text
gen_err "the tokenizer's vocabulary size 1100 ($tk/t5uni) is larger than the model's, 80" $g --tokenizer $tk/t5uni "some text"
gen_err "no_such_tokenizer" $g --tokenizer "$out/no_such_tokenizer" "some text"
sed 's/"vocab_size": 80/"vocab_size": 1100/' $g/config.json > "$out/v1100.json"
check tools/fat5_init "$out/v1100.json" "$out/m1100" 3 > /dev/null
check gen "$out/m1100" --tokenizer $tk/t5uni "some text" "$fox" --max-new-tokens 8 \
    > "$out/gen_tok.txt" 2> /dev/null
check test "$(wc -l < "$out/gen_tok.txt")" -eq 2
check test -n "$(head -n 1 "$out/gen_tok.txt" | tr -d ' \n')"
if grep -q '^[0-9 ]*$' "$out/gen_tok.txt"; then echo "test_tools: FAILED: generate --tokenizer printed ids"; fail=1; fi
# the same continuation as --print-ids, decoded by fat5_tokenize
check gen "$out/m1100" --tokenizer $tk/t5uni "some text" --max-new-tokens 8 --print-ids \
    > "$out/gen_tok_ids.txt" 2> /dev/null
check test "$(tools/fat5_tokenize --decode --skip-special $tk/t5uni < "$out/gen_tok_ids.txt" | tr '\n' ' ')" = \
    "$(head -n 1 "$out/gen_tok.txt" | sed 's/\\n/ /g')"
echo "test_tools: examples/generate --tokenizer: vocabulary check, text out"
# examples/generate reads the checkpoint's own tokenizer (tokenizer.json beside the weights): the
# same text as --tokenizer; --bytes takes byte ids instead
mkdir -p "$out/m1100tok"
cp "$out/m1100/config.json" "$out/m1100/model.safetensors" $tk/t5uni/tokenizer.json "$out/m1100tok/"
check gen "$out/m1100tok" "some text" --max-new-tokens 8 > "$out/gen_own.txt" 2> "$out/gen_own_err.txt"
check test "$(cat "$out/gen_own.txt")" = "$(head -n 1 "$out/gen_tok.txt")"
check grep -q "; tokenizer $out/m1100tok" "$out/gen_own_err.txt"
check gen "$out/m1100tok" --bytes "some text" --max-new-tokens 8 --print-ids > "$out/gen_b1.txt" 2> "$out/gen_b_err.txt"
check gen "$out/m1100" "some text" --max-new-tokens 8 --print-ids > "$out/gen_b2.txt" 2> /dev/null
check cmp -s "$out/gen_b1.txt" "$out/gen_b2.txt"
check grep -q "; byte-level ids" "$out/gen_b_err.txt"
gen_err "--bytes and --tokenizer" "$out/m1100tok" --bytes --tokenizer $tk/t5uni "x"
# inputs from a file (one per non-empty line), from standard input, in batches: the same outputs as
# arguments; progress on stderr; JSON lines in (--input-field, a .jsonl file) and out
printf 'some text\n%s\n\nhello world\n' "$fox" > "$out/gen_in.txt"
check gen "$out/m1100tok" "some text" "$fox" "hello world" --max-new-tokens 8 > "$out/gen_args.txt" 2> /dev/null
check gen "$out/m1100tok" --input "$out/gen_in.txt" --max-new-tokens 8 --batch-size 2 > "$out/gen_file.txt" \
    2> "$out/gen_file_err.txt"
check cmp -s "$out/gen_args.txt" "$out/gen_file.txt"
check grep -q "^generate: 3/3 inputs, 24 tokens" "$out/gen_file_err.txt"
check gen "$out/m1100tok" --max_new_tokens=8 < "$out/gen_in.txt" > "$out/gen_stdin.txt" 2> /dev/null
check cmp -s "$out/gen_args.txt" "$out/gen_stdin.txt"
check gen "$out/m1100tok" --input - --max-new-tokens 8 --batch-size 1 < "$out/gen_in.txt" > "$out/gen_stdin1.txt" 2> /dev/null
check cmp -s "$out/gen_args.txt" "$out/gen_stdin1.txt"
printf '{"id": 1, "q": "some text"}\n\n{"q": "%s", "note": [1, {"a": null}]}\n{"q": "hello \\u0077orld"}\n' "$fox" > "$out/gen_in.json"
check gen "$out/m1100tok" --input "$out/gen_in.json" --input-field q --max-new-tokens 8 > "$out/gen_json.txt" 2> /dev/null
check cmp -s "$out/gen_args.txt" "$out/gen_json.txt"
sed 's/"q"/"text"/g' "$out/gen_in.json" > "$out/gen_in.jsonl"
check gen "$out/m1100tok" --input "$out/gen_in.jsonl" --max-new-tokens 8 --output-format jsonl > "$out/gen_out.jsonl" \
    2> /dev/null
check test "$(wc -l < "$out/gen_out.jsonl")" -eq 3
check grep -q '^{"input": "hello world", "output": ".*", "tokens": \[[0-9]*\(, [0-9]*\)*\]}$' "$out/gen_out.jsonl"
check test "$(sed -n 's/^{"input": "[^"]*", "output": "\(.*\)", "tokens": .*/\1/p' "$out/gen_out.jsonl" | sed 's/\\"/"/g')" = \
    "$(cat "$out/gen_args.txt")"
check gen "$out/m1100tok" --input "$out/gen_in.txt" --max-new-tokens 8 --print-ids > "$out/gen_ids3.txt" 2> /dev/null
check test "$(sed 's/.*"tokens": \[\(.*\)\]}$/\1/; s/,//g' "$out/gen_out.jsonl")" = "$(cat "$out/gen_ids3.txt")"
check gen $g --ids 3,17,5 --max-new-tokens 4 --output-format jsonl > "$out/gen_ids.jsonl" 2> /dev/null
check grep -q '^{"input": \[3, 17, 5\], "output": ".*", "tokens": \[[0-9]*, [0-9]*, [0-9]*, [0-9]*\]}$' "$out/gen_ids.jsonl"
gen_err "gen_in.json:1: no field \"text\"" "$out/m1100tok" --input "$out/gen_in.json" --input-field text
gen_err "gen_in.json:1: field \"id\" is a number, not a string" "$out/m1100tok" --input "$out/gen_in.json" --input-field id
gen_err "gen_in.txt:1: not a JSON object" "$out/m1100tok" --input "$out/gen_in.txt" --input-field q
gen_err "no_such_file" "$out/m1100tok" --input "$out/no_such_file"
: > "$out/gen_empty.txt"
gen_err "no input" "$out/m1100tok" --input "$out/gen_empty.txt"
# --stream prints the same text as it comes; --generation-config sets options by transformers'
# names (suppressing the first output id changes the output; a refused key is named);
# --stop-strings ends the output at the first stop string that its last token completes
check gen "$out/m1100tok" "some text" --max-new-tokens 8 --stream > "$out/gen_stream.txt" 2> /dev/null
check cmp -s "$out/gen_own.txt" "$out/gen_stream.txt"
first=$(head -n 1 "$out/gen_tok_ids.txt" | cut -d' ' -f1)
check gen "$out/m1100tok" "some text" --max-new-tokens 8 --print-ids --generation-config "{\"suppress_tokens\": [$first]}" \
    > "$out/gen_sup.txt" 2> /dev/null
if [ "$(cut -d' ' -f1 "$out/gen_sup.txt")" = "$first" ]; then echo "test_tools: FAILED: suppress_tokens ignored"; fail=1; fi
echo '{"max_new_tokens": 3}' > "$out/gen_cfg.json"
check gen "$out/m1100tok" "some text" --print-ids --generation-config "@$out/gen_cfg.json" > "$out/gen_cfg.txt" 2> /dev/null
check test "$(wc -w < "$out/gen_cfg.txt")" -eq 3
gen_err "num_beam_groups = 3 must divide num_beams = 1" "$out/m1100tok" "x" --generation-config '{"num_beam_groups": 3}'
gen_err "force_words_ids (constrained beam search) needs num_beams > 1" "$out/m1100tok" "x" --generation-config '{"force_words_ids": [[5]]}'
gen_err "constraints is not supported" "$out/m1100tok" "x" --generation-config '{"constraints": [1]}'
# (the stop string: the third output token's text, so that the output ends after at most 3 tokens)
t2=$(head -n 1 "$out/gen_tok_ids.txt" | cut -d' ' -f1-2 | tools/fat5_tokenize --decode --skip-special $tk/t5uni)
t3=$(head -n 1 "$out/gen_tok_ids.txt" | cut -d' ' -f1-3 | tools/fat5_tokenize --decode --skip-special $tk/t5uni)
stop=${t3#"$t2"}
check test -n "$stop"
check gen "$out/m1100tok" "some text" --max-new-tokens 8 --stop-strings "$stop" > "$out/gen_stop.txt" 2> /dev/null
case "$t3" in "$(cat "$out/gen_stop.txt")"*) ;; *) echo "test_tools: FAILED: --stop-strings printed more than 3 tokens"; fail=1 ;; esac
case "$(cat "$out/gen_stop.txt")" in *"$stop") ;; *) echo "test_tools: FAILED: --stop-strings output does not end in it"; fail=1 ;; esac
gen_err "--stop-strings needs a tokenizer" $g --ids 3,4 --stop-strings "ab"
# --max-new-tokens wins over a checkpoint generation_config.json's max_length (as in transformers)
mkdir -p "$out/m1100len"
cp "$out/m1100tok/config.json" "$out/m1100tok/model.safetensors" "$out/m1100tok/tokenizer.json" "$out/m1100len/"
echo '{"max_length": 12, "eos_token_id": 1, "decoder_start_token_id": 0, "pad_token_id": 0}' > "$out/m1100len/generation_config.json"
check gen "$out/m1100len" "some text" --max-new-tokens 3 --print-ids > "$out/gen_len.txt" 2> /dev/null
check test "$(wc -w < "$out/gen_len.txt")" -le 3
echo "test_tools: examples/generate: --stream, --generation-config, --stop-strings"
# the default device: the GPU when there is one, else the CPU (here with no GPU visible)
check env CUDA_VISIBLE_DEVICES= examples/generate $g --ids 3,4 --max-new-tokens 2 > /dev/null 2> "$out/gen_dev.txt"
check grep -q "(0.1M parameters, CPU, no GPU found)" "$out/gen_dev.txt"
echo "test_tools: examples/generate: the checkpoint's tokenizer, --bytes, --input files, standard input, JSON lines, batches"
# fat5_init with FAT5's config fields: a flash_t5 model saved under FAT5's names, loaded back by
# fat5_forward, with each position encoding; an unknown encoding name is refused
cat > "$out/flash.json" <<'EOF'
{"model_type": "flash_t5", "vocab_size": 80, "d_model": 16, "d_kv": 8, "d_ff": 24, "num_layers": 2,
 "num_heads": 2, "relative_attention_num_buckets": 8, "relative_attention_max_distance": 16,
 "use_glu_mlp": true, "use_gelu_act": true, "attention_scale": 1.0, "tie_word_embeddings": false,
 "pad_token_id": -100, "position_encoding_type": "t5", "alibi_mode": "symetric", "rotary_base": 10000,
 "z_loss": 0.0001, "max_sequence_length": 512}
EOF
check tools/fat5_init "$out/flash.json" "$out/flash" 7 > /dev/null
check grep -q '"model_type": "flash_t5"' "$out/flash/config.json"
check grep -q '"pad_token_id": 0,' "$out/flash/config.json"
check tools/fat5_inspect "$out/flash" > "$out/flash.txt"
check grep -q "encoder.block.1.self_attention_layer.self_attention.Wq.weight" "$out/flash.txt"
check grep -q "decoder.block.0.cross_attention_layer.layer_norm.weight" "$out/flash.txt"
if grep -q "SelfAttention\|DenseReluDense" "$out/flash.txt"; then
    echo "test_tools: FAILED: a flash_t5 model saved Hugging Face names"; fail=1
fi
check tools/fat5_forward "$out/flash" tests/data/t5_v11_gated_gelu_untied/batch.json "$out/flash_logits.safetensors" > /dev/null
# every encoding: fat5_init creates it, fat5_forward runs it, its tensors are FAT5's
for pe in none ALiBi RoPE FIRE; do
    sed "s/\"position_encoding_type\": \"t5\"/\"position_encoding_type\": \"$pe\"/" "$out/flash.json" > "$out/$pe.json"
    check tools/fat5_init "$out/$pe.json" "$out/$pe" 7 > /dev/null
    check grep -q "\"position_encoding_type\": \"$pe\"" "$out/$pe/config.json"
    check tools/fat5_forward "$out/$pe" tests/data/t5_v11_gated_gelu_untied/batch.json "$out/${pe}_logits.safetensors" > /dev/null
    check tools/fat5_inspect "$out/$pe" > "$out/$pe.txt"
    if grep -q "relative_attention_bias" "$out/$pe.txt"; then
        echo "test_tools: FAILED: a $pe model has a T5 bias table"; fail=1
    fi
done
check grep -q "encoder.block.0.self_attention_layer.self_attention.pe_encoding.init_L.*I64" "$out/FIRE.txt"
check grep -q "decoder.block.0.self_attention_layer.self_attention.pe_encoding.L_multiplier" "$out/FIRE.txt"
sed 's/"position_encoding_type": "t5"/"position_encoding_type": "Alibi"/' "$out/flash.json" > "$out/bad.json"
if tools/fat5_init "$out/bad.json" "$out/bad" > /dev/null 2> "$out/err.txt"; then
    echo "test_tools: FAILED: fat5_init accepted position_encoding_type Alibi"; fail=1
fi
check grep -q "position_encoding_type 'Alibi' is unknown" "$out/err.txt"
echo "test_tools: fat5_init: flash_t5 with FAT5 names, every position encoding created and run, bad names rejected"
# The command line every program shares (tools/cli.h, docs/cli.md): --help (usage, exit 0), --version
# (the library's), an unknown option names the closest valid one (never a C function), --key=value
# and underscores, Hugging Face's names, numbers checked whole and in range; exit 2 on a usage error.
ver=$(sed -n 's/^#define FAT5_VERSION_STRING "\(.*\)"$/\1/p' fat5.h)
for p in examples/quickstart examples/gpu_step examples/train examples/finetune examples/generate tools/fat5_inspect tools/fat5_forward \
         tools/fat5_init tools/fat5_tokenize tools/pretokenize tools/fat5_convert; do
    check $p --help > "$out/help.txt" 2> "$out/help_err.txt"
    check grep -q "^usage: ${p##*/} " "$out/help.txt"
    check grep -q "^  --version " "$out/help.txt"
    check test ! -s "$out/help_err.txt"
    check test "$($p --version)" = "${p##*/} (fat5) $ver"
done
# usage_err WHAT CMD...: exit status 2, one line on stderr holding WHAT, no C function named
usage_err() {
    what=$1; shift
    "$@" > /dev/null 2> "$out/use_err.txt" < /dev/null
    st=$?
    if [ $st -ne 2 ]; then echo "test_tools: FAILED: exit $st (want 2): $*"; fail=1; fi
    check test "$(wc -l < "$out/use_err.txt")" -eq 1
    check grep -q -- "$what" "$out/use_err.txt"
    if grep -q "fat5_[a-z_]*(\|fat5_train_\|fat5_generate" "$out/use_err.txt"; then
        echo "test_tools: FAILED: a C function in the message of $*"; fail=1
    fi
}
usage_err "unknown option --max-step; did you mean --max-steps?" examples/train --max-step 3
usage_err "unknown option --learning_rat; did you mean --learning-rate?" examples/train --learning_rat=1e-3
usage_err "unknown option --num-beam; did you mean --num-beams?" examples/generate $g --num-beam 2 --ids 3
usage_err "unknown option --deocde; did you mean --decode?" tools/fat5_tokenize --deocde $tk/t5uni
usage_err "unknown option --widht; did you mean --width?" tools/pretokenize --widht 4 -o "$out/x.tok" "$out/a.txt"
usage_err "unknown option --dtyp; did you mean --dtype?" tools/fat5_forward $g $g/batch.json "$out/l.st" --dtyp fp32
usage_err "unknown option --sed; did you mean --seed?" tools/fat5_init "$out/flash.json" "$out/x" --sed 3
usage_err "unknown option --verbose (--help lists the options)" tools/fat5_inspect --verbose $g
usage_err "seed 'notaseed': not an integer" tools/fat5_init "$out/flash.json" "$out/notaseed" notaseed
check test ! -e "$out/notaseed"
usage_err "--seed -1: must be at least 0" tools/fat5_init "$out/flash.json" "$out/x" --seed=-1
usage_err "--max-steps 0: expected an integer >= 1" examples/train --max_steps 0
usage_err "--learning-rate fast: expected a number > 0" examples/train --learning-rate fast
usage_err "--warmup-steps 50 is more than max_steps 20" examples/train --warmup_steps 50 --max_steps=20
usage_err "--device tpu: expected auto, cpu or gpu" examples/train --device tpu
usage_err "--preset tpu: expected cpu or gpu" examples/train --preset=tpu
usage_err "--num_train_epochs: this trainer counts optimizer steps, not epochs: use --max-steps" \
    examples/train --num_train_epochs 3
usage_err "use --batch-tokens" examples/train --per_device_train_batch_size 8
usage_err "--bf16 needs a GPU" examples/train --bf16 --device cpu
usage_err "no training data: --train_file FILE" examples/finetune --model tiny
usage_err "--max-source-length -1: " tools/pretokenize --pairs --max-source-length -1 -o "$out/x.tok" "$out/ft.jsonl"
usage_err "no model: --model_name_or_path DIR" examples/finetune --train_file "$out/ft.jsonl"
usage_err "--load_best_model_at_end: OUTPUT_DIR/best names the best checkpoint" examples/finetune --load_best_model_at_end
usage_err "--metric-for-best-model perplexity: expected loss, exact_match" examples/finetune --metric_for_best_model perplexity
usage_err "--task summarize: expected seq2seq, classify, token-classify or qa" examples/finetune --task summarize
usage_err "unknown option --train_file (--help lists the options)" examples/train --train_file "$out/ft.jsonl"
usage_err "--top_k 2.5: not an integer" examples/generate $g --ids 3 --top_k 2.5
usage_err "--temperature 0: must be greater than 0" examples/generate $g --ids 3 --temperature=0
usage_err "--repeat 0: must be 1 to" tools/fat5_tokenize --repeat 0 $tk/t5uni
usage_err "--vocab 3x: not an integer" tools/pretokenize --vocab 3x -o "$out/x.tok" "$out/a.txt"
usage_err "--steps 0: must be 1 to" examples/gpu_step $g --steps 0
usage_err "batch 'eight': not an integer" examples/gpu_step $g eight
usage_err "--device tpu: expected cpu or gpu" tools/fat5_forward $g $g/batch.json "$out/l.st" --device=tpu
usage_err "no CHECKPOINT_DIR" examples/quickstart
# Hugging Face's names and --key=value where the meaning is the same: the same ids as the dashes
check gen $g --ids 5,6,7 --do_sample --top_k=20 --temperature 1.5 --seed=7 --max_new_tokens 8 --print-ids \
    > "$out/gen_hf.txt" 2> /dev/null
check gen $g --ids 5,6,7 --sample --top-k 20 --temperature 1.5 --seed 7 --max-new-tokens 8 --print-ids \
    > "$out/gen_dash.txt" 2> /dev/null
check cmp -s "$out/gen_dash.txt" "$out/gen_hf.txt"
check gen $g --ids 5,6,7 --num_beams=3 --num_return_sequences 2 --max-new-tokens=4 --print-ids > "$out/gen_hf2.txt" 2> /dev/null
check cmp -s "$out/gen_beam.txt" "$out/gen_hf2.txt"
check tools/fat5_forward $g $g/batch.json "$out/l2.st" --device=cpu --dtype fp32 > /dev/null
echo "test_tools: the command line: --help, --version, near misses, numbers, Hugging Face's names, --key=value"
# tools/fat5_convert: a complete directory (tokenizer files and generation settings along), the
# weights in bf16 (half the bytes), and the same ids generated from the fp32 copy as from the source
src=tests/data/t5_spiece
rm -rf "$out/cv_bf16" "$out/cv_f32"
check tools/fat5_convert "$src" "$out/cv_bf16" > /dev/null
check tools/fat5_convert "$src" "$out/cv_f32" --dtype fp32 > /dev/null
for f in spiece.model tokenizer.json tokenizer_config.json; do check cmp -s "$src/$f" "$out/cv_bf16/$f"; done
check grep -q '"torch_dtype": "bfloat16"' "$out/cv_bf16/config.json"
check grep -q '"decoder_start_token_id": 0' "$out/cv_bf16/generation_config.json"
check grep -q '"dtype":"BF16"' "$out/cv_bf16/model.safetensors"
a=$(wc -c < "$out/cv_bf16/model.safetensors") b=$(wc -c < "$out/cv_f32/model.safetensors")
check [ $((2 * a)) -lt $((b + 16384)) ]   # headers aside, half
check gen "$src" --device cpu "some text" --max-new-tokens 6 --print-ids > "$out/cv_a.txt" 2> /dev/null
check gen "$out/cv_f32" --device cpu "some text" --max-new-tokens 6 --print-ids > "$out/cv_b.txt" 2> /dev/null
check cmp -s "$out/cv_a.txt" "$out/cv_b.txt"
# sharded (--max-shard-size) in the source's dtype (F32), and ByT5's tokenizer for a byte model
rm -rf "$out/cv_shard" "$out/cv_byte"
check tools/fat5_convert "$src" "$out/cv_shard" --dtype source --max-shard-size 40KB > /dev/null
check [ -f "$out/cv_shard/model.safetensors.index.json" ] && check [ ! -f "$out/cv_shard/model.safetensors" ]
check [ -f "$out/cv_shard/model-00004-of-00004.safetensors" ]
check gen "$out/cv_shard" --device cpu "some text" --max-new-tokens 6 --print-ids > "$out/cv_c.txt" 2> /dev/null
check cmp -s "$out/cv_a.txt" "$out/cv_c.txt"
check tools/fat5_convert tests/data/hf_export_byte "$out/cv_byte" --dtype f16 --tokenizer byte > /dev/null
check cmp -s tests/data/hf_export_byte/tokenizer_config.json "$out/cv_byte/tokenizer_config.json"
check grep -q '"torch_dtype": "float16"' "$out/cv_byte/config.json"
if tools/fat5_convert "$src" "$out/cv_bad" --max-shard-size 5XB > /dev/null 2>&1; then echo "test_tools: FAILED: --max-shard-size 5XB accepted"; fail=1; fi
echo "test_tools: fat5_convert: complete bf16, fp32, f16 and sharded directories, the same generation"
# tools/fat5_tokenizer_train: a Unigram and a BPE tokenizer trained on 2,000 fortune lines; the
# files a checkpoint carries, the report line, the corpus encoded and decoded again by
# fat5_tokenize, pretokenize with the trained tokenizer, two training steps that save it along;
# the same files again for the same seed; errors name the file (exit 1) or the option (exit 2)
gzip -dc data/fortunes/fortunes.txt.gz | head -n 2000 > "$out/tt.txt"
for kind in unigram bpe; do
    check tools/fat5_tokenizer_train --input "$out/tt.txt" --model_type $kind --vocab_size 600 --extra_ids 10 \
        --character_coverage 1 --num_threads 2 --quiet -o "$out/tt_$kind" > "$out/tt_report.json"
    check grep -q "^{\"toktrain\": \"$kind\", .*\"vocab_size\": 610, .*\"sentences_used\": [1-9]" "$out/tt_report.json"
    for f in tokenizer.json tokenizer_config.json special_tokens_map.json; do check [ -s "$out/tt_$kind/$f" ]; done
    check grep -q '"extra_ids": 10' "$out/tt_$kind/tokenizer_config.json"
    check test "$(printf 'x' | tools/fat5_tokenize --no-special "$out/tt_$kind" | wc -w)" -ge 1
    grep -v '^%$' "$out/tt.txt" | head -n 300 | tr -d '\r' > "$out/tt_lines.txt"
    tools/fat5_tokenize --lines --no-special "$out/tt_$kind" < "$out/tt_lines.txt" > "$out/tt_ids.txt"
    check test "$(wc -l < "$out/tt_ids.txt")" -eq 300
    tools/fat5_tokenize --decode --lines "$out/tt_$kind" < "$out/tt_ids.txt" > "$out/tt_back.txt"
    # every character covered (--character_coverage 1): the text comes back, but for the normaliser's
    # work (control characters dropped, runs of spaces collapsed)
    check test "$(tr -d '\000-\010\013-\037\177' < "$out/tt_back.txt" | tr -s ' \t' '  ' | sed 's/^ //; s/ $//' | md5sum)" = \
        "$(tr -d '\000-\010\013-\037\177' < "$out/tt_lines.txt" | tr -s ' \t' '  ' | sed 's/^ //; s/ $//' | md5sum)"
    check tools/fat5_tokenizer_train --input "$out/tt.txt" --model_type $kind --vocab_size 600 --extra_ids 10 \
        --character_coverage 1 --num_threads 2 --quiet -o "$out/tt_${kind}_again" > /dev/null
    check cmp -s "$out/tt_$kind/tokenizer.json" "$out/tt_${kind}_again/tokenizer.json"
done
check [ -s "$out/tt_unigram/spiece.model" ] && check [ ! -e "$out/tt_bpe/spiece.model" ]
check tools/pretokenize --sep % --tokenizer "$out/tt_unigram" -o "$out/tt.tok" "$out/tt.txt" 2> "$out/pt_err.txt"
check grep -q "vocabulary 610, eos 1" "$out/pt_err.txt"
check examples/train --data "$out/tt.tok" --output-dir "$out/tt_run" --max-steps 2 --save-steps 2 \
    --save-tokenizer "$out/tt_unigram" --device cpu --model tiny --d_model 32 --d_ff 64 --num_heads 2 --d_kv 16 \
    --num_layers 1 --num_decoder_layers 1 --max_length 48 --max_labels_length 48 --batch_tokens 192 \
    --batch_labels_tokens 192 --eval_fraction 0 > /dev/null 2>&1
check cmp -s "$out/tt_unigram/tokenizer.json" "$out/tt_run/$(cat "$out/tt_run/latest")/tokenizer.json"
tools/fat5_tokenizer_train --input "$out/no_such_corpus.txt" -o "$out/tt_x" > /dev/null 2> "$out/err.txt"
check test $? -eq 1
check grep -q "no_such_corpus.txt: cannot open" "$out/err.txt"
tools/fat5_tokenizer_train --input "$out/tt.txt" -o "$out/tt_x" --vocab_sise 100 > /dev/null 2> "$out/err.txt"
check test $? -eq 2
check grep -q "did you mean --vocab-size" "$out/err.txt"
echo "test_tools: fat5_tokenizer_train: unigram and bpe files, report, round trip, same files again, pretokenize, train --save-tokenizer, errors"
# tools/load_test: its self-test (the HTTP and event-stream parsers on responses cut at every byte;
# closed-loop, Poisson and --duration runs against an in-process fake server with known delays and
# token counts; refused, silent, cut-off and overloaded servers), --help, --version, usage errors
check tools/load_test --self-test > "$out/lt.txt" 2> "$out/lt_err.txt"
check grep -q "^load_test: self-test: ok$" "$out/lt.txt"
check grep -q "^load_test: self-test: [0-9]* checks, 0 failed" "$out/lt_err.txt"
check tools/load_test --help > "$out/help.txt"
check grep -q "^usage: load_test " "$out/help.txt"
check grep -q "nearest-rank" "$out/help.txt"
check test "$(tools/load_test --version)" = "load_test (fat5) $ver"
usage_err "--new-tokens gauss:3: expected N, uniform:A:B" tools/load_test --new-tokens gauss:3
usage_err "--arrival poisson needs --rate R" tools/load_test --arrival poisson
echo "test_tools: load_test: self-test ($(sed -n 's/^load_test: self-test: \([0-9]*\) checks.*/\1/p' "$out/lt_err.txt") checks), --help, usage errors"
# examples/serve under tools/load_test, on the CPU over loopback (the serving benchmark's run on a
# tiny model): 64 closed-loop clients, then 1; every request answered, each its full length (no
# stop token), the report's latencies present; SIGTERM then stops the server with status 0
examples/serve tests/data/hf_export_spiece --device cpu --host 127.0.0.1 --port 0 --max-new-tokens 16 \
    2> "$out/serve_err.txt" &
spid=$!
port=""
for i in $(seq 1 100); do
    port=$(sed -n 's|^serve: listening on http://127.0.0.1:\([0-9]*\)$|\1|p' "$out/serve_err.txt")
    [ -n "$port" ] && break
    sleep 0.1
done
check test -n "$port"
for c in 64 1; do
    check timeout 60 tools/load_test --url "http://127.0.0.1:$port" --clients $c --requests $((c * 3)) --warmup $c \
        --prompt-tokens uniform:4:12 --new-tokens 8 --ignore-eos 1 --vocab 100 --json > "$out/lt_$c.json" 2> "$out/lt_$c.txt"
    check grep -q "\"requests\":$((c * 3)),\"ok\":$((c * 3)),\"error_count\":0," "$out/lt_$c.json"
    check grep -q "\"generated_tokens\":$((c * 3 * 8)),.*\"stopped_early\":0,\"token_count_mismatch\":0,\"ttft_ms\":{\"n\":$((c * 3))," "$out/lt_$c.json"
done
kill -TERM $spid
wait $spid
check test $? -eq 0
echo "test_tools: serve + load_test on the CPU: 64 and 1 clients, $(sed -n 's/.*"tokens_per_s":\([0-9]*\).*/\1/p' "$out/lt_64.json") tokens/s at 64"
[ $fail -eq 0 ] && echo "test_tools: ok"
exit $fail
