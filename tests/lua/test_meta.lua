-- test_meta.lua: the meta device and deferred initialisation (docs/deferred-init.md): meta
-- tensors have shapes, strides, dtypes and views but no data, and every op that would touch
-- data fails naming itself; initialisers run on meta reserve the generator's blocks as the real
-- ones do and replay bit-identically (every nn.init function, views, dtypes); nn.deferred_init
-- builds the GPT with the parameters an ordinary construction from the same seed gives (also
-- converted to float64 or bfloat16 on meta);
-- to_empty, the reset_parameters fallback and the errors.
local ms = require "moonshard"
local nn = require "moonshard.nn"
local F = require "moonshard.functional"
local T = require "testing"
local gpt = require "moonshard.models.gpt"

local TINY = { n_layer = 2, n_head = 2, n_embd = 16, block_size = 8, vocab_size = 11 }
local NO_DATA = "meta tensors have no data"

local function params_of(model)
  local out = {}
  for name, p in model:named_parameters() do out[name] = p end
  return out
end

-- Every parameter of got equals want's, bit for bit (ms.equal), with the same names.
local function check_same_params(got, want, what)
  local w, n = params_of(want), 0
  for name, p in pairs(params_of(got)) do
    T.truthy(w[name] ~= nil, what .. ": unexpected parameter " .. name)
    T.truthy(not p.is_meta, what .. ": " .. name .. " is still meta")
    T.truthy(ms.equal(p, w[name]), what .. ": " .. name .. " differs")
    n = n + 1
  end
  for _ in pairs(w) do n = n - 1 end
  T.eq(n, 0, what .. ": parameter count")
end

T.test("meta tensors: factories, shapes, strides, views and the repr, no data", function()
  local t = ms.empty(3, 4, { device = "meta" })
  T.eq(t.device, "meta")
  T.truthy(t.is_meta)
  T.truthy(not ms.empty(2).is_meta)
  T.eq(tostring(t.shape), "torch.Size([3, 4])")
  T.same(t:stride(), { 4, 1 })
  T.eq(ms.zeros(2, { device = "meta", dtype = "bfloat16" }).dtype, "bfloat16")
  for _, f in ipairs({ ms.zeros, ms.ones, ms.rand, ms.randn }) do T.eq(f(5, { device = "meta" }).device, "meta") end
  T.eq(ms.full({ 2 }, 3, { device = "meta" }).device, "meta")
  for _, f in ipairs({ ms.zeros_like, ms.ones_like, ms.empty_like, ms.randn_like }) do T.eq(f(t).device, "meta") end
  local v = t:view(12)
  T.eq(v.device, "meta")
  T.eq(tostring(t:t().shape), "torch.Size([4, 3])")
  T.same(t:t():stride(), { 1, 4 })
  T.eq(tostring(t:narrow(2, 2, 2).shape), "torch.Size([3, 2])")
  T.eq(tostring(t[2].shape), "torch.Size([4])")
  T.eq(ms.ones(2, 3):to("meta").device, "meta")
  T.eq(tostring(t), "tensor(..., device='meta', size=(3, 4))")
end)

T.test("every op that would read or write meta data fails naming the op", function()
  local a = ms.zeros(2, 3, { device = "meta" })
  local cases = {
    add = function() return a + 1 end,
    sum = function() return a:sum() end,
    mm = function() return ms.mm(a, a:t()) end,
    tolist = function() return a:tolist() end,
    item = function() return a[1][1]:item() end,
    to = function() return a:to("cpu") end,
    copy_ = function() return ms.zeros(2, 3):copy_(a) end,
    layer_norm = function() return F.layer_norm(a, { 3 }) end,
    gelu = function() return F.gelu(a) end,
    linear = function() return F.linear(ms.zeros(4, 3), a) end,
    exp = function() return a:exp() end,
  }
  for op, fn in pairs(cases) do
    local err = T.raises(fn, NO_DATA)
    T.truthy(err:find(op .. ": ", 1, true), "the error names " .. op .. ": " .. err)
  end
  T.raises(function() return ms.empty(2, { device = "mars" }) end, "\"meta\"")
end)

T.test("ms.device scopes the factories' default device and restores it, also on error", function()
  T.eq(ms.get_default_device(), "cpu")
  do
    local _ <close> = ms.device("meta")
    T.eq(ms.get_default_device(), "meta")
    T.eq(ms.zeros(3).device, "meta")
    T.eq(ms.randn(3).device, "meta")
    T.eq(ms.zeros(3, { device = "cpu" }).device, "cpu")
    do
      local _ <close> = ms.device("cpu")
      T.eq(ms.ones(1).device, "cpu")
    end
    T.eq(ms.ones(1).device, "meta")
  end
  T.eq(ms.get_default_device(), "cpu")
  pcall(function()
    local _ <close> = ms.device("meta")
    error("boom")
  end)
  T.eq(ms.get_default_device(), "cpu")
  T.eq(tostring(ms.device("meta")), "device(type='meta')")
  ms.device("cpu") -- the scope above is left unclosed on purpose: reset
end)

-- Runs init(t) on a meta tensor and on an ordinary one from the same seed; the generator must
-- be left in the same place and the replay must equal the ordinary values.
local function check_replay(what, shape, dtype, init)
  ms.manual_seed(123)
  local real = ms.empty(shape, { dtype = dtype })
  init(real)
  local after_real = ms.rand(8)
  ms.manual_seed(123)
  local meta = ms.empty(shape, { dtype = dtype, device = "meta" })
  init(meta)
  local after_meta = ms.rand(8)
  T.truthy(ms.equal(after_meta, after_real), what .. ": the generator moved differently on meta")
  T.truthy(ms._meta_records(meta) > 0, what .. ": nothing recorded")
  ms._meta_materialize(meta, "cpu", true)
  T.truthy(ms.equal(meta, real), what .. ": the replay differs")
  T.eq(ms._meta_records(meta), 0, what .. ": records left after materialising")
end

T.test("every nn.init initialiser replays bit-identically, on views and in every float dtype", function()
  local init = nn.init
  local inits = {
    uniform_ = function(t) init.uniform_(t, -2, 3) end,
    normal_ = function(t) init.normal_(t, 1, 0.5) end,
    constant_ = function(t) init.constant_(t, 0.25) end,
    zeros_ = init.zeros_,
    ones_ = init.ones_,
    eye_ = init.eye_,
    xavier_uniform_ = function(t) init.xavier_uniform_(t, { gain = 2 }) end,
    xavier_normal_ = init.xavier_normal_,
    kaiming_uniform_ = function(t) init.kaiming_uniform_(t, { a = math.sqrt(5) }) end,
    kaiming_normal_ = function(t) init.kaiming_normal_(t, { mode = "fan_out", nonlinearity = "relu" }) end,
  }
  for name, fn in pairs(inits) do
    for _, dtype in ipairs({ "float32", "float64", "bfloat16" }) do
      check_replay(name .. " " .. dtype, { 7, 5 }, dtype, fn)
    end
  end
  -- layered writes: a draw, then a row and a transposed column written over it
  check_replay("layers", { 6, 9 }, "float32", function(t)
    local _ <close> = ms.no_grad()
    t:normal_(0, 0.02)
    t[3]:fill_(0)
    t:t()[4]:uniform_(-1, 1)
    t:narrow(1, 2, 3):narrow(2, 5, 4):normal_(5, 1)
  end)
end)

T.test("a draw covering the whole storage replaces the records before it", function()
  local t = ms.empty(4, 4, { device = "meta" })
  t:uniform_(0, 1)
  t[1]:fill_(3)
  T.eq(ms._meta_records(t), 2)
  t:normal_(0, 1)
  T.eq(ms._meta_records(t), 1)
end)

T.test("nn.deferred_init: the GPT materialises to the parameters of one built normally", function()
  ms.manual_seed(7)
  local ref = gpt.GPT(TINY)
  local after_ref = ms.rand(4)
  ms.manual_seed(7)
  local m = nn.deferred_init(gpt.GPT, TINY)
  T.truthy(ms.equal(ms.rand(4), after_ref), "the generator after building on meta")
  T.eq(ms.get_default_device(), "cpu")
  for name, p in m:named_parameters() do T.truthy(p.is_meta, name .. " is not meta") end
  T.truthy(m.transformer.wte.weight.requires_grad)
  nn.materialize_module(m)
  check_same_params(m, ref, "GPT")
  T.truthy(rawequal(m.lm_head.weight, m.transformer.wte.weight), "the tie is kept")
  -- and it trains: a forward and backward on the materialised model
  local idx = ms.randint(1, 12, { 2, 8 })
  local _, loss = m(idx, idx)
  loss:backward()
  T.truthy(m.transformer.wte.weight.grad ~= nil)
end)

T.test("a model converted on meta (gpt:double(), bfloat16) replays as initialised, then converted", function()
  for _, dtype in ipairs({ "float64", "bfloat16" }) do
    ms.manual_seed(5)
    local ref = gpt.GPT(TINY):to(dtype)
    ms.manual_seed(5)
    local m = nn.deferred_init(function() return gpt.GPT(TINY):to(dtype) end)
    T.eq(m.transformer.wte.weight.dtype, dtype)
    T.truthy(m.transformer.wte.weight.is_meta)
    nn.materialize_module(m)
    check_same_params(m, ref, "GPT " .. dtype)
    T.truthy(rawequal(m.lm_head.weight, m.transformer.wte.weight), "the tie is kept")
  end
  -- a view that is not its whole storage carries no records (its copy would not line up)
  local t = ms.empty(4, 4, { device = "meta" })
  t:normal_()
  T.eq(ms._meta_records(t:t():contiguous()), 0)
  T.eq(ms._meta_records(t:double()), 1)
end)

T.test("a module without records falls back to its reset_parameters; without one, an error", function()
  ms.manual_seed(3)
  local ref = nn.Linear(5, 4)
  ms.manual_seed(3)
  local lin = nn.Linear(5, 4)
  lin:to("meta") -- moved to meta: no records
  T.eq(ms._meta_records(lin.weight), 0)
  ms.manual_seed(3)
  nn.materialize_module(nn.Sequential(lin))
  check_same_params(lin, ref, "Linear's reset_parameters")
  local Bare = nn.Module:extend("Bare")
  function Bare:init() self.w = nn.Parameter(ms.empty(3, { device = "meta" })) end
  T.raises(function() nn.materialize_module(Bare()) end, "nn.materialize_module: parameter 'w' of Bare has no "
    .. "recorded initialiser", "no reset_parameters")
  T.raises(function() nn.materialize_module(Bare(), { device = "meta" }) end, "option 'device'")
  T.raises(function() nn.materialize_module(Bare(), { devices = "cpu" }) end, "nn.materialize_module: unknown option 'devices' (expected one of: device, recurse)")
  T.raises(function() nn.deferred_init(42) end, "nn.deferred_init: bad argument #1 (fn)")
end)

T.test("to_empty gives meta parameters uninitialised storage, shapes and ties kept", function()
  local m = nn.deferred_init(gpt.GPT, TINY)
  m:to_empty({ device = "cpu" })
  for name, p in m:named_parameters() do
    T.eq(p.device, "cpu", name)
    T.eq(ms._meta_records(p), 0, name)
  end
  T.truthy(rawequal(m.lm_head.weight, m.transformer.wte.weight), "the tie is kept")
  T.eq(tostring(m.transformer.wte.weight.shape), "torch.Size([11, 16])")
  m:reset_parameters() -- PyTorch's recipe after to_empty: real values from here on
  T.truthy(m.transformer.wte.weight:abs():sum():item() > 0)
end)

T.finish()
