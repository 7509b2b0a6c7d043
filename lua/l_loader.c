/* l_loader.c: the native DataLoader behind lua/moonshard/data.lua's fast path, as
 * ms._loader_new(sources, batches, opts) -> a loader object with :next(), :close() and #.
 *   sources  {{tensor = t, transform = <native spec list or nil>}, ...}: tensors sharing dim 1;
 *            {rows = ms._idx_rows(path), ...} in place of a tensor reads the rows from the file
 *   batches  {{i1, i2, ...}, ...}: 1-based row indices of each batch, in order
 *   opts     {num_workers = 0, prefetch_factor = 2, pin_memory = false}
 * :next() returns one tensor per source for the next batch, or nothing after the last; an error
 * made in a worker is raised there, naming the batch. __gc and __close stop the workers, so
 * a loop left early (break, error) does not leave threads behind. Also ms._device_feed, the
 * stage that moves batches to a device ahead of the step (below). */
#include <stdlib.h>
#include <string.h>

#include "moonshard/device_feed.h"
#include "moonshard/loader.h"
#include "moonshard/transforms.h"
#include "ms_lua.h"

#define LOADER_MT "moonshard.Loader"

typedef struct loader_box {
  ms_loader *loader; /* NULL once closed */
} loader_box;

static loader_box *check_box(lua_State *L, int idx) { return luaL_checkudata(L, idx, LOADER_MT); }

static int loader_close(lua_State *L) {
  loader_box *box = check_box(L, 1);
  ms_loader_destroy(box->loader); /* joins the workers: they only ever block on the loader */
  box->loader = NULL;
  return 0;
}

/* ---- batches: Lua index lists to 0-based flat indices and offsets ------------------------------ */

/* Buffers live in userdata on the stack, so a Lua error while reading frees them. */
static int64_t *push_buffer(lua_State *L, size_t n) {
  return lua_newuserdatauv(L, (n ? n : 1) * sizeof(int64_t), 0);
}

static int64_t count_indices(lua_State *L, int batches, int64_t nbatches) {
  int64_t total = 0;
  for (int64_t k = 1; k <= nbatches; k++) {
    if (lua_geti(L, batches, k) != LUA_TTABLE)
      bind_error(L, "DataLoader: batch %I must be a table of indices, got %s", (lua_Integer)k,
                 bind_describe(L, -1));
    total += (int64_t)luaL_len(L, -1);
    lua_pop(L, 1);
  }
  return total;
}

/* Checked here too, to name the index as the Lua caller wrote it (1-based). */
static void read_indices(lua_State *L, int batches, int64_t nbatches, int64_t rows, int64_t *idx,
                         int64_t *off) {
  off[0] = 0;
  for (int64_t k = 1; k <= nbatches; k++) {
    lua_geti(L, batches, k);
    int64_t n = (int64_t)luaL_len(L, -1), at = off[k - 1];
    for (int64_t j = 1; j <= n; j++) {
      lua_geti(L, -1, j);
      int ok;
      lua_Integer v = lua_tointegerx(L, -1, &ok);
      if (!ok)
        bind_error(L, "DataLoader: batch %I, entry %I: expected an integer index, got %s",
                   (lua_Integer)k, (lua_Integer)j, bind_describe(L, -1));
      if (v < 1 || v > rows)
        bind_error(L, "DataLoader: batch %I, entry %I: index %I is out of range for a dataset of "
                   "%I samples (1 to %I)", (lua_Integer)k, (lua_Integer)j, v, (lua_Integer)rows,
                   (lua_Integer)rows);
      idx[at + j - 1] = (int64_t)v - 1; /* the engine is 0-based */
      lua_pop(L, 1);
    }
    off[k] = at + n;
    lua_pop(L, 1);
  }
}

/* ---- sources and their native transforms --------------------------------------------------------- */

typedef struct spec_ctx {
  int n;
  ms_transform_spec specs[MS_TRANSFORM_MAX_SPECS];
} spec_ctx;

/* Runs in worker threads: ms_transform_apply is thread-safe. */
static ms_tensor *apply_specs(void *ctx, ms_tensor *batch) {
  spec_ctx *c = ctx;
  return ms_transform_apply(batch, c->specs, c->n);
}

/* Reads sources[i] into src, its specs (if any) into the userdata-held *spec. */
static void read_source(lua_State *L, int sources, int i, ms_loader_source *src, spec_ctx *spec) {
  if (lua_geti(L, sources, i) != LUA_TTABLE)
    bind_error(L, "DataLoader: source %d must be a table {tensor = t, transform = specs}", i);
  src->tensor = NULL, src->rows = NULL;
  if (lua_getfield(L, -1, "rows") != LUA_TNIL) src->rows = bind_check_idx_rows(L, lua_gettop(L), "DataLoader");
  else {
    lua_getfield(L, -2, "tensor");
    src->tensor = ms_lua_check_tensor(L, lua_gettop(L), "DataLoader");
    lua_pop(L, 1);
  }
  lua_pop(L, 1); /* the sources table keeps the tensor or rows alive */
  spec->n = 0;
  lua_getfield(L, -1, "transform");
  if (!lua_isnil(L, -1)) bind_check_transform_specs(L, lua_gettop(L), spec->specs, &spec->n);
  lua_pop(L, 2);
  src->transform = NULL, src->ctx = NULL, src->free_ctx = NULL;
}

/* Gives each source with specs its own malloc'd copy: the loader owns (and frees) it from
 * here on. No Lua error may strike between this and ms_loader_create. */
static bool attach_specs(ms_loader_source *srcs, const spec_ctx *specs, int n) {
  for (int i = 0; i < n; i++) {
    if (specs[i].n == 0) continue;
    spec_ctx *c = malloc(sizeof *c);
    if (!c) {
      for (int j = 0; j < i; j++) free(srcs[j].ctx);
      return false;
    }
    *c = specs[i];
    srcs[i].transform = apply_specs, srcs[i].ctx = c, srcs[i].free_ctx = free;
  }
  return true;
}

/* ---- ms._loader_new(sources, batches, opts) ----------------------------------------------------- */

static ms_loader_config read_config(lua_State *L, int idx) {
  static const char *const known[] = {"num_workers", "prefetch_factor", "pin_memory", NULL};
  ms_lua_opts o = bind_check_opts(L, idx, "DataLoader", known);
  int64_t workers = 0, prefetch = 2;
  bool pin = false;
  bind_opt_integer(o, "num_workers", &workers);
  bind_opt_integer(o, "prefetch_factor", &prefetch);
  bind_opt_bool(o, "pin_memory", &pin);
  if (workers < 0 || workers > 256)
    bind_error(L, "DataLoader: num_workers must be in 0..256, got %I", (lua_Integer)workers);
  if (prefetch < 1 || prefetch > 1024)
    bind_error(L, "DataLoader: prefetch_factor must be in 1..1024, got %I", (lua_Integer)prefetch);
  return (ms_loader_config){.num_workers = (int)workers, .prefetch_factor = (int)prefetch,
                            .pin_memory = pin};
}

static int l_loader_new(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 2, LUA_TTABLE);
  ms_loader_config cfg = read_config(L, 3);
  int nsrc = bind_narrow_int(L, luaL_len(L, 1), 1, MS_LOADER_MAX_SOURCES, "DataLoader", "number of source tensors");
  ms_loader_source srcs[MS_LOADER_MAX_SOURCES];
  spec_ctx *specs = lua_newuserdatauv(L, sizeof *specs * (size_t)nsrc, 0);
  for (int i = 0; i < nsrc; i++) read_source(L, 1, i + 1, &srcs[i], &specs[i]);
  int64_t nbatches = (int64_t)luaL_len(L, 2);
  int64_t *idx = push_buffer(L, (size_t)count_indices(L, 2, nbatches));
  int64_t *off = push_buffer(L, (size_t)nbatches + 1);
  int64_t rows = srcs[0].tensor ? srcs[0].tensor->shape[0] : ms_idx_rows_info(srcs[0].rows)->shape[0];
  read_indices(L, 2, nbatches, rows, idx, off);
  loader_box *box = lua_newuserdatauv(L, sizeof *box, 0); /* before the resource it will own */
  box->loader = NULL;
  luaL_setmetatable(L, LOADER_MT);
  if (!attach_specs(srcs, specs, nsrc)) return bind_error(L, "DataLoader: out of memory");
  box->loader = ms_loader_create(srcs, nsrc, idx, off, nbatches, cfg);
  if (!box->loader) return bind_raise(L);
  return 1;
}

/* ---- the loader object ---------------------------------------------------------------------------- */

static int loader_next(lua_State *L) {
  loader_box *box = check_box(L, 1);
  if (!box->loader || ms_loader_exhausted(box->loader)) return 0;
  ms_tensor *out[MS_LOADER_MAX_SOURCES];
  int64_t k;
  if (ms_loader_next(box->loader, out, &k) != MS_OK) {
    /* No position prefix: the place is the user's loop, which the traceback shows. */
    lua_pushfstring(L, "DataLoader: batch %I: %s", (lua_Integer)k + 1, ms_error_last());
    return lua_error(L);
  }
  int n = ms_loader_num_sources(box->loader);
  luaL_checkstack(L, n, "DataLoader: too many sources");
  /* Push every reference before anything may raise: a box owns each one as it is pushed. */
  for (int i = 0; i < n; i++) ms_lua_push_tensor(L, out[i]);
  return n;
}

static int loader_len(lua_State *L) {
  loader_box *box = check_box(L, 1);
  lua_pushinteger(L, box->loader ? ms_loader_num_batches(box->loader) : 0);
  return 1;
}

/* ---- ms._device_feed(device, depth[, transforms]): the device stage (moonshard/device_feed.h) ----
 * transforms: {[source] = specs} for the sources normalised on the device. :put(t1, ...) queues a
 * batch, :take() returns the oldest, :queued() counts them; __close and __gc drop the rest. */

#define FEED_MT "moonshard.DeviceFeed"

typedef struct feed_box {
  ms_device_feed *feed; /* NULL once closed */
} feed_box;

static ms_device_feed *check_feed(lua_State *L, const char *fname) {
  feed_box *box = luaL_checkudata(L, 1, FEED_MT);
  if (!box->feed) bind_error(L, "DataLoader: %s on a closed device feed", fname);
  return box->feed;
}

static int feed_close(lua_State *L) {
  feed_box *box = luaL_checkudata(L, 1, FEED_MT);
  ms_device_feed_destroy(box->feed);
  box->feed = NULL;
  return 0;
}

static void read_feed_transforms(lua_State *L, int idx, ms_device_feed *f) {
  if (lua_isnoneornil(L, idx)) return;
  luaL_checktype(L, idx, LUA_TTABLE);
  for (int i = 1; i <= MS_LOADER_MAX_SOURCES; i++) {
    if (lua_geti(L, idx, i) != LUA_TNIL) {
      ms_transform_spec specs[MS_TRANSFORM_MAX_SPECS];
      int n = 0;
      bind_check_transform_specs(L, lua_gettop(L), specs, &n);
      bind_check_status(L, ms_device_feed_set_transform(f, i - 1, specs, n));
    }
    lua_pop(L, 1);
  }
}

static int l_device_feed_new(lua_State *L) {
  ms_device device = bind_check_device(L, 1, "DataLoader", "device");
  int depth = bind_narrow_int(L, luaL_checkinteger(L, 2), 1, MS_FEED_MAX_DEPTH, "DataLoader", "device_prefetch");
  feed_box *box = lua_newuserdatauv(L, sizeof *box, 0); /* before the feed it will own */
  box->feed = NULL;
  luaL_setmetatable(L, FEED_MT);
  if (!(box->feed = ms_device_feed_create(device, depth))) return bind_raise(L);
  read_feed_transforms(L, 3, box->feed);
  lua_settop(L, 4);
  return 1;
}

static int feed_put(lua_State *L) {
  ms_device_feed *f = check_feed(L, "put");
  int n = lua_gettop(L) - 1;
  if (n < 1 || n > MS_LOADER_MAX_SOURCES)
    return bind_error(L, "DataLoader: a batch of 1 to %d values moves to the device, got %d", MS_LOADER_MAX_SOURCES, n);
  ms_tensor *batch[MS_LOADER_MAX_SOURCES];
  for (int i = 0; i < n; i++) {
    if (!(batch[i] = ms_lua_to_tensor(L, i + 2)))
      return bind_error(L, "DataLoader: the device option moves tensors; batch value %d is %s", i + 1,
                        bind_describe(L, i + 2));
  }
  bind_check_status(L, ms_device_feed_put(f, batch, n));
  return 0;
}

static int feed_take(lua_State *L) {
  ms_device_feed *f = check_feed(L, "take");
  ms_tensor *out[MS_LOADER_MAX_SOURCES];
  int n = 0;
  bind_check_status(L, ms_device_feed_take(f, out, &n));
  luaL_checkstack(L, n, "DataLoader: too many values");
  for (int i = 0; i < n; i++) ms_lua_push_tensor(L, out[i]);
  return n;
}

static int feed_queued(lua_State *L) {
  feed_box *box = luaL_checkudata(L, 1, FEED_MT);
  lua_pushinteger(L, box->feed ? ms_device_feed_queued(box->feed) : 0);
  return 1;
}

static void open_device_feed(lua_State *L) {
  luaL_newmetatable(L, FEED_MT);
  static const luaL_Reg meta[] = {{"__gc", feed_close}, {"__close", feed_close}, {NULL, NULL}};
  luaL_setfuncs(L, meta, 0);
  static const luaL_Reg methods[] = {{"put", feed_put}, {"take", feed_take}, {"queued", feed_queued},
                                     {"close", feed_close}, {NULL, NULL}};
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}

/* ms._transform_ops(x, specs): the pipeline as the device runs it (tensor ops), on any device:
 * the tests compare it with the fused pass on the CPU. */
static int l_transform_ops(lua_State *L) {
  ms_tensor *x = ms_lua_check_tensor(L, 1, "transform_batch");
  ms_transform_spec specs[MS_TRANSFORM_MAX_SPECS];
  int n = 0;
  bind_check_transform_specs(L, 2, specs, &n);
  return bind_push_result(L, ms_transform_apply_ops(x, specs, n));
}

void bind_open_loader(lua_State *L) {
  luaL_newmetatable(L, LOADER_MT);
  static const luaL_Reg meta[] = {{"__gc", loader_close}, {"__close", loader_close},
                                  {"__len", loader_len}, {NULL, NULL}};
  luaL_setfuncs(L, meta, 0);
  static const luaL_Reg methods[] = {{"next", loader_next}, {"close", loader_close}, {NULL, NULL}};
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  lua_pushcfunction(L, l_loader_new);
  lua_setfield(L, -3, "_loader_new"); /* private: lua/moonshard/data.lua is the API (ms.data, module.c) */
  open_device_feed(L);
  lua_pushcfunction(L, l_device_feed_new);
  lua_setfield(L, -3, "_device_feed");
  lua_pushcfunction(L, l_transform_ops);
  lua_setfield(L, -3, "_transform_ops");
}
