/* l_io.c: ms.save and ms.load, checkpoints as safetensors files (engine/src/io). A flat table
 * of named tensors maps one to one onto the file; nested tables (optimizer states, whole
 * training checkpoints) are flattened into dotted names on save and rebuilt on load.
 *
 * Nested encoding (written when the table holds anything but string-keyed tensors, or with
 * {nested = true}; read back whenever the marker is present):
 *   __metadata__["moonshard.nested"] = "1"                      the marker and format version
 *   a tensor at path {"state", 1, "square_avg"}  -> tensor "state.1.square_avg"
 *   a number, string, boolean or empty table     -> __metadata__["moonshard.value:<name>"] =
 *       "int:<decimal>" | "float:<shortest %g that round-trips, or inf, -inf, nan>" |
 *       "str:<bytes>" | "bool:true" | "bool:false" | "table:" (an empty table)
 *   Names split back on "." with integer-looking pieces ("1", "-2", never "01") as integer
 *   keys. Where that would not give the original path (a string key holding "." or looking
 *   like an integer), __metadata__["moonshard.keys:<name>"] spells the path out as a comma
 *   list of s<len> / i<len>, the kind and byte length of each piece of the name in turn:
 *   {model = {["fc1.weight"] = w}} -> tensor "model.fc1.weight", keys "s5,s10".
 *   Keys of the caller's own metadata may not start with "moonshard.".
 * Tensors are written sorted by dtype alignment then name, as safetensors.torch.save_file
 * does, so the same tensors give byte-identical files in both libraries. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_lua.h"

#define BOX_MT "moonshard.safetensors"
#define NESTED_KEY "moonshard.nested"
#define VALUE_PREFIX "moonshard.value:"
#define KEYS_PREFIX "moonshard.keys:"
#define MAX_DEPTH 100

/* "1", "-20", "0": the only spellings an integer key is written in (and so read back as). */
static bool is_canonical_int(const char *s, size_t len) {
  size_t i = len > 0 && s[0] == '-';
  if (i == len || len > 20 || (s[i] == '0' && (len > 1))) return false;
  for (; i < len; i++)
    if (s[i] < '0' || s[i] > '9') return false;
  char buf[24];
  memcpy(buf, s, len), buf[len] = '\0';
  char *end;
  long long v = strtoll(buf, &end, 10);
  char back[24];
  snprintf(back, sizeof back, "%lld", v);
  return strcmp(back, buf) == 0; /* out of int64 range clamps, and then differs */
}

/* ---- save: gathering ------------------------------------------------------------------------ */

typedef struct save_ctx {
  lua_State *L;
  int tensors;  /* name -> tensor */
  int meta;     /* metadata key -> string value */
  int seen;     /* name -> true, to catch two paths that flatten to one name */
  int visiting; /* table -> true while the walk is inside it (cycles) */
} save_ctx;

static const char *checked_string(lua_State *L, int idx, const char *what, size_t *len) {
  const char *s = lua_tolstring(L, idx, len);
  if (strlen(s) != *len) bind_error(L, "save: %s '%s' contains a NUL byte", what, s);
  return s;
}

static void claim_name(save_ctx *c, const char *name) {
  if (lua_getfield(c->L, c->seen, name) != LUA_TNIL)
    bind_error(c->L, "save: two entries flatten to the same name '%s'", name);
  lua_pop(c->L, 1);
  lua_pushboolean(c->L, 1);
  lua_setfield(c->L, c->seen, name);
}

static void set_meta(save_ctx *c, const char *prefix, const char *name, const char *value) {
  lua_pushfstring(c->L, "%s%s", prefix, name);
  lua_pushstring(c->L, value);
  lua_rawset(c->L, c->meta);
}

/* The shortest of %.15g..%.17g that reads back as the same double. */
static void format_float(double v, char *out, size_t len) {
  if (isnan(v)) snprintf(out, len, "nan");
  else if (isinf(v)) snprintf(out, len, v > 0 ? "inf" : "-inf");
  else
    for (int prec = 15; prec <= 17; prec++) {
      snprintf(out, len, "%.*g", prec, v);
      if (strtod(out, NULL) == v) break;
    }
}

/* The typed encoding of a non-tensor leaf at idx, pushed as a string. */
static void push_encoded_value(lua_State *L, int idx, const char *name) {
  char num[40];
  size_t len;
  switch (lua_type(L, idx)) {
  case LUA_TBOOLEAN: lua_pushstring(L, lua_toboolean(L, idx) ? "bool:true" : "bool:false"); return;
  case LUA_TSTRING: lua_pushfstring(L, "str:%s", checked_string(L, idx, "string value", &len)); return;
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) {
      lua_pushfstring(L, "int:%I", (LUAI_UACINT)lua_tointeger(L, idx));
      return;
    }
    format_float(lua_tonumber(L, idx), num, sizeof num);
    lua_pushfstring(L, "float:%s", num);
    return;
  default:
    bind_error(L, "save: '%s' is %s; only tensors, numbers, strings, booleans and tables can be saved", name,
               bind_describe(L, idx));
  }
}

static void walk(save_ctx *c, int idx, const char *name, const char *layout, bool override, int depth);

/* One entry of a nested table: the key at -2, the value at -1 (both left in place). */
static void walk_entry(save_ctx *c, const char *name, const char *layout, bool override, int depth) {
  lua_State *L = c->L;
  int top = lua_gettop(L);
  size_t len;
  const char *seg;
  char kind = 's';
  if (lua_type(L, -2) == LUA_TSTRING) {
    seg = checked_string(L, -2, "key", &len);
    override = override || memchr(seg, '.', len) || is_canonical_int(seg, len);
  } else if (lua_isinteger(L, -2)) {
    seg = lua_pushfstring(L, "%I", (LUAI_UACINT)lua_tointeger(L, -2)), kind = 'i';
    len = strlen(seg);
  } else {
    bind_error(L, "save: key %s under '%s' must be a string or an integer", bind_describe(L, top - 1), name);
    return;
  }
  /* at the root the first piece has no separator before it */
  const char *child = depth == 0 ? lua_pushstring(L, seg) : lua_pushfstring(L, "%s.%s", name, seg);
  const char *child_layout = lua_pushfstring(L, "%s%s%c%I", layout, depth == 0 ? "" : ",", kind, (LUAI_UACINT)len);
  if (ms_lua_to_tensor(L, top) || lua_type(L, top) != LUA_TTABLE) {
    claim_name(c, child);
    if (override) set_meta(c, KEYS_PREFIX, child, child_layout);
    if (ms_lua_to_tensor(L, top)) {
      lua_pushvalue(L, top);
      lua_setfield(L, c->tensors, child);
    } else {
      push_encoded_value(L, top, child);
      set_meta(c, VALUE_PREFIX, child, lua_tostring(L, -1));
    }
  } else
    walk(c, top, child, child_layout, override, depth + 1);
  lua_settop(L, top);
}

static void walk(save_ctx *c, int idx, const char *name, const char *layout, bool override, int depth) {
  lua_State *L = c->L;
  if (depth > MAX_DEPTH) bind_error(L, "save: tables nested deeper than %d levels at '%s'", MAX_DEPTH, name);
  luaL_checkstack(L, 8, "save: nested too deep");
  lua_pushvalue(L, idx);
  if (lua_rawget(L, c->visiting) != LUA_TNIL) bind_error(L, "save: the table at '%s' contains itself", name);
  lua_pop(L, 1);
  lua_pushvalue(L, idx), lua_pushboolean(L, 1), lua_rawset(L, c->visiting);
  bool empty = true;
  for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) {
    empty = false;
    walk_entry(c, name, layout, override, depth);
  }
  if (empty && depth > 0) {
    claim_name(c, name);
    if (override) set_meta(c, KEYS_PREFIX, name, layout);
    set_meta(c, VALUE_PREFIX, name, "table:");
  }
  lua_pushvalue(L, idx), lua_pushnil(L), lua_rawset(L, c->visiting);
}

/* A table of string keys and tensor values only: saved as is, without the nested encoding. */
static bool is_flat(lua_State *L, int idx) {
  for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1))
    if (lua_type(L, -2) != LUA_TSTRING || !ms_lua_to_tensor(L, -1)) return lua_pop(L, 2), false;
  return true;
}

static void gather_flat(save_ctx *c, int idx) {
  lua_State *L = c->L;
  for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) {
    size_t len;
    if (lua_type(L, -2) != LUA_TSTRING || !ms_lua_to_tensor(L, -1))
      bind_error(L, "save: with nested = false every key must be a string and every value a tensor, got %s = %s",
                 bind_describe(L, lua_gettop(L) - 1), bind_describe(L, lua_gettop(L)));
    checked_string(L, -2, "tensor name", &len);
    lua_pushvalue(L, -2), lua_pushvalue(L, -2), lua_rawset(L, c->tensors);
  }
}

/* The caller's metadata: string keys (not in moonshard's namespace) to strings. */
static void gather_user_meta(save_ctx *c, int idx) {
  lua_State *L = c->L;
  for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) {
    size_t len;
    if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
      bind_error(L, "save: metadata must map strings to strings, got %s = %s", bind_describe(L, lua_gettop(L) - 1),
                 bind_describe(L, lua_gettop(L)));
    const char *k = checked_string(L, -2, "metadata key", &len);
    checked_string(L, -1, "metadata value", &len);
    if (strncmp(k, "moonshard.", 10) == 0) bind_error(L, "save: metadata key '%s' is reserved (moonshard.*)", k);
    lua_pushvalue(L, -2), lua_pushvalue(L, -2), lua_rawset(L, c->meta);
  }
}

/* ---- save: writing -------------------------------------------------------------------------- */

typedef struct item {
  const char *name; /* anchored by the gathering tables on the stack */
  ms_tensor *t;
} item;

/* safetensors' own order (Dtype enum of the reference library): larger alignment first. */
static int dtype_rank(ms_dtype dt) {
  static const int rank[MS_DTYPE_COUNT] = {[MS_BOOL] = 0, [MS_UINT8] = 1, [MS_FLOAT16] = 7, [MS_BFLOAT16] = 8,
                                           [MS_INT32] = 9, [MS_FLOAT32] = 11, [MS_FLOAT64] = 12, [MS_INT64] = 13};
  return rank[dt];
}

static int cmp_item(const void *a, const void *b) {
  const item *x = a, *y = b;
  int rx = dtype_rank(x->t->dtype), ry = dtype_rank(y->t->dtype);
  return rx != ry ? ry - rx : strcmp(x->name, y->name);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int count_entries(lua_State *L, int idx) {
  int n = 0;
  for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) n++;
  return n;
}

/* Scratch arrays live in userdata, so a Lua error on the way frees them. */
static void *scratch(lua_State *L, size_t n, size_t size) {
  return lua_newuserdatauv(L, (n ? n : 1) * size, 0);
}

static void write_file(lua_State *L, const char *path, save_ctx *c, bool with_meta) {
  int n = count_entries(L, c->tensors), m = count_entries(L, c->meta);
  item *items = scratch(L, (size_t)n, sizeof *items);
  const char **names = scratch(L, (size_t)n, sizeof *names);
  ms_tensor **ts = scratch(L, (size_t)n, sizeof *ts);
  const char **keys = scratch(L, (size_t)m, sizeof *keys), **values = scratch(L, (size_t)m, sizeof *values);
  int i = 0;
  for (lua_pushnil(L); lua_next(L, c->tensors); lua_pop(L, 1), i++)
    items[i] = (item){lua_tostring(L, -2), ms_lua_to_tensor(L, -1)};
  qsort(items, (size_t)n, sizeof *items, cmp_item);
  for (i = 0; i < n; i++) names[i] = items[i].name, ts[i] = items[i].t;
  i = 0;
  for (lua_pushnil(L); lua_next(L, c->meta); lua_pop(L, 1)) keys[i++] = lua_tostring(L, -2);
  qsort(keys, (size_t)m, sizeof *keys, cmp_str);
  for (i = 0; i < m; i++) lua_getfield(L, c->meta, keys[i]), values[i] = lua_tostring(L, -1), lua_pop(L, 1);
  bind_check_status(L, ms_safetensors_save(path, n, names, ts, m, with_meta ? keys : NULL, values));
}

/* ms.save(tbl, path, {metadata = {k = "v"}, nested = bool}) */
static int l_save(lua_State *L) {
  static const char *const known[] = {"metadata", "nested", NULL};
  if (!lua_istable(L, 1)) bind_arg_error(L, 1, "save", "tensors", "a table of named tensors");
  if (lua_type(L, 2) != LUA_TSTRING) bind_arg_error(L, 2, "save", "path", "a string");
  ms_lua_opts o = bind_check_opts(L, 3, "save", known);
  bool nested;
  if (!bind_opt_bool(o, "nested", &nested)) nested = !is_flat(L, 1);
  lua_settop(L, 3);
  if (lua_istable(L, 3)) lua_getfield(L, 3, "metadata"); /* 4: user metadata or nil */
  else lua_pushnil(L);
  if (!lua_isnil(L, 4) && !lua_istable(L, 4)) bind_error(L, "save: option 'metadata' must be a table of strings");
  for (int k = 0; k < 4; k++) lua_newtable(L); /* 5 tensors, 6 meta, 7 seen, 8 visiting */
  save_ctx c = {L, 5, 6, 7, 8};
  if (!lua_isnil(L, 4)) gather_user_meta(&c, 4);
  if (nested) {
    walk(&c, 1, "", "", false, 0);
    lua_pushstring(L, "1");
    lua_setfield(L, c.meta, NESTED_KEY);
  } else
    gather_flat(&c, 1);
  write_file(L, lua_tostring(L, 2), &c, nested || !lua_isnil(L, 4));
  return 0;
}

/* ---- load ----------------------------------------------------------------------------------- */

static int box_gc(lua_State *L) {
  ms_safetensors_free(luaL_checkudata(L, 1, BOX_MT));
  return 0;
}

/* Pushes the integer or string key of one piece of a name. */
static void push_key(lua_State *L, const char *s, size_t len, bool integer) {
  if (!integer) {
    lua_pushlstring(L, s, len);
    return;
  }
  char buf[24];
  memcpy(buf, s, len), buf[len] = '\0';
  lua_pushinteger(L, (lua_Integer)strtoll(buf, NULL, 10));
}

typedef struct piece {
  const char *s;
  size_t len;
  bool integer;
} piece;

/* The next piece of `name` at *pos, by the layout list at *lay (or by splitting on '.' when
 * there is none). Returns false at the end; raises on a layout that does not fit the name. */
static bool next_piece(lua_State *L, const char *path, const char *name, size_t *pos, const char **lay, piece *p) {
  size_t len = strlen(name);
  if (*pos > len) return false;
  p->s = name + *pos;
  if (!*lay) {
    const char *dot = strchr(p->s, '.');
    p->len = dot ? (size_t)(dot - p->s) : strlen(p->s);
    p->integer = is_canonical_int(p->s, p->len);
  } else {
    char *end;
    unsigned long n = (**lay == 's' || **lay == 'i') ? strtoul(*lay + 1, &end, 10) : (end = NULL, 0);
    if (!end || end == *lay + 1 || n > len - *pos || (*end != ',' && *end != '\0') ||
        (*end == '\0') != (*pos + n == len) || (**lay == 'i' && !is_canonical_int(p->s, n)))
      bind_error(L, "load '%s': corrupt key layout for '%s'", path, name);
    p->len = n, p->integer = **lay == 'i';
    *lay = *end ? end + 1 : end;
  }
  *pos += p->len + 1;
  return true;
}

/* Stores the value at the top of the stack (popped) at the path of `name` under the table at
 * root, making the tables on the way. */
static void insert_path(lua_State *L, const char *path, int root, const char *name, const char *layout) {
  int value = lua_gettop(L);
  lua_pushvalue(L, root);
  size_t pos = 0;
  piece p;
  bool more = next_piece(L, path, name, &pos, &layout, &p);
  while (more) {
    push_key(L, p.s, p.len, p.integer);
    piece next;
    more = next_piece(L, path, name, &pos, &layout, &next);
    lua_pushvalue(L, -1);
    int t = lua_rawget(L, -3);
    if (!more) {
      if (t != LUA_TNIL) bind_error(L, "load '%s': '%s' collides with another entry", path, name);
      lua_pop(L, 1);
      lua_pushvalue(L, value);
      lua_rawset(L, -3);
      break;
    }
    if (t == LUA_TNIL) {
      lua_pop(L, 1), lua_newtable(L);
      lua_pushvalue(L, -2), lua_pushvalue(L, -2), lua_rawset(L, -5);
    } else if (t != LUA_TTABLE)
      bind_error(L, "load '%s': '%s' lies under a value that is not a table", path, name);
    lua_remove(L, -2), lua_remove(L, -2); /* the key and the parent */
    p = next;
  }
  lua_settop(L, value - 1);
}

/* Decodes the typed value of a non-tensor leaf and pushes it. */
static void push_decoded(lua_State *L, const char *path, const char *name, const char *v) {
  if (strncmp(v, "str:", 4) == 0) lua_pushstring(L, v + 4);
  else if (strcmp(v, "bool:true") == 0 || strcmp(v, "bool:false") == 0) lua_pushboolean(L, v[5] == 't');
  else if (strcmp(v, "table:") == 0) lua_newtable(L);
  else if (strncmp(v, "int:", 4) == 0 && is_canonical_int(v + 4, strlen(v + 4))) push_key(L, v + 4, strlen(v + 4), true);
  else if (strncmp(v, "float:", 6) == 0) {
    const char *f = v + 6;
    if (strcmp(f, "nan") == 0) lua_pushnumber(L, NAN);
    else if (strcmp(f, "inf") == 0 || strcmp(f, "-inf") == 0) lua_pushnumber(L, f[0] == '-' ? -HUGE_VAL : HUGE_VAL);
    else if (lua_stringtonumber(L, f) == 0) bind_error(L, "load '%s': value of '%s' is not a number: %s", path, name, v);
    else lua_pushnumber(L, lua_tonumber(L, -1)), lua_remove(L, -2); /* "1" was written for 1.0 */
  } else
    bind_error(L, "load '%s': value of '%s' has an unknown encoding: %s", path, name, v);
}

/* The layout for name from the raw metadata table at meta, or NULL. */
static const char *layout_of(lua_State *L, int meta, const char *name) {
  lua_pushfstring(L, "%s%s", KEYS_PREFIX, name);
  lua_rawget(L, meta);
  const char *layout = lua_tostring(L, -1);
  lua_pop(L, 1); /* still anchored in the metadata table */
  return layout;
}

/* Fills the tree at `tree` and the caller's metadata at `user` from the file in box. */
static void unflatten(lua_State *L, const char *path, ms_safetensors *st, int meta, int tree, int user) {
  lua_getfield(L, meta, NESTED_KEY);
  if (!lua_isnil(L, -1) && strcmp(lua_tostring(L, -1), "1") != 0)
    bind_error(L, "load '%s': nested format version %s is newer than this moonshard reads", path, lua_tostring(L, -1));
  lua_pop(L, 1);
  for (int i = 0; i < st->count; i++) {
    ms_tensor *t = st->tensors[i];
    st->tensors[i] = NULL; /* the userdata takes the reference over */
    ms_lua_push_tensor(L, t);
    insert_path(L, path, tree, st->names[i], layout_of(L, meta, st->names[i]));
  }
  for (int i = 0; i < st->meta_count; i++) {
    const char *k = st->meta_keys[i];
    if (strncmp(k, VALUE_PREFIX, strlen(VALUE_PREFIX)) == 0) {
      const char *name = k + strlen(VALUE_PREFIX);
      push_decoded(L, path, name, st->meta_values[i]);
      insert_path(L, path, tree, name, layout_of(L, meta, name));
    } else if (strncmp(k, "moonshard.", 10) != 0) {
      lua_pushstring(L, st->meta_values[i]);
      lua_setfield(L, user, k);
    }
  }
}

/* ms.load(path, {nested = bool}) -> tensors (or the nested table), metadata */
static int l_load(lua_State *L) {
  static const char *const known[] = {"nested", NULL};
  if (lua_type(L, 1) != LUA_TSTRING) bind_arg_error(L, 1, "load", "path", "a string");
  const char *path = lua_tostring(L, 1);
  ms_lua_opts o = bind_check_opts(L, 2, "load", known);
  bool nested_opt, has_opt = bind_opt_bool(o, "nested", &nested_opt);
  lua_settop(L, 2);
  /* the box exists before the memory it will own, so that any error below frees it */
  ms_safetensors *st = lua_newuserdatauv(L, sizeof *st, 0); /* 3 */
  memset(st, 0, sizeof *st);
  luaL_setmetatable(L, BOX_MT);
  bind_check_status(L, ms_safetensors_load(path, st));
  lua_createtable(L, 0, st->meta_count); /* 4: all metadata */
  for (int i = 0; i < st->meta_count; i++) lua_pushstring(L, st->meta_values[i]), lua_setfield(L, 4, st->meta_keys[i]);
  lua_getfield(L, 4, NESTED_KEY);
  bool nested = has_opt ? nested_opt : !lua_isnil(L, -1);
  lua_pop(L, 1);
  lua_createtable(L, 0, st->count); /* 5: the result */
  if (nested) {
    lua_newtable(L); /* 6: the caller's metadata */
    unflatten(L, path, st, 4, 5, 6);
  } else {
    for (int i = 0; i < st->count; i++) {
      ms_tensor *t = st->tensors[i];
      st->tensors[i] = NULL;
      ms_lua_push_tensor(L, t);
      lua_setfield(L, 5, st->names[i]);
    }
    lua_pushvalue(L, 4);
  }
  ms_safetensors_free(st);
  return 2;
}

void bind_open_io(lua_State *L) {
  if (luaL_newmetatable(L, BOX_MT)) {
    lua_pushcfunction(L, box_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, box_gc);
    lua_setfield(L, -2, "__close");
  }
  lua_pop(L, 1);
  lua_pushcfunction(L, l_save);
  lua_setfield(L, -3, "save");
  lua_pushcfunction(L, l_load);
  lua_setfield(L, -3, "load");
}
