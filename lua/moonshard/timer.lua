-- timer.lua: ms.Timer (a stopwatch, and a `<close>` scope that prints or records its time) and
-- ms.timeit(fn, {n =, warmup =}) (per-call statistics), for timing at the REPL and in scripts.
-- Loaded while require "moonshard" builds its table, so it reaches the module only when called.
local M = {}
local fmt = string.format
local options = require "moonshard.check_opts"

local function clock() return require("moonshard").perf_counter() end

-- Seconds as text in the unit that suits them: "812 ns", "3.41 us", "12.5 ms", "2.31 s".
local function duration(s)
  if s < 1e-6 then return fmt("%.3g ns", s * 1e9) end
  if s < 1e-3 then return fmt("%.3g us", s * 1e6) end
  if s < 1 then return fmt("%.3g ms", s * 1e3) end
  return fmt("%.2f s", s)
end

-- ---- Timer ------------------------------------------------------------------------------------

-- ms.Timer([name] [, {record = list, quiet = false}]): started at once. As a `<close>` variable
-- it stops at the end of the scope, then prints "name: 12.5 ms" (unless quiet) and appends the
-- seconds to record (when given). A class, as nn's: ms.Timer(...) makes one.
local Timer = {}
Timer.__index = Timer
Timer.__name = "Timer"
M.Timer = Timer

local function new_timer(_, name, opts)
  if type(name) == "table" and opts == nil then name, opts = nil, name end
  if name ~= nil and type(name) ~= "string" then
    error(fmt("ms.Timer: bad argument #1 (name): expected a string, got %s", type(name)), 2)
  end
  opts = options.check("ms.Timer", opts, { "record", "quiet" }, 2)
  if opts.record ~= nil and type(opts.record) ~= "table" then
    error(fmt("ms.Timer: option 'record' must be a table (a list the seconds are appended to), got %s",
      type(opts.record)), 2)
  end
  local self = setmetatable({ name = name or "elapsed", record = opts.record, quiet = opts.quiet == true,
                              total = 0 }, Timer)
  return self:start()
end
setmetatable(Timer, { __call = new_timer, __tostring = function() return "class Timer" end })

-- Starts (or resumes: the times between a stop and a start do not count). Returns the timer.
function Timer:start()
  if not self.since then self.since = clock() end
  return self
end

-- Stops; returns the seconds counted so far.
function Timer:stop()
  if self.since then
    self.total = self.total + (clock() - self.since)
    self.since = nil
  end
  return self.total
end

-- The seconds counted so far, the running interval included.
function Timer:elapsed()
  return self.total + (self.since and clock() - self.since or 0)
end

-- Back to 0 seconds, stopped.
function Timer:reset()
  self.total, self.since = 0, nil
  return self
end

function Timer:__close()
  local s = self:stop()
  if self.record then self.record[#self.record + 1] = s end
  if not self.quiet then print(fmt("%s: %s", self.name, duration(s))) end
end

function Timer:__tostring()
  return fmt("Timer(%s: %s%s)", self.name, duration(self:elapsed()), self.since and ", running" or "")
end

-- ---- timeit -----------------------------------------------------------------------------------

local Stats = {}
Stats.__index = Stats
Stats.__name = "TimeitStats"

function Stats:__tostring()
  return fmt("%s per call (median of %d; min %s, mean %s, max %s)", duration(self.median), self.n,
    duration(self.min), duration(self.mean), duration(self.max))
end

local function count_option(opts, key, default, least)
  local v = opts[key]
  if v == nil then return default end
  if math.type(v) ~= "integer" or v < least then
    error(fmt("ms.timeit: option '%s' must be an integer >= %d, got %s", key, least, tostring(v)), 3)
  end
  return v
end

-- Calls that fill about a fifth of a second, from one timed call: 1 to 1000.
local function auto_count(fn)
  local t0 = clock()
  fn()
  local one = clock() - t0
  return math.max(1, math.min(1000, math.ceil(0.2 / math.max(one, 1e-9))))
end

-- ms.timeit(fn, {n =, warmup = 1}): calls fn warmup times, then n times (n = enough calls for
-- about 0.2 s when not given), timing each; returns {n, median, min, mean, max, total} in
-- seconds, which prints as one line.
function M.timeit(fn, opts)
  local mt = getmetatable(fn)
  if type(fn) ~= "function" and not (type(mt) == "table" and mt.__call) then
    error(fmt("ms.timeit: bad argument #1 (fn): expected a function, got %s", type(fn)), 2)
  end
  opts = options.check("ms.timeit", opts, { "n", "warmup" }, 2)
  local n = count_option(opts, "n", nil, 1)
  for _ = 1, count_option(opts, "warmup", 1, 0) do fn() end
  n = n or auto_count(fn)
  local times, total = {}, 0
  for i = 1, n do
    local t0 = clock()
    fn()
    times[i] = clock() - t0
    total = total + times[i]
  end
  table.sort(times)
  local mid = (n + 1) // 2
  local median = n % 2 == 1 and times[mid] or (times[mid] + times[mid + 1]) / 2
  return setmetatable({ n = n, median = median, min = times[1], max = times[n], mean = total / n,
                        total = total }, Stats)
end

return M
