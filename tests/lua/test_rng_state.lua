-- test_rng_state.lua: ms.get_rng_state / ms.set_rng_state (and ms.cuda's, the same generator):
-- a 16-byte uint8 state that replays the same numbers, survives ms.save / ms.load, and makes a
-- resumed training run with dropout bit-exact (train N steps, checkpoint model + optimizer + rng,
-- continue M steps; vs. a fresh process state that loads the checkpoint and does the M steps).
local ms = require "moonshard"
local nn = require "moonshard.nn"
local F = require "moonshard.functional"
local optim = require "moonshard.optim"
local T = require "testing"

local function same_bits(a, b, what)
  T.eq(a.dtype, b.dtype, what)
  T.eq(tostring(a:size()), tostring(b:size()), what)
  T.eq(a:ne(b):sum():item(), 0, what .. ": every element bit for bit")
end

T.test("get_rng_state: a uint8 tensor of 16 bytes (seed, offset) that replays the same numbers", function()
  ms.manual_seed(42)
  local s = ms.get_rng_state()
  T.eq(s.dtype, "uint8")
  T.eq(s:numel(), 16)
  T.eq(s:dim(), 1)
  T.eq(s:tolist()[1], 42, "seed, little-endian first")
  local a, d = ms.rand(5), F.dropout(ms.ones(64), {p = 0.5, training = true})
  ms.set_rng_state(s)
  same_bits(ms.rand(5), a, "rand after set_rng_state")
  same_bits(F.dropout(ms.ones(64), {p = 0.5, training = true}), d, "dropout after set_rng_state")
  -- the state taken mid-stream also replays, and the state object is a copy (drawing leaves it)
  local mid = ms.get_rng_state()
  local copy = mid:clone()
  local b = ms.randn(7)
  same_bits(mid, copy, "a taken state does not move")
  ms.cuda.set_rng_state(mid)
  same_bits(ms.randn(7), b, "randn after ms.cuda.set_rng_state")
  same_bits(ms.cuda.get_rng_state(), ms.get_rng_state(), "ms.cuda's state is the one generator's")
end)

T.test("a state survives ms.save / ms.load", function()
  local path = os.tmpname()
  ms.manual_seed(3)
  ms.rand(10)
  ms.save({rng = ms.get_rng_state()}, path)
  local want = ms.rand(4)
  ms.manual_seed(99)
  ms.set_rng_state(ms.load(path).rng)
  same_bits(ms.rand(4), want, "rand after a state read back from disk")
  os.remove(path)
end)

T.test("bad states and devices are refused", function()
  T.raises(function() ms.set_rng_state() end, "set_rng_state", "state", "uint8 tensor of 16 bytes")
  T.raises(function() ms.set_rng_state(ms.zeros(16)) end, "set_rng_state", "got a float32 tensor")
  T.raises(function() ms.set_rng_state(ms.zeros(15, {dtype = "uint8"})) end, "set_rng_state", "16 bytes")
  T.raises(function() ms.set_rng_state("abc") end, "set_rng_state", "string")
  T.raises(function() ms.cuda.get_rng_state("cpu") end, "cuda.get_rng_state", "device", "got string 'cpu'")
  T.raises(function() ms.cuda.set_rng_state(ms.get_rng_state(), -1) end, "cuda.set_rng_state", "device")
  -- a 16-byte view that is not contiguous is read in its logical order
  local s = ms.get_rng_state()
  local wide = ms.zeros(16, 2, {dtype = "uint8"})
  wide:select(2, 1):copy_(s)
  local want = ms.rand(3)
  ms.set_rng_state(wide:select(2, 1))
  same_bits(ms.rand(3), want, "a strided state")
end)

-- ---- resume with dropout ------------------------------------------------------------------------

local Net = nn.Module:extend("DropNet")
function Net:init()
  self.fc1 = nn.Linear(10, 32)
  self.drop = nn.Dropout(0.5)
  self.fc2 = nn.Linear(32, 3)
end
function Net:forward(x) return self.fc2(self.drop(F.relu(self.fc1(x)))) end

local function batch()
  ms.manual_seed(5)
  return ms.randn(16, 10), ms.randint(1, 4, {16})
end

local function steps(model, opt, x, y, n)
  for _ = 1, n do
    opt:zero_grad()
    F.cross_entropy(model(x), y):backward()
    opt:step()
  end
end

-- A copy of a nested table with every tensor on the CPU (ms.save writes CPU tensors).
local function on_cpu(t)
  if ms.is_tensor(t) then return t:cpu() end
  if type(t) ~= "table" then return t end
  local c = {}
  for k, v in pairs(t) do c[k] = on_cpu(v) end
  return c
end

-- N steps, a checkpoint, M more steps; then a new model and optimizer (drawn from another seed)
-- load the checkpoint, restore the generator when `restore`, and do the M steps, on `device`.
local function resume(restore, device)
  local x, y = batch()
  x, y = x:to(device), y:to(device)
  ms.manual_seed(1)
  local model = Net():to(device)
  model:train()
  local opt = optim.Adam(model:parameters(), {lr = 0.01})
  steps(model, opt, x, y, 3)
  local path = os.tmpname()
  ms.save(on_cpu({model = model:state_dict(), optim = opt:state_dict(), rng = ms.get_rng_state()}), path)
  steps(model, opt, x, y, 4)
  ms.manual_seed(12345)
  local again = Net():to(device)
  again:train()
  local opt2 = optim.Adam(again:parameters(), {lr = 0.01})
  local ck = ms.load(path)
  os.remove(path)
  again:load_state_dict(ck.model)
  opt2:load_state_dict(ck.optim)
  if restore then ms.set_rng_state(ck.rng) end
  steps(again, opt2, x, y, 4)
  return on_cpu(model:state_dict()), on_cpu(again:state_dict())
end

local devices = {"cpu"}
if ms.cuda.is_available() then devices[2] = "cuda" end
for _, device in ipairs(devices) do
  T.test(("resume with dropout is bit-exact through get/set_rng_state on %s (3 steps, checkpoint, 4 more)")
    :format(device), function()
    local want, got = resume(true, device)
    for k, v in pairs(want) do same_bits(got[k], v, k) end
    -- without restoring the generator the dropout masks differ: the check above can fail
    local want2, got2 = resume(false, device)
    T.truthy(got2["fc1.weight"]:ne(want2["fc1.weight"]):sum():item() > 0, "resume without the rng state differs")
  end)
end

T.finish()
