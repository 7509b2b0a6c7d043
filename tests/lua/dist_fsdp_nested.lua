-- dist_fsdp_nested.lua: FSDP units whose forward returns its tensors nested in tables ({{t}},
-- {a = {b = {t}}}, next to strings, numbers, booleans and a cycle), in nested units and at the
-- root, train exactly as one process under every sharding strategy (registered for 1..4 ranks,
-- with and without MS_DIST_DEBUG=1). Issue 17: the walk over outputs looked one level deep, so
-- {{t}} got no pre-backward hook: a segfault in backward (FULL_SHARD, SHARD_GRAD_OP), wrong
-- parameters (NO_SHARD), no gradients at all at the root. Float64, compared to 1e-10.
local ms = require "moonshard"
local nn = require "moonshard.nn"
local F = require "moonshard.functional"
local optim = require "moonshard.optim"
local fsdp = require "moonshard.fsdp"
local comm = require "moonshard.fsdp_comm"
local T = require "testing"

local D = require "launch_testing"
local R, W = D.init()
local case = D.case
local DT, TOL, BATCH, STEPS = "float64", 1e-10, 24, 3

-- A linear layer whose forward hides its result in the given shape of tables.
local SHAPES = {
  two = function(y) return {{y}} end,
  three = function(y) return {a = {b = {y}}, "label", 7, false} end,
  cycle = function(y)
    local r = {1, {y, "s", {z = true}}}
    r.self = r -- a cycle: the walk must end
    return r
  end,
}
local function unwrap(shape, out)
  if shape == "two" then return out[1][1] end
  if shape == "three" then return out.a.b[1] end
  return out[2][1]
end

local Deep = nn.Module:extend("Deep")
function Deep:init(i, o, shape)
  self.fc = nn.Linear(i, o)
  self.shape = shape
end
function Deep:forward(x) return SHAPES[self.shape](self.fc(x)) end

-- Two nested units (two and three deep), the root's own layer, and the root's output itself
-- nested in root_shape.
local Net = nn.Module:extend("Net")
function Net:init(root_shape)
  self.a = Deep(6, 8, "two")
  self.b = Deep(8, 8, "three")
  self.c = Deep(8, 8, "cycle")
  self.head = nn.Linear(8, 4)
  self.root_shape = root_shape
end
function Net:forward(x)
  x = F.relu(unwrap("two", self.a(x)))
  x = F.relu(unwrap("three", self.b(x)))
  x = F.relu(unwrap("cycle", self.c(x)))
  return SHAPES[self.root_shape](F.log_softmax(self.head(x), 2))
end

local function make(root_shape)
  ms.manual_seed(1)
  local m = Net(root_shape)
  m:to(DT)
  return m
end

local function data()
  ms.manual_seed(7)
  return ms.randn(BATCH, 6, {dtype = DT}), ms.randint(1, 5, {BATCH})
end

-- SGD with momentum for STEPS steps, on the whole batch or this rank's rows of it.
local function train(model, root_shape, sliced)
  local x, y = data()
  if sliced then
    local b = BATCH // W
    x, y = x:narrow(1, R * b + 1, b), y:narrow(1, R * b + 1, b)
  end
  local opt = optim.SGD(model:parameters(), {lr = 0.1, momentum = 0.9})
  for _ = 1, STEPS do
    opt:zero_grad()
    F.nll_loss(unwrap(root_shape, model(x)), y, {reduction = "mean"}):backward()
    opt:step()
  end
end

for _, strategy in ipairs({"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD"}) do
  for _, root_shape in ipairs({"two", "three", "cycle"}) do
    case(("%s: nested units and a root returning %s-deep tables train as one process"):format(strategy, root_shape),
      function()
        local plain = make(root_shape)
        train(plain, root_shape, false)
        local model = fsdp.FSDP(make(root_shape), {sharding_strategy = strategy,
          auto_wrap_policy = fsdp.ModuleWrapPolicy{Deep}})
        train(model, root_shape, true)
        D.check_state(D.state_of(model), D.state_of(plain), TOL, strategy .. " nested " .. root_shape)
        for name, p in model:named_parameters() do
          T.truthy(p:numel() == 0 or p.grad ~= nil, name .. " has a gradient")
        end
      end)
  end
  case(strategy .. ": a single root unit returning {{t}} trains as one process", function()
    local plain = make("two")
    train(plain, "two", false)
    local model = fsdp.FSDP(make("two"), {sharding_strategy = strategy})
    train(model, "two", true)
    D.check_state(D.state_of(model), D.state_of(plain), TOL, strategy .. " root {{t}}")
  end)
end

case("the walk over inputs maps every depth, keeps cycles and shared tables, and leaves objects", function()
  local t = ms.ones(2, {dtype = DT})
  local shared = {t}
  local obj = setmetatable({t}, {})
  local args = table.pack(t, {{t}, shared, obj, "x"}, shared, 5)
  args[2].me = args[2]
  comm.map_inputs(args, function(v) return v:to("float32") end)
  T.eq(args[1].dtype, "float32")
  T.eq(args[2][1][1].dtype, "float32")
  T.eq(args[2].me, args[2], "the cycle is kept")
  T.eq(args[2][2], args[3], "a shared table stays one table")
  T.eq(args[3][1].dtype, "float32")
  T.eq(args[2][3], obj, "a table with a metatable is kept as it is")
  T.eq(obj[1].dtype, DT)
  T.eq(args[2][4], "x")
  T.eq(args[4], 5)
  local n = 0
  comm.each_tensor(args, function() n = n + 1 end)
  T.eq(n, 4, "tensors visited (each table once; objects are entered when only visiting)")
end)

D.finish("dist_fsdp_nested")
