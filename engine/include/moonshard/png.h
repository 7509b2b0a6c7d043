/* png.h: encoding an image as PNG (https://www.w3.org/TR/png/): 8-bit RGB, no interlace, every
 * row with filter type 0, the pixels deflated by zlib. What ms.plot writes its charts with. */
#ifndef MOONSHARD_PNG_H
#define MOONSHARD_PNG_H

#include <stddef.h>
#include <stdint.h>

#include "moonshard/error.h"
#include "moonshard/export.h"

/* The PNG file of a width x height image whose pixels are rgb: height rows, top first, of width
 * pixels, left first, 3 bytes (red, green, blue) each. On success *out receives a new buffer
 * (release it with ms_png_free) and *out_len its length. Sizes from 1 to 2^31 - 1 (the format's
 * limit), and at most 1 GiB of pixels; anything else is an MS_ERR_ARG error naming the
 * size, a failed allocation MS_ERR_MEMORY. */
MS_API ms_status ms_png_encode(const uint8_t *rgb, int64_t width, int64_t height, uint8_t **out, size_t *out_len);
/* Releases a buffer of ms_png_encode (NULL is fine). */
MS_API void ms_png_free(uint8_t *png);

#endif
