-- cuda_graphs.lua: the Lua half of CUDA graphs, read as ms.cuda.graph and ms.cuda.make_graphed_step
-- (the graph object itself, ms.cuda.CUDAGraph, is C: lua/l_cuda.c). docs/cuda-graphs.md says how
-- to use them and what a captured step may not hold.
local ms = require "moonshard"
local options = require "moonshard.check_opts"

local M = {}

local GRAPH_MT = debug.getregistry()["moonshard.cuda.CUDAGraph"]

local function check_graph(fname, g)
  if getmetatable(g) ~= GRAPH_MT then
    error(("%s: expected a ms.cuda.CUDAGraph, got %s"):format(fname, ms.is_tensor(g) and "a Tensor" or type(g)), 3)
  end
end

-- ---- ms.cuda.graph(g): a scope captured into g ------------------------------------------------

local Scope = {}
Scope.__index = Scope

-- Leaving the scope ends the capture; leaving it by an error ends it quietly, so that the error
-- users see is the one inside the scope (the capture is then invalid and g stays empty).
function Scope:__close(err)
  if err ~= nil then
    pcall(self.g.capture_end, self.g)
    pcall(self.g.reset, self.g)
    return
  end
  self.g:capture_end()
end

function M.graph(g)
  check_graph("ms.cuda.graph", g)
  g:capture_begin()
  return setmetatable({ g = g }, Scope)
end

-- ---- ms.cuda.make_graphed_step(fn, opts) -------------------------------------------------------

local OPTIONS = { warmup = true, enabled = true, max_graphs = true }

local function check_options(opts)
  opts = options.check("make_graphed_step", opts, OPTIONS, 3)
  local function count(name, default, least)
    local v = opts[name]
    if v == nil then return default end
    if math.type(v) ~= "integer" or v < least then
      error(("make_graphed_step: option %s must be an integer >= %d, got %s"):format(name, least, tostring(v)), 4)
    end
    return v
  end
  local warmup, max_graphs = count("warmup", 3, 0), count("max_graphs", 8, 1)
  if opts.enabled ~= nil and type(opts.enabled) ~= "boolean" then
    error(("make_graphed_step: option enabled must be a boolean, got %s"):format(type(opts.enabled)), 3)
  end
  return { warmup = warmup, enabled = opts.enabled ~= false, max_graphs = max_graphs }
end

-- What a capture bakes in about a call's arguments: each tensor's device, dtype and shape, and
-- every other value itself. Calls with the same signature share a graph. nil (run eagerly)
-- when a tensor is not on a CUDA device or none is there at all.
local function signature(args)
  local parts, cuda = {}, false
  for i = 1, args.n do
    local a = args[i]
    if ms.is_tensor(a) then
      if not a.is_cuda then return nil end
      cuda = true
      parts[i] = ("%s %s [%s]"):format(a.device, a.dtype, table.concat(a.shape, ","))
    elseif math.type(a) == "float" then
      parts[i] = ("float %a"):format(a) -- exact: two rates that print alike are still two graphs
    else
      parts[i] = type(a) .. " " .. tostring(a)
    end
  end
  return cuda and table.concat(parts, "|") or nil
end

-- The step's static inputs: tensors the graph reads, into which each call's tensors are copied.
local function static_inputs(args)
  local s = { n = args.n }
  for i = 1, args.n do
    local a = args[i]
    s[i] = ms.is_tensor(a) and a:detach():clone() or a
  end
  return s
end

-- One warm-up call on the graph's side stream, where the capture will run.
local function warm_up(entry, fn, args)
  entry.graph:_side_stream(true)
  local r = table.pack(pcall(fn, table.unpack(args, 1, args.n)))
  entry.graph:_side_stream(false)
  if not r[1] then error(r[2], 0) end
  return table.unpack(r, 2, r.n)
end

-- Captures fn(static inputs) into entry.graph; a failure leaves the graph empty and raises the
-- error that stopped the capture (an op that would make the host wait, say), not CUDA's.
local function capture(entry, fn, args)
  entry.static = static_inputs(args)
  local g = entry.graph
  g:capture_begin()
  local r = table.pack(pcall(fn, table.unpack(entry.static, 1, entry.static.n)))
  local ended, why = pcall(g.capture_end, g)
  if not r[1] or not ended then
    pcall(g.reset, g)
    entry.static = nil
    error(("make_graphed_step: capturing the step failed: %s"):format(tostring(r[1] and why or r[2])), 0)
  end
  entry.outputs = table.move(r, 2, r.n, 1, { n = r.n - 1 })
end

local function replay(entry, args)
  local s = entry.static
  for i = 1, args.n do
    if ms.is_tensor(args[i]) and not rawequal(args[i], s[i]) then s[i]:copy_(args[i]) end
  end
  entry.graph:replay()
  return table.unpack(entry.outputs, 1, entry.outputs.n)
end

-- Keeps at most max_graphs signatures (a rate that changes each epoch makes a new one each
-- epoch): the one called longest ago is dropped, and its graph gives its memory back.
local function evict(state)
  local oldest, count = nil, 0
  for _, e in pairs(state.entries) do
    count = count + 1
    if not oldest or e.used < oldest.used then oldest = e end
  end
  if count > state.max_graphs then
    oldest.graph:reset()
    state.entries[oldest.sig] = nil
  end
end

function M.make_graphed_step(fn, opts)
  if type(fn) ~= "function" and not (getmetatable(fn) or {}).__call then
    error(("make_graphed_step: expected a function as argument 1, got %s"):format(type(fn)), 2)
  end
  local o = check_options(opts)
  local state = { entries = {}, max_graphs = o.max_graphs, clock = 0 }
  return function(...)
    local args = table.pack(...)
    local sig = o.enabled and ms.cuda.is_available() and not ms.cuda.is_current_stream_capturing()
      and signature(args)
    if not sig then return fn(...) end
    local entry = state.entries[sig]
    state.clock = state.clock + 1
    if not entry then
      entry = { sig = sig, calls = 0, used = state.clock, graph = ms.cuda.CUDAGraph() }
      state.entries[sig] = entry
      evict(state)
    end
    entry.used, entry.calls = state.clock, entry.calls + 1
    if entry.outputs then return replay(entry, args) end
    if entry.calls <= o.warmup then return warm_up(entry, fn, args) end
    capture(entry, fn, args)
    return replay(entry, args) -- the capture ran nothing: this call's step is the first replay
  end
end

return M
