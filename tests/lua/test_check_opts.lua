-- test_check_opts.lua: moonshard.check_opts, the library's one check of an options table, and every
-- function that uses it: a misspelt option raises "<function>: unknown option 'x' (expected one
-- of: <sorted names>)" and a non-table "<function>: expected an options table, got <type>", at
-- the line of the user's call (this file's), whichever module raises it.
local T = require "testing"
local ms = require "moonshard"
local options = require "moonshard.check_opts"
local nn = ms.nn
local F = require "moonshard.functional"

-- ---- the checker ------------------------------------------------------------------------------

T.test("problem: nil for known keys; one message shape, names sorted, for the rest", function()
  T.eq(options.problem({ b = 1, a = 2 }, { "a", "b" }), nil)
  T.eq(options.problem({}, {}), nil)
  T.eq(options.problem({ c = 1 }, { "b", "a" }), "unknown option 'c' (expected one of: a, b)")
  -- a set, and a table of defaults whose values are false: its keys are the names
  T.eq(options.problem({ c = 1 }, { b = true, a = true }), "unknown option 'c' (expected one of: a, b)")
  T.eq(options.problem({ shuffle = true }, { shuffle = false }), nil)
  T.eq(options.problem({ x = 1 }, { shuffle = false, batch_size = 1 }),
    "unknown option 'x' (expected one of: batch_size, shuffle)")
  -- a list entry in the options (a positional value put in the table) is named as such
  T.eq(options.problem({ 5 }, { "a" }), "unknown option [1] (expected one of: a)")
  T.eq(options.problem({ [true] = 1 }, { a = 1 }), "unknown option [true] (expected one of: a)")
  T.eq(options.problem(3, { "a" }), "expected an options table, got number")
  T.eq(options.problem(nil, { "a" }), "expected an options table, got nil")
  T.eq(options.problem(setmetatable({}, {}), { "a" }), "expected an options table, got a table with a metatable")
end)

T.test("check allows nil (giving {}), check_given does not; both return the table", function()
  local o = { a = 1 }
  T.eq(options.check("f", o, { "a" }, 1), o)
  T.eq(options.check_given("f", o, { "a" }, 1), o)
  T.eq(next(options.check("f", nil, { "a" }, 1)), nil)
  T.raises(function() options.check_given("f", nil, { "a" }, 1) end, "f: expected an options table, got nil")
  T.raises(function() options.check("f", false, { "a" }, 1) end, "f: expected an options table, got boolean")
  T.raises(function() options.check("f", { b = 1 }, { "a" }, 1) end, "f: unknown option 'b' (expected one of: a)")
end)

T.test("union: every string key and list entry of the tables", function()
  local u = options.union({ a = 1, b = false }, { "c" }, {})
  T.eq(u.a and u.b and u.c and true, true)
  local n = 0
  for _ in pairs(u) do n = n + 1 end
  T.eq(n, 3)
end)

T.test("is_options: a plain table without a list part", function()
  T.eq(options.is_options({ stride = 2 }), true)
  T.eq(options.is_options({}), true)
  T.eq(options.is_options({ 2, 2 }), false)
  T.eq(options.is_options(nn.Linear(1, 1)), false)
  T.eq(options.is_options(ms.zeros(1)), false)
  T.eq(options.is_options(2), false)
end)

-- ---- every function that takes options --------------------------------------------------------

-- Each case is one line: a call with a misspelt option (or a non-table) and the message's start.
-- The error must name the function and point at that line of this file.
local x = ms.randn(1, 1, 4, 4)
local params = { ms.zeros(2):requires_grad_() }
local opt = ms.optim.SGD(params, { lr = 0.1 })
local ds = ms.data.TensorDataset(ms.zeros(4, 2))
local dataset = setmetatable({}, { __len = function() return 4 end })
local samplers = require "moonshard.samplers"
local fsdp = require "moonshard.fsdp"
local wrap = require "moonshard.fsdp_wrap"
local nn_utils = require "moonshard.nn_utils"
local gpt = require "moonshard.models.gpt"
local ckpt = require "moonshard.checkpoint"
local progress = require "moonshard.progress"
local metrics = require "moonshard.metrics"
local datasets = require "moonshard.datasets"
local argparse = require "moonshard.argparse"
local repr = require "moonshard.tensor_repr"
local function id(t) return t end
local png = os.tmpname() .. ".png"

local CASES = {
  { function() ms.data.DataLoader(ds, { shufle = true }) end,
    "DataLoader: unknown option 'shufle' (expected one of: batch_sampler, batch_size, collate_fn, device, " },
  { function() ms.data.DataLoader(ds, 4) end, "DataLoader: expected an options table, got number" },
  { function() datasets.MNIST("/nonexistent", { trian = true }) end,
    "MNIST: unknown option 'trian' (expected one of: download, target_transform, train, transform)" },
  { function() ms.Timer("a", { recrod = {} }) end, "ms.Timer: unknown option 'recrod' (expected one of: quiet, record)" },
  { function() ms.timeit(id, { m = 1 }) end, "ms.timeit: unknown option 'm' (expected one of: n, warmup)" },
  { function() ms.timeit(id, 3) end, "ms.timeit: expected an options table, got number" },
  { function() ms.optim.SGD(params, { lr = 1, momentun = 0.9 }) end,
    "SGD: unknown option 'momentun' (expected one of: capturable, dampening, foreach, lr, maximize, momentum, " },
  { function() ms.optim.Adam(params, "fast") end, "Adam: expected an options table, got string" },
  { function() opt:add_param_group({ params = { ms.zeros(1):requires_grad_() }, lrr = 1 }) end,
    "SGD: a parameter group: unknown option 'lrr' (expected one of: capturable, " },
  { function() opt:zero_grad({ set_to_non = true }) end, "zero_grad: unknown option 'set_to_non' (expected one of: set_to_none)" },
  { function() ms.optim.lr_scheduler.StepLR(opt, { step_size = 1, gama = 0.5 }) end,
    "StepLR: unknown option 'gama' (expected one of: gamma, last_epoch, step_size)" },
  { function() nn.Linear(3, 4, { bais = false }) end,
    "Linear: unknown option 'bais' (expected one of: bias, in_features, out_features)" },
  { function() nn.MSELoss({ weight = 1 }) end, "MSELoss: unknown option 'weight' (expected one of: " },
  { function() F.max_pool2d(x, 2, { strid = 2 }) end, "F.max_pool2d: unknown option 'strid' (expected one of: " },
  { function() nn.init.kaiming_uniform_(ms.zeros(2, 2), { mod = "fan_in" }) end,
    "nn.init.kaiming_uniform_: unknown option 'mod' (expected one of: a, mode, nonlinearity)" },
  { function() nn.materialize_module(nn.Linear(1, 1), { devices = "cpu" }) end,
    "nn.materialize_module: unknown option 'devices' (expected one of: device, recurse)" },
  { function() nn.Linear(1, 1):to_empty({ devce = "cpu" }) end,
    "to_empty: unknown option 'devce' (expected one of: device, recurse)" },
  { function() ckpt.apply_activation_checkpointing(nn.Linear(1, 1), { check_fn = id, policy = 1 }) end,
    "apply_activation_checkpointing: unknown option 'policy' (expected one of: check_fn)" },
  { function() gpt.GPT({ n_layers = 2 }) end,
    "GPT: unknown option 'n_layers' (expected one of: bias, block_size, dropout, n_embd, n_head, n_layer, vocab_size)" },
  { function() samplers.RandomSampler(dataset, { generator = 1 }) end,
    "RandomSampler: unknown option 'generator' (expected one of: num_samples, replacement)" },
  { function() samplers.DistributedSampler(dataset, { shufle = false }) end,
    "DistributedSampler: unknown option 'shufle' (expected one of: drop_last, num_replicas, rank, seed, shuffle)" },
  { function() progress.Bar({ totl = 3 }) end, "progress.Bar: unknown option 'totl' (expected one of: clock, desc, " },
  { function() progress.Bar(3) end, "progress.Bar: expected an options table, got number" },
  { function() ms.cuda.make_graphed_step(id, { warmpu = 2 }) end,
    "make_graphed_step: unknown option 'warmpu' (expected one of: enabled, max_graphs, warmup)" },
  { function() fsdp.FSDP(nn.Linear(2, 2), { sharding_stratgy = "NO_SHARD" }) end,
    "FSDP: unknown option 'sharding_stratgy' (expected one of: auto_wrap_policy, backward_prefetch, " },
  { function() fsdp.comm_stats(nn.Linear(2, 2), { rest = true }) end, "comm_stats: unknown option 'rest' (expected one of: reset)" },
  { function() fsdp.optim_state_dict(nn.Linear(2, 2), opt, { rank0 = true }) end,
    "optim_state_dict: unknown option 'rank0' (expected one of: rank0_only, state_dict_type)" },
  { function() fsdp.load_sharded(nn.Linear(2, 2), "/nonexistent", { stict = false }) end,
    "load_sharded: unknown option 'stict' (expected one of: strict)" },
  { function() fsdp.save_checkpoint("/nonexistent", { model = nn.Linear(2, 2), optimiser = opt }) end,
    "save_checkpoint: unknown option 'optimiser' (expected one of: extra, keep_last, model, optimizer, scheduler, step)" },
  { function() fsdp.save_checkpoint("/nonexistent") end, "save_checkpoint: expected an options table, got nil" },
  { function() wrap.size_based_auto_wrap_policy({ min_params = 3 }) end,
    "size_based_auto_wrap_policy: unknown option 'min_params' (expected one of: exclude_wrap_modules, " },
  { function() wrap.transformer_auto_wrap_policy({ layer_cls = {} }) end,
    "transformer_auto_wrap_policy: unknown option 'layer_cls' (expected one of: transformer_layer_cls)" },
  { function() wrap.lambda_auto_wrap_policy({ fn = id }) end,
    "lambda_auto_wrap_policy: unknown option 'fn' (expected one of: lambda_fn)" },
  { function() wrap.auto_wrap(nn.Linear(1, 1), id, id, { ignored = {} }) end,
    "auto_wrap: unknown option 'ignored' (expected one of: ignored_modules, ignored_params, wrap_root, wrapper_cls)" },
  { function() nn_utils.clip_grad_norm_(params, 1.0, { norm = 2 }) end,
    "clip_grad_norm_: unknown option 'norm' (expected one of: error_if_nonfinite, norm_type)" },
  { function() nn_utils.forward_in_chunks(id, x, { chunks = 2 }) end,
    "forward_in_chunks: unknown option 'chunks' (expected one of: chunk_size)" },
  { function() repr.set_printoptions({ precison = 2 }) end,
    "set_printoptions: unknown option 'precison' (expected one of: edgeitems, linewidth, precision, profile, sci_mode, " },
  { function() metrics.Logger(nil, { column = {} }) end, "Logger: unknown option 'column' (expected one of: columns)" },
  { function() argparse.ArgumentParser({ descripton = "x" }) end,
    "argparse.ArgumentParser: unknown option 'descripton' (expected one of: description, epilog, exit_on_error, prog)" },
  { function() ms.plot(png, { series = {} }, { widht = 3 }) end, "plot: unknown option 'widht' (expected one of: height, width)" },
  { function() ms.plot(png, { series = {} }, 3) end, "plot: expected an options table, got number" },
  { function() ms.summary(nn.Linear(2, 2), { 1, 2 }, { dtpye = 1 }) end,
    "summary: unknown option 'dtpye' (expected one of: device, dtype)" },
}

-- What is wrong with case c's error, or nil.
local function case_problem(c)
  local fn, want = c[1], c[2]
  local ok, err = pcall(fn)
  if ok then return "raised nothing" end
  err = tostring(err)
  local line = debug.getinfo(fn, "S").linedefined
  local msg = err:match("^[^:]*test_check_opts%.lua:" .. line .. ": (.*)$")
  if not msg then return ("expected this file's line %d at the start of %q"):format(line, err) end
  if msg:sub(1, #want) ~= want then return ("expected %q at the start of %q"):format(want, msg) end
end

T.test("every function: the message names it, at the caller's line", function()
  local bad = {}
  for i, c in ipairs(CASES) do
    local why = case_problem(c)
    if why then bad[#bad + 1] = ("case %d (line %d): %s"):format(i, debug.getinfo(c[1], "S").linedefined, why) end
  end
  T.truthy(#bad == 0, table.concat(bad, "\n"))
end)

os.remove(png)
T.finish()
