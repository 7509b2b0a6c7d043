#!/usr/bin/env bash
# gpu-check.sh: the one command for a machine with an NVIDIA GPU (sized for one H200, under 5
# minutes): configure with CUDA and build (or, with --prebuilt, use the build that is there: one
# made on another machine and carried over, e.g. by ../shared/gpu/stage.sh), run the GPU tests
# (ops, nccl, FSDP on CUDA with bf16 and cpu_offload against CPU training, pinned memory; the nccl
# and FSDP ones once more under mpirun with one rank per GPU where there are several), one epoch
# of the FSDP MNIST script on CUDA through nccl (a one-step preflight decides and says why not),
# and a short GEMM/conv TFLOP/s benchmark. Prints a summary; exits non-zero if a step failed.
#   scripts/gpu-check.sh [--prebuilt]   (BUILD=dir: the build tree; MNIST data under data/;
#                                        BUDGET_S=seconds for the whole check, default 290)
set -uo pipefail
cd "$(dirname "$0")/.."
prebuilt=0
case "${1:-}" in
  --prebuilt) prebuilt=1 ;;
  -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "gpu-check.sh: unknown option $1 (usage: scripts/gpu-check.sh [--prebuilt])" >&2; exit 2 ;;
esac
BUILD=${BUILD:-$([ $prebuilt = 1 ] && echo build || echo build-gpu)}
JOBS=$(nproc)
# the nccl test starts MPI in-process; Open MPI wants this to run as root (as containers do)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
t0=$(date +%s)
declare -a summary
status=0
DEADLINE=$((t0 + ${BUDGET_S:-290})) # the whole check stays under 5 minutes
step() { # step NAME SECONDS COMMAND...: runs with a time limit (cut to the budget), records the outcome
  local name=$1 limit=$2
  shift 2
  local s=$(date +%s)
  local left=$((DEADLINE - s))
  if [ "$left" -lt 15 ]; then summary+=("skipped $name (out of the time budget)"); status=1; return 1; fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name"
  timeout "$limit" "$@"
  local rc=$?
  local took=$(( $(date +%s) - s ))
  if [ $rc -eq 0 ]; then summary+=("ok      $name (${took}s)")
  else summary+=("FAILED  $name (rc $rc, ${took}s)"); status=1; fi
  return $rc
}

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [ $prebuilt = 1 ]; then
  [ -x "$BUILD/moonshard" ] || { echo "gpu-check.sh: --prebuilt but no $BUILD/moonshard" >&2; exit 1; }
  summary+=("prebuilt $BUILD (no configure or build here)")
else
  step "configure (MS_CUDA=ON)" 60 cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMS_WERROR=ON -DMS_CUDA=ON
  step "build" 240 cmake --build "$BUILD" -j"$JOBS" || { printf '%s\n' "${summary[@]}"; exit 1; }
fi
if ! "$BUILD/moonshard" -e 'local c = require("moonshard").cuda
  if not c.is_available() then print("no usable GPU: " .. c.unavailable_reason()); os.exit(3) end
  print(("%d GPU(s), cuda:0 is %s"):format(c.device_count(), c.get_device_name(0)))'; then
  summary+=("stopped: this machine has no usable GPU, so the GPU steps cannot run here")
  printf '%s\n' "${summary[@]}"
  exit 2
fi
step "GPU tests (ctest -R 'cuda|pin')" 150 bash -c "cd '$BUILD' && ctest --output-on-failure -R 'cuda|pin'"
NGPU=$("$BUILD/moonshard" -e 'print(require("moonshard").cuda.device_count())')
if [ "${NGPU:-1}" -gt 1 ]; then # one rank per GPU: the collectives and FSDP across GPUs
  for t in test_cuda_nccl test_cuda_fsdp; do
    step "$t on $NGPU GPUs (mpirun)" 90 env LUA_PATH="tests/lua/?.lua;;" \
      mpirun -np "$NGPU" --oversubscribe "$BUILD/moonshard" "tests/lua/$t.lua"
  done
fi
# Lua tests only: a carried-over build (stage.sh) holds just the GPU tests' C programs
step "CPU smoke tests (ctest -R lua.test_(ops_reference|autograd|nn_ops))" 60 \
  bash -c "cd '$BUILD' && ctest --output-on-failure -j$JOBS -R 'lua[.]test_(ops_reference|autograd|nn_ops)\$'"

# MNIST on CUDA: first one training step of the seed's Net on a CUDA batch, plain and wrapped in
# FSDP (one rank); the epoch runs only when both work (ops without CUDA kernels raise a clear
# error, quoted here).
preflight='
local ms = require "moonshard"
local F = require "moonshard.functional"
local optim = require "moonshard.optim"
local Net = require "moonshard.seed_net"
local fsdp, fsdp_wrap, dist = require "moonshard.fsdp", require "moonshard.fsdp_wrap", ms.distributed
local x, y = ms.randn(8, 1, 28, 28):cuda(), ms.randint(1, 11, { 8 }):cuda()
local function step(model, what)
  local opt = optim.Adadelta(model:parameters(), { lr = 1.0 })
  local loss = F.nll_loss(model(x), y)
  opt:zero_grad(); loss:backward(); opt:step()
  print(("one CUDA training step of the seed Net (%s): loss %.4f"):format(what, loss:item()))
end
step(Net():to("cuda:0"), "plain")
dist.init_process_group("auto")
step(fsdp.FSDP(Net():to("cuda:0"), { auto_wrap_policy = fsdp_wrap.size_based_auto_wrap_policy{ min_num_params = 20000 } }), "FSDP")
step(fsdp.FSDP(Net(), { device_id = 0, cpu_offload = { offload_params = true },
  auto_wrap_policy = fsdp_wrap.size_based_auto_wrap_policy{ min_num_params = 20000 } }), "FSDP, device_id, cpu_offload")
dist.destroy_process_group()'
echo "== MNIST preflight (one training step on cuda:0, plain, FSDP, FSDP with cpu_offload)"
left=$((DEADLINE - $(date +%s)))   # the preflight counts against the budget too
if [ "$left" -lt 15 ]; then
  summary+=("skipped MNIST preflight and epoch (out of the time budget)"); status=1
elif out=$(timeout $((left < 45 ? left : 45)) "$BUILD/moonshard" -e "$preflight" 2>&1); then
  echo "$out"
  if [ -f data/MNIST/raw/train-images-idx3-ubyte ] || [ -f data/MNIST/raw/train-images-idx3-ubyte.gz ]; then
    # under the launcher (-n: one rank per GPU), so "auto" picks nccl as the seed's script does
    step "FSDP MNIST, 1 epoch on CUDA (nccl, $NGPU rank(s))" 180 "$BUILD/moonshard" -n "${NGPU:-1}" scripts/mnist_fsdp.lua --epochs 1
  else
    summary+=("skipped FSDP MNIST epoch: no MNIST under data/MNIST/raw (carry data/ or run scripts/fetch-mnist.sh)")
  fi
else
  rc=$?
  echo "$out" | tail -5
  summary+=("FAILED  MNIST preflight (rc $rc$([ $rc = 124 ] && echo ', out of time')), so no epoch: $(echo "$out" | grep -m1 '^moonshard:' | sed 's/^moonshard: //')")
  status=1
fi

step "benchmark (GEMM, conv2d TFLOP/s)" 60 "$BUILD/moonshard" scripts/cuda_bench.lua 1

echo
echo "== summary ($(( $(date +%s) - t0 ))s in all)"
printf '%s\n' "${summary[@]}"
exit $status
