-- test_fsdp_wrap.lua: FSDP's auto-wrap policies and the bottom-up walk (moonshard.fsdp_wrap),
-- checked against PyTorch 1.13's _recursive_wrap decisions on the seed's Net and on small
-- synthetic trees. A stand-in wrapper class replaces FSDP so the walk is tested on its own.
local T = require "testing"
local nn = require "moonshard.nn"
local wrap = require "moonshard.fsdp_wrap"
local Net = require "moonshard.seed_net"

-- The stand-in unit: holds the wrapped module as its one child, as FSDP holds it.
local Unit = nn.Module:extend("Unit")
function Unit:init(m) self.inner = m end
function Unit:forward(...) return self.inner(...) end

local function wrap_fn(log)
  return function(m)
    if log then log[#log + 1] = m end
    return Unit(m)
  end
end

local function child_names(m)
  local out = {}
  for name in m:named_children() do out[#out + 1] = name end
  return out
end

-- The paths of every Unit in the tree ("" for a wrapped root), depth first.
local function unit_paths(root)
  local out = {}
  for name, m in root:named_modules() do
    if m:isinstance(Unit) then out[#out + 1] = name end
  end
  return out
end

local function numel(m)
  local n = 0
  for _, p in ipairs(m:parameters()) do n = n + p:numel() end
  return n
end

-- A leaf of exactly n parameters (a Linear(n - 1, 1) has n - 1 weights and one bias).
local function leaf(n) return nn.Linear(n - 1, 1) end

local NET_ORDER = { "conv1", "conv2", "dropout1", "dropout2", "fc1", "fc2" }

-- ---- the size-based policy on its own -----------------------------------------------------------

T.test("size policy: recurse and wrap decisions as PyTorch's", function()
  local p = wrap.size_based_auto_wrap_policy{ min_num_params = 100 }
  local lin = nn.Linear(10, 10) -- 110 parameters
  T.eq(p(lin, true, 110), true)
  T.eq(p(lin, false, 110), true)
  T.eq(p(lin, false, 100), true, "the threshold is inclusive (>=)")
  T.eq(p(lin, false, 99), false)
  T.eq(p(lin, true, 99), false, "PyTorch descends only into subtrees that are big enough")
  local list = nn.ModuleList({ nn.Linear(10, 10) })
  T.eq(p(list, true, 110), true, "a ModuleList is descended into")
  T.eq(p(list, false, 1e9), false, "a ModuleList is never a unit")
  T.eq(p(nn.ModuleDict({ { "a", nn.Linear(10, 10) } }), false, 1e9), false, "nor a ModuleDict")
end)

T.test("size policy: defaults (min 1e8) and the policy called directly", function()
  local p = wrap.size_based_auto_wrap_policy{}
  local lin = nn.Linear(2, 2)
  T.eq(p(lin, false, 1e8 - 1), false)
  T.eq(p(lin, false, 1e8), true)
  T.eq(wrap.size_based_auto_wrap_policy(lin, false, 1e8), true, "usable as a policy itself")
  T.eq(wrap.size_based_auto_wrap_policy(lin, false, 5), false)
  T.eq(wrap.size_based_auto_wrap_policy(nn.ModuleList(), false, 1e9), false)
  T.eq(#wrap.EXCLUDE_WRAP_MODULES, 2)
  T.eq(#wrap.FORCE_LEAF_MODULES, nn.MultiheadAttention and 1 or 0)
end)

T.test("size policy: force_leaf_modules and exclude_wrap_modules", function()
  local p = wrap.size_based_auto_wrap_policy{ min_num_params = 10, force_leaf_modules = { nn.Sequential },
                                              exclude_wrap_modules = { nn.Linear } }
  T.eq(p(nn.Sequential(), true, 1000), false, "a forced leaf is not descended into")
  T.eq(p(nn.Sequential(), false, 1000), true, "but may be a unit")
  T.eq(p(nn.Linear(4, 4), false, 1000), false, "an excluded type is never a unit")
  T.eq(p(nn.ModuleList(), false, 1000), true, "the given lists replace the defaults")
end)

T.test("size policy: bad options are errors", function()
  T.raises(function() wrap.size_based_auto_wrap_policy{ min_params = 3 } end, "size_based_auto_wrap_policy: unknown option 'min_params' (expected one of: ")
  T.raises(function() wrap.size_based_auto_wrap_policy{ min_num_params = "x" } end, "min_num_params")
  T.raises(function() wrap.size_based_auto_wrap_policy{ min_num_params = -1 } end, "min_num_params")
  T.raises(function() wrap.size_based_auto_wrap_policy{ exclude_wrap_modules = { 3 } } end,
    "exclude_wrap_modules", "module classes")
  T.raises(function() wrap.size_based_auto_wrap_policy{ force_leaf_modules = { nn.Linear(2, 2) } } end,
    "force_leaf_modules", "module instance")
end)

-- ---- auto_wrap on the seed's Net ----------------------------------------------------------------

T.test("seed Net, 20000: only fc1 becomes a unit, conv2 (18,496) stays in the root", function()
  local net = Net()
  T.eq(numel(net.conv2), 18496)
  T.eq(numel(net.fc1), 1179776)
  local log = {}
  local fc1 = net.fc1
  local out, wrapped, nonwrapped, units =
    wrap.auto_wrap(net, wrap.size_based_auto_wrap_policy{ min_num_params = 20000 }, wrap_fn(log))
  T.truthy(rawequal(out, net), "the root is left to the caller")
  T.eq(units, 1)
  T.eq(#log, 1)
  T.truthy(rawequal(log[1], fc1))
  T.eq(wrapped, 1179776)
  T.eq(nonwrapped, numel(net) - 1179776)
  T.same(unit_paths(net), { "fc1" })
  T.same(child_names(net), NET_ORDER, 0, "fc1 keeps its place")
  T.truthy(net.fc1:isinstance(Unit))
  T.truthy(rawequal(net.fc1.inner, fc1))
  T.truthy(net.conv2:isinstance(nn.Conv2d))
  T.eq(tostring(net), table.concat({
    "Net(",
    "  (conv1): Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1))",
    "  (conv2): Conv2d(32, 64, kernel_size=(3, 3), stride=(1, 1))",
    "  (dropout1): Dropout(p=0.25, inplace=False)",
    "  (dropout2): Dropout(p=0.5, inplace=False)",
    "  (fc1): Unit(",
    "    (inner): Linear(in_features=9216, out_features=128, bias=True)",
    "  )",
    "  (fc2): Linear(in_features=128, out_features=10, bias=True)",
    ")" }, "\n"))
  -- the parameters are the same objects, under the unit's path
  local names = {}
  for name in net:named_parameters() do names[#names + 1] = name end
  T.same(names, { "conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc1.inner.weight",
    "fc1.inner.bias", "fc2.weight", "fc2.bias" })
end)

T.test("seed Net, 100: every leaf with >= 100 parameters is a unit", function()
  local net = Net()
  local _, wrapped, nonwrapped, units =
    wrap.auto_wrap(net, wrap.size_based_auto_wrap_policy{ min_num_params = 100 }, wrap_fn())
  -- conv1 has 320, conv2 18,496, fc1 1,179,776, fc2 1,290; the dropouts have none
  T.same(unit_paths(net), { "conv1", "conv2", "fc1", "fc2" })
  T.eq(units, 4)
  T.eq(wrapped, numel(net))
  T.eq(nonwrapped, 0)
  T.same(child_names(net), NET_ORDER)
  T.truthy(net.dropout1:isinstance(nn.Dropout))
end)

T.test("seed Net, default 1e8 and a huge threshold: nothing below the root", function()
  for _, policy in ipairs({ wrap.size_based_auto_wrap_policy{}, wrap.size_based_auto_wrap_policy }) do
    local net = Net()
    local out, wrapped, nonwrapped, units = wrap.auto_wrap(net, policy, wrap_fn())
    T.truthy(rawequal(out, net))
    T.eq(units, 0)
    T.eq(wrapped, 0)
    T.eq(nonwrapped, numel(net))
    T.same(unit_paths(net), {})
  end
end)

T.test("seed Net, wrap_root: the root takes the remainder as PyTorch's _recursive_wrap does", function()
  local net = Net()
  local out, wrapped, nonwrapped, units = wrap.auto_wrap(net,
    wrap.size_based_auto_wrap_policy{ min_num_params = 20000 }, wrap_fn(), { wrap_root = true })
  T.truthy(out:isinstance(Unit))
  T.truthy(rawequal(out.inner, net))
  T.eq(units, 2)
  T.eq(wrapped, numel(net))
  T.eq(nonwrapped, 0)
  T.same(unit_paths(out), { "", "inner.fc1" })
end)

T.test("a wrapped Net still runs forward with the same result", function()
  local ms = require "moonshard"
  ms.manual_seed(3)
  local net = Net():eval()
  local x = ms.randn(2, 1, 28, 28)
  local before = net(x):tolist()
  wrap.auto_wrap(net, wrap.size_based_auto_wrap_policy{ min_num_params = 100 }, wrap_fn())
  T.same(net(x):tolist(), before, 0)
end)

-- ---- synthetic trees --------------------------------------------------------------------------

-- root
--   a: Block(l1: 60, l2: 60)          -> a's two leaves are small; a's subtree (120) is a unit
--   b: ModuleList(0: 150, 1: 30)      -> "0" is a unit, the ModuleList never is
--   c: 40                             -> too small: stays in the root
local Block = nn.Module:extend("Block")
function Block:init(n1, n2)
  self.l1 = leaf(n1)
  self.l2 = leaf(n2)
end

local function synthetic()
  local root = nn.Module()
  root.a = Block(60, 60)
  root.b = nn.ModuleList({ leaf(150), leaf(30) })
  root.c = leaf(40)
  return root
end

T.test("synthetic tree: bottom-up units, ModuleList excluded", function()
  local root = synthetic()
  T.eq(numel(root), 340)
  local log = {}
  local _, wrapped, nonwrapped, units =
    wrap.auto_wrap(root, wrap.size_based_auto_wrap_policy{ min_num_params = 100 }, wrap_fn(log))
  T.same(unit_paths(root), { "a", "b.0" })
  T.eq(units, 2)
  T.eq(wrapped, 270)
  T.eq(nonwrapped, 70)
  T.truthy(log[1]:isinstance(Block), "children are visited in registration order")
  T.truthy(root.b:isinstance(nn.ModuleList))
  T.truthy(root.b[1]:isinstance(Unit), "the list's item is replaced in place")
  T.eq(#root.b, 2)
  T.same(child_names(root.b), { "0", "1" })
  T.same(child_names(root), { "a", "b", "c" })
end)

T.test("synthetic tree: the remainder decides, not the subtree total", function()
  -- outer(inner(l1 200, l2 2), s1, s2): inner.l1 is a unit; outer's remainder is 2 + s1 + s2
  local Outer = nn.Module:extend("Outer")
  function Outer:init(extra)
    self.inner = Block(200, 2)
    self.s1 = leaf(extra)
    self.s2 = leaf(extra)
  end
  local root = nn.Module()
  root.outer = Outer(25)
  local _, wrapped, nonwrapped = wrap.auto_wrap(root, wrap.size_based_auto_wrap_policy{ min_num_params = 100 },
    wrap_fn())
  T.same(unit_paths(root), { "outer.inner.l1" }, 0, "remainder 52: outer stays unwrapped")
  T.eq(wrapped, 200)
  T.eq(nonwrapped, 52)
  -- with a remainder of 2 + 60 + 60 the parent becomes a unit too, around the unit already made
  root = nn.Module()
  root.outer = Outer(60)
  _, wrapped, nonwrapped = wrap.auto_wrap(root, wrap.size_based_auto_wrap_policy{ min_num_params = 100 },
    wrap_fn())
  T.same(unit_paths(root), { "outer", "outer.inner.inner.l1" }, 0, "remainder 122")
  T.eq(wrapped, 322, "a unit's count is its whole subtree")
  T.eq(nonwrapped, 0)
end)

T.test("synthetic tree: a ModuleList of big items at the top, and an excluded-type override", function()
  local root = nn.Module()
  root.layers = nn.ModuleList({ leaf(500), leaf(500), leaf(500) })
  wrap.auto_wrap(root, wrap.size_based_auto_wrap_policy{ min_num_params = 1000 }, wrap_fn())
  T.same(unit_paths(root), {}, 0, "each item is below 1000 and the list itself is excluded")
  root = nn.Module()
  root.layers = nn.ModuleList({ leaf(500), leaf(500), leaf(500) })
  wrap.auto_wrap(root, wrap.size_based_auto_wrap_policy{ min_num_params = 1000, exclude_wrap_modules = {} },
    wrap_fn())
  T.same(unit_paths(root), { "layers" }, 0, "with no exclusions the list is a unit")
end)

T.test("force_leaf_modules: never descended into, never a unit themselves (as PyTorch)", function()
  -- _recursive_wrap returns a module the recurse question rejects as it is, so a forced leaf's
  -- parameters fall to its parent's remainder
  local policy = wrap.size_based_auto_wrap_policy{ min_num_params = 100, force_leaf_modules = { Block } }
  local root = nn.Module()
  root.a = Block(200, 200)
  local _, wrapped, nonwrapped = wrap.auto_wrap(root, policy, wrap_fn())
  T.same(unit_paths(root), {})
  T.eq(wrapped, 0)
  T.eq(nonwrapped, 400)
  local Holder = nn.Module:extend("Holder")
  function Holder:init() self.block = Block(200, 200) end
  root = nn.Module()
  root.h = Holder()
  wrap.auto_wrap(root, policy, wrap_fn())
  T.same(unit_paths(root), { "h" }, 0, "the parent takes the forced leaf whole")
end)

T.test("shared parameters are counted once", function()
  local root = nn.Module()
  root.a = leaf(80)
  root.b = nn.Module()
  root.b.w = root.a.weight -- 79 more would make 159 if counted twice
  local seen = {}
  wrap.auto_wrap(root, function(m, recurse, n)
    if not recurse then seen[#seen + 1] = n end
    return recurse
  end, wrap_fn())
  T.same(seen, { 80, 79 }, 0, "a (80) and b's own view of the same weight (79), bottom-up")
end)

T.test("ignored modules and params are skipped and not counted", function()
  local root = synthetic()
  local _, wrapped, nonwrapped = wrap.auto_wrap(root, wrap.size_based_auto_wrap_policy{ min_num_params = 100 },
    wrap_fn(), { ignored_modules = { root.b } })
  T.same(unit_paths(root), { "a" })
  T.eq(wrapped, 120)
  T.eq(nonwrapped, 40)
  root = synthetic()
  wrap.auto_wrap(root, wrap.size_based_auto_wrap_policy{ min_num_params = 100 }, wrap_fn(),
    { ignored_params = { root.a.l1.weight } })
  T.same(unit_paths(root), { "b.0" }, 0, "a has 61 counted parameters left")
end)

T.test("wrapper_cls: a tree already holding a unit is refused", function()
  local root = synthetic()
  root.c = Unit(leaf(4))
  T.raises(function() wrap.auto_wrap(root, wrap.size_based_auto_wrap_policy, wrap_fn(), { wrapper_cls = Unit }) end,
    "'c' is already wrapped in Unit")
end)

-- ---- function and class policies ------------------------------------------------------------------

T.test("a function policy: called bottom-up with (module, recurse, nonwrapped_numel)", function()
  local root = synthetic()
  local calls = {}
  local function policy(m, recurse, n)
    calls[#calls + 1] = ("%s %s %d"):format(m:_get_name(), recurse and "r" or "w", n)
    if recurse then return true end
    return m:isinstance(nn.Linear) and n >= 100
  end
  local _, wrapped, nonwrapped, units = wrap.auto_wrap(root, policy, wrap_fn())
  T.same(unit_paths(root), { "b.0" })
  T.eq(units, 1)
  T.eq(wrapped, 150)
  T.eq(nonwrapped, 190)
  T.same(calls, {
    "Module r 340",
    "Block r 120", "Linear r 60", "Linear w 60", "Linear r 60", "Linear w 60", "Block w 120",
    "ModuleList r 180", "Linear r 150", "Linear w 150", "Linear r 30", "Linear w 30", "ModuleList w 30",
    "Linear r 40", "Linear w 40",
  }, 0)
end)

T.test("a function policy that never descends wraps nothing", function()
  local root = synthetic()
  local _, wrapped, nonwrapped, units = wrap.auto_wrap(root, function() return false end, wrap_fn())
  T.eq(units, 0)
  T.eq(wrapped, 0)
  T.eq(nonwrapped, 340)
end)

T.test("ModuleWrapPolicy: modules of the listed classes (and subclasses) are units", function()
  local policy = wrap.ModuleWrapPolicy{ Block, nn.Conv2d }
  T.eq(policy(nn.Linear(2, 2), true, 0), true, "always descends")
  T.eq(policy(nn.Linear(2, 2), false, 1e9), false)
  T.eq(policy(Block(2, 2), false, 0), true, "size does not matter")
  T.eq(tostring(policy), "ModuleWrapPolicy(Block, Conv2d)")
  local root = synthetic()
  local SubBlock = Block:extend("SubBlock")
  root.d = SubBlock(3, 3)
  local _, wrapped, nonwrapped, units = wrap.auto_wrap(root, policy, wrap_fn())
  T.same(unit_paths(root), { "a", "d" })
  T.eq(units, 2)
  T.eq(wrapped, 126)
  T.eq(nonwrapped, 220)
  local net = Net()
  wrap.auto_wrap(net, wrap.ModuleWrapPolicy{ nn.Linear }, wrap_fn())
  T.same(unit_paths(net), { "fc1", "fc2" })
  T.same(child_names(net), NET_ORDER)
  T.raises(function() wrap.ModuleWrapPolicy{ "Linear" } end, "module classes")
end)

T.test("transformer, lambda and or policies", function()
  local net = Net()
  wrap.auto_wrap(net, wrap.transformer_auto_wrap_policy{ transformer_layer_cls = { nn.Conv2d } }, wrap_fn())
  T.same(unit_paths(net), { "conv1", "conv2" })
  net = Net()
  wrap.auto_wrap(net, wrap.lambda_auto_wrap_policy{ lambda_fn = function(m) return m:isinstance(nn.Dropout) end },
    wrap_fn())
  T.same(unit_paths(net), { "dropout1", "dropout2" })
  net = Net()
  wrap.auto_wrap(net, wrap.or_policy{ wrap.ModuleWrapPolicy{ nn.Conv2d },
    wrap.size_based_auto_wrap_policy{ min_num_params = 20000 } }, wrap_fn())
  T.same(unit_paths(net), { "conv1", "conv2", "fc1" })
end)

T.test("auto_wrap: bad arguments are errors", function()
  T.raises(function() wrap.auto_wrap(3, wrap.size_based_auto_wrap_policy, wrap_fn()) end, "root", "module")
  T.raises(function() wrap.auto_wrap(Net(), "size", wrap_fn()) end, "policy")
  T.raises(function() wrap.auto_wrap(Net(), wrap.size_based_auto_wrap_policy, nil) end, "wrap_fn")
  T.raises(function()
    wrap.auto_wrap(Net(), wrap.ModuleWrapPolicy{ nn.Linear }, function() return 5 end)
  end, "wrap_fn returned number")
end)

T.finish()
