-- arg_sweep.lua: every public Lua function and method of moonshard, each argument slot given
-- hostile values (nil, wrong types, 0, -1, 2^31, 2^53, 2^63-1, NaN, inf, empty and huge tables,
-- options tables carrying those numbers). Each call must return or raise a Lua error; a crash,
-- a sanitizer report or an error that is not a message string fails the program. The targets
-- are enumerated from the module tables (every embedded moonshard.* module, recursively), the
-- tensor method table and the classes found there (called as constructors), so a new function
-- is swept without editing this file.
--
-- Three phases: a deterministic grid (each function, each of the first GRID_SLOTS slots, each
-- plain value, over a nil base and a tensor base); each option a function names in its error for
-- an unknown key, given each hostile number; then MS_FUZZ_CASES random cases (seed
-- MS_FUZZ_SEED) that set one to three of the first RANDOM_SLOTS slots from the whole pool,
-- options tables included. MS_SWEEP_TRACE=1 prints each case before it runs (to find a crash);
-- MS_SWEEP_SKIP lists case numbers to leave out (each counts as a failure).
local ms = require "moonshard"

-- Swept sizes ask for tensors up to the engine's allocation cap, which is the machine's memory
-- unless MS_MAX_ALLOC_BYTES lowers it: scripts/sanitize.sh sets 2 GB.
if not os.getenv("MS_MAX_ALLOC_BYTES") then
  io.stderr:write("arg_sweep.lua: set MS_MAX_ALLOC_BYTES (scripts/sanitize.sh sets 2 GB): without it the swept ",
    "sizes allocate up to the machine's memory\n")
  os.exit(2)
end

local SEED, CASES = require("fuzzing").settings(20000)
local TRACE = os.getenv("MS_SWEEP_TRACE") == "1"
local SKIP_CASES = {} -- MS_SWEEP_SKIP="12,345": case numbers not to run (to get past a known crash)
for n in (os.getenv("MS_SWEEP_SKIP") or ""):gmatch("%d+") do SKIP_CASES[tonumber(n)] = true end
local GRID_SLOTS, RANDOM_SLOTS = 4, 6

-- Not swept (by name, wherever found), and why: each blocks, exits, or starts processes by design.
local SKIP = {
  spawn = "re-runs the program under mpirun",
  init_process_group = "initialises MPI and waits for its peers",
  launch = "starts ranks",
  repl = "reads the terminal",
  _write_atomic = "writes the file it is given (a number is a path to Lua's string checks)",
  _remove_stale_temporaries = "deletes files by design",
  device = "sets the factories' default device until its result is closed (a scope by design)",
}

-- ---- the targets --------------------------------------------------------------------------------

local targets, seen = {}, {}

local function callable_table(v)
  local mt = type(v) == "table" and getmetatable(v)
  return type(mt) == "table" and rawget(mt, "__call") ~= nil
end

local function skipped(path) return SKIP[path:match("[^.:]+$")] ~= nil end

local function add(path, fn, self_kind)
  if seen[fn] or skipped(path) then return end
  seen[fn] = true
  targets[#targets + 1] = { path = path, fn = fn, self_kind = self_kind }
end

-- Functions and classes reachable from t (tables walked once, a few levels deep).
local walked = {}
local function walk(path, t, depth)
  if walked[t] or depth > 3 then return end
  walked[t] = true
  local keys = {}
  for k in pairs(t) do
    if type(k) == "string" then keys[#keys + 1] = k end
  end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v, p = rawget(t, k), path .. "." .. k
    if type(v) == "function" then
      add(p, v)
    elseif type(v) == "table" then
      if callable_table(v) then add(p, function(...) return v(...) end) end
      if k ~= "__index" and k ~= "_G" then walk(p, v, depth + 1) end
    end
  end
end

walk("ms", ms, 0)
local modules = {}
for name in pairs(package.preload) do
  if name:match("^moonshard%.") then modules[#modules + 1] = name end
end
table.sort(modules)
for _, name in ipairs(modules) do
  local ok, mod = pcall(require, name)
  if ok and type(mod) == "table" then walk(name, mod, 0) end
end
-- Tensor methods again with a tensor as self (the first pass gave them any value as self).
local methods = {}
for k, v in pairs(ms.Tensor) do
  if type(v) == "function" and type(k) == "string" then methods[#methods + 1] = k end
end
table.sort(methods)
for _, k in ipairs(methods) do
  targets[#targets + 1] = { path = "Tensor:" .. k, fn = ms.Tensor[k], self_kind = "tensor" }
end

-- ---- the values ---------------------------------------------------------------------------------

local huge = {}
for i = 1, 100000 do huge[i] = 1 end
local BIG = { 0, -1, 1 << 31, 1 << 53, math.maxinteger, math.mininteger, 0 / 0, math.huge, -math.huge }

-- Fresh tensors per case: in-place methods must not change the next case's inputs.
local function tensors()
  return {
    ms.rand(1, 1, 4, 4), ms.zeros(2, 3), ms.ones(3, { dtype = "int64" }), ms.tensor(2.5),
    ms.zeros(0, 3), ms.ones(2, 2, { dtype = "uint8" }), ms.ones(2, 3, { dtype = "bfloat16" }),
  }
end

local PLAIN = {
  { "nil", function() return nil end },
  { "true", function() return true end },
  { "string", function() return "/nonexistent-ms-sweep/x" end }, -- never a writable path
  { "empty string", function() return "" end },
  { "empty table", function() return {} end },
  { "huge table", function() return huge end },
  { "function", function() return function() end end },
  { "file", function() return io.stderr end },
  { "1.5", function() return 1.5 end },
  { "small int", function() return 2 end },
}
for _, v in ipairs(BIG) do PLAIN[#PLAIN + 1] = { tostring(v), function() return v end } end
for i, name in ipairs { "4-D tensor", "2-D tensor", "int64 tensor", "0-dim tensor", "empty tensor",
                        "uint8 tensor", "bfloat16 tensor" } do
  PLAIN[#PLAIN + 1] = { name, function(ts) return ts[i] end }
end

-- Options tables: one common key set to each hostile number, and size sequences holding them.
local KEYS = { "dim", "keepdim", "stride", "padding", "dilation", "groups", "kernel_size", "output_size",
               "dtype", "device", "offset", "count", "lr", "momentum", "eps", "p", "batch_size",
               "num_workers", "seed", "correction", "weight_decay", "size", "start_dim", "end_dim",
               "ignore_index", "label_smoothing", "num_classes", "max_norm", "padding_idx", "ceil_mode" }
local POOL = {}
for _, v in ipairs(PLAIN) do POOL[#POOL + 1] = v end
for _, k in ipairs(KEYS) do
  for _, v in ipairs(BIG) do
    POOL[#POOL + 1] = { "{" .. k .. "=" .. tostring(v) .. "}", function() return { [k] = v } end }
  end
end
for _, v in ipairs(BIG) do
  POOL[#POOL + 1] = { "{2," .. tostring(v) .. "}", function() return { 2, v } end }
  POOL[#POOL + 1] = { "{" .. tostring(v) .. "," .. tostring(v) .. "}", function() return { v, v } end }
end

-- ---- running a case -----------------------------------------------------------------------------

local counts = { cases = 0, errors = 0, returned = 0, bad = 0 }
local slow = {} -- cases over SLOW_S of wall time, reported at the end (a hang shows up here first)
local SLOW_S = 0.5
local saved_threads = ms.get_num_threads()

-- Global switches a case may have flipped, put back so the next case starts the same.
local function restore()
  pcall(ms.set_grad_enabled, true)
  if ms.get_num_threads() ~= saved_threads then ms.set_num_threads(saved_threads) end
  pcall(ms.manual_seed, SEED)
end

local function describe(target, names)
  return target.path .. "(" .. table.concat(names, ", ") .. ")"
end

local function run_case(target, args, n, names)
  counts.cases = counts.cases + 1
  if SKIP_CASES[counts.cases] then counts.bad = counts.bad + 1; return end
  if TRACE then io.stderr:write("case ", counts.cases, ": ", describe(target, names), "\n"); io.stderr:flush() end
  local t0 = ms.perf_counter()
  local ok, err = pcall(target.fn, table.unpack(args, 1, n))
  local dt = ms.perf_counter() - t0
  if dt > SLOW_S then slow[#slow + 1] = string.format("%.1f s: %s", dt, describe(target, names)) end
  if ok then
    counts.returned = counts.returned + 1
  elseif type(err) == "string" or (type(err) == "table" and getmetatable(err)) then
    counts.errors = counts.errors + 1
  else
    counts.bad = counts.bad + 1
    io.stderr:write("not a clean error: ", describe(target, names), " raised ", tostring(err), "\n")
  end
  restore()
  if counts.cases % 500 == 0 then collectgarbage() end -- finalizers run on swept leftovers too
end

-- The base of each case: every slot nil, or the 4-D tensor in every slot before `last` and nil
-- after it (self is a tensor for methods), so mutations are tried both alone and after
-- plausible operands, as in f(x, w, {padding = 2^63-1}).
local function base(target, kind, ts, n, last)
  local args, names = {}, {}
  for i = 1, n do
    if (kind == "tensor" and i < last) or (i == 1 and target.self_kind == "tensor") then
      args[i], names[i] = ts[1], "4-D tensor"
    else
      names[i] = "nil"
    end
  end
  return args, names
end

local function grid()
  for _, target in ipairs(targets) do
    for _, kind in ipairs { "nil", "tensor" } do
      local first = target.self_kind == "tensor" and 2 or 1
      for slot = first, GRID_SLOTS do
        for _, v in ipairs(PLAIN) do
          local ts = tensors()
          local args, names = base(target, kind, ts, GRID_SLOTS, slot)
          args[slot], names[slot] = v[2](ts), v[1]
          run_case(target, args, GRID_SLOTS, names)
        end
      end
    end
  end
end

-- The options each target knows, learned from its own error for an unknown key ("expected one
-- of: padding, stride, ..."), per slot; then each known key gets each hostile number, over both bases.
local function options_phase()
  for _, target in ipairs(targets) do
    for _, kind in ipairs { "tensor", "nil" } do
      local first = target.self_kind == "tensor" and 2 or 1
      for slot = first, GRID_SLOTS do
        local ts = tensors()
        local args = base(target, kind, ts, GRID_SLOTS, slot)
        args[slot] = { sweep_probe = 1 }
        local _, err = pcall(target.fn, table.unpack(args, 1, GRID_SLOTS))
        local known = type(err) == "string" and err:match("unknown option .*%(expected one of: ([%w_, ]+)%)")
        for key in (known or ""):gmatch("[%w_]+") do
          for _, v in ipairs(BIG) do
            for _, value in ipairs { v, { 2, v }, { v, 1 } } do
              ts = tensors()
              local a, names = base(target, kind, ts, GRID_SLOTS, slot)
              a[slot], names[slot] = { [key] = value }, "{" .. key .. "=" .. tostring(v) .. "}"
              run_case(target, a, GRID_SLOTS, names)
            end
          end
        end
      end
    end
  end
end

local function random_phase()
  math.randomseed(SEED)
  for _ = 1, CASES do
    local target = targets[math.random(#targets)]
    local ts = tensors()
    local first = target.self_kind == "tensor" and 2 or 1
    local slots = {}
    for i = 1, math.random(3) do slots[i] = math.random(first, RANDOM_SLOTS) end
    local args, names = base(target, math.random(2) == 1 and "nil" or "tensor", ts, RANDOM_SLOTS,
                             math.max(table.unpack(slots)))
    for _, slot in ipairs(slots) do
      local v = POOL[math.random(#POOL)]
      args[slot], names[slot] = v[2](ts), v[1]
    end
    run_case(target, args, RANDOM_SLOTS, names)
  end
end

local t0 = os.clock()
grid()
options_phase()
random_phase()
collectgarbage()
print(string.format("arg_sweep: %d targets, %d cases, %d clean errors, %d returned, %d not clean, 0 crashes "
                    .. "(seed %d, %.1f s)", #targets, counts.cases, counts.errors, counts.returned, counts.bad,
                    SEED, os.clock() - t0))
for _, line in ipairs(slow) do print("slow case " .. line) end
print(string.format("%d passed, %d failed", counts.cases - counts.bad, counts.bad))
os.exit(counts.bad == 0 and 0 or 1)
