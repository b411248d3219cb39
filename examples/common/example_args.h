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
#include <stdio.h>
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

/* The examples' answers to a command line getopt_long refused, each printed to stderr and
 * returning the status of a bad command line (2). example_option_error: getopt_long returned
 * c, ':' for an option without its value, anything else for an unknown option (the option is
 * argv[optind - 1]); usage is printed after the message. example_bad_value: value is not one
 * the option takes. example_extra_argument: an argument left after the options (argv[optind]).
 * PROGRAM is the example's name. */
enum { EXAMPLE_EXIT_BAD_USAGE = 2 };

static inline int example_option_error(const char *program, int c, char **argv, int optind,
                                       void (*usage)(FILE *)) {
  if (c == ':')
    fprintf(stderr, "%s: '%s' needs a value\n", program, argv[optind - 1]);
  else
    fprintf(stderr, "%s: unknown option '%s'\n", program, argv[optind - 1]);
  usage(stderr);
  return EXAMPLE_EXIT_BAD_USAGE;
}

static inline int example_bad_value(const char *program, const char *value, const char *option) {
  fprintf(stderr, "%s: bad value '%s' for --%s (see --help)\n", program, value, option);
  return EXAMPLE_EXIT_BAD_USAGE;
}

static inline int example_extra_argument(const char *program, const char *argument) {
  fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", program, argument);
  return EXAMPLE_EXIT_BAD_USAGE;
}

#endif /* RECAP_EXAMPLE_ARGS_H */
