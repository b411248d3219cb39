/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_graph_set.c — graph sets (recap/graph_set.h) on the CPU fake, captured up front and
 * lazily: sizes and their rules, bucket choice at the boundaries, overflow, capture order,
 * replays that compute what the eager step computes, one pool shared by every member, the
 * budget's stops and their messages, eviction and recapture, member failures (the step's,
 * injected faults, an unjoined side stream), graphs disabled, and every refusal.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "harness.h"
#include "graph_util.h"
#include "host_faults.h"
#include "set_util.h"
#include "liveness_util.h"

static model_t model;
static recap_stream_t stream;

static int setup(void **state) {
  (void)state;
  stream = model_fresh(&model);
  model.side = recap__fake_stream_new();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  model_fini(&model);
  recap__graphs_disabled_override(-1);
  return 0;
}

static recap_graph_set_t make_set(const size_t *sizes, size_t count, recap_set_capture_t capture) {
  return model_set(&model, sizes, count, capture);
}

/* Every graph and pool reference gone once the set is. */
static void destroy_and_check(recap_graph_set_t set) {
  OK(recap_graph_set_destroy(set));
  expect_quiet();
}

/* ---- options ------------------------------------------------------------------------------ */

static void expect_refused(const recap_graph_set_options_t *o, const char *needle) {
  recap_graph_set_t set = (recap_graph_set_t)(uintptr_t)1;
  EXPECT_STATUS(recap_graph_set_create(&set, model_step, &model, o), RECAP_ERROR_INVALID_ARGUMENT);
  assert_null(set);
  EXPECT_MESSAGE("recap_graph_set_create");
  EXPECT_MESSAGE(needle);
}

RECAP_TEST(create_refuses_bad_options) {
  const size_t dup[] = {8, 64, 2, 64}, zero[] = {4, 0};
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  expect_refused(&o, "no sizes");
  expect_refused(NULL, "no sizes");
  o.sizes = dup;
  o.size_count = 4;
  expect_refused(&o, "options.sizes[3] = 64 appears twice (options.sizes[1])");
  o.sizes = zero;
  o.size_count = 2;
  expect_refused(&o, "options.sizes[1] is 0");
  o.size_count = 0;
  expect_refused(&o, "options.size_count is 0");
  o.size_count = 2;
  o.sizes = dup;
  o.rule = RECAP_SIZES_POWERS_OF_TWO;
  expect_refused(&o, "give a list or a rule, not both");
  o.sizes = NULL;
  o.size_count = 0;
  expect_refused(&o, "options.rule_max is 0");
  o.rule = RECAP_SIZES_MULTIPLES;
  o.rule_max = 64;
  expect_refused(&o, "options.rule_step is 0");
  o.rule_step = 128;
  expect_refused(&o, "options.rule_step (128) is above options.rule_max (64)");
  o.rule_step = 1;
  o.rule_max = 1000000;
  expect_refused(&o, "the rule gives 1000000 sizes");
  o.rule = (recap_sizes_rule_t)7;
  expect_refused(&o, "options.rule is 7");
  o.rule = RECAP_SIZES_LIST;
  o.size_count = 3;
  expect_refused(&o, "options.sizes is NULL but options.size_count is 3");

  recap_graph_set_options_t good = RECAP_GRAPH_SET_OPTIONS_INIT;
  good.sizes = dup;
  good.size_count = 2;
  o = good;
  o.capture = (recap_set_capture_t)3;
  expect_refused(&o, "options.capture is 3");
  o = good;
  o.priority = (recap_set_priority_t)-1;
  expect_refused(&o, "options.priority is -1");
  o = good;
  o.overflow = (recap_set_overflow_t)2;
  expect_refused(&o, "options.overflow is 2");
  o = good;
  o.evict_idle_seconds = -1;
  expect_refused(&o, "options.evict_idle_seconds is -1");
  o.evict_idle_seconds = NAN;
  expect_refused(&o, "options.evict_idle_seconds");
  o.evict_idle_seconds = 0;
  o.background_share = 1.5;
  expect_refused(&o,
                 "options.background_share is 1.5: give a share of time in (0, 1] (0: the "
                 "default, 0.2)");
  o.background_share = -0.25;
  expect_refused(&o, "options.background_share is -0.25");
  o.background_share = NAN;
  expect_refused(&o, "options.background_share is nan");
  o.background_share = 0;
  o = good;
  o.capture_options.budget_bytes = 4096;
  expect_refused(&o, "options.capture_options.budget_bytes is 4096");
  o = good;
  o.capture_options.mode = (recap_capture_mode_t)9;
  expect_refused(&o, "options.capture_options.mode is 9");
  o = good;
  o.size = 8;
  expect_refused(&o, "RECAP_GRAPH_SET_OPTIONS_INIT");
  o = good;
  o.capture_options.size = 8;
  expect_refused(&o, "options->capture_options.size");

  recap_graph_set_t set = (recap_graph_set_t)(uintptr_t)1;
  EXPECT_STATUS(recap_graph_set_create(&set, NULL, &model, &good), RECAP_ERROR_INVALID_ARGUMENT);
  assert_null(set);
  EXPECT_MESSAGE("recap_graph_set_create: step is NULL");
  EXPECT_STATUS(recap_graph_set_create(NULL, model_step, &model, &good),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_graph_set_create: set is NULL");
  /* Nothing was made by any refusal. */
  assert_int_equal(model.captured_count, 0);
  expect_quiet();
}

static void expect_sizes(recap_graph_set_t set, const size_t *want, size_t count) {
  size_t got[64] = {0}, n = 0;
  OK(recap_graph_set_sizes(set, got, 64, &n));
  assert_int_equal(n, count);
  for (size_t i = 0; i < count; i++) assert_int_equal(got[i], want[i]);
}

RECAP_TEST(sizes_from_lists_and_rules) {
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  o.capture = RECAP_SET_CAPTURE_LAZY;
  o.rule = RECAP_SIZES_POWERS_OF_TWO;
  o.rule_max = 12;
  recap_graph_set_t set;
  OK(recap_graph_set_create(&set, model_step, &model, &o));
  expect_sizes(set, (const size_t[]){1, 2, 4, 8, 12}, 5);
  OK(recap_graph_set_destroy(set));
  o.rule_max = 16;
  OK(recap_graph_set_create(&set, model_step, &model, &o));
  expect_sizes(set, (const size_t[]){1, 2, 4, 8, 16}, 5);
  OK(recap_graph_set_destroy(set));
  o.rule = RECAP_SIZES_MULTIPLES;
  o.rule_step = 3;
  o.rule_max = 10;
  OK(recap_graph_set_create(&set, model_step, &model, &o));
  expect_sizes(set, (const size_t[]){3, 6, 9, 10}, 4);
  OK(recap_graph_set_destroy(set));
  o.rule_max = 9;
  OK(recap_graph_set_create(&set, model_step, &model, &o));
  expect_sizes(set, (const size_t[]){3, 6, 9}, 3);
  /* A capacity below the count: count says how many, sizes gets the first ones. */
  size_t two[2] = {0, 0}, n = 0;
  OK(recap_graph_set_sizes(set, two, 2, &n));
  assert_int_equal(n, 3);
  assert_int_equal(two[0], 3);
  assert_int_equal(two[1], 6);
  OK(recap_graph_set_sizes(set, NULL, 0, &n));
  assert_int_equal(n, 3);
  EXPECT_STATUS(recap_graph_set_sizes(set, two, 2, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_graph_set_sizes: count is NULL");
  OK(recap_graph_set_destroy(set));
  set = make_set((const size_t[]){64, 1, 8}, 3, RECAP_SET_CAPTURE_LAZY);
  expect_sizes(set, (const size_t[]){1, 8, 64}, 3);
  /* LAZY captured nothing yet. */
  assert_int_equal(model.captured_count, 0);
  assert_int_equal(info_of(set).pending, 3);
  destroy_and_check(set);
}

/* ---- buckets and runs --------------------------------------------------------------------- */

RECAP_TEST(bucket_choice_at_the_boundaries) {
  recap_graph_set_t set = make_set((const size_t[]){8, 1, 64}, 3, RECAP_SET_CAPTURE_UPFRONT);
  const size_t n[] = {1, 2, 7, 8, 9, 63, 64, 65, 1000};
  const size_t want[] = {1, 8, 8, 8, 64, 64, 64, 65, 1000};
  for (size_t i = 0; i < sizeof n / sizeof n[0]; i++) {
    size_t b = 0;
    OK(recap_graph_set_bucket(set, n[i], &b));
    assert_int_equal(b, want[i]);
  }
  size_t b;
  EXPECT_STATUS(recap_graph_set_bucket(set, 0, &b), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_graph_set_bucket: n is 0");
  EXPECT_STATUS(recap_graph_set_bucket(set, 3, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_graph_set_bucket: bucket is NULL");
  /* Runs pick the same buckets, and replays compute over the bucket's rows. */
  for (size_t i = 0; i < 7; i++) {
    size_t padded = 0;
    int graphed = -1;
    memset(model.out, 0, sizeof model.out);
    OK(recap_graph_set_run(set, n[i], stream, &padded, &graphed));
    assert_int_equal(padded, want[i]);
    assert_int_equal(graphed, 1);
    expect_rows(&model, padded);
  }
  assert_int_equal(model.eager_count, 0);
  assert_int_equal(member_of(set, 1).replays, 1);
  assert_int_equal(member_of(set, 8).replays, 3);
  assert_int_equal(member_of(set, 64).replays, 3);
  assert_int_equal(info_of(set).replays, 7);
  destroy_and_check(set);
}

RECAP_TEST(overflow_runs_eagerly_or_is_refused) {
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  o.sizes = (const size_t[]){4, 16};
  o.size_count = 2;
  recap_graph_set_t set;
  OK(recap_graph_set_create(&set, model_step, &model, &o));
  size_t padded = 0;
  int graphed = -1;
  OK(recap_graph_set_run(set, 17, stream, &padded, &graphed));
  assert_int_equal(padded, 17);
  assert_int_equal(graphed, 0);
  assert_int_equal(model.eager_count, 1);
  assert_int_equal(model.eager[0], 17);
  expect_rows(&model, 17);
  recap_graph_set_info_t info = info_of(set);
  assert_int_equal(info.overflow_runs, 1);
  assert_int_equal(info.eager_runs, 0);
  /* padded and graphed may be NULL. */
  OK(recap_graph_set_run(set, 3, stream, NULL, NULL));
  expect_rows(&model, 4);
  EXPECT_STATUS(recap_graph_set_run(set, 0, stream, &padded, &graphed),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_graph_set_run: n is 0");
  OK(recap_graph_set_destroy(set));

  o.overflow = RECAP_SET_OVERFLOW_REFUSE;
  OK(recap_graph_set_create(&set, model_step, &model, &o));
  model.eager_count = 0;
  EXPECT_STATUS(recap_graph_set_run(set, 17, stream, &padded, &graphed),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("n = 17 is above the set's largest size 16");
  EXPECT_MESSAGE("RECAP_SET_OVERFLOW_REFUSE");
  assert_int_equal(model.eager_count, 0);
  assert_int_equal(info_of(set).overflow_runs, 0);
  OK(recap_graph_set_run(set, 16, stream, &padded, &graphed));
  assert_int_equal(graphed, 1);
  destroy_and_check(set);
}

static void expect_order(const size_t *want, size_t count) {
  assert_int_equal(model.captured_count, count);
  for (size_t i = 0; i < count; i++) assert_int_equal(model.captured[i], want[i]);
}

RECAP_TEST(captures_go_in_priority_order) {
  const size_t listed[] = {8, 1, 64, 2};
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  o.sizes = listed;
  o.size_count = 4;
  recap_graph_set_t set;
  OK(recap_graph_set_create(&set, model_step, &model, &o));
  expect_order((const size_t[]){64, 8, 2, 1}, 4);
  assert_int_equal(info_of(set).ready, 4);
  OK(recap_graph_set_destroy(set));
  model.captured_count = 0;
  o.priority = RECAP_SET_SMALLEST_FIRST;
  OK(recap_graph_set_create(&set, model_step, &model, &o));
  expect_order((const size_t[]){1, 2, 8, 64}, 4);
  OK(recap_graph_set_destroy(set));
  model.captured_count = 0;
  o.priority = RECAP_SET_AS_LISTED;
  OK(recap_graph_set_create(&set, model_step, &model, &o));
  expect_order((const size_t[]){8, 1, 64, 2}, 4);
  /* capture(0) with every member ready captures nothing more. */
  OK(recap_graph_set_capture(set, 0));
  assert_int_equal(model.captured_count, 4);
  destroy_and_check(set);
}

/* Replay == eager: the same step run eagerly (graphs disabled) gives the same rows. */
RECAP_TEST(replays_compute_what_the_step_computes) {
  const size_t sizes[] = {3, 10, 100};
  recap_graph_set_t set = make_set(sizes, 3, RECAP_SET_CAPTURE_UPFRONT);
  int64_t replayed[MODEL_ROWS];
  memset(model.out, 0, sizeof model.out);
  int graphed = 0;
  size_t padded = 0;
  OK(recap_graph_set_run(set, 50, stream, &padded, &graphed));
  assert_int_equal(graphed, 1);
  assert_int_equal(padded, 100);
  memcpy(replayed, model.out, sizeof replayed);
  OK(recap_graph_set_destroy(set));
  recap__graphs_disabled_override(1);
  set = make_set(sizes, 3, RECAP_SET_CAPTURE_UPFRONT);
  memset(model.out, 0, sizeof model.out);
  OK(recap_graph_set_run(set, 50, stream, &padded, &graphed));
  assert_int_equal(graphed, 0);
  assert_int_equal(padded, 100);
  assert_memory_equal(replayed, model.out, sizeof replayed);
  expect_rows(&model, 100);
  destroy_and_check(set);
}

/* ---- memory ------------------------------------------------------------------------------- */

RECAP_TEST(members_share_one_pool) {
  /* 2, 4 and 8 MiB temporaries: each takes a block of one 20 MiB segment of the pool. */
  model.row_bytes = MiB;
  const size_t sizes[] = {2, 4, 8};
  recap_graph_set_t set = make_set(sizes, 3, RECAP_SET_CAPTURE_UPFRONT);
  recap_graph_set_info_t info = info_of(set);
  assert_int_equal(info.ready, 3);
  assert_false(recap_pool_is_default(info.pool));
  for (size_t i = 0; i < 3; i++) {
    recap_graph_set_member_t m = member_of(set, sizes[i]);
    recap_graph_memory_t mem = RECAP_GRAPH_MEMORY_INIT;
    OK(recap_graph_memory(m.graph, &mem));
    assert_true(recap__pool_id_equal(mem.pool, info.pool));
    assert_int_equal(mem.exec_bytes, m.exec_bytes);
  }
  /* The pool holds what the largest capture alone took. */
  assert_int_equal(info.pool_reserved_bytes, 20 * MiB);
  recap_graph_set_t alone = make_set((const size_t[]){8}, 1, RECAP_SET_CAPTURE_UPFRONT);
  assert_int_equal(info_of(alone).pool_reserved_bytes, info.pool_reserved_bytes);
  OK(recap_graph_set_destroy(alone));
  /* The set holds the pool: one reference of its own plus one per graph. */
  assert_int_equal(pool_references(info.pool), 4);
  OK(recap_graph_set_destroy(set));
  assert_int_equal(pool_references(info.pool), 0);
  expect_all_released();
}

RECAP_TEST(a_pool_of_the_callers_is_used_and_kept) {
  recap_pool_id_t pool = recap_pool_handle();
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  o.sizes = (const size_t[]){1, 2};
  o.size_count = 2;
  o.capture_options.pool = pool;
  recap_graph_set_t set;
  OK(recap_graph_set_create(&set, model_step, &model, &o));
  assert_true(recap__pool_id_equal(info_of(set).pool, pool));
  assert_int_equal(pool_references(pool), 3);
  OK(recap_graph_set_evict_idle(set, 0, NULL));
  assert_int_equal(pool_references(pool), 1);
  destroy_and_check(set);
  assert_int_equal(pool_references(pool), 0);
}

RECAP_TEST(member_exec_bytes_and_nodes) {
  /* Without a budget, members' executables are measured only with the option on. */
  OK(recap_option_set("measure_exec_memory", "1"));
  model.extra_kernels = 1;
  recap_graph_set_t set = make_set((const size_t[]){2, 5}, 2, RECAP_SET_CAPTURE_UPFRONT);
  recap_graph_set_member_t m = member_of(set, 5);
  assert_int_equal(m.state, RECAP_MEMBER_READY);
  assert_int_equal(m.bucket, 5);
  assert_int_equal(m.nodes, 6);
  assert_int_equal(m.exec_bytes, 6 * RECAP__FAKE_EXEC_BYTES_PER_NODE);
  assert_int_equal(m.captures, 1);
  assert_true(m.capture_seconds > 0);
  size_t nodes = 0;
  OK(recap_graph_node_count(m.graph, &nodes));
  assert_int_equal(nodes, 6);
  assert_int_equal(member_of(set, 2).nodes, 3);
  recap_graph_set_info_t info = info_of(set);
  assert_int_equal(info.exec_bytes, 9 * RECAP__FAKE_EXEC_BYTES_PER_NODE);
  assert_int_equal(info.members, 2);
  assert_true(info.first_ready_seconds > 0);
  assert_true(info.all_ready_seconds >= info.first_ready_seconds);
  destroy_and_check(set);
}

/* The budget: 20 MiB of pool, then executables of 4096 bytes per node (1 + size nodes). */
RECAP_TEST(the_budget_leaves_sizes_eager_and_says_by_how_much) {
  model.row_bytes = MiB;
  model.extra_kernels = 1;
  const int64_t node = RECAP__FAKE_EXEC_BYTES_PER_NODE;
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  o.sizes = (const size_t[]){2, 4, 8};
  o.size_count = 3;
  /* 8 fits (9 nodes), 4 (5 nodes) would exceed by one byte, 2 (3 nodes) fits. */
  o.budget_bytes = 20 * MiB + 9 * node + 5 * node - 1;
  recap_graph_set_t set;
  OK(recap_graph_set_create(&set, model_step, &model, &o));
  assert_int_equal(state_of_size(set, 8), RECAP_MEMBER_READY);
  assert_int_equal(state_of_size(set, 2), RECAP_MEMBER_READY);
  recap_graph_set_member_t m = member_of(set, 4);
  assert_int_equal(m.state, RECAP_MEMBER_OVER_BUDGET);
  assert_int_equal(m.status, RECAP_ERROR_OUT_OF_MEMORY);
  assert_null(m.graph);
  assert_int_equal(m.captures, 0);
  char want[160];
  snprintf(want, sizeof want,
           "size 4: its executable (%lld bytes) would take the set past its budget of %llu "
           "bytes by 1 bytes",
           (long long)(5 * node), (unsigned long long)o.budget_bytes);
  if (!strstr(m.message, want)) fail_msg("message: %s\nwanted: %s", m.message, want);
  recap_graph_set_info_t info = info_of(set);
  assert_int_equal(info.over_budget, 1);
  assert_int_equal(info.ready, 2);
  assert_int_equal(info.budget_bytes, o.budget_bytes);
  assert_true((uint64_t)(info.pool_reserved_bytes + info.exec_bytes) <= o.budget_bytes);
  /* The over-budget size runs eagerly, with its own size. */
  int graphed = -1;
  size_t padded = 0;
  OK(recap_graph_set_run(set, 3, stream, &padded, &graphed));
  assert_int_equal(graphed, 0);
  assert_int_equal(padded, 4);
  expect_rows(&model, 4);
  assert_int_equal(member_of(set, 4).eager_runs, 1);
  /* Evicting 8 makes room: capturing 4 again succeeds. */
  OK(recap_graph_set_evict(set, 8));
  OK(recap_graph_set_capture(set, 4));
  assert_int_equal(state_of_size(set, 4), RECAP_MEMBER_READY);
  destroy_and_check(set);
}

RECAP_TEST(the_budget_refuses_the_pools_growth) {
  model.row_bytes = MiB;
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  /* 1 MiB comes from a 2 MiB segment; 4 and 8 MiB need a 20 MiB one. */
  o.sizes = (const size_t[]){1, 4, 8};
  o.size_count = 3;
  o.budget_bytes = 10 * MiB;
  recap_graph_set_t set;
  OK(recap_graph_set_create(&set, model_step, &model, &o));
  for (size_t s = 4; s <= 8; s += 4) {
    recap_graph_set_member_t m = member_of(set, s);
    assert_int_equal(m.state, RECAP_MEMBER_OVER_BUDGET);
    assert_int_equal(m.status, RECAP_ERROR_OUT_OF_MEMORY);
    char want[120];
    snprintf(want, sizeof want,
             "size %zu: the set's budget of %llu bytes would be exceeded by %llu bytes", s,
             (unsigned long long)(10 * MiB), (unsigned long long)(10 * MiB));
    if (!strstr(m.message, want)) fail_msg("message: %s\nwanted: %s", m.message, want);
  }
  assert_int_equal(state_of_size(set, 1), RECAP_MEMBER_READY);
  recap_graph_set_info_t info = info_of(set);
  assert_int_equal(info.pool_reserved_bytes, 2 * MiB);
  assert_int_equal(info.over_budget, 2);
  /* The stream is not left capturing, and the eager runs of those sizes work. */
  assert_int_equal(capturing(stream), 0);
  OK(recap_graph_set_run(set, 5, stream, NULL, NULL));
  expect_rows(&model, 8);
  destroy_and_check(set);
  expect_no_device_memory();
}

RECAP_TEST(a_budget_taken_already_is_not_tried) {
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  o.sizes = (const size_t[]){1, 2};
  o.size_count = 2;
  o.budget_bytes = RECAP__FAKE_EXEC_BYTES_PER_NODE; /* one executable of one node */
  recap_graph_set_t set;
  OK(recap_graph_set_create(&set, model_step, &model, &o));
  assert_int_equal(state_of_size(set, 2), RECAP_MEMBER_READY);
  recap_graph_set_member_t m = member_of(set, 1);
  assert_int_equal(m.state, RECAP_MEMBER_OVER_BUDGET);
  assert_string_equal(m.message,
                      "size 1: the set's budget of 4096 bytes is taken already (left: 0 bytes): "
                      "the pool holds 0 bytes and the ready members' executables 4096 bytes; the "
                      "size runs eagerly");
  /* Not tried: the step ran for size 2 only. */
  expect_order((const size_t[]){2}, 1);
  destroy_and_check(set);
}

/* ---- eviction ----------------------------------------------------------------------------- */

RECAP_TEST(evicted_members_are_captured_again_when_used) {
  model.row_bytes = MiB;
  recap_graph_set_t set = make_set((const size_t[]){2, 8}, 2, RECAP_SET_CAPTURE_UPFRONT);
  int64_t reserved = info_of(set).pool_reserved_bytes;
  OK(recap_graph_set_run(set, 7, stream, NULL, NULL));
  OK(recap_graph_set_evict(set, 8));
  recap_graph_set_member_t m = member_of(set, 8);
  assert_int_equal(m.state, RECAP_MEMBER_EVICTED);
  assert_null(m.graph);
  assert_int_equal(m.exec_bytes, 0);
  assert_int_equal(m.replays, 1); /* counters kept */
  recap_graph_set_info_t info = info_of(set);
  assert_int_equal(info.evictions, 1);
  assert_int_equal(info.evicted, 1);
  /* The pool keeps its memory for the other members and the recapture. */
  assert_int_equal(info.pool_reserved_bytes, reserved);
  assert_int_equal(recap__fake_now().live_execs, 1);
  /* Not ready: nothing to evict. */
  EXPECT_STATUS(recap_graph_set_evict(set, 8), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_graph_set_evict: size 8 is RECAP_MEMBER_EVICTED, not RECAP_MEMBER_READY");
  EXPECT_STATUS(recap_graph_set_evict(set, 3), RECAP_ERROR_NOT_FOUND);
  EXPECT_MESSAGE("recap_graph_set_evict: the set holds no size 3");
  /* Used again: captured, then replayed. */
  memset(model.out, 0, sizeof model.out);
  int graphed = 0;
  OK(recap_graph_set_run(set, 5, stream, NULL, &graphed));
  assert_int_equal(graphed, 1);
  expect_rows(&model, 8);
  m = member_of(set, 8);
  assert_int_equal(m.state, RECAP_MEMBER_READY);
  assert_int_equal(m.captures, 2);
  assert_int_equal(m.replays, 2);
  assert_int_equal(info_of(set).pool_reserved_bytes, reserved);
  destroy_and_check(set);
}

RECAP_TEST(idle_members_are_evicted) {
  recap_graph_set_t set = make_set((const size_t[]){1, 2, 4}, 3, RECAP_SET_CAPTURE_UPFRONT);
  size_t evicted = 99;
  OK(recap_graph_set_evict_idle(set, 3600, &evicted));
  assert_int_equal(evicted, 0);
  OK(recap_graph_set_evict_idle(set, 0, &evicted));
  assert_int_equal(evicted, 3);
  assert_int_equal(info_of(set).evicted, 3);
  assert_int_equal(recap__fake_now().live_execs, 0);
  EXPECT_STATUS(recap_graph_set_evict_idle(set, -1, &evicted), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_graph_set_evict_idle: idle_seconds is -1");
  destroy_and_check(set);

  /* With evict_idle_seconds, calls evict the members idle that long, never the one they run. */
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  o.sizes = (const size_t[]){1, 2, 4};
  o.size_count = 3;
  o.evict_idle_seconds = 0.05;
  OK(recap_graph_set_create(&set, model_step, &model, &o));
  struct timespec nap = {0, 120 * 1000 * 1000};
  nanosleep(&nap, NULL);
  int graphed = 0;
  OK(recap_graph_set_run(set, 2, stream, NULL, &graphed));
  assert_int_equal(graphed, 1);
  assert_int_equal(state_of_size(set, 2), RECAP_MEMBER_READY);
  assert_int_equal(state_of_size(set, 1), RECAP_MEMBER_EVICTED);
  assert_int_equal(state_of_size(set, 4), RECAP_MEMBER_EVICTED);
  assert_int_equal(info_of(set).evictions, 2);
  destroy_and_check(set);
}

/* ---- lazy capture ------------------------------------------------------------------------- */

RECAP_TEST(lazy_members_are_captured_by_their_first_call) {
  recap_graph_set_t set = make_set((const size_t[]){1, 4, 16}, 3, RECAP_SET_CAPTURE_LAZY);
  recap_graph_set_info_t info = info_of(set);
  assert_int_equal(info.pending, 3);
  assert_true(info.first_ready_seconds == 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
  int graphed = 0;
  size_t padded = 0;
  OK(recap_graph_set_run(set, 3, stream, &padded, &graphed));
  assert_int_equal(padded, 4);
  assert_int_equal(graphed, 1);
  expect_rows(&model, 4);
  expect_order((const size_t[]){4}, 1);
  assert_int_equal(model.eager_count, 0);
  info = info_of(set);
  assert_int_equal(info.ready, 1);
  assert_int_equal(info.pending, 2);
  assert_true(info.first_ready_seconds > 0);
  assert_true(info.all_ready_seconds == 0);
  OK(recap_graph_set_run(set, 4, stream, &padded, &graphed));
  assert_int_equal(model.captured_count, 1);
  assert_int_equal(member_of(set, 4).replays, 2);
  /* recap_graph_set_capture takes the rest now. */
  OK(recap_graph_set_capture(set, 0));
  expect_order((const size_t[]){4, 16, 1}, 3);
  assert_true(info_of(set).all_ready_seconds > 0);
  EXPECT_STATUS(recap_graph_set_capture(set, 5), RECAP_ERROR_NOT_FOUND);
  EXPECT_MESSAGE("recap_graph_set_capture: the set holds no size 5");
  /* wait and cancel have nothing to do outside background sets. */
  OK(recap_graph_set_wait(set));
  OK(recap_graph_set_cancel(set));
  destroy_and_check(set);
}

RECAP_TEST(a_lazy_capture_that_fails_is_reported_then_runs_eagerly) {
  model.fail_size = 4;
  model.fail_captured = 1;
  recap_graph_set_t set = make_set((const size_t[]){1, 4}, 2, RECAP_SET_CAPTURE_LAZY);
  int graphed = -1;
  EXPECT_STATUS(recap_graph_set_run(set, 3, stream, NULL, &graphed), RECAP_ERROR_INVALID_VALUE);
  EXPECT_MESSAGE("size 4: model_step: size 4 refused on purpose");
  assert_int_equal(graphed, 0);
  assert_int_equal(capturing(stream), 0);
  recap_graph_set_member_t m = member_of(set, 4);
  assert_int_equal(m.state, RECAP_MEMBER_FAILED);
  assert_int_equal(m.status, RECAP_ERROR_INVALID_VALUE);
  assert_string_equal(m.message, "size 4: model_step: size 4 refused on purpose");
  /* Later calls of that bucket run eagerly. */
  OK(recap_graph_set_run(set, 3, stream, NULL, &graphed));
  assert_int_equal(graphed, 0);
  expect_rows(&model, 4);
  assert_int_equal(member_of(set, 4).eager_runs, 1);
  assert_int_equal(model.captured_count, 1);
  assert_int_equal(info_of(set).failed, 1);
  /* An eager step's failure comes back as it is. */
  model.fail_captured = 0;
  EXPECT_STATUS(recap_graph_set_run(set, 4, stream, NULL, &graphed), RECAP_ERROR_INVALID_VALUE);
  EXPECT_MESSAGE("model_step: size 4 refused on purpose");
  model.fail_silently = 1;
  EXPECT_STATUS(recap_graph_set_run(set, 4, stream, NULL, &graphed), RECAP_ERROR_INVALID_VALUE);
  EXPECT_MESSAGE("recap_graph_set_run: the step returned RECAP_ERROR_INVALID_VALUE for size 4");
  destroy_and_check(set);
}

/* ---- failures ----------------------------------------------------------------------------- */

RECAP_TEST(a_failing_step_fails_its_member_only) {
  model.fail_size = 8;
  model.fail_captured = 1;
  model.fail_silently = 1;
  model.fail_status = RECAP_ERROR_CUDA;
  recap_graph_set_t set = make_set((const size_t[]){2, 8, 32}, 3, RECAP_SET_CAPTURE_UPFRONT);
  recap_graph_set_member_t m = member_of(set, 8);
  assert_int_equal(m.state, RECAP_MEMBER_FAILED);
  assert_int_equal(m.status, RECAP_ERROR_CUDA);
  assert_non_null(strstr(m.message,
                         "size 8: the step returned RECAP_ERROR_CUDA during the "
                         "capture"));
  assert_int_equal(state_of_size(set, 2), RECAP_MEMBER_READY);
  assert_int_equal(state_of_size(set, 32), RECAP_MEMBER_READY);
  assert_int_equal(capturing(stream), 0);
  /* Captured again on demand once the step works. */
  model.fail_size = 0;
  OK(recap_graph_set_capture(set, 8));
  assert_int_equal(state_of_size(set, 8), RECAP_MEMBER_READY);
  assert_int_equal(member_of(set, 8).message[0], '\0');
  destroy_and_check(set);
}

/* An injected fault at the nth call of kind fails the nth capture (largest first). */
static void expect_fault_fails_one_member(recap__fake_fault_t kind, const char *needle) {
  reset();
  stream = recap__fake_stream_new();
  model.captured_count = 0;
  recap__fake_fail_nth(kind, 2);
  recap_graph_set_t set = make_set((const size_t[]){1, 4, 16}, 3, RECAP_SET_CAPTURE_UPFRONT);
  recap__fake_fail_nth(kind, 0);
  recap_graph_set_member_t m = member_of(set, 4);
  assert_int_equal(m.state, RECAP_MEMBER_FAILED);
  assert_int_equal(m.status, RECAP_ERROR_CUDA);
  if (!strstr(m.message, needle) || strncmp(m.message, "size 4: ", 8) != 0)
    fail_msg("message: %s (wanted %s)", m.message, needle);
  assert_int_equal(state_of_size(set, 1), RECAP_MEMBER_READY);
  assert_int_equal(state_of_size(set, 16), RECAP_MEMBER_READY);
  assert_int_equal(info_of(set).failed, 1);
  int graphed = -1;
  OK(recap_graph_set_run(set, 3, stream, NULL, &graphed));
  assert_int_equal(graphed, 0);
  expect_rows(&model, 4);
  destroy_and_check(set);
}

RECAP_TEST(injected_faults_fail_one_member) {
  expect_fault_fails_one_member(RECAP__FAKE_FAULT_CAPTURE_BEGIN, "cudaStreamBeginCapture");
  expect_fault_fails_one_member(RECAP__FAKE_FAULT_CAPTURE_END, "cudaStreamEndCapture");
  expect_fault_fails_one_member(RECAP__FAKE_FAULT_INSTANTIATE, "cudaGraphInstantiate");
}

RECAP_TEST(a_failing_replay_is_returned) {
  recap_graph_set_t set = make_set((const size_t[]){1, 4}, 2, RECAP_SET_CAPTURE_UPFRONT);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_LAUNCH, 1);
  EXPECT_STATUS(recap_graph_set_run(set, 4, stream, NULL, NULL), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("cudaGraphLaunch");
  OK(recap_graph_set_run(set, 4, stream, NULL, NULL));
  destroy_and_check(set);
}

RECAP_TEST(a_set_that_cannot_be_made_leaves_nothing) {
  recap__fake_fail_nth(RECAP__FAKE_FAULT_STREAM_CREATE, 1);
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  o.sizes = (const size_t[]){1, 4};
  o.size_count = 2;
  recap_graph_set_t set = (recap_graph_set_t)(uintptr_t)1;
  EXPECT_STATUS(recap_graph_set_create(&set, model_step, &model, &o), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("cudaStreamCreate");
  assert_null(set);
  assert_int_equal(model.captured_count, 0);
  expect_quiet();
}

RECAP_TEST(an_unjoined_side_stream_fails_its_member) {
  model.fork_unjoined = 1;
  recap__fake_strict_joins(true);
  recap_graph_set_t set = make_set((const size_t[]){1, 4}, 2, RECAP_SET_CAPTURE_UPFRONT);
  for (size_t s = 1; s <= 4; s += 3) {
    recap_graph_set_member_t m = member_of(set, s);
    assert_int_equal(m.state, RECAP_MEMBER_FAILED);
    assert_int_equal(m.status, RECAP_ERROR_CAPTURE_INVALIDATED);
    if (!strstr(m.message, "cudaErrorStreamCaptureUnjoined")) fail_msg("message: %s", m.message);
  }
  assert_int_equal(capturing(model.side), 0);
  /* The set goes on: its sizes run eagerly. */
  model.fork_unjoined = 0;
  OK(recap_graph_set_run(set, 2, stream, NULL, NULL));
  expect_rows(&model, 4);
  OK(recap_graph_set_capture(set, 0));
  assert_int_equal(info_of(set).ready, 2);
  destroy_and_check(set);
}

/* ---- graphs disabled ---------------------------------------------------------------------- */

RECAP_TEST(with_graphs_disabled_every_call_runs_eagerly) {
  recap__graphs_disabled_override(1);
  recap_graph_set_t set = make_set((const size_t[]){2, 8}, 2, RECAP_SET_CAPTURE_BACKGROUND);
  recap_graph_set_info_t info = info_of(set);
  assert_true(recap_pool_is_default(info.pool));
  assert_int_equal(info.ready + info.pending + info.failed, 0);
  assert_int_equal(state_of_size(set, 2), RECAP_MEMBER_EAGER);
  int graphed = -1;
  size_t padded = 0;
  OK(recap_graph_set_run(set, 5, stream, &padded, &graphed));
  assert_int_equal(graphed, 0);
  assert_int_equal(padded, 8);
  expect_rows(&model, 8);
  OK(recap_graph_set_capture(set, 0));
  OK(recap_graph_set_wait(set));
  assert_int_equal(model.captured_count, 0);
  assert_int_equal(member_of(set, 8).eager_runs, 1);
  EXPECT_STATUS(recap_graph_set_evict(set, 8), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("RECAP_MEMBER_EAGER");
  assert_int_equal(recap__fake_now().live_graphs, 0);
  destroy_and_check(set);
}

/* ---- reading a set, and the handle checks --------------------------------------------------- */

RECAP_TEST(member_and_info_refuse_bad_arguments) {
  recap_graph_set_t set = make_set((const size_t[]){1, 4}, 2, RECAP_SET_CAPTURE_LAZY);
  recap_graph_set_member_t m = RECAP_GRAPH_SET_MEMBER_INIT;
  EXPECT_STATUS(recap_graph_set_member(set, 2, &m), RECAP_ERROR_NOT_FOUND);
  EXPECT_MESSAGE("recap_graph_set_member: the set holds no size 2");
  EXPECT_STATUS(recap_graph_set_member(set, 1, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  m.size = 3;
  EXPECT_STATUS(recap_graph_set_member(set, 1, &m), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("RECAP_GRAPH_SET_MEMBER_INIT");
  recap_graph_set_info_t info = RECAP_GRAPH_SET_INFO_INIT;
  info.size = 3;
  EXPECT_STATUS(recap_graph_set_info(set, &info), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("RECAP_GRAPH_SET_INFO_INIT");
  EXPECT_STATUS(recap_graph_set_info(set, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  m = member_of(set, 4);
  assert_int_equal(m.state, RECAP_MEMBER_PENDING);
  assert_null(m.graph);
  OK(recap_graph_set_destroy(set));
  EXPECT_STATUS(recap_graph_set_run(NULL, 1, stream, NULL, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_graph_set_run: set is NULL");
  OK(recap_graph_set_destroy(NULL));
  expect_quiet();
}

/* Host memory failing at each allocation of a set's life in turn: create fails cleanly (nothing
 * made, nothing left) or records the members it could not capture; every call after works. */
RECAP_TEST(host_memory_failing_at_every_step) {
  model.row_bytes = MiB;
  recap_test_host_faults_install();
  /* A first set makes what recap keeps for the process (the allocator's state of the device,
   * the graphs' registry): the baseline. */
  recap_graph_set_t warm = make_set((const size_t[]){2, 4, 8}, 3, RECAP_SET_CAPTURE_UPFRONT);
  OK(recap_graph_set_destroy(warm));
  OK(recap_empty_cache());
  int64_t live = recap_test_host_live();
  int refused = 0, failed_members = 0;
  for (uint64_t n = 1;; n++) {
    if (n > 5000) fail_msg("the sweep did not end");
    recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
    o.sizes = (const size_t[]){2, 4, 8};
    o.size_count = 3;
    recap_graph_set_t set = NULL;
    recap_test_host_fail_nth(n);
    recap_status_t s = recap_graph_set_create(&set, model_step, &model, &o);
    bool failed = recap_test_host_failed();
    recap_test_host_fail_nth(0);
    if (s != RECAP_SUCCESS) {
      assert_true(failed);
      EXPECT_STATUS(s, RECAP_ERROR_OUT_OF_MEMORY);
      assert_null(set);
      refused++;
    } else {
      recap_graph_set_info_t info = info_of(set);
      failed_members += (int)info.failed;
      assert_int_equal(info.ready + info.failed, 3);
      OK(recap_graph_set_capture(set, 0));
      assert_int_equal(info_of(set).ready, 3);
      OK(recap_graph_set_run(set, 3, stream, NULL, NULL));
      expect_rows(&model, 4);
      OK(recap_graph_set_destroy(set));
    }
    expect_quiet();
    OK(recap_empty_cache());
    if (recap_test_host_live() != live)
      fail_msg("failing host allocation %llu: %lld blocks left, %lld before", (unsigned long long)n,
               (long long)recap_test_host_live(), (long long)live);
    if (!failed) break;
  }
  recap_test_host_faults_remove();
  assert_true(refused > 0);
  assert_true(failed_members > 0);
}

/* ---- with the rest of recap --------------------------------------------------------------- */

RECAP_TEST(members_can_check_input_liveness) {
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  o.sizes = (const size_t[]){1, 4};
  o.size_count = 2;
  o.capture_options.check_input_liveness = 1;
  recap_graph_set_t set;
  OK(recap_graph_set_create(&set, model_step, &model, &o));
  recap_graph_set_member_t m = member_of(set, 4);
  assert_int_equal(m.state, RECAP_MEMBER_READY);
  /* The member's capture recorded its inputs (none of recap's blocks: the model's buffers are
   * its own); without the option the graph has no record. */
  const recap_liveness_input_t *inputs = NULL;
  size_t n = 99;
  OK(liveness_inputs_of(m.graph, &inputs, &n));
  assert_int_equal(n, 0);
  OK(recap_graph_set_destroy(set));
  o.capture_options.check_input_liveness = 0;
  OK(recap_graph_set_create(&set, model_step, &model, &o));
  m = member_of(set, 4);
  EXPECT_STATUS(liveness_inputs_of(m.graph, &inputs, &n), RECAP_ERROR_INVALID_USAGE);
  destroy_and_check(set);
}

/* A member's graph is lent: recaptured in place (recap/update.h), the set replays the update. */
RECAP_TEST(a_member_graph_can_be_recaptured_in_place) {
  recap_graph_set_t set = make_set((const size_t[]){4, 8}, 2, RECAP_SET_CAPTURE_UPFRONT);
  recap_graph_set_member_t m = member_of(set, 8);
  recap_stream_t s = recap__fake_stream_new();
  OK(recap_graph_recapture_begin(m.graph, NULL, s));
  OK(model_step(6, s, &model));
  OK(recap_graph_capture_end(m.graph));
  memset(model.out, 0, sizeof model.out);
  int graphed = 0;
  size_t padded = 0;
  OK(recap_graph_set_run(set, 7, stream, &padded, &graphed));
  assert_int_equal(graphed, 1);
  assert_int_equal(padded, 8);
  /* The graph now computes 6 rows. */
  expect_rows(&model, 6);
  assert_int_equal(model.out[6], 0);
  assert_int_equal(member_of(set, 8).graph, m.graph);
  destroy_and_check(set);
}

/* A step that draws: out[k] = f(seed, offset + k) from the generator's state, read at run time
 * in a graph as a kernel built on recap/rng_device.cuh reads it. */
typedef struct rng_model {
  recap_generator_t gen;
  uint64_t out[64];
} rng_model_t;

static void rng_fill(void *const *args, size_t n) {
  (void)n;
  uint64_t *out = args[0];
  size_t rows = (size_t)(uintptr_t)args[1];
  uint64_t seed, offset;
  if ((uintptr_t)args[2]) {
    seed = *(const uint64_t *)args[3];
    offset = *(const uint64_t *)args[4] + (uint64_t)(uintptr_t)args[5];
  } else {
    seed = (uint64_t)(uintptr_t)args[3];
    offset = (uint64_t)(uintptr_t)args[4];
  }
  for (size_t k = 0; k < rows; k++) out[k] = seed * 1000003u + offset * 7919u + k;
}

static recap_status_t rng_step(size_t size, recap_stream_t stream, void *user_data) {
  rng_model_t *m = user_data;
  recap_philox_state_t st;
  recap_status_t s = recap_generator_philox_state(m->gen, 4, stream, &st);
  if (s != RECAP_SUCCESS) return s;
  const void *args[6] = {m->out,
                         (const void *)(uintptr_t)size,
                         (const void *)(uintptr_t)st.captured,
                         st.captured ? (const void *)st.seed_ptr : (const void *)(uintptr_t)st.seed,
                         st.captured ? (const void *)st.offset_ptr
                                     : (const void *)(uintptr_t)st.offset,
                         (const void *)(uintptr_t)st.offset_intragraph};
  recap__fake_launch_kernel_fn(stream, "rng_fill", rng_fill, args, 6);
  return RECAP_SUCCESS;
}

/* Replays draw what eager runs at the same offsets draw, bit for bit. */
RECAP_TEST(replays_draw_what_eager_runs_draw) {
  rng_model_t graphed, eager;
  memset(&graphed, 0, sizeof graphed);
  memset(&eager, 0, sizeof eager);
  OK(recap_generator_create(&graphed.gen, 42));
  OK(recap_generator_create(&eager.gen, 42));
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  o.sizes = (const size_t[]){4, 8};
  o.size_count = 2;
  recap_graph_set_t set;
  OK(recap_graph_set_create(&set, rng_step, &graphed, &o));
  assert_int_equal(info_of(set).ready, 2);
  const size_t calls[] = {3, 8, 2, 5};
  for (size_t i = 0; i < 4; i++) {
    int was_graphed = 0;
    size_t padded = 0;
    OK(recap_graph_set_run(set, calls[i], stream, &padded, &was_graphed));
    assert_int_equal(was_graphed, 1);
    OK(rng_step(padded, stream, &eager));
    assert_memory_equal(graphed.out, eager.out, padded * sizeof(uint64_t));
    uint64_t a = 0, b = 1;
    OK(recap_generator_offset_get(graphed.gen, &a));
    OK(recap_generator_offset_get(eager.gen, &b));
    assert_int_equal(a, b);
    assert_int_equal(a, 4 * (i + 1));
  }
  OK(recap_graph_set_destroy(set));
  OK(recap_generator_destroy(graphed.gen));
  OK(recap_generator_destroy(eager.gen));
  expect_quiet();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(create_refuses_bad_options, setup, teardown),
    cmocka_unit_test_setup_teardown(sizes_from_lists_and_rules, setup, teardown),
    cmocka_unit_test_setup_teardown(bucket_choice_at_the_boundaries, setup, teardown),
    cmocka_unit_test_setup_teardown(overflow_runs_eagerly_or_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(captures_go_in_priority_order, setup, teardown),
    cmocka_unit_test_setup_teardown(replays_compute_what_the_step_computes, setup, teardown),
    cmocka_unit_test_setup_teardown(members_share_one_pool, setup, teardown),
    cmocka_unit_test_setup_teardown(a_pool_of_the_callers_is_used_and_kept, setup, teardown),
    cmocka_unit_test_setup_teardown(member_exec_bytes_and_nodes, setup, teardown),
    cmocka_unit_test_setup_teardown(the_budget_leaves_sizes_eager_and_says_by_how_much, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(the_budget_refuses_the_pools_growth, setup, teardown),
    cmocka_unit_test_setup_teardown(a_budget_taken_already_is_not_tried, setup, teardown),
    cmocka_unit_test_setup_teardown(evicted_members_are_captured_again_when_used, setup, teardown),
    cmocka_unit_test_setup_teardown(idle_members_are_evicted, setup, teardown),
    cmocka_unit_test_setup_teardown(lazy_members_are_captured_by_their_first_call, setup, teardown),
    cmocka_unit_test_setup_teardown(a_lazy_capture_that_fails_is_reported_then_runs_eagerly, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(a_failing_step_fails_its_member_only, setup, teardown),
    cmocka_unit_test_setup_teardown(injected_faults_fail_one_member, setup, teardown),
    cmocka_unit_test_setup_teardown(a_failing_replay_is_returned, setup, teardown),
    cmocka_unit_test_setup_teardown(host_memory_failing_at_every_step, setup, teardown),
    cmocka_unit_test_setup_teardown(a_set_that_cannot_be_made_leaves_nothing, setup, teardown),
    cmocka_unit_test_setup_teardown(an_unjoined_side_stream_fails_its_member, setup, teardown),
    cmocka_unit_test_setup_teardown(with_graphs_disabled_every_call_runs_eagerly, setup, teardown),
    cmocka_unit_test_setup_teardown(member_and_info_refuse_bad_arguments, setup, teardown),
    cmocka_unit_test_setup_teardown(members_can_check_input_liveness, setup, teardown),
    cmocka_unit_test_setup_teardown(replays_draw_what_eager_runs_draw, setup, teardown),
    cmocka_unit_test_setup_teardown(a_member_graph_can_be_recaptured_in_place, setup, teardown),
};
RECAP_TEST_MAIN(tests)
