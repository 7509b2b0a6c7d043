-- progress.lua: moonshard.progress, a progress bar for a loop of known length (tqdm's role):
-- step/total, samples/s, ETA, elapsed and running metrics (the loss). On a terminal it is one
-- line redrawn in place at most ~10 times a second; elsewhere (a log file, a pipe) plain lines
-- every `every` steps or `seconds` seconds, and one at the end. Only rank 0 prints.
--   local bar <close> = progress.Bar{total = #loader, desc = "epoch 1"}
--   for _, x, y in loader:iter() do ...; bar:step(x:size(1), {loss = loss}) end
-- A step costs a clock read and a few additions: a metric given as a tensor is read (:item())
-- only when the bar is drawn, so the loop never waits for the device on the bar's account.
local ms = require "moonshard"
local options = require "moonshard.check_opts"

local M = {}

local Bar = {}
Bar.__index = Bar
M.Bar = Bar

local BAR_WIDTH = 20   -- the #### part of the live line
local REDRAW = 0.1     -- seconds between redraws of the live line

-- raised from check_values, called by the constructor: level 4 is the line that made the bar
local function fail(fmt, ...) error("progress.Bar: " .. fmt:format(...), 4) end

-- Whether the Lua file handle f is a terminal. A rank that moonshard -n / ms.spawn launched
-- writes into mpirun's pipes, so there the launcher's own answer counts ($MS_TTY: the
-- descriptors among 1 and 2 that were terminals where the launch began).
function M.isatty(f)
  local launched = os.getenv("MS_TTY")
  if launched and os.getenv("OMPI_COMM_WORLD_SIZE") then
    local fd = f == io.stdout and "1" or f == io.stderr and "2" or nil
    return fd ~= nil and launched:find(fd, 1, true) ~= nil
  end
  return io.type(f) == "file" and ms._isatty(f)
end

-- This process's rank: ms.distributed's once initialised, else the launcher's, else 0.
local function current_rank()
  local dist = rawget(ms, "distributed")
  if type(dist) == "table" and dist.is_initialized() then return dist.get_rank() end
  return math.tointeger(tonumber(os.getenv("OMPI_COMM_WORLD_RANK") or "0")) or 0
end

-- "01:05", "2:03:07"
function M.format_time(s)
  if not s or s ~= s or s == math.huge or s < 0 then return "?" end
  s = math.floor(s)
  local h, m = s // 3600, s % 3600 // 60
  if h > 0 then return ("%d:%02d:%02d"):format(h, m, s % 60) end
  return ("%02d:%02d"):format(m, s % 60)
end

local function format_rate(r)
  if not r then return "?" end
  if r >= 100 then return ("%.0f"):format(r) end
  return ("%.1f"):format(r)
end

local KNOWN = { total = "integer", desc = "string", unit = "string", out = "file", tty = "boolean",
                every = "integer", seconds = "number", rank = "integer", clock = "function",
                ncols = "integer", lines = "boolean", leave = "boolean" }

-- Whether v is of the option's kind: a Lua type, "integer", or "file" (a Lua file, or a table
-- with write: a test's fake terminal).
local function of_kind(v, want)
  if want == "file" then return io.type(v) == "file" or type(v) == "table" and v.write ~= nil end
  if want == "integer" then return math.type(v) == "integer" end
  return type(v) == want
end

local function check_values(opts)
  for k, v in pairs(opts) do
    local want = KNOWN[k]
    if not of_kind(v, want) then
      fail("option %s must be %s %s, got %s", k, want == "integer" and "an" or "a", want, tostring(v))
    end
  end
  if opts.total and opts.total < 0 then fail("option total must be at least 0, got %d", opts.total) end
  if opts.every and opts.every < 1 then fail("option every must be at least 1, got %d", opts.every) end
end

-- progress.Bar{total =, desc =, unit = "samples", out = io.stderr, tty =, every =, seconds = 10,
--              rank =, clock = ms.perf_counter, ncols = $COLUMNS or 100, lines = true, leave = true}
setmetatable(Bar, { __call = function(_, opts)
  opts = options.check("progress.Bar", opts, KNOWN, 2)
  check_values(opts)
  local out = opts.out or io.stderr
  local self = setmetatable({
    total = opts.total, desc = opts.desc, unit = opts.unit or "samples", out = out,
    every = opts.every, seconds = opts.seconds or (not opts.every and 10 or nil),
    clock = opts.clock or ms.perf_counter,
    ncols = opts.ncols or math.tointeger(tonumber(os.getenv("COLUMNS") or "")) or 100,
    lines = opts.lines ~= false, leave = opts.leave ~= false,
    n = 0, samples = 0, metrics = {}, order = {}, closed = false,
  }, Bar)
  self.silent = (opts.rank or current_rank()) ~= 0
  if opts.tty == nil then self.tty = M.isatty(out) else self.tty = opts.tty end
  self.start = self.clock()
  self.last_draw, self.last_line = self.start, self.start
  if self.tty and not self.silent then self:_draw(self.start) end -- shown from the first moment
  return self
end })

-- Folds this step's metrics in: numbers into their running mean at once; a tensor is kept and
-- read when the bar is next drawn.
function Bar:_add_metrics(metrics)
  for k, v in pairs(metrics) do
    local m = self.metrics[k]
    if not m then
      m = { sum = 0, count = 0 }
      self.metrics[k] = m
      self.order[#self.order + 1] = k
      table.sort(self.order, function(a, b) return tostring(a) < tostring(b) end)
    end
    if type(v) == "number" then m.sum, m.count = m.sum + v, m.count + 1
    else m.pending = v end
  end
end

-- One step of the loop done; `samples` (default 1) is how many samples it saw, `metrics` a table
-- name -> number or one-element tensor, shown as their running means.
function Bar:step(samples, metrics)
  if self.closed then return end
  self.n, self.samples = self.n + 1, self.samples + (samples or 1)
  if metrics then self:_add_metrics(metrics) end
  if self.silent then return end
  local now = self.clock()
  if self.tty then
    if now - self.last_draw >= REDRAW or self.n == self.total then self:_draw(now) end
  elseif self.lines and (self.every and self.n % self.every == 0
                         or self.seconds and now - self.last_line >= self.seconds) then
    self:_line(now)
  end
end

-- What the bar knows: n (steps), samples, elapsed (s), rate (samples/s), eta (s; nil when the
-- total is unknown), and each metric's running mean by name.
function Bar:stats(now)
  now = now or self.clock()
  local elapsed = now - self.start
  local s = { n = self.n, total = self.total, samples = self.samples, elapsed = elapsed,
              rate = elapsed > 0 and self.samples / elapsed or nil, metrics = {} }
  if self.total and self.n > 0 and elapsed > 0 then s.eta = (self.total - self.n) * elapsed / self.n end
  for k, m in pairs(self.metrics) do
    if m.pending ~= nil then -- read now, not at the step: the device has long finished it
      m.sum, m.count, m.pending = m.sum + m.pending:item(), m.count + 1, nil
    end
    if m.count > 0 then s.metrics[k] = m.sum / m.count end
  end
  return s
end

local function metrics_text(self, s)
  local parts = {}
  for _, k in ipairs(self.order) do
    if s.metrics[k] then parts[#parts + 1] = ("%s=%.4g"):format(k, s.metrics[k]) end
  end
  return table.concat(parts, ", ")
end

-- The live line: "desc  45%|#########-----------| 420/938 [00:12<00:15, 2234 samples/s, loss=0.2345]"
function Bar:text(now)
  local s = self:stats(now)
  local head = self.desc and (self.desc .. " ") or ""
  local rate = ("%s %s/s"):format(format_rate(s.rate), self.unit)
  local m = metrics_text(self, s)
  local tail = m ~= "" and (", " .. m) or ""
  if not self.total then
    return ("%s%d [%s, %s%s]"):format(head, s.n, M.format_time(s.elapsed), rate, tail)
  end
  local frac = self.total > 0 and math.min(s.n / self.total, 1) or 1
  local full = math.floor(frac * BAR_WIDTH)
  return ("%s%3d%%|%s%s| %d/%d [%s<%s, %s%s]"):format(head, math.floor(frac * 100), ("#"):rep(full),
    ("-"):rep(BAR_WIDTH - full), s.n, self.total, M.format_time(s.elapsed), M.format_time(s.eta), rate, tail)
end

-- A plain line: "desc: 420/938 (45%), 2234 samples/s, elapsed 00:12, ETA 00:15, loss=0.2345"
function Bar:line_text(now)
  local s = self:stats(now)
  local where = self.total and ("%d/%d (%d%%)"):format(s.n, self.total,
    self.total > 0 and math.floor(100 * math.min(s.n / self.total, 1)) or 100) or tostring(s.n)
  local eta = self.total and (", ETA " .. M.format_time(s.eta)) or ""
  local m = metrics_text(self, s)
  return ("%s%s, %s %s/s, elapsed %s%s%s"):format(self.desc and (self.desc .. ": ") or "", where,
    format_rate(s.rate), self.unit, M.format_time(s.elapsed), eta, m ~= "" and (", " .. m) or "")
end

function Bar:_draw(now)
  local text = self:text(now)
  -- never wider than the terminal: a wrapped line could not be redrawn in place
  if #text > self.ncols - 1 then text = text:sub(1, self.ncols - 1) end
  self.out:write("\r", text, "\27[K")
  if self.out.flush then self.out:flush() end
  self.last_draw = now
end

function Bar:_line(now)
  self.out:write(self:line_text(now), "\n")
  if self.out.flush then self.out:flush() end
  self.last_line = now
end

-- Prints text (a line) above the live bar, on io.stdout, and redraws the bar under it: the way
-- to print inside a loop that shows a bar. Off a terminal it is just a print; on a rank other
-- than 0 it prints nothing, as the bar.
function Bar:print(text)
  if self.silent then return end
  local live = self.tty and not self.silent and not self.closed
  if live then self.out:write("\r\27[K"); if self.out.flush then self.out:flush() end end
  io.stdout:write(text, "\n")
  io.stdout:flush()
  if live then self:_draw(self.clock()) end
end

-- The last drawing (and the end of the live line, or the final plain line); safe to call twice.
function Bar:close()
  if self.closed then return end
  self.closed = true
  if self.silent then return end
  local now = self.clock()
  if self.tty then
    if self.leave then
      self:_draw(now)
      self.out:write("\n")
    else
      self.out:write("\r\27[K")
    end
    if self.out.flush then self.out:flush() end
  elseif self.lines and self.n > 0 then
    self:_line(now)
  end
end

Bar.__close = Bar.close

return M
