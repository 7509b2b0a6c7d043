-- token_dataset.lua: the docstrings of require "moonshard.token_dataset": language-model data over
-- token ids (1-based, as every index in moonshard), llm.c's .bin token files, and tokenizers.
local TD = 'local td = require "moonshard.token_dataset"\n'
local FILE = TD .. [[
local path = os.tmpname()
td.write_tokens(path, ms.arange(1, 11))      -- ids 1..10
]]

return {
  title = "Language-model data (token_dataset)",
  {
    name = "token_dataset.TokenDataset",
    sig = "token_dataset.TokenDataset(tokens, block_size) -> dataset",
    doc = [[
(x, y) windows of `block_size` tokens over `tokens` (a 1-D integer tensor of ids, or a
`TokenFile` from `open_tokens`), y shifted by one. As a map-style dataset (for a DataLoader and a
DistributedSampler), item i is the i-th non-overlapping window and `#ds` their number;
`get_batch(B)` draws windows at random offsets, as nanoGPT's `get_batch`.]],
    example = TD .. [[
local ds = td.TokenDataset(ms.arange(1, 11), 4)
local x, y = ds:get(1)
print(#ds, x, y)   --> 2	tensor([1, 2, 3, 4])	tensor([2, 3, 4, 5])
]],
  },
  {
    name = "token_dataset.TokenDataset:get",
    sig = "ds:get(i) -> x, y",
    doc = [[The i-th non-overlapping window (1-based; negative from the end) as x, y int64 tensors of block_size.]],
    example = TD .. [[
local x, y = td.TokenDataset(ms.arange(1, 11), 4):get(-1)
print(x, y)   --> tensor([5, 6, 7, 8])	tensor([6, 7, 8, 9])
]],
  },
  {
    name = "token_dataset.TokenDataset:window",
    sig = "ds:window(start) -> x, y",
    doc = [[The window that starts at token `start` (1-based), at any offset.]],
    example = TD .. [[
local x, y = td.TokenDataset(ms.arange(1, 11), 4):window(3)
print(x, y)   --> tensor([3, 4, 5, 6])	tensor([4, 5, 6, 7])
]],
  },
  {
    name = "token_dataset.TokenDataset:get_batch",
    sig = "ds:get_batch(batch_size) -> x, y",
    doc = [[`batch_size` windows at uniform random offsets from the engine's generator: x, y as (batch_size, block_size) int64.]],
    example = TD .. [[
ms.manual_seed(0)
local x, y = td.TokenDataset(ms.arange(1, 101), 8):get_batch(4)
print(x.shape, ms.equal(x:narrow(2, 2, 7), y:narrow(2, 1, 7)))   --> torch.Size([4, 8])	true
]],
  },
  {
    name = "token_dataset.TokenDataset:ids",
    sig = "ds:ids(pos) -> Tensor",
    doc = [[The ids at the 1-based positions `pos` (an int64 tensor of any shape), shaped as `pos`.]],
    example = TD .. [[
print(td.TokenDataset(ms.arange(11, 21), 4):ids(ms.tensor({1, 10})))   --> tensor([11, 20])
]],
  },
  {
    name = "token_dataset.TokenDataset:num_tokens",
    sig = "ds:num_tokens() -> integer",
    doc = [[The number of tokens the dataset reads from.]],
    example = TD .. [[
print(td.TokenDataset(ms.arange(1, 11), 4):num_tokens())   --> 10
]],
  },
  {
    name = "token_dataset.write_tokens",
    sig = "token_dataset.write_tokens(path, tokens)",
    doc = [[
Writes token ids (1-based, at most 65536) to `path` in llm.c's .bin layout: a header of 256
little-endian int32 (magic 20240520, version 1, the count), then each token as uint16 holding
id - 1.]],
    example = FILE .. [[
print(td.read_tokens(path):numel())   --> 10
]],
  },
  {
    name = "token_dataset.read_tokens",
    sig = "token_dataset.read_tokens(path) -> Tensor",
    doc = [[An llm.c .bin token file decoded whole into a 1-D int64 tensor of 1-based ids.]],
    example = FILE .. [[
print(td.read_tokens(path))   --> tensor([ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
]],
  },
  {
    name = "token_dataset.open_tokens",
    sig = "token_dataset.open_tokens(path) -> TokenFile",
    doc = [[
Maps an llm.c .bin token file (`ms.from_file`) without reading it: a `TokenDataset` over the
`TokenFile` decodes only the windows it draws, so a corpus costs no copy and no memory beyond the
pages read.]],
    example = FILE .. [[
local ds = td.TokenDataset(td.open_tokens(path), 4)
print(#ds, (ds:get(2)))   --> 2	tensor([5, 6, 7, 8])
]],
  },
  {
    name = "token_dataset.TokenFile",
    sig = "TokenFile (what open_tokens returns)",
    doc = [[A mapped token file: `numel`, `ids`, `max_id`, `read`; prints as `TokenFile(path, n tokens)`.]],
    example = FILE .. [[
print(tostring(td.open_tokens(path)):match("%d+ tokens"))   --> 10 tokens
]],
  },
  {
    name = "token_dataset.TokenFile:numel",
    sig = "file:numel() -> integer",
    doc = [[The number of tokens in the file.]],
    example = FILE .. [[
print(td.open_tokens(path):numel())   --> 10
]],
  },
  {
    name = "token_dataset.TokenFile:ids",
    sig = "file:ids(pos) -> Tensor",
    doc = [[The 1-based ids at the 1-based positions `pos` (an int64 tensor of any shape), shaped as `pos`, decoded from the mapped bytes.]],
    example = FILE .. [[
print(td.open_tokens(path):ids(ms.tensor({2, 3})))   --> tensor([2, 3])
]],
  },
  {
    name = "token_dataset.TokenFile:max_id",
    sig = "file:max_id() -> integer",
    doc = [[The largest id (0 for an empty file), decoded a chunk at a time: never a copy of the file. What a model's vocab_size must cover.]],
    example = FILE .. [[
print(td.open_tokens(path):max_id())   --> 10
]],
  },
  {
    name = "token_dataset.TokenFile:read",
    sig = "file:read() -> Tensor",
    doc = [[Every id, decoded into a 1-D int64 tensor (as `read_tokens`).]],
    example = FILE .. [[
print(td.open_tokens(path):read():sum():item())   --> 55
]],
  },
  {
    name = "token_dataset.CharTokenizer",
    sig = "token_dataset.CharTokenizer(text) -> tokenizer",
    doc = [[
A character-level tokenizer whose vocabulary is the distinct bytes of `text`, sorted, ids 1-based
(`tok.vocab_size`); a UTF-8 character of several bytes is several tokens.]],
    example = TD .. [[
local tok = td.CharTokenizer("hello world")
print(tok.vocab_size, tok:encode("hello"))   --> 8	tensor([4, 3, 5, 5, 6])
]],
  },
  {
    name = "token_dataset.ByteTokenizer",
    sig = "token_dataset.ByteTokenizer() -> tokenizer",
    doc = [[All 256 bytes, id = byte + 1, the same for every text: what a token file needs (its vocabulary is not stored). Methods as CharTokenizer's.]],
    example = TD .. [[
local tok = td.ByteTokenizer()
print(tok.vocab_size, tok:encode("A"), tok:decode({66, 67}))   --> 256	tensor([66])	AB
]],
  },
  {
    name = "token_dataset.CharTokenizer:encode",
    sig = "tok:encode(s) -> Tensor",
    doc = [[The ids of string `s` as a 1-D int64 tensor; a byte outside the vocabulary raises, naming it and its position.]],
    example = TD .. [[
print(td.CharTokenizer("abc"):encode("cab"))   --> tensor([3, 1, 2])
]],
  },
  {
    name = "token_dataset.CharTokenizer:decode",
    sig = "tok:decode(ids) -> string",
    doc = [[The text of `ids` (a 1-D tensor or a Lua array).]],
    example = TD .. [[
local tok = td.CharTokenizer("hello world")
print(tok:decode(tok:encode("hello")))   --> hello
]],
  },
}
