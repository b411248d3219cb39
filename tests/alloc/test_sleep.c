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
 *
 * The faults and the wake that finds the device full are in sleep_faults.c, a part of this
 * program; sleep_util.h holds what they share.
 */
#include "sleep_util.h"
#include "capture_util.h"

/* ---- round trips ----------------------------------------------------------------------------- */

static void offload_round_trip(void **unused) {
  (void)unused;
  model_t m;
  model_started(&m, 3);
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
  model_goes(&m, &saved);
}

static void discard_round_trip(void **unused) {
  (void)unused;
  model_t m;
  model_started(&m, 2);
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
  reset_classic();
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
  stream_done_teardown(s);
}

/* ---- refusals -------------------------------------------------------------------------------- */

static void refusals(void **unused) {
  (void)unused;
  model_t m;
  model_started(&m, 1);
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
  recap_graph_t other = graph_capturing(s2, NULL);
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
  reset_classic();
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
  recap_callable_desc_t desc =
      one_input_callable(plain_forward, plain_backward, &sample, requires_grad);
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
  stream_done_teardown(s);
}

/* ---- frees while asleep ---------------------------------------------------------------------- */

static void free_while_asleep(void **unused) {
  (void)unused;
  model_t m;
  model_started(&m, 2);
  contents_t saved = contents_save(&m);
  recap_memory_stats_t st = stats_now();
  OK(recap_pool_sleep(m.pool, RECAP_SLEEP_OFFLOAD));
  /* A block used on another stream too waits for its event: still asleep, no device memory
   * needed. */
  recap_stream_t other = recap__fake_stream_new();
  OK(recap_record_stream(m.big, other));
  FREE_ALL(m.state2, m.big);
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
  model_goes(&m, &saved);
}

/* A pool whose graph goes while it sleeps stays (asleep) until it wakes; then the cache gives
 * it back. recap_empty_cache leaves it alone meanwhile, even with every block free and a chunk
 * its sleep could not release. */
static void a_pool_outlives_its_graph_while_asleep(void **unused) {
  (void)unused;
  model_t m;
  model_started(&m, 0);
  recap_pool_id_t pool = m.pool;
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_RELEASE, 1);
  EXPECT_STATUS(recap_pool_sleep(pool, RECAP_SLEEP_OFFLOAD), RECAP_ERROR_CUDA);
  assert_int_equal(recap__fake_now().vmm_chunks_live, 1);
  OK(recap_graph_destroy(m.graph));
  m.graph = NULL;
  FREE_ALL(m.state, m.state2, m.big);
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
  model_t m;
  model_started(&m, 1);
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
  model_goes(&m, &saved);
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

extern const recap_test_part_t sleep_fault_tests;

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
  };
  const recap_test_part_t parts[] = {RECAP_TEST_PART(tests), sleep_fault_tests};
  return RECAP_TEST_RUN_PARTS(argc, argv, parts);
}
