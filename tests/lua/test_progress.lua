-- test_progress.lua: moonshard.progress's bar through a fake terminal and a fake clock: the live
-- line (percent, step/total, samples/s, ETA, running metrics) redrawn at most every 0.1 s; plain
-- lines off a terminal; nothing from a rank other than 0; tensors read only when drawn.
local T = require "testing"
local ms = require "moonshard"
local progress = require "moonshard.progress"

-- A file-like sink that records what is written, and a clock the test moves by hand.
local function sink()
  local s = { text = "" }
  function s:write(...) for _, v in ipairs({ ... }) do self.text = self.text .. v end end
  return s
end
local function fake_clock()
  local c = { t = 100 }
  return c, function() return c.t end
end

-- The live line as the terminal shows it: what follows the last \r, without the erase code.
local function screen(out) return (out.text:match("([^\r]*)$"):gsub("\27%[K", "")) end
local function draws(out) return select(2, out.text:gsub("\r", "")) end

T.test("the live line: percent, step/total, elapsed<ETA, samples/s, the running loss", function()
  local out, c, clock = sink(), fake_clock()
  local bar = progress.Bar { total = 10, desc = "epoch 1", out = out, tty = true, rank = 0, clock = clock }
  T.eq(screen(out), "epoch 1   0%|--------------------| 0/10 [00:00<?, ? samples/s]")
  for i = 1, 4 do
    c.t = c.t + 0.5
    bar:step(64, { loss = i })
  end
  -- 4 steps of 64 samples in 2 s: 128 samples/s; 6 steps left at 0.5 s each: 3 s; loss mean 2.5
  T.eq(screen(out), "epoch 1  40%|########------------| 4/10 [00:02<00:03, 128 samples/s, loss=2.5]")
  local s = bar:stats()
  T.eq(s.n, 4); T.eq(s.samples, 256); T.near(s.rate, 128, 1e-9); T.near(s.eta, 3, 1e-9)
  T.near(s.metrics.loss, 2.5, 1e-12)
  bar:close()
  T.truthy(out.text:sub(-1) == "\n", "close ends the line")
  bar:close() -- twice is fine
end)

T.test("redrawn at most every 0.1 s, and at the last step", function()
  local out, c, clock = sink(), fake_clock()
  local bar = progress.Bar { total = 1000, out = out, tty = true, rank = 0, clock = clock }
  local before = draws(out)
  for _ = 1, 999 do
    c.t = c.t + 1 / 1024 -- exact in binary: the 0.1 s come after 103 steps
    bar:step(1)
  end
  -- 0.976 s of steps: 9 redraws, not 999
  T.eq(draws(out) - before, 9)
  bar:step(1)
  T.eq(draws(out) - before, 10, "the last step draws")
  T.truthy(screen(out):find("100%|####################| 1000/1000", 1, true), screen(out))
end)

T.test("a long line is cut to the terminal's width (a wrapped line could not be redrawn)", function()
  local out = sink()
  progress.Bar { total = 10, desc = ("x"):rep(200), out = out, tty = true, rank = 0, ncols = 60 }
  T.eq(#screen(out), 59)
end)

T.test("off a terminal: a plain line every `every` steps and one at the end; no \\r", function()
  local out, c, clock = sink(), fake_clock()
  do
    local bar <close> = progress.Bar { total = 6, desc = "train", out = out, tty = false, every = 2, rank = 0,
                                       clock = clock, unit = "img" }
    for _ = 1, 5 do
      c.t = c.t + 1
      bar:step(10, { acc = 0.5 })
    end
  end
  local lines = {}
  for l in out.text:gmatch("[^\n]+") do lines[#lines + 1] = l end
  T.eq(#lines, 3)
  T.eq(lines[1], "train: 2/6 (33%), 10.0 img/s, elapsed 00:02, ETA 00:04, acc=0.5")
  T.eq(lines[3], "train: 5/6 (83%), 10.0 img/s, elapsed 00:05, ETA 00:01, acc=0.5")
  T.truthy(not out.text:find("\r", 1, true))
end)

T.test("off a terminal without `every`: a line every `seconds`", function()
  local out, c, clock = sink(), fake_clock()
  local bar = progress.Bar { out = out, tty = false, seconds = 10, rank = 0, clock = clock }
  for _ = 1, 30 do
    c.t = c.t + 1
    bar:step()
  end
  T.eq(select(2, out.text:gsub("\n", "")), 3)
  T.truthy(out.text:find("^10, 1.0 samples/s, elapsed 00:10\n"), out.text)
end)

T.test("a rank other than 0 prints nothing, but counts", function()
  local out = sink()
  local bar = progress.Bar { total = 3, out = out, tty = true, rank = 1 }
  bar:step(5); bar:print("hello"); bar:close()
  T.eq(out.text, "")
  T.eq(bar:stats().samples, 5)
  out = sink()
  bar = progress.Bar { total = 3, out = out, tty = false, every = 1, rank = 2 }
  bar:step(); bar:close()
  T.eq(out.text, "")
end)

T.test("a tensor metric is read only when the bar is drawn", function()
  local out, c, clock = sink(), fake_clock()
  local bar = progress.Bar { total = 100, out = out, tty = true, rank = 0, clock = clock }
  local reads = 0
  local fake_loss = { item = function() reads = reads + 1 return 2.0 end }
  for _ = 1, 50 do
    c.t = c.t + 1 / 32
    bar:step(1, { loss = fake_loss })
  end
  T.eq(reads, 12, "50 steps, a redraw every 4th: 12 reads") -- 4/32 s is the first spacing >= 0.1 s
  T.truthy(screen(out):find("loss=2", 1, true), screen(out))
  bar:step(1, { loss = ms.tensor(4.0) })
  T.near(bar:stats().metrics.loss, (12 * 2 + 4) / 13, 1e-12) -- 12 reads of 2, then the 4 at stats()
end)

T.test("bar:print writes above the live bar and redraws it", function()
  local out = sink()
  local bar = progress.Bar { total = 2, out = out, tty = true, rank = 0 }
  local real = io.stdout
  local printed = sink()
  printed.flush = function() end
  io.stdout = printed -- luacheck: ignore
  local ok, err = pcall(bar.print, bar, "Train Epoch: 1")
  io.stdout = real -- luacheck: ignore
  assert(ok, err)
  T.eq(printed.text, "Train Epoch: 1\n")
  T.truthy(out.text:find("\r\27%[K\r"), "cleared, then redrawn: " .. out.text)
end)

T.test("format_time and the bar without a total", function()
  T.eq(progress.format_time(0), "00:00"); T.eq(progress.format_time(65), "01:05")
  T.eq(progress.format_time(7387), "2:03:07"); T.eq(progress.format_time(nil), "?")
  local out, c, clock = sink(), fake_clock()
  local bar = progress.Bar { out = out, tty = true, rank = 0, desc = "gen", unit = "tok", clock = clock }
  c.t = c.t + 0.5
  bar:step(3)
  T.eq(screen(out), "gen 1 [00:00, 6.0 tok/s]")
end)

T.test("bad options are one clear error naming the option", function()
  T.raises(function() progress.Bar { totl = 3 } end, "progress.Bar: unknown option 'totl' (expected one of: clock, desc, every, ")
  T.raises(function() progress.Bar { total = 2.5 } end, "progress.Bar: option total must be an integer, got 2.5")
  T.raises(function() progress.Bar { total = -1 } end, "option total must be at least 0, got -1")
  T.raises(function() progress.Bar { out = 3 } end, "option out must be a file")
  local err = T.raises(function() progress.Bar { every = 0 } end, "option every must be at least 1")
  T.truthy(err:find("test_progress.lua", 1, true), "the caller's line: " .. err)
end)

T.test("isatty: a pipe is no terminal; ms._isatty refuses a non-file", function()
  local p = io.popen("true", "r")
  T.eq(progress.isatty(p), false)
  p:close()
  T.raises(function() ms._isatty(3) end, "FILE*")
end)

T.finish()
