-- checkpoint.lua: the docstrings of require "moonshard.checkpoint", activation checkpointing as
-- torch.utils.checkpoint and PyTorch's checkpoint_wrapper (docs/activation-checkpointing.md).
return {
  title = "Activation checkpointing (checkpoint)",
  {
    name = "checkpoint.checkpoint",
    sig = "checkpoint.checkpoint(fn, ...) -> fn(...)",
    doc = [[
Runs `fn(...)` without keeping its activations; backward runs `fn` again, from the same random
state (dropout draws the same masks), and backpropagates through that (PyTorch's reentrant
`torch.utils.checkpoint.checkpoint`): memory for compute. Parameters used inside `fn` get their
gradients as usual. When no input requires grad, or grad mode is off, `fn` just runs.]],
    example = [[
local ckpt = require "moonshard.checkpoint"
local lin = nn.Linear(3, 3)
local x = ms.ones(2, 3, {requires_grad = true})
local y = ckpt.checkpoint(function(t) return lin(t):relu() end, x)
y:sum():backward()
print(x.grad.shape, lin.weight.grad ~= nil)   --> torch.Size([2, 3])	true
]],
  },
  {
    name = "checkpoint.checkpoint_wrapper",
    also = { "fsdp.checkpoint_wrapper" },
    sig = "checkpoint.checkpoint_wrapper(module) -> CheckpointWrapper",
    doc = [[
A module whose forward checkpoints `module`'s forward (PyTorch's `checkpoint_wrapper`). Parameter
and state-dict names stay the module's; other names are read through to it.]],
    example = [[
local ckpt = require "moonshard.checkpoint"
local block = ckpt.checkpoint_wrapper(nn.Linear(4, 4))
local names = {}
for name in pairs(block:state_dict()) do names[#names + 1] = name end
table.sort(names)
print(table.concat(names, " "), block(ms.randn(2, 4)).shape)   --> bias weight	torch.Size([2, 4])
]],
  },
  {
    name = "checkpoint.CheckpointWrapper",
    also = { "fsdp.CheckpointWrapper" },
    sig = "checkpoint.CheckpointWrapper (the class of checkpoint_wrapper's modules)",
    doc = [[The nn.Module class `checkpoint_wrapper` makes; test for it with `m:isinstance(checkpoint.CheckpointWrapper)`.]],
    example = [[
local ckpt = require "moonshard.checkpoint"
print(ckpt.checkpoint_wrapper(nn.ReLU()):isinstance(ckpt.CheckpointWrapper))   --> true
]],
  },
  {
    name = "checkpoint.apply_activation_checkpointing",
    also = { "fsdp.apply_activation_checkpointing" },
    sig = "checkpoint.apply_activation_checkpointing(model, {check_fn = function(module) -> boolean}) -> model",
    doc = [[
Replaces every submodule `m` of `model` for which `check_fn(m)` is true by
`checkpoint_wrapper(m)`, in its parent; the search does not enter a replaced module. With FSDP,
wrap first, then apply (PyTorch's order).]],
    example = [[
local ckpt = require "moonshard.checkpoint"
local model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
ckpt.apply_activation_checkpointing(model, {check_fn = function(m) return m:isinstance(nn.Linear) end})
print(model[1]:isinstance(ckpt.CheckpointWrapper), model[2]:isinstance(ckpt.CheckpointWrapper))   --> true	false
]],
  },
  {
    name = "checkpoint.CheckpointFunction",
    sig = "checkpoint.CheckpointFunction.apply(fn, ...) -> fn(...)",
    doc = [[
The `ms.autograd.Function` that `checkpoint` is made of (its node is "CheckpointFunctionBackward");
call `checkpoint.checkpoint` rather than this.]],
    example = [[
local ckpt = require "moonshard.checkpoint"
local x = ms.ones(2, {requires_grad = true})
print(ckpt.checkpoint(function(t) return t * 2 end, x).grad_fn)   --> CheckpointFunctionBackward
]],
  },
}
