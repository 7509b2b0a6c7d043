-- test_tensor_repr.lua: checks lua/moonshard/tensor_repr.lua against reprs recorded from
-- PyTorch 1.13 (tests/lua/data/repr_reference.lua, made by gen_repr_reference.py), using a
-- pure-Lua mock tensor with the interface the binding provides.
local root = (arg and arg[0] or ""):match("^(.-)tests/lua/[^/]*$") or ""
package.path = root .. "tests/lua/?.lua;" .. package.path

local T = require "testing"

-- The built binary embeds the module; stock lua5.4 finds it in the source tree.
local ok, repr = pcall(require, "moonshard.tensor_repr")
if not ok then
  package.path = root .. "lua/?.lua;" .. package.path
  repr = require "moonshard.tensor_repr"
end

---------------------------------------------------------------------------------------------
-- Mock tensor: a strided view over a flat value source (a table, or a function of the 1-based
-- flat index for huge tensors), implementing exactly dim/size/numel/dtype/requires_grad/
-- device/narrow/select/tolist/item.

local Mock = {}
Mock.__index = Mock

local function contiguous_strides(shape)
  local strides, s = {}, 1
  for d = #shape, 1, -1 do strides[d] = s; s = s * shape[d] end
  return strides
end

local function new_mock(src, shape, dtype, requires_grad, device)
  return setmetatable({ src = src, shape = shape, strides = contiguous_strides(shape),
    offset = 0, dtype = dtype, requires_grad = requires_grad or false,
    device = device or "cpu", touched = { n = 0 } }, Mock)
end

local function view(m, shape, strides, offset)
  return setmetatable({ src = m.src, shape = shape, strides = strides, offset = offset,
    dtype = m.dtype, requires_grad = m.requires_grad, device = m.device,
    touched = m.touched }, Mock)
end

function Mock:dim() return #self.shape end
function Mock:size() return table.move(self.shape, 1, #self.shape, 1, {}) end
function Mock:numel()
  local n = 1
  for _, s in ipairs(self.shape) do n = n * s end
  return n
end

function Mock:narrow(dim, start, length)
  assert(dim >= 1 and dim <= #self.shape, "narrow: bad dim")
  assert(start >= 1 and length >= 0 and start + length - 1 <= self.shape[dim], "narrow: bad range")
  local shape = self:size()
  shape[dim] = length
  return view(self, shape, table.move(self.strides, 1, #self.strides, 1, {}),
    self.offset + (start - 1) * self.strides[dim])
end

function Mock:select(dim, index)
  assert(dim >= 1 and dim <= #self.shape, "select: bad dim")
  assert(index >= 1 and index <= self.shape[dim], "select: bad index")
  local shape, strides = self:size(), table.move(self.strides, 1, #self.strides, 1, {})
  table.remove(shape, dim)
  table.remove(strides, dim)
  return view(self, shape, strides, self.offset + (index - 1) * self.strides[dim])
end

local function to_dtype(v, dtype)
  if dtype == "bool" then
    if type(v) == "number" then return v ~= 0 end -- generated values: x ~= 0
    return v
  end
  if dtype == "float32" then return (string.unpack("<f", string.pack("<f", v))) end
  if dtype:find("float") then return math.type(v) == "integer" and v + 0.0 or v end
  return math.tointeger(v)
end

function Mock:at(flat)
  self.touched.n = self.touched.n + 1
  local v
  if type(self.src) == "function" then v = self.src(flat + 1) else v = self.src[flat + 1] end
  return to_dtype(v, self.dtype)
end

function Mock:tolist()
  assert(#self.shape > 0, "tolist: use item() for a 0-dim tensor")
  local function build(d, offset)
    local out = {}
    for i = 1, self.shape[d] do
      local at = offset + (i - 1) * self.strides[d]
      if d == #self.shape then out[i] = self:at(at) else out[i] = build(d + 1, at) end
    end
    return out
  end
  return build(1, self.offset)
end

function Mock:item()
  assert(#self.shape == 0, "item: only for 0-dim tensors")
  return self:at(self.offset)
end

---------------------------------------------------------------------------------------------
-- Reference cases

-- Mirrors gen_values in gen_repr_reference.py.
local function gen_values(spec, n)
  local out = {}
  for i = 0, n - 1 do
    local x = (i * (spec.mul or 1) + (spec.add or 0)) % (spec.mod or n) + (spec.offset or 0)
    if spec.div then x = x / spec.div end
    if spec.scale then x = x * spec.scale end
    out[i + 1] = x
  end
  for _, p in ipairs(spec.patch or {}) do out[p[1]] = p[2] end
  return out
end

local function case_mock(c)
  local n = 1
  for _, s in ipairs(c.shape) do n = n * s end
  local values = c.values.gen and gen_values(c.values, n) or c.values
  assert(#values == n, c.name .. ": value count does not match shape")
  return new_mock(values, c.shape, c.dtype, c.requires_grad, c.device)
end

local cases = dofile(root .. "tests/lua/data/repr_reference.lua")
for _, c in ipairs(cases) do
  T.test("torch reference: " .. c.name, function()
    repr.set_printoptions { profile = "default" }
    if c.opts then repr.set_printoptions(c.opts) end
    local got = repr.format(case_mock(c))
    repr.set_printoptions { profile = "default" }
    if got ~= c.expected then
      error(("repr differs\n--- expected\n%s\n--- got\n%s"):format(c.expected, got), 0)
    end
  end)
end

---------------------------------------------------------------------------------------------
-- Behaviour beyond the recorded cases

T.test("set_printoptions keeps unset keys and resets sci_mode", function()
  repr.set_printoptions { precision = 2, sci_mode = true }
  T.eq(repr.options.precision, 2)
  T.eq(repr.options.sci_mode, true)
  repr.set_printoptions { linewidth = 100 }
  T.eq(repr.options.precision, 2)
  T.eq(repr.options.linewidth, 100)
  T.eq(repr.options.sci_mode, nil)
  repr.set_printoptions { profile = "full" }
  T.eq(repr.options.threshold, math.huge)
  T.eq(repr.options.precision, 4)
  repr.set_printoptions { profile = "default" }
  T.eq(repr.options.threshold, 1000)
  T.eq(repr.options.linewidth, 80)
  T.raises(function() repr.set_printoptions { profile = "tiny" } end, "profile")
end)

T.test("summarizing a huge tensor reads only the shown items", function()
  local m = new_mock(function(i) return i end, { 1000, 1000 }, "int64")
  local s = repr.format(m)
  T.truthy(s:find("[[      1,       2,       3,  ...,     998,     999,    1000]", 1, true), s)
  T.truthy(m.touched.n <= 36, "read " .. m.touched.n .. " items")
end)

T.test("strided views print their own elements", function()
  local m = new_mock(gen_values({}, 12), { 3, 4 }, "int64")
  T.eq(repr.format(m:narrow(2, 2, 2)), "tensor([[ 1,  2],\n        [ 5,  6],\n        [ 9, 10]])")
  T.eq(repr.format(m:select(1, 3)), "tensor([ 8,  9, 10, 11])")
  T.eq(repr.format(m:select(1, 2):select(1, 4)), "tensor(7)")
end)

-- The real binding, when this runs inside a build that has one.
local have_ms, ms = pcall(require, "moonshard")
if have_ms and type(ms) == "table" and ms.tensor then
  T.test("real tensor prints like torch", function()
    T.eq(tostring(ms.tensor { { 1, 2 }, { 3, 4 } }), "tensor([[1, 2],\n        [3, 4]])")
    T.eq(repr.format(ms.tensor { { 1, 2 }, { 3, 4 } }), "tensor([[1, 2],\n        [3, 4]])")
  end)
end

T.finish()
