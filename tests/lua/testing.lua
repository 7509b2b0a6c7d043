-- testing.lua: the small harness of the Lua tests. `T.test(name, fn)` runs one case and
-- records a failure instead of stopping; `T.finish()` prints "N passed, N failed" and exits
-- non-zero when anything failed.
local T = {}
local passed, failed = 0, 0

local function where(level)
  local info = debug.getinfo(level + 1, "Sl")
  return ("%s:%d"):format(info.short_src, info.currentline)
end

function T.test(name, fn)
  local ok, err = xpcall(fn, debug.traceback)
  if ok then
    passed = passed + 1
  else
    failed = failed + 1
    io.stderr:write(("FAIL %s\n%s\n"):format(name, err))
  end
end

function T.eq(got, want, msg)
  if got ~= want then
    error(("%s: expected %s, got %s"):format(msg or where(2), tostring(want), tostring(got)), 2)
  end
end

function T.near(got, want, tol, msg)
  tol = tol or 1e-6
  if not (math.abs(got - want) <= tol) then
    error(("%s: expected %.9g, got %.9g (tol %g)"):format(msg or where(2), want, got, tol), 2)
  end
end

function T.truthy(v, msg)
  if not v then error((msg or where(2)) .. ": expected a true value", 2) end
end

-- Deep comparison of nested tables of numbers (tolerance for floats).
function T.same(got, want, tol, path)
  path = path or "value"
  tol = tol or 0
  if type(want) == "table" then
    if type(got) ~= "table" then error(("%s: expected a table, got %s"):format(path, type(got)), 2) end
    if #got ~= #want then error(("%s: expected %d entries, got %d"):format(path, #want, #got), 2) end
    for i = 1, #want do T.same(got[i], want[i], tol, ("%s[%d]"):format(path, i)) end
  elseif type(want) == "number" and type(got) == "number" then
    if not (math.abs(got - want) <= tol) and not (got ~= got and want ~= want) then
      error(("%s: expected %.9g, got %.9g"):format(path, want, got), 2)
    end
  elseif got ~= want then
    error(("%s: expected %s, got %s"):format(path, tostring(want), tostring(got)), 2)
  end
end

-- fn must raise an error whose message contains every string in `needles` (plain find).
function T.raises(fn, ...)
  local ok, err = pcall(fn)
  if ok then error(where(2) .. ": expected an error, none was raised", 2) end
  err = tostring(err)
  for _, needle in ipairs({...}) do
    if not err:find(needle, 1, true) then
      error(("%s: error %q lacks %q"):format(where(2), err, needle), 2)
    end
  end
  return err
end

-- ---- helpers for tests that run the executable ---------------------------------------------------

-- s quoted for the shell.
function T.quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

function T.write_file(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

function T.read_file(path)
  local f = assert(io.open(path, "rb"))
  local text = f:read("a")
  f:close()
  return text
end

-- Exits 77 (skipped), saying why, where no GPU is usable: the first line of a GPU test.
function T.need_cuda()
  local ms = require "moonshard"
  if ms.cuda.is_available() then return end
  print("skipped: " .. tostring(ms.cuda.unavailable_reason()))
  os.exit(77)
end

-- The build's executable, for a test that launches ranks itself (mpirun, moonshard -n,
-- ms.spawn): exits 77 (skipped) when the test itself runs under mpirun or a tool it needs
-- (mpirun first, then each of `tools`) is missing.
function T.launcher_exe(tools)
  local build = assert(os.getenv("MS_BUILD_DIR"), "MS_BUILD_DIR must name the build directory")
  if os.getenv("OMPI_COMM_WORLD_SIZE") then
    print("skip: the tests themselves run under mpirun; they launch their own ranks")
    os.exit(77)
  end
  for _, tool in ipairs({ "mpirun", table.unpack(tools or {}) }) do
    if not os.execute("command -v " .. tool .. " > /dev/null 2>&1") then
      print(("skip: no %s%s"):format(tool, tool == "mpirun" and " (apt-get install openmpi-bin)" or ""))
      os.exit(77)
    end
  end
  return build .. "/moonshard", build
end

function T.finish()
  print(("%d passed, %d failed"):format(passed, failed))
  os.exit(failed == 0 and 0 or 1)
end

return T
