/* l_files.c: the file operations sharded checkpoints (lua/moonshard/fsdp_checkpoint.lua) need
 * beyond Lua's io library, all internal:
 *   ms._write_atomic(path, text, who)       the atomic write of ms.save (atomic_file.c)
 *   ms._crc32(text), ms._file_crc32(path)   zlib's crc32 (the latter -> crc, size)
 *   ms._md5(text)                           -> 32 lowercase hex digits (md5.c; datasets' download check)
 *   ms._file_size(path)                     -> size, or nil and why not
 *   ms._list_dir(dir)                       -> names
 *   ms._remove_stale_temporaries(dir, prefix) -> how many
 *   ms._os_random_int()                     -> a non-negative integer of 62 random bits
 * The engine does the work, so ms.save and the index share one atomic write and one rule for
 * temporaries. */
#define _DEFAULT_SOURCE /* dirent */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "moonshard/io.h"
#include "moonshard/md5.h"
#include "ms_lua.h"

static int l_write_atomic(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  size_t n;
  const char *text = luaL_checklstring(L, 2, &n);
  const char *who = luaL_optstring(L, 3, "write_atomic");
  bind_check_status(L, ms_write_file_atomic(path, text, n, who));
  return 0;
}

/* crc32 of a string, as zlib (and Python's zlib.crc32) computes it */
static int l_crc32(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  uLong c = crc32(0L, Z_NULL, 0);
  for (size_t done = 0; done < n;) { /* uInt lengths: strings over 4 GB go in pieces */
    uInt k = n - done > (1u << 30) ? (1u << 30) : (uInt)(n - done);
    c = crc32(c, (const Bytef *)s + done, k);
    done += k;
  }
  lua_pushinteger(L, (lua_Integer)c);
  return 1;
}

/* ms._md5(text) -> the MD5 of text as 32 lowercase hex digits, as md5sum prints it */
static int l_md5(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  unsigned char d[16];
  ms_md5(s, n, d);
  char hex[33];
  for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
  lua_pushlstring(L, hex, 32);
  return 1;
}

/* ms._file_size(path) -> bytes of a regular file, or nil and why not (stat only: a FIFO is never
 * opened, so it cannot block) */
static int l_file_size(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  struct stat st;
  if (stat(path, &st) != 0) return lua_pushnil(L), lua_pushstring(L, strerror(errno)), 2;
  if (!S_ISREG(st.st_mode)) return lua_pushnil(L), lua_pushliteral(L, "not a regular file"), 2;
  lua_pushinteger(L, (lua_Integer)st.st_size);
  return 1;
}

static int l_file_crc32(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  uint32_t crc;
  uint64_t size;
  bind_check_status(L, ms_file_crc32(path, &crc, &size));
  lua_pushinteger(L, (lua_Integer)crc);
  lua_pushinteger(L, (lua_Integer)size);
  return 2;
}

#define DIR_MT "moonshard.DirHandle"

/* __gc of the box that holds an open DIR, so a memory error while listing does not leak it */
static int dir_gc(lua_State *L) {
  DIR **d = luaL_checkudata(L, 1, DIR_MT);
  if (*d) closedir(*d);
  *d = NULL;
  return 0;
}

/* The entries of dir but "." and "..", in the order the directory gives them. */
static int l_list_dir(lua_State *L) {
  const char *dir = luaL_checkstring(L, 1);
  DIR **d = lua_newuserdatauv(L, sizeof *d, 0); /* the box exists before what it owns */
  *d = NULL;
  luaL_setmetatable(L, DIR_MT);
  if (!(*d = opendir(dir))) return bind_error(L, "list_dir: could not open '%s': %s", dir, strerror(errno));
  lua_newtable(L);
  int n = 0;
  for (struct dirent *e; (e = readdir(*d));) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    lua_pushstring(L, e->d_name);
    lua_rawseti(L, -2, ++n);
  }
  closedir(*d);
  *d = NULL;
  return 1;
}

static int l_remove_stale_temporaries(lua_State *L) {
  lua_pushinteger(L, ms_remove_stale_temporaries(luaL_checkstring(L, 1), luaL_checkstring(L, 2)));
  return 1;
}

static int l_os_random_int(lua_State *L) {
  uint64_t v;
  bind_check_status(L, ms_os_random(&v, sizeof v));
  lua_pushinteger(L, (lua_Integer)(v >> 2));
  return 1;
}

void bind_open_files(lua_State *L) {
  if (luaL_newmetatable(L, DIR_MT)) {
    lua_pushcfunction(L, dir_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  static const luaL_Reg fns[] = {{"_write_atomic", l_write_atomic},
                                 {"_crc32", l_crc32},
                                 {"_file_crc32", l_file_crc32},
                                 {"_md5", l_md5},
                                 {"_file_size", l_file_size},
                                 {"_list_dir", l_list_dir},
                                 {"_remove_stale_temporaries", l_remove_stale_temporaries},
                                 {"_os_random_int", l_os_random_int},
                                 {NULL, NULL}};
  lua_pushvalue(L, -2);
  luaL_setfuncs(L, fns, 0);
  lua_pop(L, 1);
}
