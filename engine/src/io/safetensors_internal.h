/* safetensors_internal.h (private): what the safetensors writer and reader share: dtype names
 * and the byte order of the data, which the format fixes as little-endian whatever the host. */
#ifndef MS_IO_SAFETENSORS_INTERNAL_H
#define MS_IO_SAFETENSORS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moonshard/dtype.h"

/* The reference library refuses headers over 100 MB; so do we, before allocating them. */
#define MS_ST_MAX_HEADER 100000000u

/* Parses a safetensors dtype name; *known_elsewhere is set for valid safetensors dtypes that
 * moonshard has no tensor type for (I8, U16, F8_E4M3...), so the error can say which it is. */
bool st_dtype_parse(const char *name, ms_dtype *out, bool *known_elsewhere);
/* The safetensors name of a dtype ("F32", "BF16", "BOOL", ...). */
const char *safetensors_dtype_name(ms_dtype dt);
bool st_host_is_little_endian(void);
/* Reverses the bytes of each of n elements of `size` bytes (a no-op for size 1). */
void st_swap_bytes(void *data, size_t n, size_t size);
void st_put_u64le(unsigned char out[8], uint64_t v);
uint64_t st_get_u64le(const unsigned char in[8]);

#endif
