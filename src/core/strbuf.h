/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * strbuf.h — a growable NUL-terminated string on the host heap, for the library's text writers
 * (the JSON writer, the memory page).
 *
 * Writers append many small pieces and check for failure once: out of host memory the buffer
 * remembers the failure, ignores what follows, and the writer reports it when it finishes.
 */
#ifndef RECAP_CORE_STRBUF_H
#define RECAP_CORE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

typedef struct recap__strbuf {
  char *buf; /* NULL until the first append; NUL-terminated after it */
  size_t len, cap;
  bool failed; /* a host allocation failed; the text is incomplete */
} recap__strbuf_t;

void recap__strbuf_put(recap__strbuf_t *b, const char *s, size_t n);
void recap__strbuf_puts(recap__strbuf_t *b, const char *s);
void recap__strbuf_printf(recap__strbuf_t *b, const char *fmt, ...) RECAP__PRINTF(2, 3);
/* Hand the text to *out (free with recap__host_free / recap_string_free), or NULL and false when
 * an append failed; either way the buffer is left empty. */
bool recap__strbuf_take(recap__strbuf_t *b, char **out);

#endif /* RECAP_CORE_STRBUF_H */
