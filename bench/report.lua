-- report.lua: turns the raw lines bench/run.sh collected (every part, every repeat) into the
-- readable tables and the median raw lines, one per measurement, that a note can quote.
-- Run: build/moonshard bench/report.lua RAW_FILE     (or any Lua 5.4 with LUA_PATH="lua/?.lua;;"
-- for moonshard.argparse; see bench/README.md)
--   in:  BENCH <part> <id> k=v ...              one measurement (peak, ops, comm), per repeat
--        BENCH-RANK <part> config=C run=R k=v ... one rank's numbers of one training run
--        BENCH-SKIP <part> reason...             a part that could not run here
--   out: tables, then "BENCH <part> <id> k=v ... n=K": medians over the K repeats.

local argparse = require "moonshard.argparse"
local parser = argparse.ArgumentParser{description = "bench/run.sh's raw lines as tables and medians"}
parser:add_argument("raw_file", {metavar = "RAW_FILE", help = "the raw lines bench/run.sh collected"})
local path = parser:parse_args(arg).raw_file

-- The seed's Net per sample, from its layer shapes (2 flops per multiply-add): conv1 1->32 3x3 on
-- 28x28 (26x26 out), conv2 32->64 3x3 (24x24 out), fc1 9216->128, fc2 128->10. Backward: every
-- layer's grad-weight plus the grad-input of all but conv1 (its input needs none).
local CONV1, CONV2 = 2 * 32 * 26 * 26 * 1 * 9, 2 * 64 * 24 * 24 * 32 * 9
local FC1, FC2 = 2 * 9216 * 128, 2 * 128 * 10
local FWD = CONV1 + CONV2 + FC1 + FC2
local FWD_BWD = FWD + CONV1 + 2 * (CONV2 + FC1 + FC2)

local function median(xs)
  local s = table.move(xs, 1, #xs, 1, {})
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end

-- ---- read --------------------------------------------------------------------------------------

local measures, order = {}, {} -- "part id" -> {part=, id=, keys = {k...}, values = {k -> {..}}, text = {k -> str}}
local ranks = {}               -- BENCH-RANK lines
local skips = {}

local function fields(rest)
  local kv, keys = {}, {}
  for k, v in rest:gmatch("(%S+)=(%S+)") do
    kv[k] = v
    keys[#keys + 1] = k
  end
  return kv, keys
end

local function add_measure(part, id, kv, keys)
  local key = part .. " " .. id
  local m = measures[key]
  if not m then
    m = { part = part, id = id, keys = keys, values = {}, text = {} }
    measures[key], order[#order + 1] = m, key
  end
  for _, k in ipairs(keys) do
    local v = tonumber(kv[k])
    if v then
      m.values[k] = m.values[k] or {}
      table.insert(m.values[k], v)
    else
      m.text[k] = kv[k]
    end
  end
end

local raw, why = io.open(path)
if not raw then parser:fail(why) end
for line in raw:lines() do
  local kind, part, rest = line:match("^(BENCH%S*)%s+(%S+)%s*(.*)$")
  if kind == "BENCH" then
    local id, kvs = rest:match("^(%S+)%s*(.*)$")
    add_measure(part, id, fields(kvs))
  elseif kind == "BENCH-RANK" then
    local kv = fields(rest)
    kv.part = part
    ranks[#ranks + 1] = kv
  elseif kind == "BENCH-SKIP" then
    skips[#skips + 1] = ("%s: %s"):format(part, rest)
  end
end
raw:close()

local function get(part, id, key)
  local m = measures[part .. " " .. id]
  return m and m.values[key] and median(m.values[key])
end

-- ---- training runs: one BENCH line per run from its ranks' lines ---------------------------------

local peak2 = get("peak", "fma/t2", "gflops")
local runs, run_order = {}, {}
for _, r in ipairs(ranks) do
  local key = r.config .. " " .. r.run
  if not runs[key] then
    runs[key] = { config = r.config, ranks = {} }
    run_order[#run_order + 1] = key
  end
  table.insert(runs[key].ranks, r)
end
for _, key in ipairs(run_order) do
  local run = runs[key]
  -- The epoch ends when the slowest rank ends; samples add up over ranks.
  local train_s, test_s, ntrain, ntest, hwm, exposed, acc = 0, 0, 0, 0, {}, nil, nil
  table.sort(run.ranks, function(a, b) return tonumber(a.rank) < tonumber(b.rank) end)
  for _, r in ipairs(run.ranks) do
    train_s, test_s = math.max(train_s, tonumber(r.train_s)), math.max(test_s, tonumber(r.test_s))
    ntrain, ntest = ntrain + tonumber(r.train_samples), ntest + tonumber(r.test_samples)
    hwm[#hwm + 1] = tonumber(r.vmhwm_kb) and tonumber(r.vmhwm_kb) / 1024
    local e = tonumber(r.exposed_comm_s or "")
    if e then exposed = math.max(exposed or 0, e) end
    acc = tonumber(r.accuracy)
  end
  local epoch_s = train_s + test_s
  local flops = ntrain * FWD_BWD + ntest * FWD
  local line = { ("epoch_s=%.3f train_s=%.3f test_s=%.3f"):format(epoch_s, train_s, test_s),
    ("train_samples_per_s=%.1f samples_per_s=%.1f"):format(ntrain / train_s, (ntrain + ntest) / epoch_s),
    ("tflop=%.4f gflops=%.2f pct_peak=%s"):format(flops / 1e12, flops / epoch_s / 1e9,
      peak2 and ("%.1f"):format(100 * flops / epoch_s / 1e9 / peak2) or "n/a") }
  local maxh = 0
  for i, h in ipairs(hwm) do
    line[#line + 1] = ("vmhwm_mb_r%d=%.1f"):format(i - 1, h or 0)
    maxh = math.max(maxh, h or 0)
  end
  line[#line + 1] = ("vmhwm_mb_max=%.1f"):format(maxh)
  line[#line + 1] = ("exposed_comm_pct=%s"):format(exposed and ("%.2f"):format(100 * exposed / train_s) or "n/a")
  line[#line + 1] = ("accuracy=%s train_samples=%d test_samples=%d ranks=%d"):format(
    acc and ("%.2f"):format(acc) or "n/a", ntrain, ntest, #run.ranks)
  add_measure("epoch", run.config, fields(table.concat(line, " ")))
end

-- moonshard against PyTorch's faster DDP configuration and against the fastest PyTorch run of all,
-- float32 against float32 (configs without a dtype suffix) and bfloat16 mixed precision against
-- PyTorch's bfloat16 autocast (suffix _bf16).
local function compare(suffix)
  local ms_epoch = get("epoch", "moonshard_fsdp_2x1" .. suffix, "epoch_s")
  if not ms_epoch then return end
  local best_ddp, best_ddp_cfg, best, best_cfg = math.huge, nil, math.huge, nil
  for _, key in ipairs(order) do
    local m = measures[key]
    local same_dtype = suffix == "" and not m.id:match("_bf16$") or suffix ~= "" and m.id:sub(-#suffix) == suffix
    if m.part == "epoch" and m.id:match("^torch_") and same_dtype then
      local e = median(m.values.epoch_s)
      if m.id:match("^torch_ddp") and e < best_ddp then best_ddp, best_ddp_cfg = e, m.id end
      if e < best then best, best_cfg = e, m.id end
    end
  end
  if best_cfg then
    add_measure("compare", "moonshard_vs_torch" .. suffix, fields(
      ("speedup_vs_best_ddp=%s best_ddp=%s speedup_vs_best=%.2f best=%s"):format(
        best_ddp_cfg and ("%.2f"):format(best_ddp / ms_epoch) or "n/a", best_ddp_cfg or "none",
        best / ms_epoch, best_cfg)))
  end
end
compare("")
compare("_bf16")

-- ---- print ---------------------------------------------------------------------------------------

local function med_str(m, k, fmt)
  if m.values[k] then return (fmt or "%.2f"):format(median(m.values[k])) end
  return m.text[k] or "-"
end

local function section(title) print(("\n== %s =="):format(title)) end

local reps = 0
for _, key in ipairs(order) do
  local m = measures[key]
  if m.part == "peak" then
    if reps == 0 then section("machine peak (measured at start)") end
    reps = math.max(reps, #(m.values.gflops or m.values.gbs))
    if m.values.gflops then
      print(("  %-10s %9s GFLOP/s  (fp32 FMA loop, isa %s)"):format(m.id, med_str(m, "gflops", "%.1f"), m.text.isa or "?"))
    else
      print(("  %-10s %9s GB/s     (streaming copy, bytes read + written)"):format(m.id, med_str(m, "gbs", "%.2f")))
    end
  end
end

local printed = {}
for _, key in ipairs(order) do
  local m = measures[key]
  if m.part == "ops" then
    if not printed.ops then
      section("ops (median per call; % of the peak with the same threads: FMA for GFLOP/s, copy for GB/s)")
      print(("  %-40s %4s %10s %-7s %7s %10s"):format("op/shape", "thr", "rate", "unit", "% peak", "ms/call"))
      printed.ops = true
    end
    local id, t = m.id:match("^(.*)/t(%d+)$")
    local unit = m.values.gflops and "GFLOP/s" or "GB/s"
    print(("  %-40s %4s %10s %-7s %7s %10s"):format(id or m.id, t or "?",
      med_str(m, m.values.gflops and "gflops" or "gbs"), unit, med_str(m, "pct_peak", "%.1f"), med_str(m, "ms", "%.3f")))
  elseif m.part == "comm" then
    if not printed.comm then
      section("collectives between ranks (float32; busbw = bytes each rank receives per second; % of one core's memcpy rate)")
      print(("  %-16s %12s %7s %10s %10s"):format("collective", "bytes", "ranks", "busbw GB/s", "% peak") .. "    ms/call")
      printed.comm = true
    end
    local name, bytes, r = m.id:match("^(.-)/(%d+)B/r(%d+)$")
    print(("  %-16s %12s %7s %10s %10s %10s"):format(name or m.id, bytes or "?", r or "?",
      med_str(m, "gbs", "%.3f"), med_str(m, "pct_peak", "%.1f"), med_str(m, "ms", "%.4f")))
  end
end

local any_epoch = false
for _, key in ipairs(order) do
  local m = measures[key]
  if m.part == "epoch" then
    if not any_epoch then
      section(("MNIST epoch, the seed's Net (%.1f MFLOP fwd, %.1f MFLOP fwd+bwd per sample; %% of the 2-thread FMA peak)"):format(FWD / 1e6, FWD_BWD / 1e6))
      print(("  %-26s %8s %8s %7s %9s %7s %12s %9s %7s"):format("config", "epoch s", "train s", "test s",
        "samples/s", "% peak", "VmHWM MB max", "exp.comm%", "acc %"))
      any_epoch = true
    end
    print(("  %-26s %8s %8s %7s %9s %7s %12s %9s %7s"):format(m.id, med_str(m, "epoch_s", "%.2f"),
      med_str(m, "train_s", "%.2f"), med_str(m, "test_s", "%.2f"), med_str(m, "samples_per_s", "%.0f"),
      med_str(m, "pct_peak", "%.1f"), med_str(m, "vmhwm_mb_max", "%.0f"), med_str(m, "exposed_comm_pct"),
      med_str(m, "accuracy")))
  end
end
for _, suffix in ipairs({ "", "_bf16" }) do
  local cmp = measures["compare moonshard_vs_torch" .. suffix]
  if cmp then
    print(("  moonshard's speed-up%s: %sx over PyTorch's faster DDP configuration (%s), %sx over its fastest run (%s)"):format(
      suffix == "" and "" or " in bfloat16", med_str(cmp, "speedup_vs_best_ddp"), cmp.text.best_ddp,
      med_str(cmp, "speedup_vs_best"), cmp.text.best))
  end
end

if #skips > 0 then
  section("skipped")
  for _, s in ipairs(skips) do print("  " .. s) end
end

section("raw lines (medians over the repeats: n = how many)")
for _, key in ipairs(order) do
  local m = measures[key]
  local parts = {}
  local n = 0
  for _, k in ipairs(m.keys) do
    local v = m.values[k]
    if v then
      n = math.max(n, #v)
      local x = median(v)
      parts[#parts + 1] = ("%s=%s"):format(k, math.type(x) == "integer" and tostring(x) or ("%.6g"):format(x))
    else
      parts[#parts + 1] = ("%s=%s"):format(k, m.text[k])
    end
  end
  print(("BENCH %s %s %s n=%d"):format(m.part, m.id, table.concat(parts, " "), n))
end
