-- gpt_train.lua: trains a tiny GPT (moonshard.models.gpt) on a text file, character-level, with
-- AdamW (weight decay on the matrices only, as nanoGPT), printing the training loss and a
-- held-out loss (the last 10% of the text), then a sample. One process, or under a launcher
-- every rank trains its own random windows and the model is wrapped in FSDP (a unit per Block;
-- the embeddings and the tied head stay in the root unit).
--   build/moonshard scripts/gpt_train.lua [--data FILE] [--steps N] ...
--   build/moonshard scripts/gpt_train.lua --tokens book.bin              (scripts/text_to_tokens.lua)
--   build/moonshard -n 2 scripts/gpt_train.lua ...                       (FSDP over 2 ranks)
local ms = require "moonshard"
local optim = require "moonshard.optim"
local argparse = require "moonshard.argparse"
local fsdp = require "moonshard.fsdp"
local gpt = require "moonshard.models.gpt"
local td = require "moonshard.token_dataset"
local dist = ms.distributed

local parser = argparse.ArgumentParser{ description = "Train a tiny character-level GPT on a text file" }
parser:add_argument("--data", { default = "README.md", metavar = "FILE",
  help = "the text to learn, character-level (the vocabulary is its distinct bytes)" })
parser:add_argument("--tokens", { metavar = "FILE",
  help = "instead of --data: byte-level token files FILE.bin and FILE_val.bin of scripts/text_to_tokens.lua" })
parser:add_argument("--steps", { type = "int", default = 300, min = 0, metavar = "N", help = "optimizer steps" })
parser:add_argument("--batch-size", { type = "int", default = 16, min = 1, metavar = "N",
  help = "sequences per step and rank" })
parser:add_argument("--block-size", { type = "int", default = 32, min = 1, metavar = "N", help = "context length" })
parser:add_argument("--n-layer", { type = "int", default = 2, min = 1, metavar = "N", help = "transformer blocks" })
parser:add_argument("--n-head", { type = "int", default = 2, min = 1, metavar = "N", help = "attention heads" })
parser:add_argument("--n-embd", { type = "int", default = 64, min = 1, metavar = "N", help = "embedding width" })
parser:add_argument("--dropout", { type = "float", default = 0.0, metavar = "P", help = "dropout probability" })
parser:add_argument("--lr", { type = "float", default = 3e-3, metavar = "LR", help = "AdamW learning rate" })
parser:add_argument("--weight-decay", { type = "float", default = 0.1, metavar = "W",
  help = "AdamW weight decay of the 2-D weights" })
parser:add_argument("--log-interval", { type = "int", default = 50, min = 1, metavar = "N",
  help = "steps between loss lines" })
parser:add_argument("--eval-batches", { type = "int", default = 4, min = 1, metavar = "N",
  help = "batches of held-out text per loss line" })
parser:add_argument("--sample-tokens", { type = "int", default = 200, min = 0, metavar = "N",
  help = "characters sampled at the end" })
parser:add_argument("--seed", { type = "int", default = 1, metavar = "S", help = "random seed" })

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

-- The byte-level token files of scripts/text_to_tokens.lua (FILE.bin, FILE_val.bin).
local function load_tokens(args)
  local ok, train = pcall(td.read_tokens, args.tokens)
  local val_path = args.tokens:gsub("%.bin$", "_val.bin")
  local ok_val, val = pcall(td.read_tokens, val_path)
  if not ok then parser:error(("--tokens: %s"):format(train)) end
  if not ok_val then parser:error(("--tokens: %s (the held-out file)"):format(val)) end
  for _, t in ipairs({ train, val }) do
    if t:numel() < args.block_size + 1 then
      parser:error(("--tokens %s: %d tokens, too few for windows of --block-size %d"):format(args.tokens,
        t:numel(), args.block_size))
    end
    if t:max():item() > 256 then parser:error(("--tokens %s: not byte-level (ids above 256)"):format(args.tokens)) end
  end
  return td.ByteTokenizer(), train, val
end

local function load_data(args)
  local tok, train, val
  if args.tokens then tok, train, val = load_tokens(args) else tok, train, val = load_text(args) end
  return tok, td.TokenDataset(train, args.block_size), td.TokenDataset(val, args.block_size)
end

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
  return optim.AdamW(groups, { lr = args.lr, betas = { 0.9, 0.99 } })
end

-- The mean over ranks of a number every rank has.
local function mean_over_ranks(v, world)
  if world == 1 then return v end
  local t = ms.tensor({ v }, { dtype = ms.float64 })
  dist.all_reduce(t, { op = "sum" })
  return t:item() / world
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

local function main()
  local args = parser:parse_args(arg)
  local world = tonumber(os.getenv("OMPI_COMM_WORLD_SIZE") or "1")
  if world > 1 then dist.init_process_group("mpi") end
  local rank = world > 1 and dist.get_rank() or 0
  local tok, train, val = load_data(args)
  ms.manual_seed(args.seed) -- every rank builds the same model
  local plain = gpt.GPT{ n_layer = args.n_layer, n_head = args.n_head, n_embd = args.n_embd,
    block_size = args.block_size, vocab_size = tok.vocab_size, dropout = args.dropout }
  if rank == 0 then -- counted before FSDP leaves each rank its pieces
    print(("GPT: %d parameters (%d without position embeddings), vocab %d, %d training tokens, %d rank(s)"):format(
      plain:num_parameters(false), plain:num_parameters(), tok.vocab_size, train.tokens:numel(), world))
  end
  local decay = decays_by_name(plain)
  local model = plain
  if world > 1 then model = fsdp.FSDP(plain, { auto_wrap_policy = fsdp.ModuleWrapPolicy{ gpt.Block } }) end
  local opt = optimizer_of(model, decay, args)
  ms.manual_seed(args.seed + 1 + rank) -- each rank draws its own windows
  local t0 = ms.perf_counter()
  for step = 1, args.steps do
    local x, y = train:get_batch(args.batch_size)
    opt:zero_grad()
    local _, loss = model(x, y)
    loss:backward()
    opt:step()
    if step % args.log_interval == 0 or step == args.steps then
      local train_loss = mean_over_ranks(loss:item(), world)
      local val_loss = held_out_loss(model, val, args, world)
      local tokens = step * args.batch_size * args.block_size * world
      if rank == 0 then
        print(("step %d: train loss %.4f, held-out loss %.4f, %.0f tokens/s"):format(step, train_loss, val_loss,
          tokens / (ms.perf_counter() - t0)))
      end
    end
  end
  if args.sample_tokens > 0 then
    ms.manual_seed(args.seed) -- every rank samples the same text (the forwards are collective)
    model:eval()
    local out = model:generate(tok:encode("\n"):view(1, 1), args.sample_tokens, { temperature = 0.8 })
    if rank == 0 then print("sample:\n" .. tok:decode(out:view(-1))) end
  end
  if world > 1 then dist.destroy_process_group() end
end

main()
