-- test_launch.lua: launching ranks: `moonshard -n N` (re-executes itself under mpirun),
-- `mpirun -np N moonshard`, ms.spawn, engine threads per rank, and failure propagation: an
-- error, os.exit or a signal on one rank ends the whole launch, non-zero, within 10 seconds.
-- Ranks learn who they are from the variables Open MPI sets (OMPI_COMM_WORLD_*). Every command
-- runs under `timeout`, so a hang fails the test instead of stalling it. Skips without mpirun.
local T = require "testing"
local ms = require "moonshard"

local exe, build = T.launcher_exe()

local base = os.tmpname()
local files = {out = base .. ".out", err = base .. ".err", script = base .. ".lua",
               input = base .. ".in"}
local LIMIT = 10 -- seconds a failing launch may take to end every rank

local quote = T.quote

local write_file = T.write_file

local read_file = T.read_file

-- Runs a shell command line (stdin empty) with a hard limit: timeout signals its whole process
-- group (mpirun and every rank) with TERM after 60 s, KILL 5 s later. `env` is a string of
-- VAR=value words. MS_NUM_THREADS is unset unless `env` sets it: the per-rank default is under
-- test. Returns the exit status, stdout, stderr and the seconds it took.
local function run_cmd(cmdline, env)
  write_file(files.input, "")
  local t0 = ms.perf_counter()
  local _, _, code = os.execute(("env -u MS_NUM_THREADS %s timeout -k 5 60 sh -c %s < %s > %s 2> %s")
      :format(env or "", quote(cmdline), quote(files.input), quote(files.out), quote(files.err)))
  local seconds = ms.perf_counter() - t0
  return code, read_file(files.out), read_file(files.err), seconds
end

local function run(args) return run_cmd(quote(exe) .. " " .. args) end

local function has(text, needle, what)
  if not text:find(needle, 1, true) then
    error(("%s: %q lacks %q"):format(what or "output", text, needle), 2)
  end
end

-- The lines of a text, sorted: ranks print in any order.
local function sorted_lines(text)
  local lines = {}
  for line in text:gmatch("[^\n]+") do lines[#lines + 1] = line end
  table.sort(lines)
  return lines
end

local cores = math.tointeger(tonumber(io.popen("getconf _NPROCESSORS_ONLN"):read("l")))

-- Prints "rank R of N local L/LN threads T args..." from the launcher's variables.
local show_rank = [[
local ms = require "moonshard"
local e = os.getenv
print(("rank %s of %s local %s/%s threads %d"):format(e("OMPI_COMM_WORLD_RANK"),
  e("OMPI_COMM_WORLD_SIZE"), e("OMPI_COMM_WORLD_LOCAL_RANK"), e("OMPI_COMM_WORLD_LOCAL_SIZE"),
  ms.get_num_threads()), ...)
]]

local function expected_ranks(n, threads, suffix)
  local want = {}
  for r = 0, n - 1 do
    want[#want + 1] = ("rank %d of %d local %d/%d threads %d%s"):format(r, n, r, n, threads,
                                                                        suffix or "")
  end
  return want
end

T.test("-n 2 runs the script on two ranks with its arguments", function()
  write_file(files.script, show_rank)
  local code, out, err = run("-n 2 " .. quote(files.script) .. " a 'b c'")
  T.eq(code, 0, err)
  T.same(sorted_lines(out), expected_ranks(2, math.max(1, cores // 2), "\ta\tb c"))
end)

T.test("-n with -e runs the code on every rank", function()
  local code, out, err = run([[-n 2 -e 'print("hello from", os.getenv("OMPI_COMM_WORLD_RANK"))']])
  T.eq(code, 0, err)
  T.same(sorted_lines(out), {"hello from\t0", "hello from\t1"})
end)

T.test("-n 3 and -n 4 run oversubscribed, one engine thread per rank on few cores", function()
  write_file(files.script, show_rank)
  for _, n in ipairs({3, 4}) do
    local code, out, err = run("-n " .. n .. " " .. quote(files.script))
    T.eq(code, 0, err)
    T.same(sorted_lines(out), expected_ranks(n, math.max(1, cores // n)))
  end
end)

T.test("MS_NUM_THREADS overrides the per-rank default", function()
  write_file(files.script, show_rank)
  local code, out, err = run_cmd(quote(exe) .. " -n 2 " .. quote(files.script), "MS_NUM_THREADS=3")
  T.eq(code, 0, err)
  T.same(sorted_lines(out), expected_ranks(2, 3))
end)

T.test("one process keeps every core", function()
  local code, out = run("-e 'print(require(\"moonshard\").get_num_threads())'")
  T.eq(code, 0); T.eq(out, cores .. "\n")
  code, out = run("-n 1 -e 'print(require(\"moonshard\").get_num_threads())'")
  T.eq(code, 0); T.eq(out, cores .. "\n")
end)

T.test("an error on rank 1 ends the launch at once, with rank 1's message", function()
  -- rank 0 spins in Lua, as a rank blocked waiting for its peer would
  write_file(files.script, [[
local function fail() error("boom on rank " .. os.getenv("OMPI_COMM_WORLD_RANK")) end
if os.getenv("OMPI_COMM_WORLD_RANK") == "1" then fail() end
while true do end
]])
  local code, out, err, seconds = run("-n 2 " .. quote(files.script))
  T.truthy(code ~= 0, "exit status " .. tostring(code))
  T.truthy(seconds < LIMIT, ("took %.1f s"):format(seconds))
  T.eq(out, "")
  has(err, "moonshard: [rank 1] " .. files.script .. ":1: boom on rank 1")
  has(err, "stack traceback:")
  has(err, "in local 'fail'")
end)

T.test("a rank sleeping in child processes is ended too", function()
  write_file(files.script, [[
if os.getenv("OMPI_COMM_WORLD_RANK") == "1" then os.execute("sleep 0.3"); error("late failure") end
while true do os.execute("sleep 0.1") end
]])
  local code, _, err, seconds = run("-n 2 " .. quote(files.script))
  T.truthy(code ~= 0, "exit status " .. tostring(code))
  T.truthy(seconds < LIMIT, ("took %.1f s"):format(seconds))
  has(err, "[rank 1] " .. files.script .. ":1: late failure")
end)

T.test("a rank blocked in a collective is ended when its peer fails", function()
  if not ms.distributed then print("skip: no ms.distributed in this build") return end
  -- rank 0 waits in the second all_reduce for a rank 1 that died before reaching it
  write_file(files.script, [[
local ms = require "moonshard"
local dist = ms.distributed
dist.init_process_group("mpi")
local t = ms.ones(4)
dist.all_reduce(t)
if dist.get_rank() == 1 then error("rank 1 left the collectives") end
dist.all_reduce(t)
print("unreachable")
]])
  local code, out, err, seconds = run("-n 2 " .. quote(files.script))
  T.truthy(code ~= 0, "exit status " .. tostring(code))
  T.truthy(seconds < LIMIT, ("took %.1f s"):format(seconds))
  T.eq(out, "")
  has(err, "moonshard: [rank 1] " .. files.script .. ":6: rank 1 left the collectives")
end)

T.test("os.exit with a non-zero status on one rank ends every rank", function()
  write_file(files.script, [[
if os.getenv("OMPI_COMM_WORLD_RANK") == "1" then os.exit(3) end
while true do end
]])
  local code, _, _, seconds = run("-n 2 " .. quote(files.script))
  T.eq(code, 3)
  T.truthy(seconds < LIMIT, ("took %.1f s"):format(seconds))
end)

T.test("a fatal signal on one rank ends every rank", function()
  -- os.execute's shell is the rank's child: $PPID is the rank
  write_file(files.script, [[
if os.getenv("OMPI_COMM_WORLD_RANK") == "0" then os.execute("kill -SEGV $PPID") end
while true do end
]])
  local code, _, err, seconds = run("-n 3 " .. quote(files.script))
  T.truthy(code ~= 0, "exit status " .. tostring(code))
  T.truthy(seconds < LIMIT, ("took %.1f s"):format(seconds))
end)

T.test("every rank finishing normally: status 0, even when they end apart", function()
  write_file(files.script, [[
if os.getenv("OMPI_COMM_WORLD_RANK") == "1" then os.execute("sleep 0.5") end
print("done " .. os.getenv("OMPI_COMM_WORLD_RANK"))
]])
  local code, out, err = run("-n 2 " .. quote(files.script))
  T.eq(code, 0, err)
  T.same(sorted_lines(out), {"done 0", "done 1"})
end)

-- mpirun refuses root unless told; the variables are harmless for other users
local mpirun = "mpirun --oversubscribe"
local root_ok = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"

T.test("under mpirun directly: -n must match the world; errors name the rank", function()
  write_file(files.script, show_rank)
  local code, out, err = run_cmd(mpirun .. " -np 2 " .. quote(exe) .. " " .. quote(files.script), root_ok)
  T.eq(code, 0, err)
  T.eq(#sorted_lines(out), 2)
  code, out, err = run_cmd(mpirun .. " -np 2 " .. quote(exe) .. " -n 2 " .. quote(files.script), root_ok)
  T.eq(code, 0, err)
  T.eq(#sorted_lines(out), 2)
  code, _, err = run_cmd(mpirun .. " -np 2 " .. quote(exe) .. " -n 3 " .. quote(files.script), root_ok)
  T.truthy(code ~= 0, "exit status " .. tostring(code))
  has(err, "moonshard: -n 3, but the launcher started 2 ranks")
  code, _, err = run_cmd(mpirun .. " -np 2 " .. quote(exe) .. [[ -e 'error("from rank " .. os.getenv("OMPI_COMM_WORLD_RANK"))']], root_ok)
  T.truthy(code ~= 0, "exit status " .. tostring(code))
  has(err, "moonshard: [rank ")
  has(err, "(command line):1: from rank ")
end)

T.test("-n N > 1 needs a script or -e, and mpirun", function()
  for _, args in ipairs({"-n 2", "-n 2 -i", "-n 2 -", "-n 2 -i -e 'x=1'"}) do
    local code, out, err = run(args)
    T.eq(code, 1, args); T.eq(out, "", args)
    T.eq(err, "moonshard: -n 2 needs a script file or -e (not -i or stdin)\n", args)
  end
  local code, out, err = run_cmd(quote(exe) .. " -n 2 -e 'print(1)'", "MS_MPIRUN=no-such-mpirun-here")
  T.eq(code, 1); T.eq(out, "")
  T.eq(err, "moonshard: -n 2 needs no-such-mpirun-here (apt-get install openmpi-bin)\n")
  code, _, err = run("-n 0 -e 'print(1)'")
  T.eq(code, 1); has(err, "-n needs a positive number")
end)

-- A script calling ms.spawn: `top` runs in the launcher and in every rank, main on each rank.
local spawn_script = [[
local ms = require "moonshard"
print("top " .. tostring(os.getenv("OMPI_COMM_WORLD_RANK")))
local n = math.tointeger(tonumber(arg[1]))
local r = ms.spawn(function(rank, size, word)
  print(("main %d/%d %s threads %d"):format(rank, size, word, ms.get_num_threads()))
  if word == "fail" and rank == size - 1 then error("spawned rank failed") end
  if word == "fail" then while true do end end
  return rank * 10
end, n, arg[2])
print("after " .. r)
]]

T.test("ms.spawn launches the script's ranks and calls main on each", function()
  write_file(files.script, spawn_script)
  local code, out, err = run(quote(files.script) .. " 2 hi")
  T.eq(code, 0, err)
  local t = math.max(1, cores // 2)
  T.same(sorted_lines(out), {"after 0", "after 10", ("main 0/2 hi threads %d"):format(t),
                             ("main 1/2 hi threads %d"):format(t), "top 0", "top 1", "top nil"})
  -- -n given to the launcher is replaced by spawn's own count
  code, out, err = run("-n 1 " .. quote(files.script) .. " 3 x")
  T.eq(code, 0, err)
  T.eq(#sorted_lines(out), 1 + 3 * 3)
  has(out, "main 2/3 x")
end)

T.test("ms.spawn with one process runs main here", function()
  write_file(files.script, spawn_script)
  local code, out, err = run(quote(files.script) .. " 1 solo")
  T.eq(code, 0, err)
  T.eq(out, ("top nil\nmain 0/1 solo threads %d\nafter 0\n"):format(cores))
end)

T.test("ms.spawn: a failing rank fails the launcher, promptly", function()
  write_file(files.script, spawn_script)
  local code, out, err, seconds = run(quote(files.script) .. " 2 fail")
  T.truthy(code ~= 0, "exit status " .. tostring(code))
  T.truthy(seconds < LIMIT, ("took %.1f s"):format(seconds))
  T.truthy(not out:find("after", 1, true), "no rank got past spawn: " .. out)
  has(err, "moonshard: [rank 1] " .. files.script .. ":6: spawned rank failed")
end)

T.test("ms.spawn under a launch of another size is an error", function()
  write_file(files.script, spawn_script)
  local code, _, err = run("-n 2 " .. quote(files.script) .. " 3 x")
  T.truthy(code ~= 0, "exit status " .. tostring(code))
  has(err, "ms.spawn: asked for 3 processes, but the launcher started 2")
end)

T.test("ms.spawn checks its arguments and needs a script file", function()
  T.raises(function() ms.spawn(42, 2) end, "ms.spawn: main must be a function, got number")
  T.raises(function() ms.spawn(print, 0) end, "ms.spawn: nprocs must be a positive integer")
  T.raises(function() ms.spawn(print, 1.5) end, "ms.spawn: nprocs must be a positive integer")
  local code, _, err = run_cmd("printf %s " .. quote("require('moonshard').spawn(print, 2)") ..
                               " | " .. quote(exe) .. " -")
  T.eq(code, 1)
  has(err, "ms.spawn: the script must be a file (stdin cannot be re-read by every rank)")
end)

T.test("ms.spawn from a stock lua5.4 with moonshard.so", function()
  local lua = "/usr/bin/lua5.4"
  if not io.open(lua) then print("skip: no " .. lua) return end
  if os.getenv("MS_SANITIZE") ~= "" and os.getenv("MS_SANITIZE") then
    print("skip: moonshard.so is built with sanitizers")
    return
  end
  write_file(files.script, spawn_script)
  local code, out, err = run_cmd(lua .. " " .. quote(files.script) .. " 2 stock",
                                 "LUA_CPATH=" .. quote(build .. "/?.so"))
  T.eq(code, 0, err)
  T.eq(#sorted_lines(out), 7)
  has(out, "main 1/2 stock")
end)

for _, path in pairs(files) do os.remove(path) end
os.remove(base)
T.finish()
