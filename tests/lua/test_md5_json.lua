-- test_md5_json.lua: ms._md5 (engine/src/io/md5.c) against RFC 1321's test suite, the padding
-- boundaries and a large input; ms._json_encode (json.c's writer) against what ms._json_decode
-- reads back, and its refusals.
local T = require "testing"
local ms = require "moonshard"

T.test("md5: RFC 1321's test suite (appendix A.5)", function()
  local suite = {
    {"", "d41d8cd98f00b204e9800998ecf8427e"},
    {"a", "0cc175b9c0f1b6a831c399e269772661"},
    {"abc", "900150983cd24fb0d6963f7d28e17f72"},
    {"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
    {"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"},
    {"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"},
    {("1234567890"):rep(8), "57edf4a22be3c955ac49da2e2107b67a"},
  }
  for _, case in ipairs(suite) do T.eq(ms._md5(case[1]), case[2], ("md5 of %q"):format(case[1])) end
end)

T.test("md5: padding boundaries and large inputs (values from Python's hashlib)", function()
  T.eq(ms._md5(("x"):rep(55)), "04364420e25c512fd958a70738aa8f72")
  T.eq(ms._md5(("x"):rep(56)), "668a72d5ba17f08e62dabcafad6db14b")
  T.eq(ms._md5(("x"):rep(64)), "c1bb4f81d892b2d57947682aeb252456")
  T.eq(ms._md5(("x"):rep(119)), "ab347a5f68c8a443cfcddc633f12c24f")
  T.eq(ms._md5(("abcdefgh"):rep(1 << 20)), "3bf11703ff40b904491650074c4d6cda") -- 8 MiB
  local bytes = {}
  for i = 0, 1000002 do bytes[#bytes + 1] = string.char((i * 7 + 3) % 256) end
  T.eq(ms._md5(table.concat(bytes)), "1842c03d6faeb87aee097c047ead698b") -- every byte value, 1000003 bytes
  T.eq(require("moonshard.datasets")._md5("abc"), "900150983cd24fb0d6963f7d28e17f72", "datasets' download check")
  T.raises(function() ms._md5() end, "string expected")
end)

T.test("json_encode: compact, keys sorted, read back as written", function()
  T.eq(ms._json_encode({b = 1, a = {true, false}, c = "x"}), '{"a":[true,false],"b":1,"c":"x"}')
  T.eq(ms._json_encode({}), "[]")
  T.eq(ms._json_encode({{}, {n = -3}}), '[[],{"n":-3}]')
  T.eq(ms._json_encode(0.1), "0.1")
  T.eq(ms._json_encode(1 / 3), "0.3333333333333333")
  T.eq(ms._json_encode(2 ^ 53), "9007199254740992")
  T.eq(ms._json_encode(math.maxinteger), "9223372036854775807")
  T.eq(ms._json_encode('q"\\\n\1é'), '"q\\"\\\\\\n\\u0001é"')
  local v = {name = "w", shape = {3, 4}, pieces = {{file = 0, offset = 12, numel = 5}}, scale = -1.5, ok = true}
  local text = ms._json_encode(v)
  T.eq(text, '{"name":"w","ok":true,"pieces":[{"file":0,"numel":5,"offset":12}],"scale":-1.5,"shape":[3,4]}')
  T.eq(ms._json_encode(ms._json_decode(text)), text, "decoded and encoded again")
end)

T.test("json_encode: values with no JSON form are refused, naming why", function()
  T.raises(function() ms._json_encode(print) end, "json_encode", "function has no JSON form")
  T.raises(function() ms._json_encode({0 / 0}) end, "json_write", "no JSON form")
  T.raises(function() ms._json_encode({math.huge}) end, "json_write", "no JSON form")
  T.raises(function() ms._json_encode({1, x = 2}) end, "mixes array items and string keys")
  T.raises(function() ms._json_encode({[3] = 1}) end, "index 1..#t")
  T.raises(function() ms._json_encode({1, nil, 3}) end, "json_encode", "holes")
  T.raises(function() ms._json_encode({"a\0b"}) end, "NUL byte")
  T.raises(function() ms._json_encode({"\xff"}) end, "not valid UTF-8")
  local cycle = {}
  cycle[1] = cycle
  T.raises(function() ms._json_encode(cycle) end, "deeper than 64")
end)

T.finish()
