/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * solver — a Jacobi solver whose loop runs on the GPU, with recap's regions.
 *
 * -Δu = f on the n x n interior points of the unit square, u = 0 on the boundary, the 5-point
 * stencil. One Jacobi iteration is three kernels (kernels.h): a sweep that writes the update
 * and the per-block maxima of the residual |f + Δ_h u|, a one-block reduction of the maxima
 * into *residual, and a copy of the update back into u. The solve stops when the residual is at
 * most tol, or after max iterations. Ways, all in one run:
 *
 *   (a) eager       the host launches every iteration and copies the residual back each time;
 *   (b) per-iter    one recap graph holding one iteration, replayed by the host; the residual
 *                   is copied back after every replay;
 *   (c) while       the whole solve as one recap graph: a WHILE region whose body is the
 *                   iteration followed by recap_cond_compare (residual > tol, with an iteration
 *                   counter against max): one replay, no host round trip per iteration;
 *   (d) while/U     the same through recap_loop_capture with the check every U iterations;
 *   (d') host/U     its host-loop counterpart: U eager iterations, then the residual copied
 *                   back and checked.
 *
 * (a), (b) and (c) must give the same iterate bit for bit and the same iteration count; (d)
 * must equal (d'). --host-loop captures the regions with RECAP_REGIONS_HOST (the host-loop
 * path of region.h): the results must not change. --bench prints µs per iteration per way.
 *
 *     solver [--n N] [--tol T] [--max-iterations M] [--unroll U] [--host-loop] [--bench]
 *
 * Exit status: 0 the ways agree; 1 a failure or a disagreement; 2 a bad command line; 77 no
 * CUDA device (the test runner's "skipped").
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "kernels.h"
#include "recap.h"

#define PROGRAM "solver"
#include "example_check.h"
#include "example_args.h"
enum { EXIT_BAD_USAGE = 2, EXIT_NO_DEVICE = 77, ITERATIONS_UNDER_A_TOOL = 64, BENCH_REPEATS = 5 };
enum { WAY_EAGER, WAY_PER_ITERATION, WAY_WHILE, WAY_UNROLLED, WAY_HOST_EVERY_U, WAYS };
static const char *const WAY_TITLES[WAYS] = {"(a) eager, residual read every iteration",
                                             "(b) graph per iteration, host loop",
                                             "(c) one graph, WHILE region",
                                             "(d) one graph, WHILE checked every U",
                                             "(d') eager, host checks every U"};

/* ==========================================================================================
 * Failing clearly
 * ======================================================================================== */

/* A kernel launcher's error as a recap status, for the callbacks of recap_loop_capture. */
static recap_status_t from_cuda(cudaError_t error, const char *what) {
  if (error == cudaSuccess) return RECAP_SUCCESS;
  return recap_set_last_error(RECAP_ERROR_CUDA, "%s: %s", what, cudaGetErrorName(error));
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ==========================================================================================
 * Options
 * ======================================================================================== */

typedef struct options {
  int n, unroll;
  long max_iterations;
  double tol;
  bool host_loop, bench;
} options_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: " PROGRAM
          " [options]\n"
          "\n"
          "A Jacobi solver for -Laplace(u) = f on an n x n grid, run with a host loop, with a\n"
          "graph per iteration, and as one graph whose loop runs on the GPU (a WHILE region,\n"
          "checked every iteration or every U iterations); the iterates are compared bit for\n"
          "bit.\n"
          "\n"
          "  --n N              interior points per side, 2 to 4096 (default 128)\n"
          "  --tol T            stop when the residual max|f + Laplace(u)| <= T (default 1e-2)\n"
          "  --max-iterations M stop after M iterations at most, 1 to 10000000 (default 100000)\n"
          "  --unroll U         iterations per check of way (d), 1 to 1024 (default 8)\n"
          "  --host-loop        capture the regions as a host loop (RECAP_REGIONS_HOST)\n"
          "  --bench            print microseconds per iteration of each way (5 runs each)\n"
          "  -h, --help         this text\n"
          "\n"
          "Exit status: 0 the ways agree; 1 a failure or a disagreement; 2 a bad command\n"
          "line; 77 no CUDA device.\n");
}

static bool parse_tol(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || end == s || !(v > 0.0) || !isfinite(v)) return false;
  *out = v;
  return true;
}

/* Returns -1 to go on, or an exit status. */
static int parse_args(int argc, char **argv, options_t *o) {
  enum { OPT_N = 256, OPT_TOL, OPT_MAX, OPT_UNROLL, OPT_HOST_LOOP, OPT_BENCH };
  static const struct option options[] = {
      {"n", required_argument, NULL, OPT_N},
      {"tol", required_argument, NULL, OPT_TOL},
      {"max-iterations", required_argument, NULL, OPT_MAX},
      {"unroll", required_argument, NULL, OPT_UNROLL},
      {"host-loop", no_argument, NULL, OPT_HOST_LOOP},
      {"bench", no_argument, NULL, OPT_BENCH},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  *o = (options_t){.n = 128, .unroll = 8, .max_iterations = 100000, .tol = 1e-2};
  long v = 0;
  int c, index = 0;
  opterr = 0; /* the messages below name the program and the option */
  while ((c = getopt_long(argc, argv, ":h", options, &index)) != -1) {
    const char *arg = optarg;
    switch (c) {
      case OPT_N:
        if (!example_parse_long(arg, 2, 4096, &v)) goto bad_value;
        o->n = (int)v;
        break;
      case OPT_TOL:
        if (!parse_tol(arg, &o->tol)) goto bad_value;
        break;
      case OPT_MAX:
        if (!example_parse_long(arg, 1, 10000000, &o->max_iterations)) goto bad_value;
        break;
      case OPT_UNROLL:
        if (!example_parse_long(arg, 1, 1024, &v)) goto bad_value;
        o->unroll = (int)v;
        break;
      case OPT_HOST_LOOP: o->host_loop = true; break;
      case OPT_BENCH: o->bench = true; break;
      case 'h': usage(stdout); return 0;
      default: return example_option_error(PROGRAM, c, argv, optind, usage);
    }
    continue;
  bad_value:
    return example_bad_value(PROGRAM, arg, options[index].name);
  }
  if (optind < argc) return example_extra_argument(PROGRAM, argv[optind]);
  return -1;
}

/* ==========================================================================================
 * The problem and one iteration
 * ======================================================================================== */

typedef struct solver {
  int n, partials, unroll;
  float tol;               /* the threshold as the device compares it (a float) */
  uint32_t max_iterations; /* (a) to (c) */
  uint32_t max_checks;     /* (d), (d'): checks of U iterations, ceil(max / U) */
  recap_regions_mode_t regions;
  cudaStream_t stream;
  float *u, *v, *f, *partial, *residual;
  uint32_t *iterations; /* iterations done, counted by solver_reduce */
  uint32_t *checks;     /* recap_cond_compare's counter */
  float *host_residual; /* pinned: the word (a), (b) and (d') read back */
} solver_t;

static void solver_init(solver_t *s, const options_t *o) {
  memset(s, 0, sizeof *s);
  s->n = o->n;
  s->partials = solver_partials(o->n);
  s->unroll = o->unroll;
  s->tol = (float)o->tol;
  s->max_iterations = (uint32_t)o->max_iterations;
  s->max_checks = (uint32_t)((o->max_iterations + o->unroll - 1) / o->unroll);
  s->regions = o->host_loop ? RECAP_REGIONS_HOST : RECAP_REGIONS_AUTO;
  size_t grid = (size_t)o->n * (size_t)o->n * sizeof(float);
  CHECK_CUDA(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaMalloc((void **)&s->u, grid));
  CHECK_CUDA(cudaMalloc((void **)&s->v, grid));
  CHECK_CUDA(cudaMalloc((void **)&s->f, grid));
  CHECK_CUDA(cudaMalloc((void **)&s->partial, (size_t)s->partials * sizeof(float)));
  CHECK_CUDA(cudaMalloc((void **)&s->residual, sizeof(float)));
  CHECK_CUDA(cudaMalloc((void **)&s->iterations, sizeof(uint32_t)));
  CHECK_CUDA(cudaMalloc((void **)&s->checks, sizeof(uint32_t)));
  CHECK_CUDA(cudaMallocHost((void **)&s->host_residual, sizeof(float)));
  CHECK_CUDA(solver_kernels_load());
  CHECK_CUDA(solver_fill_rhs(s->f, s->n, s->stream));
  CHECK_CUDA(cudaStreamSynchronize(s->stream));
}

static void solver_destroy(solver_t *s) {
  CHECK_CUDA(cudaStreamSynchronize(s->stream));
  CHECK_CUDA(cudaFree(s->u));
  CHECK_CUDA(cudaFree(s->v));
  CHECK_CUDA(cudaFree(s->f));
  CHECK_CUDA(cudaFree(s->partial));
  CHECK_CUDA(cudaFree(s->residual));
  CHECK_CUDA(cudaFree(s->iterations));
  CHECK_CUDA(cudaFree(s->checks));
  CHECK_CUDA(cudaFreeHost(s->host_residual));
  CHECK_CUDA(cudaStreamDestroy(s->stream));
}

/* u = 0 and the counters at 0, enqueued on stream (captured at the top of the one-graph ways,
 * so that every replay is a whole solve). */
static void enqueue_reset(const solver_t *s, cudaStream_t stream) {
  CHECK_CUDA(cudaMemsetAsync(s->u, 0, (size_t)s->n * (size_t)s->n * sizeof(float), stream));
  CHECK_CUDA(cudaMemsetAsync(s->iterations, 0, sizeof(uint32_t), stream));
  CHECK_CUDA(cudaMemsetAsync(s->checks, 0, sizeof(uint32_t), stream));
}

static cudaError_t enqueue_iteration(const solver_t *s, cudaStream_t stream) {
  cudaError_t e = solver_sweep(s->u, s->v, s->f, s->partial, s->n, stream);
  if (e == cudaSuccess)
    e = solver_reduce(s->partial, s->partials, s->residual, s->iterations, stream);
  if (e == cudaSuccess) e = solver_copy(s->u, s->v, s->n, stream);
  return e;
}

/* The residual of the last iteration enqueued, copied back (a synchronisation). */
static float read_residual(const solver_t *s) {
  CHECK_CUDA(cudaMemcpyAsync(s->host_residual, s->residual, sizeof(float), cudaMemcpyDeviceToHost,
                             s->stream));
  CHECK_CUDA(cudaStreamSynchronize(s->stream));
  return *s->host_residual;
}

/* The host's decision after `done` iterations (or checks) with residual r; the same test as
 * recap_cond_compare's: r > tol && done < max. */
static bool go_on(const solver_t *s, float r, uint32_t done, uint32_t max) {
  return r > s->tol && done < max;
}

/* ==========================================================================================
 * The ways
 * ======================================================================================== */

static void run_eager(solver_t *s) {
  enqueue_reset(s, s->stream);
  uint32_t done = 0;
  do {
    CHECK_CUDA(enqueue_iteration(s, s->stream));
    done++;
  } while (go_on(s, read_residual(s), done, s->max_iterations));
}

static void run_host_every_u(solver_t *s) {
  enqueue_reset(s, s->stream);
  uint32_t checks = 0;
  do {
    for (int k = 0; k < s->unroll; k++) CHECK_CUDA(enqueue_iteration(s, s->stream));
    checks++;
  } while (go_on(s, read_residual(s), checks, s->max_checks));
}

static recap_graph_t begin_capture(const solver_t *s) {
  recap_graph_t g;
  CHECK_RECAP(recap_graph_create(&g, 0));
  recap_capture_options_t options = RECAP_CAPTURE_OPTIONS_INIT;
  options.regions = s->regions;
  CHECK_RECAP(recap_graph_capture_begin(g, &options, s->stream));
  return g;
}

/* (b): the graph is captured once, before the clock starts (see run_way). */
static void run_per_iteration(solver_t *s, recap_graph_t g) {
  enqueue_reset(s, s->stream);
  uint32_t done = 0;
  do {
    CHECK_RECAP(recap_graph_replay(g, s->stream));
    done++;
  } while (go_on(s, read_residual(s), done, s->max_iterations));
}

static recap_graph_t capture_per_iteration(const solver_t *s) {
  recap_graph_t g = begin_capture(s);
  CHECK_CUDA(enqueue_iteration(s, s->stream));
  CHECK_RECAP(recap_graph_capture_end(g));
  return g;
}

/* (c): reset, then WHILE (residual > tol && ++checks < max) { iteration }. The condition starts
 * at 1: the first iteration always runs, as in the host loops. */
static recap_graph_t capture_while(const solver_t *s) {
  recap_graph_t g = begin_capture(s);
  enqueue_reset(s, s->stream);
  recap_cond_t more;
  CHECK_RECAP(recap_cond_create(&more, 1, s->stream));
  CHECK_RECAP(recap_region_begin(RECAP_REGION_WHILE, more, 1, s->stream));
  CHECK_CUDA(enqueue_iteration(s, s->stream));
  recap_cond_compare_t c = RECAP_COND_COMPARE_INIT;
  c.value = s->residual;
  c.dtype = RECAP_COND_F32;
  c.op = RECAP_COND_GT;
  c.threshold = (double)s->tol;
  c.iterations = s->checks;
  c.max_iterations = s->max_iterations;
  CHECK_RECAP(recap_cond_compare(more, &c, s->stream));
  CHECK_RECAP(recap_region_end(s->stream));
  CHECK_RECAP(recap_graph_capture_end(g));
  return g;
}

static recap_status_t loop_step(void *ctx, recap_stream_t stream, unsigned copy) {
  (void)copy; /* every copy of the step is the same iteration */
  return from_cuda(enqueue_iteration(ctx, stream), "enqueue_iteration");
}

static recap_status_t loop_check(void *ctx, recap_cond_t cond, recap_stream_t stream) {
  const solver_t *s = ctx;
  recap_cond_compare_t c = RECAP_COND_COMPARE_INIT;
  c.value = s->residual;
  c.threshold = (double)s->tol;
  c.iterations = s->checks;
  c.max_iterations = s->max_checks;
  return recap_cond_compare(cond, &c, stream);
}

/* (d): reset, then recap_loop_capture: U iterations and one check per trip through the loop. */
static recap_graph_t capture_unrolled(solver_t *s) {
  recap_graph_t g = begin_capture(s);
  enqueue_reset(s, s->stream);
  recap_loop_t loop = RECAP_LOOP_INIT;
  loop.step = loop_step;
  loop.check = loop_check;
  loop.ctx = s;
  loop.unroll = (unsigned)s->unroll;
  CHECK_RECAP(recap_loop_capture(&loop, s->stream));
  CHECK_RECAP(recap_graph_capture_end(g));
  return g;
}

static void check_path(const solver_t *s, recap_graph_t g, const char *way) {
  int on_device = -1;
  CHECK_RECAP(recap_graph_regions_on_device(g, &on_device));
  if (s->regions == RECAP_REGIONS_HOST && on_device != 0)
    die("%s: captured with RECAP_REGIONS_HOST, but recap_graph_regions_on_device says %d", way,
        on_device);
}

/* What a way leaves behind. */
typedef struct outcome {
  uint32_t iterations; /* counted on the device by solver_reduce */
  float residual;
  float *u; /* host copy of the iterate */
  double us_per_iteration;
  bool ran;
} outcome_t;

static void collect(const solver_t *s, outcome_t *out) {
  size_t grid = (size_t)s->n * (size_t)s->n * sizeof(float);
  if (!out->u) out->u = malloc(grid);
  if (!out->u) die("out of host memory (%zu bytes)", grid);
  CHECK_CUDA(cudaStreamSynchronize(s->stream));
  CHECK_CUDA(cudaMemcpy(out->u, s->u, grid, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(&out->iterations, s->iterations, sizeof(uint32_t), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(&out->residual, s->residual, sizeof(float), cudaMemcpyDeviceToHost));
  out->ran = true;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Runs one way `repeats` times (the graphs are captured once, outside the clock) and keeps the
 * median time per iteration, from the first launch until the solve is done on the GPU. */
static void run_way(solver_t *s, int way, int repeats, outcome_t *out) {
  recap_graph_t g = NULL;
  if (way == WAY_PER_ITERATION) g = capture_per_iteration(s);
  if (way == WAY_WHILE) g = capture_while(s);
  if (way == WAY_UNROLLED) g = capture_unrolled(s);
  if (g && way != WAY_PER_ITERATION) check_path(s, g, WAY_TITLES[way]);
  double samples[BENCH_REPEATS];
  for (int r = 0; r < repeats; r++) {
    CHECK_CUDA(cudaStreamSynchronize(s->stream));
    uint64_t start = now_ns();
    switch (way) {
      case WAY_EAGER: run_eager(s); break;
      case WAY_PER_ITERATION: run_per_iteration(s, g); break;
      case WAY_HOST_EVERY_U: run_host_every_u(s); break;
      default: CHECK_RECAP(recap_graph_replay(g, s->stream)); break;
    }
    CHECK_CUDA(cudaStreamSynchronize(s->stream));
    uint64_t elapsed = now_ns() - start;
    collect(s, out);
    samples[r] = (double)elapsed / 1e3 / (out->iterations ? out->iterations : 1);
  }
  qsort(samples, (size_t)repeats, sizeof samples[0], compare_doubles);
  out->us_per_iteration = samples[repeats / 2];
  if (g) CHECK_RECAP(recap_graph_destroy(g));
}

/* ==========================================================================================
 * Comparing the ways
 * ======================================================================================== */

/* Whether b equals a bit for bit (iterate and iteration count); if not, says where. */
static bool same_result(const outcome_t *a, const outcome_t *b, int n, const char *name,
                        const char *reference) {
  if (a->iterations != b->iterations) {
    printf("  %s ran %u iterations, %s %u\n", name, b->iterations, reference, a->iterations);
    return false;
  }
  size_t count = (size_t)n * (size_t)n;
  if (memcmp(a->u, b->u, count * sizeof(float)) == 0) return true;
  size_t k = 0;
  while (memcmp(&a->u[k], &b->u[k], sizeof(float)) == 0) k++;
  printf("  %s: the iterate differs from %s first at point (%zu, %zu): %.9g, %.9g there\n", name,
         reference, k / (size_t)n, k % (size_t)n, (double)b->u[k], (double)a->u[k]);
  return false;
}

static bool under_a_tool(void) {
  /* Under a CUDA tool (RECAP_UNDER_TOOL=1, as tools/gpu-check sets for compute-sanitizer, or a
   * profiler's injected library) every launch costs milliseconds: the solve is cut short. */
  const char *flag = getenv("RECAP_UNDER_TOOL"), *injected = getenv("CUDA_INJECTION64_PATH");
  return (flag && strcmp(flag, "1") == 0) || (injected && *injected);
}

static void print_table(const outcome_t *outcomes, bool bench, const bool *agrees) {
  printf("\n%-42s %10s %12s %10s", "way", "iterations", "residual", "agrees");
  if (bench) printf(" %12s %10s", "us/iteration", "vs (a)");
  printf("\n");
  for (int w = 0; w < WAYS; w++) {
    const outcome_t *o = &outcomes[w];
    const char *verdict = w == WAY_EAGER          ? "reference"
                          : w == WAY_HOST_EVERY_U ? "reference"
                          : agrees[w]             ? "yes"
                                                  : "NO";
    printf("%-42s %10u %12.6g %10s", WAY_TITLES[w], o->iterations, (double)o->residual, verdict);
    if (bench)
      printf(" %12.3f %9.2fx", o->us_per_iteration,
             outcomes[WAY_EAGER].us_per_iteration / o->us_per_iteration);
    printf("\n");
  }
}

static void report_path(const solver_t *s) {
  int supported = 0;
  CHECK_RECAP(recap_device_conditional_nodes(&supported));
  printf(PROGRAM ": conditional nodes on this driver: %s; regions captured %s\n",
         supported ? "yes" : "no",
         s->regions == RECAP_REGIONS_HOST ? "as a host loop (--host-loop)"
         : supported                      ? "as conditional nodes"
                                          : "as a host loop (no conditional nodes)");
}

int main(int argc, char **argv) {
  options_t o;
  int code = parse_args(argc, argv, &o);
  if (code >= 0) return code;

  int devices = 0;
  if (recap_device_count(&devices) != RECAP_SUCCESS || devices < 1) {
    printf(PROGRAM ": this example needs a CUDA device (%s)\n",
           recap_last_error()[0] ? recap_last_error() : "none found");
    return EXIT_NO_DEVICE;
  }
  if (under_a_tool() && o.max_iterations > ITERATIONS_UNDER_A_TOOL) {
    printf(PROGRAM ": under a CUDA tool: at most %d iterations instead of %ld\n",
           ITERATIONS_UNDER_A_TOOL, o.max_iterations);
    o.max_iterations = ITERATIONS_UNDER_A_TOOL;
    o.bench = false;
  }
  CHECK_CUDA(cudaSetDevice(0));

  solver_t s;
  solver_init(&s, &o);
  printf(PROGRAM ": %d x %d grid, tol %g, at most %ld iterations, check every %d in (d)\n", o.n,
         o.n, o.tol, o.max_iterations, o.unroll);
  report_path(&s);

  outcome_t outcomes[WAYS];
  memset(outcomes, 0, sizeof outcomes);
  for (int w = 0; w < WAYS; w++) run_way(&s, w, o.bench ? BENCH_REPEATS : 1, &outcomes[w]);

  bool agrees[WAYS] = {true, false, false, false, true};
  const char *ref = "(a)", *ref_u = "(d')";
  agrees[WAY_PER_ITERATION] =
      same_result(&outcomes[WAY_EAGER], &outcomes[WAY_PER_ITERATION], o.n, "(b)", ref);
  agrees[WAY_WHILE] = same_result(&outcomes[WAY_EAGER], &outcomes[WAY_WHILE], o.n, "(c)", ref);
  agrees[WAY_UNROLLED] =
      same_result(&outcomes[WAY_HOST_EVERY_U], &outcomes[WAY_UNROLLED], o.n, "(d)", ref_u);
  print_table(outcomes, o.bench, agrees);
  bool all = agrees[WAY_PER_ITERATION] && agrees[WAY_WHILE] && agrees[WAY_UNROLLED];
  printf("\n%s\n", all ? "(a) = (b) = (c) and (d) = (d') bit for bit, iteration counts included"
                       : "THE WAYS DISAGREE (see above)");

  for (int w = 0; w < WAYS; w++) free(outcomes[w].u);
  solver_destroy(&s);
  CHECK_RECAP(recap_memory_check());
  CHECK_RECAP(recap_empty_cache());
  return all ? 0 : 1;
}
