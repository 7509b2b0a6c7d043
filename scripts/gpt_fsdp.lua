-- gpt_fsdp.lua: trains a GPT (moonshard.models.gpt) on a text, on one process or on N ranks
-- with FSDP (a unit per transformer Block; the embeddings and the tied head stay in the root
-- unit): AdamW with nanoGPT's weight-decay groups, a cosine schedule with linear warmup,
-- gradient accumulation, gradient clipping, optional bfloat16 mixed precision. It prints the
-- training loss with tokens/s and the model FLOP utilisation (MFU) against this machine's
-- measured float32 rate, a held-out loss every --eval-interval steps, each rank's memory, and a
-- sample at the end.
--   build/moonshard scripts/gpt_fsdp.lua [--data FILE] [--steps N] ...
--   build/moonshard scripts/gpt_fsdp.lua --tokens book.bin              (scripts/text_to_tokens.lua)
--   build/moonshard -n 2 scripts/gpt_fsdp.lua ...                       (FSDP over 2 ranks)
local ms = require "moonshard"
local optim = require "moonshard.optim"
local argparse = require "moonshard.argparse"
local fsdp = require "moonshard.fsdp"
local gpt = require "moonshard.models.gpt"
local td = require "moonshard.token_dataset"
local lr_scheduler = require "moonshard.lr_scheduler"
local nn_utils = require "moonshard.nn_utils"
local nn = require "moonshard.nn"
local checkpoint = require "moonshard.checkpoint"
local watch = require "moonshard.watch"
local dist = ms.distributed

local parser = argparse.ArgumentParser{ description = "Train a GPT on a text, with FSDP over the ranks" }
parser:add_argument("--data", { default = "README.md", metavar = "FILE",
  help = "the text to learn, character-level (the vocabulary is its distinct bytes)" })
parser:add_argument("--tokens", { metavar = "FILE",
  help = "instead of --data: byte-level token files FILE.bin and FILE_val.bin of scripts/text_to_tokens.lua" })
parser:add_argument("--steps", { type = "int", default = 300, min = 0, metavar = "N", help = "optimizer steps" })
parser:add_argument("--batch-size", { type = "int", default = 16, min = 1, metavar = "N",
  help = "sequences per micro-batch and rank" })
parser:add_argument("--grad-accum", { type = "int", default = 1, min = 1, metavar = "N",
  help = "micro-batches per optimizer step (gradients reduced once, on the last)" })
parser:add_argument("--block-size", { type = "int", default = 32, min = 1, metavar = "N", help = "context length" })
parser:add_argument("--n-layer", { type = "int", default = 2, min = 1, metavar = "N", help = "transformer blocks" })
parser:add_argument("--n-head", { type = "int", default = 2, min = 1, metavar = "N", help = "attention heads" })
parser:add_argument("--n-embd", { type = "int", default = 64, min = 1, metavar = "N", help = "embedding width" })
parser:add_argument("--dropout", { type = "float", default = 0.0, metavar = "P", help = "dropout probability" })
parser:add_argument("--lr", { type = "float", default = 3e-3, metavar = "LR", help = "AdamW's peak learning rate" })
parser:add_argument("--min-lr", { type = "float", metavar = "LR",
  help = "the learning rate the cosine decays to (default lr / 10)" })
parser:add_argument("--warmup-steps", { type = "int", default = 0, min = 0, metavar = "N",
  help = "steps of linear warmup before the cosine decay" })
parser:add_argument("--weight-decay", { type = "float", default = 0.1, metavar = "W",
  help = "AdamW weight decay of the 2-D weights" })
parser:add_argument("--grad-clip", { type = "float", default = 1.0, metavar = "NORM",
  help = "clip the global gradient norm to NORM (0: no clipping)" })
parser:add_argument("--mixed-precision", { choices = { "none", "bfloat16", "float16" }, default = "none",
  help = "FSDP computes and reduces in this dtype (parameters and optimizer stay float32)" })
parser:add_argument("--sharding-strategy", { choices = { "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD" },
  default = "FULL_SHARD", help = "FSDP's sharding strategy" })
parser:add_argument("--no-forward-prefetch", { action = "store_false", dest = "forward_prefetch",
  help = "gather each FSDP unit only when its forward starts (by default the next unit's all-gather is "
    .. "issued ahead, so that it overlaps this unit's computation)" })
parser:add_argument("--activation-checkpointing", { action = "store_true",
  help = "recompute each Block's activations in backward instead of keeping them" })
parser:add_argument("--log-interval", { type = "int", default = 50, min = 1, metavar = "N",
  help = "steps between training-loss lines" })
parser:add_argument("--eval-interval", { type = "int", metavar = "N",
  help = "steps between held-out losses (default: the log interval)" })
parser:add_argument("--eval-batches", { type = "int", default = 4, min = 1, metavar = "N",
  help = "batches of held-out text per held-out loss" })
parser:add_argument("--sample-tokens", { type = "int", default = 200, min = 0, metavar = "N",
  help = "characters sampled at the end" })
parser:add_argument("--peak-gflops", { type = "float", metavar = "G",
  help = "this rank's float32 peak for MFU (default: a matrix product measured at start)" })
parser:add_argument("--checkpoint-dir", { metavar = "DIR",
  help = "save the whole training state under DIR (fsdp.save_checkpoint) at the end and every --checkpoint-every steps" })
parser:add_argument("--checkpoint-every", { type = "int", default = 0, min = 0, metavar = "K",
  help = "steps between checkpoints (0: only at the end)" })
parser:add_argument("--keep-last", { type = "int", default = 2, min = 1, metavar = "N",
  help = "checkpoints kept under --checkpoint-dir" })
parser:add_argument("--resume", { action = "store_true",
  help = "continue from the latest checkpoint under --checkpoint-dir (a fresh start when there is none)" })
parser:add_argument("--stop-after", { type = "int", min = 1, metavar = "N",
  help = "end this run after step N, as an interruption would (the schedule still spans --steps)" })
parser:add_argument("--seed", { type = "int", default = 1, metavar = "S", help = "random seed" })
watch.add_arguments(parser) -- --no-progress, --metrics FILE, --plot FILE.png, --summary

-- ---- data --------------------------------------------------------------------------------------

-- The text split 90/10 into training and held-out token datasets, and its tokenizer.
local function load_text(args)
  local f = io.open(args.data, "rb")
  if not f then parser:error(("--data %s: cannot open the file"):format(args.data)) end
  local text = f:read("a")
  f:close()
  local n_train = #text * 9 // 10
  if #text - n_train < args.block_size + 1 then
    parser:error(("--data %s: %d bytes, too short for held-out windows of --block-size %d"):format(
      args.data, #text, args.block_size))
  end
  local tok = td.CharTokenizer(text)
  local ids = tok:encode(text)
  return tok, ids:narrow(1, 1, n_train), ids:narrow(1, n_train + 1, #text - n_train)
end

-- The byte-level token files of scripts/text_to_tokens.lua (FILE.bin, FILE_val.bin), mapped.
local function load_tokens(args)
  local ok, train = pcall(td.open_tokens, args.tokens)
  local val_path = args.tokens:gsub("%.bin$", "_val.bin")
  local ok_val, val = pcall(td.open_tokens, val_path)
  if not ok then parser:error(("--tokens: %s"):format(train)) end
  if not ok_val then parser:error(("--tokens: %s (the held-out file)"):format(val)) end
  for _, t in ipairs({ train, val }) do
    if t:numel() < args.block_size + 1 then
      parser:error(("--tokens %s: %d tokens, too few for windows of --block-size %d"):format(args.tokens,
        t:numel(), args.block_size))
    end
    if t:max_id() > 256 then parser:error(("--tokens %s: not byte-level (ids above 256)"):format(args.tokens)) end
  end
  return td.ByteTokenizer(), train, val
end

local function load_data(args)
  local tok, train, val
  if args.tokens then tok, train, val = load_tokens(args) else tok, train, val = load_text(args) end
  return tok, td.TokenDataset(train, args.block_size), td.TokenDataset(val, args.block_size)
end

-- ---- model and optimizer -----------------------------------------------------------------------

-- nanoGPT's groups: matrices (and the embeddings) decay, biases and LayerNorm weights do not.
-- Decided by name on the plain model: under FSDP every parameter is a 1-D piece.
local function decays_by_name(model)
  local decay = {}
  for name, p in model:named_parameters() do decay[name] = p:dim() >= 2 end
  return decay
end

local function optimizer_of(model, decay, args)
  local groups = { { params = {}, weight_decay = args.weight_decay }, { params = {}, weight_decay = 0.0 } }
  for name, p in model:named_parameters() do
    local g = groups[decay[name] and 1 or 2].params
    g[#g + 1] = p
  end
  return optim.AdamW(groups, { lr = args.lr, betas = { 0.9, 0.95 }, eps = 1e-8 })
end

-- nanoGPT's schedule as a factor of the peak rate: linear warmup over warmup steps, then a
-- cosine from lr down to min_lr at the last step. LambdaLR calls it with the steps taken.
local function cosine_with_warmup(args)
  local min_factor = (args.min_lr or args.lr / 10) / args.lr
  local warmup, total = args.warmup_steps, math.max(args.steps, 1)
  return function(step)
    if step < warmup then return (step + 1) / (warmup + 1) end
    if step >= total then return min_factor end
    local progress = (step - warmup) / math.max(total - warmup, 1)
    return min_factor + 0.5 * (1 - min_factor) * (1 + math.cos(math.pi * progress))
  end
end

-- --activation-checkpointing: each Block (inside its FSDP unit, after wrapping) recomputes its
-- activations in backward.
local function with_checkpointing(model, args)
  if args.activation_checkpointing then
    checkpoint.apply_activation_checkpointing(model, { check_fn = function(m) return m:isinstance(gpt.Block) end })
  end
  return model
end

-- Under FSDP the GPT is built on the meta device and each unit materialised as FSDP wraps it
-- (the same values as an ordinary build from the seed): no rank ever holds the whole model.
local function config_of(args, tok)
  return { n_layer = args.n_layer, n_head = args.n_head, n_embd = args.n_embd,
    block_size = args.block_size, vocab_size = tok.vocab_size, dropout = args.dropout }
end

local function build_model(args, tok, world)
  local config = config_of(args, tok)
  local wrapped = world > 1 or args.mixed_precision ~= "none"
  local plain = wrapped and nn.deferred_init(gpt.GPT, config) or gpt.GPT(config)
  local n_params = plain:num_parameters(false)
  local decay = decays_by_name(plain)
  if not wrapped then return with_checkpointing(plain, args), decay, n_params, false end
  local half = args.mixed_precision ~= "none" and args.mixed_precision or nil
  local model = fsdp.FSDP(plain, {
    auto_wrap_policy = fsdp.ModuleWrapPolicy{ gpt.Block },
    sharding_strategy = args.sharding_strategy,
    forward_prefetch = args.forward_prefetch,
    mixed_precision = half and { param_dtype = half, reduce_dtype = half, buffer_dtype = half },
  })
  return with_checkpointing(model, args), decay, n_params, true
end

-- ---- measurements ------------------------------------------------------------------------------

-- The mean over ranks of a number every rank has.
local function mean_over_ranks(v, world)
  if world == 1 then return v end
  local t = ms.tensor({ v }, { dtype = ms.float64 })
  dist.all_reduce(t, { op = "sum" })
  return t:item() / world
end

-- nanoGPT's estimate of a token's training FLOPs: 6 per parameter (forward and backward of
-- every matrix product) plus the attention's 12 L T E (scores and values, forward and backward).
local function flops_per_token(args, n_params)
  return 6 * n_params + 12 * args.n_layer * args.block_size * args.n_embd
end

-- This rank's float32 matrix-product rate in FLOP/s: the best of a few 1024^3 products, the
-- practical peak MFU is quoted against unless --peak-gflops gives one.
local function measured_peak(args)
  if args.peak_gflops then return args.peak_gflops * 1e9, "--peak-gflops" end
  local n = 1024
  local a, b = ms.randn(n, n), ms.randn(n, n)
  ms.matmul(a, b) -- the first product pays for its result's pages and the threads' start
  local best = math.huge
  for _ = 1, 8 do
    local t0 = ms.perf_counter()
    ms.matmul(a, b)
    best = math.min(best, ms.perf_counter() - t0)
  end
  return 2 * n ^ 3 / best, "a measured 1024^3 float32 matmul"
end

-- This process's peak resident memory and the engine's peak bytes, in MiB.
local function memory_line(rank)
  local s = ms.memory_stats()
  return ("rank %d memory: peak resident %.1f MiB, engine peak %.1f MiB"):format(rank, s.process_peak / 2 ^ 20,
    s.peak / 2 ^ 20)
end

-- bench/gpt_bench.sh's hook: with MS_BENCH_REPORT=1 each rank prints one machine-readable line,
-- the rate over the training steps after the first MS_BENCH_WARMUP (default 1; evaluations left
-- out) and, over the same steps, the time blocked on FSDP's collectives (the exposed communication).
local function bench_report(rank, world, timed)
  io.write(("BENCH-RANK moonshard_gpt rank=%d world=%d steps=%d seconds=%.4f tokens_per_s=%.1f vmhwm_kb=%d "
    .. "engine_peak_kb=%d comm_wait_s=%.3f\n"):format(rank, world, timed.steps, timed.seconds,
    timed.tokens / timed.seconds, ms.memory_stats().process_peak // 1024, ms.memory_stats().peak // 1024, timed.wait))
  io.stdout:flush()
end

-- Every rank's memory line, printed by rank 0 in rank order.
local function print_memory(rank, world)
  local line = memory_line(rank)
  if world == 1 then return print(line) end
  for r = 0, world - 1 do
    dist.barrier()
    if r == rank then io.stdout:write(line, "\n"); io.stdout:flush() end
  end
  dist.barrier()
end

local function held_out_loss(model, val, args, world)
  model:eval()
  local _ <close> = ms.no_grad()
  local sum = 0
  for _ = 1, args.eval_batches do
    local _, loss = model(val:get_batch(args.batch_size))
    sum = sum + loss:item()
  end
  model:train()
  return mean_over_ranks(sum / args.eval_batches, world)
end

-- ---- the loop ----------------------------------------------------------------------------------

-- One optimizer step over grad_accum micro-batches: every backward but the last accumulates
-- locally (no_sync), the last one reduces the sum. Returns the mean micro-batch loss.
local function train_step(model, wrapped, opt, train, args)
  local sum = 0
  for micro = 1, args.grad_accum do
    local x, y = train:get_batch(args.batch_size)
    local scope <close> = wrapped and micro < args.grad_accum and model:no_sync() or nil
    local _, loss = model(x, y)
    loss = args.grad_accum > 1 and loss / args.grad_accum or loss
    loss:backward()
    sum = sum + loss:item()
  end
  if args.grad_clip > 0 then
    if wrapped then model:clip_grad_norm_(args.grad_clip)
    else nn_utils.clip_grad_norm_(model:parameters(), args.grad_clip) end
  end
  opt:step()
  opt:zero_grad()
  return sum
end

-- --resume: the step the latest checkpoint under --checkpoint-dir reached (0: none yet), with the
-- model, optimizer, scheduler and this rank's generator restored.
local function resume(args, model, opt, sched, rank)
  if not args.resume then return 0 end
  local latest = fsdp.latest_checkpoint(args.checkpoint_dir)
  if not latest then
    if rank == 0 then print(("no checkpoint under %s yet: starting at step 1"):format(args.checkpoint_dir)) end
    return 0
  end
  local step = fsdp.load_checkpoint(latest, { model = model, optimizer = opt, scheduler = sched })
  if rank == 0 then print(("resumed from %s at step %d"):format(latest, step)) end
  return step
end

local function save(args, model, opt, sched, step, rank, say)
  local path = fsdp.save_checkpoint(args.checkpoint_dir, { model = model, optimizer = opt, scheduler = sched,
    step = step, keep_last = args.keep_last })
  if rank == 0 then say(("step %d: saved %s"):format(step, path)) end
end

local function main()
  local args = parser:parse_args(arg)
  args.eval_interval = args.eval_interval or args.log_interval
  if args.resume and not args.checkpoint_dir then parser:error("--resume needs --checkpoint-dir") end
  watch.check_arguments(parser, args)
  local world = tonumber(os.getenv("OMPI_COMM_WORLD_SIZE") or "1")
  local sharded = world > 1 or args.mixed_precision ~= "none" -- FSDP runs the mixed precision
  if sharded then dist.init_process_group("mpi") end
  local rank = world > 1 and dist.get_rank() or 0
  local tok, train, val = load_data(args)
  ms.manual_seed(args.seed) -- every rank builds the same model
  local model, decay, n_params, wrapped = build_model(args, tok, world)
  local run = watch.Run(args, rank)
  if args.summary and rank == 0 then -- an unsharded copy: a forward of the FSDP model is collective
    run:summary(wrapped and gpt.GPT(config_of(args, tok)) or model, ms.ones(1, args.block_size, { dtype = ms.int64 }))
  end
  local opt = optimizer_of(model, decay, args)
  local sched = lr_scheduler.LambdaLR(opt, cosine_with_warmup(args))
  local peak, peak_from = measured_peak(args)
  local tokens_per_step = args.batch_size * args.grad_accum * args.block_size * world
  if rank == 0 then
    print(("GPT: %d parameters, vocab %d, %d training tokens, %d rank(s), %d tokens per step, %s"):format(
      n_params, tok.vocab_size, train:num_tokens(), world, tokens_per_step,
      args.mixed_precision == "none" and "float32" or args.mixed_precision))
    print(("MFU is against %.1f GFLOP/s per rank (%s)"):format(peak / 1e9, peak_from))
  end
  ms.manual_seed(args.seed + 1 + rank) -- each rank draws its own windows
  local first = resume(args, model, opt, sched, rank) + 1
  local t_log, tokens_since = ms.perf_counter(), 0
  local timed = { steps = 0, seconds = 0, tokens = 0, wait = 0 } -- the steps after the warm-up, for bench_report
  local warmup = math.tointeger(tonumber(os.getenv("MS_BENCH_WARMUP") or "1")) or 1
  local function comm_wait() return wrapped and fsdp.comm_stats(model).wait_seconds or 0 end
  -- the bar (rank 0, stderr) counts tokens; the step lines print through it, so they stay whole,
  -- and off a terminal they are the progress: the bar adds only its last line
  local bar <close> = run:bar{ total = math.max(args.steps - first + 1, 0), desc = "train", unit = "tok",
                               every = args.steps + 1 }
  local function say(text) bar:print(text) end
  for step = first, args.steps do
    local t0, w0 = ms.perf_counter(), comm_wait()
    local loss = train_step(model, wrapped, opt, train, args)
    sched:step()
    if step >= first + warmup then
      timed.steps, timed.tokens = timed.steps + 1, timed.tokens + tokens_per_step // world
      timed.seconds, timed.wait = timed.seconds + ms.perf_counter() - t0, timed.wait + comm_wait() - w0
    end
    tokens_since = tokens_since + tokens_per_step
    bar:step(tokens_per_step, { loss = loss })
    if step % args.log_interval == 0 or step == args.steps then
      local train_loss = mean_over_ranks(loss, world)
      local seconds = ms.perf_counter() - t_log
      local tps = tokens_since / seconds
      if rank == 0 then
        say(("step %d: train loss %.4f, lr %.3g, %.0f tokens/s, MFU %.1f%%"):format(step, train_loss,
          opt.param_groups[1].lr, tps, 100 * tps * flops_per_token(args, n_params) / (peak * world)))
      end
      run:log{ kind = "step", step = step, loss = train_loss, lr = opt.param_groups[1].lr,
               samples_per_s = tps / args.block_size }
      if step % args.eval_interval == 0 or step == args.steps then
        local val_loss = held_out_loss(model, val, args, world)
        if rank == 0 then say(("step %d: held-out loss %.4f"):format(step, val_loss)) end
        run:log{ kind = "eval", step = step, test_loss = val_loss }
      end
      t_log, tokens_since = ms.perf_counter(), 0
    end
    local every, stop = args.checkpoint_every, step == args.stop_after
    if args.checkpoint_dir and (step == args.steps or stop or every > 0 and step % every == 0) then
      save(args, model, opt, sched, step, rank, say)
      t_log = ms.perf_counter()
    end
    if stop then break end
  end
  bar:close()
  run:finish()
  local stopped = args.stop_after ~= nil and args.stop_after < args.steps
  print_memory(rank, world)
  if os.getenv("MS_BENCH_REPORT") == "1" and timed.steps > 0 then bench_report(rank, world, timed) end
  if args.sample_tokens > 0 and not stopped then
    ms.manual_seed(args.seed) -- every rank samples the same text (the forwards are collective)
    model:eval()
    local out = model:generate(tok:encode("\n"):view(1, 1), args.sample_tokens, { temperature = 0.8 })
    if rank == 0 then print("sample:\n" .. tok:decode(out:view(-1))) end
  end
  if sharded then dist.destroy_process_group() end
end

main()
