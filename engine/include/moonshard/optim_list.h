/* optim_list.h: the multi-tensor optimizer steps (PyTorch's foreach): one set of options over many
 * parameters, the kernels run once per chunk of them, and the numbers a step captured in a CUDA
 * graph reads from device memory. */
#ifndef MOONSHARD_OPTIM_LIST_H
#define MOONSHARD_OPTIM_LIST_H

#include "moonshard/optim.h"

/* Many parameters stepped with one set of options: the arrays hold `count` entries each (param,
 * grad and the states a step uses; a state array is NULL where the options use none). Every
 * parameter has the first one's dtype and device. Each tensor passes the checks of the
 * single-tensor step, and the result is bit for bit that of `count` single-tensor steps; the
 * kernels run once per MS_OPTIM_LIST_CHUNK parameters (one CUDA launch, one threaded pass on the
 * CPU).
 *
 * hp: NULL, or a float64 tensor of at least MS_OPTIM_MAX_SLOTS elements on the parameters' CUDA
 * device holding the step's numbers as ms_optim_*_slots gives them: the kernels read them from
 * there when they run instead of from the options (a step captured in a CUDA graph, whose
 * numbers are written there before each replay). Ignored on the CPU, where it changes nothing. */
typedef struct ms_optim_list {
  int count;
  ms_tensor *const *param, *const *grad;
  ms_tensor *const *state[3];
  ms_tensor *hp;
} ms_optim_list;
#define MS_OPTIM_LIST_CHUNK 48
#define MS_OPTIM_MAX_SLOTS 8

/* state[0]: momentum buffers (required when momentum != 0; init_buffer as ms_optim_sgd_step). */
MS_API ms_status ms_optim_sgd_step_list(const ms_optim_list *l, bool init_buffer, const ms_sgd_options *o);
/* state[0..2]: exp_avg, exp_avg_sq, max_exp_avg_sq (that one only with amsgrad). */
MS_API ms_status ms_optim_adam_step_list(const ms_optim_list *l, const ms_adam_options *o);
/* state[0..1]: square_avg, acc_delta. */
MS_API ms_status ms_optim_adadelta_step_list(const ms_optim_list *l, const ms_adadelta_options *o);

/* The numbers a step with these options computes with, as the kernels derive them (Adam's step
 * size and bias correction from o->step), into out: the values a captured step's hp tensor
 * holds. Returns their count (at most MS_OPTIM_MAX_SLOTS). */
MS_API int ms_optim_sgd_slots(const ms_sgd_options *o, double *out);
MS_API int ms_optim_adam_slots(const ms_adam_options *o, double *out);
MS_API int ms_optim_adadelta_slots(const ms_adadelta_options *o, double *out);

/* A float64 tensor of MS_OPTIM_MAX_SLOTS elements on like's device, uninitialised (counted as
 * optimizer memory): the hp of a captured step. Made without a kernel or a copy, so that making it
 * while a CUDA graph is captured records nothing that a replay would redo. New reference; NULL
 * with an error. */
MS_API ms_tensor *ms_optim_slots_new(const ms_tensor *like);
/* hp (as ms_optim_slots_new makes it) = values (MS_OPTIM_MAX_SLOTS of them), ordered on hp's
 * device like a kernel: on CUDA the values travel as a kernel's arguments, so the host neither
 * stages memory nor waits (a replay hook writes a captured step's numbers so). */
MS_API ms_status ms_optim_slots_write(ms_tensor *hp, const double *values);

#endif
