/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_host_faults.c — the host-allocation fault sweep: one scripted workload that makes recap
 * allocate host memory in every layer (allocator and its event and deferred lists, pools,
 * record_stream, allocation sites, graph captures with annotations and input-liveness checks,
 * inspection and JSON, a capture scope, a generator used in a capture, graphed callables
 * forward and backward, the snapshot, the memory page), run again and again on the CPU fake device with the
 * 1st, 2nd, ... host allocation failing (host_faults.h, behind src/core/host.h), until a run
 * makes fewer allocations than that.
 *
 * In every run the first call that fails returns RECAP_ERROR_OUT_OF_MEMORY with a message that
 * says "out of host memory" (or nothing fails: recap absorbed the failure, as it may for its
 * caches), the allocator's checker passes after every step, and once the workload's cleanup
 * has run nothing is left: no device memory, capture, graph or stray event, and, after the test
 * reset, exactly as many host blocks as after a run without a failure. The same workload then
 * runs cleanly in the same process.
 * The asan preset's leak check confirms the count of host blocks independently.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "fake/fake.h"
#include "graph/graph_internal.h"
#include "graph/registry.h"
#include "harness.h"
#include "capture_util.h"
#include "host_faults.h"
#include "reset.h"
#include "fake_util.h"
#include "sweep_util.h"
#include "recap.h"
#include "liveness_util.h"

/* ---- the workload ------------------------------------------------------------------------- */

/* The work of the annotated graph below: it reads `input` (an eager block) and a temporary of
 * its own pool, inside two nested scopes, and draws random numbers into *out. */
static void annotated_work(outcome_t *o, recap_stream_t s, void *input, recap_generator_t gen,
                           void **out) {
  void *tmp = NULL;
  if (STEP(o, recap_annotate_push("forward", s))) {
    if (STEP(o, recap_annotate_push("attention", s))) {
      if (STEP(o, recap_malloc(&tmp, 1 * MiB, s))) {
        const void *args[2] = {input, tmp};
        recap__fake_launch_kernel_args(s, "attention_kernel", args, 2);
      }
      STEP(o, recap_annotate_pop(s));
    }
    if (STEP(o, recap_malloc(out, 4 * KiB, s)) && gen)
      STEP(o, recap_rng_uniform(gen, (float *)*out, 16, s));
    STEP(o, recap_annotate_pop(s));
  }
  if (tmp) STEP(o, recap_free(tmp));
}

/* A graph with annotations and input-liveness checks, whose replays its update policy times.
 * Then its inspection, JSON and liveness queries, and two replays. */
static void annotated_graph(outcome_t *o, recap_graph_t *g, recap_stream_t s, void *input,
                            recap_pool_id_t pool, recap_generator_t gen, void **out) {
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.pool = pool;
  opts.check_input_liveness = 1;
  recap_update_policy_t policy = RECAP_UPDATE_POLICY_INIT;
  policy.max_slowdown = 0.5;
  policy.measure_replays = 2;
  if (!STEP(o, recap_graph_create(g, RECAP_GRAPH_KEEP))) return;
  if (!STEP(o, recap_graph_update_policy_set(*g, &policy))) return;
  if (!STEP(o, recap_graph_capture_begin(*g, &opts, s))) return;
  annotated_work(o, s, input, gen, out);
  if (!STEP(o, recap_graph_capture_end(*g))) return;

  recap_graph_info_t *info = NULL;
  if (STEP(o, recap_graph_inspect(*g, &info))) {
    char *json = NULL;
    if (STEP(o, recap_graph_info_json(info, &json))) recap_string_free(json);
    recap_graph_info_free(info);
  }
  const recap_liveness_input_t *inputs = NULL;
  size_t count = 0;
  STEP(o, liveness_inputs_of(*g, &inputs, &count));
  STEP(o, recap_graph_check_inputs(*g));
  STEP(o, recap_graph_instantiate(*g));
  for (int i = 0; i < 2; i++) STEP(o, recap_graph_replay(*g, s));
}

static recap_status_t workload(outcome_t *o) {
  memset(o, 0, sizeof *o);
  recap_stream_t s1 = recap__fake_stream_new(), s2 = recap__fake_stream_new();
  void *a = NULL, *b = NULL, *c = NULL, *out1 = NULL, *out2 = NULL, *out3 = NULL;
  recap_generator_t gen = NULL;
  recap_graph_t g1 = NULL, g2 = NULL, g3 = NULL;
  recap_graphed_t h = NULL;
  recap_annotations_enable(1);
  recap_liveness_debug_enable(1);

  /* Eager allocations of every size class; two used by other streams, then freed (events,
   * allocation sites). */
  STEP(o, recap_malloc(&a, 256 * KiB, s1));
  STEP(o, recap_malloc(&b, 3 * MiB, s1));
  STEP(o, recap_malloc(&c, 12 * MiB, s1));
  for (int i = 0; i < 3 && a; i++) {
    recap_stream_t other = recap__fake_stream_new();
    if (STEP(o, recap_record_stream(a, other))) recap__fake_launch_kernel(other, "use_a");
  }
  if (a) STEP(o, recap_free(a));
  STEP(o, recap_generator_create(&gen, 5));
  if (gen && b) STEP(o, recap_rng_uniform(gen, (float *)b, 64, s1));

  /* Two captures into one pool: the annotated one with liveness checks, then a plain one that
   * frees a block used by another stream during the capture (deferred events). */
  recap_pool_id_t pool = recap_pool_handle();
  annotated_graph(o, &g1, s1, c, pool, gen, &out1);
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.pool = pool;
  if (STEP(o, recap_graph_create(&g2, 0)) && STEP(o, recap_graph_capture_begin(g2, &opts, s1))) {
    if (STEP(o, recap_malloc(&out2, 8 * KiB, s1))) recap__fake_launch_kernel(s1, "consume");
    if (b && STEP(o, recap_record_stream(b, s2))) {
      STEP(o, recap_free(b));
      b = NULL;
    }
    STEP(o, recap_graph_capture_end(g2));
  }
  if (g1) STEP(o, recap_graph_replay(g1, s1));
  if (g2) STEP(o, recap_graph_replay(g2, s1));
  recap__fake_stream_complete(s1);
  recap__fake_stream_complete(s2);

  /* g1 captured again in place (its output freed first): the layers attach anew, the
   * executable is updated, and the replays are timed. */
  if (out1) {
    STEP(o, recap_free(out1));
    out1 = NULL;
  }
  if (g1 && STEP(o, recap_graph_recapture_begin(g1, NULL, s1))) {
    annotated_work(o, s1, c, gen, &out1);
    if (STEP(o, recap_graph_capture_end(g1)))
      for (int i = 0; i < 2; i++) STEP(o, recap_graph_replay(g1, s1));
  }
  recap__fake_stream_complete(s1);

  /* A capture scope on recap's side stream. */
  recap_stream_t side = NULL;
  if (STEP(o, recap_graph_create(&g3, 0))) {
    recap_scope_options_t sopts = RECAP_SCOPE_OPTIONS_INIT;
    if (STEP(o, recap_capture_scope_begin(g3, &sopts, &side))) {
      if (STEP(o, recap_malloc(&out3, 2 * KiB, side))) recap__fake_launch_kernel(side, "scoped");
      if (STEP(o, recap_capture_scope_end(g3))) STEP(o, recap_graph_replay(g3, side));
    }
  }

  /* A graphed callable, forward and backward, then eagerly. */
  sweep_graphed(o, &h, s1, plain_forward);

  /* The snapshot and the memory page, then the cleanup, which runs whatever failed before. */
  char *json = NULL;
  if (STEP(o, recap_memory_snapshot_json(-1, &json))) recap_string_free(json);
  char *html = NULL;
  if (STEP(o, recap_memory_html_string(&html))) recap_string_free(html);
  STEP(o, recap_graphed_destroy(h));
  sweep_release(o, (recap_graph_t[]){g1, g2, g3}, 3, (void *[]){out1, out2, out3, b, c}, 5);
  sweep_finish(o, gen, s1, s2);
  recap_annotations_enable(-1);
  recap_liveness_debug_enable(-1);
  return o->status;
}

/* ---- the sweep ------------------------------------------------------------------------------- */

static void quiet(recap_log_level_t level, const char *message, void *user_data) {
  (void)level;
  (void)message;
  (void)user_data;
}

static void fresh(void) {
  recap_test_reset(NULL);
  recap__graphs_disabled_override(0);
  recap_log_set(quiet, NULL);
  recap_clear_last_error();
}

RECAP_TEST(host_allocation_failures_at_every_step) {
  recap_test_host_faults_install();
  outcome_t o;
  fresh();
  recap_test_host_fail_nth(0);
  if (workload(&o) != RECAP_SUCCESS)
    fail_msg("the workload fails without faults at %s: %s", o.where, o.message);
  if (o.checker[0]) fail_msg("checker %s", o.checker);
  const char *left = sweep_leftovers(true);
  if (left) fail_msg("without faults: %s", left);
  /* Counted on a second run: some state lives past the test reset (the capture registry's
   * array), so the first run makes one allocation more. */
  fresh();
  recap_test_host_fail_nth(0);
  if (workload(&o) != RECAP_SUCCESS) fail_msg("the second run fails at %s: %s", o.where, o.message);
  uint64_t allocations = recap_test_host_calls();
  fresh();
  int64_t baseline = recap_test_host_live();
  /* The workload reaches every layer's host allocations. */
  assert_true(allocations > 100);

  int errors = 0, absorbed = 0;
  uint64_t nth;
  for (nth = 1;; nth++) {
    fresh();
    recap_test_host_fail_nth(nth);
    recap_status_t s = workload(&o);
    bool failed = recap_test_host_failed();
    recap_test_host_fail_nth(0);
    if (!failed) break;
    if (s != RECAP_SUCCESS) {
      errors++;
      if (s != RECAP_ERROR_OUT_OF_MEMORY)
        fail_msg("host allocation %llu: %s failed with %s, not RECAP_ERROR_OUT_OF_MEMORY: %s",
                 (unsigned long long)nth, o.where, recap_status_name(s), o.message);
      if (!strstr(o.message, "out of host memory"))
        fail_msg("host allocation %llu: %s failed without saying \"out of host memory\": %s",
                 (unsigned long long)nth, o.where, o.message);
    } else {
      absorbed++;
    }
    if (o.checker[0])
      fail_msg("host allocation %llu: the checker failed %s", (unsigned long long)nth, o.checker);
    left = sweep_leftovers(true);
    if (left)
      fail_msg("host allocation %llu (first failure at %s: %s): after cleanup, %s",
               (unsigned long long)nth, o.where[0] ? o.where : "-", o.message, left);
    fresh();
    if (recap_test_host_live() != baseline)
      fail_msg(
          "host allocation %llu (first failure at %s: %s): %lld host blocks left after "
          "the reset, %lld after a run without a failure",
          (unsigned long long)nth, o.where[0] ? o.where : "-", o.message,
          (long long)recap_test_host_live(), (long long)baseline);
    /* The same process goes on working. */
    if (workload(&o) != RECAP_SUCCESS)
      fail_msg("host allocation %llu: the workload fails afterwards at %s: %s",
               (unsigned long long)nth, o.where, o.message);
    left = sweep_leftovers(true);
    if (left)
      fail_msg("host allocation %llu: the clean run afterwards leaves %s", (unsigned long long)nth,
               left);
  }
  recap_log_set(NULL, NULL);
  fresh();
  recap_test_host_faults_remove();
  printf(
      "host fault sweep: %llu runs (the workload makes %llu host allocations); %d ended in "
      "RECAP_ERROR_OUT_OF_MEMORY, %d were absorbed\n",
      (unsigned long long)(nth - 1), (unsigned long long)allocations, errors, absorbed);
  assert_int_equal(nth - 1, allocations);
}

/* Frees p[first], p[first + 2], ... below n, each with the next host allocation armed to fail:
 * none is made, and the checker passes after each. */
static void free_every_other_under_a_host_fault(void **p, int first, int n) {
  for (int i = first; i < n; i += 2) {
    recap_test_host_fail_nth(1);
    OK(recap_free(p[i]));
    assert_int_equal(recap_test_host_calls(), 0);
    check();
  }
  recap_test_host_fail_nth(0);
}

/* recap_free needs no host memory, whatever the block: split or whole, used by other streams,
 * freed eagerly or during a capture (deferred events). Each free runs with the next host
 * allocation armed to fail, and none is made. */
RECAP_TEST(frees_need_no_host_memory) {
  recap_test_host_faults_install();
  fresh();
  enum { N = 24 };
  static const size_t sizes[] = {512, 64 * KiB, 1 * MiB, 3 * MiB, 12 * MiB, 2 * MiB + 512};
  recap_stream_t s = recap__fake_stream_new(), other = recap__fake_stream_new();
  void *p[N];
  for (int i = 0; i < N; i++) {
    OK(recap_malloc(&p[i], sizes[i % 6], s));
    if (i % 3 == 0) OK(recap_record_stream(p[i], other));
  }
  recap_graph_t g = graph_capturing(s, NULL);
  free_every_other_under_a_host_fault(p, 0, N);
  recap__fake_stream_enqueue(s);
  OK(recap_graph_capture_end(g));
  recap__fake_stream_complete(other);
  free_every_other_under_a_host_fault(p, 1, N);
  assert_int_equal(stats().allocation[RECAP_STAT_ALL].current, 0);
  OK(recap_graph_destroy(g));
  OK(recap_empty_cache());
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  fresh();
  recap_test_host_faults_remove();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(host_allocation_failures_at_every_step),
    cmocka_unit_test(frees_need_no_host_memory),
};
RECAP_TEST_MAIN(tests)
