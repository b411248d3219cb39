/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * alloc_pair_timing — the host time of recap_malloc + recap_free of a size just freed on the
 * same stream, against the CPU fake device: the allocator's own cost with no driver under it.
 *
 * For 512 B, 64 KiB and 4 MiB: after a warm-up, `rounds` rounds of `pairs` pairs each (default
 * 10 x 100000, so 10^6 pairs per size), timed with clock_gettime(CLOCK_MONOTONIC); it prints
 * the median and the minimum of the rounds' ns per pair. A program, not a test: timings depend
 * on the machine. Usage: alloc_pair_timing [pairs-per-round [rounds [on|off [size]]]]; `off`
 * switches the front cache off (src/alloc/front_cache.c), for the figure without it; a size
 * measures that size alone (for instruction counts under valgrind --tool=callgrind).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "recap.h"
#include "reset.h"
#include "timing_util.h"

/* ns per pair over `pairs` pairs; exits on any failure, which would make the figure a lie. */
static double pairs_ns(size_t size, recap_stream_t stream, long pairs) {
  void *p = NULL;
  uint64_t t0 = now_ns();
  for (long i = 0; i < pairs; i++) {
    if (recap_malloc(&p, size, stream) != RECAP_SUCCESS || recap_free(p) != RECAP_SUCCESS) {
      fprintf(stderr, "alloc_pair_timing: %s\n", recap_last_error());
      exit(1);
    }
  }
  return (double)(now_ns() - t0) / (double)pairs;
}

int main(int argc, char **argv) {
  long pairs = argc > 1 ? atol(argv[1]) : 100000;
  int rounds = argc > 2 ? atoi(argv[2]) : 10;
  if (pairs <= 0 || rounds <= 0 || rounds > 1000) {
    fprintf(stderr,
            "usage: alloc_pair_timing [pairs-per-round [rounds (1 to 1000) [on|off [size]]]]\n");
    return 2;
  }
  recap_test_reset(NULL);
  bool cache = !(argc > 3 && strcmp(argv[3], "off") == 0);
  recap__alloc_front_cache_enable(cache);
  recap_stream_t stream = recap__fake_stream_new();
  size_t sizes[] = {512, 64 << 10, 4 << 20};
  size_t size_count = sizeof sizes / sizeof sizes[0];
  if (argc > 4) {
    sizes[0] = (size_t)strtoull(argv[4], NULL, 10);
    size_count = 1;
  }
  double samples[1000];
  printf("front cache %s\nsize_bytes pairs median_ns min_ns\n", cache ? "on" : "off");
  for (size_t k = 0; k < size_count; k++) {
    pairs_ns(sizes[k], stream, 1000); /* warm: the segment and the free set exist */
    for (int r = 0; r < rounds; r++) samples[r] = pairs_ns(sizes[k], stream, pairs);
    qsort(samples, (size_t)rounds, sizeof samples[0], compare_double);
    printf("%zu %ld %.1f %.1f\n", sizes[k], pairs * rounds, samples[rounds / 2], samples[0]);
  }
  return 0;
}
