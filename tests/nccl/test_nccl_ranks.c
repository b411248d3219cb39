/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_nccl_ranks.c — the NCCL layer on the fake's communicators of 2 to 8 ranks, one thread per
 * rank (two for the rank whose replays race): fingerprints that match pass the check and the
 * graphs then compute the collectives' results; mismatches (order, count, dtype, an extra
 * collective) name the first differing collective on each rank; send and receive are left out of
 * the comparison; SERIALIZE keeps two graphs sharing a communicator, replayed on two streams from
 * two threads, from overlapping, through a wait on the device (eager collectives arranged the same way make the fake fail
 * them), and REFUSE_OVERLAP refuses the second; the refusals inside regions with the fake's NCCL
 * kernels; the version warning; injected faults at the seam's calls. Runs under ThreadSanitizer
 * (the tsan preset).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "device/nccl_seam.h"
#include "fake/fake.h"
#include "graph_util.h"
#include "harness.h"
#include "capture_util.h"
#include "nccl/nccl_internal.h"
#include "recap.h"

enum { MAX_RANKS = 8, N_AR = 1024, N_AG = 256, N_BC = 64, N_P2P = 16 };

static void setup(void) {
  reset();
  recap__nccl_policy_forget();
  recap__nccl_warning_reset();
  recap__fake_nccl_timeout_ms(2000);
}

static void teardown(void) { recap__nccl_policy_forget(); }

static void pause_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* One collective of a rank's program. */
typedef struct op {
  recap_collective_kind_t kind;
  size_t count;
  recap_nccl_dtype_t dtype;
} op_t;

typedef struct rank_ctx {
  int rank, nranks;
  recap__nccl_comm_t comm;
  op_t program[8];
  int ops;
  bool p2p;    /* rank 0 sends N_P2P floats to rank 1, which receives them */
  bool replay; /* after a passing check: fill, replay, and verify the results */
  /* Results, read by the main thread after the join (cmocka's checks must not run here). */
  recap_status_t check;
  char message[2048];
  char failure[2048]; /* the first thing that went wrong in the thread, or "" */
} rank_ctx_t;

/* t_note records the first failure of a rank's thread; T_OK also leaves for its cleanup at out:,
 * where T_NOTE (never T_OK) keeps the cleanup from jumping back into itself. */
static recap_status_t t_note(rank_ctx_t *ctx, recap_status_t status, const char *expr) {
  if (status != RECAP_SUCCESS && !ctx->failure[0])
    snprintf(ctx->failure, sizeof ctx->failure, "rank %d: %s returned %s: %s", ctx->rank, expr,
             recap_status_name(status), recap_last_error());
  return status;
}
#define T_NOTE(ctx, expr) ((void)t_note((ctx), (expr), #expr))
#define T_OK(ctx, expr)                                          \
  do {                                                           \
    if (t_note((ctx), (expr), #expr) != RECAP_SUCCESS) goto out; \
  } while (0)

static void *run_rank(void *arg) {
  rank_ctx_t *ctx = arg;
  recap_stream_t s = recap__fake_stream_new();
  float *ar = NULL, *ag_send = NULL, *ag_recv = NULL, *bc = NULL, *p2p = NULL;
  recap_graph_t g = NULL;
  size_t n = (size_t)ctx->nranks;
  T_OK(ctx, recap_malloc((void **)&ar, N_AR * sizeof(float), s));
  T_OK(ctx, recap_malloc((void **)&ag_send, N_AG * sizeof(float), s));
  T_OK(ctx, recap_malloc((void **)&ag_recv, N_AG * n * sizeof(float), s));
  T_OK(ctx, recap_malloc((void **)&bc, N_AR * sizeof(float), s));
  T_OK(ctx, recap_malloc((void **)&p2p, N_P2P * sizeof(float), s));
  T_OK(ctx, recap_graph_create(&g, 0));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.mode = RECAP_CAPTURE_MODE_THREAD_LOCAL;
  T_OK(ctx, recap_graph_capture_begin(g, &o, s));
  for (int i = 0; i < ctx->ops; i++) {
    const op_t *p = &ctx->program[i];
    switch (p->kind) {
      case RECAP_COLLECTIVE_ALL_REDUCE:
        T_OK(ctx, recap_nccl_all_reduce(ar, ar, p->count, p->dtype, RECAP_NCCL_SUM, ctx->comm, s));
        break;
      case RECAP_COLLECTIVE_ALL_GATHER:
        T_OK(ctx, recap_nccl_all_gather(ag_send, ag_recv, p->count, p->dtype, ctx->comm, s));
        break;
      case RECAP_COLLECTIVE_BROADCAST:
        T_OK(ctx, recap_nccl_broadcast(bc, bc, p->count, p->dtype, 0, ctx->comm, s));
        break;
      case RECAP_COLLECTIVE_REDUCE_SCATTER:
        T_OK(ctx, recap_nccl_reduce_scatter(ag_recv, ag_send, p->count, p->dtype, RECAP_NCCL_SUM,
                                            ctx->comm, s));
        break;
      default: break;
    }
  }
  if (ctx->p2p && ctx->rank == 0)
    T_OK(ctx, recap_nccl_send(p2p, N_P2P, RECAP_NCCL_FLOAT32, 1, ctx->comm, s));
  if (ctx->p2p && ctx->rank == 1)
    T_OK(ctx, recap_nccl_recv(p2p, N_P2P, RECAP_NCCL_FLOAT32, 0, ctx->comm, s));
  T_OK(ctx, recap_graph_capture_end(g));
  ctx->check = recap_graph_check_collectives(g, ctx->comm);
  snprintf(ctx->message, sizeof ctx->message, "%s", recap_last_error());
  if (ctx->check == RECAP_SUCCESS && ctx->replay) {
    float v = (float)(ctx->rank + 1);
    for (size_t i = 0; i < N_AR; i++) ar[i] = v, bc[i] = v;
    for (size_t i = 0; i < N_AG; i++) ag_send[i] = v;
    for (size_t i = 0; i < N_P2P; i++) p2p[i] = ctx->rank == 0 ? 42.0f + (float)i : 0.0f;
    T_OK(ctx, recap_graph_replay(g, s));
    recap__fake_stream_complete(s);
    float sum = (float)(n * (n + 1) / 2);
    for (size_t i = 0; i < N_AR && !ctx->failure[0]; i++)
      if (ar[i] != sum || bc[i] != (i < N_BC ? 1.0f : v))
        snprintf(ctx->failure, sizeof ctx->failure, "rank %d: ar[%zu] = %g (want %g), bc = %g",
                 ctx->rank, i, (double)ar[i], (double)sum, (double)bc[i]);
    for (size_t i = 0; i < N_AG * n && !ctx->failure[0]; i++)
      if (ag_recv[i] != (float)(i / N_AG + 1))
        snprintf(ctx->failure, sizeof ctx->failure, "rank %d: ag_recv[%zu] = %g", ctx->rank, i,
                 (double)ag_recv[i]);
    for (size_t i = 0; ctx->rank == 1 && i < N_P2P && !ctx->failure[0]; i++)
      if (p2p[i] != 42.0f + (float)i)
        snprintf(ctx->failure, sizeof ctx->failure, "rank 1: p2p[%zu] = %g", i, (double)p2p[i]);
  }
out:
  if (g) T_NOTE(ctx, recap_graph_destroy(g));
  recap__fake_stream_complete(s);
  if (ar) T_NOTE(ctx, recap_free(ar));
  if (ag_send) T_NOTE(ctx, recap_free(ag_send));
  if (ag_recv) T_NOTE(ctx, recap_free(ag_recv));
  if (bc) T_NOTE(ctx, recap_free(bc));
  if (p2p) T_NOTE(ctx, recap_free(p2p));
  return NULL;
}

static const op_t base_program[3] = {{RECAP_COLLECTIVE_ALL_REDUCE, N_AR, RECAP_NCCL_FLOAT32},
                                     {RECAP_COLLECTIVE_ALL_GATHER, N_AG, RECAP_NCCL_FLOAT32},
                                     {RECAP_COLLECTIVE_BROADCAST, N_BC, RECAP_NCCL_FLOAT32}};

/* Run nranks ranks on threads, each with base_program unless edit changes it. */
static void run_clique(rank_ctx_t *ctx, int nranks, bool p2p, bool replay,
                       void (*edit)(rank_ctx_t *)) {
  recap__nccl_comm_t comms[MAX_RANKS];
  OK(recap__fake_nccl_comms(nranks, comms));
  pthread_t threads[MAX_RANKS];
  for (int r = 0; r < nranks; r++) {
    memset(&ctx[r], 0, sizeof ctx[r]);
    ctx[r].rank = r;
    ctx[r].nranks = nranks;
    ctx[r].comm = comms[r];
    memcpy(ctx[r].program, base_program, sizeof base_program);
    ctx[r].ops = 3;
    ctx[r].p2p = p2p;
    ctx[r].replay = replay;
    if (edit) edit(&ctx[r]);
  }
  for (int r = 0; r < nranks; r++)
    assert_int_equal(pthread_create(&threads[r], NULL, run_rank, &ctx[r]), 0);
  for (int r = 0; r < nranks; r++) assert_int_equal(pthread_join(threads[r], NULL), 0);
  for (int r = 0; r < nranks; r++)
    if (ctx[r].failure[0]) fail_msg("%s", ctx[r].failure);
}

#define EXPECT_IN(text, needle)                                                     \
  do {                                                                              \
    if (!strstr((text), (needle))) fail_msg("\"%s\" not in: %s", (needle), (text)); \
  } while (0)

/* ------------------------------------------------------------------------------------------
 * The check
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(test_matching_fingerprints_pass_and_compute) {
  static const int sizes[] = {2, 3, 4, 8};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    setup();
    rank_ctx_t ctx[MAX_RANKS];
    recap__fake_nccl_counters_t before = recap__fake_nccl_now();
    run_clique(ctx, sizes[i], true, true, NULL);
    for (int r = 0; r < sizes[i]; r++)
      if (ctx[r].check != RECAP_SUCCESS) fail_msg("rank %d: %s", r, ctx[r].message);
    recap__fake_nccl_counters_t after = recap__fake_nccl_now();
    assert_int_equal(after.failures - before.failures, 0);
    /* Each rank: one exchange of the check, three collectives at the replay. */
    assert_int_equal(after.collectives - before.collectives, (uint64_t)sizes[i] * 4);
    assert_int_equal(after.sends - before.sends, 1);
    assert_int_equal(after.recvs - before.recvs, 1);
    expect_quiet();
    teardown();
  }
}

static void swap_on_rank1(rank_ctx_t *c) {
  if (c->rank != 1) return;
  op_t t = c->program[0];
  c->program[0] = c->program[1];
  c->program[1] = t;
}
static void count_on_rank1(rank_ctx_t *c) {
  if (c->rank == 1) c->program[0].count = 512;
}
static void dtype_on_rank1(rank_ctx_t *c) {
  if (c->rank == 1) c->program[0].dtype = RECAP_NCCL_INT32;
}
static void extra_on_rank1(rank_ctx_t *c) {
  if (c->rank == 1)
    c->program[c->ops++] = (op_t){RECAP_COLLECTIVE_REDUCE_SCATTER, N_AG / 2, RECAP_NCCL_FLOAT32};
}
static void count_on_rank2(rank_ctx_t *c) {
  if (c->rank == 2) c->program[2].count = 65;
}

static void expect_mismatch(const rank_ctx_t *ctx, int nranks) {
  for (int r = 0; r < nranks; r++) {
    if (ctx[r].check != RECAP_ERROR_INVALID_USAGE)
      fail_msg("rank %d: check returned %s: %s", r, recap_status_name(ctx[r].check),
               ctx[r].message);
    EXPECT_IN(ctx[r].message,
              "recap_graph_check_collectives: the graph's collectives on the "
              "communicator differ between ranks");
    EXPECT_IN(ctx[r].message, "every rank must capture the same collectives in the same order");
  }
}

/* A clique whose ranks capture differently, and what each named rank's message must hold. */
typedef struct mismatch_case {
  int nranks;
  void (*edit)(rank_ctx_t *);
  struct {
    int rank;
    const char *needle;
  } says[3];
} mismatch_case_t;

static const mismatch_case_t mismatch_cases[] = {
    {2,
     swap_on_rank1,
     {{0,
       "rank 0's collective 0 is all_reduce of 1024 float32 sum (2 ranks); "
       "rank 1's is all_gather of 256 float32 (2 ranks)"},
      {1,
       "rank 1's collective 0 is all_gather of 256 float32 (2 ranks); "
       "rank 0's is all_reduce of 1024 float32 sum (2 ranks)"}}},
    {2,
     count_on_rank1,
     {{0,
       "rank 0's collective 0 is all_reduce of 1024 float32 sum (2 ranks); "
       "rank 1's is all_reduce of 512 float32 sum (2 ranks)"}}},
    {2,
     dtype_on_rank1,
     {{1,
       "rank 1's collective 0 is all_reduce of 1024 int32 sum (2 ranks); "
       "rank 0's is all_reduce of 1024 float32 sum (2 ranks)"}}},
    {2,
     extra_on_rank1,
     {{0,
       "rank 0's collective 3 does not exist (rank 0 recorded 3); rank 1's "
       "is reduce_scatter of 128 float32 sum (2 ranks)"},
      {1,
       "rank 1's collective 3 is reduce_scatter of 128 float32 sum (2 "
       "ranks); rank 0's does not exist (rank 0 recorded 3)"}}},
    /* Four ranks, rank 2 differs: everyone else names rank 2, rank 2 names rank 0. */
    {4,
     count_on_rank2,
     {{0,
       "rank 0's collective 2 is broadcast of 64 float32 from root 0 (4 "
       "ranks); rank 2's is broadcast of 65 float32 from root 0 (4 ranks)"},
      {3,
       "rank 3's collective 2 is broadcast of 64 float32 from root 0 (4 "
       "ranks); rank 2's is broadcast of 65"},
      {2,
       "rank 2's collective 2 is broadcast of 65 float32 from root 0 (4 "
       "ranks); rank 0's is broadcast of 64"}}},
};

RECAP_TEST(test_mismatches_name_the_first_difference) {
  rank_ctx_t ctx[MAX_RANKS];
  for (size_t i = 0; i < sizeof mismatch_cases / sizeof mismatch_cases[0]; i++) {
    const mismatch_case_t *c = &mismatch_cases[i];
    setup();
    run_clique(ctx, c->nranks, false, false, c->edit);
    expect_mismatch(ctx, c->nranks);
    for (size_t k = 0; k < 3 && c->says[k].needle; k++)
      EXPECT_IN(ctx[c->says[k].rank].message, c->says[k].needle);
    expect_quiet();
    teardown();
  }
}

/* ------------------------------------------------------------------------------------------
 * Replays sharing a communicator
 * ---------------------------------------------------------------------------------------- */

/* Rank 0 has two threads: A replays (or calls) the first all-reduce on s1 and waits in it for
 * rank 1; B then starts the second on s2. Rank 1 runs the first, then the second. */
typedef struct race {
  bool graphs;
  recap__nccl_comm_t comm[2];
  recap_stream_t s1[2], s2[2];
  float *b1[2], *b2[2];
  recap_graph_t g1[2], g2[2];
  recap_status_t a, b, r1_first, r1_second;
  char b_message[2048];
  _Atomic int b_started, b_done;
} race_t;

static recap_status_t first(race_t *x, int r) {
  return x->graphs ? recap_graph_replay(x->g1[r], x->s1[r])
                   : recap_nccl_all_reduce(x->b1[r], x->b1[r], N_AR, RECAP_NCCL_FLOAT32,
                                           RECAP_NCCL_SUM, x->comm[r], x->s1[r]);
}
static recap_status_t second(race_t *x, int r) {
  return x->graphs ? recap_graph_replay(x->g2[r], x->s2[r])
                   : recap_nccl_all_reduce(x->b2[r], x->b2[r], N_AR, RECAP_NCCL_FLOAT32,
                                           RECAP_NCCL_SUM, x->comm[r], x->s2[r]);
}

static void *race_a(void *arg) {
  race_t *x = arg;
  x->a = first(x, 0);
  return NULL;
}
static void *race_b(void *arg) {
  race_t *x = arg;
  while (recap__fake_nccl_now().waiting < 1) pause_ms(1); /* A waits for rank 1 */
  atomic_store(&x->b_started, 1);
  x->b = second(x, 0);
  snprintf(x->b_message, sizeof x->b_message, "%s", recap_last_error());
  atomic_store(&x->b_done, 1);
  return NULL;
}
static void *race_rank1(void *arg) {
  race_t *x = arg;
  while (!atomic_load(&x->b_started)) pause_ms(1);
  pause_ms(50); /* B reaches the communicator's lock, or its collective */
  x->r1_first = first(x, 1);
  x->r1_second = second(x, 1);
  return NULL;
}

/* *g: a graph of one all-reduce of N_AR floats in place on b, captured on s. */
static void capture_all_reduce(recap_graph_t *g, float *b, recap__nccl_comm_t comm,
                               recap_stream_t s) {
  OK(recap_graph_create(g, 0));
  OK(recap_graph_capture_begin(*g, NULL, s));
  OK(recap_nccl_all_reduce(b, b, N_AR, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, comm, s));
  OK(recap_graph_capture_end(*g));
}

static void race_prepare(race_t *x, bool graphs) {
  memset(x, 0, sizeof *x);
  x->graphs = graphs;
  OK(recap__fake_nccl_comms(2, x->comm));
  for (int r = 0; r < 2; r++) {
    x->s1[r] = recap__fake_stream_new();
    x->s2[r] = recap__fake_stream_new();
    OK(recap_malloc((void **)&x->b1[r], N_AR * sizeof(float), x->s1[r]));
    OK(recap_malloc((void **)&x->b2[r], N_AR * sizeof(float), x->s1[r]));
    for (size_t i = 0; i < N_AR; i++) x->b1[r][i] = (float)(r + 1), x->b2[r][i] = (float)(10 * r);
    if (!graphs) continue;
    capture_all_reduce(&x->g1[r], x->b1[r], x->comm[r], x->s1[r]);
    capture_all_reduce(&x->g2[r], x->b2[r], x->comm[r], x->s2[r]);
  }
}

static void race_run(race_t *x) {
  pthread_t a, b, r1;
  assert_int_equal(pthread_create(&a, NULL, race_a, x), 0);
  assert_int_equal(pthread_create(&b, NULL, race_b, x), 0);
  assert_int_equal(pthread_create(&r1, NULL, race_rank1, x), 0);
  assert_int_equal(pthread_join(a, NULL), 0);
  assert_int_equal(pthread_join(b, NULL), 0);
  assert_int_equal(pthread_join(r1, NULL), 0);
}

static void race_release(race_t *x) {
  for (int r = 0; r < 2; r++) {
    recap__fake_stream_complete(x->s1[r]);
    recap__fake_stream_complete(x->s2[r]);
    if (x->graphs) {
      OK(recap_graph_destroy(x->g1[r]));
      OK(recap_graph_destroy(x->g2[r]));
    }
    OK(recap_free(x->b1[r]));
    OK(recap_free(x->b2[r]));
  }
}

RECAP_TEST(test_eager_overlap_fails_in_the_fake) {
  setup();
  recap__fake_nccl_timeout_ms(300);
  race_t x;
  race_prepare(&x, false);
  race_run(&x);
  /* What SERIALIZE prevents: the second collective of rank 0 starts on s2 while the first
   * waits on s1. */
  assert_int_equal(x.a, RECAP_SUCCESS);
  assert_int_not_equal(x.b, RECAP_SUCCESS);
  EXPECT_IN(x.b_message, "concurrent use of a communicator on two streams");
  assert_int_equal(x.r1_first, RECAP_SUCCESS);
  assert_int_not_equal(x.r1_second, RECAP_SUCCESS); /* rank 0's second never came */
  race_release(&x);
  teardown();
}

RECAP_TEST(test_serialize_orders_replays_sharing_a_communicator) {
  setup();
  race_t x;
  race_prepare(&x, true);
  uint64_t failures = recap__fake_nccl_now().failures;
  uint64_t waits = recap__fake_now().calls[RECAP__FAKE_FAULT_STREAM_WAIT_EVENT];
  race_run(&x);
  assert_int_equal(x.a, RECAP_SUCCESS);
  if (x.b != RECAP_SUCCESS) fail_msg("B: %s", x.b_message);
  /* Each rank's replay on s2 was ordered after its replay on s1 by a wait on the device. */
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_STREAM_WAIT_EVENT], waits + 2);
  assert_int_equal(x.r1_first, RECAP_SUCCESS);
  assert_int_equal(x.r1_second, RECAP_SUCCESS);
  assert_int_equal(recap__fake_nccl_now().failures, failures);
  for (int r = 0; r < 2; r++)
    for (size_t i = 0; i < N_AR; i++) {
      assert_true(x.b1[r][i] == 3.0f);
      assert_true(x.b2[r][i] == 10.0f);
    }
  race_release(&x);
  expect_quiet();
  teardown();
}

RECAP_TEST(test_refuse_overlap_refuses_the_second_replay) {
  setup();
  race_t x;
  recap__fake_nccl_timeout_ms(300);
  race_prepare(&x, true);
  OK(recap_nccl_comm_policy(x.comm[0], RECAP_NCCL_REFUSE_OVERLAP));
  uint64_t launches = recap__fake_now().graph_launches;
  race_run(&x);
  assert_int_equal(x.a, RECAP_SUCCESS);
  assert_int_equal(x.b, RECAP_ERROR_BUSY);
  EXPECT_IN(x.b_message, "recap_graph_replay: the graph uses NCCL communicator");
  EXPECT_IN(x.b_message, "which a replay on another thread is launching now");
  EXPECT_IN(x.b_message, "RECAP_NCCL_REFUSE_OVERLAP");
  char text[32];
  snprintf(text, sizeof text, "%p", (void *)x.s2[0]);
  EXPECT_IN(x.b_message, text);
  assert_int_equal(x.r1_first, RECAP_SUCCESS);
  /* Rank 1's second replay found no partner: rank 0's was refused, and launched nothing. */
  assert_int_not_equal(x.r1_second, RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().graph_launches, launches + 2);
  race_release(&x);
  teardown();
}

/* ------------------------------------------------------------------------------------------
 * Regions, version, faults (one rank)
 * ---------------------------------------------------------------------------------------- */

/* A communicator of one rank, a stream, and a buffer of 64 floats on it. */
static recap_stream_t one_rank(recap__nccl_comm_t *comm, float **buf) {
  OK(recap__fake_nccl_comms(1, comm));
  recap_stream_t s = recap__fake_stream_new();
  *buf = NULL;
  OK(recap_malloc((void **)buf, 64 * sizeof(float), s));
  return s;
}

/* The end of a test of one rank: its graph and buffer gone, no warning unless one was expected
 * (and captured), the teardown. */
static void one_rank_done(recap_graph_t g, float *buf, bool quiet) {
  OK(recap_graph_destroy(g));
  OK(recap_free(buf));
  if (quiet) expect_quiet();
  teardown();
}

RECAP_TEST(test_region_refusals_with_the_fake) {
  setup();
  recap__nccl_comm_t comm;
  float *buf;
  recap_stream_t s = one_rank(&comm, &buf);
  recap_graph_t g = graph_capturing(s, NULL);
  region_opened(RECAP_REGION_IF, 1, 1, s);
  EXPECT_STATUS(recap_nccl_all_reduce(buf, buf, 64, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, comm, s),
                RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("(pytorch #180960)");
  /* NCCL called directly (here the fake's table): its kernel node is refused at the end. */
  recap__coll_t c = {RECAP__COLL_ALL_REDUCE, buf, buf, 64,  RECAP_NCCL_FLOAT32,
                     RECAP_NCCL_SUM,         -1,  -1,  comm};
  OK(recap__fake_nccl_ops.collective(&c, s));
  EXPECT_STATUS(recap_region_end(s), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("holds node 0 of its body, kernel ncclDevKernel_");
  EXPECT_MESSAGE("an NCCL collective");
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
  one_rank_done(g, buf, true);
}

RECAP_TEST(test_version_warning_from_the_fake) {
  setup();
  recap__fake_nccl_version(22905);
  int version = 0;
  OK(recap_nccl_version(&version));
  assert_int_equal(version, 22905);
  recap__nccl_comm_t comm;
  float *buf;
  recap_stream_t s = one_rank(&comm, &buf);
  recap_test_log_t log;
  recap_test_log_capture(&log);
  recap_graph_t g = graph_capturing(s, NULL);
  OK(recap_nccl_all_reduce(buf, buf, 64, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, comm, s));
  OK(recap_graph_capture_end(g));
  recap_test_log_stop();
  assert_int_equal(log.warnings, 1);
  EXPECT_IN(log.last_warning, "NCCL 2.29.5 has the graph deadlock of vllm #52504");
  one_rank_done(g, buf, false);
}

RECAP_TEST(test_faults_at_the_seam) {
  setup();
  int version = 0;
  recap__fake_fail_nth(RECAP__FAKE_FAULT_NCCL_LOAD, 1);
  EXPECT_STATUS(recap_nccl_version(&version), RECAP_ERROR_NOT_FOUND);
  recap__nccl_comm_t comm;
  float *buf;
  recap_stream_t s = one_rank(&comm, &buf);
  recap_graph_t g = graph_capturing(s, NULL);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_NCCL_COLLECTIVE, 1);
  assert_int_not_equal(recap_nccl_all_reduce(buf, buf, 64, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, comm,
                                             s),
                       RECAP_SUCCESS);
  OK(recap_nccl_all_gather(buf, buf, 64, RECAP_NCCL_FLOAT32, comm, s));
  OK(recap_graph_capture_end(g));
  size_t count = 0;
  OK(recap_graph_collectives(g, NULL, 0, &count, NULL));
  assert_int_equal(count, 1);
  /* The check's exchange failing fails the check and leaves nothing behind. */
  recap__fake_fail_nth(RECAP__FAKE_FAULT_NCCL_COLLECTIVE, 1);
  assert_int_not_equal(recap_graph_check_collectives(g, comm), RECAP_SUCCESS);
  OK(recap_graph_check_collectives(g, comm));
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  one_rank_done(g, buf, true);
}

/* ------------------------------------------------------------------------------------------
 * Pools of NCCL memory
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(test_pool_of_nccl_memory) {
  setup();
  recap__nccl_comm_t comm;
  OK(recap__fake_nccl_comms(1, &comm));
  recap_stream_t s = recap__fake_stream_new();
  recap_pool_id_t pool = recap_pool_handle();
  EXPECT_STATUS(recap_pool_nccl((recap_pool_id_t){0, 0}, comm), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_pool_nccl: the default pool {0,0} serves every caller");
  OK(recap_pool_nccl(pool, comm));
  recap__fake_nccl_counters_t before = recap__fake_nccl_now();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.pool = pool;
  OK(recap_graph_capture_begin(g, &o, s));
  float *buf = NULL;
  OK(recap_malloc((void **)&buf, 4096, s));
  OK(recap_nccl_all_reduce(buf, buf, 1024, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, comm, s));
  OK(recap_free(buf));
  OK(recap_graph_capture_end(g));
  recap__fake_nccl_counters_t during = recap__fake_nccl_now();
  assert_int_equal(during.mem_allocs - before.mem_allocs, 1);
  assert_int_equal(during.registers - before.registers, 1);
  assert_int_equal(during.mem_live - before.mem_live, 1);
  assert_int_equal(during.registered_live - before.registered_live, 1);
  /* The pool holds a segment now: the setting cannot change under it. */
  EXPECT_STATUS(recap_pool_nccl(pool, comm), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("holds segments already");
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  OK(recap_graph_destroy(g));
  OK(recap_empty_cache());
  recap__fake_nccl_counters_t after = recap__fake_nccl_now();
  assert_int_equal(after.deregisters - before.deregisters, 1);
  assert_int_equal(after.mem_frees - before.mem_frees, 1);
  assert_int_equal(after.mem_live, before.mem_live);
  assert_int_equal(after.registered_live, before.registered_live);

  /* NCCL refusing the memory or the registration fails recap_malloc and leaves nothing. */
  recap_pool_id_t other = recap_pool_handle();
  OK(recap_pool_nccl(other, comm));
  recap_graph_t h;
  OK(recap_graph_create(&h, 0));
  o.pool = other;
  OK(recap_graph_capture_begin(h, &o, s));
  void *p = NULL;
  recap__fake_fail_nth(RECAP__FAKE_FAULT_NCCL_REGISTER, 1);
  assert_int_not_equal(recap_malloc(&p, 4096, s), RECAP_SUCCESS);
  EXPECT_MESSAGE("fault injected");
  assert_int_equal(recap__fake_nccl_now().mem_live, before.mem_live);
  assert_int_equal(recap__fake_nccl_now().registered_live, before.registered_live);
  /* NCCL out of memory is the allocator's out of memory: it frees the cache and asks again. */
  uint64_t allocs = recap__fake_nccl_now().mem_allocs;
  recap__fake_fail_nth(RECAP__FAKE_FAULT_NCCL_MEM_ALLOC, 1);
  OK(recap_malloc(&p, 4096, s));
  assert_int_equal(recap__fake_nccl_now().mem_allocs - allocs, 1);
  assert_int_equal(recap__fake_nccl_now().mem_live, before.mem_live + 1);
  OK(recap_free(p));
  recap__fake_launch_kernel(s, "work");
  OK(recap_graph_capture_end(h));
  OK(recap_graph_destroy(h));
  OK(recap_empty_cache());
  assert_int_equal(recap__fake_nccl_now().mem_live, before.mem_live);
  assert_int_equal(recap__fake_nccl_now().registered_live, before.registered_live);

  /* Expandable segments cannot be NCCL's. */
  OK(recap_option_set("expandable_segments", "1"));
  EXPECT_STATUS(recap_pool_nccl(recap_pool_handle(), comm), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("the expandable_segments option is on");
  OK(recap_option_set("expandable_segments", "0"));
  expect_quiet();
  teardown();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_matching_fingerprints_pass_and_compute),
    cmocka_unit_test(test_mismatches_name_the_first_difference),
    cmocka_unit_test(test_eager_overlap_fails_in_the_fake),
    cmocka_unit_test(test_serialize_orders_replays_sharing_a_communicator),
    cmocka_unit_test(test_refuse_overlap_refuses_the_second_replay),
    cmocka_unit_test(test_region_refusals_with_the_fake),
    cmocka_unit_test(test_version_warning_from_the_fake),
    cmocka_unit_test(test_faults_at_the_seam),
    cmocka_unit_test(test_pool_of_nccl_memory),
};
RECAP_TEST_MAIN(tests)
