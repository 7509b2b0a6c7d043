-- launch_testing.lua: what the multi-rank FSDP tests (dist_fsdp*.lua) share: the launch's process
-- group, cases that end the whole launch at the first failure (a rank out of step with the
-- others could only stall), the closing count every rank must agree on, and the small conv net
-- most of them train, and the state-dict comparison they check results with.
local ms = require "moonshard"
local nn = require "moonshard.nn"
local F = require "moonshard.functional"
local T = require "testing"

local dist = ms.distributed
local M = {}
local passed = 0
local R, W

-- Joins the launch (a short timeout turns a stuck collective into an error); returns rank, size.
function M.init()
  dist.init_process_group({backend = "mpi", timeout = 60})
  R, W = dist.get_rank(), dist.get_world_size()
  return R, W
end

function M.case(name, fn)
  local ok, err = xpcall(fn, debug.traceback)
  if not ok then
    io.stderr:write(("FAIL [rank %d of %d] %s\n%s\n"):format(R, W, name, err))
    io.stderr:flush()
    os.exit(1)
  end
  passed = passed + 1
end

-- Reached only when this rank passed every case: checks that every rank ran as many, prints
-- the count on rank 0 and ends the process.
function M.finish(what)
  local done = ms.tensor({passed}, {dtype = "int64"})
  dist.all_reduce(done, {op = "min"})
  local n = done:tolist()[1]
  if R == 0 then print(("%s: %d passed, 0 failed (world size %d)"):format(what, n, W)) end
  dist.destroy_process_group()
  os.exit(n == passed and 0 or 1)
end

-- This rank's equal share of the rows (first dim) of each tensor given, in rank order: the batch
-- slice data-parallel training gives it (the row count must divide by the world size).
function M.my_rows(...)
  local out = table.pack(...)
  for i = 1, out.n do
    local t = out[i]
    local b = t:size(1) // W
    out[i] = t:narrow(1, R * b + 1, b)
  end
  return table.unpack(out, 1, out.n)
end

-- The model's state_dict as a plain table (name -> tensor), the shape check_state compares.
function M.state_of(model)
  local out = {}
  for k, v in pairs(model:state_dict()) do out[k] = v end
  return out
end

-- Every tensor of the state dict `got` equals want's within rel of the tensor's largest
-- magnitude (either on any device; got compared in want's dtype), with the same keys.
-- MS_FSDP_VERBOSE=1 prints the worst relative difference on rank 0.
-- norm: "max" (default: the largest element's difference against the largest element) or "l2"
-- (||got - want|| against ||want||, the usual measure for a parameter after many Adam steps, where
-- single elements with small gradients are sensitive to the summation order).
function M.check_state(got, want, rel, what, norm)
  local n, worst = 0, 0
  for k, w in pairs(want) do
    local g = rawget(got, k)
    T.truthy(g ~= nil, what .. ": missing " .. k)
    w = w:to("cpu")
    g = g:to("cpu"):to(w.dtype)
    T.eq(tostring(g.shape), tostring(w.shape), what .. ": shape of " .. k)
    local diff, scale
    if norm == "l2" then
      diff, scale = (g:double() - w:double()):norm():item(), math.max(w:double():norm():item(), 1e-12)
    else
      diff, scale = (g - w):abs():max():item(), math.max(w:abs():max():item(), 1e-6)
    end
    worst = math.max(worst, diff / scale)
    if not (diff <= rel * scale) then
      error(("%s: %s differs by %.3g (relative %.3g > %g)"):format(what, k, diff, diff / scale, rel), 2)
    end
    n = n + 1
  end
  local m = 0
  for _ in pairs(got) do m = m + 1 end
  T.eq(m, n, what .. ": number of entries")
  if os.getenv("MS_FSDP_VERBOSE") and (R or 0) == 0 then
    print(("%s: worst relative difference %.3g"):format(what, worst))
  end
end

-- conv 1->4 3x3 on 8x8, fc1 144->hidden (16), fc2 hidden->5, log_softmax.
local Small = nn.Module:extend("Small")
function Small:init(hidden)
  self.conv = nn.Conv2d(1, 4, 3, 1)
  self.fc1 = nn.Linear(144, hidden or 16)
  self.fc2 = nn.Linear(hidden or 16, 5)
end
function Small:forward(x)
  x = F.relu(self.conv(x))
  x = ms.flatten(x, 2)
  x = F.relu(self.fc1(x))
  return F.log_softmax(self.fc2(x), 2)
end
M.Small = Small

return M
