/* test_png.c: ms_png_encode decoded back by hand: the signature, the chunks in order (IHDR,
 * IDAT, IEND) with correct lengths and CRC-32s, IHDR's fields, the IDAT stream inflated by zlib
 * to the rows, each with filter byte 0 and the pixels given; and the size errors. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "moonshard/moonshard.h"
#include "test.h"

static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Walks the chunks of png: checks each CRC and length, copies IHDR's 13 bytes and IDAT's data
 * (one IDAT is what the encoder writes) and returns how many chunks there were (-1: malformed). */
static int walk(const uint8_t *png, size_t len, char types[][5], uint8_t ihdr[13], const uint8_t **idat, size_t *idat_len) {
  size_t at = 8;
  int n = 0;
  while (at + 12 <= len && n < 8) {
    uint32_t size = get_u32(png + at);
    if (at + 12 + size > len) return -1;
    memcpy(types[n], png + at + 4, 4), types[n][4] = '\0';
    uLong crc = crc32(crc32(0L, Z_NULL, 0), png + at + 4, 4 + size);
    CHECK(crc == get_u32(png + at + 8 + size));
    if (!strcmp(types[n], "IHDR") && size == 13) memcpy(ihdr, png + at + 8, 13);
    if (!strcmp(types[n], "IDAT")) *idat = png + at + 8, *idat_len = size;
    at += 12 + size, n++;
  }
  return at == len ? n : -1;
}

static void round_trip(int64_t w, int64_t h) {
  size_t npx = (size_t)(w * h * 3);
  uint8_t *rgb = malloc(npx);
  for (size_t i = 0; i < npx; i++) rgb[i] = (uint8_t)(i * 7 + i / 3);
  uint8_t *png;
  size_t len;
  CHECK(ms_png_encode(rgb, w, h, &png, &len) == MS_OK);
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  CHECK(len > 8 && memcmp(png, sig, 8) == 0);
  char types[8][5];
  uint8_t ihdr[13] = {0};
  const uint8_t *idat = NULL;
  size_t idat_len = 0;
  CHECK(walk(png, len, types, ihdr, &idat, &idat_len) == 3);
  CHECK(!strcmp(types[0], "IHDR") && !strcmp(types[1], "IDAT") && !strcmp(types[2], "IEND"));
  CHECK(get_u32(ihdr) == (uint32_t)w && get_u32(ihdr + 4) == (uint32_t)h);
  CHECK(ihdr[8] == 8 && ihdr[9] == 2 && ihdr[10] == 0 && ihdr[11] == 0 && ihdr[12] == 0);
  size_t row = (size_t)(3 * w + 1);
  uLongf raw_len = (uLongf)(row * (size_t)h);
  uint8_t *raw = malloc(raw_len);
  CHECK(idat && uncompress(raw, &raw_len, idat, (uLong)idat_len) == Z_OK);
  CHECK(raw_len == row * (size_t)h);
  int rows_ok = 1;
  for (int64_t y = 0; y < h; y++) {
    rows_ok &= raw[y * row] == 0;
    rows_ok &= memcmp(raw + y * row + 1, rgb + y * (row - 1), row - 1) == 0;
  }
  CHECK(rows_ok);
  free(raw);
  ms_png_free(png);
  free(rgb);
}

int main(void) {
  round_trip(1, 1);
  round_trip(7, 3);
  round_trip(640, 480);
  uint8_t px[3] = {1, 2, 3}, *png = (uint8_t *)px;
  size_t len = 99;
  CHECK(ms_png_encode(px, 0, 1, &png, &len) == MS_ERR_ARG);
  CHECK_ERROR_HAS("png_encode: width and height must be in 1..2147483647, got 0 x 1");
  CHECK(png == NULL && len == 0);
  CHECK(ms_png_encode(px, 1, 1LL << 31, &png, &len) == MS_ERR_ARG);
  CHECK_ERROR_HAS("got 1 x 2147483648");
  CHECK(ms_png_encode(px, 1LL << 20, 1LL << 20, &png, &len) == MS_ERR_ARG);
  CHECK_ERROR_HAS("png_encode: a 1048576 x 1048576 image is too large (at most 1 GiB of pixels)");
  ms_png_free(NULL);
  return ms_test_finish();
}
