-- test_views.lua: shape ops and views: storage sharing (writes through a view reach the base
-- and back), geometry (stride, storage_offset, is_contiguous), reshape versus view, chunk and
-- split, cat and stack, flatten.
local T = require "testing"
local ms = require "moonshard"

local function base23() return ms.arange(1, 7):view(2, 3) end -- {{1,2,3},{4,5,6}}

---------------------------------------------------------------------------------------------
-- view / reshape

T.test("view: shares storage both ways", function()
  local x = ms.arange(6)
  local v = x:view(2, 3)
  T.same(v:size(), { 2, 3 })
  T.same(v:tolist(), { { 0, 1, 2 }, { 3, 4, 5 } })
  v[1][2] = 10
  T.same(x:tolist(), { 0, 10, 2, 3, 4, 5 })
  x[6] = 50
  T.same(v:tolist(), { { 0, 10, 2 }, { 3, 4, 50 } })
  local w = x:view { 3, 2 }
  T.same(w:size(), { 3, 2 })
  T.same(ms.view(x, 6):size(), { 6 })
end)

T.test("view: -1 is inferred", function()
  local x = ms.zeros(2, 3, 4)
  T.same(x:view(-1):size(), { 24 })
  T.same(x:view(4, -1):size(), { 4, 6 })
  T.same(x:view(-1, 2, 3):size(), { 4, 2, 3 })
  T.same(x:reshape(2, -1):size(), { 2, 12 })
  T.same(ms.zeros(0, 3):view(-1, 3):size(), { 0, 3 })
  T.raises(function() x:view(-1, -1) end, "view", "only one dimension can be inferred")
  T.raises(function() x:view(5, -1) end, "view", "(5, -1)", "24")
  T.raises(function() ms.zeros(0, 3):view(0, -1) end, "view", "invalid")
end)

T.test("view: 0-dim and to 0-dim", function()
  local s = ms.tensor(5)
  T.same(s:view(1):tolist(), { 5 })
  T.same(s:view(1, 1):tolist(), { { 5 } })
  T.eq(ms.tensor { 7 }:view({}):dim(), 0)
  T.eq(ms.tensor { 7 }:view({}):item(), 7)
  T.eq(s:reshape(-1):numel(), 1)
end)

T.test("view: of a non-contiguous tensor errors, reshape copies", function()
  local x = base23()
  local tt = x:t()
  T.eq(tt:is_contiguous(), false)
  T.raises(function() tt:view(6) end, "view", "use reshape", "(6,)", "(3, 2)")
  local r = tt:reshape(6)
  T.same(r:tolist(), { 1, 4, 2, 5, 3, 6 })
  r[1] = 100
  T.same(x:tolist(), { { 1, 2, 3 }, { 4, 5, 6 } }) -- reshape copied
  -- a reshape that a view can express shares
  local r2 = x:reshape(3, 2)
  r2[1][1] = -1
  T.eq(x:tolist()[1][1], -1)
end)

T.test("view: of a non-contiguous tensor that strides allow", function()
  local x = ms.arange(24):view(2, 3, 4)
  local n = x:narrow(3, 1, 2) -- (2, 3, 2), strides (12, 4, 1)
  T.eq(n:is_contiguous(), false)
  local p = ms.arange(24):view(4, 6):narrow(1, 2, 2) -- rows 2..3: contiguous block
  T.eq(p:is_contiguous(), true)
  T.same(p:view(3, 4):tolist(), { { 6, 7, 8, 9 }, { 10, 11, 12, 13 }, { 14, 15, 16, 17 } })
  -- splitting a dim of a transposed tensor
  local t = ms.arange(12):view(3, 4):t() -- (4, 3) strides (1, 4)
  local v = t:view(2, 2, 3)
  T.same(v:stride(), { 2, 1, 4 })
  T.same(v:tolist(), t:reshape(2, 2, 3):tolist())
  -- merging two dims that are not adjacent in memory is not a view
  T.raises(function() n:view(12) end, "view", "use reshape")
  T.same(n:reshape(12):tolist(), { 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21 })
  -- size-1 dims anywhere
  local e = ms.arange(6):view(2, 3):t():unsqueeze(2) -- (3, 1, 2)
  T.same(e:view(3, 2):tolist(), { { 0, 3 }, { 1, 4 }, { 2, 5 } })
  T.same(e:view(3, 1, 1, 2):size(), { 3, 1, 1, 2 })
end)

T.test("view_as / reshape_as / expand_as", function()
  local x = ms.arange(6)
  local y = ms.zeros(3, 2)
  T.same(x:view_as(y):size(), { 3, 2 })
  T.same(x:reshape_as(y):size(), { 3, 2 })
  T.same(ms.tensor { { 1 }, { 2 } }:expand_as(ms.zeros(2, 3)):tolist(), { { 1, 1, 1 }, { 2, 2, 2 } })
  T.raises(function() x:view_as(ms.zeros(4)) end, "view", "(4,)", "6")
  T.raises(function() x:view_as({ 1 }) end, "view_as", "#2", "tensor")
end)

---------------------------------------------------------------------------------------------
-- narrow / select / indexing sharing

T.test("narrow: 1-based, negative start, empty at the end", function()
  local x = ms.arange(10)
  T.same(x:narrow(1, 3, 4):tolist(), { 2, 3, 4, 5 })
  T.same(x:narrow(1, -3, 2):tolist(), { 7, 8 })
  T.same(x:narrow(1, -10, 1):tolist(), { 0 })
  T.same(x:narrow(1, 11, 0):tolist(), {})
  T.same(x:narrow(1, 1, 0):tolist(), {})
  T.same(x:narrow(1, 1, 10):tolist(), x:tolist())
  local m = base23()
  T.same(m:narrow(2, 2, 2):tolist(), { { 2, 3 }, { 5, 6 } })
  T.same(m:narrow(-1, 3, 1):tolist(), { { 3 }, { 6 } })
  T.same(ms.narrow(m, 1, 2, 1):tolist(), { { 4, 5, 6 } })
  local n = m:narrow(2, 2, 2)
  T.eq(n:storage_offset(), 1)
  T.same(n:stride(), { 3, 1 })
  n:fill_(0)
  T.same(m:tolist(), { { 1, 0, 0 }, { 4, 0, 0 } })
end)

T.test("narrow: errors", function()
  local x = ms.arange(10)
  T.raises(function() x:narrow(1, 8, 4) end, "narrow", "length", "exceeds", "10")
  T.raises(function() x:narrow(1, 12, 0) end, "narrow", "start", "12")
  T.raises(function() x:narrow(1, 0, 1) end, "narrow", "start", "got 0")
  T.raises(function() x:narrow(1, -11, 1) end, "narrow", "start", "-11")
  T.raises(function() x:narrow(1, 1, -1) end, "narrow", "length", "-1")
  T.raises(function() x:narrow(2, 1, 1) end, "narrow", "dim", "got 2")
  T.raises(function() x:narrow(1, "a", 1) end, "narrow", "start", "string 'a'")
  T.raises(function() x:narrow(1, 1) end, "narrow", "length", "no value")
  T.raises(function() ms.tensor(1):narrow(1, 1, 1) end, "narrow", "0-dim")
end)

T.test("select: shares storage, negative index", function()
  local x = base23()
  T.same(x:select(1, 2):tolist(), { 4, 5, 6 })
  T.same(x:select(2, -1):tolist(), { 3, 6 })
  T.same(x:select(-1, 1):tolist(), { 1, 4 })
  local c = x:select(2, 2)
  T.same(c:stride(), { 3 })
  T.eq(c:storage_offset(), 1)
  c:fill_(9)
  T.same(x:tolist(), { { 1, 9, 3 }, { 4, 9, 6 } })
  local s = ms.arange(3):select(1, 3)
  T.eq(s:dim(), 0)
  T.eq(s:item(), 2)
  T.raises(function() x:select(1, 3) end, "select", "index", "1..2", "got 3")
  T.raises(function() x:select(3, 1) end, "select", "dim", "got 3")
  T.raises(function() x:select(2, -4) end, "select", "index", "-4")
  T.raises(function() ms.tensor(1):select(1, 1) end, "select", "0-dim")
end)

---------------------------------------------------------------------------------------------
-- transpose / t / permute

T.test("transpose and t share storage", function()
  local x = base23()
  local tt = x:t()
  T.same(tt:size(), { 3, 2 })
  T.same(tt:stride(), { 1, 3 })
  T.same(tt:tolist(), { { 1, 4 }, { 2, 5 }, { 3, 6 } })
  tt[1][2] = 40
  T.eq(x:tolist()[2][1], 40)
  x[1][3] = 30
  T.eq(tt:tolist()[3][1], 30)
  local y = ms.zeros(2, 3, 4)
  local tr = y:transpose(1, 3)
  T.same(tr:size(), { 4, 3, 2 })
  T.same(tr:stride(), { 1, 4, 12 })
  T.same(y:transpose(-1, -2):size(), { 2, 4, 3 })
  T.same(ms.transpose(y, 2, 2):size(), { 2, 3, 4 })
  T.same(ms.arange(3):t():tolist(), { 0, 1, 2 })
  T.eq(ms.tensor(3):t():item(), 3)
  T.raises(function() y:t() end, "t", "<= 2 dimensions", "3")
  T.raises(function() y:transpose(1, 4) end, "transpose", "dim1", "got 4")
  T.raises(function() y:transpose(0, 1) end, "transpose", "dim0", "got 0")
end)

T.test("permute shares storage", function()
  local x = ms.arange(24):view(2, 3, 4)
  local p = x:permute(3, 1, 2)
  T.same(p:size(), { 4, 2, 3 })
  T.same(p:stride(), { 1, 12, 4 })
  T.same(x:permute { 2, 3, 1 }:size(), { 3, 4, 2 })
  T.same(x:permute(-1, -2, -3):size(), { 4, 3, 2 })
  T.same(p:tolist()[2][2][3], 21) -- x[2][3][2] = 12 + 8 + 1
  p[1][1][1] = -5
  T.eq(x:tolist()[1][1][1], -5)
  T.same(p:contiguous():view(-1):tolist()[1], -5)
  T.raises(function() x:permute(1, 1, 2) end, "permute", "more than once")
  T.raises(function() x:permute(1, 2) end, "permute", "expected 3", "got 2")
  T.raises(function() x:permute(1, 2, 4) end, "permute", "dims", "got 4")
end)

---------------------------------------------------------------------------------------------
-- expand / squeeze / unsqueeze / flatten

T.test("expand shares storage with stride 0", function()
  local x = ms.tensor { { 1 }, { 2 } }
  local e = x:expand(2, 3)
  T.same(e:size(), { 2, 3 })
  T.same(e:stride(), { 1, 0 })
  T.same(e:tolist(), { { 1, 1, 1 }, { 2, 2, 2 } })
  x[1][1] = 7
  T.same(e:tolist()[1], { 7, 7, 7 })
  T.same(x:expand(4, -1, 2):size(), { 4, 2, 2 })
  T.same(x:expand { 2, 2 }:tolist(), { { 7, 7 }, { 2, 2 } })
  T.same(ms.tensor(5):expand(3):tolist(), { 5, 5, 5 })
  T.eq(e:is_contiguous(), false)
  T.raises(function() x:expand(3, 3) end, "expand", "3", "(2, 1)")
  T.raises(function() x:expand(3) end, "expand", "number of sizes")
  T.raises(function() x:expand(-1, -1, 2) end, "expand")
end)

T.test("squeeze and unsqueeze share storage", function()
  local x = ms.zeros(1, 3, 1)
  T.same(x:squeeze():size(), { 3 })
  T.same(x:squeeze(1):size(), { 3, 1 })
  T.same(x:squeeze(-1):size(), { 1, 3 })
  T.same(x:squeeze(2):size(), { 1, 3, 1 }) -- not of size 1: unchanged
  local s = x:squeeze()
  s[2] = 4
  T.eq(x:tolist()[1][2][1], 4)
  T.eq(ms.zeros(1, 1):squeeze():dim(), 0)
  local v = ms.arange(3)
  T.same(v:unsqueeze(1):size(), { 1, 3 })
  T.same(v:unsqueeze(2):size(), { 3, 1 })
  T.same(v:unsqueeze(-1):size(), { 3, 1 })
  T.same(v:unsqueeze(-2):size(), { 1, 3 })
  local u = v:unsqueeze(1)
  u[1][3] = 9
  T.eq(v:tolist()[3], 9)
  T.same(ms.tensor(2):unsqueeze(1):tolist(), { 2 })
  T.same(ms.unsqueeze(v, 1):size(), { 1, 3 })
  T.raises(function() v:unsqueeze(3) end, "unsqueeze", "dim", "got 3")
  T.raises(function() v:unsqueeze(-3) end, "unsqueeze", "dim", "-3")
  T.raises(function() x:squeeze(4) end, "squeeze", "dim", "got 4")
end)

T.test("flatten", function()
  local x = ms.arange(24):view(2, 3, 4)
  T.same(x:flatten():size(), { 24 })
  T.same(ms.flatten(x, 2):size(), { 2, 12 })
  T.same(x:flatten(2, 3):size(), { 2, 12 })
  T.same(x:flatten(1, 2):size(), { 6, 4 })
  T.same(x:flatten(-2):size(), { 2, 12 })
  T.same(x:flatten(2, 2):size(), { 2, 3, 4 })
  local f = x:flatten()
  f[1] = 99
  T.eq(x:tolist()[1][1][1], 99) -- a view of a contiguous tensor
  T.same(ms.tensor(3):flatten():tolist(), { 3 })
  local tt = x:transpose(1, 3)
  T.same(tt:flatten():tolist(), tt:contiguous():view(-1):tolist())
  T.raises(function() x:flatten(3, 2) end, "flatten", "start_dim (3)", "end_dim (2)")
  T.raises(function() x:flatten(4) end, "flatten", "start_dim", "got 4")
end)

---------------------------------------------------------------------------------------------
-- contiguous / clone / geometry

T.test("contiguous of a contiguous tensor is the same storage; clone never shares", function()
  local x = ms.arange(4)
  local c = x:contiguous()
  c[1] = 100
  T.eq(x:tolist()[1], 100)
  local k = x:clone()
  k[2] = 200
  T.eq(x:tolist()[2], 1)
  local tt = ms.arange(6):view(2, 3):t()
  local tc = tt:contiguous()
  T.eq(tc:is_contiguous(), true)
  T.same(tc:stride(), { 2, 1 })
  T.same(tc:tolist(), tt:tolist())
  tc[1][1] = 55
  T.eq(tt:tolist()[1][1], 0)
  local tk = tt:clone()
  T.same(tk:tolist(), tt:tolist())
  T.eq(ms.clone(x).dtype, "int64")
  T.eq(ms.tensor(2.5):clone():item(), 2.5)
end)

T.test("geometry: stride, storage_offset, is_contiguous", function()
  local x = ms.zeros(2, 3, 4)
  T.same(x:stride(), { 12, 4, 1 })
  T.eq(x:stride(1), 12)
  T.eq(x:stride(-1), 1)
  T.eq(x:storage_offset(), 0)
  T.eq(x:is_contiguous(), true)
  T.eq(x:select(1, 2):storage_offset(), 12)
  T.eq(x[2][3]:storage_offset(), 20)
  T.eq(x:transpose(1, 2):is_contiguous(), false)
  T.eq(ms.zeros(3, 1):t():is_contiguous(), true)
  T.same(ms.tensor(1):stride(), {})
  T.raises(function() x:stride(4) end, "stride", "dim")
end)

---------------------------------------------------------------------------------------------
-- chunk / split

T.test("chunk: equal and uneven", function()
  local x = ms.arange(6)
  local c = x:chunk(3)
  T.eq(#c, 3)
  T.same(c[1]:tolist(), { 0, 1 })
  T.same(c[3]:tolist(), { 4, 5 })
  local u = ms.arange(5):chunk(2)
  T.eq(#u, 2)
  T.same(u[1]:tolist(), { 0, 1, 2 })
  T.same(u[2]:tolist(), { 3, 4 })
  local m = base23():chunk(3, 2)
  T.eq(#m, 3)
  T.same(m[2]:tolist(), { { 2 }, { 5 } })
  m[2]:fill_(0)
  T.eq(#ms.arange(2):chunk(5), 2) -- fewer pieces than asked, as torch
  T.eq(#ms.chunk(x, 4), 3) -- sizes 2, 2, 2
  local e = ms.zeros(0, 2):chunk(3)
  T.eq(#e, 3)
  T.same(e[3]:size(), { 0, 2 })
  T.raises(function() x:chunk(0) end, "chunk", "chunks", "positive")
  T.raises(function() x:chunk(2, 2) end, "chunk", "dim", "got 2")
end)

T.test("split: by size and by a table of sizes", function()
  local x = ms.arange(7)
  local s = x:split(3)
  T.eq(#s, 3)
  T.same(s[1]:tolist(), { 0, 1, 2 })
  T.same(s[3]:tolist(), { 6 })
  local t = x:split { 2, 4, 1 }
  T.eq(#t, 3)
  T.same(t[2]:tolist(), { 2, 3, 4, 5 })
  T.same(t[3]:tolist(), { 6 })
  t[1]:fill_(-1)
  T.same(x:narrow(1, 1, 2):tolist(), { -1, -1 })
  local m = base23():split({ 1, 2 }, 2)
  T.same(m[1]:tolist(), { { 1 }, { 4 } })
  T.same(m[2]:tolist(), { { 2, 3 }, { 5, 6 } })
  T.same(base23():split(1, -2)[2]:tolist(), { { 4, 5, 6 } })
  local z = x:split { 0, 7 }
  T.same(z[1]:size(), { 0 })
  T.raises(function() x:split { 2, 2 } end, "split", "sum to 4", "7")
  T.raises(function() x:split { 2, -1, 6 } end, "split", "split_sizes", "-1", "position 2")
  T.raises(function() x:split { 2, "a", 5 } end, "split", "split_sizes", "string 'a'", "position 2")
  T.raises(function() x:split {} end, "split", "split_sizes", "1 to", "got 0")
  T.raises(function() x:split(0) end, "split", "positive")
  T.raises(function() x:split(2, 3) end, "split", "dim")
end)

---------------------------------------------------------------------------------------------
-- cat / stack

T.test("cat: dims 1 and -1", function()
  local a = ms.tensor { { 1, 2 }, { 3, 4 } }
  local b = ms.tensor { { 5, 6 } }
  T.same(ms.cat { a, b }:tolist(), { { 1, 2 }, { 3, 4 }, { 5, 6 } })
  T.same(ms.cat({ a, b:t() }, -1):tolist(), { { 1, 2, 5 }, { 3, 4, 6 } })
  T.same(ms.cat({ a, a }, 2):size(), { 2, 4 })
  T.same(ms.cat({ a }):tolist(), a:tolist())
  local c = ms.cat { a, b }
  c[1][1] = 100
  T.eq(a:tolist()[1][1], 1) -- a new tensor
  T.same(ms.cat({ ms.zeros(0, 2), b }):tolist(), { { 5, 6 } })
end)

T.test("cat: dtype promotion", function()
  local c = ms.cat { ms.tensor { 1, 2 }, ms.tensor { 0.5 } }
  T.eq(c.dtype, "float32")
  T.same(c:tolist(), { 1, 2, 0.5 })
  local d = ms.cat { ms.tensor { true }, ms.tensor { 3 } }
  T.eq(d.dtype, "int64")
  T.same(d:tolist(), { 1, 3 })
  T.eq(ms.cat({ ms.zeros(1), ms.zeros(1, { dtype = "float64" }) }).dtype, "float64")
end)

T.test("cat: errors", function()
  local a = ms.zeros(2, 3)
  T.raises(function() ms.cat { a, ms.zeros(2, 4) } end, "cat", "(2, 3)", "(2, 4)")
  T.raises(function() ms.cat({ a, ms.zeros(3, 3) }, 2) end, "cat", "(2, 3)", "(3, 3)")
  T.raises(function() ms.cat { a, ms.zeros(6) } end, "cat", "dimensions")
  T.raises(function() ms.cat {} end, "cat", "non-empty")
  T.raises(function() ms.cat { a, 3 } end, "cat", "element 2", "expected a tensor")
  T.raises(function() ms.cat(a) end, "cat", "#1", "sequence of tensors")
  T.raises(function() ms.cat({ a, a }, 3) end, "cat", "dim", "got 3")
  T.raises(function() ms.cat { ms.tensor(1), ms.tensor(2) } end, "cat", "zero-dimensional")
end)

T.test("stack", function()
  local a, b = ms.tensor { 1, 2 }, ms.tensor { 3, 4 }
  local s = ms.stack { a, b }
  T.same(s:size(), { 2, 2 })
  T.same(s:tolist(), { { 1, 2 }, { 3, 4 } })
  T.same(ms.stack({ a, b }, 2):tolist(), { { 1, 3 }, { 2, 4 } })
  T.same(ms.stack({ a, b }, -1):tolist(), { { 1, 3 }, { 2, 4 } })
  T.same(ms.stack({ a, b, a }, -2):size(), { 3, 2 })
  T.same(ms.stack({ ms.tensor(1), ms.tensor(2) }):tolist(), { 1, 2 })
  local p = ms.stack { ms.tensor { 1 }, ms.tensor { 1.5 } }
  T.eq(p.dtype, "float32")
  T.same(p:tolist(), { { 1 }, { 1.5 } })
  T.raises(function() ms.stack { a, ms.zeros(3) } end, "stack", "(2,)", "(3,)")
  T.raises(function() ms.stack({ a, b }, 3) end, "stack", "dim", "got 3")
  T.raises(function() ms.stack {} end, "stack", "non-empty")
end)

---------------------------------------------------------------------------------------------
-- random chains of views against a model: a view over arange(N) holds, at each position,
-- its storage index, so values check the geometry; view's success and strides are checked
-- against PyTorch's computeStride, written out here.

local function model_list(m, d, off)
  d, off = d or 1, off or m.offset
  if d > #m.shape then return off end
  local out = {}
  for i = 1, m.shape[d] do out[i] = model_list(m, d + 1, off + (i - 1) * m.strides[d]) end
  return out
end

local function torch_view_strides(shape, strides, newshape)
  local numel = 1
  for _, s in ipairs(shape) do numel = numel * s end
  local out = {}
  if numel == 0 or #shape == 0 then
    local s = 1
    for d = #newshape, 1, -1 do out[d] = s; s = s * math.max(newshape[d], 1) end
    return out
  end
  local vd, base, tn, vn = #newshape, strides[#shape], 1, 1
  for td = #shape, 1, -1 do
    tn = tn * shape[td]
    if td == 1 or (shape[td - 1] ~= 1 and strides[td - 1] ~= tn * base) then
      while vd >= 1 and (vn < tn or newshape[vd] == 1) do
        out[vd] = vn * base
        vn = vn * newshape[vd]
        vd = vd - 1
      end
      if vn ~= tn then return nil end
      if td > 1 then base, tn, vn = strides[td - 1], 1, 1 end
    end
  end
  if vd ~= 0 then return nil end
  return out
end

local function random_shape_of(numel, rnd)
  local shape, rest = {}, numel
  while rest > 1 and #shape < 5 do
    local divs = {}
    for k = 2, rest do if rest % k == 0 then divs[#divs + 1] = k end end
    local k = divs[rnd(#divs)]
    shape[#shape + 1] = k
    rest = rest // k
    if rnd(3) == 1 then shape[#shape + 1] = 1 end
  end
  if rest > 1 or #shape == 0 then shape[#shape + 1] = rest end
  for i = #shape, 2, -1 do local j = rnd(i); shape[i], shape[j] = shape[j], shape[i] end
  return shape
end

T.test("random view chains agree with the model", function()
  local seed = 12345
  local function rnd(n) -- a small LCG: the test is the same every run
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed % n + 1
  end
  local checked_views = 0
  for _ = 1, 300 do
    local shape = random_shape_of(({ 24, 36, 60, 16, 30 })[rnd(5)], rnd)
    local n = 1
    for _, s in ipairs(shape) do n = n * s end
    local t = ms.arange(n):view(shape)
    local m = { shape = { table.unpack(shape) }, strides = t:stride(), offset = 0 }
    for _ = 1, rnd(4) do
      local nd, op = #m.shape, rnd(5)
      if op == 1 and nd >= 2 then
        local a, b = rnd(nd), rnd(nd)
        t = t:transpose(a, b)
        m.shape[a], m.shape[b] = m.shape[b], m.shape[a]
        m.strides[a], m.strides[b] = m.strides[b], m.strides[a]
      elseif op == 2 and nd >= 1 then
        local d = rnd(nd)
        local size = m.shape[d]
        if size > 1 then
          local start = rnd(size)
          local len = rnd(size - start + 1) - 1
          if len > 0 then
            t = t:narrow(d, start, len)
            m.offset = m.offset + (start - 1) * m.strides[d]
            m.shape[d] = len
          end
        end
      elseif op == 3 and nd >= 1 then
        local perm = {}
        for i = 1, nd do perm[i] = i end
        for i = nd, 2, -1 do local j = rnd(i); perm[i], perm[j] = perm[j], perm[i] end
        t = t:permute(perm)
        local sh, st = {}, {}
        for i = 1, nd do sh[i], st[i] = m.shape[perm[i]], m.strides[perm[i]] end
        m.shape, m.strides = sh, st
      elseif op == 4 and nd < 6 then
        local d = rnd(nd + 1)
        t = t:unsqueeze(d)
        local st = d <= nd and m.strides[d] * m.shape[d] or 1
        table.insert(m.shape, d, 1)
        table.insert(m.strides, d, st)
      elseif op == 5 and nd >= 2 then
        local d = rnd(nd)
        t = t:select(d, rnd(m.shape[d]))
        -- select takes index rnd: recompute from the real tensor's offset
        m.offset = t:storage_offset()
        table.remove(m.shape, d)
        table.remove(m.strides, d)
      end
      T.same(t:size(), m.shape)
      T.same(t:stride(), m.strides)
      T.eq(t:storage_offset(), m.offset)
      T.same(t:tolist(), model_list(m))
    end
    -- view and reshape to a random shape of the same numel
    local numel = t:numel()
    local flat = t:reshape(-1):tolist()
    local target = random_shape_of(numel, rnd)
    local want = torch_view_strides(m.shape, m.strides, target)
    local ok, v = pcall(t.view, t, target)
    T.eq(ok, want ~= nil, ("view %s -> %s"):format(tostring(t.shape), table.concat(target, ",")))
    if ok then
      checked_views = checked_views + 1
      T.same(v:stride(), want)
      T.same(v:reshape(-1):tolist(), flat)
      T.eq(v:storage_offset(), t:storage_offset())
    else
      T.truthy(v:find("use reshape", 1, true), v)
    end
    T.same(t:reshape(target):reshape(-1):tolist(), flat)
    T.same(t:contiguous():view(-1):tolist(), flat)
  end
  T.truthy(checked_views > 50, "many views succeeded: " .. checked_views)
end)

T.finish()
