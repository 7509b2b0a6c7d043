-- docs/lr_scheduler.lua: the docstrings of `require "moonshard.lr_scheduler"` (also
-- optim.lr_scheduler, torch.optim.lr_scheduler). Every scheduler sets the groups' lr at
-- construction and at each step(), with PyTorch 1.13's formulas in its order of operations.
return {
  title = "Learning-rate schedulers (lr_scheduler)",

  { name = "lr_scheduler.LRScheduler",
    sig = "lr_scheduler.LRScheduler",
    doc = [[The base class of the schedulers (torch's _LRScheduler). A scheduler holds
`optimizer`, `base_lrs` (each group's initial_lr), `last_epoch` (-1 before the first step) and
sets every group's `lr`. Call `scheduler:step()` once per epoch (or per batch for OneCycleLR),
after `optimizer:step()`.]],
    example = [[
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 0.1})
local sched = optim.lr_scheduler.StepLR(opt, {step_size = 1, gamma = 0.5})
print(sched.base_lrs[1], sched.last_epoch)  --> 0.1	0
]] },

  { name = "LRScheduler:init",
    sig = "lr_scheduler.LRScheduler.init(self, name, optimizer, last_epoch = -1) -> self",
    doc = [[Sets up a scheduler object (for a new scheduler class, whose `get_lr()` returns the
groups' next learning rates): records each group's initial_lr and base_lrs, then takes the first
step. With last_epoch other than -1 (resuming), every group needs initial_lr.]],
    example = [[
local Halving = setmetatable({}, {__index = optim.lr_scheduler.LRScheduler})
Halving.__index = Halving
function Halving:get_lr()
  local out = {}
  for i, b in ipairs(self.base_lrs) do out[i] = b * 0.5 ^ self.last_epoch end
  return out
end
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 1.0})
local s = optim.lr_scheduler.LRScheduler.init(setmetatable({}, Halving), "Halving", opt)
s:step(); s:step()
print(opt.param_groups[1].lr)  --> 0.25
]] },

  { name = "LRScheduler:step",
    sig = "scheduler:step(epoch = nil)",
    doc = [[Advances one epoch and sets every group's lr; `step(epoch)` jumps to `epoch`, with the
closed form where PyTorch has one.]],
    example = [[
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 1.0})
local sched = optim.lr_scheduler.ExponentialLR(opt, {gamma = 0.5})
for epoch = 1, 3 do
  opt:step()      -- after the epoch's updates
  sched:step()
end
print(opt.param_groups[1].lr)  --> 0.125
]] },

  { name = "LRScheduler:get_last_lr",
    sig = "scheduler:get_last_lr() -> {number, ...}",
    doc = [[The learning rates the last step set, one per group (a copy).]],
    example = [[
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 0.1})
local sched = optim.lr_scheduler.StepLR(opt, {step_size = 1, gamma = 0.1})
sched:step()
print(sched:get_last_lr()[1])  --> 0.01
]] },

  { name = "LRScheduler:state_dict",
    sig = "scheduler:state_dict() -> table",
    doc = [[Every field but the optimizer and functions: last_epoch, base_lrs, the scheduler's
options. A LambdaLR's lambdas are not saved, as in PyTorch.]],
    example = [[
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 0.1})
local sched = optim.lr_scheduler.StepLR(opt, {step_size = 2})
sched:step()
local sd = sched:state_dict()
print(sd.last_epoch, sd.step_size, sd.optimizer)  --> 1	2	nil
]] },

  { name = "LRScheduler:load_state_dict",
    sig = "scheduler:load_state_dict(sd)",
    doc = [[Restores the fields of a state dict (the optimizer's lr comes from the optimizer's own
state dict, as in PyTorch).]],
    example = [[
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 0.1})
local a = optim.lr_scheduler.StepLR(opt, {step_size = 2})
a:step(); a:step(); a:step()
local b = optim.lr_scheduler.StepLR(opt, {step_size = 2})
b:load_state_dict(a:state_dict())
print(b.last_epoch)  --> 3
]] },

  { name = "lr_scheduler.StepLR",
    sig = "lr_scheduler.StepLR(optimizer, {step_size =, gamma = 0.1, last_epoch = -1}) -> LRScheduler",
    doc = [[Multiplies each group's lr by gamma every step_size epochs.]],
    opts = { { "step_size", "integer", "nil", "required: the epochs between decays" },
             { "gamma", "number", "0.1", "the decay factor" },
             { "last_epoch", "integer", "-1", "the last epoch done, when resuming" } },
    example = [[
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 1.0})
local sched = optim.lr_scheduler.StepLR(opt, {step_size = 2, gamma = 0.5})
local lrs = {}
for epoch = 1, 6 do lrs[epoch] = sched:get_last_lr()[1]; opt:step(); sched:step() end
print(table.concat(lrs, " "))  --> 1.0 1.0 0.5 0.5 0.25 0.25
]] },

  { name = "lr_scheduler.StepLR:get_lr",
    sig = "scheduler:get_lr() -> {number, ...}",
    doc = [[The groups' learning rates for the current last_epoch, from their current ones (the
chainable form step() uses; read get_last_lr() instead).]],
    example = [[
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 1.0})
local s = optim.lr_scheduler.StepLR(opt, {step_size = 2})
print(s:get_lr()[1])  --> 1.0
]] },

  { name = "lr_scheduler.MultiStepLR",
    sig = "lr_scheduler.MultiStepLR(optimizer, {milestones =, gamma = 0.1, last_epoch = -1}) -> LRScheduler",
    doc = [[Multiplies each group's lr by gamma at each epoch of milestones (a list; a milestone
listed twice decays twice).]],
    opts = { { "milestones", "{integer, ...}", "nil", "required: the epochs at which to decay" },
             { "gamma", "number", "0.1", "the decay factor" },
             { "last_epoch", "integer", "-1", "the last epoch done, when resuming" } },
    example = [[
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 1.0})
local sched = optim.lr_scheduler.MultiStepLR(opt, {milestones = {2, 4}, gamma = 0.1})
local lrs = {}
for epoch = 1, 5 do lrs[epoch] = ("%g"):format(sched:get_last_lr()[1]); opt:step(); sched:step() end
print(table.concat(lrs, " "))  --> 1 1 0.1 0.1 0.01
]] },

  { name = "lr_scheduler.MultiStepLR:get_lr",
    sig = "scheduler:get_lr() -> {number, ...}",
    doc = [[The groups' learning rates for the current last_epoch (the chainable form step()
uses; read get_last_lr() instead).]],
    example = [[
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 1.0})
print(optim.lr_scheduler.MultiStepLR(opt, {milestones = {3}}):get_lr()[1])  --> 1.0
]] },

  { name = "lr_scheduler.ExponentialLR",
    sig = "lr_scheduler.ExponentialLR(optimizer, {gamma =, last_epoch = -1}) -> LRScheduler",
    doc = [[Multiplies each group's lr by gamma every epoch.]],
    opts = { { "gamma", "number", "nil", "required: the decay factor" },
             { "last_epoch", "integer", "-1", "the last epoch done, when resuming" } },
    example = [[
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 1.0})
local sched = optim.lr_scheduler.ExponentialLR(opt, {gamma = 0.5})
opt:step(); sched:step(); opt:step(); sched:step()
print(sched:get_last_lr()[1])  --> 0.25
]] },

  { name = "lr_scheduler.ExponentialLR:get_lr",
    sig = "scheduler:get_lr() -> {number, ...}",
    doc = [[The groups' learning rates for the current last_epoch (the chainable form step()
uses; read get_last_lr() instead).]],
    example = [[
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 1.0})
print(optim.lr_scheduler.ExponentialLR(opt, {gamma = 0.5}):get_lr()[1])  --> 1.0
]] },

  { name = "lr_scheduler.CosineAnnealingLR",
    sig = "lr_scheduler.CosineAnnealingLR(optimizer, {T_max =, eta_min = 0, last_epoch = -1}) -> LRScheduler",
    doc = [[Anneals each group's lr from its initial value to eta_min along a half cosine over
T_max epochs (SGDR without restarts), in PyTorch's recursive form, so a change made to a group's
lr by hand carries on.]],
    opts = { { "T_max", "number", "nil", "required: the epochs of the half period" },
             { "eta_min", "number", "0", "the lowest learning rate" },
             { "last_epoch", "integer", "-1", "the last epoch done, when resuming" } },
    example = [[
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 1.0})
local sched = optim.lr_scheduler.CosineAnnealingLR(opt, {T_max = 4})
local lrs = {}
for epoch = 1, 5 do lrs[epoch] = ("%.3f"):format(sched:get_last_lr()[1]); opt:step(); sched:step() end
print(table.concat(lrs, " "))  --> 1.000 0.854 0.500 0.146 0.000
]] },

  { name = "lr_scheduler.CosineAnnealingLR:get_lr",
    sig = "scheduler:get_lr() -> {number, ...}",
    doc = [[The groups' learning rates for the current last_epoch (the recursive form step()
uses; read get_last_lr() instead).]],
    example = [[
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 1.0})
print(optim.lr_scheduler.CosineAnnealingLR(opt, {T_max = 4}):get_lr()[1])  --> 1.0
]] },

  { name = "lr_scheduler.LinearLR",
    sig = "lr_scheduler.LinearLR(optimizer, {start_factor = 1/3, end_factor = 1.0, total_iters = 5, last_epoch = -1}) -> LRScheduler",
    doc = [[Scales each group's lr by a factor going linearly from start_factor to end_factor over
total_iters epochs, then constant (a warm-up).]],
    opts = { { "start_factor", "number", "1/3", "the first epoch's factor, in (0, 1]" },
             { "end_factor", "number", "1.0", "the factor after total_iters, in [0, 1]" },
             { "total_iters", "integer", "5", "the epochs of the ramp" },
             { "last_epoch", "integer", "-1", "the last epoch done, when resuming" } },
    example = [[
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 1.0})
local sched = optim.lr_scheduler.LinearLR(opt, {start_factor = 0.25, total_iters = 3})
local lrs = {}
for epoch = 1, 5 do lrs[epoch] = ("%g"):format(sched:get_last_lr()[1]); opt:step(); sched:step() end
print(table.concat(lrs, " "))  --> 0.25 0.5 0.75 1 1
]] },

  { name = "lr_scheduler.LinearLR:get_lr",
    sig = "scheduler:get_lr() -> {number, ...}",
    doc = [[The groups' learning rates for the current last_epoch (the chainable form step()
uses; read get_last_lr() instead).]],
    example = [[
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 1.0})
local s = optim.lr_scheduler.LinearLR(opt, {start_factor = 0.5})
print(s:get_last_lr()[1])  --> 0.5
]] },

  { name = "lr_scheduler.LambdaLR",
    sig = "lr_scheduler.LambdaLR(optimizer, lr_lambda | {lr_lambda =, last_epoch = -1}) -> LRScheduler",
    doc = [[Sets each group's lr to its initial lr times lr_lambda(epoch): one function for every
group, or a list with one per group. The function may also be given alone, as PyTorch's
positional form.]],
    opts = { { "lr_lambda", "function|{function, ...}", "nil", "required: the factor as a function of the epoch (from 0)" },
             { "last_epoch", "integer", "-1", "the last epoch done, when resuming" } },
    example = [[
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 1.0})
local sched = optim.lr_scheduler.LambdaLR(opt, function(epoch) return 1 / (epoch + 1) end)
opt:step(); sched:step(); opt:step(); sched:step()
print(("%.4f"):format(sched:get_last_lr()[1]))  --> 0.3333
]] },

  { name = "lr_scheduler.LambdaLR:get_lr",
    sig = "scheduler:get_lr() -> {number, ...}",
    doc = [[The groups' learning rates for the current last_epoch: base_lrs[i] * lr_lambdas[i](last_epoch).]],
    example = [[
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 2.0})
local s = optim.lr_scheduler.LambdaLR(opt, function(e) return 0.5 end)
print(s:get_lr()[1])  --> 1.0
]] },

  { name = "lr_scheduler.OneCycleLR",
    sig = "lr_scheduler.OneCycleLR(optimizer, {max_lr =, total_steps = | epochs =, steps_per_epoch =, pct_start = 0.3, anneal_strategy = \"cos\", cycle_momentum = true, base_momentum = 0.85, max_momentum = 0.95, div_factor = 25, final_div_factor = 1e4, three_phase = false, last_epoch = -1}) -> LRScheduler",
    doc = [[The 1cycle policy, stepped once per batch: the lr rises from max_lr / div_factor to
max_lr over pct_start of the steps, then anneals to max_lr / div_factor / final_div_factor; the
momentum (SGD's momentum or Adam's beta1) cycles the other way when cycle_momentum. Give
total_steps, or epochs and steps_per_epoch. Stepping past total_steps raises.]],
    opts = { { "max_lr", "number|{number, ...}", "nil", "required: the peak lr (one per group, or one for all)" },
             { "total_steps", "integer", "nil", "the number of steps of the cycle" },
             { "epochs", "integer", "nil", "with steps_per_epoch, when total_steps is not given" },
             { "steps_per_epoch", "integer", "nil", "with epochs" },
             { "pct_start", "number", "0.3", "the fraction of the cycle spent rising" },
             { "anneal_strategy", "string", "\"cos\"", "\"cos\" or \"linear\"" },
             { "cycle_momentum", "boolean", "true", "cycle the momentum inversely to the lr" },
             { "base_momentum", "number|{number, ...}", "0.85", "the lowest momentum" },
             { "max_momentum", "number|{number, ...}", "0.95", "the highest momentum" },
             { "div_factor", "number", "25", "initial lr = max_lr / div_factor" },
             { "final_div_factor", "number", "1e4", "min lr = initial lr / final_div_factor" },
             { "three_phase", "boolean", "false", "a third phase annihilating the lr (fast.ai's form)" },
             { "last_epoch", "integer", "-1", "the last step done, when resuming" } },
    example = [[
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 0.1, momentum = 0.9})
local sched = optim.lr_scheduler.OneCycleLR(opt, {max_lr = 1.0, total_steps = 6})
local lrs = {}
for step = 1, 6 do lrs[step] = ("%.3g"):format(sched:get_last_lr()[1]); opt:step(); sched:step() end
print(table.concat(lrs, " "))  --> 0.04 0.994 0.812 0.463 0.133 4e-06
]] },

  { name = "lr_scheduler.OneCycleLR:get_lr",
    sig = "scheduler:get_lr() -> {number, ...}",
    doc = [[The groups' learning rates for the current step (and, with cycle_momentum, sets their
momentum): what step() uses; read get_last_lr() instead.]],
    example = [[
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 0.1, momentum = 0.9})
local s = optim.lr_scheduler.OneCycleLR(opt, {max_lr = 1.0, total_steps = 10})
print(s:get_lr()[1], opt.param_groups[1].momentum)  --> 0.04	0.95
]] },
}
