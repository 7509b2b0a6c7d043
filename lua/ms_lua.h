/* ms_lua.h (private to lua/): what the binding files share: argument checking with precise
 * errors, 1-based dims and indices turned 0-based, options tables, and registration. Engine
 * failures become Lua errors here and only here (bind_raise). */
#ifndef MS_LUA_PRIVATE_H
#define MS_LUA_PRIVATE_H

#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>

#include "moonshard/lua.h"
#include "moonshard/moonshard.h"
#include "moonshard/transforms.h"

#define MS_TENSOR_MT "moonshard.Tensor"
#define MS_SIZE_MT "moonshard.Size"

/* ---- errors ---------------------------------------------------------------------------------- */
/* Every binding raises through bind_error (l_errors.c): luaL_error's formatting, positioned at
 * the first frame outside moonshard (the user's line), not at the library line that called the
 * binding. Never returns. */
int bind_error(lua_State *L, const char *fmt, ...);
/* The same, looking for the user's frame from stack level `from` up (0 inside a debug hook). */
int bind_error_from(lua_State *L, int from, const char *fmt, ...);
/* The `error` the library's Lua chunks see (module.c): Lua's, positioned the same way. */
int bind_lib_error(lua_State *L);
/* True when the error value at idx is a message that bind_error or bind_lib_error raised at a
 * user's line (and MOONSHARD_TRACEBACK is not set): the message handler then leaves it one line. */
bool bind_is_user_mistake(lua_State *L, int idx);
/* True when the function at stack level `level` is moonshard's library (or C, or missing). */
bool bind_library_frame(lua_State *L, int level);
/* "did you mean": the nearest of the candidates to name, within a few edits (NULL when none). */
typedef struct bind_suggestion {
  const char *name;
  const char *best;
  size_t distance;
} bind_suggestion;
void bind_suggest_init(bind_suggestion *s, const char *name);
void bind_suggest_consider(bind_suggestion *s, const char *candidate);
/* Considers every string key of the table at idx. */
void bind_suggest_table(bind_suggestion *s, lua_State *L, int idx);
/* Raises the engine's last error as a Lua error. Never returns. */
int bind_raise(lua_State *L);
/* Raises "fname: bad argument #arg (what): expected <expected>, got <description of value>". */
int bind_arg_error(lua_State *L, int arg, const char *fname, const char *what, const char *expected);
/* A short description of the value at idx for messages: "string 'abc'", "a float32 tensor of
 * shape (2, 3)", "nil", "3.5". */
const char *bind_describe(lua_State *L, int idx);
/* Pushes t (new reference, may be NULL after an engine failure: then raises). Returns 1. */
int bind_push_result(lua_State *L, ms_tensor *t);
/* Raises the engine error when st is not MS_OK. */
void bind_check_status(lua_State *L, ms_status st);

/* ---- arguments ------------------------------------------------------------------------------- */
/* Raises "fname: bad argument #i: unexpected argument, got ..." for any non-nil argument from idx
 * on: a function's argument reader calls it where its arguments end, so an extra or misplaced
 * argument is never silently ignored. bind_check_opts does so after the options table. */
void bind_check_end(lua_State *L, int idx, const char *fname);
int64_t bind_check_integer(lua_State *L, int idx, const char *fname, const char *what);
/* v (a Lua integer from an argument, a table entry, an option or a length) narrowed to an int in
 * lo..hi; raises "fname: what: expected an integer in lo..hi, got v" otherwise, so that 2^32 + 1
 * never becomes 1. The one way bindings turn a Lua integer into a C int. */
int bind_narrow_int(lua_State *L, lua_Integer v, int lo, int hi, const char *fname, const char *what);
/* A 1-based (or negative, from the end) dim of a tensor with ndim dims, returned 0-based. For
 * ops that insert a dim (unsqueeze, stack) pass ndim + 1. */
int bind_check_dim(lua_State *L, int idx, int ndim, const char *fname, const char *what);
/* A 1-based (or negative) position in a dim of `size` elements, returned 0-based. */
int64_t bind_check_index(lua_State *L, int idx, int64_t size, const char *fname, const char *what);
/* Sizes given as integers from `first` up to the first non-number, or as one table (a sequence
 * or a Size). Returns the number of dims; *next receives the index after the sizes. */
int bind_check_sizes(lua_State *L, int first, int64_t *shape, const char *fname, int *next);
/* A dtype name ("float32", "double", "torch.int64", ...) at idx. */
ms_dtype bind_check_dtype(lua_State *L, int idx, const char *fname, const char *what);

/* Options table at idx (nil or none is an empty table), the last argument: typed getters that
 * raise on a wrong type, naming fname and the key. Unknown keys raise too, so typos do not pass
 * silently, and so does any argument after idx. */
typedef struct ms_lua_opts {
  lua_State *L;
  int idx; /* 0 when there is no table */
  const char *fname;
} ms_lua_opts;
ms_lua_opts bind_check_opts(lua_State *L, int idx, const char *fname, const char *const *known);
bool bind_opt_dtype(ms_lua_opts o, const char *key, ms_dtype *out);
bool bind_opt_bool(ms_lua_opts o, const char *key, bool *out);
bool bind_opt_number(ms_lua_opts o, const char *key, double *out);
bool bind_opt_integer(ms_lua_opts o, const char *key, int64_t *out);
/* The creation options shared by every factory: dtype, device, requires_grad. */
typedef struct ms_lua_factory_opts {
  ms_dtype dtype;
  bool requires_grad;
  bool has_device; /* device was given; otherwise the CPU (or, for *_like, the source's) */
  ms_device device;
} ms_lua_factory_opts;
ms_lua_factory_opts bind_factory_options(lua_State *L, int idx, const char *fname, ms_dtype dflt);
/* Applies the device (t, made on the CPU, is moved there: the same values on every device) and
 * requires_grad (only floating tensors may require gradients). Takes over t and returns the
 * tensor to push; on an error releases t and raises. */
ms_tensor *bind_apply_factory_options(lua_State *L, ms_tensor *t, ms_lua_factory_opts o, const char *fname);
/* A device name ("cpu", "cuda", "cuda:1") or a CUDA device index at idx; raises for anything else
 * (a CUDA device that cannot be used raises when a tensor is put there, saying why). */
ms_device bind_check_device(lua_State *L, int idx, const char *fname, const char *what);

/* A binary operand: a tensor, a Lua number or a boolean. */
ms_operand bind_check_operand(lua_State *L, int idx, const char *fname, const char *what);
/* Adds 1 in place to an int64 tensor of 0-based positions (indices; NULL raises the engine's
 * error) so Lua sees 1-based ones; raises on failure, releasing it. Returns indices. */
ms_tensor *bind_one_based(lua_State *L, ms_tensor *indices);

/* ---- values ---------------------------------------------------------------------------------- */
/* Pushes a number as Lua integer or float according to dtype. */
void bind_push_element(lua_State *L, const ms_tensor *t, int64_t flat_index);
/* Pushes a Size table {d1, d2, ...} with __tostring "torch.Size([d1, d2])". */
void bind_push_size(lua_State *L, int ndim, const int64_t *shape);

/* Sets requires_grad with PyTorch's rules (floating dtypes only; leaves only when turning off). */
void bind_set_requires_grad(lua_State *L, ms_tensor *t, bool on, const char *fname);

/* ---- memory ---------------------------------------------------------------------------------- */
/* Lua's collector cannot see tensor bytes: after each new tensor, run a full collection when
 * the engine's bytes have grown past a threshold that doubles with the live set. */
void bind_account_memory(lua_State *L);

/* Registers every embedded lua/moonshard/X.lua in package.preload as "moonshard.X" (module.c). */
void bind_preload_embedded(lua_State *L);

/* ---- registration (each l_*.c file) ------------------------------------------------------------- */
/* Each adds its functions to the module table at -2 and to the method table at -1 (both on
 * the stack). */
void bind_open_create(lua_State *L);
void bind_open_view(lua_State *L);
void bind_open_math(lua_State *L);
void bind_open_select(lua_State *L); /* l_select.c: gather, scatter, sort, topk, cumsum */
void bind_open_runtime(lua_State *L);
void bind_open_tensor(lua_State *L);
void bind_open_autograd(lua_State *L);
void bind_open_function(lua_State *L);  /* l_function.c: ms.autograd (custom Functions) */
void bind_open_nn_conv(lua_State *L);   /* l_nn_conv.c: conv2d and pooling */
void bind_open_nn_ops(lua_State *L);    /* l_nn_ops.c: activations, losses, normalization */
void bind_open_optim(lua_State *L);     /* l_optim.c: fused optimizer steps */
void bind_open_io(lua_State *L);        /* l_io.c: ms.save / ms.load (safetensors) */
void bind_open_io_parts(lua_State *L);  /* l_io_parts.c: ranges of safetensors files, JSON indexes */
void bind_open_idx(lua_State *L);       /* l_idx.c: ms.read_idx, ms._idx_rows (IDX files, MNIST) */
/* The rows object (ms._idx_rows) at idx; raises naming fname when it is not one or was closed. */
ms_idx_rows *bind_check_idx_rows(lua_State *L, int idx, const char *fname);
/* The factories' device when none is given (CPU unless an ms.device scope is open): l_util.c. */
ms_device bind_default_device(void);
void bind_set_default_device(ms_device d);
void bind_open_meta(lua_State *L); /* l_meta.c: the meta device's helpers */
void bind_open_random_fill(lua_State *L); /* l_random_fill.c: uniform_, normal_ in place */
int bind_get_rng_state(lua_State *L);      /* l_random_fill.c: ms.get_rng_state */
int bind_cuda_get_rng_state(lua_State *L); /* l_random_fill.c: ms.cuda's, registered by l_cuda.c */
int bind_cuda_set_rng_state(lua_State *L);
void bind_open_files(lua_State *L);       /* l_files.c: atomic writes, checksums, listings */
void bind_open_loader(lua_State *L);      /* l_loader.c: ms._loader_new, ms.data on first use */
void bind_open_transforms(lua_State *L); /* l_transforms.c: ms.transform_batch */
void bind_open_dist(lua_State *L);       /* l_dist.c: ms.distributed */
void bind_open_launch(lua_State *L);     /* l_launch.c: ms._launch_mpirun (ms.spawn's launcher) */
void bind_open_fsdp(lua_State *L);       /* l_fsdp.c: ms._fsdp (flat parameters) */
void bind_open_watch(lua_State *L);       /* l_watch.c: ms.plot, ms.summary, PNG, isatty */
void bind_open_cuda(lua_State *L);       /* l_cuda.c: ms.cuda, t:cuda(), t:cpu() */
void bind_open_errors(lua_State *L);     /* l_errors.c: ms._did_you_mean */
/* The Lua list of transform specs at idx ({kind = "to_tensor"}, {kind = "normalize", mean =,
 * std =}, as Compose:native_spec() returns; or one such spec alone, as ToTensor:native_spec()
 * returns) into specs (room for MS_TRANSFORM_MAX_SPECS);
 * *n receives the count. Raises a Lua error naming the bad spec; checked by the engine too. */
void bind_check_transform_specs(lua_State *L, int idx, ms_transform_spec *specs, int *n);
/* Registers fn under `name` in both the module table (-2) and the method table (-1). */
void bind_register_both(lua_State *L, const char *name, lua_CFunction fn);
/* Registers the value on top of the stack (popped) the same way. */
void bind_register_value_both(lua_State *L, const char *name);

#endif
