/* json.c: a strict JSON reader into a small tree and a compact writer, sized for safetensors
 * headers. The reader never trusts its input: depth is bounded (no stack overflow from a
 * hostile header), UTF-8 is validated, and every failure says where. */
#include "moonshard/json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

typedef struct parser {
  const char *s;
  size_t len, pos;
  char *err;
  size_t errlen;
  bool failed;
} parser;

static bool fail(parser *p, const char *fmt, ...) {
  if (p->failed) return false; /* keep the first, most precise reason */
  p->failed = true;
  char msg[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(p->err, p->errlen, "%s at byte %zu", msg, p->pos);
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

typedef struct strbuf {
  char *data;
  size_t len, cap;
} strbuf;

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

static char *parse_string(parser *p) {
  strbuf b = {0};
  p->pos++; /* the opening quote */
  if (!sb_put(&b, "", 0)) return fail(p, "out of memory"), NULL;
  for (;;) {
    if (at_end(p)) return fail(p, "unterminated string"), free(b.data), NULL;
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c == '"') break;
    bool ok;
    if (c == '\\') p->pos++, ok = escape(p, &b);
    else if (c < 0x20) ok = fail(p, "control character 0x%02x in a string", c);
    else {
      int n = utf8_seq((const unsigned char *)p->s + p->pos, p->len - p->pos);
      ok = n ? sb_put(&b, p->s + p->pos, (size_t)n) || fail(p, "out of memory") : fail(p, "invalid UTF-8");
      p->pos += (size_t)n;
    }
    if (!ok) return free(b.data), NULL;
  }
  p->pos++;
  return b.data;
}

/* ---- values ---------------------------------------------------------------------------------- */

static bool parse_value(parser *p, ms_json *out, int depth);

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

/* Appends one zeroed slot to an array or object under construction. */
static ms_json *grow(parser *p, ms_json *c, int *cap) {
  if (c->count == *cap) {
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

/* Objects and arrays share the loop: entries separated by ',' up to the closing bracket. */
static bool parse_container(parser *p, ms_json *out, int depth) {
  bool object = p->s[p->pos] == '{';
  char close = object ? '}' : ']';
  out->kind = object ? MS_JSON_OBJECT : MS_JSON_ARRAY;
  if (depth >= JSON_MAX_DEPTH) return fail(p, "nested deeper than %d levels", JSON_MAX_DEPTH);
  p->pos++;
  skip_ws(p);
  if (peek(p) == close) return p->pos++, true;
  for (int cap = 0;;) {
    skip_ws(p);
    ms_json *slot = grow(p, out, &cap);
    if (!slot) return false;
    if (object) {
      if (peek(p) != '"') return fail(p, at_end(p) ? "unexpected end" : "expected a string key");
      if (!(out->keys[out->count - 1] = parse_string(p))) return false;
      skip_ws(p);
      if (peek(p) != ':') return fail(p, "expected ':'");
      p->pos++;
    }
    if (!parse_value(p, slot, depth + 1)) return false;
    skip_ws(p);
    if (peek(p) == close) return p->pos++, true;
    if (peek(p) != ',') return fail(p, at_end(p) ? "unexpected end" : "expected ',' or '%c'", close);
    p->pos++;
  }
}

static bool parse_value(parser *p, ms_json *out, int depth) {
  skip_ws(p);
  switch (peek(p)) {
  case '{':
  case '[': return parse_container(p, out, depth);
  case '"': return out->kind = MS_JSON_STRING, (out->string = parse_string(p)) != NULL;
  case 't': return literal(p, "true", out, MS_JSON_BOOL, true);
  case 'f': return literal(p, "false", out, MS_JSON_BOOL, false);
  case 'n': return literal(p, "null", out, MS_JSON_NULL, false);
  case '\0':
    if (at_end(p)) return fail(p, "unexpected end");
    return fail(p, "NUL byte");
  default:
    if (peek(p) == '-' || (peek(p) >= '0' && peek(p) <= '9')) return parse_number(p, out);
    return fail(p, "unexpected character '%c'", peek(p));
  }
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
  parser p = {text, len, 0, err, errlen, false};
  ms_json *root = calloc(1, sizeof *root);
  if (!root) return snprintf(err, errlen, "out of memory"), NULL;
  if (parse_value(&p, root, 0)) {
    skip_ws(&p);
    if (at_end(&p)) return root;
    fail(&p, "unexpected character '%c' after the value", peek(&p));
  }
  ms_json_free(root);
  return NULL;
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

void ms_json_buf_raw(ms_json_buf *b, const char *s, size_t n) {
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
void ms_json_buf_str(ms_json_buf *b, const char *s) {
  ms_json_buf_raw(b, "\"", 1);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    const char *esc = *c == '"' ? "\\\"" : *c == '\\' ? "\\\\" : *c == '\b' ? "\\b" : *c == '\f' ? "\\f"
                    : *c == '\n' ? "\\n" : *c == '\r' ? "\\r" : *c == '\t' ? "\\t" : NULL;
    char u[8];
    if (!esc && *c < 0x20) snprintf(u, sizeof u, "\\u%04x", *c), esc = u;
    if (esc) ms_json_buf_raw(b, esc, strlen(esc));
    else ms_json_buf_raw(b, (const char *)c, 1);
  }
  ms_json_buf_raw(b, "\"", 1);
}

void ms_json_buf_uint(ms_json_buf *b, uint64_t v) {
  char d[24];
  int n = snprintf(d, sizeof d, "%llu", (unsigned long long)v);
  ms_json_buf_raw(b, d, (size_t)n);
}

void ms_json_buf_free(ms_json_buf *b) {
  free(b->data);
  b->data = NULL, b->len = b->cap = 0;
}
