/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_stress_faults.c — the fault-injection sweep (SQLite's fault tests, for recap): one
 * scripted workload that touches every layer (allocations, record_stream, captures with
 * allocations inside into a shared pool, replays, reset, a generator used in a capture, a graph
 * rebound and instantiated again, graphed
 * callables created, run forward and backward), run again and again on the CPU fake device with
 * one injected failure each time: the 1st, 2nd, ... call of every kind of device call the fake
 * can fail, until the workload no longer makes that many calls of that kind.
 *
 * Every run must end with success or with a clear error (a status and a non-empty message), the
 * allocator's checker must pass after every step of it, and once the workload's cleanup has run
 * nothing may be left: no device memory, capture, graph, executable or stray event. The same
 * workload must then run cleanly in the same process.
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
#include "reset.h"
#include "fake_util.h"
#include "sweep_util.h"
#include "recap.h"

/* ---- the workload ------------------------------------------------------------------------- */

/* The plain forward, and a temporary the pass frees again, from the capture's pool. */
static recap_status_t toy_forward(void *ctx, recap_stream_t stream, int training,
                                  const recap_buffer_t *inputs, recap_buffer_t *outputs) {
  recap_status_t s = plain_forward(ctx, stream, training, inputs, outputs);
  if (s != RECAP_SUCCESS) return s;
  void *tmp = NULL;
  s = recap_malloc(&tmp, 2 * MiB, stream);
  if (s == RECAP_SUCCESS) recap__fake_launch_kernel(stream, "sweep_forward_tmp");
  recap_free(tmp);
  return s;
}

static recap_status_t workload(outcome_t *o) {
  memset(o, 0, sizeof *o);
  recap_stream_t s1 = recap__fake_stream_new(), s2 = recap__fake_stream_new();
  void *a = NULL, *b = NULL, *c = NULL, *out1 = NULL, *out2 = NULL, *eager = NULL;
  recap_generator_t gen = NULL;
  recap_graph_t g1 = NULL, g2 = NULL, g3 = NULL, g4 = NULL;
  recap_graphed_t h = NULL;

  /* Eager allocations of every size class; one used by another stream, then freed. */
  STEP(o, recap_malloc(&a, 256 * KiB, s1));
  STEP(o, recap_malloc(&b, 3 * MiB, s1));
  STEP(o, recap_malloc(&c, 12 * MiB, s1));
  if (a && STEP(o, recap_record_stream(a, s2))) recap__fake_launch_kernel(s2, "use_a");
  if (a) STEP(o, recap_free(a));
  STEP(o, recap_generator_create(&gen, 5));
  if (gen) STEP(o, recap_rng_uniform(gen, (float *)b, 64, s1));

  /* Two captures into one pool, with allocations inside and the generator in the first. */
  recap_pool_id_t pool = recap_pool_handle();
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.pool = pool;
  /* g1's update policy times its replays (fresh, then updated), for the recapture below. */
  recap_update_policy_t policy = RECAP_UPDATE_POLICY_INIT;
  policy.max_slowdown = 0.5;
  policy.measure_replays = 2;
  if (STEP(o, recap_graph_create(&g1, 0)) && STEP(o, recap_graph_update_policy_set(g1, &policy)) &&
      STEP(o, recap_graph_capture_begin(g1, &opts, s1))) {
    void *tmp = NULL;
    if (STEP(o, recap_malloc(&tmp, 1 * MiB, s1))) recap__fake_launch_kernel(s1, "produce");
    STEP(o, recap_malloc(&out1, 4 * KiB, s1));
    if (gen && out1) STEP(o, recap_rng_uniform(gen, (float *)out1, 16, s1));
    if (tmp) STEP(o, recap_free(tmp));
    STEP(o, recap_graph_capture_end(g1));
  }
  if (STEP(o, recap_graph_create(&g2, 0)) && STEP(o, recap_graph_capture_begin(g2, &opts, s1))) {
    if (STEP(o, recap_malloc(&out2, 8 * KiB, s1))) recap__fake_launch_kernel(s1, "consume");
    STEP(o, recap_graph_capture_end(g2));
  }

  /* Replays in capture order, on two streams; a reset and a second capture of g2. */
  for (int i = 0; i < 2; i++) {
    STEP(o, recap_graph_replay(g1, s1));
    STEP(o, recap_graph_replay(g2, s1));
  }
  STEP(o, recap_graph_replay(g1, s2));
  recap__fake_stream_complete(s1);
  recap__fake_stream_complete(s2);
  if (out2) {
    STEP(o, recap_free(out2));
    out2 = NULL;
  }
  if (STEP(o, recap_graph_reset(g2)) && STEP(o, recap_graph_capture_begin(g2, &opts, s1))) {
    if (STEP(o, recap_malloc(&out2, 8 * KiB, s1))) recap__fake_launch_kernel(s1, "consume2");
    if (STEP(o, recap_graph_capture_end(g2))) STEP(o, recap_graph_replay(g2, s1));
  }

  /* g1 captured again in place (its output freed first): an update, then timed replays. */
  if (out1) {
    STEP(o, recap_free(out1));
    out1 = NULL;
  }
  if (g1 && STEP(o, recap_graph_recapture_begin(g1, NULL, s1))) {
    void *tmp = NULL;
    if (STEP(o, recap_malloc(&tmp, 1 * MiB, s1))) recap__fake_launch_kernel(s1, "produce");
    STEP(o, recap_malloc(&out1, 4 * KiB, s1));
    if (gen && out1) STEP(o, recap_rng_uniform(gen, (float *)out1, 16, s1));
    if (tmp) STEP(o, recap_free(tmp));
    if (STEP(o, recap_graph_capture_end(g1))) {
      STEP(o, recap_graph_replay(g1, s1));
      STEP(o, recap_graph_replay(g1, s2));
    }
  }

  /* A kept graph rebound to another buffer (the patch plan, a node set), then instantiated
   * again (the template synced) and replayed. */
  recap_capture_options_t ropts = RECAP_CAPTURE_OPTIONS_INIT;
  ropts.rebind = RECAP_REBIND_AUTO;
  if (b && c && STEP(o, recap_graph_create(&g3, RECAP_GRAPH_KEEP)) &&
      STEP(o, recap_graph_capture_begin(g3, &ropts, s1))) {
    const void *args[1] = {b};
    recap__fake_launch_kernel_args(s1, "rebound", args, 1);
    if (STEP(o, recap_graph_capture_end(g3))) {
      recap_rebind_t r = {sizeof(recap_rebind_t), b, c, 3 * MiB};
      if (STEP(o, recap_graph_rebind(g3, &r, 1, NULL)) && STEP(o, recap_graph_instantiate(g3)))
        STEP(o, recap_graph_replay(g3, s1));
    }
  }

  /* A graph with regions: a WHILE whose body allocates from the graph's pool, draws random
   * numbers and holds an IF on a condition of its own, run once per replay. */
  if (STEP(o, recap_graph_create(&g4, 0)) && STEP(o, recap_graph_capture_begin(g4, NULL, s1))) {
    recap_cond_t more, inner;
    if (STEP(o, recap_cond_create(&more, 1, s1)) &&
        STEP(o, recap_region_begin(RECAP_REGION_WHILE, more, 0, s1))) {
      void *tmp = NULL;
      if (STEP(o, recap_malloc(&tmp, 64 * KiB, s1))) {
        recap__fake_launch_kernel(s1, "body");
        if (gen) STEP(o, recap_rng_uniform(gen, (float *)tmp, 16, s1));
      }
      if (STEP(o, recap_cond_create(&inner, 1, s1)) &&
          STEP(o, recap_region_begin(RECAP_REGION_IF, inner, 0, s1))) {
        recap__fake_launch_kernel(s1, "inner");
        STEP(o, recap_region_end(s1));
      }
      STEP(o, recap_cond_set_value(more, 0, s1));
      if (tmp) STEP(o, recap_free(tmp));
      STEP(o, recap_region_end(s1));
    }
    if (STEP(o, recap_graph_capture_end(g4))) STEP(o, recap_graph_replay(g4, s1));
  }

  /* A graphed callable, forward and backward, then eagerly. */
  sweep_graphed(o, &h, s1, toy_forward);

  /* Eager work after it all, and the cleanup, which runs whatever failed before. */
  STEP(o, recap_malloc(&eager, 5 * MiB, s2));
  STEP(o, recap_free(eager));
  STEP(o, recap_graphed_destroy(h));
  sweep_release(o, (recap_graph_t[]){g1, g2, g3, g4}, 4, (void *[]){out1, out2, b, c}, 4);
  sweep_finish(o, gen, s1, s2);
  return o->status;
}

/* ---- the sweep -------------------------------------------------------------------------------- */

static void count_warnings(recap_log_level_t level, const char *message, void *user_data) {
  (void)level;
  (void)message;
  (*(int *)user_data)++;
}

static const char *kind_name(recap__fake_fault_t kind) {
  static const char *const names[] = {"raw_malloc",       "event_create",
                                      "event_record",     "stream_create",
                                      "capture_begin",    "capture_end",
                                      "instantiate",      "launch",
                                      "patch_plan",       "patch",
                                      "patch_sync",       "exec_update",
                                      "timing",           "upload",
                                      "cond_supported",   "capture_pause",
                                      "capture_to_graph", "cond_handle",
                                      "cond_node",        "cond_launch",
                                      "rng_advance",      "vmm_granularity",
                                      "vmm_reserve",      "vmm_release_range",
                                      "vmm_create",       "vmm_release",
                                      "vmm_map",          "vmm_unmap",
                                      "vmm_set_access",   "host_alloc_pinned",
                                      "host_free_pinned", "nccl_load",
                                      "nccl_collective",  "nccl_mem_alloc",
                                      "nccl_register",    "stream_wait_event",
                                      "stream_blocking",  "capture_child"};
  _Static_assert(sizeof names / sizeof names[0] == RECAP__FAKE_FAULT_KINDS, "a name per kind");
  return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

/* The sweep runs the workload twice: with classic segments, and with every segment on CUDA
 * virtual memory (the expandable_segments option). */
static bool sweep_vmm;

/* Kinds of calls that no path of the library makes in the mode swept, so no workload can reach
 * them: pinned host memory (tests/fake/fake_vmm.c), which the allocator's sleep/wake will call;
 * the fake NCCL (tests/fake/fake_nccl.c), which the workload does not use, and the stream waits
 * that only replays of graphs with collectives make (src/nccl/policy.c);
 * with classic segments, the seam's virtual memory management (cudaMalloc is reached in both
 * modes: segments, or the generators' device state). The sweep checks that the workload indeed
 * makes none of them: the day a library path makes one, the sweep fails until the kind leaves
 * this list and its faults are swept. */
static bool reached_by_no_library_path(recap__fake_fault_t kind) {
  if (kind == RECAP__FAKE_FAULT_HOST_ALLOC_PINNED || kind == RECAP__FAKE_FAULT_HOST_FREE_PINNED)
    return true;
  /* The fake NCCL: the workload makes no collective. */
  if (kind >= RECAP__FAKE_FAULT_NCCL_LOAD && kind <= RECAP__FAKE_FAULT_NCCL_REGISTER) return true;
  if (kind == RECAP__FAKE_FAULT_STREAM_WAIT_EVENT) return true;
  /* Embedding: the workload replays no graph inside another capture. */
  if (kind == RECAP__FAKE_FAULT_CAPTURE_CHILD) return true;
  if (sweep_vmm) return false;
  return kind >= RECAP__FAKE_FAULT_VMM_GRANULARITY && kind <= RECAP__FAKE_FAULT_VMM_SET_ACCESS;
}

static void fresh(int *warnings) {
  /* With VMM segments, a device of 1 GiB: each segment reserves as many addresses as the device
   * has memory, and under valgrind a process cannot reserve the default 64 GiB. */
  recap__fake_config_t small = {.device_count = 1, .memory_per_device = (size_t)1 << 30};
  recap_test_reset(sweep_vmm ? &small : NULL);
  if (sweep_vmm) OK(recap_option_set_u64("expandable_segments", 1));
  recap__graphs_disabled_override(0);
  recap_log_set(count_warnings, warnings);
  recap_clear_last_error();
}

static void sweep(void) {
  int warnings = 0;
  outcome_t o;
  fresh(&warnings);
  if (workload(&o) != RECAP_SUCCESS)
    fail_msg("the workload fails without faults at %s: %s", o.where, o.message);
  if (o.checker[0]) fail_msg("checker %s", o.checker);
  const char *left = sweep_leftovers(false);
  if (left) fail_msg("without faults: %s", left);
  assert_int_equal(warnings, 0);

  int runs = 0, errors = 0, absorbed = 0;
  char per_kind[1024] = "";
  const char *unreached = NULL;
  for (int k = 0; k < RECAP__FAKE_FAULT_KINDS; k++) {
    recap__fake_fault_t kind = (recap__fake_fault_t)k;
    uint64_t nth;
    for (nth = 1;; nth++) {
      fresh(&warnings);
      recap__fake_fail_nth(kind, nth);
      recap_status_t s = workload(&o);
      bool reached = recap__fake_now().calls[kind] >= nth;
      recap__fake_fail_nth(kind, 0);
      if (reached && reached_by_no_library_path(kind))
        fail_msg(
            "the workload makes a %s call, which the sweep counts as reached by no library "
            "path: take the kind off reached_by_no_library_path",
            kind_name(kind));
      if (!reached) break;
      runs++;
      const char *what = kind_name(kind);
      if (s != RECAP_SUCCESS) {
        errors++;
        if (!o.message[0])
          fail_msg("%s call %llu: %s failed with %s and an empty message", what,
                   (unsigned long long)nth, o.where, recap_status_name(s));
      } else {
        /* Success with a failed call inside: the allocator retried (a failed segment
         * allocation after freeing the cache) or fell back (a stream wait instead of an event)
         * and said so in the log; a failed cuMemCreate is out of memory, which the allocator
         * retries too; the update policy gave up a measurement (a timing event, or
         * the upload before a timed replay); a capture did without the stream's flags, which
         * only word advice. Any other failed graph call must reach the caller. */
        absorbed++;
        if (kind >= RECAP__FAKE_FAULT_CAPTURE_BEGIN && kind != RECAP__FAKE_FAULT_TIMING &&
            kind != RECAP__FAKE_FAULT_UPLOAD && kind != RECAP__FAKE_FAULT_VMM_CREATE &&
            kind != RECAP__FAKE_FAULT_STREAM_BLOCKING)
          fail_msg("%s call %llu failed, yet the workload reported success", what,
                   (unsigned long long)nth);
      }
      if (o.checker[0])
        fail_msg("%s call %llu: the checker failed %s", what, (unsigned long long)nth, o.checker);
      left = sweep_leftovers(false);
      if (left)
        fail_msg("%s call %llu (first failure at %s: %s): after cleanup, %s", what,
                 (unsigned long long)nth, o.where[0] ? o.where : "-", o.message, left);
      /* The same process goes on working. */
      if (workload(&o) != RECAP_SUCCESS)
        fail_msg("%s call %llu: the workload fails afterwards at %s: %s", what,
                 (unsigned long long)nth, o.where, o.message);
      left = sweep_leftovers(false);
      if (left)
        fail_msg("%s call %llu: the clean run afterwards leaves %s", what, (unsigned long long)nth,
                 left);
    }
    if (nth == 1 && !unreached && !reached_by_no_library_path(kind)) unreached = kind_name(kind);
    char part[64];
    snprintf(part, sizeof part, "%s%s %llu", per_kind[0] ? ", " : "", kind_name(kind),
             (unsigned long long)(nth - 1));
    strncat(per_kind, part, sizeof per_kind - strlen(per_kind) - 1);
  }
  recap_log_set(NULL, NULL);
  printf(
      "fault sweep%s: %d runs with one injected failure each (%s); %d ended in a clean error, "
      "%d were absorbed by a retry or fallback\n",
      sweep_vmm ? " (VMM segments)" : "", runs, per_kind, errors, absorbed);
  /* The workload makes at least one call of every kind a library path makes, or the sweep
   * misses a layer. */
  if (unreached) fail_msg("the workload never makes a %s call", unreached);
}

RECAP_TEST(faults_at_every_step_of_the_workload) {
  sweep_vmm = false;
  sweep();
}

RECAP_TEST(faults_at_every_step_with_vmm_segments) {
  sweep_vmm = true;
  sweep();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(faults_at_every_step_of_the_workload),
    cmocka_unit_test(faults_at_every_step_with_vmm_segments),
};
RECAP_TEST_MAIN(tests)
