/* json.h: the little JSON that safetensors headers and sharded-checkpoint indexes need. A
 * reader that builds a small tree and rejects anything that is not strict JSON (RFC 8259), and
 * a writer that appends compact JSON to a growable buffer, escaping strings exactly as
 * serde_json does so that our headers are byte-identical to the reference library's. */
#ifndef MOONSHARD_JSON_H
#define MOONSHARD_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moonshard/export.h"

typedef enum ms_json_kind {
  MS_JSON_NULL,
  MS_JSON_BOOL,
  MS_JSON_NUMBER,
  MS_JSON_STRING,
  MS_JSON_ARRAY,
  MS_JSON_OBJECT
} ms_json_kind;

typedef struct ms_json ms_json;
struct ms_json {
  ms_json_kind kind;
  bool boolean;
  bool is_uint;   /* a number written as a non-negative integer that fits in 64 bits */
  uint64_t uint;  /* its value */
  double number;  /* every number's value as strtod reads it */
  char *string;   /* MS_JSON_STRING: NUL-terminated UTF-8 (embedded NULs are refused) */
  int count;      /* arrays and objects: entries, in file order */
  char **keys;    /* objects only */
  ms_json *items;
};

/* Parses len bytes of text. Returns a new tree (free with ms_json_free) or NULL with a reason
 * and the byte position in err. */
MS_API ms_json *ms_json_parse(const char *text, size_t len, char *err, size_t errlen);
MS_API void ms_json_free(ms_json *j); /* NULL is fine */
/* The value under key in an object, or NULL (first match; callers reject duplicates). */
MS_API const ms_json *ms_json_get(const ms_json *obj, const char *key);
MS_API const char *ms_json_kind_name(ms_json_kind k);
/* The tree j as compact JSON text (no whitespace; keys in the tree's order; numbers: is_uint
 * ones as integers, others in the fewest digits that read back to the same double; strings
 * escaped as serde_json does). Returns a malloc'ed NUL-terminated text (its length in *len when
 * len is not NULL) for the caller to free(), or NULL with ms_error_last() naming what cannot be
 * written (a non-finite number, a string that is not UTF-8, memory). */
MS_API char *ms_json_write(const ms_json *j, size_t *len);
/* Whether s[0..len) is well-formed UTF-8 (JSON text must be). */
MS_API bool ms_json_utf8_valid(const char *s, size_t len);

#endif
