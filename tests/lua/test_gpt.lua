-- test_gpt.lua: the GPT of moonshard.models.gpt against PyTorch 1.13 (logits, loss and every
-- gradient of a tiny GPT on the same weights, from gen_gpt_reference.py), its parameter count,
-- weight tying, initialisation, causality, loss at init, overfitting a fixed sequence, a
-- float64 gradcheck, generation; and moonshard.token_dataset (windows, .bin files, tokenizer).
local ms = require "moonshard"
local T = require "testing"
local gpt = require "moonshard.models.gpt"
local optim = require "moonshard.optim"
local td = require "moonshard.token_dataset"

local TINY = { n_layer = 2, n_head = 2, n_embd = 16, block_size = 8, vocab_size = 11 }

local function max_abs_diff(a, b) return (a:double() - b:double()):abs():max():item() end

local function max_rel_diff(a, b)
  return max_abs_diff(a, b) / math.max(b:double():abs():max():item(), 1e-12)
end

T.test("logits, loss and gradients equal PyTorch's on the same weights", function()
  local ref = ms.load("tests/lua/data/gpt_reference.safetensors")
  local model = gpt.GPT(TINY)
  do
    local _ <close> = ms.no_grad()
    local n = 0
    for name, p in model:named_parameters() do
      local want = ref["param__" .. name:gsub("%.", "__")]
      T.truthy(want ~= nil, "no reference for " .. name)
      p:copy_(want)
      n = n + 1
    end
    T.eq(n, 28) -- 12 per block, 2 embeddings, ln_f's 2: the tied head is not listed again
  end
  local logits, loss = model(ref.idx, ref.targets)
  T.truthy(max_abs_diff(logits, ref.logits) <= 1e-5, "logits differ by " .. max_abs_diff(logits, ref.logits))
  T.near(loss:item(), ref.loss:item(), 1e-5)
  loss:backward()
  for name, p in model:named_parameters() do
    local d = max_rel_diff(p.grad, ref["grad__" .. name:gsub("%.", "__")])
    T.truthy(d <= 1e-5, ("gradient of %s differs by %g (relative)"):format(name, d))
  end
end)

T.test("the parameter count is nanoGPT's formula", function()
  for _, c in ipairs({ TINY, { n_layer = 3, n_head = 4, n_embd = 32, block_size = 20, vocab_size = 50 },
    { n_layer = 1, n_head = 1, n_embd = 8, block_size = 4, vocab_size = 7, bias = false } }) do
    local model = gpt.GPT(c)
    local C, V, B, L = c.n_embd, c.vocab_size, c.block_size, c.n_layer
    local per_block = c.bias == false and 12 * C * C + 2 * C or 12 * C * C + 13 * C
    local ln_f = c.bias == false and C or 2 * C
    local total = V * C + B * C + L * per_block + ln_f
    T.eq(model:num_parameters(false), total)
    T.eq(model:num_parameters(), total - B * C)
  end
end)

T.test("the head is tied to the token embedding: one parameter, gradients from both uses", function()
  ms.manual_seed(1)
  local model = gpt.GPT(TINY)
  T.truthy(model.lm_head.weight == model.transformer.wte.weight)
  local count = 0
  for _, p in ipairs(model:parameters()) do
    if p == model.lm_head.weight then count = count + 1 end
  end
  T.eq(count, 1)
  local idx = ms.randint(1, 12, { 2, 8 })
  local _, loss = model(idx, idx)
  loss:backward()
  local both = model.lm_head.weight.grad:clone()
  -- the head's share alone: the same loss with the embedding's use cut off by detach
  model:zero_grad()
  local tr = model.transformer
  local x = tr.wte.weight:detach():index_select(1, idx:view(-1)):view(2, 8, 16) + tr.wpe(ms.arange(1, 9))
  for _, block in ipairs(tr.h:children()) do x = block(x) end
  local F = require "moonshard.functional"
  local head_loss = F.cross_entropy(model.lm_head(tr.ln_f(x)):view(-1, 11), idx:view(-1))
  head_loss:backward()
  local head_only = model.lm_head.weight.grad
  T.truthy(max_abs_diff(both, head_only) > 1e-4, "the embedding's gradient is missing from the tied weight")
  -- rows of tokens never used get only the head's gradient
  local used = {}
  for _, id in ipairs(idx:view(-1):tolist()) do used[id] = true end
  for id = 1, 11 do
    if not used[id] then T.truthy(max_abs_diff(both[id], head_only[id]) <= 1e-7) end
  end
end)

T.test("GPT-2 initialisation: N(0, 0.02), c_proj N(0, 0.02/sqrt(2 n_layer)), zero biases", function()
  ms.manual_seed(2)
  local c = { n_layer = 4, n_head = 4, n_embd = 128, block_size = 64, vocab_size = 256 }
  local model = gpt.GPT(c)
  local proj_std = 0.02 / math.sqrt(2 * c.n_layer)
  for name, p in model:named_parameters() do
    if name:match("ln_") then
      local want = name:match("weight$") and 1 or 0
      T.eq(max_abs_diff(p, ms.full_like(p, want)), 0, name)
    elseif name:match("bias$") then
      T.eq(p:abs():max():item(), 0, name)
    else
      local want = name:match("c_proj%.weight$") and proj_std or 0.02
      T.truthy(math.abs(p:std():item() / want - 1) < 0.05, ("%s: std %g, want %g"):format(name, p:std():item(), want))
      T.truthy(math.abs(p:mean():item()) < want * 0.05, name .. ": mean " .. p:mean():item())
    end
  end
end)

T.test("causal: changing token t+1 leaves the logits at 1..t unchanged", function()
  ms.manual_seed(3)
  local model = gpt.GPT(TINY)
  local idx = ms.randint(1, 12, { 2, 8 })
  local before = model(idx)
  for t = 1, 7 do
    local changed = idx:clone()
    changed[1][t + 1] = changed[1][t + 1]:item() % 11 + 1
    local after = model(changed)
    T.eq(max_abs_diff(after:narrow(2, 1, t), before:narrow(2, 1, t)), 0, "position " .. t)
    T.truthy(max_abs_diff(after:narrow(2, t + 1, 1), before:narrow(2, t + 1, 1)) > 0, "position " .. t + 1)
  end
end)

T.test("dropout acts in training only", function()
  ms.manual_seed(10)
  local model = gpt.GPT{ n_layer = 2, n_head = 2, n_embd = 16, block_size = 8, vocab_size = 11, dropout = 0.3 }
  local idx = ms.randint(1, 12, { 2, 8 })
  T.truthy(max_abs_diff(model(idx), model(idx)) > 1e-3, "training forwards should differ")
  model:eval()
  T.eq(max_abs_diff(model(idx), model(idx)), 0)
  -- in eval the same as the model without dropout
  ms.manual_seed(10)
  local plain = gpt.GPT{ n_layer = 2, n_head = 2, n_embd = 16, block_size = 8, vocab_size = 11 }
  T.eq(max_abs_diff(model(idx), plain(idx)), 0)
end)

T.test("the loss at initialisation is about ln(vocab_size)", function()
  ms.manual_seed(4)
  local model = gpt.GPT{ n_layer = 2, n_head = 2, n_embd = 32, block_size = 16, vocab_size = 65 }
  local idx = ms.randint(1, 66, { 8, 16 })
  local _, loss = model(idx, ms.randint(1, 66, { 8, 16 }))
  T.near(loss:item(), math.log(65), 0.1)
end)

T.test("targets of -1 are ignored, as nanoGPT's ignore_index", function()
  ms.manual_seed(5)
  local model = gpt.GPT(TINY)
  local idx = ms.randint(1, 12, { 1, 8 })
  local targets = idx:clone()
  targets[1][8] = -1
  local _, loss = model(idx, targets)
  local _, loss7 = model(idx:narrow(2, 1, 7), targets:narrow(2, 1, 7))
  T.near(loss:item(), loss7:item(), 1e-6)
end)

T.test("AdamW overfits a fixed sequence", function()
  ms.manual_seed(6)
  local model = gpt.GPT(TINY)
  local idx = ms.randint(1, 12, { 4, 8 })
  local targets = ms.randint(1, 12, { 4, 8 })
  local opt = optim.AdamW(model:parameters(), { lr = 1e-2 })
  local first, last
  for step = 1, 60 do
    opt:zero_grad()
    local _, loss = model(idx, targets)
    loss:backward()
    opt:step()
    if step == 1 then first = loss:item() end
    last = loss:item()
  end
  T.truthy(last < 0.1 * first, ("loss %g -> %g"):format(first, last))
end)

T.test("gradcheck of a 1-layer model in float64 (model:double() keeps the tie)", function()
  ms.manual_seed(7)
  local model = gpt.GPT{ n_layer = 1, n_head = 2, n_embd = 4, block_size = 4, vocab_size = 5 }:double()
  T.truthy(model.lm_head.weight == model.transformer.wte.weight, "double() untied the head")
  T.eq(model.lm_head.weight.dtype, ms.float64)
  local idx = ms.tensor({ { 1, 3, 5, 2 }, { 4, 4, 1, 3 } })
  local targets = ms.tensor({ { 2, 5, 1, 3 }, { 3, 1, 2, 5 } })
  local function loss_value()
    local _, loss = model(idx, targets)
    return loss
  end
  loss_value():backward()
  local eps, checked = 1e-6, 0
  for name, p in model:named_parameters() do
    local flat, g = p:detach():view(-1), p.grad:view(-1)
    for j = 1, flat:numel(), math.max(1, flat:numel() // 7) do
      local _ <close> = ms.no_grad()
      local v = flat[j]:item()
      flat[j] = v + eps
      local lp = loss_value():item()
      flat[j] = v - eps
      local lm = loss_value():item()
      flat[j] = v
      local num = (lp - lm) / (2 * eps)
      T.truthy(math.abs(num - g[j]:item()) <= 1e-7 + 1e-5 * math.abs(num),
        ("%s[%d]: numeric %g, analytic %g"):format(name, j, num, g[j]:item()))
      checked = checked + 1
    end
  end
  T.truthy(checked > 80)
end)

T.test("generate appends tokens, crops to block_size, top_k = 1 is greedy", function()
  ms.manual_seed(8)
  local model = gpt.GPT(TINY)
  local idx = ms.randint(1, 12, { 2, 3 })
  local out = model:generate(idx, 10, { temperature = 0.8, top_k = 4 })
  T.eq(out:size(1), 2)
  T.eq(out:size(2), 13)
  T.eq(max_abs_diff(out:narrow(2, 1, 3), idx), 0)
  T.truthy(out:min():item() >= 1 and out:max():item() <= 11)
  local greedy = model:generate(idx, 1, { top_k = 1 })
  T.eq(max_abs_diff(greedy:narrow(2, 4, 1), model(idx):select(2, -1):argmax(2, true)), 0)
  T.raises(function() model:generate(idx, 1, { temperature = 0 }) end, "temperature must be a number > 0")
  T.raises(function() model(ms.randint(1, 12, { 1, 9 })) end, "block size is only 8")
  T.raises(function() model:generate(idx, -1) end, "max_new_tokens must be an integer >= 0, got -1")
  local sizes = { n_layer = 1, n_head = 3, n_embd = 10, block_size = 4, vocab_size = 5 }
  T.raises(function() gpt.GPT(sizes) end, "GPT: n_embd (10) must be a multiple of n_head (3)")
  T.raises(function() gpt.GPT{ n_layers = 2 } end, "GPT: unknown option 'n_layers' (expected one of: bias, block_size, dropout, ")
  T.raises(function() gpt.GPT{ n_layer = 2 } end, "GPT: option block_size is required")
  T.raises(function() gpt.GPT() end, "GPT: expected an options table")
  sizes.n_head, sizes.dropout = 2, 1
  T.raises(function() gpt.GPT(sizes) end, "GPT: dropout must be a number in [0, 1), got 1")
end)

T.test("TokenDataset: windows, random batches, llm.c .bin files", function()
  local tokens = ms.arange(1, 101)
  local ds = td.TokenDataset(tokens, 8)
  T.eq(#ds, 12)
  local x, y = ds:get(2)
  T.same(x:tolist(), { 9, 10, 11, 12, 13, 14, 15, 16 })
  T.same(y:tolist(), { 10, 11, 12, 13, 14, 15, 16, 17 })
  ms.manual_seed(9)
  local bx, by = ds:get_batch(16)
  T.eq(bx:size(1), 16)
  T.eq(max_abs_diff(by, bx + 1), 0) -- consecutive ids: y is x shifted by one
  T.truthy(bx:min():item() >= 1 and by:max():item() <= 100)
  T.truthy(max_abs_diff(bx:select(2, 1):double():std(), ms.tensor(0.0)) > 0, "offsets are not random")
  local path = os.tmpname()
  local ids = ms.tensor({ 1, 2, 65536, 300, 7 })
  td.write_tokens(path, ids)
  T.eq(#T.read_file(path), 1024 + 10)
  T.same(td.read_tokens(path):tolist(), ids:tolist())
  T.write_file(path, "short")
  T.raises(function() td.read_tokens(path) end, "shorter than the 1024-byte header")
  os.remove(path)
  T.raises(function() td.TokenDataset(ms.arange(1, 5), 4) end, "cannot make one window")
  T.raises(function() td.TokenDataset(ms.arange(1, 5), math.maxinteger) end, "cannot make one window")
  T.raises(function() ds:get(13) end, "index must be an integer in 1..12")
end)

T.test("open_tokens maps a token file: a TokenDataset over it draws what one over its ids draws", function()
  local path = os.tmpname()
  local list = {}
  for i = 1, 3000 do list[i] = i * 7919 % 65536 + 1 end -- both bytes of the uint16 in use
  local ids = ms.tensor(list)
  td.write_tokens(path, ids)
  local file = td.open_tokens(path)
  T.eq(file:numel(), 3000)
  T.eq(file:max_id(), ids:max():item())
  T.eq(max_abs_diff(file:read(), ids), 0)
  local in_memory, mapped = td.TokenDataset(ids, 16), td.TokenDataset(file, 16)
  T.eq(#mapped, #in_memory)
  T.eq(mapped:num_tokens(), 3000)
  local x1, y1 = in_memory:get(5)
  local x2, y2 = mapped:get(5)
  T.eq(max_abs_diff(x1, x2) + max_abs_diff(y1, y2), 0)
  ms.manual_seed(4)
  local bx1, by1 = in_memory:get_batch(8)
  ms.manual_seed(4)
  local bx2, by2 = mapped:get_batch(8)
  T.eq(max_abs_diff(bx1, bx2) + max_abs_diff(by1, by2), 0)
  T.eq(max_abs_diff(by2:narrow(2, 1, 15), bx2:narrow(2, 2, 15)), 0)
  T.raises(function() td.open_tokens(path .. ".absent") end, "open_tokens: cannot open", "absent")
  local f <close> = assert(io.open(path, "ab"))
  f:write("x")
  f:close()
  T.raises(function() td.open_tokens(path) end, "header says 3000 tokens (7024 bytes), the file has 7025 bytes")
  os.remove(path)
end)

T.test("ms.from_file maps a file's bytes (torch.from_file), private unless shared", function()
  local path = os.tmpname()
  T.write_file(path, string.pack("<i4i4i4", 5, -6, 7))
  local t = ms.from_file(path, { dtype = ms.int32 })
  T.same(t:tolist(), { 5, -6, 7 })
  T.same(ms.from_file(path, { dtype = ms.int32, offset = 4, size = 1 }):tolist(), { -6 })
  t:fill_(0) -- a private mapping: the file keeps its bytes
  T.same(ms.from_file(path, { dtype = ms.int32 }):tolist(), { 5, -6, 7 })
  local shared = ms.from_file(path, { dtype = ms.int32, shared = true })
  shared[2] = 9
  shared = nil
  collectgarbage()
  T.eq(select(2, string.unpack("<i4i4", T.read_file(path))), 9)
  T.eq(ms.from_file(path, { offset = 12 }):numel(), 0)
  T.raises(function() ms.from_file(path, { dtype = ms.int32, offset = 2 }) end, "from_file: offset 2 is not a multiple")
  T.raises(function() ms.from_file(path, { offset = 13 }) end, "from_file: offset 13 is outside")
  T.raises(function() ms.from_file(path, { dtype = ms.int64 }) end, "not a whole number of int64 elements")
  T.raises(function() ms.from_file(path, { dtype = ms.int32, size = 4 }) end, "size 4 exceeds the 3 int32")
  T.raises(function() ms.from_file(path .. ".absent") end, "from_file: cannot open")
  T.raises(function() ms.from_file("/tmp") end, "from_file: /tmp is not a regular file")
  T.raises(function() ms.from_file(path, { sized = 1 }) end, "from_file", "sized")
  os.remove(path)
end)

T.test("TokenDataset under a DistributedSampler and a DataLoader: ranks share out the windows", function()
  local samplers = require "moonshard.samplers"
  local ds = td.TokenDataset(ms.arange(1, 101), 8) -- 12 windows
  local starts = {}
  for rank = 0, 1 do
    local sampler = samplers.DistributedSampler(ds, { num_replicas = 2, rank = rank, shuffle = true, seed = 3 })
    local loader = ms.data.DataLoader(ds, { batch_size = 3, sampler = sampler })
    T.eq(#loader, 2)
    for _, x, y in loader:iter() do
      T.eq(tostring(x.shape), "torch.Size([3, 8])")
      T.eq(max_abs_diff(y, x + 1), 0)
      for _, first in ipairs(x:select(2, 1):tolist()) do
        T.eq((first - 1) % 8, 0, "a window starts at a multiple of block_size")
        T.truthy(not starts[first], "window at " .. first .. " given twice")
        starts[first] = true
      end
    end
  end
  local n = 0
  for _ in pairs(starts) do n = n + 1 end
  T.eq(n, 12)
end)

T.test("CharTokenizer and ByteTokenizer round-trip text", function()
  local text = "hello, world\n"
  local tok = td.CharTokenizer(text)
  T.eq(tok.vocab_size, 10)
  local ids = tok:encode("low")
  T.eq(tok:decode(ids), "low")
  T.eq(ids:min():item() >= 1 and ids:max():item() <= 10, true)
  T.raises(function() tok:encode("z") end, "byte 122 at 1 is not in the vocabulary")
  T.eq(tok:encode(""):numel(), 0)
  local bytes = td.ByteTokenizer()
  T.eq(bytes.vocab_size, 256)
  local all = {}
  for b = 0, 255 do all[#all + 1] = string.char(b) end
  all = table.concat(all)
  local ids = bytes:encode(all)
  T.same(ids:tolist(), ms.arange(1, 257):tolist()) -- id = byte + 1
  T.eq(bytes:decode(ids), all)
  T.eq(bytes:encode(""):numel(), 0)
end)

T.finish()
