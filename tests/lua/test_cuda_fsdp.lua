-- test_cuda_fsdp.lua: FSDP on CUDA through the nccl process group, checked against single-process
-- training on the CPU (same data, same steps, same parameters): every strategy, prefetching,
-- device_id, the seed's Net, bf16 mixed precision (within bf16's tolerance) and cpu_offload
-- (shards, grads and optimizer state in pinned host memory). A world of one on one GPU; under
-- mpirun with one rank per GPU (scripts/gpu-check.sh on a multi-GPU machine) each rank trains
-- its slice of the batch. Exits 77 (skipped) without a GPU or the nccl backend.
-- MS_TEST_FSDP_ON_CPU=1 runs the same cases on the CPU ("self" or "mpi"): the test's own logic
-- where no GPU is (cpu_offload is then the documented no-op).
local T = require "testing"
local ms = require "moonshard"
local nn = require "moonshard.nn"
local F = require "moonshard.functional"
local optim = require "moonshard.optim"
local fsdp = require "moonshard.fsdp"
local Net = require "moonshard.seed_net"
local D = require "launch_testing"
local Small = D.Small
local dist = ms.distributed

local ON_CPU = os.getenv("MS_TEST_FSDP_ON_CPU") == "1"
if not ON_CPU and (not ms.cuda.is_available() or not dist.is_nccl_available()) then
  print("skipped: " .. (ms.cuda.is_available() and "this build has no nccl backend" or ms.cuda.unavailable_reason()))
  os.exit(77)
end

local backend = ON_CPU and (os.getenv("OMPI_COMM_WORLD_SIZE") and "mpi" or "self") or "nccl"
dist.init_process_group({ backend = backend, timeout = 120 })
local R, W = dist.get_rank(), dist.get_world_size()
local INDEX = ON_CPU and 0 or ms.cuda.current_device() -- nccl chose this rank's GPU
local DEV = ON_CPU and "cpu" or ("cuda:" .. INDEX)
local BATCH = 24 -- divisible by 1, 2, 3, 4, 6, 8 GPUs
assert(BATCH % W == 0, "test_cuda_fsdp: the batch must split evenly over the ranks")

local function batch(shape)
  ms.manual_seed(7)
  return ms.randn(BATCH, table.unpack(shape)), ms.randint(1, 6, { BATCH })
end

-- steps of Adadelta on this rank's slice, on DEV (the whole batch on the CPU for the reference);
-- the inputs stay on the CPU, where the FSDP root moves them from (the targets go by hand)
local function train(model, x, y, steps, sliced)
  if sliced then
    local b = BATCH // W
    x, y = x:narrow(1, R * b + 1, b), y:narrow(1, R * b + 1, b):to(DEV)
  end
  local opt = optim.Adadelta(model:parameters(), { lr = 1.0 })
  for _ = 1, steps do
    opt:zero_grad()
    local loss = F.nll_loss(model(x), y)
    loss:backward()
    opt:step()
  end
  return opt
end

local function reference(make, shape, steps)
  ms.manual_seed(1)
  local model = make()
  model:eval() -- dropout off
  local x, y = batch(shape)
  train(model, x, y, steps, false)
  return model:state_dict()
end

local check_state = D.check_state

-- A fresh model (seed 1) wrapped with opts; on a GPU placed by device_id unless on_device (moved first).
local function wrapped(make, opts, on_device)
  ms.manual_seed(1)
  local m = make()
  m:eval()
  if on_device then m:to(DEV) elseif not ON_CPU then opts.device_id = INDEX end
  return fsdp.FSDP(m, opts)
end

local function linear_policy() return fsdp.ModuleWrapPolicy { nn.Linear } end
local SHAPE = { 1, 8, 8 }
-- bf16 keeps 8 significant bits; 5 Adadelta steps at lr 1.0 with bf16 forward/backward drift by
-- 0.052 of a tensor's largest value from fp32 training (measured with the CPU's bf16 kernels)
local BF16_TOL = 0.1
-- float32 training on the device against one CPU process, relative to each tensor's largest
-- value: the GPU's products and reductions (and the ranks' all-reduce) sum in other orders, a
-- difference of a few float32 eps (1.2e-7) per step; 5 Adadelta steps at lr 1.0 carry it on
-- without shrinking it, which stays two orders of magnitude below 1e-4. A wrong gradient, a
-- lost shard or a missed reduction moves a parameter by far more.
local FP32_TOL = 1e-4
local small_ref = reference(Small, SHAPE, 5)

T.test("the backend moves this rank's device", function()
  T.eq(dist.get_backend(), backend)
  if not ON_CPU then T.eq(ms.cuda.current_device(), INDEX) end
end)

for _, strategy in ipairs({ "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD" }) do
  for _, prefetch in ipairs({ false, true }) do
    T.test(("%s%s on %s: 5 steps equal one CPU process"):format(strategy, prefetch and " with prefetching" or "", DEV), function()
      local model = wrapped(Small, { sharding_strategy = strategy, auto_wrap_policy = linear_policy(),
        forward_prefetch = prefetch or nil, backward_prefetch = prefetch and "BACKWARD_PRE" or nil }, prefetch)
      for _, p in ipairs(model:parameters()) do T.eq(p.device, DEV, "pieces live on the device") end
      local x, y = batch(SHAPE)
      train(model, x, y, 5, true)
      for _, p in ipairs(model:parameters()) do
        if p:numel() > 0 and p.requires_grad then T.eq(p.grad.device, DEV, "grads live on the device") end
      end
      local st = fsdp.comm_stats(model)
      if strategy ~= "NO_SHARD" then T.truthy(st.allgather_calls >= 5, "all-gathers ran") end
      T.truthy(st.reduce_calls >= 5, "reductions ran")
      check_state(model:state_dict(), small_ref, FP32_TOL, strategy)
    end)
  end
end

-- One step: the seed Net's float32 runs part by chance after a few steps (a ReLU or max-pool
-- choice near a tie; see dist_fsdp.lua), and the GPU's convolutions round unlike the CPU's.
T.test("the seed's Net with the 20000 policy, FULL_SHARD, 1 step equals one CPU process", function()
  local ref = reference(Net, { 1, 28, 28 }, 1)
  local model = wrapped(Net, { auto_wrap_policy = fsdp.size_based_auto_wrap_policy { min_num_params = 20000 } })
  local x, y = batch({ 1, 28, 28 })
  train(model, x, y, 1, true)
  check_state(model:state_dict(), ref, FP32_TOL, "seed Net")
end)

T.test("mixed precision bf16 params, fp32 reduction: bf16-close to one fp32 CPU process", function()
  local model = wrapped(Small, { auto_wrap_policy = linear_policy(),
    mixed_precision = { param_dtype = "bfloat16", reduce_dtype = "float32" } })
  local x, y = batch(SHAPE)
  train(model, x, y, 5, true)
  local st = fsdp.comm_stats(model)
  T.eq(st.param_dtype, "bfloat16")
  T.eq(st.reduce_dtype, "float32")
  for _, p in ipairs(model:parameters()) do T.eq(p.dtype, "float32", "master weights stay float32") end
  check_state(model:state_dict(), small_ref, BF16_TOL, "bf16")
end)

for _, strategy in ipairs({ "FULL_SHARD", "SHARD_GRAD_OP" }) do
  T.test(("cpu_offload, %s: shards, grads and optimizer state on the host, training as one CPU process"):format(strategy), function()
    local model = wrapped(Small, { sharding_strategy = strategy, auto_wrap_policy = linear_policy(),
      cpu_offload = { offload_params = true } })
    for _, p in ipairs(model:parameters()) do
      T.eq(p.device, "cpu", "offloaded pieces")
      if not ON_CPU and p:numel() > 0 then T.truthy(p:is_pinned(), "in page-locked memory") end
    end
    local x, y = batch(SHAPE)
    local opt = train(model, x, y, 5, true)
    for _, p in ipairs(model:parameters()) do
      if p:numel() > 0 then
        T.eq(p.grad.device, "cpu", "grads come back to the host")
        for _, v in pairs(opt.state[p] or {}) do
          if ms.is_tensor(v) then T.eq(v.device, "cpu", "optimizer state on the host") end
        end
      end
    end
    check_state(model:state_dict(), small_ref, FP32_TOL, "cpu_offload " .. strategy)
  end)
end

T.test("cpu_offload with bf16 mixed precision", function()
  local model = wrapped(Small, { auto_wrap_policy = linear_policy(), cpu_offload = { offload_params = true },
    mixed_precision = { param_dtype = "bfloat16", reduce_dtype = "float32" } })
  local x, y = batch(SHAPE)
  train(model, x, y, 5, true)
  check_state(model:state_dict(), small_ref, BF16_TOL, "cpu_offload bf16")
end)

T.test("clip_grad_norm_ across ranks on the device equals the unwrapped model's", function()
  ms.manual_seed(1)
  local plain = Small()
  local x, y = batch(SHAPE)
  F.nll_loss(plain(x), y):backward()
  local want = nn.utils.clip_grad_norm_(plain:parameters(), 0.5):item()
  local model = wrapped(Small, { auto_wrap_policy = linear_policy() })
  local b = BATCH // W
  local xs, ys = x:narrow(1, R * b + 1, b), y:narrow(1, R * b + 1, b)
  F.nll_loss(model(xs:to(DEV)), ys:to(DEV)):backward()
  -- the norm sums the squares in another order (and across ranks): float32 eps-level differences
  T.near(model:clip_grad_norm_(0.5):item(), want, FP32_TOL * math.max(1, want))
end)

T.test("state dicts on the device: model and FULL optimizer dicts load into a fresh wrapped model", function()
  local function make() return wrapped(Small, { auto_wrap_policy = linear_policy() }) end
  local model = make()
  local x, y = batch(SHAPE)
  local opt = train(model, x, y, 2, true)
  local msd, osd = model:state_dict(), fsdp.optim_state_dict(model, opt)
  T.truthy(next(osd.state) ~= nil, "optimizer state gathered")
  local model2 = make()
  model2:load_state_dict(msd)
  local opt2 = optim.Adadelta(model2:parameters(), { lr = 1.0 })
  fsdp.load_optim_state_dict(model2, opt2, osd)
  check_state(model2:state_dict(), msd, 0, "reloaded model")
  if W == 1 then -- a sharded checkpoint needs a directory every rank sees: one rank keeps it simple
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
    fsdp.save_sharded(model, dir)
    local plain = Small()
    fsdp.load_sharded(plain, dir)
    os.execute("rm -rf " .. dir)
    check_state(plain:state_dict(), msd, 0, "sharded checkpoint into the unwrapped model")
  end
end)

dist.destroy_process_group()
T.finish()
