-- fsdp.lua: the docstrings of require "moonshard.fsdp", PyTorch's FullyShardedDataParallel (1.13,
-- use_orig_params = true). The examples run on a world of one (the "self" backend); under mpirun
-- every rank runs the same lines.
local PRE = [[
local fsdp = require "moonshard.fsdp"
ms.distributed.init_process_group("self")   -- a world of one here; mpirun gives more ranks
ms.manual_seed(0)
local model = fsdp.FSDP(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)),
                        {auto_wrap_policy = fsdp.ModuleWrapPolicy{nn.Linear}})
]]
local POST = "ms.distributed.destroy_process_group()\n"
local function example(body) return PRE .. body .. POST end
local STEP = "local opt = optim.SGD(model:parameters(), {lr = 0.1})\n" ..
  "model(ms.randn(3, 4)):sum():backward(); opt:step()\n"

return {
  title = "FSDP: fully sharded data parallel (fsdp)",
  {
    name = "fsdp.FullyShardedDataParallel",
    sig = "fsdp.FullyShardedDataParallel(module, {auto_wrap_policy =, sharding_strategy =, ...}) -> Module",
    doc = [[
Wraps `module` so that each rank of the process group keeps only its shard of the parameters
(PyTorch's `FullyShardedDataParallel` with `use_orig_params = true`). Each unit (the root and,
with `auto_wrap_policy`, the submodules it picks) flattens the parameters no nested unit owns
into one flat parameter and keeps this rank's piece; forward gathers a unit's parameters
(all-gather) and frees them after; backward reduce-scatters the gradients, averaged, into the
shards. `model:parameters()` gives each rank's pieces, with the original names: give them to
any optimizer. Call `ms.distributed.init_process_group` first. docs/fsdp-memory.md says what a
rank holds; docs/checkpointing.md how to save and resume.]],
    opts = {
      { "auto_wrap_policy", "function", "nil", "which submodules become units (ModuleWrapPolicy, size_based_auto_wrap_policy, ...)" },
      { "sharding_strategy", "string", '"FULL_SHARD"', "an fsdp.ShardingStrategy" },
      { "process_group", "ProcessGroup", "the world", "the ranks sharing the model ({intra, inter} for HYBRID_SHARD)" },
      { "mixed_precision", "table", "nil", "{param_dtype =, reduce_dtype =, buffer_dtype =, cast_forward_inputs =, keep_low_precision_grads =} (PyTorch's MixedPrecision)" },
      { "backward_prefetch", "string", "nil", "an fsdp.BackwardPrefetch: gather the next unit's parameters early in backward" },
      { "forward_prefetch", "boolean", "false", "gather the next unit's parameters before the current one computes" },
      { "limit_all_gathers", "boolean", "false", "skip a prefetch while two units are gathered (bounds memory)" },
      { "cpu_offload", "table", "nil", "{offload_params = true}: shards and their grads in host memory (GPU runs)" },
      { "device_id", "integer or string", "nil", "move the module to this CUDA device at wrap time" },
      { "ignored_modules", "list", "nil", "modules whose parameters stay ordinary and unsharded" },
      { "sync_module_states", "boolean", "false", "broadcast the first rank's parameters and buffers before sharding" },
      { "param_init_fn", "function", "nil", "function(module): materialises a module built on the meta device" },
      { "use_orig_params", "boolean", "true", "true only: the original parameters always stay first-class" },
      { "verbose", "boolean", "false", "rank 0 prints fsdp.memory_report at wrap time" },
    },
    example = example(STEP .. [[
print(model:module()[1].weight.shape)   --> torch.Size([32])
]]),
  },
  {
    name = "fsdp.FSDP",
    sig = "fsdp.FSDP(module, opts) -> Module",
    doc = [[The short name of `fsdp.FullyShardedDataParallel(module, opts)`: the same options.]],
    example = example([[
print(model:isinstance(fsdp.FullyShardedDataParallel))   --> true
]]),
  },
  {
    name = "fsdp.FullyShardedDataParallel:module",
    sig = "model:module() -> Module",
    doc = [[The module the unit wraps (PyTorch's `model.module`); its parameters are this rank's pieces.]],
    example = example([[
print(model:module())   --> Sequential(...
]]),
  },
  {
    name = "fsdp.FullyShardedDataParallel:no_sync",
    sig = "local _ <close> = model:no_sync()",
    doc = [[
A to-be-closed scope in which backwards accumulate gradients locally, without communicating;
the first backward after it reduces the total (PyTorch's `no_sync`, for gradient accumulation).
The unsharded gradients are held meanwhile.]],
    example = example([[
do
  local _ <close> = model:no_sync()
  model(ms.randn(3, 4)):sum():backward()      -- no reduce-scatter here
end
model(ms.randn(3, 4)):sum():backward()        -- reduces both backwards' gradients
print(fsdp.comm_stats(model).reduce_calls)   --> 2
]]),
  },
  {
    name = "fsdp.FullyShardedDataParallel:summon_full_params",
    sig = "local _ <close> = model:summon_full_params({writeback = true, recurse = true})",
    doc = [[
A to-be-closed scope in which every unit is gathered and the modules hold the full parameters
(to read, print or change them). With `writeback` what was written reaches the shards at close;
`recurse = false` gathers this unit only.]],
    opts = {
      { "writeback", "boolean", "true", "copy changes back into the shards at close" },
      { "recurse", "boolean", "true", "gather the nested units as well" },
    },
    example = example([[
local inner = model:module()
do
  local _ <close> = model:summon_full_params()
  print(inner[1].weight.shape)   --> torch.Size([8, 4])
end
print(inner[1].weight.shape)     --> torch.Size([32])
]]),
  },
  {
    name = "fsdp.FullyShardedDataParallel:clip_grad_norm_",
    sig = "model:clip_grad_norm_(max_norm, norm_type = 2) -> Tensor",
    doc = [[The same as `fsdp.clip_grad_norm_(model, max_norm, norm_type)`.]],
    example = example([[
model(ms.randn(3, 4)):sum():backward()
model:clip_grad_norm_(1.0)
print(model:clip_grad_norm_(1.0):item() <= 1.0001)   --> true
]]),
  },
  {
    name = "fsdp.clip_grad_norm_",
    sig = "fsdp.clip_grad_norm_(model, max_norm, norm_type = 2) -> Tensor",
    doc = [[
Scales every gradient of the model so that their norm, taken over all ranks together, is at most
`max_norm`; returns the total norm before clipping (PyTorch's FSDP `clip_grad_norm_`).
`nn.utils.clip_grad_norm_` on the pieces would see only this rank's.]],
    example = example([[
model(ms.randn(3, 4)):sum():backward()
local norm = fsdp.clip_grad_norm_(model, 0.5)
print(norm:item() > 0.5, fsdp.clip_grad_norm_(model, 0.5):item() <= 0.5001)   --> true	true
]]),
  },
  {
    name = "fsdp.comm_stats",
    sig = "fsdp.comm_stats(model, {reset = false}) -> table",
    doc = [[
This rank's communication counters summed over the model's units: `allgather_calls`,
`prefetch_calls`, `reduce_calls`, `allreduce_calls`, `allgather_bytes`, `reduce_bytes`,
`bytes`, `waits` and `wait_seconds` (time blocked waiting: the exposed communication), `units`,
`max_gathered`, `param_dtype`, `reduce_dtype`. `units` counts the units that hold parameters.
`reset = true` zeroes them after reading.]],
    example = example(STEP .. [[
local s = fsdp.comm_stats(model)
print(s.units, s.allgather_calls, s.reduce_calls)   --> 2	4	2
]]),
  },
  {
    name = "fsdp.reset_comm_stats",
    sig = "fsdp.reset_comm_stats(model)",
    doc = [[Zeroes the model's communication counters (`fsdp.comm_stats`).]],
    example = example(STEP .. [[
fsdp.reset_comm_stats(model)
print(fsdp.comm_stats(model).allgather_calls)   --> 0
]]),
  },
  {
    name = "fsdp.memory_report",
    sig = "fsdp.memory_report(model, optimizer) -> report",
    doc = [[
What this rank holds, planned and measured: `units`, `full_numel`, `shard_numel`,
`params_bytes`, `grads_bytes`, `optimizer_bytes` (with an optimizer), `peak_gathered_bytes`,
`reduce_bytes`, `planned_bytes`, and the measured `engine_peak_bytes`, `vmhwm_bytes`, ... It
prints as a table of bytes (docs/fsdp-memory.md explains each line).]],
    example = example(STEP .. [[
local r = fsdp.memory_report(model, opt)
print(r.units, r.full_numel, r.params_bytes)   --> 2	58	232
]]),
  },
  {
    name = "fsdp.state_dict_type",
    sig = 'local _ <close> = fsdp.state_dict_type(model, type, {rank0_only =, offload_to_cpu =})',
    doc = [[
A to-be-closed scope in which `model:state_dict()` and `model:load_state_dict()` use `type` on
every unit (PyTorch's context manager): "FULL_STATE_DICT" (the default: the original names and
full shapes, gathered one unit at a time) or "SHARDED_STATE_DICT" (each rank's pieces with their
global shapes and offsets). Closing restores what was there before.]],
    example = example([[
do
  local _ <close> = fsdp.state_dict_type(model, fsdp.StateDictType.FULL_STATE_DICT)
  print(model:state_dict()["0.weight"].shape)   --> torch.Size([8, 4])
end
]]),
  },
  {
    name = "fsdp.StateDictType",
    sig = "fsdp.StateDictType.FULL_STATE_DICT | SHARDED_STATE_DICT",
    doc = [[The kinds of state dict `fsdp.state_dict_type` selects; each value is its own name as a string.]],
    example = [[
local fsdp = require "moonshard.fsdp"
print(fsdp.StateDictType.SHARDED_STATE_DICT)   --> SHARDED_STATE_DICT
]],
  },
  {
    name = "fsdp.ShardingStrategy",
    sig = "fsdp.ShardingStrategy.FULL_SHARD | SHARD_GRAD_OP | NO_SHARD | HYBRID_SHARD",
    doc = [[
How parameters are sharded (the `sharding_strategy` option; each value is its name as a string).
FULL_SHARD: parameters, gradients and optimizer state sharded, parameters gathered for each
forward and backward. SHARD_GRAD_OP: kept gathered from forward through backward. NO_SHARD: every
rank keeps everything, gradients all-reduced (DDP). HYBRID_SHARD: FULL_SHARD within a node,
replicated across nodes.]],
    example = example([[
local m = fsdp.FSDP(nn.Linear(4, 2), {sharding_strategy = fsdp.ShardingStrategy.NO_SHARD})
print(fsdp.ShardingStrategy.NO_SHARD)   --> NO_SHARD
]]),
  },
  {
    name = "fsdp.BackwardPrefetch",
    sig = "fsdp.BackwardPrefetch.BACKWARD_PRE | BACKWARD_POST",
    doc = [[
When backward gathers the next unit's parameters (the `backward_prefetch` option): BACKWARD_PRE
when the current unit's backward begins (more overlap, more memory), BACKWARD_POST once its
gradients are reduced.]],
    example = example([[
local m = fsdp.FSDP(nn.Linear(4, 2), {backward_prefetch = fsdp.BackwardPrefetch.BACKWARD_PRE})
print(fsdp.BackwardPrefetch.BACKWARD_PRE)   --> BACKWARD_PRE
]]),
  },
  {
    name = "fsdp.ModuleWrapPolicy",
    sig = "fsdp.ModuleWrapPolicy({Class...}) -> policy",
    doc = [[An auto-wrap policy: every module of the given classes (or their subclasses) becomes a unit (transformer blocks, typically).]],
    example = example([[
print(fsdp.comm_stats(model).units)   --> 2
]]),
  },
  {
    name = "fsdp.size_based_auto_wrap_policy",
    sig = "fsdp.size_based_auto_wrap_policy({min_num_params = 1e8, force_leaf_modules =, exclude_wrap_modules =}) -> policy",
    doc = [[
An auto-wrap policy: a subtree becomes a unit when the parameters it would leave unwrapped number
at least `min_num_params`. Called with a module instead of options it is the policy itself, with
the defaults, as PyTorch's function.]],
    opts = {
      { "min_num_params", "number", "1e8", "the least parameter count of a unit" },
      { "force_leaf_modules", "list of classes", "{nn.MultiheadAttention}", "never descended into" },
      { "exclude_wrap_modules", "list of classes", "{nn.ModuleList, nn.ModuleDict}", "never made units" },
    },
    example = [[
local fsdp = require "moonshard.fsdp"
ms.distributed.init_process_group("self")
local net = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
local model = fsdp.FSDP(net, {auto_wrap_policy = fsdp.size_based_auto_wrap_policy{min_num_params = 20}})
print(fsdp.comm_stats(model).units)   --> 2
-- the two Linears (40 and 18 parameters); the root is left with none of its own
ms.distributed.destroy_process_group()
]],
  },
  {
    name = "fsdp.transformer_auto_wrap_policy",
    sig = "fsdp.transformer_auto_wrap_policy({transformer_layer_cls = {Class...}}) -> policy",
    doc = [[PyTorch 1.13's name for `ModuleWrapPolicy`: every module of those classes becomes a unit.]],
    example = [[
local fsdp, gpt = require "moonshard.fsdp", require "moonshard.models.gpt"
ms.distributed.init_process_group("self")
local cfg = {n_layer = 2, n_head = 2, n_embd = 16, block_size = 8, vocab_size = 32}
local model = fsdp.FSDP(gpt.GPT(cfg), {auto_wrap_policy = fsdp.transformer_auto_wrap_policy{transformer_layer_cls = {gpt.Block}}})
print(fsdp.comm_stats(model).units)   --> 3
ms.distributed.destroy_process_group()
]],
  },
  {
    name = "fsdp.lambda_auto_wrap_policy",
    sig = "fsdp.lambda_auto_wrap_policy({lambda_fn = function(module) -> boolean}) -> policy",
    doc = [[An auto-wrap policy: a module becomes a unit wherever `lambda_fn` says so.]],
    example = [[
local fsdp = require "moonshard.fsdp"
ms.distributed.init_process_group("self")
local policy = fsdp.lambda_auto_wrap_policy{lambda_fn = function(m) return m:isinstance(nn.Linear) end}
local model = fsdp.FSDP(nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2)), {auto_wrap_policy = policy})
print(fsdp.comm_stats(model).units)   --> 2
ms.distributed.destroy_process_group()
]],
  },
  {
    name = "fsdp.FlattenParamsWrapper",
    sig = "fsdp.FlattenParamsWrapper(module) -> Module",
    doc = [[
The module between a unit and the module it wraps (`_fsdp_wrapped_module`), as in PyTorch 1.13's
tree; it forwards to the module and reads names through to it. FSDP makes it; users see it in
`print(model)`.]],
    example = example([[
print(model._fsdp_wrapped_module:isinstance(fsdp.FlattenParamsWrapper))   --> true
]]),
  },
  {
    name = "fsdp.optim_state_dict",
    sig = 'fsdp.optim_state_dict(model, optimizer, {state_dict_type = "FULL", rank0_only = false}) -> table',
    doc = [[
The optimizer's state keyed by original parameter names (PyTorch's `FSDP.optim_state_dict`):
"FULL" gathers each state tensor to its full shape, "SHARDED" keeps this rank's pieces. Load it
with `load_optim_state_dict`, on any world size.]],
    example = example(STEP .. [[
local osd = fsdp.optim_state_dict(model, opt)
print(#osd.param_groups)   --> 1
]]),
  },
  {
    name = "fsdp.optim_state_dict_to_load",
    sig = "fsdp.optim_state_dict_to_load(model, optimizer, osd) -> table",
    doc = [[
Turns a state from `optim_state_dict` into one `optimizer:load_state_dict` takes on this rank
(its pieces of each state tensor), as PyTorch's function.]],
    example = example(STEP .. [[
local osd = fsdp.optim_state_dict(model, opt)
opt:load_state_dict(fsdp.optim_state_dict_to_load(model, opt, osd))
print(#opt.param_groups)   --> 1
]]),
  },
  {
    name = "fsdp.load_optim_state_dict",
    sig = "fsdp.load_optim_state_dict(model, optimizer, osd)",
    doc = [[`optimizer:load_state_dict(fsdp.optim_state_dict_to_load(model, optimizer, osd))` in one call.]],
    example = example(STEP .. [[
fsdp.load_optim_state_dict(model, opt, fsdp.optim_state_dict(model, opt))
print(opt.param_groups[1].lr)   --> 0.1
]]),
  },
  {
    name = "fsdp.save_sharded",
    sig = "fsdp.save_sharded(model, dir)",
    doc = [[
Every rank of the model's group writes its pieces to its own safetensors file in `dir` (which
must exist), then rank 0 writes the index; returns when all of it is on disk. `load_sharded`
reads it back on any world size and wrapping, or into a plain module.]],
    example = example([[
local dir = os.tmpname(); os.remove(dir); os.execute("mkdir " .. dir)
fsdp.save_sharded(model, dir)
fsdp.load_sharded(model, dir)
print("saved and loaded")   --> saved and loaded
]]),
  },
  {
    name = "fsdp.load_sharded",
    sig = "fsdp.load_sharded(model, dir, {strict = true})",
    doc = [[
Loads what `save_sharded` (or `save_checkpoint`) wrote into the model, whatever world size saved
it and however both are wrapped; each rank reads only the ranges it keeps. Names and shapes must
match (`strict = false` skips missing and unexpected names); values take the model's dtype.]],
    example = example([[
local dir = os.tmpname(); os.remove(dir); os.execute("mkdir " .. dir)
fsdp.save_sharded(model, dir)
local plain = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
fsdp.load_sharded(plain, dir)                   -- into an unwrapped model
print(plain[1].weight.shape)   --> torch.Size([8, 4])
]]),
  },
  {
    name = "fsdp.save_checkpoint",
    also = { "train_checkpoint.save_checkpoint" },
    sig = "fsdp.save_checkpoint(root, {model =, optimizer =, scheduler =, step =, extra =, keep_last =}) -> path",
    doc = [[
Saves everything a run needs to resume as `root/step-<step>` and then points `root/latest` at it:
the model and optimizer state as sharded pieces by parameter name, the scheduler, every rank's
RNG state and `extra` (data position, ...). Every rank of the model's group calls it.
`keep_last = k` removes all but the k newest generations. docs/checkpointing.md.]],
    opts = {
      { "model", "Module", "required", "an FSDP model or a plain module" },
      { "optimizer", "Optimizer", "nil", "its state is saved by parameter name" },
      { "scheduler", "LRScheduler", "nil", "its state_dict" },
      { "step", "integer", "required", "the generation's number (0..99999999)" },
      { "extra", "table", "nil", "anything else to restore (numbers, strings, tables)" },
      { "keep_last", "integer", "nil", "keep only the k newest generations" },
    },
    example = example(STEP .. [[
local root = os.tmpname() .. ".ckpt"
local path = fsdp.save_checkpoint(root, {model = model, optimizer = opt, step = 1, extra = {epoch = 1}})
print(path:match("step%-%d+$"))   --> step-00000001
]]),
  },
  {
    name = "fsdp.load_checkpoint",
    also = { "train_checkpoint.load_checkpoint" },
    sig = "fsdp.load_checkpoint(path, {model =, optimizer =, scheduler =, strict = true}) -> step, extra",
    doc = [[
Restores a checkpoint of `save_checkpoint`: `path` is a root (its latest generation) or one
generation. Loads the model, optimizer and scheduler given, and this rank's RNG state, on any
world size; every check runs before anything is loaded, so a refused load changes nothing.]],
    example = example(STEP .. [[
local root = os.tmpname() .. ".ckpt"
fsdp.save_checkpoint(root, {model = model, optimizer = opt, step = 7, extra = {epoch = 2}})
local step, extra = fsdp.load_checkpoint(root, {model = model, optimizer = opt})
print(step, extra.epoch)   --> 7	2
]]),
  },
  {
    name = "fsdp.latest_checkpoint",
    also = { "train_checkpoint.latest_checkpoint" },
    sig = "fsdp.latest_checkpoint(root) -> path or nil",
    doc = [[The generation `root/latest` names, or nil when there is none yet (a fresh run): what `--resume` tests.]],
    example = [[
local fsdp = require "moonshard.fsdp"
print(fsdp.latest_checkpoint(os.tmpname() .. ".none"))   --> nil
]],
  },
}
