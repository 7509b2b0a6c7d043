/* md5.h: MD5 (RFC 1321, engine/src/io/md5.c), for checking a download against a published sum
 * (torchvision's MNIST files). Not for security: MD5 is broken for that. */
#ifndef MOONSHARD_MD5_H
#define MOONSHARD_MD5_H

#include <stddef.h>

#include "moonshard/export.h"

/* The MD5 of n bytes at data into digest, in the order md5sum prints them. */
MS_API void ms_md5(const void *data, size_t n, unsigned char digest[16]);

#endif
