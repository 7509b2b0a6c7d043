/* l_random_fill.c: in-place random fills, t:uniform_(a, b) and t:normal_(mean, std), as
 * methods and as ms.uniform_(t, ...) / ms.normal_(t, ...). They draw from the one Philox
 * generator, so ms.manual_seed makes nn.init and layer construction reproducible. Also the
 * generator's state for checkpoints: ms.get_rng_state() / ms.set_rng_state(state), and the
 * same under ms.cuda (l_cuda.c registers them there). */
#include <string.h>

#include "ms_lua.h"

/* The tensor to fill (floating, and not a leaf that autograd tracks unless under no_grad: as in
 * torch, writing into a parameter in place is only allowed where no graph is recorded). */
static ms_tensor *check_fill_target(lua_State *L, const char *fname) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, fname);
  if (!ms_dtype_is_floating(t->dtype))
    bind_error(L, "%s: bad argument #1 (tensor): expected a floating tensor, got %s", fname,
               bind_describe(L, 1));
  if (t->requires_grad && ms_tensor_is_leaf(t) && ms_grad_enabled())
    bind_error(L, "%s: a leaf tensor that requires grad cannot be filled in place while grad "
               "mode is on (use it under ms.no_grad())", fname);
  return t;
}

static double opt_number(lua_State *L, int idx, double dflt, const char *fname, const char *what) {
  if (lua_isnoneornil(L, idx)) return dflt;
  if (lua_type(L, idx) != LUA_TNUMBER) bind_arg_error(L, idx, fname, what, "a number");
  return lua_tonumber(L, idx);
}

static int l_uniform_(lua_State *L) {
  bind_check_end(L, 4, "uniform_");
  ms_tensor *t = check_fill_target(L, "uniform_");
  double a = opt_number(L, 2, 0.0, "uniform_", "from");
  double b = opt_number(L, 3, 1.0, "uniform_", "to");
  if (!(a <= b))
    return bind_error(L, "uniform_: expected from <= to, got from=%f to=%f", a, b);
  bind_check_status(L, ms_tensor_uniform_(t, a, b));
  lua_settop(L, 1);
  return 1;
}

static int l_normal_(lua_State *L) {
  bind_check_end(L, 4, "normal_");
  ms_tensor *t = check_fill_target(L, "normal_");
  double mean = opt_number(L, 2, 0.0, "normal_", "mean");
  double std = opt_number(L, 3, 1.0, "normal_", "std");
  if (!(std >= 0)) return bind_error(L, "normal_: expected std >= 0, got %f", std);
  bind_check_status(L, ms_tensor_normal_(t, mean, std));
  lua_settop(L, 1);
  return 1;
}

/* ---- the generator state ------------------------------------------------------------------- */

/* A state is a uint8 tensor of 16 bytes, as PyTorch's CUDA generator's (a ByteTensor of seed and
 * offset): the seed then the offset in Philox blocks, each 8 bytes little-endian. It survives
 * ms.save / ms.load like any tensor. */
enum { STATE_BYTES = 16 };

int bind_get_rng_state(lua_State *L) {
  uint64_t v[2];
  ms_random_get_state(&v[0], &v[1]);
  int64_t n = STATE_BYTES;
  ms_tensor *t = ms_tensor_new_empty(1, &n, MS_UINT8);
  if (t) {
    unsigned char *out = ms_tensor_data(t);
    for (int i = 0; i < STATE_BYTES; i++) out[i] = (unsigned char)(v[i / 8] >> (8 * (i % 8)));
  }
  return bind_push_result(L, t);
}

static void set_state(lua_State *L, int idx, const char *fname) {
  ms_tensor *t = ms_lua_to_tensor(L, idx);
  if (!t || t->dtype != MS_UINT8 || ms_tensor_numel(t) != STATE_BYTES)
    bind_arg_error(L, idx, fname, "state", "a uint8 tensor of 16 bytes (from get_rng_state)");
  ms_tensor *c = ms_tensor_contiguous(t);
  ms_tensor *host = c ? ms_tensor_to_device(c, (ms_device){MS_CPU, 0}) : NULL;
  ms_tensor_release(c);
  if (!host) bind_raise(L);
  unsigned char bytes[STATE_BYTES];
  memcpy(bytes, ms_tensor_data(host), STATE_BYTES);
  ms_tensor_release(host);
  uint64_t v[2] = {0, 0};
  for (int i = STATE_BYTES - 1; i >= 0; i--) v[i / 8] = v[i / 8] << 8 | bytes[i];
  ms_random_set_state(v[0], v[1]);
}

static int l_set_rng_state(lua_State *L) {
  set_state(L, 1, "set_rng_state");
  return 0;
}

/* ms.cuda.get_rng_state([device]) / ms.cuda.set_rng_state(state [, device]): PyTorch's names for
 * the CUDA generator. moonshard draws the same numbers on either device from one generator, so
 * these read and set that one state; the device, when given, must name a CUDA device. */
static void check_cuda_device(lua_State *L, int idx, const char *fname) {
  if (lua_isnoneornil(L, idx)) return;
  ms_device d;
  if (lua_isinteger(L, idx) && lua_tointeger(L, idx) >= 0) return;
  if (lua_type(L, idx) == LUA_TSTRING && ms_device_parse(lua_tostring(L, idx), &d) && d.type == MS_CUDA) return;
  bind_arg_error(L, idx, fname, "device", "a CUDA device (an index >= 0, \"cuda\" or \"cuda:N\")");
}

int bind_cuda_get_rng_state(lua_State *L) {
  check_cuda_device(L, 1, "cuda.get_rng_state");
  lua_settop(L, 0);
  return bind_get_rng_state(L);
}

int bind_cuda_set_rng_state(lua_State *L) {
  check_cuda_device(L, 2, "cuda.set_rng_state");
  set_state(L, 1, "cuda.set_rng_state");
  return 0;
}

void bind_open_random_fill(lua_State *L) {
  bind_register_both(L, "uniform_", l_uniform_);
  bind_register_both(L, "normal_", l_normal_);
  lua_pushcfunction(L, bind_get_rng_state);
  lua_setfield(L, -3, "get_rng_state");
  lua_pushcfunction(L, l_set_rng_state);
  lua_setfield(L, -3, "set_rng_state");
}
