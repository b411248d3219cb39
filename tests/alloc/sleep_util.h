/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sleep_util.h — what the parts of test_sleep share on the CPU fake device: a model that computes
 * (two states, a temporary, a big buffer) captured into a pool, its contents saved and compared,
 * and the checks of a pool fully asleep or fully awake. Every helper is static inline, so a part
 * that uses only some of them builds without warnings.
 */
#ifndef RECAP_TEST_SLEEP_UTIL_H
#define RECAP_TEST_SLEEP_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "alloc/alloc_internal.h"
#include "alloc/alloc_lock.h"
#include "alloc/pinned_cache.h"
#include "graph_util.h"
#include "plain_callable.h"
#include "memory_util.h"
#include "pool_record.h"

/* The model's buffers: two states of WORDS words in the small size class, a temporary between
 * them freed inside the capture (a free block splits the runs an OFFLOAD copies), and a big
 * buffer in the large size class. */
enum { WORDS = 64 * 1024, BIG_WORDS = 1024 * 1024 };

static inline void step(void *const *args, size_t n) {
  (void)n;
  uint32_t *state = args[0], *tmp = args[1];
  size_t words = (size_t)(uintptr_t)args[2];
  for (size_t i = 0; i < words; i++) tmp[i] = state[i] * 1664525u + 1013904223u + (uint32_t)i;
  for (size_t i = 0; i < words; i++) state[i] = tmp[i] ^ (tmp[(i + 1) % words] >> 3);
}

static inline void mix(void *const *args, size_t n) {
  (void)n;
  uint32_t *big = args[0];
  const uint32_t *a = args[1], *b = args[2];
  for (size_t i = 0; i < BIG_WORDS; i++) big[i] = big[i] * 31u + a[i % WORDS] - b[(i * 7) % WORDS];
}

typedef struct model {
  recap_graph_t graph;
  recap_stream_t stream;
  recap_pool_id_t pool;
  uint32_t *state, *state2, *big; /* in the graph's pool */
  /* The same computation on the host, step by step. */
  uint32_t *ref_state, *ref_state2, *ref_big, *ref_tmp;
} model_t;

static inline void launch_step(recap_stream_t s, uint32_t *state, uint32_t *tmp) {
  const void *args[3] = {state, tmp, (const void *)(uintptr_t)WORDS};
  recap__fake_launch_kernel_fn(s, "step", step, args, 3);
}

/* Capture the model's graph into its own pool and fill its buffers. */
static inline void model_make(model_t *m) {
  memset(m, 0, sizeof *m);
  m->stream = recap__fake_stream_new();
  OK(recap_graph_create(&m->graph, 0));
  OK(recap_graph_capture_begin(m->graph, NULL, m->stream));
  uint32_t *tmp;
  OK(recap_malloc((void **)&m->state, WORDS * 4, m->stream));
  OK(recap_malloc((void **)&tmp, WORDS * 4, m->stream));
  OK(recap_malloc((void **)&m->state2, WORDS * 4, m->stream));
  OK(recap_malloc((void **)&m->big, BIG_WORDS * 4, m->stream));
  launch_step(m->stream, m->state, tmp);
  launch_step(m->stream, m->state2, tmp);
  const void *args[3] = {m->big, m->state, m->state2};
  recap__fake_launch_kernel_fn(m->stream, "mix", mix, args, 3);
  OK(recap_free(tmp));
  OK(recap_graph_capture_end(m->graph));
  OK(recap_graph_pool(m->graph, &m->pool));
  m->ref_state = malloc(WORDS * 4);
  m->ref_state2 = malloc(WORDS * 4);
  m->ref_tmp = malloc(WORDS * 4);
  m->ref_big = malloc(BIG_WORDS * 4);
  assert_non_null(m->ref_state);
  assert_non_null(m->ref_state2);
  assert_non_null(m->ref_tmp);
  assert_non_null(m->ref_big);
  for (uint32_t i = 0; i < WORDS; i++) m->ref_state[i] = i * 2654435761u;
  for (uint32_t i = 0; i < WORDS; i++) m->ref_state2[i] = i ^ 0x5bd1e995u;
  for (uint32_t i = 0; i < BIG_WORDS; i++) m->ref_big[i] = i;
  memcpy(m->state, m->ref_state, WORDS * 4);
  memcpy(m->state2, m->ref_state2, WORDS * 4);
  memcpy(m->big, m->ref_big, BIG_WORDS * 4);
}

/* n replays of the graph, and n steps of the reference. */
static inline void model_run(model_t *m, int n) {
  for (int k = 0; k < n; k++) {
    OK(recap_graph_replay(m->graph, m->stream));
    void *a[3] = {m->ref_state, m->ref_tmp, (void *)(uintptr_t)WORDS};
    step(a, 3);
    void *b[3] = {m->ref_state2, m->ref_tmp, (void *)(uintptr_t)WORDS};
    step(b, 3);
    void *c[3] = {m->ref_big, m->ref_state, m->ref_state2};
    mix(c, 3);
  }
}

/* The device buffers hold what the reference computed, bit for bit. */
static inline void model_expect_reference(const model_t *m) {
  assert_memory_equal(m->state, m->ref_state, WORDS * 4);
  assert_memory_equal(m->state2, m->ref_state2, WORDS * 4);
  assert_memory_equal(m->big, m->ref_big, BIG_WORDS * 4);
}

/* Write the reference into the device buffers again (after a DISCARD). */
static inline void model_reload(const model_t *m) {
  memcpy(m->state, m->ref_state, WORDS * 4);
  memcpy(m->state2, m->ref_state2, WORDS * 4);
  memcpy(m->big, m->ref_big, BIG_WORDS * 4);
}

static inline void model_free(model_t *m) {
  if (m->graph) OK(recap_graph_destroy(m->graph));
  if (m->state) OK(recap_free(m->state));
  if (m->state2) OK(recap_free(m->state2));
  if (m->big) OK(recap_free(m->big));
  free(m->ref_state);
  free(m->ref_state2);
  free(m->ref_tmp);
  free(m->ref_big);
  memset(m, 0, sizeof *m);
}

/* The fake device's memory (reset_expandable). */
enum { CAPACITY = 256 << 20 };

/* A fresh fake of CAPACITY with VMM segments (reset_expandable), and *m made and run `runs`
 * times. */
static inline void model_started(model_t *m, int runs) {
  reset_expandable(CAPACITY);
  model_make(m);
  model_run(m, runs);
}

/* Everything gone, nothing held on the device. */
static inline void teardown(model_t *m) {
  if (m) model_free(m);
  expect_quiet();
  OK(recap_empty_cache());
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  assert_int_equal(recap__fake_now().vmm_chunks_live, 0);
  assert_int_equal(recap__fake_now().pinned_live, 0);
}

static inline size_t device_free(void) {
  size_t free_bytes = 0, total = 0;
  OK(recap__device()->mem_get_info(&free_bytes, &total));
  return free_bytes;
}

static inline recap_memory_stats_t stats_now(void) {
  recap_memory_stats_t st = RECAP_MEMORY_STATS_INIT;
  OK(recap_memory_stats(-1, &st));
  return st;
}

static inline void expect_stats(const recap_memory_stats_t *before) {
  recap_memory_stats_t now = stats_now();
  assert_memory_equal(&now, before, sizeof now);
}

static inline void expect_checker_passes(void) {
  recap_status_t s = recap_memory_check();
  if (s != RECAP_SUCCESS) fail_msg("memory checker: %s", recap_last_error());
}

/* The pinned buffer holding an asleep pool's copy (NULL after DISCARD). */
static inline void *offload_host(recap_pool_id_t id) {
  const recap__pool_t *pool = pool_record(id);
  return pool->offload ? pool->offload->host : NULL;
}

/* The chunks the allocator lists for pool (asleep: those a failure left), and how many of them
 * are still mapped. */
static inline int listed_chunks(recap_pool_id_t id, int *mapped) {
  int n = 0;
  *mapped = 0;
  for (const recap__segment_t *seg = pool_record(id)->segments; seg; seg = seg->next)
    for (int i = 0; i < seg->chunk_count; i++) {
      n++;
      *mapped += !seg->chunks[i].held;
    }
  return n;
}

/* The contents of the model's buffers now, to compare after a wake. */
typedef struct contents {
  uint32_t *state, *state2, *big;
} contents_t;

static inline contents_t contents_save(const model_t *m) {
  contents_t c = {malloc(WORDS * 4), malloc(WORDS * 4), malloc(BIG_WORDS * 4)};
  assert_true(c.state && c.state2 && c.big);
  memcpy(c.state, m->state, WORDS * 4);
  memcpy(c.state2, m->state2, WORDS * 4);
  memcpy(c.big, m->big, BIG_WORDS * 4);
  return c;
}

static inline void contents_expect(const contents_t *c, const model_t *m) {
  assert_memory_equal(m->state, c->state, WORDS * 4);
  assert_memory_equal(m->state2, c->state2, WORDS * 4);
  assert_memory_equal(m->big, c->big, BIG_WORDS * 4);
}

static inline void contents_free(contents_t *c) {
  free(c->state);
  free(c->state2);
  free(c->big);
}

/* The bytes the model keeps in use: what OFFLOAD copies. */
static const int64_t model_in_use = 2 * WORDS * 4 + BIG_WORDS * 4;

/* A test's end: the stream's work done, then everything gone (teardown of no model). */
static inline void stream_done_teardown(recap_stream_t s) {
  recap__fake_stream_complete(s);
  teardown(NULL);
}

/* A test's end: the saved contents freed, then the model and everything else gone. */
static inline void model_goes(model_t *m, contents_t *saved) {
  contents_free(saved);
  teardown(m);
}

/* A fresh fake of CAPACITY (reset_expandable) with classic segments. */
static inline void reset_classic(void) {
  reset_expandable(CAPACITY);
  OK(recap_option_set("expandable_segments", "0"));
}

#endif /* RECAP_TEST_SLEEP_UTIL_H */
