-- test_matmul_int.lua: integer mm and addmm (the CPU gemm slot's exact loop) on transposed and
-- strided views: exact, wrapping like PyTorch's int64, each operand read through its strides.
local T = require "testing"
local ms = require "moonshard"

-- The product of two Lua matrices, exact in Lua's wrapping 64-bit integers.
local function lua_mm(a, b)
  local c = {}
  for i = 1, #a do
    c[i] = {}
    for j = 1, #b[1] do
      local s = 0
      for k = 1, #b do s = s + a[i][k] * b[k][j] end
      c[i][j] = s
    end
  end
  return c
end

local function transpose(a)
  local t = {}
  for j = 1, #a[1] do
    t[j] = {}
    for i = 1, #a do t[j][i] = a[i][j] end
  end
  return t
end

local A = { { 3, -1, 4, 1 << 40 }, { 1, 5, -9, 2 }, { 6, 5, 3, -5 } }       -- 3 x 4
local B = { { 2, 7 }, { -1, 8 }, { 2, 8 }, { 1 << 30, -3 } }                -- 4 x 2

T.test("int64 mm on transposed views is exact and wraps", function()
  local a = ms.tensor(transpose(A), { dtype = ms.int64 }):t() -- A as a transposed view
  local b = ms.tensor(B, { dtype = ms.int64 })
  T.same(a:mm(b):tolist(), lua_mm(A, B))
  -- (2^40 * 2^30) * 2^3 passes 2^63: the sum wraps as in Lua and PyTorch
  local big = ms.tensor({ { 1 << 40 } }, { dtype = ms.int64 }):mm(ms.tensor({ { 1 << 30 } }, { dtype = ms.int64 }))
  local wrapped = big:mm(ms.tensor({ { 8 } }, { dtype = ms.int64 })):tolist()[1][1]
  T.eq(wrapped, ((1 << 40) * (1 << 30)) * 8)
end)

T.test("int32 addmm with a strided operand", function()
  local base = ms.tensor({ { 1, 0, 2, 0, 3, 0, 4, 0 }, { 5, 0, 6, 0, 7, 0, 8, 0 } }, { dtype = ms.int32 })
  local b = base:view(2, 4, 2):select(3, 1):t() -- (4, 2), strides (2, 8): no unit stride
  local Bl = { { 1, 5 }, { 2, 6 }, { 3, 7 }, { 4, 8 } }
  local c = ms.tensor({ { 1, 1 }, { 1, 1 }, { 1, 1 } }, { dtype = ms.int32 })
  local a = ms.tensor({ { 1, 2, 3, 4 }, { 0, 1, 0, 1 }, { -1, 0, 2, 0 } }, { dtype = ms.int32 })
  local want = lua_mm({ { 1, 2, 3, 4 }, { 0, 1, 0, 1 }, { -1, 0, 2, 0 } }, Bl)
  for i = 1, 3 do for j = 1, 2 do want[i][j] = 2 * want[i][j] + 3 end end
  T.same(ms.addmm(c, a, b, { beta = 3, alpha = 2 }):tolist(), want)
end)

T.finish()
