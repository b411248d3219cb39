/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_util.h — what the libFuzzer targets (fuzz_alloc, fuzz_recap, fuzz_part2) share: the log
 * handler that keeps runs quiet, the scaled-down size classes that odd first bytes select, and
 * the overlap of two live blocks. Every helper is static inline.
 */
#ifndef RECAP_FUZZ_UTIL_H
#define RECAP_FUZZ_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recap.h"

static inline void fuzz_quiet(recap_log_level_t level, const char *message, void *user_data) {
  (void)level;
  (void)message;
  (void)user_data;
}

/* Odd first bytes run at 1/64 of the default size classes: the same structure (segments of a
 * few blocks, the same ratios) at a fraction of the memory, so many more runs per second.
 * Returns what recap_options_parse returned (success when the input keeps the defaults). */
static inline recap_status_t fuzz_scale_down(const uint8_t *data, size_t size) {
  if (size == 0 || !(data[0] & 1)) return RECAP_SUCCESS;
  return recap_options_parse(
      "min_block_size:512,small_size:16KiB,small_segment:32KiB,"
      "large_threshold:160KiB,large_segment:320KiB,round_large:32KiB");
}

/* Whether the blocks [a, a + a_size) and [b, b + b_size) share a byte. */
static inline bool fuzz_overlap(const void *a, size_t a_size, const void *b, size_t b_size) {
  const char *x = a, *y = b;
  return x < y + b_size && y < x + a_size;
}

#endif
