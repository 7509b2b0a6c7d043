-- docs/nn_module.lua: the docstrings of nn.Module (the class system, traversal, modes, state
-- dicts, hooks), nn.Parameter and deferred initialisation (`require "moonshard.nn"`).
return {
  title = "nn.Module",

  { name = "nn.Module",
    sig = "nn.Module:extend(name) -> class; class(...) -> Module",
    doc = [[The base class of every layer and model, as torch.nn.Module. Make a class with
`local Net = nn.Module:extend("Net")`, build its members in `function Net:init(...)` (the base
state exists before init runs, so there is no super call), compute in `function Net:forward(x)`,
construct with `Net(...)` and run it with `model(x)` (forward through the hooks).

Assigning a Module or an nn.Parameter to a field registers it, in assignment order (torch's
`__setattr__`); a tensor assigned to a registered buffer updates it; anything else is a plain
attribute. Reads look in parameters, submodules, buffers, plain attributes, then the class.
`print(model)` gives PyTorch's repr.]],
    example = [[
local Net = nn.Module:extend("Net")
function Net:init(n) self.fc = nn.Linear(n, 2) end
function Net:forward(x) return F.relu(self.fc(x)) end
local model = Net(4)
print(model(ms.ones(3, 4)).shape)   --> torch.Size([3, 2])
print(#model:parameters())          --> 2
]] },

  { name = "Module:extend",
    sig = "Class:extend(name) -> class",
    doc = [[Makes a subclass named `name` (the name shown by print). Call it on a class, not on an
instance: `nn.Module:extend("Net")`, or `nn.Linear:extend("MyLinear")` to specialise a layer. The
subclass inherits the methods and metamethods; `Class.super` is the parent.]],
    example = [[
local Scaled = nn.Linear:extend("Scaled")
function Scaled:forward(x) return nn.Linear.forward(self, x) * 2 end
local m = Scaled(3, 1)
print(m:isinstance(nn.Linear), Scaled.super == nn.Linear)  --> true	true
]] },

  { name = "Module:init",
    sig = "function Class:init(...) ... end",
    doc = [[The constructor body a class defines: `Class(...)` makes the base state (parameter,
buffer and module lists, `training = true`) and then calls `self:init(...)` with the
arguments. The base version does nothing.]],
    example = [[
local Affine = nn.Module:extend("Affine")
function Affine:init(n)
  self.scale = nn.Parameter(ms.ones(n))
  self.shift = nn.Parameter(ms.zeros(n))
end
function Affine:forward(x) return x * self.scale + self.shift end
print(Affine(3)(ms.full({3}, 2.0)))  --> tensor([2., 2., 2.], grad_fn=<AddBackward0>)
]] },

  { name = "Module:forward",
    sig = "function Class:forward(...) ... end",
    doc = [[The computation a class defines. Call the module (`model(x)`) rather than
`model:forward(x)`, so the forward hooks run. The base version raises `Module [Name] is missing the
required "forward" function`.]],
    example = [[
local Double = nn.Module:extend("Double")
function Double:forward(x) return x * 2 end
print(Double()(ms.tensor({1.0, 2.0})))  --> tensor([2., 4.])
]] },

  { name = "Module:extra_repr",
    sig = "function Class:extra_repr() -> string",
    doc = [[The text print shows between the parentheses of `Name(...)`, as torch's
extra_repr; "" by default. Layers use it for their sizes and options.]],
    example = [[
local Gain = nn.Module:extend("Gain")
function Gain:init(g) self.g = g end
function Gain:extra_repr() return "g=" .. self.g end
print(Gain(3))  --> Gain(g=3)
]] },

  { name = "Module:isinstance",
    sig = "module:isinstance(class) -> boolean",
    doc = [[Whether the module is an instance of `class` or of one of its subclasses (Python's
`isinstance(module, cls)`).]],
    example = [[
local m = nn.BatchNorm2d(4)
print(m:isinstance(nn.BatchNorm2d), m:isinstance(nn.Module), m:isinstance(nn.Linear))  --> true	true	false
]] },

  { name = "nn.Parameter",
    sig = "nn.Parameter(tensor, requires_grad = true) -> Tensor",
    doc = [[A parameter: a leaf tensor sharing `tensor`'s storage, requiring grad (unless
`requires_grad` is false), marked so that assigning it to a module field registers it. With no
argument, an empty tensor.]],
    example = [[
local m = nn.Module()
m.w = nn.Parameter(ms.zeros(2, 2))
print(m.w.requires_grad, nn.is_parameter(m.w))  --> true	true
for name in m:named_parameters() do print(name) end  --> w
]] },

  { name = "nn.is_parameter",
    sig = "nn.is_parameter(value) -> boolean",
    doc = [[Whether `value` is a tensor made by nn.Parameter (PyTorch's `isinstance(v, nn.Parameter)`).]],
    example = [[
print(nn.is_parameter(nn.Linear(2, 2).weight), nn.is_parameter(ms.zeros(2)))  --> true	false
]] },

  { name = "nn.is_module",
    sig = "nn.is_module(value) -> boolean",
    doc = [[Whether `value` is a module instance (not a class, not another table).]],
    example = [[
print(nn.is_module(nn.ReLU()), nn.is_module(nn.ReLU), nn.is_module({}))  --> true	false	false
]] },

  { name = "Module:register_parameter",
    sig = "module:register_parameter(name, param)",
    doc = [[Registers `param` (made by nn.Parameter) under `name`; nil removes it. The same as
`module[name] = param`, with the name checked (a string, no ".", not taken by another member).]],
    example = [[
local m = nn.Module()
m:register_parameter("bias", nn.Parameter(ms.zeros(3)))
print(m:get_parameter("bias").shape)  --> torch.Size([3])
]] },

  { name = "Module:register_buffer",
    sig = "module:register_buffer(name, tensor, persistent = true)",
    doc = [[Registers a buffer: module state that is not a parameter (running statistics). Buffers
follow `module:to()` and, when persistent, are in the state dict. nil removes the buffer; after
registration, `module[name] = tensor` replaces it.]],
    example = [[
local m = nn.Module()
m:register_buffer("count", ms.zeros(1))
m:register_buffer("scratch", ms.zeros(4), false)
local sd, keys = m:state_dict()
print(#keys, keys[1])  --> 1	count
]] },

  { name = "Module:add_module",
    also = { "Module:register_module" },
    sig = "module:add_module(name, child)",
    doc = [[Registers `child` as a submodule under `name` (nil removes it): the same as
`module[name] = child`, for names that are not Lua identifiers. register_module is the same
function.]],
    example = [[
local m = nn.Module()
m:add_module("layer-1", nn.Linear(2, 2))
print(m:get_submodule("layer-1"))  --> Linear(in_features=2, out_features=2, bias=True)
]] },

  { name = "Module:register_forward_pre_hook",
    sig = "module:register_forward_pre_hook(fn) -> handle",
    doc = [[Runs `fn(module, input...)` before each forward; values it returns replace the inputs.
`handle:remove()` takes the hook away.]],
    example = [[
local m = nn.Identity()
local h = m:register_forward_pre_hook(function(_, x) return x + 1 end)
print(m(ms.tensor({1.0})))  --> tensor([2.])
h:remove()
print(m(ms.tensor({1.0})))  --> tensor([1.])
]] },

  { name = "Module:register_forward_hook",
    sig = "module:register_forward_hook(fn) -> handle",
    doc = [[Runs `fn(module, inputs, output...)` after each forward (`inputs` is a packed table of
the arguments); a value it returns replaces the output. `handle:remove()` takes the hook away.]],
    example = [[
local m = nn.Linear(4, 2)
local shapes = {}
local h = m:register_forward_hook(function(mod, inputs, out) shapes[#shapes + 1] = tostring(out.shape) end)
m(ms.ones(3, 4))
h:remove()
print(shapes[1])  --> torch.Size([3, 2])
]] },

  { name = "Module:named_children",
    sig = "for name, child in module:named_children() do ... end",
    doc = [[Iterates the direct children with their names, in registration order (a module
registered twice comes once).]],
    example = [[
local seq = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
for name, child in seq:named_children() do print(name, child) end
--> 0	Linear(in_features=2, out_features=2, bias=True)
--> 1	ReLU()
]] },

  { name = "Module:children",
    sig = "module:children() -> {Module, ...}",
    doc = [[The direct children as an array, in registration order.]],
    example = [[
local seq = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
print(#seq:children(), seq:children()[2])  --> 2	ReLU()
]] },

  { name = "Module:named_modules",
    sig = "for name, m in module:named_modules(prefix = \"\") do ... end",
    doc = [[Iterates every module of the tree, depth first: the module itself first (name
`prefix`, "" by default), then its descendants with dotted names ("0", "block.fc").]],
    example = [[
local net = nn.Sequential(nn.Sequential(nn.Linear(2, 2)), nn.ReLU())
for name, m in net:named_modules() do print(name == "" and "(root)" or name, #m:children()) end
--> (root)	2
--> 0	1
--> 0.0	0
--> 1	0
]] },

  { name = "Module:modules",
    sig = "module:modules() -> {Module, ...}",
    doc = [[Every module of the tree as an array, the module itself first, then depth first.]],
    example = [[
print(#nn.Sequential(nn.Linear(2, 2), nn.ReLU()):modules())  --> 3
]] },

  { name = "Module:named_parameters",
    sig = "for name, p in module:named_parameters(prefix = \"\", recurse = true) do ... end",
    doc = [[Iterates the parameters with torch's dotted names ("0.weight"); also
`named_parameters{prefix =, recurse =}`. A parameter shared by two modules comes once. With
`recurse = false`, only the module's own.]],
    example = [[
local net = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1))
for name, p in net:named_parameters() do print(name, p.shape) end
--> 0.weight	torch.Size([2, 3])
--> 0.bias	torch.Size([2])
--> 2.weight	torch.Size([1, 2])
--> 2.bias	torch.Size([1])
]] },

  { name = "Module:parameters",
    sig = "module:parameters(recurse = true) -> {Tensor, ...}",
    doc = [[The parameters as an array (what an optimizer takes), each once; `recurse = false`
gives only the module's own.]],
    example = [[
local net = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
local n = 0
for _, p in ipairs(net:parameters()) do n = n + p:numel() end
print(#net:parameters(), n)  --> 4	11
]] },

  { name = "Module:named_buffers",
    sig = "for name, b in module:named_buffers(prefix = \"\", recurse = true) do ... end",
    doc = [[Iterates the buffers with dotted names, as named_parameters does for parameters.]],
    example = [[
local net = nn.Sequential(nn.BatchNorm1d(2))
for name in net:named_buffers() do print(name) end
--> 0.running_mean
--> 0.running_var
--> 0.num_batches_tracked
]] },

  { name = "Module:buffers",
    sig = "module:buffers(recurse = true) -> {Tensor, ...}",
    doc = [[The buffers as an array.]],
    example = [[
print(#nn.BatchNorm2d(3):buffers())  --> 3
]] },

  { name = "Module:get_submodule",
    sig = "module:get_submodule(target) -> Module",
    doc = [[The module at a dotted path ("" is the module itself); an unknown name raises,
naming it.]],
    example = [[
local net = nn.Sequential(nn.Sequential(nn.Linear(2, 3)))
print(net:get_submodule("0.0"))  --> Linear(in_features=2, out_features=3, bias=True)
]] },

  { name = "Module:get_parameter",
    sig = "module:get_parameter(target) -> Tensor",
    doc = [[The parameter at a dotted path ("0.weight"); an unknown one raises.]],
    example = [[
local net = nn.Sequential(nn.Linear(2, 3))
print(net:get_parameter("0.weight").shape)  --> torch.Size([3, 2])
]] },

  { name = "Module:get_buffer",
    sig = "module:get_buffer(target) -> Tensor",
    doc = [[The buffer at a dotted path ("0.running_mean"); an unknown one raises.]],
    example = [[
local net = nn.Sequential(nn.BatchNorm1d(2))
print(net:get_buffer("0.running_var"))  --> tensor([1., 1.])
]] },

  { name = "Module:apply",
    sig = "module:apply(fn) -> module",
    doc = [[Calls `fn(m)` on every child (recursively) and then on the module itself, as torch's
apply; the usual way to re-initialise a model's layers.]],
    example = [[
ms.manual_seed(0)
local net = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2))
net:apply(function(m)
  if m:isinstance(nn.Linear) then nn.init.zeros_(m.bias) end
end)
print(net[3].bias)  --> tensor([0., 0.], requires_grad=True)
]] },

  { name = "Module:train",
    sig = "module:train(mode = true) -> module",
    doc = [[Sets training mode (`mode` true) or evaluation mode on the module and all its
descendants (their `training` field): Dropout and BatchNorm behave differently.]],
    example = [[
local net = nn.Sequential(nn.Dropout(0.5))
net:train(false)
print(net.training, net[1].training)  --> false	false
]] },

  { name = "Module:eval",
    sig = "module:eval() -> module",
    doc = [[Evaluation mode: the same as `module:train(false)`. It does not turn off gradient
recording; use `local _ <close> = ms.no_grad()` for that.]],
    example = [[
local drop = nn.Dropout(0.5):eval()
print(drop(ms.ones(4)))  --> tensor([1., 1., 1., 1.])
]] },

  { name = "Module:requires_grad_",
    sig = "module:requires_grad_(flag = true) -> module",
    doc = [[Sets `requires_grad` on every parameter: false freezes the module (for fine-tuning).]],
    example = [[
local m = nn.Linear(2, 2):requires_grad_(false)
print(m.weight.requires_grad)  --> false
]] },

  { name = "Module:zero_grad",
    sig = "module:zero_grad({set_to_none = true})",
    doc = [[Clears the gradients of every parameter: set to nil (the default, as PyTorch 2) or,
with `set_to_none = false`, zeroed in place. As the optimizer's, it also takes the flag
positionally, as PyTorch's `zero_grad(False)`: `m:zero_grad(false)`.]],
    opts = { { "set_to_none", "boolean", "true", "remove the gradients rather than zeroing them" } },
    example = [[
local m = nn.Linear(2, 1)
m(ms.ones(1, 2)):sum():backward()
m:zero_grad()
print(m.weight.grad)  --> nil
]] },

  { name = "Module:to",
    sig = "module:to(dtype | device | {dtype =, device =} | tensor) -> module",
    doc = [[Converts the parameters and buffers: floating ones take the dtype ("float64",
ms.float64), all take the device ("cpu", "cuda", "cuda:1", or an integer i for "cuda:i"); a
tensor argument gives its dtype. Tensors are replaced (a moonshard tensor cannot change dtype in
place), so build the optimizer after converting. Returns the module.]],
    example = [[
local m = nn.Linear(2, 2):to("float64")
print(m.weight.dtype)  --> float64
]] },

  { name = "Module:float",
    sig = "module:float() -> module",
    doc = [[`module:to("float32")`.]],
    example = [[
print(nn.Linear(2, 2):double():float().weight.dtype)  --> float32
]] },

  { name = "Module:double",
    sig = "module:double() -> module",
    doc = [[`module:to("float64")`.]],
    example = [[
print(nn.Linear(2, 2):double().bias.dtype)  --> float64
]] },

  { name = "Module:cpu",
    sig = "module:cpu() -> module",
    doc = [[`module:to("cpu")`.]],
    example = [[
print(nn.Linear(2, 2):cpu().weight.device)  --> cpu
]] },

  { name = "Module:cuda",
    sig = "module:cuda(index = nil) -> module",
    doc = [[`module:to("cuda")` (the current device), or `module:to("cuda:" .. index)`.]],
    example = [[
local m = nn.Linear(2, 2):cuda()
print(m.weight.device)  --> cuda:0
]],
    needs = "cuda" },

  { name = "Module:state_dict",
    sig = "module:state_dict({prefix = \"\", keep_vars = false}) -> sd, keys",
    doc = [[The parameters and persistent buffers by dotted name (detached, unless keep_vars),
and `keys`, the names in torch's order (`pairs(sd)` walks that order too). `ms.save(sd, path)`
writes it as safetensors that PyTorch loads.]],
    opts = { { "prefix", "string", "\"\"", "put before every name" },
             { "keep_vars", "boolean", "false", "the live tensors rather than detached ones" } },
    example = [[
local sd, keys = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)):state_dict()
print(table.concat(keys, " "))
--> 0.weight 0.bias 1.weight 1.bias 1.running_mean 1.running_var 1.num_batches_tracked
]] },

  { name = "Module:load_state_dict",
    sig = "module:load_state_dict(sd, {strict = true}) -> {missing_keys =, unexpected_keys =}",
    doc = [[Copies the tensors of `sd` (name -> tensor) into the parameters and buffers, under
no_grad. With strict (the default) missing and unexpected names are errors; a shape mismatch
always is. Nothing is copied when anything is wrong.]],
    opts = { { "strict", "boolean", "true", "raise on missing or unexpected names" } },
    example = [[
ms.manual_seed(0)
local a, b = nn.Linear(2, 2), nn.Linear(2, 2)
local r = b:load_state_dict(a:state_dict())
print(ms.equal(a.weight, b.weight), #r.missing_keys)  --> true	0
local r2 = b:load_state_dict({weight = a.weight}, {strict = false})
print(r2.missing_keys[1])  --> bias
]] },

  { name = "Module:to_empty",
    sig = "module:to_empty({device = \"cpu\", recurse = true}) -> module",
    doc = [[Gives every meta parameter and buffer uninitialised storage on `device` (its recorded
initialisers are dropped) and moves the others there, as PyTorch's to_empty. Use
nn.materialize_module to get the initial values instead.]],
    opts = { { "device", "string", "\"cpu\"", "a device with memory" },
             { "recurse", "boolean", "true", "include the descendants" } },
    example = [[
local m = nn.deferred_init(nn.Linear, 2, 3)
m:to_empty({device = "cpu"})
print(m.weight.device, m.weight.shape)  --> cpu	torch.Size([3, 2])
]] },

  { name = "nn.deferred_init",
    sig = "nn.deferred_init(fn, ...) -> fn(...)",
    doc = [[Calls `fn(...)` (a function or a module class) with "meta" as the factories' default
device: the model gets parameters with shapes and no bytes, and the initialisers its
constructors ran are recorded, so nn.materialize_module later gives the same values as an
ordinary construction from the same seed. See docs/deferred-init.md (torchdistx's
deferred_init).]],
    example = [[
local m = nn.deferred_init(nn.Linear, 1000, 1000)
print(m.weight.is_meta, m.weight.shape)  --> true	torch.Size([1000, 1000])
]] },

  { name = "nn.materialize_module",
    sig = "nn.materialize_module(module, {device = \"cpu\", recurse = true}) -> module",
    doc = [[Gives every meta parameter and buffer storage on `device`, in place (tied parameters
stay tied), holding the values its recorded initialisers give: bit for bit what the eager
construction from the same seed gives. A tensor without records falls back on its module's
reset_parameters.]],
    opts = { { "device", "string", "\"cpu\"", "a device with memory" },
             { "recurse", "boolean", "true", "include the descendants" } },
    example = [[
ms.manual_seed(1)
local eager = nn.Linear(3, 2)
ms.manual_seed(1)
local lazy = nn.deferred_init(nn.Linear, 3, 2)
nn.materialize_module(lazy)
print(ms.equal(eager.weight, lazy.weight))  --> true
]] },
}
