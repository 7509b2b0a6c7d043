-- docs/repl.lua: the docstrings of the timing helpers (lua/moonshard/timer.lua) and of the REPL's
-- help, per lua/moonshard/doc.lua's contract.
return {
  title = "Timing and the REPL",
  {
    name = "ms.Timer",
    sig = "ms.Timer([name], {record =, quiet = false}) -> Timer",
    doc = [[A stopwatch, started at once. As a `<close>` variable it times a scope: at the scope's
end it stops, prints `name: 12.5 ms` (unless `quiet`) and appends the seconds to `record` (when
given). `tostring` shows the time so far. For GPU work, call `ms.cuda.synchronize()` before the
scope ends, as the GPU runs asynchronously. (PyTorch has no such class; `torch.utils.benchmark.Timer`
is closer to `ms.timeit`.)]],
    opts = {
      { "record", "table", "nil", "a list the seconds are appended to when the scope ends" },
      { "quiet", "boolean", "false", "true: print nothing when the scope ends" },
    },
    example = [[
local times = {}
do
  local _ <close> = ms.Timer("matmul", {record = times, quiet = true})
  local y = ms.ones(64, 64):matmul(ms.ones(64, 64))
end
print(#times, times[1] >= 0)   --> 1	true
]],
  },
  {
    name = "ms.Timer:start",
    sig = "timer:start() -> Timer",
    doc = [[Starts the timer, or resumes it after `stop` (the time between a stop and a start does
not count). Starting a running timer does nothing.]],
    example = [[
local t = ms.Timer("steps", {quiet = true})
t:stop()
t:start()
print(t:elapsed() >= 0)        --> true
]],
  },
  {
    name = "ms.Timer:stop",
    sig = "timer:stop() -> number",
    doc = [[Stops the timer and returns the seconds counted so far (every interval between a
start and a stop).]],
    example = [[
local t = ms.Timer({quiet = true})
local s = t:stop()
print(s >= 0, t:elapsed() == s) --> true	true
]],
  },
  {
    name = "ms.Timer:elapsed",
    sig = "timer:elapsed() -> number",
    doc = [[The seconds counted so far, the running interval included; the timer keeps running.]],
    example = [[
local t = ms.Timer({quiet = true})
print(t:elapsed() >= 0)        --> true
]],
  },
  {
    name = "ms.Timer:reset",
    sig = "timer:reset() -> Timer",
    doc = [[Back to 0 seconds, stopped; `start` begins counting again.]],
    example = [[
local t = ms.Timer({quiet = true})
print(t:reset():elapsed())     --> 0
]],
  },
  {
    name = "ms.timeit",
    sig = "ms.timeit(fn, {n =, warmup = 1}) -> stats",
    doc = [[Calls `fn` `warmup` times untimed, then `n` times, timing each call, and returns the
per-call statistics in seconds: `n`, `median`, `min`, `mean`, `max`, `total`. The result prints as
one line (`12.5 ms per call (median of 10; min ..., mean ..., max ...)`). Without `n`, as many calls
as fill about 0.2 s (1 to 1000). As Python's `timeit`, with PyTorch's `benchmark.Timer`'s median.
For GPU work, end `fn` with `ms.cuda.synchronize()`.]],
    opts = {
      { "n", "integer", "nil", "timed calls (at least 1); nil: enough for about 0.2 s" },
      { "warmup", "integer", "1", "untimed calls first (caches, lazy set-up)" },
    },
    example = [[
local a = ms.ones(32, 32)
local s = ms.timeit(function() return a:matmul(a) end, {n = 5})
print(s.n, s.min <= s.median)  --> 5	true
]],
  },
}
