-- test_plot.lua: ms.plot's charts: the raster (a line where the data put it, the axes, the white
-- background, the legend's swatch), the PNG file read back (signature, IHDR, every chunk's CRC,
-- IEND; inflated by python3's zlib and opened by PIL or `file` where they exist, skipped
-- otherwise), and clear errors naming the argument and the caller's line.
local T = require "testing"
local ms = require "moonshard"
local chart = require "moonshard.plot_chart"
local font = require "moonshard.plot_font"

local tmp = os.tmpname()
local png_path = tmp .. ".png"

local BLUE, ORANGE, WHITE = chart.PALETTE[1], chart.PALETTE[2], 0xffffff
local W, H = 400, 300
-- the plot area of a W x H chart (plot_chart.lua's margins: left 72, right 16, top 28, bottom 44)
local X0, X1, Y0, Y1 = 72, W - 16, 28, H - 44

-- a diagonal from (0, 0) to (1, 1), and a flat line at 0.25, over axes fixed to [0, 1]
local DIAGONAL = { title = "t", xlabel = "step", ylabel = "loss", xlim = { 0, 1 }, ylim = { 0, 1 },
  series = { { label = "up", x = { 0, 1 }, y = { 0, 1 } }, { label = "flat", x = { 0, 1 }, y = { 0.25, 0.25 } } } }

local function near_color(cv, x, y, color)
  for dy = -1, 1 do
    for dx = -1, 1 do
      if cv:get(x + dx, y + dy) == color then return true end
    end
  end
  return false
end

T.test("the lines go where the data say, over axes and a white background", function()
  local cv = chart.render(DIAGONAL, W, H)
  T.eq(cv.width, W); T.eq(cv.height, H)
  -- the diagonal passes through the middle of the plot area, and near both corners
  T.truthy(near_color(cv, (X0 + X1) // 2, (Y0 + Y1) // 2, BLUE), "the diagonal's middle")
  T.truthy(near_color(cv, X0 + 2, Y1 - 2, BLUE), "the diagonal's start")
  -- the flat line at y = 0.25: a quarter of the way up, all along
  local y = math.floor(Y1 - 0.25 * (Y1 - Y0) + 0.5)
  for _, x in ipairs({ X0 + 10, (X0 + X1) // 2, X1 - 60 }) do T.truthy(near_color(cv, x, y, ORANGE), "flat at x " .. x) end
  T.eq(cv:get(X0, (Y0 + Y1) // 2), 0x404040, "the y axis")
  T.eq(cv:get((X0 + X1) // 2 + 3, Y1), 0x404040, "the x axis")
  T.eq(cv:get(2, 2), WHITE, "the background")
  T.eq(cv:get(X0 + 40, Y0 + 20), WHITE, "empty plot area")
  -- the legend's first swatch (top right): blue, below it the orange one
  local found = {}
  for yy = Y0, Y0 + 40 do
    for xx = X1 - 120, X1 do
      local c = cv:get(xx, yy)
      if c == BLUE or c == ORANGE then found[c] = found[c] or yy end
    end
  end
  T.truthy(found[BLUE] and found[ORANGE] and found[BLUE] < found[ORANGE], "legend swatches in order")
end)

T.test("data beyond xlim / ylim stop at the axes, not in the margins", function()
  -- from (-1, -1) to (2, 2) over axes fixed to [0, 1]: only the part inside is drawn
  local cv = chart.render({ xlim = { 0, 1 }, ylim = { 0, 1 },
    series = { { label = "long", x = { -1, 2 }, y = { -1, 2 } } } }, W, H)
  T.truthy(near_color(cv, (X0 + X1) // 2, (Y0 + Y1) // 2, BLUE), "the inside part is drawn")
  for yy = 0, H - 1 do
    for xx = 0, W - 1 do
      if cv:get(xx, yy) == BLUE and not (xx >= X0 - 1 and xx <= X1 + 1 and yy >= Y0 - 1 and yy <= Y1 + 1) then
        -- the legend's swatch is blue too, inside the area: anything else outside is a spill
        error(("a blue pixel at (%d, %d), outside the plot area"):format(xx, yy))
      end
    end
  end
end)

T.test("an empty series, a missing value and a single point draw without error", function()
  local cv = chart.render({ series = { { label = "none", y = {} }, { y = { 1, 0 / 0, 3 } }, { y = { 5 } } } }, 200, 150)
  T.eq(cv.height, 150)
  cv = chart.render({ { series = {} }, { series = { { y = ms.tensor({ 1.0, 2.0 }) } } } }, 200, 150)
  T.eq(cv.height, 300, "two charts stacked")
end)

T.test("every glyph of the font is 5 wide and at most 9 tall", function()
  for c = 32, 126 do
    for _, p in ipairs(font.ink(string.char(c))) do
      T.truthy(p[1] >= 0 and p[1] < 5 and p[2] >= 0 and p[2] < 9, "glyph " .. string.char(c))
    end
  end
  T.eq(#font.ink("1"), 10) -- ..#.. .##.. ..#.. x4 .###.
end)

local function u32(s, i) return string.unpack(">I4", s, i) end

T.test("ms.plot writes a PNG: signature, IHDR, every chunk's CRC, IEND", function()
  T.eq(ms.plot(png_path, DIAGONAL, { width = W, height = H }), png_path)
  local f = assert(io.open(png_path, "rb"))
  local png = f:read("a")
  f:close()
  T.eq(png:sub(1, 8), "\137PNG\r\n\26\n")
  local at, types = 9, {}
  while at <= #png do
    local len = u32(png, at)
    local typ = png:sub(at + 4, at + 7)
    types[#types + 1] = typ
    T.eq(u32(png, at + 8 + len), ms._crc32(png:sub(at + 4, at + 7 + len)), "CRC of " .. typ)
    if typ == "IHDR" then
      T.eq(u32(png, at + 8), W); T.eq(u32(png, at + 12), H)
      T.eq(png:sub(at + 16, at + 20), "\8\2\0\0\0", "8-bit RGB, no interlace")
    end
    at = at + 12 + len
  end
  T.eq(at, #png + 1, "the chunks end with the file")
  T.same(types, { "IHDR", "IDAT", "IEND" })
end)

-- python3 inflates the IDAT and prints the pixel at (x, y) as 0xRRGGBB for each point asked.
local function pixels_by_python(points)
  local code = [[
import sys, zlib, struct
d = open(sys.argv[1], 'rb').read(); at = 8; idat = b''
while at < len(d):
    n, t = struct.unpack('>I4s', d[at:at + 8]); idat += d[at + 8:at + 8 + n] if t == b'IDAT' else b''; at += 12 + n
w, h = struct.unpack('>II', d[16:24]); raw = zlib.decompress(idat); row = 3 * w + 1
for p in sys.argv[2:]:
    x, y = map(int, p.split(',')); i = y * row + 1 + 3 * x
    print(raw[y * row], '%06x' % int.from_bytes(raw[i:i + 3], 'big'))
]]
  local args = {}
  for i, p in ipairs(points) do args[i] = p[1] .. "," .. p[2] end
  local pipe = io.popen(("python3 -c %s %s %s 2>&1"):format(T.quote(code), T.quote(png_path), table.concat(args, " ")))
  local out = pipe:read("a")
  pipe:close()
  return out
end

T.test("the file's pixels, inflated by python3's zlib, are the raster's", function()
  if not os.execute("python3 -c 'import zlib' > /dev/null 2>&1") then print("skip: no python3") return end
  local cv = chart.render(DIAGONAL, W, H)
  local points = { { 2, 2 }, { X0, (Y0 + Y1) // 2 }, { (X0 + X1) // 2, (Y0 + Y1) // 2 }, { X1 - 1, Y0 + 1 }, { 100, 150 } }
  local want = {}
  for i, p in ipairs(points) do want[i] = ("0 %06x"):format(cv:get(p[1], p[2])) end
  T.eq(pixels_by_python(points), table.concat(want, "\n") .. "\n")
end)

T.test("an image viewer opens it (PIL or file(1), where present)", function()
  if os.execute("python3 -c 'import PIL' > /dev/null 2>&1") then
    local p = io.popen(("python3 -c 'import sys; from PIL import Image; im = Image.open(sys.argv[1]); im.load(); "
      .. "print(im.size, im.mode)' %s"):format(T.quote(png_path)))
    T.eq(p:read("a"), ("(%d, %d) RGB\n"):format(W, H))
    p:close()
  end
  if os.execute("command -v file > /dev/null 2>&1") then
    local p = io.popen("file -b " .. T.quote(png_path))
    T.eq(p:read("a"), ("PNG image data, %d x %d, 8-bit/color RGB, non-interlaced\n"):format(W, H))
    p:close()
  else
    print("skip: neither PIL nor file(1)")
  end
end)

T.test("mistakes name the argument and the caller's line", function()
  local err = T.raises(function() ms.plot(png_path, { series = { { y = { 1, "x" } } } }) end,
    "plot: chart 1, series 1: y[2] must be a number, got string")
  T.truthy(err:find("test_plot.lua:%d+:"), "the caller's line: " .. err)
  T.raises(function() ms.plot(png_path, { series = { { x = { 1 }, y = { 1, 2 } } } }) end,
    "plot: chart 1, series 1: x has 1 values and y 2 (they pair up)")
  T.raises(function() ms.plot(png_path, {}) end, "plot: argument 2 holds no chart")
  T.raises(function() ms.plot(png_path, { series = {} }, { widht = 3 }) end, "plot: unknown option 'widht' (expected one of: height, width)")
  T.raises(function() ms.plot(png_path, { series = {} }, { width = 10 }) end,
    "plot: option width must be an integer from 64 to 8192, got 10")
  T.raises(function() ms.plot(42, { series = {} }) end, "plot: argument 1 (path) must be a string")
  T.raises(function() ms.plot(png_path, { series = { { y = ms.zeros(2, 2) } } }) end, "got a 2-D tensor")
  T.raises(function() ms.plot(png_path, { ylim = { 1, 0 }, series = {} }) end, "ylim must be {lo, hi}, finite numbers with lo < hi")
  T.raises(function() ms.plot(png_path, { xlim = { -math.huge, 1 }, series = {} }) end, "xlim must be {lo, hi}, finite")
  T.raises(function() ms.plot(png_path, { title = 3, series = {} }) end, "plot: chart 1: title must be a string, got number")
  T.raises(function() ms.plot(png_path, { series = { { y = { 1 }, color = "red" } } }) end,
    "plot: chart 1, series 1: color must be an integer 0xRRGGBB, got red")
  T.raises(function() ms.plot("/nonexistent-dir/x.png", { series = {} }) end, "/nonexistent-dir/x.png")
  T.raises(function() ms._png_encode(2, 2, { 1, 2, 3 }) end, "png_encode: 3 pixels are not a 2 x 2 image")
end)

os.remove(png_path)
os.remove(tmp)
T.finish()
