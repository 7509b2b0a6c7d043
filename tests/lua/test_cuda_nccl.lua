-- test_cuda_nccl.lua: the nccl process group on the GPUs of one machine, as a world of one rank
-- (the multi-rank form runs under mpirun on a multi-GPU machine, see scripts/gpu-check.sh): every
-- collective on CUDA tensors against its known result, async handles, a subgroup, and the errors
-- for CPU tensors. Exits 77 (skipped) without a GPU or without the nccl backend.
local T = require "testing"
local ms = require "moonshard"
local dist = ms.distributed

if not ms.cuda.is_available() or not dist.is_nccl_available() then
  print("skipped: " .. (ms.cuda.unavailable_reason() or "this build has no nccl backend"))
  os.exit(77)
end

dist.init_process_group({ backend = "nccl", timeout = 60 })
local N, R = dist.get_world_size(), dist.get_rank()
local DEV = "cuda:" .. ms.cuda.current_device()

T.test("backend and device", function()
  T.eq(dist.get_backend(), "nccl")
  T.eq(R, 0)
end)

T.test("collectives on CUDA tensors", function()
  for _, dt in ipairs { "float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8" } do
    for _, op in ipairs { "sum", "max", "min", "product" } do
      local t = ms.arange(1, 8):to(dt):to(DEV)
      dist.all_reduce(t, { op = op })
      T.truthy(ms.equal(t:cpu(), ms.arange(1, 8):to(dt)), dt .. " " .. op) -- one rank: unchanged
    end
  end
  local a = ms.arange(1, 6):float():cuda()
  dist.all_reduce(a, { op = "avg" })
  T.same(a:cpu():tolist(), { 1, 2, 3, 4, 5 })
  local out = ms.zeros(N * 5, { device = DEV })
  dist.all_gather_into_tensor(out, ms.arange(5):float():cuda())
  T.same(out:cpu():tolist(), { 0, 1, 2, 3, 4 })
  local rs = ms.zeros(5, { device = DEV })
  dist.reduce_scatter_tensor(rs, ms.arange(5 * N):float():cuda())
  T.same(rs:cpu():tolist(), { 0, 1, 2, 3, 4 })
  local b = ms.full({ 3 }, 7.0):cuda()
  dist.broadcast(b, { src = 0 })
  T.same(b:cpu():tolist(), { 7, 7, 7 })
  local w = dist.all_reduce(ms.ones(1000):cuda(), { async_op = true })
  w:wait()
  dist.barrier()
  local g = dist.new_group({ 0 })
  local s = ms.ones(4):cuda()
  dist.all_reduce(s, { group = g })
  T.same(s:cpu():tolist(), { 1, 1, 1, 1 })
end)

T.test("CPU tensors are refused with a message", function()
  T.raises(function() dist.all_reduce(ms.ones(3)) end, "all_reduce", "CPU", "nccl")
  T.raises(function() dist.all_reduce(ms.ones(3, { dtype = "int64" }):cuda(), { op = "avg" }) end,
    "avg", "int64", "nccl")
end)

dist.destroy_process_group()
T.finish()
