/* json.c: a strict JSON reader -- a cursor walking the text value by value, and the tree built
 * by that walk -- and a compact writer, sized for safetensors headers, which also writes a tree
 * (ms_json_write: the one JSON writer, which Lua's ms._json_encode uses). The reader never trusts
 * its input: depth is bounded (no stack overflow from a hostile header), UTF-8 is validated,
 * and every failure says where. */
#include "io/json_stream.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moonshard/error.h"

#define JSON_MAX_DEPTH 64

/* ---- the cursor's state ---------------------------------------------------------------------- */

typedef struct strbuf {
  char *data;
  size_t len, cap;
} strbuf;

/* One open container: what closes it and how many entries were read so far. */
typedef struct level {
  char close;
  size_t count;
} level;

struct ms_json_cursor {
  const char *s;
  size_t len, pos;
  bool failed;
  char err[200];
  int depth;
  level stack[JSON_MAX_DEPTH];
  strbuf key, value; /* the last key and string read, decoded; reused from one to the next */
};
typedef ms_json_cursor parser; /* the name the scanning functions below use */

static bool fail(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(parser *p, const char *fmt, ...) {
  if (p->failed) return false; /* keep the first, most precise reason */
  p->failed = true;
  char msg[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(p->err, sizeof p->err, "%s at byte %zu", msg, p->pos);
  return false;
}

static void skip_ws(parser *p) {
  while (p->pos < p->len) {
    char c = p->s[p->pos];
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') break;
    p->pos++;
  }
}

static bool at_end(const parser *p) { return p->pos >= p->len; }
static char peek(const parser *p) { return at_end(p) ? '\0' : p->s[p->pos]; }

/* Length of the UTF-8 sequence at s (1..4), or 0 when it is malformed, overlong or a surrogate. */
static int utf8_seq(const unsigned char *s, size_t avail) {
  if (s[0] < 0x80) return 1;
  int n = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 ? 2 : 0;
  if (n == 0 || s[0] > 0xF4 || (size_t)n > avail) return 0;
  for (int i = 1; i < n; i++)
    if ((s[i] & 0xC0) != 0x80) return 0;
  if (n == 3 && s[0] == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
  if (n == 3 && s[0] == 0xED && s[1] >= 0xA0) return 0; /* UTF-16 surrogate */
  if (n == 4 && s[0] == 0xF0 && s[1] < 0x90) return 0;  /* overlong */
  if (n == 4 && s[0] == 0xF4 && s[1] >= 0x90) return 0; /* past U+10FFFF */
  return n;
}

bool ms_json_utf8_valid(const char *s, size_t len) {
  for (size_t i = 0; i < len;) {
    int n = utf8_seq((const unsigned char *)s + i, len - i);
    if (n == 0) return false;
    i += (size_t)n;
  }
  return true;
}

/* ---- strings --------------------------------------------------------------------------------- */

static bool sb_put(strbuf *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 32;
    while (cap < b->len + n + 1) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) return false;
    b->data = d, b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
  return true;
}

static bool sb_put_codepoint(strbuf *b, uint32_t c) {
  char u[4];
  size_t n;
  if (c < 0x80) u[0] = (char)c, n = 1;
  else if (c < 0x800) u[0] = (char)(0xC0 | c >> 6), u[1] = (char)(0x80 | (c & 0x3F)), n = 2;
  else if (c < 0x10000)
    u[0] = (char)(0xE0 | c >> 12), u[1] = (char)(0x80 | ((c >> 6) & 0x3F)), u[2] = (char)(0x80 | (c & 0x3F)), n = 3;
  else
    u[0] = (char)(0xF0 | c >> 18), u[1] = (char)(0x80 | ((c >> 12) & 0x3F)),
    u[2] = (char)(0x80 | ((c >> 6) & 0x3F)), u[3] = (char)(0x80 | (c & 0x3F)), n = 4;
  return sb_put(b, u, n);
}

static bool hex4(parser *p, uint32_t *out) {
  if (p->len - p->pos < 4) return fail(p, "truncated \\u escape");
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p->s[p->pos++];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return p->pos--, fail(p, "bad hex digit in \\u escape");
    v = v << 4 | (uint32_t)d;
  }
  return *out = v, true;
}

/* \uXXXX, joining a surrogate pair into one code point. */
static bool unicode_escape(parser *p, strbuf *b) {
  uint32_t c = 0, lo = 0; /* set by hex4 on success; zeroed for the compiler */
  if (!hex4(p, &c)) return false;
  if (c >= 0xDC00 && c <= 0xDFFF) return fail(p, "lone low surrogate in \\u escape");
  if (c >= 0xD800 && c <= 0xDBFF) {
    if (p->len - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u')
      return fail(p, "high surrogate without its low half");
    p->pos += 2;
    if (!hex4(p, &lo)) return false;
    if (lo < 0xDC00 || lo > 0xDFFF) return fail(p, "high surrogate without its low half");
    c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
  }
  if (c == 0) return fail(p, "\\u0000 in a string is not supported");
  return sb_put_codepoint(b, c) || fail(p, "out of memory");
}

static bool escape(parser *p, strbuf *b) {
  if (at_end(p)) return fail(p, "unterminated string");
  char c = p->s[p->pos++];
  static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
  const char *hit = c ? strchr(from, c) : NULL;
  if (hit) return sb_put(b, &to[hit - from], 1) || fail(p, "out of memory");
  if (c == 'u') return unicode_escape(p, b);
  p->pos--;
  return fail(p, "bad escape '\\%c'", c);
}

/* Decodes the string at the cursor into b (its previous content dropped). */
static bool parse_string(parser *p, strbuf *b) {
  b->len = 0;
  p->pos++; /* the opening quote */
  if (!sb_put(b, "", 0)) return fail(p, "out of memory");
  for (;;) {
    if (at_end(p)) return fail(p, "unterminated string");
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c == '"') break;
    bool ok;
    if (c == '\\') p->pos++, ok = escape(p, b);
    else if (c < 0x20) ok = fail(p, "control character 0x%02x in a string", c);
    else {
      int n = utf8_seq((const unsigned char *)p->s + p->pos, p->len - p->pos);
      ok = n ? sb_put(b, p->s + p->pos, (size_t)n) || fail(p, "out of memory") : fail(p, "invalid UTF-8");
      p->pos += (size_t)n;
    }
    if (!ok) return false;
  }
  p->pos++;
  return true;
}

/* ---- scalars --------------------------------------------------------------------------------- */

static bool parse_number(parser *p, ms_json *out) {
  size_t start = p->pos;
  bool neg = peek(p) == '-', overflow = false;
  uint64_t v = 0;
  if (neg) p->pos++;
  if (peek(p) == '0') p->pos++;
  else if (peek(p) >= '1' && peek(p) <= '9') {
    for (; peek(p) >= '0' && peek(p) <= '9'; p->pos++) {
      unsigned d = (unsigned)(p->s[p->pos] - '0');
      if (v > (UINT64_MAX - d) / 10) overflow = true;
      v = v * 10 + d;
    }
  } else
    return fail(p, "bad number");
  bool integral = true;
  if (peek(p) == '.') {
    p->pos++, integral = false;
    if (!(peek(p) >= '0' && peek(p) <= '9')) return fail(p, "bad number: digits must follow '.'");
    while (peek(p) >= '0' && peek(p) <= '9') p->pos++;
  }
  if (peek(p) == 'e' || peek(p) == 'E') {
    p->pos++, integral = false;
    if (peek(p) == '+' || peek(p) == '-') p->pos++;
    if (!(peek(p) >= '0' && peek(p) <= '9')) return fail(p, "bad number: digits must follow the exponent");
    while (peek(p) >= '0' && peek(p) <= '9') p->pos++;
  }
  out->kind = MS_JSON_NUMBER;
  out->is_uint = integral && !neg && !overflow;
  out->uint = out->is_uint ? v : 0;
  char buf[64], *copy = p->pos - start < sizeof buf ? buf : malloc(p->pos - start + 1);
  if (!copy) return fail(p, "out of memory");
  memcpy(copy, p->s + start, p->pos - start);
  copy[p->pos - start] = '\0';
  out->number = strtod(copy, NULL);
  if (copy != buf) free(copy);
  return true;
}

static bool literal(parser *p, const char *word, ms_json *out, ms_json_kind kind, bool value) {
  size_t n = strlen(word);
  if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0) return fail(p, "unexpected character '%c'", peek(p));
  p->pos += n;
  out->kind = kind, out->boolean = value;
  return true;
}

/* ---- the cursor ------------------------------------------------------------------------------ */

ms_json_cursor *json_cursor_new(const char *text, size_t len) {
  ms_json_cursor *c = calloc(1, sizeof *c);
  if (c) c->s = text, c->len = len;
  return c;
}

void json_cursor_free(ms_json_cursor *c) {
  if (!c) return;
  free(c->key.data);
  free(c->value.data);
  free(c);
}

const char *json_cursor_error(const ms_json_cursor *c) { return c->failed ? c->err : NULL; }

const char *json_key(const ms_json_cursor *c) { return c->key.data ? c->key.data : ""; }

bool json_peek(ms_json_cursor *c, ms_json_kind *kind) {
  if (c->failed) return false;
  skip_ws(c);
  switch (peek(c)) {
  case '{': return *kind = MS_JSON_OBJECT, true;
  case '[': return *kind = MS_JSON_ARRAY, true;
  case '"': return *kind = MS_JSON_STRING, true;
  case 't':
  case 'f': return *kind = MS_JSON_BOOL, true;
  case 'n': return *kind = MS_JSON_NULL, true;
  case '\0': return fail(c, at_end(c) ? "unexpected end" : "NUL byte");
  default:
    if (peek(c) == '-' || (peek(c) >= '0' && peek(c) <= '9')) return *kind = MS_JSON_NUMBER, true;
    return fail(c, "unexpected character '%c'", peek(c));
  }
}

bool json_enter(ms_json_cursor *c) {
  ms_json_kind k;
  if (!json_peek(c, &k)) return false;
  if (k != MS_JSON_OBJECT && k != MS_JSON_ARRAY) return fail(c, "expected an object or an array");
  if (c->depth >= JSON_MAX_DEPTH) return fail(c, "nested deeper than %d levels", JSON_MAX_DEPTH);
  c->stack[c->depth++] = (level){k == MS_JSON_OBJECT ? '}' : ']', 0};
  c->pos++;
  return true;
}

/* Entries are separated by ',' up to the closing bracket; an object's entry starts with its key
 * and ':'. The caller reads (or skips) each entry's value before asking for the next one. */
bool json_next(ms_json_cursor *c) {
  if (c->failed || c->depth == 0) return false;
  level *l = &c->stack[c->depth - 1];
  skip_ws(c);
  if (peek(c) == l->close) return c->pos++, c->depth--, false;
  if (l->count > 0) {
    if (peek(c) != ',') return fail(c, at_end(c) ? "unexpected end" : "expected ',' or '%c'", l->close);
    c->pos++;
    skip_ws(c);
  }
  l->count++;
  if (l->close == ']') return true;
  if (peek(c) != '"') return fail(c, at_end(c) ? "unexpected end" : "expected a string key");
  if (!parse_string(c, &c->key)) return false;
  skip_ws(c);
  if (peek(c) != ':') return fail(c, "expected ':'");
  c->pos++;
  return true;
}

const char *json_read_string(ms_json_cursor *c) {
  ms_json_kind k;
  if (!json_peek(c, &k)) return NULL;
  if (k != MS_JSON_STRING) return fail(c, "expected a string"), NULL;
  return parse_string(c, &c->value) ? c->value.data : NULL;
}

bool json_read_scalar(ms_json_cursor *c, ms_json *out) {
  ms_json_kind k;
  if (!json_peek(c, &k)) return false;
  memset(out, 0, sizeof *out);
  switch (k) {
  case MS_JSON_NUMBER: return parse_number(c, out);
  case MS_JSON_BOOL: return peek(c) == 't' ? literal(c, "true", out, k, true) : literal(c, "false", out, k, false);
  case MS_JSON_NULL: return literal(c, "null", out, k, false);
  default: return fail(c, "expected a number, a boolean or null");
  }
}

bool json_skip(ms_json_cursor *c) {
  ms_json_kind k;
  if (!json_peek(c, &k)) return false;
  if (k == MS_JSON_STRING) return json_read_string(c) != NULL;
  if (k != MS_JSON_OBJECT && k != MS_JSON_ARRAY) {
    ms_json scalar;
    return json_read_scalar(c, &scalar);
  }
  if (!json_enter(c)) return false;
  while (json_next(c))
    if (!json_skip(c)) return false; /* recursion bounded by JSON_MAX_DEPTH */
  return !c->failed;
}

bool json_finish(ms_json_cursor *c) {
  if (c->failed) return false;
  if (c->depth > 0) return fail(c, "unexpected end");
  skip_ws(c);
  return at_end(c) || fail(c, "unexpected character '%c' after the value", peek(c));
}

/* ---- the tree, built through the cursor ------------------------------------------------------ */

static char *dup_buf(parser *p, const strbuf *b) {
  char *d = malloc(b->len + 1);
  if (!d) return fail(p, "out of memory"), NULL;
  return memcpy(d, b->data, b->len + 1);
}

/* Appends one zeroed slot to an array or object under construction. */
static ms_json *grow(parser *p, ms_json *c, int *cap) {
  if (c->count == *cap) {
    if (*cap > INT_MAX / 2) return fail(p, "too many entries"), NULL;
    int ncap = *cap ? *cap * 2 : 4;
    ms_json *items = realloc(c->items, (size_t)ncap * sizeof *items);
    if (!items) return fail(p, "out of memory"), NULL;
    c->items = items;
    if (c->kind == MS_JSON_OBJECT) {
      char **keys = realloc(c->keys, (size_t)ncap * sizeof *keys);
      if (!keys) return fail(p, "out of memory"), NULL;
      c->keys = keys;
    }
    *cap = ncap;
  }
  ms_json *slot = &c->items[c->count];
  memset(slot, 0, sizeof *slot);
  if (c->kind == MS_JSON_OBJECT) c->keys[c->count] = NULL;
  c->count++;
  return slot;
}

static bool build(parser *p, ms_json *out) {
  ms_json_kind k;
  if (!json_peek(p, &k)) return false;
  if (k == MS_JSON_STRING) {
    out->kind = k;
    return json_read_string(p) && (out->string = dup_buf(p, &p->value)) != NULL;
  }
  if (k != MS_JSON_OBJECT && k != MS_JSON_ARRAY) return json_read_scalar(p, out);
  out->kind = k;
  if (!json_enter(p)) return false;
  for (int cap = 0; json_next(p);) {
    ms_json *slot = grow(p, out, &cap);
    if (!slot) return false;
    if (k == MS_JSON_OBJECT && !(out->keys[out->count - 1] = dup_buf(p, &p->key))) return false;
    if (!build(p, slot)) return false; /* recursion bounded by JSON_MAX_DEPTH */
  }
  return !p->failed;
}

static void json_clear(ms_json *j) {
  for (int i = 0; i < j->count; i++) {
    json_clear(&j->items[i]);
    if (j->keys) free(j->keys[i]);
  }
  free(j->items);
  free(j->keys);
  free(j->string);
}

void ms_json_free(ms_json *j) {
  if (!j) return;
  json_clear(j);
  free(j);
}

ms_json *ms_json_parse(const char *text, size_t len, char *err, size_t errlen) {
  ms_json_cursor *c = json_cursor_new(text, len);
  ms_json *root = c ? calloc(1, sizeof *root) : NULL;
  if (!root) {
    json_cursor_free(c);
    return snprintf(err, errlen, "out of memory"), NULL;
  }
  if (!build(c, root) || !json_finish(c)) {
    snprintf(err, errlen, "%s", c->err);
    ms_json_free(root), root = NULL;
  }
  json_cursor_free(c);
  return root;
}

const ms_json *ms_json_get(const ms_json *obj, const char *key) {
  if (!obj || obj->kind != MS_JSON_OBJECT) return NULL;
  for (int i = 0; i < obj->count; i++)
    if (strcmp(obj->keys[i], key) == 0) return &obj->items[i];
  return NULL;
}

const char *ms_json_kind_name(ms_json_kind k) {
  static const char *const names[] = {"null", "a boolean", "a number", "a string", "an array", "an object"};
  return names[k];
}

/* ---- writer ---------------------------------------------------------------------------------- */

void json_buf_raw(ms_json_buf *b, const char *s, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) { b->failed = true; return; }
    b->data = d, b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

/* serde_json's escaping: the short forms for \b \f \n \r \t, \u00xx (lowercase hex) for other
 * control characters, everything else (UTF-8 included) verbatim. */
void json_buf_str(ms_json_buf *b, const char *s) {
  json_buf_raw(b, "\"", 1);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    const char *esc = *c == '"' ? "\\\"" : *c == '\\' ? "\\\\" : *c == '\b' ? "\\b" : *c == '\f' ? "\\f"
                    : *c == '\n' ? "\\n" : *c == '\r' ? "\\r" : *c == '\t' ? "\\t" : NULL;
    char u[8];
    if (!esc && *c < 0x20) snprintf(u, sizeof u, "\\u%04x", *c), esc = u;
    if (esc) json_buf_raw(b, esc, strlen(esc));
    else json_buf_raw(b, (const char *)c, 1);
  }
  json_buf_raw(b, "\"", 1);
}

void json_buf_uint(ms_json_buf *b, uint64_t v) {
  char d[24];
  int n = snprintf(d, sizeof d, "%llu", (unsigned long long)v);
  json_buf_raw(b, d, (size_t)n);
}

void json_buf_free(ms_json_buf *b) {
  free(b->data);
  b->data = NULL, b->len = b->cap = 0;
}

/* ---- the tree as text ------------------------------------------------------------------------ */

/* A double in the fewest significant digits (15 to 17) that strtod reads back exactly. */
static void buf_double(ms_json_buf *b, double v) {
  char d[32];
  int n = 0;
  for (int digits = 15; digits <= 17; digits++) {
    n = snprintf(d, sizeof d, "%.*g", digits, v);
    if (strtod(d, NULL) == v) break;
  }
  json_buf_raw(b, d, (size_t)n);
}

static bool write_value(ms_json_buf *b, const ms_json *j, int depth) {
  if (depth > JSON_MAX_DEPTH) return ms_error(MS_ERR_ARG, "json_write: nested deeper than %d", JSON_MAX_DEPTH), false;
  switch (j->kind) {
  case MS_JSON_NULL: json_buf_raw(b, "null", 4); return true;
  case MS_JSON_BOOL: j->boolean ? json_buf_raw(b, "true", 4) : json_buf_raw(b, "false", 5); return true;
  case MS_JSON_NUMBER:
    if (j->is_uint) json_buf_uint(b, j->uint);
    else if (!isfinite(j->number)) return ms_error(MS_ERR_ARG, "json_write: %g has no JSON form", j->number), false;
    else buf_double(b, j->number);
    return true;
  case MS_JSON_STRING:
    if (!ms_json_utf8_valid(j->string, strlen(j->string)))
      return ms_error(MS_ERR_ARG, "json_write: a string is not valid UTF-8"), false;
    json_buf_str(b, j->string);
    return true;
  case MS_JSON_ARRAY:
  case MS_JSON_OBJECT:
    json_buf_raw(b, j->kind == MS_JSON_ARRAY ? "[" : "{", 1);
    for (int i = 0; i < j->count; i++) {
      if (i) json_buf_raw(b, ",", 1);
      if (j->kind == MS_JSON_OBJECT) {
        if (!ms_json_utf8_valid(j->keys[i], strlen(j->keys[i])))
          return ms_error(MS_ERR_ARG, "json_write: a key is not valid UTF-8"), false;
        json_buf_str(b, j->keys[i]);
        json_buf_raw(b, ":", 1);
      }
      if (!write_value(b, &j->items[i], depth + 1)) return false;
    }
    json_buf_raw(b, j->kind == MS_JSON_ARRAY ? "]" : "}", 1);
    return true;
  }
  return ms_error(MS_ERR_ARG, "json_write: unknown value kind %d", (int)j->kind), false;
}

char *ms_json_write(const ms_json *j, size_t *len) {
  ms_json_buf b = {0};
  if (!write_value(&b, j, 0)) return json_buf_free(&b), NULL;
  if (b.failed || !b.data) return json_buf_free(&b), ms_error(MS_ERR_MEMORY, "json_write: out of memory"), NULL;
  if (len) *len = b.len;
  return b.data;
}
