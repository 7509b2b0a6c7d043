-- nn_module.lua: the Module class system of moonshard.nn (registration by assignment, hooks,
-- train/eval, state_dict, PyTorch's repr) and nn.Parameter. Layers live in nn_layers.lua and
-- containers in nn_containers.lua; `require "moonshard.nn"` gathers them all.
--
-- Classes: `local Net = nn.Module:extend("Net")`, `function Net:init(...)` builds (the base
-- state exists before init runs, so no super call is needed), `Net(...)` constructs, and
-- `model(x)` runs forward through the hooks. Assigning a Module or an nn.Parameter to a field
-- registers it in assignment order; everything else is a plain attribute. Reads look in
-- parameters, submodules, buffers, plain attributes, then the class.
--
-- Dims and indices are 1-based as everywhere in moonshard: nn.Flatten() is torch's
-- Flatten(start_dim=1) and prints as Flatten(start_dim=2, end_dim=-1); nn.Softmax(2) is torch's
-- Softmax(dim=1). Reprs show the values as the Lua caller gave them.
local ms = require "moonshard"
local F = require "moonshard.functional"
local init = require "moonshard.nn_init"
local check_opts = require "moonshard.check_opts"

local nn = {}
nn.functional = F
nn.init = init

local fmt, concat = string.format, table.concat

-- ---- ordered dicts: names in insertion order, values by name ---------------------------------

local function od_new() return { names = {}, map = {} } end

local function od_set(d, k, v)
  if d.map[k] == nil then d.names[#d.names + 1] = k end
  d.map[k] = v
end

local function od_remove(d, k)
  if d.map[k] == nil then return end
  d.map[k] = nil
  for i, n in ipairs(d.names) do
    if n == k then
      table.remove(d.names, i)
      break
    end
  end
end

-- ---- Python-style formatting for reprs --------------------------------------------------------

local function pynum(x)
  if math.type(x) == "integer" then return tostring(x) end
  if x ~= x then return "nan" end
  if x == math.huge then return "inf" end
  if x == -math.huge then return "-inf" end
  local s
  for p = 1, 17 do
    s = fmt("%." .. p .. "g", x)
    if tonumber(s) == x then break end
  end
  -- %g writes e-05 as Python does; add Python's ".0" to integral floats
  if not s:find("[%.en]") then s = s .. ".0" end
  return s
end

local function pyval(v)
  local t = type(v)
  if t == "nil" then return "None" end
  if t == "boolean" then return v and "True" or "False" end
  if t == "number" then return pynum(v) end
  if t == "table" then
    local parts = {}
    for i = 1, #v do parts[i] = pyval(v[i]) end
    if #parts == 1 then return "(" .. parts[1] .. ",)" end
    return "(" .. concat(parts, ", ") .. ")"
  end
  return tostring(v)
end
nn._pyval = pyval

-- ---- Parameter ------------------------------------------------------------------------------

-- Parameters are plain tensors marked in a weak set: parameterness travels with the userdata.
local PARAMETERS = setmetatable({}, { __mode = "k" })

-- nn.Parameter(t, requires_grad = true): a leaf sharing t's storage, requiring grad.
function nn.Parameter(t, requires_grad)
  if t == nil then t = ms.empty(0) end
  if not ms.is_tensor(t) then
    error(fmt("nn.Parameter: bad argument #1 (data): expected a tensor, got %s", type(t)), 2)
  end
  local p = t:detach()
  if requires_grad ~= false then p.requires_grad = true end
  PARAMETERS[p] = true
  return p
end

function nn.is_parameter(v) return PARAMETERS[v] == true end

-- Marks an existing tensor as a parameter in place (FSDP's pieces: the very tensors its engine
-- side updates, so nn.Parameter's detached copy would not do).
local function mark_parameter(t)
  PARAMETERS[t] = true
  return t
end

local is_tensor = ms.is_tensor

-- ---- Module ---------------------------------------------------------------------------------

local Module = {}
nn.Module = Module

local function is_module(v)
  return type(v) == "table" and rawget(v, "_modules") ~= nil and rawget(v, "_parameters") ~= nil
end
nn.is_module = is_module

-- A Module class (nn.ReLU) rather than an instance (nn.ReLU()).
local function is_module_class(v)
  return type(v) == "table" and not is_module(v) and type(rawget(v, "__name")) == "string"
    and rawget(v, "super") ~= nil
end

local function describe(v)
  if is_module(v) then return v:_get_name() end
  if is_module_class(v) then return fmt("the class %s (call it to make a module: %s())", v.__name, v.__name) end
  if v == Module then return "the class Module (extend it, or pass an instance)" end
  if is_tensor(v) then return fmt("a %s tensor", v.dtype) end
  return type(v)
end

-- model.fc3 read by the user's code, where no member or method has that name.
local function unknown_field(self, k)
  local names = {}
  for _, d in ipairs({self._parameters.map, self._modules.map, self._buffers.map, self._attrs}) do
    for n in pairs(d) do names[#names + 1] = n end
  end
  local c = getmetatable(self)
  while c do
    for n in pairs(c) do names[#names + 1] = n end
    c = rawget(c, "super")
  end
  local near = ms._did_you_mean(k, names)
  error(fmt("%s has no field '%s'%s", self:_get_name(), k, near and fmt(" (did you mean '%s'?)", near) or ""), 2)
end

-- A method read by the user's code comes checked: model.forward(x), with '.' for ':', would
-- otherwise run forward with x as the module and fail somewhere inside. One wrapper per class
-- and method (made again if the method is redefined).
local checked = setmetatable({}, { __mode = "k" }) -- class -> name -> {method, wrapper}
local function checked_method(cls, k, fn)
  local by_name = checked[cls]
  if not by_name then
    by_name = {}
    checked[cls] = by_name
  end
  local c = by_name[k]
  if c and c[1] == fn then return c[2] end
  local cname = rawget(cls, "__name") or "Module"
  local w = function(m, ...)
    if not is_module(m) then
      error(fmt("%s.%s: called with '.' instead of ':' (the first argument is %s, not the module): write "
        .. "model:%s(...)%s", cname, k, describe(m), k, k == "forward" and ", or model(...)" or ""), 2)
    end
    return fn(m, ...)
  end
  by_name[k] = { fn, w }
  return w
end

-- Whether m is a parameter of the function reading a field of it (level 3 from here: this
-- function, the __index function, the reader).
local function is_parameter_of_reader(m)
  local info = debug.getinfo(3, "u")
  for i = 1, info and info.nparams or 0 do
    local _, v = debug.getlocal(3, i)
    if rawequal(v, m) then return true end
  end
  return false
end

-- Instance reads: parameters, submodules, buffers, plain attributes, then the class chain.
-- Numeric keys go to the class's __getitem when it has one (Sequential, ModuleList).
local function make_index(cls)
  return function(self, k)
    if type(k) == "number" then
      local getitem = cls.__getitem
      if getitem then return getitem(self, k) end
      return nil
    end
    local v = self._parameters.map[k]
    if v ~= nil then return v end
    v = self._modules.map[k]
    if v ~= nil then return v end
    v = self._buffers.map[k]
    if v ~= nil then return v end
    v = self._attrs[k]
    if v ~= nil then return v end
    v = cls[k]
    if type(k) ~= "string" or k:sub(1, 1) == "_" or (v == nil and rawget(self, "_declared")[k]) then return v end
    -- the library's own reads are plain (its probes of optional fields, m.bias, read nil); the
    -- user's get a checked method, and an unknown public name (model.fc3) is a typo, unless the
    -- reading function was handed the module (Net:forward's `if self.norm then`: Lua's optional
    -- member)
    if ms._library_frame(2) then return v end
    if type(v) == "function" then return checked_method(cls, k, v) end
    if v == nil and not is_parameter_of_reader(self) then unknown_field(self, k) end
    return v
  end
end

-- Metamethods a subclass inherits (Lua looks them up raw in the metatable).
local METAMETHODS = { "__newindex", "__call", "__tostring", "__len", "__getitem", "__setitem" }

local function construct(cls, ...)
  local self = setmetatable({}, cls)
  rawset(self, "_parameters", od_new())
  rawset(self, "_buffers", od_new())
  rawset(self, "_modules", od_new())
  rawset(self, "_attrs", {})
  rawset(self, "_declared", {}) -- names assigned nil (self.bias = nil): read as nil, not unknown
  rawset(self, "_non_persistent", {})
  rawset(self, "_forward_pre_hooks", od_new())
  rawset(self, "_forward_hooks", od_new())
  rawset(self, "training", true)
  self:init(...)
  return self
end

-- cls:extend("Name") makes a subclass; `Name(...)` constructs an instance.
function Module.extend(parent, name)
  if is_module(parent) then error("extend: call it on a class (nn.Module:extend), not on an instance", 2) end
  if type(name) ~= "string" or name == "" then
    error("Module.extend: expected a class name (a non-empty string)", 2)
  end
  local cls = {}
  for _, k in ipairs(METAMETHODS) do cls[k] = rawget(parent, k) end
  cls.__name = name
  cls.__index = make_index(cls)
  cls.super = parent
  return setmetatable(cls, {
    __index = parent,
    __call = construct,
    __tostring = function() return "class " .. name end,
  })
end

Module.__name = "Module"
Module.__index = make_index(Module)
-- Net:parameters() on the class, not on an instance: the method's first read of instance state
-- lands here (through the class chain) and says so, instead of indexing nil.
local INSTANCE_STATE = { _parameters = true, _modules = true, _buffers = true, _attrs = true }
local function class_index(_, k)
  if not INSTANCE_STATE[k] then return nil end
  local _, cls = debug.getlocal(2, 1)
  local name = type(cls) == "table" and rawget(cls, "__name") or "Module"
  error(fmt("%s is a class: its methods are called on an instance (local model = %s(...); model:parameters()), "
    .. "not on the class", name, name), 2)
end

setmetatable(Module, {
  __index = class_index,
  __call = construct,
  __tostring = function() return "class Module" end,
})

function Module:init() end

function Module:forward()
  error(fmt('Module [%s] is missing the required "forward" function', self:_get_name()), 2)
end

function Module:extra_repr() return "" end

function Module:_get_name() return getmetatable(self).__name end

-- true when self is an instance of cls or of one of its subclasses.
function Module:isinstance(cls)
  local c = getmetatable(self)
  while c do
    if c == cls then return true end
    c = rawget(c, "super")
  end
  return false
end

local function check_name(self, fname, kind, name)
  if type(name) ~= "string" then
    error(fmt("%s: %s name should be a string, got %s", fname, kind, type(name)), 3)
  end
  if name == "" then error(fmt('%s: %s name can\'t be empty string ""', fname, kind), 3) end
  if name:find(".", 1, true) then
    error(fmt('%s: %s name can\'t contain ".", got "%s"', fname, kind, name), 3)
  end
end

-- A name already used by a different kind of member, a plain attribute or the class.
local function check_free(self, fname, name, own)
  local taken = (own ~= self._parameters and self._parameters.map[name] ~= nil)
    or (own ~= self._modules and self._modules.map[name] ~= nil)
    or (own ~= self._buffers and self._buffers.map[name] ~= nil)
    or self._attrs[name] ~= nil or rawget(self, name) ~= nil
    or getmetatable(self)[name] ~= nil
  if taken then error(fmt("%s: attribute '%s' already exists", fname, name), 3) end
end

-- Registers (or with nil, removes) a parameter.
function Module:register_parameter(name, p)
  check_name(self, "register_parameter", "parameter", name)
  if p == nil then
    od_remove(self._parameters, name)
    self._declared[name] = true
    return
  end
  if not nn.is_parameter(p) then
    error(fmt("register_parameter: cannot assign %s object to parameter '%s' (nn.Parameter or nil required)",
      describe(p), name), 2)
  end
  check_free(self, "register_parameter", name, self._parameters)
  od_set(self._parameters, name, p)
end

-- Registers (or with nil, removes) a buffer: state that is not a parameter (running stats).
-- Persistent buffers (the default) are part of state_dict.
function Module:register_buffer(name, t, persistent)
  check_name(self, "register_buffer", "buffer", name)
  if t == nil then
    od_remove(self._buffers, name)
    self._non_persistent[name] = nil
    self._declared[name] = true
    return
  end
  if not is_tensor(t) then
    error(fmt("register_buffer: cannot assign %s object to buffer '%s' (a tensor or nil required)",
      describe(t), name), 2)
  end
  check_free(self, "register_buffer", name, self._buffers)
  od_set(self._buffers, name, t)
  self._non_persistent[name] = persistent == false or nil
end

-- Registers (or with nil, removes) a child module.
function Module:add_module(name, m)
  check_name(self, "add_module", "module", name)
  if m == nil then
    od_remove(self._modules, name)
    self._declared[name] = true
    return
  end
  if not is_module(m) then error(fmt("add_module: %s is not a Module subclass", describe(m)), 2) end
  check_free(self, "add_module", name, self._modules)
  od_set(self._modules, name, m)
end
Module.register_module = Module.add_module

-- Assignment: Modules and Parameters register (replacing any member of that name), nil
-- removes, tensors update buffers; everything else is a plain attribute.
function Module:__newindex(k, v)
  if v == nil then self._declared[k] = true end
  if type(k) == "number" then
    local setitem = getmetatable(self).__setitem
    if setitem then return setitem(self, k, v) end
    error(fmt("%s does not support item assignment", self:_get_name()), 2)
  end
  local P, M, B = self._parameters, self._modules, self._buffers
  if nn.is_parameter(v) or is_module(v) then
    -- like torch's __setattr__: leave the other kinds; a module replacing a module (or a
    -- parameter a parameter) keeps its place in the registration order
    if is_module(v) then od_remove(P, k) else od_remove(M, k) end
    od_remove(B, k)
    self._attrs[k] = nil
    if is_module(v) then self:add_module(k, v) else self:register_parameter(k, v) end
  elseif P.map[k] ~= nil then
    if v ~= nil then
      error(fmt("cannot assign %s as parameter '%s' (nn.Parameter or nil expected)", describe(v), k), 2)
    end
    od_remove(P, k)
  elseif M.map[k] ~= nil then
    if v ~= nil then
      error(fmt("cannot assign %s as child module '%s' (nn.Module or nil expected)", describe(v), k), 2)
    end
    od_remove(M, k)
  elseif B.map[k] ~= nil then
    if v ~= nil and not is_tensor(v) then
      error(fmt("cannot assign %s as buffer '%s' (a tensor or nil expected)", describe(v), k), 2)
    end
    if v == nil then od_remove(B, k) else B.map[k] = v end
  else
    self._attrs[k] = v
  end
end

-- ---- hooks and calling ------------------------------------------------------------------------

local Handle = {}
Handle.__index = Handle
local next_hook_id = 0

function Handle:remove() od_remove(self.dict, self.id) end

local function add_hook(dict, fn, fname)
  if type(fn) ~= "function" and not (getmetatable(fn) or {}).__call then
    error(fmt("%s: expected a function, got %s", fname, type(fn)), 3)
  end
  next_hook_id = next_hook_id + 1
  od_set(dict, next_hook_id, fn)
  return setmetatable({ dict = dict, id = next_hook_id }, Handle)
end

-- hook(module, input...) runs before forward; returning values replaces the inputs.
function Module:register_forward_pre_hook(fn)
  return add_hook(self._forward_pre_hooks, fn, "register_forward_pre_hook")
end

-- hook(module, inputs, output...) runs after forward (inputs is a packed table); returning a
-- value replaces the output.
function Module:register_forward_hook(fn)
  return add_hook(self._forward_hooks, fn, "register_forward_hook")
end

local unpack, pack = table.unpack, table.pack

local function snapshot(list)
  local c = {}
  for i = 1, #list do c[i] = list[i] end
  return c
end

function Module:__call(...)
  local pre, post = self._forward_pre_hooks, self._forward_hooks
  if #pre.names == 0 and #post.names == 0 then return self:forward(...) end
  local args = pack(...)
  for _, id in ipairs(snapshot(pre.names)) do
    local fn = pre.map[id]
    if fn then
      local r = pack(fn(self, unpack(args, 1, args.n)))
      if r.n > 0 and r[1] ~= nil then args = r end
    end
  end
  local out = pack(self:forward(unpack(args, 1, args.n)))
  for _, id in ipairs(snapshot(post.names)) do
    local fn = post.map[id]
    if fn then
      local r = pack(fn(self, args, unpack(out, 1, out.n)))
      if r.n > 0 and r[1] ~= nil then out = r end
    end
  end
  return unpack(out, 1, out.n)
end

-- ---- traversal ----------------------------------------------------------------------------

-- Iterates the pairs of a list {{name, value}, ...}.
local function iter_pairs(list)
  local i = 0
  return function()
    i = i + 1
    local e = list[i]
    if e then return e[1], e[2] end
  end
end

local function children_list(self)
  local out, seen = {}, {}
  for _, name in ipairs(self._modules.names) do
    local m = self._modules.map[name]
    if not seen[m] then
      seen[m] = true
      out[#out + 1] = { name, m }
    end
  end
  return out
end

-- for name, child in m:named_children() do ... end (direct children, in registration order).
function Module:named_children() return iter_pairs(children_list(self)) end

-- The direct children as an array.
function Module:children()
  local out = {}
  for i, e in ipairs(children_list(self)) do out[i] = e[2] end
  return out
end

local function collect_modules(m, prefix, memo, out)
  if memo[m] then return end
  memo[m] = true
  out[#out + 1] = { prefix, m }
  for _, name in ipairs(m._modules.names) do
    local child = m._modules.map[name]
    collect_modules(child, prefix == "" and name or prefix .. "." .. name, memo, out)
  end
end

local function modules_list(self, prefix)
  local out = {}
  collect_modules(self, prefix or "", {}, out)
  return out
end

-- for name, m in model:named_modules() do ... end: self first (name ""), then depth first.
function Module:named_modules(prefix) return iter_pairs(modules_list(self, prefix)) end

function Module:modules()
  local out = {}
  for i, e in ipairs(modules_list(self)) do out[i] = e[2] end
  return out
end

-- (prefix, recurse) positional or {prefix =, recurse =}.
local function member_args(a, b)
  if type(a) == "table" then return a.prefix or "", a.recurse ~= false end
  return a or "", b ~= false
end

-- A CheckpointWrapper's child: left out of parameter and state-dict names, as PyTorch strips it.
local WRAPPED = "_checkpoint_wrapped_module"
local function child_prefix(prefix, name) return name == WRAPPED and prefix or prefix .. name .. "." end
local function unwrapped_name(path)
  if not path:find(WRAPPED, 1, true) then return path end
  local parts = {}
  for seg in path:gmatch("[^.]+") do
    if seg ~= WRAPPED then parts[#parts + 1] = seg end
  end
  return concat(parts, ".")
end

local function members_list(self, field, prefix, recurse)
  local out, seen = {}, {}
  local mods = recurse and modules_list(self, prefix) or { { prefix, self } }
  for _, e in ipairs(mods) do
    local mprefix, m = e[1], e[2]
    local d = m[field]
    for _, name in ipairs(d.names) do
      local v = d.map[name]
      if not seen[v] then
        seen[v] = true
        out[#out + 1] = { unwrapped_name(mprefix == "" and name or mprefix .. "." .. name), v }
      end
    end
  end
  return out
end

-- for name, p in model:named_parameters() do ... end, with torch's dotted names
-- ("conv1.weight"); a parameter shared by two modules is given once.
function Module:named_parameters(prefix, recurse)
  return iter_pairs(members_list(self, "_parameters", member_args(prefix, recurse)))
end

-- The parameters as an array (recurse = false: only this module's own).
function Module:parameters(recurse)
  local out = {}
  for i, e in ipairs(members_list(self, "_parameters", "", recurse ~= false)) do out[i] = e[2] end
  return out
end

function Module:named_buffers(prefix, recurse)
  return iter_pairs(members_list(self, "_buffers", member_args(prefix, recurse)))
end

function Module:buffers(recurse)
  local out = {}
  for i, e in ipairs(members_list(self, "_buffers", "", recurse ~= false)) do out[i] = e[2] end
  return out
end

-- The module at a dotted path ("" is self).
function Module:get_submodule(target)
  if target == "" then return self end
  local m = self
  for item in target:gmatch("[^.]+") do
    local child = m._modules.map[item]
    if child == nil then
      error(fmt("get_submodule: %s has no attribute `%s`", m:_get_name(), item), 2)
    end
    m = child
  end
  return m
end

local function split_member(self, fname, target, field, kind)
  local mod_path, name = target:match("^(.*)%.([^.]+)$")
  if not mod_path then mod_path, name = "", target end
  local m = self:get_submodule(mod_path)
  local v = m[field].map[name]
  if v == nil then error(fmt("%s: %s has no %s `%s`", fname, m:_get_name(), kind, name), 3) end
  return v
end

function Module:get_parameter(target)
  return split_member(self, "get_parameter", target, "_parameters", "parameter")
end

function Module:get_buffer(target)
  return split_member(self, "get_buffer", target, "_buffers", "buffer")
end

-- Calls fn on every child (recursively) then on self. Returns self.
function Module:apply(fn)
  for _, m in ipairs(self:children()) do m:apply(fn) end
  fn(self)
  return self
end

-- ---- modes and gradients ----------------------------------------------------------------------

function Module:train(mode)
  if mode == nil then mode = true end
  if type(mode) ~= "boolean" then error("train: training mode is expected to be boolean", 2) end
  for _, m in ipairs(self:modules()) do rawset(m, "training", mode) end
  return self
end

function Module:eval() return self:train(false) end

function Module:requires_grad_(flag)
  if flag == nil then flag = true end
  for _, p in ipairs(self:parameters()) do p.requires_grad = flag end
  return self
end

-- Clears gradients: to nil (the default, as torch's set_to_none=True) or to zeros; the flag as the
-- optimizer's zero_grad takes it, {set_to_none = false} or PyTorch's positional false.
function Module:zero_grad(opts)
  local set_to_none = check_opts.flag("zero_grad", opts, "set_to_none", true, 2)
  for _, p in ipairs(self:parameters()) do
    local g = p.grad
    if g ~= nil then
      if set_to_none then
        p.grad = nil
      else
        local _ <close> = ms.no_grad()
        g:zero_()
      end
    end
  end
end

-- ---- conversion -------------------------------------------------------------------------------

-- Replaces every parameter and buffer by fn(t) where that gives a different tensor; a new
-- parameter keeps the old one's requires_grad, name and place in the order. A parameter shared
-- by several modules (a tied LM head) is converted once and stays shared, as in torch.
function Module:_apply(fn)
  local converted = {}
  for _, m in ipairs(self:modules()) do
    local P = m._parameters
    for _, name in ipairs(P.names) do
      local p = P.map[name]
      local q = converted[p]
      if q == nil then
        local np = fn(p)
        q = p
        if not rawequal(np, p) then
          q = nn.Parameter(np, p.requires_grad)
          if p.grad ~= nil then q.grad = fn(p.grad) end
        end
        converted[p] = q
      end
      P.map[name] = q
    end
    local B = m._buffers
    for _, name in ipairs(B.names) do B.map[name] = fn(B.map[name]) end
  end
  return self
end

-- model:to("float64"), model:to("cpu"), model:to({dtype =, device =}) or model:to(tensor):
-- floating parameters and buffers take the dtype, all take the device. Returns self. Tensors
-- are replaced (moonshard tensors cannot change dtype in place), so build optimizers after.
function Module:to(arg)
  local dtype, device
  if is_tensor(arg) then
    dtype = arg.dtype
  elseif type(arg) == "table" then
    dtype, device = arg.dtype, arg.device
  elseif type(arg) == "string" then
    if arg == "cpu" or arg == "meta" or arg:match("^cuda") then device = arg else dtype = arg end
  elseif math.type(arg) == "integer" then
    device = "cuda:" .. arg
  else
    error(fmt("to: expected a dtype, a device, an options table or a tensor, got %s", type(arg)), 2)
  end
  if dtype ~= nil then -- normalizes ("float" is "float32") and checks the name
    local ok, t = pcall(ms.empty, 0, { dtype = dtype })
    if not ok then error(fmt("to: unknown dtype or device %s", tostring(dtype)), 2) end
    dtype = t.dtype
  end
  return self:_apply(function(t)
    if device ~= nil then t = t:to(device) end
    if dtype ~= nil and t:is_floating_point() and t.dtype ~= dtype then t = t:to(dtype) end
    return t
  end)
end

function Module:float() return self:to("float32") end
function Module:double() return self:to("float64") end
function Module:cpu() return self:to("cpu") end
-- model:cuda() (the current device) or model:cuda(i), as torch
function Module:cuda(device) return self:to(device and ("cuda:" .. device) or "cuda") end

-- ---- state dict -------------------------------------------------------------------------------

local function ordered_pairs_of(keys)
  return function(t)
    local i = 0
    return function()
      i = i + 1
      local k = keys[i]
      if k ~= nil then return k, rawget(t, k) end
    end, t, nil
  end
end

local function save_state(m, prefix, keep_vars, sd, keys)
  for _, name in ipairs(m._parameters.names) do
    local p = m._parameters.map[name]
    keys[#keys + 1] = prefix .. name
    sd[prefix .. name] = keep_vars and p or p:detach()
  end
  for _, name in ipairs(m._buffers.names) do
    if not m._non_persistent[name] then
      local b = m._buffers.map[name]
      keys[#keys + 1] = prefix .. name
      sd[prefix .. name] = keep_vars and b or b:detach()
    end
  end
  for _, name in ipairs(m._modules.names) do
    save_state(m._modules.map[name], child_prefix(prefix, name), keep_vars, sd, keys)
  end
end

-- Returns sd, keys: sd maps dotted names to tensors (parameters and persistent buffers,
-- detached unless keep_vars), keys lists them in torch's order, and pairs(sd) walks that order.
-- opts: {prefix = "", keep_vars = false}.
function Module:state_dict(opts)
  opts = opts or {}
  local sd, keys = {}, {}
  save_state(self, opts.prefix or "", opts.keep_vars == true, sd, keys)
  return setmetatable(sd, { __pairs = ordered_pairs_of(keys) }), keys
end

local function shape_of(t) return tostring(t.shape) end

local function same_shape(a, b)
  local sa, sb = a.shape, b.shape
  if #sa ~= #sb then return false end
  for i = 1, #sa do
    if sa[i] ~= sb[i] then return false end
  end
  return true
end

local function quoted_list(keys)
  local q = {}
  for i, k in ipairs(keys) do q[i] = '"' .. k .. '"' end
  return concat(q, ", ")
end

-- Copies sd's tensors into the parameters and buffers (under no_grad). With strict (the
-- default), missing and unexpected keys are errors; shape mismatches always are. Nothing is
-- copied when anything is wrong. Returns {missing_keys =, unexpected_keys =}.
function Module:load_state_dict(sd, opts)
  if type(sd) ~= "table" then
    error(fmt("load_state_dict: expected a table of name -> tensor, got %s", type(sd)), 2)
  end
  local strict = not (type(opts) == "table" and opts.strict == false)
  local own, own_keys = self:state_dict({ keep_vars = true })
  local missing, unexpected, errors = {}, {}, {}
  for _, k in ipairs(own_keys) do
    local v = rawget(sd, k)
    if v == nil then
      missing[#missing + 1] = k
    elseif not is_tensor(v) then
      errors[#errors + 1] = fmt('While copying the parameter named "%s", expected a tensor from checkpoint but received %s',
        k, type(v))
    elseif not same_shape(v, own[k]) then
      errors[#errors + 1] = fmt("size mismatch for %s: copying a param with shape %s from checkpoint, the shape in current model is %s.",
        k, shape_of(v), shape_of(own[k]))
    end
  end
  for k in pairs(sd) do
    if rawget(own, k) == nil then unexpected[#unexpected + 1] = tostring(k) end
  end
  local mt = getmetatable(sd)
  if not (mt and mt.__pairs) then table.sort(unexpected) end
  if strict then
    if #unexpected > 0 then
      table.insert(errors, 1, fmt("Unexpected key(s) in state_dict: %s. ", quoted_list(unexpected)))
    end
    if #missing > 0 then
      table.insert(errors, 1, fmt("Missing key(s) in state_dict: %s. ", quoted_list(missing)))
    end
  end
  if #errors > 0 then
    error(fmt("Error(s) in loading state_dict for %s:\n\t%s", self:_get_name(), concat(errors, "\n\t")), 2)
  end
  local _ <close> = ms.no_grad()
  for _, k in ipairs(own_keys) do
    local v = rawget(sd, k)
    if v ~= nil then own[k]:copy_(v) end
  end
  return { missing_keys = missing, unexpected_keys = unexpected }
end

-- ---- printing ---------------------------------------------------------------------------------

local function add_indent(s, n)
  local lines = {}
  for line in (s .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = line end
  if #lines == 1 then return s end
  local pad = string.rep(" ", n)
  for i = 2, #lines do lines[i] = pad .. lines[i] end
  return concat(lines, "\n")
end

-- torch's Module.__repr__: "Name(extra)" without children, else one "(name): child" a line.
function Module:__tostring()
  local extra_lines = {}
  local extra = self:extra_repr()
  if extra ~= nil and extra ~= "" then
    for line in (extra .. "\n"):gmatch("(.-)\n") do extra_lines[#extra_lines + 1] = line end
  end
  local child_lines = {}
  for _, name in ipairs(self._modules.names) do
    child_lines[#child_lines + 1] = "(" .. name .. "): " .. add_indent(tostring(self._modules.map[name]), 2)
  end
  local s = self:_get_name() .. "("
  if #extra_lines + #child_lines > 0 then
    if #extra_lines == 1 and #child_lines == 0 then
      s = s .. extra_lines[1]
    else
      local lines = {}
      for _, l in ipairs(extra_lines) do lines[#lines + 1] = l end
      for _, l in ipairs(child_lines) do lines[#lines + 1] = l end
      s = s .. "\n  " .. concat(lines, "\n  ") .. "\n"
    end
  end
  return s .. ")"
end

-- The module a wrapper chain ends in (FSDP -> FlattenParamsWrapper -> Net: Net).
local function innermost(m)
  while true do
    local name = rawget(getmetatable(m), "_wrapped_name")
    local inner = name and m._modules.map[name]
    if inner == nil then return m end
    m = inner
  end
end

-- As PyTorch's __getattr__ on the wrappers (FSDP, checkpoint_wrapper): a name the wrapper class
-- cls does not have is looked up on the module it holds as `inner_name` (model.fc1.weight reads
-- through a nested unit); the user's read of a name neither has is a typo, as on a plain module.
local function forward_missing(cls, inner_name)
  rawset(cls, "_wrapped_name", inner_name)
  local index = cls.__index
  cls.__index = function(self, k)
    local v = index(self, k)
    if v ~= nil or type(k) ~= "string" then return v end
    local inner = self._modules.map[inner_name]
    if inner == nil then return nil end
    v = inner[k]
    if v == nil and k:sub(1, 1) ~= "_" and not ms._library_frame(2) then
      local core = innermost(self)
      if not rawget(core, "_declared")[k] and not is_parameter_of_reader(self) then unknown_field(core, k) end
    end
    return v
  end
end

-- Helpers the layer and container files share (not part of the public API).
nn.internal = {
  forward_missing = forward_missing,
  describe = describe, is_module = is_module, od_new = od_new, od_set = od_set,
  od_remove = od_remove, pyval = pyval, pack = pack, ordered_pairs_of = ordered_pairs_of,
  mark_parameter = mark_parameter, unwrapped_name = unwrapped_name,
}

return nn
