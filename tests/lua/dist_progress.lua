-- dist_progress.lua: under mpirun on 1..4 ranks, a progress.Bar given no rank prints on rank 0
-- only: before the process group exists (the launcher's OMPI_COMM_WORLD_RANK) and after (the
-- group's rank); every rank still counts its own steps. A failure ends the launch non-zero.
local ms = require "moonshard"
local progress = require "moonshard.progress"
local dist = ms.distributed

local function sink()
  local s = { text = "" }
  function s:write(...) for _, v in ipairs({ ... }) do self.text = self.text .. v end end
  return s
end

local function check(cond, what)
  if not cond then
    io.stderr:write(("FAIL [rank %s] %s\n"):format(os.getenv("OMPI_COMM_WORLD_RANK"), what))
    os.exit(1)
  end
end

-- One bar each way (live line, plain lines), stepped 3 times; what it wrote.
local function run_bars()
  local live, plain = sink(), sink()
  local a = progress.Bar { total = 3, out = live, tty = true }
  local b = progress.Bar { total = 3, out = plain, tty = false, every = 1 }
  for _ = 1, 3 do a:step(2); b:step(2) end
  a:print("a line")
  a:close(); b:close()
  check(a:stats().samples == 6 and b:stats().samples == 6, "every rank counts its steps")
  return live.text, plain.text
end

local before_live, before_plain = run_bars()
dist.init_process_group({ backend = "mpi", timeout = 60 })
local R = dist.get_rank()
local after_live, after_plain = run_bars()
for when, texts in pairs({ before = { before_live, before_plain }, after = { after_live, after_plain } }) do
  if R == 0 then
    check(texts[1]:find("3/3", 1, true) ~= nil, when .. ": rank 0 draws the live line: " .. texts[1])
    check(select(2, texts[2]:gsub("\n", "")) == 4, when .. ": rank 0 prints 3 lines and the last: " .. texts[2])
  else
    check(texts[1] == "" and texts[2] == "", when .. ": rank " .. R .. " printed: " .. texts[1] .. texts[2])
  end
end
dist.barrier()
if R == 0 then print(("dist_progress: %d rank(s) ok"):format(dist.get_world_size())) end
dist.destroy_process_group()
