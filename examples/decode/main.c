/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * decode — an autoregressive decode loop whose work changes every step, run six ways with recap.
 *
 * One step of a single attention layer over a KV cache that grows by one position per step:
 *
 *     q, k, v = Wq x, Wk x, Wv x            three cuBLAS GEMMs
 *     K[:, t] = k, V[:, t] = v              append to the cache at position t
 *     s_h[j]  = q_h . K_h[:, j] / sqrt(hd)  scores over positions 0..t, per head
 *     p_h     = softmax(s_h[0..t])
 *     a_h     = sum_j p_h[j] V_h[:, j]      the weighted sum of values
 *     y       = Wo a                        a cuBLAS GEMM
 *     x'      = tanh(x + y)                 the next step's input (errors would compound)
 *
 * The step's scratch (q, k, v, scores, a, y) comes from recap_malloc and is freed at its end;
 * the cache, the weights and two state buffers (ping-pong) are allocated once. Step t reads
 * state buffer t % 2 and writes buffer (t + 1) % 2. The six ways:
 *
 *   eager      every kernel and GEMM launched from the host;
 *   recapture  recap_graph_reset + capture + instantiate every step (t baked into the launches);
 *   update     recap_graph_recapture_begin ... capture_end every step: recap applies the new
 *              template to the executable with cudaGraphExecUpdate (t baked, as above);
 *   rebind     one capture whose kernels read t from device memory (a kernel at the end of the
 *              step advances it), pointed at the step's input and output buffers with
 *              recap_graph_rebind (the two buffers swap places every step): no capture, no
 *              copy after the first step;
 *   params     two graphs captured once (one per state buffer), the eager kernels taking t by
 *              value as a graph parameter applied on the GPU (options.params_on_device);
 *   device     the same two graphs with the kernels that read t from device memory.
 *
 * All six must give the same outputs bit for bit: the state after every step (kept in a
 * history buffer), the final KV cache and the final state. The program prints a table of
 * steps/s, host µs per step and whether each way matched the first.
 *
 *     decode [--steps N] [--dim D] [--heads H] [--seed S] [--way all|eager|recapture|update|
 *             rebind|params|device] [--check]                                (decode --help)
 *
 * Exit status: 0 success; 1 a failure, or the ways disagree; 2 a bad command line, or no GPU;
 * 77 no GPU with --check (the test runner's "skipped").
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "kernels.h"
#include "recap.h"

#define PROGRAM "decode"
#include "example_check.h"
#include "example_args.h"
enum { EXIT_NO_DEVICE = 2, EXIT_CHECK_SKIP = 77, STEPS_UNDER_A_TOOL = 24, STATE_BUFFERS = 2 };
enum { WAY_EAGER, WAY_RECAPTURE, WAY_UPDATE, WAY_REBIND, WAY_PARAMS, WAY_DEVICE, WAYS };
static const char *const WAY_NAMES[WAYS] = {"eager",  "recapture", "update",
                                            "rebind", "params",    "device"};
static const char *const WAY_TITLES[WAYS] = {"eager",
                                             "reset + capture + instantiate",
                                             "recapture + update",
                                             "rebind + device length",
                                             "2 graphs, t a GPU parameter",
                                             "2 graphs, t in device memory"};
/* cuBLAS's workspace: fixed, from recap, so that every step's GEMMs run the same algorithm. */
static const size_t WORKSPACE_BYTES = (size_t)4 << 20;

/* ==========================================================================================
 * Options
 * ======================================================================================== */

typedef struct options {
  int steps, dim, heads;
  unsigned seed;
  bool ways[WAYS];
  bool check;
} options_t;

static void usage(FILE *f) {
  fprintf(f, "usage: " PROGRAM
             " [options]\n"
             "\n"
             "An autoregressive decode loop (attention over a KV cache that grows by one\n"
             "position per step, on cuBLAS and kernels of its own), run eagerly, with a capture\n"
             "per step, with recapture + update per step, and with one capture rebound per step;\n"
             "the outputs are compared bit for bit and the host cost per step is printed.\n"
             "\n"
             "  --steps N      decode steps per way, 1 to 100000 (default 1000)\n"
             "  --dim D        model width, floats per token (default 256)\n"
             "  --heads H      attention heads; H divides D (default 4)\n"
             "  --seed S       seed of the weights and the first input (default 1234)\n"
             "  --way W        all, or one of eager, recapture, update, rebind, params,\n"
             "                 device; repeatable\n"
             "                 (default all; the first way run is the reference)\n"
             "  --check        exit 0 if the ways agree bit for bit, 1 if not, 77 without a GPU\n"
             "  -h, --help     this text\n"
             "\n"
             "Exit status: 0 success; 1 a failure or a disagreement; 2 a bad command line or\n"
             "no GPU; 77 no GPU with --check.\n");
}

/* Returns -1 to go on, or an exit status. */
static int parse_args(int argc, char **argv, options_t *o) {
  enum { OPT_STEPS = 256, OPT_DIM, OPT_HEADS, OPT_SEED, OPT_WAY, OPT_CHECK };
  static const struct option options[] = {
      {"steps", required_argument, NULL, OPT_STEPS},
      {"dim", required_argument, NULL, OPT_DIM},
      {"heads", required_argument, NULL, OPT_HEADS},
      {"seed", required_argument, NULL, OPT_SEED},
      {"way", required_argument, NULL, OPT_WAY},
      {"check", no_argument, NULL, OPT_CHECK},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  *o = (options_t){.steps = 1000, .dim = 256, .heads = 4, .seed = 1234};
  bool any_way = false;
  int c, seed = 0, index = 0;
  opterr = 0; /* the messages below name the program and the option */
  while ((c = getopt_long(argc, argv, ":h", options, &index)) != -1) {
    const char *arg = optarg;
    switch (c) {
      case OPT_STEPS:
        if (!example_parse_int(arg, 1, 100000, &o->steps)) goto bad_value;
        break;
      case OPT_DIM:
        if (!example_parse_int(arg, 1, 1024, &o->dim)) goto bad_value;
        break;
      case OPT_HEADS:
        if (!example_parse_int(arg, 1, 1024, &o->heads)) goto bad_value;
        break;
      case OPT_SEED:
        if (!example_parse_int(arg, 0, 2147483647L, &seed)) goto bad_value;
        o->seed = (unsigned)seed;
        break;
      case OPT_WAY: {
        bool all = strcmp(arg, "all") == 0, known = all;
        for (int w = 0; w < WAYS; w++) {
          bool this_one = all || strcmp(arg, WAY_NAMES[w]) == 0;
          o->ways[w] = o->ways[w] || this_one;
          known = known || this_one;
        }
        if (!known) goto bad_value;
        any_way = true;
        break;
      }
      case OPT_CHECK: o->check = true; break;
      case 'h': usage(stdout); return 0;
      default: return example_option_error(PROGRAM, c, argv, optind, usage);
    }
    continue;
  bad_value:
    return example_bad_value(PROGRAM, arg, options[index].name);
  }
  if (optind < argc) return example_extra_argument(PROGRAM, argv[optind]);
  if (o->dim % o->heads != 0) {
    fprintf(stderr, PROGRAM ": --heads %d does not divide --dim %d\n", o->heads, o->dim);
    return EXIT_NO_DEVICE;
  }
  if (!any_way)
    for (int w = 0; w < WAYS; w++) o->ways[w] = true;
  return -1;
}

/* ==========================================================================================
 * The model and one decode step
 * ======================================================================================== */

typedef struct decoder {
  decode_shape_t shape;
  cudaStream_t stream;
  cublasHandle_t blas;
  void *workspace;
  float *wq, *wk, *wv, *wo;    /* dim x dim, column-major */
  float *k_cache, *v_cache;    /* dim x max_len: column j holds position j */
  float *history;              /* dim x max_len: the output of step j in column j */
  float *state[STATE_BUFFERS]; /* step t reads state[t % 2], writes state[(t + 1) % 2] */
  int *t_dev;                  /* the position, for the rebind way's kernels */
  float *x0;                   /* host: the first input */
} decoder_t;

/* What one way leaves behind, copied to the host for the comparison. */
typedef struct outcome {
  float *history, *k_cache, *v_cache, *state;
  double host_us_per_step, steps_per_second;
  bool ran;
} outcome_t;

/* A fixed-seed generator (xorshift32), so every run and every way gets the same numbers. */
static float next_uniform(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return (float)(*s >> 8) / (float)(1u << 24) * 2.0f - 1.0f; /* [-1, 1) */
}

static float *device_floats(size_t n, cudaStream_t stream) {
  void *p = NULL;
  CHECK_RECAP(recap_malloc(&p, n * sizeof(float), stream));
  return p;
}

static void upload_random(float *device, size_t n, float scale, uint32_t *rng) {
  float *host = host_alloc(n * sizeof *host);
  for (size_t i = 0; i < n; i++) host[i] = scale * next_uniform(rng);
  CHECK_CUDA(cudaMemcpy(device, host, n * sizeof *host, cudaMemcpyHostToDevice));
  free(host);
}

static void decoder_init(decoder_t *m, const options_t *o) {
  memset(m, 0, sizeof *m);
  m->shape = (decode_shape_t){o->dim, o->heads, o->steps};
  CHECK_CUDA(decode_kernels_load());
  CHECK_CUDA(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
  size_t dim = (size_t)o->dim, cache = dim * (size_t)o->steps;
  m->wq = device_floats(dim * dim, m->stream);
  m->wk = device_floats(dim * dim, m->stream);
  m->wv = device_floats(dim * dim, m->stream);
  m->wo = device_floats(dim * dim, m->stream);
  m->k_cache = device_floats(cache, m->stream);
  m->v_cache = device_floats(cache, m->stream);
  m->history = device_floats(cache, m->stream);
  for (int i = 0; i < STATE_BUFFERS; i++) m->state[i] = device_floats(dim, m->stream);
  CHECK_RECAP(recap_malloc((void **)&m->t_dev, sizeof(int), m->stream));
  CHECK_RECAP(recap_malloc(&m->workspace, WORKSPACE_BYTES, m->stream));
  CHECK_CUDA(cudaStreamSynchronize(m->stream)); /* the uploads below use the legacy stream */

  uint32_t rng = o->seed ? o->seed : 1u;
  float scale = 1.0f / sqrtf((float)dim);
  upload_random(m->wq, dim * dim, 2.0f * scale, &rng);
  upload_random(m->wk, dim * dim, 2.0f * scale, &rng);
  upload_random(m->wv, dim * dim, scale, &rng);
  upload_random(m->wo, dim * dim, scale, &rng);
  m->x0 = host_alloc(dim * sizeof(float));
  for (size_t i = 0; i < dim; i++) m->x0[i] = next_uniform(&rng);

  CHECK_BLAS(cublasCreate(&m->blas));
  /* Deterministic cuBLAS: no atomics, the default math, and one workspace of recap's for every
   * call (cublasSetStream resets the workspace, so it is set after the stream). */
  CHECK_BLAS(cublasSetAtomicsMode(m->blas, CUBLAS_ATOMICS_NOT_ALLOWED));
  CHECK_BLAS(cublasSetMathMode(m->blas, CUBLAS_DEFAULT_MATH));
  CHECK_BLAS(cublasSetPointerMode(m->blas, CUBLAS_POINTER_MODE_HOST));
  CHECK_BLAS(cublasSetStream(m->blas, m->stream));
  CHECK_BLAS(cublasSetWorkspace(m->blas, m->workspace, WORKSPACE_BYTES));
}

static void decoder_destroy(decoder_t *m) {
  CHECK_CUDA(cudaStreamSynchronize(m->stream));
  CHECK_BLAS(cublasDestroy(m->blas));
  void *blocks[] = {m->wq,      m->wk,       m->wv,       m->wo,    m->k_cache,  m->v_cache,
                    m->history, m->state[0], m->state[1], m->t_dev, m->workspace};
  for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) CHECK_RECAP(recap_free(blocks[i]));
  CHECK_CUDA(cudaStreamDestroy(m->stream));
  free(m->x0);
}

/* out = W in, W dim x dim: the same GEMM shape at every step, so cuBLAS runs the same kernel. */
static void gemv_as_gemm(decoder_t *m, const float *w, const float *in, float *out) {
  static const float one = 1.0f, zero = 0.0f;
  int d = m->shape.dim;
  CHECK_BLAS(
      cublasSgemm(m->blas, CUBLAS_OP_N, CUBLAS_OP_N, d, 1, d, &one, w, d, in, d, &zero, out, d));
}

/* Enqueue step t on m->stream: captured or not. t_dev NULL: t is baked into the launches
 * (with full_length, the scores launch covers max_len positions, for a graph whose t is a
 * parameter); otherwise the kernels read it from *t_dev. */
static void enqueue_step_as(decoder_t *m, int t, const int *t_dev, bool full_length,
                            const float *x_in, float *x_out) {
  decode_shape_t sh = m->shape;
  cudaStream_t s = m->stream;
  size_t dim = (size_t)sh.dim;
  float *q = device_floats(dim, s), *k = device_floats(dim, s), *v = device_floats(dim, s);
  float *scores = device_floats((size_t)sh.heads * (size_t)sh.max_len, s);
  float *attn = device_floats(dim, s), *y = device_floats(dim, s);
  gemv_as_gemm(m, m->wq, x_in, q);
  gemv_as_gemm(m, m->wk, x_in, k);
  gemv_as_gemm(m, m->wv, x_in, v);
  CHECK_CUDA(decode_append(sh, m->k_cache, m->v_cache, k, v, t, t_dev, s));
  if (full_length)
    CHECK_CUDA(decode_scores_full(sh, scores, q, m->k_cache, t, s));
  else
    CHECK_CUDA(decode_scores(sh, scores, q, m->k_cache, t, t_dev, s));
  CHECK_CUDA(decode_softmax(sh, scores, t, t_dev, s));
  CHECK_CUDA(decode_weighted_sum(sh, attn, scores, m->v_cache, t, t_dev, s));
  gemv_as_gemm(m, m->wo, attn, y);
  CHECK_CUDA(decode_feedback(sh, x_out, x_in, y, m->history, t, t_dev, s));
  float *scratch[] = {q, k, v, scores, attn, y};
  for (size_t i = 0; i < sizeof scratch / sizeof scratch[0]; i++)
    CHECK_RECAP(recap_free(scratch[i]));
}

static void enqueue_step(decoder_t *m, int t, const int *t_dev, const float *x_in, float *x_out) {
  enqueue_step_as(m, t, t_dev, false, x_in, x_out);
}

/* The start of every way: an empty cache and history, the first input, position 0. */
static void decoder_reset(decoder_t *m) {
  size_t cache = (size_t)m->shape.dim * (size_t)m->shape.max_len * sizeof(float);
  CHECK_CUDA(cudaMemsetAsync(m->k_cache, 0, cache, m->stream));
  CHECK_CUDA(cudaMemsetAsync(m->v_cache, 0, cache, m->stream));
  CHECK_CUDA(cudaMemsetAsync(m->history, 0, cache, m->stream));
  for (int i = 0; i < STATE_BUFFERS; i++)
    CHECK_CUDA(cudaMemsetAsync(m->state[i], 0, (size_t)m->shape.dim * sizeof(float), m->stream));
  CHECK_CUDA(cudaMemsetAsync(m->t_dev, 0, sizeof(int), m->stream));
  CHECK_CUDA(cudaMemcpyAsync(m->state[0], m->x0, (size_t)m->shape.dim * sizeof(float),
                             cudaMemcpyHostToDevice, m->stream));
  CHECK_CUDA(cudaStreamSynchronize(m->stream));
}

/* ==========================================================================================
 * The four ways
 * ======================================================================================== */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* When a way began, finished enqueueing its steps, and saw them done. */
typedef struct timing {
  uint64_t start, enqueued, done;
} timing_t;

/* Every step is enqueued: note the time, wait until the steps are done, note that too. */
static void wait_for_steps(decoder_t *m, timing_t *tm) {
  tm->enqueued = now_ns();
  CHECK_CUDA(cudaStreamSynchronize(m->stream));
  tm->done = now_ns();
}

/* g's counters of recaptures, updates and rebinds. */
static recap_update_stats_t update_stats_of(recap_graph_t g) {
  recap_update_stats_t st = RECAP_UPDATE_STATS_INIT;
  CHECK_RECAP(recap_graph_update_stats(g, &st));
  return st;
}

static float *in_of(decoder_t *m, int t) { return m->state[t % STATE_BUFFERS]; }
static float *out_of(decoder_t *m, int t) { return m->state[(t + 1) % STATE_BUFFERS]; }

static void run_eager(decoder_t *m, int steps, timing_t *tm) {
  for (int t = 0; t < steps; t++) enqueue_step(m, t, NULL, in_of(m, t), out_of(m, t));
  wait_for_steps(m, tm);
}

/* A fresh capture and instantiation every step. The captures share one pool (a handle of the
 * program's), so that each step reuses the last step's scratch, in stream order, instead of
 * making a new private pool per step; the reset destroys the executable, which CUDA frees when
 * its replay completes. */
static void run_recapture(decoder_t *m, int steps, timing_t *tm) {
  recap_graph_t g;
  CHECK_RECAP(recap_graph_create(&g, 0));
  recap_capture_options_t options = RECAP_CAPTURE_OPTIONS_INIT;
  options.pool = recap_pool_handle();
  for (int t = 0; t < steps; t++) {
    CHECK_RECAP(recap_graph_reset(g));
    CHECK_RECAP(recap_graph_capture_begin(g, &options, m->stream));
    enqueue_step(m, t, NULL, in_of(m, t), out_of(m, t));
    CHECK_RECAP(recap_graph_capture_end(g));
    CHECK_RECAP(recap_graph_replay(g, m->stream));
  }
  wait_for_steps(m, tm);
  CHECK_RECAP(recap_graph_destroy(g));
}

static void print_reasons(const recap_update_stats_t *st) {
  bool any = false;
  for (int r = 0; r < RECAP_UPDATE_REASON_COUNT; r++) {
    if (r == RECAP_UPDATE_REASON_NONE || st->by_reason[r] == 0) continue;
    printf("%s%s %" PRIu64, any ? ", " : " (", recap_update_reason_name((recap_update_reason_t)r),
           st->by_reason[r]);
    any = true;
  }
  printf("%s", any ? ")" : "");
}

/* One capture, then a recapture of each later step into the same graph: recap tries
 * cudaGraphExecUpdate on the executable and instantiates only when the driver refuses. The
 * scratch of a recapture gets the addresses of the first capture's (same allocation sequence),
 * so only the baked position t and the launch shapes that follow it differ between templates. */
static void run_update(decoder_t *m, int steps, timing_t *tm) {
  recap_graph_t g;
  CHECK_RECAP(recap_graph_create(&g, 0));
  for (int t = 0; t < steps; t++) {
    if (t == 0)
      CHECK_RECAP(recap_graph_capture_begin(g, NULL, m->stream));
    else
      CHECK_RECAP(recap_graph_recapture_begin(g, NULL, m->stream));
    enqueue_step(m, t, NULL, in_of(m, t), out_of(m, t));
    CHECK_RECAP(recap_graph_capture_end(g));
    CHECK_RECAP(recap_graph_replay(g, m->stream));
  }
  wait_for_steps(m, tm);
  recap_update_stats_t st = update_stats_of(g);
  printf("  update: %" PRIu64 " recaptures, %" PRIu64 " updated in place, %" PRIu64
         " instantiated afresh",
         st.recaptures, st.updates, st.instantiations);
  print_reasons(&st);
  printf("; scratch addresses kept %" PRIu64 ", new %" PRIu64 "\n", st.pool_reused, st.pool_new);
  CHECK_RECAP(recap_graph_destroy(g));
}

/* One capture for every step: the kernels read t from m->t_dev, and the step ends with a
 * kernel that advances it, so a replay needs nothing from the host but its input and output
 * buffers, which recap_graph_rebind points it at. The capture declares the two state buffers
 * (RECAP_REBIND_DECLARED): only their sites move, and no scalar argument that happens to look
 * like an address in them can be patched by mistake.
 *
 * Step t reads state[t % 2] and writes state[(t + 1) % 2]: the two buffers trade places every
 * step. The swap is one batch of two moves, applied together: a single move onto a buffer the
 * graph still uses would be refused, but a batch may move buffers into each other's places. */
static void run_rebind(decoder_t *m, int steps, timing_t *tm) {
  recap_graph_t g;
  CHECK_RECAP(recap_graph_create(&g, 0));
  recap_capture_options_t options = RECAP_CAPTURE_OPTIONS_INIT;
  options.rebind = RECAP_REBIND_DECLARED;
  size_t state_bytes = (size_t)m->shape.dim * sizeof(float);
  CHECK_RECAP(recap_graph_capture_begin(g, &options, m->stream));
  CHECK_RECAP(recap_graph_declare_buffer(g, in_of(m, 0), state_bytes));
  CHECK_RECAP(recap_graph_declare_buffer(g, out_of(m, 0), state_bytes));
  enqueue_step(m, 0, m->t_dev, in_of(m, 0), out_of(m, 0));
  CHECK_CUDA(decode_advance(m->t_dev, m->stream));
  CHECK_RECAP(recap_graph_capture_end(g));
  for (int t = 0; t < steps; t++) {
    if (t > 0) {
      recap_rebind_t swap[2] = {{sizeof(recap_rebind_t), in_of(m, t - 1), in_of(m, t), state_bytes},
                                {sizeof(recap_rebind_t), out_of(m, t - 1), out_of(m, t),
                                 state_bytes}};
      size_t patched[2];
      CHECK_RECAP(recap_graph_rebind(g, swap, 2, patched));
      if (patched[0] == 0 || patched[1] == 0)
        die("recap_graph_rebind patched %zu sites of the input and %zu of the output: both "
            "should have sites",
            patched[0], patched[1]);
    }
    CHECK_RECAP(recap_graph_replay(g, m->stream));
  }
  wait_for_steps(m, tm);
  recap_update_stats_t st = update_stats_of(g);
  size_t nodes = 0;
  CHECK_RECAP(recap_graph_node_count(g, &nodes));
  printf("  rebind: 1 capture of %zu nodes, %" PRIu64 " rebinds patching %" PRIu64 " sites\n",
         nodes, st.rebinds, st.sites_patched);
  CHECK_RECAP(recap_graph_destroy(g));
}

/* Two graphs, each captured once: one for the steps that read state buffer 0, one for those that
 * read buffer 1, so that no address changes between replays. With `param`, the kernels are the
 * eager ones and take t by value, declared as a graph parameter applied on the GPU
 * (options.params_on_device): a step is one store and one replay, and each graph's first node
 * writes t into its nodes. Without, the kernels read t from device memory and the step ends
 * with the kernel that advances it (the kernels edited for graphs, as the rebind way). */
static void run_two_graphs(decoder_t *m, int steps, bool param, timing_t *tm) {
  recap_graph_t g[STATE_BUFFERS];
  recap_param_t t_param[STATE_BUFFERS] = {NULL, NULL};
  recap_capture_options_t options = RECAP_CAPTURE_OPTIONS_INIT;
  options.params_on_device = param;
  for (int b = 0; b < STATE_BUFFERS; b++) {
    CHECK_RECAP(recap_graph_create(&g[b], 0));
    CHECK_RECAP(recap_graph_capture_begin(g[b], &options, m->stream));
    if (param) {
      int32_t t_ph;
      CHECK_RECAP(recap_graph_param_int32(g[b], "t", b, &t_ph, &t_param[b]));
      enqueue_step_as(m, t_ph, NULL, true, in_of(m, b), out_of(m, b));
    } else {
      enqueue_step(m, 0, m->t_dev, in_of(m, b), out_of(m, b));
      CHECK_CUDA(decode_advance(m->t_dev, m->stream));
    }
    CHECK_RECAP(recap_graph_capture_end(g[b]));
  }
  for (int t = 0; t < steps; t++) {
    int b = t % STATE_BUFFERS;
    if (param) CHECK_RECAP(recap_param_set_int32(t_param[b], t));
    CHECK_RECAP(recap_graph_replay(g[b], m->stream));
  }
  wait_for_steps(m, tm);
  size_t nodes = 0;
  CHECK_RECAP(recap_graph_node_count(g[0], &nodes));
  printf("  %s: 2 captures of %zu nodes%s\n", param ? "params" : "device", nodes,
         param ? ", the first recap's parameter applier" : "");
  for (int b = 0; b < STATE_BUFFERS; b++) CHECK_RECAP(recap_graph_destroy(g[b]));
}

static void run_way(decoder_t *m, int way, int steps, outcome_t *out) {
  decoder_reset(m);
  timing_t tm = {now_ns(), 0, 0};
  switch (way) {
    case WAY_EAGER: run_eager(m, steps, &tm); break;
    case WAY_RECAPTURE: run_recapture(m, steps, &tm); break;
    case WAY_UPDATE: run_update(m, steps, &tm); break;
    case WAY_REBIND: run_rebind(m, steps, &tm); break;
    case WAY_PARAMS: run_two_graphs(m, steps, true, &tm); break;
    default: run_two_graphs(m, steps, false, &tm); break;
  }
  /* The host figure is the time to enqueue every step (recap's work included), the rate the
   * time until the last step is done. */
  out->host_us_per_step = (double)(tm.enqueued - tm.start) / 1e3 / steps;
  out->steps_per_second = steps / ((double)(tm.done - tm.start) / 1e9);

  size_t dim = (size_t)m->shape.dim, cache = dim * (size_t)m->shape.max_len * sizeof(float);
  out->history = host_alloc(cache);
  out->k_cache = host_alloc(cache);
  out->v_cache = host_alloc(cache);
  out->state = host_alloc(dim * sizeof(float));
  CHECK_CUDA(cudaMemcpy(out->history, m->history, cache, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(out->k_cache, m->k_cache, cache, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(out->v_cache, m->v_cache, cache, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(out->state, in_of(m, steps), dim * sizeof(float), cudaMemcpyDeviceToHost));
  out->ran = true;
}

/* ==========================================================================================
 * Comparing the ways
 * ======================================================================================== */

/* FNV-1a over the bytes of every step's output, in step order: the running checksum. */
static uint64_t checksum(const void *data, size_t bytes) {
  const unsigned char *p = data;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* Whether b equals the reference a bit for bit; if not, says where they first differ. */
static bool same_outputs(const outcome_t *a, const outcome_t *b, const decoder_t *m,
                         const char *name) {
  size_t dim = (size_t)m->shape.dim, steps = (size_t)m->shape.max_len;
  size_t cache = dim * steps * sizeof(float);
  for (size_t t = 0; t < steps; t++) {
    if (memcmp(a->history + t * dim, b->history + t * dim, dim * sizeof(float)) == 0) continue;
    size_t i = 0;
    while (a->history[t * dim + i] == b->history[t * dim + i]) i++;
    printf("  %s: the output of step %zu differs first at element %zu: %.9g, reference %.9g\n",
           name, t, i, (double)b->history[t * dim + i], (double)a->history[t * dim + i]);
    return false;
  }
  if (memcmp(a->k_cache, b->k_cache, cache) != 0 || memcmp(a->v_cache, b->v_cache, cache) != 0) {
    printf("  %s: every step's output matches but the KV cache differs\n", name);
    return false;
  }
  if (memcmp(a->state, b->state, dim * sizeof(float)) != 0) {
    printf("  %s: the final state differs\n", name);
    return false;
  }
  return true;
}

static bool under_a_tool(void) {
  /* Under a CUDA tool (RECAP_UNDER_TOOL=1, as tools/gpu-check sets for compute-sanitizer, or a
   * profiler's injected library) every launch costs milliseconds: the run is cut short. */
  const char *flag = getenv("RECAP_UNDER_TOOL"), *injected = getenv("CUDA_INJECTION64_PATH");
  return (flag && strcmp(flag, "1") == 0) || (injected && *injected);
}

int main(int argc, char **argv) {
  options_t o;
  int code = parse_args(argc, argv, &o);
  if (code >= 0) return code;

  int devices = 0;
  if (recap_device_count(&devices) != RECAP_SUCCESS || devices < 1) {
    printf(PROGRAM ": this example needs a CUDA device (%s)\n",
           recap_last_error()[0] ? recap_last_error() : "none found");
    return o.check ? EXIT_CHECK_SKIP : EXIT_NO_DEVICE;
  }
  if (under_a_tool() && o.steps > STEPS_UNDER_A_TOOL) {
    printf(PROGRAM ": under a CUDA tool: %d steps instead of %d\n", STEPS_UNDER_A_TOOL, o.steps);
    o.steps = STEPS_UNDER_A_TOOL;
  }
  CHECK_CUDA(cudaSetDevice(0));

  decoder_t m;
  decoder_init(&m, &o);
  printf(PROGRAM ": %d steps, width %d, %d heads, KV cache of %d positions\n", o.steps, o.dim,
         o.heads, o.steps);
  /* One eager step first: cuBLAS and the kernels load their modules outside every capture and
   * outside the timings. */
  decoder_reset(&m);
  enqueue_step(&m, 0, NULL, in_of(&m, 0), out_of(&m, 0));
  enqueue_step(&m, 0, m.t_dev, in_of(&m, 0), out_of(&m, 0));
  CHECK_CUDA(decode_advance(m.t_dev, m.stream));
  CHECK_CUDA(cudaStreamSynchronize(m.stream));

  outcome_t outcomes[WAYS];
  memset(outcomes, 0, sizeof outcomes);
  int reference = -1;
  bool all_same = true;
  for (int w = 0; w < WAYS; w++) {
    if (!o.ways[w]) continue;
    run_way(&m, w, o.steps, &outcomes[w]);
    if (reference < 0) reference = w;
  }
  size_t history_bytes = (size_t)o.dim * (size_t)o.steps * sizeof(float);
  printf("\n%-30s %12s %15s %10s %18s\n", "way", "steps/s", "host us/step", "identical",
         "checksum");
  for (int w = 0; w < WAYS; w++) {
    if (!outcomes[w].ran) continue;
    bool same =
        w == reference || same_outputs(&outcomes[reference], &outcomes[w], &m, WAY_NAMES[w]);
    all_same = all_same && same;
    printf("%-30s %12.0f %15.2f %10s   %016" PRIx64 "\n", WAY_TITLES[w],
           outcomes[w].steps_per_second, outcomes[w].host_us_per_step,
           w == reference ? "reference"
           : same         ? "yes"
                          : "NO",
           checksum(outcomes[w].history, history_bytes));
  }
  printf("\n%s\n", all_same ? "all ways give the same outputs bit for bit at every step"
                            : "THE WAYS DISAGREE (see above)");

  for (int w = 0; w < WAYS; w++) {
    free(outcomes[w].history);
    free(outcomes[w].k_cache);
    free(outcomes[w].v_cache);
    free(outcomes[w].state);
  }
  decoder_destroy(&m);
  CHECK_RECAP(recap_memory_check());
  /* Every buffer is back in recap's cache: give the cached segments back to the device, so
   * that nothing the example reserved outlives it. */
  CHECK_RECAP(recap_empty_cache());
  return all_same ? 0 : 1;
}
