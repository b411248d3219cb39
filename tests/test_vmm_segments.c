/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_vmm_segments.c — segments on CUDA virtual memory (the expandable_segments option) on the
 * CPU fake: one segment per pool, size class and stream that grows at its end in multiples of
 * the granularity, merges with a free last block, trims its free tail, releases its range when
 * empty; memory_cap, the out-of-memory retry and report; a fault at each VMM call of growth and
 * trim leaving the allocator as it was; captures into a private pool growing its segment.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "device/fake.h"
#include "harness.h"
#include "fake_util.h"
#include "recap.h"

enum { GRAN = 2 * 1024 * 1024 }; /* the fake's default granularity */

static recap_pool_id_t default_pool(void) { return (recap_pool_id_t){0, 0}; }

static void vmm_on(void) { OK(recap_option_set_u64("expandable_segments", 1)); }

static recap_pool_memory_t pool_memory(recap_pool_id_t id) {
  recap_pool_memory_t m = RECAP_POOL_MEMORY_INIT;
  OK(recap_pool_memory(id, &m));
  return m;
}

/* The pool's only segment (asserted). */
static recap__segment_t *only_segment(recap_pool_id_t id) {
  recap__device_state_t *d = recap__alloc.devices[0];
  assert_non_null(d);
  recap__pool_t *pool = &d->default_pool;
  if (!recap_pool_is_default(id))
    for (pool = d->private_pools; pool && !recap__pool_id_equal(pool->id, id); pool = pool->next)
      ;
  assert_non_null(pool);
  assert_non_null(pool->segments);
  assert_null(pool->segments->next);
  return pool->segments;
}

static void growth_extends_one_segment(void **state) {
  (void)state;
  reset();
  vmm_on();
  recap_stream_t s = recap__fake_stream_new();
  /* A medium request maps a large_segment's worth (20 MiB, a multiple of 2 MiB). */
  void *a, *b, *c;
  OK(recap_malloc(&a, 12 * MiB, s));
  recap_memory_stats_t st = stats();
  assert_int_equal(st.segment[RECAP_STAT_LARGE].current, 1);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_LARGE].current, 20 * MiB);
  assert_int_equal(st.num_device_alloc, 1);
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 20 * MiB);
  assert_int_equal(recap__fake_now().vmm_ranges_live, 1);
  /* The range spans the device's memory (64 GiB by default). */
  assert_int_equal(recap__fake_now().vmm_bytes_reserved, (size_t)64 << 30);
  assert_int_equal(pool_memory(default_pool()).vmm_segments, 1);
  assert_int_equal(pool_memory(default_pool()).vmm_reserved_va_bytes, (int64_t)64 << 30);
  /* 8 MiB free at the tail: a 9 MiB request lacks 1 MiB, the growth maps 20 MiB more. */
  OK(recap_malloc(&b, 9 * MiB, s));
  assert_ptr_equal(b, (char *)a + 12 * MiB);
  st = stats();
  assert_int_equal(st.segment[RECAP_STAT_LARGE].current, 1);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_LARGE].current, 40 * MiB);
  assert_int_equal(st.num_device_alloc, 2);
  /* A request bigger than large_segment maps what it lacks, rounded to the granularity. */
  OK(recap_malloc(&c, 45 * MiB + 1, s));
  assert_ptr_equal(c, (char *)b + 9 * MiB);
  st = stats();
  assert_int_equal(st.segment[RECAP_STAT_ALL].current, 1);
  /* 19 MiB were free; 45 MiB + 512 - 19 MiB rounds up to 28 MiB. */
  assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, 68 * MiB);
  assert_int_equal(st.num_device_alloc, 3);
  recap__segment_t *seg = only_segment(default_pool());
  assert_true(seg->vmm);
  assert_int_equal(seg->chunk_count, 3);
  assert_int_equal(seg->chunks[2].size, 28 * MiB);
  assert_ptr_equal(seg->base, a);
  check();
  OK(recap_free(a));
  OK(recap_free(b));
  OK(recap_free(c));
  check();
}

static void growth_after_an_allocated_last_block_adds_a_block(void **state) {
  (void)state;
  reset();
  vmm_on();
  recap_stream_t s = recap__fake_stream_new();
  void *a, *b;
  OK(recap_malloc(&a, 20 * MiB, s)); /* the whole first chunk */
  recap_memory_stats_t st = stats();
  assert_int_equal(st.inactive_split[0].current, 0);
  OK(recap_malloc(&b, 3 * MiB, s));
  assert_ptr_equal(b, (char *)a + 20 * MiB);
  st = stats();
  assert_int_equal(st.reserved_bytes[0].current, 40 * MiB);
  /* The new chunk became a free block after a, then b split it: 17 MiB free, split. */
  assert_int_equal(st.inactive_split[0].current, 1);
  assert_int_equal(st.inactive_split_bytes[0].current, 17 * MiB);
  check();
  /* Freeing a leaves a free first block: the segment has three blocks. */
  OK(recap_free(a));
  st = stats();
  assert_int_equal(st.inactive_split[0].current, 2);
  assert_int_equal(st.inactive_split_bytes[0].current, 37 * MiB);
  OK(recap_free(b));
  st = stats();
  assert_int_equal(st.inactive_split[0].current, 0);
  check();
}

static void small_and_large_classes_and_streams_get_own_segments(void **state) {
  (void)state;
  reset();
  vmm_on();
  recap_stream_t s = recap__fake_stream_new(), t = recap__fake_stream_new();
  void *p[6];
  OK(recap_malloc(&p[0], 1000, s));
  OK(recap_malloc(&p[1], 2 * MiB, s));
  OK(recap_malloc(&p[2], 1000, t));
  OK(recap_malloc(&p[3], 2 * MiB, t));
  OK(recap_malloc(&p[4], 3 * MiB, s));   /* grows nothing: fits in s's large segment */
  OK(recap_malloc(&p[5], 100 * MiB, s)); /* grows s's large segment, no own segment */
  recap_memory_stats_t st = stats();
  assert_int_equal(st.segment[RECAP_STAT_SMALL].current, 2);
  assert_int_equal(st.segment[RECAP_STAT_LARGE].current, 2);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_SMALL].current, 4 * MiB);
  /* s's large: 20 MiB, then 100 MiB - 15 MiB free rounds to 86 MiB; t's large: 20 MiB. */
  assert_int_equal(st.reserved_bytes[RECAP_STAT_LARGE].current, 126 * MiB);
  assert_ptr_equal(p[5], (char *)p[4] + 3 * MiB);
  assert_int_equal(pool_memory(default_pool()).vmm_segments, 4);
  assert_int_equal(recap__fake_now().vmm_ranges_live, 4);
  check();
  for (int i = 0; i < 6; i++) OK(recap_free(p[i]));
  OK(recap_empty_cache());
  assert_int_equal(stats().segment[0].current, 0);
  assert_int_equal(recap__fake_now().vmm_ranges_live, 0);
  check();
}

static void empty_cache_trims_the_free_tail(void **state) {
  (void)state;
  reset();
  vmm_on();
  recap_stream_t s = recap__fake_stream_new();
  size_t free0 = 0, total = 0;
  OK(recap__device()->mem_get_info(&free0, &total));
  void *a, *b, *c;
  OK(recap_malloc(&a, 20 * MiB, s)); /* chunk 1: 20 MiB */
  OK(recap_malloc(&b, 20 * MiB, s)); /* chunk 2: 20 MiB */
  OK(recap_malloc(&c, 30 * MiB, s)); /* chunk 3: 30 MiB */
  assert_int_equal(stats().reserved_bytes[0].current, 70 * MiB);
  size_t free1 = 0;
  OK(recap__device()->mem_get_info(&free1, &total));
  assert_int_equal(free0 - free1, 70 * MiB);
  /* b and c free: one free tail of 50 MiB from offset 20 MiB; chunks 2 and 3 lie in it. */
  OK(recap_free(c));
  OK(recap_free(b));
  recap_memory_stats_t before = stats();
  OK(recap_empty_cache());
  recap_memory_stats_t st = stats();
  assert_int_equal(st.reserved_bytes[0].current, 20 * MiB);
  assert_int_equal(st.num_device_free - before.num_device_free, 2);
  assert_int_equal(st.segment[0].current, 1);
  assert_int_equal(st.inactive_split[0].current, 0); /* the tail block went whole */
  OK(recap__device()->mem_get_info(&free1, &total));
  assert_int_equal(free0 - free1, 20 * MiB);
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 20 * MiB);
  check();
  /* a freed too: the first chunk goes and the range is released. */
  OK(recap_free(a));
  OK(recap_empty_cache());
  st = stats();
  assert_int_equal(st.reserved_bytes[0].current, 0);
  assert_int_equal(st.segment[0].current, 0);
  assert_int_equal(st.segment[0].freed, 1);
  assert_int_equal(st.num_device_free, 3);
  assert_int_equal(recap__fake_now().vmm_ranges_live, 0);
  assert_int_equal(recap__fake_now().vmm_chunks_live, 0);
  OK(recap__device()->mem_get_info(&free1, &total));
  assert_int_equal(free1, free0);
  check();
}

static void trim_keeps_chunks_under_blocks_in_use(void **state) {
  (void)state;
  reset();
  vmm_on();
  recap_stream_t s = recap__fake_stream_new();
  void *a, *b;
  OK(recap_malloc(&a, 15 * MiB, s)); /* chunk 1: 20 MiB */
  OK(recap_malloc(&b, 10 * MiB, s)); /* chunk 2: 20 MiB; b spans both chunks */
  OK(recap_free(a));
  recap_memory_stats_t before = stats();
  OK(recap_empty_cache());
  recap_memory_stats_t st = stats();
  /* The free tail [25, 40) MiB holds no chunk wholly (chunk 2 is [20, 40)); a free head is no
   * tail: nothing goes. */
  assert_int_equal(st.reserved_bytes[0].current, 40 * MiB);
  assert_int_equal(st.num_device_free, before.num_device_free);
  check();
  /* b grows the tail's view: free a bigger tail after a third chunk and trim it. */
  void *c;
  OK(recap_malloc(&c, 30 * MiB, s)); /* 15 MiB free + 20 MiB: [25, 60) */
  OK(recap_free(c));
  OK(recap_empty_cache());
  st = stats();
  assert_int_equal(st.reserved_bytes[0].current, 40 * MiB); /* chunk 3 went, 2 stays */
  assert_int_equal(st.inactive_split[0].current, 2);        /* [0,15) and [25,40) */
  assert_int_equal(st.inactive_split_bytes[0].current, 30 * MiB);
  check();
  OK(recap_free(b));
  OK(recap_empty_cache());
  assert_int_equal(stats().reserved_bytes[0].current, 0);
  assert_int_equal(recap__fake_now().vmm_ranges_live, 0);
  check();
}

static void memory_cap_applies(void **state) {
  (void)state;
  reset();
  vmm_on();
  OK(recap_option_set("memory_cap", "24MiB"));
  recap_stream_t s = recap__fake_stream_new();
  void *a, *b;
  OK(recap_malloc(&a, 3 * MiB, s)); /* 20 MiB mapped */
  assert_int_equal(recap_malloc(&b, 18 * MiB, s), RECAP_ERROR_OUT_OF_MEMORY);
  assert_non_null(strstr(recap_last_error(), "memory_cap"));
  assert_non_null(strstr(recap_last_error(), "a growth of its VMM segment of 20.00 MiB"));
  assert_int_equal(stats().num_ooms, 1);
  assert_int_equal(stats().num_alloc_retries, 1);
  OK(recap_malloc(&b, 1 * MiB, s)); /* the small class's 2 MiB fits */
  assert_int_equal(stats().reserved_bytes[0].current, 22 * MiB);
  OK(recap_free(a));
  OK(recap_free(b));
  check();
}

static void out_of_memory_retries_and_reports(void **state) {
  (void)state;
  recap__fake_config_t cfg = {.device_count = 1, .memory_per_device = 64 * MiB};
  recap_test_reset(&cfg);
  vmm_on();
  recap_stream_t s = recap__fake_stream_new(), t = recap__fake_stream_new();
  void *p = (void *)0x1;
  assert_int_equal(recap_malloc(&p, 100 * MiB, s), RECAP_ERROR_OUT_OF_MEMORY);
  assert_null(p);
  const char *msg = recap_last_error();
  assert_non_null(strstr(msg, "asked for 100.00 MiB (a growth of its VMM segment of 100.00 MiB)"));
  assert_non_null(strstr(msg, "the device has 64.00 MiB free of 64.00 MiB"));
  recap_memory_stats_t st = stats();
  assert_int_equal(st.num_ooms, 1);
  assert_int_equal(st.num_alloc_retries, 1);
  assert_int_equal(st.segment[0].current, 0);
  assert_int_equal(recap__fake_now().vmm_ranges_live, 0); /* the new range was given back */
  check();
  /* t's segment caches 40 MiB free; s needs 40 MiB: the retry trims t's segment first. */
  void *a;
  OK(recap_malloc(&a, 40 * MiB, t));
  OK(recap_free(a));
  assert_int_equal(stats().reserved_bytes[0].current, 40 * MiB);
  OK(recap_malloc(&a, 40 * MiB, s));
  st = stats();
  assert_int_equal(st.num_alloc_retries, 2);
  assert_int_equal(st.num_ooms, 1);
  assert_int_equal(st.reserved_bytes[0].current, 40 * MiB);
  assert_int_equal(st.segment[0].current, 1);
  OK(recap_free(a));
  check();
}

/* The fault kinds of a growth's calls, and of a trim's. */
static const recap__fake_fault_t growth_faults[] = {
    RECAP__FAKE_FAULT_VMM_GRANULARITY, RECAP__FAKE_FAULT_VMM_RESERVE,
    RECAP__FAKE_FAULT_VMM_CREATE,      RECAP__FAKE_FAULT_VMM_MAP,
    RECAP__FAKE_FAULT_VMM_SET_ACCESS,
};
static const recap__fake_fault_t trim_faults[] = {
    RECAP__FAKE_FAULT_VMM_UNMAP,
    RECAP__FAKE_FAULT_VMM_RELEASE,
    RECAP__FAKE_FAULT_VMM_RELEASE_RANGE,
};

static bool same_stats(const recap_memory_stats_t *x, const recap_memory_stats_t *y) {
  return memcmp(x, y, sizeof *x) == 0;
}

/* A fault at each call of a growth (a first one, making the segment, and a later one): the
 * allocation fails (or the out-of-memory retry gets it), the checker passes, nothing counted,
 * nothing left mapped or reserved on the fake beyond what the allocator holds. */
static void fault_at_each_growth_call(void **state) {
  (void)state;
  for (size_t k = 0; k < sizeof growth_faults / sizeof *growth_faults; k++) {
    for (int later = 0; later < 2; later++) {
      reset();
      vmm_on();
      recap_stream_t s = recap__fake_stream_new();
      void *first = NULL, *p = (void *)0x1;
      if (later) OK(recap_malloc(&first, 20 * MiB, s));
      recap_memory_stats_t before = stats();
      recap__fake_counters_t fake_before = recap__fake_now();
      recap__fake_fail_nth(growth_faults[k], 1);
      recap_status_t r = recap_malloc(&p, 4 * MiB, s);
      recap__fake_fail_nth(growth_faults[k], 0);
      check();
      recap__fake_counters_t fake_after = recap__fake_now();
      if (growth_faults[k] == RECAP__FAKE_FAULT_VMM_CREATE) {
        /* Out of memory: the retry makes it. */
        OK(r);
        assert_int_equal(stats().num_alloc_retries, before.num_alloc_retries + 1);
        OK(recap_free(p));
      } else if (growth_faults[k] == RECAP__FAKE_FAULT_VMM_GRANULARITY && later) {
        /* Asked once per device: a later growth does not call it. */
        OK(r);
        OK(recap_free(p));
      } else if (growth_faults[k] == RECAP__FAKE_FAULT_VMM_RESERVE && later) {
        OK(r); /* no new range needed */
        OK(recap_free(p));
      } else {
        assert_int_not_equal(r, RECAP_SUCCESS);
        assert_null(p);
        /* The fake's message, naming the call; a granularity failure says what to do. */
        assert_non_null(strstr(recap_last_error(), "fault injected by the fake device"));
        if (growth_faults[k] == RECAP__FAKE_FAULT_VMM_GRANULARITY)
          assert_non_null(strstr(recap_last_error(), "Set expandable_segments:0"));
        recap_memory_stats_t after = stats();
        assert_true(same_stats(&before, &after));
        assert_int_equal(fake_after.vmm_chunks_live, fake_before.vmm_chunks_live);
        assert_int_equal(fake_after.vmm_bytes_mapped, fake_before.vmm_bytes_mapped);
        assert_int_equal(fake_after.vmm_ranges_live, fake_before.vmm_ranges_live);
        /* And the next try works. */
        OK(recap_malloc(&p, 4 * MiB, s));
        OK(recap_free(p));
      }
      check();
      if (first) OK(recap_free(first));
      OK(recap_empty_cache());
      check();
      assert_int_equal(recap__fake_now().vmm_chunks_live, 0);
      assert_int_equal(recap__fake_now().vmm_ranges_live, 0);
    }
  }
}

/* A fault at each call of a trim (of a tail, and of a whole segment): the checker passes, the
 * statistics say exactly what went, and a second recap_empty_cache finishes. */
static void fault_at_each_trim_call(void **state) {
  (void)state;
  for (size_t k = 0; k < sizeof trim_faults / sizeof *trim_faults; k++) {
    for (int whole = 0; whole < 2; whole++) {
      reset();
      vmm_on();
      recap_stream_t s = recap__fake_stream_new();
      void *a, *b;
      OK(recap_malloc(&a, 20 * MiB, s));
      OK(recap_malloc(&b, 20 * MiB, s));
      OK(recap_free(b));
      if (whole) OK(recap_free(a));
      recap_memory_stats_t before = stats();
      recap__fake_fail_nth(trim_faults[k], 1);
      recap_status_t r = recap_empty_cache();
      recap__fake_fail_nth(trim_faults[k], 0);
      check();
      recap_memory_stats_t st = stats();
      if (trim_faults[k] == RECAP__FAKE_FAULT_VMM_RELEASE_RANGE) {
        /* Only a whole segment releases its range: every chunk went; the range is kept
         * reserved by the fake, the segment is gone from recap. */
        OK(whole ? RECAP_SUCCESS : r);
        if (whole) assert_int_equal(r, RECAP_ERROR_CUDA);
        assert_int_equal(st.reserved_bytes[0].current, whole ? 0 : 20 * MiB);
      } else {
        /* The failing chunk is the last: nothing went. */
        assert_int_equal(r, RECAP_ERROR_CUDA);
        assert_true(same_stats(&before, &st));
        assert_int_equal(recap__fake_now().vmm_bytes_mapped, 40 * MiB);
        OK(recap_empty_cache());
        st = stats();
        assert_int_equal(st.reserved_bytes[0].current, whole ? 0 : 20 * MiB);
        assert_int_equal(st.num_device_free, before.num_device_free + (whole ? 2 : 1));
      }
      check();
      if (!whole) OK(recap_free(a));
      OK(recap_empty_cache());
      check();
      assert_int_equal(stats().segment[0].current, 0);
      assert_int_equal(recap__fake_now().vmm_chunks_live, 0);
    }
  }
}

/* A capture routed to a private pool grows the pool's own VMM segment; the default pool's stays
 * as it was, and the private pool keeps its memory while routed. */
static void capture_grows_a_private_pool_segment(void **state) {
  (void)state;
  reset();
  vmm_on();
  recap_stream_t s = recap__fake_stream_new();
  void *outside;
  OK(recap_malloc(&outside, 4 * MiB, s));
  recap_pool_id_t pool = recap_pool_handle();
  assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 0);
  OK(recap_pool_route_begin(pool, s));
  void *a, *b;
  OK(recap_malloc(&a, 15 * MiB, s));
  OK(recap_malloc(&b, 15 * MiB, s)); /* grows during the capture, which stays valid */
  assert_ptr_equal(b, (char *)a + 15 * MiB);
  recap_pool_memory_t m = pool_memory(pool);
  assert_int_equal(m.vmm_segments, 1);
  assert_int_equal(m.reserved_bytes, 40 * MiB);
  assert_int_equal(pool_memory(default_pool()).reserved_bytes, 20 * MiB);
  OK(recap_free(a));
  OK(recap_free(b));
  assert_true(recap__fake_capture_end(s)); /* not invalidated */
  OK(recap_pool_route_end(pool));
  check();
  OK(recap_free(outside));
  OK(recap_pool_release(pool));
  OK(recap_empty_cache());
  assert_int_equal(stats().reserved_bytes[0].current, 0);
  assert_int_equal(recap__fake_now().vmm_ranges_live, 0);
  check();
}

/* A graph captured with a growing private pool replays on it: its kernel's arguments are the
 * blocks the capture got, in the grown segment. */
static void add_one(void *const *args, size_t n) {
  (void)n;
  int *x = args[0];
  for (int i = 0; i < 1024; i++) x[i] += 1;
}

static recap_status_t step(void *ctx, recap_stream_t stream) {
  void **out = ctx;
  /* Two temporaries that need a growth of the pool's segment between them. */
  void *t1, *t2;
  RECAP__CHECK(recap_malloc(&t1, 15 * MiB, stream));
  RECAP__CHECK(recap_malloc(&t2, 15 * MiB, stream));
  const void *args[1] = {t2};
  recap__fake_launch_kernel_fn(stream, "add_one", add_one, args, 1);
  *out = t2;
  return recap_free(t1);
}

static void graph_replays_on_a_grown_segment(void **state) {
  (void)state;
  reset();
  vmm_on();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g = NULL;
  void *t2 = NULL;
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_capture_begin(g, s, NULL));
  recap_status_t st = step(&t2, s);
  OK(st);
  OK(recap_graph_capture_end(g)); /* instantiates it */
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  recap__segment_t *seg = only_segment(pool);
  assert_true(seg->vmm);
  assert_int_equal(seg->chunk_count, 2);
  assert_true((char *)t2 >= seg->base && (char *)t2 + 15 * MiB <= seg->base + seg->size);
  memset(t2, 0, 4096);
  for (int i = 0; i < 3; i++) OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  assert_int_equal(((int *)t2)[0], 3);
  assert_int_equal(((int *)t2)[1023], 3);
  OK(recap_free(t2));
  check();
  OK(recap_graph_destroy(g));
  OK(recap_empty_cache());
  assert_int_equal(stats().reserved_bytes[0].current, 0);
  check();
}

static void option_accepts_0_and_1_only(void **state) {
  (void)state;
  reset();
  OK(recap_options_parse("expandable_segments:1"));
  uint64_t v = 0;
  OK(recap_option_get("expandable_segments", &v));
  assert_int_equal(v, 1);
  EXPECT_STATUS(recap_option_set("expandable_segments", "2"), RECAP_ERROR_INVALID_VALUE);
  assert_non_null(strstr(recap_last_error(), "expandable_segments must be 0 (off) or 1 (on)"));
  OK(recap_option_get("expandable_segments", &v));
  assert_int_equal(v, 1);
}

/* A classic segment made before the option was turned on and VMM segments after it coexist in
 * one pool; each gives its memory back its own way. */
static void classic_and_vmm_segments_coexist(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  void *classic, *vmm;
  OK(recap_malloc(&classic, 3 * MiB, s)); /* a classic 20 MiB segment */
  vmm_on();
  OK(recap_malloc(&vmm, 30 * MiB, s)); /* does not fit: a VMM segment of 30 MiB */
  recap_memory_stats_t st = stats();
  assert_int_equal(st.segment[0].current, 2);
  assert_int_equal(st.reserved_bytes[0].current, 50 * MiB);
  assert_int_equal(pool_memory(default_pool()).vmm_segments, 1);
  void *more;
  OK(recap_malloc(&more, 4 * MiB, s)); /* best fit: the classic segment's free 17 MiB */
  assert_ptr_equal(more, (char *)classic + 3 * MiB);
  check();
  OK(recap_free(classic));
  OK(recap_free(vmm));
  OK(recap_free(more));
  OK(recap_empty_cache());
  st = stats();
  assert_int_equal(st.segment[0].current, 0);
  assert_int_equal(st.num_device_free, 2);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  check();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(growth_extends_one_segment),
    cmocka_unit_test(growth_after_an_allocated_last_block_adds_a_block),
    cmocka_unit_test(small_and_large_classes_and_streams_get_own_segments),
    cmocka_unit_test(empty_cache_trims_the_free_tail),
    cmocka_unit_test(trim_keeps_chunks_under_blocks_in_use),
    cmocka_unit_test(memory_cap_applies),
    cmocka_unit_test(out_of_memory_retries_and_reports),
    cmocka_unit_test(fault_at_each_growth_call),
    cmocka_unit_test(fault_at_each_trim_call),
    cmocka_unit_test(capture_grows_a_private_pool_segment),
    cmocka_unit_test(graph_replays_on_a_grown_segment),
    cmocka_unit_test(option_accepts_0_and_1_only),
    cmocka_unit_test(classic_and_vmm_segments_coexist),
};

int main(int argc, char **argv) { return RECAP_TEST_RUN(argc, argv, tests); }
