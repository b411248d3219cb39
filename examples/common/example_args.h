/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * example_args.h — the examples' number parsing for their command lines: the whole string must
 * be one number in [min, max], else false (and *out unchanged), so that "--steps 10x" or a
 * value out of range is a bad command line, never a silent truncation.
 */
#ifndef RECAP_EXAMPLE_ARGS_H
#define RECAP_EXAMPLE_ARGS_H

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

static inline bool example_parse_long(const char *s, long min, long max, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || end == s || v < min || v > max) return false;
  *out = v;
  return true;
}

static inline bool example_parse_int(const char *s, long min, long max, int *out) {
  long v = 0;
  if (max > 2147483647L || !example_parse_long(s, min, max, &v)) return false;
  *out = (int)v;
  return true;
}

#endif /* RECAP_EXAMPLE_ARGS_H */
