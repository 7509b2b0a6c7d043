-- dist_fsdp_lowp.lua: FSDP mixed precision on a small transformer-like language model (token
-- embedding, a pre-LayerNorm block with a GELU (tanh) MLP, final LayerNorm, LM head,
-- cross_entropy) across the ranks of an mpirun launch: with param_dtype bfloat16 or float16 each
-- unit computes in the 16-bit dtype (LayerNorm, GELU, Embedding and softmax take 16-bit inputs on
-- the CPU) and training stays within a stated tolerance of float32 in one process;
-- keep_low_precision_grads leaves 16-bit grads that train exactly as widened ones.
local ms = require "moonshard"
local nn = require "moonshard.nn"
local F = require "moonshard.functional"
local optim = require "moonshard.optim"
local fsdp = require "moonshard.fsdp"
local T = require "testing"

local D = require "launch_testing"
local R, W = D.init()

local V, E, CTX, BATCH = 24, 16, 6, 12 -- BATCH divisible by every world size 1..4

local Block = nn.Module:extend("Block")
function Block:init()
  self.ln = nn.LayerNorm(E)
  self.fc = nn.Linear(E, 4 * E)
  self.proj = nn.Linear(4 * E, E)
end
function Block:forward(h)
  return h + self.proj(F.gelu(self.fc(self.ln(h)), "tanh"))
end

local TinyLM = nn.Module:extend("TinyLM")
function TinyLM:init()
  self.wte = nn.Embedding(V, E)
  self.block = Block()
  self.ln_f = nn.LayerNorm(E)
  self.head = nn.Linear(E, V)
end
function TinyLM:forward(idx)
  local h = self.block(self.wte(idx))
  return self.head(self.ln_f(h)):reshape(-1, V)
end

local function batch()
  ms.manual_seed(7)
  return ms.randint(1, V + 1, {BATCH, CTX}), ms.randint(1, V + 1, {BATCH * CTX})
end

-- `steps` SGD steps on this rank's slice of the batch; returns the last loss (float32).
local function train(model, steps, slices, my_slice)
  local x, y = batch()
  if slices > 1 then
    local b = BATCH // slices
    x, y = x:narrow(1, my_slice * b + 1, b), y:narrow(1, my_slice * b * CTX + 1, b * CTX)
  end
  local opt = optim.SGD(model:parameters(), {lr = 0.5})
  local loss
  for _ = 1, steps do
    opt:zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss:backward()
    opt:step()
  end
  return loss
end

ms.manual_seed(1)
local ref = TinyLM()
train(ref, 5, 1, 0)
local ref5 = ref:state_dict()

-- The worst difference of any parameter after 5 steps, relative to that tensor's largest
-- magnitude: each step's gradients carry the 16-bit dtype's rounding (bfloat16 keeps about 3
-- significant digits, float16 about 4). Measured on 1..4 ranks: bfloat16 0.0050..0.0055,
-- float16 0.00051..0.00085; the bounds leave about 4x.
local MP_TOL = { bfloat16 = 2e-2, float16 = 3e-3 }

for _, dt in ipairs({ "bfloat16", "float16" }) do
  D.case(("mixed precision %s: a transformer-like LM trains within %g of float32"):format(dt, MP_TOL[dt]), function()
    ms.manual_seed(1)
    local model = fsdp.FSDP(TinyLM(), { auto_wrap_policy = fsdp.ModuleWrapPolicy{ Block },
                                        mixed_precision = { param_dtype = dt } })
    local seen = {}
    model:module().block:module().ln:register_forward_hook(function(m, x, out)
      seen.weight, seen.out = m.weight.dtype, out.dtype
    end)
    local loss = train(model, 5, W, R)
    T.eq(seen.weight, dt, "LayerNorm computes with the gathered low-precision weight")
    T.eq(seen.out, dt, "and gives the 16-bit dtype")
    T.eq(loss.dtype, dt)
    D.check_state(model:state_dict(), ref5, MP_TOL[dt], ("mixed precision %s"):format(dt))
  end)
end

-- keep_low_precision_grads: each piece's .grad stays in reduce_dtype (half the grad bytes) and the
-- optimizer widens it exactly for its update, so the parameters equal, bit for bit, those of the
-- same run whose grads were widened after the reduction (no clipping: a norm over 16-bit grads
-- would round).
for _, dt in ipairs({ "bfloat16", "float16" }) do
  D.case(("keep_low_precision_grads with %s: %s grads, the same parameters as widened grads"):format(dt, dt), function()
    local states = {}
    for _, keep in ipairs({ false, true }) do
      ms.manual_seed(1)
      local model = fsdp.FSDP(TinyLM(), { auto_wrap_policy = fsdp.ModuleWrapPolicy{ Block },
        mixed_precision = { param_dtype = dt, keep_low_precision_grads = keep } })
      local x, y = batch()
      local b = BATCH // W
      x, y = x:narrow(1, R * b + 1, b), y:narrow(1, R * b * CTX + 1, b * CTX)
      local opt = optim.AdamW(model:parameters(), { lr = 1e-2 })
      for _ = 1, 3 do
        opt:zero_grad()
        F.cross_entropy(model(x), y):backward()
        for name, p in model:named_parameters() do
          if p.grad ~= nil then
            T.eq(p.grad.dtype, keep and dt or "float32", name .. "'s grad dtype")
            T.eq(p.dtype, "float32", name .. " stays float32")
          end
        end
        opt:step()
      end
      states[keep] = D.state_of(model)
    end
    D.check_state(states[true], states[false], 0, "keep_low_precision_grads " .. dt)
  end)
end

D.case("keep_low_precision_grads must be a boolean", function()
  T.raises(function()
    fsdp.FSDP(TinyLM(), { mixed_precision = { param_dtype = "bfloat16", keep_low_precision_grads = 1 } })
  end, "FSDP", "mixed_precision.keep_low_precision_grads", "true or false", "got 1")
end)

D.finish("dist_fsdp_lowp")
