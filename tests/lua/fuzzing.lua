-- fuzzing.lua: what the fuzzers of tests/sanitize/ share: their seed and case count, judging one
-- reader's outcome against the fuzzer's independent reader, and copying a model before mutating it.
local M = {}

-- The verdict on one case: "clean" (a Lua error naming `op` for a file the independent reader
-- also rejects), "accepted" (both accept and `differ()` finds no difference), or nil and why
-- the outcome is wrong. ok, result: what pcall of the reader returned; want, why: the
-- independent reader's result (nil and its reason when it rejects the file).
function M.judge(op, ok, result, want, why, differ)
  if not ok then
    if type(result) ~= "string" or not result:find(op, 1, true) then
      return nil, "not a clean error: " .. tostring(result)
    end
    if want then return nil, op .. " refused a file the independent reader accepts: " .. result end
    return "clean"
  end
  if not want then return nil, op .. " accepted a file the independent reader rejects (" .. tostring(why) .. ")" end
  local diff = differ()
  if diff then return nil, diff end
  return "accepted"
end

-- tests/sanitize's convention: the seed (MS_FUZZ_SEED, default 1) and the number of cases
-- (MS_FUZZ_CASES, default_cases), math.random seeded with the seed. A value that is not an
-- integer is an error rather than a silent default.
function M.settings(default_cases)
  local function int(name, default)
    local v = os.getenv(name)
    if v == nil then return default end
    return math.tointeger(tonumber(v)) or error(("%s must be an integer, got %q"):format(name, v), 3)
  end
  local seed, cases = int("MS_FUZZ_SEED", 1), int("MS_FUZZ_CASES", default_cases)
  math.randomseed(seed)
  return seed, cases
end

function M.deep_copy(t)
  if type(t) ~= "table" then return t end
  local c = {}
  for k, v in pairs(t) do c[k] = M.deep_copy(v) end
  return c
end

return M
