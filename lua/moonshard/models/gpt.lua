-- models/gpt.lua: GPT-2 as nanoGPT writes it (require "moonshard.models.gpt"): token and position
-- embeddings, dropout, n_layer pre-LayerNorm blocks of causal self-attention and a GELU(tanh)
-- MLP, a final LayerNorm and an LM head tied to the token embedding (one parameter), with
-- GPT-2's initialisation. Token ids are 1-based (1..vocab_size), as every index in moonshard.
--   local gpt = require "moonshard.models.gpt"
--   local model = gpt.GPT{n_layer = 2, n_head = 2, n_embd = 64, block_size = 32, vocab_size = 65}
--   local logits, loss = model(idx, targets)       -- idx, targets: (B, T) int64
local ms = require "moonshard"
local nn = require "moonshard.nn"
local F = require "moonshard.functional"
local options = require "moonshard.check_opts"
local fmt = string.format

local M = {}

-- ---- configuration --------------------------------------------------------------------------

-- The sizes have no defaults (nanoGPT's are GPT-2 124M: a model of ~0.5 GB is not something to
-- build by leaving out an option); dropout and bias default as nanoGPT's.
local SIZES = { "block_size", "vocab_size", "n_layer", "n_head", "n_embd" }
local DEFAULTS = { dropout = 0.0, bias = true }
local KNOWN = options.union(SIZES, DEFAULTS)

-- The options table checked and completed with the defaults; raises on an unknown key or a bad value.
function M.config(opts)
  options.check_given("GPT", opts, KNOWN, 3)
  local c = {}
  for k, v in pairs(opts) do c[k] = v end
  for k, v in pairs(DEFAULTS) do if c[k] == nil then c[k] = v end end
  for _, k in ipairs(SIZES) do
    if c[k] == nil then error(fmt("GPT: option %s is required", k), 3) end
    if math.type(c[k]) ~= "integer" or c[k] < 1 then
      error(fmt("GPT: %s must be an integer >= 1, got %s", k, tostring(c[k])), 3)
    end
  end
  if c.n_embd % c.n_head ~= 0 then
    error(fmt("GPT: n_embd (%d) must be a multiple of n_head (%d)", c.n_embd, c.n_head), 3)
  end
  if type(c.dropout) ~= "number" or c.dropout < 0 or c.dropout >= 1 then
    error(fmt("GPT: dropout must be a number in [0, 1), got %s", tostring(c.dropout)), 3)
  end
  if type(c.bias) ~= "boolean" then error(fmt("GPT: bias must be a boolean, got %s", tostring(c.bias)), 3) end
  return c
end

-- ---- attention ------------------------------------------------------------------------------

-- Causal attention over (B, n_head, T, head_size) q, k, v: the fused op, which never holds T x T
-- per head on the CPU.
local function causal_attention(q, k, v, dropout_p)
  return F.scaled_dot_product_attention(q, k, v, { is_causal = true, dropout_p = dropout_p })
end

local CausalSelfAttention = nn.Module:extend("CausalSelfAttention")
M.CausalSelfAttention = CausalSelfAttention

function CausalSelfAttention:init(c)
  self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd, { bias = c.bias })
  self.c_proj = nn.Linear(c.n_embd, c.n_embd, { bias = c.bias })
  self.resid_dropout = nn.Dropout(c.dropout)
  self.n_head, self.n_embd, self.dropout = c.n_head, c.n_embd, c.dropout
end

function CausalSelfAttention:forward(x)
  local B, T, C = x:size(1), x:size(2), x:size(3)
  local nh = self.n_head
  local heads = {}
  for i, t in ipairs(self.c_attn(x):split(self.n_embd, 3)) do
    heads[i] = t:reshape(B, T, nh, C // nh):transpose(2, 3) -- (B, nh, T, hs)
  end
  local p = self.training and self.dropout or 0
  local y = causal_attention(heads[1], heads[2], heads[3], p)
  y = y:transpose(2, 3):contiguous():view(B, T, C)
  return self.resid_dropout(self.c_proj(y))
end

local MLP = nn.Module:extend("MLP")
M.MLP = MLP

function MLP:init(c)
  self.c_fc = nn.Linear(c.n_embd, 4 * c.n_embd, { bias = c.bias })
  self.gelu = nn.GELU{ approximate = "tanh" }
  self.c_proj = nn.Linear(4 * c.n_embd, c.n_embd, { bias = c.bias })
  self.dropout = nn.Dropout(c.dropout)
end

function MLP:forward(x) return self.dropout(self.c_proj(self.gelu(self.c_fc(x)))) end

-- nanoGPT's LayerNorm "with an optional bias": nn.LayerNorm, its bias removed when bias = false.
local function layer_norm(c)
  local ln = nn.LayerNorm(c.n_embd)
  if not c.bias then ln.bias = nil end
  return ln
end

local Block = nn.Module:extend("Block")
M.Block = Block

function Block:init(c)
  self.ln_1 = layer_norm(c)
  self.attn = CausalSelfAttention(c)
  self.ln_2 = layer_norm(c)
  self.mlp = MLP(c)
end

function Block:forward(x)
  x = x + self.attn(self.ln_1(x))
  return x + self.mlp(self.ln_2(x))
end

-- ---- the model ------------------------------------------------------------------------------

local GPT = nn.Module:extend("GPT")
M.GPT = GPT

function GPT:init(opts)
  local c = M.config(opts)
  self.config = c
  local blocks = {}
  for i = 1, c.n_layer do blocks[i] = Block(c) end
  self.transformer = nn.ModuleDict{ -- pairs keep nanoGPT's order (and its parameter order)
    { "wte", nn.Embedding(c.vocab_size, c.n_embd) },
    { "wpe", nn.Embedding(c.block_size, c.n_embd) },
    { "drop", nn.Dropout(c.dropout) },
    { "h", nn.ModuleList(blocks) },
    { "ln_f", layer_norm(c) },
  }
  self.lm_head = nn.Linear(c.n_embd, c.vocab_size, { bias = false })
  -- weight tying: one parameter for both uses, listed once (as transformer.wte.weight)
  self.lm_head.weight = self.transformer.wte.weight
  self:reset_parameters()
end

-- GPT-2's initialisation: N(0, 0.02) for Linear and Embedding weights, zero biases, and the
-- residual projections (c_proj) N(0, 0.02 / sqrt(2 n_layer)). LayerNorms keep ones and zeros.
function GPT:reset_parameters()
  local _ <close> = ms.no_grad()
  for _, m in self:named_modules() do
    if m:isinstance(nn.Linear) then
      m.weight:normal_(0, 0.02)
      if m.bias ~= nil then m.bias:zero_() end
    elseif m:isinstance(nn.Embedding) then
      m.weight:normal_(0, 0.02)
    end
  end
  local std = 0.02 / math.sqrt(2 * self.config.n_layer)
  for name, p in self:named_parameters() do
    if name:match("c_proj%.weight$") then p:normal_(0, std) end
  end
end

-- The parameter count; non_embedding (default true, as nanoGPT) leaves out the position
-- embeddings (the token embedding counts: it is the LM head too).
function GPT:num_parameters(non_embedding)
  local n = 0
  for _, p in ipairs(self:parameters()) do n = n + p:numel() end
  if non_embedding ~= false then n = n - self.transformer.wpe.weight:numel() end
  return n
end

local function check_idx(fname, idx, block_size)
  if not ms.is_tensor(idx) or idx:dim() ~= 2 or idx:is_floating_point() then
    error(fmt("%s: idx must be a (B, T) integer tensor of token ids, got %s", fname,
      ms.is_tensor(idx) and ("a " .. idx:dim() .. "-d " .. tostring(idx.dtype) .. " tensor") or type(idx)), 3)
  end
  if idx:size(2) > block_size then
    error(fmt("%s: cannot forward a sequence of length %d, block size is only %d", fname, idx:size(2),
      block_size), 3)
  end
end

-- forward(idx, targets): logits (B, T, vocab_size) and, with targets (B, T), the mean
-- cross-entropy over the targets that are not -1 (nanoGPT's ignore_index).
function GPT:forward(idx, targets)
  check_idx("GPT:forward", idx, self.config.block_size)
  local tr = self.transformer
  local T = idx:size(2)
  local x = tr.drop(tr.wte(idx) + tr.wpe(ms.arange(1, T + 1)))
  for _, block in ipairs(tr.h:children()) do x = block(x) end
  local logits = self.lm_head(tr.ln_f(x))
  if targets == nil then return logits end
  local V = logits:size(3)
  -- the loss in float32 whatever the logits' dtype, as PyTorch's autocast computes cross_entropy
  -- (a bfloat16 loss near 2 would be rounded to steps of 1/64)
  local flat = logits:view(-1, V)
  if flat.dtype ~= ms.float32 and flat.dtype ~= ms.float64 then flat = flat:float() end
  local loss = F.cross_entropy(flat, targets:reshape(-1), { ignore_index = -1 })
  return logits, loss
end

-- The k-th largest value of each row of (B, V) logits as (B, 1). There is no topk/sort op yet:
-- the row maximum is masked k - 1 times (tied values go out together).
local function kth_largest(logits, k)
  local rest = logits
  for _ = 1, k - 1 do
    local m = (rest:max(2, true))
    rest = rest:masked_fill(rest:eq(m), -math.huge)
  end
  return (rest:max(2, true))
end

-- generate(idx, max_new_tokens, {temperature = 1, top_k = nil}): appends max_new_tokens sampled
-- tokens to idx (B, T), cropping the context to block_size. Sampling is the Gumbel-max trick
-- (argmax of logits / temperature + Gumbel noise draws from the softmax, as torch.multinomial
-- would; moonshard has no multinomial), so it uses the engine's generator; top_k = 1 is greedy.
function GPT:generate(idx, max_new_tokens, opts)
  opts = opts or {}
  local temperature, top_k = opts.temperature or 1.0, opts.top_k
  if type(temperature) ~= "number" or temperature <= 0 then
    error(fmt("GPT:generate: temperature must be a number > 0, got %s", tostring(temperature)), 2)
  end
  if math.type(max_new_tokens) ~= "integer" or max_new_tokens < 0 then
    error(fmt("GPT:generate: max_new_tokens must be an integer >= 0, got %s", tostring(max_new_tokens)), 2)
  end
  if top_k ~= nil and (math.type(top_k) ~= "integer" or top_k < 1) then
    error(fmt("GPT:generate: top_k must be an integer >= 1, got %s", tostring(top_k)), 2)
  end
  check_idx("GPT:generate", idx, math.maxinteger)
  local _ <close> = ms.no_grad()
  local bs = self.config.block_size
  for _ = 1, max_new_tokens do
    local T = idx:size(2)
    local cond = T <= bs and idx or idx:narrow(2, T - bs + 1, bs)
    local logits = self(cond):select(2, -1):div(temperature) -- (B, V)
    if top_k ~= nil then
      local k = math.min(top_k, logits:size(2))
      logits = logits:masked_fill(logits:lt(kth_largest(logits, k)), -math.huge)
    end
    local gumbel = ms.rand_like(logits):log():neg():log():neg()
    local next_id = top_k == 1 and logits:argmax(2, true) or (logits + gumbel):argmax(2, true)
    idx = ms.cat({ idx, next_id:to(idx.dtype) }, 2)
  end
  return idx
end

return M
