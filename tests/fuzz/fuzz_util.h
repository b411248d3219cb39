/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_util.h — what the libFuzzer targets (fuzz_alloc, fuzz_recap, fuzz_part2) share: the trace
 * of each operation, the log handler that keeps runs quiet, the scaled-down size classes that odd
 * first bytes select, the overlap of two live blocks, the allocator's checker and statistics
 * against the blocks a model holds, and the armed faults a call reached. Every helper is static
 * inline (or a macro, where each target's own types or state are involved).
 */
#ifndef RECAP_FUZZ_UTIL_H
#define RECAP_FUZZ_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fake/fake.h"
#include "recap.h"

/* Prints one operation when RECAP_FUZZ_TRACE=1, to turn a crashing input into a story. Expects
 * the fuzzer's `tracing` flag and its state `st` (with the operation's index) in scope. */
#define TRACE(...)                             \
  do {                                         \
    if (tracing) {                             \
      fprintf(stderr, "  %3d: ", st.op_index); \
      fprintf(stderr, __VA_ARGS__);            \
      fputc('\n', stderr);                     \
    }                                          \
  } while (0)

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

/* The allocator's own checker passes, and its statistics now; `die` is the fuzzer's report of a
 * failure (it does not return). */
static inline recap_memory_stats_t fuzz_checked_stats(void (*die)(const char *, recap_status_t)) {
  recap_status_t s = recap_memory_check();
  if (s != RECAP_SUCCESS) die("recap_memory_check failed", s);
  recap_memory_stats_t stats = RECAP_MEMORY_STATS_INIT;
  s = recap_memory_stats(-1, &stats);
  if (s != RECAP_SUCCESS) die("recap_memory_stats failed", s);
  return stats;
}

/* The statistics count the blocks and bytes the model holds; `fuzzer` names the target in the
 * report. */
static inline void fuzz_expect_held(const char *fuzzer, const recap_memory_stats_t *stats,
                                    int64_t blocks, int64_t bytes,
                                    void (*die)(const char *, recap_status_t)) {
  if (stats->allocation[RECAP_STAT_ALL].current != blocks ||
      stats->allocated_bytes[RECAP_STAT_ALL].current != bytes) {
    fprintf(stderr, "%s: %lld blocks of %lld bytes counted, the model holds %lld of %lld\n", fuzzer,
            (long long)stats->allocation[RECAP_STAT_ALL].current,
            (long long)stats->allocated_bytes[RECAP_STAT_ALL].current, (long long)blocks,
            (long long)bytes);
    die("the statistics disagree with the blocks held", RECAP_SUCCESS);
  }
}

/* Adds the live slots among slots[0..count) to blocks, and their usable bytes to bytes: what
 * the statistics must count. A macro, as each fuzzer has its own slot type. */
#define FUZZ_COUNT_HELD(slots, count, blocks, bytes) \
  do {                                               \
    for (int slot_ = 0; slot_ < (count); slot_++)    \
      if ((slots)[slot_].p) {                        \
        (blocks)++;                                  \
        (bytes) += (int64_t)(slots)[slot_].usable;   \
      }                                              \
  } while (0)

/* After a call: adds to *fired a bit for each armed fault (fault_at[k], the fake's call count
 * at which kind k fails; 0 when not armed) that the call reached, and disarms it. */
static inline void fuzz_note_fired(uint64_t fault_at[RECAP__FAKE_FAULT_KINDS], uint64_t *fired) {
  recap__fake_counters_t c = recap__fake_now();
  for (int k = 0; k < RECAP__FAKE_FAULT_KINDS; k++)
    if (fault_at[k] && c.calls[k] >= fault_at[k]) {
      *fired |= 1ull << k;
      fault_at[k] = 0;
    }
}

#endif
