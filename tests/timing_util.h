/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * timing_util.h — what the host-timing programs share (alloc_pair_timing, replay_timing): a
 * monotonic clock in ns, and the order of doubles for qsort (their rounds' median and minimum).
 *
 * Every helper is static inline, so a program that uses only some of them builds without
 * warnings.
 */
#ifndef RECAP_TEST_TIMING_UTIL_H
#define RECAP_TEST_TIMING_UTIL_H

#include <stdint.h>
#include <time.h>

static inline uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static inline int compare_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

#endif /* RECAP_TEST_TIMING_UTIL_H */
