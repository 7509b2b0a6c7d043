/* optim.h: the fused optimizer updates of one parameter (torch.optim's formulas), and the state
 * tensors they keep. The Lua optimizers (lua/moonshard/optim.lua) own the state and the options
 * per parameter group; these functions check the tensors and run one native pass over them. */
#ifndef MOONSHARD_OPTIM_H
#define MOONSHARD_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "moonshard/export.h"
#include "moonshard/tensor.h"

/* A state tensor for `param`: its shape and dtype, contiguous, every element `value`, its bytes
 * counted as optimizer memory (MS_MEM_OPTIMIZER). New reference; NULL with an error. */
MS_API ms_tensor *ms_optim_state_new(const ms_tensor *param, double value);

/* Every step function: `param` (float32 or float64, contiguous) is updated in place; `grad` has
 * its shape and dtype (any layout); each state tensor has its shape and dtype and is contiguous
 * (as ms_optim_state_new makes them). A state an option does not use may be NULL. Returns
 * MS_OK, or an error naming the optimizer and the offending argument. */

typedef struct ms_sgd_options {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize;
} ms_sgd_options;
/* momentum_buffer is required when momentum != 0. init_buffer: the buffer is new and takes the
 * (decayed) gradient as it is, as PyTorch clones it on the first step. */
MS_API ms_status ms_optim_sgd_step(ms_tensor *param, ms_tensor *grad, ms_tensor *momentum_buffer,
                                   bool init_buffer, const ms_sgd_options *o);

typedef struct ms_adam_options {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step; /* the step count including this step (1 on the first) */
  bool amsgrad, maximize;
  bool decoupled; /* AdamW's decoupled weight decay */
} ms_adam_options;
/* max_exp_avg_sq is required when amsgrad. */
MS_API ms_status ms_optim_adam_step(ms_tensor *param, ms_tensor *grad, ms_tensor *exp_avg,
                                    ms_tensor *exp_avg_sq, ms_tensor *max_exp_avg_sq,
                                    const ms_adam_options *o);

typedef struct ms_adadelta_options {
  double lr, rho, eps, weight_decay;
  bool maximize;
} ms_adadelta_options;
/* One Adadelta step on param in place (PyTorch's update), square_avg and acc_delta its state. */
MS_API ms_status ms_optim_adadelta_step(ms_tensor *param, ms_tensor *grad, ms_tensor *square_avg,
                                        ms_tensor *acc_delta, const ms_adadelta_options *o);

typedef struct ms_adagrad_options {
  double lr, lr_decay, weight_decay, eps;
  int64_t step; /* including this step */
  bool maximize;
} ms_adagrad_options;
/* One Adagrad step on param in place (PyTorch's update), state_sum its state. */
MS_API ms_status ms_optim_adagrad_step(ms_tensor *param, ms_tensor *grad, ms_tensor *state_sum,
                                       const ms_adagrad_options *o);

typedef struct ms_rmsprop_options {
  double lr, alpha, eps, weight_decay, momentum;
  bool centered, maximize;
} ms_rmsprop_options;
/* grad_avg is required when centered, momentum_buffer when momentum > 0. */
MS_API ms_status ms_optim_rmsprop_step(ms_tensor *param, ms_tensor *grad, ms_tensor *square_avg,
                                       ms_tensor *grad_avg, ms_tensor *momentum_buffer,
                                       const ms_rmsprop_options *o);

#endif
