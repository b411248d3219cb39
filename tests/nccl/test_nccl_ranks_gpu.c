/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_nccl_ranks_gpu.c — the NCCL layer (recap/nccl.h) on every GPU of the machine (2 to 8),
 * one communicator and one thread per GPU: collectives captured by every rank pass the check
 * and replay with exact results; a count that differs on one rank is named by every rank's
 * check, which does not hang; a direct NCCL call inside a region's body is refused at the
 * region's end by its kernel's name, and the wrapper at once; two graphs sharing a communicator,
 * replayed on two streams, are ordered under RECAP_NCCL_SERIALIZE, and an overlap is refused
 * under RECAP_NCCL_REFUSE_OVERLAP.
 *
 * tests/nccl/test_nccl_ranks.c asserts the same guard rails on the CPU fake; this program runs them
 * on real NCCL, whose ranks wait for each other on the GPUs. The communicators come from
 * ncclCommInitAll, opened with dlopen from the library the seam loads (RECAP_NCCL_LIBRARY, else
 * libnccl.so.2): nothing links NCCL. Exits 77 (skipped) with fewer than 2 GPUs, without the
 * library, or when recap was built without NCCL's headers. tools/multi-gpu-check runs it.
 *
 * cmocka's checks are not thread safe: each rank's thread records its first failure as a
 * message, and the main thread fails with it after the join.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/nccl_seam.h"
#include "gpu_util.h"
#include "harness.h"
#include "nccl_util.h"
#include "recap.h"

enum { MAX_RANKS = 8, N = 1 << 16, ROUNDS = 20 };

/* NCCL's functions, fetched with dlsym (ncclResult_t, ncclDataType_t and ncclRedOp_t are
 * ints; recap's dtype and op enums have NCCL's numbering). */
typedef int (*comm_init_all_fn)(recap__nccl_comm_t *comms, int ndev, const int *devlist);
typedef int (*comm_destroy_fn)(recap__nccl_comm_t comm);
typedef int (*all_reduce_fn)(const void *send, void *recv, size_t count, int dtype, int op,
                             recap__nccl_comm_t comm, cudaStream_t stream);
typedef const char *(*error_string_fn)(int result);

static void *library;
static comm_destroy_fn comm_destroy;
static all_reduce_fn nccl_all_reduce;
static error_string_fn nccl_error_string;

/* ------------------------------------------------------------------------------------------
 * Ranks as threads
 * ---------------------------------------------------------------------------------------- */

/* A barrier that a failing rank can open for good: the other ranks then stop at their next
 * wait instead of waiting forever for it (a rank stuck in a collective on its GPU is left to
 * ctest's timeout). */
typedef struct gate {
  pthread_mutex_t lock;
  pthread_cond_t moved;
  int parties, waiting;
  unsigned long generation;
  bool aborted;
} gate_t;

static void gate_init(gate_t *g, int parties) {
  memset(g, 0, sizeof *g);
  pthread_mutex_init(&g->lock, NULL);
  pthread_cond_init(&g->moved, NULL);
  g->parties = parties;
}

static void gate_destroy(gate_t *g) {
  pthread_cond_destroy(&g->moved);
  pthread_mutex_destroy(&g->lock);
}

/* Wait until every rank arrived: true, or false once some rank failed. */
static bool gate_wait(gate_t *g) {
  pthread_mutex_lock(&g->lock);
  unsigned long generation = g->generation;
  if (!g->aborted && ++g->waiting == g->parties) {
    g->waiting = 0;
    g->generation++;
    pthread_cond_broadcast(&g->moved);
  }
  while (!g->aborted && generation == g->generation) pthread_cond_wait(&g->moved, &g->lock);
  bool passed = generation != g->generation;
  pthread_mutex_unlock(&g->lock);
  return passed;
}

static void gate_abort(gate_t *g) {
  pthread_mutex_lock(&g->lock);
  g->aborted = true;
  pthread_cond_broadcast(&g->moved);
  pthread_mutex_unlock(&g->lock);
}

typedef struct clique clique_t;

typedef struct rank_ctx {
  clique_t *clique;
  int rank, nranks;
  recap__nccl_comm_t comm;
  char failure[2048]; /* the rank's first failure, or "" */
  char message[2048]; /* what a scenario keeps for the main thread to check */
} rank_ctx_t;

struct clique {
  int nranks;
  recap__nccl_comm_t comms[MAX_RANKS];
  rank_ctx_t ranks[MAX_RANKS];
  gate_t gate;
  bool overlap_launched; /* serialized_across_streams: rank 0's refused replay launched */
};

static void rank_fail(rank_ctx_t *ctx, const char *format, ...) {
  if (!ctx->failure[0]) {
    int used = snprintf(ctx->failure, sizeof ctx->failure, "rank %d: ", ctx->rank);
    va_list args;
    va_start(args, format);
    vsnprintf(ctx->failure + used, sizeof ctx->failure - (size_t)used, format, args);
    va_end(args);
  }
  gate_abort(&ctx->clique->gate);
}

/* A rank's checks: on failure, record it, open the gate, and leave for the cleanup at `out`. */
#define T_OK(ctx, expr)                                                                           \
  do {                                                                                            \
    recap_status_t t_s_ = (expr);                                                                 \
    if (t_s_ != RECAP_SUCCESS) {                                                                  \
      rank_fail((ctx), "%s returned %s: %s", #expr, recap_status_name(t_s_), recap_last_error()); \
      goto out;                                                                                   \
    }                                                                                             \
  } while (0)
#define T_STATUS(ctx, expr, expected)                                                     \
  do {                                                                                    \
    recap_status_t t_s_ = (expr);                                                         \
    if (t_s_ != (expected)) {                                                             \
      rank_fail((ctx), "%s returned %s, expected %s: %s", #expr, recap_status_name(t_s_), \
                recap_status_name(expected), recap_last_error());                         \
      goto out;                                                                           \
    }                                                                                     \
  } while (0)
#define T_MESSAGE(ctx, needle)                                                 \
  do {                                                                         \
    if (!strstr(recap_last_error(), (needle))) {                               \
      rank_fail((ctx), "the last error does not mention \"%s\": %s", (needle), \
                recap_last_error());                                           \
      goto out;                                                                \
    }                                                                          \
  } while (0)
#define T_CUDA(ctx, expr)                                                   \
  do {                                                                      \
    cudaError_t t_e_ = (expr);                                              \
    if (t_e_ != cudaSuccess) {                                              \
      rank_fail((ctx), "%s failed: %s (%s)", #expr, cudaGetErrorName(t_e_), \
                cudaGetErrorString(t_e_));                                  \
      goto out;                                                             \
    }                                                                       \
  } while (0)
/* In the cleanup after `out`: record a failure and go on. */
#define T_CLEAN(ctx, expr)                                                                        \
  do {                                                                                            \
    recap_status_t t_s_ = (expr);                                                                 \
    if (t_s_ != RECAP_SUCCESS)                                                                    \
      rank_fail((ctx), "%s returned %s: %s", #expr, recap_status_name(t_s_), recap_last_error()); \
  } while (0)
#define T_GATE(ctx)                                 \
  do {                                              \
    if (!gate_wait(&(ctx)->clique->gate)) goto out; \
  } while (0)

/* The GPUs this program uses: all of them, at most MAX_RANKS. */
static int gpu_count(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  (void)cudaGetLastError();
  return count < MAX_RANKS ? count : MAX_RANKS;
}

/* Open NCCL as the seam does and make one communicator per GPU, rank r on device r. */
static void clique_open(clique_t *c) {
  memset(c, 0, sizeof *c);
  c->nranks = gpu_count();
  assert_true(c->nranks >= 2);
  library = gpu_nccl_open();
  comm_init_all_fn init_all;
  gpu_nccl_take(library, "ncclCommInitAll", &init_all, sizeof init_all);
  gpu_nccl_take(library, "ncclCommDestroy", &comm_destroy, sizeof comm_destroy);
  gpu_nccl_take(library, "ncclAllReduce", &nccl_all_reduce, sizeof nccl_all_reduce);
  gpu_nccl_take(library, "ncclGetErrorString", &nccl_error_string, sizeof nccl_error_string);
  int result = init_all(c->comms, c->nranks, NULL);
  if (result != 0) fail_msg("ncclCommInitAll(%d GPUs): %s", c->nranks, nccl_error_string(result));
  gate_init(&c->gate, c->nranks);
  printf("%d ranks, one per GPU\n", c->nranks);
}

/* Run body on one thread per rank, then fail with the first rank's failure, if any. */
static void clique_run(clique_t *c, void *(*body)(void *)) {
  pthread_t threads[MAX_RANKS];
  for (int r = 0; r < c->nranks; r++) {
    rank_ctx_t *ctx = &c->ranks[r];
    memset(ctx, 0, sizeof *ctx);
    ctx->clique = c;
    ctx->rank = r;
    ctx->nranks = c->nranks;
    ctx->comm = c->comms[r];
  }
  for (int r = 0; r < c->nranks; r++)
    assert_int_equal(pthread_create(&threads[r], NULL, body, &c->ranks[r]), 0);
  for (int r = 0; r < c->nranks; r++) assert_int_equal(pthread_join(threads[r], NULL), 0);
  for (int r = 0; r < c->nranks; r++)
    if (c->ranks[r].failure[0]) fail_msg("%s", c->ranks[r].failure);
}

/* Every rank's work has finished: give the cached memory back on every device, then destroy
 * the communicators (NCCL's own example destroys those of ncclCommInitAll in a loop). */
static void clique_close(clique_t *c) {
  for (int r = 0; r < c->nranks; r++) {
    CUDA_OK(cudaSetDevice(r));
    CUDA_OK(cudaDeviceSynchronize());
  }
  CUDA_OK(cudaSetDevice(0));
  OK(recap_empty_cache());
  gpu_check_allocator();
  for (int r = 0; r < c->nranks; r++) {
    int result = comm_destroy(c->comms[r]);
    if (result != 0) fail_msg("ncclCommDestroy(rank %d): %s", r, nccl_error_string(result));
  }
  gate_destroy(&c->gate);
  dlclose(library);
  library = NULL;
}

/* The start of every rank: its GPU, a stream of its own, and eager all-reduces, during which
 * NCCL sets up the communicator's buffers (all ranks call them at once, as collectives). */
static bool rank_begin(rank_ctx_t *ctx, cudaStream_t *stream, float **scratch) {
  T_CUDA(ctx, cudaSetDevice(ctx->rank));
  T_CUDA(ctx, cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking));
  T_OK(ctx, recap_malloc((void **)scratch, N * sizeof(float), (recap_stream_t)*stream));
  /* Both sizes the scenarios capture, so that whatever algorithm NCCL picks for each is
   * connected before any capture. */
  T_OK(ctx, recap_nccl_all_reduce(*scratch, *scratch, N, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM,
                                  ctx->comm, (recap_stream_t)*stream));
  T_OK(ctx, recap_nccl_all_reduce(*scratch, *scratch, N / 2, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM,
                                  ctx->comm, (recap_stream_t)*stream));
  T_CUDA(ctx, cudaStreamSynchronize(*stream));
  return true;
out:
  return false;
}

/* Copy n floats of host to the device buffer dst on stream (from pageable memory: staged at
 * once, so host may change when this returns). */
static bool upload(rank_ctx_t *ctx, float *dst, const float *host, size_t n, cudaStream_t stream) {
  T_CUDA(ctx, cudaMemcpyAsync(dst, host, n * sizeof *host, cudaMemcpyHostToDevice, stream));
  return true;
out:
  return false;
}

/* Copy n floats of src to host on stream, and wait for them. */
static bool download(rank_ctx_t *ctx, float *host, const float *src, size_t n,
                     cudaStream_t stream) {
  T_CUDA(ctx, cudaMemcpyAsync(host, src, n * sizeof *host, cudaMemcpyDeviceToHost, stream));
  T_CUDA(ctx, cudaStreamSynchronize(stream));
  return true;
out:
  return false;
}

/* host[i] must be base + scale (i % 1000) for every i < n (values far below 2^24: exact in
 * float). */
static bool expect_affine(rank_ctx_t *ctx, const float *host, size_t n, float base, float scale,
                          const char *what) {
  for (size_t i = 0; i < n; i++) {
    float want = base + scale * (float)(i % 1000);
    if (host[i] != want) {
      rank_fail(ctx, "%s[%zu] = %g, expected %g", what, i, (double)host[i], (double)want);
      return false;
    }
  }
  return true;
}

static void fill_pattern(float *host, size_t n, float base) {
  for (size_t i = 0; i < n; i++) host[i] = base + (float)(i % 1000);
}

static void expect_in(rank_ctx_t *ctx, const char *text, const char *needle) {
  if (!strstr(text, needle)) rank_fail(ctx, "\"%s\" not in: %s", needle, text);
}

/* The start of the scenarios of one graph and one buffer: rank_begin, a buffer a of N floats,
 * and a capture begun on a fresh graph (thread-local, regions on the device if asked). */
static bool rank_begin_capture(rank_ctx_t *ctx, cudaStream_t *s, float **scratch, float **a,
                               recap_graph_t *g, bool device_regions) {
  if (!rank_begin(ctx, s, scratch)) return false;
  recap_stream_t rs = (recap_stream_t)*s;
  T_OK(ctx, recap_malloc((void **)a, N * sizeof(float), rs));
  T_OK(ctx, recap_graph_create(g, 0));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.mode = RECAP_CAPTURE_MODE_THREAD_LOCAL;
  if (device_regions) o.regions = RECAP_REGIONS_DEVICE;
  T_OK(ctx, recap_graph_capture_begin(*g, &o, rs));
  return true;
out:
  return false;
}

/* The communicator is still usable: one more eager all-reduce on every rank, waited for. */
static bool eager_all_reduce(rank_ctx_t *ctx, float *scratch, cudaStream_t s) {
  T_OK(ctx, recap_nccl_all_reduce(scratch, scratch, N, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM,
                                  ctx->comm, (recap_stream_t)s));
  T_CUDA(ctx, cudaStreamSynchronize(s));
  return true;
out:
  return false;
}

/* The cleanup after `out` of every rank: its streams waited for, its graphs destroyed, its
 * buffers (the NULLs skipped) freed, its streams destroyed. */
static void rank_release(rank_ctx_t *ctx, cudaStream_t *streams, size_t nstreams,
                         recap_graph_t *graphs, size_t ngraphs, float *const *buffers,
                         size_t nbuffers) {
  for (size_t i = 0; i < nstreams; i++)
    if (streams[i]) (void)cudaStreamSynchronize(streams[i]);
  for (size_t i = 0; i < ngraphs; i++)
    if (graphs[i]) T_CLEAN(ctx, recap_graph_destroy(graphs[i]));
  for (size_t i = 0; i < nbuffers; i++)
    if (buffers[i]) T_CLEAN(ctx, recap_free(buffers[i]));
  for (size_t i = 0; i < nstreams; i++)
    if (streams[i]) (void)cudaStreamDestroy(streams[i]);
}

/* A test: the clique opened, body run on every rank, the clique closed. */
static void run_clique(void *(*body)(void *)) {
  clique_t c;
  clique_open(&c);
  clique_run(&c, body);
  clique_close(&c);
}

/* ------------------------------------------------------------------------------------------
 * 1. Captured on every rank, checked, replayed
 * ---------------------------------------------------------------------------------------- */

static void *captured_rank(void *arg) {
  rank_ctx_t *ctx = arg;
  cudaStream_t s = NULL;
  float *scratch = NULL, *a = NULL, *b = NULL, *c = NULL, *host = NULL;
  recap_graph_t g = NULL;
  size_t n = (size_t)ctx->nranks;
  if (!rank_begin(ctx, &s, &scratch)) goto out;
  recap_stream_t rs = (recap_stream_t)s;
  host = malloc(N * n * sizeof *host);
  if (!host) {
    rank_fail(ctx, "out of host memory");
    goto out;
  }
  T_OK(ctx, recap_malloc((void **)&a, N * sizeof(float), rs));
  T_OK(ctx, recap_malloc((void **)&b, N * sizeof(float), rs));
  T_OK(ctx, recap_malloc((void **)&c, N * n * sizeof(float), rs));
  T_CUDA(ctx, cudaStreamSynchronize(s));

  T_OK(ctx, recap_graph_create(&g, 0));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.mode = RECAP_CAPTURE_MODE_THREAD_LOCAL; /* the other ranks' threads go on meanwhile */
  T_OK(ctx, recap_graph_capture_begin(g, &o, rs));
  T_OK(ctx, recap_nccl_all_reduce(a, b, N, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, ctx->comm, rs));
  T_OK(ctx, recap_nccl_all_gather(a, c, N, RECAP_NCCL_FLOAT32, ctx->comm, rs));
  T_OK(ctx, recap_graph_capture_end(g));

  recap_collective_t rec[3];
  for (int i = 0; i < 3; i++) rec[i] = (recap_collective_t)RECAP_COLLECTIVE_INIT;
  size_t count = 0;
  T_OK(ctx, recap_graph_collectives(g, rec, 3, &count, NULL));
  if (count != 2 || rec[0].kind != RECAP_COLLECTIVE_ALL_REDUCE ||
      rec[1].kind != RECAP_COLLECTIVE_ALL_GATHER || rec[0].nranks != ctx->nranks ||
      rec[1].nranks != ctx->nranks || rec[0].count != N || rec[1].count != N) {
    rank_fail(ctx, "recorded %zu collectives: kinds %d, %d, ranks %d, %d, counts %zu, %zu", count,
              (int)rec[0].kind, (int)rec[1].kind, rec[0].nranks, rec[1].nranks, rec[0].count,
              rec[1].count);
    goto out;
  }
  T_OK(ctx, recap_graph_check_collectives(g, ctx->comm));

  for (int replay = 0; replay < 3; replay++) {
    /* Rank r's input is r + i % 1000 + replay: the sum over the ranks is
     * n(n-1)/2 + n (i % 1000 + replay), and block j of the gather is rank j's input. */
    fill_pattern(host, N, (float)(ctx->rank + replay));
    if (!upload(ctx, a, host, N, s)) goto out;
    T_OK(ctx, recap_graph_replay(g, rs));
    if (!download(ctx, host, b, N, s)) goto out;
    char what[64];
    snprintf(what, sizeof what, "replay %d: all_reduce", replay);
    if (!expect_affine(ctx, host, N, (float)(n * (n - 1) / 2 + n * (size_t)replay), (float)n, what))
      goto out;
    if (!download(ctx, host, c, N * n, s)) goto out;
    for (size_t j = 0; j < n; j++) {
      snprintf(what, sizeof what, "replay %d: all_gather block %zu", replay, j);
      if (!expect_affine(ctx, host + j * N, N, (float)(j + (size_t)replay), 1.0f, what)) goto out;
    }
  }
out:
  rank_release(ctx, &s, 1, &g, 1, (float *[]){a, b, c, scratch}, 4);
  free(host);
  return NULL;
}

RECAP_TEST(captured_replayed_checked) { run_clique(captured_rank); }

/* ------------------------------------------------------------------------------------------
 * 2. A count that differs on rank 0: every rank's check names it, nothing hangs
 * ---------------------------------------------------------------------------------------- */

static void *mismatch_rank(void *arg) {
  rank_ctx_t *ctx = arg;
  cudaStream_t s = NULL;
  float *scratch = NULL, *a = NULL;
  recap_graph_t g = NULL;
  if (!rank_begin_capture(ctx, &s, &scratch, &a, &g, false)) goto out;
  recap_stream_t rs = (recap_stream_t)s;
  /* Captured, not run: the differing counts cannot hang here, only at a replay. */
  size_t count = ctx->rank == 0 ? N : N / 2;
  T_OK(ctx, recap_nccl_all_reduce(a, a, count, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, ctx->comm, rs));
  T_OK(ctx, recap_graph_capture_end(g));
  /* The check exchanges the fingerprints eagerly (equal sizes on every rank), finds them
   * different, and names the first difference: no replay, so no rank waits for another. */
  T_STATUS(ctx, recap_graph_check_collectives(g, ctx->comm), RECAP_ERROR_INVALID_USAGE);
  snprintf(ctx->message, sizeof ctx->message, "%s", recap_last_error());
  /* The check left the communicator usable: one more eager collective on every rank. */
  (void)eager_all_reduce(ctx, scratch, s);
out:
  rank_release(ctx, &s, 1, &g, 1, (float *[]){a, scratch}, 2);
  return NULL;
}

RECAP_TEST(mismatch_named) {
  clique_t c;
  clique_open(&c);
  clique_run(&c, mismatch_rank);
  char big[128], small[128], text[512];
  snprintf(big, sizeof big, "all_reduce of %d float32 sum (%d ranks)", N, c.nranks);
  snprintf(small, sizeof small, "all_reduce of %d float32 sum (%d ranks)", N / 2, c.nranks);
  for (int r = 0; r < c.nranks; r++) {
    const char *m = c.ranks[r].message;
    if (!strstr(m,
                "recap_graph_check_collectives: the graph's collectives on the communicator "
                "differ between ranks"))
      fail_msg("rank %d: %s", r, m);
    if (!strstr(m, "every rank must capture the same collectives in the same order"))
      fail_msg("rank %d: %s", r, m);
    /* Each rank names itself first, then the lowest rank that differs from it: rank 0 names
     * rank 1, every other rank names rank 0. */
    if (r == 0)
      snprintf(text, sizeof text, "rank 0's collective 0 is %s; rank 1's is %s", big, small);
    else
      snprintf(text, sizeof text, "rank %d's collective 0 is %s; rank 0's is %s", r, small, big);
    if (!strstr(m, text)) fail_msg("rank %d: \"%s\" not in: %s", r, text, m);
  }
  clique_close(&c);
}

/* ------------------------------------------------------------------------------------------
 * 3. NCCL's kernel inside a region's body
 * ---------------------------------------------------------------------------------------- */

static void *region_rank(void *arg) {
  rank_ctx_t *ctx = arg;
  cudaStream_t s = NULL;
  float *scratch = NULL, *a = NULL;
  recap_graph_t g = NULL;
  if (!rank_begin_capture(ctx, &s, &scratch, &a, &g, true)) goto out;
  recap_stream_t rs = (recap_stream_t)s;
  recap_cond_t cond;
  T_OK(ctx, recap_cond_create(&cond, 1, rs));
  T_OK(ctx, recap_region_begin(RECAP_REGION_IF, cond, 1, rs));
  /* The wrapper refuses at once and enqueues nothing; the capture goes on. */
  T_STATUS(ctx, recap_nccl_all_reduce(a, a, N, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, ctx->comm, rs),
           RECAP_ERROR_INVALID_USAGE);
  T_MESSAGE(ctx, "(pytorch #180960)");
  /* NCCL called directly: captured into the body, so nothing runs and no rank waits. Every
   * rank does the same. */
  int result = nccl_all_reduce(a, a, N, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, ctx->comm, s);
  if (result != 0) {
    rank_fail(ctx, "ncclAllReduce inside the region's body: %s", nccl_error_string(result));
    goto out;
  }
  T_STATUS(ctx, recap_region_end(rs), RECAP_ERROR_INVALID_USAGE);
  T_MESSAGE(ctx, "recap_region_end: branch 0 of the if region opened 1 deep holds node");
  T_MESSAGE(ctx, ", kernel ncclDevKernel_");
  T_MESSAGE(ctx, "an NCCL collective");
  int capturing = -1;
  T_OK(ctx, recap_stream_is_capturing(rs, &capturing));
  if (capturing != 0) {
    rank_fail(ctx, "the stream still captures after the refusal");
    goto out;
  }
  recap_graph_state_t st;
  T_OK(ctx, recap_graph_state(g, &st));
  if (st != RECAP_GRAPH_STATE_FRESH) {
    rank_fail(ctx, "the graph is in state %d after the refusal, not fresh", (int)st);
    goto out;
  }
  /* The communicator is untouched: one eager collective on every rank. */
  (void)eager_all_reduce(ctx, scratch, s);
out:
  rank_release(ctx, &s, 1, &g, 1, (float *[]){a, scratch}, 2);
  return NULL;
}

RECAP_TEST(nccl_kernel_in_region_body_refused) {
  if (!gpu_conditional_nodes()) return;
  run_clique(region_rank);
}

/* ------------------------------------------------------------------------------------------
 * 4. Two graphs sharing a communicator, replayed on two streams
 * ---------------------------------------------------------------------------------------- */

static void *streams_rank(void *arg) {
  rank_ctx_t *ctx = arg;
  cudaStream_t s1 = NULL, s2 = NULL;
  float *scratch = NULL, *x1 = NULL, *y1 = NULL, *x2 = NULL, *y2 = NULL, *host = NULL;
  recap_graph_t g1 = NULL, g2 = NULL;
  size_t n = (size_t)ctx->nranks;
  if (!rank_begin(ctx, &s1, &scratch)) goto out;
  T_CUDA(ctx, cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  recap_stream_t r1 = (recap_stream_t)s1, r2 = (recap_stream_t)s2;
  host = malloc(N * sizeof *host);
  if (!host) {
    rank_fail(ctx, "out of host memory");
    goto out;
  }
  T_OK(ctx, recap_malloc((void **)&x1, N * sizeof(float), r1));
  T_OK(ctx, recap_malloc((void **)&y1, N * sizeof(float), r1));
  T_OK(ctx, recap_malloc((void **)&x2, N * sizeof(float), r1));
  T_OK(ctx, recap_malloc((void **)&y2, N * sizeof(float), r1));
  T_CUDA(ctx, cudaStreamSynchronize(s1));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.mode = RECAP_CAPTURE_MODE_THREAD_LOCAL;
  T_OK(ctx, recap_graph_create(&g1, 0));
  T_OK(ctx, recap_graph_capture_begin(g1, &o, r1));
  T_OK(ctx, recap_nccl_all_reduce(x1, y1, N, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, ctx->comm, r1));
  T_OK(ctx, recap_graph_capture_end(g1));
  T_OK(ctx, recap_graph_create(&g2, 0));
  T_OK(ctx, recap_graph_capture_begin(g2, &o, r2));
  T_OK(ctx, recap_nccl_all_reduce(x2, y2, N, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, ctx->comm, r2));
  T_OK(ctx, recap_graph_capture_end(g2));
  T_OK(ctx, recap_graph_check_collectives(g1, ctx->comm));
  T_OK(ctx, recap_graph_check_collectives(g2, ctx->comm));

  /* SERIALIZE (the default): g1 on s1, g2 on s2, g1 on s1 ... Rank r's inputs in round k are
   * r + i % 1000 + k and 2r + i % 1000 + 100 + k. The results are read after the even rounds
   * and the last one; after an odd round g1's next replay on s1 follows g2's on s2 with nothing
   * of ours between them, and only the policy orders them. */
  for (int k = 0; k < ROUNDS; k++) {
    fill_pattern(host, N, (float)(ctx->rank + k));
    if (!upload(ctx, x1, host, N, s1)) goto out;
    T_OK(ctx, recap_graph_replay(g1, r1));
    fill_pattern(host, N, (float)(2 * ctx->rank + 100 + k));
    if (!upload(ctx, x2, host, N, s2)) goto out;
    T_OK(ctx, recap_graph_replay(g2, r2));
    if (k % 2 == 1 && k != ROUNDS - 1) continue;
    char what[64];
    snprintf(what, sizeof what, "round %d: g1's all_reduce", k);
    if (!download(ctx, host, y1, N, s1)) goto out;
    if (!expect_affine(ctx, host, N, (float)(n * (n - 1) / 2 + n * (size_t)k), (float)n, what))
      goto out;
    snprintf(what, sizeof what, "round %d: g2's all_reduce", k);
    if (!download(ctx, host, y2, N, s2)) goto out;
    if (!expect_affine(ctx, host, N, (float)(n * (n - 1) + n * (size_t)(100 + k)), (float)n, what))
      goto out;
  }
  T_CUDA(ctx, cudaStreamSynchronize(s1));
  T_CUDA(ctx, cudaStreamSynchronize(s2));
  T_GATE(ctx);

  /* REFUSE_OVERLAP. Rank 0 replays g1 on s1 while the other ranks wait at the gate: its
   * all-reduce cannot finish without them, so g2 on s2 is refused, deterministically, and
   * launches nothing. What rank 0 got is checked once every rank has launched g1: a rank that
   * stopped early would leave rank 0's all-reduce waiting forever. */
  T_OK(ctx, recap_nccl_comm_policy(ctx->comm, RECAP_NCCL_REFUSE_OVERLAP));
  fill_pattern(host, N, (float)(ctx->rank + 1000));
  if (!upload(ctx, x1, host, N, s1)) goto out;
  recap_status_t overlap = RECAP_ERROR_BUSY;
  if (ctx->rank == 0) {
    T_OK(ctx, recap_graph_replay(g1, r1));
    overlap = recap_graph_replay(g2, r2);
    snprintf(ctx->message, sizeof ctx->message, "%s", recap_last_error());
    ctx->clique->overlap_launched = overlap == RECAP_SUCCESS;
    T_GATE(ctx);
  } else {
    T_GATE(ctx);
    T_OK(ctx, recap_graph_replay(g1, r1));
  }
  T_CUDA(ctx, cudaStreamSynchronize(s1));
  if (ctx->clique->overlap_launched) {
    /* Rank 0's g2 ran against the policy: the others replay theirs so that it can finish. */
    if (ctx->rank != 0) T_OK(ctx, recap_graph_replay(g2, r2));
    T_CUDA(ctx, cudaStreamSynchronize(s2));
    if (ctx->rank == 0)
      rank_fail(ctx,
                "g2's replay on s2 launched while g1's on s1 could not finish, under "
                "RECAP_NCCL_REFUSE_OVERLAP");
    goto out;
  }
  if (ctx->rank == 0) {
    /* Failures recorded here do not stop the rank: the others go on to replay g2. */
    char text[96];
    if (overlap != RECAP_ERROR_BUSY)
      rank_fail(ctx, "g2's replay during g1's returned %s: %s", recap_status_name(overlap),
                ctx->message);
    snprintf(text, sizeof text, "whose latest replay, on stream %p, has not finished", (void *)s1);
    expect_in(ctx, ctx->message, text);
    snprintf(text, sizeof text, "this replay on stream %p would overlap it", (void *)s2);
    expect_in(ctx, ctx->message, text);
    expect_in(ctx, ctx->message, "policy is RECAP_NCCL_REFUSE_OVERLAP");
  }
  /* Once g1's replay finished, g2 on s2 is no overlap: it launches. */
  fill_pattern(host, N, (float)(2 * ctx->rank + 2000));
  if (!upload(ctx, x2, host, N, s2)) goto out;
  T_OK(ctx, recap_graph_replay(g2, r2));
  if (!download(ctx, host, y1, N, s1)) goto out;
  if (!expect_affine(ctx, host, N, (float)(n * (n - 1) / 2 + n * 1000), (float)n,
                     "REFUSE_OVERLAP: g1"))
    goto out;
  if (!download(ctx, host, y2, N, s2)) goto out;
  if (!expect_affine(ctx, host, N, (float)(n * (n - 1) + n * 2000), (float)n, "REFUSE_OVERLAP: g2"))
    goto out;
out:
  /* The policy stays with the communicator's address: the next test's may reuse it. */
  T_CLEAN(ctx, recap_nccl_comm_policy(ctx->comm, RECAP_NCCL_SERIALIZE));
  rank_release(ctx, (cudaStream_t[]){s1, s2}, 2, (recap_graph_t[]){g1, g2}, 2,
               (float *[]){x1, y1, x2, y2, scratch}, 5);
  free(host);
  return NULL;
}

RECAP_TEST(serialized_across_streams) { run_clique(streams_rank); }

/* Skip unless there are 2 GPUs and NCCL: what the harness checks (a device) is not enough. */
static void require_gpus_and_nccl(void) {
  int gpus = gpu_count();
  if (gpus < 2) {
    printf("SKIP: test_nccl_ranks_gpu needs 2 GPUs, found %d\n", gpus);
    fflush(stdout);
    exit(RECAP_TEST_SKIP);
  }
  /* NCCL may talk between ranks inside a captured call: to connect the peers of an algorithm
   * at its first use, or to register the user's buffers with the graph. Ranks capturing
   * different collectives (mismatch_named) would then wait for each other in the capture,
   * before recap's check could name the difference. Both are set up eagerly instead, unless
   * the environment says otherwise. */
  setenv("NCCL_RUNTIME_CONNECT", "0", 0);
  setenv("NCCL_GRAPH_REGISTER", "0", 0);
  int version = gpu_nccl_version_or_skip();
  printf("%d GPUs, NCCL %d\n", gpus, version);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(captured_replayed_checked),
      cmocka_unit_test(mismatch_named),
      cmocka_unit_test(nccl_kernel_in_region_body_refused),
      cmocka_unit_test(serialized_across_streams),
  };
  if (!(argc > 1 && strcmp(argv[1], "--list") == 0)) require_gpus_and_nccl();
  return RECAP_TEST_RUN(argc, argv, tests);
}
