-- test_fsdp_sharded_launch.lua: a sharded FSDP checkpoint of the seed's Net saved by one launch
-- (`moonshard -n 2`) loads in separate launches of another size (-n 3, -n 4, -n 1) and another
-- wrapping, and into the unwrapped Net, with the same full parameters. dist_fsdp_state.lua checks
-- the same inside one launch with sub-groups; here nothing is shared but the directory. Every
-- launch runs under `timeout`. Skips without mpirun or when run under mpirun itself.
local T = require "testing"

local exe = T.launcher_exe()

local quote = T.quote
local base = os.tmpname()
local dir, script, out, err = base .. ".ckpt", base .. ".lua", base .. ".out", base .. ".err"
assert(os.execute("mkdir -p " .. quote(dir)))

-- save: the Net with seed-1 parameters, each scaled by its position (so a misplaced piece
-- shows), wrapped with the 20000 policy on the launch's ranks. load: a Net wrapped the other
-- way (or not at all on one rank) loads it; rank 0 prints the largest difference from the
-- values save used and the number of entries.
T.write_file(script, [[
local ms = require "moonshard"
local nn = require "moonshard.nn"
local fsdp = require "moonshard.fsdp"
local Net = require "moonshard.seed_net"
local dist = ms.distributed
local mode, dir = ...
dist.init_process_group("mpi")
local function values()
  ms.manual_seed(1)
  local net = Net()
  local _ <close> = ms.no_grad()
  for i, p in ipairs(net:parameters()) do p:mul_(i) end
  return net
end
local want = values():state_dict()
if mode == "save" then
  local model = fsdp.FSDP(values(), {auto_wrap_policy = fsdp.size_based_auto_wrap_policy{min_num_params = 20000}})
  fsdp.save_sharded(model, dir)
else
  local got
  if dist.get_world_size() == 1 then
    got = Net()
    fsdp.load_sharded(got, dir)
  else
    got = fsdp.FSDP(Net(), {auto_wrap_policy = fsdp.ModuleWrapPolicy{nn.Linear}, sharding_strategy = "SHARD_GRAD_OP"})
    fsdp.load_sharded(got, dir)
  end
  local sd = got:state_dict{rank0_only = true}
  if dist.get_rank() == 0 then
    local worst, n = 0, 0
    for k, v in pairs(want) do
      worst, n = math.max(worst, (sd[k] - v):abs():max():item()), n + 1
    end
    print(("loaded %d entries on %d ranks, worst difference %g"):format(n, dist.get_world_size(), worst))
  end
end
dist.destroy_process_group()
]])

local function launch(n, mode)
  local _, _, code = os.execute(("timeout -k 5 60 %s -n %d %s %s %s < /dev/null > %s 2> %s"):format(quote(exe), n,
    quote(script), mode, quote(dir), quote(out), quote(err)))
  return code, T.read_file(out), T.read_file(err)
end

T.test("a sharded checkpoint saved on 2 ranks loads on 3, 4 and 1 with the same parameters", function()
  local code, _, e = launch(2, "save")
  T.eq(code, 0, e)
  for _, n in ipairs({3, 4, 1}) do
    local c, o, e2 = launch(n, "load")
    T.eq(c, 0, e2)
    T.eq(o, ("loaded 8 entries on %d ranks, worst difference 0\n"):format(n), "output of -n " .. n)
  end
end)

os.execute("rm -rf " .. quote(dir) .. " " .. quote(script) .. " " .. quote(out) .. " " .. quote(err) .. " " .. quote(base))
T.finish()
