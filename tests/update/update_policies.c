/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * update_policies.c — the update policy on the CPU fake device (a part of test_update): never
 * updating, pausing after failures, pausing when updated executables are slower, the measuring
 * replays and instantiations, timing failures and uploads that never fail a replay, and measured
 * replays from two threads.
 */
#define _POSIX_C_SOURCE 200809L

#include "update/update_internal.h"
#include "update_steps.h"

/* ------------------------------------------------------------------------------------------
 * Policies
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(never_update_always_instantiates) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  recap_update_policy_t p = RECAP_UPDATE_POLICY_INIT;
  p.never_update = 1;
  OK(recap_graph_update_policy_set(g, &p));
  capture_kernels(g, s, 3);
  for (int i = 1; i <= 3; i++) {
    recap_cuda_graph_exec_t old = exec_of(g);
    recapture_kernels(g, s, 3);
    assert_ptr_not_equal(exec_of(g), old);
  }
  assert_int_equal(recap__fake_now().exec_updates, 0);
  assert_int_equal(recap__fake_now().update_refusals, 0);
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.recaptures, 3);
  assert_int_equal(st.instantiations, 3);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_NEVER], 3);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_POLICY_NEVER);
  assert_int_equal(st.last_node, SIZE_MAX);
  /* Back to the default policy: the next recapture updates. */
  OK(recap_graph_update_policy_set(g, NULL));
  recapture_kernels(g, s, 3);
  assert_int_equal(stats_of(g).updates, 1);
  destroy_and_expect_quiet(g);
}

RECAP_TEST(failures_pause_updates_for_retry_after_recaptures) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  recap_update_policy_t p = RECAP_UPDATE_POLICY_INIT;
  p.max_failures = 2;
  p.retry_after = 3;
  OK(recap_graph_update_policy_set(g, &p));
  capture_kernels(g, s, 3);
  /* Two refusals in a row. */
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_PARAMETERS_CHANGED, 1);
  recapture_kernels(g, s, 3);
  assert_int_equal(stats_of(g).consecutive_failures, 1);
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_PARAMETERS_CHANGED, 1);
  recapture_kernels(g, s, 3);
  assert_int_equal(stats_of(g).consecutive_failures, 2);
  /* Three recaptures that do not try. */
  for (int i = 0; i < 3; i++) {
    recap__fake_counters_t before = recap__fake_now();
    recapture_kernels(g, s, 3);
    assert_int_equal(recap__fake_now().exec_updates, before.exec_updates);
    assert_int_equal(recap__fake_now().update_refusals, before.update_refusals);
    assert_int_equal(stats_of(g).last_reason, RECAP_UPDATE_REASON_POLICY_FAILURES);
  }
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.recaptures, 5);
  assert_int_equal(st.instantiations, 5);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_PARAMETERS_CHANGED], 2);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_FAILURES], 3);
  assert_int_equal(st.consecutive_failures, 2);
  /* Then it tries again: refused once more, the pause begins again at once. */
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_ATTRIBUTES_CHANGED, 0);
  recapture_kernels(g, s, 3);
  st = stats_of(g);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_ATTRIBUTES_CHANGED);
  assert_int_equal(st.last_node, 0);
  assert_int_equal(st.consecutive_failures, 3);
  for (int i = 0; i < 3; i++) recapture_kernels(g, s, 3);
  assert_int_equal(stats_of(g).by_reason[RECAP_UPDATE_REASON_POLICY_FAILURES], 6);
  /* And once an update applies, the count of refusals starts over. */
  recapture_kernels(g, s, 3);
  st = stats_of(g);
  assert_int_equal(st.updates, 1);
  assert_int_equal(st.consecutive_failures, 0);
  assert_int_equal(st.recaptures, 10);
  assert_int_equal(st.instantiations, 9);
  /* Setting a policy ends a pause under way. */
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_NOT_SUPPORTED, 2);
  recapture_kernels(g, s, 3);
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_NOT_SUPPORTED, 2);
  recapture_kernels(g, s, 3);
  OK(recap_graph_update_policy_set(g, &p));
  recapture_kernels(g, s, 3);
  assert_int_equal(stats_of(g).updates, 2);
  destroy_and_expect_quiet(g);
}

/* Replay g `n` times on s (the fake's stream progresses only when told). */
static void replays(recap_graph_t g, recap_stream_t s, int n) {
  for (int i = 0; i < n; i++) OK(recap_graph_replay(g, s));
}

RECAP_TEST(slower_updates_pause_updates) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  recap_update_policy_t p = RECAP_UPDATE_POLICY_INIT;
  p.max_slowdown = 0.10;
  p.measure_replays = 4;
  p.retry_after = 2;
  OK(recap_graph_update_policy_set(g, &p));
  recap__fake_updated_slowdown(1.5);
  capture_kernels(g, s, 10); /* 10 µs per fresh replay, 15 µs once updated */
  int64_t events = recap__fake_now().live_events;
  uint64_t timing = recap__fake_now().calls[RECAP__FAKE_FAULT_TIMING];
  replays(g, s, 4);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_TIMING], timing + 8);
  assert_int_equal(recap__fake_now().live_events, events + 8);
  /* Not completed: a replay reads nothing and does not wait. */
  replays(g, s, 1);
  assert_true(stats_of(g).fresh_replay_ms == 0);
  recap__fake_stream_complete(s);
  recapture_kernels(g, s, 10); /* updated */
  assert_int_equal(stats_of(g).updates, 1);
  replays(g, s, 4);
  recap__fake_stream_complete(s);
  assert_true(stats_of(g).updated_replay_ms == 0); /* read at the next replay or recapture */
  uint64_t records = recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD];
  replays(g, s, 1);
  recap_update_stats_t st = stats_of(g);
  assert_true(fabs(st.fresh_replay_ms - 0.010) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 0.015) < 1e-6);
  /* That replay read the times and timed nothing more. */
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records);
  /* 50% slower than allowed: the next two recaptures instantiate afresh, then updates again. */
  recapture_kernels(g, s, 10);
  recapture_kernels(g, s, 10);
  st = stats_of(g);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER], 2);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_POLICY_SLOWER);
  assert_int_equal(st.updates, 1);
  recapture_kernels(g, s, 10);
  assert_int_equal(stats_of(g).updates, 2);
  OK(recap_graph_destroy(g));
  assert_int_equal(recap__fake_now().live_events, events);
  expect_quiet();
}

/* The policy set after the first capture (its executable already instantiated) measures that
 * executable's replays as the baseline, as one set before. */
RECAP_TEST(a_policy_set_after_the_capture_measures) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  recap__fake_updated_slowdown(1.5);
  capture_kernels(g, s, 10);
  measure_updates(g, 0.10, 2);
  replays(g, s, 2);
  recap__fake_stream_complete(s);
  for (int i = 0; i < 2; i++) {
    recapture_kernels(g, s, 10);
    replays(g, s, 1);
    recap__fake_stream_complete(s);
  }
  /* This recapture reads the last sample, compares, and instantiates afresh already. */
  recapture_kernels(g, s, 10);
  recap_update_stats_t st = stats_of(g);
  assert_true(fabs(st.fresh_replay_ms - 0.010) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 0.015) < 1e-6);
  assert_int_equal(st.updates, 2);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER], 1);
  recapture_kernels(g, s, 10);
  assert_int_equal(stats_of(g).by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER], 2);
  destroy_and_expect_quiet(g);
}

RECAP_TEST(equal_speed_keeps_updating_and_stops_measuring) {
  recap_stream_t s;
  recap_graph_t g = measured_graph(&s, 0.05, 3, 6);
  replays(g, s, 3);
  recap__fake_stream_complete(s);
  recapture_kernels(g, s, 6);
  replays(g, s, 3);
  recap__fake_stream_complete(s);
  recapture_kernels(g, s, 6); /* reads the times: equal */
  recap_update_stats_t st = stats_of(g);
  assert_true(fabs(st.fresh_replay_ms - 0.006) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 0.006) < 1e-6);
  assert_int_equal(st.updates, 2);
  /* Measured once: replays record no more events. */
  uint64_t records = recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD];
  replays(g, s, 5);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records);
  assert_false(recap__update_measuring(recap__update_of(g)));
  destroy_and_expect_quiet(g);
}

/* A graph of 10 kernels measured with max_slowdown 10% over 4 replays, captured, then
 * recaptured `recaptures` times: after the capture and after each recapture, `replays_each`
 * replays, then the stream finishes (the policy reads the times at the next recapture). */
static recap_graph_t replay_loop(recap_stream_t s, int recaptures, int replays_each) {
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  measure_updates(g, 0.10, 4);
  capture_kernels(g, s, 10); /* 10 µs per fresh replay */
  replays(g, s, replays_each);
  recap__fake_stream_complete(s);
  for (int i = 0; i < recaptures; i++) {
    recapture_kernels(g, s, 10);
    replays(g, s, replays_each);
    recap__fake_stream_complete(s);
  }
  return g;
}

/* One replay per recapture: the first capture gives one fresh sample, recaptures 1-4 the four
 * updated ones; recaptures 5-7 instantiate afresh for the three fresh samples missing, and
 * recapture 8 reads the last one and compares. */
RECAP_TEST(one_replay_per_recapture_measures_with_fresh_instantiations) {
  recap_stream_t s = fresh_stream();
  recap__fake_updated_slowdown(1.5);
  recap_graph_t g = replay_loop(s, 4, 1);
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.updates, 4);
  assert_int_equal(st.instantiations, 0);
  assert_true(st.fresh_replay_ms == 0 && st.updated_replay_ms == 0);
  recapture_kernels(g, s, 10);
  st = stats_of(g);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_POLICY_MEASURE);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_MEASURE], 1);
  assert_int_equal(st.updates, 4);
  for (int i = 0; i < 2; i++) {
    replays(g, s, 1);
    recap__fake_stream_complete(s);
    recapture_kernels(g, s, 10);
  }
  st = stats_of(g);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_MEASURE], 3);
  assert_int_equal(st.instantiations, 3);
  assert_int_equal(st.updates, 4);
  assert_true(st.fresh_replay_ms == 0); /* the third fresh executable is not replayed yet */
  replays(g, s, 1);
  recap__fake_stream_complete(s);
  /* 50% slower than allowed: this recapture compares and pauses (retry_after 16). */
  recapture_kernels(g, s, 10);
  st = stats_of(g);
  assert_true(fabs(st.fresh_replay_ms - 0.010) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 0.015) < 1e-6);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_POLICY_SLOWER);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER], 1);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_MEASURE], 3);
  assert_int_equal(st.instantiations, 4);
  assert_int_equal(st.recaptures, 8);
  OK(recap_graph_destroy(g));

  /* The same loop, 1000 recaptures: after those first 7, each round of 20 is 16 paused
   * recaptures, whose replays are the fresh samples, then 4 updates; the recapture after them
   * compares and pauses again. No other measuring instantiation: 3 + 49 * 4 + 13 paused. */
  g = replay_loop(s, 1000, 1);
  st = stats_of(g);
  assert_int_equal(st.recaptures, 1000);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_MEASURE], 3);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER], 49 * 16 + 13);
  assert_int_equal(st.updates, 4 + 49 * 4);
  assert_int_equal(st.instantiations, 3 + 49 * 16 + 13);
  assert_true(fabs(st.fresh_replay_ms - 0.010) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 0.015) < 1e-6);
  destroy_and_expect_quiet(g);
}

/* Equal speeds: the same three measuring instantiations, one comparison, then updates only,
 * untimed. */
RECAP_TEST(one_replay_per_recapture_at_equal_speed_keeps_updating) {
  recap_stream_t s = fresh_stream();
  recap_graph_t g = replay_loop(s, 8, 1);
  recap_update_stats_t st = stats_of(g);
  assert_true(fabs(st.fresh_replay_ms - 0.010) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 0.010) < 1e-6);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_NONE);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_MEASURE], 3);
  assert_int_equal(st.instantiations, 3);
  assert_int_equal(st.updates, 5);
  assert_false(recap__update_measuring(recap__update_of(g)));
  for (int i = 0; i < 20; i++) recapture_kernels(g, s, 10);
  st = stats_of(g);
  assert_int_equal(st.instantiations, 3);
  assert_int_equal(st.updates, 25);
  uint64_t records = recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD];
  replays(g, s, 3);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records);
  destroy_and_expect_quiet(g);
}

/* As many replays per executable as measure_replays: the first capture is the baseline and no
 * recapture instantiates to measure. Two replays of four: one measuring instantiation. */
RECAP_TEST(enough_replays_need_no_measuring_instantiation) {
  recap_stream_t s = fresh_stream();
  recap__fake_updated_slowdown(1.5);
  recap_graph_t g = replay_loop(s, 2, 4);
  recap_update_stats_t st = stats_of(g);
  assert_true(fabs(st.fresh_replay_ms - 0.010) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 0.015) < 1e-6);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_MEASURE], 0);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER], 1);
  assert_int_equal(st.updates, 1);
  OK(recap_graph_destroy(g));

  g = replay_loop(s, 4, 2);
  st = stats_of(g);
  assert_true(fabs(st.fresh_replay_ms - 0.010) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 0.015) < 1e-6);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_MEASURE], 1);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER], 1);
  assert_int_equal(st.updates, 2);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_POLICY_SLOWER);
  destroy_and_expect_quiet(g);
}

/* Fresh executables that are never replayed give no samples: measure_replays measuring
 * instantiations a round, then updates again, without a comparison. */
RECAP_TEST(measuring_instantiations_stop_at_measure_replays) {
  recap_stream_t s = fresh_stream();
  recap__fake_updated_slowdown(1.5);
  recap_graph_t g = replay_loop(s, 4, 1); /* 1 fresh sample, 4 updated */
  for (int i = 0; i < 6; i++) recapture_kernels(g, s, 10);
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_MEASURE], 4);
  assert_int_equal(st.instantiations, 4);
  assert_int_equal(st.updates, 6);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_NONE);
  assert_true(st.fresh_replay_ms == 0 && st.updated_replay_ms == 0);
  destroy_and_expect_quiet(g);
}

/* The log's messages, concatenated (update_steps.h). */
char logged[4096];
void log_into(recap_log_level_t level, const char *message, void *user_data) {
  (void)level;
  (void)user_data;
  size_t used = strlen(logged);
  snprintf(logged + used, sizeof logged - used, "%s\n", message);
}

RECAP_TEST(a_replay_into_another_capture_is_not_timed) {
  recap_stream_t s = fresh_stream(), outer_stream = recap__fake_stream_new();
  recap_graph_t g, outer;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP)); /* embedding copies the template */
  OK(recap_graph_create(&outer, 0));
  measure_updates(g, 0.05, 2);
  capture_kernels(g, s, 3);
  assert_true(recap__update_measuring(recap__update_of(g)));
  uint64_t records = recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD];
  OK(recap_graph_capture_begin(outer, NULL, outer_stream));
  OK(recap_graph_replay(g, outer_stream)); /* a child graph node of `outer` */
  OK(recap_graph_capture_end(outer));
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records);
  /* Nor was g's executable uploaded: its first launch outside the capture still uploads. */
  assert_int_equal(recap__fake_now().graph_uploads, 0);
  OK(recap_graph_replay(g, s)); /* timed */
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records + 2);
  assert_int_equal(recap__fake_now().graph_uploads, 1);
  DESTROY_GRAPHS(outer, g);
  expect_quiet();
}

RECAP_TEST(timing_failures_never_fail_a_replay) {
  recap_stream_t s;
  recap_graph_t g = measured_graph(&s, 0.05, 2, 2);
  logged[0] = '\0';
  recap_log_set(log_into, NULL);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_TIMING, 1);
  uint64_t launches = recap__fake_now().graph_launches;
  replays(g, s, 3);
  assert_int_equal(recap__fake_now().graph_launches, launches + 3);
  assert_false(recap__update_measuring(recap__update_of(g))); /* the round was given up */
  EXPECT_CONTAINS(logged, "update policy: creating a timing event failed", "fault injected");
  /* The next fresh instantiation measures again. */
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_REFUSED_OTHER, SIZE_MAX);
  recapture_kernels(g, s, 2);
  assert_true(recap__update_measuring(recap__update_of(g)));
  recap__fake_fail_nth(RECAP__FAKE_FAULT_EVENT_RECORD, 2); /* the event after the launch */
  replays(g, s, 2);
  assert_int_equal(recap__fake_now().graph_launches, launches + 5);
  assert_non_null(strstr(logged, "update policy: recording a timing event failed"));
  recap_log_set(NULL, NULL);
  destroy_and_expect_quiet(g);
}

/* The first timed launch of an executable, fresh or updated, uploads it before its `before`
 * event, so that the sample is a replay's time; later launches, and launches that are not
 * timed, upload nothing. */
RECAP_TEST(a_timed_first_launch_uploads_the_executable_first) {
  recap_stream_t s;
  recap_graph_t g = measured_graph(&s, 0.10, 2, 10);
  assert_int_equal(recap__fake_now().graph_uploads, 0); /* instantiating uploads nothing */
  uint64_t records = recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD];
  uint64_t launches = recap__fake_now().graph_launches;
  OK(recap_graph_replay(g, s)); /* fresh, timed, first: uploaded */
  assert_int_equal(recap__fake_now().graph_uploads, 1);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_UPLOAD], 1);
  OK(recap_graph_replay(g, s)); /* timed, not first */
  assert_int_equal(recap__fake_now().graph_uploads, 1);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records + 4);
  OK(recap_graph_replay(g, s)); /* both samples in flight: not timed */
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records + 4);
  assert_int_equal(recap__fake_now().graph_uploads, 1);
  recap__fake_stream_complete(s);

  recapture_kernels(g, s, 10); /* updated */
  assert_int_equal(stats_of(g).updates, 1);
  OK(recap_graph_replay(g, s)); /* updated, timed, first: uploaded */
  assert_int_equal(recap__fake_now().graph_uploads, 2);
  OK(recap_graph_replay(g, s));
  assert_int_equal(recap__fake_now().graph_uploads, 2);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records + 8);
  assert_int_equal(recap__fake_now().graph_launches, launches + 5);
  recap__fake_stream_complete(s);
  /* The upload took no time in the fake's model: every sample is 10 nodes' 10 µs. */
  OK(recap_graph_replay(g, s)); /* reads the samples and compares: measuring ends */
  recap_update_stats_t st = stats_of(g);
  assert_true(fabs(st.fresh_replay_ms - 0.010) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 0.010) < 1e-6);
  assert_false(recap__update_measuring(recap__update_of(g)));

  /* Replays that are not timed never upload, first ones included. */
  recapture_kernels(g, s, 10);
  assert_int_equal(stats_of(g).updates, 2);
  replays(g, s, 3);
  assert_int_equal(recap__fake_now().graph_uploads, 2);
  recap_graph_t plain;
  OK(recap_graph_create(&plain, 0));
  capture_kernels(plain, s, 4);
  replays(plain, s, 2);
  recapture_kernels(plain, s, 4);
  replays(plain, s, 2);
  assert_int_equal(stats_of(plain).updates, 1);
  assert_int_equal(recap__fake_now().graph_uploads, 2);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_UPLOAD], 2);
  DESTROY_GRAPHS(plain, g);
  expect_quiet();
}

/* A failed upload before a timed replay ends the round of measurements (logged), and the
 * replay itself goes on and succeeds. */
RECAP_TEST(an_upload_failure_gives_up_measuring_not_the_replay) {
  recap_stream_t s;
  recap_graph_t g = measured_graph(&s, 0.05, 2, 2);
  logged[0] = '\0';
  recap_log_set(log_into, NULL);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_UPLOAD, 1);
  uint64_t records = recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD];
  uint64_t launches = recap__fake_now().graph_launches;
  recap_clear_last_error();
  OK(recap_graph_replay(g, s));
  assert_int_equal(recap__fake_now().graph_launches, launches + 1);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_UPLOAD], 1);
  assert_int_equal(recap__fake_now().graph_uploads, 0);
  /* The upload comes before the `before` event: no event was recorded. */
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records);
  assert_false(recap__update_measuring(recap__update_of(g))); /* the round was given up */
  assert_non_null(
      strstr(logged, "update policy: uploading the executable before a timed replay failed"));
  EXPECT_CONTAINS(logged, "cudaGraphUpload", "fault injected");
  /* The caller's last error is not the measurement's. */
  assert_null(strstr(recap_last_error(), "cudaGraphUpload"));
  replays(g, s, 2); /* not measured: nothing timed, nothing uploaded */
  assert_int_equal(recap__fake_now().graph_launches, launches + 3);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_UPLOAD], 1);
  /* The next fresh instantiation measures again, and its first timed launch uploads. */
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_REFUSED_OTHER, SIZE_MAX);
  recapture_kernels(g, s, 2);
  assert_true(recap__update_measuring(recap__update_of(g)));
  OK(recap_graph_replay(g, s));
  assert_int_equal(recap__fake_now().graph_uploads, 1);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records + 2);
  recap_log_set(NULL, NULL);
  destroy_and_expect_quiet(g);
}

/* Replays of one measured graph from two threads at once, each on its own stream. */
RECAP_TEST(measured_replays_from_two_threads) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  measure_updates(g, 0.05, 8);
  recap__fake_updated_slowdown(2.0);
  capture_kernels(g, s, 4);
  for (int round = 0; round < 2; round++) {
    replay_from_two_threads(g);
    if (round == 0) recapture_kernels(g, s, 4); /* updated: the second round times it */
  }
  OK(recap_graph_replay(g, s)); /* reads what is left */
  recap_update_stats_t st = stats_of(g);
  assert_true(fabs(st.fresh_replay_ms - 0.004) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 0.008) < 1e-6);
  /* Twice as slow: the next recapture instantiates afresh. */
  recapture_kernels(g, s, 4);
  assert_int_equal(stats_of(g).last_reason, RECAP_UPDATE_REASON_POLICY_SLOWER);
  destroy_and_expect_quiet(g);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(never_update_always_instantiates),
    cmocka_unit_test(failures_pause_updates_for_retry_after_recaptures),
    cmocka_unit_test(slower_updates_pause_updates),
    cmocka_unit_test(a_policy_set_after_the_capture_measures),
    cmocka_unit_test(equal_speed_keeps_updating_and_stops_measuring),
    cmocka_unit_test(one_replay_per_recapture_measures_with_fresh_instantiations),
    cmocka_unit_test(one_replay_per_recapture_at_equal_speed_keeps_updating),
    cmocka_unit_test(enough_replays_need_no_measuring_instantiation),
    cmocka_unit_test(measuring_instantiations_stop_at_measure_replays),
    cmocka_unit_test(a_replay_into_another_capture_is_not_timed),
    cmocka_unit_test(timing_failures_never_fail_a_replay),
    cmocka_unit_test(a_timed_first_launch_uploads_the_executable_first),
    cmocka_unit_test(an_upload_failure_gives_up_measuring_not_the_replay),
    cmocka_unit_test(measured_replays_from_two_threads),
};
const recap_test_part_t update_policy_tests = RECAP_TEST_PART(tests);
