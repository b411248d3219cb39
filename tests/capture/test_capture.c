/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_capture.c — the capture module (src/capture/) on the CPU fake device: what the capture
 * entry points keep with a capture for the features they turn on, and what a capture scope keeps
 * with its graph. The regions' path is kept with the capture (a failed capture or recapture and
 * a reset take it, a recapture that fails gives the old one back), and a scope's record closes
 * however its capture ends, so that a scope's end never ends a capture that is not the scope's.
 * A capture on a blocking stream is warned about, and its invalidation by work on the legacy
 * stream named. A graph switched to run eagerly runs its scopes' work and keeps its capture.
 */
#include <string.h>

#include "graph_util.h"
#include "host_faults.h"

static recap_capture_options_t regions_option(recap_regions_mode_t mode) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.regions = mode;
  return o;
}

static int path_of(recap_graph_t g) {
  int on_device = -1;
  OK(recap_graph_regions_on_device(g, &on_device));
  return on_device;
}

/* The path is the capture's: a recapture chooses again, and gets the old one back when it fails. */
RECAP_TEST(the_regions_path_goes_with_the_capture) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  recap_capture_options_t host = regions_option(RECAP_REGIONS_HOST);
  recap_capture_options_t device = regions_option(RECAP_REGIONS_DEVICE);
  OK(recap_graph_capture_begin(g, &host, s));
  assert_int_equal(path_of(g), 0);
  launch(s, 1);
  OK(recap_graph_capture_end(g));
  assert_int_equal(path_of(g), 0);

  OK(recap_graph_recapture_begin(g, &device, s));
  assert_int_equal(path_of(g), 1);
  launch(s, 1);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_CAPTURE_END, 1);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CUDA);
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_INSTANTIATED);
  assert_int_equal(path_of(g), 0); /* the capture the recapture was to replace */

  OK(recap_graph_recapture_begin(g, &device, s));
  launch(s, 1);
  OK(recap_graph_capture_end(g));
  assert_int_equal(path_of(g), 1);
  OK(recap_graph_replay(g, s));
  destroy_and_expect_quiet(g);
}

/* Without a capture held or under way there is no path to tell: before the first capture,
 * after a failed one, after a reset. */
RECAP_TEST(no_path_without_a_capture) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  int on_device = -1;
  EXPECT_STATUS(recap_graph_regions_on_device(g, &on_device), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("holds no capture");
  assert_int_equal(on_device, 0);
  recap_capture_options_t host = regions_option(RECAP_REGIONS_HOST);
  OK(recap_graph_capture_begin(g, &host, s));
  launch(s, 1);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_CAPTURE_END, 1);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CUDA);
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
  EXPECT_STATUS(recap_graph_regions_on_device(g, &on_device), RECAP_ERROR_INVALID_USAGE);
  capture_kernels(g, s, 1);
  assert_int_equal(path_of(g), 1); /* AUTO, on a fake that runs conditional nodes */
  OK(recap_graph_reset(g));
  EXPECT_STATUS(recap_graph_regions_on_device(g, &on_device), RECAP_ERROR_INVALID_USAGE);
  destroy_and_expect_quiet(g);
}

/* A host loop's path mark is the capture's only hook: the default device path leaves none, so
 * that its replays walk no hooks. */
RECAP_TEST(the_device_path_attaches_nothing) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  capture_kernels(g, s, 2);
  assert_int_equal(g->hooks.count, 0);
  OK(recap_graph_reset(g));
  recap_capture_options_t host = regions_option(RECAP_REGIONS_HOST);
  OK(recap_graph_capture_begin(g, &host, s));
  launch(s, 2);
  OK(recap_graph_capture_end(g));
  assert_int_equal(g->hooks.count, 1);
  assert_int_equal(g->hooks.events, 0);
  destroy_and_expect_quiet(g);
}

/* A scope whose capture ended through recap_graph_capture_end, or was reset away, is closed:
 * its end is refused, and a later capture of the graph is not ended by it. */
RECAP_TEST(a_scope_closes_however_its_capture_ends) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  recap_stream_t scope_stream = NULL;
  OK(recap_capture_scope_begin(g, NULL, &scope_stream));
  launch(scope_stream, 1);
  OK(recap_graph_capture_end(g));
  EXPECT_STATUS(recap_capture_scope_end(g), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("no capture scope is open");

  OK(recap_graph_reset(g));
  OK(recap_capture_scope_begin(g, NULL, &scope_stream));
  OK(recap_graph_reset(g)); /* abandons the scope's capture */
  OK(recap_graph_capture_begin(g, NULL, s));
  EXPECT_STATUS(recap_capture_scope_end(g), RECAP_ERROR_INVALID_USAGE);
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_CAPTURING);
  launch(s, 1);
  OK(recap_graph_capture_end(g));

  OK(recap_graph_reset(g));
  OK(recap_capture_scope_begin(g, NULL, &scope_stream));
  launch(scope_stream, 1);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_CAPTURE_END, 1);
  EXPECT_STATUS(recap_capture_scope_end(g), RECAP_ERROR_CUDA);
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
  EXPECT_STATUS(recap_capture_scope_end(g), RECAP_ERROR_INVALID_USAGE);
  destroy_and_expect_quiet(g);
}

/* With graphs disabled a scope runs eagerly: it opens and closes once, and a reset closes it. */
RECAP_TEST(an_eager_scope_opens_and_closes) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  recap__graphs_disabled_override(1);
  recap_stream_t scope_stream = NULL;
  OK(recap_capture_scope_begin(g, NULL, &scope_stream));
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_EAGER);
  OK(recap_capture_scope_end(g));
  EXPECT_STATUS(recap_capture_scope_end(g), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_reset(g));
  OK(recap_capture_scope_begin(g, NULL, &scope_stream));
  OK(recap_graph_reset(g));
  EXPECT_STATUS(recap_capture_scope_end(g), RECAP_ERROR_INVALID_USAGE);
  recap__graphs_disabled_override(0);
  destroy_and_expect_quiet(g);
}

/* The scope's record is host memory taken at the graph's first scope: each host allocation of
 * recap_capture_scope_begin failing in turn refuses the scope with nothing begun. */
RECAP_TEST(a_scope_without_host_memory_begins_nothing) {
  recap_test_host_faults_install();
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  recap_stream_t scope_stream = NULL;
  uint64_t nth = 1;
  for (;; nth++) {
    recap_test_host_fail_nth(nth);
    recap_status_t status = recap_capture_scope_begin(g, NULL, &scope_stream);
    bool failed = recap_test_host_failed();
    recap_test_host_fail_nth(0);
    if (status == RECAP_SUCCESS) {
      assert_false(failed);
      break;
    }
    assert_int_equal(status, RECAP_ERROR_OUT_OF_MEMORY);
    assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
    assert_null(scope_stream);
    EXPECT_STATUS(recap_capture_scope_end(g), RECAP_ERROR_INVALID_USAGE);
  }
  assert_true(nth > 1); /* the record's allocation was among those refused */
  launch(scope_stream, 1);
  OK(recap_capture_scope_end(g));
  OK(recap_graph_destroy(g));
  recap_test_host_faults_remove();
  expect_quiet();
}

/* ---- One call for the first capture and every recapture ------------------------------------ */

static recap_update_stats_t update_stats(recap_graph_t g) {
  recap_update_stats_t u = RECAP_UPDATE_STATS_INIT;
  OK(recap_graph_update_stats(g, &u));
  return u;
}

/* options.recapture: capture_begin captures a fresh graph and recaptures one that holds a
 * capture, in its pool, updating the executable; without it a held capture is refused. */
RECAP_TEST(the_recapture_option_captures_then_recaptures) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.recapture = 1;
  for (int step = 0; step < 3; step++) {
    OK(recap_graph_capture_begin(g, &o, s));
    assert_int_equal(state_of(g), RECAP_GRAPH_STATE_CAPTURING);
    launch(s, 2);
    OK(recap_graph_capture_end(g));
    OK(recap_graph_replay(g, s));
    recap_update_stats_t u = update_stats(g);
    assert_int_equal(u.recaptures, (uint64_t)step);
    assert_int_equal(u.updates, (uint64_t)step);
  }
  recap_pool_id_t pool = pool_of(g);

  /* The pool is the graph's: another is refused, nothing begun. */
  recap_capture_options_t other = o;
  other.pool = (recap_pool_id_t){pool.a, pool.b + 1};
  EXPECT_STATUS(recap_graph_capture_begin(g, &other, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("options->pool is not the graph's pool");
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_INSTANTIATED);
  assert_int_equal(capturing(s), 0);
  /* Without the option a held capture is refused, naming the option. */
  EXPECT_STATUS(recap_graph_capture_begin(g, NULL, s), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("options->recapture");
  /* Under way: refused with or without it. */
  OK(recap_graph_capture_begin(g, &o, s));
  EXPECT_STATUS(recap_graph_capture_begin(g, &o, s), RECAP_ERROR_INVALID_USAGE);
  launch(s, 2);
  OK(recap_graph_capture_end(g));
  assert_true(recap__pool_id_equal(pool_of(g), pool));
  destroy_and_expect_quiet(g);
}

/* A capture scope with capture.recapture recaptures what its graph holds; with graphs disabled
 * it refuses rather than drop that capture for an eager run. */
RECAP_TEST(a_scope_recaptures_with_the_option) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  recap_scope_options_t o = RECAP_SCOPE_OPTIONS_INIT;
  o.stream = s;
  o.capture.recapture = 1;
  recap_stream_t scope_stream = NULL;
  for (int step = 0; step < 2; step++) {
    OK(recap_capture_scope_begin(g, &o, &scope_stream));
    launch(scope_stream, 1);
    OK(recap_capture_scope_end(g));
  }
  assert_int_equal(update_stats(g).recaptures, 1);
  recap_scope_options_t plain = RECAP_SCOPE_OPTIONS_INIT;
  EXPECT_STATUS(recap_capture_scope_begin(g, &plain, &scope_stream), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("capture.recapture");
  recap__graphs_disabled_override(1);
  EXPECT_STATUS(recap_capture_scope_begin(g, &o, &scope_stream), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("graphs are disabled");
  recap__graphs_disabled_override(0);
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_INSTANTIATED);
  OK(recap_graph_replay(g, s));
  destroy_and_expect_quiet(g);
}

/* ---- Blocking streams ---------------------------------------------------------------------- */

/* A capture on a blocking stream is warned about once per process, and one that work on the
 * legacy stream invalidated ends with an error that names the cause; non-blocking streams, and
 * a stream whose flags cannot be read, draw no word. (One test: the warning is once per
 * process, and the sanitizers run every test of a program in one process.) */
RECAP_TEST(a_blocking_stream_is_named) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  recap_test_log_t log;
  recap_test_log_capture(&log);
  capture_kernels(g, s, 1); /* non-blocking: nothing said */
  assert_int_equal(log.warnings, 0);
  OK(recap_graph_reset(g));

  recap_stream_t b = recap__fake_stream_new_blocking();
  recap__fake_fail_nth(RECAP__FAKE_FAULT_STREAM_BLOCKING, 1);
  OK(recap_graph_capture_begin(g, NULL, b)); /* the flags unknown: nothing said */
  assert_int_equal(log.warnings, 0);
  assert_int_equal(recap_last_status(), RECAP_SUCCESS);
  launch(b, 1);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_reset(g));

  OK(recap_graph_capture_begin(g, NULL, b));
  assert_int_equal(log.warnings, 1);
  assert_non_null(strstr(log.last_warning, "recap_graph_capture_begin: stream"));
  assert_non_null(strstr(log.last_warning, "is a blocking stream"));
  assert_non_null(strstr(log.last_warning, "cudaStreamNonBlocking"));
  launch(b, 1);
  recap__fake_launch_kernel(NULL, "library_kernel_on_stream_0");
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
  EXPECT_MESSAGE("is a blocking stream, and work on the legacy default stream");
  EXPECT_MESSAGE("cudaStreamNonBlocking");
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);

  /* Said once: a second capture on it draws no warning; it ends well without legacy work. */
  capture_kernels(g, b, 1);
  assert_int_equal(log.warnings, 1);
  OK(recap_graph_reset(g));
  /* Legacy work does not touch a capture on a non-blocking stream. */
  OK(recap_graph_capture_begin(g, NULL, s));
  launch(s, 1);
  recap__fake_launch_kernel(NULL, "library_kernel_on_stream_0");
  OK(recap_graph_capture_end(g));
  recap_test_log_stop();
  destroy_and_expect_quiet(g);
}

/* ------------------------------------------------------------------------------------------
 * One graph switched to run eagerly (recap_graph_eager_set)
 * ---------------------------------------------------------------------------------------- */

static int kernel_runs;

static void count_run(void *const *args, size_t n) {
  (void)args;
  (void)n;
  kernel_runs++;
}

static void counting_kernel(recap_stream_t s) {
  recap__fake_launch_kernel_fn(s, "count_run", count_run, NULL, 0);
}

static int eager_of(recap_graph_t g) {
  int eager = -1;
  OK(recap_graph_eager_get(g, &eager));
  return eager;
}

/* Switched on, a scope runs its work at once and captures nothing, replays are refused, and the
 * graph keeps its capture: switched off, the next replay runs what was captured first. */
RECAP_TEST(one_graph_runs_eagerly_and_keeps_its_capture) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  kernel_runs = 0;
  assert_int_equal(eager_of(g), 0);
  recap_stream_t ss = NULL;
  OK(recap_capture_scope_begin(g, NULL, &ss));
  counting_kernel(ss);
  OK(recap_capture_scope_end(g));
  assert_int_equal(kernel_runs, 0);
  OK(recap_graph_replay(g, ss));
  assert_int_equal(kernel_runs, 1);

  OK(recap_graph_eager_set(g, 1));
  assert_int_equal(eager_of(g), 1);
  recap_scope_options_t o = RECAP_SCOPE_OPTIONS_INIT;
  o.capture.recapture = 1; /* ignored: nothing is captured */
  o.stream = s;
  recap_stream_t got = NULL;
  OK(recap_capture_scope_begin(g, &o, &got));
  assert_ptr_equal(got, s);
  assert_int_equal(capturing(s), 0);
  counting_kernel(s);
  counting_kernel(s);
  assert_int_equal(kernel_runs, 3);
  EXPECT_STATUS(recap_capture_scope_begin(g, &o, &got), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("a scope is open on this graph already");
  OK(recap_capture_scope_end(g));
  EXPECT_STATUS(recap_capture_scope_end(g), RECAP_ERROR_INVALID_USAGE);
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_INSTANTIATED);
  size_t nodes = 0;
  OK(recap_graph_node_count(g, &nodes));
  assert_int_equal(nodes, 1);
  recap_update_stats_t stats = RECAP_UPDATE_STATS_INIT;
  OK(recap_graph_update_stats(g, &stats));
  assert_int_equal(stats.recaptures, 0);
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("the graph is switched to run eagerly (recap_graph_eager_set)");
  assert_int_equal(kernel_runs, 3);

  OK(recap_graph_eager_set(g, 0));
  OK(recap_graph_replay(g, s));
  assert_int_equal(kernel_runs, 4);
  destroy_and_expect_quiet(g);
}

/* A fresh graph switched on stays fresh through its scopes; switched off, its scope captures. */
RECAP_TEST(an_eager_graph_stays_fresh) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  kernel_runs = 0;
  OK(recap_graph_eager_set(g, 1));
  recap_stream_t ss = NULL;
  OK(recap_capture_scope_begin(g, NULL, &ss));
  counting_kernel(ss);
  OK(recap_capture_scope_end(g));
  assert_int_equal(kernel_runs, 1);
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
  EXPECT_STATUS(recap_graph_replay(g, ss), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_eager_set(g, 0));
  OK(recap_capture_scope_begin(g, NULL, &ss));
  counting_kernel(ss);
  OK(recap_capture_scope_end(g));
  assert_int_equal(kernel_runs, 1);
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_INSTANTIATED);
  destroy_and_expect_quiet(g);
}

/* The switch: 0 or 1, not while the graph captures, kept across a reset; a scope cannot run
 * eagerly beside a capture under way. */
RECAP_TEST(the_eager_switch_is_checked_and_kept) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  EXPECT_STATUS(recap_graph_eager_set(g, 2), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_graph_eager_set: eager is 2, not 0 or 1");
  EXPECT_STATUS(recap_graph_eager_get(g, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  OK(recap_graph_capture_begin(g, NULL, s));
  EXPECT_STATUS(recap_graph_eager_set(g, 1), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_graph_eager_set: the graph is capturing");
  launch(s, 1);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_eager_set(g, 1));
  OK(recap_graph_reset(g));
  assert_int_equal(eager_of(g), 1);
  /* A capture begun directly is the caller's explicit choice; a scope beside it is refused. */
  OK(recap_graph_capture_begin(g, NULL, s));
  recap_stream_t ss = NULL;
  EXPECT_STATUS(recap_capture_scope_begin(g, NULL, &ss), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_capture_scope_begin: the graph is capturing");
  launch(s, 1);
  OK(recap_graph_capture_end(g));
  destroy_and_expect_quiet(g);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(the_regions_path_goes_with_the_capture),
    cmocka_unit_test(no_path_without_a_capture),
    cmocka_unit_test(the_device_path_attaches_nothing),
    cmocka_unit_test(a_scope_closes_however_its_capture_ends),
    cmocka_unit_test(an_eager_scope_opens_and_closes),
    cmocka_unit_test(a_scope_without_host_memory_begins_nothing),
    cmocka_unit_test(a_blocking_stream_is_named),
    cmocka_unit_test(the_recapture_option_captures_then_recaptures),
    cmocka_unit_test(a_scope_recaptures_with_the_option),
    cmocka_unit_test(one_graph_runs_eagerly_and_keeps_its_capture),
    cmocka_unit_test(an_eager_graph_stays_fresh),
    cmocka_unit_test(the_eager_switch_is_checked_and_kept),
};
RECAP_TEST_MAIN(tests)
