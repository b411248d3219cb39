/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * update_checks.c — the default policy's check on the CPU fake device (a part of test_update):
 * an executable of more than 128 nodes that the fake's timing model makes slower after many
 * changes (updates in place, rebinds) is caught by a check and instantiated afresh, and replays
 * fast again; the checks come back every 64 changes; smaller graphs and the user's policies are
 * left as they were; a policy struct of the first version still works; timing failures never
 * fail a replay.
 */
#define _POSIX_C_SOURCE 200809L

#include "graph/graph_internal.h"
#include "update/update_internal.h"
#include "update_steps.h"

enum {
  BIG = 200,       /* kernels of a graph the check applies to */
  PERIOD = 64,     /* the default auto_check_period */
  SAMPLES = 8,     /* the default measure_replays */
  SLOW_AFTER = 100 /* the fake's executables slow down after this many changes */
};

/* The µs that one replay of g takes on s, by the fake's timing model (the stream completed). */
static double replay_us(recap_graph_t g, recap_stream_t s) {
  const recap__device_ops_t *dev = recap__device();
  recap__event_t a, b;
  OK(dev->timing_event_create(&a));
  OK(dev->timing_event_create(&b));
  OK(dev->event_record(a, s));
  OK(recap_graph_replay(g, s));
  OK(dev->event_record(b, s));
  recap__fake_stream_complete(s);
  float ms = 0;
  OK(dev->event_elapsed(a, b, &ms));
  OK(dev->event_destroy(a));
  OK(dev->event_destroy(b));
  return ms * 1000.0;
}

/* Whether g's replays go through the update policy's launch (and may be timed). */
static bool launched_by_the_policy(recap_graph_t g) { return g->attached.exec_launcher != 0; }

/* One step of a loop that updates at every recapture: recapture `kernels` kernels, replay once,
 * let the GPU finish. */
static void update_and_replay(recap_graph_t g, recap_stream_t s, int kernels) {
  recapture_kernels(g, s, kernels);
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
}

/* On a fresh fake whose executables slow down by `factor` after `slow_after` changes (0: never),
 * a graph of `kernels` kernels under the default policy, replayed `replays` times after its
 * capture (the check's baseline when it has more than 128 nodes). */
static recap_graph_t replayed_graph(recap_stream_t *s, uint64_t slow_after, double factor,
                                    int kernels, int replays) {
  recap_graph_t g = fresh_graph(s, 0);
  recap__fake_changed_slowdown(slow_after, factor);
  capture_kernels(g, *s, kernels);
  for (int i = 0; i < replays; i++) OK(recap_graph_replay(g, *s));
  recap__fake_stream_complete(*s);
  return g;
}

/* On a fresh fake whose executables slow down by `factor` after `slow_after` changes, a graph
 * under policy p holding a capture of `kernels` kernels. */
static recap_graph_t graph_with_policy(recap_stream_t *s, const recap_update_policy_t *p,
                                       int kernels, uint64_t slow_after, double factor) {
  recap_graph_t g = fresh_graph(s, 0);
  recap__fake_changed_slowdown(slow_after, factor);
  OK(recap_graph_update_policy_set(g, p));
  capture_kernels(g, *s, kernels);
  return g;
}

RECAP_TEST(the_default_policy_catches_a_slowdown_after_many_updates) {
  recap_stream_t s;
  recap_graph_t g = replayed_graph(&s, SLOW_AFTER, 1.2, BIG, SAMPLES);
  assert_true(launched_by_the_policy(g));
  assert_true(fabs(replay_us(g, s) - BIG) < 1e-3);
  uint64_t instantiations = recap__fake_now().calls[RECAP__FAKE_FAULT_INSTANTIATE];
  int steps = 0;
  while (stats_of(g).by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER] == 0 && steps < 400) {
    update_and_replay(g, s, BIG);
    steps++;
  }
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER], 1);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_POLICY_SLOWER);
  /* The first check (after 64 updates) found no slowdown, the second (after 128 more or so)
   * found 20%: the recapture after it instantiated afresh. */
  assert_int_equal(st.auto_checks, 2);
  assert_in_range(steps, SLOW_AFTER, 2 * (PERIOD + SAMPLES) + 2);
  assert_true(fabs(st.fresh_replay_ms - BIG / 1000.0) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 1.2 * BIG / 1000.0) < 1e-6);
  assert_int_equal(st.instantiations, 1);
  assert_int_equal(st.updates, (uint64_t)steps - 1);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_INSTANTIATE], instantiations + 1);
  /* Fast again, and updated in place again. */
  assert_true(fabs(replay_us(g, s) - BIG) < 1e-3);
  update_and_replay(g, s, BIG);
  assert_int_equal(stats_of(g).last_reason, RECAP_UPDATE_REASON_NONE);
  assert_true(fabs(replay_us(g, s) - BIG) < 1e-3);
  destroy_and_expect_quiet(g);
}

RECAP_TEST(the_default_policy_checks_again_every_64_changes) {
  recap_stream_t s;
  recap_graph_t g = replayed_graph(&s, 0, 1.0, BIG, SAMPLES);
  /* The baseline was timed; the next replay reads it and times nothing. */
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  uint64_t records = recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD];
  assert_false(recap__update_measuring(recap__update_of(g)));
  for (int check = 1; check <= 3; check++) {
    /* 63 changes: nothing timed. */
    uint64_t before = recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD];
    for (int i = 1; i < PERIOD; i++) update_and_replay(g, s, BIG);
    assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], before);
    assert_int_equal(stats_of(g).auto_checks, (uint64_t)check - 1);
    /* The 64th begins a check: its replays are timed until it has its samples. */
    recapture_kernels(g, s, BIG);
    assert_true(recap__update_measuring(recap__update_of(g)));
    for (int i = 0; i < SAMPLES; i++) OK(recap_graph_replay(g, s));
    recap__fake_stream_complete(s);
    assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], before + 2 * SAMPLES);
    OK(recap_graph_replay(g, s)); /* reads the times, compares, times nothing */
    recap__fake_stream_complete(s);
    assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], before + 2 * SAMPLES);
    assert_false(recap__update_measuring(recap__update_of(g)));
    assert_int_equal(stats_of(g).auto_checks, (uint64_t)check);
  }
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.instantiations, 0);
  assert_int_equal(st.updates, 3 * PERIOD);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD],
                   records + 3 * 2 * SAMPLES);
  destroy_and_expect_quiet(g);
}

/* Capture (recapture: in place of its capture, with its options) step(out, in, k, dk, copy) and
 * `kernels` kernels after it into g; opts: the first capture's options. */
static void capture_big_step(recap_graph_t g, recap_stream_t s, const recap_capture_options_t *opts,
                             bool recapture, int kernels, float *out, const float *in, unsigned k,
                             const float *dk, float *copy) {
  OK(recapture ? recap_graph_recapture_begin(g, NULL, s) : recap_graph_capture_begin(g, opts, s));
  step(s, out, in, k, dk, copy);
  launch(s, kernels);
  OK(recap_graph_capture_end(g));
}

/* A rebindable graph of `kernels` kernels after the step, reading `in`. */
static recap_graph_t rebindable_big_graph(recap_stream_t s, int kernels, float *out,
                                          const float *in, const float *dk, float *copy) {
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.rebind = RECAP_REBIND_AUTO;
  capture_big_step(g, s, &opts, false, kernels, out, in, 1, dk, copy);
  return g;
}

/* Rebinds slow the executable down as updates do: the check counts them, and the rebind after it
 * found the slowdown instantiates afresh from the template, which holds the rebound inputs. */
RECAP_TEST(the_default_policy_catches_a_slowdown_after_many_rebinds) {
  recap_stream_t s = fresh_stream();
  float *in, *in2, *out, *copy, *dk;
  step_buffers(s, &in, &in2, &out, &copy, &dk, 1000, 0.25f);
  recap__fake_changed_slowdown(SLOW_AFTER, 1.5);
  recap_graph_t g = rebindable_big_graph(s, BIG, out, in, dk, copy);
  double fresh_us = replay_us(g, s);
  for (int i = 1; i < SAMPLES; i++) OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  uint64_t instantiations = recap__fake_now().calls[RECAP__FAKE_FAULT_INSTANTIATE];
  float *from = in, *to = in2;
  int rebinds = 0;
  while (stats_of(g).by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER] == 0 && rebinds < 400) {
    recap_rebind_t r = {sizeof(recap_rebind_t), from, to, 0};
    OK(recap_graph_rebind(g, &r, 1, NULL));
    float *t = from;
    from = to, to = t;
    rebinds++;
    OK(recap_graph_replay(g, s));
    recap__fake_stream_complete(s);
  }
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER], 1);
  assert_int_equal(st.instantiations, 1);
  assert_int_equal(st.recaptures, 0);
  assert_int_equal(st.rebinds, (uint64_t)rebinds);
  assert_in_range(rebinds, SLOW_AFTER, 2 * (PERIOD + SAMPLES) + 2);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_INSTANTIATE], instantiations + 1);
  /* The new executable reads what the last rebind gave, and replays at the fresh speed. */
  assert_true(fabs(replay_us(g, s) - fresh_us) < 1e-3);
  expect_copy(copy, from == in ? 0 : 1000, 1);
  /* And it can be rebound again. */
  recap_rebind_t r = {sizeof(recap_rebind_t), from, to, 0};
  OK(recap_graph_rebind(g, &r, 1, NULL));
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  expect_copy(copy, to == in ? 0 : 1000, 1);
  OK(recap_graph_destroy(g));
  free_step_buffers(in, in2, out, copy, dk);
  expect_quiet();
}

/* A rebindable executable updated in place keeps the graph it was instantiated from (its
 * origin), through which rebinds patch it. The check finds it slower after the updates, and the
 * next rebind instantiates it afresh from the newest template: rebinds then go through that one,
 * and the replays read what they should at the fresh speed. */
RECAP_TEST(a_rebind_after_updates_renews_from_the_newest_template) {
  recap_stream_t s = fresh_stream();
  float *in, *in2, *out, *copy, *dk;
  step_buffers(s, &in, &in2, &out, &copy, &dk, 1000, 0.25f);
  recap__fake_changed_slowdown(PERIOD / 2, 1.5);
  recap_graph_t g = rebindable_big_graph(s, BIG, out, in, dk, copy);
  double fresh_us = replay_us(g, s);
  for (int i = 1; i < SAMPLES; i++) OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  for (int i = 0; i < PERIOD; i++) {
    capture_big_step(g, s, NULL, true, BIG, out, in, 2, dk, copy);
    OK(recap_graph_replay(g, s));
    recap__fake_stream_complete(s);
  }
  for (int i = 0; i < SAMPLES; i++) OK(recap_graph_replay(g, s)); /* the check */
  recap__fake_stream_complete(s);
  OK(recap_graph_replay(g, s)); /* reads and compares */
  recap__fake_stream_complete(s);
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.updates, PERIOD);
  assert_int_equal(st.auto_checks, 1);
  assert_int_equal(st.instantiations, 0); /* not yet: at the next change */
  uint64_t instantiations = recap__fake_now().calls[RECAP__FAKE_FAULT_INSTANTIATE];
  rebind_and_check(g, s, in, in2, copy, 1000, 2);
  assert_int_equal(stats_of(g).by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER], 1);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_INSTANTIATE], instantiations + 1);
  assert_true(fabs(replay_us(g, s) - fresh_us) < 1e-3);
  rebind_and_check(g, s, in2, in, copy, 0, 2);
  OK(recap_graph_destroy(g));
  free_step_buffers(in, in2, out, copy, dk);
  expect_quiet();
}

/* A graph of 128 nodes keeps the plain launch: nothing timed, however slow its updates make it;
 * one of 129 is checked. */
RECAP_TEST(the_default_policy_leaves_graphs_of_128_nodes_alone) {
  recap_stream_t s;
  recap_graph_t g = replayed_graph(&s, 10, 2.0, 128, SAMPLES);
  uint64_t timing = recap__fake_now().calls[RECAP__FAKE_FAULT_TIMING];
  uint64_t records = recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD];
  assert_false(launched_by_the_policy(g));
  for (int i = 0; i < 3 * PERIOD; i++) update_and_replay(g, s, 128);
  assert_false(launched_by_the_policy(g));
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.updates, 3 * PERIOD);
  assert_int_equal(st.instantiations, 0);
  assert_int_equal(st.auto_checks, 0);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_TIMING], timing);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records);
  assert_true(fabs(replay_us(g, s) - 2 * 128) < 1e-3); /* slow, and left so */
  /* A recapture of 129 nodes is refused (another topology), instantiated afresh, and checked. */
  update_and_replay(g, s, 129);
  assert_true(launched_by_the_policy(g));
  /* And back to 128: the plain launch again. */
  update_and_replay(g, s, 128);
  assert_false(launched_by_the_policy(g));
  destroy_and_expect_quiet(g);
}

/* never_update, max_failures and max_slowdown do what they did on graphs of more than 128 nodes;
 * auto_check_nodes < 0 turns the check off. */
RECAP_TEST(user_policies_keep_their_behaviour_on_large_graphs) {
  /* never_update: every recapture instantiates afresh; nothing slows down. */
  recap_stream_t s;
  recap_update_policy_t p = RECAP_UPDATE_POLICY_INIT;
  p.never_update = 1;
  recap_graph_t g = graph_with_policy(&s, &p, BIG, 10, 2.0);
  for (int i = 0; i < 2 * PERIOD; i++) update_and_replay(g, s, BIG);
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_NEVER], 2 * PERIOD);
  assert_int_equal(st.instantiations, 2 * PERIOD);
  assert_int_equal(st.auto_checks, 0);
  OK(recap_graph_destroy(g));

  /* max_failures: the pause after refusals is the same; the updates between are checked. */
  p = (recap_update_policy_t)RECAP_UPDATE_POLICY_INIT;
  p.max_failures = 1;
  p.retry_after = 2;
  g = graph_with_policy(&s, &p, BIG, 10, 2.0);
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_PARAMETERS_CHANGED, 3);
  update_and_replay(g, s, BIG);
  update_and_replay(g, s, BIG);
  update_and_replay(g, s, BIG);
  update_and_replay(g, s, BIG);
  st = stats_of(g);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_PARAMETERS_CHANGED], 1);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_FAILURES], 2);
  assert_int_equal(st.updates, 1);
  assert_true(launched_by_the_policy(g));
  OK(recap_graph_destroy(g));

  /* max_slowdown: the user's measurement, and no check of the default policy's. */
  p = (recap_update_policy_t)RECAP_UPDATE_POLICY_INIT;
  p.max_slowdown = 0.5;
  g = graph_with_policy(&s, &p, BIG, 10, 2.0);
  for (int i = 0; i < SAMPLES; i++) OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  for (int i = 0; i < 2 * PERIOD + SAMPLES; i++) update_and_replay(g, s, BIG);
  st = stats_of(g);
  assert_int_equal(st.auto_checks, 0);
  /* Its one comparison came after the first updates, before the slowdown. */
  assert_int_equal(st.instantiations, 0);
  assert_true(fabs(st.updated_replay_ms - st.fresh_replay_ms) < 1e-6);
  OK(recap_graph_destroy(g));

  /* auto_check_nodes < 0: no check, the plain launch, and the slowdown stays. */
  p = (recap_update_policy_t)RECAP_UPDATE_POLICY_INIT;
  p.auto_check_nodes = -1;
  g = graph_with_policy(&s, &p, BIG, 10, 2.0);
  assert_false(launched_by_the_policy(g));
  for (int i = 0; i < 3 * PERIOD; i++) update_and_replay(g, s, BIG);
  st = stats_of(g);
  assert_int_equal(st.instantiations, 0);
  assert_int_equal(st.auto_checks, 0);
  assert_true(fabs(replay_us(g, s) - 2 * BIG) < 1e-3);
  /* Set back to the default, the check applies at once, with the executable as it is for its
   * baseline: no slowdown to find then. */
  OK(recap_graph_update_policy_set(g, NULL));
  assert_true(launched_by_the_policy(g));
  destroy_and_expect_quiet(g);
}

/* A smaller threshold, period and tolerance of the user's own. */
RECAP_TEST(the_check_takes_its_threshold_period_and_tolerance_from_the_policy) {
  recap_stream_t s;
  recap_update_policy_t p = RECAP_UPDATE_POLICY_INIT;
  p.auto_check_nodes = 8;
  p.auto_check_period = 10;
  p.auto_check_slowdown = 0.10;
  p.measure_replays = 2;
  recap_graph_t g = graph_with_policy(&s, &p, 16, 20, 1.08);
  assert_true(launched_by_the_policy(g));
  OK(recap_graph_replay(g, s));
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  for (int i = 0; i < 60; i++) update_and_replay(g, s, 16);
  /* 8% slower is within 10%: checked, never renewed. */
  recap_update_stats_t st = stats_of(g);
  assert_in_range(st.auto_checks, 4, 6);
  assert_int_equal(st.instantiations, 0);
  /* 5% tolerance: the next check renews. */
  p.auto_check_slowdown = 0.05;
  OK(recap_graph_update_policy_set(g, &p));
  for (int i = 0; i < 30 && stats_of(g).instantiations == 0; i++) update_and_replay(g, s, 16);
  assert_int_equal(stats_of(g).by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER], 1);
  destroy_and_expect_quiet(g);
}

/* A caller built with the first version of the struct (it ends at measure_replays) keeps the
 * default check; a negative or NaN auto_check_slowdown is refused. */
RECAP_TEST(a_policy_of_the_first_version_keeps_the_default_check) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  recap_update_policy_t p = RECAP_UPDATE_POLICY_INIT;
  p.size = offsetof(recap_update_policy_t, measure_replays) + sizeof p.measure_replays;
  p.auto_check_nodes = -1; /* past its size: not read */
  OK(recap_graph_update_policy_set(g, &p));
  capture_kernels(g, s, BIG);
  assert_true(launched_by_the_policy(g));
  p = (recap_update_policy_t)RECAP_UPDATE_POLICY_INIT;
  p.auto_check_slowdown = -0.1;
  EXPECT_STATUS(recap_graph_update_policy_set(g, &p), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(recap_last_error(), "auto_check_slowdown");
  p.auto_check_slowdown = NAN;
  EXPECT_STATUS(recap_graph_update_policy_set(g, &p), RECAP_ERROR_INVALID_ARGUMENT);
  /* Counters of the second version: nothing written past shape_sets. */
  recap_update_stats_t st;
  memset(&st, 0xab, sizeof st);
  st.size = offsetof(recap_update_stats_t, shape_sets) + sizeof st.shape_sets;
  OK(recap_graph_update_stats(g, &st));
  unsigned char *past = (unsigned char *)&st.auto_checks;
  for (size_t i = 0; i < sizeof st.auto_checks; i++) assert_int_equal(past[i], 0xab);
  destroy_and_expect_quiet(g);
}

/* A timing event that cannot be made, or recorded, during the baseline or a check: logged, the
 * replay succeeds, and the check stops until the next fresh instantiation. */
RECAP_TEST(timing_failures_of_the_check_never_fail_a_replay) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  logged[0] = '\0';
  recap_log_set(log_into, NULL);
  capture_kernels(g, s, BIG);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_TIMING, 1);
  uint64_t launches = recap__fake_now().graph_launches;
  OK(recap_graph_replay(g, s));
  assert_int_equal(recap__fake_now().graph_launches, launches + 1);
  EXPECT_CONTAINS(logged, "update policy: creating a timing event failed");
  assert_false(recap__update_measuring(recap__update_of(g)));
  for (int i = 0; i < 2 * PERIOD; i++) update_and_replay(g, s, BIG);
  assert_int_equal(stats_of(g).auto_checks, 0);
  /* A fresh instantiation checks again; an event record that fails during its check. */
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_REFUSED_OTHER, SIZE_MAX);
  update_and_replay(g, s, BIG);
  for (int i = 1; i < SAMPLES; i++) OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  for (int i = 0; i < PERIOD; i++) update_and_replay(g, s, BIG);
  logged[0] = '\0';
  recap__fake_fail_nth(RECAP__FAKE_FAULT_EVENT_RECORD, 1);
  recap_clear_last_error();
  OK(recap_graph_replay(g, s));
  EXPECT_CONTAINS(logged, "recording a timing event failed");
  assert_null(strstr(recap_last_error(), "fault injected"));
  assert_false(recap__update_measuring(recap__update_of(g)));
  recap_log_set(NULL, NULL);
  destroy_and_expect_quiet(g);
}

/* The baseline and a check taken from replays in two threads at once, each on its own stream:
 * no replay fails, and the slowdown is found. */
RECAP_TEST(checked_replays_from_two_threads) {
  recap_stream_t s;
  recap_graph_t g = replayed_graph(&s, PERIOD / 2, 1.5, BIG, 0);
  replay_from_two_threads(g);
  for (int i = 0; i < PERIOD; i++) update_and_replay(g, s, BIG);
  assert_true(recap__update_measuring(recap__update_of(g)));
  replay_from_two_threads(g);
  OK(recap_graph_replay(g, s)); /* reads what is left */
  recap__fake_stream_complete(s);
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.auto_checks, 1);
  assert_true(fabs(st.fresh_replay_ms - BIG / 1000.0) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 1.5 * BIG / 1000.0) < 1e-6);
  recapture_kernels(g, s, BIG);
  assert_int_equal(stats_of(g).last_reason, RECAP_UPDATE_REASON_POLICY_SLOWER);
  destroy_and_expect_quiet(g);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(the_default_policy_catches_a_slowdown_after_many_updates),
    cmocka_unit_test(the_default_policy_checks_again_every_64_changes),
    cmocka_unit_test(the_default_policy_catches_a_slowdown_after_many_rebinds),
    cmocka_unit_test(a_rebind_after_updates_renews_from_the_newest_template),
    cmocka_unit_test(the_default_policy_leaves_graphs_of_128_nodes_alone),
    cmocka_unit_test(user_policies_keep_their_behaviour_on_large_graphs),
    cmocka_unit_test(the_check_takes_its_threshold_period_and_tolerance_from_the_policy),
    cmocka_unit_test(a_policy_of_the_first_version_keeps_the_default_check),
    cmocka_unit_test(timing_failures_of_the_check_never_fail_a_replay),
    cmocka_unit_test(checked_replays_from_two_threads),
};
const recap_test_part_t update_check_tests = RECAP_TEST_PART(tests);
