/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_assert.c — the allocator's internal asserts (src/core/assert.h) fire in Debug builds.
 *
 * Each test breaks an invariant the way a bug inside the library would (the public API cannot
 * break them), in a forked child, and checks that the child died of SIGABRT after writing the
 * assert's file and expression to stderr. A control child that breaks nothing must exit 0, so
 * the helper itself is shown to tell the two apart. Built only in Debug builds, the only ones
 * that define RECAP_DEBUG (cmake/RecapCompileOptions.cmake).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc/alloc_internal.h"
#include "fake_util.h"
#include "harness.h"

#ifndef RECAP_DEBUG
#  error "test_assert.c needs a Debug build (RECAP_DEBUG), where the asserts are compiled in"
#endif

typedef struct child_result {
  int aborted;     /* died of SIGABRT */
  int exit_status; /* when it exited instead; -1 otherwise */
  char stderr_text[4096];
} child_result_t;

/* Run fn in a child whose stderr is captured. */
static child_result_t run_child(void (*fn)(void)) {
  child_result_t r = {0, -1, ""};
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* No core file, and the default action for SIGABRT whatever the test runner installed. */
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    signal(SIGABRT, SIG_DFL);
    close(fds[0]);
    dup2(fds[1], STDERR_FILENO);
    close(fds[1]);
    fn();
    _exit(0);
  }
  close(fds[1]);
  size_t used = 0;
  ssize_t n;
  while ((n = read(fds[0], r.stderr_text + used, sizeof r.stderr_text - 1 - used)) > 0)
    used += (size_t)n;
  r.stderr_text[used] = '\0';
  close(fds[0]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  r.aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
  if (WIFEXITED(status)) r.exit_status = WEXITSTATUS(status);
  return r;
}

/* fn must abort with the assert message naming file (a path suffix) and expression. */
static void expect_assert(void (*fn)(void), const char *file, const char *expr) {
  child_result_t r = run_child(fn);
  if (!r.aborted)
    fail_msg("the child did not abort (exit status %d); its stderr: %s", r.exit_status,
             r.stderr_text);
  const char *line = strstr(r.stderr_text, "recap: internal assertion failed at ");
  if (!line) fail_msg("no assertion message on stderr: %s", r.stderr_text);
  char expected_tail[256];
  snprintf(expected_tail, sizeof expected_tail, ": %s\n", expr);
  if (!strstr(line, file) || !strstr(line, expected_tail))
    fail_msg("expected %s and \"%s\" in: %s", file, expr, line);
}

/* ---- the children ---------------------------------------------------------------------------- */

static recap__block_t blocks[2];

static void set_up_blocks(void) {
  memset(blocks, 0, sizeof blocks);
  for (int i = 0; i < 2; i++) {
    blocks[i].ptr = (char *)(uintptr_t)(0x100000 + 0x1000 * i);
    blocks[i].size = 512;
  }
}

/* Inserting blocks that are not members keeps the set sorted: no assert. */
static void insert_two_blocks(void) {
  set_up_blocks();
  recap__free_set_t set = {0};
  recap__free_set_insert(&set, &blocks[1]);
  recap__free_set_insert(&set, &blocks[0]);
  int in_order = set.count == 2 && set.items[0] == &blocks[0] && set.items[1] == &blocks[1];
  recap__free_set_clear(&set);
  _exit(in_order ? 0 : 3);
}

/* A block put in the free set twice (a double free that got past the pointer map). */
static void insert_a_block_twice(void) {
  set_up_blocks();
  recap__free_set_t set = {0};
  recap__free_set_insert(&set, &blocks[0]);
  recap__free_set_insert(&set, &blocks[1]);
  recap__free_set_insert(&set, &blocks[0]);
}

/* One address mapped to two blocks. */
static void map_a_pointer_twice(void) {
  set_up_blocks();
  recap__ptr_map_t map = {0};
  recap__ptr_map_insert(&map, blocks[0].ptr, &blocks[0]);
  recap__ptr_map_insert(&map, blocks[0].ptr, &blocks[1]);
}

/* A cached block that still waits for an event (so it is not free) handed out again. */
static void hand_out_a_block_that_is_not_free(void) {
  reset();
  /* The slow path's check: the front cache would serve the block just freed first (its own
   * checks differ). */
  recap__alloc_front_cache_enable(false);
  void *p = NULL;
  if (recap_malloc(&p, 512, NULL) != RECAP_SUCCESS || recap_free(p) != RECAP_SUCCESS) _exit(3);
  recap__free_set_t *set = &recap__alloc.devices[0]->default_pool.small_free;
  for (size_t i = 0; i < set->count; i++) set->items[i]->event_count = 1;
  ignore_status(recap_malloc(&p, 512, NULL));
}

/* A pool deleted at its last release while it still holds a segment (its count says none). */
static void delete_a_pool_that_holds_memory(void) {
  static recap__segment_t segment;
  reset();
  recap_pool_id_t id = recap_pool_handle();
  if (recap__pool_route_begin(0, id, 42) != RECAP_SUCCESS) _exit(3);
  if (recap__pool_route_end(0, id) != RECAP_SUCCESS) _exit(3);
  recap__alloc.devices[0]->private_pools->segments = &segment;
  ignore_status(recap__pool_release(0, id));
}

/* ---- the tests -------------------------------------------------------------------------------- */

RECAP_TEST(a_child_that_breaks_nothing_exits_cleanly) {
  child_result_t r = run_child(insert_two_blocks);
  assert_false(r.aborted);
  assert_int_equal(r.exit_status, 0);
  assert_null(strstr(r.stderr_text, "assertion failed"));
}

RECAP_TEST(free_set_member_twice_aborts) {
  expect_assert(insert_a_block_twice, "alloc/free_set.c", "sorted_at(s, at)");
}

RECAP_TEST(pointer_map_key_twice_aborts) {
  expect_assert(map_a_pointer_twice, "alloc/ptr_map.c", "m->slots[i].key != key");
}

RECAP_TEST(handing_out_a_busy_block_aborts) {
  expect_assert(hand_out_a_block_that_is_not_free, "alloc/request.h", "recap__block_is_free(b)");
}

RECAP_TEST(deleting_a_pool_that_holds_memory_aborts) {
  expect_assert(delete_a_pool_that_holds_memory, "alloc/cache_release.c",
                "pool->segment_count == 0 && pool->segments == NULL");
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(a_child_that_breaks_nothing_exits_cleanly),
    cmocka_unit_test(free_set_member_twice_aborts),
    cmocka_unit_test(pointer_map_key_twice_aborts),
    cmocka_unit_test(handing_out_a_busy_block_aborts),
    cmocka_unit_test(deleting_a_pool_that_holds_memory_aborts),
};
RECAP_TEST_MAIN(tests)
