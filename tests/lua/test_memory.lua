-- test_memory.lua: the engine reports tensor bytes to Lua, so a loop that drops large tensors
-- stays bounded without collectgarbage(); and ms.memory_stats() tells the truth.
local T = require "testing"
local ms = require "moonshard"

-- Resident set size of this process in bytes, from /proc (Linux).
local function rss()
  local f = assert(io.open("/proc/self/statm"))
  local _, resident = f:read("n", "n")
  f:close()
  return resident * 4096
end

T.test("300 tensors of 16 MB without collectgarbage stay bounded", function()
  local before = rss()
  local peak_rss, peak_engine = 0, 0
  for _ = 1, 300 do
    local t = ms.ones(4 * 2^20) -- 16 MB of float32, touched so it is resident
    peak_rss = math.max(peak_rss, rss() - before)
    peak_engine = math.max(peak_engine, ms.memory_stats().current)
    t = nil -- luacheck: ignore (dropped; only the collector can free it)
  end
  local mb = 2^20
  -- 300 x 16 MB is 4800 MB; the collector must keep far below that (a few dozen tensors).
  T.truthy(peak_engine < 600 * mb, ("engine peak %.0f MB"):format(peak_engine / mb))
  T.truthy(peak_rss < 700 * mb, ("resident growth %.0f MB"):format(peak_rss / mb))
end)

T.test("memory_stats counts current and peak bytes", function()
  collectgarbage()
  ms.reset_peak_memory_stats()
  local base = ms.memory_stats().current
  local t = ms.zeros(1000, 1000, {dtype = "float64"})
  local s = ms.memory_stats()
  T.eq(s.current - base, 8000000)
  T.truthy(s.peak >= s.current)
  T.eq(s.device, "cpu")
  T.eq(math.type(s.by_category.other), "integer")
  t = nil -- luacheck: ignore
  collectgarbage()
  T.eq(ms.memory_stats().current, base)
  T.truthy(ms.memory_stats().peak >= base + 8000000)
end)

T.test("a view keeps its storage alive after the base is dropped", function()
  collectgarbage()
  local base = ms.memory_stats().current
  local v
  do
    local t = ms.arange(10):float()
    v = t:narrow(1, 3, 2)
  end
  collectgarbage()
  T.eq(ms.memory_stats().current - base, 40) -- the 10 floats live on through the view
  T.same(v:tolist(), {2.0, 3.0})
  v = nil -- luacheck: ignore
  collectgarbage()
  T.eq(ms.memory_stats().current, base)
end)

T.test("to-be-closed tensors free their bytes at the end of the scope", function()
  collectgarbage()
  local base = ms.memory_stats().current
  do
    local t <close> = ms.zeros(1024, 1024)
    T.eq(ms.memory_stats().current - base, 4 * 2^20)
  end
  T.eq(ms.memory_stats().current, base)
end)

T.test("large freed blocks are cached for reuse and released by empty_cache", function()
  collectgarbage()
  ms.empty_cache()
  T.eq(ms.memory_stats().cached, 0)
  local allocations = ms.memory_stats().allocations
  do
    local _ <close> = ms.zeros(1024, 1024) -- 4 MB: a cached size class
  end
  T.eq(ms.memory_stats().cached, 4 * 2^20)
  local again <close> = ms.ones(1000, 1040) -- 4,160,000 bytes: the same 1/8-power-of-two class
  T.eq(ms.memory_stats().cached, 0, "the cached block was reused")
  T.eq(ms.memory_stats().allocations, allocations + 2)
  T.same(again[1000]:narrow(1, 1040, 1):tolist(), {1.0})
  do
    local _ <close> = ms.zeros(100) -- small blocks are not cached
  end
  T.eq(ms.memory_stats().cached, 0)
  do
    -- 200 KB (conv1's input gradient at batch 64): from 64 KB up blocks are cached, since glibc
    -- can trim such a block off its heap's top at free and fault it in again at the next call
    local _ <close> = ms.zeros(64, 1, 28, 28)
  end
  T.eq(ms.memory_stats().cached, 212992) -- its size class: 200,704 bytes rounded up to 16 KB
  ms.empty_cache()
  do
    local _ <close> = ms.zeros(3 * 2^20)
  end
  T.truthy(ms.memory_stats().cached >= 12 * 2^20)
  ms.empty_cache()
  T.eq(ms.memory_stats().cached, 0)
end)

-- The collection threshold follows the live set down when memory is freed outside a collection
-- (collectgarbage(), __close): a loop after a large working set died must not pile up its
-- garbage to where that set had put the threshold.
T.test("after a large working set is freed, a loop's garbage stays bounded by the new live set", function()
  local big = ms.empty(64 * 2^20) -- 256 MB, never touched: sets a threshold above it
  T.truthy(ms.memory_stats().current >= 256 * 2^20)
  big = nil
  collectgarbage()
  local most = 0
  for _ = 1, 30 do
    local _t = ms.empty(1024, 1024) -- 4 MB each, dropped at once
    most = math.max(most, ms.memory_stats().current)
  end
  T.truthy(most < 64 * 2^20, ("garbage piled up to %d MB"):format(most // 2^20))
  collectgarbage()
  ms.empty_cache()
end)

-- A cache filled by a size no longer used must not turn away the sizes in use: they would be
-- unmapped on every free and fault all their pages in again on every reuse (relu's output at
-- batch 64 after a batch-1000 evaluation: 2305 page faults a call, a fifth of the copy rate).
T.test("a freed block evicts cached blocks of other sizes rather than being unmapped", function()
  collectgarbage()
  ms.empty_cache()
  do
    local _ <close> = ms.empty(64 * 2^20) -- 256 MB, never touched
  end
  T.eq(ms.memory_stats().cached, 256 * 2^20)
  do
    local _ <close> = ms.empty(1024, 1024) -- 4 MB
  end
  -- both fit within 5/4 of the high-water mark (256 MB at least); test_block_cache.c checks the
  -- eviction of other classes when they do not
  T.eq(ms.memory_stats().cached, 260 * 2^20, "the 4 MB block is kept")
  local again <close> = ms.empty(1024, 1024)
  T.eq(ms.memory_stats().cached, 256 * 2^20, "and serves the next request")
  ms.empty_cache()
end)

T.test("a freed large block serves a smaller request (within 5/4 of its size) from the cache", function()
  collectgarbage()
  ms.empty_cache()
  do
    local t <close> = ms.ones(1024, 1024) -- 4 MB
  end
  local cached = ms.memory_stats().cached
  T.truthy(cached >= 4 * 2^20, ("cached %d after freeing 4 MB"):format(cached))
  do
    local t <close> = ms.ones(1024, 850) -- ~3.3 MB: reuses the 4 MB block, maps nothing new
    T.eq(ms.memory_stats().cached, cached - 4 * 2^20)
    T.eq(t:sum():item(), 1024 * 850) -- all of it writable
  end
  T.eq(ms.memory_stats().cached, cached) -- back to the cache under its own size
  do
    local t <close> = ms.ones(1024, 700) -- ~2.7 MB: under 4/5 of it, takes no 4 MB block (held long, it
    -- would waste a third of the block)
    T.eq(ms.memory_stats().cached, cached)
  end
  ms.empty_cache()
  T.eq(ms.memory_stats().cached, 0)
end)

T.test("memory_stats().process_peak is the process's peak resident memory (VmHWM)", function()
  local function vmhwm()
    local f <close> = assert(io.open("/proc/self/status"))
    return tonumber(f:read("a"):match("VmHWM:%s*(%d+)")) * 1024
  end
  local before = ms.memory_stats().process_peak
  T.truthy(before > 0 and before <= vmhwm(), "process_peak " .. before)
  do
    local t <close> = ms.ones(32 * 2^20 // 4 * 3) -- 96 MB, touched
    T.eq(t:sum():item(), 32 * 2^20 // 4 * 3)
  end
  local after = ms.memory_stats().process_peak
  T.truthy(after >= 96 * 2^20 and after >= before, ("%d -> %d"):format(before, after))
  T.truthy(math.abs(after - vmhwm()) <= 2^20, ("process_peak %d, VmHWM %d"):format(after, vmhwm()))
  ms.empty_cache()
end)

T.finish()
