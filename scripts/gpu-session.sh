#!/usr/bin/env bash
# gpu-session.sh: everything a session with a GPU has to run, in one call on the device machine
# (docs/gpu-session.md): a build made elsewhere and staged by ../shared/gpu/stage.sh, run there as
#   bash .device/run.sh scripts/gpu-session.sh            (logs to $OUT, else /tmp/gpu-session-*)
# Steps, each under its own time limit, all within SESSION_BUDGET_S (default 540 s, 9 minutes);
# a step that fails or runs out of time leaves the others' logs (no step stops the session):
#   ctest -R 'cuda|pin|doc'          the GPU tests and the docs' examples that need a GPU
#   bench/gpu_seed.sh                the seed's epoch: moonshard float32 and bf16 against PyTorch's
#                                    seed and tuned variants (medians of epochs 2..4)
#   bench/gpu_step_profile.lua       one training step: host enqueue beside wall time
#   bench/torch_step_profile.py      the same step in PyTorch
#   bench/gpu_graph_step.lua         the step eager and replayed as a CUDA graph
#   bench/cuda_lowp_bench.lua        bf16/f16 nn kernels against float32 (when the file exists),
#   bench/cuda_half_ops.lua          and the elementwise ops
#   scripts/gpu-check.sh --prebuilt  the whole GPU check, in what is left of the budget
# then summary.txt: issue 20's done-when figures read from those logs, each with its verdict.
# At most 8 files are written (the device tool brings back no more): summary.txt ctest.log
# seed.log seed_raw.log profile.log gpu_check.log lowp.log.
#   scripts/gpu-session.sh [--dry-run] [DIR]   --dry-run: print the plan, run nothing
#   scripts/gpu-session.sh --summary-only DIR  write DIR/summary.txt again from DIR's logs
#   (BUILD=dir: the build tree, default build; SESSION_BUDGET_S: the budget in seconds)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
mode=run dir=""
for a in "$@"; do
  case "$a" in
    --dry-run) mode=dry ;;
    --summary-only) mode=summary ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu-session.sh: unknown option $a (usage: scripts/gpu-session.sh [--dry-run | --summary-only] [DIR])" >&2; exit 2 ;;
    *) dir=$a ;;
  esac
done
[ $mode = summary ] && [ -z "$dir" ] && { echo "gpu-session.sh: --summary-only needs the logs' DIR" >&2; exit 2; }
dir=${dir:-${OUT:-/tmp/gpu-session-$(date +%Y%m%d-%H%M%S)}}
BUILD=${BUILD:-build}
BUDGET=${SESSION_BUDGET_S:-540}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
t0=$(date +%s)
deadline=$((t0 + BUDGET))
head="$dir/summary.txt.head" # the summary's first lines (machine, steps) while the session runs

# step NAME LIMIT LOG COMMAND...: runs COMMAND with its output appended to LOG, under LIMIT
# seconds cut to what is left of the budget; notes "ok", "FAILED (rc N)", "TIMEOUT" or "skipped".
step() {
  local name=$1 limit=$2 log=$3
  shift 3
  if [ $mode = dry ]; then
    printf '%-30s %4s s  > %-13s %s\n' "$name" "$limit" "$log" "$*"
    return 0
  fi
  local left=$((deadline - $(date +%s)))
  [ "$limit" -gt "$left" ] && limit=$left
  if [ "$limit" -lt 10 ]; then
    echo "skipped  $name (the session's $BUDGET s are spent)" >> "$head"
    return 0
  fi
  echo "== $name ($limit s at most): $*" | tee -a "$dir/$log"
  local s=$(date +%s)
  timeout -k 10 "$limit" "$@" >> "$dir/$log" 2>&1
  local rc=$? took=$(( $(date +%s) - s ))
  case $rc in
    0) echo "ok       $name (${took} s) -> $log" ;;
    124|137) echo "TIMEOUT  $name (after ${took} s) -> $log" ;;
    *) echo "FAILED   $name (rc $rc, ${took} s) -> $log" ;;
  esac >> "$head"
  echo "== $name: rc $rc, ${took} s" >> "$dir/$log"
}

# skip NAME LOG WHY: a step that cannot run here, said in its log and in the summary
skip() {
  if [ $mode = dry ]; then printf '%-30s skipped: %s\n' "$1" "$3"; return 0; fi
  echo "== $1: skipped: $3" >> "$dir/$2"
  echo "skipped  $1: $3" >> "$head"
}

# ---- summary.txt: issue 20's done-when figures, each with its target, from the logs alone ----
median_row() { # median_row RUN: "train test epoch" of gpu_seed.sh's table for RUN
  awk -v r="$1" '$1 == r && NF == 4 { row = $2 " " $3 " " $4 } END { print row }' "$dir/seed.log" 2>/dev/null
}
accuracy() { # accuracy first|last: a "Test set" accuracy of moonshard's float32 run, or n/a
  awk -v which="$1" '/^== moonshard-fp32/ { on = 1; next } /^== / { on = 0 }
    on && /Test set/ && match($0, /\([0-9.]+%\)/) { a = substr($0, RSTART + 1, RLENGTH - 2); if (which == "first") exit }
    END { print a == "" ? "n/a" : a }' "$dir/seed_raw.log" 2>/dev/null || echo n/a
}
step_ms() { # step_ms KIND WHO: the wall ms of a B=64 step from profile.log (WHO: ms or torch),
  # or n/a; each step's lines follow its "== step profile ..." header and read
  # "plain       B=  64  step 1.471 ms wall, ..."
  awk -v k="$1" -v who="$2" '/^== step profile \(torch\) \(/ { t = "torch" } /^== step profile \([0-9]/ { t = "ms" }
    t == who && $1 == k && $2 == "B=" && $3 == "64" && $4 == "step" && v == "" { v = $5 }
    END { print v == "" ? "n/a" : v }' "$dir/profile.log" 2>/dev/null || echo n/a
}
verdict() { # verdict VALUE OP TARGET: "met" / "NOT met" (OP: le, lt or ge), n/a without a value
  awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN {
    if (v == "" || v == "n/a" || t == "" || t == "n/a") { print "n/a"; exit }
    ok = (op == "le") ? v + 0 <= t + 0 : (op == "lt") ? v + 0 < t + 0 : v + 0 >= t + 0
    print ok ? "met" : "NOT met" }'
}
write_summary() {
  local f_tr f_te f_ep b_tr b_te b_ep t_tr t_te t_ep s_tr s_te s_ep
  read -r f_tr f_te f_ep <<< "$(median_row moonshard-fp32)"
  read -r b_tr b_te b_ep <<< "$(median_row moonshard-bf16)"
  read -r t_tr t_te t_ep <<< "$(median_row torch-tuned)"
  read -r s_tr s_te s_ep <<< "$(median_row torch-seed)"
  local ratio step64 acc1 tests skipped
  ratio=$(awk -v b="${b_ep:-}" -v f="${f_ep:-}" 'BEGIN { if (b != "" && f > 0) printf "%.2f", b / f; else print "n/a" }')
  step64=$(step_ms plain ms)
  acc1=$(accuracy first)
  tests=$(grep -E 'tests passed|No tests were found' "$dir/ctest.log" 2>/dev/null | tail -1)
  skipped=$(grep -c '\*\*\*Skipped' "$dir/ctest.log" 2>/dev/null)
  cat "$head" 2>/dev/null
  echo
  echo "== issue 20, done when (one GPU, medians of epochs 2-4)"
  echo "GPU tests: ${tests:-n/a (see ctest.log)}; ${skipped:-0} skipped (on a GPU machine, none should be)"
  grep -E '^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception|Skipped)' "$dir/ctest.log" 2>/dev/null | sed 's/^\s*/  /'
  echo "epoch float32 (train + test): ${f_ep:-n/a} s (train ${f_tr:-n/a}, test ${f_te:-n/a}); target <= 0.6: $(verdict "${f_ep:-}" le 0.6)"
  echo "test pass: moonshard ${f_te:-n/a} s, PyTorch tuned ${t_te:-n/a} s; target moonshard <= PyTorch tuned: $(verdict "${f_te:-}" le "${t_te:-}")"
  echo "epoch bf16: ${b_ep:-n/a} s; bf16 / float32 ${ratio}; target < 1: $(verdict "$ratio" lt 1)"
  echo "training step B=64: plain ${step64} ms, fsdp $(step_ms fsdp ms) ms; target <= 0.5: $(verdict "$step64" le 0.5)"
  echo "  PyTorch's step B=64: plain $(step_ms plain torch) ms, fsdp $(step_ms fsdp torch) ms"
  echo "  as a CUDA graph (gpu_graph_step.lua; the target is the graphed step): $(grep -E '^(plain|fsdp) +B= +64 ' "$dir/profile.log" 2>/dev/null | tr -s ' ' | paste -sd ';' -)"
  echo "accuracy float32 after epoch 1: ${acc1}; target >= 98.5%: $(verdict "${acc1%\%}" ge 98.5); after epoch 4: $(accuracy last)"
  echo "PyTorch's epochs: tuned ${t_ep:-n/a} s, the seed's program ${s_ep:-n/a} s"
  grep -E '^ratio|^bf16 / fp32' "$dir/seed.log" 2>/dev/null
  echo
  echo "== gpu-check.sh's summary"
  if grep -q '^== summary' "$dir/gpu_check.log" 2>/dev/null; then awk '/^== summary/ { on = 1 } on' "$dir/gpu_check.log"
  else tail -4 "$dir/gpu_check.log" 2>/dev/null; fi
}

if [ $mode = summary ]; then # keeps the first lines of the summary there (machine, steps)
  if [ ! -f "$head" ]; then
    awk '/^== issue 20/ { exit } { print }' "$dir/summary.txt" > "$head" 2>/dev/null
    sed -i '${/^$/d}' "$head"
    [ -s "$head" ] || echo "summary of the logs in $dir" > "$head"
  fi
  write_summary > "$dir/summary.txt"
  rm -f "$head"
  cat "$dir/summary.txt"
  exit 0
fi

have_gpu=1 have_torch=1 gpu="" tv=""
if [ $mode = run ]; then
  mkdir -p "$dir" || exit 1
  [ -x "$BUILD/moonshard" ] || { echo "gpu-session.sh: no $BUILD/moonshard (stage a build: docs/gpu-session.md)" >&2; exit 1; }
  {
    echo "gpu-session.sh at $(date -u '+%F %T') UTC on $(hostname), checkout $root, build $BUILD, budget $BUDGET s"
    git -C "$root" log -1 --format='commit %h %s' 2>/dev/null | cut -c1-120
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  } > "$head"
  gpu=$("$BUILD/moonshard" -e 'local c = require("moonshard").cuda
      if not c.is_available() then print(c.unavailable_reason()); os.exit(3) end
      print(("%d GPU(s), cuda:0 is %s"):format(c.device_count(), c.get_device_name(0)))' 2>&1) || have_gpu=0
  echo "moonshard: $gpu" >> "$head"
  tv=$(python3 -c 'import torch; assert torch.cuda.is_available(), "no GPU for torch"; print(torch.__version__)' 2>&1) || have_torch=0
  echo "PyTorch: $(echo "$tv" | tail -1)" >> "$head"
  echo >> "$head"
  echo "== steps" >> "$head"
else
  echo "gpu-session.sh --dry-run: the plan (step, time limit, log under $dir, command); budget $BUDGET s"
fi

# one test at a time: the GPU tests measure memory and share one device
step "GPU tests (ctest)" 180 ctest.log ctest --test-dir "$BUILD" --output-on-failure -R 'cuda|pin|doc'
if [ $have_gpu = 1 ]; then
  case "$BUILD" in /*) abs_build=$BUILD ;; *) abs_build=$root/$BUILD ;; esac
  seed_args=(--build "$abs_build" --raw "$dir/seed_raw.log")
  [ $have_torch = 1 ] || seed_args+=(--no-torch)
  step "seed epochs (gpu_seed)" 200 seed.log bench/gpu_seed.sh --epochs 4 --torch-seed-epochs 2 "${seed_args[@]}"
  step "step profile" 60 profile.log "$BUILD/moonshard" bench/gpu_step_profile.lua --steps 200
  if [ $have_torch = 1 ]; then
    step "step profile (torch)" 60 profile.log python3 bench/torch_step_profile.py --steps 200
  else
    skip "step profile (torch)" profile.log "no PyTorch with a GPU here: $(echo "$tv" | tail -1)"
  fi
  # the step replayed as a CUDA graph (what mnist_fsdp.lua does), beside the eager one
  step "graphed step" 60 profile.log "$BUILD/moonshard" bench/gpu_graph_step.lua
else
  for s in "seed epochs (gpu_seed):seed.log" "step profile:profile.log" "step profile (torch):profile.log" \
           "graphed step:profile.log"; do
    skip "${s%%:*}" "${s##*:}" "no usable GPU ($gpu)"
  done
fi
if [ ! -f bench/cuda_lowp_bench.lua ]; then
  skip "bf16/f16 kernels (lowp bench)" lowp.log "bench/cuda_lowp_bench.lua is not in this checkout"
elif [ $have_gpu = 1 ]; then
  step "bf16/f16 kernels (lowp bench)" 60 lowp.log "$BUILD/moonshard" bench/cuda_lowp_bench.lua
  step "bf16/f16 elementwise (half ops)" 40 lowp.log "$BUILD/moonshard" bench/cuda_half_ops.lua
else
  skip "bf16/f16 kernels (lowp bench)" lowp.log "no usable GPU"
fi
# gpu-check.sh says for itself when there is no GPU (exit 2, its reason in the log); its budget
# is what is left but 30 s
left=$((deadline - $(date +%s) - 30))
step "gpu-check --prebuilt" 290 gpu_check.log env BUILD="$BUILD" BUDGET_S=$((left < 290 ? left : 290)) \
  scripts/gpu-check.sh --prebuilt
[ $mode = dry ] && { echo "then summary.txt: the done-when figures of issue 20 from these logs"; exit 0; }

echo "($(( $(date +%s) - t0 )) s in all)" >> "$head"
write_summary > "$dir/summary.txt"
rm -f "$head"
cat "$dir/summary.txt"
