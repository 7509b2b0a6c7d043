/* test_cuda_random.c: randint_ on CUDA tensors (reachable only from C: the Lua constructors draw on
 * the CPU) gives the CPU's Philox integers bit for bit, for every dtype, layout and range, and
 * advances the generator as the CPU does. Exits 77 (skipped) where no GPU is usable. */
#include <stdint.h>
#include <stdio.h>

#include "moonshard/moonshard.h"
#include "test.h"

static const ms_device CPU = {MS_CPU, 0}, GPU = {MS_CUDA, 0};

/* A (rows, cols) tensor on dev, transposed when asked, filled twice with randint_(low, high) from
 * seed 77 (the second fill checks that the offset advances alike), then moved to the CPU. */
static ms_tensor *draw(ms_device dev, ms_dtype dt, bool transposed, int64_t low, int64_t high) {
  const int64_t shape[2] = {37, 29};
  ms_tensor *base = ms_tensor_new_zeros_on(dev, 2, shape, dt);
  if (!base) return NULL;
  ms_tensor *t = transposed ? ms_tensor_transpose(base, 0, 1) : (ms_tensor_retain(base), base);
  ms_tensor_release(base);
  if (!t) return NULL;
  ms_manual_seed(77);
  ms_status st = ms_tensor_randint_(t, low, high);
  if (st == MS_OK) st = ms_tensor_randint_(t, low, high);
  ms_tensor *host = st == MS_OK ? ms_tensor_to_device(t, CPU) : NULL;
  ms_tensor_release(t);
  return host;
}

static void check_same(ms_dtype dt, bool transposed, int64_t low, int64_t high) {
  ms_tensor *want = draw(CPU, dt, transposed, low, high);
  ms_tensor *got = draw(GPU, dt, transposed, low, high);
  CHECK(want != NULL && got != NULL);
  if (!want || !got) {
    fprintf(stderr, "  %s: %s\n", ms_dtype_name(dt), ms_error_last());
  } else {
    int64_t differ = 0, n = ms_tensor_numel(want);
    for (int64_t i = 0; i < n; i++) differ += ms_tensor_get_flat_int(got, i) != ms_tensor_get_flat_int(want, i);
    if (differ) fprintf(stderr, "  randint_ %s [%lld, %lld)%s: %lld of %lld differ\n", ms_dtype_name(dt),
                        (long long)low, (long long)high, transposed ? " transposed" : "", (long long)differ,
                        (long long)n);
    CHECK(differ == 0);
  }
  ms_tensor_release(want);
  ms_tensor_release(got);
}

static void test_randint(void) {
  const ms_dtype dts[] = {MS_INT64, MS_INT32, MS_UINT8, MS_BOOL, MS_FLOAT32, MS_FLOAT64, MS_FLOAT16};
  for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++)
    for (int tr = 0; tr < 2; tr++) {
      bool small = dts[k] == MS_BOOL || dts[k] == MS_UINT8;
      check_same(dts[k], tr, 0, small ? 2 : 100);
    }
  /* the widest span: the multiply-shift and the unsigned sum through INT64 overflow */
  check_same(MS_INT64, false, INT64_MIN, INT64_MAX);
  check_same(MS_INT64, true, -5, 1);
}

/* A bad range raises before anything is drawn, as on the CPU. */
static void test_errors(void) {
  const int64_t n = 4;
  ms_tensor *t = ms_tensor_new_zeros_on(GPU, 1, &n, MS_UINT8);
  CHECK(t != NULL);
  if (!t) return;
  CHECK(ms_tensor_randint_(t, 0, 300) != MS_OK);
  CHECK_ERROR_HAS("does not fit uint8");
  CHECK(ms_tensor_randint_(t, 3, 3) != MS_OK);
  CHECK_ERROR_HAS("low (3) must be less than high (3)");
  ms_tensor_release(t);
}

int main(void) {
  if (!ms_cuda_is_available()) {
    printf("skipped: %s\n", ms_cuda_unavailable_reason());
    return 77;
  }
  test_randint();
  test_errors();
  return ms_test_finish();
}
