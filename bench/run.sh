#!/usr/bin/env bash
# run.sh: the benchmark in one command: the machine's peak, per-op microbenchmarks, collectives
# between 2 ranks, the seed's FSDP MNIST epoch on 2 ranks and the same training in PyTorch, as a
# readable table plus one raw line per measurement. See bench/README.md; bench/run.sh --help.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/run.sh [--quick] [--parts LIST] [--repeat K] [--only PATTERN]
                    [--build DIR] [--data DIR] [--raw FILE]
  --quick         check the tooling in a minute or two: 2% of an epoch (1280 train + 256 test
                  samples), tiny op repeats, fewer collective sizes
  --parts LIST    comma-separated, from: ops,comm,fsdp,torch (default: all); the peak always runs
  --repeat K      run the parts K times (interleaved) and report medians (default: 1)
  --only PATTERN  ops: only the ops whose id matches this Lua pattern (e.g. conv2d, b64)
  --build DIR     the build tree (default: build)
  --data DIR      where MNIST/raw is (default: data)
  --raw FILE      also keep every raw line of every repeat in FILE
EOF
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
quick=0 parts="ops,comm,fsdp,torch" repeat=1 only="" build="$root/build" data="$root/data" raw_out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --parts) parts=${2:?--parts needs a list}; shift ;;
    --repeat) repeat=${2:?--repeat needs a count}; shift ;;
    --only) only=${2:?--only needs a pattern}; shift ;;
    --build) build=${2:?--build needs a directory}; shift ;;
    --data) data=${2:?--data needs a directory}; shift ;;
    --raw) raw_out=${2:?--raw needs a file}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
case "$repeat" in ''|*[!0-9]*|0) echo "run.sh: --repeat wants a positive integer, got $repeat" >&2; exit 2 ;; esac
for p in ${parts//,/ }; do
  case "$p" in ops|comm|fsdp|torch) ;; *) echo "run.sh: unknown part '$p' (ops, comm, fsdp, torch)" >&2; exit 2 ;; esac
done
has_part() { [[ ",$parts," == *",$1,"* ]]; }

moonshard="$build/moonshard"
peak_bin="$build/bench/sgemm_bench"
for f in "$moonshard" "$peak_bin"; do
  [ -x "$f" ] || { echo "run.sh: $f is missing: build first (README.md)" >&2; exit 1; }
done
python=${MS_BENCH_PYTHON:-/usr/bin/python3} # Debian's python3-torch lives there

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
raw="$tmp/raw.txt"
: >"$raw"

# A hung part (a collective that never completes) ends the bench instead of stalling it.
part_limit=$([ "$quick" = 1 ] && echo 300 || echo 1800)

# Run a part, its output in a log; keep its BENCH lines (tagged when given a config and run).
# A failing part stops the bench with its log's tail: a broken measurement must not look like one.
run_part() {
  local name=$1 tag=$2; shift 2
  local log="$tmp/$name.log"
  echo "-- $name: $*" >&2
  if ! timeout --kill-after=10 "$part_limit" "$@" >"$log" 2>&1; then
    echo "run.sh: part $name failed (or ran past ${part_limit}s): $*" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
  if [ -n "$tag" ]; then
    sed -n "s/^BENCH-RANK \([a-z]*\) /BENCH-RANK \1 $tag /p" "$log" >>"$raw"
  else
    grep '^BENCH' "$log" >>"$raw" || true
  fi
}

skip() { echo "BENCH-SKIP $1 $2" >>"$raw"; echo "-- $1: skipped: $2" >&2; }

# The training data: the real MNIST, or its first 2% for --quick (same files, fewer samples).
mnist="$data"
have_mnist=0
[ -f "$data/MNIST/raw/train-images-idx3-ubyte" ] && [ -f "$data/MNIST/raw/t10k-labels-idx1-ubyte" ] && have_mnist=1
if [ "$have_mnist" = 1 ] && [ "$quick" = 1 ] && { has_part fsdp || has_part torch; }; then
  mnist="$tmp/mnist"
  mkdir -p "$mnist/MNIST/raw"
  "$moonshard" "$here/mnist_subset.lua" "$data" "$mnist" 1280 256
fi
have_torch=0
[ -x "$python" ] && "$python" -c 'import torch, numpy' 2>/dev/null && have_torch=1
tuned_env=(env MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=17179869184)
q=(); [ "$quick" = 1 ] && q=(--quick)

# The load average tells how much other work shared the cores: say it with the numbers.
echo "# moonshard bench: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')," \
  "$(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1)), load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "parts $parts, repeat $repeat$([ "$quick" = 1 ] && echo ', quick')"

for ((r = 1; r <= repeat; r++)); do
  run_part peak "" "$peak_bin" --peak
  # this repeat's peaks, passed to the parts that express rates as a share of them
  peaks=$(grep '^BENCH peak' "$tmp/peak.log" | awk '{ split($3, id, "/t"); split($4, v, "="); printf "--%s%s=%s ", id[1], id[2], v[2] }')
  read -r -a peak_args <<<"$peaks"
  copy1_args=(); for p in "${peak_args[@]}"; do [[ $p == --copy1=* ]] && copy1_args+=("$p"); done
  if has_part ops; then
    only_args=(); [ -n "$only" ] && only_args=(--only "$only")
    run_part ops "" "$moonshard" "$here/ops_bench.lua" "${q[@]}" "${only_args[@]}" "${peak_args[@]}"
  fi
  if has_part comm; then
    run_part comm "" "$moonshard" -n 2 "$here/comm_bench.lua" "${q[@]}" "${copy1_args[@]}"
  fi
  if has_part fsdp; then
    if [ "$have_mnist" = 1 ]; then
      run_part fsdp "config=moonshard_fsdp_2x1 run=$r" env MS_BENCH_REPORT=1 \
        "$moonshard" -n 2 "$root/scripts/mnist_fsdp.lua" --epochs 1 --data "$mnist"
      run_part fsdp "config=moonshard_fsdp_2x1_bf16 run=$r" env MS_BENCH_REPORT=1 \
        "$moonshard" -n 2 "$root/scripts/mnist_fsdp.lua" --epochs 1 --data "$mnist" --mixed-precision bfloat16
    elif [ "$r" = 1 ]; then
      skip fsdp "no MNIST under $data/MNIST/raw (scripts/fetch-mnist.sh fetches it)"
    fi
  fi
  if has_part torch; then
    if [ "$have_mnist" = 1 ] && [ "$have_torch" = 1 ]; then
      for alloc in default tuned; do
        pre=(); [ "$alloc" = tuned ] && pre=("${tuned_env[@]}")
        run_part torch "config=torch_ddp_2x1_$alloc run=$r" "${pre[@]}" "$python" "$here/torch_mnist.py" \
          --mode ddp --ranks 2 --threads 1 --data "$mnist"
        run_part torch "config=torch_single_1x2_$alloc run=$r" "${pre[@]}" "$python" "$here/torch_mnist.py" \
          --mode single --threads 2 --data "$mnist"
      done
      run_part torch "config=torch_ddp_2x1_tuned_bf16 run=$r" "${tuned_env[@]}" "$python" "$here/torch_mnist.py" \
        --mode ddp --ranks 2 --threads 1 --data "$mnist" --autocast bfloat16
    elif [ "$r" = 1 ]; then
      if [ "$have_torch" = 0 ]; then
        skip torch "PyTorch is absent ($python cannot import torch and numpy: apt-get install python3-torch)"
      else
        skip torch "no MNIST under $data/MNIST/raw (scripts/fetch-mnist.sh fetches it)"
      fi
    fi
  fi
done

echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -n "$raw_out" ] && cp "$raw" "$raw_out"
"$moonshard" "$here/report.lua" "$raw"
