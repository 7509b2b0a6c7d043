/* lib_error.h: failures of the CUDA libraries behind the kernels (cuBLAS, cuDNN) as error codes of
 * the CUDA table, beside cudaError_t's. Their messages carry details only known where they
 * happen (dlopen's message, the library's status string), so the failing body writes the message
 * into a thread-local string and returns MS_KCU_ERR_DETAIL; the table's error_string, asked on the
 * same thread right after, returns that string. */
#ifndef MS_KCU_LIB_ERROR_H
#define MS_KCU_LIB_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* Beyond every cudaError_t. */
enum { MS_KCU_ERR_DETAIL = 1000000 };

/* Sets the calling thread's message (printf's format) and returns MS_KCU_ERR_DETAIL. */
int ms_kcu_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The calling thread's last message. */
const char *ms_kcu_detail(void);

#ifdef __cplusplus
}
#endif

#endif
