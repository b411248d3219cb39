/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_fake_nccl.c — the CPU fake's NCCL (fake_nccl.c), called through its table with nothing
 * above the seam: cliques of 2, 4 and 8 ranks as threads, every collective's arithmetic exact
 * eagerly and captured then replayed twice, in-place buffers, send/recv rings, mismatched
 * collectives and timeouts reported (never a hang), a communicator used on two streams at once
 * detected, faults, memory and registration counters, groups, and the reset.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fake/fake.h"
#include "fake_device_util.h"
#include "harness.h"

/* A cmocka test that runs a shared body with one argument (a clique's size, eager or
 * replayed). */
#define CASE_TEST(name, body, arg) \
  static void name(void **state) { \
    (void)state;                   \
    body(arg);                     \
  }

static const recap__nccl_ops_t *const nccl = &recap__fake_nccl_ops;

enum { MAX_RANKS = 8, COUNT = 5 };
/* NCCL's numbering. */
enum { INT32 = 2, INT64 = 4, FLOAT32 = 7, FLOAT64 = 8, FLOAT16 = 6 };
enum { SUM, PROD, MAX, MIN, AVG };

static void reset(void) {
  recap__fake_reset(NULL);
  recap_clear_last_error();
}

static double elapsed_ms(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* ---- one thread per rank ------------------------------------------------------------------ */

typedef struct rank_ctx rank_ctx_t;
struct rank_ctx {
  int rank, nranks;
  recap__nccl_comm_t comm;
  recap_stream_t stream;
  void (*body)(rank_ctx_t *);
  /* The first failure of the thread, with its message (the last error is per thread). */
  recap_status_t status;
  char message[1024];
  void *user;
};

/* Run call and keep its first failure in ctx. */
static bool try_call(rank_ctx_t *ctx, recap_status_t st) {
  if (st != RECAP_SUCCESS && ctx->status == RECAP_SUCCESS) {
    ctx->status = st;
    snprintf(ctx->message, sizeof ctx->message, "%s", recap_last_error());
  }
  return st == RECAP_SUCCESS;
}

static void *rank_main(void *arg) {
  rank_ctx_t *ctx = arg;
  ctx->body(ctx);
  return NULL;
}

/* A clique of n ranks, each running body on its own thread with its own stream. */
static void run_ranks(int n, rank_ctx_t ctx[], void (*body)(rank_ctx_t *), void *user) {
  recap__nccl_comm_t comms[MAX_RANKS];
  OK(recap__fake_nccl_comms(n, comms));
  pthread_t threads[MAX_RANKS];
  for (int r = 0; r < n; r++) {
    ctx[r] = (rank_ctx_t){.rank = r, .nranks = n, .comm = comms[r], .body = body, .user = user};
    ctx[r].stream = recap__fake_stream_new();
  }
  for (int r = 0; r < n; r++)
    assert_int_equal(pthread_create(&threads[r], NULL, rank_main, &ctx[r]), 0);
  for (int r = 0; r < n; r++) assert_int_equal(pthread_join(threads[r], NULL), 0);
}

static void expect_all_ok(int n, const rank_ctx_t ctx[]) {
  for (int r = 0; r < n; r++)
    if (ctx[r].status != RECAP_SUCCESS)
      fail_msg("rank %d failed with %s: %s", r, recap_status_name(ctx[r].status), ctx[r].message);
}

/* ---- data ---------------------------------------------------------------------------------- */

/* Rank r's element i: a small integer in [-5, 6] without 0, so that every type holds every
 * sum and product exactly and max and min depend on the rank. */
static int value(int r, size_t i, int salt) {
  int v = (r * 7 + (int)i * 3 + salt) % 11 - 5;
  return v == 0 ? 6 : v;
}

static size_t dtype_size(int dtype) { return dtype == INT32 || dtype == FLOAT32 ? 4 : 8; }

static void fill(void *buf, int dtype, size_t count, int r, int salt) {
  for (size_t i = 0; i < count; i++) {
    int v = value(r, i, salt);
    switch (dtype) {
      case INT32: ((int32_t *)buf)[i] = v; break;
      case INT64: ((int64_t *)buf)[i] = v; break;
      case FLOAT32: ((float *)buf)[i] = (float)v; break;
      default: ((double *)buf)[i] = v; break;
    }
  }
}

/* The reduction of element i over n ranks, in the dtype's arithmetic (avg: the sum divided by
 * n, integer division for integers), as a double (exact: the values are small integers, and
 * avg's quotient is rounded to the type before the conversion). */
#define EXPECT_REDUCE(T)                          \
  {                                               \
    T acc = (T)value(0, i, salt);                 \
    for (int r = 1; r < n; r++) {                 \
      T v = (T)value(r, i, salt);                 \
      switch (op) {                               \
        case SUM:                                 \
        case AVG: acc = (T)(acc + v); break;      \
        case PROD: acc = (T)(acc * v); break;     \
        case MAX: acc = v > acc ? v : acc; break; \
        default: acc = v < acc ? v : acc; break;  \
      }                                           \
    }                                             \
    if (op == AVG) acc = (T)(acc / (T)n);         \
    return (double)acc;                           \
  }

static double expected(int dtype, int op, int n, size_t i, int salt) {
  switch (dtype) {
    case INT32: EXPECT_REDUCE(int32_t)
    case INT64: EXPECT_REDUCE(int64_t)
    case FLOAT32: EXPECT_REDUCE(float)
    default: EXPECT_REDUCE(double)
  }
}

static double element(const void *buf, int dtype, size_t i) {
  switch (dtype) {
    case INT32: return ((const int32_t *)buf)[i];
    case INT64: return (double)((const int64_t *)buf)[i];
    case FLOAT32: return ((const float *)buf)[i];
    default: return ((const double *)buf)[i];
  }
}

static const int dtypes[] = {FLOAT32, FLOAT64, INT32, INT64};
enum { DTYPES = 4, OPS = 5 };

/* Every rank's buffers of one run of every collective: results kept for the main thread. */
/* Every buffer starts 8-aligned, as device memory is, so that 64-bit elements are aligned (each
 * row is a multiple of 8 bytes). */
typedef struct results {
  /* all_reduce of each dtype and op, in place for odd ops */
  _Alignas(8) unsigned char all_reduce[DTYPES][OPS][COUNT * 8];
  _Alignas(8) unsigned char gather[DTYPES][MAX_RANKS * COUNT * 8];
  _Alignas(8) unsigned char scatter[DTYPES][OPS][COUNT * 8];
  _Alignas(8) unsigned char bcast[DTYPES][COUNT * 8];
  _Alignas(8) unsigned char reduce[DTYPES][COUNT * 8];
  int32_t ring[COUNT];
} results_t;

/* Issue every collective once on ctx's stream (eager: computed at once; captured: nodes). The
 * send buffers are filled by the caller (fill_sends) before each run. */
typedef struct buffers {
  _Alignas(8) unsigned char send[DTYPES][OPS][MAX_RANKS * COUNT * 8]; /* reduce_scatter: n COUNT */
  _Alignas(8) unsigned char gsend[DTYPES][COUNT * 8];
  int32_t ring_send[COUNT];
  results_t out;
} buffers_t;

static void fill_sends(buffers_t *b, int r, int n, int salt) {
  for (int d = 0; d < DTYPES; d++) {
    for (int o = 0; o < OPS; o++) {
      fill(b->send[d][o], dtypes[d], (size_t)n * COUNT, r, salt + o);
      /* in place for odd ops: the result overwrites the send */
      if (o % 2) memcpy(b->out.all_reduce[d][o], b->send[d][o], COUNT * dtype_size(dtypes[d]));
    }
    fill(b->gsend[d], dtypes[d], COUNT, r, salt + 10);
  }
  fill(b->ring_send, INT32, COUNT, r, salt + 20);
}

static void issue_all(rank_ctx_t *ctx, buffers_t *b) {
  int n = ctx->nranks, r = ctx->rank;
  for (int d = 0; d < DTYPES; d++) {
    int t = dtypes[d];
    for (int o = 0; o < OPS; o++) {
      const void *send = o % 2 ? (const void *)b->out.all_reduce[d][o] : b->send[d][o];
      recap__coll_t c = {
          RECAP__COLL_ALL_REDUCE, send, b->out.all_reduce[d][o], COUNT, t, o, -1, -1, ctx->comm};
      if (!try_call(ctx, nccl->collective(&c, ctx->stream))) return;
      recap__coll_t rs = {RECAP__COLL_REDUCE_SCATTER,
                          b->send[d][o],
                          b->out.scatter[d][o],
                          COUNT,
                          t,
                          o,
                          -1,
                          -1,
                          ctx->comm};
      if (!try_call(ctx, nccl->collective(&rs, ctx->stream))) return;
    }
    recap__coll_t g = {
        RECAP__COLL_ALL_GATHER, b->gsend[d], b->out.gather[d], COUNT, t, 0, -1, -1, ctx->comm};
    recap__coll_t bc = {
        RECAP__COLL_BROADCAST, b->gsend[d], b->out.bcast[d], COUNT, t, 0, -1, n - 1, ctx->comm};
    recap__coll_t rd = {RECAP__COLL_REDUCE, b->gsend[d], b->out.reduce[d], COUNT, t, SUM, -1, 1 % n,
                        ctx->comm};
    if (!try_call(ctx, nccl->collective(&g, ctx->stream)) ||
        !try_call(ctx, nccl->collective(&bc, ctx->stream)) ||
        !try_call(ctx, nccl->collective(&rd, ctx->stream)))
      return;
  }
  /* A ring: each rank sends to the next and receives from the previous (sends do not wait). */
  recap__coll_t s = {RECAP__COLL_SEND, b->ring_send, NULL,     COUNT, INT32, 0,
                     (r + 1) % n,      -1,           ctx->comm};
  recap__coll_t v = {RECAP__COLL_RECV, NULL, b->out.ring, COUNT, INT32, 0,
                     (r + n - 1) % n,  -1,   ctx->comm};
  if (!try_call(ctx, nccl->group_start())) return;
  if (!try_call(ctx, nccl->collective(&s, ctx->stream))) return;
  if (!try_call(ctx, nccl->collective(&v, ctx->stream))) return;
  try_call(ctx, nccl->group_end());
}

static void check_results(int n, buffers_t bufs[], int salt) {
  for (int r = 0; r < n; r++) {
    const results_t *o = &bufs[r].out;
    for (int d = 0; d < DTYPES; d++) {
      int t = dtypes[d];
      for (int op = 0; op < OPS; op++) {
        for (size_t i = 0; i < COUNT; i++) {
          double want = expected(t, op, n, i, salt + op);
          double got = element(o->all_reduce[d][op], t, i);
          if (got != want)
            fail_msg("%d ranks: rank %d all_reduce dtype %d op %d [%zu]: %g, expected %g", n, r, t,
                     op, i, got, want);
          /* reduce_scatter: rank r gets elements r * COUNT ... of the reduction */
          want = expected(t, op, n, (size_t)r * COUNT + i, salt + op);
          got = element(o->scatter[d][op], t, i);
          if (got != want)
            fail_msg("%d ranks: rank %d reduce_scatter dtype %d op %d [%zu]: %g, expected %g", n, r,
                     t, op, i, got, want);
        }
      }
      for (int q = 0; q < n; q++)
        for (size_t i = 0; i < COUNT; i++)
          assert_true(element(o->gather[d], t, (size_t)q * COUNT + i) == value(q, i, salt + 10));
      for (size_t i = 0; i < COUNT; i++) {
        assert_true(element(o->bcast[d], t, i) == value(n - 1, i, salt + 10));
        if (r == 1 % n) {
          double sum = 0;
          for (int q = 0; q < n; q++) sum += value(q, i, salt + 10);
          assert_true(element(o->reduce[d], t, i) == sum);
        } else {
          assert_true(element(o->reduce[d], t, i) == 0); /* only the root receives */
        }
      }
    }
    for (size_t i = 0; i < COUNT; i++)
      assert_int_equal(o->ring[i], value((r + n - 1) % n, i, salt + 20));
  }
}

/* Collectives per rank of one issue_all: (all_reduce + reduce_scatter) per op, and all_gather,
 * broadcast, reduce, per dtype. */
enum { COLLECTIVES_PER_RUN = DTYPES * (2 * OPS + 3) };

static void eager_body(rank_ctx_t *ctx) {
  buffers_t *b = &((buffers_t *)ctx->user)[ctx->rank];
  fill_sends(b, ctx->rank, ctx->nranks, 0);
  issue_all(ctx, b);
}

static void eager_arithmetic(int n) {
  reset();
  static buffers_t bufs[MAX_RANKS];
  memset(bufs, 0, sizeof bufs);
  rank_ctx_t ctx[MAX_RANKS];
  run_ranks(n, ctx, eager_body, bufs);
  expect_all_ok(n, ctx);
  check_results(n, bufs, 0);
  recap__fake_nccl_counters_t c = recap__fake_nccl_now();
  assert_int_equal(c.collectives, (uint64_t)n * COLLECTIVES_PER_RUN);
  assert_int_equal(c.sends, n);
  assert_int_equal(c.recvs, n);
  assert_int_equal(c.group_starts, n);
  assert_int_equal(c.group_ends, n);
  assert_int_equal(c.failures, 0);
  assert_int_equal(c.waiting, 0);
  /* One work item per call on each rank's stream. */
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_NCCL_COLLECTIVE],
                   (uint64_t)n * (COLLECTIVES_PER_RUN + 2));
}

CASE_TEST(eager_2_ranks, eager_arithmetic, 2)
CASE_TEST(eager_4_ranks, eager_arithmetic, 4)
CASE_TEST(eager_8_ranks, eager_arithmetic, 8)

/* Captured: nothing runs at capture; each launch runs every collective with the buffers' values
 * at that time. */
static void captured_body(rank_ctx_t *ctx) {
  buffers_t *b = &((buffers_t *)ctx->user)[ctx->rank];
  const recap__device_ops_t *d = &recap__fake_ops;
  fill_sends(b, ctx->rank, ctx->nranks, 0);
  memset(&b->out.ring, 0x7f, sizeof b->out.ring);
  memset(&b->out.gather, 0x7f, sizeof b->out.gather);
  if (!try_call(ctx, d->stream_begin_capture(ctx->stream, RECAP__CAPTURE_MODE_RELAXED))) return;
  issue_all(ctx, b);
  recap_cuda_graph_t graph = NULL;
  if (!try_call(ctx, d->stream_end_capture(ctx->stream, &graph))) return;
  /* Nothing ran: the sentinel is there still. */
  if (b->out.ring[0] != 0x7f7f7f7f || b->out.gather[0][0] != 0x7f) {
    ctx->status = RECAP_ERROR_INTERNAL;
    snprintf(ctx->message, sizeof ctx->message, "a captured collective ran at capture");
    return;
  }
  recap_cuda_graph_exec_t exec = NULL;
  if (!try_call(ctx, d->graph_instantiate(&exec, graph))) return;
  for (int replay = 0; replay < 2; replay++) {
    /* Each replay reads the sends as they are then; salt them differently per replay. */
    fill_sends(b, ctx->rank, ctx->nranks, 100 * (replay + 1));
    if (!try_call(ctx, d->graph_launch(exec, ctx->stream))) return;
    /* Keep this replay's results for the main thread. */
    memcpy(&((buffers_t *)ctx->user)[MAX_RANKS + replay * MAX_RANKS + ctx->rank].out, &b->out,
           sizeof b->out);
  }
  try_call(ctx, d->graph_exec_destroy(exec));
  try_call(ctx, d->graph_destroy(graph));
}

static void captured_arithmetic(int n) {
  reset();
  static buffers_t bufs[3 * MAX_RANKS]; /* the live buffers, then each replay's results */
  memset(bufs, 0, sizeof bufs);
  rank_ctx_t ctx[MAX_RANKS];
  run_ranks(n, ctx, captured_body, bufs);
  expect_all_ok(n, ctx);
  check_results(n, &bufs[MAX_RANKS], 100);
  check_results(n, &bufs[2 * MAX_RANKS], 200);
  recap__fake_nccl_counters_t c = recap__fake_nccl_now();
  assert_int_equal(c.collectives, 2 * (uint64_t)n * COLLECTIVES_PER_RUN);
  assert_int_equal(c.sends, 2 * n);
  assert_int_equal(c.recvs, 2 * n);
  assert_int_equal(recap__fake_now().graph_launches, 2 * n);
}

CASE_TEST(captured_2_ranks, captured_arithmetic, 2)
CASE_TEST(captured_4_ranks, captured_arithmetic, 4)
CASE_TEST(captured_8_ranks, captured_arithmetic, 8)

/* A fresh fake, a communicator of one rank, and a stream for its collectives. */
static recap_stream_t one_rank(recap__nccl_comm_t *comm) {
  reset();
  OK(recap__fake_nccl_comms(1, comm));
  return recap__fake_stream_new();
}

/* The captured collective is a kernel node named as NCCL's kernels are ("nccl..."), whose
 * argument words start with the buffers. */
RECAP_TEST(captured_node_is_an_nccl_kernel) {
  recap__nccl_comm_t comm;
  recap_stream_t s = one_rank(&comm);
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  OK(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_RELAXED));
  recap__coll_t c = {RECAP__COLL_ALL_REDUCE, x, y, 4, FLOAT32, SUM, -1, -1, comm};
  OK(nccl->collective(&c, s));
  recap_cuda_graph_t graph = NULL;
  OK(ops->stream_end_capture(s, &graph));
  assert_true(y[0] == 0.0f);
  recap_graph_info_t info;
  memset(&info, 0, sizeof info);
  OK(ops->graph_inspect(graph, &info));
  assert_int_equal(info.node_count, 1);
  assert_int_equal(info.nodes[0].type, RECAP_NODE_KERNEL);
  assert_string_equal(info.nodes[0].kernel_name, "ncclDevKernel_AllReduce");
  recap__graph_info_clear(&info);
  const void *word = NULL;
  assert_true(recap__fake_graph_arg(graph, 0, 0, &word));
  assert_ptr_equal(word, x);
  assert_true(recap__fake_graph_arg(graph, 0, 1, &word));
  assert_ptr_equal(word, y);
  recap_cuda_graph_exec_t exec = NULL;
  OK(ops->graph_instantiate(&exec, graph));
  OK(ops->graph_launch(exec, s));
  assert_true(y[3] == 4.0f); /* one rank: the sum is its own */
  OK(ops->graph_exec_destroy(exec));
  OK(ops->graph_destroy(graph));
}

/* ---- mismatches and timeouts ------------------------------------------------------------- */

static void mismatch_body(rank_ctx_t *ctx) {
  float *buf = (float *)ctx->user + ctx->rank * 64;
  bool captured = ((int *)((char *)ctx->user + 8 * 64 * sizeof(float)))[0];
  recap__coll_t ok = {RECAP__COLL_ALL_REDUCE, buf, buf, 16, FLOAT32, SUM, -1, -1, ctx->comm};
  recap__coll_t c =
      ctx->rank == 0
          ? (recap__coll_t){RECAP__COLL_ALL_REDUCE,
                            buf,
                            buf + 32,
                            16,
                            FLOAT32,
                            SUM,
                            -1,
                            -1,
                            ctx->comm}
          : (recap__coll_t){
                RECAP__COLL_ALL_GATHER, buf, buf + 16, 16, FLOAT32, 0, -1, -1, ctx->comm};
  if (!captured) {
    if (!try_call(ctx, nccl->collective(&ok, ctx->stream))) return;
    try_call(ctx, nccl->collective(&c, ctx->stream));
    return;
  }
  const recap__device_ops_t *d = &recap__fake_ops;
  recap_cuda_graph_t graph = NULL;
  recap_cuda_graph_exec_t exec = NULL;
  if (!try_call(ctx, d->stream_begin_capture(ctx->stream, RECAP__CAPTURE_MODE_RELAXED)) ||
      !try_call(ctx, nccl->collective(&ok, ctx->stream)) ||
      !try_call(ctx, nccl->collective(&c, ctx->stream)) ||
      !try_call(ctx, d->stream_end_capture(ctx->stream, &graph)) ||
      !try_call(ctx, d->graph_instantiate(&exec, graph)))
    return;
  try_call(ctx, d->graph_launch(exec, ctx->stream));
}

static void mismatch(bool captured) {
  reset();
  static float data[8 * 64 + 8];
  memset(data, 0, sizeof data);
  ((int *)(data + 8 * 64))[0] = captured;
  rank_ctx_t ctx[2];
  run_ranks(2, ctx, mismatch_body, data);
  const char *want =
      "fake NCCL: collective 1 differs across ranks: rank 0's is all_reduce of 16 float32 sum; "
      "rank 1's is all_gather of 16 float32";
  for (int r = 0; r < 2; r++) {
    assert_int_equal(ctx[r].status, RECAP_ERROR_INVALID_USAGE);
    if (!strstr(ctx[r].message, want)) fail_msg("rank %d: %s", r, ctx[r].message);
    const char *where = captured ? "cudaGraphLaunch: kernel node 1 (ncclDevKernel_" : "ncclAll";
    if (strncmp(ctx[r].message, where, strlen(where)) != 0)
      fail_msg("rank %d: %s", r, ctx[r].message);
  }
  assert_int_equal(recap__fake_nccl_now().collectives, 2); /* the first one, on each rank */
  assert_int_equal(recap__fake_nccl_now().failures, 2);
}

CASE_TEST(mismatch_eager, mismatch, false)
CASE_TEST(mismatch_replayed, mismatch, true)

/* Ranks that never arrive: the waiting ones fail after the timeout, naming what they waited
 * for and who never came. */
static void timeout_body(rank_ctx_t *ctx) {
  double x[4] = {1, 2, 3, 4};
  if (ctx->rank == 1) return;
  if (ctx->rank == 2) {
    recap__coll_t v = {RECAP__COLL_RECV, NULL, x, 4, FLOAT64, 0, 1, -1, ctx->comm};
    try_call(ctx, nccl->collective(&v, ctx->stream));
    return;
  }
  recap__coll_t c = {RECAP__COLL_BROADCAST, x, x, 4, FLOAT64, 0, -1, 1, ctx->comm};
  try_call(ctx, nccl->collective(&c, ctx->stream));
  recap__coll_t v = {RECAP__COLL_RECV, NULL, x, 4, FLOAT64, 0, 2, -1, ctx->comm};
  recap_status_t first = ctx->status;
  ctx->status = RECAP_SUCCESS;
  char kept[1024];
  snprintf(kept, sizeof kept, "%s", ctx->message);
  try_call(ctx, nccl->collective(&v, ctx->stream));
  /* Both messages, joined for the main thread. */
  char both[sizeof ctx->message];
  snprintf(both, sizeof both, "%.500s | %.500s", kept, ctx->message);
  memcpy(ctx->message, both, sizeof both);
  if (first != RECAP_SUCCESS) ctx->status = first;
}

RECAP_TEST(timeout_is_reported) {
  reset();
  recap__fake_nccl_timeout_ms(100);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  rank_ctx_t ctx[3];
  run_ranks(3, ctx, timeout_body, NULL);
  double ms = elapsed_ms(&t0);
  assert_true(ms >= 190.0 && ms < 3000.0);
  assert_int_equal(ctx[0].status, RECAP_ERROR_INTERNAL);
  const char *wants[] = {
      "ncclBroadcast: fake NCCL: rank 0 waited 100 ms for collective 0 (broadcast of 4 float64 "
      "from root 1); ranks 1, 2 never reached it",
      "ncclRecv: fake NCCL: rank 0 waited 100 ms for a message from rank 2 (recv of 4 float64); "
      "rank 2 never sent it"};
  for (int i = 0; i < 2; i++)
    if (!strstr(ctx[0].message, wants[i])) fail_msg("%s lacks %s", ctx[0].message, wants[i]);
  assert_int_equal(ctx[2].status, RECAP_ERROR_INTERNAL);
  assert_string_equal(ctx[2].message,
                      "ncclRecv: fake NCCL: rank 2 waited 100 ms for a message from rank 1 (recv "
                      "of 4 float64); rank 1 never sent it");
  assert_int_equal(recap__fake_nccl_now().waiting, 0);
  assert_int_equal(recap__fake_nccl_now().failures, 3);
  /* A single rank missing is named alone. */
  reset();
  recap__fake_nccl_timeout_ms(50);
  recap__nccl_comm_t comms[2];
  OK(recap__fake_nccl_comms(2, comms));
  int32_t y[1] = {1};
  recap__coll_t c = {RECAP__COLL_REDUCE, y, y, 1, INT32, MAX, -1, 0, comms[0]};
  EXPECT_STATUS(nccl->collective(&c, recap__fake_stream_new()), RECAP_ERROR_INTERNAL);
  EXPECT_MESSAGE(
      "rank 0 waited 50 ms for collective 0 (reduce of 1 int32 max to root 0); rank 1 "
      "never reached it");
  /* The reset restores the default: 5 s. */
  reset();
  assert_int_equal(recap__fake_nccl_now().failures, 0);
}

/* A receive whose send disagrees fails naming both. */
static void p2p_mismatch_body(rank_ctx_t *ctx) {
  int64_t x[8] = {0};
  recap__coll_t c = ctx->rank == 0
                        ? (recap__coll_t){RECAP__COLL_SEND, x, NULL, 8, INT64, 0, 1, -1, ctx->comm}
                        : (recap__coll_t){RECAP__COLL_RECV, NULL, x, 4, INT64, 0, 0, -1, ctx->comm};
  try_call(ctx, nccl->collective(&c, ctx->stream));
}

RECAP_TEST(p2p_mismatch) {
  reset();
  rank_ctx_t ctx[2];
  run_ranks(2, ctx, p2p_mismatch_body, NULL);
  assert_int_equal(ctx[0].status, RECAP_SUCCESS);
  assert_int_equal(ctx[1].status, RECAP_ERROR_INVALID_USAGE);
  assert_non_null(strstr(ctx[1].message,
                         "ncclRecv: fake NCCL: rank 0's send to rank 1 is 8 int64; rank 1's recv "
                         "from rank 0 is 4 int64"));
}

/* ---- one communicator on two streams ------------------------------------------------------ */

typedef struct concurrent {
  recap__nccl_comm_t comms[2];
  recap_stream_t s1, s2, s_peer;
  float a[4], b[4], peer[4];
  recap_cuda_graph_exec_t exec1, exec2, exec_peer;
  bool graphs;
  rank_ctx_t first, second, other;
} concurrent_t;

static void *first_main(void *arg) {
  concurrent_t *t = arg;
  recap__coll_t c = {RECAP__COLL_ALL_REDUCE, t->a, t->a, 4, FLOAT32, SUM, -1, -1, t->comms[0]};
  if (t->graphs)
    try_call(&t->first, recap__fake_ops.graph_launch(t->exec1, t->s1));
  else
    try_call(&t->first, nccl->collective(&c, t->s1));
  return NULL;
}

static void wait_for_waiters(int64_t n) {
  for (int i = 0; i < 5000 && recap__fake_nccl_now().waiting != n; i++) usleep(1000);
  assert_int_equal(recap__fake_nccl_now().waiting, n);
}

static recap_cuda_graph_exec_t capture_all_reduce(recap_stream_t s, float *x,
                                                  recap__nccl_comm_t comm) {
  OK(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_RELAXED));
  recap__coll_t c = {RECAP__COLL_ALL_REDUCE, x, x, 4, FLOAT32, SUM, -1, -1, comm};
  OK(nccl->collective(&c, s));
  recap_cuda_graph_t g = NULL;
  OK(ops->stream_end_capture(s, &g));
  recap_cuda_graph_exec_t exec = NULL;
  OK(ops->graph_instantiate(&exec, g));
  return exec;
}

static void concurrent_use(bool graphs) {
  reset();
  static concurrent_t t;
  memset(&t, 0, sizeof t);
  t.graphs = graphs;
  OK(recap__fake_nccl_comms(2, t.comms));
  t.s1 = recap__fake_stream_new();
  t.s2 = recap__fake_stream_new();
  t.s_peer = recap__fake_stream_new();
  for (int i = 0; i < 4; i++) t.a[i] = t.b[i] = t.peer[i] = (float)(i + 1);
  if (graphs) {
    t.exec1 = capture_all_reduce(t.s1, t.a, t.comms[0]);
    t.exec2 = capture_all_reduce(t.s2, t.b, t.comms[0]);
    t.exec_peer = capture_all_reduce(t.s_peer, t.peer, t.comms[1]);
  }
  /* Rank 0's first collective waits for rank 1; its second, on another stream, starts then. */
  pthread_t first;
  assert_int_equal(pthread_create(&first, NULL, first_main, &t), 0);
  wait_for_waiters(1);
  recap__coll_t c = {RECAP__COLL_ALL_REDUCE, t.b, t.b, 4, FLOAT32, SUM, -1, -1, t.comms[0]};
  recap_status_t st = graphs ? ops->graph_launch(t.exec2, t.s2) : nccl->collective(&c, t.s2);
  assert_int_equal(st, RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE(
      "fake NCCL: concurrent use of a communicator on two streams: rank 0's "
      "communicator");
  EXPECT_MESSAGE("began all_reduce of 4 float32 sum on stream");
  EXPECT_MESSAGE("while its collective 0 still runs on stream");
  EXPECT_MESSAGE_POINTER(t.s1);
  EXPECT_MESSAGE_POINTER(t.s2);
  if (graphs) EXPECT_MESSAGE("cudaGraphLaunch: kernel node 0 (ncclDevKernel_AllReduce): ");
  /* The one waiting goes on: rank 1 arrives, both complete, t.b untouched. */
  recap__coll_t p = {RECAP__COLL_ALL_REDUCE, t.peer, t.peer, 4, FLOAT32, SUM, -1, -1, t.comms[1]};
  OK(graphs ? ops->graph_launch(t.exec_peer, t.s_peer) : nccl->collective(&p, t.s_peer));
  assert_int_equal(pthread_join(first, NULL), 0);
  assert_int_equal(t.first.status, RECAP_SUCCESS);
  for (int i = 0; i < 4; i++) {
    assert_true(t.a[i] == 2.0f * (float)(i + 1));
    assert_true(t.peer[i] == 2.0f * (float)(i + 1));
    assert_true(t.b[i] == (float)(i + 1));
  }
  /* Afterwards the communicator is free: the second stream may use it (rank 1 on a thread). */
  assert_int_equal(recap__fake_nccl_now().failures, 1);
}

CASE_TEST(concurrent_use_eager, concurrent_use, false)
CASE_TEST(concurrent_use_replayed, concurrent_use, true)

/* The same communicator on one stream from one thread, then on another stream, is fine. */
RECAP_TEST(sequential_streams_are_fine) {
  recap__nccl_comm_t comm;
  recap_stream_t s = one_rank(&comm);
  int32_t x[2] = {3, 4};
  recap__coll_t c = {RECAP__COLL_ALL_REDUCE, x, x, 2, INT32, PROD, -1, -1, comm};
  OK(nccl->collective(&c, s));
  OK(nccl->collective(&c, recap__fake_stream_new()));
  OK(nccl->collective(&c, NULL)); /* the legacy stream */
  assert_int_equal(x[0], 3);
  assert_int_equal(recap__fake_nccl_now().collectives, 3);
}

/* ---- the rest of the table ---------------------------------------------------------------- */

RECAP_TEST(load_version_and_faults) {
  reset();
  int version = -1;
  OK(nccl->load(&version));
  assert_int_equal(version, 23203);
  recap__fake_nccl_version(23003);
  OK(nccl->load(&version));
  assert_int_equal(version, 23003);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_NCCL_LOAD, 1);
  EXPECT_STATUS(nccl->load(&version), RECAP_ERROR_NOT_FOUND);
  assert_int_equal(version, 0);
  EXPECT_MESSAGE("NCCL: could not load libnccl.so.2");
  EXPECT_MESSAGE("fault injected by the fake NCCL into load call 3");
  OK(nccl->load(&version));
  assert_int_equal(recap__fake_nccl_now().loads, 3);
  /* The reset restores the version and installs the table. */
  recap__nccl_install(NULL);
  reset();
  assert_ptr_equal(recap__nccl(), &recap__fake_nccl_ops);
  assert_string_equal(recap__nccl()->name, "fake");
  OK(recap__nccl()->load(&version));
  assert_int_equal(version, 23203);
}

RECAP_TEST(collective_fault_enqueues_nothing) {
  recap__nccl_comm_t comm;
  recap_stream_t s = one_rank(&comm);
  double x[2] = {1, 2}, y[2] = {0, 0};
  recap__coll_t c = {RECAP__COLL_ALL_GATHER, x, y, 2, FLOAT64, 0, -1, -1, comm};
  recap__fake_fail_nth(RECAP__FAKE_FAULT_NCCL_COLLECTIVE, 2);
  OK(nccl->collective(&c, s));
  x[0] = 5;
  EXPECT_STATUS(nccl->collective(&c, s), RECAP_ERROR_INTERNAL);
  EXPECT_MESSAGE(
      "ncclAllGather: unhandled system error (ncclSystemError): fault injected by the "
      "fake NCCL into collective call 2");
  assert_true(y[0] == 1.0); /* not run */
  assert_int_equal(recap__fake_nccl_now().collectives, 1);
  OK(nccl->collective(&c, s));
  assert_true(y[0] == 5.0);
  /* In a capture the fault adds no node. */
  OK(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_RELAXED));
  recap__fake_fail_nth(RECAP__FAKE_FAULT_NCCL_COLLECTIVE, 1);
  EXPECT_STATUS(nccl->collective(&c, s), RECAP_ERROR_INTERNAL);
  recap_cuda_graph_t g = NULL;
  OK(ops->stream_end_capture(s, &g));
  size_t nodes = 99;
  OK(ops->graph_node_count(g, &nodes));
  assert_int_equal(nodes, 0);
  OK(ops->graph_destroy(g));
}

RECAP_TEST(memory_and_registration) {
  reset();
  recap__nccl_comm_t comms[2];
  OK(recap__fake_nccl_comms(2, comms));
  void *p = NULL, *q = NULL;
  OK(nccl->mem_alloc(&p, 1000));
  OK(nccl->mem_alloc(&q, 24));
  assert_int_equal((uintptr_t)p % 512, 0);
  memset(p, 1, 1000);
  recap__fake_nccl_counters_t c = recap__fake_nccl_now();
  assert_int_equal(c.mem_live, 2);
  assert_int_equal(c.mem_bytes, 1024);
  assert_int_equal(c.mem_allocs, 2);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_NCCL_MEM_ALLOC, 1);
  void *r = &r;
  EXPECT_STATUS(nccl->mem_alloc(&r, 8), RECAP_ERROR_OUT_OF_MEMORY);
  assert_null(r);
  EXPECT_MESSAGE(
      "ncclMemAlloc: unhandled system error (ncclSystemError): fault injected by the "
      "fake NCCL into mem_alloc call 3 (8 bytes)");
  assert_int_equal(recap__fake_nccl_now().mem_live, 2);

  void *h = NULL, *h2 = NULL;
  OK(nccl->comm_register(comms[0], p, 1000, &h));
  assert_non_null(h);
  OK(nccl->comm_register(comms[1], p, 1000, &h2));
  c = recap__fake_nccl_now();
  assert_int_equal(c.registered_live, 2);
  assert_int_equal(c.registered_bytes, 2000);
  assert_int_equal(c.registers, 2);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_NCCL_REGISTER, 1);
  void *h3 = &h3;
  EXPECT_STATUS(nccl->comm_register(comms[0], q, 24, &h3), RECAP_ERROR_INTERNAL);
  assert_null(h3);
  EXPECT_MESSAGE("ncclCommRegister: unhandled system error (ncclSystemError): fault injected");
  assert_int_equal(recap__fake_nccl_now().registered_live, 2);
  /* A handle deregistered from the wrong communicator is refused and stays registered. */
  EXPECT_STATUS(nccl->comm_deregister(comms[1], h), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("ncclCommDeregister: invalid argument (ncclInvalidArgument)");
  EXPECT_MESSAGE_POINTER(h);
  OK(nccl->comm_deregister(comms[0], h));
  OK(nccl->comm_deregister(comms[1], h2));
  EXPECT_STATUS(nccl->comm_deregister(comms[0], h), RECAP_ERROR_INVALID_ARGUMENT);
  c = recap__fake_nccl_now();
  assert_int_equal(c.registered_live, 0);
  assert_int_equal(c.deregisters, 2);

  OK(nccl->mem_free(p));
  EXPECT_STATUS(nccl->mem_free(p), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("was not handed out by ncclMemAlloc of the fake NCCL");
  OK(nccl->mem_free(NULL));
  c = recap__fake_nccl_now();
  assert_int_equal(c.mem_live, 1);
  assert_int_equal(c.mem_bytes, 24);
  assert_int_equal(c.mem_frees, 1);
  /* The reset frees what is left. */
  reset();
  assert_int_equal(recap__fake_nccl_now().mem_live, 0);
}

RECAP_TEST(comm_info_groups_and_bad_arguments) {
  recap__fake_config_t cfg = {.device_count = 2};
  recap__fake_reset(&cfg);
  recap__nccl_comm_t comms[3];
  OK(recap__fake_nccl_comms(3, comms));
  int rank = -1, nranks = -1, device = -1;
  OK(nccl->comm_info(comms[2], &rank, &nranks, &device));
  assert_int_equal(rank, 2);
  assert_int_equal(nranks, 3);
  assert_int_equal(device, 0); /* rank % device count */
  OK(nccl->comm_info(comms[1], NULL, NULL, &device));
  assert_int_equal(device, 1);
  int bogus;
  EXPECT_STATUS(nccl->comm_info((recap__nccl_comm_t)&bogus, &rank, NULL, NULL),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("is not a live fake communicator");

  OK(nccl->group_start());
  OK(nccl->group_start());
  OK(nccl->group_end());
  OK(nccl->group_end());
  EXPECT_STATUS(nccl->group_end(), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("ncclGroupEnd: invalid usage (ncclInvalidUsage): no ncclGroupStart");

  recap_stream_t s = recap__fake_stream_new();
  float x[4] = {0};
  recap__coll_t c = {RECAP__COLL_BROADCAST, x, x, 4, FLOAT32, 0, -1, 3, comms[0]};
  EXPECT_STATUS(nccl->collective(&c, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("ncclBroadcast: invalid argument (ncclInvalidArgument): root 3 is not a rank");
  c = (recap__coll_t){RECAP__COLL_SEND, x, NULL, 4, FLOAT32, 0, -1, -1, comms[0]};
  EXPECT_STATUS(nccl->collective(&c, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("ncclSend: invalid argument (ncclInvalidArgument): peer -1 is not a rank");
  c = (recap__coll_t){RECAP__COLL_ALL_REDUCE, x, x, 4, 12, SUM, -1, -1, comms[0]};
  EXPECT_STATUS(nccl->collective(&c, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("dtype 12 is not an ncclDataType_t");
  c = (recap__coll_t){RECAP__COLL_ALL_REDUCE, x, x, 4, FLOAT32, 5, -1, -1, comms[0]};
  EXPECT_STATUS(nccl->collective(&c, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("op 5 is not an ncclRedOp_t");
  c = (recap__coll_t){RECAP__COLL_ALL_REDUCE, x, x, 4, FLOAT16, SUM, -1, -1, comms[0]};
  EXPECT_STATUS(nccl->collective(&c, s), RECAP_ERROR_NOT_SUPPORTED);
  EXPECT_MESSAGE("the fake NCCL does not reduce float16");
  c = (recap__coll_t){RECAP__COLL_ALL_REDUCE, NULL, x, 4, FLOAT32, SUM, -1, -1, comms[0]};
  EXPECT_STATUS(nccl->collective(&c, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("a buffer is NULL with count 4");
  c = (recap__coll_t){RECAP__COLL_ALL_REDUCE, x, x, 4, FLOAT32, SUM, -1, -1, comms[0]};
  EXPECT_STATUS(nccl->collective(&c, (recap_stream_t)&bogus), RECAP_ERROR_CUDA);
  EXPECT_STATUS(recap__fake_nccl_comms(0, comms), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap__fake_nccl_comms(65, comms), RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_NCCL_COLLECTIVE], 1);
  /* No work was enqueued by any of them; a reset forgets the cliques. */
  reset();
  EXPECT_STATUS(nccl->comm_info(comms[0], &rank, NULL, NULL), RECAP_ERROR_INVALID_ARGUMENT);
}

/* Moving any dtype: all_gather of float16 (2 bytes) with the send inside the receive (NCCL's
 * in-place all_gather). */
static void in_place_all_gather_body(rank_ctx_t *ctx) {
  uint16_t *buf = (uint16_t *)ctx->user + ctx->rank * 8; /* 4 ranks x 2 elements each */
  uint16_t *send = buf + ctx->rank * 2;
  send[0] = (uint16_t)(0x100 * ctx->rank + 1);
  send[1] = (uint16_t)(0x100 * ctx->rank + 2);
  recap__coll_t c = {RECAP__COLL_ALL_GATHER, send, buf, 2, FLOAT16, 0, -1, -1, ctx->comm};
  try_call(ctx, nccl->collective(&c, ctx->stream));
}

RECAP_TEST(in_place_all_gather) {
  reset();
  static uint16_t data[4 * 8];
  memset(data, 0, sizeof data);
  rank_ctx_t ctx[4];
  run_ranks(4, ctx, in_place_all_gather_body, data);
  expect_all_ok(4, ctx);
  for (int r = 0; r < 4; r++)
    for (int q = 0; q < 4; q++) {
      assert_int_equal(data[r * 8 + q * 2], 0x100 * q + 1);
      assert_int_equal(data[r * 8 + q * 2 + 1], 0x100 * q + 2);
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(eager_2_ranks),
    cmocka_unit_test(eager_4_ranks),
    cmocka_unit_test(eager_8_ranks),
    cmocka_unit_test(captured_2_ranks),
    cmocka_unit_test(captured_4_ranks),
    cmocka_unit_test(captured_8_ranks),
    cmocka_unit_test(captured_node_is_an_nccl_kernel),
    cmocka_unit_test(mismatch_eager),
    cmocka_unit_test(mismatch_replayed),
    cmocka_unit_test(timeout_is_reported),
    cmocka_unit_test(p2p_mismatch),
    cmocka_unit_test(concurrent_use_eager),
    cmocka_unit_test(concurrent_use_replayed),
    cmocka_unit_test(sequential_streams_are_fine),
    cmocka_unit_test(load_version_and_faults),
    cmocka_unit_test(collective_fault_enqueues_nothing),
    cmocka_unit_test(memory_and_registration),
    cmocka_unit_test(comm_info_groups_and_bad_arguments),
    cmocka_unit_test(in_place_all_gather),
};
RECAP_TEST_MAIN(tests)
