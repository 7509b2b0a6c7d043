-- test_bad_input.lua: every wrong argument raises a Lua error (never a crash) whose message
-- names the function, the argument, and what was expected versus given.
local T = require "testing"
local ms = require "moonshard"

local x = ms.zeros(2, 3)

T.test("sizes: wrong types", function()
  T.raises(function() ms.zeros("3") end, "zeros", "#1", "string '3'")
  T.raises(function() ms.zeros({ 2, "a" }) end, "zeros", "size", "string 'a'", "position 2")
  T.raises(function() ms.zeros({ "2" }) end, "zeros", "size", "string '2'", "position 1")
  T.raises(function() ms.zeros({ 2.5 }) end, "zeros", "size", "2.5", "position 1")
  T.raises(function() ms.ones(2.5) end, "ones", "size", "non-negative integer", "2.5")
  T.raises(function() ms.empty(2, "x") end, "empty", "#2", "string 'x'")
  T.raises(function() ms.rand({ true }) end, "rand", "size", "true")
  T.raises(function() ms.zeros(2, 3, "x") end, "zeros", "#3", "string 'x'")
  T.raises(function() x:view("a") end, "view", "#2", "string 'a'")
  T.raises(function() x:view(3, "a") end, "view", "#3", "size", "string 'a'")
  T.raises(function() x:reshape(2, {}) end, "reshape", "#3", "size", "table")
  T.raises(function() x:expand(2, 3, "z") end, "expand", "#4", "string 'z'")
end)

T.test("sizes: negative", function()
  T.raises(function() ms.zeros(-1) end, "zeros", "non-negative", "-1")
  T.raises(function() ms.ones(2, -3) end, "ones", "#2", "non-negative", "-3")
  T.raises(function() ms.ones { 2, -1 } end, "ones", "non-negative", "-1", "dim 2", "(2, -1)")
  T.raises(function() ms.empty { 4, -1 } end, "empty", "non-negative", "-1")
  T.raises(function() ms.zeros(-2) end, "zeros", "non-negative", "-2")
  T.raises(function() ms.rand(-1) end, "rand", "non-negative")
  T.raises(function() ms.randn { 2, -1 } end, "randn", "non-negative")
  T.raises(function() ms.full({ -1 }, 2) end, "full", "non-negative", "-1")
  T.raises(function() ms.full(2, -2, 0.5) end, "full", "non-negative", "-2")
  T.raises(function() ms.randint(3, { -2 }) end, "randint", "non-negative", "-2")
  T.raises(function() ms.eye(-2) end, "eye", "non-negative", "-2")
  T.raises(function() ms.linspace(0, 1, -3) end, "linspace", "non-negative", "-3")
  T.raises(function() ms.randperm(-5) end, "randperm", "non-negative", "-5")
  T.raises(function() x:view(-2, 3) end, "view", "size", "-2")
  T.raises(function() x:reshape(6, -3) end, "reshape", "-3")
  T.raises(function() x:expand(-2, 3) end, "expand", "-2")
end)

T.test("sizes: too many dims", function()
  local ones17 = {}
  for i = 1, 17 do ones17[i] = 1 end
  T.raises(function() ms.zeros(ones17) end, "zeros", "at most 16", "17")
  T.raises(function() ms.zeros(table.unpack(ones17)) end, "zeros", "at most 16")
  T.raises(function() ms.full(ones17, 1) end, "full", "at most 16")
  local args = { table.unpack(ones17) }
  args[#args + 1] = 2.0
  T.raises(function() ms.full(table.unpack(args)) end, "full", "at most 16", "17")
  T.raises(function() ms.ones(1):view(ones17) end, "view", "at most 16")
  T.raises(function() ms.ones(1):reshape(table.unpack(ones17)) end, "reshape", "at most 16")
  T.raises(function() ms.ones(1):expand(ones17) end, "expand", "at most 16")
  local nested = 1
  for _ = 1, 17 do nested = { nested } end
  T.raises(function() ms.tensor(nested) end, "tensor", "16")
  local sixteen = {}
  for i = 1, 16 do sixteen[i] = 1 end
  local y = ms.zeros(sixteen)
  T.eq(y:dim(), 16)
  T.raises(function() y:unsqueeze(1) end, "unsqueeze", "16")
  T.raises(function() ms.stack { y, y } end, "stack", "16")
  T.eq(ms.zeros(table.unpack(sixteen)):dim(), 16)
end)

T.test("huge sizes do not crash", function()
  T.raises(function() ms.zeros(2 ^ 40, 2 ^ 40) end, "zeros", "too large")
  T.raises(function() ms.zeros(math.maxinteger) end, "zeros")
  T.raises(function() ms.empty(1 << 62) end, "empty")
  T.raises(function() ms.eye(1 << 40) end, "eye")
  T.raises(function() ms.arange(0, 1e300) end, "arange", "too many elements")
  T.raises(function() ms.arange(0, 1e300, 1e-300) end, "arange", "too many elements")
  T.raises(function() ms.linspace(0, 1, 1 << 62) end, "linspace", "too large")
  -- Failed allocations: AddressSanitizer aborts on them unless told allocator_may_return_null=1.
  local asan = os.getenv("ASAN_OPTIONS")
  if asan == nil or asan:find("allocator_may_return_null=1", 1, true) then
    T.raises(function() ms.zeros(1 << 40) end, "zeros", "out of memory", "(1099511627776,)")
    T.raises(function() ms.ones(1 << 40, { dtype = "bool" }) end, "ones", "out of memory")
    T.raises(function() ms.arange(0, 1e12) end, "arange", "out of memory")
  end
end)

T.test("tensor expected: table, nil, number, string", function()
  T.raises(function() ms.view({ 1, 2 }, 2) end, "view", "#1", "a tensor", "table")
  T.raises(function() ms.narrow(nil, 1, 1, 1) end, "narrow", "#1", "a tensor", "nil")
  T.raises(function() ms.transpose(3, 1, 2) end, "transpose", "#1", "a tensor", "3")
  T.raises(function() ms.select("x", 1, 1) end, "select", "#1", "a tensor", "string 'x'")
  T.raises(function() ms.clone() end, "clone", "#1", "a tensor", "no value")
  T.raises(function() ms.contiguous({}) end, "contiguous", "#1", "table")
  T.raises(function() ms.squeeze(false) end, "squeeze", "#1", "false")
  T.raises(function() ms.chunk({}, 2) end, "chunk", "#1", "table")
  T.raises(function() ms.permute({}, 1) end, "permute", "#1", "table")
  T.raises(function() ms.flatten(nil) end, "flatten", "#1", "nil")
  T.raises(function() ms.expand_as(x, { 2, 3 }) end, "expand_as", "#2", "table")
  T.raises(function() x:copy_({ 1, 2, 3 }) end, "copy_")
  T.raises(function() ms.bernoulli({ 0.5 }) end, "bernoulli", "#1", "table")
  T.raises(function() ms.zeros_like(nil) end, "zeros_like", "#1", "nil")
  T.raises(function() ms.stack { x, "y" } end, "stack", "element 2", "string 'y'")
  T.raises(function() ms.cat(nil) end, "cat", "#1", "nil")
  T.raises(function() ms.Tensor.float({}) end, "float", "#1", "table")
  T.raises(function() ms.Tensor.tolist(5) end, "tolist", "#1", "5")
  T.raises(function() ms.Tensor.item("s") end, "item", "#1", "string 's'")
  T.raises(function() ms.Tensor.size({}) end, "size", "#1", "table")
end)

T.test("dims out of range: 0, ndim+1, -ndim-1", function()
  local dim_ops = {
    { "size", function(d) return x:size(d) end },
    { "stride", function(d) return x:stride(d) end },
    { "select", function(d) return x:select(d, 1) end },
    { "narrow", function(d) return x:narrow(d, 1, 1) end },
    { "transpose", function(d) return x:transpose(d, 1) end },
    { "transpose", function(d) return x:transpose(1, d) end },
    { "squeeze", function(d) return x:squeeze(d) end },
    { "flatten", function(d) return x:flatten(d) end },
    { "flatten", function(d) return x:flatten(1, d) end },
    { "chunk", function(d) return x:chunk(2, d) end },
    { "split", function(d) return x:split(1, d) end },
    { "cat", function(d) return ms.cat({ x, x }, d) end },
    { "permute", function(d) return x:permute(1, d) end },
  }
  for _, c in ipairs(dim_ops) do
    for _, d in ipairs { 0, 3, -3 } do
      T.raises(function() c[2](d) end, c[1], "dim", "got " .. d, "1..2 or -2..-1")
    end
    T.raises(function() c[2]("1") end, c[1], "dim", "an integer", "string '1'")
  end
  -- dims that insert one accept ndim + 1
  for _, d in ipairs { 0, 4, -4 } do
    T.raises(function() x:unsqueeze(d) end, "unsqueeze", "dim", "got " .. d, "1..3 or -3..-1")
    T.raises(function() ms.stack({ x, x }, d) end, "stack", "dim", "got " .. d, "1..3")
  end
  T.raises(function() x:unsqueeze() end, "unsqueeze", "dim", "no value")
  T.raises(function() x:transpose(1) end, "transpose", "dim1", "no value")
  -- a 0-dim tensor accepts dim 1 and -1 where torch accepts 0 and -1
  local s = ms.tensor(3)
  T.eq(s:squeeze(1):dim(), 0)
  T.eq(s:unsqueeze(1):dim(), 1)
  T.eq(s:flatten(1):dim(), 1)
  T.raises(function() s:squeeze(2) end, "squeeze", "dim", "got 2")
end)

T.test("indices out of range", function()
  T.raises(function() x:select(1, 3) end, "select", "index", "1..2", "got 3")
  T.raises(function() x:select(2, -4) end, "select", "index", "-3..-1", "got -4")
  T.raises(function() x:select(1, 0) end, "select", "index", "got 0")
  T.raises(function() x:select(1, "a") end, "select", "index", "string 'a'")
  T.raises(function() return x[5] end, "index", "got 5")
  T.raises(function() x:narrow(2, 4, 1) end, "narrow", "length", "exceeds", "size 3")
  T.raises(function() x:narrow(2, 5, 0) end, "narrow", "start", "got 5")
  T.raises(function() x:narrow(2, 2, 3) end, "narrow", "start 2 + length 3", "size 3")
  T.raises(function() x:narrow(2, 1, 1.5) end, "narrow", "length", "an integer")
end)

T.test("view, expand and permute mismatches", function()
  T.raises(function() x:view(4) end, "view", "(4,)", "invalid", "size 6")
  T.raises(function() x:view(4, 2) end, "view", "(4, 2)", "6")
  T.raises(function() x:reshape(7) end, "reshape", "(7,)", "6")
  T.raises(function() x:view(-1, 4) end, "view", "(-1, 4)", "6")
  T.raises(function() x:expand(2, 4) end, "expand", "4", "3", "(2, 4)", "(2, 3)")
  T.raises(function() x:expand(3) end, "expand", "number of sizes", "1", "2")
  T.raises(function() x:expand(4, 3) end, "expand", "4", "2", "dim -2")
  T.raises(function() x:expand(-1, 2, 3) end, "expand", "-1")
  T.raises(function() x:permute(2, 2) end, "permute", "dim 2 appears more than once")
  T.raises(function() x:permute(1, -2) end, "permute", "dim 1 appears more than once")
  T.raises(function() x:permute(1) end, "permute", "expected 2", "got 1")
  T.raises(function() x:permute { 1, 2, 3 } end, "permute", "expected 2", "got 3")
  T.raises(function() x:permute("a", 1) end, "permute", "#2", "dims", "string 'a'")
  T.raises(function() x:permute(1, 5) end, "permute", "#3", "dims", "got 5")
  T.raises(function() x:permute { 1, "b" } end, "permute", "dims", "string 'b'")
  T.raises(function() x:t():view(6) end, "view", "use reshape")
  T.raises(function() x:chunk("a") end, "chunk", "chunks", "string 'a'")
  T.raises(function() x:chunk(-1) end, "chunk", "positive", "-1")
  T.raises(function() x:split("a") end, "split", "split_size", "string 'a'")
  T.raises(function() x:split(-2) end, "split", "positive", "-2")
  T.raises(function() ms.cat({ x, ms.zeros(3, 2) }) end, "cat", "(2, 3)", "(3, 2)")
  T.raises(function() ms.stack({ x, ms.zeros(3, 2) }) end, "stack", "(2, 3)", "(3, 2)")
end)

T.test("dtypes and options", function()
  T.raises(function() ms.zeros(2, { dtype = "float128" }) end, "zeros", "option 'dtype'", "float128")
  T.raises(function() ms.zeros(2, { dtype = 5 }) end, "zeros", "option 'dtype'", "5")
  T.raises(function() ms.ones(2, { dtype = ms }) end, "ones", "option 'dtype'", "table")
  T.raises(function() x:to("complex") end, "to", "dtype", "complex")
  T.raises(function() x:to() end, "to", "#2", "no value")
  T.raises(function() ms.zeros(2, { requires_grad = true, dtype = "int64" }) end,
    "zeros", "floating point", "int64")
  T.raises(function() ms.full({ 2 }, 1, { requires_grad = true }) end, "full", "floating point", "int64")
  T.raises(function() ms.eye(2, { requires_grad = true, dtype = "bool" }) end, "eye", "bool")
  T.raises(function() ms.tensor({ true }, { requires_grad = true }) end, "tensor", "bool")
  T.raises(function() ms.randperm(3, { requires_grad = true }) end, "randperm", "floating point")
  T.raises(function() ms.tensor { 1 }:requires_grad_() end, "requires_grad_", "floating point", "int64")
  T.raises(function() ms.zeros(2, { foo = 1 }) end, "zeros: unknown option 'foo' (expected one of: device, dtype, requires_grad)")
  T.raises(function() ms.zeros(2, { 1 }) end, "zeros: unknown option [1] (expected one of: ")
  T.raises(function() ms.arange(3, { bad = true }) end, "arange", "unknown option 'bad'")
  T.raises(function() ms.linspace(0, 1, 3, { Dtype = "float32" }) end, "linspace", "unknown option 'Dtype'")
  T.raises(function() ms.eye(2, { step = 1 }) end, "eye", "unknown option 'step'")
  T.raises(function() ms.full({ 2 }, 1, { fill = 1 }) end, "full", "unknown option 'fill'")
  T.raises(function() ms.ones_like(x, { shape = 1 }) end, "ones_like", "unknown option 'shape'")
  T.raises(function() ms.randn(2, { mean = 0 }) end, "randn", "unknown option 'mean'")
  T.raises(function() ms.zeros(2, "float32") end, "zeros", "options", "string 'float32'")
  T.raises(function() ms.zeros(2, { dtype = "float32" }, 5) end, "zeros", "#3", "unexpected argument", "5")
  T.raises(function() ms.zeros(2, { device = 1 }) end, "zeros", "option 'device'", "1")
  T.raises(function() ms.manual_seed("x") end, "manual_seed", "seed", "string 'x'")
end)

T.test("operators with wrong operands", function()
  T.raises(function() return x + "a" end, "add", "right operand", "string 'a'")
  T.raises(function() return {} * x end, "mul", "left operand", "table")
  T.raises(function() return x + ms.zeros(4) end, "(2, 3)", "(4,)")
end)

T.test("a thousand bad calls leave the state usable", function()
  for i = 1, 1000 do
    pcall(ms.zeros, -i)
    pcall(ms.tensor, { { 1 }, { 2, 3 } })
    pcall(ms.tensor, { 1, 2 }, { requires_grad = true })
    pcall(ms.full_like, x, "x")
    pcall(x.view, x, 7)
    pcall(ms.cat, { x, ms.zeros(1) })
  end
  collectgarbage()
  T.same(ms.ones(2):tolist(), { 1, 1 })
end)


-- issue 17: output sizes of conv2d and pooling were computed without overflow checks; every
-- failing case needed a value >= 2^31 (a padding of 2^63-1 wrote out of bounds, a dilation of
-- 2^63-1 returned a 7x7 result from a 5x5 input, a kernel of 2^63-1 returned 1x1).
T.test("conv2d and pooling: sizes that overflow raise, naming the argument", function()
  local big, x, w = math.maxinteger, ms.rand(1, 1, 5, 5), ms.rand(1, 1, 3, 3)
  T.raises(function() ms.conv2d(x, w, { padding = big }) end, "conv2d", "padding", "too large")
  T.raises(function() ms.conv2d(x, w, { padding = { 1, 1 << 62 } }) end, "conv2d", "padding")
  T.raises(function() ms.conv2d(x, w, { dilation = big }) end, "conv2d", "dilation")
  T.raises(function() ms.conv2d(x, w, { dilation = 1 << 31 }) end, "conv2d", "kernel size")
  T.raises(function() ms.conv2d(x, w, { stride = big, padding = 1 << 61 }) end, "conv2d", "padding")
  T.raises(function() ms.conv2d(x, ms.rand(1, 1, 0, 3)) end, "conv2d", "kernel size", "at least 1")
  T.eq(ms.conv2d(x, w, { stride = big }):size(3), 1) -- a huge stride alone is fine: one window
  for _, f in ipairs { "max_pool2d", "avg_pool2d" } do
    T.raises(function() ms[f](x, big) end, f, "kernel_size")
    T.raises(function() ms[f](x, { 2, big }) end, f, "kernel_size")
    T.raises(function() ms[f](x, big, { padding = big // 2 }) end, f, "padding")
    T.raises(function() ms[f](x, 1 << 31) end, f)
    T.eq(ms[f](x, 2, { stride = big }):size(3), 1)
    T.eq(ms[f](x, 2, { stride = big, ceil_mode = true }):size(4), 1)
  end
  T.raises(function() ms.max_pool2d(x, 2, { dilation = big }) end, "max_pool2d", "dilation")
  T.raises(function() ms.adaptive_avg_pool2d(x, big) end, "adaptive_avg_pool2d", "output_size", "too large")
  T.raises(function() ms.adaptive_avg_pool2d(ms.rand(0, 1, 5, 5), { 1, big }) end, "adaptive_avg_pool2d")
end)

T.test("views, splits and cat: sizes that overflow raise", function()
  local big = math.maxinteger
  T.raises(function() ms.zeros(0):view(1 << 32, 1 << 32, 0) end, "view", "too large")
  T.raises(function() ms.zeros(0):reshape(big, 2, 0) end, "reshape", "too large")
  T.raises(function() ms.zeros(0, 1 << 40, 1 << 40) end, "zeros", "too large")
  T.raises(function() ms.zeros(4):narrow(1, 2, big) end, "narrow", "length", tostring(big))
  T.raises(function() ms.zeros(4):split({ big, 2 }) end, "split", "split_sizes")
  T.raises(function() ms.zeros(4):chunk((1 << 32) + 1) end, "chunk", "chunks")
  local e = ms.ones(1):expand((1 << 60) - 1)
  T.raises(function() ms.cat({ e, e, e, e, e, e, e, e, e }) end, "cat", "sum")
end)

T.test("large integers appear whole in messages", function()
  T.raises(function() ms.frombuffer("abcd", { count = (1 << 32) + 1 }) end, "frombuffer", "count 4294967297")
  T.raises(function() ms.frombuffer("abcd", { offset = (1 << 32) + 1 }) end, "frombuffer", "offset 4294967297")
  T.raises(function() ms.zeros(3):narrow(1, (1 << 32) + 1, 1) end, "narrow", "4294967297")
end)

T.test("wrong-typed extra arguments raise, naming the argument", function()
  local x = ms.ones(2, 3)
  T.raises(function() x:sum("x") end, "sum", "#2", "unexpected argument", "string 'x'")
  T.raises(function() x:mean(1, true, "x") end, "mean", "#4", "unexpected argument")
  T.raises(function() x:sum({ dim = 1 }, 5) end, "sum", "#3", "unexpected argument", "5")
  T.raises(function() ms.conv2d(ms.rand(1, 1, 3, 3), ms.rand(1, 1, 3, 3), nil, {}, "x") end, "conv2d", "#5")
  T.raises(function() ms.max_pool2d(ms.rand(1, 1, 4, 4), 2, {}, 1) end, "max_pool2d", "#4")
  T.eq(x:sum(nil, nil):item(), 6) -- trailing nils are no arguments
end)

-- Every elementwise op, out of place and in place, as a method and as a function: an argument
-- after the operands raises instead of passing silently (x:relu("x") is not x:relu()).
T.test("extra arguments raise for every unary and binary op", function()
  local checked = 0
  local function expect(name, k, f)
    T.raises(f, name .. ": bad argument #" .. k .. ":", "unexpected argument")
    checked = checked + 1
  end
  for _, row in ipairs(ms._op_info.unary) do
    local op = row.name
    for _, name in ipairs({ op, op .. "_" }) do
      if ms[name] then
        expect(name, 2, function() ms.ones(2)[name](ms.ones(2), "x") end)
        expect(name, 2, function() ms[name](ms.ones(2), 1) end)
      end
    end
  end
  for _, row in ipairs(ms._op_info.binary) do
    local op = row.name
    for _, name in ipairs({ op, op .. "_" }) do
      if ms[name] then
        local k = (op == "add" or op == "sub") and 4 or 3 -- add/sub take an options table at #3
        local extra = k == 4 and { {}, "z" } or { "z" }
        expect(name, k, function() ms.ones(2)[name](ms.ones(2), ms.ones(2), table.unpack(extra)) end)
      end
    end
  end
  T.truthy(checked >= 2 * 2 * #ms._op_info.unary, "every unary op checked (" .. checked .. ")")
  -- the operators still work: Lua passes __unm its operand twice
  T.same((-ms.ones(2)):tolist(), { -1, -1 })
  T.same((ms.ones(2) + 1):tolist(), { 2, 2 })
  T.same(ms.ones(2):relu(nil):tolist(), { 1, 1 }) -- a trailing nil is no argument
end)

T.test("extra arguments raise for the other fixed-arity bindings", function()
  local a, m = ms.ones(2, 2), ms.ones(2, 2):bool()
  local cases = {
    { "matmul", function() a:matmul(a, "x") end, 3 }, { "mm", function() a:mm(a, 1) end, 3 },
    { "dot", function() ms.dot(ms.ones(2), ms.ones(2), 1) end, 3 }, { "equal", function() a:equal(a, 1) end, 3 },
    { "float", function() a:float("x") end, 2 }, { "item", function() ms.ones(1):item(1) end, 2 },
    { "tolist", function() a:tolist(1) end, 2 }, { "numel", function() a:numel(1) end, 2 },
    { "dim", function() a:dim("x") end, 2 }, { "size", function() a:size(1, "x") end, 3 },
    { "stride", function() a:stride(1, 2) end, 3 }, { "clamp", function() a:clamp(0, 1, 2) end, 4 },
    { "where", function() ms.where(m, a, a, 1) end, 4 }, { "masked_fill", function() a:masked_fill(m, 1, 2) end, 4 },
    { "fill_", function() a:fill_(1, 2) end, 3 }, { "zero_", function() a:zero_(0) end, 2 },
    { "copy_", function() a:copy_(a, true) end, 3 }, { "maximum", function() a:max(a, 1) end, 3 },
  }
  for _, c in ipairs(cases) do T.raises(c[2], c[1] .. ": bad argument #" .. c[3] .. ":", "unexpected argument") end
  T.raises(function() a:to("float64", "x") end, "to", "#3", "options table")
end)

-- The shape ops, autograd, nn and random bindings of fixed arity: one valid call each plus one
-- extra string argument must raise, naming the binding and the position of the extra argument.
T.test("extra arguments raise for the shape, autograd and nn bindings", function()
  local a, i = ms.ones(2, 2), ms.tensor({ 1, 2 })
  local cases = {
    { "view_as", 3, function() a:view_as(a, "x") end }, { "reshape_as", 3, function() a:reshape_as(a, "x") end },
    { "expand_as", 3, function() a:expand_as(a, "x") end }, { "narrow", 5, function() a:narrow(1, 1, 1, "x") end },
    { "select", 4, function() a:select(1, 1, "x") end }, { "transpose", 4, function() a:transpose(1, 2, "x") end },
    { "t", 2, function() a:t("x") end }, { "permute", 3, function() a:permute({ 2, 1 }, "x") end },
    { "squeeze", 3, function() a:squeeze(1, "x") end }, { "unsqueeze", 3, function() a:unsqueeze(1, "x") end },
    { "flatten", 4, function() a:flatten(1, 2, "x") end }, { "contiguous", 2, function() a:contiguous("x") end },
    { "clone", 2, function() a:clone("x") end }, { "index_select", 4, function() a:index_select(1, i, "x") end },
    { "chunk", 4, function() a:chunk(2, 1, "x") end }, { "split", 4, function() a:split(1, 1, "x") end },
    { "cat", 3, function() ms.cat({ a, a }, 1, "x") end }, { "stack", 3, function() ms.stack({ a, a }, 1, "x") end },
    { "detach", 2, function() a:detach("x") end }, { "requires_grad_", 3, function() a:clone():requires_grad_(true, "x") end },
    { "register_hook", 3, function() a:clone():requires_grad_():register_hook(function() end, "x") end },
    { "register_post_accumulate_grad_hook", 3,
      function() a:clone():requires_grad_():register_post_accumulate_grad_hook(function() end, "x") end },
    { "set_grad_enabled", 2, function() ms.set_grad_enabled(true, "x") end },
    { "softmax", 3, function() a:softmax(1, "x") end }, { "log_softmax", 3, function() a:log_softmax(1, "x") end },
    { "silu", 2, function() ms.silu(a, "x") end }, { "linear", 4, function() ms.linear(a, a, nil, "x") end },
    { "adaptive_avg_pool2d", 3, function() ms.adaptive_avg_pool2d(ms.ones(1, 1, 2, 2), 1, "x") end },
    { "bernoulli", 3, function() ms.bernoulli(ms.rand(2), 0.5, "x") end },
    { "uniform_", 4, function() a:clone():uniform_(0, 1, "x") end },
    { "normal_", 4, function() a:clone():normal_(0, 1, "x") end },
    { "manual_seed", 2, function() ms.manual_seed(1, "x") end },
    { "set_num_threads", 2, function() ms.set_num_threads(ms.get_num_threads(), "x") end },
    { "gather", 4, function() a:gather(1, i:view(2, 1), "x") end },
    { "scatter", 5, function() a:scatter(1, i:view(2, 1), 0, "x") end },
    { "scatter_", 5, function() a:clone():scatter_(1, i:view(2, 1), 0, "x") end },
    { "scatter_add", 5, function() a:scatter_add(1, i:view(2, 1), a, "x") end },
    { "scatter_add_", 5, function() a:clone():scatter_add_(1, i:view(2, 1), a, "x") end },
    { "sort", 4, function() a:sort(1, true, "x") end }, { "argsort", 4, function() a:argsort(1, true, "x") end },
    { "topk", 6, function() a:topk(1, 1, true, true, "x") end },
    { "cumsum", 4, function() a:cumsum(1, nil, "x") end }, { "cumprod", 4, function() a:cumprod(1, nil, "x") end },
  }
  for _, c in ipairs(cases) do
    T.raises(c[3], c[1] .. ": bad argument #" .. c[2] .. ":", "unexpected argument", "string 'x'")
  end
  T.truthy(ms.is_grad_enabled(), "set_grad_enabled raised before changing the mode")
  -- trailing nils are no arguments, and the varargs forms still take their sizes
  T.same(a:t(nil):size(), { 2, 2 })
  T.same(a:permute(2, 1):size(), { 2, 2 })
  T.same(ms.cat({ a, a }, 1, nil):size(), { 4, 2 })
end)

T.finish()
