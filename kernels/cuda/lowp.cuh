// lowp.cuh: 16-bit floats in the nn kernels (pool, norm, softmax, activation, embedding, conv's
// bias). A kernel is written once over a storage type S (double, float, bf16 or f16) and
// computes in acc_t<S> (double for double, float for the others): ld widens an element
// exactly, st rounds a result once with common.cuh's conversions, which are ms_k_cast's (round
// to nearest even, NaN kept), so a 16-bit result is the float32 result rounded once, as the
// CPU's nn_ops_half.h computes it. For double and float, ld and st are the identity: those
// kernels keep their arithmetic bit for bit.
#ifndef MS_KC_LOWP_CUH
#define MS_KC_LOWP_CUH

#include "common.cuh"

namespace mskc {

// The 16-bit storage types: distinct types so that templates tell them apart (both are bits);
// common.cuh's, which reduce.cu's templates read through their conversion to double.
typedef bf16_el bf16;
typedef f16_el f16;

template <typename S> struct acc_of { typedef S type; };
template <> struct acc_of<bf16> { typedef float type; };
template <> struct acc_of<f16> { typedef float type; };
template <typename S> using acc_t = typename acc_of<S>::type;

__device__ inline double ld(double v) { return v; }
__device__ inline float ld(float v) { return v; }
__device__ inline float ld(bf16 v) { return bf16_to_f32(v.bits); }
__device__ inline float ld(f16 v) { return f16_to_f32(v.bits); }

template <typename S> __device__ inline S st(acc_t<S> v) { return v; }
template <> __device__ inline bf16 st<bf16>(float v) { return bf16{f32_to_bf16(v)}; }
template <> __device__ inline f16 st<f16>(float v) { return f16{f32_to_f16(v)}; }

} // namespace mskc

// Runs the statements with S the storage type of dt: F64 double, BF16 bf16, F16 f16, anything
// else float (the engine sends the nn slots only floating dtypes; float was their default).
#define MSKC_FLOAT_SWITCH(dt, S, ...)                                                              \
  switch (dt) {                                                                                    \
  case MS_K_F64: {                                                                                 \
    typedef double S;                                                                              \
    __VA_ARGS__;                                                                                   \
  } break;                                                                                         \
  case MS_K_BF16: {                                                                                \
    typedef mskc::bf16 S;                                                                          \
    __VA_ARGS__;                                                                                   \
  } break;                                                                                         \
  case MS_K_F16: {                                                                                 \
    typedef mskc::f16 S;                                                                           \
    __VA_ARGS__;                                                                                   \
  } break;                                                                                         \
  default: {                                                                                       \
    typedef float S;                                                                               \
    __VA_ARGS__;                                                                                   \
  } break;                                                                                         \
  }

// FN<S>(args...) for the storage type S of dt, as an expression (MSKC_FLOAT_SWITCH's choice of S).
#define MSKC_BY_DTYPE(dt, FN, ...)                                                                 \
  ((dt) == MS_K_F64    ? FN<double>(__VA_ARGS__)                                                   \
   : (dt) == MS_K_BF16 ? FN<mskc::bf16>(__VA_ARGS__)                                               \
   : (dt) == MS_K_F16  ? FN<mskc::f16>(__VA_ARGS__)                                                \
                       : FN<float>(__VA_ARGS__))

#endif
