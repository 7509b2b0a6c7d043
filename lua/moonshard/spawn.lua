-- spawn.lua: ms.spawn(main, nprocs, ...), the counterpart of torch.multiprocessing.spawn on
-- moonshard's process runtime (MPI). Ranks are processes that each run the whole script, so:
--   * launched (mpirun set OMPI_COMM_WORLD_SIZE): calls main(rank, world_size, ...) and returns
--     its results; the world must have nprocs ranks.
--   * not launched, nprocs == 1: calls main(0, 1, ...) here.
--   * not launched, nprocs > 1: this process becomes the launcher. It re-runs the same command
--     line (interpreter options, script, arguments) under `mpirun -np nprocs`, waits for the
--     ranks, and exits with their status: code after ms.spawn never runs in the launcher, and
--     code before it runs once in the launcher and once in every rank (guard side effects with
--     `if os.getenv("OMPI_COMM_WORLD_RANK")`, as `if __name__ == "__main__"` in Python).
-- An error on any rank ends every rank (mpirun aborts the job) and the launcher exits non-zero;
-- SIGINT or SIGTERM to the launcher ends the job and exits with 128 + the signal.

local function env_int(name)
  local v = os.getenv(name)
  return v and math.tointeger(tonumber(v))
end

-- The command line that started this script, from the global `arg`: the interpreter at the
-- lowest index, then its options, the script and its arguments. Any -n is dropped (the launch
-- sets its own). Errors where the script cannot be re-run by other processes.
local function command_line()
  local arg = rawget(_G, "arg")
  if type(arg) ~= "table" then
    error("ms.spawn: no global 'arg': the launcher re-runs a script started from the command line", 3)
  end
  local lo = 0
  while arg[lo - 1] ~= nil do lo = lo - 1 end
  local words, has_code, skip = {}, false, false
  for i = lo + 1, #arg do
    local a = arg[i]
    if skip then
      skip = false
    elseif i < 0 and a == "-n" then
      skip = true -- "-n N": its value is the next word
    elseif not (i < 0 and a:match("^%-n%d")) then
      if i < 0 and a:match("^%-e") then has_code = true end
      words[#words + 1] = a
    end
  end
  -- a script named "-" (without "--" before it) is stdin, which only one process can read
  local stdin = (lo < 0 and arg[0] == "-" and arg[-1] ~= "--") or (lo == 0 and not has_code)
  if stdin then
    error("ms.spawn: the script must be a file (stdin cannot be re-read by every rank)", 3)
  end
  return arg[lo], words
end

local function spawn(main, nprocs, ...)
  if type(main) ~= "function" and not (getmetatable(main) or {}).__call then
    error(("ms.spawn: main must be a function, got %s"):format(type(main)), 2)
  end
  if math.type(nprocs) ~= "integer" or nprocs < 1 then
    error(("ms.spawn: nprocs must be a positive integer, got %s"):format(tostring(nprocs)), 2)
  end
  local world = env_int("OMPI_COMM_WORLD_SIZE")
  if world then
    if world ~= nprocs then
      error(("ms.spawn: asked for %d processes, but the launcher started %d"):format(nprocs, world), 2)
    end
    return main(env_int("OMPI_COMM_WORLD_RANK"), world, ...)
  end
  if nprocs == 1 then return main(0, 1, ...) end
  -- mpirun runs as this process's child (not through os.execute, whose shell ignores SIGINT and
  -- lets a SIGTERM kill only the launcher): SIGINT/SIGTERM here end every rank (lua/l_launch.c)
  local exe, words = command_line()
  os.exit(require("moonshard")._launch_mpirun(nprocs, exe, words))
end

return spawn
