-- test_grad_views.lua: gradients of the view and shape ops, copies and dtype conversions,
-- in-place writes (copy_, fill_, t[i] = v), the joins and the matrix products, checked against
-- finite differences in float64 (gradcheck) and by their grad_fn names.
local T = require "testing"
local ms = require "moonshard"
local gradcheck = require "gradcheck"

local function rand(...) return ms.randn({...}, {dtype = "float64"}) end
local function leaf(values) return ms.tensor(values, {dtype = "float64", requires_grad = true}) end

ms.manual_seed(0)

T.test("view, reshape, flatten, squeeze, unsqueeze", function()
  local x = rand(2, 3, 4)
  gradcheck(function(a) return a:view(6, 4) end, {x})
  gradcheck(function(a) return a:view(-1) end, {x})
  gradcheck(function(a) return a:reshape(4, 6) end, {x})
  gradcheck(function(a) return a:flatten(2) end, {x})
  gradcheck(function(a) return a:flatten() end, {x})
  gradcheck(function(a) return a:unsqueeze(2):unsqueeze(1) end, {x})
  gradcheck(function(a) return a:view(2, 1, 12, 1):squeeze() end, {x})
  gradcheck(function(a) return a:view(2, 1, 12):squeeze(2) end, {x})
  gradcheck(function(a, b) return a:view_as(b) end, {x, rand(4, 6)}, {skip = {false, true}})
end)

T.test("transpose, t, permute, and a non-viewable reshape", function()
  local x = rand(2, 3, 4)
  gradcheck(function(a) return a:transpose(1, 3) end, {x})
  gradcheck(function(a) return a:transpose(-1, 2) end, {x})
  gradcheck(function(a) return a:permute(3, 1, 2) end, {x})
  gradcheck(function(a) return a:permute({2, 3, 1}):reshape(-1) end, {x})
  gradcheck(function(a) return a:t() end, {rand(3, 5)})
end)

T.test("narrow, select, indexing", function()
  local x = rand(4, 5)
  gradcheck(function(a) return a:narrow(2, 2, 3) end, {x})
  gradcheck(function(a) return a:narrow(1, -2, 2) end, {x})
  gradcheck(function(a) return a:select(2, 3) end, {x})
  gradcheck(function(a) return a:select(1, -1) end, {x})
  gradcheck(function(a) return a[2] * a[4] end, {x})
  gradcheck(function(a) return a[3][2] * a end, {x})
end)

T.test("chains: x:t():reshape(...):narrow(...)", function()
  gradcheck(function(a) return a:t():reshape(2, 6):narrow(2, 2, 4) end, {rand(3, 4)})
  gradcheck(function(a) return a:permute(2, 1, 3):contiguous():view(-1, 2):select(2, 1) end, {rand(2, 3, 2)})
  gradcheck(function(a) return a:unsqueeze(1):expand(3, 4, 5):transpose(1, 2):flatten(2) end, {rand(4, 5)})
end)

T.test("expand: gradients sum over the broadcast dims", function()
  gradcheck(function(a) return a:expand(3, 4) end, {rand(4)})
  gradcheck(function(a) return a:expand(2, 3, 4) end, {rand(3, 1)})
  gradcheck(function(a, b) return a:expand_as(b) * b end, {rand(1, 4), rand(3, 4)})
  local x = leaf({1, 2, 3})
  x:expand(4, 3):sum():backward()
  T.same(x.grad:tolist(), {4.0, 4.0, 4.0})
end)

T.test("clone, contiguous, and dtype conversions", function()
  gradcheck(function(a) return a:clone() * 2 end, {rand(3, 2)})
  gradcheck(function(a) return a:t():contiguous() end, {rand(3, 2)})
  local x = ms.randn(3, 4):requires_grad_()
  local y = x:double()
  T.eq(y.grad_fn, "ToCopyBackward0")
  local w = rand(3, 4)
  ;(y * w):sum():backward()
  T.eq(x.grad.dtype, "float32")
  T.truthy(ms.allclose(x.grad, w:float()))
  -- float32 rounding needs a wide step: the function is linear, so the step costs nothing
  gradcheck(function(a) return a:float():double() * 3 end, {rand(5)}, {eps = 1e-2, atol = 1e-4})
  -- a contiguous tensor comes back as itself, with its grad_fn
  local z = leaf({1, 2}) * 2
  T.eq(z:contiguous().grad_fn, "MulBackward0")
  T.eq(z:double().grad_fn, "MulBackward0")
  -- conversions to integers and bool leave the graph
  T.eq(z:long().requires_grad, false)
end)

T.test("cat and stack of three inputs, only some requiring grad", function()
  local a, b, c = rand(2, 3), rand(4, 3), rand(1, 3)
  gradcheck(function(x, y, z) return ms.cat({x, y, z}) end, {a, b, c}, {skip = {false, true, false}})
  gradcheck(function(x, y, z) return ms.cat({x, y, z}, -2) * 2 end, {a, b, c}, {skip = {true, false, true}})
  gradcheck(function(x, y, z) return ms.cat({x:t(), y:t(), z:t()}, 2) end, {a, b, c})
  local p, q, r = rand(2, 3), rand(2, 3), rand(2, 3)
  gradcheck(function(x, y, z) return ms.stack({x, y, z}) end, {p, q, r}, {skip = {false, true, false}})
  gradcheck(function(x, y, z) return ms.stack({x, y, z}, 3) end, {p, q, r})
  gradcheck(function(x, y, z) return ms.stack({x, y, z}, -2) end, {p, q, r}, {skip = {true, true, false}})
  local x = leaf({1, 2})
  T.eq(ms.cat({x, ms.zeros(2, {dtype = "float64"})}).grad_fn, "CatBackward0")
  T.eq(ms.stack({x, x}).grad_fn, "StackBackward0")
  T.eq(ms.cat({ms.zeros(2), ms.ones(2)}).requires_grad, false)
end)

T.test("cat with mixed dtypes gives each input its own dtype back", function()
  local f = ms.randn(2):requires_grad_()
  local d = leaf({1, 2, 3})
  local out = ms.cat({f, d})
  T.eq(out.dtype, "float64")
  out:sum():backward()
  T.eq(f.grad.dtype, "float32")
  T.same(f.grad:tolist(), {1.0, 1.0})
  T.same(d.grad:tolist(), {1.0, 1.0, 1.0})
end)

T.test("split and chunk: every piece feeds the input", function()
  local x = rand(7, 2)
  gradcheck(function(a)
    local p = a:split(3)
    return ms.cat({p[3], p[1] * 2, p[2]})
  end, {x})
  gradcheck(function(a)
    local p = a:chunk(2, 2)
    return p[1] * p[2]
  end, {x})
  gradcheck(function(a)
    local p = a:split({2, 5})
    return p[2]:narrow(1, 1, 2) + p[1]
  end, {x})
  T.eq(leaf({1, 2, 3}):split(2)[2].grad_fn, "SplitBackward0")
  -- a piece nobody used gets zeros
  local y = leaf({1, 2, 3, 4})
  y:chunk(2)[2]:sum():backward()
  T.same(y.grad:tolist(), {0.0, 0.0, 1.0, 1.0})
end)

-- A 3-D float64 tensor whose dim d (1-based) has size n and the others 2.
local function along(d, n)
  local shape = {2, 2, 2}
  shape[d] = n
  return rand(table.unpack(shape))
end

-- The used pieces (some twice, some not at all) joined back along dim, each scaled by its
-- place: the gradient of every slot differs, so a piece embedded at the wrong offset shows.
local function rejoin(pieces, dim, used)
  local outs = {}
  for _, i in ipairs(used) do outs[#outs + 1] = pieces[i] * i end
  return ms.cat(outs, dim)
end

T.test("split and chunk: gradcheck over dims, piece counts and unused pieces", function()
  for d = 1, 3 do
    for _, dim in ipairs({d, d - 4}) do -- 1-based and negative
      for n = 1, 6 do
        -- chunk(n) of 7: equal pieces and an uneven last one (or fewer pieces, as torch)
        gradcheck(function(a) return rejoin(a:chunk(n, dim), dim, {1, 1}) end, {along(d, 7)})
        local used = n >= 3 and {n, 1, 3, 3} or {1}
        gradcheck(function(a) return rejoin(a:split(2, dim), dim, used) end, {along(d, 2 * n - 1)})
        local sizes = {}
        for i = 1, n do sizes[i] = i % 3 end -- zero-length pieces too
        local total = 0
        for _, v in ipairs(sizes) do total = total + v end
        gradcheck(function(a) return rejoin(a:split(sizes, dim), dim, {n}) end, {along(d, total)})
      end
    end
  end
end)

T.test("split and chunk: one node per up to 4 pieces, PyTorch's grad_fn names", function()
  local x = leaf({1, 2, 3, 4, 5, 6})
  local p = x:split(2)
  T.eq(p[1].grad_fn, "SplitBackward0")
  T.eq(x:chunk(3)[3].grad_fn, "SplitBackward0")
  T.eq(x:split({1, 5})[2].grad_fn, "SplitWithSizesBackward0")
  T.eq(x:split({1, 1, 1, 1, 1, 1})[6].grad_fn, "SplitWithSizesBackward0")
  T.eq(x:split(1)[5].grad_fn, "SplitBackward0")
  -- the pieces stay views of the input
  T.eq(p[2]:storage_offset(), 2)
  do
    local _ <close> = ms.no_grad()
    x[4] = 40
  end
  T.same(p[2]:tolist(), {3.0, 40.0})
end)

T.test("split: a piece without a gradient gets a zero slot, the others theirs", function()
  local x = leaf({1, 2, 3, 4, 5, 6, 7})
  local p = x:split(1)                       -- 7 pieces: three nodes
  ;(p[5] * 3 + p[2] * p[2]):sum():backward()
  T.same(x.grad:tolist(), {0.0, 4.0, 0.0, 0.0, 3.0, 0.0, 0.0})
  local y = leaf({1, 2, 3, 4})
  local q = y:split({1, 3})
  q[1]:sum():backward()
  T.same(y.grad:tolist(), {1.0, 0.0, 0.0, 0.0})
  -- the input's gradient is made without zeros: the unused slots are zeroed, even in memory
  -- that a released tensor left dirty (a block of the cache, which keeps those of 64 KiB up)
  local big = ms.randn({128, 128}, {dtype = "float64"}):requires_grad_()
  local pieces = big:split(32)
  local loss2 = pieces[2]:sum()
  do
    local _ <close> = ms.full({128, 128}, 7, {dtype = "float64"})
  end
  loss2:backward()
  T.eq(big.grad:sum():item(), 32 * 128)
  T.eq(big.grad:narrow(1, 33, 32):min():item(), 1)
  -- a piece used twice sums its two gradients; the graph can be walked twice
  local z = leaf({1, 2, 3})
  local r = z:chunk(3)
  local loss = (r[3] * 2 + r[3] * r[1]):sum()
  loss:backward({retain_graph = true})
  T.same(z.grad:tolist(), {3.0, 0.0, 3.0})
  loss:backward()
  T.same(z.grad:tolist(), {6.0, 0.0, 6.0})
  -- a hook on a piece sees its gradient; the unused pieces' slots stay zero
  local w = leaf({1, 2, 3, 4})
  local s = w:split(1)
  local seen
  s[2]:register_hook(function(g) seen = g:tolist() end)
  ;(s[2] * 5):sum():backward()
  T.same(seen, {5.0})
  T.same(w.grad:tolist(), {0.0, 5.0, 0.0, 0.0})
end)

T.test("split and chunk: 16-bit gradients keep the input's dtype", function()
  for _, dt in ipairs({"bfloat16", "float16"}) do
    local x = ms.tensor({{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}}, {dtype = dt, requires_grad = true})
    local q, k, v = table.unpack(x:split(2, 2))
    ;(q * 2 + v):sum():backward()
    T.eq(x.grad.dtype, dt)
    T.same(x.grad:float():tolist(), {{2, 2, 0, 0, 1, 1}, {2, 2, 0, 0, 1, 1}})
    local y = ms.tensor({1, 2, 3, 4, 5}, {dtype = dt, requires_grad = true})
    y:chunk(5)[4]:float():sum():backward() -- float32 gradient into a 16-bit piece
    T.eq(y.grad.dtype, dt)
    T.same(y.grad:float():tolist(), {0, 0, 0, 1, 0})
  end
end)

-- PyTorch refuses an in-place write into an output of a multi-output view ("Output 0 of
-- SplitBackward0 is a view and is being modified inplace"); here the write is recorded on the
-- pieces' base (CopySlices) and the gradients are right, checked against values by hand.
T.test("split: an in-place write into a piece gives the right gradients", function()
  local x = leaf({1, 2, 3, 4, 5, 6})
  local y = x * 1
  local p = y:split(2)
  p[2]:mul_(3)                                  -- y = {1, 2, 9, 12, 5, 6}
  T.same(y:tolist(), {1.0, 2.0, 9.0, 12.0, 5.0, 6.0})
  local w = ms.tensor({1, 2, 3, 4, 5, 6}, {dtype = "float64"})
  ;((y * w):sum() + (p[2] * p[2]):sum() + p[3]:sum()):backward()
  -- y*w: w, times 3 in slot 2; p2^2 = (3 x)^2: 18 x there; p3: 1 in slot 3
  T.same(x.grad:tolist(), {1.0, 2.0, 9.0 + 54.0, 12.0 + 72.0, 6.0, 7.0})
  -- past the first node's pieces (grouped): the same
  local a = leaf({1, 2, 3, 4, 5, 6})
  local b = a * 1
  local q = b:split(1)
  q[6]:add_(q[1])                               -- b[6] = a[6] + a[1]
  ;(b * b):sum():backward()                     -- 2 b: b = {1, 2, 3, 4, 5, 7}
  T.same(a.grad:tolist(), {2.0 + 14.0, 4.0, 6.0, 8.0, 10.0, 14.0})
  -- a piece of a leaf that requires grad: refused, as any view of one
  T.raises(function() leaf({1, 2}):split(1)[1]:mul_(2) end, "mul_", "view of a leaf")
end)

T.test("matmul: 1-D, 2-D and batched with broadcasting", function()
  gradcheck(function(a, b) return a:matmul(b) end, {rand(3, 4), rand(4, 5)})
  gradcheck(function(a, b) return a:matmul(b) end, {rand(4), rand(4)})
  gradcheck(function(a, b) return a:matmul(b) end, {rand(4), rand(4, 3)})
  gradcheck(function(a, b) return a:matmul(b) end, {rand(3, 4), rand(4)})
  gradcheck(function(a, b) return a:matmul(b) end, {rand(2, 3, 4), rand(4, 5)})
  gradcheck(function(a, b) return a:matmul(b) end, {rand(3, 4), rand(2, 4, 5)})
  gradcheck(function(a, b) return a:matmul(b) end, {rand(2, 1, 3, 4), rand(3, 4, 2)})
  gradcheck(function(a, b) return a:matmul(b) end, {rand(4), rand(2, 4, 3)})
  gradcheck(function(a, b) return a:matmul(b) end, {rand(2, 3, 4), rand(4)})
  gradcheck(function(a, b) return ms.dot(a, b) end, {rand(5), rand(5)})
  gradcheck(function(a, b) return a:mm(b:t()) end, {rand(3, 4), rand(5, 4)})
  gradcheck(function(a, b) return a:bmm(b) end, {rand(2, 3, 4), rand(2, 4, 2)})
  gradcheck(function(a, b) return a:matmul(b) end, {rand(3, 4), rand(4, 5)}, {skip = {true, false}})
  local a = leaf({{1, 2}, {3, 4}})
  T.eq(a:mm(a).grad_fn, "MmBackward0")
  T.eq(a:unsqueeze(1):bmm(a:unsqueeze(1)).grad_fn, "BmmBackward0")
end)

T.test("addmm with beta and alpha, and a broadcast input", function()
  local c, a, b = rand(3, 5), rand(3, 4), rand(4, 5)
  gradcheck(function(x, y, z) return ms.addmm(x, y, z) end, {c, a, b})
  gradcheck(function(x, y, z) return ms.addmm(x, y, z, {beta = 0.5, alpha = -2}) end, {c, a, b})
  gradcheck(function(x, y, z) return ms.addmm(x, y, z, {beta = 3}) end, {rand(5), a, b})
  gradcheck(function(x, y, z) return ms.addmm(x, y, z, {alpha = 0.25}) end, {rand(3, 1), a, b},
    {skip = {false, true, false}})
  T.eq(ms.addmm(c, a, leaf({{1}, {2}, {3}, {4}}):expand(4, 5)).grad_fn, "AddmmBackward0")
end)

T.test("copy_ into a fresh tensor passes the gradient to its source", function()
  gradcheck(function(a)
    local out = ms.zeros(3, 4, {dtype = "float64"})
    out:copy_(a)
    return out
  end, {rand(4)})
  gradcheck(function(a)
    local out = ms.zeros(2, 3, {dtype = "float64"})
    out:copy_(a:t()) -- the old values are overwritten: no gradient reaches them
    return out * a:t()
  end, {rand(3, 2)})
  local f = ms.randn(3):requires_grad_()
  local out = ms.zeros(3, {dtype = "float64"})
  out:copy_(f)
  T.eq(out.grad_fn, "CopyBackwards")
  out:sum():backward()
  T.eq(f.grad.dtype, "float32")
end)

T.test("t[i] = v and fill_ under autograd", function()
  -- writing rows of a non-leaf: gradient to what is left of it and to the values written
  gradcheck(function(a, v)
    local y = a * 1
    y[2] = v
    y[3] = 5
    return y
  end, {rand(4, 3), rand(3)})
  gradcheck(function(a, v)
    local y = ms.zeros(3, 2, {dtype = "float64"})
    y[1] = v
    y[3] = v * 2
    return y * a
  end, {rand(3, 2), rand(1, 2)})
  local x = leaf({{1, 2}, {3, 4}})
  local y = x * 1
  y[1] = 0
  T.eq(y.grad_fn, "CopySlices")
  y:sum():backward()
  T.same(x.grad:tolist(), {{0.0, 0.0}, {1.0, 1.0}})
  -- a non-leaf may be filled: its old values then get no gradient
  local z = x * 2
  z:fill_(1)
  T.eq(z.grad_fn, "FillBackward0")
  -- the leaf itself refuses until grad mode is off
  T.raises(function() x[1] = 0 end, "leaf")
  T.raises(function() x:fill_(0) end, "leaf")
  T.raises(function() x:zero_() end, "leaf")
  T.raises(function() x:copy_(ms.zeros(2, 2, {dtype = "float64"})) end, "leaf")
  do
    local _ <close> = ms.no_grad()
    x[1] = 7
    x:fill_(1)
  end
  T.same(x:tolist(), {{1.0, 1.0}, {1.0, 1.0}})
  T.eq(x.grad_fn, nil)
end)

T.test("no_grad: the view ops record nothing", function()
  local x = leaf({{1, 2}, {3, 4}})
  local _ <close> = ms.no_grad()
  T.eq(x:t().requires_grad, false)
  T.eq(x:reshape(4).requires_grad, false)
  T.eq(ms.cat({x, x}).requires_grad, false)
  T.eq(x:mm(x).requires_grad, false)
  T.eq(x[1].requires_grad, false)
end)

T.test("grad_fn names", function()
  local x = leaf({{1, 2, 3}, {4, 5, 6}})
  T.eq(x:view(3, 2).grad_fn, "ViewBackward0")
  T.eq(x:reshape(6).grad_fn, "ViewBackward0")
  T.eq(x:narrow(2, 1, 2).grad_fn, "SliceBackward0")
  T.eq(x[1].grad_fn, "SelectBackward0")
  T.eq(x:t().grad_fn, "TransposeBackward0")
  T.eq(x:permute(2, 1).grad_fn, "PermuteBackward0")
  T.eq(x:unsqueeze(1).grad_fn, "UnsqueezeBackward0")
  T.eq(x:unsqueeze(1):squeeze(1).grad_fn, "SqueezeBackward1")
  T.eq(x:unsqueeze(1):squeeze().grad_fn, "SqueezeBackward0")
  T.eq(x:expand(2, 2, 3).grad_fn, "ExpandBackward0")
  T.eq(x:clone().grad_fn, "CloneBackward0")
  T.eq(x:t():contiguous().grad_fn, "CloneBackward0")
  T.eq(x:float().grad_fn, "ToCopyBackward0")
  T.eq(x:detach().requires_grad, false)
  T.eq(x:detach().grad_fn, nil)
end)

T.test("backward twice through a join needs retain_graph", function()
  local x = leaf({1, 2})
  local y = ms.cat({x, x}) * 1
  local s = y:sum()
  s:backward({retain_graph = true})
  s:backward()
  T.same(x.grad:tolist(), {4.0, 4.0})
  local z = ms.cat({x, x}):sum()
  z:backward()
  T.raises(function() z:backward() end, "second time")
end)

T.test("a linear layer from the pieces: addmm and matmul with a transposed weight", function()
  local x, w, b = rand(4, 3), rand(5, 3), rand(5)
  gradcheck(function(W, B) return ms.addmm(B, x, W:t()) end, {w, b})
  gradcheck(function(X, W, B) return X:matmul(W:t()) + B end, {x, w, b})
  gradcheck(function(X, W) return X:unsqueeze(1):expand(2, 4, 3):matmul(W:t()) end, {x, w})
end)

T.test("an operand saved by mm and then written in place is caught", function()
  local a, w = leaf({{1, 2}, {3, 4}}), leaf({{1, 0}, {0, 1}})
  local y = a * 1
  local z = y:mm(w)
  y:fill_(0)
  T.raises(function() z:sum():backward() end, "in-place")
end)

T.test("ms.tensor(t) is a new leaf, cut from t's graph", function()
  local x = leaf({1, 2}) * 2
  local c = ms.tensor(x)
  T.eq(c.requires_grad, false)
  T.eq(c.grad_fn, nil)
  T.eq(ms.tensor(x, {requires_grad = true}).grad_fn, nil)
end)

T.test("in-place writes into a view of a leaf that requires grad are refused", function()
  local x = leaf({{1, 2}, {3, 4}})
  T.raises(function() x:narrow(1, 1, 1):fill_(0) end, "view of a leaf")
  T.raises(function() x[1]:copy_(ms.zeros(2, {dtype = "float64"})) end, "view of a leaf")
  T.raises(function() x:t()[1] = 0 end, "view of a leaf")
  T.raises(function() x:view(4):add_(1) end, "view of a leaf")
  T.same(x:tolist(), {{1.0, 2.0}, {3.0, 4.0}})
  -- a reshape that had to copy is not a view: writing into it is fine
  local c = x:t():reshape(4)
  c[1] = 9
  T.same(x:tolist(), {{1.0, 2.0}, {3.0, 4.0}})
  do
    local _ <close> = ms.no_grad()
    x:narrow(1, 1, 1):fill_(0)
  end
  T.same(x:tolist(), {{0.0, 0.0}, {3.0, 4.0}})
end)

T.test("in-place writes through a view of a non-leaf reach its base (CopySlices)", function()
  local x, v = rand(3, 4), rand(4)
  gradcheck(function(a)
    local y = a * 2
    y:narrow(1, 2, 2):add_(a:narrow(1, 1, 2) * a:narrow(1, 2, 2))
    return y
  end, {x})
  gradcheck(function(a, b)
    local y = a * 1
    y[2]:copy_(b)
    y:select(2, 1):fill_(0)
    return y * a
  end, {x, v})
  gradcheck(function(a, b)
    local y = a * 1
    y:t()[2] = b:narrow(1, 1, 3)
    return y
  end, {x, v})
  gradcheck(function(a)
    local y = a + 1
    local flat = y:view(-1)
    flat:add_(a:view(-1) * a:view(-1))
    return y
  end, {x})
  -- the view itself follows its base after the write
  gradcheck(function(a)
    local y = a * 3
    local r = y[1]
    r:add_(a[2] * a[3])
    return r:unsqueeze(1) * y
  end, {x})
  local a = leaf({{1, 2}, {3, 4}})
  local y = a * 1
  local r = y[2]
  r:zero_()
  T.eq(y.grad_fn, "CopySlices")
  T.eq(r.grad_fn, "AsStridedBackward0")
  y:sum():backward()
  T.same(a.grad:tolist(), {{1.0, 1.0}, {0.0, 0.0}})
end)

T.finish()
