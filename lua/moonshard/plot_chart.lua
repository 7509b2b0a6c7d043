-- plot_chart.lua: the drawing of ms.plot's line charts on a canvas (plot_canvas.lua): one chart
-- or several stacked, each with its series (a line each, in a colour of the palette, points
-- marked when there are few), axes with ticks at round numbers, a light grid, a legend and a
-- title. A mistake in a chart raises a Mistake (plot.lua gives it the caller's line).
local ms = require "moonshard"
local Canvas = require "moonshard.plot_canvas"

local M = {}

local WHITE, BLACK, GRID, AXIS = 0xffffff, 0x000000, 0xe6e6e6, 0x404040
local PALETTE = { 0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd, 0x8c564b, 0xe377c2, 0x7f7f7f }
local LEFT, RIGHT, TOP, BOTTOM = 72, 16, 28, 44 -- the margins around a chart's plot area
local MARKED = 60 -- series of at most this many points get a marker at each point

-- A mistake in the arguments: raised without a position and given the caller's line by ms.plot
-- itself, however deep in the drawing it was found.
local Mistake = {}
M.Mistake = Mistake
local function fail(fmt, ...) error(setmetatable({ "plot: " .. fmt:format(...) }, Mistake), 0) end
M.fail = fail

local function finite(v) return v == v and v ~= math.huge and v ~= -math.huge end
local function finite_number(v) return type(v) == "number" and finite(v) end

-- A list of numbers from a table or a 1-D tensor, or an error naming `what`.
local function numbers(v, what)
  if ms.is_tensor(v) then
    if v:dim() ~= 1 then fail("%s must be a 1-D tensor or a list of numbers, got a %d-D tensor", what, v:dim()) end
    return v:tolist()
  end
  if type(v) ~= "table" then fail("%s must be a list of numbers or a 1-D tensor, got %s", what, type(v)) end
  for i, x in ipairs(v) do
    if type(x) ~= "number" then fail("%s[%d] must be a number, got %s", what, i, type(x)) end
  end
  return v
end

-- The chart's series as {label, x, y} with x defaulting to 1..#y, checked.
local function series_of(chart, c)
  for _, k in ipairs({ "title", "xlabel", "ylabel" }) do
    if chart[k] ~= nil and type(chart[k]) ~= "string" then
      fail("chart %d: %s must be a string, got %s", c, k, type(chart[k]))
    end
  end
  if type(chart.series) ~= "table" then fail("chart %d: series must be a list of {label =, x =, y =}, got %s", c,
                                            type(chart.series)) end
  local out = {}
  for i, s in ipairs(chart.series) do
    local what = ("chart %d, series %d"):format(c, i)
    if type(s) ~= "table" then fail("%s must be a table {label =, x =, y =}, got %s", what, type(s)) end
    local y = numbers(s.y, what .. ": y")
    local x = s.x and numbers(s.x, what .. ": x")
    if not x then
      x = {}
      for j = 1, #y do x[j] = j end
    elseif #x ~= #y then
      fail("%s: x has %d values and y %d (they pair up)", what, #x, #y)
    end
    local color = s.color or PALETTE[(i - 1) % #PALETTE + 1]
    if math.type(color) ~= "integer" or color < 0 or color > 0xffffff then
      fail("%s: color must be an integer 0xRRGGBB, got %s", what, tostring(color))
    end
    out[i] = { label = tostring(s.label or ("series " .. i)), x = x, y = y, color = color }
  end
  return out
end

-- The smallest and largest finite value of field k over every series (0, 1 when there are none).
local function range(series, k)
  local lo, hi = math.huge, -math.huge
  for _, s in ipairs(series) do
    for _, v in ipairs(s[k]) do
      if finite(v) then lo, hi = math.min(lo, v), math.max(hi, v) end
    end
  end
  if lo > hi then return 0, 1 end
  if lo == hi then return lo - (lo == 0 and 1 or math.abs(lo) * 0.1), hi + (hi == 0 and 1 or math.abs(hi) * 0.1) end
  return lo, hi
end

-- Whether every value of field k is a whole number.
local function all_integral(series, k)
  for _, s in ipairs(series) do
    for _, v in ipairs(s[k]) do
      if finite(v) and v ~= math.floor(v) then return false end
    end
  end
  return true
end

-- The axis k's range: the chart's xlim / ylim ({lo, hi}) when given, else the data's.
local function limits(chart, series, k)
  local lim = chart[k .. "lim"]
  if lim == nil then return range(series, k) end
  if type(lim) ~= "table" or not finite_number(lim[1]) or not finite_number(lim[2]) or not (lim[1] < lim[2]) then
    fail("%slim must be {lo, hi}, finite numbers with lo < hi, got %s", k, type(lim) == "table" and
         ("{%s, %s}"):format(tostring(lim[1]), tostring(lim[2])) or tostring(lim))
  end
  return lim[1], lim[2]
end

-- Ticks at round numbers (1, 2 or 5 times a power of ten) covering [lo, hi], about n of them,
-- with the axis widened to the outer ticks; returns the ticks and the decimals they need.
-- `integral`: the values are whole numbers, so the step is too.
local function nice_ticks(lo, hi, n, integral)
  local raw = (hi - lo) / n
  if integral then raw = math.max(raw, 1) end -- steps, epochs: no tick between two whole numbers
  local p = 10 ^ math.floor(math.log(raw, 10))
  local step = p
  for _, m in ipairs({ 1, 2, 5, 10 }) do
    if m * p >= raw then step = m * p break end
  end
  local first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
  local ticks = {}
  for k = first, last do ticks[#ticks + 1] = k * step end
  return ticks, math.max(0, -math.floor(math.log(step, 10) + 1e-9))
end

local function tick_label(v, decimals)
  if v ~= 0 and (math.abs(v) >= 1e6 or math.abs(v) < 1e-4) then return ("%.3g"):format(v) end
  local s = ("%." .. math.min(decimals, 6) .. "f"):format(v)
  return s == "-0" and "0" or s
end

-- The grid, the tick labels and the two axes of the plot area `a`; returns the functions taking
-- data coordinates to pixels.
local function draw_axes(cv, a, xs, xd, ys, yd)
  local xmin, xmax, ymin, ymax = xs[1], xs[#xs], ys[1], ys[#ys]
  local function px(v) return a.x0 + (v - xmin) / (xmax - xmin) * (a.x1 - a.x0) end
  local function py(v) return a.y1 - (v - ymin) / (ymax - ymin) * (a.y1 - a.y0) end
  for _, t in ipairs(xs) do
    local x, label = math.floor(px(t) + 0.5), tick_label(t, xd)
    cv:line(x, a.y0, x, a.y1, GRID)
    cv:text(x - Canvas.text_width(label) // 2, a.y1 + 6, label, BLACK)
  end
  for _, t in ipairs(ys) do
    local y, label = math.floor(py(t) + 0.5), tick_label(t, yd)
    cv:line(a.x0, y, a.x1, y, GRID)
    cv:text(a.x0 - 6 - Canvas.text_width(label), y - Canvas.text_height // 2, label, BLACK)
  end
  cv:line(a.x0, a.y0, a.x0, a.y1, AXIS)
  cv:line(a.x0, a.y1, a.x1, a.y1, AXIS)
  return px, py
end

-- The part of the segment (x0, y0)-(x1, y1) inside the area (Liang-Barsky), or nil: data outside
-- an xlim / ylim stops at the axes instead of running over the margins.
local function clip(x0, y0, x1, y1, a)
  local t0, t1, dx, dy = 0, 1, x1 - x0, y1 - y0
  for _, pq in ipairs({ { -dx, x0 - a.x0 }, { dx, a.x1 - x0 }, { -dy, y0 - a.y0 }, { dy, a.y1 - y0 } }) do
    local p, q = pq[1], pq[2]
    if p == 0 then
      if q < 0 then return nil end
    else
      local t = q / p
      if p < 0 then t0 = math.max(t0, t) else t1 = math.min(t1, t) end
      if t0 > t1 then return nil end
    end
  end
  return x0 + t0 * dx, y0 + t0 * dy, x0 + t1 * dx, y0 + t1 * dy
end

local function inside(x, y, a) return x >= a.x0 and x <= a.x1 and y >= a.y0 and y <= a.y1 end

-- Each series as a line 2 pixels wide (a gap where a value is missing), its points marked when
-- there are few; both kept inside the plot area.
local function draw_series(cv, series, px, py, area)
  for _, s in ipairs(series) do
    local prev
    for j = 1, #s.y do
      local x, y = s.x[j], s.y[j]
      if finite(x) and finite(y) then
        local cx, cy = px(x), py(y)
        if prev then
          local ax, ay, bx, by = clip(prev[1], prev[2], cx, cy, area)
          if ax then cv:line(ax, ay, bx, by, s.color, 2) end
        end
        if #s.y <= MARKED and inside(cx, cy, area) then
          local mx, my = math.floor(cx), math.floor(cy)
          cv:fill_rect(mx - 2, my - 2, mx + 2, my + 2, s.color)
        end
        prev = { cx, cy }
      else
        prev = nil
      end
    end
  end
end

-- The title above the chart, the axis labels, and the legend (a swatch and the label per series)
-- in the top-right corner of the plot area.
local function draw_labels(cv, chart, series, a, ox, oy, w)
  if chart.title then cv:text(ox + (w - Canvas.text_width(chart.title, 2)) // 2, oy + 6, chart.title, BLACK, 2) end
  if chart.xlabel then
    cv:text(a.x0 + (a.x1 - a.x0 - Canvas.text_width(chart.xlabel)) // 2, a.y1 + 24, chart.xlabel, BLACK)
  end
  if chart.ylabel then
    cv:text_up(ox + 4, a.y0 + (a.y1 - a.y0 + Canvas.text_width(chart.ylabel)) // 2, chart.ylabel, BLACK)
  end
  if #series == 0 then return end
  local lw = 0
  for _, s in ipairs(series) do lw = math.max(lw, Canvas.text_width(s.label)) end
  local lx, ly = a.x1 - lw - 36, a.y0 + 6
  cv:fill_rect(lx, ly, a.x1 - 6, ly + 8 + 14 * #series, WHITE)
  for i, s in ipairs(series) do
    local y = ly + 6 + 14 * (i - 1)
    cv:fill_rect(lx + 6, y + 2, lx + 22, y + 4, s.color)
    cv:text(lx + 28, y, s.label, BLACK)
  end
end

-- One chart in the rectangle of the canvas at (ox, oy), w x h pixels.
local function draw_chart(cv, chart, series, ox, oy, w, h)
  local area = { x0 = ox + LEFT, y0 = oy + TOP, x1 = ox + w - RIGHT, y1 = oy + h - BOTTOM }
  local xlo, xhi = limits(chart, series, "x")
  local ylo, yhi = limits(chart, series, "y")
  local xs, xd = nice_ticks(xlo, xhi, 8, all_integral(series, "x"))
  local ys, yd = nice_ticks(ylo, yhi, 5)
  local px, py = draw_axes(cv, area, xs, xd, ys, yd)
  draw_series(cv, series, px, py, area)
  draw_labels(cv, chart, series, area, ox, oy, w)
end

-- The charts (one {series = ...} or a list of them) drawn on a new canvas of width x (height
-- times the number of charts) pixels.
function M.render(charts, width, height)
  if charts.series then charts = { charts } end
  if #charts == 0 then fail("argument 2 holds no chart (expected {series = ...} or a list of them)") end
  if height * #charts > 8192 then fail("%d charts of height %d make an image taller than 8192 pixels", #charts, height) end
  local cv = Canvas.new(width, height * #charts)
  for c, chart in ipairs(charts) do
    if type(chart) ~= "table" then fail("chart %d must be a table {series = ...}, got %s", c, type(chart)) end
    draw_chart(cv, chart, series_of(chart, c), 0, (c - 1) * height, width, height)
  end
  return cv
end

M.PALETTE = PALETTE
M.BACKGROUND = WHITE

return M
