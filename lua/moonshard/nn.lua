-- nn.lua: torch.nn for Lua (`local nn = require "moonshard.nn"`): the Module class system
-- (registration by assignment, hooks, train/eval, state_dict, PyTorch's repr), nn.Parameter,
-- and the layers of the MNIST family with torch's defaults, init and printouts.
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

local is_tensor = ms.is_tensor

-- ---- Module ---------------------------------------------------------------------------------

local Module = {}
nn.Module = Module

local function is_module(v)
  return type(v) == "table" and rawget(v, "_modules") ~= nil and rawget(v, "_parameters") ~= nil
end
nn.is_module = is_module

local function describe(v)
  if is_module(v) then return v:_get_name() end
  if is_tensor(v) then return fmt("a %s tensor", v.dtype) end
  return type(v)
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
    return cls[k]
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
setmetatable(Module, {
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
  if type(k) == "number" then
    local setitem = getmetatable(self).__setitem
    if setitem then return setitem(self, k, v) end
    error(fmt("%s does not support item assignment", self:_get_name()), 2)
  end
  local P, M, B = self._parameters, self._modules, self._buffers
  if nn.is_parameter(v) or is_module(v) then
    od_remove(P, k)
    od_remove(M, k)
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
        out[#out + 1] = { mprefix == "" and name or mprefix .. "." .. name, v }
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

-- Clears gradients: to nil (the default, as torch's set_to_none=True) or to zeros.
function Module:zero_grad(opts)
  local set_to_none = not (type(opts) == "table" and opts.set_to_none == false)
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
-- parameter keeps the old one's requires_grad, name and place in the order.
function Module:_apply(fn)
  for _, m in ipairs(self:modules()) do
    local P = m._parameters
    for _, name in ipairs(P.names) do
      local p = P.map[name]
      local np = fn(p)
      if not rawequal(np, p) then
        local q = nn.Parameter(np, p.requires_grad)
        local g = p.grad
        if g ~= nil then
          local ng = fn(g)
          q.grad = ng
        end
        P.map[name] = q
      end
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
    if arg == "cpu" or arg:match("^cuda") then device = arg else dtype = arg end
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
    save_state(m._modules.map[name], prefix .. name .. ".", keep_vars, sd, keys)
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

-- ---- argument parsing for layer constructors --------------------------------------------------

local function is_plain_options(v)
  return type(v) == "table" and getmetatable(v) == nil and v[1] == nil and not is_module(v)
end

-- Positional args in the order of `names`, or an options table last; unknown keys raise.
local function layer_args(cls, names, ...)
  local n = select("#", ...)
  local args = pack(...)
  local r = {}
  if n > 0 and is_plain_options(args[n]) then
    for k, v in pairs(args[n]) do
      local known = false
      for _, name in ipairs(names) do known = known or name == k end
      if not known then
        error(fmt("%s: unknown option '%s' (expected one of: %s)", cls, tostring(k), concat(names, ", ")), 4)
      end
      r[k] = v
    end
    n = n - 1
  end
  if n > #names then error(fmt("%s: takes at most %d arguments, got %d", cls, #names, n), 4) end
  for i = 1, n do
    if args[i] ~= nil then
      if r[names[i]] ~= nil then
        error(fmt("%s: got '%s' both as an argument and as an option", cls, names[i]), 4)
      end
      r[names[i]] = args[i]
    end
  end
  return r
end

local function check_int(cls, what, v, min)
  if math.type(v) ~= "integer" or v < (min or 0) then
    error(fmt("%s: %s must be an integer >= %d, got %s", cls, what, min or 0, tostring(v)), 4)
  end
  return v
end

-- An int or a pair as a pair {a, b}.
local function pair(cls, what, v, min)
  if math.type(v) == "integer" then v = { v, v } end
  if type(v) ~= "table" or #v ~= 2 then
    error(fmt("%s: %s must be an integer or a pair of integers, got %s", cls, what, tostring(v)), 4)
  end
  return { check_int(cls, what, v[1], min), check_int(cls, what, v[2], min) }
end

local function new_param(...)
  return nn.Parameter(ms.empty(...))
end

-- ---- layers -----------------------------------------------------------------------------------

-- Linear(in_features, out_features, bias = true): y = x W^T + b.
local Linear = Module:extend("Linear")
nn.Linear = Linear

function Linear:init(...)
  local a = layer_args("Linear", { "in_features", "out_features", "bias" }, ...)
  self.in_features = check_int("Linear", "in_features", a.in_features)
  self.out_features = check_int("Linear", "out_features", a.out_features)
  self.weight = new_param(self.out_features, self.in_features)
  if a.bias ~= false then self.bias = new_param(self.out_features) end
  self:reset_parameters()
end

-- torch's default: kaiming_uniform_(a = sqrt(5)) and a bias from U(-1/sqrt(fan_in), ..).
local function reset_weight_and_bias(self)
  init.kaiming_uniform_(self.weight, { a = math.sqrt(5) })
  if self.bias ~= nil then
    local fan_in = init.calculate_fan_in_and_fan_out(self.weight)
    local bound = fan_in > 0 and 1 / math.sqrt(fan_in) or 0
    init.uniform_(self.bias, -bound, bound)
  end
end
Linear.reset_parameters = reset_weight_and_bias

function Linear:forward(x) return F.linear(x, self.weight, self.bias) end

function Linear:extra_repr()
  return fmt("in_features=%d, out_features=%d, bias=%s", self.in_features, self.out_features,
    pyval(self.bias ~= nil))
end

-- Conv2d(in, out, kernel_size, stride = 1, padding = 0, dilation = 1, groups = 1, bias = true,
-- padding_mode = "zeros"), positional or as options last: nn.Conv2d(1, 32, 3, {stride = 1}).
local Conv2d = Module:extend("Conv2d")
nn.Conv2d = Conv2d

local CONV_ARGS = { "in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation",
  "groups", "bias", "padding_mode" }

function Conv2d:init(...)
  local a = layer_args("Conv2d", CONV_ARGS, ...)
  local in_c = check_int("Conv2d", "in_channels", a.in_channels)
  local out_c = check_int("Conv2d", "out_channels", a.out_channels)
  local groups = check_int("Conv2d", "groups", a.groups or 1, 1)
  if in_c % groups ~= 0 then error("Conv2d: in_channels must be divisible by groups", 3) end
  if out_c % groups ~= 0 then error("Conv2d: out_channels must be divisible by groups", 3) end
  local padding = a.padding or 0
  if type(padding) == "string" then
    if padding ~= "same" and padding ~= "valid" then
      error(fmt("Conv2d: invalid padding string '%s', should be one of 'valid', 'same'", padding), 3)
    end
  else
    padding = pair("Conv2d", "padding", padding)
  end
  if a.padding_mode ~= nil and a.padding_mode ~= "zeros" then
    error(fmt("Conv2d: padding_mode '%s' is not supported (only 'zeros')", tostring(a.padding_mode)), 3)
  end
  self.in_channels, self.out_channels, self.groups = in_c, out_c, groups
  self.kernel_size = pair("Conv2d", "kernel_size", a.kernel_size, 1)
  self.stride = pair("Conv2d", "stride", a.stride or 1, 1)
  self.padding = padding
  self.dilation = pair("Conv2d", "dilation", a.dilation or 1, 1)
  self.padding_mode = "zeros"
  if padding == "same" and (self.stride[1] ~= 1 or self.stride[2] ~= 1) then
    error("Conv2d: padding='same' is not supported for strided convolutions", 3)
  end
  self.weight = new_param(out_c, in_c // groups, self.kernel_size[1], self.kernel_size[2])
  if a.bias ~= false then self.bias = new_param(out_c) end
  self:reset_parameters()
end

Conv2d.reset_parameters = reset_weight_and_bias

function Conv2d:forward(x)
  return F.conv2d(x, self.weight, self.bias, {
    stride = self.stride, padding = self.padding, dilation = self.dilation, groups = self.groups,
  })
end

local function is_pair_of(t, v) return t[1] == v and t[2] == v end

function Conv2d:extra_repr()
  local s = fmt("%d, %d, kernel_size=%s, stride=%s", self.in_channels, self.out_channels,
    pyval(self.kernel_size), pyval(self.stride))
  local padding = self.padding
  if type(padding) == "string" then
    s = s .. ", padding=" .. padding
  elseif not is_pair_of(padding, 0) then
    s = s .. ", padding=" .. pyval(padding)
  end
  if not is_pair_of(self.dilation, 1) then s = s .. ", dilation=" .. pyval(self.dilation) end
  if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
  if self.bias == nil then s = s .. ", bias=False" end
  return s
end

-- Pool sizes keep the form they were given in (int or pair), as torch prints them.
local function size_arg(cls, what, v, min)
  if math.type(v) == "integer" then return check_int(cls, what, v, min) end
  local p = pair(cls, what, v, min)
  return p
end

-- MaxPool2d(kernel_size, stride = kernel_size, padding = 0, dilation = 1, return_indices =
-- false, ceil_mode = false); with return_indices, forward also returns the 1-based positions.
local MaxPool2d = Module:extend("MaxPool2d")
nn.MaxPool2d = MaxPool2d

function MaxPool2d:init(...)
  local a = layer_args("MaxPool2d",
    { "kernel_size", "stride", "padding", "dilation", "return_indices", "ceil_mode" }, ...)
  self.kernel_size = size_arg("MaxPool2d", "kernel_size", a.kernel_size, 1)
  self.stride = a.stride ~= nil and size_arg("MaxPool2d", "stride", a.stride, 1) or self.kernel_size
  self.padding = size_arg("MaxPool2d", "padding", a.padding or 0)
  self.dilation = size_arg("MaxPool2d", "dilation", a.dilation or 1, 1)
  self.return_indices = a.return_indices == true
  self.ceil_mode = a.ceil_mode == true
end

function MaxPool2d:forward(x)
  return F.max_pool2d(x, self.kernel_size, {
    stride = self.stride, padding = self.padding, dilation = self.dilation, ceil_mode = self.ceil_mode,
    return_indices = self.return_indices,
  })
end

function MaxPool2d:extra_repr()
  return fmt("kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s", pyval(self.kernel_size),
    pyval(self.stride), pyval(self.padding), pyval(self.dilation), pyval(self.ceil_mode))
end

-- AvgPool2d(kernel_size, stride = kernel_size, padding = 0, ceil_mode = false,
-- count_include_pad = true).
local AvgPool2d = Module:extend("AvgPool2d")
nn.AvgPool2d = AvgPool2d

function AvgPool2d:init(...)
  local a = layer_args("AvgPool2d", { "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad" }, ...)
  self.kernel_size = size_arg("AvgPool2d", "kernel_size", a.kernel_size, 1)
  self.stride = a.stride ~= nil and size_arg("AvgPool2d", "stride", a.stride, 1) or self.kernel_size
  self.padding = size_arg("AvgPool2d", "padding", a.padding or 0)
  self.ceil_mode = a.ceil_mode == true
  self.count_include_pad = a.count_include_pad ~= false
end

function AvgPool2d:forward(x)
  return F.avg_pool2d(x, self.kernel_size, {
    stride = self.stride, padding = self.padding, ceil_mode = self.ceil_mode,
    count_include_pad = self.count_include_pad,
  })
end

function AvgPool2d:extra_repr()
  return fmt("kernel_size=%s, stride=%s, padding=%s", pyval(self.kernel_size), pyval(self.stride),
    pyval(self.padding))
end

-- AdaptiveAvgPool2d(output_size): an int or a pair.
local AdaptiveAvgPool2d = Module:extend("AdaptiveAvgPool2d")
nn.AdaptiveAvgPool2d = AdaptiveAvgPool2d

function AdaptiveAvgPool2d:init(output_size)
  self.output_size = size_arg("AdaptiveAvgPool2d", "output_size", output_size, 1)
end

function AdaptiveAvgPool2d:forward(x) return F.adaptive_avg_pool2d(x, self.output_size) end

function AdaptiveAvgPool2d:extra_repr() return "output_size=" .. pyval(self.output_size) end

-- Dropout(p = 0.5): zeroes elements with probability p while training, scaling the rest by
-- 1 / (1 - p); the identity in eval mode.
local Dropout = Module:extend("Dropout")
nn.Dropout = Dropout

function Dropout:init(...)
  local a = layer_args("Dropout", { "p", "inplace" }, ...)
  local p = a.p == nil and 0.5 or a.p
  if type(p) ~= "number" or p < 0 or p > 1 then
    error(fmt("Dropout: dropout probability has to be between 0 and 1, but got %s", tostring(p)), 3)
  end
  self.p = p
  self.inplace = a.inplace == true
end

function Dropout:forward(x) return F.dropout(x, { p = self.p, training = self.training }) end

function Dropout:extra_repr() return fmt("p=%s, inplace=%s", pyval(self.p), pyval(self.inplace)) end

-- Activations without state.
local function activation(name, fn, inplace_arg)
  local cls = Module:extend(name)
  nn[name] = cls
  if inplace_arg then
    function cls:init(...)
      local a = layer_args(name, { "inplace" }, ...)
      self.inplace = a.inplace == true
    end
    function cls:extra_repr() return self.inplace and "inplace=True" or "" end
  end
  function cls:forward(x) return fn(x, self.inplace) end
  return cls
end

activation("ReLU", F.relu, true)
activation("SiLU", F.silu, true)
activation("Tanh", F.tanh)
activation("Sigmoid", F.sigmoid)

-- GELU(approximate = "none" | "tanh").
local GELU = Module:extend("GELU")
nn.GELU = GELU

function GELU:init(...)
  local a = layer_args("GELU", { "approximate" }, ...)
  local approx = a.approximate or "none"
  if approx ~= "none" and approx ~= "tanh" then
    error(fmt("GELU: approximate must be 'none' or 'tanh', got %s", tostring(approx)), 3)
  end
  self.approximate = approx
end

function GELU:forward(x)
  if self.approximate == "none" then return F.gelu(x) end
  return F.gelu(x, { approximate = self.approximate })
end

function GELU:extra_repr() return fmt("approximate='%s'", self.approximate) end

-- Softmax(dim) and LogSoftmax(dim); the dim is required (1-based, negative from the end).
local function softmax_class(name, fn)
  local cls = Module:extend(name)
  nn[name] = cls
  function cls:init(...)
    local a = layer_args(name, { "dim" }, ...)
    if math.type(a.dim) ~= "integer" then
      error(fmt("%s: dim must be given as an integer (1-based), got %s", name, tostring(a.dim)), 3)
    end
    self.dim = a.dim
  end
  function cls:forward(x) return fn(x, self.dim) end
  function cls:extra_repr() return "dim=" .. self.dim end
end

softmax_class("Softmax", F.softmax)
softmax_class("LogSoftmax", F.log_softmax)

-- Flatten(start_dim = 2, end_dim = -1): keeps the batch dim, as torch's Flatten().
local Flatten = Module:extend("Flatten")
nn.Flatten = Flatten

function Flatten:init(...)
  local a = layer_args("Flatten", { "start_dim", "end_dim" }, ...)
  self.start_dim = a.start_dim or 2
  self.end_dim = a.end_dim or -1
end

function Flatten:forward(x) return F.flatten(x, self.start_dim, self.end_dim) end

function Flatten:extra_repr() return fmt("start_dim=%d, end_dim=%d", self.start_dim, self.end_dim) end

-- Identity(): returns its input.
local Identity = Module:extend("Identity")
nn.Identity = Identity

function Identity:forward(x) return x end

-- Embedding(num_embeddings, embedding_dim, padding_idx = nil): a lookup table initialised
-- from N(0, 1), with the padding row (1-based, negative from the end) zeroed.
local Embedding = Module:extend("Embedding")
nn.Embedding = Embedding

function Embedding:init(...)
  local a = layer_args("Embedding", { "num_embeddings", "embedding_dim", "padding_idx" }, ...)
  local n = check_int("Embedding", "num_embeddings", a.num_embeddings)
  self.num_embeddings = n
  self.embedding_dim = check_int("Embedding", "embedding_dim", a.embedding_dim)
  local pi = a.padding_idx
  if pi ~= nil then
    if math.type(pi) ~= "integer" or pi == 0 or pi > n or pi < -n then
      error(fmt("Embedding: padding_idx must be within num_embeddings (1..%d or -%d..-1), got %s", n, n,
        tostring(pi)), 3)
    end
  end
  self.padding_idx = pi
  self.weight = new_param(n, self.embedding_dim)
  self:reset_parameters()
end

function Embedding:reset_parameters()
  init.normal_(self.weight)
  if self.padding_idx ~= nil then
    local _ <close> = ms.no_grad()
    local row = self.padding_idx < 0 and self.num_embeddings + self.padding_idx + 1 or self.padding_idx
    self.weight[row]:fill_(0)
  end
end

function Embedding:forward(idx)
  if self.padding_idx == nil then return F.embedding(idx, self.weight) end
  return F.embedding(idx, self.weight, { padding_idx = self.padding_idx })
end

function Embedding:extra_repr()
  local s = fmt("%d, %d", self.num_embeddings, self.embedding_dim)
  if self.padding_idx ~= nil then s = s .. ", padding_idx=" .. self.padding_idx end
  return s
end

-- LayerNorm(normalized_shape, eps = 1e-5, elementwise_affine = true).
local LayerNorm = Module:extend("LayerNorm")
nn.LayerNorm = LayerNorm

function LayerNorm:init(...)
  local a = layer_args("LayerNorm", { "normalized_shape", "eps", "elementwise_affine" }, ...)
  local s = a.normalized_shape
  if math.type(s) == "integer" then s = { s } end
  if type(s) ~= "table" or #s == 0 then
    error(fmt("LayerNorm: normalized_shape must be an integer or a list of integers, got %s", tostring(s)), 3)
  end
  local shape = {}
  for i = 1, #s do shape[i] = check_int("LayerNorm", "normalized_shape", s[i], 1) end
  self.normalized_shape = shape
  self.eps = a.eps or 1e-5
  self.elementwise_affine = a.elementwise_affine ~= false
  if self.elementwise_affine then
    self.weight = nn.Parameter(ms.ones(shape))
    self.bias = nn.Parameter(ms.zeros(shape))
  end
end

function LayerNorm:forward(x)
  return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, { eps = self.eps })
end

function LayerNorm:extra_repr()
  return fmt("%s, eps=%s, elementwise_affine=%s", pyval(self.normalized_shape), pyval(self.eps),
    pyval(self.elementwise_affine))
end

-- BatchNorm1d / BatchNorm2d(num_features, eps = 1e-5, momentum = 0.1, affine = true,
-- track_running_stats = true); momentum = false means a cumulative average (torch's None).
local BatchNorm = Module:extend("_BatchNorm")
nn._BatchNorm = BatchNorm

function BatchNorm:init(...)
  local name = self:_get_name()
  local a = layer_args(name, { "num_features", "eps", "momentum", "affine", "track_running_stats" }, ...)
  local n = check_int(name, "num_features", a.num_features, 1)
  self.num_features = n
  self.eps = a.eps or 1e-5
  if a.momentum == false then self.momentum = false else self.momentum = a.momentum or 0.1 end
  self.affine = a.affine ~= false
  self.track_running_stats = a.track_running_stats ~= false
  if self.affine then
    self.weight = nn.Parameter(ms.ones(n))
    self.bias = nn.Parameter(ms.zeros(n))
  end
  if self.track_running_stats then
    self:register_buffer("running_mean", ms.zeros(n))
    self:register_buffer("running_var", ms.ones(n))
    self:register_buffer("num_batches_tracked", ms.tensor(0, { dtype = "int64" }))
  end
end

function BatchNorm:reset_running_stats()
  if not self.track_running_stats then return end
  local _ <close> = ms.no_grad()
  self.running_mean:fill_(0)
  self.running_var:fill_(1)
  self.num_batches_tracked:fill_(0)
end

function BatchNorm:forward(x)
  self:_check_input_dim(x)
  local factor = self.momentum or 0.0
  if self.training and self.track_running_stats then
    local nbt = self.num_batches_tracked
    do
      local _ <close> = ms.no_grad()
      nbt:add_(1)
    end
    if self.momentum == false then factor = 1.0 / nbt:item() end
  end
  local bn_training = self.training or not self.track_running_stats
  local use_stats = not self.training or self.track_running_stats
  return F.batch_norm(x, use_stats and self.running_mean or nil, use_stats and self.running_var or nil,
    self.weight, self.bias, { training = bn_training, momentum = factor, eps = self.eps })
end

function BatchNorm:extra_repr()
  return fmt("%d, eps=%s, momentum=%s, affine=%s, track_running_stats=%s", self.num_features, pyval(self.eps),
    self.momentum == false and "None" or pyval(self.momentum), pyval(self.affine), pyval(self.track_running_stats))
end

local BatchNorm1d = BatchNorm:extend("BatchNorm1d")
nn.BatchNorm1d = BatchNorm1d

function BatchNorm1d:_check_input_dim(x)
  local d = x:dim()
  if d ~= 2 and d ~= 3 then error(fmt("BatchNorm1d: expected 2D or 3D input (got %dD input)", d), 3) end
end

local BatchNorm2d = BatchNorm:extend("BatchNorm2d")
nn.BatchNorm2d = BatchNorm2d

function BatchNorm2d:_check_input_dim(x)
  local d = x:dim()
  if d ~= 4 then error(fmt("BatchNorm2d: expected 4D input (got %dD input)", d), 3) end
end

-- ---- containers ------------------------------------------------------------------------------

-- Position i (1-based, negative from the end) among the children, or nil.
local function child_name_at(self, i, cls)
  if math.type(i) ~= "integer" then error(fmt("%s: index must be an integer, got %s", cls, tostring(i)), 3) end
  local names = self._modules.names
  if i < 0 then i = #names + i + 1 end
  return names[i]
end

local function list_getitem(self, i)
  local name = child_name_at(self, i, self:_get_name())
  return name and self._modules.map[name]
end

local function list_setitem(self, i, m)
  local name = child_name_at(self, i, self:_get_name())
  if not name then error(fmt("%s: index %d is out of range", self:_get_name(), i), 3) end
  if not is_module(m) then error(fmt("%s: %s is not a Module subclass", self:_get_name(), describe(m)), 3) end
  self._modules.map[name] = m
end

local function list_len(self) return #self._modules.names end

-- Rebuilds the children as "0", "1", ... from an array of modules.
local function renumber(self, mods)
  local d = od_new()
  for i, m in ipairs(mods) do od_set(d, tostring(i - 1), m) end
  rawset(self, "_modules", d)
end

local function list_modules(self)
  local out = {}
  for i, name in ipairs(self._modules.names) do out[i] = self._modules.map[name] end
  return out
end

-- Sequential(m1, m2, ...): children named "0", "1", ... (torch's names); seq[1] is the first;
-- forward feeds each child's output to the next. Sequential({{"name", m}, ...}) names them.
local Sequential = Module:extend("Sequential")
nn.Sequential = Sequential
Sequential.__getitem = list_getitem
Sequential.__setitem = list_setitem
Sequential.__len = list_len

function Sequential:init(...)
  local first = ...
  if select("#", ...) == 1 and type(first) == "table" and not is_module(first) then
    for i, e in ipairs(first) do
      if type(e) ~= "table" or type(e[1]) ~= "string" or not is_module(e[2]) then
        error(fmt("Sequential: entry %d must be a {name, module} pair", i), 3)
      end
      self:add_module(e[1], e[2])
    end
    return
  end
  for i = 1, select("#", ...) do
    local m = select(i, ...)
    if not is_module(m) then error(fmt("Sequential: argument #%d is %s, not a Module", i, describe(m)), 3) end
    self:add_module(tostring(i - 1), m)
  end
end

function Sequential:forward(input, ...)
  for _, name in ipairs(self._modules.names) do
    input = self._modules.map[name](input, ...)
  end
  return input
end

function Sequential:append(m)
  self:add_module(tostring(#self._modules.names), m)
  return self
end

-- ModuleList({m1, m2, ...}): holds modules, indexed 1-based, named "0", "1", ... for torch.
local ModuleList = Module:extend("ModuleList")
nn.ModuleList = ModuleList
ModuleList.__getitem = list_getitem
ModuleList.__setitem = list_setitem
ModuleList.__len = list_len

function ModuleList:init(mods)
  if mods ~= nil then self:extend(mods) end
end

function ModuleList:append(m)
  if not is_module(m) then error(fmt("ModuleList.append: %s is not a Module subclass", describe(m)), 2) end
  self:add_module(tostring(#self._modules.names), m)
  return self
end

-- Appends every module of an array (named extend_ would clash with the class method extend).
function ModuleList:extend(mods)
  if getmetatable(self) == nil or rawget(self, "_modules") == nil then
    return Module.extend(self, mods) -- called on the class: make a subclass
  end
  if type(mods) ~= "table" then error("ModuleList.extend: expected an array of modules", 2) end
  local list = is_module(mods) and list_modules(mods) or mods
  for _, m in ipairs(list) do self:append(m) end
  return self
end

-- Inserts m before position i (1-based).
function ModuleList:insert(i, m)
  local mods = list_modules(self)
  if math.type(i) ~= "integer" then error("ModuleList.insert: index must be an integer", 2) end
  if i < 0 then i = #mods + i + 1 end
  if i < 1 or i > #mods + 1 then error(fmt("ModuleList.insert: index %d is out of range", i), 2) end
  if not is_module(m) then error(fmt("ModuleList.insert: %s is not a Module subclass", describe(m)), 2) end
  table.insert(mods, i, m)
  renumber(self, mods)
end

function ModuleList:forward()
  error("ModuleList has no forward: iterate over it and call its modules", 2)
end

-- ModuleDict(t): modules by name; t is {{name, m}, ...} (kept in that order) or a map (added in
-- sorted key order, since Lua tables have none).
local ModuleDict = Module:extend("ModuleDict")
nn.ModuleDict = ModuleDict
ModuleDict.__len = list_len

function ModuleDict:init(mods)
  if mods ~= nil then self:update(mods) end
end

function ModuleDict:update(mods)
  if type(mods) ~= "table" then error("ModuleDict.update: expected a table of modules", 2) end
  if mods[1] ~= nil then
    for i, e in ipairs(mods) do
      if type(e) ~= "table" or type(e[1]) ~= "string" or not is_module(e[2]) then
        error(fmt("ModuleDict.update: entry %d must be a {name, module} pair", i), 2)
      end
      self:_put(e[1], e[2])
    end
  else
    local keys = {}
    for k in pairs(mods) do keys[#keys + 1] = k end
    table.sort(keys)
    for _, k in ipairs(keys) do self:_put(k, mods[k]) end
  end
  return self
end

function ModuleDict:_put(name, m)
  if self._modules.map[name] ~= nil then od_remove(self._modules, name) end
  self:add_module(name, m)
end

function ModuleDict:keys()
  local out = {}
  for i, n in ipairs(self._modules.names) do out[i] = n end
  return out
end

function ModuleDict:values() return list_modules(self) end

-- for name, m in md:items() do ... end, in order.
function ModuleDict:items() return self:named_children() end

function ModuleDict:pop(name)
  local m = self._modules.map[name]
  od_remove(self._modules, name)
  return m
end

function ModuleDict:forward()
  error("ModuleDict has no forward: call its modules", 2)
end

-- ---- nn.utils -----------------------------------------------------------------------------------

-- Filled by moonshard.nn_utils (clip_grad_norm_ and friends) on first use, when that file exists.
nn.utils = setmetatable({}, {
  __index = function(t, k)
    if package.preload["moonshard.nn_utils"] or package.loaded["moonshard.nn_utils"] then
      local u = require "moonshard.nn_utils"
      for name, v in pairs(u) do rawset(t, name, v) end
      setmetatable(t, nil)
      return rawget(t, k)
    end
    return nil
  end,
})

return nn
