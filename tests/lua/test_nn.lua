-- test_nn.lua: the nn library (moonshard.nn, moonshard.nn_init, moonshard.functional): the
-- Module system, reprs against PyTorch 1.13's (strings printed by gen_nn_reference.py),
-- state_dict, hooks, containers, init statistics, and forwards where the native ops exist
-- (cases whose ms.* op is missing print "skip" and pass).
local T = require "testing"
local ms = require "moonshard"
local nn = require "moonshard.nn"
local F = require "moonshard.functional"

local function has(...)
  for _, name in ipairs({ ... }) do
    if ms[name] == nil then return false end
  end
  return true
end

-- Runs fn only when every named native op exists; otherwise prints why it was skipped.
local function test_native(name, ops, fn)
  if has(table.unpack(ops)) then
    T.test(name, fn)
  else
    print(("skip %s (needs ms.%s)"):format(name, table.concat(ops, ", ms.")))
  end
end

local function shape(t) return t.shape end

local function list_of(size)
  local out = {}
  for i = 1, #size do out[i] = size[i] end
  return out
end

-- The seed's model (PyTorch's FSDP MNIST example), a user module built with nn.Module:extend.
local Net = require "moonshard.seed_net"

local NET_REPR = [[
Net(
  (conv1): Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1))
  (conv2): Conv2d(32, 64, kernel_size=(3, 3), stride=(1, 1))
  (dropout1): Dropout(p=0.25, inplace=False)
  (dropout2): Dropout(p=0.5, inplace=False)
  (fc1): Linear(in_features=9216, out_features=128, bias=True)
  (fc2): Linear(in_features=128, out_features=10, bias=True)
)]]

local NET_PARAMS = {
  { "conv1.weight", { 32, 1, 3, 3 } }, { "conv1.bias", { 32 } },
  { "conv2.weight", { 64, 32, 3, 3 } }, { "conv2.bias", { 64 } },
  { "fc1.weight", { 128, 9216 } }, { "fc1.bias", { 128 } },
  { "fc2.weight", { 10, 128 } }, { "fc2.bias", { 10 } },
}

T.test("Net repr is PyTorch's", function()
  T.eq(tostring(Net()), NET_REPR)
end)

T.test("Net named_parameters: names, shapes, count", function()
  local model = Net()
  local i, total = 0, 0
  for name, p in model:named_parameters() do
    i = i + 1
    T.eq(name, NET_PARAMS[i][1])
    T.same(list_of(shape(p)), NET_PARAMS[i][2])
    T.truthy(p.requires_grad, name .. " requires grad")
    T.truthy(nn.is_parameter(p), name .. " is a parameter")
    total = total + p:numel()
  end
  T.eq(i, #NET_PARAMS)
  T.eq(total, 1199882)
  local params = model:parameters()
  T.eq(#params, 8)
  T.truthy(rawequal(params[5], model.fc1.weight), "parameters() gives the module's own tensors")
  T.eq(#model.conv1:parameters(), 2)
  T.eq(#model:parameters(false), 0, "recurse = false")
end)

T.test("state_dict: keys in order, pairs in order, detached", function()
  local model = Net()
  local sd, keys = model:state_dict()
  local want = {}
  for i, e in ipairs(NET_PARAMS) do want[i] = e[1] end
  T.same(keys, want)
  local seen = {}
  for k, v in pairs(sd) do
    seen[#seen + 1] = k
    T.truthy(ms.is_tensor(v))
    T.eq(v.requires_grad, false, "state_dict tensors are detached")
  end
  T.same(seen, want)
  -- detached tensors share storage with the parameters
  do
    local _ <close> = ms.no_grad()
    sd["fc2.bias"]:fill_(3)
  end
  T.eq(model.fc2.bias[1]:item(), 3)
  local _, pkeys = model:state_dict({ prefix = "m." })
  T.eq(pkeys[1], "m.conv1.weight")
  local kv = model:state_dict({ keep_vars = true })
  T.truthy(rawequal(kv["fc1.weight"], model.fc1.weight), "keep_vars gives the parameters")
end)

T.test("state_dict with buffers (BatchNorm) and non-persistent buffers", function()
  local bn = nn.BatchNorm2d(8)
  local _, keys = bn:state_dict()
  T.same(keys, { "weight", "bias", "running_mean", "running_var", "num_batches_tracked" })
  T.eq(bn.num_batches_tracked.dtype, "int64")
  T.eq(bn.num_batches_tracked:dim(), 0)
  local names = {}
  for name in bn:named_buffers() do names[#names + 1] = name end
  T.same(names, { "running_mean", "running_var", "num_batches_tracked" })
  local M = nn.Module:extend("WithBuffers")
  function M:init()
    self:register_buffer("kept", ms.zeros(2))
    self:register_buffer("scratch", ms.zeros(2), false)
  end
  local m = M()
  local _, k2 = m:state_dict()
  T.same(k2, { "kept" })
  T.eq(#m:buffers(), 2)
  T.truthy(ms.is_tensor(m.scratch))
  m.kept = ms.ones(3) -- assigning a tensor to a buffer name updates the buffer
  T.eq(m:state_dict().kept:numel(), 3)
end)

T.test("load_state_dict copies values and round-trips", function()
  ms.manual_seed(1)
  local a = Net()
  local b = Net()
  T.truthy(not a.fc2.weight:equal(b.fc2.weight))
  local r = b:load_state_dict(a:state_dict())
  T.eq(#r.missing_keys, 0)
  T.eq(#r.unexpected_keys, 0)
  for name, p in a:named_parameters() do
    T.truthy(p:equal(b:get_parameter(name)), name .. " copied")
  end
  T.truthy(b.fc1.weight.requires_grad, "still a parameter that requires grad")
  T.truthy(not rawequal(a.fc1.weight, b.fc1.weight), "copied, not shared")
  -- a plain table of tensors works too
  local plain = {}
  for k, v in pairs(a:state_dict()) do plain[k] = v:clone() end
  b:load_state_dict(plain)
  local bn1, bn2 = nn.BatchNorm1d(4), nn.BatchNorm1d(4)
  do
    local _ <close> = ms.no_grad()
    bn1.running_mean:fill_(2)
    bn1.num_batches_tracked:fill_(7)
  end
  bn2:load_state_dict(bn1:state_dict())
  T.eq(bn2.running_mean[1]:item(), 2)
  T.eq(bn2.num_batches_tracked:item(), 7)
end)

T.test("load_state_dict errors: missing, unexpected, size mismatch", function()
  local model = Net()
  local sd = {}
  for k, v in pairs(model:state_dict()) do sd[k] = v:clone() end
  sd["fc2.bias"] = nil
  sd["fc2.weight"] = nil
  sd["extra.weight"] = ms.zeros(1)
  sd["fc1.bias"] = ms.zeros(127)
  local before = model.conv1.weight:clone()
  sd["conv1.weight"] = ms.zeros(32, 1, 3, 3)
  local err = T.raises(function() model:load_state_dict(sd) end,
    "Error(s) in loading state_dict for Net:",
    'Missing key(s) in state_dict: "fc2.weight", "fc2.bias".',
    'Unexpected key(s) in state_dict: "extra.weight".',
    "size mismatch for fc1.bias: copying a param with shape torch.Size([127]) from checkpoint, " ..
    "the shape in current model is torch.Size([128]).")
  -- torch's order: missing, unexpected, then size mismatches
  T.truthy(err:find("Missing", 1, true) < err:find("Unexpected", 1, true))
  T.truthy(err:find("Unexpected", 1, true) < err:find("size mismatch", 1, true))
  T.truthy(model.conv1.weight:equal(before), "nothing is copied when loading fails")
  -- not strict: missing and unexpected are reported, size mismatches still raise
  T.raises(function() model:load_state_dict(sd, { strict = false }) end, "size mismatch for fc1.bias")
  sd["fc1.bias"] = ms.zeros(128)
  local r = model:load_state_dict(sd, { strict = false })
  T.same(r.missing_keys, { "fc2.weight", "fc2.bias" })
  T.same(r.unexpected_keys, { "extra.weight" })
  T.eq(model.conv1.weight:abs():sum():item(), 0)
  T.raises(function() model:load_state_dict(42) end, "expected a table")
end)

T.test("train/eval set the flag on every module", function()
  local model = Net()
  T.eq(model.training, true)
  T.truthy(rawequal(model:eval(), model), "eval returns self")
  for _, m in ipairs(model:modules()) do T.eq(m.training, false) end
  model:train()
  for _, m in ipairs(model:modules()) do T.eq(m.training, true) end
  model:train(false)
  T.eq(model.dropout1.training, false)
  T.raises(function() model:train("yes") end, "boolean")
  -- Dropout is the identity in eval mode
  local x = ms.randn(4, 5)
  T.truthy(rawequal(model.dropout1(x), x))
end)

-- A module whose forward needs no native nn op.
local Double = nn.Module:extend("Double")
function Double:forward(x) return x * 2 end

T.test("forward hooks and pre-hooks", function()
  local m = Double()
  local calls = {}
  local h1 = m:register_forward_pre_hook(function(mod, x)
    calls[#calls + 1] = "pre"
    T.truthy(rawequal(mod, m))
    return x + 1
  end)
  local h2 = m:register_forward_hook(function(mod, inputs, out)
    calls[#calls + 1] = "post"
    T.eq(inputs.n, 1)
    T.eq(inputs[1]:item(), 4) -- the input as the pre-hook left it
    return out * 10
  end)
  T.eq(m(ms.tensor(3.0)):item(), 80)
  T.same(calls, { "pre", "post" })
  h2:remove()
  T.eq(m(ms.tensor(3.0)):item(), 8)
  h1:remove()
  T.eq(m(ms.tensor(3.0)):item(), 6)
  -- a hook returning nothing leaves values alone
  m:register_forward_hook(function() end)
  T.eq(m(ms.tensor(3.0)):item(), 6)
  T.raises(function() m:register_forward_hook(5) end, "expected a function")
  T.raises(function() nn.Module()(1) end, 'Module [Module] is missing the required "forward" function')
end)

T.test("registration by assignment, removal and errors", function()
  local M = nn.Module:extend("M")
  function M:init()
    self.b = nn.Identity()
    self.a = nn.Parameter(ms.zeros(2))
    self.scale = 3
    self.a2 = nn.Linear(1, 1)
  end
  local m = M()
  local names = {}
  for name in m:named_parameters() do names[#names + 1] = name end
  T.same(names, { "a", "a2.weight", "a2.bias" })
  local kids = {}
  for name in m:named_children() do kids[#kids + 1] = name end
  T.same(kids, { "b", "a2" })
  T.eq(m.scale, 3)
  T.raises(function() m.a = ms.zeros(2) end, "cannot assign a float32 tensor as parameter 'a'")
  T.raises(function() m.b = 5 end, "cannot assign number as child module 'b'")
  m.a = nil
  T.eq(m.a, nil)
  T.eq(#m:parameters(false), 0)
  m.b = nn.Parameter(ms.ones(1)) -- a name may change kind by assignment
  T.eq(#m:children(), 1)
  T.truthy(nn.is_parameter(m.b))
  T.raises(function() m:register_parameter("x.y", nn.Parameter(ms.ones(1))) end, "can't contain \".\"")
  T.raises(function() m:register_parameter("scale", nn.Parameter(ms.ones(1))) end, "attribute 'scale' already exists")
  T.raises(function() m:add_module("train", nn.ReLU()) end, "attribute 'train' already exists")
  T.raises(function() m:register_parameter("w", ms.ones(1)) end, "nn.Parameter or nil required")
  T.raises(function() m:add_module("c", 3) end, "is not a Module subclass")
  T.truthy(m:isinstance(M) and m:isinstance(nn.Module) and not m:isinstance(nn.Linear))
  T.truthy(nn.Linear(1, 1):isinstance(nn.Module))
  T.eq(tostring(M), "class M")
  T.raises(function() m:extend("X") end, "call it on a class")
end)

T.test("nn.Parameter", function()
  local t = ms.zeros(3)
  local p = nn.Parameter(t)
  T.truthy(p.requires_grad and p.is_leaf and nn.is_parameter(p))
  T.truthy(not nn.is_parameter(t) and not t.requires_grad)
  do
    local _ <close> = ms.no_grad()
    p:fill_(5)
  end
  T.eq(t[1]:item(), 5, "shares storage with its data")
  local frozen = nn.Parameter(ms.zeros(2), false)
  T.truthy(nn.is_parameter(frozen) and not frozen.requires_grad)
  local nonleaf = ms.ones(2, { requires_grad = true }) * 2
  local q = nn.Parameter(nonleaf)
  T.truthy(q.is_leaf, "a parameter is always a leaf")
  T.raises(function() nn.Parameter(3) end, "expected a tensor")
end)

T.test("subclassing a layer and nested names", function()
  local Block = nn.Module:extend("Block")
  function Block:init(n)
    self.seq = nn.Sequential(nn.Linear(n, n), nn.Sequential(nn.ReLU(), nn.Linear(n, 1)))
    self.head = nn.Identity()
  end
  local b = Block(4)
  local names = {}
  for name in b:named_modules() do names[#names + 1] = name end
  T.same(names, { "", "seq", "seq.0", "seq.1", "seq.1.0", "seq.1.1", "head" })
  local pn = {}
  for name in b:named_parameters() do pn[#pn + 1] = name end
  T.same(pn, { "seq.0.weight", "seq.0.bias", "seq.1.1.weight", "seq.1.1.bias" })
  T.truthy(rawequal(b:get_submodule("seq.1.1"), b.seq[2][2]))
  T.truthy(rawequal(b:get_parameter("seq.1.1.bias"), b.seq[2][2].bias))
  T.raises(function() b:get_submodule("seq.7") end, "has no attribute `7`")
  local visited = 0
  b:apply(function() visited = visited + 1 end)
  T.eq(visited, 7)
  local MyLinear = nn.Linear:extend("MyLinear")
  function MyLinear:init(...)
    nn.Linear.init(self, ...)
    self.tag = "mine"
  end
  local ml = MyLinear(2, 3)
  T.eq(tostring(ml), "MyLinear(in_features=2, out_features=3, bias=True)")
  T.eq(ml.tag, "mine")
  T.truthy(ml:isinstance(nn.Linear))
  -- a shared module and a shared parameter are listed once
  local S = nn.Module:extend("S")
  function S:init()
    self.l1 = nn.Linear(2, 2)
    self.l2 = self.l1
  end
  local s = S()
  T.eq(#s:parameters(), 2)
  T.eq(#s:modules(), 2)
end)

T.test("Sequential: a class where a module was meant is an error, not an empty Sequential", function()
  T.raises(function() nn.Sequential(nn.ReLU) end, "argument #1 is the class ReLU (call it to make a module: ReLU())")
  T.raises(function() nn.Sequential(nn.Linear(2, 2), nn.Tanh) end, "argument #2 is the class Tanh")
end)

T.test("Sequential: names, 1-based indexing, length, iteration", function()
  local l1, r, l2 = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
  local seq = nn.Sequential(l1, r, l2)
  T.eq(#seq, 3)
  T.truthy(rawequal(seq[1], l1) and rawequal(seq[2], r) and rawequal(seq[3], l2))
  T.truthy(rawequal(seq[-1], l2))
  T.eq(seq[4], nil)
  local n = 0
  for i, m in ipairs(seq) do
    n = n + 1
    T.truthy(rawequal(m, seq[i]))
  end
  T.eq(n, 3)
  local kids = {}
  for name in seq:named_children() do kids[#kids + 1] = name end
  T.same(kids, { "0", "1", "2" })
  local _, keys = seq:state_dict()
  T.same(keys, { "0.weight", "0.bias", "2.weight", "2.bias" })
  local tanh = nn.Tanh()
  seq[2] = tanh
  T.truthy(rawequal(seq[2], tanh))
  seq:append(nn.Sigmoid())
  T.eq(#seq, 4)
  T.eq(tostring(seq), [[
Sequential(
  (0): Linear(in_features=2, out_features=3, bias=True)
  (1): Tanh()
  (2): Linear(in_features=3, out_features=1, bias=True)
  (3): Sigmoid()
)]])
  local named = nn.Sequential({ { "fc", nn.Linear(1, 1) }, { "act", nn.ReLU() } })
  T.truthy(named.fc ~= nil and rawequal(named[2], named.act))
  T.raises(function() nn.Sequential(nn.ReLU(), 3) end, "argument #2")
  T.raises(function() seq[9] = nn.ReLU() end, "out of range")
  -- forward through elementwise layers that exist natively
  local x = ms.tensor({ -1.0, 0.5 })
  local y = nn.Sequential(nn.ReLU(), nn.Tanh(), nn.Identity())(x)
  T.near(y[1]:item(), 0)
  T.near(y[2]:item(), math.tanh(0.5), 1e-6)
end)

T.test("ModuleList and ModuleDict", function()
  local ml = nn.ModuleList({ nn.ReLU(), nn.Linear(1, 2) })
  T.eq(#ml, 2)
  ml:append(nn.Tanh())
  ml:extend({ nn.Sigmoid() })
  ml:insert(1, nn.Identity())
  T.eq(#ml, 5)
  T.eq(ml[1]:_get_name(), "Identity")
  T.eq(ml[-1]:_get_name(), "Sigmoid")
  local kids = {}
  for name in ml:named_children() do kids[#kids + 1] = name end
  T.same(kids, { "0", "1", "2", "3", "4" })
  T.eq(#ml:parameters(), 2)
  local _, keys = ml:state_dict()
  T.same(keys, { "2.weight", "2.bias" })
  T.raises(function() ml(1) end, "ModuleList has no forward")
  local MyList = nn.ModuleList:extend("MyList")
  T.eq(tostring(MyList()), "MyList()")

  local md = nn.ModuleDict({ { "act", nn.ReLU() }, { "fc", nn.Linear(1, 2) } })
  T.same(md:keys(), { "act", "fc" })
  T.eq(md.fc:_get_name(), "Linear")
  T.eq(md["act"]:_get_name(), "ReLU")
  T.eq(#md, 2)
  local sorted = nn.ModuleDict({ z = nn.ReLU(), a = nn.Tanh() })
  T.same(sorted:keys(), { "a", "z" })
  local names = {}
  for name, m in md:items() do names[#names + 1] = name .. "=" .. m:_get_name() end
  T.same(names, { "act=ReLU", "fc=Linear" })
  T.eq(md:pop("act"):_get_name(), "ReLU")
  T.same(md:keys(), { "fc" })
  T.raises(function() nn.ModuleDict({ keys = nn.ReLU() }) end, "attribute 'keys' already exists")
end)

-- torch's repr of each layer (gen_nn_reference.py). Where a dim or an index is part of the
-- repr, the Lua layer takes and prints the 1-based value (noted "lua:").
local REPRS = {
  { function() return nn.Linear(3, 4) end, "Linear(in_features=3, out_features=4, bias=True)" },
  { function() return nn.Linear(3, 4, false) end, "Linear(in_features=3, out_features=4, bias=False)" },
  { function() return nn.Linear(3, 4, { bias = false }) end, "Linear(in_features=3, out_features=4, bias=False)" },
  { function() return nn.Conv2d(1, 32, 3, 1) end, "Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1))" },
  { function() return nn.Conv2d(3, 8, { 3, 5 }, { stride = 2, padding = 1, dilation = 2, groups = 1, bias = false }) end,
    "Conv2d(3, 8, kernel_size=(3, 5), stride=(2, 2), padding=(1, 1), dilation=(2, 2), bias=False)" },
  { function() return nn.Conv2d(4, 8, 3, { padding = { 1, 2 }, groups = 2 }) end,
    "Conv2d(4, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 2), groups=2)" },
  { function() return nn.Conv2d(4, 8, 1) end, "Conv2d(4, 8, kernel_size=(1, 1), stride=(1, 1))" },
  { function() return nn.MaxPool2d(2) end, "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)" },
  { function() return nn.MaxPool2d(3, { stride = 2, padding = 1, dilation = 1, ceil_mode = true }) end,
    "MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=True)" },
  { function() return nn.AvgPool2d(2) end, "AvgPool2d(kernel_size=2, stride=2, padding=0)" },
  { function() return nn.AvgPool2d(3, 1, 1, true, false) end, "AvgPool2d(kernel_size=3, stride=1, padding=1)" },
  { function() return nn.AdaptiveAvgPool2d({ 1, 1 }) end, "AdaptiveAvgPool2d(output_size=(1, 1))" },
  { function() return nn.AdaptiveAvgPool2d(7) end, "AdaptiveAvgPool2d(output_size=7)" },
  { function() return nn.Dropout(0.25) end, "Dropout(p=0.25, inplace=False)" },
  { function() return nn.Dropout() end, "Dropout(p=0.5, inplace=False)" },
  { function() return nn.ReLU() end, "ReLU()" },
  { function() return nn.GELU() end, "GELU(approximate='none')" },
  { function() return nn.GELU({ approximate = "tanh" }) end, "GELU(approximate='tanh')" },
  { function() return nn.SiLU() end, "SiLU()" },
  { function() return nn.Tanh() end, "Tanh()" },
  { function() return nn.Sigmoid() end, "Sigmoid()" },
  { function() return nn.Softmax(2) end, "Softmax(dim=2)" },       -- lua: torch's Softmax(dim=1)
  { function() return nn.LogSoftmax(2) end, "LogSoftmax(dim=2)" }, -- lua: torch's LogSoftmax(dim=1)
  { function() return nn.Softmax(-1) end, "Softmax(dim=-1)" },
  { function() return nn.Flatten() end, "Flatten(start_dim=2, end_dim=-1)" }, -- lua: torch's start_dim=1
  { function() return nn.Flatten(1, -1) end, "Flatten(start_dim=1, end_dim=-1)" }, -- lua: torch's 0
  { function() return nn.Identity() end, "Identity()" },
  { function() return nn.Embedding(10, 3) end, "Embedding(10, 3)" },
  { function() return nn.Embedding(10, 3, 1) end, "Embedding(10, 3, padding_idx=1)" }, -- lua: torch's 0
  { function() return nn.LayerNorm(8) end, "LayerNorm((8,), eps=1e-05, elementwise_affine=True)" },
  { function() return nn.LayerNorm({ 4, 8 }, { eps = 1e-6, elementwise_affine = false }) end,
    "LayerNorm((4, 8), eps=1e-06, elementwise_affine=False)" },
  { function() return nn.BatchNorm1d(16) end,
    "BatchNorm1d(16, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)" },
  { function() return nn.BatchNorm2d(8, { eps = 1e-3, momentum = 0.2, affine = false }) end,
    "BatchNorm2d(8, eps=0.001, momentum=0.2, affine=False, track_running_stats=True)" },
  { function() return nn.Sequential(nn.Linear(2, 3), nn.ReLU()) end,
    "Sequential(\n  (0): Linear(in_features=2, out_features=3, bias=True)\n  (1): ReLU()\n)" },
  { function() return nn.ModuleList({ nn.ReLU(), nn.Linear(1, 2) }) end,
    "ModuleList(\n  (0): ReLU()\n  (1): Linear(in_features=1, out_features=2, bias=True)\n)" },
  { function() return nn.ModuleDict({ { "act", nn.ReLU() }, { "fc", nn.Linear(1, 2) } }) end,
    "ModuleDict(\n  (act): ReLU()\n  (fc): Linear(in_features=1, out_features=2, bias=True)\n)" },
  { function() return nn.Sequential() end, "Sequential()" },
  { function() return nn.Sequential(nn.Sequential(nn.ReLU()), nn.Tanh()) end,
    "Sequential(\n  (0): Sequential(\n    (0): ReLU()\n  )\n  (1): Tanh()\n)" },
}

T.test("every layer's repr is PyTorch's", function()
  for i, case in ipairs(REPRS) do
    T.eq(tostring(case[1]()), case[2], "repr case " .. i)
  end
end)

T.test("extra_repr with several lines and children (torch's layout)", function()
  local A = nn.Module:extend("A")
  function A:init() self.l = nn.Linear(2, 2) end
  function A:extra_repr() return "hello=1" end
  T.eq(tostring(A()), "A(\n  hello=1\n  (l): Linear(in_features=2, out_features=2, bias=True)\n)")
  local B = nn.Module:extend("B")
  function B:extra_repr() return "a\nb" end
  local C = nn.Module:extend("C")
  function C:init() self.b = B() end
  T.eq(tostring(B()), "B(\n  a\n  b\n)")
  T.eq(tostring(C()), "C(\n  (b): B(\n    a\n    b\n  )\n)")
end)

T.test("layer constructors check their arguments", function()
  T.raises(function() nn.Linear(3) end, "Linear: out_features must be an integer")
  T.raises(function() nn.Linear(3, 4, { bais = false }) end, "Linear: unknown option 'bais' (expected one of: bias, in_features, out_features)")
  T.raises(function() nn.Conv2d(3, 8, 3, { groups = 2 }) end, "in_channels must be divisible by groups")
  T.raises(function() nn.Conv2d(1, 8, { 3 }) end, "kernel_size must be an integer or a pair")
  T.raises(function() nn.Conv2d(1, 8, 3, 1, { stride = 2 }) end, "both as an argument and as an option")
  T.raises(function() nn.Conv2d(1, 8, 3, { stride = 2, padding = "same" }) end, "strided")
  T.raises(function() nn.Dropout(1.5) end, "dropout probability has to be between 0 and 1, but got 1.5")
  T.raises(function() nn.Softmax() end, "Softmax: dim must be given")
  T.raises(function() nn.Embedding(5, 2, 6) end, "padding_idx must be within num_embeddings")
  T.raises(function() nn.GELU("fast") end, "approximate must be 'none' or 'tanh'")
  local c = nn.Conv2d(2, 4, 3, { padding = "same" })
  T.eq(tostring(c), "Conv2d(2, 4, kernel_size=(3, 3), stride=(1, 1), padding=same)")
  T.same(list_of(c.weight.shape), { 4, 2, 3, 3 })
  T.same(list_of(nn.Conv2d(4, 8, 3, { groups = 2 }).weight.shape), { 8, 2, 3, 3 })
end)

T.test("layer parameters: shapes, defaults, buffers", function()
  local e = nn.Embedding(5, 3, -1)
  T.eq(e.weight[5]:abs():sum():item(), 0, "the padding row is zero")
  T.truthy(e.weight[1]:abs():sum():item() > 0)
  local ln = nn.LayerNorm({ 2, 3 })
  T.same(list_of(ln.weight.shape), { 2, 3 })
  T.eq(ln.weight:sum():item(), 6)
  T.eq(ln.bias:sum():item(), 0)
  T.eq(#nn.LayerNorm(3, { elementwise_affine = false }):parameters(), 0)
  local bn = nn.BatchNorm1d(4, { affine = false, track_running_stats = false })
  T.eq(#bn:parameters(), 0)
  T.eq(#bn:buffers(), 0)
  T.eq(tostring(nn.BatchNorm1d(4, { momentum = false })),
    "BatchNorm1d(4, eps=1e-05, momentum=None, affine=True, track_running_stats=True)")
  T.eq(nn.Linear(3, 4, false).bias, nil)
end)

T.test("default init: kaiming_uniform(a=sqrt 5) bounds, seeded reproducibility", function()
  ms.manual_seed(7)
  local a = nn.Linear(400, 300)
  ms.manual_seed(7)
  local b = nn.Linear(400, 300)
  T.truthy(a.weight:equal(b.weight) and a.bias:equal(b.bias), "same seed, same init")
  local bound = 1 / math.sqrt(400)
  T.truthy(a.weight:max():item() <= bound and a.weight:min():item() >= -bound)
  T.near(a.weight:max():item(), bound, bound * 0.01)
  T.near(a.weight:min():item(), -bound, bound * 0.01)
  -- U(-b, b) has std b / sqrt(3)
  T.near(a.weight:std():item(), bound / math.sqrt(3), bound * 0.01)
  T.truthy(a.bias:max():item() <= bound and a.bias:min():item() >= -bound)
  local c = nn.Conv2d(32, 64, 3)
  local cb = 1 / math.sqrt(32 * 9)
  T.truthy(c.weight:max():item() <= cb and c.weight:min():item() >= -cb)
  T.near(c.weight:max():item(), cb, cb * 0.01)
  T.truthy(c.bias:max():item() <= cb)
end)

T.test("nn.init: statistics and gains", function()
  local init = nn.init
  T.near(init.calculate_gain("leaky_relu", math.sqrt(5)), 0.5773502691896257, 1e-12)
  T.near(init.calculate_gain("tanh"), 5 / 3, 1e-12)
  T.near(init.calculate_gain("relu"), 1.4142135623730951, 1e-12)
  T.near(init.calculate_gain("selu"), 0.75, 1e-12)
  T.eq(init.calculate_gain("linear"), 1)
  T.raises(function() init.calculate_gain("swish") end, "unsupported nonlinearity")
  local fi, fo = init.calculate_fan_in_and_fan_out(ms.empty(64, 32, 3, 3))
  T.eq(fi, 288)
  T.eq(fo, 576)
  T.raises(function() init.calculate_fan_in_and_fan_out(ms.empty(5)) end, "fewer than 2 dimensions")

  ms.manual_seed(3)
  local t = ms.empty(500, 400)
  T.truthy(rawequal(init.uniform_(t, -2, 3), t), "returns the tensor")
  T.near(t:mean():item(), 0.5, 0.02)
  T.near(t:std():item(), 5 / math.sqrt(12), 0.02)
  T.truthy(t:min():item() >= -2 and t:max():item() <= 3)
  init.normal_(t, 1, 2)
  T.near(t:mean():item(), 1, 0.02)
  T.near(t:std():item(), 2, 0.02)
  init.constant_(t, 0.25)
  T.eq(t:min():item(), 0.25)
  T.eq(t:max():item(), 0.25)
  init.zeros_(t)
  T.eq(t:abs():sum():item(), 0)
  init.ones_(t)
  T.eq(t:sum():item(), 200000)
  -- fan_in 400, fan_out 500
  init.xavier_uniform_(t)
  local xa = math.sqrt(6 / 900)
  T.truthy(t:max():item() <= xa and t:min():item() >= -xa)
  T.near(t:std():item(), math.sqrt(2 / 900), 0.001)
  init.xavier_normal_(t, 2)
  T.near(t:std():item(), 2 * math.sqrt(2 / 900), 0.001)
  init.kaiming_uniform_(t, { nonlinearity = "relu" })
  local kb = math.sqrt(2) * math.sqrt(3 / 400)
  T.truthy(t:max():item() <= kb and t:min():item() >= -kb)
  T.near(t:std():item(), math.sqrt(2 / 400), 0.001)
  init.kaiming_normal_(t, 0, "fan_out", "relu")
  T.near(t:std():item(), math.sqrt(2 / 500), 0.001)
  T.near(t:mean():item(), 0, 0.001)
  T.raises(function() init.kaiming_normal_(t, { mode = "fan_avg" }) end, "mode fan_avg not supported")
  local e = init.eye_(ms.empty(2, 3))
  T.same(e:tolist(), { { 1, 0, 0 }, { 0, 1, 0 } })

  -- initializers may fill parameters (they run under no_grad) ...
  local p = nn.Parameter(ms.empty(3, 3))
  init.ones_(p)
  T.eq(p:sum():item(), 9)
  init.uniform_(p)
  -- ... but the raw in-place fills refuse a leaf that requires grad while grad mode is on
  T.raises(function() p:uniform_() end, "uniform_: a leaf tensor that requires grad")
  T.raises(function() ms.empty(2, { dtype = "int64" }):normal_() end, "expected a floating tensor")
  T.raises(function() ms.empty(2):uniform_(1, 0) end, "expected from <= to")
  T.raises(function() ms.empty(2):normal_(0, -1) end, "expected std >= 0")
end)

T.test("zero_grad, requires_grad_, to", function()
  local lin = nn.Linear(3, 2)
  local loss = (lin.weight * lin.weight):sum() + lin.bias:sum()
  loss:backward()
  T.truthy(lin.weight.grad ~= nil)
  lin:zero_grad({ set_to_none = false })
  T.eq(lin.weight.grad:abs():sum():item(), 0)
  lin:zero_grad()
  T.eq(lin.weight.grad, nil)
  T.eq(lin.bias.grad, nil)
  -- PyTorch's positional set_to_none, as the optimizer's zero_grad takes it
  ;((lin.weight * lin.weight):sum() + lin.bias:sum()):backward()
  lin:zero_grad(false)
  T.eq(lin.weight.grad:abs():sum():item(), 0, "zero_grad(false) zeroes in place")
  lin:zero_grad(true)
  T.eq(lin.weight.grad, nil)
  T.raises(function() lin:zero_grad({ set_to_non = false }) end,
    "zero_grad: unknown option 'set_to_non' (expected one of: set_to_none)")
  T.raises(function() lin:zero_grad({ set_to_none = 0 }) end, "zero_grad: option 'set_to_none': expected a boolean, got number")
  T.raises(function() lin:zero_grad("no") end, "zero_grad: expected an options table {set_to_none =} or a boolean, got string")
  lin:requires_grad_(false)
  T.eq(lin.weight.requires_grad, false)
  lin:requires_grad_()
  T.eq(lin.weight.requires_grad, true)

  local bn = nn.BatchNorm1d(3)
  local w = bn.weight:clone()
  T.truthy(rawequal(bn:to("float64"), bn), "to returns self")
  T.eq(bn.weight.dtype, "float64")
  T.truthy(nn.is_parameter(bn.weight) and bn.weight.requires_grad)
  T.eq(bn.running_mean.dtype, "float64")
  T.eq(bn.num_batches_tracked.dtype, "int64", "integer buffers keep their dtype")
  T.truthy(bn.weight:float():equal(w))
  local _, keys = bn:state_dict()
  T.same(keys, { "weight", "bias", "running_mean", "running_var", "num_batches_tracked" })
  bn:float()
  T.eq(bn.weight.dtype, "float32")
  bn:to("cpu")
  T.raises(function() bn:to("cuda") end, "not available")
  T.raises(function() bn:to("floaty") end, "to: unknown dtype or device floaty")
  T.eq(bn:to({ dtype = "double" }).weight.dtype, "float64")
end)

T.test("F: argument parsing and missing natives", function()
  local x = ms.randn(2, 3)
  T.raises(function() F.max_pool2d(x, 2, { strid = 2 }) end, "F.max_pool2d: unknown option 'strid'")
  T.raises(function() F.conv2d(x, x, nil, 1, { stride = 1 }) end, "both as an argument and as an option")
  T.raises(function() F.nll_loss(x, x, { reduction = "avg" }) end, "reduction must be 'mean', 'sum' or 'none'")
  T.raises(function() F.softmax(x) end, "F.softmax: dim must be given")
  T.raises(function() F.dropout(x, 2) end, "dropout probability has to be between 0 and 1")
  T.truthy(rawequal(F.dropout(x, { p = 0.5, training = false }), x))
  T.truthy(rawequal(F.dropout(x, 0), x))
  T.truthy(rawequal(nn.functional, F))
  T.same(F.relu(ms.tensor({ -1.0, 2.0 })):tolist(), { 0, 2 })
  T.near(F.sigmoid(ms.tensor({ 0.0 }))[1]:item(), 0.5)
  T.same(list_of(F.flatten(ms.ones(2, 3, 4)).shape), { 24 })
  T.same(list_of(F.flatten(ms.ones(2, 3, 4), 2).shape), { 2, 12 })
  T.same(list_of(nn.Flatten()(ms.ones(2, 3, 4)).shape), { 2, 12 })
  if ms.gelu == nil then
    T.raises(function() F.gelu(x) end, "the native op ms.gelu is not available")
  end
end)

test_native("state_dict round-trips through ms.save / ms.load", { "save", "load" }, function()
  local a = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
  local b = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
  local path = os.tmpname()
  ms.save(a:state_dict(), path)
  local sd = ms.load(path)
  os.remove(path)
  b:load_state_dict(sd)
  for name, t in pairs(a:state_dict()) do T.truthy(t:equal(b:state_dict()[name]), name) end
end)

T.test("nn.utils holds the gradient clipping helpers", function()
  if package.preload["moonshard.nn_utils"] == nil then
    print("skip nn.utils (no moonshard.nn_utils in this build)")
    return
  end
  T.eq(type(nn.utils.clip_grad_norm_), "function")
  T.truthy(rawequal(nn.utils.clip_grad_norm_, require("moonshard.nn_utils").clip_grad_norm_))
end)

-- ---- forwards on the native ops ----------------------------------------------------------------

test_native("Linear forward equals x W^T + b", { "linear" }, function()
  local lin = nn.Linear(5, 3)
  local x = ms.randn(4, 5)
  local y = lin(x)
  T.same(list_of(y.shape), { 4, 3 })
  local want = x:matmul(lin.weight:t()) + lin.bias
  T.truthy(y:allclose(want, { rtol = 1e-5, atol = 1e-6 }), "linear output")
  local nob = nn.Linear(5, 3, false)
  T.truthy(nob(x):allclose(x:matmul(nob.weight:t()), { rtol = 1e-5, atol = 1e-6 }))
end)

test_native("Linear gradients reach weight and bias", { "linear" }, function()
  local lin = nn.Linear(3, 2)
  local x = ms.tensor({ { 1.0, 2.0, 3.0 }, { 4.0, 5.0, 6.0 } })
  lin(x):sum():backward()
  T.same(lin.weight.grad:tolist(), { { 5, 7, 9 }, { 5, 7, 9 } }, 1e-6)
  T.same(lin.bias.grad:tolist(), { 2, 2 }, 1e-6)
  local r = nn.ReLU(true)
  local y = ms.tensor({ -1.0, 1.0 })
  T.truthy(rawequal(r(y), y), "inplace ReLU returns its input")
  T.same(y:tolist(), { 0, 1 })
end)

test_native("a small CNN learns a fixed batch with plain SGD",
  { "conv2d", "batch_norm", "max_pool2d", "linear", "cross_entropy" }, function()
  ms.manual_seed(11)
  local model = nn.Sequential(
    nn.Conv2d(1, 4, 3, { padding = 1 }), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(4 * 4 * 4, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 3))
  local x = ms.randn(12, 1, 8, 8)
  local y = ms.randint(1, 4, { 12 })
  local first, last
  for step = 1, 30 do
    model:zero_grad()
    local loss = F.cross_entropy(model(x), y)
    loss:backward()
    if step == 1 then first = loss:item() end
    last = loss:item()
    local _ <close> = ms.no_grad()
    for _, p in ipairs(model:parameters()) do p:sub_(p.grad * 0.1) end
  end
  T.truthy(last < first * 0.5, ("loss fell from %g to %g"):format(first, last))
  T.eq(model[2].num_batches_tracked:item(), 30)
end)

test_native("Net forward on a random batch", { "conv2d", "max_pool2d", "linear", "log_softmax", "dropout" }, function()
  ms.manual_seed(1)
  local model = Net()
  local x = ms.randn(4, 1, 28, 28)
  local out = model(x)
  T.same(list_of(out.shape), { 4, 10 })
  -- log-probabilities: each row's exp sums to 1
  local sums = out:exp():sum(2)
  for i = 1, 4 do T.near(sums[i]:item(), 1, 1e-4) end
  model:eval()
  local a, b = model(x), model(x)
  T.truthy(a:equal(b), "eval is deterministic")
  if ms.nll_loss then
    local target = ms.tensor({ 1, 2, 3, 4 })
    local loss = F.nll_loss(out, target)
    loss:backward()
    T.truthy(model.fc1.weight.grad ~= nil and model.conv1.weight.grad ~= nil, "gradients reach every layer")
  end
end)

test_native("Conv2d forward shapes", { "conv2d" }, function()
  local c = nn.Conv2d(3, 8, 3, { stride = 2, padding = 1 })
  T.same(list_of(c(ms.randn(2, 3, 9, 9)).shape), { 2, 8, 5, 5 })
  local s = nn.Conv2d(3, 4, 5, { padding = "same" })
  T.same(list_of(s(ms.randn(1, 3, 7, 7)).shape), { 1, 4, 7, 7 })
end)

test_native("pooling forward shapes", { "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d" }, function()
  local x = ms.randn(2, 3, 8, 8)
  T.same(list_of(nn.MaxPool2d(2)(x).shape), { 2, 3, 4, 4 })
  T.same(list_of(nn.AvgPool2d(2)(x).shape), { 2, 3, 4, 4 })
  T.same(list_of(nn.AdaptiveAvgPool2d(1)(x).shape), { 2, 3, 1, 1 })
  T.same(list_of(F.max_pool2d(x, 3, 2, 1).shape), { 2, 3, 4, 4 })
  local v, idx = nn.MaxPool2d(2, { return_indices = true })(ms.tensor({ { { { 1.0, 5.0 }, { 3.0, 2.0 } } } }))
  T.eq(v:item(), 5)
  T.eq(idx:item(), 2, "1-based position in the plane")
end)

test_native("Dropout forward in training", { "dropout" }, function()
  ms.manual_seed(5)
  local d = nn.Dropout(0.5)
  local y = d(ms.ones(1000))
  local kept = y:gt(0):sum():item()
  T.truthy(kept > 400 and kept < 600, "about half kept")
  T.near(y:max():item(), 2, 1e-6)
end)

test_native("activation and softmax layers", { "gelu", "silu", "softmax", "log_softmax" }, function()
  local x = ms.tensor({ { -1.0, 0.0, 2.0 } })
  T.near(nn.GELU()(x)[1][3]:item(), 1.9544997, 1e-5)
  T.near(nn.GELU({ approximate = "tanh" })(x)[1][3]:item(), 1.9545977, 1e-5)
  T.near(nn.SiLU()(x)[1][1]:item(), -0.26894142, 1e-6)
  local s = nn.Softmax(2)(x)
  T.near(s:sum():item(), 1, 1e-6)
  T.truthy(nn.LogSoftmax(2)(x):exp():allclose(s, { rtol = 1e-5, atol = 1e-6 }))
end)

test_native("Embedding forward", { "embedding" }, function()
  local e = nn.Embedding(5, 3)
  local y = e(ms.tensor({ { 1, 5 } }))
  T.same(list_of(y.shape), { 1, 2, 3 })
  T.truthy(y[1][2]:equal(e.weight[5]))
end)

test_native("LayerNorm forward", { "layer_norm" }, function()
  local ln = nn.LayerNorm(4)
  local y = ln(ms.randn(3, 4))
  for i = 1, 3 do
    T.near(y[i]:mean():item(), 0, 1e-5)
    T.near(y[i]:var({ unbiased = false }):item(), 1, 1e-3)
  end
end)

test_native("BatchNorm forward updates running stats", { "batch_norm" }, function()
  local bn = nn.BatchNorm1d(3)
  local x = ms.randn(16, 3) * 2 + 1
  local y = bn(x)
  T.same(list_of(y.shape), { 16, 3 })
  T.eq(bn.num_batches_tracked:item(), 1)
  T.truthy(bn.running_mean:abs():sum():item() > 0, "running mean moved")
  T.raises(function() bn(ms.randn(2, 3, 4, 5)) end, "expected 2D or 3D input (got 4D input)")
  bn:eval()
  bn(x)
  T.eq(bn.num_batches_tracked:item(), 1, "eval leaves the stats alone")
  T.raises(function() nn.BatchNorm2d(3)(ms.randn(2, 3)) end, "expected 4D input (got 2D input)")
end)

test_native("losses through F", { "nll_loss", "cross_entropy", "mse_loss", "log_softmax" }, function()
  local logits = ms.tensor({ { 1.0, 2.0, 0.5 }, { 0.1, 0.2, 3.0 } })
  local target = ms.tensor({ 2, 3 })
  local ce = F.cross_entropy(logits, target)
  local nll = F.nll_loss(F.log_softmax(logits, 2), target)
  T.near(ce:item(), nll:item(), 1e-6)
  local sum = F.nll_loss(F.log_softmax(logits, 2), target, { reduction = "sum" })
  T.near(sum:item(), 2 * nll:item(), 1e-5)
  T.near(F.mse_loss(ms.tensor({ 1.0, 3.0 }), ms.tensor({ 0.0, 0.0 })):item(), 5, 1e-6)
  T.near(F.mse_loss(ms.tensor({ 1.0, 3.0 }), ms.tensor({ 0.0, 0.0 }), "sum"):item(), 10, 1e-6)
end)

T.test("replacing a child keeps its place, as torch's __setattr__ does", function()
  local net = Net()
  net.fc1 = nn.Linear(9216, 64)
  local names = {}
  for name in net:named_children() do names[#names + 1] = name end
  T.eq(table.concat(names, " "), "conv1 conv2 dropout1 dropout2 fc1 fc2")
  net.dropout1 = nil
  net.dropout1 = nn.Dropout(0.1) -- removed then added again: goes to the end
  names = {}
  for name in net:named_children() do names[#names + 1] = name end
  T.eq(table.concat(names, " "), "conv1 conv2 dropout2 fc1 fc2 dropout1")
end)

T.finish()
