-- test_nn_losses.lua: the loss modules (nn.CrossEntropyLoss, nn.NLLLoss, nn.MSELoss) compute
-- their functional loss with the options given at construction, keep a class weight as a buffer
-- (it follows :to() and is in the state_dict, as PyTorch's), take the gradient through, and
-- refuse unknown options naming the class (values are checked at the call, by the functional,
-- as PyTorch does).
local ms = require "moonshard"
local nn = require "moonshard.nn"
local F = require "moonshard.functional"
local T = require "testing"

ms.manual_seed(3)
local logits, target = ms.randn(6, 4), ms.tensor({ 1, 2, 3, 4, 2, 1 }, { dtype = "int64" })
local w = ms.tensor({ 1.0, 2.0, 0.5, 1.5 })

T.test("CrossEntropyLoss equals F.cross_entropy with its options", function()
  T.truthy(nn.CrossEntropyLoss()(logits, target):equal(F.cross_entropy(logits, target)))
  local m = nn.CrossEntropyLoss({ weight = w, reduction = "sum", label_smoothing = 0.1, ignore_index = 2 })
  local want = F.cross_entropy(logits, target, { weight = w, reduction = "sum", label_smoothing = 0.1, ignore_index = 2 })
  T.truthy(m(logits, target):equal(want))
  T.eq(m.reduction, "sum")
  T.eq(m.label_smoothing, 0.1)
  local none = nn.CrossEntropyLoss(w, { reduction = "none" })(logits, target)
  T.eq(none:dim(), 1)
  T.eq(none:size(1), 6)
end)

T.test("NLLLoss and MSELoss equal their functionals", function()
  local lp = F.log_softmax(logits, 2)
  T.truthy(nn.NLLLoss()(lp, target):equal(F.nll_loss(lp, target)))
  T.truthy(nn.NLLLoss({ weight = w })(lp, target):equal(F.nll_loss(lp, target, { weight = w })))
  local y = ms.randn(6, 4)
  T.truthy(nn.MSELoss()(logits, y):equal(F.mse_loss(logits, y)))
  T.truthy(nn.MSELoss({ reduction = "sum" })(logits, y):equal(F.mse_loss(logits, y, "sum")))
end)

T.test("the class weight is a buffer: state_dict and :to()", function()
  local m = nn.CrossEntropyLoss({ weight = w })
  T.truthy(m:state_dict().weight:equal(w))
  m:to("float64")
  T.eq(m.weight.dtype, "float64")
  T.eq(#m:parameters(), 0)
  T.eq(m:state_dict().weight.dtype, "float64")
end)

T.test("the gradient flows to the input", function()
  local x = logits:clone():requires_grad_()
  nn.CrossEntropyLoss()(x, target):backward()
  local x2 = logits:clone():requires_grad_()
  F.cross_entropy(x2, target):backward()
  T.truthy(x.grad:equal(x2.grad))
end)

T.test("bad options name the class", function()
  T.raises(function() nn.CrossEntropyLoss({ reduction = "avg" })(logits, target) end,
    "F.cross_entropy: reduction must be 'mean', 'sum' or 'none', got avg")
  T.raises(function() nn.MSELoss({ weight = w }) end, "MSELoss: unknown option 'weight'")
  T.raises(function() nn.NLLLoss({ label_smoothing = 0.1 }) end, "NLLLoss: unknown option 'label_smoothing'")
end)

T.finish()
