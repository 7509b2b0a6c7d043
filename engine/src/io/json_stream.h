/* json_stream.h (private): the JSON cursor and writer of json.c, which the safetensors reader
 * and writer use (moonshard/json.h keeps the tree API for the Lua face and hosts). */
#ifndef MS_IO_JSON_STREAM_H
#define MS_IO_JSON_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moonshard/json.h"

/* ---- cursor: a document read value by value -----------------------------------------------
 * For large untrusted documents whose layout the caller knows (safetensors headers): nothing is
 * built, so memory stays bounded by what the caller keeps, and the caller can refuse a value as
 * soon as it sees it. The caller walks the text with peek / enter / next, reads scalars and
 * strings, and skips (validates without keeping) what it does not need. The first syntax error
 * stops the walk: every call then returns false/NULL and json_cursor_error says what and at
 * which byte. ms_json_parse is this walk building a tree. */
typedef struct ms_json_cursor ms_json_cursor;

ms_json_cursor *json_cursor_new(const char *text, size_t len); /* NULL when out of memory */
void json_cursor_free(ms_json_cursor *c);
const char *json_cursor_error(const ms_json_cursor *c); /* NULL while no error */
/* The kind of the next value, from its first character (false on a syntax error). */
bool json_peek(ms_json_cursor *c, ms_json_kind *kind);
/* Opens the next value, which must be an object or an array. */
bool json_enter(ms_json_cursor *c);
/* In the innermost open container: true when one more entry follows (for an object, its key
 * and ':' are read: json_key), false when the container ends (it is left) or on an error. */
bool json_next(ms_json_cursor *c);
const char *json_key(const ms_json_cursor *c); /* valid until the next json_next */
/* The next value, a string, decoded; valid until the next string is read. NULL on an error. */
const char *json_read_string(ms_json_cursor *c);
/* The next value, a number, boolean or null, into out (no string, no entries). */
bool json_read_scalar(ms_json_cursor *c, ms_json *out);
bool json_skip(ms_json_cursor *c); /* the next value, checked and dropped */
bool json_finish(ms_json_cursor *c); /* every container closed and only whitespace left */

/* ---- writer ------------------------------------------------------------------------------ */
typedef struct ms_json_buf {
  char *data;
  size_t len, cap;
  bool failed; /* an allocation failed; the content is incomplete */
} ms_json_buf;

void json_buf_raw(ms_json_buf *b, const char *s, size_t n);
void json_buf_str(ms_json_buf *b, const char *s); /* a quoted, escaped JSON string */
void json_buf_uint(ms_json_buf *b, uint64_t v);
void json_buf_free(ms_json_buf *b);

#endif
