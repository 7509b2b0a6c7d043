#!/usr/bin/env bash
# gpu_seed.sh: the seed's FSDP MNIST epoch on one GPU, moonshard (float32 and --mixed-precision
# bfloat16) against PyTorch on the same GPU in the same run (bench/torch_mnist_gpu.py: the program
# as the seed writes it, and a tuned variant with the data on the GPU). Prints the medians of
# epochs 2..E (epoch 1 pays start-up: cuDNN's autotuning, allocator growth) and each ratio.
#   bench/gpu_seed.sh [--epochs E] [--torch-seed-epochs E2] [--build DIR] [--data DIR] [--no-torch]
#                     [--raw FILE]   (every run's whole output; default: a temporary file, named at the end)
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
epochs=4 seed_epochs=2 build="$root/build" data="$root/data" torch=1 raw=""
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) epochs=${2:?}; shift ;;
    --torch-seed-epochs) seed_epochs=${2:?}; shift ;;
    --build) build=${2:?}; shift ;;
    --data) data=${2:?}; shift ;;
    --no-torch) torch=0 ;;
    --raw) raw=${2:?}; shift ;;
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_seed.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
case "$epochs" in ''|*[!0-9]*|0|1) echo "gpu_seed.sh: --epochs wants an integer >= 2, got $epochs" >&2; exit 2 ;; esac
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
lines=$(mktemp); trap 'rm -f "$lines"' EXIT
[ -n "$raw" ] || raw=$(mktemp /tmp/gpu_seed.raw.XXXXXX)
: > "$raw"

run() { # run NAME COMMAND...: keeps the BENCH-EPOCH lines, renamed NAME
  local name=$1; shift
  echo "== $name: $*"
  echo "== $name: $*" >> "$raw"
  "$@" 2>&1 | tee -a "$raw" | awk -v n="$name" '/^BENCH-EPOCH/ { $2 = n; print }' >> "$lines"
}

cd "$root"
run moonshard-fp32 env MS_BENCH_REPORT=1 "$build/moonshard" -n 1 scripts/mnist_fsdp.lua --epochs "$epochs" --data "$data"
run moonshard-bf16 env MS_BENCH_REPORT=1 "$build/moonshard" -n 1 scripts/mnist_fsdp.lua --epochs "$epochs" --data "$data" \
  --mixed-precision bfloat16
if [ "$torch" = 1 ]; then
  run torch-tuned python3 bench/torch_mnist_gpu.py --variant tuned --epochs "$epochs" --data "$data"
  run torch-seed python3 bench/torch_mnist_gpu.py --variant seed --epochs "$seed_epochs" --data "$data"
fi

echo
echo "== medians of epochs 2..: seconds per epoch (train + test), moonshard's ratio to each"
awk '
  function median(a, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
                                      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  { split($3, e, "="); if (e[2] < 2) next
    split($4, tr, "="); split($5, te, "="); k = $2; n[k]++; TR[k, n[k]] = tr[2]; TE[k, n[k]] = te[2]; order[k] = NR }
  END {
    for (k in n) { for (i = 1; i <= n[k]; i++) { a[i] = TR[k, i]; b[i] = TE[k, i] }
                   mtr[k] = median(a, n[k]); mte[k] = median(b, n[k]) }
    printf "%-16s %9s %9s %9s\n", "run", "train_s", "test_s", "epoch_s"
    for (k in n) printf "%-16s %9.3f %9.3f %9.3f\n", k, mtr[k], mte[k], mtr[k] + mte[k]
    m = "moonshard-fp32"
    for (k in n) if (k ~ /^torch/ && (m in n))
      printf "ratio %s / %s: epoch %.2fx, train %.2fx, test %.2fx (above 1: moonshard faster)\n", k, m,
             (mtr[k] + mte[k]) / (mtr[m] + mte[m]), mtr[k] / mtr[m], mte[k] / mte[m]
    if (("moonshard-bf16" in n) && (m in n))
      printf "bf16 / fp32 epoch: %.2f (below 1: bf16 faster)\n", (mtr["moonshard-bf16"] + mte["moonshard-bf16"]) / (mtr[m] + mte[m])
  }' "$lines"
echo
echo "== accuracy after each epoch (moonshard's test lines, PyTorch's BENCH-EPOCH lines); every run's output: $raw"
grep -E "^== |Test set|^BENCH-EPOCH torch" "$raw"
