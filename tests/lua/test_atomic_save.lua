-- test_atomic_save.lua: the atomic write shared by ms.save and the sharded index
-- (engine/src/io/atomic_file.c): unique O_EXCL temporaries "<path>.tmp.<host>.<pid>.<start>.<rnd>",
-- the stale ones of dead writers removed by the next save (and only those), and a real crash: a
-- process killed with SIGKILL while it saves, again and again, never leaves a torn file nor a
-- temporary that survives the next save.
local ms = require "moonshard"
local T = require "testing"

local build = assert(os.getenv("MS_BUILD_DIR"), "MS_BUILD_DIR must name the build directory")
local quote = T.quote
local dir = os.tmpname() .. ".d"
assert(os.execute("mkdir -p " .. quote(dir)))

local function listing()
  local names = ms._list_dir(dir)
  table.sort(names)
  return names
end

local function temporaries(base)
  local out = {}
  for _, n in ipairs(listing()) do
    if n:sub(1, #base + 5) == base .. ".tmp." then out[#out + 1] = n end
  end
  return out
end

-- This process's pid and start time (fields 1 and 22 of /proc/self/stat), as the writer embeds them.
local function self_stat()
  local s = T.read_file("/proc/self/stat")
  local pid = tonumber(s:match("^(%d+)"))
  local fields = {}
  for f in s:match("%)%s+(.*)$"):gmatch("%S+") do fields[#fields + 1] = f end
  return pid, fields[20] -- fields after the name start at field 3
end

local function host()
  local p = io.popen("uname -n")
  local h = p:read("l")
  p:close()
  return (h:gsub("[^%w%-]", "_"):sub(1, 64))
end

-- A pid that no process has: a shell that has exited.
local function dead_pid()
  local p = io.popen("sh -c 'echo $$'")
  local pid = tonumber(p:read("l"))
  p:close()
  return pid
end

T.test("stale temporaries of dead writers are removed by the next save; live or foreign ones stay", function()
  local base = "stale.safetensors"
  local path = dir .. "/" .. base
  local pid, start = self_stat()
  local h = host()
  local names = {
    dead = ("%s.tmp.%s.%d.%s.0000abcd"):format(base, h, dead_pid(), start),
    reused_pid = ("%s.tmp.%s.%d.%d.0000abce"):format(base, h, pid, start + 1), -- our pid, another start: a restarted container
    live = ("%s.tmp.%s.%d.%s.0000abcf"):format(base, h, pid, start),
    foreign_new = ("%s.tmp.otherhost.%d.1.0000abd0"):format(base, dead_pid()),
    foreign_old = ("%s.tmp.otherhost.%d.1.0000abd1"):format(base, dead_pid()),
    not_ours = base .. ".tmp.notes",
    other_target = ("other.safetensors.tmp.%s.%d.%s.0000abd2"):format(h, dead_pid(), start),
  }
  for _, n in pairs(names) do T.write_file(dir .. "/" .. n, "partial") end
  assert(os.execute(("touch -d '2 days ago' %s"):format(quote(dir .. "/" .. names.foreign_old))))
  ms.save({w = ms.ones(3)}, path)
  local left = {}
  for _, n in ipairs(listing()) do left[n] = true end
  for _, k in ipairs({"dead", "reused_pid", "foreign_old"}) do T.eq(left[names[k]], nil, k .. " removed") end
  for _, k in ipairs({"live", "foreign_new", "not_ours", "other_target"}) do T.truthy(left[names[k]], k .. " kept") end
  T.truthy(left[base], "the checkpoint itself")
  T.same(ms.load(path).w:tolist(), {1, 1, 1})
  for n in pairs(left) do os.remove(dir .. "/" .. n) end
end)

T.test("a temporary left under the name an old writer used never blocks a save (O_EXCL, random names)", function()
  local base = "block.safetensors"
  local pid, start = self_stat()
  -- the old fixed name of this very process, and a live-looking one: neither is in the way
  T.write_file(("%s/%s.tmp.%d"):format(dir, base, pid), "old style")
  T.write_file(("%s/%s.tmp.%s.%d.%s.00000000"):format(dir, base, host(), pid, start), "live")
  for i = 1, 20 do ms.save({w = ms.full({2}, i)}, dir .. "/" .. base) end
  T.same(ms.load(dir .. "/" .. base).w:tolist(), {20, 20})
  T.eq(#temporaries(base), 2, "only the two planted names remain")
  for _, n in ipairs(listing()) do os.remove(dir .. "/" .. n) end
end)

T.test("_write_atomic: text in place whole, no temporary left, a clear error for a missing directory", function()
  local path = dir .. "/index.json"
  ms._write_atomic(path, "first", "test")
  ms._write_atomic(path, "second\n", "test")
  T.eq(T.read_file(path), "second\n")
  T.same(listing(), {"index.json"})
  T.raises(function() ms._write_atomic(dir .. "/nope/x", "t", "save_sharded") end, "save_sharded", "nope/x",
    "could not create the temporary file")
  local crc, size = ms._file_crc32(path)
  T.eq(size, 7)
  T.eq(crc, ms._crc32("second\n"))
  T.eq(ms._crc32("123456789"), 0xcbf43926, "the standard crc32 check value")
  os.remove(path)
end)

-- ---- a real crash ---------------------------------------------------------------------------------

-- A child process that writes its pid to a file, then saves 24 MB of one value per round, forever.
local child = dir .. "/child.lua"
local pidfile = dir .. "/child.pid"
local target = dir .. "/victim.safetensors"
T.write_file(child, ([[
local ms = require "moonshard"
local f = assert(io.open(%q, "w"))
f:write(io.open("/proc/self/stat"):read("l"):match("^%%d+"))
f:close()
local i = 0
while true do
  i = i + 1
  ms.save({w = ms.full({6 * 1024 * 1024}, i)}, %q)
end
]]):format(pidfile, target))

local function run_and_kill(delay)
  os.remove(pidfile)
  assert(os.execute(("%s %s > /dev/null 2>&1 &"):format(quote(build .. "/moonshard"), quote(child))))
  local pid
  for _ = 1, 200 do
    local f = io.open(pidfile)
    pid = f and tonumber(f:read("a"))
    if f then f:close() end
    if pid then break end
    os.execute("sleep 0.05")
  end
  assert(pid, "the child started")
  os.execute(("sleep %.2f"):format(delay))
  os.execute(("kill -KILL %d; while kill -0 %d 2>/dev/null; do sleep 0.02; done"):format(pid, pid))
end

-- Twelve kills, and more (up to 40) until one has landed inside a save: on a loaded machine a
-- kill can miss every save (the child still starting, or between saves) many times in a row.
T.test("ms.save killed with SIGKILL midway, 12 times or more: the file is always whole, the next save cleans up", function()
  local left_tmp, kills = 0, 0
  for k = 1, 40 do
    if k > 12 and left_tmp > 0 then break end
    kills = k
    run_and_kill(0.5 + 0.1 * (k % 5))
    local tmps = temporaries("victim.safetensors")
    if os.getenv("MS_TEST_VERBOSE") then print(k, table.concat(listing(), " "), io.open(target) and ms.load(target).w:numel()) end
    if #tmps > 0 then left_tmp = left_tmp + 1 end
    local f = io.open(target)
    if f then
      f:close()
      local w = ms.load(target).w
      -- the child's last whole save, or the parent's of the round before when the child had none
      T.truthy(w:numel() == 6 * 1024 * 1024 or (k > 1 and w:numel() == 2), "kill " .. k .. ": a whole file")
      T.eq(w:min():item(), w:max():item(), "kill " .. k .. ": one save's values")
    end
    ms.save({w = ms.zeros(2)}, target)
    T.eq(#temporaries("victim.safetensors"), 0, "kill " .. k .. ": the next save removed the dead writer's temporary")
  end
  print(("%d kills during ms.save: %d left a temporary, every one removed by the next save, no torn file"):format(kills,
    left_tmp))
  T.truthy(left_tmp > 0, "some kill landed inside a save (else the test proves nothing)")
end)

os.execute("rm -rf " .. quote(dir))
T.finish()
