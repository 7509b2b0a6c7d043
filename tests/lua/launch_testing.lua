-- launch_testing.lua: what the multi-rank FSDP tests (dist_fsdp*.lua) share: the launch's process
-- group, cases that end the whole launch at the first failure (a rank out of step with the
-- others could only stall), the closing count every rank must agree on, and the small conv net
-- most of them train.
local ms = require "moonshard"
local nn = require "moonshard.nn"
local F = require "moonshard.functional"

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
