/* l_transforms.c: ms.transform_batch(x, specs), the native pass behind moonshard.transforms'
 * Compose, and the conversion of a Lua spec list ({kind = "to_tensor"}, {kind = "normalize",
 * mean = {...}, std = {...}}) into engine structs, shared with the DataLoader binding. */
#include <string.h>

#include "moonshard/transforms_ops.h"
#include "ms_lua.h"

/* mean or std of the spec table at `spec`: a number or a sequence of 1..MS_MAX_CHANNELS
 * numbers, stored as float32. Returns the count. */
static int check_channel_values(lua_State *L, int spec, int i, const char *key, float *out) {
  lua_getfield(L, spec, key);
  int n = 0;
  if (lua_type(L, -1) == LUA_TNUMBER) {
    out[n++] = (float)lua_tonumber(L, -1);
  } else if (lua_istable(L, -1)) {
    lua_Integer len = luaL_len(L, -1);
    if (len < 1 || len > MS_MAX_CHANNELS)
      bind_error(L, "transform spec %d (normalize): '%s' must have 1 to %d entries, got %I", i, key,
                 MS_MAX_CHANNELS, len);
    for (; n < len; n++) {
      if (lua_geti(L, -1, n + 1) != LUA_TNUMBER)
        bind_error(L, "transform spec %d (normalize): %s[%d]: expected a number, got %s", i, key, n + 1,
                   bind_describe(L, -1));
      out[n] = (float)lua_tonumber(L, -1);
      lua_pop(L, 1);
    }
  } else {
    bind_error(L, "transform spec %d (normalize): '%s': expected a number or a table of numbers, got %s",
               i, key, bind_describe(L, -1));
  }
  lua_pop(L, 1);
  return n;
}

/* The spec table at the top of the stack, number i (1-based, for messages), into *s. */
static void check_spec(lua_State *L, int i, ms_transform_spec *s) {
  int spec = lua_gettop(L);
  if (!lua_istable(L, spec))
    bind_error(L, "transform spec %d: expected a table {kind = ...}, got %s", i, bind_describe(L, spec));
  lua_getfield(L, spec, "kind");
  const char *kind = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
  memset(s, 0, sizeof *s);
  if (strcmp(kind, "to_tensor") == 0) {
    s->kind = MS_TRANSFORM_TO_TENSOR;
  } else if (strcmp(kind, "normalize") == 0) {
    s->kind = MS_TRANSFORM_NORMALIZE;
    s->nchan = check_channel_values(L, spec, i, "mean", s->mean);
    if (check_channel_values(L, spec, i, "std", s->std) != s->nchan)
      bind_error(L, "transform spec %d (normalize): mean and std must have the same number of entries", i);
  } else {
    bind_error(L, "transform spec %d: 'kind': expected \"to_tensor\" or \"normalize\", got %s", i,
               bind_describe(L, -1));
  }
  lua_pop(L, 1);
}

void bind_check_transform_specs(lua_State *L, int idx, ms_transform_spec *specs, int *n) {
  idx = lua_absindex(L, idx);
  if (!lua_istable(L, idx))
    bind_arg_error(L, idx, "transform_batch", "specs", "a table of transform specs");
  if (lua_getfield(L, idx, "kind") != LUA_TNIL) { /* one transform's spec rather than a list */
    lua_pop(L, 1);
    lua_pushvalue(L, idx);
    check_spec(L, 1, &specs[0]);
    lua_pop(L, 1);
    *n = 1;
    bind_check_status(L, ms_transform_check_specs(specs, *n));
    return;
  }
  lua_pop(L, 1);
  lua_Integer len = luaL_len(L, idx);
  if (len > MS_TRANSFORM_MAX_SPECS)
    bind_error(L, "transform_batch: at most %d transforms can run natively, got %I",
               MS_TRANSFORM_MAX_SPECS, len);
  for (int i = 0; i < len; i++) {
    lua_geti(L, idx, i + 1);
    check_spec(L, i + 1, &specs[i]);
    lua_pop(L, 1);
  }
  *n = (int)len;
  bind_check_status(L, ms_transform_check_specs(specs, *n));
}

/* transform_batch(x, specs): the pipeline (a list of specs, or one spec) over a sample or a batch
 * in one pass; a new tensor. On a device: the same values, as tensor ops (transforms_ops.h). */
static int l_transform_batch(lua_State *L) {
  ms_tensor *x = ms_lua_check_tensor(L, 1, "transform_batch");
  ms_transform_spec specs[MS_TRANSFORM_MAX_SPECS];
  int n = 0;
  bind_check_transform_specs(L, 2, specs, &n);
  bool host = ms_tensor_device(x).type == MS_CPU;
  return bind_push_result(L, host || n == 0 ? ms_transform_apply(x, specs, n) : ms_transform_apply_ops(x, specs, n));
}

void bind_open_transforms(lua_State *L) {
  lua_pushcfunction(L, l_transform_batch);
  lua_setfield(L, -3, "transform_batch");
}
