-- checkpoint.lua: activation checkpointing, as torch.utils.checkpoint and
-- torch.distributed.algorithms._checkpoint.checkpoint_wrapper (require "moonshard.checkpoint").
--   local ckpt = require "moonshard.checkpoint"
--   local y = ckpt.checkpoint(fn, x, ...)              -- fn's activations are recomputed in backward
--   model.h[1] = ckpt.checkpoint_wrapper(model.h[1])   -- the same for a module
--   ckpt.apply_activation_checkpointing(model, {check_fn = function(m) return m:isinstance(Block) end})
-- Forward runs fn without recording a graph and keeps only its inputs; backward runs fn again
-- with grad mode on, on detached copies of the inputs, from the random state forward started
-- from (dropout draws the same masks), and backpropagates through that graph: a backward nested
-- in the one running (PyTorch's reentrant checkpoint). Parameters used inside fn receive their
-- gradients there, accumulated as usual (their post-accumulate hooks fire: FSDP's reductions).
local ms = require "moonshard"
local nn = require "moonshard.nn"
local options = require "moonshard.check_opts"
local Function = require("moonshard.autograd").Function
local fmt = string.format
local pack, unpack = table.pack, table.unpack
local is_tensor = ms.is_tensor

local M = {}

-- ---- the Function -----------------------------------------------------------------------------

local CheckpointFunction = Function:extend("CheckpointFunction")
M.CheckpointFunction = CheckpointFunction

-- The intermediates of a checkpointed forward die at its end, and so do the recomputed graph's
-- tensors once its backward has run; only the Lua collector frees what a dead tensor holds, and
-- its headroom (lua/l_tensor.c: a quarter of the live set) would let them pile up to a good part
-- of what checkpointing saves. When a piece left more than DEAD_LIMIT behind, a full collection
-- (of the Lua heap, small next to the tensors) returns it at once, as PyTorch's reference counts
-- would; below that the collection would cost more than it gives back.
local DEAD_LIMIT = 16 * 1024 * 1024

local function engine_bytes()
  local n = ms.memory_stats().current
  for d = 0, ms.cuda.device_count() - 1 do n = n + ms.cuda.memory_allocated(d) end
  return n
end

local function release_dead(before)
  if engine_bytes() - before > DEAD_LIMIT then collectgarbage() end
end

-- moonshard draws on every device from one Philox generator (ms.cuda.get_rng_state is the same
-- state), so the CPU generator's state is the whole random state, CUDA tensors included.
function CheckpointFunction.forward(ctx, run, ...)
  ctx.run, ctx.args, ctx.rng = run, pack(...), ms.get_rng_state()
  local before = engine_bytes()
  local outs = pack(run(...))
  release_dead(before)
  return unpack(outs, 1, outs.n)
end

-- The inputs again, cut from the graph: tensors detached (requiring grad as the originals did).
local function detached_inputs(args)
  local inputs = { n = args.n }
  for i = 1, args.n do
    local a = args[i]
    inputs[i] = is_tensor(a) and a:detach():requires_grad_(a.requires_grad and a:is_floating_point()) or a
  end
  return inputs
end

-- run(inputs) with grad mode on, from the random state forward started from; the state of the
-- generator is put back after, so what follows draws as if nothing had been recomputed.
local function recompute(ctx, inputs)
  local now = ms.get_rng_state()
  ms.set_rng_state(ctx.rng)
  local ok, outs = pcall(function()
    local _ <close> = ms.enable_grad()
    return pack(ctx.run(unpack(inputs, 1, inputs.n)))
  end)
  ms.set_rng_state(now)
  if not ok then error(outs, 0) end
  return outs
end

-- Backpropagates grads into the recomputed outputs that require grad (several as one scalar:
-- the engine's backward takes one root).
local function backpropagate(outs, ...)
  local roots, grads = {}, {}
  for i = 1, outs.n do
    local o = outs[i]
    if is_tensor(o) and o.requires_grad then roots[#roots + 1], grads[#grads + 1] = o, (select(i, ...)) end
  end
  if #roots == 0 then
    error("checkpoint: none of the outputs of the recomputed function requires grad, so checkpointing "
      .. "it is not needed", 0)
  end
  if #roots == 1 then return roots[1]:backward(grads[1]) end
  local total
  do
    local _ <close> = ms.enable_grad()
    for k = 1, #roots do
      local term = (roots[k] * grads[k]:to(roots[k].dtype)):sum()
      total = total and total + term or term
    end
  end
  total:backward()
end

function CheckpointFunction.backward(ctx, ...)
  local args = ctx.args
  local before = engine_bytes()
  local inputs = detached_inputs(args)
  backpropagate(recompute(ctx, inputs), ...)
  ctx.args = nil
  local grads = { n = args.n + 1 } -- the first input of apply is run
  for i = 1, args.n do
    local d = inputs[i]
    if is_tensor(d) and d.requires_grad then grads[i + 1] = d.grad end
  end
  inputs = nil -- luacheck: ignore (dead before the collection)
  release_dead(before)
  return unpack(grads, 1, grads.n)
end

-- ---- checkpoint(fn, ...) ------------------------------------------------------------------------

local function any_requires_grad(...)
  for i = 1, select("#", ...) do
    local a = select(i, ...)
    if is_tensor(a) and a.requires_grad then return true end
  end
  return false
end

-- checkpoint(fn, ...) -> fn(...), its activations recomputed in backward. When no input requires
-- grad (or grad mode is off) fn runs as is: a checkpoint would leave the parameters inside fn
-- without gradients (PyTorch's reentrant checkpoint only warns).
function M.checkpoint(fn, ...)
  if type(fn) ~= "function" and not (getmetatable(fn) or {}).__call then
    error(fmt("checkpoint: bad argument #1 (function): expected a function or a callable, got %s", type(fn)), 2)
  end
  if not (ms.is_grad_enabled() and any_requires_grad(...)) then return fn(...) end
  return CheckpointFunction.apply(fn, ...)
end

-- ---- CheckpointWrapper --------------------------------------------------------------------------

-- The parameter tensors each module of m computes with now: {{module, {name = tensor}}, ...}.
-- FSDP points a unit's modules at the gathered views only during the unit's forward; the
-- recompute runs in backward, so it puts back what forward saw.
local function parameter_snapshot(m)
  local snap = {}
  for _, mod in ipairs(m:modules()) do
    local map = {}
    for name, p in pairs(mod._parameters.map) do map[name] = p end
    snap[#snap + 1] = { mod, map }
  end
  return snap
end

-- Installs a snapshot; returns a to-be-closed value that puts the current tensors back.
local RESTORE = {
  __close = function(r)
    for _, e in ipairs(r.old) do
      for name, p in pairs(e[2]) do e[1]._parameters.map[name] = p end
    end
  end,
}
local function install(snap)
  local old = {}
  for i, e in ipairs(snap) do
    local map, was = e[1]._parameters.map, {}
    for name, p in pairs(e[2]) do was[name], map[name] = map[name], p end
    old[i] = { e[1], was }
  end
  return setmetatable({ old = old }, RESTORE)
end

local CheckpointWrapper = nn.Module:extend("CheckpointWrapper")
M.CheckpointWrapper = CheckpointWrapper

function CheckpointWrapper:init(module)
  if not nn.is_module(module) then
    error(fmt("checkpoint_wrapper: bad argument #1 (module): expected an nn.Module, got %s", type(module)), 3)
  end
  self._checkpoint_wrapped_module = module
end

function CheckpointWrapper:forward(...)
  local m = self._checkpoint_wrapped_module
  local snap = parameter_snapshot(m)
  return M.checkpoint(function(...)
    local _ <close> = install(snap)
    return m(...)
  end, ...)
end

-- As PyTorch's __getattr__: a name the wrapper does not have is read from the wrapped module.
nn.internal.forward_missing(CheckpointWrapper, "_checkpoint_wrapped_module")

-- checkpoint_wrapper(module) -> a CheckpointWrapper whose forward checkpoints module's forward.
-- Parameter and state-dict names are the module's (nn strips "_checkpoint_wrapped_module.").
function M.checkpoint_wrapper(module)
  if not nn.is_module(module) then
    error(fmt("checkpoint_wrapper: bad argument #1 (module): expected an nn.Module, got %s", type(module)), 2)
  end
  return CheckpointWrapper(module)
end

-- apply_activation_checkpointing(model, {check_fn = fn}): every submodule m (below model) for
-- which check_fn(m) is true is replaced in its parent by checkpoint_wrapper(m); the search does
-- not enter a replaced module. Returns model.
function M.apply_activation_checkpointing(model, opts)
  if not nn.is_module(model) then
    error(fmt("apply_activation_checkpointing: bad argument #1 (model): expected an nn.Module, got %s",
      type(model)), 2)
  end
  options.check_given("apply_activation_checkpointing", opts, { "check_fn" }, 2)
  if type(opts.check_fn) ~= "function" then
    error(fmt("apply_activation_checkpointing: option 'check_fn': expected a function(module), got %s",
      type(opts.check_fn)), 2)
  end
  local function visit(m)
    for _, name in ipairs(m._modules.names) do
      local child = m._modules.map[name]
      if child:isinstance(CheckpointWrapper) then -- already wrapped
      elseif opts.check_fn(child) then m._modules.map[name] = CheckpointWrapper(child)
      else visit(child) end
    end
  end
  visit(model)
  return model
end

return M
