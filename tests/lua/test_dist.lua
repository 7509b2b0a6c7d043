-- test_dist.lua: ms.distributed in one process without a launcher: the "self" backend (a world
-- of one), where every collective leaves or copies values, plus argument checking and the
-- errors every backend shares. The multi-rank behaviour is in dist_collectives.lua (mpirun).
local T = require "testing"
local ms = require "moonshard"
local dist = ms.distributed

local DTYPES = {"float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool"}

local function make(vals, dt) return ms.tensor(vals, {dtype = "float64"}):to(dt) end
local function seq(n, dt)
  local v = {}
  for i = 1, n do v[i] = dt == "bool" and (i % 3 == 0 and 0 or 1) or (i % 5) + 1 end
  return make(v, dt), v
end
local function values(t) return t:double():reshape(-1):tolist() end

T.test("before init: clear errors, no world", function()
  T.eq(dist.is_initialized(), false)
  T.eq(dist.is_available(), true)
  T.raises(function() dist.get_rank() end, "get_rank", "not initialized", "init_process_group")
  T.raises(function() dist.all_reduce(ms.ones(2)) end, "all_reduce", "not initialized")
end)

T.test("init: backends and their errors", function()
  if not ms.cuda.is_available() then -- without a GPU (or without NCCL) it says which is missing
    local err = T.raises(function() dist.init_process_group("nccl") end, "init_process_group", "nccl")
    T.truthy(err:find("needs a CUDA device", 1, true) or err:find("is not built", 1, true), err)
  end
  T.raises(function() dist.init_process_group("gloo") end, "unknown backend 'gloo'")
  T.raises(function() dist.init_process_group({backend = "self", bogus = 1}) end, "bogus")
  T.raises(function() dist.init_process_group(42) end, "init_process_group")
  T.eq(dist.is_initialized(), false)
  dist.init_process_group("auto") -- no launcher here: a world of one
  T.eq(dist.is_initialized(), true)
  T.eq(dist.get_backend(), "self")
  T.eq(dist.get_rank(), 0)
  T.eq(dist.get_world_size(), 1)
  T.eq(dist.get_local_rank(), 0)
  T.raises(function() dist.init_process_group("self") end, "already initialized")
  dist.destroy_process_group()
  T.eq(dist.is_initialized(), false)
  dist.init_process_group({backend = "self", timeout = 30})
  T.eq(dist.get_world_size(), 1)
end)

T.test("all_reduce leaves every dtype and op as it is", function()
  for _, dt in ipairs(DTYPES) do
    for _, op in ipairs({"sum", "avg", "max", "min", "product"}) do
      if not (dt == "bool" and op == "avg") then
        local t, want = seq(7, dt)
        dist.all_reduce(t, {op = op})
        T.same(values(t), want, 0, dt .. " " .. op)
      end
    end
  end
  local t = ms.ones(3)
  dist.all_reduce(t, {op = dist.ReduceOp.AVG})
  T.same(t:tolist(), {1, 1, 1})
end)

T.test("gather and scatter collectives copy in a world of one", function()
  for _, dt in ipairs(DTYPES) do
    local t, want = seq(1001, dt)
    local out = ms.zeros(1001, {dtype = dt})
    dist.all_gather_into_tensor(out, t)
    T.same(values(out), want, 0, "all_gather_into_tensor " .. dt)
    local rs = ms.zeros(1001, {dtype = dt})
    dist.reduce_scatter_tensor(rs, t, {op = dt == "bool" and "max" or "avg"})
    T.same(values(rs), want, 0, "reduce_scatter_tensor " .. dt)
    local list = {ms.zeros(7, 11, 13, {dtype = dt})}
    dist.all_gather(list, t)
    T.same(values(list[1]), want, 0, "all_gather " .. dt)
    dist.broadcast(t, {src = 0})
    dist.reduce(t, {dst = 0, op = "max"})
    T.same(values(t), want, 0, "broadcast/reduce " .. dt)
  end
  dist.barrier()
end)

T.test("async handles", function()
  local t = ms.ones(5)
  local w = dist.all_reduce(t, {async_op = true})
  T.truthy(w, "a work handle")
  T.eq(w:wait(), true)
  T.eq(w:is_completed(), true)
  T.eq(w:wait(), true) -- waiting twice is fine
  local out = ms.zeros(5)
  local h = dist.all_gather_into_tensor(out, t, {async_op = true})
  h:wait()
  T.same(out:tolist(), {1, 1, 1, 1, 1})
  T.eq(dist.barrier({async_op = true}):wait(), true)
  local list = {ms.zeros(5)}
  dist.all_gather(list, ms.full({5}, 3.0), {async_op = true}):wait()
  T.same(list[1]:tolist(), {3, 3, 3, 3, 3})
  T.eq(dist.all_reduce(ms.ones(1)), nil) -- blocking calls return nothing, as PyTorch
end)

T.test("groups", function()
  local g = dist.new_group({0})
  T.eq(g:size(), 1)
  T.eq(dist.get_rank(g), 0)
  T.same(dist.get_process_group_ranks(g), {0})
  local t = ms.ones(3)
  dist.all_reduce(t, {group = g})
  T.same(t:tolist(), {1, 1, 1})
  T.raises(function() dist.new_group({1}) end, "new_group: rank 1 is not in the world (ranks are 0..0)")
  T.raises(function() dist.new_group({0, 0}) end, "listed twice")
  T.raises(function() dist.new_group({"a"}) end, "ranks[1] must be an integer")
  -- a rank past int is refused, not truncated (2^32 + 1 would otherwise become rank 1, and 2^32 rank 0)
  T.raises(function() dist.new_group({(1 << 32) + 1}) end, "new_group: ranks[1]", "0..2147483647", "4294967297")
  T.raises(function() dist.new_group({(1 << 32)}) end, "new_group: ranks[1]", "4294967296")
  T.raises(function() dist.new_group({0, -1}) end, "new_group: ranks[2]", "got -1")
  T.raises(function() dist.all_reduce(t, {group = 3}) end, "all_reduce", "group")
  T.truthy(tostring(g):find("ProcessGroup", 1, true))
end)

T.test("argument errors are precise", function()
  T.raises(function() dist.all_reduce(ms.zeros(2, 3):t()) end, "all_reduce: tensor must be contiguous")
  T.raises(function() dist.reduce_scatter_tensor(ms.zeros(4), ms.zeros(10)) end,
    "reduce_scatter_tensor: input has 10 elements, expected world_size (1) x output (4) = 4")
  T.raises(function() dist.all_gather_into_tensor(ms.zeros(3), ms.zeros(2)) end,
    "all_gather_into_tensor: output has 3 elements, expected world_size (1) x input (2) = 2")
  T.raises(function() dist.all_gather_into_tensor(ms.zeros(2), ms.zeros(2, {dtype = "int64"})) end,
    "output is float32 but input is int64")
  T.raises(function() dist.all_gather_into_tensor(ms.zeros(4, 2):t(), ms.zeros(8)) end,
    "all_gather_into_tensor: output must be contiguous")
  T.raises(function() dist.all_reduce(ms.ones(2), {op = "mean"}) end,
    "all_reduce: option 'op': expected one of \"sum\", \"avg\", \"max\", \"min\", \"product\"")
  T.raises(function() dist.all_reduce(ms.ones(2):bool(), {op = "avg"}) end, "avg is not defined for bool")
  T.raises(function() dist.all_reduce(ms.ones(2), {opp = "sum"}) end, "opp")
  T.raises(function() dist.broadcast(ms.ones(2), {src = 1}) end, "broadcast: src 1 is not a rank of the group")
  T.raises(function() dist.reduce(ms.ones(2), {dst = 3}) end, "reduce: dst 3 is not a rank of the group")
  T.raises(function() dist.all_gather({ms.zeros(2), ms.zeros(2)}, ms.zeros(2)) end,
    "all_gather: tensor_list has 2 entries, expected the group size (1)")
  T.raises(function() dist.all_gather({ms.zeros(3)}, ms.zeros(2)) end, "tensor_list[1]")
  T.raises(function() dist.destroy_process_group(dist.new_group({0})) end, "destroy_process_group")
end)

T.test("destroy invalidates groups", function()
  local g = dist.new_group({0})
  dist.destroy_process_group()
  T.raises(function() dist.all_reduce(ms.ones(2), {group = g}) end, "process group was destroyed")
  T.raises(function() dist.destroy_process_group() end, "not initialized")
  dist.init_process_group("self")
  dist.all_reduce(ms.ones(2))
  dist.destroy_process_group()
end)

T.finish()
