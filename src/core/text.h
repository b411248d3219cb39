/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * text.h — copies of strings onto the host heap, for the layers that keep names and labels
 * (graph inspection, annotations, liveness reports). NULL when out of host memory.
 */
#ifndef RECAP_CORE_TEXT_H
#define RECAP_CORE_TEXT_H

#include <stdlib.h>
#include <string.h>

#include "core/host.h"

/* The first n bytes of text, NUL-terminated. */
static inline char *recap__copy_text(const char *text, size_t n) {
  char *c = recap__host_malloc(n + 1);
  if (c) {
    memcpy(c, text, n);
    c[n] = '\0';
  }
  return c;
}

static inline char *recap__copy_string(const char *s) { return recap__copy_text(s, strlen(s)); }

#endif /* RECAP_CORE_TEXT_H */
