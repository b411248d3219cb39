/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_sleep.c — pools that sleep and wake (recap/sleep.h) on the CPU fake device: DISCARD and
 * OFFLOAD round trips of a pool holding a graph whose kernels compute (fake function kernels),
 * the same addresses and, for OFFLOAD, the same bytes after the wake, replays that continue
 * with no recapture, the device memory given back while asleep (mem_get_info, exact), every
 * refusal with its status and message, frees while asleep, recap_sleep and recap_wake over
 * the default and private pools, a fault injected at each device call of sleep and of wake
 * (the pool fully asleep or fully awake, recap_memory_check passing, statistics unchanged to
 * the byte, OFFLOAD contents intact), and a wake that finds the device full.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "alloc/alloc_lock.h"
#include "alloc/pinned_cache.h"
#include "graph_util.h"
#include "plain_callable.h"

/* The model's buffers: two states of WORDS words in the small size class, a temporary between
 * them freed inside the capture (a free block splits the runs an OFFLOAD copies), and a big
 * buffer in the large size class. */
enum { WORDS = 64 * 1024, BIG_WORDS = 1024 * 1024 };

static void step(void *const *args, size_t n) {
  (void)n;
  uint32_t *state = args[0], *tmp = args[1];
  size_t words = (size_t)(uintptr_t)args[2];
  for (size_t i = 0; i < words; i++) tmp[i] = state[i] * 1664525u + 1013904223u + (uint32_t)i;
  for (size_t i = 0; i < words; i++) state[i] = tmp[i] ^ (tmp[(i + 1) % words] >> 3);
}

static void mix(void *const *args, size_t n) {
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

static void launch_step(recap_stream_t s, uint32_t *state, uint32_t *tmp) {
  const void *args[3] = {state, tmp, (const void *)(uintptr_t)WORDS};
  recap__fake_launch_kernel_fn(s, "step", step, args, 3);
}

/* Capture the model's graph into its own pool and fill its buffers. */
static void model_make(model_t *m) {
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
static void model_run(model_t *m, int n) {
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
static void model_expect_reference(const model_t *m) {
  assert_memory_equal(m->state, m->ref_state, WORDS * 4);
  assert_memory_equal(m->state2, m->ref_state2, WORDS * 4);
  assert_memory_equal(m->big, m->ref_big, BIG_WORDS * 4);
}

/* Write the reference into the device buffers again (after a DISCARD). */
static void model_reload(const model_t *m) {
  memcpy(m->state, m->ref_state, WORDS * 4);
  memcpy(m->state2, m->ref_state2, WORDS * 4);
  memcpy(m->big, m->ref_big, BIG_WORDS * 4);
}

static void model_free(model_t *m) {
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

/* Everything gone, nothing held on the device. */
static void teardown(model_t *m) {
  if (m) model_free(m);
  expect_quiet();
  OK(recap_empty_cache());
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  assert_int_equal(recap__fake_now().vmm_chunks_live, 0);
  assert_int_equal(recap__fake_now().pinned_live, 0);
}

static size_t device_free(void) {
  size_t free_bytes = 0, total = 0;
  OK(recap__device()->mem_get_info(&free_bytes, &total));
  return free_bytes;
}

static recap_pool_memory_t pool_memory(recap_pool_id_t pool) {
  recap_pool_memory_t m = RECAP_POOL_MEMORY_INIT;
  OK(recap_pool_memory(pool, &m));
  return m;
}

static recap_pool_state_t state_of_pool(recap_pool_id_t pool) {
  recap_pool_state_t st = (recap_pool_state_t)-1;
  OK(recap_pool_state(pool, &st));
  return st;
}

static recap_memory_stats_t stats_now(void) {
  recap_memory_stats_t st = RECAP_MEMORY_STATS_INIT;
  OK(recap_memory_stats(-1, &st));
  return st;
}

static void expect_stats(const recap_memory_stats_t *before) {
  recap_memory_stats_t now = stats_now();
  assert_memory_equal(&now, before, sizeof now);
}

static void expect_checker_passes(void) {
  recap_status_t s = recap_memory_check();
  if (s != RECAP_SUCCESS) fail_msg("memory checker: %s", recap_last_error());
}

/* The allocator's record of pool on device 0 (asserted). */
static recap__pool_t *pool_record(recap_pool_id_t id) {
  recap__device_state_t *d = recap__alloc.devices[0];
  assert_non_null(d);
  recap__pool_t *pool = &d->default_pool;
  if (!recap_pool_is_default(id))
    for (pool = d->private_pools; pool && !recap__pool_id_equal(pool->id, id); pool = pool->next)
      ;
  assert_non_null(pool);
  return pool;
}

/* The pinned buffer holding an asleep pool's copy (NULL after DISCARD). */
static void *offload_host(recap_pool_id_t id) {
  const recap__pool_t *pool = pool_record(id);
  return pool->offload ? pool->offload->host : NULL;
}

/* The chunks the allocator lists for pool (asleep: those a failure left), and how many of them
 * are still mapped. */
static int listed_chunks(recap_pool_id_t id, int *mapped) {
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

static contents_t contents_save(const model_t *m) {
  contents_t c = {malloc(WORDS * 4), malloc(WORDS * 4), malloc(BIG_WORDS * 4)};
  assert_true(c.state && c.state2 && c.big);
  memcpy(c.state, m->state, WORDS * 4);
  memcpy(c.state2, m->state2, WORDS * 4);
  memcpy(c.big, m->big, BIG_WORDS * 4);
  return c;
}

static void contents_expect(const contents_t *c, const model_t *m) {
  assert_memory_equal(m->state, c->state, WORDS * 4);
  assert_memory_equal(m->state2, c->state2, WORDS * 4);
  assert_memory_equal(m->big, c->big, BIG_WORDS * 4);
}

static void contents_free(contents_t *c) {
  free(c->state);
  free(c->state2);
  free(c->big);
}

/* The bytes the model keeps in use: what OFFLOAD copies. */
static const int64_t model_in_use = 2 * WORDS * 4 + BIG_WORDS * 4;

/* ---- round trips ----------------------------------------------------------------------------- */

static void offload_round_trip(void **unused) {
  (void)unused;
  reset_expandable(CAPACITY);
  model_t m;
  model_make(&m);
  model_run(&m, 3);
  model_expect_reference(&m);
  recap_pool_memory_t before = pool_memory(m.pool);
  assert_int_equal(before.state, RECAP_POOL_AWAKE);
  assert_true(before.vmm_segments >= 2); /* a small and a large VMM segment */
  recap_memory_stats_t st = stats_now();
  size_t free_before = device_free();
  size_t in_use_before = recap__fake_now().bytes_in_use[0];
  void *state = m.state, *big = m.big;
  contents_t saved = contents_save(&m);
  uint64_t copies = recap__fake_now().eager_copies;

  OK(recap_pool_sleep(m.pool, RECAP_SLEEP_OFFLOAD));
  assert_int_equal(state_of_pool(m.pool), RECAP_POOL_ASLEEP_OFFLOADED);
  recap_pool_memory_t asleep = pool_memory(m.pool);
  assert_int_equal(asleep.state, RECAP_POOL_ASLEEP_OFFLOADED);
  assert_int_equal(asleep.sleeping_bytes, before.reserved_bytes);
  assert_int_equal(asleep.offloaded_bytes, model_in_use);
  assert_int_equal(asleep.reserved_bytes, before.reserved_bytes);
  assert_int_equal(asleep.allocated_bytes, before.allocated_bytes);
  /* Three runs (state, state2 past the freed temporary, big): three copies. */
  assert_int_equal(recap__fake_now().eager_copies - copies, 3);
  /* The device has the pool's memory back, to the byte; the host holds the copy. */
  assert_int_equal(device_free() - free_before, (size_t)before.reserved_bytes);
  assert_int_equal(in_use_before - recap__fake_now().bytes_in_use[0],
                   (size_t)before.reserved_bytes);
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 0);
  assert_int_equal(recap__fake_now().pinned_bytes, (size_t)model_in_use);
  expect_stats(&st);
  expect_checker_passes();

  uint64_t launches = recap__fake_now().graph_launches;
  EXPECT_STATUS(recap_graph_replay(m.graph, m.stream), RECAP_ERROR_POOL_ASLEEP);
  EXPECT_MESSAGE("recap_graph_replay: the graph's pool");
  EXPECT_MESSAGE("is asleep (offloaded)");
  EXPECT_MESSAGE("nothing was launched");
  assert_int_equal(recap__fake_now().graph_launches, launches);

  copies = recap__fake_now().eager_copies;
  OK(recap_pool_wake(m.pool));
  assert_int_equal(recap__fake_now().eager_copies - copies, 3);
  assert_int_equal(state_of_pool(m.pool), RECAP_POOL_AWAKE);
  recap_pool_memory_t woken = pool_memory(m.pool);
  assert_int_equal(woken.sleeping_bytes, 0);
  assert_int_equal(woken.offloaded_bytes, 0);
  assert_int_equal(woken.reserved_bytes, before.reserved_bytes);
  assert_int_equal(device_free(), free_before);
  assert_int_equal(recap__fake_now().pinned_live, 0);
  assert_ptr_equal(m.state, state);
  assert_ptr_equal(m.big, big);
  contents_expect(&saved, &m);
  expect_stats(&st);
  expect_checker_passes();
  /* The graph replays as captured. */
  model_run(&m, 3);
  model_expect_reference(&m);
  assert_int_equal(recap__fake_now().graph_launches, launches + 3);
  contents_free(&saved);
  teardown(&m);
}

static void discard_round_trip(void **unused) {
  (void)unused;
  reset_expandable(CAPACITY);
  model_t m;
  model_make(&m);
  model_run(&m, 2);
  recap_pool_memory_t before = pool_memory(m.pool);
  recap_memory_stats_t st = stats_now();
  size_t free_before = device_free();
  uint64_t copies = recap__fake_now().eager_copies;
  OK(recap_pool_sleep(m.pool, RECAP_SLEEP_DISCARD));
  assert_int_equal(state_of_pool(m.pool), RECAP_POOL_ASLEEP_DISCARDED);
  recap_pool_memory_t asleep = pool_memory(m.pool);
  assert_int_equal(asleep.sleeping_bytes, before.reserved_bytes);
  assert_int_equal(asleep.offloaded_bytes, 0);
  assert_int_equal(recap__fake_now().eager_copies, copies);
  assert_int_equal(recap__fake_now().pinned_live, 0);
  assert_int_equal(device_free() - free_before, (size_t)before.reserved_bytes);
  expect_stats(&st);
  expect_checker_passes();
  EXPECT_STATUS(recap_graph_replay(m.graph, m.stream), RECAP_ERROR_POOL_ASLEEP);
  EXPECT_MESSAGE("is asleep (discarded)");

  OK(recap_pool_wake(m.pool));
  assert_int_equal(recap__fake_now().eager_copies, copies);
  assert_int_equal(device_free(), free_before);
  expect_stats(&st);
  expect_checker_passes();
  /* The bytes are gone, the addresses are the same: the caller writes the inputs again and the
   * graph computes on. */
  model_reload(&m);
  model_run(&m, 2);
  model_expect_reference(&m);
  teardown(&m);
}

/* A pool with no segment sleeps at once; one whose classic segments are all free gives them
 * back first and sleeps. */
static void empty_and_free_classic_pools_sleep(void **unused) {
  (void)unused;
  reset_expandable(CAPACITY);
  OK(recap_option_set("expandable_segments", "0"));
  recap_graph_t g;
  recap_stream_t s = recap__fake_stream_new();
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_capture_begin(g, NULL, s));
  void *p;
  OK(recap_malloc(&p, 4096, s));
  launch(s, 1);
  OK(recap_free(p));
  OK(recap_graph_capture_end(g));
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  assert_int_equal(pool_memory(pool).reserved_bytes, 2 * MiB);
  recap_memory_stats_t st = stats_now();
  OK(recap_pool_sleep(pool, RECAP_SLEEP_OFFLOAD));
  assert_int_equal(state_of_pool(pool), RECAP_POOL_ASLEEP_OFFLOADED);
  recap_pool_memory_t asleep = pool_memory(pool);
  assert_int_equal(asleep.reserved_bytes, 0);
  assert_int_equal(asleep.sleeping_bytes, 0);
  assert_int_equal(asleep.offloaded_bytes, 0);
  assert_int_equal(stats_now().num_device_free, st.num_device_free + 1);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  expect_checker_passes();
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_POOL_ASLEEP);
  OK(recap_pool_wake(pool));
  OK(recap_graph_replay(g, s));
  /* The default pool of a device recap has not used sleeps too, and wakes. */
  OK(recap_pool_sleep(default_pool, RECAP_SLEEP_DISCARD));
  assert_int_equal(state_of_pool(default_pool), RECAP_POOL_ASLEEP_DISCARDED);
  OK(recap_pool_wake(default_pool));
  assert_int_equal(state_of_pool(default_pool), RECAP_POOL_AWAKE);
  OK(recap_graph_destroy(g));
  recap__fake_stream_complete(s);
  teardown(NULL);
}

/* ---- refusals -------------------------------------------------------------------------------- */

static void refusals(void **unused) {
  (void)unused;
  reset_expandable(CAPACITY);
  model_t m;
  model_make(&m);
  model_run(&m, 1);
  recap_stream_t s2 = recap__fake_stream_new();

  /* Arguments and pools. */
  EXPECT_STATUS(recap_pool_sleep(m.pool, (recap_sleep_mode_t)2), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_pool_sleep: mode 2 is not a recap_sleep_mode_t");
  EXPECT_STATUS(recap_sleep((recap_sleep_mode_t)-3), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_sleep: mode -3");
  recap_pool_id_t unknown = recap_pool_handle();
  EXPECT_STATUS(recap_pool_sleep(unknown, RECAP_SLEEP_DISCARD), RECAP_ERROR_NOT_FOUND);
  EXPECT_MESSAGE("recap_pool_sleep: pool {0,");
  EXPECT_MESSAGE("does not exist on device 0");
  EXPECT_STATUS(recap_pool_wake(unknown), RECAP_ERROR_NOT_FOUND);
  EXPECT_MESSAGE("recap_pool_wake: pool");
  recap_pool_state_t st;
  EXPECT_STATUS(recap_pool_state(unknown, &st), RECAP_ERROR_NOT_FOUND);
  EXPECT_MESSAGE("recap_pool_state: pool");
  assert_string_equal(recap_pool_state_name(RECAP_POOL_AWAKE), "awake");
  assert_string_equal(recap_pool_state_name(RECAP_POOL_ASLEEP_DISCARDED), "asleep (discarded)");
  assert_string_equal(recap_pool_state_name(RECAP_POOL_ASLEEP_OFFLOADED), "asleep (offloaded)");
  assert_string_equal(recap_pool_state_name((recap_pool_state_t)9), "unknown");
  /* Waking an awake pool is nothing. */
  OK(recap_pool_wake(m.pool));

  /* During a capture, neither sleep nor wake. */
  recap_graph_t other;
  OK(recap_graph_create(&other, 0));
  OK(recap_graph_capture_begin(other, NULL, s2));
  launch(s2, 1);
  EXPECT_STATUS(recap_pool_sleep(m.pool, RECAP_SLEEP_OFFLOAD), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_pool_sleep: a capture is under way on device 0");
  EXPECT_STATUS(recap_sleep(RECAP_SLEEP_OFFLOAD), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_sleep: a capture is under way");
  assert_int_equal(state_of_pool(m.pool), RECAP_POOL_AWAKE);
  OK(recap_graph_capture_end(other));
  OK(recap_pool_sleep(m.pool, RECAP_SLEEP_OFFLOAD));
  OK(recap_graph_reset(other));
  OK(recap_graph_capture_begin(other, NULL, s2)); /* a capture into another pool */
  launch(s2, 1);
  EXPECT_STATUS(recap_pool_wake(m.pool), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_pool_wake: a capture is under way on device 0");
  OK(recap_graph_capture_end(other));

  /* Asleep: sleep again, capture into it, route to it. */
  EXPECT_STATUS(recap_pool_sleep(m.pool, RECAP_SLEEP_DISCARD), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("is asleep (offloaded) already");
  assert_int_equal(state_of_pool(m.pool), RECAP_POOL_ASLEEP_OFFLOADED);
  recap_graph_t into;
  OK(recap_graph_create(&into, 0));
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.pool = m.pool;
  EXPECT_STATUS(recap_graph_capture_begin(into, &opts, s2), RECAP_ERROR_POOL_ASLEEP);
  EXPECT_MESSAGE("recap_graph_capture_begin: pool {");
  EXPECT_MESSAGE("is asleep (offloaded)");
  EXPECT_MESSAGE("recap_pool_wake");
  assert_int_equal(capturing(s2), 0);
  assert_int_equal(state_of(into), RECAP_GRAPH_STATE_FRESH);
  assert_true(recap__fake_capture_begin(s2, RECAP__CAPTURE_MODE_GLOBAL));
  EXPECT_STATUS(recap_pool_route_begin(m.pool, s2), RECAP_ERROR_POOL_ASLEEP);
  EXPECT_MESSAGE("recap_pool_route_begin: pool {");
  assert_true(recap__fake_capture_end(s2));
  /* recap_empty_cache leaves it as it is. */
  size_t in_use = recap__fake_now().bytes_in_use[0];
  OK(recap_empty_cache());
  assert_int_equal(recap__fake_now().bytes_in_use[0], in_use);
  assert_int_equal(state_of_pool(m.pool), RECAP_POOL_ASLEEP_OFFLOADED);
  expect_checker_passes();
  OK(recap_pool_wake(m.pool));
  /* The graph that was refused captures fine once the pool is awake. */
  OK(recap_graph_capture_begin(into, &opts, s2));
  launch(s2, 1);
  OK(recap_graph_capture_end(into));

  /* The default pool asleep: its allocations, and every replay of the device. */
  void *p;
  OK(recap_malloc(&p, 4096, s2));
  OK(recap_pool_sleep(default_pool, RECAP_SLEEP_OFFLOAD));
  void *q = (void *)1;
  EXPECT_STATUS(recap_malloc(&q, 4096, s2), RECAP_ERROR_POOL_ASLEEP);
  EXPECT_MESSAGE("recap_malloc: pool {0,0} (the default pool) is asleep (offloaded)");
  assert_null(q);
  uint64_t launches = recap__fake_now().graph_launches;
  EXPECT_STATUS(recap_graph_replay(m.graph, m.stream), RECAP_ERROR_POOL_ASLEEP);
  EXPECT_MESSAGE("the default pool {0,0} of device 0 is asleep (offloaded)");
  EXPECT_MESSAGE("nothing was launched");
  assert_int_equal(recap__fake_now().graph_launches, launches);
  /* A free of its block is allowed. */
  OK(recap_free(p));
  expect_checker_passes();
  OK(recap_pool_wake(default_pool));
  model_run(&m, 1);
  model_expect_reference(&m);
  OK(recap_graph_destroy(other));
  OK(recap_graph_destroy(into));
  recap__fake_stream_complete(s2);
  recap__fake_stream_complete(m.stream);
  teardown(&m);
}

static void classic_segments_in_use_refuse(void **unused) {
  (void)unused;
  reset_expandable(CAPACITY);
  OK(recap_option_set("expandable_segments", "0"));
  model_t m;
  model_make(&m);
  recap_pool_memory_t before = pool_memory(m.pool);
  assert_int_equal(before.vmm_segments, 0);
  EXPECT_STATUS(recap_pool_sleep(m.pool, RECAP_SLEEP_OFFLOAD), RECAP_ERROR_NOT_SUPPORTED);
  EXPECT_MESSAGE("recap_pool_sleep: pool {");
  EXPECT_MESSAGE("keeps 2 segment(s)");
  EXPECT_MESSAGE("expandable_segments");
  assert_int_equal(state_of_pool(m.pool), RECAP_POOL_AWAKE);
  assert_int_equal(pool_memory(m.pool).reserved_bytes, before.reserved_bytes);
  model_run(&m, 1);
  model_expect_reference(&m);
  /* recap_sleep stops at it, and what it put to sleep before wakes again. */
  EXPECT_STATUS(recap_sleep(RECAP_SLEEP_DISCARD), RECAP_ERROR_NOT_SUPPORTED);
  assert_int_equal(state_of_pool(m.pool), RECAP_POOL_AWAKE);
  assert_int_equal(state_of_pool(default_pool), RECAP_POOL_AWAKE);
  expect_checker_passes();
  teardown(&m);
}

/* ---- graphed callables ------------------------------------------------------------------------ */

/* A graphed callable copies its inputs into static buffers of its pool before it replays: while
 * the pool sleeps, neither the copy nor the replay happens. */
static void graphed_callables_while_asleep(void **unused) {
  (void)unused;
  reset_expandable(CAPACITY);
  recap_stream_t s = recap__fake_stream_new();
  static float x[256], gy[256];
  static const int requires_grad[1] = {1};
  recap_buffer_t sample = {x, sizeof x}, grad = {gy, sizeof gy};
  recap_callable_desc_t desc = {.size = sizeof(recap_callable_desc_t),
                                .forward = plain_forward,
                                .backward = plain_backward,
                                .input_count = 1,
                                .sample_inputs = &sample,
                                .requires_grad = requires_grad,
                                .output_count = 1};
  recap_graphed_t h;
  OK(recap_graphed_create(&h, &desc, 1, NULL));
  recap_graph_t fw, bw;
  OK(recap_graphed_graphs(h, &fw, &bw));
  recap_pool_id_t pool;
  OK(recap_graph_pool(fw, &pool));
  const recap_buffer_t *out, *gin;
  OK(recap_graphed_forward(h, 1, &sample, s, &out));
  OK(recap_graphed_backward(h, &grad, s, &gin));
  OK(recap_pool_sleep(pool, RECAP_SLEEP_OFFLOAD));
  uint64_t copies = recap__fake_now().eager_copies;
  uint64_t launches = recap__fake_now().graph_launches;
  EXPECT_STATUS(recap_graphed_forward(h, 1, &sample, s, &out), RECAP_ERROR_POOL_ASLEEP);
  EXPECT_MESSAGE("recap_graphed_forward: recap_graph_replay: the graph's pool");
  EXPECT_MESSAGE("nothing was launched");
  EXPECT_STATUS(recap_graphed_backward(h, &grad, s, &gin), RECAP_ERROR_POOL_ASLEEP);
  EXPECT_MESSAGE("recap_graphed_backward: recap_graph_replay: the graph's pool");
  assert_int_equal(recap__fake_now().eager_copies, copies);
  assert_int_equal(recap__fake_now().graph_launches, launches);
  expect_checker_passes();
  OK(recap_pool_wake(pool));
  OK(recap_graphed_forward(h, 1, &sample, s, &out));
  OK(recap_graphed_backward(h, &grad, s, &gin));
  assert_true(recap__fake_now().eager_copies > copies);
  assert_int_equal(recap__fake_now().graph_launches, launches + 2);
  OK(recap_graphed_destroy(h));
  recap__fake_stream_complete(s);
  teardown(NULL);
}

/* ---- frees while asleep ---------------------------------------------------------------------- */

static void free_while_asleep(void **unused) {
  (void)unused;
  reset_expandable(CAPACITY);
  model_t m;
  model_make(&m);
  model_run(&m, 2);
  contents_t saved = contents_save(&m);
  recap_memory_stats_t st = stats_now();
  OK(recap_pool_sleep(m.pool, RECAP_SLEEP_OFFLOAD));
  /* A block used on another stream too waits for its event: still asleep, no device memory
   * needed. */
  recap_stream_t other = recap__fake_stream_new();
  OK(recap_record_stream(m.big, other));
  OK(recap_free(m.state2));
  OK(recap_free(m.big));
  void *state2 = m.state2;
  m.state2 = m.big = NULL;
  expect_checker_passes();
  recap_pool_memory_t asleep = pool_memory(m.pool);
  assert_int_equal(asleep.allocated_bytes, WORDS * 4);
  assert_int_equal(asleep.offloaded_bytes, model_in_use); /* the copy stays whole */
  assert_int_equal(stats_now().allocated_bytes[0].current,
                   st.allocated_bytes[0].current - (WORDS + BIG_WORDS) * 4);
  uint64_t copies = recap__fake_now().eager_copies;
  OK(recap_pool_wake(m.pool));
  /* Only what is still in use comes back: state, and big, which waits on its event. */
  assert_int_equal(recap__fake_now().eager_copies - copies, 2);
  assert_memory_equal(m.state, saved.state, WORDS * 4);
  assert_memory_not_equal(state2, saved.state2, WORDS * 4);
  expect_checker_passes();
  /* Once its event completes, big is free again and the pool holds only state. */
  recap__fake_stream_complete(other);
  OK(recap_empty_cache());
  assert_int_equal(pool_memory(m.pool).allocated_bytes, WORDS * 4);
  expect_checker_passes();
  contents_free(&saved);
  teardown(&m);
}

/* A pool whose graph goes while it sleeps stays (asleep) until it wakes; then the cache gives
 * it back. recap_empty_cache leaves it alone meanwhile, even with every block free and a chunk
 * its sleep could not release. */
static void a_pool_outlives_its_graph_while_asleep(void **unused) {
  (void)unused;
  reset_expandable(CAPACITY);
  model_t m;
  model_make(&m);
  recap_pool_id_t pool = m.pool;
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_RELEASE, 1);
  EXPECT_STATUS(recap_pool_sleep(pool, RECAP_SLEEP_OFFLOAD), RECAP_ERROR_CUDA);
  assert_int_equal(recap__fake_now().vmm_chunks_live, 1);
  OK(recap_graph_destroy(m.graph));
  m.graph = NULL;
  OK(recap_free(m.state));
  OK(recap_free(m.state2));
  OK(recap_free(m.big));
  m.state = m.state2 = m.big = NULL;
  OK(recap_empty_cache());
  assert_int_equal(state_of_pool(pool), RECAP_POOL_ASLEEP_OFFLOADED);
  assert_int_equal(recap__fake_now().vmm_chunks_live, 1);
  recap_pool_memory_t asleep = pool_memory(pool);
  assert_int_equal(asleep.references, 0);
  assert_int_equal(asleep.allocated_bytes, 0);
  assert_true(asleep.sleeping_bytes > 0);
  expect_checker_passes();
  uint64_t copies = recap__fake_now().eager_copies;
  OK(recap_wake());
  assert_int_equal(recap__fake_now().eager_copies, copies); /* nothing in use to copy back */
  OK(recap_empty_cache());
  recap_pool_state_t st;
  EXPECT_STATUS(recap_pool_state(pool, &st), RECAP_ERROR_NOT_FOUND);
  recap__fake_stream_complete(m.stream);
  teardown(&m);
}

/* ---- the whole allocator --------------------------------------------------------------------- */

static void sleep_and_wake_everything(void **unused) {
  (void)unused;
  reset_expandable(CAPACITY);
  model_t m;
  model_make(&m);
  model_run(&m, 1);
  recap_stream_t s = recap__fake_stream_new();
  uint32_t *plain;
  OK(recap_malloc((void **)&plain, 1 * MiB, s));
  for (uint32_t i = 0; i < MiB / 4; i++) plain[i] = i * 7u;
  contents_t saved = contents_save(&m);
  recap_memory_stats_t st = stats_now();
  size_t free_before = device_free();
  int64_t reserved = st.reserved_bytes[0].current;

  /* A fault at the model's pool (after the default pool slept): the default pool wakes again. */
  uint64_t unmaps = recap__fake_now().calls[RECAP__FAKE_FAULT_VMM_UNMAP];
  OK(recap_pool_sleep(default_pool, RECAP_SLEEP_OFFLOAD));
  uint64_t default_chunks = recap__fake_now().calls[RECAP__FAKE_FAULT_VMM_UNMAP] - unmaps;
  OK(recap_pool_wake(default_pool));
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_UNMAP, default_chunks + 1);
  EXPECT_STATUS(recap_sleep(RECAP_SLEEP_OFFLOAD), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("recap_sleep: unmapping the chunk at");
  EXPECT_MESSAGE("fault injected");
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_UNMAP, 0);
  assert_int_equal(state_of_pool(default_pool), RECAP_POOL_AWAKE);
  assert_int_equal(state_of_pool(m.pool), RECAP_POOL_AWAKE);
  assert_int_equal(device_free(), free_before);
  assert_int_equal(recap__fake_now().pinned_live, 0);
  expect_stats(&st);
  expect_checker_passes();

  OK(recap_sleep(RECAP_SLEEP_OFFLOAD));
  assert_int_equal(state_of_pool(default_pool), RECAP_POOL_ASLEEP_OFFLOADED);
  assert_int_equal(state_of_pool(m.pool), RECAP_POOL_ASLEEP_OFFLOADED);
  assert_int_equal(device_free() - free_before, (size_t)reserved);
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 0);
  assert_int_equal(recap__fake_now().pinned_bytes, (size_t)model_in_use + MiB);
  expect_stats(&st);
  expect_checker_passes();
  /* Asleep pools stay as they are. */
  OK(recap_sleep(RECAP_SLEEP_DISCARD));
  assert_int_equal(state_of_pool(m.pool), RECAP_POOL_ASLEEP_OFFLOADED);

  OK(recap_wake());
  assert_int_equal(state_of_pool(default_pool), RECAP_POOL_AWAKE);
  assert_int_equal(state_of_pool(m.pool), RECAP_POOL_AWAKE);
  assert_int_equal(device_free(), free_before);
  assert_int_equal(recap__fake_now().pinned_live, 0);
  contents_expect(&saved, &m);
  for (uint32_t i = 0; i < MiB / 4; i++) assert_int_equal(plain[i], i * 7u);
  expect_stats(&st);
  expect_checker_passes();
  model_run(&m, 1);
  model_expect_reference(&m);
  OK(recap_wake()); /* nothing asleep: nothing to do */
  OK(recap_free(plain));
  contents_free(&saved);
  teardown(&m);
}

/* recap_sleep and recap_wake make each device current in turn and the caller's again. */
static void sleep_and_wake_two_devices(void **unused) {
  (void)unused;
  recap__fake_config_t cfg = {.device_count = 2, .memory_per_device = CAPACITY};
  recap_test_reset(&cfg);
  recap__side_streams_forget();
  recap_clear_last_error();
  OK(recap_option_set("expandable_segments", "1"));
  const recap__device_ops_t *dev = recap__device();
  uint32_t *p[2];
  for (int d = 1; d >= 0; d--) {
    OK(dev->set_device(d));
    OK(recap_malloc((void **)&p[d], MiB, recap__fake_stream_new()));
    for (uint32_t i = 0; i < MiB / 4; i++) p[d][i] = i * 3u + (uint32_t)d;
  }
  /* The caller's device is 0; device 1 was made current last before it. */
  size_t in_use[2] = {recap__fake_now().bytes_in_use[0], recap__fake_now().bytes_in_use[1]};
  assert_true(in_use[0] > 0 && in_use[1] > 0);
  OK(recap_sleep(RECAP_SLEEP_OFFLOAD));
  int current = -1;
  OK(dev->get_device(&current));
  assert_int_equal(current, 0);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  assert_int_equal(recap__fake_now().bytes_in_use[1], 0);
  for (int d = 0; d < 2; d++) {
    OK(dev->set_device(d));
    assert_int_equal(state_of_pool(default_pool), RECAP_POOL_ASLEEP_OFFLOADED);
    assert_int_equal(pool_memory(default_pool).offloaded_bytes, MiB);
  }
  OK(dev->set_device(1));
  OK(recap_wake());
  OK(dev->get_device(&current));
  assert_int_equal(current, 1);
  assert_int_equal(recap__fake_now().bytes_in_use[0], in_use[0]);
  assert_int_equal(recap__fake_now().bytes_in_use[1], in_use[1]);
  for (int d = 0; d < 2; d++) {
    OK(dev->set_device(d));
    assert_int_equal(state_of_pool(default_pool), RECAP_POOL_AWAKE);
    for (uint32_t i = 0; i < MiB / 4; i++) assert_int_equal(p[d][i], i * 3u + (uint32_t)d);
    OK(recap_free(p[d]));
  }
  expect_checker_passes();
  OK(recap_empty_cache());
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  assert_int_equal(recap__fake_now().bytes_in_use[1], 0);
}

/* ---- faults ---------------------------------------------------------------------------------- */

static const recap__fake_fault_t vmm_kinds[] = {
    RECAP__FAKE_FAULT_VMM_GRANULARITY,   RECAP__FAKE_FAULT_VMM_RESERVE,
    RECAP__FAKE_FAULT_VMM_RELEASE_RANGE, RECAP__FAKE_FAULT_VMM_CREATE,
    RECAP__FAKE_FAULT_VMM_RELEASE,       RECAP__FAKE_FAULT_VMM_MAP,
    RECAP__FAKE_FAULT_VMM_UNMAP,         RECAP__FAKE_FAULT_VMM_SET_ACCESS,
    RECAP__FAKE_FAULT_HOST_ALLOC_PINNED, RECAP__FAKE_FAULT_HOST_FREE_PINNED};
enum { KINDS = sizeof vmm_kinds / sizeof vmm_kinds[0] };

/* What must hold after any failure or success: the pool is fully awake (every byte mapped, the
 * contents intact, nothing pinned) or fully asleep (nothing mapped but chunks a release kept),
 * the checker agrees, and the statistics did not move. */
static void expect_whole(const model_t *m, const contents_t *saved, const recap_memory_stats_t *st,
                         size_t free_awake, int64_t reserved) {
  expect_checker_passes();
  expect_stats(st);
  recap_pool_memory_t pm = pool_memory(m->pool);
  assert_int_equal(pm.reserved_bytes, reserved);
  if (pm.state == RECAP_POOL_AWAKE) {
    assert_int_equal(pm.sleeping_bytes, 0);
    assert_int_equal(pm.offloaded_bytes, 0);
    assert_int_equal(device_free(), free_awake);
    assert_int_equal(recap__fake_now().vmm_bytes_mapped, (size_t)reserved);
    assert_int_equal(recap__fake_now().pinned_live, 0);
    contents_expect(saved, m);
  } else {
    assert_int_equal(pm.sleeping_bytes, reserved);
    assert_int_equal(recap__fake_now().vmm_bytes_mapped, 0);
  }
}

/* A fault at the k-th call of each kind during sleep, for k = 1, 2, ... until a sleep no longer
 * reaches it; then the same during wake. */
static void faults_at_each_call(void **unused) {
  (void)unused;
  for (int mode = RECAP_SLEEP_DISCARD; mode <= RECAP_SLEEP_OFFLOAD; mode++) {
    reset_expandable(CAPACITY);
    model_t m;
    model_make(&m);
    model_run(&m, 1);
    contents_t saved = contents_save(&m);
    recap_memory_stats_t st = stats_now();
    size_t free_awake = device_free();
    int64_t reserved = pool_memory(m.pool).reserved_bytes;
    recap_pool_state_t asleep_state =
        mode == RECAP_SLEEP_OFFLOAD ? RECAP_POOL_ASLEEP_OFFLOADED : RECAP_POOL_ASLEEP_DISCARDED;
    int faults_hit = 0;
    /* Sleep. */
    for (int i = 0; i < KINDS; i++) {
      recap__fake_fault_t kind = vmm_kinds[i];
      for (uint64_t k = 1;; k++) {
        uint64_t calls = recap__fake_now().calls[kind];
        recap__fake_fail_nth(kind, k);
        recap_status_t s = recap_pool_sleep(m.pool, (recap_sleep_mode_t)mode);
        recap__fake_fail_nth(kind, 0);
        bool reached = recap__fake_now().calls[kind] - calls >= k;
        if (!reached) {
          OK(s);
          assert_int_equal(state_of_pool(m.pool), asleep_state);
          expect_whole(&m, &saved, &st, free_awake, reserved);
          OK(recap_pool_wake(m.pool));
          if (mode == RECAP_SLEEP_DISCARD) model_reload(&m);
          break;
        }
        faults_hit++;
        assert_int_not_equal(s, RECAP_SUCCESS);
        EXPECT_MESSAGE("recap_pool_sleep:");
        if (state_of_pool(m.pool) == RECAP_POOL_AWAKE) {
          expect_whole(&m, &saved, &st, free_awake, reserved);
        } else {
          /* Only a release fails after the point of no return: the pool sleeps, and the chunk
           * it kept goes at the wake. */
          assert_int_equal(kind, RECAP__FAKE_FAULT_VMM_RELEASE);
          EXPECT_MESSAGE("is asleep, but 1 of its physical chunks");
          assert_int_equal(state_of_pool(m.pool), asleep_state);
          expect_whole(&m, &saved, &st, free_awake, reserved);
          assert_true(device_free() > free_awake);
          OK(recap_pool_wake(m.pool));
          if (mode == RECAP_SLEEP_DISCARD) model_reload(&m);
          expect_whole(&m, &saved, &st, free_awake, reserved);
        }
      }
    }
    /* Wake. */
    for (int i = 0; i < KINDS; i++) {
      recap__fake_fault_t kind = vmm_kinds[i];
      for (uint64_t k = 1;; k++) {
        OK(recap_pool_sleep(m.pool, (recap_sleep_mode_t)mode));
        void *host = offload_host(m.pool);
        size_t free_asleep = device_free();
        uint64_t calls = recap__fake_now().calls[kind];
        recap_test_log_t log;
        recap_test_log_capture(&log);
        recap__fake_fail_nth(kind, k);
        recap_status_t s = recap_pool_wake(m.pool);
        recap__fake_fail_nth(kind, 0);
        recap_test_log_stop();
        bool reached = recap__fake_now().calls[kind] - calls >= k;
        if (s == RECAP_SUCCESS && reached) {
          /* The pinned copy's free, after the restore: the pool is awake, the buffer kept
           * for a later free (a_wake_whose_pinned_free_fails_stays_awake), which this is. */
          assert_int_equal(kind, RECAP__FAKE_FAULT_HOST_FREE_PINNED);
          assert_int_equal(mode, RECAP_SLEEP_OFFLOAD);
          faults_hit++;
          assert_int_equal(log.warnings, 1);
          assert_non_null(strstr(log.last_warning, "is awake, but its pinned host copy"));
          assert_int_equal(recap__fake_now().pinned_live, 1);
          assert_true(recap__pinned_is_kept(host));
          recap__alloc_lock();
          OK(recap__pinned_release_all("the test"));
          recap__alloc_unlock();
          expect_whole(&m, &saved, &st, free_awake, reserved);
          continue;
        }
        if (s == RECAP_SUCCESS) {
          assert_false(reached);
          if (mode == RECAP_SLEEP_DISCARD) model_reload(&m);
          expect_whole(&m, &saved, &st, free_awake, reserved);
          break;
        }
        assert_true(reached);
        faults_hit++;
        EXPECT_MESSAGE("recap_pool_wake:");
        assert_int_equal(state_of_pool(m.pool), asleep_state);
        assert_int_equal(device_free(), free_asleep);
        assert_int_equal(pool_memory(m.pool).offloaded_bytes,
                         mode == RECAP_SLEEP_OFFLOAD ? model_in_use : 0);
        expect_whole(&m, &saved, &st, free_awake, reserved);
        OK(recap_pool_wake(m.pool));
        if (mode == RECAP_SLEEP_DISCARD) model_reload(&m);
        expect_whole(&m, &saved, &st, free_awake, reserved);
      }
    }
    /* Unmaps and releases of two segments' chunks, creates, maps and accesses of the wake's,
     * and the pinned buffer's allocation and free. */
    assert_true(faults_hit >= (mode == RECAP_SLEEP_OFFLOAD ? 12 : 10));
    model_run(&m, 1);
    model_reload(&m);
    contents_free(&saved);
    teardown(&m);
  }
}

/* A chunk a sleep could not release is released by the wake; should that fail too, the pool
 * stays asleep and a later wake releases it. */
static void a_kept_chunk_is_released_at_the_wake(void **unused) {
  (void)unused;
  reset_expandable(CAPACITY);
  model_t m;
  model_make(&m);
  contents_t saved = contents_save(&m);
  size_t free_awake = device_free();
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_RELEASE, 1);
  EXPECT_STATUS(recap_pool_sleep(m.pool, RECAP_SLEEP_OFFLOAD), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("is asleep, but 1 of its physical chunks");
  EXPECT_MESSAGE("recap_pool_wake releases them");
  assert_int_equal(state_of_pool(m.pool), RECAP_POOL_ASLEEP_OFFLOADED);
  int64_t live = recap__fake_now().vmm_chunks_live;
  assert_int_equal(live, 1);
  expect_checker_passes();
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_RELEASE, 1);
  EXPECT_STATUS(recap_pool_wake(m.pool), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("could not be released now either");
  assert_int_equal(state_of_pool(m.pool), RECAP_POOL_ASLEEP_OFFLOADED);
  assert_int_equal(recap__fake_now().vmm_chunks_live, 1);
  expect_checker_passes();
  OK(recap_pool_wake(m.pool));
  assert_int_equal(device_free(), free_awake);
  contents_expect(&saved, &m);
  expect_checker_passes();
  contents_free(&saved);
  teardown(&m);
}

/* A sleep whose unmap fails and whose roll-back cannot map everything back goes forward: the
 * pool is fully asleep (nothing mapped, every handle released), the error says so, and the
 * next wake restores it (OFFLOAD: the copy was taken before the unmaps). A third fault, a
 * release of that forward pass, leaves a handle for the wake, which releases it first. */
static void a_sleep_whose_roll_back_fails_goes_forward(void **unused) {
  (void)unused;
  for (int third = 0; third <= 1; third++) {
    for (int mode = RECAP_SLEEP_DISCARD; mode <= RECAP_SLEEP_OFFLOAD; mode++) {
      reset_expandable(CAPACITY);
      model_t m;
      model_make(&m);
      model_run(&m, 1);
      contents_t saved = contents_save(&m);
      recap_memory_stats_t st = stats_now();
      size_t free_awake = device_free();
      int64_t reserved = pool_memory(m.pool).reserved_bytes;
      int mapped;
      assert_true(listed_chunks(m.pool, &mapped) >= 2);
      recap_pool_state_t asleep_state =
          mode == RECAP_SLEEP_OFFLOAD ? RECAP_POOL_ASLEEP_OFFLOADED : RECAP_POOL_ASLEEP_DISCARDED;
      recap_test_log_t log;
      recap_test_log_capture(&log);
      /* The second chunk's unmap fails, then the map back of the first. */
      recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_UNMAP, 2);
      recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_MAP, 1);
      if (third) recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_RELEASE, 1);
      recap_status_t s = recap_pool_sleep(m.pool, (recap_sleep_mode_t)mode);
      recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_UNMAP, 0);
      recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_MAP, 0);
      recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_RELEASE, 0);
      recap_test_log_stop();
      EXPECT_STATUS(s, RECAP_ERROR_CUDA);
      EXPECT_MESSAGE("recap_pool_sleep: unmapping the chunk at");
      EXPECT_MESSAGE("fault injected by the fake device into VMM unmap call");
      EXPECT_MESSAGE(
          "and the roll-back failed too: the chunks unmapped before it could not all "
          "be mapped back");
      EXPECT_MESSAGE(mode == RECAP_SLEEP_OFFLOAD
                         ? "So the pool is asleep instead (its blocks in use were copied to "
                           "pinned host memory first: the wake restores them); wake it "
                           "(recap_pool_wake) to use it"
                         : "So the pool is asleep instead (RECAP_SLEEP_DISCARD: its blocks' "
                           "contents are dropped); wake it (recap_pool_wake) to use it");
      assert_int_equal(log.errors, 1 + third); /* the map back, and the release */
      assert_int_equal(state_of_pool(m.pool), asleep_state);
      assert_int_equal(recap__fake_now().vmm_bytes_mapped, 0);
      assert_int_equal(recap__fake_now().vmm_chunks_live, third);
      assert_int_equal(listed_chunks(m.pool, &mapped), third);
      assert_int_equal(mapped, 0);
      if (!third) assert_int_equal(device_free(), free_awake + (size_t)reserved);
      recap_pool_memory_t pm = pool_memory(m.pool);
      assert_int_equal(pm.sleeping_bytes, reserved);
      assert_int_equal(pm.offloaded_bytes, mode == RECAP_SLEEP_OFFLOAD ? model_in_use : 0);
      expect_whole(&m, &saved, &st, free_awake, reserved);
      EXPECT_STATUS(recap_graph_replay(m.graph, m.stream), RECAP_ERROR_POOL_ASLEEP);
      /* The next wake works. */
      OK(recap_pool_wake(m.pool));
      assert_int_equal(state_of_pool(m.pool), RECAP_POOL_AWAKE);
      if (mode == RECAP_SLEEP_DISCARD) model_reload(&m);
      expect_whole(&m, &saved, &st, free_awake, reserved);
      model_run(&m, 1);
      model_expect_reference(&m);
      contents_free(&saved);
      teardown(&m);
    }
  }
}

/* A wake whose map of a later chunk fails and whose undo cannot unmap an earlier chunk keeps
 * that chunk listed, mapped: the pool stays asleep, the checker passes, and the next wake
 * unmaps it first and succeeds. The same for a chunk whose access and then unmap fail. */
static void a_wake_whose_undo_cannot_unmap_retries(void **unused) {
  (void)unused;
  for (int access = 0; access <= 1; access++) {
    for (int mode = RECAP_SLEEP_DISCARD; mode <= RECAP_SLEEP_OFFLOAD; mode++) {
      reset_expandable(CAPACITY);
      model_t m;
      model_make(&m);
      model_run(&m, 1);
      contents_t saved = contents_save(&m);
      recap_memory_stats_t st = stats_now();
      size_t free_awake = device_free();
      int64_t reserved = pool_memory(m.pool).reserved_bytes;
      recap_pool_state_t asleep_state =
          mode == RECAP_SLEEP_OFFLOAD ? RECAP_POOL_ASLEEP_OFFLOADED : RECAP_POOL_ASLEEP_DISCARDED;
      OK(recap_pool_sleep(m.pool, (recap_sleep_mode_t)mode));
      size_t free_asleep = device_free();
      recap_test_log_t log;
      recap_test_log_capture(&log);
      if (access) {
        /* The first chunk's access fails, then its unmap: wake_undo unmaps it (the second
         * unmap call) and nothing stays. */
        recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_SET_ACCESS, 1);
      } else {
        /* The second chunk's map fails, then wake_undo's unmap of the first. */
        recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_MAP, 2);
      }
      recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_UNMAP, 1);
      recap_status_t s = recap_pool_wake(m.pool);
      recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_SET_ACCESS, 0);
      recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_MAP, 0);
      recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_UNMAP, 0);
      recap_test_log_stop();
      EXPECT_STATUS(s, RECAP_ERROR_CUDA);
      EXPECT_MESSAGE("recap_pool_wake: mapping a chunk of");
      assert_int_equal(state_of_pool(m.pool), asleep_state);
      assert_int_equal(pool_memory(m.pool).offloaded_bytes,
                       mode == RECAP_SLEEP_OFFLOAD ? model_in_use : 0);
      int mapped;
      if (access) {
        EXPECT_MESSAGE("Nothing of it is mapped; the pool stays asleep");
        assert_int_equal(log.errors, 0);
        assert_int_equal(listed_chunks(m.pool, &mapped), 0);
        assert_int_equal(recap__fake_now().vmm_bytes_mapped, 0);
        assert_int_equal(device_free(), free_asleep);
      } else {
        EXPECT_MESSAGE("The pool stays asleep; 1 chunk(s) of this wake (");
        EXPECT_MESSAGE(
            "could not be given back (the log says why), and the next wake gives "
            "them back first");
        assert_int_equal(log.errors, 1);
        assert_non_null(strstr(log.last, "it stays mapped until the next wake gives it back"));
        assert_int_equal(listed_chunks(m.pool, &mapped), 1);
        assert_int_equal(mapped, 1);
        assert_int_equal(recap__fake_now().vmm_chunks_live, 1);
        assert_true(recap__fake_now().vmm_bytes_mapped > 0);
      }
      expect_checker_passes();
      expect_stats(&st);
      /* The next wake, faults gone, gives back what was left and restores the pool. */
      OK(recap_pool_wake(m.pool));
      assert_int_equal(state_of_pool(m.pool), RECAP_POOL_AWAKE);
      if (mode == RECAP_SLEEP_DISCARD) model_reload(&m);
      expect_whole(&m, &saved, &st, free_awake, reserved);
      model_run(&m, 1);
      model_expect_reference(&m);
      contents_free(&saved);
      teardown(&m);
    }
  }
}

/* A wake whose restore succeeded but whose pinned copy cannot be freed leaves the pool awake
 * with its contents; a warning says the buffer stays kept, and recap_empty_cache frees it. */
static void a_wake_whose_pinned_free_fails_stays_awake(void **unused) {
  (void)unused;
  reset_expandable(CAPACITY);
  model_t m;
  model_make(&m);
  model_run(&m, 1);
  contents_t saved = contents_save(&m);
  recap_memory_stats_t st = stats_now();
  size_t free_awake = device_free();
  int64_t reserved = pool_memory(m.pool).reserved_bytes;
  OK(recap_pool_sleep(m.pool, RECAP_SLEEP_OFFLOAD));
  void *host = offload_host(m.pool);
  assert_non_null(host);
  recap_test_log_t log;
  recap_test_log_capture(&log);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_HOST_FREE_PINNED, 1);
  recap_status_t s = recap_pool_wake(m.pool);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_HOST_FREE_PINNED, 0);
  recap_test_log_stop();
  OK(s);
  assert_int_equal(state_of_pool(m.pool), RECAP_POOL_AWAKE);
  assert_int_equal(log.warnings, 1);
  char needle[200];
  snprintf(needle, sizeof needle,
           "recap_pool_wake: pool {%llu,%llu} is awake, but its pinned host copy (%lld bytes) "
           "could not be freed: freeing %lld bytes of pinned host memory failed (",
           (unsigned long long)m.pool.a, (unsigned long long)m.pool.b, (long long)model_in_use,
           (long long)model_in_use);
  assert_non_null(strstr(log.last_warning, needle));
  assert_non_null(
      strstr(log.last_warning, "the buffer stays kept, and the next recap_empty_cache frees it"));
  contents_expect(&saved, &m);
  assert_int_equal(recap__fake_now().pinned_live, 1);
  assert_true(recap__pinned_is_kept(host));
  /* recap_empty_cache frees it (its release of kept buffers, without the cached memory the
   * checks below count): no pinned memory is lost. */
  recap__alloc_lock();
  OK(recap__pinned_release_all("recap_empty_cache"));
  recap__alloc_unlock();
  assert_int_equal(recap__fake_now().pinned_live, 0);
  expect_whole(&m, &saved, &st, free_awake, reserved);
  model_run(&m, 1);
  model_expect_reference(&m);
  contents_free(&saved);
  teardown(&m);
}

/* ---- out of memory at the wake --------------------------------------------------------------- */

static void wake_out_of_memory(void **unused) {
  (void)unused;
  reset_expandable(64 * MiB);
  model_t m;
  model_make(&m);
  model_run(&m, 1);
  contents_t saved = contents_save(&m);
  int64_t reserved = pool_memory(m.pool).reserved_bytes;
  OK(recap_pool_sleep(m.pool, RECAP_SLEEP_OFFLOAD));
  /* Another user takes the memory the pool gave back, and leaves less than the pool needs. */
  size_t free_asleep = device_free();
  assert_true(free_asleep >= (size_t)reserved);
  void *other = NULL;
  size_t taken = free_asleep - (size_t)reserved + 2 * MiB;
  OK(recap__device()->raw_malloc(&other, taken));
  memset(other, 0xab, taken); /* it is usable memory */
  size_t free_now = device_free();
  EXPECT_STATUS(recap_pool_wake(m.pool), RECAP_ERROR_OUT_OF_MEMORY);
  char needle[160];
  snprintf(needle, sizeof needle, "recap_pool_wake: out of device memory on device 0: waking pool");
  EXPECT_MESSAGE(needle);
  snprintf(needle, sizeof needle, "needs %lld bytes", (long long)reserved);
  EXPECT_MESSAGE(needle);
  snprintf(needle, sizeof needle, "the device has %zu bytes free of %zu", free_now,
           (size_t)64 * MiB);
  EXPECT_MESSAGE(needle);
  EXPECT_MESSAGE("the pool stays asleep");
  assert_int_equal(state_of_pool(m.pool), RECAP_POOL_ASLEEP_OFFLOADED);
  assert_int_equal(device_free(), free_now);
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 0);
  expect_checker_passes();
  OK(recap__device()->raw_free(other));
  OK(recap_pool_wake(m.pool));
  contents_expect(&saved, &m);
  model_run(&m, 1);
  model_expect_reference(&m);
  expect_checker_passes();
  contents_free(&saved);
  teardown(&m);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(offload_round_trip),
      cmocka_unit_test(discard_round_trip),
      cmocka_unit_test(empty_and_free_classic_pools_sleep),
      cmocka_unit_test(refusals),
      cmocka_unit_test(classic_segments_in_use_refuse),
      cmocka_unit_test(graphed_callables_while_asleep),
      cmocka_unit_test(free_while_asleep),
      cmocka_unit_test(a_pool_outlives_its_graph_while_asleep),
      cmocka_unit_test(sleep_and_wake_everything),
      cmocka_unit_test(sleep_and_wake_two_devices),
      cmocka_unit_test(faults_at_each_call),
      cmocka_unit_test(a_kept_chunk_is_released_at_the_wake),
      cmocka_unit_test(a_sleep_whose_roll_back_fails_goes_forward),
      cmocka_unit_test(a_wake_whose_undo_cannot_unmap_retries),
      cmocka_unit_test(a_wake_whose_pinned_free_fails_stays_awake),
      cmocka_unit_test(wake_out_of_memory),
  };
  return RECAP_TEST_RUN(argc, argv, tests);
}
