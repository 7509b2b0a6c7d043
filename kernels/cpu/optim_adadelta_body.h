/* optim_adadelta_body.h: private to kernels/cpu. The one body of the vector float32 Adadelta step,
 * written once for any vector width: optim_avx2.c and optim_avx512.c each define the names below
 * and include it. The same double formula as optim.c's adadelta_block, operation for operation
 * (no FMA: -std=c11 keeps GCC from contracting), widened on load and rounded once on store: bit
 * for bit the staged path, without its copies.
 *
 * The including file defines: OPT_VEC(op) (the double intrinsic prefix: _mm256_##op), OPT_VD (the
 * double vector type), OPT_LANES (doubles per vector), OPT_LOAD(ptr) / OPT_STORE(ptr, v) (float
 * memory <-> double vector) and OPT_ADADELTA (the function name). */
#include <immintrin.h>

#include "kernels/kernels.h"

int64_t OPT_ADADELTA(const ms_k_adadelta_hp *hp, int64_t n, float *p, const float *g, float *sq, float *acc) {
  const OPT_VD rho = OPT_VEC(set1_pd)(hp->rho), one_m_rho = OPT_VEC(set1_pd)(1 - hp->rho);
  const OPT_VD eps = OPT_VEC(set1_pd)(hp->eps), neg_lr = OPT_VEC(set1_pd)(-hp->lr);
  const OPT_VD wd = OPT_VEC(set1_pd)(hp->weight_decay), sign = OPT_VEC(set1_pd)(-0.0);
  const int maximize = hp->maximize, decay = hp->weight_decay != 0;
  int64_t i = 0;
  for (; i + OPT_LANES <= n; i += OPT_LANES) {
    OPT_VD pi = OPT_LOAD(p + i), gi = OPT_LOAD(g + i), si = OPT_LOAD(sq + i), ai = OPT_LOAD(acc + i);
    if (maximize) gi = OPT_VEC(xor_pd)(gi, sign);
    if (decay) gi = OPT_VEC(add_pd)(gi, OPT_VEC(mul_pd)(wd, pi));
    si = OPT_VEC(add_pd)(OPT_VEC(mul_pd)(si, rho), OPT_VEC(mul_pd)(OPT_VEC(mul_pd)(one_m_rho, gi), gi));
    OPT_VD std = OPT_VEC(sqrt_pd)(OPT_VEC(add_pd)(si, eps));
    OPT_VD delta = OPT_VEC(mul_pd)(OPT_VEC(div_pd)(OPT_VEC(sqrt_pd)(OPT_VEC(add_pd)(ai, eps)), std), gi);
    OPT_VD dd = OPT_VEC(mul_pd)(OPT_VEC(mul_pd)(one_m_rho, delta), delta);
    ai = OPT_VEC(add_pd)(OPT_VEC(mul_pd)(ai, rho), dd);
    pi = OPT_VEC(add_pd)(pi, OPT_VEC(mul_pd)(neg_lr, delta));
    OPT_STORE(sq + i, si);
    OPT_STORE(acc + i, ai);
    OPT_STORE(p + i, pi);
  }
  return i;
}
