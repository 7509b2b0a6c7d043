/* x86_absent.h: force-included into every kernel file of a build without the x86 bodies
 * (MS_X86_KERNELS=OFF, the default off x86): the dispatch still names each function that the
 * *_avx2.c, *_avx512.c and *_f16c.c files define, so each is made a weak reference here, which
 * links to NULL. None is ever called: cpu_isa.c reports the portable level and no feature there,
 * and every call is behind those (as on an x86 CPU without AVX2). A function added to those
 * files goes here too: ctest pkg.x86_absent_list compares this list with what they define. */
#ifndef MS_K_X86_ABSENT_H
#define MS_K_X86_ABSENT_H

#pragma weak ms_k_activation_backward_bf16_avx512
#pragma weak ms_k_activation_backward_f32_avx2
#pragma weak ms_k_activation_backward_f32_avx512
#pragma weak ms_k_activation_bf16_avx512
#pragma weak ms_k_activation_f32_avx2
#pragma weak ms_k_activation_f32_avx512
#pragma weak ms_k_adadelta_f32_avx2
#pragma weak ms_k_adadelta_f32_avx512
#pragma weak ms_k_adam_f32_avx2
#pragma weak ms_k_adam_f32_avx512
#pragma weak ms_k_attention_exp_sum_avx512
#pragma weak ms_k_attention_max_avx512
#pragma weak ms_k_attention_round_bf16
#pragma weak ms_k_bconv_col2im_s1_avx512
#pragma weak ms_k_bconv_im2col_avx512
#pragma weak ms_k_bconv_pack_panel_avx512
#pragma weak ms_k_bconv_round_avx512
#pragma weak ms_k_bconv_ukr8_avx512
#pragma weak ms_k_bernoulli_x8_avx2
#pragma weak ms_k_bf16_to_f32_avx2
#pragma weak ms_k_bf16_to_f32_avx512
#pragma weak ms_k_bgemm_ukr_avx512
#pragma weak ms_k_bpack_a_avx512
#pragma weak ms_k_bpack_b_avx512
#pragma weak ms_k_conv2d_forward_small_avx512
#pragma weak ms_k_conv2d_input_grad_small_avx512
#pragma weak ms_k_conv2d_weight_grad_dot_avx2
#pragma weak ms_k_conv2d_weight_grad_small_avx512
#pragma weak ms_k_conv_ukr_avx2
#pragma weak ms_k_dgemm_ukr_avx2
#pragma weak ms_k_dgemm_ukr_avx512
#pragma weak ms_k_f16_to_f32_f16c
#pragma weak ms_k_f32_to_bf16_avx2
#pragma weak ms_k_f32_to_bf16_avx512
#pragma weak ms_k_f32_to_f16_f16c
#pragma weak ms_k_layer_norm_backward_rows_avx2
#pragma weak ms_k_layer_norm_backward_rows_avx512
#pragma weak ms_k_layer_norm_param_cols_avx2
#pragma weak ms_k_layer_norm_param_cols_avx512
#pragma weak ms_k_layer_norm_rows_avx2
#pragma weak ms_k_layer_norm_rows_avx512
#pragma weak ms_k_max2x2_backward_row_avx2
#pragma weak ms_k_max2x2_row_avx2
#pragma weak ms_k_philox_x8_avx2
#pragma weak ms_k_relu_bf16_avx512
#pragma weak ms_k_sgd_f32_avx2
#pragma weak ms_k_sgd_f32_avx512
#pragma weak ms_k_sgemm_ukr_avx2
#pragma weak ms_k_sgemm_ukr_avx512
#pragma weak ms_k_sgemm_ukr_avx512_mr8
#pragma weak ms_k_spack_a_avx2
#pragma weak ms_k_spack_a_avx512
#pragma weak ms_k_spack_b_avx2
#pragma weak ms_k_spack_b_avx512
#pragma weak ms_k_wino_blocks_avx2
#pragma weak ms_k_wino_blocks_avx512
#pragma weak ms_k_wino_wgrad_pack

#endif
