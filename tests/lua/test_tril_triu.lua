-- test_tril_triu.lua: tril and triu (and tril_, triu_): hand-computed values checked against
-- PyTorch 1.13, a reference loop of PyTorch's rule (keep (i, j) where j - i <= d, or >= d) over
-- every dtype, shapes with batch dims, strided inputs, diagonals past the matrix and empty
-- tensors; gradcheck and grad_fn names; in-place forms; the errors.
local root = (arg and arg[0] or ""):match("^(.-)tests/lua/[^/]*$") or ""
package.path = root .. "tests/lua/?.lua;" .. package.path

local T = require "testing"
local ms = require "moonshard"
local gradcheck = require "gradcheck"

local DTYPES = { "float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool" }

-- PyTorch's rule, element by element over the last two dims of the nested list v.
local function reference(v, ndim, upper, d)
  if ndim == 2 then
    local out = {}
    for i, row in ipairs(v) do
      out[i] = {}
      for j, x in ipairs(row) do
        local keep = upper and (j - i >= d) or (not upper and j - i <= d)
        if keep then out[i][j] = x elseif type(x) == "boolean" then out[i][j] = false else out[i][j] = 0 end
      end
    end
    return out
  end
  local out = {}
  for i, m in ipairs(v) do out[i] = reference(m, ndim - 1, upper, d) end
  return out
end

T.test("hand-computed values (PyTorch 1.13's)", function()
  local a = ms.arange(1, 13):view(3, 4)
  T.same(ms.tril(a, -1):tolist(), { { 0, 0, 0, 0 }, { 5, 0, 0, 0 }, { 9, 10, 0, 0 } })
  T.same(ms.triu(a, 1):tolist(), { { 0, 2, 3, 4 }, { 0, 0, 7, 8 }, { 0, 0, 0, 12 } })
  T.same(a:tril(2):tolist(), { { 1, 2, 3, 0 }, { 5, 6, 7, 8 }, { 9, 10, 11, 12 } })
  T.same(a:triu(-1):tolist(), { { 1, 2, 3, 4 }, { 5, 6, 7, 8 }, { 0, 10, 11, 12 } })
  T.same(a:tril():tolist(), { { 1, 0, 0, 0 }, { 5, 6, 0, 0 }, { 9, 10, 11, 0 } })
  T.same(a:triu({ diagonal = 2 }):tolist(), { { 0, 0, 3, 4 }, { 0, 0, 0, 8 }, { 0, 0, 0, 0 } })
  -- nanoGPT's causal mask
  T.same(ms.tril(ms.ones(3, 3)):tolist(), { { 1, 0, 0 }, { 1, 1, 0 }, { 1, 1, 1 } })
  T.same(ms.tril(ms.ones(2, 2, { dtype = "bool" })):tolist(), { { true, false }, { true, true } })
  T.eq(a:tril().dtype, "int64")
  T.eq(a:tril():is_contiguous(), true)
end)

T.test("every dtype, batch dims, strided inputs, diagonals past the matrix", function()
  ms.manual_seed(3)
  local shapes = { { 4, 4 }, { 3, 5 }, { 5, 2 }, { 2, 3, 4 }, { 2, 2, 3, 3 }, { 1, 1 }, { 6, 1 } }
  local checked = 0
  for _, dt in ipairs(DTYPES) do
    for _, shape in ipairs(shapes) do
      local base = ms.randn(shape):mul(4)
      local x = dt == "bool" and base:gt(0) or base:to(dt)
      local xt = x:transpose(-1, -2) -- strided
      for _, input in ipairs { x, xt } do
        local r, c = input:size(-2), input:size(-1)
        local v = input:tolist()
        for _, d in ipairs { 0, 1, -1, 2, -2, c - 1, c, c + 5, -r, -r - 3, 1000, -1000 } do
          for _, upper in ipairs { false, true } do
            local name = upper and "triu" or "tril"
            local got = input[name](input, d)
            T.eq(got.dtype, input.dtype, name)
            T.same(got:tolist(), reference(v, input:dim(), upper, d), 0, ("%s %s %s d=%d"):format(name, dt, tostring(input:size()), d))
            checked = checked + 1
          end
        end
      end
    end
  end
  T.same(ms.tril(ms.ones(3, 3), 1000):tolist(), ms.ones(3, 3):tolist())
  T.same(ms.triu(ms.ones(3, 3), 1000):tolist(), ms.zeros(3, 3):tolist())
  print(("%d tril/triu results checked against the reference loop"):format(checked))
end)

T.test("empty tensors and NaN", function()
  for _, shape in ipairs { { 0, 0 }, { 2, 0 }, { 0, 3 }, { 0, 2, 2 }, { 3, 0, 4 } } do
    for _, name in ipairs { "tril", "triu", "tril_", "triu_" } do
      local x = ms.ones(shape)
      local y = x[name](x, 1)
      T.same(y:size(), shape, 0, name)
    end
  end
  local x = ms.full({ 2, 2 }, 0 / 0)
  local y = x:tril():tolist()
  T.eq(y[1][2], 0) -- a zeroed element is 0, not 0 * NaN
  T.truthy(y[1][1] ~= y[1][1])
end)

T.test("in-place forms, on contiguous and strided tensors", function()
  local a = ms.arange(1, 13):view(3, 4):double()
  local r = a:tril_(-1)
  T.truthy(rawequal(r, a))
  T.same(a:tolist(), { { 0, 0, 0, 0 }, { 5, 0, 0, 0 }, { 9, 10, 0, 0 } })
  local b = ms.arange(1, 13):view(4, 3):double()
  local bt = b:t() -- (3, 4), strided: the write goes through to b
  bt:triu_(1)
  T.same(bt:tolist(), { { 0, 4, 7, 10 }, { 0, 0, 8, 11 }, { 0, 0, 0, 12 } })
  T.same(b:tolist(), { { 0, 0, 0 }, { 4, 0, 0 }, { 7, 8, 0 }, { 10, 11, 12 } })
  local c = ms.ones(2, 3, 3, { dtype = "bfloat16" })
  ms.triu_(c)
  T.same(c:float():tolist(), { { { 1, 1, 1 }, { 0, 1, 1 }, { 0, 0, 1 } }, { { 1, 1, 1 }, { 0, 1, 1 }, { 0, 0, 1 } } })
end)

T.test("gradients: gradcheck, grad_fn names, in place under autograd", function()
  ms.manual_seed(5)
  for _, d in ipairs { 0, 1, -1, 5, -5 } do
    gradcheck(function(x) return x:tril(d) end, { ms.randn(3, 4, { dtype = "float64" }) })
    gradcheck(function(x) return x:triu(d) end, { ms.randn(2, 4, 3, { dtype = "float64" }) })
    gradcheck(function(x) return x:t():tril(d) * 2 end, { ms.randn(4, 3, { dtype = "float64" }) })
    gradcheck(function(x) return (x * 1):triu_(d) end, { ms.randn(3, 3, { dtype = "float64" }) })
  end
  local x = ms.randn(3, 3, { requires_grad = true })
  T.eq(x:tril().grad_fn, "TrilBackward0")
  T.eq(x:triu().grad_fn, "TriuBackward0")
  -- the gradient is the same triangle of the incoming gradient
  local y = x:tril(-1)
  y:backward(ms.ones(3, 3))
  T.same(x.grad:tolist(), { { 0, 0, 0 }, { 1, 0, 0 }, { 1, 1, 0 } })
  T.raises(function() x:tril_() end, "tril_", "leaf")
  local ok = pcall(function() local _ <close> = ms.no_grad(); x:detach():triu_() end)
  T.truthy(ok)
  T.eq(ms.ones(2, 2, { dtype = "int64" }):tril().requires_grad, false)
end)

T.test("errors", function()
  T.raises(function() ms.tril(ms.ones(3)) end, "tril", "at least 2 dims", "got 1 dim", "(3,)")
  T.raises(function() ms.triu(ms.tensor(1.5)) end, "triu", "at least 2 dims", "got 0 dims")
  T.raises(function() ms.ones(3):tril_() end, "tril_", "at least 2 dims")
  T.raises(function() ms.tril(ms.ones(2, 2), 1.5) end, "tril", "diagonal", "integer", "1.5")
  T.raises(function() ms.triu(ms.ones(2, 2), "1") end, "triu", "diagonal", "integer")
  T.raises(function() ms.triu(ms.ones(2, 2), { diagonal = 0.5 }) end, "triu", "diagonal")
  T.raises(function() ms.triu(ms.ones(2, 2), { diag = 1 }) end, "triu", "diag")
  T.raises(function() ms.tril(ms.ones(2, 2), 1, 2) end, "tril", "unexpected argument")
  T.raises(function() ms.tril({ 1, 2 }) end, "tril")
  T.raises(function() ms.tril(ms.empty(2, 2, { device = "meta" })) end, "tril")
end)

T.finish()
