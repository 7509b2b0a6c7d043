/* test_random_capture.c: the generator's side of a CUDA graph capture (random.c), which needs
 * no GPU: while a thread captures, reservations count graph-relative blocks and leave the
 * generator where it was; a replay then reserves the total at once, landing where the eager
 * draws would have; a draw on the CPU inside a capture is refused with a precise error. */
#include "engine/src/random_state.h"
#include "moonshard/moonshard.h"
#include "test.h"

static void test_capture_counts_relative_blocks(void) {
  ms_manual_seed(5);
  uint64_t seed, offset;
  random_reserve(7, &seed, &offset); /* an eager draw before the capture */
  CHECK(seed == 5 && offset == 0);
  random_capture_begin();
  CHECK(random_capturing());
  random_reserve(10, &seed, &offset);
  CHECK(seed == 5 && offset == 0); /* relative to the graph's start */
  random_reserve(3, &seed, &offset);
  CHECK(offset == 10);
  uint64_t s, o;
  ms_random_get_state(&s, &o);
  CHECK(s == 5 && o == 7); /* the generator has not moved */
  CHECK(random_capture_end() == 13);
  CHECK(!random_capturing());
  random_reserve(13, &seed, &offset); /* a replay's reservation: the eager draws' blocks */
  CHECK(offset == 7);
  random_reserve(1, &seed, &offset);
  CHECK(offset == 20);
}

static void test_cpu_draws_refused_while_capturing(void) {
  ms_tensor *t = ms_tensor_new_empty(1, (int64_t[]){4}, MS_FLOAT32);
  random_capture_begin();
  CHECK(ms_tensor_uniform_(t, 0, 1) == MS_ERR_RUNTIME);
  CHECK_ERROR_HAS("uniform_: a random draw on the CPU while a CUDA graph is being captured");
  CHECK(ms_tensor_normal_(t, 0, 1) == MS_ERR_RUNTIME);
  CHECK_ERROR_HAS("normal_");
  CHECK(ms_tensor_new_randperm(5, MS_INT64) == NULL);
  CHECK_ERROR_HAS("randperm: a random draw on the CPU");
  CHECK(random_capture_end() == 0); /* refused draws took no blocks */
  CHECK(ms_tensor_uniform_(t, 0, 1) == MS_OK);
  ms_tensor_release(t);
}

int main(void) {
  test_capture_counts_relative_blocks();
  test_cpu_draws_refused_while_capturing();
  return ms_test_finish();
}
