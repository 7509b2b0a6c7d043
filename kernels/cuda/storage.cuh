// storage.cuh: one template body for the four floating dtypes a CUDA kernel takes (float32,
// float64, bfloat16, float16): elem<S> loads an element of storage type S into its compute type
// (float64 for double, float32 for the others: 16-bit values are summed and multiplied in
// float32) and stores a compute value rounded once, with common.cuh's conversions, so the results
// are a float32 kernel's on the widened values, rounded once (what the CPU gives).
#ifndef MS_KC_STORAGE_CUH
#define MS_KC_STORAGE_CUH

#include "common.cuh"

namespace mskc {

struct bf16_t { uint16_t bits; };
struct f16_t { uint16_t bits; };

template <typename S> struct elem;
template <> struct elem<float> {
  using acc = float;
  __device__ static float load(const float *p) { return *p; }
  __device__ static void store(float *p, float v) { *p = v; }
};
template <> struct elem<double> {
  using acc = double;
  __device__ static double load(const double *p) { return *p; }
  __device__ static void store(double *p, double v) { *p = v; }
};
template <> struct elem<bf16_t> {
  using acc = float;
  __device__ static float load(const bf16_t *p) { return bf16_to_f32(p->bits); }
  __device__ static void store(bf16_t *p, float v) { p->bits = f32_to_bf16(v); }
};
template <> struct elem<f16_t> {
  using acc = float;
  __device__ static float load(const f16_t *p) { return f16_to_f32(p->bits); }
  __device__ static void store(f16_t *p, float v) { p->bits = f32_to_f16(v); }
};

// FN<S>(args...) for the storage type of dt (F32 for anything not F64, BF16 or F16: the table's
// callers pass only the four).
#define MSKC_BY_DTYPE(dt, FN, ...)                                                                 \
  ((dt) == MS_K_F64    ? FN<double>(__VA_ARGS__)                                                   \
   : (dt) == MS_K_BF16 ? FN<mskc::bf16_t>(__VA_ARGS__)                                             \
   : (dt) == MS_K_F16  ? FN<mskc::f16_t>(__VA_ARGS__)                                              \
                       : FN<float>(__VA_ARGS__))

} // namespace mskc

#endif
