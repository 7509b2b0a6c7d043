-- plot.lua: ms.plot, line charts written as PNG files (loss and accuracy curves), drawn by
-- plot_chart.lua on plot_canvas.lua's raster, encoded by engine/src/io/png.c.
--   ms.plot("loss.png", {title = "loss", xlabel = "step", series = {{label = "train", y = losses}}})
--   ms.plot("curves.png", {chart1, chart2}, {width = 800, height = 300})
local ms = require "moonshard"
local chart = require "moonshard.plot_chart"
local options = require "moonshard.check_opts"

local fail = chart.fail

local function check_size(v, name, default)
  if v == nil then return default end
  if math.type(v) ~= "integer" or v < 64 or v > 8192 then
    fail("option %s must be an integer from 64 to 8192, got %s", name, tostring(v))
  end
  return v
end

local function plot(path, charts, opts)
  if type(path) ~= "string" then fail("argument 1 (path) must be a string naming a .png file, got %s", type(path)) end
  if type(charts) ~= "table" then fail("argument 2 must be a chart {series = ...} or a list of them, got %s",
                                       type(charts)) end
  opts = opts or {}
  local why = options.problem(opts, { "width", "height" })
  if why then fail("%s", why) end
  local cv = chart.render(charts, check_size(opts.width, "width", 800), check_size(opts.height, "height", 400))
  ms._write_atomic(path, cv:png(), "plot")
  return path
end

-- ms.plot(path, chart_or_charts, {width = 800, height = 400 a chart}) -> path
return function(...)
  local ok, result = pcall(plot, ...)
  if ok then return result end
  -- the user's line: level 2, or 3 when ms.plot (a C function that requires this file) called us
  if getmetatable(result) == chart.Mistake then error(result[1], debug.getinfo(2, "S").what == "C" and 3 or 2) end
  error(result, 0)
end
