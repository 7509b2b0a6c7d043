-- test_checkpoint.lua: activation checkpointing (moonshard.checkpoint): checkpoint(fn, ...) gives
-- the values and gradients of fn(...) with the same dropout masks (the random state is replayed
-- for the recompute and put back after), parameters inside fn get their .grad and their
-- post-accumulate hooks; checkpoint_wrapper keeps the module's parameter and state-dict names;
-- apply_activation_checkpointing on the GPT trains exactly as without it and holds less memory
-- through forward; the errors.
local T = require "testing"
local ms = require "moonshard"
local nn = require "moonshard.nn"
local F = require "moonshard.functional"
local optim = require "moonshard.optim"
local gpt = require "moonshard.models.gpt"
local ckpt = require "moonshard.checkpoint"
local fsdp = require "moonshard.fsdp"

local checkpoint = ckpt.checkpoint

local function same_bits(a, b, what)
  T.eq(a:ne(b):sum():item(), 0, what .. ": every element bit for bit")
end

-- A small net with dropout, run plainly or checkpointed; returns output, grads, the rng state after.
local function dropout_net(use_ckpt)
  ms.manual_seed(3)
  local lin = nn.Linear(6, 6):double()
  local x = ms.randn(4, 6, {dtype = "float64"}):requires_grad_()
  local calls = 0
  local function fn(a, scale)
    calls = calls + 1
    return F.dropout(lin(a):tanh(), {p = 0.5, training = true}) * scale
  end
  local y = use_ckpt and checkpoint(fn, x, 2.0) or fn(x, 2.0)
  ;(y * y):sum():backward()
  return {y = y, gx = x.grad, gw = lin.weight.grad, gb = lin.bias.grad, rng = ms.get_rng_state(), calls = calls}
end

T.test("checkpoint: the same output, gradients and dropout masks as the plain call; fn runs twice", function()
  local plain, ck = dropout_net(false), dropout_net(true)
  same_bits(ck.y, plain.y, "output")
  same_bits(ck.gx, plain.gx, "input grad")
  same_bits(ck.gw, plain.gw, "weight grad inside fn")
  same_bits(ck.gb, plain.gb, "bias grad inside fn")
  same_bits(ck.rng, plain.rng, "random state after backward")
  T.eq(plain.calls, 1)
  T.eq(ck.calls, 2, "forward and the recompute")
  T.eq(ck.y.grad_fn, "CheckpointFunctionBackward")
end)

T.test("forward keeps no graph inside fn; the recompute runs with grad mode on", function()
  local modes = {}
  local w = ms.randn(3):requires_grad_()
  local x = ms.randn(3):requires_grad_()
  local y = checkpoint(function(a)
    local r = a * w
    modes[#modes + 1] = {ms.is_grad_enabled(), r.grad_fn}
    return r:exp()
  end, x)
  T.same(modes[1], {false}, 0, "forward: grad off, no node")
  y:sum():backward()
  T.eq(modes[2][1], true)
  T.eq(modes[2][2], "MulBackward0")
  T.truthy(w.grad ~= nil and x.grad ~= nil)
end)

T.test("several outputs, non-tensor arguments and outputs, an unused output", function()
  local w = ms.tensor({1.5, -2.0}, {dtype = "float64", requires_grad = true})
  local function fn(a, k, b) return a * w * k, "tag", (b * w):sin() end
  local function run(use)
    w.grad = nil
    local a = ms.tensor({0.3, 0.7}, {dtype = "float64", requires_grad = true})
    local b = ms.tensor({1.1, 0.2}, {dtype = "float64", requires_grad = true})
    local p, tag, q = (use and checkpoint or function(f, ...) return f(...) end)(fn, a, 3, b)
    T.eq(tag, "tag")
    ;(p:sum() * 2 + q:sum()):backward()
    return {a.grad:tolist(), b.grad:tolist(), w.grad:tolist()}
  end
  T.same(run(true), run(false), 1e-15)
  -- only the first output used: the second's gradient is zero in the recompute's backward
  local a = ms.tensor({0.3, 0.7}, {dtype = "float64", requires_grad = true})
  local p = checkpoint(fn, a, 3, ms.ones(2, {dtype = "float64"}))
  p:sum():backward()
  T.same(a.grad:tolist(), {4.5, -6.0}, 1e-15)
end)

T.test("no input requires grad: fn runs as is, so the parameters inside still get gradients", function()
  local lin = nn.Linear(3, 2)
  local y = checkpoint(lin, ms.randn(4, 3))
  T.eq(y.grad_fn, "AddmmBackward0")
  y:sum():backward()
  T.truthy(lin.weight.grad ~= nil)
end)

T.test("a checkpoint inside a checkpoint", function()
  local w = ms.tensor({0.5, 2.0}, {dtype = "float64", requires_grad = true})
  local function inner(a) return (a * w):exp() end
  local function outer(a) return checkpoint(inner, a * 2) * w end
  local x = ms.tensor({1.0, -1.0}, {dtype = "float64", requires_grad = true})
  checkpoint(outer, x):sum():backward()
  local gx, gw = x.grad:tolist(), w.grad:tolist()
  w.grad = nil
  local x2 = ms.tensor({1.0, -1.0}, {dtype = "float64", requires_grad = true})
  outer(x2):sum():backward()
  T.same(gx, x2.grad:tolist(), 1e-15)
  T.same(gw, w.grad:tolist(), 1e-15)
end)

T.test("post-accumulate hooks of parameters inside fn fire once per backward", function()
  local lin = nn.Linear(3, 3)
  local fired = 0
  lin.weight:register_post_accumulate_grad_hook(function() fired = fired + 1 end)
  checkpoint(lin, ms.randn(2, 3):requires_grad_()):sum():backward()
  T.eq(fired, 1)
end)

-- ---- checkpoint_wrapper, apply_activation_checkpointing -------------------------------------------

local CONFIG = {n_layer = 3, n_head = 2, n_embd = 16, block_size = 8, vocab_size = 11, dropout = 0.3}
local function is_block(m) return m:isinstance(gpt.Block) end

local function names(m)
  local out = {}
  for n in m:named_parameters() do out[#out + 1] = n end
  return out
end

T.test("checkpoint_wrapper: names, state dicts and attributes are the wrapped module's", function()
  ms.manual_seed(1)
  local plain = gpt.GPT(CONFIG)
  ms.manual_seed(1)
  local model = ckpt.apply_activation_checkpointing(gpt.GPT(CONFIG), {check_fn = is_block})
  T.eq(model.transformer.h[1]:_get_name(), "CheckpointWrapper")
  T.eq(model.transformer.h[1]._checkpoint_wrapped_module:_get_name(), "Block")
  T.same(names(model), names(plain))
  local sd, keys = model:state_dict()
  local _, plain_keys = plain:state_dict()
  T.same(keys, plain_keys)
  model:load_state_dict(plain:state_dict())
  plain:load_state_dict(sd)
  T.truthy(model.transformer.h[1].ln_1 ~= nil, "attributes read through the wrapper")
  T.eq(model.transformer.h[1].attn.n_head, 2)
  -- applying again wraps nothing twice
  ckpt.apply_activation_checkpointing(model, {check_fn = is_block})
  T.eq(model.transformer.h[1]._checkpoint_wrapped_module:_get_name(), "Block")
  T.eq(fsdp.apply_activation_checkpointing, ckpt.apply_activation_checkpointing)
  T.eq(fsdp.checkpoint_wrapper, ckpt.checkpoint_wrapper)
  local w = ckpt.checkpoint_wrapper(nn.Linear(2, 2))
  T.same(names(w), {"weight", "bias"})
end)

-- AdamW steps on the GPT (float64, dropout on), with or without every Block checkpointed.
local function train_gpt(use_ckpt)
  ms.manual_seed(1)
  local model = gpt.GPT(CONFIG):double()
  if use_ckpt then ckpt.apply_activation_checkpointing(model, {check_fn = is_block}) end
  ms.manual_seed(9)
  local x, y = ms.randint(1, 12, {4, 8}), ms.randint(1, 12, {4, 8})
  local opt = optim.AdamW(model:parameters(), {lr = 1e-2})
  local losses = {}
  for i = 1, 3 do
    opt:zero_grad()
    local _, loss = model(x, y)
    loss:backward()
    opt:step()
    losses[i] = loss:item()
  end
  return model, losses
end

T.test("the GPT with every Block checkpointed trains exactly as without (dropout on)", function()
  local plain, l1 = train_gpt(false)
  local model, l2 = train_gpt(true)
  T.same(l2, l1, 0)
  local sd = plain:state_dict()
  for k, v in pairs(model:state_dict()) do same_bits(v, sd[k], k) end
end)

T.test("checkpointing the Blocks holds less memory through forward", function()
  local big = {n_layer = 4, n_head = 2, n_embd = 64, block_size = 64, vocab_size = 11, dropout = 0.1}
  local function forward_peak(use_ckpt)
    ms.manual_seed(1)
    local model = gpt.GPT(big)
    if use_ckpt then ckpt.apply_activation_checkpointing(model, {check_fn = is_block}) end
    local x, y = ms.randint(1, 12, {8, 64}), ms.randint(1, 12, {8, 64})
    collectgarbage()
    local base = ms.memory_stats().current
    ms.reset_peak_memory_stats()
    local _, loss = model(x, y)
    collectgarbage() -- what forward left unreachable (a checkpoint's intermediates) is not held
    local held = ms.memory_stats().current - base
    loss:backward()
    return held
  end
  local plain, ck = forward_peak(false), forward_peak(true)
  T.truthy(ck < 0.5 * plain, ("activations held after forward: %d bytes checkpointed, %d plain"):format(ck, plain))
end)

T.test("errors", function()
  T.raises(function() checkpoint(42, ms.ones(1)) end, "checkpoint", "#1", "got number")
  T.raises(function() ckpt.checkpoint_wrapper({}) end, "checkpoint_wrapper", "nn.Module")
  T.raises(function() ckpt.apply_activation_checkpointing({}, {check_fn = is_block}) end,
    "apply_activation_checkpointing", "#1")
  T.raises(function() ckpt.apply_activation_checkpointing(nn.Linear(1, 1)) end,
    "apply_activation_checkpointing: expected an options table, got nil")
  T.raises(function() ckpt.apply_activation_checkpointing(nn.Linear(1, 1), {}) end,
    "apply_activation_checkpointing: option 'check_fn': expected a function(module), got nil")
  T.raises(function() ckpt.apply_activation_checkpointing(nn.Linear(1, 1), {check_fn = is_block, policy = 1}) end,
    "apply_activation_checkpointing: unknown option 'policy' (expected one of: check_fn)")
  local x = ms.ones(2):requires_grad_()
  local y = checkpoint(function(a) return a * 2 end, x)
  T.raises(function() checkpoint(function() error("inside fn") end, x) end, "inside fn")
  -- an error in the recompute surfaces from backward, naming the checkpoint
  local fail = false
  local z = checkpoint(function(a)
    if fail then error("recompute failed") end
    return a * 3
  end, x)
  fail = true
  T.raises(function() z:sum():backward() end, "CheckpointFunctionBackward", "recompute failed")
  y:sum():backward()
  T.same(x.grad:tolist(), {2.0, 2.0})
end)

T.finish()
