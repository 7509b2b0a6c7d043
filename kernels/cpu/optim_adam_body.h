/* optim_adam_body.h: private to kernels/cpu. The one body of the vector float32 Adam/AdamW step,
 * included by optim_avx2.c and optim_avx512.c as optim_adadelta_body.h is (see there for the
 * names the including file defines; this body also needs OPT_MAX_NAN(a, b) and OPT_ADAM). The
 * same double formula as optim.c's adam_loop, operation for operation, widened on load and
 * rounded once on store: bit for bit the staged path. */
#include <immintrin.h>

#include "kernels/kernels.h"

int64_t OPT_ADAM(const ms_k_adam_hp *hp, double step_size, double bias_correction2_sqrt, int64_t n,
                 float *p, const float *g, float *m, float *v, float *vmax) {
  const OPT_VD beta1 = OPT_VEC(set1_pd)(hp->beta1), one_m_beta1 = OPT_VEC(set1_pd)(1 - hp->beta1);
  const OPT_VD beta2 = OPT_VEC(set1_pd)(hp->beta2), one_m_beta2 = OPT_VEC(set1_pd)(1 - hp->beta2);
  const OPT_VD eps = OPT_VEC(set1_pd)(hp->eps), sign = OPT_VEC(set1_pd)(-0.0);
  const OPT_VD neg_step = OPT_VEC(set1_pd)(-step_size), bc2 = OPT_VEC(set1_pd)(bias_correction2_sqrt);
  /* AdamW scales the parameter (skipped where the factor is 1); Adam adds L2 to the gradient */
  const double decay_s = hp->decoupled ? 1 - hp->lr * hp->weight_decay : 1;
  const double l2_s = hp->decoupled ? 0 : hp->weight_decay;
  const OPT_VD decay = OPT_VEC(set1_pd)(decay_s), l2 = OPT_VEC(set1_pd)(l2_s);
  const int maximize = hp->maximize, amsgrad = hp->amsgrad, scale = decay_s != 1, add_l2 = l2_s != 0;
  int64_t i = 0;
  for (; i + OPT_LANES <= n; i += OPT_LANES) {
    OPT_VD pi = OPT_LOAD(p + i), gi = OPT_LOAD(g + i), mi = OPT_LOAD(m + i), vi = OPT_LOAD(v + i);
    if (maximize) gi = OPT_VEC(xor_pd)(gi, sign);
    if (add_l2) gi = OPT_VEC(add_pd)(gi, OPT_VEC(mul_pd)(l2, pi));
    if (scale) pi = OPT_VEC(mul_pd)(pi, decay);
    mi = OPT_VEC(add_pd)(OPT_VEC(mul_pd)(mi, beta1), OPT_VEC(mul_pd)(one_m_beta1, gi));
    vi = OPT_VEC(add_pd)(OPT_VEC(mul_pd)(vi, beta2), OPT_VEC(mul_pd)(OPT_VEC(mul_pd)(one_m_beta2, gi), gi));
    OPT_VD vv = vi;
    if (amsgrad) {
      vv = OPT_MAX_NAN(OPT_LOAD(vmax + i), vi);
      OPT_STORE(vmax + i, vv);
    }
    OPT_VD denom = OPT_VEC(add_pd)(OPT_VEC(div_pd)(OPT_VEC(sqrt_pd)(vv), bc2), eps);
    pi = OPT_VEC(add_pd)(pi, OPT_VEC(div_pd)(OPT_VEC(mul_pd)(neg_step, mi), denom));
    OPT_STORE(m + i, mi);
    OPT_STORE(v + i, vi);
    OPT_STORE(p + i, pi);
  }
  return i;
}
