/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * json_read.c — the JSON reader of json_read.h: recursive descent over the text, one value
 * tree on the host heap.
 */
#include "core/json_read.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host.h"

typedef struct reader {
  const char *text, *p;
  const char *who;
  int depth;
  recap_status_t status; /* the first failure; the parse stops there */
} reader_t;

/* Record a syntax error at the reader's position, as line:column counted from 1. */
static bool syntax(reader_t *r, const char *expected) {
  if (r->status != RECAP_SUCCESS) return false;
  int line = 1, column = 1;
  for (const char *c = r->text; c < r->p; c++) {
    if (*c == '\n') {
      line++;
      column = 1;
    } else {
      column++;
    }
  }
  r->status = recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                           "%s is not JSON: at line %d, column %d, %s was expected", r->who, line,
                           column, expected);
  return false;
}

static bool out_of_memory(reader_t *r) {
  if (r->status == RECAP_SUCCESS)
    r->status =
        recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory reading the JSON", r->who);
  return false;
}

static void skip_space(reader_t *r) {
  while (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r') r->p++;
}

static bool literal(reader_t *r, const char *word) {
  size_t n = strlen(word);
  if (strncmp(r->p, word, n) != 0) return syntax(r, "a value");
  r->p += n;
  return true;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static bool hex4(reader_t *r, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    int d = hex_digit(r->p[i]);
    if (d < 0) return syntax(r, "four hexadecimal digits after \\u");
    v = v * 16 + (unsigned)d;
  }
  r->p += 4;
  *out = v;
  return true;
}

/* UTF-8 of code point cp into out (at least 4 bytes); the bytes written. */
static size_t utf8(unsigned cp, char *out) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* A string at r->p (its opening quote) into a fresh NUL-terminated copy. Escapes never make
 * the text longer than its source, so the source's length bounds the copy. */
static char *string(reader_t *r) {
  if (*r->p != '"') {
    syntax(r, "a string");
    return NULL;
  }
  const char *start = ++r->p;
  const char *end = start;
  while (*end && *end != '"') end += *end == '\\' && end[1] ? 2 : 1;
  if (*end != '"') {
    r->p = end;
    syntax(r, "the end of the string");
    return NULL;
  }
  char *out = recap__host_malloc((size_t)(end - start) + 1);
  if (!out) {
    out_of_memory(r);
    return NULL;
  }
  size_t n = 0;
  while (r->p < end) {
    unsigned char c = (unsigned char)*r->p;
    if (c < 0x20) {
      syntax(r, "no control character inside a string (escape it)");
      goto fail;
    }
    if (c != '\\') {
      out[n++] = (char)c;
      r->p++;
      continue;
    }
    r->p++;
    char e = *r->p++;
    switch (e) {
      case '"': out[n++] = '"'; break;
      case '\\': out[n++] = '\\'; break;
      case '/': out[n++] = '/'; break;
      case 'b': out[n++] = '\b'; break;
      case 'f': out[n++] = '\f'; break;
      case 'n': out[n++] = '\n'; break;
      case 'r': out[n++] = '\r'; break;
      case 't': out[n++] = '\t'; break;
      case 'u': {
        unsigned cp;
        if (!hex4(r, &cp)) goto fail;
        if (cp >= 0xD800 && cp < 0xDC00) {
          unsigned low;
          if (r->p[0] != '\\' || r->p[1] != 'u') {
            syntax(r, "the low half of a surrogate pair");
            goto fail;
          }
          r->p += 2;
          if (!hex4(r, &low)) goto fail;
          if (low < 0xDC00 || low > 0xDFFF) {
            syntax(r, "the low half of a surrogate pair");
            goto fail;
          }
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          syntax(r, "no lone low surrogate");
          goto fail;
        } else if (cp == 0) {
          syntax(r, "no \\u0000 (recap's strings end at a NUL)");
          goto fail;
        }
        n += utf8(cp, out + n);
        break;
      }
      default:
        r->p--;
        syntax(r, "one of the escapes \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u");
        goto fail;
    }
  }
  out[n] = '\0';
  r->p = end + 1;
  return out;
fail:
  recap__host_free(out);
  return NULL;
}

static bool number(reader_t *r, recap__jv_t *v) {
  const char *start = r->p;
  const char *c = r->p;
  v->negative = *c == '-';
  if (*c == '-') c++;
  if (*c == '0') {
    c++;
  } else if (*c >= '1' && *c <= '9') {
    while (*c >= '0' && *c <= '9') c++;
  } else {
    return syntax(r, "a value");
  }
  bool integer = true;
  if (*c == '.') {
    integer = false;
    c++;
    if (!(*c >= '0' && *c <= '9')) {
      r->p = c;
      return syntax(r, "a digit after the decimal point");
    }
    while (*c >= '0' && *c <= '9') c++;
  }
  if (*c == 'e' || *c == 'E') {
    integer = false;
    c++;
    if (*c == '+' || *c == '-') c++;
    if (!(*c >= '0' && *c <= '9')) {
      r->p = c;
      return syntax(r, "a digit in the exponent");
    }
    while (*c >= '0' && *c <= '9') c++;
  }
  v->kind = RECAP__JV_NUMBER;
  v->number = strtod(start, NULL);
  if (integer) {
    /* Exact to 64 bits: the magnitude's digits, unless they overflow. */
    uint64_t m = 0;
    bool fits = true;
    for (const char *d = start + v->negative; d < c; d++) {
      uint64_t digit = (uint64_t)(*d - '0');
      if (m > (UINT64_MAX - digit) / 10) {
        fits = false;
        break;
      }
      m = m * 10 + digit;
    }
    v->integer = fits;
    v->magnitude = fits ? m : 0;
  }
  r->p = c;
  return true;
}

static bool value(reader_t *r, recap__jv_t *v);

/* The elements of an array or the members of an object, r->p just past the opening bracket. */
static bool container(reader_t *r, recap__jv_t *v, bool object) {
  char close = object ? '}' : ']';
  if (++r->depth > RECAP__JSON_MAX_DEPTH) {
    r->p--; /* at the bracket one level too deep */
    return syntax(r, "less nesting (64 levels at most)");
  }
  size_t capacity = 0;
  skip_space(r);
  if (*r->p == close) {
    r->p++;
    r->depth--;
    return true;
  }
  for (;;) {
    if (v->count == capacity) {
      capacity = capacity ? capacity * 2 : 4;
      recap__jv_t *grown = recap__host_realloc(v->items, capacity * sizeof *grown);
      if (!grown) return out_of_memory(r);
      v->items = grown;
    }
    recap__jv_t *item = &v->items[v->count];
    memset(item, 0, sizeof *item);
    v->count++; /* counted at once, so that a failure below frees what it holds */
    skip_space(r);
    if (object) {
      if (*r->p != '"') return syntax(r, "a member's name in quotes");
      item->key = string(r);
      if (!item->key) return false;
      skip_space(r);
      if (*r->p != ':') return syntax(r, "':' after the member's name");
      r->p++;
    }
    if (!value(r, item)) return false;
    skip_space(r);
    if (*r->p == ',') {
      r->p++;
      continue;
    }
    if (*r->p == close) {
      r->p++;
      r->depth--;
      return true;
    }
    return syntax(r, object ? "',' or '}'" : "',' or ']'");
  }
}

static bool value(reader_t *r, recap__jv_t *v) {
  skip_space(r);
  switch (*r->p) {
    case '{':
      r->p++;
      v->kind = RECAP__JV_OBJECT;
      return container(r, v, true);
    case '[':
      r->p++;
      v->kind = RECAP__JV_ARRAY;
      return container(r, v, false);
    case '"':
      v->kind = RECAP__JV_STRING;
      v->string = string(r);
      return v->string != NULL;
    case 't':
      v->kind = RECAP__JV_BOOL;
      v->boolean = true;
      return literal(r, "true");
    case 'f': v->kind = RECAP__JV_BOOL; return literal(r, "false");
    case 'n': v->kind = RECAP__JV_NULL; return literal(r, "null");
    default: return number(r, v);
  }
}

static void release(recap__jv_t *v) {
  for (size_t i = 0; i < v->count; i++) release(&v->items[i]);
  recap__host_free(v->items);
  recap__host_free(v->key);
  recap__host_free(v->string);
}

void recap__jv_free(recap__jv_t *v) {
  if (!v) return;
  release(v);
  recap__host_free(v);
}

recap_status_t recap__jv_parse(const char *text, const char *who, recap__jv_t **out) {
  *out = NULL;
  recap__jv_t *root = recap__host_calloc(1, sizeof *root);
  if (!root)
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory reading the JSON", who);
  reader_t r = {.text = text, .p = text, .who = who, .status = RECAP_SUCCESS};
  if (value(&r, root)) {
    skip_space(&r);
    if (*r.p != '\0') syntax(&r, "the end of the text");
  }
  if (r.status != RECAP_SUCCESS) {
    recap__jv_free(root);
    return r.status;
  }
  *out = root;
  return RECAP_SUCCESS;
}

const recap__jv_t *recap__jv_get(const recap__jv_t *v, const char *key) {
  if (!v || v->kind != RECAP__JV_OBJECT) return NULL;
  for (size_t i = 0; i < v->count; i++)
    if (strcmp(v->items[i].key, key) == 0) return &v->items[i];
  return NULL;
}

bool recap__jv_int(const recap__jv_t *v, int64_t *out) {
  if (!v || v->kind != RECAP__JV_NUMBER || !v->integer) return false;
  if (v->negative) {
    if (v->magnitude > (uint64_t)INT64_MAX + 1) return false;
    *out = v->magnitude == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v->magnitude;
    return true;
  }
  if (v->magnitude > (uint64_t)INT64_MAX) return false;
  *out = (int64_t)v->magnitude;
  return true;
}

bool recap__jv_uint(const recap__jv_t *v, uint64_t *out) {
  if (!v || v->kind != RECAP__JV_NUMBER || !v->integer || (v->negative && v->magnitude))
    return false;
  *out = v->magnitude;
  return true;
}

const char *recap__jv_string(const recap__jv_t *v) {
  return v && v->kind == RECAP__JV_STRING ? v->string : NULL;
}
