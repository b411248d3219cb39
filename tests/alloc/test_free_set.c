/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_free_set.c — the ordered free-block set (src/alloc/free_set.h) on its own.
 *
 * The allocator's hot paths lean on recap__free_set_replace_at, which puts a block in place of
 * another without moving the array's tail: a split puts the rest where the block taken was, a
 * merge puts the merged block where the neighbour it absorbed was. These tests drive the set
 * with random operations and compare it after each one with a reference kept by sorting: the
 * same members, in (stream, size, address) order.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "alloc/free_set.h"
#include "harness.h"

enum { POOL = 64 }; /* block records the random tests draw from */

/* xorshift64*: a fixed sequence, so a failure replays. */
static uint64_t next_random(uint64_t *state) {
  *state ^= *state >> 12;
  *state ^= *state << 25;
  *state ^= *state >> 27;
  return *state * 0x2545F4914F6CDD1Dull;
}

static int compare_blocks(const void *a, const void *b) {
  const recap__block_t *x = *(recap__block_t *const *)a, *y = *(recap__block_t *const *)b;
  if (x->stream != y->stream) return (uintptr_t)x->stream < (uintptr_t)y->stream ? -1 : 1;
  if (x->size != y->size) return x->size < y->size ? -1 : 1;
  if (x->ptr != y->ptr) return (uintptr_t)x->ptr < (uintptr_t)y->ptr ? -1 : 1;
  return 0;
}

/* The set holds exactly the members flagged in `in`, in order. */
static void expect_matches(const recap__free_set_t *s, recap__block_t *blocks, const bool *in,
                           const char *after) {
  recap__block_t *expected[POOL];
  size_t n = 0;
  for (size_t i = 0; i < POOL; i++)
    if (in[i]) expected[n++] = &blocks[i];
  qsort(expected, n, sizeof expected[0], compare_blocks);
  if (s->count != n) fail_msg("after %s: %zu members, expected %zu", after, s->count, n);
  for (size_t i = 0; i < n; i++)
    if (s->items[i] != expected[i])
      fail_msg("after %s: member %zu is block %td, expected block %td", after, i,
               s->items[i] - blocks, expected[i] - blocks);
}

/* A key drawn from a small range, so that equal streams and sizes are common and the address
 * breaks ties. Every block has its own address, as in a pool. */
static void give_key(recap__block_t *b, size_t index, uint64_t *rng) {
  b->stream = (recap_stream_t)(uintptr_t)(0x1000 * (1 + next_random(rng) % 3));
  b->size = 512 * (1 + next_random(rng) % 8);
  b->ptr = (char *)(uintptr_t)(0x100000 + 0x1000 * index);
}

RECAP_TEST(random_operations_keep_the_order) {
  recap__block_t blocks[POOL];
  bool in[POOL] = {false};
  memset(blocks, 0, sizeof blocks);
  recap__free_set_t s = {0};
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  int replaces = 0, moved = 0;
  for (int step = 0; step < 20000; step++) {
    size_t i = next_random(&rng) % POOL;
    int op = (int)(next_random(&rng) % 4);
    if (!in[i]) {
      give_key(&blocks[i], i, &rng);
      if (op == 0 && s.count > 0) {
        /* Replace a random member with this block: a split's rest or a merge's result. */
        size_t slot = next_random(&rng) % s.count;
        recap__block_t *old = s.items[slot];
        assert_true(recap__free_set_find(&s, old) == slot);
        recap__free_set_replace_at(&s, slot, &blocks[i]);
        in[old - blocks] = false;
        in[i] = true;
        replaces++;
        moved += s.items[slot] != &blocks[i];
        expect_matches(&s, blocks, in, "replace_at");
      } else {
        assert_true(recap__free_set_insert(&s, &blocks[i]));
        in[i] = true;
        expect_matches(&s, blocks, in, "insert");
      }
    } else if (op == 0) {
      /* The member itself changes key in place, as a merge grows a block: it must be taken
       * out first, or replace its own slot. */
      size_t slot = recap__free_set_find(&s, &blocks[i]);
      assert_true(slot < s.count);
      give_key(&blocks[i], i, &rng);
      recap__free_set_replace_at(&s, slot, &blocks[i]);
      expect_matches(&s, blocks, in, "replace_at of a block by itself, with a new key");
    } else {
      assert_true(recap__free_set_erase(&s, &blocks[i]));
      in[i] = false;
      expect_matches(&s, blocks, in, "erase");
      /* No longer a member: find says so, erase refuses. */
      assert_true(recap__free_set_find(&s, &blocks[i]) == s.count);
      assert_false(recap__free_set_erase(&s, &blocks[i]));
    }
  }
  /* Both kinds of replace happened: in place, and moved to another slot. */
  assert_true(replaces > 1000);
  assert_true(moved > 100);
  assert_true(replaces - moved > 100);
  recap__free_set_clear(&s);
}

/* The ends of the array: a replacement that moves to the first or the last slot. */
RECAP_TEST(replace_at_moves_to_either_end) {
  recap__block_t b[5];
  memset(b, 0, sizeof b);
  recap__free_set_t s = {0};
  for (int i = 0; i < 4; i++) {
    b[i].size = 1024 * (size_t)(i + 1);
    b[i].ptr = (char *)(uintptr_t)(0x1000 * (i + 1));
    assert_true(recap__free_set_insert(&s, &b[i]));
  }
  /* The last member (4 KiB) gives way to the smallest block of all. */
  b[4].size = 512;
  b[4].ptr = (char *)(uintptr_t)0x9000;
  recap__free_set_replace_at(&s, 3, &b[4]);
  recap__block_t *want1[] = {&b[4], &b[0], &b[1], &b[2]};
  assert_memory_equal(s.items, want1, sizeof want1);
  /* The first member (b[4], 512 B) gives way to the biggest. */
  b[3].size = 8192;
  recap__free_set_replace_at(&s, 0, &b[3]);
  recap__block_t *want2[] = {&b[0], &b[1], &b[2], &b[3]};
  assert_memory_equal(s.items, want2, sizeof want2);
  recap__free_set_clear(&s);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(random_operations_keep_the_order),
    cmocka_unit_test(replace_at_moves_to_either_end),
};
RECAP_TEST_MAIN(tests)
