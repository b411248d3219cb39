/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * json.c — the JSON writer of json.h.
 */
#include "core/json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host.h"

void recap__json_init(recap__json_t *j) { memset(j, 0, sizeof *j); }

static void put(recap__json_t *j, const char *s, size_t n) { recap__strbuf_put(&j->text, s, n); }

static void puts_(recap__json_t *j, const char *s) { recap__strbuf_puts(&j->text, s); }

/* Before any value: a comma if a sibling came before it. */
static void value_start(recap__json_t *j) {
  if (j->need_comma) put(j, ",", 1);
  j->need_comma = true;
}

void recap__json_object_begin(recap__json_t *j) {
  value_start(j);
  put(j, "{", 1);
  j->need_comma = false;
  j->depth++;
}

void recap__json_object_end(recap__json_t *j) {
  put(j, "}", 1);
  j->need_comma = true;
  j->depth--;
}

void recap__json_array_begin(recap__json_t *j) {
  value_start(j);
  put(j, "[", 1);
  j->need_comma = false;
  j->depth++;
}

void recap__json_array_end(recap__json_t *j) {
  put(j, "]", 1);
  j->need_comma = true;
  j->depth--;
}

static void put_escaped(recap__json_t *j, const char *s) {
  put(j, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    char esc[8];
    switch (*p) {
      case '"': puts_(j, "\\\""); break;
      case '\\': puts_(j, "\\\\"); break;
      case '\n': puts_(j, "\\n"); break;
      case '\r': puts_(j, "\\r"); break;
      case '\t': puts_(j, "\\t"); break;
      default:
        if (*p < 0x20) {
          snprintf(esc, sizeof esc, "\\u%04x", *p);
          puts_(j, esc);
        } else {
          put(j, (const char *)p, 1);
        }
    }
  }
  put(j, "\"", 1);
}

void recap__json_key(recap__json_t *j, const char *key) {
  value_start(j);
  put_escaped(j, key);
  put(j, ":", 1);
  j->need_comma = false; /* the value that follows belongs to this key */
}

void recap__json_string(recap__json_t *j, const char *s) {
  value_start(j);
  if (s)
    put_escaped(j, s);
  else
    puts_(j, "null");
}

void recap__json_int(recap__json_t *j, int64_t v) {
  char buf[32];
  value_start(j);
  snprintf(buf, sizeof buf, "%" PRId64, v);
  puts_(j, buf);
}

void recap__json_uint(recap__json_t *j, uint64_t v) {
  char buf[32];
  value_start(j);
  snprintf(buf, sizeof buf, "%" PRIu64, v);
  puts_(j, buf);
}

void recap__json_bool(recap__json_t *j, bool v) {
  value_start(j);
  puts_(j, v ? "true" : "false");
}

void recap__json_null(recap__json_t *j) {
  value_start(j);
  puts_(j, "null");
}

void recap__json_pointer(recap__json_t *j, const void *p) {
  char buf[32];
  snprintf(buf, sizeof buf, "0x%" PRIxPTR, (uintptr_t)p);
  recap__json_string(j, buf);
}

recap_status_t recap__json_finish(recap__json_t *j, char **out) {
  bool written = recap__strbuf_take(&j->text, out);
  recap__json_init(j);
  if (!written) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "writing JSON: out of host memory");
  return RECAP_SUCCESS;
}

void recap__json_discard(recap__json_t *j) {
  recap__host_free(j->text.buf);
  recap__json_init(j);
}
