-- test_metrics.lua: moonshard.metrics: CSV and JSON-lines rows as written (header, empty
-- fields, nan / null), flushed row by row (readable before close), read back, and drawn;
-- mistakes (unknown column, a bad value, a bad file name) named.
local T = require "testing"
local ms = require "moonshard"
local metrics = require "moonshard.metrics"

local tmp = os.tmpname()

local ROWS = {
  { kind = "step", step = 1, epoch = 1, loss = 2.5, lr = 1.0, samples_per_s = 1000.5, time = 0.25 },
  { kind = "step", step = 2, epoch = 1, loss = 0 / 0, lr = 1.0, samples_per_s = 1200, time = 0.5 },
  { kind = "epoch", step = 2, epoch = 1, loss = 1.75, test_loss = 1.5, accuracy = 61.25, lr = 1.0, time = 0.75 },
}

T.test("CSV: a header, a row per log, empty fields where a column is missing; flushed at once", function()
  local path = tmp .. ".csv"
  local log = metrics.Logger(path)
  for i, r in ipairs(ROWS) do
    log:log(r)
    -- every row is in the file before the next is logged (a crash keeps it)
    T.eq(select(2, T.read_file(path):gsub("\n", "")), i + 1, "flushed after row " .. i)
  end
  log:close()
  T.eq(T.read_file(path), table.concat({
    "kind,step,epoch,loss,test_loss,accuracy,lr,samples_per_s,time",
    "step,1,1,2.5,,,1,1000.5,0.25",
    "step,2,1,nan,,,1,1200,0.5",
    "epoch,2,1,1.75,1.5,61.25,1,,0.75", "" }, "\n"))
  local back = metrics.read(path)
  T.eq(#back, 3)
  T.eq(back[1].kind, "step"); T.eq(back[1].samples_per_s, 1000.5); T.eq(back[1].test_loss, nil)
  T.truthy(back[2].loss ~= back[2].loss, "nan reads back as nan")
  T.eq(back[3].accuracy, 61.25)
  os.remove(path)
end)

T.test("JSON lines: an object per row with the fields given (the engine's encoder), nan left out", function()
  local path = tmp .. ".jsonl"
  do
    local log <close> = metrics.Logger(path)
    for _, r in ipairs(ROWS) do log:log(r) end
    log:log { kind = "step", step = 3, loss = ms.tensor(0.5) } -- a one-element tensor is read
  end
  local lines = {}
  for l in T.read_file(path):gmatch("[^\n]+") do lines[#lines + 1] = l end
  T.eq(lines[1], '{"epoch":1,"kind":"step","loss":2.5,"lr":1,"samples_per_s":1000.5,"step":1,"time":0.25}')
  T.eq(lines[2], '{"epoch":1,"kind":"step","lr":1,"samples_per_s":1200,"step":2,"time":0.5}')
  T.eq(lines[4], '{"kind":"step","loss":0.5,"step":3}')
  local back = metrics.read(path)
  T.eq(#back, 4); T.eq(back[3].test_loss, 1.5); T.eq(back[4].loss, 0.5)
  os.remove(path)
end)

T.test("charts of a run: the losses by step, the accuracy by epoch; a PNG", function()
  local log = metrics.Logger(nil) -- in memory only
  for _, r in ipairs(ROWS) do log:log(r) end
  T.eq(#log.rows, 3)
  local charts = metrics.charts(log.rows)
  T.eq(#charts, 2)
  local labels = {}
  for i, s in ipairs(charts[1].series) do labels[i] = s.label end
  T.same(labels, { "train loss (step)", "train loss (epoch)", "test loss" })
  T.same(charts[1].series[1].x, { 1, 2 })
  T.same(charts[2].series[1].y, { 61.25 })
  local png = tmp .. ".png"
  metrics.plot(log.rows, png)
  T.eq(T.read_file(png):sub(2, 4), "PNG")
  os.remove(png)
end)

T.test("mistakes are named: file name, column, value", function()
  T.raises(function() metrics.Logger(tmp .. ".txt") end, ".txt: expected a file name ending .csv, .jsonl or .json")
  T.raises(function() metrics.Logger("/nonexistent-dir/m.csv") end, "metrics: Logger: cannot create /nonexistent-dir/m.csv")
  local log = metrics.Logger(nil)
  local err = T.raises(function() log:log { stpe = 1 } end, "metrics: log: unknown column 'stpe' (columns: kind, step,")
  T.truthy(err:find("test_metrics.lua:%d+:"), "the caller's line: " .. err)
  err = T.raises(function() log:log { kind = "a,b" } end, "metrics: log: field kind must be a number, a one-element tensor or a word, got 'a,b'")
  T.truthy(err:find("test_metrics.lua:%d+:"), "the caller's line: " .. err)
  T.raises(function() metrics.read(tmp .. ".none.csv") end, "metrics: read:")
end)

os.remove(tmp)
T.finish()
