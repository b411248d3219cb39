/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_vmm_segments.c — segments on CUDA virtual memory (the expandable_segments option) on the
 * CPU fake: one segment per pool, size class and stream that grows at its end by what a
 * request lacks, in multiples of the granularity (the small class by a small_segment at least),
 * merges with a free last block, trims its free tail, releases its range when empty; memory_cap,
 * the out-of-memory retry and report; a fault at each VMM call of growth and trim leaving the
 * allocator as it was; captures into a private pool growing its segment, and bucket graphs
 * sharing one (the small class served by the large segment).
 *
 * The limits and faults are in vmm_segment_faults.c, a part of this program; vmm_segments_util.h
 * holds what they share.
 */
#include "vmm_segments_util.h"

RECAP_TEST(growth_extends_one_segment) {
  recap_stream_t s = vmm_device();
  /* A request of the large class maps what it asks for, rounded up to the granularity: no
   * large_segment's worth (20 MiB) at least. */
  void *a, *b, *c;
  OK(recap_malloc(&a, 12 * MiB, s));
  recap_memory_stats_t st = stats();
  assert_int_equal(st.segment[RECAP_STAT_LARGE].current, 1);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_LARGE].current, 12 * MiB);
  assert_int_equal(st.num_device_alloc, 1);
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 12 * MiB);
  assert_int_equal(recap__fake_now().vmm_ranges_live, 1);
  /* The range spans the device's memory. */
  assert_int_equal(recap__fake_now().vmm_bytes_reserved, (size_t)DEVICE_BYTES);
  assert_int_equal(pool_memory(default_pool()).vmm_segments, 1);
  assert_int_equal(pool_memory(default_pool()).vmm_reserved_va_bytes, (int64_t)DEVICE_BYTES);
  /* a fills the segment: a 4 MiB request maps 4 MiB more after it, in the same segment. */
  OK(recap_malloc(&b, 4 * MiB, s));
  assert_ptr_equal(b, (char *)a + 12 * MiB);
  st = stats();
  assert_int_equal(st.segment[RECAP_STAT_LARGE].current, 1);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_LARGE].current, 16 * MiB);
  assert_int_equal(st.num_device_alloc, 2);
  /* b freed is a free tail of 4 MiB: a request merges with it and maps what it lacks beyond
   * it, rounded up to the granularity: 45 MiB + 512 - 4 MiB rounds up to 42 MiB. The 1 MiB -
   * 512 left over is no more than small_size: the block is not split. */
  OK(recap_free(b));
  OK(recap_malloc(&c, 45 * MiB + 1, s));
  assert_ptr_equal(c, b);
  st = stats();
  assert_int_equal(st.segment[RECAP_STAT_ALL].current, 1);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, 58 * MiB);
  assert_int_equal(st.allocated_bytes[RECAP_STAT_ALL].current, 58 * MiB);
  assert_int_equal(st.num_device_alloc, 3);
  recap__segment_t *seg = only_segment(default_pool());
  assert_true(seg->vmm);
  assert_int_equal(seg->chunk_count, 3);
  assert_int_equal(seg->chunks[2].offset, 16 * MiB);
  assert_int_equal(seg->chunks[2].size, 42 * MiB);
  assert_ptr_equal(seg->base, a);
  check();
  FREE_ALL(a, c);
  check();
}

/* What a growth maps at least: the small class a small_segment, the large class nothing more
 * than the request lacks (large_segment plays no part), both rounded up to the granularity. */
RECAP_TEST(growth_least_per_class) {
  recap_stream_t s = vmm_device();
  OK(recap_option_set("small_segment", "4MiB"));
  OK(recap_option_set("large_segment", "32MiB"));
  void *small, *a, *b;
  OK(recap_malloc(&small, 1000, s));
  recap_memory_stats_t st = stats();
  assert_int_equal(st.reserved_bytes[RECAP_STAT_SMALL].current, 4 * MiB);
  OK(recap_malloc(&a, 3 * MiB, s));
  st = stats();
  assert_int_equal(st.reserved_bytes[RECAP_STAT_LARGE].current, 4 * MiB);
  OK(recap_malloc(&b, 5 * MiB, s));
  assert_ptr_equal(b, (char *)a + 4 * MiB);
  st = stats();
  assert_int_equal(st.reserved_bytes[RECAP_STAT_LARGE].current, 10 * MiB);
  assert_int_equal(st.segment[RECAP_STAT_ALL].current, 2);
  assert_int_equal(st.num_device_alloc, 3);
  check();
  FREE_ALL(small, a, b);
  check();
}

RECAP_TEST(growth_after_an_allocated_last_block_adds_a_block) {
  recap_stream_t s = vmm_device();
  void *a, *b;
  OK(recap_malloc(&a, 20 * MiB, s)); /* the whole first chunk */
  recap_memory_stats_t st = stats();
  assert_int_equal(st.inactive_split[0].current, 0);
  OK(recap_malloc(&b, 2 * MiB + 512 * KiB, s)); /* a chunk of 4 MiB */
  assert_ptr_equal(b, (char *)a + 20 * MiB);
  st = stats();
  assert_int_equal(st.reserved_bytes[0].current, 24 * MiB);
  /* The new chunk became a free block after a, then b split it: 1.5 MiB free, split. */
  assert_int_equal(st.inactive_split[0].current, 1);
  assert_int_equal(st.inactive_split_bytes[0].current, 1 * MiB + 512 * KiB);
  check();
  /* Freeing a leaves a free first block: the segment has three blocks. */
  OK(recap_free(a));
  st = stats();
  assert_int_equal(st.inactive_split[0].current, 2);
  assert_int_equal(st.inactive_split_bytes[0].current, 21 * MiB + 512 * KiB);
  OK(recap_free(b));
  st = stats();
  assert_int_equal(st.inactive_split[0].current, 0);
  check();
}

RECAP_TEST(small_and_large_classes_and_streams_get_own_segments) {
  recap_stream_t s = vmm_device(), t = recap__fake_stream_new();
  void *p[6];
  OK(recap_malloc(&p[0], 1000, s));
  OK(recap_malloc(&p[1], 2 * MiB, s));
  OK(recap_malloc(&p[2], 1000, t));
  OK(recap_malloc(&p[3], 2 * MiB, t));
  OK(recap_malloc(&p[4], 3 * MiB, s));   /* grows s's large segment by 4 MiB */
  OK(recap_malloc(&p[5], 100 * MiB, s)); /* grows it by 100 MiB, no own segment */
  recap_memory_stats_t st = stats();
  assert_int_equal(st.segment[RECAP_STAT_SMALL].current, 2);
  assert_int_equal(st.segment[RECAP_STAT_LARGE].current, 2);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_SMALL].current, 4 * MiB);
  /* s's large: 2 + 4 + 100 MiB; t's large: 2 MiB. */
  assert_int_equal(st.reserved_bytes[RECAP_STAT_LARGE].current, 108 * MiB);
  assert_ptr_equal(p[4], (char *)p[1] + 2 * MiB);
  /* p[4]'s block is its whole chunk: the 1 MiB left over is not split off. */
  assert_ptr_equal(p[5], (char *)p[4] + 4 * MiB);
  assert_int_equal(pool_memory(default_pool()).vmm_segments, 4);
  assert_int_equal(recap__fake_now().vmm_ranges_live, 4);
  check();
  for (int i = 0; i < 6; i++) OK(recap_free(p[i]));
  OK(recap_empty_cache());
  assert_int_equal(stats().segment[0].current, 0);
  assert_int_equal(recap__fake_now().vmm_ranges_live, 0);
  check();
}

RECAP_TEST(empty_cache_trims_the_free_tail) {
  recap_stream_t s = vmm_device();
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
  FREE_ALL(c, b);
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

/* The release gives back every chunk lying wholly inside a free block, wherever it is in the
 * segment: the live block after it keeps its address and contents; a reuse maps the hole again. */
RECAP_TEST(release_gives_back_free_chunks_anywhere) {
  recap_stream_t s = vmm_device();
  void *a, *b, *c;
  OK(recap_malloc(&a, 16 * MiB, s)); /* chunk 1: [0, 16) MiB */
  OK(recap_malloc(&b, 4 * MiB, s));  /* chunk 2: [16, 20) */
  OK(recap_free(b));
  OK(recap_malloc(&c, 2 * MiB, s)); /* splits b's block: c is [16, 18) */
  assert_ptr_equal(c, b);
  memset(c, 0x5a, 2 * MiB);
  OK(recap_free(a));
  recap_memory_stats_t before = stats();
  OK(recap_empty_cache());
  recap_memory_stats_t st = stats();
  /* Chunk 1 lies wholly in the free block [0, 16): it goes. Chunk 2 holds c: it stays, and so
   * does the free [18, 20) inside it. */
  assert_int_equal(st.reserved_bytes[0].current, 4 * MiB);
  assert_int_equal(st.num_device_free, before.num_device_free + 1);
  assert_int_equal(st.segment[0].current, 1);
  assert_int_equal(st.inactive_split[0].current, 2); /* [0,16) and [18,20): blocks stay */
  assert_int_equal(st.inactive_split_bytes[0].current, 18 * MiB);
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 4 * MiB);
  for (size_t i = 0; i < 2 * MiB; i += 4096) assert_int_equal(((unsigned char *)c)[i], 0x5a);
  check();
  /* A request of the hole's size takes it back at the same address, mapped again. */
  void *a2;
  OK(recap_malloc(&a2, 16 * MiB, s));
  assert_ptr_equal(a2, a);
  assert_int_equal(stats().reserved_bytes[0].current, 20 * MiB);
  assert_int_equal(stats().num_device_alloc, st.num_device_alloc + 1);
  memset(a2, 1, 16 * MiB); /* mapped: the fake would fault on a hole */
  check();
  /* A bigger tail after a third chunk: given back whole, the segment's end cut. */
  void *d;
  OK(recap_malloc(&d, 30 * MiB, s)); /* 2 MiB free + chunk of 28 MiB: d is [18, 48) */
  assert_ptr_equal(d, (char *)c + 2 * MiB);
  assert_int_equal(stats().reserved_bytes[0].current, 48 * MiB);
  FREE_ALL(d, a2);
  OK(recap_empty_cache());
  st = stats();
  assert_int_equal(st.reserved_bytes[0].current, 4 * MiB); /* only chunk 2, under c */
  assert_int_equal(st.inactive_split[0].current, 2);       /* [0,16) and [18,20) */
  assert_int_equal(st.inactive_split_bytes[0].current, 18 * MiB);
  check();
  OK(recap_free(c));
  expect_no_range_left();
}

/* A graph's pool keeps only what outlives the capture: a temporary captured before an output
 * goes back at recap_empty_cache once the pool is released, though the live output sits after
 * it in the segment. */
RECAP_TEST(a_released_pool_gives_back_the_temporary_before_its_output) {
  recap_stream_t s = vmm_device();
  recap_pool_id_t pool = recap_pool_handle();
  assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 0);
  OK(recap_pool_route_begin(pool, s));
  void *temp, *out;
  OK(recap_malloc(&temp, 16 * MiB, s));
  OK(recap_malloc(&out, 16 * MiB, s));
  OK(recap_free(temp));
  assert_true(recap__fake_capture_end(s));
  OK(recap_pool_route_end(pool));
  OK(recap_pool_release(pool)); /* the graph's reset */
  assert_int_equal(pool_memory(pool).reserved_bytes, 32 * MiB);
  OK(recap_empty_cache());
  assert_int_equal(pool_memory(pool).reserved_bytes, 16 * MiB);
  assert_int_equal(stats().reserved_bytes[0].current, 16 * MiB);
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 16 * MiB);
  memset(out, 3, 16 * MiB); /* still mapped, at its address */
  check();
  OK(recap_free(out));
  expect_no_range_left();
}

/* A segment with holes sleeps and wakes: the wake maps what the blocks in use touch, their
 * contents come back (OFFLOAD), the holes stay holes until a request takes them. */
RECAP_TEST(a_segment_with_holes_sleeps_and_wakes) {
  recap_stream_t s = vmm_device();
  void *a, *c;
  OK(recap_malloc(&a, 16 * MiB, s));
  OK(recap_malloc(&c, 4 * MiB, s));
  memset(c, 0x3c, 4 * MiB);
  OK(recap_free(a));
  OK(recap_empty_cache()); /* [0, 16) becomes a hole */
  assert_int_equal(stats().reserved_bytes[0].current, 4 * MiB);
  OK(recap_pool_sleep(default_pool(), RECAP_SLEEP_OFFLOAD));
  check();
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 0);
  OK(recap_pool_wake(default_pool()));
  check();
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 4 * MiB);
  assert_int_equal(stats().reserved_bytes[0].current, 4 * MiB);
  for (size_t i = 0; i < 4 * MiB; i += 4096) assert_int_equal(((unsigned char *)c)[i], 0x3c);
  void *a2;
  OK(recap_malloc(&a2, 16 * MiB, s)); /* the hole, mapped again */
  assert_ptr_equal(a2, a);
  memset(a2, 0, 16 * MiB);
  assert_int_equal(stats().reserved_bytes[0].current, 20 * MiB);
  check();
  FREE_ALL(a2, c);
  expect_no_range_left();
}

/* A request that takes a free block with holes holds the rest too when the rest is too small to
 * split off (no more than small_size): the holes in that rest are mapped again as well, so that
 * every byte of the block it gets is mapped (a fuzzer wrote past the request's end into one). */
RECAP_TEST(an_unsplit_rest_is_mapped_too) {
  const size_t G = 64 * KiB;
  recap__fake_config_t cfg = {.device_count = 1,
                              .vmm_granularity = G,
                              .memory_per_device = 64 * MiB};
  recap_test_reset(&cfg);
  vmm_on();
  recap_stream_t s = recap__fake_stream_new();
  void *a, *b, *c;
  OK(recap_malloc(&a, 20 * G, s)); /* a chunk each */
  OK(recap_malloc(&b, 18 * G, s)); /* over 1 MiB: the large class too */
  OK(recap_malloc(&c, 17 * G, s)); /* keeps the segment's end in use (the large class) */
  FREE_ALL(a, b);
  OK(recap_empty_cache()); /* [0, 38 G) free and unmapped */
  assert_int_equal(stats().reserved_bytes[0].current, (int64_t)(17 * G));
  void *d;
  OK(recap_malloc(&d, 22 * G + 512, s)); /* the rest, under 16 G = 1 MiB, is not split off */
  assert_ptr_equal(d, a);
  recap_block_info_t info = RECAP_BLOCK_INFO_INIT;
  OK(recap_block_info(d, &info));
  assert_int_equal(info.bytes, 38 * G);
  memset(d, 1, info.bytes); /* all of it mapped: the fake would fault on a hole */
  assert_int_equal(stats().reserved_bytes[0].current, (int64_t)(55 * G));
  check();
  FREE_ALL(d, c);
  expect_all_released();
}

/* A block whose holes lie on both sides of a chunk still mapped: a request over all of it maps
 * both, the chunk list growing for them (its room was once reserved for one chunk only). */
RECAP_TEST(holes_on_both_sides_of_a_chunk_are_mapped) {
  recap_stream_t s = vmm_device();
  void *a, *c1, *c2, *x, *y;
  OK(recap_malloc(&a, 16 * MiB, s));
  OK(recap_malloc(&c1, 4 * MiB, s));
  OK(recap_malloc(&c2, 4 * MiB, s)); /* three chunks, room for four */
  OK(recap_free(a));
  OK(recap_empty_cache());          /* [0, 16) a hole */
  OK(recap_malloc(&x, 4 * MiB, s)); /* [0, 4) mapped again */
  OK(recap_malloc(&y, 4 * MiB, s)); /* [4, 8) mapped again */
  assert_ptr_equal(x, a);
  OK(recap_free(x));
  OK(recap_empty_cache()); /* [0, 4) a hole again; y's chunk stays */
  OK(recap_free(y));       /* [0, 16) free: holes [0, 4) and [8, 16), a chunk between */
  recap__segment_t *seg = only_segment(default_pool());
  assert_int_equal(seg->chunk_count, 3);
  assert_int_equal(seg->chunk_capacity, 4);
  void *d;
  OK(recap_malloc(&d, 16 * MiB, s)); /* maps two holes: five chunks */
  assert_ptr_equal(d, a);
  memset(d, 2, 16 * MiB);
  assert_int_equal(seg->chunk_count, 5);
  assert_int_equal(stats().reserved_bytes[0].current, 24 * MiB);
  check();
  FREE_ALL(d, c1, c2);
  expect_all_released();
}

/* A capture routed to a private pool grows the pool's own VMM segment; the default pool's stays
 * as it was, and the private pool keeps its memory while routed. */
RECAP_TEST(capture_grows_a_private_pool_segment) {
  recap_stream_t s = vmm_device();
  void *outside;
  OK(recap_malloc(&outside, 4 * MiB, s));
  recap_pool_id_t pool = recap_pool_handle();
  assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 0);
  OK(recap_pool_route_begin(pool, s));
  void *a, *b;
  OK(recap_malloc(&a, 14 * MiB, s));
  OK(recap_malloc(&b, 14 * MiB, s)); /* grows during the capture, which stays valid */
  assert_ptr_equal(b, (char *)a + 14 * MiB);
  recap_pool_memory_t m = pool_memory(pool);
  assert_int_equal(m.vmm_segments, 1);
  assert_int_equal(m.reserved_bytes, 28 * MiB);
  assert_int_equal(stats().num_device_alloc, 3);
  assert_int_equal(pool_memory(default_pool()).reserved_bytes, 4 * MiB);
  FREE_ALL(a, b);
  assert_true(recap__fake_capture_end(s)); /* not invalidated */
  OK(recap_pool_route_end(pool));
  check();
  OK(recap_free(outside));
  OK(recap_pool_release(pool));
  expect_no_range_left();
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

RECAP_TEST(graph_replays_on_a_grown_segment) {
  recap_stream_t s = vmm_device();
  recap_graph_t g = NULL;
  void *t2 = NULL;
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_capture_begin(g, NULL, s));
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
  expect_all_released();
}

/* A recapture whose allocation the replay rule sends to "a new segment" while an unused entry
 * of the old log claims the VMM segment's free tail: the segment grows by the whole request and
 * the allocation goes past the claims, so the later entries still get their addresses. */
RECAP_TEST(a_replay_keeps_the_claimed_tail) {
  reset_with_memory(DEVICE_BYTES);
  vmm_on();
  int device = 0;
  OK(recap__alloc_current_device(&device));
  recap_stream_t s = recap__fake_stream_new();
  recap_pool_id_t pool = recap_pool_handle();
  recap__alloc_log_t first = {0}, second = {0};
  uint64_t hits = 0, misses = 0;
  void *a, *b, *c;
  /* The first capture fills the 2 MiB small segment: a, b at 512 KiB, c at 1 MiB. */
  assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 0);
  OK(recap_pool_route_begin(pool, s));
  OK(recap__pool_route_set_logs(device, pool, &first, NULL));
  OK(recap_malloc(&a, 512 * KiB, s));
  OK(recap_malloc(&b, 512 * KiB, s));
  OK(recap_malloc(&c, 1 * MiB, s));
  FREE_ALL(a, b, c);
  assert_true(recap__fake_capture_end(s));
  OK(recap_pool_route_end(pool));
  assert_int_equal(pool_memory(pool).reserved_bytes, 2 * MiB);
  /* The recapture asks for 768 KiB after a: no entry of its size, and b's and c's entries claim
   * the whole free tail [512 KiB, 2 MiB). */
  void *a2, *e, *b2, *c2;
  assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 0);
  OK(recap_pool_route_begin(pool, s));
  OK(recap__pool_route_set_logs(device, pool, &second, &first));
  OK(recap_malloc(&a2, 512 * KiB, s));
  OK(recap_malloc(&e, 768 * KiB, s));
  OK(recap_malloc(&b2, 512 * KiB, s));
  OK(recap_malloc(&c2, 1 * MiB, s));
  OK(recap__pool_route_replay_stats(device, pool, &hits, &misses));
  assert_ptr_equal(a2, a);
  assert_ptr_equal(e, (char *)a + 2 * MiB); /* past the claims, in the 2 MiB the growth mapped */
  assert_ptr_equal(b2, b);
  assert_ptr_equal(c2, c);
  assert_int_equal(hits, 3);
  assert_int_equal(misses, 1);
  recap_pool_memory_t m = pool_memory(pool);
  assert_int_equal(m.reserved_bytes, 4 * MiB);
  assert_int_equal(m.vmm_segments, 1);
  check();
  FREE_ALL(a2, e, b2, c2);
  assert_true(recap__fake_capture_end(s));
  OK(recap_pool_route_end(pool));
  recap__alloc_log_free(&first);
  recap__alloc_log_free(&second);
  OK(recap_pool_release(pool)); /* one reference per route_begin */
  OK(recap_pool_release(pool));
  expect_all_released();
}

/* Eight bucket graphs sharing one pool (a serving loop's batch sizes b = 512, 256, .., 4), each
 * capturing three temporaries of b x 4096 floats that it frees: the large class's segment maps
 * the largest bucket's three (24 MiB), which every later bucket reuses, the small class's
 * temporaries of b <= 64 (1 MiB and less) too: a graph pool's small requests take the large
 * segment's free blocks (test_vmm_small.c tests the rule). */
RECAP_TEST(bucket_graphs_sharing_a_pool_map_what_the_largest_uses) {
  recap_stream_t s = vmm_device();
  static const size_t batch[8] = {512, 256, 128, 64, 32, 16, 8, 4};
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.pool = recap_pool_handle();
  recap_graph_t g[8];
  for (int k = 0; k < 8; k++) {
    void *t[3];
    OK(recap_graph_create(&g[k], 0));
    OK(recap_graph_capture_begin(g[k], &o, s));
    for (int j = 0; j < 3; j++) OK(recap_malloc(&t[j], batch[k] * 4096 * sizeof(float), s));
    recap__fake_launch_kernel(s, "bucket");
    for (int j = 0; j < 3; j++) OK(recap_free(t[j]));
    OK(recap_graph_capture_end(g[k]));
  }
  recap_pool_memory_t m = pool_memory(o.pool);
  assert_int_equal(m.vmm_segments, 1);
  assert_int_equal(m.reserved_bytes, 24 * MiB);
  recap_memory_stats_t st = stats();
  assert_int_equal(st.reserved_bytes[RECAP_STAT_LARGE].current, 24 * MiB);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_SMALL].current, 0);
  assert_int_equal(st.num_device_alloc, 3);
  check();
  for (int k = 0; k < 8; k++) OK(recap_graph_destroy(g[k]));
  expect_all_released();
}

/* The checker sees a VMM segment whose chunks leave it, do not account for its bytes, or whose
 * bytes pass its range; and a hole where a block in use lies. */
RECAP_TEST(checker_catches_vmm_corruption) {
  recap_stream_t s = vmm_device();
  void *a, *b;
  OK(recap_malloc(&a, 20 * MiB, s));
  OK(recap_malloc(&b, 20 * MiB, s));
  check();
  recap__segment_t *seg = only_segment(default_pool());
  assert_int_equal(seg->chunk_count, 2);
  seg->chunks[1].offset += GRAN;
  EXPECT_STATUS(recap_memory_check(), RECAP_ERROR_INTERNAL);
  assert_non_null(strstr(recap_last_error(),
                         "chunk 1 (20971520 bytes at offset 23068672) does "
                         "not lie after offset 20971520 inside the segment's 41943040 bytes"));
  seg->chunks[1].offset -= GRAN;
  seg->chunks[1].size -= GRAN;
  EXPECT_STATUS(recap_memory_check(), RECAP_ERROR_INTERNAL);
  assert_non_null(strstr(recap_last_error(),
                         "its chunks map 39845888 bytes and it counts 0 "
                         "unmapped of 41943040"));
  seg->chunks[1].size += GRAN;
  size_t va = seg->va_size;
  seg->va_size = 20 * MiB;
  EXPECT_STATUS(recap_memory_check(), RECAP_ERROR_INTERNAL);
  assert_non_null(strstr(recap_last_error(), "spans 41943040 bytes of a range of 20971520"));
  seg->va_size = va;
  check();
  /* A block in use over a hole: chunk 1 (under b) forgotten, counted as unmapped. */
  recap__vmm_chunk_t gone = seg->chunks[1];
  seg->chunk_count = 1;
  seg->unmapped += gone.size;
  EXPECT_STATUS(recap_memory_check(), RECAP_ERROR_INTERNAL);
  assert_non_null(strstr(recap_last_error(), "in use, touches 20971520 unmapped bytes"));
  seg->chunk_count = 2;
  seg->unmapped -= gone.size;
  check();
  FREE_ALL(a, b);
  check();
}

RECAP_TEST(option_accepts_0_and_1_only) {
  reset_with_memory(DEVICE_BYTES);
  OK(recap_options_parse("expandable_segments:1"));
  assert_int_equal(option_now("expandable_segments"), 1);
  EXPECT_STATUS(recap_option_set("expandable_segments", "2"), RECAP_ERROR_INVALID_VALUE);
  assert_non_null(strstr(recap_last_error(),
                         "expandable_segments has value '2', which is not a "
                         "boolean (true or false in any case, or 1 or 0)"));
  EXPECT_STATUS(recap_option_set_u64("expandable_segments", 2), RECAP_ERROR_INVALID_VALUE);
  assert_non_null(strstr(recap_last_error(), "expandable_segments must be 0 (off) or 1 (on)"));
  assert_int_equal(option_now("expandable_segments"), 1);
}

/* A device without virtual memory management: the allocation fails, saying what to do, and
 * classic segments work. */
RECAP_TEST(a_device_without_vmm_says_so) {
  recap__fake_config_t cfg = {.device_count = 1, .vmm_unsupported = true};
  recap_test_reset(&cfg);
  vmm_on();
  recap_stream_t s = recap__fake_stream_new();
  void *p = (void *)0x1;
  EXPECT_STATUS(recap_malloc(&p, 4096, s), RECAP_ERROR_NOT_SUPPORTED);
  assert_null(p);
  assert_non_null(strstr(recap_last_error(),
                         "recap_malloc: the expandable_segments option needs the device's "
                         "virtual memory management, which failed: "));
  assert_non_null(strstr(recap_last_error(), "Set expandable_segments:0 on this device"));
  assert_int_equal(stats().num_ooms, 0);
  check();
  OK(recap_option_set_u64("expandable_segments", 0));
  OK(recap_malloc(&p, 4096, s));
  assert_int_equal(stats().segment[0].current, 1);
  OK(recap_free(p));
  check();
}

/* A classic segment made before the option was turned on and VMM segments after it coexist in
 * one pool; each gives its memory back its own way. */
RECAP_TEST(classic_and_vmm_segments_coexist) {
  reset_with_memory(DEVICE_BYTES);
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
  FREE_ALL(classic, vmm, more);
  OK(recap_empty_cache());
  st = stats();
  assert_int_equal(st.segment[0].current, 0);
  assert_int_equal(st.num_device_free, 2);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  check();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(growth_extends_one_segment),
    cmocka_unit_test(growth_least_per_class),
    cmocka_unit_test(growth_after_an_allocated_last_block_adds_a_block),
    cmocka_unit_test(small_and_large_classes_and_streams_get_own_segments),
    cmocka_unit_test(empty_cache_trims_the_free_tail),
    cmocka_unit_test(release_gives_back_free_chunks_anywhere),
    cmocka_unit_test(a_released_pool_gives_back_the_temporary_before_its_output),
    cmocka_unit_test(a_segment_with_holes_sleeps_and_wakes),
    cmocka_unit_test(an_unsplit_rest_is_mapped_too),
    cmocka_unit_test(holes_on_both_sides_of_a_chunk_are_mapped),
    cmocka_unit_test(capture_grows_a_private_pool_segment),
    cmocka_unit_test(graph_replays_on_a_grown_segment),
    cmocka_unit_test(a_replay_keeps_the_claimed_tail),
    cmocka_unit_test(bucket_graphs_sharing_a_pool_map_what_the_largest_uses),
    cmocka_unit_test(option_accepts_0_and_1_only),
    cmocka_unit_test(classic_and_vmm_segments_coexist),
    cmocka_unit_test(a_device_without_vmm_says_so),
    cmocka_unit_test(checker_catches_vmm_corruption),
};

extern const recap_test_part_t vmm_segment_fault_tests;

int main(int argc, char **argv) {
  const recap_test_part_t parts[] = {RECAP_TEST_PART(tests), vmm_segment_fault_tests};
  return RECAP_TEST_RUN_PARTS(argc, argv, parts);
}
