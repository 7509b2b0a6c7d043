-- Docstrings: elementwise math (the engine's unary and binary op tables, clamp) and the in-place
-- form of each. The in-place entries are made from the out-of-place ones by in_place() below, so
-- the two stay in step. The entry format is described in lua/moonshard/doc.lua.

local FLOATING = "Integer and bool inputs give float32."
local INTEGER = "Integer inputs keep their dtype; bool is refused."

-- {op, what it computes, dtype rule, example input (Lua source), PyTorch name when it differs}
local UNARY = {
  {"neg", "-x, elementwise (also the operator `-x`)", INTEGER, "ms.tensor({1, -2, 3})"},
  {"abs", "|x|, elementwise", INTEGER, "ms.tensor({-1.5, 0, 2})"},
  {"exp", "e^x, elementwise", FLOATING, "ms.tensor({0, 1})"},
  {"log", "the natural logarithm, elementwise (-inf at 0, NaN below)", FLOATING, "ms.tensor({1, math.exp(2)})"},
  {"sqrt", "the square root, elementwise", FLOATING, "ms.tensor({4, 9})"},
  {"rsqrt", "1 / sqrt(x), elementwise", FLOATING, "ms.tensor({4, 16})"},
  {"tanh", "the hyperbolic tangent, elementwise", FLOATING, "ms.tensor({0, 100})"},
  {"sigmoid", "the logistic function 1 / (1 + e^-x), elementwise", FLOATING, "ms.tensor({0, 100})"},
  {"relu", "max(x, 0), elementwise", INTEGER, "ms.tensor({-1, 0, 2})"},
  {"logical_not", "`not x`, elementwise: true where x is zero (or false)", "The result is bool.",
   "ms.tensor({0, 1, 2})"},
  {"sign", "-1, 0 or 1 by the sign of x, elementwise",
   "Integer inputs keep their dtype; a bool input stays bool.", "ms.tensor({-3.5, 0, 2})"},
  {"floor", "the largest integer <= x, elementwise", INTEGER, "ms.tensor({-1.5, 1.5})"},
  {"ceil", "the smallest integer >= x, elementwise", INTEGER, "ms.tensor({-1.5, 1.5})"},
  {"round", "x rounded to the nearest integer, halves to even (as PyTorch), elementwise", INTEGER,
   "ms.tensor({0.5, 1.5, 2.7})"},
  {"sin", "the sine (radians), elementwise", FLOATING, "ms.tensor({0, math.pi / 2})"},
  {"cos", "the cosine (radians), elementwise", FLOATING, "ms.tensor({0, math.pi})"},
  {"log1p", "log(1 + x), accurate for small x, elementwise", FLOATING, "ms.tensor({0, 1e-8})"},
  {"expm1", "e^x - 1, accurate for small x, elementwise", FLOATING, "ms.tensor({0, 1e-8})"},
  {"reciprocal", "1 / x, elementwise", FLOATING, "ms.tensor({2, 4})"},
  {"square", "x * x, elementwise", "Integer inputs keep their dtype; bool counts in int64.", "ms.tensor({-2, 3})"},
  {"softplus", "log(1 + e^x), elementwise (beta 1; `F.softplus` takes beta and threshold)",
   "Floating inputs only, as PyTorch's activations.", "ms.tensor({0.0, 30.0})"},
}

local PROMOTE = "The operands (tensors or numbers) broadcast together and promote as in PyTorch (int64 + float " ..
  "number -> float32; a number never widens a tensor's float dtype)."
local COMPARE = "The operands broadcast together; the result is a bool tensor."

-- {op, what it computes, rule, example (Lua source of the two operands), operator}
local BINARY = {
  {"mul", "input * other, elementwise", PROMOTE, "ms.tensor({1, 2, 3}), 2", "*"},
  {"div", "input / other, elementwise: true division (integers give float32)", PROMOTE,
   "ms.tensor({1, 2, 3}), 2", "/"},
  {"pow", "input raised to the power other, elementwise", PROMOTE, "ms.tensor({1, 2, 3}), 2", "^"},
  {"maximum", "the larger of input and other, elementwise (NaN wins)", PROMOTE,
   "ms.tensor({1, 5, 3}), ms.tensor({4, 2, 6})"},
  {"minimum", "the smaller of input and other, elementwise (NaN wins)", PROMOTE,
   "ms.tensor({1, 5, 3}), ms.tensor({4, 2, 6})"},
  {"eq", "input == other, elementwise", COMPARE, "ms.tensor({1, 2, 3}), 2"},
  {"ne", "input ~= other, elementwise", COMPARE, "ms.tensor({1, 2, 3}), 2"},
  {"lt", "input < other, elementwise", COMPARE, "ms.tensor({1, 2, 3}), 2"},
  {"le", "input <= other, elementwise", COMPARE, "ms.tensor({1, 2, 3}), 2"},
  {"gt", "input > other, elementwise", COMPARE, "ms.tensor({1, 2, 3}), 2"},
  {"ge", "input >= other, elementwise", COMPARE, "ms.tensor({1, 2, 3}), 2"},
  {"logical_and", "`input and other` with nonzero as true, elementwise", COMPARE,
   "ms.tensor({true, true, false}), ms.tensor({true, false, false})"},
  {"logical_or", "`input or other` with nonzero as true, elementwise", COMPARE,
   "ms.tensor({true, true, false}), ms.tensor({true, false, false})"},
}

-- What each generated example prints, {out of place, in place}: checked by running them.
local PRINTS = {
  neg = {"tensor([-1, 2, -3])", "tensor([-1., 2., -3.])"},
  abs = {"tensor([1.5000, 0.0000, 2.0000])", "tensor([1.5000, 0.0000, 2.0000])"},
  exp = {"tensor([1.0000, 2.7183])", "tensor([1.0000, 2.7183])"},
  log = {"tensor([0., 2.])", "tensor([0., 2.])"},
  sqrt = {"tensor([2., 3.])", "tensor([2., 3.])"},
  rsqrt = {"tensor([0.5000, 0.2500])", "tensor([0.5000, 0.2500])"},
  tanh = {"tensor([0., 1.])", "tensor([0., 1.])"},
  sigmoid = {"tensor([0.5000, 1.0000])", "tensor([0.5000, 1.0000])"},
  relu = {"tensor([0, 0, 2])", "tensor([0., 0., 2.])"},
  logical_not = {"tensor([ True, False, False])", "tensor([ True, False, False])"},
  sign = {"tensor([-1., 0., 1.])", "tensor([-1., 0., 1.])"},
  floor = {"tensor([-2., 1.])", "tensor([-2., 1.])"},
  ceil = {"tensor([-1., 2.])", "tensor([-1., 2.])"},
  round = {"tensor([0., 2., 3.])", "tensor([0., 2., 3.])"},
  sin = {"tensor([0., 1.])", "tensor([0., 1.])"},
  cos = {"tensor([ 1., -1.])", "tensor([ 1., -1.])"},
  log1p = {"tensor([0.0000e+00, 1.0000e-08])", "tensor([0.0000e+00, 1.0000e-08])"},
  expm1 = {"tensor([0.0000e+00, 1.0000e-08])", "tensor([0.0000e+00, 1.0000e-08])"},
  reciprocal = {"tensor([0.5000, 0.2500])", "tensor([0.5000, 0.2500])"},
  square = {"tensor([4, 9])", "tensor([4., 9.])"},
  softplus = {"tensor([ 0.6931, 30.0000])", "tensor([ 0.6931, 30.0000])"},
  mul = {"tensor([2, 4, 6])", "tensor([2., 4., 6.])"},
  div = {"tensor([0.5000, 1.0000, 1.5000])", "tensor([0.5000, 1.0000, 1.5000])"},
  pow = {"tensor([1, 4, 9])", "tensor([1., 4., 9.])"},
  maximum = {"tensor([4, 5, 6])", "tensor([4., 5., 6.])"},
  minimum = {"tensor([1, 2, 3])", "tensor([1., 2., 3.])"},
  eq = {"tensor([False, True, False])", "tensor([0., 1., 0.])"},
  ne = {"tensor([ True, False, True])", "tensor([1., 0., 1.])"},
  lt = {"tensor([ True, False, False])", "tensor([1., 0., 0.])"},
  le = {"tensor([ True, True, False])", "tensor([1., 1., 0.])"},
  gt = {"tensor([False, False, True])", "tensor([0., 0., 1.])"},
  ge = {"tensor([False, True, True])", "tensor([0., 1., 1.])"},
  logical_and = {"tensor([ True, False, False])", "tensor([ True, False, False])"},
  logical_or = {"tensor([ True, True, False])", "tensor([ True, True, False])"},
}

local entries = {title = "Tensors: elementwise math"}

local function add(e) entries[#entries + 1] = e end

-- The in-place form of the out-of-place entry e (t:op_(...) writes into t and returns it).
local function in_place(e, args, example)
  local op = e.name:match(":(.*)$")
  add{ name = e.name .. "_", also = {"ms." .. op .. "_"},
       sig = ("t:%s_(%s) -> t"):format(op, args),
       doc = ("In place: writes `t:%s(%s)` into t and returns t. The result must fit t's dtype (an integer " ..
              "tensor cannot take a float result), and a leaf that requires grad cannot be written while grad " ..
              "mode is on."):format(op, args),
       example = example }
end

for _, r in ipairs(UNARY) do
  local op, what, rule, input = r[1], r[2], r[3], r[4]
  local e = { name = "Tensor:" .. op, also = {"ms." .. op},
              sig = ("t:%s() -> Tensor; ms.%s(t) -> Tensor"):format(op, op),
              doc = ("A new tensor of %s. %s Differentiable where it is smooth."):format(what, rule),
              example = ("print(%s:%s())  --> %s\n"):format(input, op, PRINTS[op][1]) }
  if op == "logical_not" or op == "sign" then e.doc = e.doc:gsub(" Differentiable where it is smooth%.", "") end
  add(e)
  local float_input = input:gsub("ms%.tensor%((.*)%)$", "ms.tensor(%1, {dtype = ms.float32})")
  if op == "logical_not" then float_input = input:gsub("ms%.tensor%((.*)%)$", "ms.tensor(%1, {dtype = ms.bool})") end
  in_place(e, "", ("local t = %s\nt:%s_()\nprint(t)  --> %s\n"):format(float_input, op, PRINTS[op][2]))
end

local add_entry = { name = "Tensor:add", also = {"ms.add"},
  sig = "t:add(other, {alpha = 1}) -> Tensor; ms.add(input, other, {alpha =}) -> Tensor",
  doc = "input + alpha * other, elementwise (also the operator `+`). " .. PROMOTE ..
        " alpha must be an integer when both operands are integers.",
  opts = {{"alpha", "number", "1", "the factor applied to other"}},
  example = [==[
local x = ms.tensor({1, 2, 3})
print(x:add(10), (x + x):sum():item())     --> tensor([11, 12, 13]) 12
print(x:add(ms.ones(3), {alpha = 2}))      --> tensor([3., 4., 5.])
]==] }
add(add_entry)
in_place(add_entry, "other, {alpha =}", [==[
local acc = ms.zeros(3)
acc:add_(ms.ones(3)):add_(ms.ones(3), {alpha = 0.5})
print(acc)                                 --> tensor([1.5000, 1.5000, 1.5000])
]==])
local sub_entry = { name = "Tensor:sub", also = {"ms.sub"},
  sig = "t:sub(other, {alpha = 1}) -> Tensor; ms.sub(input, other, {alpha =}) -> Tensor",
  doc = "input - alpha * other, elementwise (also the operator `-`). " .. PROMOTE ..
        " Bool operands are refused, as in PyTorch.",
  opts = {{"alpha", "number", "1", "the factor applied to other"}},
  example = [==[
local x = ms.tensor({5, 6, 7})
print(x:sub(1), (x - 5):sum():item())      --> tensor([4, 5, 6]) 3
print(x:sub(x, {alpha = 2}))               --> tensor([-5, -6, -7])
]==] }
add(sub_entry)
in_place(sub_entry, "other, {alpha =}", [==[
local w = ms.ones(3)
w:sub_(ms.tensor({1.0, 2.0, 3.0}), {alpha = 0.1})
print(w)                                   --> tensor([0.9000, 0.8000, 0.7000])
]==])

for _, r in ipairs(BINARY) do
  local op, what, rule, operands, operator = r[1], r[2], r[3], r[4], r[5]
  local doc = ("A new tensor of %s%s. %s"):format(what, operator and (" (also the operator `" .. operator .. "`)") or "", rule)
  local e = { name = "Tensor:" .. op, also = {"ms." .. op},
              sig = ("t:%s(other) -> Tensor; ms.%s(input, other) -> Tensor"):format(op, op),
              doc = doc,
              example = ("print(ms.%s(%s))  --> %s\n"):format(op, operands, PRINTS[op][1]) }
  add(e)
  local a, b = operands:match("^(ms%.tensor%b()), (.*)$")
  local ex
  if rule == COMPARE and op:match("^logical") then
    ex = ("local t = %s\nt:%s_(%s)\nprint(t)  --> %s\n"):format(a, op, b, PRINTS[op][2])
  elseif rule == COMPARE then
    ex = ("local t = ms.tensor({1.0, 2.0, 3.0})\nt:%s_(%s)\nprint(t)  --> %s\n"):format(op, b, PRINTS[op][2])
  else
    ex = ("local t = %s\nt:%s_(%s)\nprint(t)  --> %s\n"):format((a:gsub("%)$", ", {dtype = ms.float32})")), op, b, PRINTS[op][2])
  end
  in_place(e, "other", ex)
  if rule == COMPARE then
    entries[#entries].doc = entries[#entries].doc .. " Comparisons in place write 1 or 0 in t's own dtype, as PyTorch's."
  end
end

local clamp_entry = { name = "Tensor:clamp", also = {"ms.clamp"},
  sig = "t:clamp(min, max) -> Tensor; t:clamp({min =, max =}) -> Tensor",
  doc = [[A new tensor with t's elements limited to [min, max]; either bound may be nil (none). An integer
tensor clamped by a float bound gives float32, as `torch.clamp`. PyTorch's `clip` is this.]],
  opts = {{"min", "number", "nil", "the lower bound"}, {"max", "number", "nil", "the upper bound"}},
  example = [==[
local x = ms.tensor({-2, 0, 5})
print(x:clamp(-1, 1), x:clamp({min = 0}))  --> tensor([-1, 0, 1]) tensor([0, 0, 5])
]==] }
add(clamp_entry)
in_place(clamp_entry, "min, max", [==[
local g = ms.tensor({-3.0, 0.5, 3.0})
g:clamp_(-1, 1)
print(g)                                   --> tensor([-1.0000, 0.5000, 1.0000])
]==])

return entries
