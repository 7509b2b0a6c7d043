-- test_io.lua: ms.save / ms.load (safetensors checkpoints) from Lua: flat tables of tensors,
-- nested tables with numbers, strings and booleans (optimizer states, whole checkpoints), the
-- file PyTorch's layout gives (tests/lua/data/fixture.safetensors, made by
-- gen_safetensors_fixture.py: loaded, and written back byte for byte), and clear errors.
local T = require "testing"
local ms = require "moonshard"

local base = os.tmpname()
local n_files = 0
local function tmpfile()
  n_files = n_files + 1
  return ("%s.%d.safetensors"):format(base, n_files)
end

local function read_all(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function write_all(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

local function same_tensor(got, want, msg)
  T.truthy(ms.Tensor and got ~= nil, (msg or "tensor") .. " is missing")
  T.eq(got.dtype, want.dtype, msg)
  T.same(got:size(), want:size(), 0, msg)
  T.same(got:tolist(), want:tolist(), 0, msg)
end

local function keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = tostring(k) end
  table.sort(ks)
  return table.concat(ks, ",")
end

---------------------------------------------------------------------------------------------
-- flat tables

T.test("save/load: a flat table of every dtype round-trips", function()
  local path = tmpfile()
  local src = {
    ["fc1.weight"] = ms.randn(3, 4),
    ["fc1.bias"] = ms.randn(4, { dtype = "float64" }),
    half = ms.tensor({ 0.5, -1.5 }, { dtype = "float16" }),
    brain = ms.tensor({ 1.0, -2.0 }, { dtype = "bfloat16" }),
    long = ms.tensor({ 1 << 40, -3 }),
    int = ms.tensor({ 7, -8 }, { dtype = "int32" }),
    byte = ms.tensor({ 0, 255 }, { dtype = "uint8" }),
    mask = ms.tensor({ true, false }),
    scalar = ms.tensor(3.25),
    empty = ms.zeros(0, 2),
  }
  ms.save(src, path)
  local got, meta = ms.load(path)
  T.eq(keys(got), keys(src))
  for k, v in pairs(src) do same_tensor(got[k], v, k) end
  T.eq(next(meta), nil, "no metadata")
end)

T.test("save/load: non-contiguous tensors are written contiguous", function()
  local path = tmpfile()
  local m = ms.arange(12):view(3, 4)
  ms.save({ t = m:t(), s = m:narrow(2, 2, 2) }, path)
  local got = ms.load(path)
  same_tensor(got.t, m:t():contiguous())
  same_tensor(got.s, m:narrow(2, 2, 2):contiguous())
  T.truthy(got.t:is_contiguous())
end)

T.test("save/load: metadata strings", function()
  local path = tmpfile()
  local md = { epoch = "3", note = 'quote " backslash \\ newline \n tab \t é' }
  ms.save({ w = ms.ones(2) }, path, { metadata = md })
  local got, meta = ms.load(path)
  same_tensor(got.w, ms.ones(2))
  T.eq(keys(meta), "epoch,note")
  T.eq(meta.note, md.note)
  T.eq(meta.epoch, "3")
end)

T.test("save: the same tensors give the same bytes (sorted, deterministic)", function()
  local a, b = tmpfile(), tmpfile()
  local x, y, z = ms.ones(2), ms.zeros(3, { dtype = "int64" }), ms.tensor({ true })
  ms.save({ x = x, y = y, z = z }, a, { metadata = { b = "2", a = "1" } })
  ms.save({ z = z, y = y, x = x }, b, { metadata = { a = "1", b = "2" } })
  T.eq(read_all(a), read_all(b))
  -- int64 (alignment 8) before float32 before bool, as the reference library orders them
  local header = read_all(a):sub(9)
  T.truthy(header:find('"y"', 1, true) < header:find('"x"', 1, true))
  T.truthy(header:find('"x"', 1, true) < header:find('"z"', 1, true))
end)

---------------------------------------------------------------------------------------------
-- nested tables

T.test("save/load: an optimizer state with numbers, strings, booleans round-trips", function()
  local path = tmpfile()
  local state = {
    state = {
      [1] = { square_avg = ms.randn(3), acc_delta = ms.randn(3), step = 5 },
      [2] = { square_avg = ms.randn(2, 2), acc_delta = ms.zeros(2, 2), step = 5 },
    },
    param_groups = { { lr = 1.0, rho = 0.9, eps = 1e-6, weight_decay = 0, params = { 1, 2 },
                       foreach = false, name = "default", nothing = {} } },
  }
  ms.save(state, path)
  local got = ms.load(path)
  for i = 1, 2 do
    same_tensor(got.state[i].square_avg, state.state[i].square_avg)
    same_tensor(got.state[i].acc_delta, state.state[i].acc_delta)
    T.eq(got.state[i].step, 5)
    T.eq(math.type(got.state[i].step), "integer")
  end
  local g = got.param_groups[1]
  T.eq(#got.param_groups, 1)
  T.eq(g.lr, 1.0)
  T.eq(math.type(g.lr), "float")
  T.eq(g.rho, 0.9)
  T.eq(g.eps, 1e-6)
  T.eq(g.weight_decay, 0)
  T.eq(math.type(g.weight_decay), "integer")
  T.same(g.params, { 1, 2 })
  T.eq(g.foreach, false)
  T.eq(g.name, "default")
  T.eq(type(g.nothing), "table")
  T.eq(next(g.nothing), nil)
end)

T.test("save/load: tensor names of a nested checkpoint read like PyTorch's", function()
  local path = tmpfile()
  local w = ms.randn(2, 3)
  ms.save({ model = { ["fc1.weight"] = w }, optimizer = { state = { [1] = { momentum_buffer = w } } },
            epoch = 7 }, path, { metadata = { framework = "moonshard" } })
  local flat, meta = ms.load(path, { nested = false })
  same_tensor(flat["model.fc1.weight"], w)
  same_tensor(flat["optimizer.state.1.momentum_buffer"], w)
  T.eq(meta["moonshard.nested"], "1")
  T.eq(meta["moonshard.value:epoch"], "int:7")
  T.eq(meta["moonshard.keys:model.fc1.weight"], "s5,s10")
  local tree, user = ms.load(path)
  same_tensor(tree.model["fc1.weight"], w)
  same_tensor(tree.optimizer.state[1].momentum_buffer, w)
  T.eq(tree.epoch, 7)
  T.eq(keys(user), "framework")
end)

T.test("save/load: awkward keys keep their exact type and spelling", function()
  local path = tmpfile()
  local src = {
    s = { ["1"] = "string one" }, [1] = "integer one", [-3] = true, ["01"] = 1.5, [""] = { x = 2 },
    ["a.b"] = { c = 1 }, a = { ["b.d"] = 2 }, big = math.maxinteger, tiny = math.mininteger,
    huge = math.huge, neg = -math.huge, third = 1 / 3, whole = 2.0,
  }
  ms.save(src, path)
  local got = ms.load(path)
  T.eq(got.s["1"], "string one")
  T.eq(got.s[1], nil)
  T.eq(got[1], "integer one")
  T.eq(got[-3], true)
  T.eq(got["01"], 1.5)
  T.eq(got[""].x, 2)
  T.eq(got["a.b"].c, 1)
  T.eq(got.a["b.d"], 2)
  T.eq(got.big, math.maxinteger)
  T.eq(got.tiny, math.mininteger)
  T.eq(got.huge, math.huge)
  T.eq(got.neg, -math.huge)
  T.eq(got.third, 1 / 3)
  T.eq(got.whole, 2.0)
  T.eq(math.type(got.whole), "float")
  T.eq(keys(got), keys(src))
end)

T.test("save/load: nan survives, and {nested = true} splits a plain file's names", function()
  local path = tmpfile()
  ms.save({ v = 0 / 0 }, path)
  local got = ms.load(path)
  T.truthy(got.v ~= got.v)
  local p2 = tmpfile()
  local w = ms.ones(2)
  ms.save({ ["layers.0.weight"] = w }, p2)
  T.eq(ms.load(p2)["layers.0.weight"]:sum():item(), 2.0)
  T.eq(ms.load(p2, { nested = true }).layers[0].weight:sum():item(), 2.0)
end)

---------------------------------------------------------------------------------------------
-- the PyTorch-made fixture

local function fixture_tensors()
  return {
    ["a.f32"] = ms.tensor({ { 1.5, -2.0, 0.25 }, { 3.0, 4.0, 5.0 } }),
    ["b.f64"] = ms.tensor({ 0.1, -1e300, 3.0 }, { dtype = "float64" }),
    ["c.bf16"] = ms.tensor({ 1.0, -2.5, 3.0, 0.5 }, { dtype = "bfloat16" }),
    ["d.f16"] = ms.tensor({ { 0.5, -1.0 }, { 65504.0, 0.0 } }, { dtype = "float16" }),
    ["e.i64"] = ms.tensor({ -(1 << 62), 0, 7 }),
    ["f.i32"] = ms.tensor({ 1, -2, 2147483647 }, { dtype = "int32" }),
    ["g.u8"] = ms.tensor({ 0, 255, 7 }, { dtype = "uint8" }),
    ["h.bool"] = ms.tensor({ true, false, true }),
    scalar = ms.tensor(2.5),
    empty = ms.zeros(0, 4),
    ["t.transposed"] = ms.arange(6, { dtype = "float32" }):view(2, 3):t(),
  }
end
local FIXTURE_META = { format = "pt", note = 'h\u{e9}llo "quoted"\n\ttab \\ \u{1}' }
local FIXTURE = "tests/lua/data/fixture.safetensors"

T.test("fixture: a file laid out by PyTorch's rules loads", function()
  local got, meta = ms.load(FIXTURE)
  local want = fixture_tensors()
  T.eq(keys(got), keys(want))
  for k, v in pairs(want) do same_tensor(got[k], v, k) end
  T.eq(meta.format, "pt")
  T.eq(meta.note, FIXTURE_META.note)
end)

T.test("fixture: saving the same tensors writes the same bytes", function()
  local path = tmpfile()
  ms.save(fixture_tensors(), path, { metadata = FIXTURE_META })
  T.eq(read_all(path), read_all(FIXTURE))
end)

---------------------------------------------------------------------------------------------
-- errors

T.test("load: corrupt and truncated files are clear errors", function()
  local good = read_all(FIXTURE)
  local path = tmpfile()
  write_all(path, good:sub(1, #good - 1))
  T.raises(function() ms.load(path) end, path, "run past the end")
  write_all(path, good:sub(1, 5))
  T.raises(function() ms.load(path) end, path, "too short")
  write_all(path, good:sub(1, 100))
  T.raises(function() ms.load(path) end, path, "header length")
  write_all(path, good:sub(1, 8) .. "[" .. good:sub(10))
  T.raises(function() ms.load(path) end, path, "does not start with '{'")
  write_all(path, (good:gsub('"BF16"', '"BF17"')))
  T.raises(function() ms.load(path) end, path, "unknown dtype 'BF17'")
  write_all(path, good .. "xx")
  T.raises(function() ms.load(path) end, path, "trailing bytes")
  T.raises(function() ms.load(base .. ".missing") end, "could not open", base .. ".missing")
  -- every prefix of a valid file is refused, none crashes
  for len = 0, #good - 1, 7 do
    write_all(path, good:sub(1, len))
    T.truthy(not pcall(ms.load, path), "prefix of " .. len .. " bytes loaded")
  end
end)

T.test("save: bad arguments are clear errors and write nothing", function()
  local path = tmpfile()
  T.raises(function() ms.save(ms.ones(2), path) end, "save", "a table of named tensors")
  T.raises(function() ms.save({ w = ms.ones(1) }, 3) end, "save", "path", "a string")
  T.raises(function() ms.save({ w = ms.ones(1) }, path, { metdata = {} }) end, "metdata")
  T.raises(function() ms.save({ w = ms.ones(1) }, path, { metadata = { k = 1 } }) end, "strings to strings")
  T.raises(function() ms.save({ w = ms.ones(1) }, path, { metadata = { ["moonshard.x"] = "1" } }) end, "reserved")
  T.raises(function() ms.save({ f = print }, path) end, "'f'", "only tensors")
  T.raises(function() ms.save({ [1.5] = ms.ones(1) }, path) end, "must be a string or an integer")
  T.raises(function() ms.save({ a = { b = ms.ones(1) }, ["a.b"] = ms.ones(1) }, path) end, "same name 'a.b'")
  -- the string "1" and the integer 1 would both be named "1"
  T.raises(function() ms.save({ ["1"] = 1, [1] = 2 }, path) end, "same name '1'")
  local cyc = {}
  cyc.self = cyc
  T.raises(function() ms.save({ c = cyc }, path) end, "contains itself")
  T.raises(function() ms.save({ w = 1 }, path, { nested = false }) end, "nested = false")
  T.raises(function() ms.save({ w = ms.ones(1) }, "/nonexistent-dir/x.safetensors") end,
    "/nonexistent-dir/x.safetensors")
  T.eq(io.open(path, "rb"), nil, "nothing written")
end)

T.test("save: an existing checkpoint is replaced whole, with no temporary left", function()
  local path = tmpfile()
  ms.save({ w = ms.ones(2) }, path)
  ms.save({ w = ms.zeros(3) }, path)
  same_tensor(ms.load(path).w, ms.zeros(3))
  local p = io.popen(("ls -a %q"):format(path:match("^(.*)/")))
  local listing = p:read("a")
  p:close()
  T.eq(listing:find(path:match("[^/]*$") .. ".tmp.", 1, true), nil)
end)

for i = 1, n_files do os.remove(("%s.%d.safetensors"):format(base, i)) end
os.remove(base)
T.finish()
