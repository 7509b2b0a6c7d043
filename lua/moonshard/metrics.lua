-- metrics.lua: moonshard.metrics, a training run's numbers in a file, a row per step or epoch,
-- as CSV (path ending .csv) or JSON lines (.jsonl, .json), each row flushed as it is logged so a
-- crash keeps every row before it; read back by metrics.read, and drawn by metrics.plot.
--   local log <close> = metrics.Logger("run.csv")
--   log:log{kind = "step", step = 10, epoch = 1, loss = 0.31, lr = 1.0, samples_per_s = 2210, time = 4.2}
--   metrics.plot(metrics.read("run.csv"), "run.png")
local ms = require "moonshard"
local options = require "moonshard.check_opts"

local M = {}

-- The columns of a row, in the file's order: kind is "step" or "epoch" (or another word:
-- gpt_fsdp.lua's "eval" rows hold the held-out loss); time is seconds since the run started;
-- test_loss and accuracy (percent) come with the epoch rows.
M.COLUMNS = { "kind", "step", "epoch", "loss", "test_loss", "accuracy", "lr", "samples_per_s", "time" }

local function fail(level, fmt, ...) error("metrics: " .. fmt:format(...), level + 1) end

local function format_of(path)
  if path:match("%.csv$") then return "csv" end
  if path:match("%.jsonl$") or path:match("%.json$") then return "jsonl" end
  return nil
end

-- CSV writes nan, inf and -inf (read back by SPECIAL below)
local function number_text(v)
  if v ~= v then return "nan" end
  if v == math.huge or v == -math.huge then return v > 0 and "inf" or "-inf" end
  if math.type(v) == "integer" then return ("%d"):format(v) end
  return ("%.10g"):format(v)
end

local Logger = {}
Logger.__index = Logger

-- metrics.Logger(path [, {columns = metrics.COLUMNS}]): a new file at path (replacing one there);
-- with path nil the rows are only kept in memory (logger.rows), as they are in any case.
function M.Logger(path, opts)
  opts = options.check("Logger", opts, { "columns" }, 2)
  local columns = opts.columns or M.COLUMNS
  local self = setmetatable({ path = path, columns = columns, known = {}, rows = {} }, Logger)
  for _, c in ipairs(columns) do self.known[c] = true end
  if path == nil then return self end
  if type(path) ~= "string" then fail(2, "Logger: path must be a string or nil, got %s", type(path)) end
  self.format = format_of(path)
  if not self.format then
    fail(2, "Logger: %s: expected a file name ending .csv, .jsonl or .json", path)
  end
  local f, why = io.open(path, "w")
  if not f then fail(2, "Logger: cannot create %s", why) end
  self.file = f
  if self.format == "csv" then
    f:write(table.concat(columns, ","), "\n")
    f:flush()
  end
  return self
end

-- A row's value as file text: numbers, or words (letters, digits, _ . -) that need no quoting.
local function checked_value(k, v)
  if type(v) == "number" then return v end
  if ms.is_tensor(v) and v:numel() == 1 then return v:item() end
  if type(v) == "string" and v:match("^[%w_.%-]*$") then return v end
  fail(3, "log: field %s must be a number, a one-element tensor or a word, got %s", k,
       type(v) == "string" and ("'%s'"):format(v) or type(v))
end

-- Appends a row (a table column -> value; missing columns stay empty) and flushes it.
function Logger:log(row)
  if type(row) ~= "table" then fail(2, "log: expected a row table {step =, loss =, ...}, got %s", type(row)) end
  local kept = {}
  for k, v in pairs(row) do
    if not self.known[k] then
      fail(2, "log: unknown column '%s' (columns: %s)", tostring(k), table.concat(self.columns, ", "))
    end
    kept[k] = checked_value(k, v)
  end
  self.rows[#self.rows + 1] = kept
  if not self.file then return end
  if self.format == "csv" then
    local parts = {}
    for i, c in ipairs(self.columns) do
      local v = kept[c]
      parts[i] = v == nil and "" or type(v) == "number" and number_text(v) or v
    end
    self.file:write(table.concat(parts, ","), "\n")
  else
    -- JSON has no nan or inf: such a field is left out, which reads back as missing, like null
    local object = {}
    for k, v in pairs(kept) do
      if type(v) ~= "number" or (v == v and v ~= math.huge and v ~= -math.huge) then object[k] = v end
    end
    self.file:write(ms._json_encode(object), "\n")
  end
  self.file:flush()
end

function Logger:close()
  if self.file then self.file:close() end
  self.file = nil
end
Logger.__close = Logger.close

-- the numbers tonumber does not read back
local SPECIAL = { nan = 0 / 0, inf = math.huge, ["-inf"] = -math.huge }

local function read_csv(f, path)
  local header = f:read("l")
  if not header then return {} end
  local columns = {}
  for c in header:gmatch("[^,]+") do columns[#columns + 1] = c end
  local rows, line_no = {}, 1
  for line in f:lines() do
    line_no = line_no + 1
    local row, i = {}, 0
    for field in (line .. ","):gmatch("([^,]*),") do
      i = i + 1
      if field ~= "" and columns[i] then row[columns[i]] = tonumber(field) or SPECIAL[field] or field end
    end
    if i ~= #columns then fail(3, "read: %s:%d: %d fields, the header has %d", path, line_no, i, #columns) end
    rows[#rows + 1] = row
  end
  return rows
end

local function read_jsonl(f, path)
  local rows, line_no = {}, 0
  for line in f:lines() do
    line_no = line_no + 1
    if line:match("%S") then
      local ok, row = pcall(ms._json_decode, line, ("%s:%d"):format(path, line_no))
      if not ok or type(row) ~= "table" then fail(3, "read: %s", ok and (path .. ": not an object per line") or row) end
      rows[#rows + 1] = row
    end
  end
  return rows
end

-- The rows of a metrics file (CSV or JSON lines), each a table column -> number or word.
function M.read(path)
  local format = type(path) == "string" and format_of(path)
  if not format then fail(2, "read: expected a file name ending .csv, .jsonl or .json, got %s", tostring(path)) end
  local f, why = io.open(path, "r")
  if not f then fail(2, "read: %s", why) end
  local rows = format == "csv" and read_csv(f, path) or read_jsonl(f, path)
  f:close()
  return rows
end

-- The x and y of rows of `kind` (any kind: nil) that have both fields.
local function column_pairs(rows, kind, xk, yk)
  local x, y = {}, {}
  for _, r in ipairs(rows) do
    if (kind == nil or r.kind == kind) and type(r[xk]) == "number" and type(r[yk]) == "number" then
      x[#x + 1], y[#y + 1] = r[xk], r[yk]
    end
  end
  return x, y
end

-- The charts of a run's rows: the losses by step (training: per step and per epoch; test: every
-- row with a test_loss), and the test accuracy by epoch when there is one. Series without points are left out.
function M.charts(rows)
  local loss = { title = "loss", xlabel = "step", series = {} }
  local function add(chart, label, kind, xk, yk)
    local x, y = column_pairs(rows, kind, xk, yk)
    if #y > 0 then chart.series[#chart.series + 1] = { label = label, x = x, y = y } end
  end
  add(loss, "train loss (step)", "step", "step", "loss")
  add(loss, "train loss (epoch)", "epoch", "step", "loss")
  add(loss, "test loss", nil, "step", "test_loss")
  local accuracy = { title = "test accuracy (%)", xlabel = "epoch", series = {} }
  add(accuracy, "test accuracy", "epoch", "epoch", "accuracy")
  return #accuracy.series > 0 and { loss, accuracy } or { loss }
end

-- Draws the rows' charts (metrics.charts) into the PNG file png_path.
function M.plot(rows, png_path, opts)
  return ms.plot(png_path, M.charts(rows), opts or { width = 800, height = 360 })
end

return M
