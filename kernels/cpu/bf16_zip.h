/* bf16_zip.h: private to the AVX-512 BF16 files. vpermt2w indices interleaving x (lanes 0-31)
 * with y (32-63), their lanes 0-15 then 16-31: the k-pair layout vdpbf16ps reads, built from two
 * rows of bfloat16 (gemm_bf16_avx512.c's packers, conv_bf16_avx512.c's panels). */
#ifndef MS_BF16_ZIP_H
#define MS_BF16_ZIP_H

#include <stdint.h>

#define MS_ZIP(i) i, 32 + i
static const uint16_t ms_bf16_zip_idx[2][32] __attribute__((aligned(64))) = {
    {MS_ZIP(0), MS_ZIP(1), MS_ZIP(2), MS_ZIP(3), MS_ZIP(4), MS_ZIP(5), MS_ZIP(6), MS_ZIP(7), MS_ZIP(8),
     MS_ZIP(9), MS_ZIP(10), MS_ZIP(11), MS_ZIP(12), MS_ZIP(13), MS_ZIP(14), MS_ZIP(15)},
    {MS_ZIP(16), MS_ZIP(17), MS_ZIP(18), MS_ZIP(19), MS_ZIP(20), MS_ZIP(21), MS_ZIP(22), MS_ZIP(23),
     MS_ZIP(24), MS_ZIP(25), MS_ZIP(26), MS_ZIP(27), MS_ZIP(28), MS_ZIP(29), MS_ZIP(30), MS_ZIP(31)}};
#undef MS_ZIP

#endif
