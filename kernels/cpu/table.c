/* table.c: the CPU's kernel table. Each slot names the CPU body of its row (ms_k_cpu_<name>),
 * which lives beside the kernels of its family. */
#include "kernels/kernel_table.h"

/* A CPU body fails only when its work buffers cannot be allocated. */
static const char *cpu_error_string(int err) {
  if (err == MS_K_ERR_NO_MEMORY) return "out of memory for a kernel's work buffers";
  return err ? "unexpected CPU kernel failure" : "no error";
}

#define MS_K_X_CPU_SLOT(name, params) .name = ms_k_cpu_##name,
const ms_k_table ms_k_cpu_table = {
    .device = "CPU",
    .error_string = cpu_error_string,
    MS_K_KERNELS(MS_K_X_CPU_SLOT)
};
