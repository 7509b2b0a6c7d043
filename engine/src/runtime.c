/* runtime.c: process-wide engine settings, forwarded to the kernels' thread pool. */
#include "kernels/kernels.h"
#include "moonshard/runtime.h"

void ms_set_num_threads(int n) { ms_k_set_num_threads(n < 1 ? 1 : n); }

int ms_get_num_threads(void) { return ms_k_get_num_threads(); }
