#!/bin/sh
# gpu_check.sh — the checks that need a GPU, each stage short enough for one call on a lent machine
# (under 10 minutes on an H200), logs and a summary under $OUT (default build/gpu_check).
#     dev/gpu_check.sh STAGE...
#   test       make test on the GPU: every GPU test must run (a skip is a failure here)
#   memcheck1  compute-sanitizer memcheck, one process per GPU test: the device and op tests
#   memcheck2  ... the whole-model and generation tests
#   racecheck  compute-sanitizer racecheck on the op tests (the kernels that share memory); the
#              attention-pattern test one configuration at a time, gpu_attn one precision at a time,
#              gpu_attn_tc its long sequence alone (the sm_90a forward on H100 / H200)
#   train      make train (FAT5-small, bf16), then 60 steps with the sampler drawing ahead on a host
#              thread and 60 drawing on the calling thread: mean step time and wait for the data
#   finetune   make finetune on the GPU (after make train), its last evaluations, then
#              ref/compare_hf.py --finetune (FLAN-T5-base shape, dropout 0.1, Adafactor) beside
#              Hugging Face eager and compiled: the table to the summary
#   step       dev/bench step (the FAT5-small training step, its per-kernel profile: step.jsonl),
#              then ref/compare_hf.py --train (Hugging Face eager and compiled in the same run:
#              compare_train.log); the step's line, the 12 costliest keys and the table to the summary
#   dist1      one GPU through NCCL: dev/dist_check --gpus 1, 30 training steps through a one-rank
#              communicator against the plain run (weights bitwise), and a rank 0 of 2 whose peer
#              never starts (a rendezvous file, then NCCL_COMM_ID): stopped by --dist_timeout
#   dist       two GPUs: dev/dist_check (sums, a rank killed in a sum and before joining), a
#              killed worker of examples/train --gpus 2, FAT5-small throughput of 2 GPUs against 1
#              (target 1.9x), 2 GPUs x B against 1 GPU x 2B over 100 steps, bitwise resume on 2 GPUs
#              and a resume on 1 (about 8 minutes on a fresh machine: see FAT5_CACHE_DIR below)
#   distsweep  two GPUs, where the scaling goes: FAT5-small runs of 140 steps (tokens over the step
#              times of steps 21..140) on 1 GPU, on 2 GPUs, two independent 1-GPU runs at once (one
#              per GPU: the host and the second GPU alone), then 2 GPUs with NCCL_MAX_NCHANNELS 4 / 8 /
#              16, NCCL_PROTO=Simple, --bucket_mb 50 / 200, and 1 and 2 GPUs again; SWEEP_REF=path
#              adds 2-GPU runs of another build of examples/train (A/B in one call)
#   curve      200 bf16 training steps on the bundled corpus with this build and with a reference
#              build (REF_SRC: a directory holding the reference's fat5.h, fat5_kernels.cuh and
#              examples/train.c, e.g. carried from an older commit), each build once more with
#              FAT5_ATTN_TC=0 (the same math, other rounding: two samples of the curve's bf16 noise);
#              then ref/compare_curves.py: this build's curve within 2x the larger noise of the
#              reference's
#   cold       cold starts, with an empty kernel cache each: a GPU context's open (dev/cold_open,
#              bf16 then fp32: the compile's time and each part's), then again warm; make train
#              with --max-steps 20 (the seconds to its first step line), examples/generate on a
#              saved checkpoint (the seconds to its output); each line stamped with the seconds
#              since its start (stamped.log files)
# On a fresh machine the first GPU context compiles the kernels (about 3 minutes on an H200, two
# ranks at once too); FAT5_CACHE_DIR kept from an earlier call (carried) avoids it.
# Each stage appends "STAGE: ok" or "STAGE: FAILED (...)" to $OUT/summary.txt; the exit status is
# non-zero when any stage failed.
set -u
OUT=${OUT:-build/gpu_check}
mkdir -p "$OUT"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
rc=0
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
fail() { say "$1: FAILED ($2)"; rc=1; }

gpu_tests() {   # the names of the GPU tests (gpu_*) listed in the given test files
    for f in "$@"; do grep -o 'X(gpu_[a-z0-9_]*)' "tests/$f" | sed 's/X(\(.*\))/\1/'; done | awk '!seen[$0]++'
}

# one test under a sanitizer tool; its log is $OUT/TOOL_NAME.log
sanitize() {
    tool=$1 name=$2
    shift 2
    log="$OUT/${tool}_$name$(echo "$*" | tr -c 'a-zA-Z0-9\n' '_').log"
    # FAT5_SANITIZER=1: the tests leave out their deliberate API errors (an invalid launch).
    # --report-api-errors no: a context looks every entry point up in the kernel parts' modules in
    # turn, and the parts without it answer CUDA_ERROR_NOT_FOUND by design (device memory errors,
    # races and barrier misuse are still reported)
    env FAT5_SANITIZER=1 "$@" "$SAN" --tool "$tool" --report-api-errors no --error-exitcode 99 --print-limit 20 \
        tests/run_tests "=$name" > "$log" 2>&1
    if grep -q '^1 passed, 0 failed$' "$log" && grep -q 'terminated before first instrumented API call' "$log"; then
        echo "$tool $name $*: passed, no device work to check" >> "$OUT/summary.txt"
        rm -f "$log"
        return
    fi
    # memcheck ends with "ERROR SUMMARY: 0 errors", racecheck with "RACECHECK SUMMARY: 0 hazards displayed"
    if ! grep -q -E 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards' "$log" || ! grep -q '^1 passed, 0 failed$' "$log" ||
       grep -q '^\[SKIP\]' "$log"; then
        fail "$tool $name $*" "see $(basename "$log"); its end:"
        tail -25 "$log" | sed 's/^/    /' >> "$OUT/summary.txt"
        return
    fi
    echo "$tool $name $*: clean ($(grep -o -E 'ERROR SUMMARY: [0-9]* errors|RACECHECK SUMMARY: [0-9]* hazards' "$log" | tail -1))" >> "$OUT/summary.txt"
    rm -f "$log"   # only the logs of failures come back
}

# runs "$@" with every output line stamped with the seconds since the start, into $log
stamped() {
    log=$1
    shift
    t0=$(date +%s.%N)
    "$@" 2>&1 | while IFS= read -r line; do   # (no filter between: it would hold the lines back)
        printf '%7.2f %s\n' "$(echo "$(date +%s.%N) $t0" | awk '{print $1 - $2}')" "$line"
    done > "$log"
}

for stage in "$@"; do
    case $stage in
    cold)
        make dev/cold_open examples/train examples/generate tools/pretokenize tools/plot_metrics > /dev/null ||
            { fail cold "build"; continue; }
        kc=$(mktemp -d)
        for dt in bf16 fp32; do
            rm -rf "$kc"/*
            FAT5_CACHE_DIR=$kc dev/cold_open $dt > "$OUT/cold_open_$dt.log" 2>&1 || fail cold "cold_open $dt"
            FAT5_CACHE_DIR=$kc dev/cold_open $dt > "$OUT/warm_open_$dt.log" 2>&1 || fail cold "warm open $dt"
            say "cold: $dt: $(tail -1 "$OUT/cold_open_$dt.log"); warm: $(tail -1 "$OUT/warm_open_$dt.log")"
            grep -o "each part's ms: .*" "$OUT/cold_open_$dt.log" >> "$OUT/summary.txt"
        done
        rm -rf "$kc"/* "$OUT/cold_train"
        FAT5_CACHE_DIR=$kc stamped "$OUT/cold_train.stamped.log" make train TRAIN_OUT="$OUT/cold_train" TRAIN_ARGS="--max-steps 20"
        say "cold: make train: first step line at $(grep -m1 -E 'step +1/|step 1/' "$OUT/cold_train.stamped.log" | awk '{print $1}') s, done at $(tail -1 "$OUT/cold_train.stamped.log" | awk '{print $1}') s"
        rm -rf "$kc"/*
        ck=$OUT/cold_train/run/$(cat "$OUT/cold_train/run/latest" 2>/dev/null)
        FAT5_CACHE_DIR=$kc stamped "$OUT/cold_generate.stamped.log" examples/generate "$ck" "Q: what is a fortune?"
        say "cold: examples/generate: output at $(tail -1 "$OUT/cold_generate.stamped.log" | awk '{print $1}') s"
        rm -rf "$kc"
        ;;
    test)
        start=$(date +%s)
        make test > "$OUT/make_test.log" 2>&1 || fail test "make test failed: see make_test.log"
        skips=$(grep -c '^\[SKIP\] gpu' "$OUT/make_test.log" || true)
        [ "$skips" -eq 0 ] || fail test "$skips GPU tests skipped"
        say "test: $(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$OUT/make_test.log" | tail -1), $skips GPU skips, $(( $(date +%s) - start )) s"
        ;;
    memcheck1 | memcheck2)
        make tests/run_tests > /dev/null || { fail "$stage" "build"; continue; }
        files="test_gpu_dev.c test_gpu_ops.c"
        [ "$stage" = memcheck2 ] && files="test_gpu_model.c test_generate.c test_heads.c"
        for t in $(gpu_tests $files); do sanitize memcheck "$t"; done
        say "$stage: done"
        ;;
    racecheck)
        make tests/run_tests > /dev/null || { fail racecheck "build"; continue; }
        for t in $(gpu_tests test_gpu_ops.c test_generate.c); do
            case $t in
            gpu_attn_patterns)   # large: each configuration and precision alone
                for c in 0 1 2; do for m in 0 1; do   # its three head-dim configurations
                    sanitize racecheck "$t" FAT5_TEST_ATTN_CFG=$c FAT5_TEST_ATTN_MODE=$m
                done; done ;;
            gpu_attn|gpu_attn_dropout)  # each precision alone (bf16: the tensor-core kernels;
                                        # gpu_attn_dropout bf16 about 3 minutes on an H200)
                for m in 0 1; do sanitize racecheck "$t" FAT5_TEST_ATTN_MODE=$m; done ;;
            gpu_attn_tc)         # its packed configurations take too long under racecheck (their
                                 # mma.sync kernels run in gpu_attn and gpu_attn_patterns bf16); the
                                 # one sequence of 2048 (configuration 4) runs the sm_90a forward on
                                 # H100 / H200, its TMA ring and wgmma (about 3 minutes)
                sanitize racecheck "$t" FAT5_TEST_ATTN_CFG=4 ;;
            *) sanitize racecheck "$t" ;;
            esac
        done
        say "racecheck: done"
        ;;
    finetune)
        # make finetune on the GPU (make train's checkpoint first: FAT5-small), its evaluations,
        # then ref/compare_hf.py --finetune (FLAN-T5-base shape, dropout 0.1 at every site,
        # Adafactor) beside Hugging Face eager and compiled: compare_finetune.log
        start=$(date +%s)
        if make finetune TRAIN_OUT="$OUT/train" FINETUNE_OUT="$OUT/finetune" > "$OUT/finetune.log" 2>&1; then
            say "finetune: make finetune (make train first) done in $(( $(date +%s) - start )) s"
        else
            fail finetune "make finetune failed: see finetune.log"
        fi
        grep '"eval_loss"' "$OUT/finetune/metrics.jsonl" 2> /dev/null | tail -3 >> "$OUT/summary.txt"
        if PYTHONUNBUFFERED=1 python3 ref/compare_hf.py --finetune --device cuda > "$OUT/compare_finetune.log" 2>&1; then
            sed -n '/^fine-tuning step/,$p' "$OUT/compare_finetune.log" >> "$OUT/summary.txt"
            grep '"impl"' "$OUT/compare_finetune.log" >> "$OUT/summary.txt"
            say "finetune: compare_hf done"
        else
            fail finetune "compare_hf --finetune: see compare_finetune.log"
        fi
        ;;
    train)
        start=$(date +%s)
        if make train TRAIN_OUT="$OUT/train" > "$OUT/train.log" 2>&1; then
            say "train: make train done in $(( $(date +%s) - start )) s"
        else
            fail train "make train failed: see train.log"
        fi
        tr '\r' '\n' < "$OUT/train.log" | grep -E 'step [0-9]+/' | tail -3 >> "$OUT/summary.txt"
        for p in 1 0; do
            rm -rf "$OUT/prefetch$p"
            examples/train --data "$OUT/train/fortunes.tok" --output_dir "$OUT/prefetch$p" --max_steps 60 \
                --warmup_steps 10 --eval_fraction 0 --save_steps 0 --prefetch $p > "$OUT/prefetch$p.log" 2>&1 ||
                { fail train "the prefetch $p run: see prefetch$p.log"; continue; }
            # steps 11..60 (after the warm-up): mean step time and wait for the batches
            awk -F'[:,}]' -v p=$p '{for (i = 1; i < NF; i++) { if ($i ~ /"step"$/) s = $(i+1); if ($i ~ /"step_s"$/) t = $(i+1); if ($i ~ /"data_s"$/) d = $(i+1) }
                 if (s > 10 && s <= 60) { n++; st += t; dt += d } }
                 END { printf "train: prefetch %d: %d steps, mean step %.2f ms, of which waiting for the data %.3f ms\n", p, n, 1000 * st / n, 1000 * dt / n }' \
                "$OUT/prefetch$p/metrics.jsonl" | tee -a "$OUT/summary.txt"
        done
        ;;
    dist1)
        export NCCL_NVLS_ENABLE=0
        make all dev/dist_check > /dev/null || { fail dist1 "build"; continue; }
        dev/dist_check --gpus 1 > "$OUT/dist_check1.log" 2>&1 && grep -q "rank 0: .*bit-exact" "$OUT/dist_check1.log" ||
            fail dist1 "dist_check --gpus 1: see dist_check1.log"
        [ -f "$OUT/fortunes.tok" ] || zcat data/fortunes/fortunes.txt.gz | tools/pretokenize --sep '%' -o "$OUT/fortunes.tok" - > /dev/null 2>&1 ||
            { fail dist1 "pretokenize"; continue; }
        d="--data $OUT/fortunes.tok --model fat5-small --max_length 1024 --max_labels_length 256 --batch_tokens 16384
           --batch_labels_tokens 4096 --eval_fraction 0 --save_steps 30 --warmup_steps 10 --logging_steps 10 --max_steps 30"
        rm -rf "$OUT/plain1" "$OUT/nccl1" "$OUT/rdv1"
        examples/train $d --output_dir "$OUT/plain1" > "$OUT/plain1.log" 2>&1 &&
        examples/train $d --world_size 1 --rank 0 --rendezvous "$OUT/rdv1" --output_dir "$OUT/nccl1" > "$OUT/nccl1.log" 2>&1 ||
            { fail dist1 "training runs: see plain1.log, nccl1.log"; continue; }
        cmp "$OUT/plain1/step-00000030/model.safetensors" "$OUT/nccl1/step-00000030/model.safetensors" &&
            say "dist1: 30 steps through a one-rank NCCL communicator: weights bit-identical to the plain run" ||
            fail dist1 "one-rank NCCL weights differ from the plain run"
        # a rank 0 of 2 whose peer never starts: NCCL's join waits without a timeout of its own
        for how in file NCCL_COMM_ID; do
            rm -rf "$OUT/lonely" "$OUT/rdv2"
            if [ $how = file ]; then rdv="$OUT/rdv2" e="-u NCCL_COMM_ID"; else rdv=NCCL_COMM_ID e="NCCL_COMM_ID=127.0.0.1:29531"; fi
            t0=$(date +%s)
            env $e timeout 150 examples/train $d --world_size 2 --rank 0 --rendezvous "$rdv" \
                --dist_timeout 3 --output_dir "$OUT/lonely" > "$OUT/lonely_$how.log" 2>&1
            r=$?
            took=$(( $(date +%s) - t0 ))
            say "dist1: rank 0 of 2 alone ($how): exit $r after $took s: $(grep -m1 -o 'rank 0 stops: [^;]*' "$OUT/lonely_$how.log")"
            [ $r -ne 0 ] && [ $r -ne 124 ] && [ $took -lt 90 ] && grep -q "joining NCCL (ncclCommInitRank) took more than 3 s" "$OUT/lonely_$how.log" ||
                fail dist1 "a lonely rank 0 ($how) was not stopped by --dist_timeout: see lonely_$how.log"
            [ $how = file ] && [ -e "$OUT/rdv2" ] && fail dist1 "the lonely rank 0 left its rendezvous file behind"
        done
        ;;
    dist)
        # two GPUs (or more): the sums (dist_check, a killed rank); a killed worker; the FAT5-small
        # throughput of 2 GPUs against 1 with the per-GPU batch of one (steps 21..200); 2 GPUs x B
        # against 1 GPU x 2B over 100 steps; bitwise resume on 2 GPUs and a resume on 1
        export NCCL_NVLS_ENABLE=0
        make all dev/dist_check > /dev/null || { fail dist "build"; continue; }
        dev/dist_check --gpus 2 > "$OUT/dist_check.log" 2>&1 && grep -q "rank 1: .*bit-exact" "$OUT/dist_check.log" ||
            fail dist "dist_check --gpus 2: see dist_check.log"
        dev/dist_check --gpus 2 --kill 1 --timeout 60 > "$OUT/dist_kill.log" 2>&1 ||
            fail dist "dist_check --gpus 2 --kill 1: see dist_kill.log"
        dev/dist_check --gpus 2 --kill 1 --at join --timeout 60 > "$OUT/dist_kill_join.log" 2>&1 &&
            grep -q "rank 0 stops: rank 1 failed" "$OUT/dist_kill_join.log" ||
            fail dist "dist_check --gpus 2 --kill 1 --at join (rank 0 must stop by itself, naming rank 1): see dist_kill_join.log"
        cat "$OUT/dist_check.log" "$OUT/dist_kill.log" "$OUT/dist_kill_join.log" >> "$OUT/summary.txt"
        [ -f "$OUT/fortunes.tok" ] || zcat data/fortunes/fortunes.txt.gz | tools/pretokenize --sep '%' -o "$OUT/fortunes.tok" - > /dev/null 2>&1 ||
            { fail dist "pretokenize"; continue; }
        d="--data $OUT/fortunes.tok --model fat5-small --max_length 1024 --max_labels_length 256 --batch_tokens 16384
           --batch_labels_tokens 4096 --eval_fraction 0 --save_steps 0 --warmup_steps 10 --logging_steps 10"
        r="$d --batch_tokens 4096 --batch_labels_tokens 1024 --max_steps 6 --save_steps 3 --warmup_steps 1"
        # a killed worker first (the stage's longest part, the throughput runs, comes after)
        rm -rf "$OUT/k"
        examples/train --gpus 2 $r --max_steps 100000 --output_dir "$OUT/k" > "$OUT/k.log" 2>&1 &
        lp=$!
        for i in $(seq 1 600); do [ -f "$OUT/k/metrics.jsonl" ] && [ "$(wc -l < "$OUT/k/metrics.jsonl")" -ge 3 ] && break; sleep 0.5; done
        w1=$(ps -o pid= --ppid $lp | sed -n 2p | tr -d ' ')
        t0=$(date +%s)
        kill -9 "$w1"
        wait $lp
        took=$(( $(date +%s) - t0 ))
        say "dist: worker rank 1 killed: the run ended in $took s: $(grep 'ranks stopped' "$OUT/k.log")"
        grep -q "rank 1 .*killed by signal 9" "$OUT/k.log" || fail dist "killed rank not reported: see k.log"
        # the survivor stops by itself (its wait or its watchdog), well before the launcher's 30 s grace kill
        say "dist: the survivor: $(grep -m1 'rank 0 stops' "$OUT/k.log" || echo 'no message of its own')"
        grep -q "rank 0 stops: rank 1 failed" "$OUT/k.log" && [ "$took" -lt 20 ] ||
            fail dist "rank 0 did not stop by itself within 20 s: see k.log"
        # 1 GPU, 2 GPUs balanced (the default), 2 GPUs as drawn (--balance_ranks 0), 1 GPU again
        for v in 1a 2b 2u 1b; do
            g=${v%?}
            x=""
            [ "$v" = 2u ] && x="--balance_ranks 0"
            rm -rf "$OUT/tput$v"
            examples/train --gpus $g $d $x --output_dir "$OUT/tput$v" --max_steps 200 > "$OUT/tput$v.log" 2>&1 ||
                { fail dist "throughput run $v: see tput$v.log"; continue; }
            awk -F'[:,}]' -v v=$v '{for (i = 1; i < NF; i++) { if ($i ~ /"step"$/) s = $(i+1); if ($i ~ /"tokens_per_s"$/) t = $(i+1)
                                                            if ($i ~ /"comm_s"$/) c = $(i+1); if ($i ~ /"rank_balance"$/) b = $(i+1) }
                 if (s > 20) { n++; tt += t; cc += c; bb += b } }
                 END { printf "dist: run %s: %d steps, mean %.0f tokens/s, exposed wait %.2f ms a step, busiest rank %.4f x the mean FLOPs\n", v, n, tt / n, 1000 * cc / n, n ? bb / n : 0 }' \
                "$OUT/tput$v/metrics.jsonl" | tee -a "$OUT/summary.txt"
        done
        tp() { sed -n "s/.*run $1: .*mean \([0-9]*\) tokens.*/\1/p" "$OUT/summary.txt" | tail -1; }
        say "dist: 2 GPUs / 1 GPU throughput (1 GPU: the mean of two runs): balanced $(awk -v a="$(tp 1a)" -v c="$(tp 1b)" -v b="$(tp 2b)" 'BEGIN { printf "%.3f", 2 * b / (a + c) }'), as drawn $(awk -v a="$(tp 1a)" -v c="$(tp 1b)" -v b="$(tp 2u)" 'BEGIN { printf "%.3f", 2 * b / (a + c) }') (target 1.9)"
        rm -rf "$OUT/c1" "$OUT/c2"
        c="$d --max_steps 100 --batch_tokens 8192 --batch_labels_tokens 2048"
        examples/train --gpus 1 $c --gradient_accumulation_steps 2 --output_dir "$OUT/c1" > "$OUT/c1.log" 2>&1 &&
        examples/train --gpus 2 $c --output_dir "$OUT/c2" > "$OUT/c2.log" 2>&1 || { fail dist "curve runs: see c1.log, c2.log"; continue; }
        paste "$OUT/c1/metrics.jsonl" "$OUT/c2/metrics.jsonl" | awk '{ split($0, h, "\t"); match(h[1], /"loss": [^,]*/); a = substr(h[1], RSTART + 8, RLENGTH - 8)
              match(h[2], /"loss": [^,]*/); b = substr(h[2], RSTART + 8, RLENGTH - 8); d = a - b; if (d < 0) d = -d; r = d / a; s += r; if (r > m) m = r; n++ }
              END { printf "dist: 2 GPUs x B vs 1 GPU x 2B, %d steps: loss relative difference mean %.2e, max %.2e (bf16 epsilon 7.8e-3)\n", n, s / n, m }' \
            | tee -a "$OUT/summary.txt"
        rm -rf "$OUT/r2" "$OUT/r3" "$OUT/r1"
        examples/train --gpus 2 $r --output_dir "$OUT/r2" > "$OUT/r2.log" 2>&1 || fail dist "resume run: see r2.log"
        mkdir -p "$OUT/r3" && cp -r "$OUT/r2/step-00000003" "$OUT/r3/" && echo step-00000003 > "$OUT/r3/latest"
        examples/train --gpus 2 $r --output_dir "$OUT/r3" --resume "$OUT/r3" > "$OUT/r3.log" 2>&1 || fail dist "resumed run: see r3.log"
        cmp "$OUT/r2/step-00000006/model.safetensors" "$OUT/r3/step-00000006/model.safetensors" &&
            say "dist: 2-GPU resume from step 3: model at step 6 bit-identical" || fail dist "2-GPU resume differs"
        examples/train --gpus 1 $r --gradient_accumulation_steps 2 --output_dir "$OUT/r1" --resume "$OUT/r2/step-00000003" \
            > "$OUT/r1.log" 2>&1 && say "dist: the 2-GPU checkpoint resumed on 1 GPU" || fail dist "resume on 1 GPU: see r1.log"
        ;;
    distsweep)
        export NCCL_NVLS_ENABLE=0
        make all > /dev/null || { fail distsweep "build"; continue; }
        [ -f "$OUT/fortunes.tok" ] || zcat data/fortunes/fortunes.txt.gz | tools/pretokenize --sep '%' -o "$OUT/fortunes.tok" - > /dev/null 2>&1 ||
            { fail distsweep "pretokenize"; continue; }
        d="--data $OUT/fortunes.tok --model fat5-small --max_length 1024 --max_labels_length 256 --batch_tokens 16384
           --batch_labels_tokens 4096 --eval_fraction 0 --save_steps 0 --warmup_steps 10 --logging_steps 20 --max_steps 140"
        # one run: NAME GPUS [VAR=VALUE...] [-- ARGS...]; SW_BIN: the trainer
        sw() {
            n=$1 g=$2
            shift 2
            e=""
            while [ $# -gt 0 ] && [ "$1" != -- ]; do e="$e $1"; shift; done
            [ $# -gt 0 ] && shift
            rm -rf "$OUT/sw_$n"
            env $e "${SW_BIN:-examples/train}" --gpus "$g" $d "$@" --output_dir "$OUT/sw_$n" > "$OUT/sw_$n.log" 2>&1 ||
                { fail distsweep "run $n: see sw_$n.log"; return; }
            sw_line "$n"
        }
        sw_line() {
            awk -F'[:,}]' -v n="$1" '{for (i = 1; i < NF; i++) { if ($i ~ /"step"$/) s = $(i+1); if ($i ~ /"tokens"$/) k = $(i+1)
                                    if ($i ~ /"step_s"$/) t = $(i+1); if ($i ~ /"comm_s"$/) c = $(i+1); if ($i ~ /"world_size"$/) w = $(i+1) }
                 if (s > 20) { m++; kk += k; tt += t; cc += c } }
                 END { if (!w) w = 1; printf "distsweep: %-9s %d GPU: %8.0f tokens/s, %7.0f per GPU, step %.2f ms, exposed wait %.3f ms\n", n, w, kk / tt, kk / tt / w, 1000 * tt / m, 1000 * cc / m }' \
                "$OUT/sw_$1/metrics.jsonl" | tee -a "$OUT/summary.txt"
        }
        sw 1gpu 1
        sw 2gpu 2
        rm -rf "$OUT/sw_alone0" "$OUT/sw_alone1"
        CUDA_VISIBLE_DEVICES=0 examples/train --gpus 1 $d --output_dir "$OUT/sw_alone0" > "$OUT/sw_alone0.log" 2>&1 &
        CUDA_VISIBLE_DEVICES=1 examples/train --gpus 1 $d --output_dir "$OUT/sw_alone1" > "$OUT/sw_alone1.log" 2>&1 ||
            fail distsweep "a 1-GPU run beside another: see sw_alone1.log"
        wait $! || fail distsweep "a 1-GPU run beside another: see sw_alone0.log"
        sw_line alone0
        sw_line alone1
        sw ch4 2 NCCL_MAX_NCHANNELS=4
        sw ch8 2 NCCL_MAX_NCHANNELS=8
        sw ch16 2 NCCL_MAX_NCHANNELS=16
        sw simple 2 NCCL_PROTO=Simple
        sw b50 2 -- --bucket_mb 50
        sw b200 2 -- --bucket_mb 200
        if [ -n "${SWEEP_REF:-}" ]; then SW_BIN=$SWEEP_REF; sw ref 2; SW_BIN=; fi
        sw 2gpu_again 2
        sw 1gpu_again 1
        say "distsweep: done"
        ;;
    step)
        make dev/bench > /dev/null || { fail step "build"; continue; }
        if dev/bench step > "$OUT/step.jsonl" 2> "$OUT/step.err"; then
            grep '"bench": "step"' "$OUT/step.jsonl" >> "$OUT/summary.txt"
            grep '"step_profile_sum"' "$OUT/step.jsonl" >> "$OUT/summary.txt"
            grep '"step_profile"' "$OUT/step.jsonl" | head -12 >> "$OUT/summary.txt"
        else
            fail step "dev/bench step: $(tail -1 "$OUT/step.err")"
        fi
        if PYTHONUNBUFFERED=1 python3 ref/compare_hf.py --train --device cuda > "$OUT/compare_train.log" 2>&1; then
            sed -n '/^training step/,$p' "$OUT/compare_train.log" >> "$OUT/summary.txt"
            say "step: done"
        else
            fail step "compare_hf --train: see compare_train.log"
        fi
        ;;
    curve)
        ref=${REF_SRC:-}
        if [ -z "$ref" ] || [ ! -f "$ref/fat5.h" ] || [ ! -f "$ref/fat5_kernels.cuh" ] || [ ! -f "$ref/examples/train.c" ]; then
            fail curve "REF_SRC must name a directory with fat5.h, fat5_kernels.cuh and examples/train.c"
            continue
        fi
        make examples/train build/train/fortunes.tok > "$OUT/curve_build.log" 2>&1 || { fail curve "build: see curve_build.log"; continue; }
        cc -std=c99 -O2 -o build/train_ref "$ref/examples/train.c" -lm -ldl -lpthread >> "$OUT/curve_build.log" 2>&1 ||
            { fail curve "reference build: see curve_build.log"; continue; }
        args="--data build/train/fortunes.tok --max_steps 200 --warmup_steps 20 --eval_fraction 0 --save_steps 0"
        rm -rf build/curve_new build/curve_ref build/curve_noise build/curve_new_noise
        examples/train $args --output_dir build/curve_new > "$OUT/curve_new.log" 2>&1 &&
            build/train_ref $args --output_dir build/curve_ref > "$OUT/curve_ref.log" 2>&1 &&
            FAT5_ATTN_TC=0 build/train_ref $args --output_dir build/curve_noise > "$OUT/curve_noise.log" 2>&1 &&
            FAT5_ATTN_TC=0 examples/train $args --output_dir build/curve_new_noise > "$OUT/curve_new_noise.log" 2>&1 ||
            { fail curve "a training run failed: see curve_*.log"; continue; }
        for r in new ref noise new_noise; do cp "build/curve_$r/metrics.jsonl" "$OUT/curve_$r.jsonl"; done
        # the noise: each build against itself with the other attention rounding
        if python3 ref/compare_curves.py "$OUT/curve_ref.jsonl" "$OUT/curve_new.jsonl" \
            --noise "$OUT/curve_noise.jsonl" --noise-pair "$OUT/curve_new.jsonl" "$OUT/curve_new_noise.jsonl" \
            >> "$OUT/summary.txt"; then
            say "curve: within the bf16 noise"
        else
            fail curve "the curve is not within the bf16 noise (the line above)"
        fi
        ;;
    *) echo "gpu_check: unknown stage $stage" >&2; exit 2 ;;
    esac
done
exit $rc
