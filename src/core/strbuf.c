/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * strbuf.c — the growable string of strbuf.h.
 */
#include "core/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/host.h"

/* Room for n more bytes and the NUL; false (remembered) when the host has none. */
static bool reserve(recap__strbuf_t *b, size_t n) {
  if (b->failed) return false;
  if (b->len + n + 1 <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + n + 1) cap *= 2;
  char *grown = recap__host_realloc(b->buf, cap);
  if (!grown) {
    b->failed = true;
    return false;
  }
  b->buf = grown;
  b->cap = cap;
  return true;
}

void recap__strbuf_put(recap__strbuf_t *b, const char *s, size_t n) {
  if (!reserve(b, n)) return;
  memcpy(b->buf + b->len, s, n);
  b->len += n;
  b->buf[b->len] = '\0';
}

void recap__strbuf_puts(recap__strbuf_t *b, const char *s) { recap__strbuf_put(b, s, strlen(s)); }

void recap__strbuf_printf(recap__strbuf_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->failed = true;
    return;
  }
  if (!reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->buf + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

bool recap__strbuf_take(recap__strbuf_t *b, char **out) {
  if (!b->buf) recap__strbuf_put(b, "", 0);
  *out = b->failed ? NULL : b->buf;
  if (b->failed) recap__host_free(b->buf);
  memset(b, 0, sizeof *b);
  return *out != NULL;
}
