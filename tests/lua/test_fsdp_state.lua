-- test_fsdp_state.lua: the single-process side of FSDP checkpoints: the JSON reader behind the
-- sharded index (ms._json_decode), range reads of safetensors files (ms._safetensors_open), and
-- save_sharded / load_sharded on plain modules without any process group (a world of one).
local T = require "testing"
local ms = require "moonshard"
local nn = require "moonshard.nn"
local fsdp = require "moonshard.fsdp"

T.test("_json_decode: objects, arrays, numbers, strings, literals; malformed text names itself", function()
  local v = ms._json_decode('{"a":[1,2.5,-3,1e3,"x\\u00e9\\n"],"b":{"c":true,"d":false,"e":null},"big":18446744073709551615}')
  T.same(v.a, {1, 2.5, -3, 1000.0, "xé\n"})
  T.eq(math.type(v.a[1]), "integer")
  T.eq(math.type(v.a[3]), "float") -- only non-negative integers that fit stay integers
  T.eq(v.b.c, true); T.eq(v.b.d, false); T.eq(v.b.e, nil)
  T.eq(v.big, 18446744073709551615.0)
  T.raises(function() ms._json_decode('{"a":}', "my index") end, "my index: not valid JSON", "at byte 5")
  T.raises(function() ms._json_decode('[1] x') end, "json: not valid JSON", "after the value")
  T.raises(function() ms._json_decode('"\255"') end, "not valid UTF-8")
end)

T.test("_safetensors_open reads element ranges and refuses ranges outside a tensor", function()
  local path = os.tmpname()
  ms.save({w = ms.arange(0, 12):reshape(3, 4), b = ms.tensor({7, 8}, {dtype = "int64"})}, path)
  local f <close> = ms._safetensors_open(path)
  T.same(f:read("w", 5, 4):tolist(), {5, 6, 7, 8})
  T.same(f:read("b", 1, 1):tolist(), {8})
  T.raises(function() f:read("w", 10, 3) end, "tensor 'w' has 12 elements; elements [10, 13) are not inside it")
  T.raises(function() f:read("nope", 0, 1) end, "no tensor named 'nope'")
  f:close()
  T.raises(function() f:read("w", 0, 1) end, "read after close")
  os.remove(path)
  T.raises(function() ms._safetensors_open(path) end, "could not open")
end)

T.test("save_sharded / load_sharded on plain modules in one process", function()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir " .. T.quote(dir)))
  ms.manual_seed(3)
  local a = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
  fsdp.save_sharded(a, dir)
  ms.manual_seed(4)
  local b = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
  fsdp.load_sharded(b, dir)
  for k, v in pairs(a:state_dict()) do T.same(b:state_dict()[k]:tolist(), v:tolist(), 0, k) end
  T.raises(function() fsdp.load_sharded(nn.Sequential(nn.Linear(3, 5)), dir) end, "load_sharded",
    "shape of '0.weight' differs", "has (4, 3), the model expects (5, 3)")
  T.raises(function() fsdp.load_sharded(b, 42) end, "load_sharded: bad argument #2 (dir)")
  os.execute("rm -rf " .. T.quote(dir))
end)

T.finish()
