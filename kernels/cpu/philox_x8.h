/* philox_x8.h: private to kernels/cpu. Philox 4x32-10's constants, shared by the scalar generator
 * (philox.c) and its eight-block AVX2 form (philox_avx2.c). */
#ifndef MS_PHILOX_X8_H
#define MS_PHILOX_X8_H

#include <stdint.h>

#define MS_PHILOX_M0 0xD2511F53u
#define MS_PHILOX_M1 0xCD9E8D57u
#define MS_PHILOX_W0 0x9E3779B9u /* golden ratio */
#define MS_PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

/* Blocks n0 .. n0 + 7 (counter {low, high word of n, 0, 0}, key = seed): word k of block n0 + i
 * in out[k][i]. Call only where the CPU has AVX2. */
void ms_k_philox_x8_avx2(uint64_t seed, uint64_t n0, uint32_t out[4][8]);

/* Bernoulli bytes for those eight blocks' 32 words (the element of word k of block i is 4 i + k):
 * out[4 i + k] = x8[k][i] < thr, thr <= 2^32 (philox.c's integer threshold; 2^32: all ones). */
void ms_k_bernoulli_x8_avx2(const uint32_t x8[4][8], uint64_t thr, uint8_t out[32]);

#endif
