/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_alloc_replay.c — the allocation log of a capture and its replay at a recapture
 * (src/alloc/replay.c) on the CPU fake device: an identical sequence gets identical addresses
 * and the pool does not grow over many recaptures; an output the caller kept gets a new
 * address while the others keep theirs; a sequence that differs (an extra allocation, a bigger
 * one, fewer) still works and grows the pool only by what is new; the record log's contents;
 * host memory failures of the log; the max_split_size rules; the errors of the attach.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "fake/fake.h"
#include "fake_util.h"
#include "harness.h"
#include "host_faults.h"
#include "recap.h"

static int device(void) {
  int d;
  OK(recap__alloc_current_device(&d));
  return d;
}

/* Begin a capture on s routed to pool, as a graph's capture does, no logs attached yet. */
static void begin_routed(recap_stream_t s, recap_pool_id_t pool) {
  assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 0);
  OK(recap_pool_route_begin(pool, s));
}

/* The same with logs attached. */
static void begin(recap_stream_t s, recap_pool_id_t pool, recap__alloc_log_t *record,
                  const recap__alloc_log_t *replay) {
  begin_routed(s, pool);
  OK(recap__pool_route_set_logs(device(), pool, record, replay));
}

/* End the capture and its route. */
static void end_routed(recap_stream_t s, recap_pool_id_t pool) {
  assert_true(recap__fake_capture_end(s));
  OK(recap_pool_route_end(pool));
}

/* End it, with the route's counters read before the route ends. */
static void end(recap_stream_t s, recap_pool_id_t pool, uint64_t *hits, uint64_t *misses) {
  OK(recap__pool_route_replay_stats(device(), pool, hits, misses));
  end_routed(s, pool);
}

/* The log holds n entries: ptrs[i] with sizes[i], in order. */
static void expect_log(const recap__alloc_log_t *log, void *const *ptrs, const size_t *sizes,
                       int n) {
  assert_int_equal(log->count, n);
  for (int i = 0; i < n; i++) {
    assert_ptr_equal(log->v[i].ptr, ptrs[i]);
    assert_int_equal(log->v[i].size, sizes[i]);
  }
}

/* A replay log of the given n entries, as no capture recorded it. */
static void forge_log(recap__alloc_log_t *log, const struct recap__alloc_log_entry *entries,
                      size_t n) {
  log->v = malloc(n * sizeof *log->v);
  assert_non_null(log->v);
  memcpy(log->v, entries, n * sizeof *log->v);
  log->count = log->capacity = n;
}

/* Free two logs (either may be NULL), release the pool, and run the checker. */
static void release(recap_pool_id_t pool, recap__alloc_log_t *a, recap__alloc_log_t *b) {
  recap__alloc_log_free(a);
  recap__alloc_log_free(b);
  OK(recap_pool_release(pool));
  check();
}

/* Swap the logs for the next recapture: what was recorded is replayed, the old replay log is
 * emptied to record into. */
static void next_logs(recap__alloc_log_t **record, recap__alloc_log_t **replay) {
  recap__alloc_log_t *t = *replay;
  *replay = *record;
  *record = t;
  recap__alloc_log_free(*record);
}

/* ------------------------------------------------------------------------------------------
 * A step like a model's: small and large requests, intermediates freed during the capture, and
 * three outputs. ptrs[i] is the i-th allocation; outputs are ptrs[1], ptrs[4], ptrs[5]. A fresh
 * pool gets a small segment S (a, b, d), a large one L of 20 MiB (c, then f) and e's own of
 * 18 MiB, made after L.
 * ---------------------------------------------------------------------------------------- */

enum { STEP_ALLOCS = 6 };
static const size_t step_sizes[STEP_ALLOCS] = {300 * KiB, 512,      3 * MiB,
                                               700 * KiB, 18 * MiB, 3 * MiB};

static void step(recap_stream_t s, void *ptrs[STEP_ALLOCS]) {
  OK(recap_malloc(&ptrs[0], step_sizes[0], s)); /* a: small, an intermediate */
  OK(recap_malloc(&ptrs[1], step_sizes[1], s)); /* b: small, an output */
  OK(recap_malloc(&ptrs[2], step_sizes[2], s)); /* c: large, an intermediate */
  OK(recap_free(ptrs[0]));
  OK(recap_malloc(&ptrs[3], step_sizes[3], s)); /* d: small, an intermediate */
  OK(recap_malloc(&ptrs[4], step_sizes[4], s)); /* e: its own segment (c's has 17 MiB left) */
  OK(recap_free(ptrs[2]));
  OK(recap_malloc(&ptrs[5], step_sizes[5], s)); /* f: large, where c was, an output */
  OK(recap_free(ptrs[3]));
  check();
}

static void free_outputs(void *ptrs[STEP_ALLOCS]) { FREE_ALL(ptrs[1], ptrs[4], ptrs[5]); }

RECAP_TEST(identical_sequences_get_identical_addresses) {
  recap_stream_t s = stream_after_reset();
  recap_pool_id_t pool = recap_pool_handle();
  recap__alloc_log_t logs[2] = {{0}, {0}}, *record = &logs[0], *replay = NULL;
  uint64_t hits, misses;
  void *first[STEP_ALLOCS], *now[STEP_ALLOCS];

  begin(s, pool, record, NULL);
  step(s, first);
  end(s, pool, &hits, &misses);
  /* Recording only: every allocation is a miss, and the log holds them all, in order. */
  assert_int_equal(hits, 0);
  assert_int_equal(misses, STEP_ALLOCS);
  expect_log(record, first, step_sizes, STEP_ALLOCS); /* the sizes: multiples of 512 already */
  assert_false(record->incomplete);
  free_outputs(first);
  recap_pool_memory_t after_first = pool_info(pool);
  if (vmm_segments_on()) {
    /* One VMM segment per class: c mapped a 4 MiB chunk of the large one (3 MiB rounded up to
     * the granularity), and e grew it by its 18 MiB. */
    assert_int_equal(after_first.segments, 2);
    assert_int_equal(after_first.reserved_bytes, (int64_t)(2 * MiB + 4 * MiB + 18 * MiB));
  } else {
    assert_int_equal(after_first.segments, 3);
    assert_int_equal(after_first.reserved_bytes, (int64_t)(2 * MiB + 20 * MiB + 18 * MiB));
  }
  check();

  replay = &logs[1];
  next_logs(&record, &replay);
  for (int round = 0; round < 100; round++) {
    begin(s, pool, record, replay);
    step(s, now);
    end(s, pool, &hits, &misses);
    for (int i = 0; i < STEP_ALLOCS; i++) assert_ptr_equal(now[i], first[i]);
    assert_int_equal(hits, STEP_ALLOCS);
    assert_int_equal(misses, 0);
    assert_int_equal(record->count, STEP_ALLOCS);
    assert_memory_equal(record->v, replay->v, STEP_ALLOCS * sizeof *record->v);
    free_outputs(now);
    recap_pool_memory_t info = pool_info(pool);
    assert_int_equal(info.segments, after_first.segments);
    assert_int_equal(info.reserved_bytes, after_first.reserved_bytes);
    assert_int_equal(info.allocated_bytes, 0);
    check();
    next_logs(&record, &replay);
  }
  release(pool, &logs[0], &logs[1]);
}

/* The control of the test above: without a replay log the usual best fit puts the second
 * capture's c into e's 18 MiB segment (the smallest free large block), and e into L, so the
 * replay is what keeps the addresses. */
RECAP_TEST(without_replay_the_best_fit_moves_blocks) {
  recap_stream_t s = stream_after_reset();
  recap_pool_id_t pool = recap_pool_handle();
  recap__alloc_log_t record = {0};
  uint64_t hits, misses;
  void *first[STEP_ALLOCS], *now[STEP_ALLOCS];
  begin(s, pool, &record, NULL);
  step(s, first);
  end(s, pool, &hits, &misses);
  free_outputs(first);
  recap__alloc_log_free(&record);
  assert_int_equal(record.count, 0);
  begin(s, pool, &record, NULL);
  step(s, now);
  end(s, pool, &hits, &misses);
  assert_int_equal(hits, 0);
  if (vmm_segments_on()) {
    /* In one VMM segment the freed outputs merge into one free block of 22 MiB. The first
     * capture's c had its 4 MiB chunk whole (the 1 MiB rest is not split off), and e the chunk
     * after it; now c splits 3 MiB off the free block's start and e takes the 19 MiB after c:
     * e moves down by 1 MiB, and f takes c's place again. */
    assert_ptr_equal(now[2], first[2]);
    assert_ptr_equal(now[4], (char *)first[4] - 1 * MiB);
    assert_ptr_equal(now[5], first[5]);
  } else {
    assert_ptr_equal(now[2], first[4]);
    assert_ptr_equal(now[4], first[2]);
  }
  free_outputs(now);
  release(pool, &record, NULL);
}

RECAP_TEST(a_kept_output_gets_a_new_address) {
  recap_stream_t s = stream_after_reset();
  recap_pool_id_t pool = recap_pool_handle();
  recap__alloc_log_t first_log = {0}, second_log = {0};
  uint64_t hits, misses;
  void *first[STEP_ALLOCS], *now[STEP_ALLOCS];
  begin(s, pool, &first_log, NULL);
  step(s, first);
  end(s, pool, &hits, &misses);
  /* The caller keeps b (first[1]) and frees the other outputs. */
  FREE_ALL(first[4], first[5]);
  int64_t reserved = pool_info(pool).reserved_bytes;

  begin(s, pool, &second_log, &first_log);
  step(s, now);
  end(s, pool, &hits, &misses);
  assert_int_equal(hits, STEP_ALLOCS - 1);
  assert_int_equal(misses, 1);
  for (int i = 0; i < STEP_ALLOCS; i++)
    if (i != 1) assert_ptr_equal(now[i], first[i]);
  /* b cannot be handed out twice: it goes to S's free space past d's range, which d's unused
   * entry claims, so d still gets its address and the pool does not grow. */
  assert_ptr_equal(now[1], (char *)first[3] + 700 * KiB);
  assert_int_equal(pool_info(pool).reserved_bytes, reserved);
  assert_ptr_equal(second_log.v[1].ptr, now[1]);
  check();
  OK(recap_free(first[1]));
  free_outputs(now);
  release(pool, &first_log, &second_log);
}

/* A kept output with no unclaimed room left in the pool: the allocation gets a new segment of
 * its own size, and nothing else grows. */
RECAP_TEST(a_kept_output_with_no_room_grows_the_pool_by_itself) {
  recap_stream_t s = stream_after_reset();
  recap_pool_id_t pool = recap_pool_handle();
  recap__alloc_log_t first_log = {0}, second_log = {0};
  uint64_t hits, misses;
  void *out1, *out2, *tmp1, *tmp2;
  begin(s, pool, &first_log, NULL);
  OK(recap_malloc(&out1, 12 * MiB, s));
  OK(recap_malloc(&tmp1, 1 * MiB, s));
  OK(recap_free(tmp1));
  end(s, pool, &hits, &misses);
  recap_pool_memory_t before = pool_info(pool);
  begin(s, pool, &second_log, &first_log);
  OK(recap_malloc(&out2, 12 * MiB, s));
  OK(recap_malloc(&tmp2, 1 * MiB, s));
  OK(recap_free(tmp2));
  end(s, pool, &hits, &misses);
  assert_ptr_not_equal(out2, out1);
  assert_ptr_equal(tmp2, tmp1);
  assert_int_equal(hits, 1);
  assert_int_equal(misses, 1);
  recap_pool_memory_t after = pool_info(pool);
  if (vmm_segments_on()) {
    /* out1 fills the large VMM segment: it grows by out2's 12 MiB, and out2 follows out1. */
    assert_ptr_equal(out2, (char *)out1 + 12 * MiB);
    assert_int_equal(after.segments, before.segments);
    assert_int_equal(after.reserved_bytes, before.reserved_bytes + (int64_t)(12 * MiB));
  } else {
    assert_int_equal(after.segments, before.segments + 1);
    assert_int_equal(after.reserved_bytes, before.reserved_bytes + (int64_t)(12 * MiB));
  }
  FREE_ALL(out1, out2);
  release(pool, &first_log, &second_log);
}

/* ------------------------------------------------------------------------------------------
 * Sequences that differ from the log. Three small requests A, B, C of 256 KiB share one 2 MiB
 * small segment at offsets 0, 256 KiB and 512 KiB.
 * ---------------------------------------------------------------------------------------- */

typedef struct abc {
  recap_stream_t s;
  recap_pool_id_t pool;
  recap__alloc_log_t log, next;
  void *p[3];
  char *base;
  int64_t reserved;
} abc_t;

static void abc_first(abc_t *t) {
  reset();
  t->s = recap__fake_stream_new();
  t->pool = recap_pool_handle();
  memset(&t->log, 0, sizeof t->log);
  memset(&t->next, 0, sizeof t->next);
  uint64_t hits, misses;
  begin(t->s, t->pool, &t->log, NULL);
  for (int i = 0; i < 3; i++) OK(recap_malloc(&t->p[i], 256 * KiB, t->s));
  end(t->s, t->pool, &hits, &misses);
  for (int i = 0; i < 3; i++) OK(recap_free(t->p[i]));
  t->base = t->p[0];
  assert_ptr_equal(t->p[1], t->base + 256 * KiB);
  assert_ptr_equal(t->p[2], t->base + 512 * KiB);
  t->reserved = pool_info(t->pool).reserved_bytes;
  assert_int_equal(t->reserved, (int64_t)(2 * MiB));
  check();
}

static void abc_done(abc_t *t) {
  recap__alloc_log_free(&t->log);
  recap__alloc_log_free(&t->next);
  OK(recap_pool_release(t->pool));
  assert_int_equal(pool_info(t->pool).allocated_bytes, 0);
  check();
}

/* Recapture with the given sizes (all freed after the capture); ptrs get the addresses. */
static void abc_recapture(abc_t *t, const size_t *sizes, int n, void **ptrs, uint64_t *hits,
                          uint64_t *misses) {
  begin(t->s, t->pool, &t->next, &t->log);
  for (int i = 0; i < n; i++) OK(recap_malloc(&ptrs[i], sizes[i], t->s));
  end(t->s, t->pool, hits, misses);
  check();
  for (int i = 0; i < n; i++) OK(recap_free(ptrs[i]));
  check();
}

RECAP_TEST(an_extra_allocation_goes_to_unclaimed_space) {
  abc_t t;
  abc_first(&t);
  const size_t sizes[] = {256 * KiB, 64 * KiB, 256 * KiB, 256 * KiB};
  void *p[4];
  uint64_t hits, misses;
  abc_recapture(&t, sizes, 4, p, &hits, &misses);
  /* A, B, C keep their addresses; X goes after C, the first address no entry claims. */
  assert_ptr_equal(p[0], t.base);
  assert_ptr_equal(p[1], t.base + 768 * KiB);
  assert_ptr_equal(p[2], t.base + 256 * KiB);
  assert_ptr_equal(p[3], t.base + 512 * KiB);
  assert_int_equal(hits, 3);
  assert_int_equal(misses, 1);
  assert_int_equal(pool_info(t.pool).reserved_bytes, t.reserved);
  /* The record log holds the recapture as it happened, in order. */
  expect_log(&t.next, p, sizes, 4);
  abc_done(&t);
}

/* The rule is by position: an extra allocation of the same size as the next entry takes that
 * entry; the ones after it shift by one, and the last is new. */
RECAP_TEST(an_extra_allocation_of_the_same_size_matches_by_position) {
  abc_t t;
  abc_first(&t);
  const size_t sizes[] = {256 * KiB, 256 * KiB, 256 * KiB, 256 * KiB};
  void *p[4];
  uint64_t hits, misses;
  abc_recapture(&t, sizes, 4, p, &hits, &misses);
  for (int i = 0; i < 4; i++) assert_ptr_equal(p[i], t.base + (size_t)i * 256 * KiB);
  assert_int_equal(hits, 3);
  assert_int_equal(misses, 1);
  assert_int_equal(pool_info(t.pool).reserved_bytes, t.reserved);
  abc_done(&t);
}

/* An entry of another size is skipped, not lost: a later allocation of its size still takes
 * it, and the skipped entry's range stays claimed meanwhile. */
RECAP_TEST(a_bigger_allocation_leaves_the_others_in_place) {
  abc_t t;
  abc_first(&t);
  const size_t sizes[] = {256 * KiB, 512 * KiB, 256 * KiB};
  void *p[3];
  uint64_t hits, misses;
  abc_recapture(&t, sizes, 3, p, &hits, &misses);
  assert_ptr_equal(p[0], t.base);
  assert_ptr_equal(p[1], t.base + 768 * KiB); /* past B's and C's claimed ranges */
  assert_ptr_equal(p[2], t.base + 256 * KiB); /* B's entry: the first unused one of its size */
  assert_int_equal(hits, 2);
  assert_int_equal(misses, 1);
  assert_int_equal(pool_info(t.pool).reserved_bytes, t.reserved);
  abc_done(&t);
}

/* A change that does not fit beside the claimed ranges gets a new segment (the pool grows by
 * one small segment), and the next recapture of the new sequence replays it without growth. */
RECAP_TEST(a_change_with_no_room_grows_once) {
  abc_t t;
  abc_first(&t);
  const size_t sizes[] = {256 * KiB, 256 * KiB, 256 * KiB, 1 * MiB, 512 * KiB};
  void *p[5], *q[5];
  uint64_t hits, misses;
  abc_recapture(&t, sizes, 5, p, &hits, &misses);
  /* 1 MiB fits after C (768 KiB to 1792 KiB); 512 KiB then fits nowhere in the segment. */
  assert_ptr_equal(p[3], t.base + 768 * KiB);
  assert_int_equal(hits, 3);
  assert_int_equal(misses, 2);
  recap_pool_memory_t grown = pool_info(t.pool);
  assert_int_equal(grown.reserved_bytes, t.reserved + (int64_t)(2 * MiB));
  if (vmm_segments_on()) {
    /* The small VMM segment grows by 2 MiB at its free tail, which 512 KiB starts. */
    assert_int_equal(grown.segments, 1);
    assert_ptr_equal(p[4], t.base + 1792 * KiB);
  } else {
    assert_int_equal(grown.segments, 2);
  }
  /* Replay the new sequence's own log: all five addresses again, nothing new. */
  recap__alloc_log_free(&t.log);
  t.log = t.next;
  memset(&t.next, 0, sizeof t.next);
  abc_recapture(&t, sizes, 5, q, &hits, &misses);
  for (int i = 0; i < 5; i++) assert_ptr_equal(q[i], p[i]);
  assert_int_equal(hits, 5);
  assert_int_equal(misses, 0);
  assert_int_equal(pool_info(t.pool).reserved_bytes, grown.reserved_bytes);
  abc_done(&t);
}

RECAP_TEST(fewer_allocations_replay_a_prefix) {
  abc_t t;
  abc_first(&t);
  const size_t sizes[] = {256 * KiB, 256 * KiB};
  void *p[2];
  uint64_t hits, misses;
  abc_recapture(&t, sizes, 2, p, &hits, &misses);
  assert_ptr_equal(p[0], t.base);
  assert_ptr_equal(p[1], t.base + 256 * KiB);
  assert_int_equal(hits, 2);
  assert_int_equal(misses, 0);
  assert_int_equal(t.next.count, 2);
  assert_int_equal(pool_info(t.pool).reserved_bytes, t.reserved);
  abc_done(&t);
}

/* A replayed address lies in free space of the right stream only: an allocation on another
 * stream of the capture does not take a block of the first stream's segment. */
RECAP_TEST(a_replayed_address_stays_on_its_stream) {
  abc_t t;
  abc_first(&t);
  recap_stream_t side = recap__fake_stream_new();
  uint64_t hits, misses;
  void *a, *b;
  begin(t.s, t.pool, &t.next, &t.log);
  assert_true(recap__fake_capture_join(side, t.s));
  OK(recap_malloc(&a, 256 * KiB, side));
  OK(recap_malloc(&b, 256 * KiB, t.s));
  end(t.s, t.pool, &hits, &misses);
  /* a took A's entry but not its range (another stream's segment: a new one); b takes B's. */
  assert_ptr_not_equal(a, t.base);
  assert_ptr_equal(b, t.base + 256 * KiB);
  assert_int_equal(hits, 1);
  assert_int_equal(misses, 1);
  FREE_ALL(a, b);
  abc_done(&t);
}

/* A replayed range in the middle of a free segment: the free block is split on both sides
 * (the statistics of split blocks follow, recap_memory_check recounts them), and the free
 * merges it back. In a large segment a rest of small_size or less stays with the block, as on
 * the usual path. */
RECAP_TEST(a_replayed_range_splits_its_free_block_on_both_sides) {
  recap_stream_t s = stream_after_reset();
  recap_pool_id_t pool = recap_pool_handle();
  recap__alloc_log_t forged = {0}, out = {0};
  uint64_t hits, misses;
  void *small_seg, *large_seg, *p, *q;
  begin(s, pool, &out, NULL);
  OK(recap_malloc(&small_seg, 1 * MiB, s));  /* the first half of a small segment, S */
  OK(recap_malloc(&large_seg, 20 * MiB, s)); /* a whole large segment, L */
  end(s, pool, &hits, &misses);
  FREE_ALL(small_seg, large_seg);
  recap__alloc_log_free(&out);
  recap_memory_stats_t before = stats();
  assert_int_equal(before.inactive_split[RECAP_STAT_ALL].current, 0);

  forge_log(&forged,
            (struct recap__alloc_log_entry[]){{(char *)small_seg + 512 * KiB, 256 * KiB},
                                              {(char *)large_seg + 17 * MiB, 2 * MiB + 512 * KiB}},
            2);
  begin(s, pool, &out, &forged);
  OK(recap_malloc(&p, 256 * KiB, s));
  assert_ptr_equal(p, (char *)small_seg + 512 * KiB);
  recap_memory_stats_t mid = stats();
  assert_int_equal(mid.inactive_split[RECAP_STAT_SMALL].current, 2); /* before and after p */
  assert_int_equal(mid.inactive_split_bytes[RECAP_STAT_SMALL].current,
                   (int64_t)(2 * MiB - 256 * KiB));
  check();
  OK(recap_malloc(&q, 2 * MiB + 512 * KiB, s));
  assert_ptr_equal(q, (char *)large_seg + 17 * MiB);
  recap_block_info_t info = RECAP_BLOCK_INFO_INIT;
  OK(recap_block_info(q, &info));
  assert_int_equal(info.bytes, 3 * MiB); /* the 512 KiB rest stayed with it */
  assert_int_equal(info.requested, 2 * MiB + 512 * KiB);
  recap_memory_stats_t both = stats();
  assert_int_equal(both.inactive_split[RECAP_STAT_LARGE].current, 1);
  assert_int_equal(both.inactive_split_bytes[RECAP_STAT_LARGE].current, (int64_t)(17 * MiB));
  check();
  end(s, pool, &hits, &misses);
  assert_int_equal(hits, 2);
  assert_int_equal(misses, 0);
  assert_int_equal(out.count, 2);
  assert_int_equal(out.v[1].size, 2 * MiB + 512 * KiB); /* the rounded request, not the block */
  FREE_ALL(p, q);
  recap_memory_stats_t after = stats();
  assert_int_equal(after.inactive_split[RECAP_STAT_ALL].current, 0);
  assert_int_equal(pool_info(pool).reserved_bytes, (int64_t)(22 * MiB));
  check();
  release(pool, &forged, &out);
}

/* ------------------------------------------------------------------------------------------
 * The record log's contents, host memory failures, max_split_size, attach errors
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(the_record_log_holds_rounded_sizes_in_order) {
  recap_stream_t s = stream_after_reset();
  recap_pool_id_t pool = recap_pool_handle();
  recap__alloc_log_t log = {0};
  uint64_t hits, misses;
  const size_t asked[] = {1, 1000, 512, 2 * MiB + 1, 11 * MiB};
  const size_t rounded[] = {512, 1024, 512, 2 * MiB + 512, 11 * MiB};
  void *p[5], *eager;
  begin(s, pool, &log, NULL);
  for (int i = 0; i < 5; i++) OK(recap_malloc(&p[i], asked[i], s));
  /* A stream outside the capture: the default pool, not logged. */
  OK(recap_malloc(&eager, 4096, recap__fake_stream_new()));
  end(s, pool, &hits, &misses);
  expect_log(&log, p, rounded, 5);
  assert_true(log.capacity >= 5);
  assert_int_equal(misses, 5);
  /* After the route ended, nothing more is logged. */
  void *later;
  OK(recap_malloc(&later, 512, s));
  assert_int_equal(log.count, 5);
  FREE_ALL(later, eager);
  for (int i = 0; i < 5; i++) OK(recap_free(p[i]));
  recap__alloc_log_free(&log);
  assert_null(log.v);
  assert_int_equal(log.count + log.capacity, 0);
  recap__alloc_log_free(NULL);
  OK(recap_pool_release(pool));
  check();
}

/* n pairs of recap_malloc(1000) + recap_free on s, routed to pool with a record log: every
 * allocation is logged and counted, those the front cache serves (folded pairs among them)
 * as those of the slow path. */
static void expect_pairs_logged(recap_stream_t s, recap_pool_id_t pool, recap__alloc_log_t *log,
                                int n) {
  int64_t allocations = stats().allocation[RECAP_STAT_ALL].allocated;
  void *p[8];
  assert_true(n <= 8);
  for (int i = 0; i < n; i++) {
    OK(recap_malloc(&p[i], 1000, s));
    OK(recap_free(p[i]));
  }
  uint64_t hits, misses;
  OK(recap__pool_route_replay_stats(device(), pool, &hits, &misses));
  assert_int_equal(hits, 0);
  assert_int_equal(misses, n);
  size_t sizes[8];
  for (int i = 0; i < n; i++) {
    sizes[i] = 1024;
    assert_ptr_equal(p[i], p[0]); /* the front cache's block every time */
  }
  expect_log(log, p, sizes, n);
  assert_int_equal(stats().allocation[RECAP_STAT_ALL].allocated, allocations + n);
  assert_int_equal(pool_info(pool).allocated_bytes, 0);
}

/* Repeated pairs in a capture that records its allocations: on the stream recap made capture
 * (the route knows it) and on a stream the route asks the device about, alike. */
RECAP_TEST(repeated_pairs_are_each_logged) {
  recap_stream_t s = stream_after_reset();
  recap_pool_id_t pool = recap_pool_handle();
  recap__alloc_log_t log = {0};
  OK(recap__pool_route_reserve(device(), pool));
  OK(recap__pool_route_set_logs(device(), pool, &log, NULL));
  uint64_t id = recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL);
  OK(recap__pool_route_set_capture(device(), pool, id, s));
  expect_pairs_logged(s, pool, &log, 6);
  check();
  end_routed(s, pool);
  recap__alloc_log_free(&log);
  begin(s, pool, &log, NULL);
  expect_pairs_logged(s, pool, &log, 6);
  end_routed(s, pool);
  release(pool, &log, NULL);
}

RECAP_TEST(host_oom_marks_the_log_incomplete_and_malloc_succeeds) {
  reset();
  recap_test_host_faults_install();
  recap_stream_t s = recap__fake_stream_new();
  recap_pool_id_t pool = recap_pool_handle();
  recap__alloc_log_t log = {0};
  uint64_t hits, misses;
  void *warm, *a, *b;
  begin_routed(s, pool);
  /* Warm the pool, so that the next allocation's only host allocation is the log's. */
  OK(recap_malloc(&warm, 4096, s));
  OK(recap_free(warm));
  OK(recap__pool_route_set_logs(device(), pool, &log, NULL));
  recap_test_host_fail_nth(1);
  OK(recap_malloc(&a, 4096, s));
  assert_true(recap_test_host_failed());
  assert_int_equal(recap_test_host_calls(), 1);
  assert_true(log.incomplete);
  assert_int_equal(log.count, 0);
  check();
  /* The next append has host memory again; the log stays marked. */
  recap_test_host_fail_nth(0);
  OK(recap_malloc(&b, 4096, s));
  assert_int_equal(log.count, 1);
  assert_ptr_equal(log.v[0].ptr, b);
  assert_true(log.incomplete);
  end(s, pool, &hits, &misses);
  assert_int_equal(misses, 2); /* both were routed with logs attached */

  /* The attach itself: without host memory for the route's state, nothing is attached. */
  recap__alloc_log_t next = {0};
  begin_routed(s, pool);
  recap_test_host_fail_nth(1);
  assert_int_equal(recap__pool_route_set_logs(device(), pool, &next, &log),
                   RECAP_ERROR_OUT_OF_MEMORY);
  assert_non_null(strstr(recap_last_error(), "recap__pool_route_set_logs: out of host memory"));
  assert_non_null(strstr(recap_last_error(), "of 1 entries; nothing was attached"));
  recap_test_host_fail_nth(0);
  void *c;
  OK(recap_malloc(&c, 4096, s));
  OK(recap__pool_route_replay_stats(device(), pool, &hits, &misses));
  assert_int_equal(hits + misses, 0);
  assert_int_equal(next.count, 0);
  end_routed(s, pool);
  FREE_ALL(a, b, c);
  recap__alloc_log_free(&log);
  OK(recap_pool_release(pool));
  OK(recap_pool_release(pool));
  check();
  recap_test_host_faults_remove();
}

/* With max_split_size, an oversize block is replayed only whole, as the usual path hands it
 * out: its own segment is found again; a request below the limit never takes part of it. */
RECAP_TEST(max_split_size_rules_hold_in_a_replay) {
  reset_with_option("max_split_size", "32MiB");
  recap_stream_t s = recap__fake_stream_new();
  recap_pool_id_t pool = recap_pool_handle();
  recap__alloc_log_t first = {0}, second = {0};
  uint64_t hits, misses;
  void *big, *mid, *big2, *mid2;
  begin(s, pool, &first, NULL);
  OK(recap_malloc(&big, 40 * MiB, s));
  OK(recap_malloc(&mid, 4 * MiB, s));
  end(s, pool, &hits, &misses);
  FREE_ALL(big, mid);
  int64_t reserved = pool_info(pool).reserved_bytes;
  begin(s, pool, &second, &first);
  OK(recap_malloc(&big2, 40 * MiB, s));
  OK(recap_malloc(&mid2, 4 * MiB, s));
  end(s, pool, &hits, &misses);
  assert_ptr_equal(big2, big);
  assert_ptr_equal(mid2, mid);
  assert_int_equal(hits, 2);
  assert_int_equal(pool_info(pool).reserved_bytes, reserved);
  FREE_ALL(big2, mid2);
  check();
  /* 31 MiB, below the limit, gets its own segment of 32 MiB (rounded to 2 MiB): at the limit,
   * which the usual path would not give a request below it again. The replay does, so the pool
   * does not grow. */
  void *near, *near2;
  recap__alloc_log_t near_log = {0}, near_next = {0};
  begin(s, pool, &near_log, NULL);
  OK(recap_malloc(&near, 31 * MiB, s));
  end(s, pool, &hits, &misses);
  OK(recap_free(near));
  reserved = pool_info(pool).reserved_bytes;
  begin(s, pool, &near_next, &near_log);
  OK(recap_malloc(&near2, 31 * MiB, s));
  end(s, pool, &hits, &misses);
  assert_ptr_equal(near2, near);
  assert_int_equal(hits, 1);
  assert_int_equal(pool_info(pool).reserved_bytes, reserved);
  OK(recap_free(near2));
  recap__alloc_log_free(&near_log);
  recap__alloc_log_free(&near_next);
  check();
  /* A log that puts a 4 MiB request inside the 40 MiB block: not honoured (the block is too
   * big to split), the request goes to the large segment instead. */
  recap__alloc_log_t forged = {0}, out = {0};
  forge_log(&forged, &(struct recap__alloc_log_entry){(char *)big + 4 * MiB, 4 * MiB}, 1);
  begin(s, pool, &out, &forged);
  OK(recap_malloc(&mid2, 4 * MiB, s));
  end(s, pool, &hits, &misses);
  assert_ptr_equal(mid2, mid);
  assert_int_equal(hits, 0);
  assert_int_equal(misses, 1);
  OK(recap_free(mid2));
  recap__alloc_log_free(&forged);
  recap__alloc_log_free(&out);
  release(pool, &first, &second);
}

RECAP_TEST(attach_errors_name_the_problem) {
  recap_stream_t s = stream_after_reset();
  recap_pool_id_t pool = recap_pool_handle();
  recap__alloc_log_t log = {0};
  uint64_t hits = 7, misses = 7;
  assert_int_equal(recap__pool_route_set_logs(device(), pool, &log, NULL),
                   RECAP_ERROR_INVALID_USAGE);
  assert_non_null(strstr(recap_last_error(), "is not routed to a capture on device 0"));
  assert_int_equal(recap__pool_route_replay_stats(device(), pool, &hits, &misses),
                   RECAP_ERROR_INVALID_USAGE);
  assert_int_equal(hits + misses, 14);
  assert_int_equal(recap__pool_route_set_logs(device(), pool, &log, &log),
                   RECAP_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(recap_last_error(), "record and replay are the same log"));
  assert_int_equal(recap__pool_route_set_logs(-1, pool, &log, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(recap_last_error(), "device -1 is not one recap handles"));
  assert_int_equal(recap__pool_route_replay_stats(0, pool, NULL, &misses),
                   RECAP_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(recap_last_error(), "two counters are needed"));

  /* A pending route (reserved, its capture not begun) takes logs too; detaching stops them. */
  OK(recap__pool_route_reserve(device(), pool));
  OK(recap__pool_route_set_logs(device(), pool, &log, NULL));
  OK(recap__pool_route_replay_stats(device(), pool, &hits, &misses));
  assert_int_equal(hits + misses, 0);
  uint64_t id = recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL);
  OK(recap__pool_route_set_capture(device(), pool, id, NULL));
  void *a, *b;
  OK(recap_malloc(&a, 512, s));
  OK(recap__pool_route_set_logs(device(), pool, NULL, NULL));
  OK(recap_malloc(&b, 512, s));
  OK(recap__pool_route_replay_stats(device(), pool, &hits, &misses));
  assert_int_equal(hits + misses, 0);
  assert_int_equal(log.count, 1);
  assert_ptr_equal(log.v[0].ptr, a);
  assert_true(recap__fake_capture_end(s));
  OK(recap__pool_route_end(device(), pool));
  FREE_ALL(a, b);
  release(pool, &log, NULL);
}

/* A route that ends with logs attached frees its state; the allocator reset does too (the
 * leak checker of the sanitizer build would say otherwise). */
RECAP_TEST(a_reset_with_logs_attached_frees_the_state) {
  recap_stream_t s = stream_after_reset();
  recap_pool_id_t pool = recap_pool_handle();
  recap__alloc_log_t log = {0}, replay = {0};
  begin(s, pool, &log, &replay);
  void *a;
  OK(recap_malloc(&a, 512, s));
  assert_int_equal(log.count, 1);
  reset();
  /* The route and its state are gone with the reset (the sanitizer build finds a leak). */
  uint64_t hits, misses;
  assert_int_equal(recap__pool_route_replay_stats(device(), pool, &hits, &misses),
                   RECAP_ERROR_INVALID_USAGE);
  recap__alloc_log_free(&log);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(identical_sequences_get_identical_addresses),
    cmocka_unit_test(without_replay_the_best_fit_moves_blocks),
    cmocka_unit_test(a_kept_output_gets_a_new_address),
    cmocka_unit_test(a_kept_output_with_no_room_grows_the_pool_by_itself),
    cmocka_unit_test(an_extra_allocation_goes_to_unclaimed_space),
    cmocka_unit_test(an_extra_allocation_of_the_same_size_matches_by_position),
    cmocka_unit_test(a_bigger_allocation_leaves_the_others_in_place),
    cmocka_unit_test(a_change_with_no_room_grows_once),
    cmocka_unit_test(fewer_allocations_replay_a_prefix),
    cmocka_unit_test(a_replayed_address_stays_on_its_stream),
    cmocka_unit_test(a_replayed_range_splits_its_free_block_on_both_sides),
    cmocka_unit_test(the_record_log_holds_rounded_sizes_in_order),
    cmocka_unit_test(repeated_pairs_are_each_logged),
    cmocka_unit_test(host_oom_marks_the_log_incomplete_and_malloc_succeeds),
    cmocka_unit_test(max_split_size_rules_hold_in_a_replay),
    cmocka_unit_test(attach_errors_name_the_problem),
    cmocka_unit_test(a_reset_with_logs_attached_frees_the_state),
};

RECAP_TEST_MAIN(tests)
