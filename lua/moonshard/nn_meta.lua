-- nn_meta.lua: deferred initialisation (docs/deferred-init.md). A model built under
-- nn.deferred_init (or an ms.device("meta") scope) has meta parameters: shapes, no bytes. The
-- initialisers its constructors ran (fill_, zero_, uniform_, normal_ and every nn.init
-- function, which are made of them) were recorded on each storage, with the Philox blocks they
-- reserved, so materialising replays them and gives the values an ordinary construction from the
-- same seed gives, bit for bit (engine/src/meta_log.c). Adds to nn:
--   nn.deferred_init(fn, ...)               fn(...) with factories defaulting to meta
--   nn.materialize_module(module, opts)     real storage + the recorded values (torchdistx's name)
--   module:to_empty{device = "cpu"}         real, uninitialised storage (PyTorch's to_empty)
-- and nn.internal.materialize_entries, which FSDP runs on each unit as it wraps it.
local ms = require "moonshard"
local nn = require "moonshard.nn_module"
local options = require "moonshard.check_opts"

local fmt = string.format
local Module = nn.Module

-- nn.deferred_init(fn, ...): fn(...)'s results, built with meta as the factories' default device.
function nn.deferred_init(fn, ...)
  if type(fn) ~= "function" and not (type(fn) == "table" and (getmetatable(fn) or {}).__call) then
    error(fmt("nn.deferred_init: bad argument #1 (fn): expected a function (or a module class), got %s",
      type(fn)), 2)
  end
  local _ <close> = ms.device("meta")
  return fn(...)
end

-- The (module, name, tensor, kind) of every parameter and buffer of `modules` (in that order),
-- one entry per storage: a tied parameter and views of one storage come once.
local function own_entries(modules)
  local out, seen = {}, {}
  for _, m in ipairs(modules) do
    for _, kind in ipairs({ "_parameters", "_buffers" }) do
      local d = m[kind]
      for _, name in ipairs(d.names) do
        local t = d.map[name]
        local key = t ~= nil and ms._storage_key(t)
        if key and not seen[key] then
          seen[key] = true
          out[#out + 1] = { module = m, name = name, tensor = t, buffer = kind == "_buffers" }
        end
      end
    end
  end
  return out
end

local function check_device(who, device)
  device = device or "cpu"
  if type(device) ~= "string" or device == "meta" then
    error(fmt("%s: option 'device': expected a device with memory (\"cpu\", \"cuda:N\"), got %s", who,
      type(device) == "string" and fmt("%q", device) or type(device)), 3)
  end
  return device
end

local function what(e)
  return fmt("%s '%s' of %s", e.buffer and "buffer" or "parameter", e.name, e.module:_get_name())
end

-- Materialises the meta tensors among `entries` (own_entries' form) on `device`: those with
-- records replay them; each module owning one without records gets real storage for its meta
-- tensors and runs its reset_parameters (modules in the order of `entries`, so children before
-- the parents that list them later), or the error names the tensor. Returns the entries that
-- were meta (FSDP frees their bytes once they are flattened).
local function materialize_entries(entries, device, who)
  local was_meta, fallback, order = {}, {}, {}
  for _, e in ipairs(entries) do
    local t = e.tensor
    if t.is_meta then
      was_meta[#was_meta + 1] = e
      if ms._meta_records(t) > 0 then
        ms._meta_materialize(t, device, true)
      else
        local m = e.module
        if type(m.reset_parameters) ~= "function" then
          error(fmt("%s: %s has no recorded initialiser (it was made on meta without fill_, "
            .. "normal_, uniform_ or nn.init) and %s has no reset_parameters to run instead", who,
            what(e), m:_get_name()), 3)
        end
        if not fallback[m] then fallback[m] = {}; order[#order + 1] = m end
        table.insert(fallback[m], e)
      end
    end
  end
  for _, m in ipairs(order) do
    for _, e in ipairs(fallback[m]) do
      if e.tensor.is_meta then ms._meta_materialize(e.tensor, device, false) end
    end
    local _ <close> = ms.no_grad()
    m:reset_parameters()
  end
  return was_meta
end

local function modules_of(module, recurse)
  if recurse == false then return { module } end
  local mods = module:modules()
  -- innermost first: a module's reset_parameters (the fallback) finds its children real
  local rev = {}
  for i = #mods, 1, -1 do rev[#rev + 1] = mods[i] end
  return rev
end

local KNOWN = { device = true, recurse = true }

-- nn.materialize_module(module, {device = "cpu", recurse = true}): every meta parameter and
-- buffer gets storage on device, in place (ties stay tied, held references see the values), and
-- the values its recorded initialisers give. Returns module.
function nn.materialize_module(module, opts)
  local who = "nn.materialize_module"
  if not nn.is_module(module) then
    error(fmt("%s: bad argument #1 (module): expected a module, got %s", who, type(module)), 2)
  end
  opts = options.check(who, opts, KNOWN, 2)
  materialize_entries(own_entries(modules_of(module, opts.recurse)), check_device(who, opts.device), who)
  return module
end

-- module:to_empty{device = "cpu", recurse = true}: every meta parameter and buffer gets
-- uninitialised storage on device (its records are dropped), the others move to device, as
-- PyTorch's Module.to_empty. Returns self.
function Module:to_empty(opts)
  local who = "to_empty"
  opts = options.check(who, opts, KNOWN, 2)
  local device = check_device(who, opts.device)
  for _, e in ipairs(own_entries(modules_of(self, opts.recurse))) do
    if e.tensor.is_meta then ms._meta_materialize(e.tensor, device, false) end
  end
  return self:_apply(function(t) return t.device == device and t or ms.empty_like(t, { device = device }) end)
end

nn.internal = nn.internal or {}
nn.internal.own_entries = own_entries
nn.internal.materialize_entries = materialize_entries

return nn
