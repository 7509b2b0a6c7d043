/* optim_sgd_body.h: private to kernels/cpu. The one body of the vector float32 SGD step, included
 * by optim_avx2.c and optim_avx512.c as optim_adadelta_body.h is (see there for the names the
 * including file defines; this body also needs OPT_SGD). The same double formula as optim.c's
 * sgd_loop, operation for operation, widened on load and rounded once on store: bit for bit the
 * staged path. */
#include <immintrin.h>

#include "kernels/kernels.h"

int64_t OPT_SGD(const ms_k_sgd_hp *hp, int64_t n, float *p, const float *g, float *buf) {
  const OPT_VD wd = OPT_VEC(set1_pd)(hp->weight_decay), sign = OPT_VEC(set1_pd)(-0.0);
  const OPT_VD momentum = OPT_VEC(set1_pd)(hp->momentum), neg_lr = OPT_VEC(set1_pd)(-hp->lr);
  const OPT_VD one_m_damp = OPT_VEC(set1_pd)(1 - hp->dampening);
  const int maximize = hp->maximize, decay = hp->weight_decay != 0, nesterov = hp->nesterov;
  const int init = hp->init_buffer;
  int64_t i = 0;
  for (; i + OPT_LANES <= n; i += OPT_LANES) {
    OPT_VD pi = OPT_LOAD(p + i), d = OPT_LOAD(g + i);
    if (maximize) d = OPT_VEC(xor_pd)(d, sign);
    if (decay) d = OPT_VEC(add_pd)(d, OPT_VEC(mul_pd)(wd, pi));
    if (buf) {
      OPT_VD b = init ? d : OPT_VEC(add_pd)(OPT_VEC(mul_pd)(OPT_LOAD(buf + i), momentum),
                                            OPT_VEC(mul_pd)(one_m_damp, d));
      OPT_STORE(buf + i, b);
      d = nesterov ? OPT_VEC(add_pd)(d, OPT_VEC(mul_pd)(momentum, b)) : b;
    }
    pi = OPT_VEC(add_pd)(pi, OPT_VEC(mul_pd)(neg_lr, d));
    OPT_STORE(p + i, pi);
  }
  return i;
}
