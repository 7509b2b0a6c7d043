-- watch.lua: what the training scripts (scripts/mnist.lua, mnist_fsdp.lua, gpt_fsdp.lua) share
-- so that a run can be watched: the options --no-progress, --metrics FILE, --plot FILE.png and
-- --summary, checked before anything starts; progress bars with the script's settings; the
-- rows of --metrics (rank 0's), and the chart of --plot drawn from them at the end.
--   watch.add_arguments(parser); local args = parser:parse_args(arg); watch.check_arguments(parser, args)
--   local run = watch.Run(args, rank)
--   local bar <close> = run:bar{total = #loader, desc = "epoch 1"}
--   run:log{kind = "epoch", epoch = 1, step = n, loss = ...}; run:finish()
local ms = require "moonshard"
local progress = require "moonshard.progress"
local metrics = require "moonshard.metrics"

local M = {}

function M.add_arguments(parser)
  parser:add_argument("--no-progress", { action = "store_true",
    help = "no progress bar (by default rank 0 draws one on stderr when it is a terminal, and prints a "
      .. "plain line every --log-interval batches when it is not)" })
  parser:add_argument("--metrics", { metavar = "FILE",
    help = "write a row every --log-interval batches and one per epoch to FILE (CSV if it ends .csv, JSON "
      .. "lines if .jsonl or .json)" })
  parser:add_argument("--plot", { metavar = "FILE.png", help = "draw the loss and accuracy curves into FILE.png at the end" })
  parser:add_argument("--summary", { action = "store_true",
    help = "print the model's layers, output shapes and parameter counts before training" })
end

-- The directory part of a path ("." for a bare name).
local function dir_of(path) return path:match("^(.*)/[^/]*$") or "." end

local function is_dir(path) return (pcall(ms._list_dir, path)) end

-- One line naming the option, before any rank starts: a file name --metrics cannot write, a
-- --plot that is not a .png, a directory that is not there.
function M.check_arguments(parser, args)
  for _, opt in ipairs({ "metrics", "plot" }) do
    local path = args[opt]
    if path then
      if opt == "metrics" and not (path:match("%.csv$") or path:match("%.jsonl?$")) then
        parser:error(("--metrics %s: expected a file name ending .csv, .jsonl or .json"):format(path))
      end
      if opt == "plot" and not path:match("%.png$") then
        parser:error(("--plot %s: expected a file name ending .png"):format(path))
      end
      if not is_dir(dir_of(path)) then
        parser:error(("--%s %s: no directory %s"):format(opt, path, dir_of(path)))
      end
    end
  end
end

local Run = {}
Run.__index = Run

-- A run's watcher on this rank: rank 0 keeps the rows (for --metrics and --plot) and prints.
function M.Run(args, rank)
  local self = setmetatable({ args = args, rank = rank or 0, start = ms.perf_counter() }, Run)
  if self.rank == 0 and (args.metrics or args.plot) then self.logger = metrics.Logger(args.metrics) end
  return self
end

-- Whether rows are being kept (so the loop should measure what they hold).
function Run:logging() return self.logger ~= nil end

-- A progress bar: on rank 0, on stderr; plain lines every --log-interval batches off a terminal;
-- nothing with --no-progress.
function Run:bar(opts)
  opts.rank = self.rank
  opts.every = opts.every or self.args.log_interval
  if self.args.no_progress then opts.tty, opts.lines = false, false end
  return progress.Bar(opts)
end

-- Appends a row (metrics.COLUMNS) with its time since the run began; nothing off rank 0.
function Run:log(row)
  if not self.logger then return end
  row.time = row.time or ms.perf_counter() - self.start
  self.logger:log(row)
end

-- Prints the model's summary under --summary (rank 0).
function Run:summary(model, input)
  if self.args.summary and self.rank == 0 then print(ms.summary(model, input)) end
end

-- Closes the --metrics file and draws --plot from the rows.
function Run:finish()
  if not self.logger then return end
  self.logger:close()
  if self.args.plot then
    metrics.plot(self.logger.rows, self.args.plot)
    io.stderr:write(("wrote %s\n"):format(self.args.plot))
  end
end

return M
