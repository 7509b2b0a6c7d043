/* png.c: RGB rows -> a PNG file in memory (moonshard/png.h). The layout: the 8-byte signature,
 * then chunks of (length, type, data, CRC-32 of type and data): IHDR (size, bit depth 8, colour
 * type 2 = RGB), one IDAT holding the zlib stream of the rows each preceded by its filter byte
 * (0, none: charts are flat colours, which deflate well unfiltered), and an empty IEND. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "moonshard/checked.h"
#include "moonshard/png.h"

#define PNG_MAX_SIDE 0x7fffffffLL /* the format stores sizes as 31-bit integers */
/* one IDAT chunk, whose length is a 31-bit integer too: 1 GiB of rows deflate to less than 2 GiB */
#define PNG_MAX_BYTES (1LL << 30)

static void put_u32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* Writes the chunk (type, data) at p; returns the bytes written (12 + n). */
static size_t put_chunk(uint8_t *p, const char type[4], const uint8_t *data, size_t n) {
  put_u32(p, (uint32_t)n);
  memcpy(p + 4, type, 4);
  if (n) memmove(p + 8, data, n); /* IDAT's data is already in place: memmove, not memcpy */
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, p + 4, (uInt)(4 + n));
  put_u32(p + 8 + n, (uint32_t)crc);
  return 12 + n;
}

/* The rows with a filter byte 0 before each, as one buffer of height * (1 + 3 width) bytes. */
static uint8_t *filtered_rows(const uint8_t *rgb, int64_t width, int64_t height, size_t *len) {
  size_t row = 3 * (size_t)width;
  uint8_t *raw = malloc(*len);
  if (!raw) return NULL;
  for (int64_t y = 0; y < height; y++) {
    uint8_t *dst = raw + (size_t)y * (row + 1);
    dst[0] = 0;
    memcpy(dst + 1, rgb + (size_t)y * row, row);
  }
  return raw;
}

ms_status ms_png_encode(const uint8_t *rgb, int64_t width, int64_t height, uint8_t **out, size_t *out_len) {
  *out = NULL, *out_len = 0;
  if (width < 1 || height < 1 || width > PNG_MAX_SIDE || height > PNG_MAX_SIDE)
    return ms_error(MS_ERR_ARG, "png_encode: width and height must be in 1..2147483647, got %lld x %lld",
                    (long long)width, (long long)height);
  int64_t raw_len;
  if (!ms_mul_add_size(height, 3 * width + 1, 0, &raw_len) || raw_len > PNG_MAX_BYTES)
    return ms_error(MS_ERR_ARG, "png_encode: a %lld x %lld image is too large (at most 1 GiB of pixels)",
                    (long long)width, (long long)height);
  size_t rows_len = (size_t)raw_len;
  uint8_t *rows = filtered_rows(rgb, width, height, &rows_len);
  uLong bound = compressBound((uLong)rows_len);
  /* signature 8 + IHDR 25 + IDAT 12 + data + IEND 12 */
  uint8_t *png = rows ? malloc(8 + 25 + 12 + (size_t)bound + 12) : NULL;
  if (!png) {
    free(rows);
    return ms_error(MS_ERR_MEMORY, "png_encode: out of memory for a %lld x %lld image", (long long)width,
                    (long long)height);
  }
  static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  memcpy(png, signature, 8);
  uint8_t ihdr[13] = {0, 0, 0, 0, 0, 0, 0, 0, 8, 2, 0, 0, 0}; /* depth 8, RGB, deflate, filter 0, no interlace */
  put_u32(ihdr, (uint32_t)width), put_u32(ihdr + 4, (uint32_t)height);
  size_t at = 8 + put_chunk(png + 8, "IHDR", ihdr, sizeof ihdr);
  uLongf deflated = bound;
  int z = compress2(png + at + 8, &deflated, rows, (uLong)rows_len, 6);
  free(rows);
  if (z != Z_OK) {
    free(png);
    return ms_error(MS_ERR_MEMORY, "png_encode: zlib's compress2 failed (%d)", z);
  }
  at += put_chunk(png + at, "IDAT", png + at + 8, (size_t)deflated);
  at += put_chunk(png + at, "IEND", NULL, 0);
  *out = png, *out_len = at;
  return MS_OK;
}

void ms_png_free(uint8_t *png) { free(png); }
