-- progress.lua: the docstrings of what watches a training run: moonshard.progress (the bar),
-- moonshard.metrics (a run's rows in a file), ms.plot (PNG line charts), ms.summary (the
-- model's table) and moonshard.watch (what the training scripts share of them).

-- A clock that advances 0.5 s at each read, so that examples print the same numbers on every
-- machine, and `out`, a file-like sink keeping what the bar writes.
local CLOCK = [[
local t = 0
local function clock() t = t + 0.5 return t end
]]
local SINK = [[
local written = {}
local out = {write = function(self, ...) for _, s in ipairs({...}) do written[#written + 1] = s end end}
]]

return {
  title = "Watching training: progress bars, metrics, plots, summaries",
  {
    name = "progress.Bar",
    sig = "progress.Bar({total =, desc =, unit = \"samples\", out = io.stderr, tty =, every =, seconds = 10, rank =, clock = ms.perf_counter, ncols =, lines = true, leave = true}) -> Bar",
    doc = [[
A progress bar for a loop (tqdm's role): step/total, percent, elapsed time, ETA, samples per
second and the running mean of any metrics (the loss). `local progress = require
"moonshard.progress"`.

On a terminal it is one line redrawn in place (`\r`) at most ten times a second, shown from the
moment it is made; when `out` is not a terminal (a log file, a pipe, a batch job) it prints a
plain line every `every` steps or every `seconds` seconds, and one at the end. Only rank 0
prints (`ms.distributed`'s rank once initialised, else the launcher's), so every rank can run
the same code. A step costs a clock read and a few additions: a metric given as a tensor is
read (`:item()`) only when the bar is drawn, so the loop never waits for the device on the
bar's account. Close it with `<close>` or `:close()`. Under `moonshard -n N` / `ms.spawn` the
launcher tells the ranks whether its own stdout and stderr are terminals (`$MS_TTY`).]],
    opts = {
      { "total", "integer", "nil", "the steps the loop will take (nil: unknown; no percent or ETA)" },
      { "desc", "string", "nil", "the text before the bar" },
      { "unit", "string", '"samples"', "what `step(n)` counts, shown as unit/s" },
      { "out", "file", "io.stderr", "where the bar goes (anything with :write)" },
      { "tty", "boolean", "whether out is a terminal", "force the live line (true) or plain lines (false)" },
      { "every", "integer", "nil", "off a terminal: a line every this many steps" },
      { "seconds", "number", "10 (without every)", "off a terminal: a line every this many seconds" },
      { "rank", "integer", "this process's rank", "only rank 0 prints" },
      { "clock", "function", "ms.perf_counter", "seconds, for tests" },
      { "ncols", "integer", "$COLUMNS or 100", "the live line is cut to this width" },
      { "lines", "boolean", "true", "false: no plain lines off a terminal" },
      { "leave", "boolean", "true", "keep the finished bar on screen (false: erase it)" },
    },
    example = CLOCK .. SINK .. [[
local progress = require "moonshard.progress"
-- off a terminal (tty = false), a line every 2 steps and one at the end
local bar = progress.Bar{total = 4, desc = "epoch 1", out = out, tty = false, every = 2, rank = 0, clock = clock}
for i = 1, 4 do bar:step(64, {loss = 1 / i}) end
bar:close()
for line in table.concat(written):gmatch("[^\n]+") do print(line) end   --> epoch 1: 2/4 (50%), 128 samples/s, elapsed 00:01, ETA 00:01, loss=0.75
-- epoch 1: 4/4 (100%), 128 samples/s, elapsed 00:02, ETA 00:00, loss=0.5208
-- epoch 1: 4/4 (100%), 102 samples/s, elapsed 00:02, ETA 00:00, loss=0.5208
]],
  },
  {
    name = "progress.Bar:step",
    sig = "bar:step([samples = 1 [, metrics]])",
    doc = [[
One step of the loop done. `samples` is how many samples it saw (for the rate); `metrics` a
table name -> number, or one-element tensor (anything with `:item()`), shown as the running
mean of the values given (of a tensor, of the values read at each drawing). On a terminal the
line is redrawn when 0.1 s has passed since the last drawing, and at the last step.]],
    example = CLOCK .. [[
local bar = require("moonshard.progress").Bar{total = 2, out = io.stdout, tty = false, lines = false, rank = 0, clock = clock}
bar:step(32, {loss = ms.tensor(2.0)})
bar:step(32, {loss = 1.0})
print(bar:stats().samples, bar:stats().metrics.loss)   --> 64	1.5
]],
  },
  {
    name = "progress.Bar:stats",
    sig = "bar:stats() -> {n =, total =, samples =, elapsed =, rate =, eta =, metrics = {name = mean}}",
    doc = [[
What the bar knows: steps done, samples seen, seconds elapsed, samples per second, the seconds
left (nil without a total) and each metric's running mean. Scripts log these to `--metrics`.]],
    example = CLOCK .. [[
local bar = require("moonshard.progress").Bar{total = 10, out = io.stdout, tty = false, lines = false, rank = 0, clock = clock}
for _ = 1, 5 do bar:step(100) end
local s = bar:stats()
print(s.n, s.samples, s.elapsed, s.rate, s.eta)   --> 5	500	3.0	166.66666666667	3.0
]],
  },
  {
    name = "progress.Bar:print",
    sig = "bar:print(text)",
    doc = [[
Prints a line on stdout above a live bar and redraws the bar under it (tqdm's `write`): the way
to print inside a loop that shows a bar, so neither is cut. Off a terminal it is a plain
print; on a rank other than 0 it prints nothing.]],
    example = [[
local bar = require("moonshard.progress").Bar{total = 3, tty = false, lines = false, rank = 0}
bar:print("Train Epoch: 1 [0/60000 (0%)]")   -- on stdout, above the bar
bar:step(64)
print(bar:stats().n)   --> 1
]],
  },
  {
    name = "progress.Bar:close",
    sig = "bar:close()",
    doc = [[
Draws the bar a last time and ends its line (a terminal), or prints the final plain line
(elsewhere, when a step was taken). Called by `<close>`; a second call does nothing.]],
    example = CLOCK .. SINK .. [[
do
  local bar <close> = require("moonshard.progress").Bar{total = 1, desc = "test", out = out, tty = false, rank = 0, clock = clock}
  bar:step(1000, {accuracy = 98.5})
end
print(table.concat(written))   --> test: 1/1 (100%), 1000 samples/s, elapsed 00:01, ETA 00:00, accuracy=98.5
]],
  },
  {
    name = "progress.Bar:text",
    sig = "bar:text() -> string",
    doc = [[
The live line as a terminal shows it: `desc  45%|#########-----------| 420/938 [00:12<00:15,
2234 samples/s, loss=0.2345]` (elapsed<ETA).]],
    example = CLOCK .. [[
local bar = require("moonshard.progress").Bar{total = 4, desc = "epoch 1", tty = false, lines = false, rank = 0, clock = clock}
bar:step(64, {loss = 0.5})
print(bar:text())   --> epoch 1  25%|#####---------------| 1/4 [00:01<00:03, 64.0 samples/s, loss=0.5]
]],
  },
  {
    name = "progress.Bar:line_text",
    sig = "bar:line_text() -> string",
    doc = [[The plain line printed off a terminal: `desc: 420/938 (45%), 2234 samples/s, elapsed 00:12, ETA 00:15, loss=0.2345`.]],
    example = CLOCK .. [[
local bar = require("moonshard.progress").Bar{total = 4, desc = "epoch 1", tty = false, lines = false, rank = 0, clock = clock}
bar:step(64)
print(bar:line_text())   --> epoch 1: 1/4 (25%), 64.0 samples/s, elapsed 00:01, ETA 00:03
]],
  },
  {
    name = "progress.isatty",
    sig = "progress.isatty(file) -> boolean",
    doc = [[
Whether a Lua file handle is a terminal. In a rank that `moonshard -n` or `ms.spawn` launched
(whose output goes through mpirun's pipes) it answers for the launcher's stdout and stderr.]],
    example = [[
local f = io.popen("true")
print(require("moonshard.progress").isatty(f))   --> false
f:close()
]],
  },
  {
    name = "progress.format_time",
    sig = "progress.format_time(seconds) -> string",
    doc = [[Seconds as the bar shows them: `mm:ss`, `h:mm:ss` from an hour, `?` when unknown.]],
    example = [[
local progress = require "moonshard.progress"
print(progress.format_time(65), progress.format_time(7387), progress.format_time(nil))   --> 01:05	2:03:07	?
]],
  },
  {
    name = "metrics.Logger",
    sig = "metrics.Logger(path [, {columns = metrics.COLUMNS}]) -> Logger",
    doc = [[
A training run's numbers, a row per step or epoch, written to `path` as CSV (a name ending
`.csv`: a header line, then a line per row, empty where a column is missing) or JSON lines
(`.jsonl`, `.json`: an object per line with the columns given; NaN and infinities as null). The
file is created (replacing one there) and every row is flushed as it is logged, so a crash
keeps every row before it. With `path` nil the rows are only kept in memory; they are in
`logger.rows` in any case. `local metrics = require "moonshard.metrics"`.]],
    opts = { { "columns", "list of strings", "metrics.COLUMNS", "the columns, in the file's order" } },
    example = [[
local metrics = require "moonshard.metrics"
local path = os.tmpname() .. ".csv"
do
  local log <close> = metrics.Logger(path)
  log:log{kind = "step", step = 10, epoch = 1, loss = 0.31, lr = 1.0}
end
for line in io.lines(path) do print(line) end   --> kind,step,epoch,loss,test_loss,accuracy,lr,samples_per_s,time
-- step,10,1,0.31,,,1,,
os.remove(path)
]],
  },
  {
    name = "metrics.COLUMNS",
    sig = "metrics.COLUMNS",
    doc = [[
The columns of the scripts' rows: `kind` ("step", "epoch", or another word such as gpt_fsdp's
"eval"), `step` (counted over the whole run), `epoch`, `loss` (training), `test_loss`,
`accuracy` (percent), `lr`, `samples_per_s`, `time` (seconds since the run began).]],
    example = [[
print(table.concat(require("moonshard.metrics").COLUMNS, " "))   --> kind step epoch loss test_loss accuracy lr samples_per_s time
]],
  },
  {
    name = "metrics.Logger:log",
    sig = "logger:log(row)",
    doc = [[
Appends a row: a table column -> number, one-element tensor, or word (letters, digits, `_ . -`).
A column the logger does not have, or another value, is an error naming it.]],
    example = [[
local log = require("moonshard.metrics").Logger(nil)
log:log{kind = "epoch", epoch = 1, accuracy = ms.tensor(97.5)}
print(log.rows[1].accuracy)   --> 97.5
print(pcall(log.log, log, {acuracy = 1}) == false)   --> true
]],
  },
  {
    name = "metrics.Logger:close",
    sig = "logger:close()",
    doc = [[Closes the file (the rows stay in `logger.rows`). Called by `<close>`; safe twice.]],
    example = [[
local log = require("moonshard.metrics").Logger(nil)
log:close(); log:close()
print(#log.rows)   --> 0
]],
  },
  {
    name = "metrics.read",
    sig = "metrics.read(path) -> rows",
    doc = [[The rows of a metrics file, CSV or JSON lines (by its name), each a table column -> number or word.]],
    example = [[
local metrics = require "moonshard.metrics"
local path = os.tmpname() .. ".jsonl"
local log = metrics.Logger(path)
log:log{kind = "step", step = 1, loss = 2.25}
log:close()
local rows = metrics.read(path)
print(#rows, rows[1].kind, rows[1].loss)   --> 1	step	2.25
os.remove(path)
]],
  },
  {
    name = "metrics.charts",
    sig = "metrics.charts(rows) -> charts",
    doc = [[
The charts of a run's rows, for `ms.plot`: the losses by step (the training loss of the step
rows and of the epoch rows, and every row's `test_loss`), and the test accuracy by epoch when
the rows have one. Series without points are left out.]],
    example = [[
local rows = {{kind = "step", step = 1, loss = 2.3}, {kind = "epoch", step = 2, epoch = 1, loss = 1.9, test_loss = 1.2, accuracy = 71.0}}
local charts = require("moonshard.metrics").charts(rows)
print(#charts, charts[1].title, #charts[1].series, charts[2].title)   --> 2	loss	3	test accuracy (%)
]],
  },
  {
    name = "metrics.plot",
    sig = "metrics.plot(rows, png_path [, {width = 800, height = 360}]) -> png_path",
    doc = [[Draws `metrics.charts(rows)` into a PNG file with `ms.plot` (height is per chart).]],
    example = [[
local metrics = require "moonshard.metrics"
local rows = {}
for step = 1, 50 do rows[step] = {kind = "step", step = step, loss = 2 / step} end
local png = os.tmpname() .. ".png"
print(metrics.plot(rows, png) == png)   --> true
os.remove(png)
]],
  },
  {
    name = "ms.plot",
    sig = "ms.plot(path, chart_or_charts [, {width = 800, height = 400}]) -> path",
    doc = [[
Writes line charts as a PNG file (opens in any image viewer): a chart is `{title =, xlabel =,
ylabel =, xlim = {lo, hi}, ylim = {lo, hi}, series = {{label =, x =, y =, color = 0xRRGGBB}, ...}}`,
each series a line (x defaults to 1, 2, ...; x and y lists of numbers or 1-D tensors; a NaN
leaves a gap; points are marked when there are at most 60), over axes with ticks at round
numbers, a light grid, a legend and the title. A list of charts are stacked, each `height`
pixels tall. The file appears atomically. matplotlib's `plt.plot` + `savefig`, in a few lines
and no dependency (the encoder is engine/src/io/png.c, over zlib).]],
    opts = {
      { "width", "integer", "800", "the image's width, 64 to 8192 pixels" },
      { "height", "integer", "400", "each chart's height, 64 to 8192 pixels" },
    },
    example = [[
local losses = {}
for i = 1, 100 do losses[i] = 2.3 * math.exp(-i / 30) end
local png = os.tmpname() .. ".png"
print(ms.plot(png, {title = "loss", xlabel = "step", series = {{label = "train", y = losses}}}) == png)   --> true
local f = io.open(png, "rb"); print(f:read(4):sub(2)); f:close()   --> PNG
os.remove(png)
]],
  },
  {
    name = "ms.summary",
    sig = "ms.summary(model, input_shape_or_tensor [, {dtype = ms.float32, device =}]) -> Summary",
    doc = [[
torchinfo's `summary`: runs one forward of the model on the input (a tensor, or a shape filled
with zeros; ones for an integer dtype, as 1-based token ids) with a hook on every module, in
eval mode and without autograd (each module's mode is restored), and returns a table that
prints as: every module in `named_modules` order, indented by depth, with its type, its
output's shape (`--` when it was not called, as a ModuleList) and its parameter count (its
subtree's); the total, trainable and non-trainable parameters (`model:parameters()`, tied
weights once); and the memory in MB: the input, the parameters and buffers, and the
forward/backward pass estimated as twice the bytes of every leaf module's outputs. Its fields:
`rows` ({name, type, depth, output_shape, params}), `total_params`, `trainable_params`,
`non_trainable_params`, `param_bytes`, `activation_bytes`, `input_bytes`.]],
    opts = {
      { "dtype", "dtype", "ms.float32", "the dtype of an input given as a shape" },
      { "device", "string", "the default device", "the device of an input given as a shape" },
    },
    example = [[
local model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
local s = ms.summary(model, {1, 4})
print(s.total_params, s.rows[2].output_shape)   --> 58	[1, 8]
print(tostring(s):match("Total params: [%d,]+"))   --> Total params: 58
]],
  },
  {
    name = "watch.add_arguments",
    sig = "watch.add_arguments(parser)",
    doc = [[
Adds the training scripts' watching options to an `argparse` parser: `--no-progress`,
`--metrics FILE` (.csv, .jsonl or .json), `--plot FILE.png` and `--summary`. The scripts
(scripts/mnist.lua, mnist_fsdp.lua, gpt_fsdp.lua) use it with `--log-interval N`, the
batches between metric rows and between the bar's plain lines. `local watch = require
"moonshard.watch"`.]],
    example = [[
local watch = require "moonshard.watch"
local parser = require("moonshard.argparse").ArgumentParser{prog = "train.lua", exit_on_error = false}
watch.add_arguments(parser)
local args = parser:parse_args({"--metrics", "run.csv", "--summary"})
print(args.metrics, args.summary, args.no_progress)   --> run.csv	true	false
]],
  },
  {
    name = "watch.check_arguments",
    sig = "watch.check_arguments(parser, args)",
    doc = [[
Refuses, in one line through `parser:error` (the usage, status 2, no traceback), a `--metrics`
name that is not .csv/.jsonl/.json, a `--plot` that is not .png, or either in a directory that
does not exist: before any rank starts or any epoch runs.]],
    example = [[
local watch = require "moonshard.watch"
local parser = require("moonshard.argparse").ArgumentParser{prog = "train.lua", exit_on_error = false}
watch.add_arguments(parser)
print(pcall(watch.check_arguments, parser, parser:parse_args({"--plot", "curves.jpg"})))   --> false	--plot curves.jpg: expected a file name ending .png
]],
  },
  {
    name = "watch.Run",
    sig = "watch.Run(args, rank) -> Run",
    doc = [[
A run's watcher on this rank, from the parsed options: rank 0 keeps the rows (for `--metrics`
and `--plot`) and prints; the other ranks only count. Its methods: `run:bar{...}` (a
`progress.Bar` with the script's settings: rank, `every = --log-interval`, nothing under
`--no-progress`), `run:log(row)` (a metrics row, its `time` filled in), `run:logging()` (whether
rows are kept), `run:summary(model, input)` (prints `ms.summary` under `--summary`) and
`run:finish()` (closes the file and writes the plot).]],
    example = [[
local watch = require "moonshard.watch"
local run = watch.Run({log_interval = 10, no_progress = true}, 0)
local bar = run:bar{total = 3}
for _ = 1, 3 do bar:step(8) end
bar:close()
print(run:logging(), bar:stats().samples)   --> false	24
run:finish()
]],
  },
  {
    name = "watch.Run:bar",
    sig = "run:bar(opts) -> progress.Bar",
    doc = [[A `progress.Bar` with `opts`, on this run's rank, plain lines every `--log-interval` steps (unless `opts.every` says otherwise), silent under `--no-progress`.]],
    example = [[
local bar = require("moonshard.watch").Run({log_interval = 5, no_progress = true}, 0):bar{total = 2}
print(bar.every, bar.tty)   --> 5	false
]],
  },
  {
    name = "watch.Run:log",
    sig = "run:log(row)",
    doc = [[Appends a `metrics` row (rank 0, when `--metrics` or `--plot` was given), with `time` the seconds since the run began.]],
    example = [[
local run = require("moonshard.watch").Run({plot = "unused.png"}, 0)
run:log{kind = "step", step = 1, loss = 2.0}
print(run.logger.rows[1].loss, run.logger.rows[1].time >= 0)   --> 2.0	true
]],
  },
  {
    name = "watch.Run:logging",
    sig = "run:logging() -> boolean",
    doc = [[Whether this rank keeps rows: measure what they hold (a loss read from the device) only then.]],
    example = [[
print(require("moonshard.watch").Run({metrics = nil}, 0):logging())   --> false
]],
  },
  {
    name = "watch.Run:summary",
    sig = "run:summary(model, input)",
    doc = [[Prints `ms.summary(model, input)` under `--summary`, on rank 0.]],
    example = [[
local run = require("moonshard.watch").Run({summary = false}, 0)
run:summary(nn.Linear(2, 2), {1, 2})   -- without --summary: nothing
print(run.args.summary)   --> false
]],
  },
  {
    name = "watch.Run:finish",
    sig = "run:finish()",
    doc = [[Closes the `--metrics` file and, under `--plot`, draws the rows' charts (`metrics.plot`) into it, saying so on stderr.]],
    example = [[
local png = os.tmpname() .. ".png"
local run = require("moonshard.watch").Run({plot = png}, 0)
run:log{kind = "step", step = 1, loss = 2.0}
run:log{kind = "step", step = 2, loss = 1.5}
run:finish()
local f = io.open(png, "rb"); print(f ~= nil); f:close()   --> true
os.remove(png)
]],
  },
}
