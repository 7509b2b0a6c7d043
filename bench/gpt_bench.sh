#!/usr/bin/env bash
# gpt_bench.sh: scripts/gpt_fsdp.lua's GPT against the same model and loop in PyTorch 1.13 on this
# CPU (bench/torch_gpt.py: DDP over gloo on the same ranks, and one process with a thread per rank
# on the ranks' whole batch: PyTorch's two CPU configurations), run interleaved in one call so all
# see the same load; float32 and bfloat16 (moonshard's FSDP mixed precision, PyTorch's CPU
# autocast). Prints every rank's BENCH-RANK line, then one BENCH gpt line per configuration with
# the median of the repeats' summed tokens/s, the largest per-rank VmHWM, and moonshard's MFU
# against the machine's FMA peak (build/bench/sgemm_bench --peak). Every configuration times --steps
# steps after --warmup untimed ones: the steady state of a training run (moonshard's second step
# faults in the memory its first optimizer step took from the cache; PyTorch's does not differ).
#   bench/gpt_bench.sh [--ranks 2] [--repeat 3] [--steps 4] [--warmup 2]
#                      [--model "--n-layer 12 --n-embd 768 ..."] [--text FILE] [--build DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
ranks=2 repeat=3 steps=4 warmup=2 build="$root/build" text=""
model="--n-layer 12 --n-head 12 --n-embd 768 --block-size 256 --batch-size 4"
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --text) text=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "gpt_bench.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
python=${MS_BENCH_PYTHON:-/usr/bin/python3}
batch=$(echo "$model" | sed -n 's/.*--batch-size \([0-9]*\).*/\1/p')
batch=${batch:-4}
moonshard="$build/moonshard"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The corpus: the named text, else the King James Bible where Debian's bible-kjv is installed,
# else the README; byte-level tokens so that both programs read the same file.
if [ -z "$text" ]; then
  if command -v bible >/dev/null; then
    bible -f 'Gen1:1-Rev22:21' </dev/null | sed 's/^[^ ]* //' >"$tmp/corpus.txt"
  else
    cp "$root/README.md" "$tmp/corpus.txt"
  fi
  text="$tmp/corpus.txt"
fi
"$moonshard" "$root/scripts/text_to_tokens.lua" --data "$text" --out "$tmp/corpus.bin" >/dev/null

# PyTorch's float32 products go through libblas.so.3: Debian's reference BLAS there runs them at
# ~4 GFLOP/s (its best configuration has OpenBLAS: apt-get install libopenblas0-pthread)
blas=$(update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | sed -n 's/^Value: //p')
case "$blas" in
  *openblas*|*blis*|*mkl*) ;;
  *) echo "# note: libblas.so.3 is ${blas:-unknown}: PyTorch's float32 products use it (apt-get install libopenblas0-pthread)" ;;
esac
peak=$("$build/bench/sgemm_bench" --peak | awk '/^BENCH peak fma\/t1 / { split($4, v, "="); print v[2] }')
echo "# gpt bench: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')," \
  "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $ranks ranks, $warmup + $steps steps, model: $model," \
  "fma peak $peak GFLOP/s per core," \
  "PyTorch's BLAS ${blas:-unknown}"

launch=(); [ "$ranks" -gt 1 ] && launch=(-n "$ranks")
run_config() { # name, command...
  local name=$1; shift
  # ranks print concurrently: a line that arrives glued to another's is split at its tag first
  "$@" 2>"$tmp/err" | sed 's/\(.\)BENCH-RANK/\1\nBENCH-RANK/g' | grep '^BENCH-RANK' | sed "s/^/$name /" |
    tee -a "$tmp/lines" || {
    echo "gpt_bench.sh: $name failed:" >&2; tail -5 "$tmp/err" >&2; }
}
for ((r = 1; r <= repeat; r++)); do
  for mp in none bfloat16; do
    # shellcheck disable=SC2086 # $model is a list of options
    run_config "moonshard_$mp" env MS_BENCH_REPORT=1 MS_BENCH_WARMUP="$warmup" "$moonshard" "${launch[@]}" \
      "$root/scripts/gpt_fsdp.lua" --tokens "$tmp/corpus.bin" $model --steps $((steps + warmup)) \
      --log-interval 1000 --sample-tokens 0 \
      --mixed-precision "$mp" --peak-gflops "$peak"
    # shellcheck disable=SC2086
    run_config "torch_$mp" "$python" "$here/torch_gpt.py" --ranks "$ranks" --tokens "$tmp/corpus.bin" $model \
      --steps "$steps" --warmup "$warmup" --autocast "$mp"
    # PyTorch's other configuration: one process with a thread per core, the ranks' batch in one
    # shellcheck disable=SC2086
    run_config "torch1p_$mp" "$python" "$here/torch_gpt.py" --ranks 1 --threads "$ranks" --tokens "$tmp/corpus.bin" \
      $model --batch-size $((batch * ranks)) --steps "$steps" --warmup "$warmup" --autocast "$mp"
  done
done

# model FLOPs per token (6 N + 12 L T E) from the model options, for the MFU
flops=$(echo "$model" | awk '{ for (i = 1; i < NF; i++) a[$i] = $(i + 1)
  L = a["--n-layer"]; E = a["--n-embd"]; T = a["--block-size"]; V = 256
  n = L * (12 * E * E + 13 * E) + V * E + T * E + 2 * E
  printf "%.0f", 6 * n + 12 * L * T * E }')
# per run: the ranks' summed tokens/s and largest VmHWM; then per configuration the median run
# (torch1p_*: one process with a thread per rank, so /r2 names the cores it used)
awk -v ranks="$ranks" '
  { tps = 0; hwm = 0
    for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "tokens_per_s") tps = kv[2]; if (kv[1] == "vmhwm_kb") hwm = kv[2] }
    per = $1 ~ /^torch1p_/ ? 1 : ranks # lines a run prints: one per rank, one for a single process
    run = $1 " " int((n[$1]++) / per); sum[run] += tps; if (hwm > mem[run]) mem[run] = hwm }
  END { for (run in sum) { split(run, k, " "); print k[1], sum[run], mem[run] } }' "$tmp/lines" |
  sort -k1,1 -k2,2n |
  awk -v ranks="$ranks" -v peak="$peak" -v flops="$flops" '
    { cfg[NR] = $1; tps[NR] = $2; hwm[NR] = $3; count[$1]++ }
    END { for (i = 1; i <= NR; i++) {
            c = cfg[i]; if (c != prev) { first = i; prev = c }
            if (i - first + 1 == int((count[c] + 1) / 2))
              printf "BENCH gpt %s/r%d tokens_per_s=%.1f mfu_pct=%.1f vmhwm_mb=%.0f runs=%d\n", c, ranks, tps[i],
                100 * tps[i] * flops / (peak * 1e9 * ranks), hwm[i] / 1024, count[c] } }'
