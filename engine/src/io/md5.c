/* md5.c: MD5 (RFC 1321), for the download check of datasets (torchvision publishes MD5 sums).
 * Written from the RFC's description: four rounds of sixteen steps over 512-bit blocks of
 * little-endian words; the table T[i] = floor(2^32 * |sin(i + 1)|) is written out, as in the
 * RFC, rather than computed, so the result never depends on the C library's sin. Not for
 * security: MD5 is broken for that; it only catches a truncated or wrong download. */
#include <stdint.h>
#include <string.h>

#include "moonshard/md5.h"

static const uint32_t T[64] = {
  0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
  0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
  0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
  0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
  0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
  0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
  0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
  0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
};

/* The left rotations of each round's four steps (RFC 1321, section 3.4). */
static const int S[4][4] = {{7, 12, 17, 22}, {5, 9, 14, 20}, {4, 11, 16, 23}, {6, 10, 15, 21}};

static uint32_t rotl(uint32_t x, int s) { return (x << s) | (x >> (32 - s)); }

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* One 64-byte block into the state h (A, B, C, D). */
static void md5_block(uint32_t h[4], const unsigned char *block) {
  uint32_t x[16];
  for (int i = 0; i < 16; i++) x[i] = le32(block + 4 * i);
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
  for (int i = 0; i < 64; i++) {
    uint32_t f;
    int k; /* the word this step reads */
    switch (i / 16) {
    case 0: f = (b & c) | (~b & d), k = i; break;                    /* F */
    case 1: f = (b & d) | (c & ~d), k = (5 * i + 1) % 16; break;     /* G */
    case 2: f = b ^ c ^ d, k = (3 * i + 5) % 16; break;              /* H */
    default: f = c ^ (b | ~d), k = (7 * i) % 16; break;              /* I */
    }
    uint32_t t = d;
    d = c;
    c = b;
    b = b + rotl(a + f + x[k] + T[i], S[i / 16][i % 4]);
    a = t;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d;
}

void ms_md5(const void *data, size_t n, unsigned char digest[16]) {
  const unsigned char *p = data;
  uint32_t h[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
  size_t full = n - n % 64;
  for (size_t off = 0; off < full; off += 64) md5_block(h, p + off);
  /* the padding: a 1 bit, 0 bits up to 56 mod 64 bytes, the length in bits (mod 2^64) */
  unsigned char tail[128] = {0};
  size_t rest = n - full;
  if (rest) memcpy(tail, p + full, rest);
  tail[rest] = 0x80;
  size_t tail_len = rest < 56 ? 64 : 128;
  uint64_t bits = (uint64_t)n * 8u;
  for (int i = 0; i < 8; i++) tail[tail_len - 8 + i] = (unsigned char)(bits >> (8 * i));
  for (size_t off = 0; off < tail_len; off += 64) md5_block(h, tail + off);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) digest[4 * i + j] = (unsigned char)(h[i] >> (8 * j));
}
