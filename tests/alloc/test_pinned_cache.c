/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_pinned_cache.c — the pinned host buffers kept between OFFLOAD sleeps (the option
 * offload_keep_pinned; docs/sleep.md, "The cost of OFFLOAD") on the CPU fake device: a wake
 * keeps its buffer and the next sleep of any pool reuses it without pinning (the fake's
 * host_alloc_pinned and host_free_pinned calls counted exactly), the smallest kept buffer that
 * fits is taken, a sleep that needs more frees the kept ones and pins anew, recap_empty_cache
 * frees them, the option back at 0 frees them at the next sleep, wake or recap_empty_cache (and
 * not before), the snapshot and the memory page show them, a wake without host memory to list
 * its buffer frees it, and a fault at every device call of sleep and wake leaves each pool whole
 * with every pinned buffer accounted for. recap_pinned_reserve: a buffer pinned ahead serves the
 * first sleep (nothing pinned then), stays through the option at 0 and through sleeps that pin
 * anew until its sleep takes it, one per call for recap_sleep of several pools, freed by
 * recap_empty_cache; refused during a capture, and a host that will not pin or has no memory
 * for the list leaves nothing pinned.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "alloc/alloc_lock.h"
#include "alloc/pinned_cache.h"
#include "graph_util.h"
#include "host_faults.h"
#include "capture_util.h"

enum { CAPACITY = 256 << 20 };

static void setup(void) {
  reset_expandable(CAPACITY);
  OK(recap_option_set("offload_keep_pinned", "1"));
}

static uint64_t pinned_allocs(void) {
  return recap__fake_now().calls[RECAP__FAKE_FAULT_HOST_ALLOC_PINNED];
}
static uint64_t pinned_frees(void) {
  return recap__fake_now().calls[RECAP__FAKE_FAULT_HOST_FREE_PINNED];
}

static void expect_checker_passes(void) {
  recap_status_t s = recap_memory_check();
  if (s != RECAP_SUCCESS) fail_msg("memory checker: %s", recap_last_error());
}

/* A pool holding one block of `bytes` (a multiple of 2 MiB, so it is its own rounded size),
 * allocated by a graph's capture and filled with `fill`. */
typedef struct held {
  recap_graph_t graph;
  recap_pool_id_t pool;
  unsigned char *ptr;
  size_t bytes;
  unsigned char fill;
} held_t;

static void no_op(void *const *args, size_t n) {
  (void)args;
  (void)n;
}

static held_t hold(size_t bytes, unsigned char fill) {
  held_t h = {.bytes = bytes, .fill = fill};
  recap_stream_t s = recap__fake_stream_new();
  OK(recap_graph_create(&h.graph, 0));
  OK(recap_graph_capture_begin(h.graph, NULL, s));
  OK(recap_malloc((void **)&h.ptr, bytes, s));
  const void *args[1] = {h.ptr};
  recap__fake_launch_kernel_fn(s, "use", no_op, args, 1);
  OK(recap_graph_capture_end(h.graph));
  OK(recap_graph_pool(h.graph, &h.pool));
  memset(h.ptr, fill, bytes);
  return h;
}

/* Its block holds its fill, every byte (after an OFFLOAD wake). */
static void expect_contents(const held_t *h) {
  for (size_t i = 0; i < h->bytes; i++)
    if (h->ptr[i] != h->fill)
      fail_msg("byte %zu of the %zu-byte block is 0x%02x, not 0x%02x", i, h->bytes, h->ptr[i],
               h->fill);
}

static void release(held_t *h) {
  OK(recap_free(h->ptr));
  OK(recap_graph_destroy(h->graph));
  memset(h, 0, sizeof *h);
}

static int64_t offloaded(recap_pool_id_t pool) {
  recap_pool_memory_t m = RECAP_POOL_MEMORY_INIT;
  OK(recap_pool_memory(pool, &m));
  return m.offloaded_bytes;
}

/* What is kept, by recap's account and in the snapshot, which must agree. */
typedef struct kept {
  size_t buffers, bytes;
} kept_t;

static kept_t kept_now(void) {
  kept_t k;
  recap__alloc_lock();
  recap__pinned_kept(&k.buffers, &k.bytes);
  recap__alloc_unlock();
  char *json = NULL;
  OK(recap_memory_snapshot_json(-1, &json));
  char needle[128];
  snprintf(needle, sizeof needle, "\"pinned_kept_buffers\":%zu,\"pinned_kept_bytes\":%zu}",
           k.buffers, k.bytes);
  if (!strstr(json, needle)) fail_msg("the snapshot lacks %s: %s", needle, json);
  recap_string_free(json);
  return k;
}

static void expect_kept(size_t buffers, size_t bytes) {
  kept_t k = kept_now();
  assert_int_equal(k.buffers, buffers);
  assert_int_equal(k.bytes, bytes);
}

/* Nothing left: the option off, the cache emptied, no pinned memory held. */
static void teardown(void) {
  OK(recap_option_set("offload_keep_pinned", "0"));
  OK(recap_empty_cache());
  expect_quiet();
  expect_kept(0, 0);
  assert_int_equal(recap__fake_now().pinned_live, 0);
  assert_int_equal(recap__fake_now().vmm_chunks_live, 0);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
}

/* ---- reuse ----------------------------------------------------------------------------------- */

static void a_wake_keeps_and_the_next_sleep_reuses(void **unused) {
  (void)unused;
  setup();
  held_t h = hold(8 * MiB, 0x3c);
  uint64_t allocs = pinned_allocs(), frees = pinned_frees();
  OK(recap_pool_sleep(h.pool, RECAP_SLEEP_OFFLOAD));
  assert_int_equal(pinned_allocs() - allocs, 1);
  assert_int_equal(recap__fake_now().pinned_bytes, 8 * MiB);
  assert_int_equal(offloaded(h.pool), 8 * MiB);
  expect_kept(0, 0);
  expect_checker_passes();

  OK(recap_pool_wake(h.pool));
  expect_contents(&h);
  assert_int_equal(pinned_frees() - frees, 0);
  assert_int_equal(recap__fake_now().pinned_live, 1);
  assert_int_equal(recap__fake_now().pinned_bytes, 8 * MiB);
  assert_int_equal(offloaded(h.pool), 0);
  expect_kept(1, 8 * MiB);
  expect_checker_passes();

  /* Three more cycles: nothing pinned, nothing unpinned. */
  memset(h.ptr, 0x5e, h.bytes);
  h.fill = 0x5e;
  for (int cycle = 0; cycle < 3; cycle++) {
    OK(recap_pool_sleep(h.pool, RECAP_SLEEP_OFFLOAD));
    expect_kept(0, 0);
    assert_int_equal(offloaded(h.pool), 8 * MiB);
    expect_checker_passes();
    OK(recap_pool_wake(h.pool));
    expect_contents(&h);
    expect_kept(1, 8 * MiB);
  }
  assert_int_equal(pinned_allocs() - allocs, 1);
  assert_int_equal(pinned_frees() - frees, 0);
  /* DISCARD takes no buffer: the kept one stays. */
  OK(recap_pool_sleep(h.pool, RECAP_SLEEP_DISCARD));
  expect_kept(1, 8 * MiB);
  OK(recap_pool_wake(h.pool));
  expect_kept(1, 8 * MiB);
  assert_int_equal(pinned_allocs() - allocs, 1);
  release(&h);
  teardown();
}

/* The buffer one pool's wake kept serves the next sleep of another; of several, the smallest
 * that is large enough. */
static void any_pool_takes_the_smallest_that_fits(void **unused) {
  (void)unused;
  setup();
  held_t a = hold(4 * MiB, 0xa1), b = hold(12 * MiB, 0xb2);
  uint64_t allocs = pinned_allocs(), frees = pinned_frees();
  OK(recap_pool_sleep(a.pool, RECAP_SLEEP_OFFLOAD));
  OK(recap_pool_sleep(b.pool, RECAP_SLEEP_OFFLOAD));
  assert_int_equal(pinned_allocs() - allocs, 2);
  OK(recap_pool_wake(a.pool));
  OK(recap_pool_wake(b.pool));
  expect_kept(2, 16 * MiB);
  release(&a);
  release(&b);

  /* 3 MiB takes the 4 MiB buffer, not the 12 MiB one. */
  held_t c = hold(2 * MiB, 0xc3);
  OK(recap_pool_sleep(c.pool, RECAP_SLEEP_OFFLOAD));
  expect_kept(1, 12 * MiB);
  assert_int_equal(offloaded(c.pool), 2 * MiB);
  expect_checker_passes();
  /* 10 MiB takes the 12 MiB one. */
  held_t d = hold(10 * MiB, 0xd4);
  OK(recap_pool_sleep(d.pool, RECAP_SLEEP_OFFLOAD));
  expect_kept(0, 0);
  assert_int_equal(offloaded(d.pool), 10 * MiB);
  assert_int_equal(pinned_allocs() - allocs, 2);
  assert_int_equal(pinned_frees() - frees, 0);
  expect_checker_passes();
  /* The buffers go back at their own size. */
  OK(recap_pool_wake(c.pool));
  expect_contents(&c);
  expect_kept(1, 4 * MiB);
  OK(recap_pool_wake(d.pool));
  expect_contents(&d);
  expect_kept(2, 16 * MiB);
  assert_int_equal(recap__fake_now().pinned_live, 2);
  release(&c);
  release(&d);
  teardown();
}

/* A sleep no kept buffer can hold frees them all and pins a buffer of its own bytes. */
static void a_larger_sleep_frees_the_kept_and_pins_anew(void **unused) {
  (void)unused;
  setup();
  held_t a = hold(4 * MiB, 0x11), b = hold(6 * MiB, 0x22);
  OK(recap_pool_sleep(a.pool, RECAP_SLEEP_OFFLOAD));
  OK(recap_pool_sleep(b.pool, RECAP_SLEEP_OFFLOAD));
  OK(recap_pool_wake(a.pool));
  OK(recap_pool_wake(b.pool));
  expect_kept(2, 10 * MiB);
  release(&a);
  release(&b);
  held_t big = hold(8 * MiB, 0x33);
  uint64_t allocs = pinned_allocs(), frees = pinned_frees();
  OK(recap_pool_sleep(big.pool, RECAP_SLEEP_OFFLOAD));
  assert_int_equal(pinned_frees() - frees, 2);
  assert_int_equal(pinned_allocs() - allocs, 1);
  assert_int_equal(recap__fake_now().pinned_live, 1);
  assert_int_equal(recap__fake_now().pinned_bytes, 8 * MiB);
  expect_kept(0, 0);
  expect_checker_passes();
  OK(recap_pool_wake(big.pool));
  expect_contents(&big);
  expect_kept(1, 8 * MiB);
  release(&big);
  teardown();
}

/* recap_sleep and recap_wake over several pools: the second round pins nothing. */
static void whole_allocator_rounds_reuse(void **unused) {
  (void)unused;
  setup();
  held_t a = hold(2 * MiB, 0x41), b = hold(6 * MiB, 0x42);
  void *plain = NULL; /* a block of the default pool */
  OK(recap_malloc(&plain, 4 * MiB, NULL));
  memset(plain, 0x43, 4 * MiB);
  uint64_t allocs = pinned_allocs(), frees = pinned_frees();
  OK(recap_sleep(RECAP_SLEEP_OFFLOAD));
  assert_int_equal(pinned_allocs() - allocs, 3);
  OK(recap_wake());
  expect_kept(3, 12 * MiB);
  for (int round = 0; round < 2; round++) {
    OK(recap_sleep(RECAP_SLEEP_OFFLOAD));
    expect_kept(0, 0);
    assert_int_equal(offloaded(default_pool), 4 * MiB);
    assert_int_equal(offloaded(a.pool), 2 * MiB);
    assert_int_equal(offloaded(b.pool), 6 * MiB);
    expect_checker_passes();
    OK(recap_wake());
    expect_kept(3, 12 * MiB);
  }
  assert_int_equal(pinned_allocs() - allocs, 3);
  assert_int_equal(pinned_frees() - frees, 0);
  expect_contents(&a);
  expect_contents(&b);
  for (size_t i = 0; i < 4 * MiB; i++) assert_int_equal(((unsigned char *)plain)[i], 0x43);
  OK(recap_free(plain));
  release(&a);
  release(&b);
  teardown();
}

/* ---- giving the buffers back ----------------------------------------------------------------- */

/* Two buffers kept (one per pool that slept and woke). */
static void keep_two(held_t *a, held_t *b) {
  *a = hold(2 * MiB, 0x61);
  *b = hold(4 * MiB, 0x62);
  OK(recap_pool_sleep(a->pool, RECAP_SLEEP_OFFLOAD));
  OK(recap_pool_sleep(b->pool, RECAP_SLEEP_OFFLOAD));
  OK(recap_pool_wake(a->pool));
  OK(recap_pool_wake(b->pool));
  expect_kept(2, 6 * MiB);
}

static void empty_cache_frees_the_kept(void **unused) {
  (void)unused;
  setup();
  held_t a, b;
  keep_two(&a, &b);
  uint64_t allocs = pinned_allocs(), frees = pinned_frees();
  OK(recap_empty_cache());
  assert_int_equal(pinned_frees() - frees, 2);
  assert_int_equal(pinned_allocs() - allocs, 0);
  assert_int_equal(recap__fake_now().pinned_live, 0);
  assert_int_equal(recap__fake_now().pinned_bytes, 0);
  expect_kept(0, 0);
  /* The option still 1: the next sleep pins, its wake keeps. */
  OK(recap_pool_sleep(a.pool, RECAP_SLEEP_OFFLOAD));
  assert_int_equal(pinned_allocs() - allocs, 1);
  /* An asleep pool's buffer is not cached memory: recap_empty_cache leaves it. */
  OK(recap_empty_cache());
  assert_int_equal(recap__fake_now().pinned_live, 1);
  assert_int_equal(offloaded(a.pool), 2 * MiB);
  OK(recap_pool_wake(a.pool));
  expect_contents(&a);
  expect_kept(1, 2 * MiB);
  release(&a);
  release(&b);
  teardown();
}

/* The option back at 0: the kept buffers stay until the next sleep, wake or recap_empty_cache,
 * each of which frees them all. */
static void option_zero_frees_at_the_next_call(void **unused) {
  (void)unused;
  enum { SLEEP_OTHER, WAKE_AWAKE, SLEEP_ALL, WAKE_ALL, EMPTY_CACHE, CALLS };
  static const char *const names[CALLS] = {"recap_pool_sleep", "recap_pool_wake", "recap_sleep",
                                           "recap_wake", "recap_empty_cache"};
  for (int call = 0; call < CALLS; call++) {
    setup();
    held_t a, b;
    keep_two(&a, &b);
    OK(recap_option_set("offload_keep_pinned", "0"));
    uint64_t frees = pinned_frees();
    /* Neither setting the option nor a query frees anything. */
    recap_pool_state_t st;
    OK(recap_pool_state(a.pool, &st));
    char *json = NULL;
    OK(recap_memory_snapshot_json(-1, &json));
    recap_string_free(json);
    assert_int_equal(pinned_frees(), frees);
    expect_kept(2, 6 * MiB);
    switch (call) {
      case SLEEP_OTHER: OK(recap_pool_sleep(default_pool, RECAP_SLEEP_DISCARD)); break;
      case WAKE_AWAKE: OK(recap_pool_wake(a.pool)); break;
      case SLEEP_ALL: OK(recap_sleep(RECAP_SLEEP_DISCARD)); break;
      case WAKE_ALL: OK(recap_wake()); break;
      case EMPTY_CACHE: OK(recap_empty_cache()); break;
    }
    if (pinned_frees() - frees != 2 || recap__fake_now().pinned_live != 0)
      fail_msg("%s freed %llu of the 2 kept buffers", names[call],
               (unsigned long long)(pinned_frees() - frees));
    expect_kept(0, 0);
    OK(recap_wake());
    memset(b.ptr, b.fill, b.bytes); /* recap_sleep(DISCARD) dropped it */
    /* Off, an OFFLOAD cycle pins and unpins its own buffer. */
    uint64_t allocs = pinned_allocs();
    frees = pinned_frees();
    OK(recap_pool_sleep(b.pool, RECAP_SLEEP_OFFLOAD));
    OK(recap_pool_wake(b.pool));
    expect_contents(&b);
    assert_int_equal(pinned_allocs() - allocs, 1);
    assert_int_equal(pinned_frees() - frees, 1);
    expect_kept(0, 0);
    release(&a);
    release(&b);
    teardown();
  }
}

/* Set to 0 while a pool sleeps: its wake frees its buffer instead of keeping it. */
static void option_zero_while_asleep(void **unused) {
  (void)unused;
  setup();
  held_t h = hold(6 * MiB, 0x71);
  OK(recap_pool_sleep(h.pool, RECAP_SLEEP_OFFLOAD));
  OK(recap_option_set("offload_keep_pinned", "0"));
  uint64_t frees = pinned_frees();
  OK(recap_pool_wake(h.pool));
  expect_contents(&h);
  assert_int_equal(pinned_frees() - frees, 1);
  assert_int_equal(recap__fake_now().pinned_live, 0);
  expect_kept(0, 0);
  release(&h);
  teardown();
}

static void the_option_takes_zero_or_one(void **unused) {
  (void)unused;
  setup();
  EXPECT_STATUS(recap_option_set("offload_keep_pinned", "2"), RECAP_ERROR_INVALID_VALUE);
  EXPECT_MESSAGE("option offload_keep_pinned has value '2', which is not a boolean");
  EXPECT_STATUS(recap_option_set_u64("offload_keep_pinned", 2), RECAP_ERROR_INVALID_VALUE);
  EXPECT_MESSAGE("offload_keep_pinned must be 0 (off) or 1 (on)");
  uint64_t v = 7;
  OK(recap_option_get("offload_keep_pinned", &v));
  assert_int_equal(v, 1);
  recap_options_reset();
  OK(recap_option_get("offload_keep_pinned", &v));
  assert_int_equal(v, 0);
  OK(recap_options_parse("expandable_segments:1,offload_keep_pinned:1"));
  OK(recap_option_get("offload_keep_pinned", &v));
  assert_int_equal(v, 1);
  teardown();
}

/* The memory page's totals show the kept bytes. */
static void the_page_shows_the_kept(void **unused) {
  (void)unused;
  setup();
  held_t a, b;
  keep_two(&a, &b);
  char *html = NULL;
  OK(recap_memory_html_string(&html));
  const char *needle =
      "<span class=\"k\">pinned, kept for offload</span><span class=\"v\"><span "
      "class=\"bytes\" title=\"6291456 bytes\">";
  if (!strstr(html, needle)) fail_msg("the page lacks %s", needle);
  if (!strstr(html, " (2 buffers)</div>")) fail_msg("the page does not count 2 buffers");
  recap_string_free(html);
  release(&a);
  release(&b);
  teardown();
}

/* ---- faults ---------------------------------------------------------------------------------- */

/* No pinned memory at all: the sleep fails, the pool awake and intact, nothing kept. */
static void no_pinned_memory_leaves_the_pool_awake(void **unused) {
  (void)unused;
  setup();
  held_t h = hold(4 * MiB, 0x81);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_HOST_ALLOC_PINNED, 1);
  EXPECT_STATUS(recap_pool_sleep(h.pool, RECAP_SLEEP_OFFLOAD), RECAP_ERROR_OUT_OF_MEMORY);
  EXPECT_MESSAGE("recap_pool_sleep: RECAP_SLEEP_OFFLOAD needs 4194304 bytes of pinned host memory");
  EXPECT_MESSAGE("the pool stays awake");
  assert_int_equal(state_of_pool(h.pool), RECAP_POOL_AWAKE);
  assert_int_equal(recap__fake_now().pinned_live, 0);
  expect_kept(0, 0);
  expect_contents(&h);
  expect_checker_passes();
  /* With a smaller buffer kept: it is freed first (the new one needs the host's memory). */
  held_t small = hold(2 * MiB, 0x82);
  OK(recap_pool_sleep(small.pool, RECAP_SLEEP_OFFLOAD));
  OK(recap_pool_wake(small.pool));
  expect_kept(1, 2 * MiB);
  uint64_t frees = pinned_frees();
  recap__fake_fail_nth(RECAP__FAKE_FAULT_HOST_ALLOC_PINNED, 1);
  EXPECT_STATUS(recap_pool_sleep(h.pool, RECAP_SLEEP_OFFLOAD), RECAP_ERROR_OUT_OF_MEMORY);
  assert_int_equal(pinned_frees() - frees, 1);
  assert_int_equal(recap__fake_now().pinned_live, 0);
  expect_kept(0, 0);
  assert_int_equal(state_of_pool(h.pool), RECAP_POOL_AWAKE);
  expect_contents(&h);
  expect_checker_passes();
  OK(recap_pool_sleep(h.pool, RECAP_SLEEP_OFFLOAD));
  OK(recap_pool_wake(h.pool));
  expect_contents(&h);
  release(&h);
  release(&small);
  teardown();
}

/* A kept buffer whose free fails stays kept, counted, and goes at a later call. */
static void a_failed_free_keeps_the_buffer(void **unused) {
  (void)unused;
  setup();
  held_t a, b;
  keep_two(&a, &b);
  /* recap_empty_cache: the first free fails, the other buffer goes; the call says so. */
  uint64_t frees = pinned_frees();
  recap__fake_fail_nth(RECAP__FAKE_FAULT_HOST_FREE_PINNED, 1);
  EXPECT_STATUS(recap_empty_cache(), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE(
      "recap_empty_cache: freeing a pinned host buffer kept for RECAP_SLEEP_OFFLOAD "
      "failed");
  EXPECT_MESSAGE("it stays kept");
  assert_int_equal(pinned_frees() - frees, 2);
  assert_int_equal(recap__fake_now().pinned_live, 1);
  kept_t k = kept_now();
  assert_int_equal(k.buffers, 1);
  assert_int_equal(recap__fake_now().pinned_bytes, k.bytes);
  expect_checker_passes();
  OK(recap_empty_cache());
  expect_kept(0, 0);
  assert_int_equal(recap__fake_now().pinned_live, 0);

  /* The option back at 0 and a sleep whose freeing of the kept fails: a warning, the sleep
   * itself succeeds (taking the kept buffer, already pinned), and its wake frees it. */
  OK(recap_pool_sleep(b.pool, RECAP_SLEEP_OFFLOAD));
  OK(recap_pool_wake(b.pool));
  expect_kept(1, 4 * MiB);
  OK(recap_option_set("offload_keep_pinned", "0"));
  recap_test_log_t log;
  recap_test_log_capture(&log);
  uint64_t allocs = pinned_allocs();
  frees = pinned_frees();
  recap__fake_fail_nth(RECAP__FAKE_FAULT_HOST_FREE_PINNED, 1);
  OK(recap_pool_sleep(a.pool, RECAP_SLEEP_OFFLOAD));
  recap_test_log_stop();
  assert_int_equal(log.warnings, 1);
  if (!strstr(log.last_warning,
              "recap_pool_sleep: freeing a pinned host buffer kept for "
              "RECAP_SLEEP_OFFLOAD failed"))
    fail_msg("the warning: %s", log.last_warning);
  assert_int_equal(pinned_frees() - frees, 1);
  assert_int_equal(pinned_allocs(), allocs);
  expect_kept(0, 0);
  assert_int_equal(recap__fake_now().pinned_live, 1);
  expect_checker_passes();
  OK(recap_pool_wake(a.pool));
  expect_contents(&a);
  assert_int_equal(pinned_frees() - frees, 2);
  assert_int_equal(recap__fake_now().pinned_live, 0);
  expect_kept(0, 0);
  release(&a);
  release(&b);
  teardown();
}

/* No host memory to list the buffer at the wake: it is freed instead of kept, and the wake
 * succeeds; a host allocation failing anywhere else in the wake leaves the pool asleep with its
 * copy. */
static void no_host_memory_to_keep_frees_the_buffer(void **unused) {
  (void)unused;
  setup();
  held_t h = hold(4 * MiB, 0xe1);
  recap_test_host_faults_install();
  int freed_instead = 0;
  for (uint64_t n = 1;; n++) {
    OK(recap_empty_cache());
    OK(recap_pool_sleep(h.pool, RECAP_SLEEP_OFFLOAD));
    uint64_t frees = pinned_frees();
    recap_test_host_fail_nth(n);
    recap_status_t s = recap_pool_wake(h.pool);
    bool failed = recap_test_host_failed();
    recap_test_host_fail_nth(0);
    expect_checker_passes();
    if (s != RECAP_SUCCESS) {
      assert_true(failed);
      EXPECT_STATUS(s, RECAP_ERROR_OUT_OF_MEMORY);
      EXPECT_MESSAGE("recap_pool_wake:");
      assert_int_equal(state_of_pool(h.pool), RECAP_POOL_ASLEEP_OFFLOADED);
      assert_int_equal(recap__fake_now().pinned_live, 1);
      OK(recap_pool_wake(h.pool));
      expect_contents(&h);
      continue;
    }
    expect_contents(&h);
    kept_t k = kept_now();
    if (failed) {
      /* The kept list could not grow: the buffer went back to the host. */
      freed_instead++;
      assert_int_equal(k.buffers, 0);
      assert_int_equal(pinned_frees() - frees, 1);
      assert_int_equal(recap__fake_now().pinned_live, 0);
      continue;
    }
    assert_int_equal(k.buffers, 1);
    assert_int_equal(pinned_frees(), frees);
    assert_int_equal(recap__fake_now().pinned_live, 1);
    break;
  }
  recap_test_host_faults_remove();
  assert_int_equal(freed_instead, 1);
  release(&h);
  teardown();
}

/* ---- pinned ahead: recap_pinned_reserve ------------------------------------------------------ */

/* With the option at 0, a buffer reserved ahead serves the first OFFLOAD sleep, which pins
 * nothing; the wake frees it as the option says, and the next sleep pins again. */
static void a_reserved_buffer_serves_the_first_sleep(void **unused) {
  (void)unused;
  setup();
  OK(recap_option_set("offload_keep_pinned", "0"));
  held_t h = hold(8 * MiB, 0x6a);
  uint64_t allocs = pinned_allocs(), frees = pinned_frees();
  OK(recap_pinned_reserve(8 * MiB));
  assert_int_equal(pinned_allocs() - allocs, 1);
  assert_int_equal(recap__fake_now().pinned_bytes, 8 * MiB);
  expect_kept(1, 8 * MiB);
  expect_checker_passes();
  OK(recap_pool_sleep(h.pool, RECAP_SLEEP_OFFLOAD));
  assert_int_equal(pinned_allocs() - allocs, 1);
  assert_int_equal(offloaded(h.pool), 8 * MiB);
  expect_kept(0, 0);
  expect_checker_passes();
  OK(recap_pool_wake(h.pool));
  expect_contents(&h);
  assert_int_equal(pinned_frees() - frees, 1);
  assert_int_equal(recap__fake_now().pinned_live, 0);
  expect_kept(0, 0);
  /* Used up: the next sleep pins its own. */
  OK(recap_pool_sleep(h.pool, RECAP_SLEEP_OFFLOAD));
  assert_int_equal(pinned_allocs() - allocs, 2);
  OK(recap_pool_wake(h.pool));
  expect_contents(&h);
  /* bytes 0 pins nothing. */
  OK(recap_pinned_reserve(0));
  assert_int_equal(pinned_allocs() - allocs, 2);
  expect_kept(0, 0);
  release(&h);
  teardown();
}

/* With the option at 1 the reserved buffer, given back at the wake, stays kept for the next
 * sleeps; a reserve that a kept buffer already holds pins nothing. A larger buffer serves a
 * smaller sleep whole. */
static void with_the_option_it_stays_kept(void **unused) {
  (void)unused;
  setup();
  held_t h = hold(8 * MiB, 0x7b);
  uint64_t allocs = pinned_allocs(), frees = pinned_frees();
  OK(recap_pinned_reserve(16 * MiB));
  expect_kept(1, 16 * MiB);
  for (int cycle = 0; cycle < 3; cycle++) {
    OK(recap_pool_sleep(h.pool, RECAP_SLEEP_OFFLOAD));
    expect_kept(0, 0);
    assert_int_equal(offloaded(h.pool), 8 * MiB);
    expect_checker_passes();
    OK(recap_pool_wake(h.pool));
    expect_contents(&h);
    expect_kept(1, 16 * MiB);
  }
  assert_int_equal(pinned_allocs() - allocs, 1);
  assert_int_equal(pinned_frees() - frees, 0);
  /* The kept 16 MiB hold 4 MiB: reserved, not pinned anew. */
  OK(recap_pinned_reserve(4 * MiB));
  assert_int_equal(pinned_allocs() - allocs, 1);
  expect_kept(1, 16 * MiB);
  /* A second reserve finds it reserved already: it pins one more. */
  OK(recap_pinned_reserve(4 * MiB));
  assert_int_equal(pinned_allocs() - allocs, 2);
  expect_kept(2, 20 * MiB);
  release(&h);
  teardown();
}

/* A reserved buffer stays through the option at 0 (sleeps and wakes of other pools) and
 * through a sleep that pins anew for more than it holds; recap_empty_cache frees it. */
static void a_reserved_buffer_waits_for_its_sleep(void **unused) {
  (void)unused;
  setup();
  OK(recap_option_set("offload_keep_pinned", "0"));
  held_t small = hold(2 * MiB, 0x91), big = hold(12 * MiB, 0x92);
  OK(recap_pinned_reserve(2 * MiB));
  uint64_t allocs = pinned_allocs(), frees = pinned_frees();
  OK(recap_pool_sleep(big.pool, RECAP_SLEEP_DISCARD));
  OK(recap_pool_wake(big.pool));
  expect_kept(1, 2 * MiB);
  memset(big.ptr, big.fill, big.bytes); /* DISCARD dropped them */
  /* 12 MiB: too much for it; the sleep pins its own and leaves it. */
  OK(recap_pool_sleep(big.pool, RECAP_SLEEP_OFFLOAD));
  assert_int_equal(pinned_allocs() - allocs, 1);
  assert_int_equal(pinned_frees() - frees, 0);
  assert_int_equal(recap__fake_now().pinned_live, 2);
  expect_kept(1, 2 * MiB);
  expect_checker_passes();
  OK(recap_pool_wake(big.pool));
  expect_contents(&big);
  assert_int_equal(pinned_frees() - frees, 1);
  expect_kept(1, 2 * MiB);
  /* The small pool's sleep takes it. */
  OK(recap_pool_sleep(small.pool, RECAP_SLEEP_OFFLOAD));
  assert_int_equal(pinned_allocs() - allocs, 1);
  expect_kept(0, 0);
  OK(recap_pool_wake(small.pool));
  expect_contents(&small);
  /* recap_empty_cache frees a reserved buffer. */
  OK(recap_pinned_reserve(6 * MiB));
  expect_kept(1, 6 * MiB);
  frees = pinned_frees();
  OK(recap_empty_cache());
  assert_int_equal(pinned_frees() - frees, 1);
  expect_kept(0, 0);
  assert_int_equal(recap__fake_now().pinned_live, 0);
  release(&small);
  release(&big);
  teardown();
}

/* One reserve per pool: recap_sleep of two pools pins nothing. */
static void one_reserve_per_pool_of_recap_sleep(void **unused) {
  (void)unused;
  setup();
  OK(recap_option_set("offload_keep_pinned", "0"));
  held_t a = hold(2 * MiB, 0xa5), b = hold(6 * MiB, 0xb6);
  OK(recap_pinned_reserve(6 * MiB));
  OK(recap_pinned_reserve(2 * MiB));
  expect_kept(2, 8 * MiB);
  uint64_t allocs = pinned_allocs();
  OK(recap_sleep(RECAP_SLEEP_OFFLOAD));
  assert_int_equal(pinned_allocs(), allocs);
  expect_kept(0, 0);
  assert_int_equal(offloaded(a.pool), 2 * MiB);
  assert_int_equal(offloaded(b.pool), 6 * MiB);
  expect_checker_passes();
  OK(recap_wake());
  expect_contents(&a);
  expect_contents(&b);
  expect_kept(0, 0);
  assert_int_equal(recap__fake_now().pinned_live, 0);
  release(&a);
  release(&b);
  teardown();
}

/* Refusals and failures pin nothing: during a capture; the host refusing to pin (a smaller kept
 * buffer not reserved is freed first, as a sleep frees it); no host memory for the list. */
static void reserve_failures_pin_nothing(void **unused) {
  (void)unused;
  setup();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g = graph_capturing(s, NULL);
  uint64_t allocs = pinned_allocs();
  EXPECT_STATUS(recap_pinned_reserve(4 * MiB), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_pinned_reserve: a capture is under way on device 0");
  assert_int_equal(pinned_allocs(), allocs);
  recap__fake_launch_kernel(s, "k");
  OK(recap_graph_capture_end(g));
  OK(recap_graph_destroy(g));

  held_t h = hold(2 * MiB, 0xc7);
  OK(recap_pool_sleep(h.pool, RECAP_SLEEP_OFFLOAD));
  OK(recap_pool_wake(h.pool));
  expect_kept(1, 2 * MiB);
  uint64_t frees = pinned_frees();
  recap__fake_fail_nth(RECAP__FAKE_FAULT_HOST_ALLOC_PINNED, 1);
  EXPECT_STATUS(recap_pinned_reserve(4 * MiB), RECAP_ERROR_OUT_OF_MEMORY);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_HOST_ALLOC_PINNED, 0);
  EXPECT_MESSAGE("recap_pinned_reserve: pinning 4194304 bytes of host memory failed");
  EXPECT_MESSAGE("nothing was pinned. Free host memory, or reserve fewer bytes");
  assert_int_equal(pinned_frees() - frees, 1);
  assert_int_equal(recap__fake_now().pinned_live, 0);
  expect_kept(0, 0);
  expect_checker_passes();

  /* The list's host memory: the first host allocation fails. */
  recap_test_host_faults_install();
  recap_test_host_fail_nth(1);
  recap_status_t r = recap_pinned_reserve(4 * MiB);
  bool failed = recap_test_host_failed();
  recap_test_host_fail_nth(0);
  recap_test_host_faults_remove();
  assert_true(failed);
  EXPECT_STATUS(r, RECAP_ERROR_OUT_OF_MEMORY);
  EXPECT_MESSAGE("recap_pinned_reserve: out of host memory");
  assert_int_equal(recap__fake_now().pinned_live, 0);
  expect_kept(0, 0);
  /* And then it works. */
  OK(recap_pinned_reserve(4 * MiB));
  expect_kept(1, 4 * MiB);
  release(&h);
  teardown();
}

/* The only kept buffers are not reserved and too small: the reserve frees them (and with them
 * the list, nothing being kept) and lists its own buffer in a list made anew; the reserved
 * buffer then serves a sleep. Under a host allocation failing at each call in turn, the reserve
 * either succeeds so or fails out of host memory for the list, the small buffer freed and
 * nothing pinned. */
static void a_reserve_that_frees_every_kept_buffer_lists_its_own(void **unused) {
  (void)unused;
  setup();
  held_t small = hold(2 * MiB, 0xd3), big = hold(4 * MiB, 0xd4);
  OK(recap_pool_sleep(small.pool, RECAP_SLEEP_OFFLOAD));
  OK(recap_pool_wake(small.pool));
  expect_kept(1, 2 * MiB);
  uint64_t allocs = pinned_allocs(), frees = pinned_frees();
  OK(recap_pinned_reserve(4 * MiB));
  assert_int_equal(pinned_allocs() - allocs, 1);
  assert_int_equal(pinned_frees() - frees, 1);
  assert_int_equal(recap__fake_now().pinned_live, 1);
  expect_kept(1, 4 * MiB);
  expect_checker_passes();
  OK(recap_pool_sleep(big.pool, RECAP_SLEEP_OFFLOAD));
  assert_int_equal(pinned_allocs() - allocs, 1);
  expect_kept(0, 0);
  OK(recap_pool_wake(big.pool));
  expect_contents(&big);
  expect_kept(1, 4 * MiB);

  recap_test_host_faults_install();
  int list_failures = 0;
  for (uint64_t n = 1;; n++) {
    OK(recap_empty_cache());
    OK(recap_pool_sleep(small.pool, RECAP_SLEEP_OFFLOAD));
    OK(recap_pool_wake(small.pool));
    expect_kept(1, 2 * MiB);
    allocs = pinned_allocs();
    frees = pinned_frees();
    recap_test_host_fail_nth(n);
    recap_status_t s = recap_pinned_reserve(4 * MiB);
    bool failed = recap_test_host_failed();
    recap_test_host_fail_nth(0);
    expect_checker_passes();
    assert_int_equal(pinned_frees() - frees, 1);
    if (s != RECAP_SUCCESS) {
      assert_true(failed);
      list_failures++;
      EXPECT_STATUS(s, RECAP_ERROR_OUT_OF_MEMORY);
      EXPECT_MESSAGE(
          "recap_pinned_reserve: out of host memory for the list of pinned buffers; "
          "nothing was pinned");
      assert_int_equal(pinned_allocs(), allocs);
      assert_int_equal(recap__fake_now().pinned_live, 0);
      expect_kept(0, 0);
      continue;
    }
    assert_false(failed);
    assert_int_equal(pinned_allocs() - allocs, 1);
    assert_int_equal(recap__fake_now().pinned_live, 1);
    expect_kept(1, 4 * MiB);
    break;
  }
  recap_test_host_faults_remove();
  assert_int_equal(list_failures, 1);
  release(&small);
  release(&big);
  teardown();
}

static const recap__fake_fault_t kinds[] = {
    RECAP__FAKE_FAULT_VMM_CREATE,       RECAP__FAKE_FAULT_VMM_RELEASE,
    RECAP__FAKE_FAULT_VMM_MAP,          RECAP__FAKE_FAULT_VMM_UNMAP,
    RECAP__FAKE_FAULT_VMM_SET_ACCESS,   RECAP__FAKE_FAULT_HOST_ALLOC_PINNED,
    RECAP__FAKE_FAULT_HOST_FREE_PINNED, RECAP__FAKE_FAULT_VMM_GRANULARITY,
    RECAP__FAKE_FAULT_VMM_RESERVE,      RECAP__FAKE_FAULT_VMM_RELEASE_RANGE};
enum { KINDS = sizeof kinds / sizeof kinds[0] };

/* Whatever failed: the pool wholly awake (contents intact) or wholly asleep, the checker
 * passing, and every pinned buffer of the fake either kept or an asleep pool's copy. The other
 * pool is awake throughout. */
static void expect_whole(const held_t *h, const held_t *other) {
  expect_checker_passes();
  kept_t k = kept_now();
  recap_pool_memory_t m = RECAP_POOL_MEMORY_INIT, o = RECAP_POOL_MEMORY_INIT;
  OK(recap_pool_memory(h->pool, &m));
  OK(recap_pool_memory(other->pool, &o));
  assert_int_equal(o.state, RECAP_POOL_AWAKE);
  size_t copies = m.state == RECAP_POOL_ASLEEP_OFFLOADED ? 1 : 0;
  assert_int_equal(recap__fake_now().pinned_live, (int64_t)(k.buffers + copies));
  if (m.state == RECAP_POOL_AWAKE) {
    assert_int_equal(m.sleeping_bytes, 0);
    assert_int_equal(recap__fake_now().vmm_bytes_mapped,
                     (size_t)(m.reserved_bytes + o.reserved_bytes));
    expect_contents(h);
  } else {
    assert_int_equal(m.sleeping_bytes, m.reserved_bytes);
    assert_int_equal(recap__fake_now().vmm_bytes_mapped, (size_t)o.reserved_bytes);
    assert_int_equal(m.offloaded_bytes, (int64_t)h->bytes);
  }
}

/* A fault at the k-th call of each kind during an OFFLOAD sleep and during its wake, with the
 * option on and a buffer kept (too small: the sleep frees it and pins anew; or large enough). */
static void faults_with_the_cache(void **unused) {
  (void)unused;
  for (int kept_fits = 0; kept_fits <= 1; kept_fits++) {
    setup();
    held_t h = hold(6 * MiB, 0x91);
    held_t other = hold(kept_fits ? 8 * MiB : 2 * MiB, 0x92);
    int faults_hit = 0;
    for (int phase = 0; phase < 2; phase++) {
      for (int i = 0; i < KINDS; i++) {
        recap__fake_fault_t kind = kinds[i];
        for (uint64_t n = 1;; n++) {
          /* Put the kept buffer back as it was: the other pool's, alone. */
          OK(recap_empty_cache());
          OK(recap_pool_sleep(other.pool, RECAP_SLEEP_OFFLOAD));
          OK(recap_pool_wake(other.pool));
          expect_kept(1, other.bytes);
          if (phase == 1) OK(recap_pool_sleep(h.pool, RECAP_SLEEP_OFFLOAD));
          uint64_t calls = recap__fake_now().calls[kind];
          recap_test_log_t log; /* a kept buffer's failed free is a warning */
          recap_test_log_capture(&log);
          recap__fake_fail_nth(kind, n);
          recap_status_t s =
              phase == 0 ? recap_pool_sleep(h.pool, RECAP_SLEEP_OFFLOAD) : recap_pool_wake(h.pool);
          recap__fake_fail_nth(kind, 0);
          recap_test_log_stop();
          assert_int_equal(log.warnings, kind == RECAP__FAKE_FAULT_HOST_FREE_PINNED && phase == 0 &&
                                             !kept_fits && n == 1);
          bool reached = recap__fake_now().calls[kind] - calls >= n;
          if (reached) faults_hit++;
          if (s != RECAP_SUCCESS) {
            assert_true(reached);
            EXPECT_MESSAGE(phase == 0 ? "recap_pool_sleep:" : "recap_pool_wake:");
          }
          expect_whole(&h, &other);
          /* Back awake for the next round (a failed wake stays asleep; a release the sleep
           * could not make is made by this wake). */
          OK(recap_pool_wake(h.pool));
          expect_whole(&h, &other);
          if (!reached) break;
        }
      }
    }
    /* The kept buffer's free and the new one's allocation (when the kept is too small), the
     * unmap and the release of the sleep, the create, map and access of the wake. */
    assert_int_equal(faults_hit, kept_fits ? 5 : 7);
    release(&h);
    release(&other);
    teardown();
  }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(a_wake_keeps_and_the_next_sleep_reuses),
    cmocka_unit_test(any_pool_takes_the_smallest_that_fits),
    cmocka_unit_test(a_larger_sleep_frees_the_kept_and_pins_anew),
    cmocka_unit_test(whole_allocator_rounds_reuse),
    cmocka_unit_test(empty_cache_frees_the_kept),
    cmocka_unit_test(option_zero_frees_at_the_next_call),
    cmocka_unit_test(option_zero_while_asleep),
    cmocka_unit_test(the_option_takes_zero_or_one),
    cmocka_unit_test(the_page_shows_the_kept),
    cmocka_unit_test(no_pinned_memory_leaves_the_pool_awake),
    cmocka_unit_test(a_failed_free_keeps_the_buffer),
    cmocka_unit_test(no_host_memory_to_keep_frees_the_buffer),
    cmocka_unit_test(faults_with_the_cache),
    cmocka_unit_test(a_reserved_buffer_serves_the_first_sleep),
    cmocka_unit_test(with_the_option_it_stays_kept),
    cmocka_unit_test(a_reserved_buffer_waits_for_its_sleep),
    cmocka_unit_test(one_reserve_per_pool_of_recap_sleep),
    cmocka_unit_test(reserve_failures_pin_nothing),
    cmocka_unit_test(a_reserve_that_frees_every_kept_buffer_lists_its_own),
};
RECAP_TEST_MAIN(tests)
