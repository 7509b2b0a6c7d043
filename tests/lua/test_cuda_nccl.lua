-- test_cuda_nccl.lua: the nccl process group on the GPUs of one machine: every collective on
-- CUDA tensors against its known result, async handles, a subgroup, and the errors for CPU
-- tensors. A world of one here; under mpirun with one rank per GPU (scripts/gpu-check.sh on a
-- multi-GPU machine) every expected value is that of N ranks, each contributing values of its
-- own. Exits 77 (skipped) without a GPU or without the nccl backend.
-- MS_TEST_NCCL_ON_CPU=1 runs the same cases on CPU tensors through "mpi" (under mpirun) or
-- "self": the test's own arithmetic for N ranks, checked where no GPU is.
local T = require "testing"
local ms = require "moonshard"
local dist = ms.distributed

local ON_CPU = os.getenv("MS_TEST_NCCL_ON_CPU") == "1"
if not ON_CPU and (not ms.cuda.is_available() or not dist.is_nccl_available()) then
  print("skipped: " .. (ms.cuda.unavailable_reason() or "this build has no nccl backend"))
  os.exit(77)
end

local backend = ON_CPU and (os.getenv("OMPI_COMM_WORLD_SIZE") and "mpi" or "self") or "nccl"
dist.init_process_group({ backend = backend, timeout = 60 })
local N, R = dist.get_world_size(), dist.get_rank()
local DEV = ON_CPU and "cpu" or ("cuda:" .. ms.cuda.current_device())

T.test("backend and device", function()
  T.eq(dist.get_backend(), backend)
  T.truthy(R >= 0 and R < N, ("rank %d of %d"):format(R, N))
  if not ON_CPU then T.eq(ms.cuda.current_device(), R % ms.cuda.device_count(), "one GPU per rank") end
end)

-- x (a CPU tensor) multiplied by itself n times in x's dtype: what a product over n ranks that
-- each hold x gives (integers wrap alike; powers of two stay exact in every float dtype)
local function power(x, n)
  local p = x:clone()
  for _ = 2, n do p = p * x end
  return p
end

T.test("collectives on device tensors: the values of N ranks", function()
  for _, dt in ipairs { "float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8" } do
    local base = ms.arange(1, 8) -- rank r holds base + r: every rank's part shows in the result
    local want = {
      sum = (base * N + N * (N - 1) // 2):to(dt),
      max = (base + (N - 1)):to(dt),
      min = base:to(dt),
    }
    for _, op in ipairs { "sum", "max", "min" } do
      local t = (base + R):to(dt):to(DEV)
      dist.all_reduce(t, { op = op })
      T.truthy(ms.equal(t:cpu(), want[op]), dt .. " " .. op)
    end
    local twos = ms.tensor({ 1, 2, 1, 2, 2, 1, 2 }):to(dt) -- 2^N is exact (uint8 wraps at 2^8 alike)
    local t = twos:clone():to(DEV) -- on the CPU, to() returns twos itself
    dist.all_reduce(t, { op = "product" })
    T.truthy(ms.equal(t:cpu(), power(twos, N)), dt .. " product")
  end
  local a = (ms.arange(1, 6) + R):float():to(DEV)
  dist.all_reduce(a, { op = "avg" })
  -- exact when the sum is divided by N; NCCL may scale each part by 1/N (rounded) before summing
  -- them: about N ulps of these values (below 9, an ulp of 9.5e-7): 1e-5 (absolute) for N <= 8
  T.same(a:cpu():tolist(), (ms.arange(1, 6):float() + (N - 1) / 2):tolist(), 1e-5)
  local out = ms.zeros(N * 5, { device = DEV })
  dist.all_gather_into_tensor(out, (ms.arange(5) + 10 * R):float():to(DEV))
  local gathered = {}
  for r = 0, N - 1 do for i = 0, 4 do gathered[#gathered + 1] = i + 10 * r end end
  T.same(out:cpu():tolist(), gathered)
  local rs = ms.zeros(5, { device = DEV })
  dist.reduce_scatter_tensor(rs, ms.arange(5 * N):float():to(DEV)) -- every rank the same input
  T.same(rs:cpu():tolist(), (ms.arange(5 * R, 5 * R + 5):float() * N):tolist())
  local b = ms.full({ 3 }, 7.0 + R):to(DEV)
  dist.broadcast(b, { src = 0 })
  T.same(b:cpu():tolist(), { 7, 7, 7 })
  local w = dist.all_reduce(ms.ones(1000):to(DEV), { async_op = true })
  w:wait()
  dist.barrier()
  local g = dist.new_group({ 0 }) -- every rank creates it; only rank 0 is in it
  if R == 0 then
    local s = ms.ones(4):to(DEV)
    dist.all_reduce(s, { group = g })
    T.same(s:cpu():tolist(), { 1, 1, 1, 1 })
  end
  dist.barrier()
end)

T.test("CPU tensors are refused with a message", function()
  if ON_CPU then return end -- the CPU backends take them
  T.raises(function() dist.all_reduce(ms.ones(3)) end, "all_reduce", "CPU", "nccl")
  T.raises(function() dist.all_reduce(ms.ones(3, { dtype = "int64" }):cuda(), { op = "avg" }) end,
    "avg", "int64", "nccl")
end)

dist.destroy_process_group()
T.finish()
