-- test_fsdp_generations.lua: a sharded checkpoint never loads as a mix of two saves, nor with a
-- corrupt shard. Save A on 2 ranks (`moonshard -n 2`); re-save B into the same directory with one
-- rank killing itself (SIGKILL, the MS_TEST_SAVE_SHARDED_DIE hook) right after writing its shard:
-- the directory still loads as A exactly, every time. Then mixes made by hand (another save's shard
-- or index copied in, a flipped payload byte, a truncated shard, a flipped index byte) are refused
-- with an error naming the file, and a complete save leaves only its own generation behind.
-- Skips without mpirun or when run under mpirun itself.
local ms = require "moonshard"
local nn = require "moonshard.nn"
local fsdp = require "moonshard.fsdp"
local T = require "testing"

local exe = T.launcher_exe()

local quote = T.quote
local base = os.tmpname()
local dir, other, script, err = base .. ".ckpt", base .. ".other", base .. ".lua", base .. ".err"
assert(os.execute(("mkdir -p %s %s"):format(quote(dir), quote(other))))

-- The model: seed-1 parameters times `scale`, so two saves differ in every element.
local MODEL = [[
local ms, nn = ...
return function(scale)
  ms.manual_seed(1)
  local m = nn.Sequential(nn.Linear(6, 10), nn.ReLU(), nn.Linear(10, 4))
  local _ <close> = ms.no_grad()
  for _, p in ipairs(m:parameters()) do p:mul_(scale) end
  return m
end
]]
local make = load(MODEL)(ms, nn)

T.write_file(script, [[
local ms = require "moonshard"
local nn = require "moonshard.nn"
local fsdp = require "moonshard.fsdp"
local dist = ms.distributed
local make = load(]] .. ("%q"):format(MODEL) .. [[)(ms, nn)
local scale, dir = ...
dist.init_process_group("mpi")
fsdp.save_sharded(fsdp.FSDP(make(tonumber(scale)), {auto_wrap_policy = fsdp.ModuleWrapPolicy{nn.Linear}}), dir)
dist.destroy_process_group()
]])

local function save(scale, into, die_rank)
  local env = die_rank and ("MS_TEST_SAVE_SHARDED_DIE=%d "):format(die_rank) or ""
  local _, _, code = os.execute(("%stimeout -k 5 60 %s -n 2 %s %d %s < /dev/null > /dev/null 2> %s"):format(env,
    quote(exe), quote(script), scale, quote(into), quote(err)))
  return code
end

local function files(d)
  local names = ms._list_dir(d)
  table.sort(names)
  return names
end

-- Loads d into a plain model; true when it holds exactly the parameters of `scale`.
local function loads_as(d, scale)
  local m = make(0)
  fsdp.load_sharded(m, d)
  local want = make(scale):state_dict()
  for k, v in pairs(m:state_dict()) do
    if v:ne(want[k]):sum():item() ~= 0 then return false end
  end
  return true
end

local function copy(from, to) assert(os.execute(("cp %s %s"):format(quote(from), quote(to)))) end

local function index_of(d)
  return ms._json_decode(T.read_file(d .. "/index.json"))
end

T.test("a re-save killed midway (one rank SIGKILLed after its shard): the old save loads whole, 4 of 4", function()
  T.eq(save(1, dir), 0, T.read_file(err))
  T.truthy(loads_as(dir, 1), "save A loads")
  local a_files = files(dir)
  local kills, loaded_old = 0, 0
  for k = 1, 4 do
    local code = save(10 + k, dir, k % 2)
    T.truthy(code ~= 0, "the killed launch fails")
    kills = kills + 1
    -- the killed rank's new shard is there, beside A's complete set and A's index
    T.truthy(#files(dir) > #a_files, "kill " .. k .. ": the new save wrote a shard before dying")
    if loads_as(dir, 1) then loaded_old = loaded_old + 1 end
  end
  print(("%d re-saves killed midway: %d loaded as the old save exactly, 0 as a mix"):format(kills, loaded_old))
  T.eq(loaded_old, kills)
  -- a complete save then leaves its own generation only: index + 2 shards, no orphan, no temporary
  T.eq(save(2, dir), 0, T.read_file(err))
  T.truthy(loads_as(dir, 2), "save B loads")
  local idx = index_of(dir)
  T.same(files(dir), {"index.json", idx.files[1].name, idx.files[2].name})
end)

-- Each case makes a directory from the complete save in dir (scale 2) and `other` (scale 3), then
-- expects load_sharded to refuse it naming `want`.
T.test("hand-made mixes, flipped bytes and torn shards are refused, naming the file", function()
  T.eq(save(3, other), 0, T.read_file(err))
  local a, b = index_of(dir), index_of(other)
  local refused, cases = 0, 0
  local function case(what, prepare, ...)
    cases = cases + 1
    local d = ("%s.case%d"):format(base, cases)
    assert(os.execute(("rm -rf %s && cp -r %s %s"):format(quote(d), quote(dir), quote(d))))
    prepare(d)
    local ok, e = pcall(loads_as, d, 2)
    T.truthy(not ok, what .. ": refused")
    for _, want in ipairs({"load_sharded", ...}) do
      T.truthy(tostring(e):find(want, 1, true), ("%s: the error names %q: %s"):format(what, want, tostring(e)))
    end
    refused = refused + 1
    assert(os.execute("rm -rf " .. quote(d)))
  end
  case("another save's shard 1 under this save's name", function(d)
    copy(other .. "/" .. b.files[2].name, d .. "/" .. a.files[2].name)
  end, a.files[2].name)
  case("another save's index", function(d) copy(other .. "/index.json", d .. "/index.json") end,
    b.files[1].name, "is missing")
  case("another save's index and shard 0 (shard 1 not copied)", function(d)
    copy(other .. "/index.json", d .. "/index.json")
    copy(other .. "/" .. b.files[1].name, d .. "/" .. b.files[1].name)
  end, b.files[2].name, "is missing")
  for _, f in ipairs({1, 2}) do
    case("a flipped payload byte in shard " .. (f - 1), function(d)
      local p = d .. "/" .. a.files[f].name
      local bytes = T.read_file(p)
      local at = #bytes - 3 -- inside the last tensor's data
      T.write_file(p, bytes:sub(1, at - 1) .. string.char(bytes:byte(at) ~ 0x10) .. bytes:sub(at + 1))
    end, a.files[f].name, "fails its checksum")
  end
  case("a truncated shard", function(d)
    local p = d .. "/" .. a.files[2].name
    T.write_file(p, T.read_file(p):sub(1, -5))
  end, a.files[2].name, "index says")
  case("a flipped byte in the index", function(d)
    local text = T.read_file(d .. "/index.json")
    local at = text:find('"numel":', 1, true) + 8
    T.write_file(d .. "/index.json", text:sub(1, at - 1) .. string.char(text:byte(at) ~ 1) .. text:sub(at + 1))
  end, "index.json", "fails its checksum")
  case("a version-1 index (no checksums)", function(d)
    T.write_file(d .. "/index.json", '{"format":"moonshard.fsdp.sharded","version":1,"world_size":2,"files":[],"entries":[]}')
  end, "version 1")
  print(("%d mixed or corrupt checkpoints: %d refused"):format(cases, refused))
end)

os.execute(("rm -rf %s %s %s %s %s"):format(quote(dir), quote(other), quote(script), quote(err), quote(base)))
T.finish()
