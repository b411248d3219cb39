/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_graph — host cost of graph replay and of capture + instantiate, recap against raw CUDA.
 *
 * For graphs of N = 1, 10, 100 and 1000 one-thread kernels chained on one stream:
 *
 *   replay   the CPU time of recap_graph_replay(g, s) against a bare cudaGraphLaunch(exec, s) of
 *            the same executable (recap_graph_raw_exec), so the two differ only by recap's own
 *            work. Launches are timed in batches (one clock read per batch), the stream is
 *            synchronised between batches so the launch queue never fills, and batches of the
 *            two variants alternate, A B B A A B..., so drift in clocks or load hits both alike.
 *   capture  recap_graph_create + capture_begin + N launches + capture_end (which instantiates
 *            and drops the template) against cudaStreamBeginCapture + N launches +
 *            cudaStreamEndCapture + cudaGraphInstantiateWithFlags(AutoFreeOnLaunch |
 *            UseNodePriority) + cudaGraphDestroy: the same work recap does for the user.
 *            Destroying the executables is left out of both.
 *
 * recap's targets: replay <= 1.05x a bare launch, capture + instantiate <= 1.1x raw CUDA.
 * Every graph adds one to a device counter per kernel; the counter is checked after the replays.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define NAME "bench_graph"
#define REPLAY_TARGET 1.05
#define CAPTURE_TARGET 1.10

static const int sizes[] = {1, 10, 100, 1000};
enum { SIZE_COUNT = sizeof sizes / sizeof sizes[0] };

typedef struct replay_result {
  int n, batch, batches;
  bench_stats_t raw, recap;
} replay_result_t;

typedef struct capture_result {
  int n, reps;
  bench_stats_t raw, recap;
} capture_result_t;

static void enqueue_chain(cudaStream_t stream, int *counter, int n) {
  for (int i = 0; i < n; i++) BENCH_CUDA(bench_launch_increment(stream, counter));
}

/* ---- capture + instantiate --------------------------------------------------------------- */

static double capture_raw_us(cudaStream_t stream, int *counter, int n) {
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  uint64_t t0 = bench_now_ns();
  BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  enqueue_chain(stream, counter, n);
  BENCH_CUDA(cudaStreamEndCapture(stream, &graph));
  BENCH_CUDA(cudaGraphInstantiateWithFlags(&exec, graph,
                                           cudaGraphInstantiateFlagAutoFreeOnLaunch |
                                               cudaGraphInstantiateFlagUseNodePriority));
  BENCH_CUDA(cudaGraphDestroy(graph));
  uint64_t t1 = bench_now_ns();
  BENCH_CUDA(cudaGraphExecDestroy(exec));
  return (double)(t1 - t0) / 1e3;
}

static double capture_recap_us(cudaStream_t stream, int *counter, int n) {
  recap_graph_t graph = NULL;
  uint64_t t0 = bench_now_ns();
  BENCH_RECAP(recap_graph_create(&graph, 0));
  BENCH_RECAP(recap_graph_capture_begin(graph, NULL, stream));
  enqueue_chain(stream, counter, n);
  BENCH_RECAP(recap_graph_capture_end(graph));
  uint64_t t1 = bench_now_ns();
  BENCH_RECAP(recap_graph_destroy(graph));
  return (double)(t1 - t0) / 1e3;
}

static void bench_capture(cudaStream_t stream, int *counter, int n, int reps,
                          capture_result_t *result) {
  double *raw = bench_calloc(NAME, (size_t)reps, sizeof *raw);
  double *rec = bench_calloc(NAME, (size_t)reps, sizeof *rec);
  for (int i = 0; i < 2; i++) { /* warm-up: code paths, driver caches */
    capture_raw_us(stream, counter, n);
    capture_recap_us(stream, counter, n);
  }
  for (int i = 0; i < reps; i++) {
    if (i % 2 == 0) {
      raw[i] = capture_raw_us(stream, counter, n);
      rec[i] = capture_recap_us(stream, counter, n);
    } else {
      rec[i] = capture_recap_us(stream, counter, n);
      raw[i] = capture_raw_us(stream, counter, n);
    }
  }
  result->n = n;
  result->reps = reps;
  bench_stats(raw, (size_t)reps, &result->raw);
  bench_stats(rec, (size_t)reps, &result->recap);
  free(raw);
  free(rec);
}

/* ---- replay ------------------------------------------------------------------------------- */

/* One batch: the stream is idle at its start; returns microseconds per launch call. */
static double replay_batch_us(int use_recap, recap_graph_t graph, cudaGraphExec_t exec,
                              cudaStream_t stream, int batch) {
  BENCH_CUDA(cudaStreamSynchronize(stream));
  uint64_t t0 = bench_now_ns();
  if (use_recap) {
    for (int i = 0; i < batch; i++) BENCH_RECAP(recap_graph_replay(graph, stream));
  } else {
    for (int i = 0; i < batch; i++) BENCH_CUDA(cudaGraphLaunch(exec, stream));
  }
  uint64_t t1 = bench_now_ns();
  return (double)(t1 - t0) / 1e3 / batch;
}

/* Returns 1 when the counter checks out. */
static int bench_replay(cudaStream_t stream, int *counter, int n, int quick,
                        replay_result_t *result) {
  /* Batches short enough that the GPU, at about a microsecond a kernel, keeps up. */
  int batch = n <= 10 ? 50 : n <= 100 ? 25 : 10;
  int launches = n <= 100 ? 2000 : 400;
  if (quick) launches /= 5;
  int batches = launches / batch;

  BENCH_CUDA(cudaMemsetAsync(counter, 0, sizeof(int), stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));

  recap_graph_t graph = NULL;
  BENCH_RECAP(recap_graph_create(&graph, 0));
  BENCH_RECAP(recap_graph_capture_begin(graph, NULL, stream));
  enqueue_chain(stream, counter, n);
  BENCH_RECAP(recap_graph_capture_end(graph));
  size_t nodes = 0;
  BENCH_RECAP(recap_graph_node_count(graph, &nodes));
  cudaGraphExec_t exec = NULL;
  BENCH_RECAP(recap_graph_raw_exec(graph, &exec));

  double *raw = bench_calloc(NAME, (size_t)batches, sizeof *raw);
  double *rec = bench_calloc(NAME, (size_t)batches, sizeof *rec);
  long long replays = 0;
  for (int i = 0; i < 2; i++) { /* warm-up: the first launches upload the graph */
    replay_batch_us(0, graph, exec, stream, batch);
    replay_batch_us(1, graph, exec, stream, batch);
    replays += 2 * batch;
  }
  for (int i = 0; i < batches; i++) {
    int recap_first = i % 2;
    double a = replay_batch_us(recap_first, graph, exec, stream, batch);
    double b = replay_batch_us(!recap_first, graph, exec, stream, batch);
    rec[i] = recap_first ? a : b;
    raw[i] = recap_first ? b : a;
    replays += 2 * batch;
  }
  BENCH_CUDA(cudaStreamSynchronize(stream));

  int value = -1;
  BENCH_CUDA(cudaMemcpy(&value, counter, sizeof value, cudaMemcpyDeviceToHost));
  long long expected = replays * n;
  int ok = (long long)value == expected && nodes == (size_t)n;
  if (!ok)
    fprintf(stderr,
            NAME
            ": CHECK FAILED for N=%d: graph has %zu nodes, counter %d after %lld "
            "replays, expected %lld\n",
            n, nodes, value, replays, expected);

  result->n = n;
  result->batch = batch;
  result->batches = batches;
  bench_stats(raw, (size_t)batches, &result->raw);
  bench_stats(rec, (size_t)batches, &result->recap);
  free(raw);
  free(rec);
  BENCH_RECAP(recap_graph_destroy(graph));
  return ok;
}

/* ---- output -------------------------------------------------------------------------------- */

static double ratio(const bench_stats_t *recap, const bench_stats_t *raw) {
  return raw->median > 0 ? recap->median / raw->median : 0.0;
}

static int write_json(const char *path, int quick, int checks_ok, const replay_result_t *replay,
                      const capture_result_t *capture) {
  FILE *f = bench_json_begin(path, NAME);
  if (!f) return 0;
  fprintf(f, ",\n  \"quick\": %s, \"checks_passed\": %s,\n", quick ? "true" : "false",
          checks_ok ? "true" : "false");
  fprintf(
      f, "  \"unit\": \"us\",\n  \"targets\": {\"replay_ratio\": %.2f, \"capture_ratio\": %.2f},\n",
      REPLAY_TARGET, CAPTURE_TARGET);
  fprintf(f, "  \"replay\": [\n");
  for (int i = 0; i < SIZE_COUNT; i++) {
    const replay_result_t *r = &replay[i];
    double x = ratio(&r->recap, &r->raw);
    fprintf(f,
            "    {\"n\": %d, \"batch\": %d, \"batches\": %d, \"ratio\": %.4f, "
            "\"meets_target\": %s,\n     \"raw_us\": ",
            r->n, r->batch, r->batches, x, x <= REPLAY_TARGET ? "true" : "false");
    bench_stats_json(f, &r->raw);
    fprintf(f, ",\n     \"recap_us\": ");
    bench_stats_json(f, &r->recap);
    fprintf(f, "}%s\n", i + 1 < SIZE_COUNT ? "," : "");
  }
  fprintf(f, "  ],\n  \"capture\": [\n");
  for (int i = 0; i < SIZE_COUNT; i++) {
    const capture_result_t *c = &capture[i];
    double x = ratio(&c->recap, &c->raw);
    fprintf(f,
            "    {\"n\": %d, \"reps\": %d, \"ratio\": %.4f, \"meets_target\": %s,\n"
            "     \"raw_us\": ",
            c->n, c->reps, x, x <= CAPTURE_TARGET ? "true" : "false");
    bench_stats_json(f, &c->raw);
    fprintf(f, ",\n     \"recap_us\": ");
    bench_stats_json(f, &c->recap);
    fprintf(f, "}%s\n", i + 1 < SIZE_COUNT ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
  return fclose(f) == 0;
}

static void print_tables(const replay_result_t *replay, const capture_result_t *capture) {
  printf(
      "\ngraph replay: host time of one launch call, us (median of batches; p10-p90 of recap)\n");
  printf("%6s %10s %10s %17s %7s %7s %4s\n", "N", "raw", "recap", "recap p10-p90", "ratio",
         "target", "met");
  for (int i = 0; i < SIZE_COUNT; i++) {
    const replay_result_t *r = &replay[i];
    double x = ratio(&r->recap, &r->raw);
    printf("%6d %10.3f %10.3f %8.3f-%-8.3f %7.3f %7s %4s\n", r->n, r->raw.median, r->recap.median,
           r->recap.p10, r->recap.p90, x, "<=1.05", x <= REPLAY_TARGET ? "yes" : "NO");
  }
  printf("\ncapture + instantiate of N kernels, us (median of %d)\n", capture[0].reps);
  printf("%6s %10s %10s %17s %7s %7s %4s\n", "N", "raw", "recap", "recap p10-p90", "ratio",
         "target", "met");
  for (int i = 0; i < SIZE_COUNT; i++) {
    const capture_result_t *c = &capture[i];
    double x = ratio(&c->recap, &c->raw);
    printf("%6d %10.2f %10.2f %8.1f-%-8.1f %7.3f %7s %4s\n", c->n, c->raw.median, c->recap.median,
           c->recap.p10, c->recap.p90, x, "<=1.10", x <= CAPTURE_TARGET ? "yes" : "NO");
  }
}

int main(int argc, char **argv) {
  bench_args_t args;
  int started = bench_start(argc, argv, NAME, &args);
  if (started >= 0) return started;

  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int *counter = NULL;
  BENCH_CUDA(cudaMalloc((void **)&counter, sizeof(int)));
  /* Load the kernel's module before anything is timed. */
  BENCH_CUDA(bench_launch_increment(stream, counter));
  BENCH_CUDA(cudaStreamSynchronize(stream));

  replay_result_t replay[SIZE_COUNT];
  capture_result_t capture[SIZE_COUNT];
  int checks_ok = 1;
  int reps = args.quick ? 6 : 20;
  for (int i = 0; i < SIZE_COUNT; i++) {
    bench_capture(stream, counter, sizes[i], reps, &capture[i]);
    checks_ok &= bench_replay(stream, counter, sizes[i], args.quick, &replay[i]);
    printf("  N=%-5d replay raw %.3f us, recap %.3f us; capture raw %.1f us, recap %.1f us\n",
           sizes[i], replay[i].raw.median, replay[i].recap.median, capture[i].raw.median,
           capture[i].recap.median);
    fflush(stdout);
  }

  print_tables(replay, capture);
  int written = write_json(args.json_path, args.quick, checks_ok, replay, capture);
  if (written) printf("\nresults: %s\n", args.json_path);

  BENCH_CUDA(cudaFree(counter));
  BENCH_CUDA(cudaStreamDestroy(stream));
  BENCH_RECAP(recap_empty_cache());
  if (!checks_ok) fprintf(stderr, NAME ": a correctness check failed (see above)\n");
  return checks_ok && written ? 0 : 1;
}
