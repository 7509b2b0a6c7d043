-- plot_canvas.lua: the raster ms.plot draws on: a width x height grid of 0xRRGGBB pixels (x to
-- the right, y down, both from 0), filled rectangles, lines, text in plot_font's glyphs, and the
-- PNG of it (engine/src/io/png.c). Everything clips at the edges.
local ms = require "moonshard"
local font = require "moonshard.plot_font"

local Canvas = {}
Canvas.__index = Canvas

-- A canvas of the given size, every pixel `background` (white by default).
function Canvas.new(width, height, background)
  local px, bg = {}, background or 0xffffff
  for i = 1, width * height do px[i] = bg end
  return setmetatable({ width = width, height = height, px = px }, Canvas)
end

function Canvas:set(x, y, color)
  if x >= 0 and y >= 0 and x < self.width and y < self.height then self.px[y * self.width + x + 1] = color end
end

function Canvas:get(x, y) return self.px[y * self.width + x + 1] end

-- The rectangle with corners (x0, y0) and (x1, y1), both included.
function Canvas:fill_rect(x0, y0, x1, y1, color)
  x0, x1 = math.max(0, math.min(x0, x1)), math.min(self.width - 1, math.max(x0, x1))
  y0, y1 = math.max(0, math.min(y0, y1)), math.min(self.height - 1, math.max(y0, y1))
  local px, w = self.px, self.width
  for y = y0, y1 do
    for i = y * w + x0 + 1, y * w + x1 + 1 do px[i] = color end
  end
end

-- A line from (x0, y0) to (x1, y1) (Bresenham's, ends included), `thickness` pixels wide.
function Canvas:line(x0, y0, x1, y1, color, thickness)
  x0, y0, x1, y1 = math.floor(x0 + 0.5), math.floor(y0 + 0.5), math.floor(x1 + 0.5), math.floor(y1 + 0.5)
  local lo, hi = -((thickness or 1) - 1) // 2, (thickness or 1) // 2
  local dx, dy = math.abs(x1 - x0), -math.abs(y1 - y0)
  local sx, sy = x0 < x1 and 1 or -1, y0 < y1 and 1 or -1
  local err = dx + dy
  while true do
    for oy = lo, hi do
      for ox = lo, hi do self:set(x0 + ox, y0 + oy, color) end
    end
    if x0 == x1 and y0 == y1 then return end
    local e2 = 2 * err
    if e2 >= dy then err, x0 = err + dy, x0 + sx end
    if e2 <= dx then err, y0 = err + dx, y0 + sy end
  end
end

-- The width in pixels of text drawn at `scale`.
function Canvas.text_width(text, scale)
  return #text == 0 and 0 or (#text * font.advance - 1) * (scale or 1)
end

Canvas.text_height = font.height - 2 -- the height above the baseline

-- text with its top-left corner at (x, y); each font pixel a scale x scale square.
function Canvas:text(x, y, text, color, scale)
  scale = scale or 1
  for i = 1, #text do
    for _, p in ipairs(font.ink(text:sub(i, i))) do
      local gx, gy = x + ((i - 1) * font.advance + p[1]) * scale, y + p[2] * scale
      if scale == 1 then self:set(gx, gy, color) else self:fill_rect(gx, gy, gx + scale - 1, gy + scale - 1, color) end
    end
  end
end

-- text drawn upwards (turned 90 degrees anticlockwise), its first letter's bottom-left at (x, y).
function Canvas:text_up(x, y, text, color)
  for i = 1, #text do
    for _, p in ipairs(font.ink(text:sub(i, i))) do
      self:set(x + p[2], y - (i - 1) * font.advance - p[1], color)
    end
  end
end

-- The PNG file of the canvas, as a string.
function Canvas:png() return ms._png_encode(self.width, self.height, self.px) end

return Canvas
