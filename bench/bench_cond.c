/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_cond — loops and branches on the GPU (recap/region.h) against the raw CUDA floor and
 * against host loops. Every body kernel is one thread adding one to a counter (bench/kernels.cu),
 * so the figures are the fixed costs of deciding and looping, not device work.
 *
 *   (i)   the floor, raw CUDA: a graph whose WHILE conditional node (built by hand: the handle,
 *         the node, its body captured with cudaStreamBeginCaptureToGraph) runs a body of B
 *         kernels plus a condition kernel (a countdown calling cudaGraphSetConditional), against
 *         a host loop replaying the body graph with a flag copied back and a synchronisation per
 *         iteration, and against host replays of the body with no check at all. B = 1 and 10.
 *   (ii)  recap's WHILE region over the same bodies (recap_cond_countdown), on the device path
 *         and on the host-loop path (RECAP_REGIONS_HOST): the ratio to the raw WHILE (goal
 *         <= 1.1x) and the speedup over the host loop (goal >= 2.5x at B = 1).
 *   (iii) a step of one kernel checked every 8 steps: recap_loop_capture with unroll 8 against a
 *         host loop replaying 8 steps and copying the flag back (goal >= 2x).
 *   (iv)  N tiny kernels x M iterations in one WHILE region against M host replays of a graph
 *         of the N kernels: host time per iteration (the enqueue calls) and GPU time per
 *         iteration (events around the work).
 *   (v)   SWITCH selection: a replay of a SWITCH over k branches (one kernel each; the index set
 *         on the device by recap_cond_set_from) against a replay of a graph holding only the
 *         chosen branch's kernel.
 *
 * Figures are medians over repetitions of whole loops, in µs per iteration (per replay for
 * (v)). Tables, never pass/fail; after each loop the counter must have moved by the work that
 * ran, or the benchmark says CHECK FAILED and exits with 1.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cond_kernels.h"

#define NAME "bench_cond"

enum { MAX_ENTRIES = 128, MAX_REPEATS = 15, UNROLL = 8, SWITCH_REPLAYS = 200 };
static const int bodies[] = {1, 10};
static const int wide_bodies[] = {1, 10, 50};
static const int switch_branches[] = {2, 8, 64};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ==========================================================================================
 * Results
 * ======================================================================================== */

typedef struct entry {
  const char *section, *name;
  int body;       /* kernels per iteration, or SWITCH branches in (v) */
  int iterations; /* per repetition */
  bench_stats_t wall, host, gpu;
} entry_t;

typedef struct bench {
  cudaStream_t stream;
  cudaEvent_t start, end;
  int *counter;
  uint32_t *remaining, *flag, *index, *host_flag;
  int iterations, repeats;
  int ok;
  entry_t entries[MAX_ENTRIES];
  int count;
} bench_t;

/* One timed sample: wall (until the work is done), host (the enqueue calls) and GPU (events)
 * time, each in µs per iteration. */
typedef struct sample {
  double wall, host, gpu;
} sample_t;

typedef void (*run_fn)(bench_t *b, void *ctx);

static int read_counter(bench_t *b) {
  int value = 0;
  BENCH_CUDA(cudaStreamSynchronize(b->stream));
  BENCH_CUDA(cudaMemcpy(&value, b->counter, sizeof value, cudaMemcpyDeviceToHost));
  return value;
}

/* Runs run() `repeats` times; each run must add `per_run` to the counter. Records the medians
 * per `divisor` (iterations or replays). */
static entry_t *measure(bench_t *b, const char *section, const char *name, int body, int divisor,
                        int per_run, run_fn run, void *ctx) {
  double wall[MAX_REPEATS], host[MAX_REPEATS], gpu[MAX_REPEATS];
  run(b, ctx); /* a warm-up: first launches upload the executable */
  for (int r = 0; r < b->repeats; r++) {
    int before = read_counter(b);
    BENCH_CUDA(cudaEventRecord(b->start, b->stream));
    uint64_t t0 = bench_now_ns();
    run(b, ctx);
    uint64_t t1 = bench_now_ns();
    BENCH_CUDA(cudaEventRecord(b->end, b->stream));
    BENCH_CUDA(cudaEventSynchronize(b->end));
    uint64_t t2 = bench_now_ns();
    float ms = 0.0f;
    BENCH_CUDA(cudaEventElapsedTime(&ms, b->start, b->end));
    wall[r] = (double)(t2 - t0) / 1e3 / divisor;
    host[r] = (double)(t1 - t0) / 1e3 / divisor;
    gpu[r] = (double)ms * 1e3 / divisor;
    int moved = read_counter(b) - before;
    if (moved != per_run) {
      printf("CHECK FAILED: %s (%s, %d): the counter moved by %d, expected %d\n", name, section,
             body, moved, per_run);
      b->ok = 0;
    }
  }
  if (b->count == MAX_ENTRIES) {
    fprintf(stderr, NAME ": too many results\n");
    exit(1);
  }
  entry_t *e = &b->entries[b->count++];
  memset(e, 0, sizeof *e);
  e->section = section;
  e->name = name;
  e->body = body;
  e->iterations = divisor;
  bench_stats(wall, (size_t)b->repeats, &e->wall);
  bench_stats(host, (size_t)b->repeats, &e->host);
  bench_stats(gpu, (size_t)b->repeats, &e->gpu);
  return e;
}

/* ==========================================================================================
 * Raw CUDA
 * ======================================================================================== */

static const enum cudaStreamCaptureMode MODE = cudaStreamCaptureModeThreadLocal;

/* A graph: set *remaining = iterations, then a WHILE node (handle default 1) whose body is
 * `body` increments and the raw countdown. The node is added by hand and its body captured
 * into with cudaStreamBeginCaptureToGraph, as CUDA's samples do. */
static cudaGraphExec_t raw_while(bench_t *b, int body, uint32_t iterations) {
  cudaGraph_t g, captured;
  BENCH_CUDA(cudaGraphCreate(&g, 0));
  BENCH_CUDA(cudaStreamBeginCaptureToGraph(b->stream, g, NULL, NULL, 0, MODE));
  BENCH_CUDA(bench_cond_set_word(b->remaining, iterations, b->stream));
  BENCH_CUDA(cudaStreamEndCapture(b->stream, &captured));
  cudaGraphNode_t first;
  size_t nodes = 1;
  BENCH_CUDA(cudaGraphGetNodes(g, &first, &nodes));
  cudaGraphConditionalHandle handle;
  BENCH_CUDA(cudaGraphConditionalHandleCreate(&handle, g, 1, cudaGraphCondAssignDefault));
  struct cudaGraphNodeParams params;
  memset(&params, 0, sizeof params);
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = handle;
  params.conditional.type = cudaGraphCondTypeWhile;
  params.conditional.size = 1;
  cudaGraphNode_t node;
  BENCH_CUDA(cudaGraphAddNode(&node, g, &first, NULL, 1, &params));
  BENCH_CUDA(cudaStreamBeginCaptureToGraph(b->stream, params.conditional.phGraph_out[0], NULL, NULL,
                                           0, MODE));
  for (int k = 0; k < body; k++) BENCH_CUDA(bench_launch_increment(b->stream, b->counter));
  BENCH_CUDA(bench_cond_raw_countdown(handle, b->remaining, b->stream));
  BENCH_CUDA(cudaStreamEndCapture(b->stream, &captured));
  cudaGraphExec_t exec;
  BENCH_CUDA(cudaGraphInstantiate(&exec, g, 0));
  BENCH_CUDA(cudaGraphDestroy(g));
  return exec;
}

/* A plain graph of `body` increments, followed by the flag countdown when flag is set. */
static cudaGraphExec_t raw_body(bench_t *b, int body, int flag) {
  cudaGraph_t g;
  BENCH_CUDA(cudaStreamBeginCapture(b->stream, MODE));
  for (int k = 0; k < body; k++) BENCH_CUDA(bench_launch_increment(b->stream, b->counter));
  if (flag) BENCH_CUDA(bench_cond_flag_countdown(b->remaining, b->flag, b->stream));
  BENCH_CUDA(cudaStreamEndCapture(b->stream, &g));
  cudaGraphExec_t exec;
  BENCH_CUDA(cudaGraphInstantiate(&exec, g, 0));
  BENCH_CUDA(cudaGraphDestroy(g));
  return exec;
}

typedef struct raw_ctx {
  cudaGraphExec_t exec;
  uint32_t trips; /* host loops: graph launches until the flag says stop */
} raw_ctx_t;

static void run_raw_once(bench_t *b, void *ctx) {
  BENCH_CUDA(cudaGraphLaunch(((raw_ctx_t *)ctx)->exec, b->stream));
}

/* Replays the body with its flag countdown until the flag copied back is 0. */
static void run_host_loop(bench_t *b, void *ctx) {
  raw_ctx_t *c = ctx;
  BENCH_CUDA(bench_cond_set_word(b->remaining, c->trips, b->stream));
  do {
    BENCH_CUDA(cudaGraphLaunch(c->exec, b->stream));
    BENCH_CUDA(cudaMemcpyAsync(b->host_flag, b->flag, sizeof(uint32_t), cudaMemcpyDeviceToHost,
                               b->stream));
    BENCH_CUDA(cudaStreamSynchronize(b->stream));
  } while (*b->host_flag);
}

static void run_replays(bench_t *b, void *ctx) {
  raw_ctx_t *c = ctx;
  for (uint32_t t = 0; t < c->trips; t++) BENCH_CUDA(cudaGraphLaunch(c->exec, b->stream));
}

/* ==========================================================================================
 * recap
 * ======================================================================================== */

typedef struct recap_ctx {
  recap_graph_t graph;
} recap_ctx_t;

static void run_recap_replay(bench_t *b, void *ctx) {
  BENCH_RECAP(recap_graph_replay(((recap_ctx_t *)ctx)->graph, b->stream));
}

static recap_graph_t recap_begin(bench_t *b, recap_regions_mode_t mode) {
  recap_graph_t g;
  BENCH_RECAP(recap_graph_create(&g, 0));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.regions = mode;
  BENCH_RECAP(recap_graph_capture_begin(g, &o, b->stream));
  return g;
}

/* remaining = iterations; WHILE { body increments; recap_cond_countdown }. */
static recap_graph_t recap_while(bench_t *b, int body, uint32_t iterations,
                                 recap_regions_mode_t mode) {
  recap_graph_t g = recap_begin(b, mode);
  BENCH_CUDA(bench_cond_set_word(b->remaining, iterations, b->stream));
  recap_cond_t more;
  BENCH_RECAP(recap_cond_create(&more, 1, b->stream));
  BENCH_RECAP(recap_region_begin(RECAP_REGION_WHILE, more, 1, b->stream));
  for (int k = 0; k < body; k++) BENCH_CUDA(bench_launch_increment(b->stream, b->counter));
  BENCH_RECAP(recap_cond_countdown(more, b->remaining, b->stream));
  BENCH_RECAP(recap_region_end(b->stream));
  BENCH_RECAP(recap_graph_capture_end(g));
  return g;
}

/* recap_loop_capture's callbacks; ctx is the bench_t. */
static recap_status_t loop_step(void *ctx, recap_stream_t stream, unsigned copy) {
  (void)copy;
  cudaError_t e = bench_launch_increment(stream, ((bench_t *)ctx)->counter);
  if (e == cudaSuccess) return RECAP_SUCCESS;
  return recap_set_last_error(RECAP_ERROR_CUDA, "bench_launch_increment: %s", cudaGetErrorName(e));
}

static recap_status_t loop_check(void *ctx, recap_cond_t cond, recap_stream_t stream) {
  return recap_cond_countdown(cond, ((bench_t *)ctx)->remaining, stream);
}

/* remaining = trips; recap_loop_capture(then the countdown, unroll U: U increments). */
static recap_graph_t recap_unrolled(bench_t *b, uint32_t trips) {
  recap_graph_t g = recap_begin(b, RECAP_REGIONS_AUTO);
  BENCH_CUDA(bench_cond_set_word(b->remaining, trips, b->stream));
  recap_loop_t loop = RECAP_LOOP_INIT;
  loop.step = loop_step;
  loop.check = loop_check;
  loop.ctx = b;
  loop.unroll = UNROLL;
  BENCH_RECAP(recap_loop_capture(&loop, b->stream));
  BENCH_RECAP(recap_graph_capture_end(g));
  return g;
}

/* ==========================================================================================
 * The sections
 * ======================================================================================== */

static double median_of(const bench_t *b, const char *section, const char *name, int body) {
  for (int i = 0; i < b->count; i++) {
    const entry_t *e = &b->entries[i];
    if (strcmp(e->section, section) == 0 && strcmp(e->name, name) == 0 && e->body == body)
      return e->wall.median;
  }
  return 0.0;
}

static void section_floor_and_recap(bench_t *b) {
  uint32_t m = (uint32_t)b->iterations;
  for (int i = 0; i < COUNT(bodies); i++) {
    int body = bodies[i];
    raw_ctx_t c = {raw_while(b, body, m), 1};
    measure(b, "i", "raw WHILE node", body, (int)m, body * (int)m, run_raw_once, &c);
    BENCH_CUDA(cudaGraphExecDestroy(c.exec));
    c = (raw_ctx_t){raw_body(b, body, 1), m};
    measure(b, "i", "host loop, flag + sync", body, (int)m, body * (int)m, run_host_loop, &c);
    BENCH_CUDA(cudaGraphExecDestroy(c.exec));
    c = (raw_ctx_t){raw_body(b, body, 0), m};
    measure(b, "i", "host replays, no check", body, (int)m, body * (int)m, run_replays, &c);
    BENCH_CUDA(cudaGraphExecDestroy(c.exec));

    recap_ctx_t r = {recap_while(b, body, m, RECAP_REGIONS_AUTO)};
    measure(b, "ii", "recap WHILE region", body, (int)m, body * (int)m, run_recap_replay, &r);
    BENCH_RECAP(recap_graph_destroy(r.graph));
    r.graph = recap_while(b, body, m, RECAP_REGIONS_HOST);
    measure(b, "ii", "recap WHILE, host-loop path", body, (int)m, body * (int)m, run_recap_replay,
            &r);
    BENCH_RECAP(recap_graph_destroy(r.graph));
  }
}

static void section_unrolled(bench_t *b) {
  uint32_t trips = (uint32_t)b->iterations / UNROLL, steps = trips * UNROLL;
  recap_ctx_t r = {recap_unrolled(b, trips)};
  measure(b, "iii", "recap_loop_capture, U = 8", 1, (int)steps, (int)steps, run_recap_replay, &r);
  BENCH_RECAP(recap_graph_destroy(r.graph));
  raw_ctx_t c = {raw_body(b, UNROLL, 1), trips};
  measure(b, "iii", "host loop, check every 8", 1, (int)steps, (int)steps, run_host_loop, &c);
  BENCH_CUDA(cudaGraphExecDestroy(c.exec));
}

static recap_graph_t recap_plain(bench_t *b, int body) {
  recap_graph_t g = recap_begin(b, RECAP_REGIONS_AUTO);
  for (int k = 0; k < body; k++) BENCH_CUDA(bench_launch_increment(b->stream, b->counter));
  BENCH_RECAP(recap_graph_capture_end(g));
  return g;
}

typedef struct replays_ctx {
  recap_graph_t graph;
  int replays;
} replays_ctx_t;

static void run_recap_replays(bench_t *b, void *ctx) {
  replays_ctx_t *c = ctx;
  for (int k = 0; k < c->replays; k++) BENCH_RECAP(recap_graph_replay(c->graph, b->stream));
}

static void section_wide(bench_t *b) {
  uint32_t m = (uint32_t)b->iterations;
  for (int i = 0; i < COUNT(wide_bodies); i++) {
    int n = wide_bodies[i];
    recap_ctx_t r = {recap_while(b, n, m, RECAP_REGIONS_AUTO)};
    measure(b, "iv", "WHILE region, M iterations", n, (int)m, n * (int)m, run_recap_replay, &r);
    BENCH_RECAP(recap_graph_destroy(r.graph));
    replays_ctx_t c = {recap_plain(b, n), (int)m};
    measure(b, "iv", "M host replays", n, (int)m, n * (int)m, run_recap_replays, &c);
    BENCH_RECAP(recap_graph_destroy(c.graph));
  }
}

/* cond = *index; SWITCH over k branches, one increment each. */
static recap_graph_t recap_switch(bench_t *b, int k) {
  recap_graph_t g = recap_begin(b, RECAP_REGIONS_AUTO);
  recap_cond_t which;
  BENCH_RECAP(recap_cond_create(&which, 0, b->stream));
  BENCH_RECAP(recap_cond_set_from(which, b->index, b->stream));
  BENCH_RECAP(recap_region_begin(RECAP_REGION_SWITCH, which, (unsigned)k, b->stream));
  for (int branch = 0; branch < k; branch++) {
    if (branch > 0) BENCH_RECAP(recap_region_next_branch(b->stream));
    BENCH_CUDA(bench_launch_increment(b->stream, b->counter));
  }
  BENCH_RECAP(recap_region_end(b->stream));
  BENCH_RECAP(recap_graph_capture_end(g));
  return g;
}

static void section_switch(bench_t *b) {
  for (int i = 0; i < COUNT(switch_branches); i++) {
    int k = switch_branches[i];
    uint32_t chosen = (uint32_t)(k - 1); /* the last branch */
    BENCH_CUDA(cudaMemcpy(b->index, &chosen, sizeof chosen, cudaMemcpyHostToDevice));
    replays_ctx_t c = {recap_switch(b, k), SWITCH_REPLAYS};
    measure(b, "v", "SWITCH over k branches", k, SWITCH_REPLAYS, SWITCH_REPLAYS, run_recap_replays,
            &c);
    BENCH_RECAP(recap_graph_destroy(c.graph));
    c.graph = recap_plain(b, 1);
    measure(b, "v", "the chosen branch alone", k, SWITCH_REPLAYS, SWITCH_REPLAYS, run_recap_replays,
            &c);
    BENCH_RECAP(recap_graph_destroy(c.graph));
  }
}

/* ==========================================================================================
 * Output
 * ======================================================================================== */

static void print_section(const bench_t *b, const char *section, const char *title, int host_gpu) {
  printf("\n(%s) %s\n", section, title);
  if (host_gpu)
    printf("  %-32s %6s %14s %14s %14s\n", "way", "N", "wall us/it", "host us/it", "GPU us/it");
  else
    printf("  %-32s %6s %14s %10s %10s\n", "way", "body", "us/iteration", "p10", "p90");
  for (int i = 0; i < b->count; i++) {
    const entry_t *e = &b->entries[i];
    if (strcmp(e->section, section) != 0) continue;
    if (host_gpu)
      printf("  %-32s %6d %14.3f %14.3f %14.3f\n", e->name, e->body, e->wall.median, e->host.median,
             e->gpu.median);
    else
      printf("  %-32s %6d %14.3f %10.3f %10.3f\n", e->name, e->body, e->wall.median, e->wall.p10,
             e->wall.p90);
  }
}

static void print_ratios(const bench_t *b) {
  printf("\nratios (medians)\n");
  for (int i = 0; i < COUNT(bodies); i++) {
    int body = bodies[i];
    double raw = median_of(b, "i", "raw WHILE node", body);
    double host = median_of(b, "i", "host loop, flag + sync", body);
    double region = median_of(b, "ii", "recap WHILE region", body);
    printf(
        "  body %2d: recap WHILE / raw WHILE %.2fx (goal <= 1.1x); host loop / recap WHILE "
        "%.2fx%s; host loop / raw WHILE %.2fx\n",
        body, region / raw, host / region, body == 1 ? " (goal >= 2.5x)" : "", host / raw);
  }
  double unrolled = median_of(b, "iii", "recap_loop_capture, U = 8", 1);
  double every8 = median_of(b, "iii", "host loop, check every 8", 1);
  printf("  U = 8: host loop checking every 8 / recap_loop_capture %.2fx (goal >= 2x)\n",
         every8 / unrolled);
}

static void print_switch(const bench_t *b) {
  printf("\n(v) SWITCH selection, per replay (%d replays back to back)\n", SWITCH_REPLAYS);
  printf("  %-32s %6s %14s %14s\n", "way", "k", "host us", "GPU us");
  for (int i = 0; i < b->count; i++) {
    const entry_t *e = &b->entries[i];
    if (strcmp(e->section, "v") == 0)
      printf("  %-32s %6d %14.3f %14.3f\n", e->name, e->body, e->host.median, e->gpu.median);
  }
}

static int write_json(const char *path, int quick, const bench_t *b) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, NAME ": cannot write %s\n", path);
    return 0;
  }
  fprintf(f, "{\n  \"benchmark\": \"" NAME "\", ");
  bench_device_json(f);
  fprintf(f,
          ",\n  \"quick\": %s, \"checks_passed\": %s, \"unit\": \"us per iteration\", "
          "\"iterations\": %d, \"unroll\": %d,\n  \"results\": [\n",
          quick ? "true" : "false", b->ok ? "true" : "false", b->iterations, UNROLL);
  for (int i = 0; i < b->count; i++) {
    const entry_t *e = &b->entries[i];
    fprintf(f, "    {\"section\": \"%s\", \"way\": \"%s\", \"body\": %d, \"per\": %d,", e->section,
            e->name, e->body, e->iterations);
    fprintf(f, "\n     \"wall_us\": ");
    bench_stats_json(f, &e->wall);
    fprintf(f, ",\n     \"host_us\": ");
    bench_stats_json(f, &e->host);
    fprintf(f, ",\n     \"gpu_us\": ");
    bench_stats_json(f, &e->gpu);
    fprintf(f, "}%s\n", i + 1 < b->count ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
  return fclose(f) == 0;
}

static void setup(bench_t *b, int quick) {
  memset(b, 0, sizeof *b);
  b->ok = 1;
  b->iterations = quick ? 200 : 2000;
  b->repeats = quick ? 3 : MAX_REPEATS;
  BENCH_CUDA(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
  BENCH_CUDA(cudaEventCreate(&b->start));
  BENCH_CUDA(cudaEventCreate(&b->end));
  BENCH_CUDA(cudaMalloc((void **)&b->counter, sizeof(int)));
  BENCH_CUDA(cudaMemset(b->counter, 0, sizeof(int)));
  BENCH_CUDA(cudaMalloc((void **)&b->remaining, sizeof(uint32_t)));
  BENCH_CUDA(cudaMalloc((void **)&b->flag, sizeof(uint32_t)));
  BENCH_CUDA(cudaMalloc((void **)&b->index, sizeof(uint32_t)));
  BENCH_CUDA(cudaMallocHost((void **)&b->host_flag, sizeof(uint32_t)));
}

static void teardown(bench_t *b) {
  BENCH_CUDA(cudaStreamSynchronize(b->stream));
  BENCH_CUDA(cudaFree(b->counter));
  BENCH_CUDA(cudaFree(b->remaining));
  BENCH_CUDA(cudaFree(b->flag));
  BENCH_CUDA(cudaFree(b->index));
  BENCH_CUDA(cudaFreeHost(b->host_flag));
  BENCH_CUDA(cudaEventDestroy(b->start));
  BENCH_CUDA(cudaEventDestroy(b->end));
  BENCH_CUDA(cudaStreamDestroy(b->stream));
}

int main(int argc, char **argv) {
  bench_args_t args;
  int started = bench_start(argc, argv, NAME, &args);
  if (started >= 0) return started;
  int supported = 0;
  BENCH_RECAP(recap_device_conditional_nodes(&supported));
  if (!supported) {
    printf(NAME ": the driver runs no conditional nodes: nothing to compare\n");
    return 0;
  }

  static bench_t b;
  setup(&b, args.quick);
  printf("%d iterations per loop, %d repetitions, medians in us per iteration\n", b.iterations,
         b.repeats);
  section_floor_and_recap(&b);
  section_unrolled(&b);
  section_wide(&b);
  section_switch(&b);

  print_section(&b, "i", "the floor, raw CUDA: WHILE node vs host loops", 0);
  print_section(&b, "ii", "recap's WHILE region, same bodies", 0);
  print_section(&b, "iii", "checked every 8 steps (1-kernel step)", 0);
  print_ratios(&b);
  print_section(&b, "iv", "N tiny kernels x M: WHILE region vs M host replays", 1);
  print_switch(&b);

  int written = write_json(args.json_path, args.quick, &b);
  if (written) printf("\nresults: %s\n", args.json_path);
  teardown(&b);
  if (!b.ok) printf("CHECK FAILED (see above)\n");
  return b.ok && written ? 0 : 1;
}
