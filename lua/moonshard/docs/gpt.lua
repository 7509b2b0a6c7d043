-- gpt.lua: the docstrings of require "moonshard.models.gpt", GPT-2 as nanoGPT writes it.
local CFG = "local gpt = require \"moonshard.models.gpt\"\n" ..
  "local cfg = {n_layer = 1, n_head = 2, n_embd = 8, block_size = 8, vocab_size = 16}\n"

return {
  title = "Models: GPT (models.gpt)",
  {
    name = "gpt.GPT",
    sig = "gpt.GPT({n_layer =, n_head =, n_embd =, block_size =, vocab_size =, dropout = 0, bias = true}) -> Module",
    doc = [[
GPT-2 as nanoGPT writes it: token and position embeddings, dropout, `n_layer` pre-LayerNorm
blocks of causal self-attention and a GELU(tanh) MLP, a final LayerNorm and an LM head tied to the
token embedding, with GPT-2's initialisation. `model(idx, targets)` takes (B, T) int64 token ids
(1-based: 1..vocab_size) and returns logits (B, T, vocab_size) and, with targets, the mean
cross-entropy over the targets that are not -1. The sizes have no defaults (GPT-2 124M is
n_layer 12, n_head 12, n_embd 768, block_size 1024, vocab_size 50257).]],
    opts = {
      { "n_layer", "integer", "required", "blocks" },
      { "n_head", "integer", "required", "attention heads (n_embd a multiple of it)" },
      { "n_embd", "integer", "required", "width of the residual stream" },
      { "block_size", "integer", "required", "the longest context" },
      { "vocab_size", "integer", "required", "token ids are 1..vocab_size" },
      { "dropout", "number", "0.0", "dropout probability in [0, 1)" },
      { "bias", "boolean", "true", "biases in the Linears and LayerNorms" },
    },
    example = CFG .. [[
ms.manual_seed(0)
local model = gpt.GPT(cfg)
local idx = ms.randint(1, 17, {2, 4})
local logits, loss = model(idx, idx)
print(logits.shape, loss:item() > 0)   --> torch.Size([2, 4, 16])	true
]],
  },
  {
    name = "gpt.GPT:generate",
    sig = "model:generate(idx, max_new_tokens, {temperature = 1.0, top_k =}) -> Tensor",
    doc = [[
Appends `max_new_tokens` sampled tokens to `idx` (B, T), cropping the context to `block_size`:
(B, T + max_new_tokens). Samples with the engine's generator (seed it for reproducible text);
`top_k` keeps the k likeliest tokens, `top_k = 1` is greedy.]],
    opts = {
      { "temperature", "number", "1.0", "divides the logits: lower is more conservative" },
      { "top_k", "integer", "nil", "sample among the k likeliest tokens only" },
    },
    example = CFG .. [[
ms.manual_seed(0)
local model = gpt.GPT(cfg)
local out = model:generate(ms.tensor({{1, 2, 3}}), 4, {top_k = 1})
print(out.shape)   --> torch.Size([1, 7])
]],
  },
  {
    name = "gpt.GPT:num_parameters",
    sig = "model:num_parameters(non_embedding = true) -> integer",
    doc = [[The parameter count; by default without the position embeddings (nanoGPT's count: the token embedding is also the LM head, so it stays in).]],
    example = CFG .. [[
local model = gpt.GPT(cfg)
print(model:num_parameters(), model:num_parameters(false))   --> 1016	1080
]],
  },
  {
    name = "gpt.GPT:reset_parameters",
    sig = "model:reset_parameters()",
    doc = [[
Draws the parameters again with GPT-2's initialisation: N(0, 0.02) for Linear and Embedding
weights, zero biases, N(0, 0.02 / sqrt(2 n_layer)) for the residual projections; LayerNorms get
ones and zeros.]],
    example = CFG .. [[
local model = gpt.GPT(cfg)
model:reset_parameters()
print(model.transformer.ln_f.weight:sum():item())   --> 8.0
]],
  },
  {
    name = "gpt.config",
    sig = "gpt.config(opts) -> table",
    doc = [[The GPT options checked and completed with the defaults (dropout 0, bias true); raises on an unknown key or a bad value, naming it.]],
    example = CFG .. [[
local c = gpt.config(cfg)
print(c.dropout, c.bias)   --> 0.0	true
]],
  },
  {
    name = "gpt.Block",
    sig = "gpt.Block(config) -> Module",
    doc = [[
One transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x)) on (B, T, n_embd). The class to
name in FSDP's `ModuleWrapPolicy{gpt.Block}` and in activation checkpointing's `check_fn`.]],
    example = CFG .. [[
local block = gpt.Block(gpt.config(cfg))
print(block(ms.randn(1, 3, 8)).shape)   --> torch.Size([1, 3, 8])
]],
  },
  {
    name = "gpt.CausalSelfAttention",
    sig = "gpt.CausalSelfAttention(config) -> Module",
    doc = [[Multi-head causal self-attention on (B, T, n_embd) through the fused `F.scaled_dot_product_attention`.]],
    example = CFG .. [[
local attn = gpt.CausalSelfAttention(gpt.config(cfg))
print(attn(ms.randn(1, 3, 8)).shape)   --> torch.Size([1, 3, 8])
]],
  },
  {
    name = "gpt.MLP",
    sig = "gpt.MLP(config) -> Module",
    doc = [[The block's feed-forward: Linear(n_embd, 4 n_embd), GELU (tanh), Linear(4 n_embd, n_embd), dropout.]],
    example = CFG .. [[
local mlp = gpt.MLP(gpt.config(cfg))
print(mlp(ms.randn(1, 3, 8)).shape)   --> torch.Size([1, 3, 8])
]],
  },
}
