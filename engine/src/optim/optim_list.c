/* optim_list.c: the multi-tensor optimizer steps (PyTorch's foreach): every tensor of a list
 * passes the single-tensor step's checks, then the kernels run once per chunk of
 * MS_K_LIST_MAX tensors, reading their numbers from the options or, for a step captured in a
 * CUDA graph, from a device tensor (ms_optim_list.hp) written before each replay. */
#include <stdio.h>
#include <stdlib.h>

#include "moonshard/optim_list.h"
#include "native/dispatch.h"
#include "optim/optim_internal.h"

_Static_assert(MS_OPTIM_LIST_CHUNK == MS_K_LIST_MAX, "optim.h's chunk is the kernels' list bound");
_Static_assert(MS_OPTIM_MAX_SLOTS == MS_K_MAX_SLOTS, "optim.h's slot count is the kernels'");
_Static_assert(MS_K_ADAM_SLOTS <= MS_K_MAX_SLOTS && MS_K_SGD_SLOTS <= MS_K_MAX_SLOTS &&
                   MS_K_ADADELTA_SLOTS <= MS_K_MAX_SLOTS, "every optimizer's slots fit");

/* One optimizer's list step: its states (names, which the options use) and its kernel call. */
typedef int (*list_call)(const native_kernels *nk, ms_k_dtype dt, const ms_k_tensor_list *kl,
                         const void *hp, const double *hp_dev);
typedef struct list_spec {
  const char *op;
  int nstates;
  const char *const *names;
  const bool *used;
  list_call call;
  const void *hp;
} list_spec;

/* Tensor i of the list, with the single-tensor checks and the list's one dtype and device. */
static ms_status check_entry(const list_spec *sp, const ms_optim_list *l, int i, ms_tensor **g) {
  char pname[40], gname[40], sname[64];
  snprintf(pname, sizeof pname, "params[%d]", i + 1);
  snprintf(gname, sizeof gname, "grads[%d]", i + 1);
  ms_tensor *p = l->param[i], *p0 = l->param[0];
  ms_status st = optim_check_step_named(sp->op, pname, gname, p, l->grad[i], g);
  if (st != MS_OK) return st;
  if (p->dtype != p0->dtype)
    return ms_error(MS_ERR_ARG, "%s: %s has dtype %s, params[1] %s (a list holds one dtype)", sp->op,
                    pname, ms_dtype_name(p->dtype), ms_dtype_name(p0->dtype));
  st = ms_check_same_device(sp->op, 2, (ms_tensor *[]){p0, p});
  for (int k = 0; k < sp->nstates && st == MS_OK; k++) {
    if (!sp->used[k]) continue;
    snprintf(sname, sizeof sname, "%s[%d]", sp->names[k], i + 1);
    st = optim_check_like(sp->op, sname, p, l->state[k][i], true, false);
  }
  return st;
}

static ms_status check_hp(const char *op, const ms_tensor *hp) {
  if (hp->dtype != MS_FLOAT64 || !ms_tensor_is_contiguous(hp) || ms_tensor_numel(hp) < MS_K_MAX_SLOTS)
    return ms_error(MS_ERR_ARG, "%s: hp must be a contiguous float64 tensor of at least %d elements, got %s of %lld",
                    op, MS_K_MAX_SLOTS, ms_dtype_name(hp->dtype), (long long)ms_tensor_numel(hp));
  return ms_tensor_check_data_any(op, hp);
}

/* The device pointer of l->hp for the kernels: NULL without one or on the CPU (which reads the
 * options: capturable changes nothing there). */
static ms_status hp_pointer(const char *op, const ms_optim_list *l, const double **hp_dev) {
  *hp_dev = NULL;
  ms_tensor *hp = l->hp, *p0 = l->param[0];
  if (!hp || ms_tensor_device(p0).type == MS_CPU) return MS_OK;
  ms_status st = check_hp(op, hp);
  if (st == MS_OK) st = ms_check_same_device(op, 2, (ms_tensor *[]){p0, hp});
  if (st == MS_OK) *hp_dev = ms_tensor_data(hp);
  return st;
}

/* Tensors [from, from + kl->count) as the kernels take them; unused states stay NULL. */
static void fill_chunk(const list_spec *sp, const ms_optim_list *l, ms_tensor *const *g, int from,
                       ms_k_tensor_list *kl) {
  for (int t = 0; t < kl->count; t++) {
    int i = from + t;
    kl->n[t] = ms_tensor_numel(l->param[i]);
    kl->arr[0][t] = ms_tensor_data(l->param[i]);
    kl->arr[1][t] = ms_tensor_data(g[i]);
    for (int k = 0; k < MS_K_LIST_ARRAYS - 2; k++)
      kl->arr[2 + k][t] = k < sp->nstates && sp->used[k] ? ms_tensor_data(l->state[k][i]) : NULL;
  }
}

static ms_status run_chunks(const list_spec *sp, const ms_optim_list *l, ms_tensor *const *g) {
  const double *hp_dev;
  native_kernels nk;
  ms_status st = hp_pointer(sp->op, l, &hp_dev);
  if (st == MS_OK) st = native_kernels_for(sp->op, ms_tensor_device(l->param[0]), &nk);
  ms_k_dtype dt = (ms_k_dtype)l->param[0]->dtype;
  for (int from = 0; from < l->count && st == MS_OK; from += MS_K_LIST_MAX) {
    ms_k_tensor_list kl = {.count = l->count - from < MS_K_LIST_MAX ? l->count - from : MS_K_LIST_MAX};
    fill_chunk(sp, l, g, from, &kl);
    st = native_kernel_status(&nk, sp->call(&nk, dt, &kl, sp->hp, hp_dev));
  }
  for (int i = 0; i < l->count && st == MS_OK; i++) ms_tensor_bump_version(l->param[i]);
  return st;
}

static ms_status step_list(const list_spec *sp, const ms_optim_list *l) {
  if (!l || l->count < 0) return ms_error(MS_ERR_ARG, "%s: a list with a count >= 0 is required", sp->op);
  if (l->count == 0) return MS_OK;
  if (!l->param || !l->grad) return ms_error(MS_ERR_ARG, "%s: params and grads are required", sp->op);
  for (int k = 0; k < sp->nstates; k++)
    if (sp->used[k] && !l->state[k])
      return ms_error(MS_ERR_ARG, "%s: %s is required by the options given", sp->op, sp->names[k]);
  ms_tensor **g = calloc((size_t)l->count, sizeof *g);
  if (!g) return ms_error(MS_ERR_MEMORY, "%s: out of memory for %d gradients", sp->op, l->count);
  ms_status st = MS_OK;
  for (int i = 0; i < l->count && st == MS_OK; i++) st = check_entry(sp, l, i, &g[i]);
  if (st == MS_OK) st = run_chunks(sp, l, g);
  for (int i = 0; i < l->count; i++) ms_tensor_release(g[i]);
  free(g);
  return st;
}

/* ---- the optimizers ---- */

static int sgd_call(const native_kernels *nk, ms_k_dtype dt, const ms_k_tensor_list *kl, const void *hp,
                    const double *hp_dev) {
  return nk->k->sgd_step_list(&nk->x, dt, kl, hp, hp_dev);
}

ms_status ms_optim_sgd_step_list(const ms_optim_list *l, bool init_buffer, const ms_sgd_options *o) {
  static const char *const names[] = {"momentum_buffers"};
  const bool used[] = {o->momentum != 0};
  ms_k_sgd_hp hp = optim_sgd_hp(o, init_buffer);
  list_spec sp = {"sgd_step_list", 1, names, used, sgd_call, &hp};
  return step_list(&sp, l);
}

static int adam_call(const native_kernels *nk, ms_k_dtype dt, const ms_k_tensor_list *kl, const void *hp,
                     const double *hp_dev) {
  return nk->k->adam_step_list(&nk->x, dt, kl, hp, hp_dev);
}

ms_status ms_optim_adam_step_list(const ms_optim_list *l, const ms_adam_options *o) {
  static const char *const names[] = {"exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs"};
  const bool used[] = {true, true, o->amsgrad};
  const char *op = o->decoupled ? "adamw_step_list" : "adam_step_list";
  if (o->step < 1) return ms_error(MS_ERR_ARG, "%s: step must be >= 1, got %lld", op, (long long)o->step);
  ms_k_adam_hp hp = optim_adam_hp(o);
  list_spec sp = {op, 3, names, used, adam_call, &hp};
  return step_list(&sp, l);
}

static int adadelta_call(const native_kernels *nk, ms_k_dtype dt, const ms_k_tensor_list *kl, const void *hp,
                         const double *hp_dev) {
  return nk->k->adadelta_step_list(&nk->x, dt, kl, hp, hp_dev);
}

ms_status ms_optim_adadelta_step_list(const ms_optim_list *l, const ms_adadelta_options *o) {
  static const char *const names[] = {"square_avgs", "acc_deltas"};
  const bool used[] = {true, true};
  ms_k_adadelta_hp hp = optim_adadelta_hp(o);
  list_spec sp = {"adadelta_step_list", 2, names, used, adadelta_call, &hp};
  return step_list(&sp, l);
}

/* ---- the numbers a captured step reads (kernel_table.h's slots) ---- */

int ms_optim_sgd_slots(const ms_sgd_options *o, double *out) {
  ms_k_sgd_hp hp = optim_sgd_hp(o, false);
  ms_k_sgd_slots(&hp, out);
  return MS_K_SGD_SLOTS;
}

int ms_optim_adam_slots(const ms_adam_options *o, double *out) {
  ms_k_adam_hp hp = optim_adam_hp(o);
  ms_k_adam_slots(&hp, out);
  return MS_K_ADAM_SLOTS;
}

int ms_optim_adadelta_slots(const ms_adadelta_options *o, double *out) {
  ms_k_adadelta_hp hp = optim_adadelta_hp(o);
  ms_k_adadelta_slots(&hp, out);
  return MS_K_ADADELTA_SLOTS;
}

ms_tensor *ms_optim_slots_new(const ms_tensor *like) {
  ms_storage *s = ms_storage_new_on(ms_tensor_device(like), sizeof(double) * MS_OPTIM_MAX_SLOTS, MS_MEM_OPTIMIZER);
  if (!s) return NULL;
  ms_tensor *t = ms_tensor_new_view(s, MS_FLOAT64, 1, (int64_t[]){MS_OPTIM_MAX_SLOTS}, (int64_t[]){1}, 0);
  ms_storage_release(s);
  return t;
}

ms_status ms_optim_slots_write(ms_tensor *hp, const double *values) {
  if (!hp || !values) return ms_error(MS_ERR_ARG, "optim_slots_write: hp and values are required");
  ms_status st = check_hp("optim_slots_write", hp);
  native_kernels nk;
  if (st == MS_OK) st = native_kernels_for("optim_slots_write", ms_tensor_device(hp), &nk);
  if (st != MS_OK) return st;
  ms_k_slots s;
  for (int k = 0; k < MS_K_MAX_SLOTS; k++) s.v[k] = values[k];
  st = native_kernel_status(&nk, nk.k->write_slots(&nk.x, ms_tensor_data(hp), &s));
  if (st == MS_OK) ms_tensor_bump_version(hp);
  return st;
}
