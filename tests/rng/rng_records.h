/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rng_records.h — the recording "kernels" of the generator tests on the CPU fake: fake kernel
 * functions (recap__fake_launch_kernel_fn) that run at each graph launch and record the seed and
 * offset a captured state unpacks to, reading the generator's device words then, as
 * recap_philox_unpack does on a GPU. For one test program each (the functions are static).
 */
#ifndef RECAP_TEST_RNG_RECORDS_H
#define RECAP_TEST_RNG_RECORDS_H

#include <stdint.h>

#include "fake/fake.h"
#include "harness.h"
#include "recap.h"

enum { MAX_RECORDS = 64 };

/* What the recording kernels wrote, in launch order. */
typedef struct records {
  uint64_t offset[MAX_RECORDS];
  uint64_t seed[MAX_RECORDS];
  size_t count;
} records_t;

/* args: [0] the captured state (test-owned), [1] the records. */
static void record_fn(void *const *args, size_t n) {
  (void)n;
  const recap_philox_state_t *st = args[0];
  records_t *r = args[1];
  if (r->count == MAX_RECORDS) return;
  r->seed[r->count] = st->captured ? *st->seed_ptr : st->seed;
  r->offset[r->count] = st->captured ? *st->offset_ptr + st->offset_intragraph : st->offset;
  r->count++;
}

/* args: [0] a uint32_t counter (fake device memory), [1] the value. */
static void set_counter_fn(void *const *args, size_t n) {
  (void)n;
  *(uint32_t *)args[0] = (uint32_t)(uintptr_t)args[1];
}

/* States live as long as the graph: a pool of them per test (reset state_count at its start). */
static recap_philox_state_t states[32];
static size_t state_count;

/* Draw `increment` on s from gen (captured or eager) and record the state the kernel sees. */
static void draw(recap_generator_t gen, recap_stream_t s, uint64_t increment, records_t *r) {
  assert_true(state_count < sizeof states / sizeof states[0]);
  recap_philox_state_t *st = &states[state_count++];
  OK(recap_generator_philox_state(gen, increment, s, st));
  const void *args[2] = {st, r};
  recap__fake_launch_kernel_fn(s, "draw", record_fn, args, 2);
}

/* The generator's host offset (folding what replays drew on the device). */
static uint64_t offset_of(recap_generator_t gen) {
  uint64_t offset = UINT64_MAX;
  OK(recap_generator_offset_get(gen, &offset));
  return offset;
}

#endif
