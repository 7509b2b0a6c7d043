-- docs/optim.lua: the docstrings of `local optim = require "moonshard.optim"` (torch.optim):
-- the optimizers with their options tables and the methods of optim.Optimizer.
-- Option rows several optimizers share.
local MAXIMIZE = { "maximize", "boolean", "false", "ascend rather than descend" }
local L2_DECAY = { "weight_decay", "number", "0", "L2 penalty added to the gradient" }
local FOREACH = { "foreach", "boolean", "true", "one native call for all the group's parameters of one "
  .. "device and dtype (false: one per parameter; bit for bit the same; docs/optimizers.md)" }
local CAPTURABLE = { "capturable", "boolean", "false", "on CUDA, the kernels read the learning rate and the "
  .. "step's numbers from device memory, as a step captured in a CUDA graph must (automatic while one is captured; "
  .. "no effect on the CPU)" }

return {
  title = "Optimizers (optim)",

  { name = "optim.SGD",
    sig = "optim.SGD(params, {lr =, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false, maximize = false, foreach = true, capturable = false}) -> Optimizer",
    doc = [[Stochastic gradient descent, with momentum and Nesterov momentum as PyTorch's. params
is an array of tensors (`model:parameters()`), an iterator of them, or an array of parameter
groups `{{params = {...}, lr = ...}, ...}` whose options override the defaults. lr is required.
One fused native pass over all the parameters of a group (foreach), or one per parameter.]],
    opts = { { "lr", "number", "nil", "required: the learning rate" },
             { "momentum", "number", "0", "the momentum factor" },
             { "dampening", "number", "0", "dampening of the momentum" },
             L2_DECAY,
             { "nesterov", "boolean", "false", "Nesterov momentum (needs momentum > 0, dampening 0)" },
             MAXIMIZE,
             FOREACH,
             CAPTURABLE },
    example = [[
local w = nn.Parameter(ms.tensor({1.0, 2.0}))
local opt = optim.SGD({w}, {lr = 0.1})
w.grad = ms.tensor({1.0, 1.0})
opt:step()
print(w)  --> tensor([0.9000, 1.9000], requires_grad=True)
]] },

  { name = "optim.Adam",
    sig = "optim.Adam(params, {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, amsgrad = false, maximize = false, foreach = true, capturable = false}) -> Optimizer",
    doc = [[Adam, as PyTorch's (weight_decay added to the gradient, L2 style; see optim.AdamW for
the decoupled form). params as optim.SGD. State per parameter: step, exp_avg, exp_avg_sq
(max_exp_avg_sq with amsgrad).]],
    opts = { { "lr", "number", "1e-3", "the learning rate" },
             { "betas", "{number, number}", "{0.9, 0.999}", "the decay rates of the first and second moments" },
             { "eps", "number", "1e-8", "added to the denominator" },
             L2_DECAY,
             { "amsgrad", "boolean", "false", "use the maximum of the second moments" },
             MAXIMIZE,
             FOREACH,
             CAPTURABLE },
    example = [[
local p = nn.Parameter(ms.tensor({1.0}))
local opt = optim.Adam({p}, {lr = 0.1})
p.grad = ms.tensor({5.0})
opt:step()
print(p, opt.state[p].step)  --> tensor([0.9000], requires_grad=True)	1
]] },

  { name = "optim.AdamW",
    sig = "optim.AdamW(params, {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 1e-2, amsgrad = false, maximize = false, foreach = true, capturable = false}) -> Optimizer",
    doc = [[Adam with decoupled weight decay (the parameter is scaled by 1 - lr * weight_decay
before the Adam update), as PyTorch's AdamW; note the default weight_decay of 0.01.]],
    opts = { { "lr", "number", "1e-3", "the learning rate" },
             { "betas", "{number, number}", "{0.9, 0.999}", "the decay rates of the first and second moments" },
             { "eps", "number", "1e-8", "added to the denominator" },
             { "weight_decay", "number", "1e-2", "decoupled weight decay" },
             { "amsgrad", "boolean", "false", "use the maximum of the second moments" },
             MAXIMIZE,
             FOREACH,
             CAPTURABLE },
    example = [[
local p = nn.Parameter(ms.tensor({1.0}))
local opt = optim.AdamW({p}, {lr = 0.1})
p.grad = ms.tensor({5.0})
opt:step()
print(p)  --> tensor([0.8990], requires_grad=True)
]] },

  { name = "optim.Adadelta",
    sig = "optim.Adadelta(params, {lr = 1.0, rho = 0.9, eps = 1e-6, weight_decay = 0, maximize = false, foreach = true, capturable = false}) -> Optimizer",
    doc = [[Adadelta, as PyTorch's (the seed's MNIST example trains with it, lr = 1.0 and a
StepLR of gamma 0.7). State per parameter: step, square_avg, acc_delta.]],
    opts = { { "lr", "number", "1.0", "the coefficient of the update" },
             { "rho", "number", "0.9", "the decay of the running averages, in [0, 1]" },
             { "eps", "number", "1e-6", "added for numerical stability" },
             L2_DECAY,
             MAXIMIZE,
             FOREACH,
             CAPTURABLE },
    example = [[
local p = nn.Parameter(ms.tensor({1.0}))
local opt = optim.Adadelta({p})
p.grad = ms.tensor({5.0})
opt:step()
print(p)  --> tensor([0.9968], requires_grad=True)
]] },

  { name = "optim.Adagrad",
    sig = "optim.Adagrad(params, {lr = 1e-2, lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0, eps = 1e-10, maximize = false}) -> Optimizer",
    doc = [[Adagrad, as PyTorch's. As there, the state (step, sum) is made when a parameter joins,
not at the first step.]],
    opts = { { "lr", "number", "1e-2", "the learning rate" },
             { "lr_decay", "number", "0", "the learning rate's decay per step" },
             L2_DECAY,
             { "initial_accumulator_value", "number", "0", "the starting value of the sum of squares" },
             { "eps", "number", "1e-10", "added to the denominator" },
             MAXIMIZE },
    example = [[
local p = nn.Parameter(ms.tensor({1.0}))
local opt = optim.Adagrad({p}, {lr = 0.1})
p.grad = ms.tensor({5.0})
opt:step()
print(p)  --> tensor([0.9000], requires_grad=True)
]] },

  { name = "optim.RMSprop",
    sig = "optim.RMSprop(params, {lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0, centered = false, maximize = false}) -> Optimizer",
    doc = [[RMSprop, as PyTorch's. State per parameter: step, square_avg (momentum_buffer with
momentum, grad_avg when centered).]],
    opts = { { "lr", "number", "1e-2", "the learning rate" },
             { "alpha", "number", "0.99", "the smoothing constant" },
             { "eps", "number", "1e-8", "added to the denominator" },
             L2_DECAY,
             { "momentum", "number", "0", "the momentum factor" },
             { "centered", "boolean", "false", "normalize by the estimated variance of the gradient" },
             MAXIMIZE },
    example = [[
local p = nn.Parameter(ms.tensor({1.0}))
local opt = optim.RMSprop({p}, {lr = 0.01})
p.grad = ms.tensor({5.0})
opt:step()
print(p)  --> tensor([0.9000], requires_grad=True)
]] },

  { name = "optim.Optimizer",
    sig = "optim.Optimizer",
    doc = [[The base class of the optimizers (torch.optim.Optimizer). An instance has
`param_groups` (an array of groups: `params` plus every option), `state` (per parameter tensor,
a table: step and the state tensors), `defaults` and `name`. Its methods are step, zero_grad,
add_param_group, state_dict and load_state_dict.]],
    example = [[
local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 0.1})
print(opt.name, #opt.param_groups, #opt.param_groups[1].params, opt.param_groups[1].momentum)  --> SGD	1	2	0
]] },

  { name = "Optimizer:init",
    sig = "optim.Optimizer.init(self, name, params, defaults, opts) -> self",
    doc = [[Sets up an optimizer object (for a new optimizer class): checks opts against
`defaults` (every option with its default), builds the parameter groups and calls the class's
`_check_group(group)` and `_init_group_state(group)` hooks. A class also defines
`_update(p, grad, group, state)`, called by step for each parameter with a gradient.]],
    example = [[
local SignSGD = setmetatable({}, {__index = optim.Optimizer})
SignSGD.__index = SignSGD
function SignSGD:_update(p, grad, g)
  local _ <close> = ms.no_grad()
  p:sub_(grad:sign() * g.lr)
end
local w = nn.Parameter(ms.tensor({1.0, 1.0}))
local opt = optim.Optimizer.init(setmetatable({}, SignSGD), "SignSGD", {w}, {lr = 0.5}, {})
w.grad = ms.tensor({3.0, -0.1})
opt:step()
print(w)  --> tensor([0.5000, 1.5000], requires_grad=True)
]] },

  { name = "Optimizer:step",
    sig = "optimizer:step(closure = nil) -> loss",
    doc = [[One update of every parameter that has a gradient. A closure, if given, is called with
gradient recording on (to recompute the loss) and its result returned.]],
    example = [[
local w = nn.Parameter(ms.tensor({2.0}))
local opt = optim.SGD({w}, {lr = 0.25})
local loss = opt:step(function()
  opt:zero_grad()
  local l = (w * w):sum()
  l:backward()
  return l
end)
print(loss:item(), w)  --> 4.0	tensor([1.], requires_grad=True)
]] },

  { name = "Optimizer:zero_grad",
    sig = "optimizer:zero_grad({set_to_none = true})",
    doc = [[Clears the gradients of every parameter of every group: set to nil (the default, as
PyTorch 2) or zeroed in place with `set_to_none = false`.]],
    opts = { { "set_to_none", "boolean", "true", "remove the gradients rather than zeroing them" } },
    example = [[
local w = nn.Parameter(ms.tensor({1.0}))
local opt = optim.SGD({w}, {lr = 0.1})
w.grad = ms.tensor({3.0})
opt:zero_grad({set_to_none = false})
print(w.grad)  --> tensor([0.])
opt:zero_grad()
print(w.grad)  --> nil
]] },

  { name = "Optimizer:add_param_group",
    sig = "optimizer:add_param_group({params = {...}, option = value, ...})",
    doc = [[Adds a group of parameters with its own options (the others from the defaults), for
instance a layer unfrozen during fine-tuning. A parameter may belong to one group only.]],
    example = [[
local body, head = nn.Linear(4, 4), nn.Linear(4, 2)
local opt = optim.SGD(body:parameters(), {lr = 0.01})
opt:add_param_group({params = head:parameters(), lr = 0.1})
print(#opt.param_groups, opt.param_groups[2].lr, opt.param_groups[2].momentum)  --> 2	0.1	0
]] },

  { name = "Optimizer:state_dict",
    sig = "optimizer:state_dict() -> {state =, param_groups =}",
    doc = [[PyTorch's structure with Lua's 1-based positions: `state[i]` is the state of the i-th
parameter (across groups, in order) and each group lists its parameters' positions in `params`.
State tensors are the live ones; ms.save writes the dict as it is.]],
    example = [[
local p = nn.Parameter(ms.tensor({1.0}))
local opt = optim.Adam({p})
p.grad = ms.tensor({1.0}); opt:step()
local sd = opt:state_dict()
print(sd.param_groups[1].lr, sd.param_groups[1].params[1], sd.state[1].step)  --> 0.001	1	1
]] },

  { name = "Optimizer:load_state_dict",
    sig = "optimizer:load_state_dict(sd)",
    doc = [[Loads a state dict of an optimizer with the same groups and parameter counts: the
groups' options and copies of the state tensors (so sd may be reused). A PyTorch 0-dim tensor
step is read back as a number.]],
    example = [[
local p = nn.Parameter(ms.tensor({1.0}))
local a = optim.Adam({p}, {lr = 0.5})
p.grad = ms.tensor({1.0}); a:step()
local b = optim.Adam({p})
b:load_state_dict(a:state_dict())
print(b.param_groups[1].lr, b.state[p].step)  --> 0.5	1
]] },
}
