-- test_faults.lua: faults of a multi-rank job end it promptly, with a message, leaving no process:
-- a rank that ends normally in the middle of training (os.exit(0), or its script returning with
-- its peers in a collective) fails the others naming it; the collective watchdog names the rank
-- that has not arrived (busy, or SIGSTOPped) and the call; SIGINT/SIGTERM to either launcher
-- (`moonshard -n 2` and ms.spawn) end mpirun and every rank within 5 s, print one line and exit
-- with 128 + the signal. Processes are found by the unique path of each case's script (pgrep -f),
-- and every case kills what is left of its own, so a failure never leaves orphans. Bounds are
-- generous: this runs on 2 loaded cores. Skips without mpirun.
local T = require "testing"
local ms = require "moonshard"

local exe = T.launcher_exe({ "pgrep" })

local quote, write_file, read_file = T.quote, T.write_file, T.read_file
local base = os.tmpname()
local files = {out = base .. ".out", err = base .. ".err", pid = base .. ".pid", status = base .. ".status",
               runner = base .. ".sh"}
local LIMIT = 10 -- seconds a fault may take to end the job (start-up included)
local GONE = 5   -- seconds a signalled launcher may take to leave no process

-- Each case's script has a path of its own: the marker its processes are found by.
local count = 0
local function new_script(text)
  count = count + 1
  local path = ("%s.case%d.lua"):format(base, count)
  write_file(path, text)
  files["script" .. count] = path
  return path
end

-- A pgrep pattern for path that does not match the command line of the shell running pgrep.
local function pattern(path)
  local dir, first, rest = path:match("^(.*/)(.)(.*)$")
  return quote(dir .. "[" .. first .. "]" .. rest)
end

local function alive(path)
  local p = io.popen("pgrep -f " .. pattern(path))
  local pids = p:read("a")
  p:close()
  return pids ~= ""
end

local function kill_left(path) os.execute("pkill -KILL -f " .. pattern(path) .. " 2> /dev/null") end

-- Runs `exe args` to its end under a hard limit; returns status, stderr, seconds.
local function run(args, env)
  local t0 = ms.perf_counter()
  local _, _, code = os.execute(("env %s timeout -k 5 60 %s %s < /dev/null > %s 2> %s")
      :format(env or "", quote(exe), args, quote(files.out), quote(files.err)))
  return code, read_file(files.err), ms.perf_counter() - t0
end

local function has(text, needle)
  if not text:find(needle, 1, true) then error(("%q lacks %q"):format(text, needle), 2) end
end

local function check_fault(name, script, needles, env)
  T.test(name, function()
    local code, err, seconds = run("-n 2 " .. quote(script), env)
    local left = alive(script)
    kill_left(script)
    T.truthy(code ~= 0 and code ~= 124, "exit status " .. tostring(code) .. "\n" .. err)
    T.truthy(seconds < LIMIT, ("took %.1f s"):format(seconds))
    T.truthy(not left, "processes left")
    for _, needle in ipairs(needles) do has(err, needle) end
    print(("%s: ended in %.2f s"):format(name, seconds))
  end)
end

-- A small data-parallel training loop; `fault(rank, step)` runs before each step.
local function training(fault, opts)
  return ([[
local ms = require "moonshard"
local nn = require "moonshard.nn"
local F = require "moonshard.functional"
local dist = ms.distributed
dist.init_process_group(%s)
local rank = dist.get_rank()
ms.manual_seed(1)
local model = nn.Linear(16, 4)
local x, y = ms.randn(32, 16), ms.randn(32, 4)
for step = 1, 100000 do
  %s
  F.mse_loss(model(x), y):backward()
  for _, p in ipairs(model:parameters()) do dist.all_reduce(p.grad, {op = "avg"}) end
  model:zero_grad()
end
]]):format(opts or '"mpi"', fault)
end

check_fault("a rank's os.exit(0) mid-training ends the job, naming the rank",
            new_script(training('if rank == 1 and step == 20 then os.exit(0) end')),
            {"moonshard: [rank 0] ", "all_reduce: rank 1 left the job"})

check_fault("a rank returning with its peer in a collective ends the job, naming the rank",
            new_script([[
local ms = require "moonshard"
local dist = ms.distributed
dist.init_process_group("mpi")
local t = ms.ones(4)
dist.all_reduce(t)
if dist.get_rank() == 1 then return end
dist.all_reduce(t)
]]), {"moonshard: [rank 0] ", "all_reduce: rank 1 left the job", "call, #1 on its group"})

check_fault("the watchdog names the rank that has not arrived and the call",
            new_script(training('if rank == 1 and step == 3 then while true do end end',
                                '{backend = "mpi", timeout = 2}')),
            {"moonshard: [rank 0] ", "all_reduce: watchdog: call #4 on the world waited 2 s: rank 1 has not arrived"})

-- the stopped rank never arrives; the timeout comes from the environment
check_fault("the watchdog catches a SIGSTOPped rank (MS_DIST_TIMEOUT)",
            new_script(training('if rank == 1 and step == 3 then os.execute("kill -STOP $PPID") end')),
            {"all_reduce: watchdog: call #4 on the world waited 2 s: rank 1 has not arrived (no word from it"},
            "MS_DIST_TIMEOUT=2")

T.test("a rank waiting for a rank that computes says where the others wait", function()
  local script = new_script([[
local ms = require "moonshard"
local dist = ms.distributed
dist.init_process_group({backend = "mpi", timeout = 3})
local t = ms.ones(4)
if dist.get_rank() == 2 then while true do end end
dist.all_reduce(t)
]])
  local code, err = run("-n 3 " .. quote(script))
  kill_left(script)
  T.truthy(code ~= 0 and code ~= 124, "exit status " .. tostring(code))
  has(err, "all_reduce: watchdog: call #0 on the world waited 3 s: rank 2 has not arrived")
  T.truthy(not err:find("rank 1 has not arrived", 1, true) and not err:find("rank 0 has not arrived", 1, true),
           "only rank 2 is missing:\n" .. err)
end)

-- Ranks training until stopped; each prints "ready" once it has run a collective.
local endless = new_script([[
local ms = require "moonshard"
ms.spawn(function()
  local dist = ms.distributed
  dist.init_process_group("mpi")
  local t = ms.ones(256)
  dist.all_reduce(t)
  print("ready")
  io.stdout:flush()
  while true do dist.all_reduce(t) end
end, 2)
]])

-- Starts `exe args` in the background of a shell script (so no shell's command line holds the
-- marker; a background job of sh starts with SIGINT ignored, as a launcher may); returns its pid.
local function start(args)
  for _, f in ipairs({files.pid, files.status, files.out}) do os.remove(f) end
  write_file(files.runner, ("%s %s < /dev/null > %s 2> %s &\necho $! > %s\nwait $!\necho $? > %s\n")
      :format(quote(exe), args, quote(files.out), quote(files.err), quote(files.pid), quote(files.status)))
  os.execute("sh " .. quote(files.runner) .. " > /dev/null 2>&1 &")
  local t0 = ms.perf_counter()
  repeat
    os.execute("sleep 0.2")
    local f = io.open(files.out)
    local out = f and f:read("a") or ""
    if f then f:close() end
    local _, ready = out:gsub("ready", "")
    if ready == 2 then return math.tointeger(tonumber(read_file(files.pid))) end
  until ms.perf_counter() - t0 > 60
  error("the ranks did not start within 60 s: " .. read_file(files.err))
end

local function wait_file(path, seconds)
  local t0 = ms.perf_counter()
  while ms.perf_counter() - t0 < seconds do
    local f = io.open(path)
    if f then
      local text = f:read("a")
      f:close()
      if text:find("\n") then return text end
    end
    os.execute("sleep 0.1")
  end
end

for _, launcher in ipairs({{"ms.spawn", ""}, {"-n 2", "-n 2 "}}) do
  for _, sig in ipairs({{"INT", 2}, {"TERM", 15}}) do
    T.test(("SIG%s to the %s launcher ends every process and says so"):format(sig[1], launcher[1]), function()
      local ok, err = pcall(function()
        local pid = start(launcher[2] .. quote(endless))
        local t0 = ms.perf_counter()
        os.execute(("kill -%s %d"):format(sig[1], pid))
        while alive(endless) and ms.perf_counter() - t0 < 3 * GONE do os.execute("sleep 0.1") end
        local seconds = ms.perf_counter() - t0
        T.truthy(seconds < GONE, ("processes left after %.1f s"):format(seconds))
        local status = wait_file(files.status, 10)
        T.eq(math.tointeger(tonumber(status)), 128 + sig[2], "launcher's exit status")
        T.eq(read_file(files.err), ("moonshard: interrupted by SIG%s: ended mpirun and its 2 ranks\n"):format(sig[1]))
        print(("SIG%s to %s: no process after %.2f s"):format(sig[1], launcher[1], seconds))
      end)
      kill_left(endless)
      if not ok then error(err, 0) end
    end)
  end
end

for _, path in pairs(files) do os.remove(path) end
os.remove(base)
T.finish()
