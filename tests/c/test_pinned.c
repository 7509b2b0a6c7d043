/* test_pinned.c: page-locked host tensors (moonshard/pinned.h) and FSDP's cpu_offload at the
 * engine level: without a GPU, pinning fails saying why, non-blocking moves are ordinary ones and
 * offload is a no-op on CPU parameters; with one, pinned blocks are recycled, a non-blocking copy
 * carries the values, and an offloaded unit keeps its shard in pinned host memory while it
 * gathers on the device. */
#include "moonshard/cuda.h"
#include "moonshard/dist.h"
#include "moonshard/fsdp.h"
#include "moonshard/pinned.h"
#include "test.h"

static ms_tensor *filled(ms_device d, int64_t n, double v) {
  ms_tensor *t = ms_tensor_new_full_on(d, 1, &n, MS_FLOAT32, v);
  CHECK(t != NULL);
  return t;
}

static double first(ms_tensor *t) { /* element 0, from any device */
  ms_tensor *c = ms_tensor_to_device(t, (ms_device){MS_CPU, 0});
  ms_tensor *e = c ? ms_tensor_narrow(c, 0, 0, 1) : NULL;
  double v = -1;
  CHECK(e && ms_tensor_item(e, &v) == MS_OK);
  ms_tensor_release(e);
  ms_tensor_release(c);
  return v;
}

static void test_without_gpu(void) {
  CHECK(ms_storage_new_pinned(64, MS_MEM_OTHER) == NULL);
  CHECK_ERROR_HAS("pin_memory");
  ms_tensor *t = filled((ms_device){MS_CPU, 0}, 8, 2.0);
  CHECK(ms_tensor_pin_memory(t) == NULL);
  CHECK(!ms_tensor_is_pinned(t));
  ms_tensor *same = ms_tensor_to_device_opt(t, (ms_device){MS_CPU, 0}, true);
  CHECK(same == t);
  ms_tensor_release(same);
  ms_tensor_release(t);
}

static void test_with_gpu(void) {
  ms_storage *s = ms_storage_new_pinned(1000, MS_MEM_OTHER);
  CHECK(s && ms_storage_is_pinned(s));
  void *p = s->data;
  ms_storage_release(s);
  s = ms_storage_new_pinned(1000, MS_MEM_OTHER); /* the cached block, no new cudaHostAlloc */
  CHECK(s && s->data == p);
  ms_storage_release(s);
  ms_tensor *t = filled((ms_device){MS_CPU, 0}, 4096, 3.0);
  ms_tensor *pt = ms_tensor_pin_memory(t);
  CHECK(pt && ms_tensor_is_pinned(pt) && !ms_tensor_is_pinned(t));
  ms_tensor *d = ms_tensor_to_device_opt(pt, (ms_device){MS_CUDA, 0}, true);
  ms_tensor_release(pt); /* the queued copy still reads the block: it is not handed out before */
  ms_tensor *seven = filled((ms_device){MS_CPU, 0}, 4096, 7.0);
  ms_tensor *other = ms_tensor_pin_memory(seven); /* same size class: would overwrite a reused block */
  CHECK(d && ms_tensor_device(d).type == MS_CUDA && first(d) == 3.0);
  ms_tensor_release(other);
  ms_tensor_release(seven);
  ms_tensor_release(d);
  ms_tensor_release(t);
}

/* Two params, one unit on world "self"; offload_params as asked. */
static ms_flat_param *unit(ms_device d, ms_fsdp_strategy strategy, bool offload, ms_tensor **ps) {
  ps[0] = filled(d, 5, 1.5), ps[1] = filled(d, 3, -2.0);
  ms_flat_param *fp = ms_flat_param_create(ps, 2, NULL, strategy, offload);
  ms_tensor_release(ps[0]), ms_tensor_release(ps[1]);
  return fp;
}

static bool offloaded(const ms_flat_param *fp) {
  ms_flat_param_info info;
  ms_flat_param_get_info(fp, &info);
  return info.offloaded;
}

static void test_offload(bool gpu) {
  ms_tensor *ps[2];
  ms_flat_param *fp = unit((ms_device){MS_CPU, 0}, MS_FSDP_FULL_SHARD, true, ps);
  CHECK(fp && !offloaded(fp) && !ms_tensor_is_pinned(ms_flat_param_shard(fp))); /* CPU params: nothing to move */
  ms_flat_param_free(fp);
  fp = unit((ms_device){MS_CPU, 0}, MS_FSDP_NO_SHARD, true, ps);
  CHECK(fp != NULL);
  ms_flat_param_free(fp);
  if (!gpu) return;
  ms_device cuda = {MS_CUDA, 0};
  fp = unit(cuda, MS_FSDP_FULL_SHARD, true, ps);
  ms_tensor *shard = fp ? ms_flat_param_shard(fp) : NULL;
  CHECK(fp && offloaded(fp) && ms_tensor_device(shard).type == MS_CPU && ms_tensor_is_pinned(shard));
  CHECK(fp && ms_device_equal(ms_tensor_device(ms_flat_param_view(fp, 0)), cuda)); /* views of the full buffer */
  CHECK(fp && ms_flat_param_gather(fp) == MS_OK && first(ms_flat_param_view(fp, 1)) == -2.0);
  ms_flat_param_free(fp);
  CHECK(unit(cuda, MS_FSDP_NO_SHARD, true, ps) == NULL);
  CHECK_ERROR_HAS("cpu_offload");
}

int main(void) {
  bool gpu = ms_cuda_is_available();
  if (gpu) test_with_gpu();
  else test_without_gpu();
  CHECK(ms_dist_init("self", 0) == MS_OK);
  test_offload(gpu);
  ms_dist_destroy();
  return ms_test_finish();
}
