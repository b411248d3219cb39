/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_liveness — what input-liveness checks cost a replay on the host.
 *
 * For graphs of N = 10 and 1000 one-thread kernels, each adding one to a counter of its own
 * (N counters, each a recap_malloc'ed block of the default pool, so every kernel has one
 * external input), the same work is captured twice: once with check_input_liveness, once
 * without. Timed, as the CPU time of one launch call (median of batches, batches alternating so
 * drift hits all alike; the stream is synchronised between batches so the launch queue never
 * fills):
 *
 *   raw    cudaGraphLaunch of the unchecked graph's executable
 *   off    recap_graph_replay of the unchecked graph (no hook: should equal raw)
 *   on     recap_graph_replay of the checked graph (N allocator lookups under one lock first)
 *   check  recap_graph_check_inputs alone: the check without the launch
 *
 * The table gives on/off and the check's cost per input. After the replays every counter must
 * equal the number of replays that ran; the benchmark says CHECK FAILED otherwise.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define NAME "bench_liveness"

static const int sizes[] = {10, 1000};
enum { SIZE_COUNT = sizeof sizes / sizeof sizes[0] };

enum { VARIANTS = 4 };
static const char *const variant_names[VARIANTS] = {"raw", "off", "on", "check"};

typedef struct result {
  int n, batch, batches;
  size_t inputs; /* what the checked graph recorded */
  bench_stats_t stats[VARIANTS];
} result_t;

typedef struct setup {
  cudaStream_t stream;
  recap_graph_t off, on;
  cudaGraphExec_t raw;
} setup_t;

static void capture(recap_graph_t graph, cudaStream_t stream, int **counters, int n, int check) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.check_input_liveness = check;
  BENCH_RECAP(recap_graph_capture_begin(graph, &o, stream));
  for (int i = 0; i < n; i++) BENCH_CUDA(bench_launch_increment(stream, counters[i]));
  BENCH_RECAP(recap_graph_capture_end(graph));
}

/* One batch of `batch` calls of variant v, the stream idle at its start; us per call. */
static double batch_us(const setup_t *st, int v, int batch) {
  BENCH_CUDA(cudaStreamSynchronize(st->stream));
  uint64_t t0 = bench_now_ns();
  switch (v) {
    case 0:
      for (int i = 0; i < batch; i++) BENCH_CUDA(cudaGraphLaunch(st->raw, st->stream));
      break;
    case 1:
      for (int i = 0; i < batch; i++) BENCH_RECAP(recap_graph_replay(st->off, st->stream));
      break;
    case 2:
      for (int i = 0; i < batch; i++) BENCH_RECAP(recap_graph_replay(st->on, st->stream));
      break;
    default:
      for (int i = 0; i < batch; i++) BENCH_RECAP(recap_graph_check_inputs(st->on));
      break;
  }
  uint64_t t1 = bench_now_ns();
  return (double)(t1 - t0) / 1e3 / batch;
}

/* Returns 1 when the counters check out. */
static int bench_size(cudaStream_t stream, int n, int quick, result_t *r) {
  int **counters = bench_calloc(NAME, (size_t)n, sizeof *counters);
  for (int i = 0; i < n; i++) {
    BENCH_RECAP(recap_malloc((void **)&counters[i], sizeof(int), stream));
    BENCH_CUDA(cudaMemsetAsync(counters[i], 0, sizeof(int), stream));
  }
  BENCH_CUDA(cudaStreamSynchronize(stream));

  setup_t st = {stream, NULL, NULL, NULL};
  BENCH_RECAP(recap_graph_create(&st.off, 0));
  BENCH_RECAP(recap_graph_create(&st.on, 0));
  capture(st.off, stream, counters, n, 0);
  capture(st.on, stream, counters, n, 1);
  BENCH_RECAP(recap_graph_raw_exec(st.off, &st.raw));
  BENCH_RECAP(recap_graph_liveness_inputs(st.on, NULL, 0, &r->inputs));

  int batch = n <= 10 ? 50 : 10;
  int calls = n <= 10 ? 4000 : 600;
  if (quick) calls /= 5;
  int batches = calls / batch;
  double *samples[VARIANTS];
  for (int v = 0; v < VARIANTS; v++) {
    samples[v] = bench_calloc(NAME, (size_t)batches, sizeof *samples[v]);
  }
  long long launches = 0;
  for (int w = 0; w < 2; w++) /* warm-up: the first launches upload the graphs */
    for (int v = 0; v < VARIANTS; v++) {
      batch_us(&st, v, batch);
      if (v < 3) launches += batch;
    }
  for (int b = 0; b < batches; b++) {
    /* Rotate the order so that no variant always runs first. */
    for (int k = 0; k < VARIANTS; k++) {
      int v = (b + k) % VARIANTS;
      samples[v][b] = batch_us(&st, v, batch);
      if (v < 3) launches += batch;
    }
  }
  BENCH_CUDA(cudaStreamSynchronize(stream));

  int ok = r->inputs == (size_t)n;
  int first = -1, last = -1;
  BENCH_CUDA(cudaMemcpy(&first, counters[0], sizeof first, cudaMemcpyDeviceToHost));
  BENCH_CUDA(cudaMemcpy(&last, counters[n - 1], sizeof last, cudaMemcpyDeviceToHost));
  ok = ok && first == launches && last == launches;
  if (!ok)
    fprintf(stderr,
            NAME
            ": CHECK FAILED for N=%d: %zu inputs recorded, counters %d and %d after "
            "%lld launches\n",
            n, r->inputs, first, last, launches);

  r->n = n;
  r->batch = batch;
  r->batches = batches;
  for (int v = 0; v < VARIANTS; v++) {
    bench_stats(samples[v], (size_t)batches, &r->stats[v]);
    free(samples[v]);
  }
  BENCH_RECAP(recap_graph_destroy(st.off));
  BENCH_RECAP(recap_graph_destroy(st.on));
  for (int i = 0; i < n; i++) BENCH_RECAP(recap_free(counters[i]));
  free(counters);
  return ok;
}

static double ratio(double x, double y) { return y > 0 ? x / y : 0.0; }

static void print_table(const result_t *results) {
  printf("\nreplay host time with input-liveness checks, us per call (median of batches)\n");
  printf("%6s %7s %9s %9s %9s %9s %7s %12s\n", "N", "inputs", "raw", "off", "on", "check", "on/off",
         "ns/input");
  for (int i = 0; i < SIZE_COUNT; i++) {
    const result_t *r = &results[i];
    double off = r->stats[1].median, on = r->stats[2].median, check = r->stats[3].median;
    printf("%6d %7zu %9.3f %9.3f %9.3f %9.3f %7.3f %12.1f\n", r->n, r->inputs, r->stats[0].median,
           off, on, check, ratio(on, off), r->inputs ? check * 1e3 / (double)r->inputs : 0.0);
  }
}

static int write_json(const char *path, int quick, int ok, const result_t *results) {
  FILE *f = bench_json_begin(path, NAME);
  if (!f) return 0;
  fprintf(f, ",\n  \"quick\": %s, \"checks_passed\": %s, \"unit\": \"us\",\n  \"results\": [\n",
          quick ? "true" : "false", ok ? "true" : "false");
  for (int i = 0; i < SIZE_COUNT; i++) {
    const result_t *r = &results[i];
    fprintf(f,
            "    {\"n\": %d, \"inputs\": %zu, \"batch\": %d, \"batches\": %d, "
            "\"on_off_ratio\": %.4f, \"check_ns_per_input\": %.2f",
            r->n, r->inputs, r->batch, r->batches, ratio(r->stats[2].median, r->stats[1].median),
            r->inputs ? r->stats[3].median * 1e3 / (double)r->inputs : 0.0);
    for (int v = 0; v < VARIANTS; v++) {
      fprintf(f, ",\n     \"%s_us\": ", variant_names[v]);
      bench_stats_json(f, &r->stats[v]);
    }
    fprintf(f, "}%s\n", i + 1 < SIZE_COUNT ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
  return fclose(f) == 0;
}

int main(int argc, char **argv) {
  bench_args_t args;
  int started = bench_start(argc, argv, NAME, &args);
  if (started >= 0) return started;

  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  /* Load the kernel's module before anything is captured or timed. */
  int *scratch = NULL;
  BENCH_CUDA(cudaMalloc((void **)&scratch, sizeof(int)));
  BENCH_CUDA(bench_launch_increment(stream, scratch));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  BENCH_CUDA(cudaFree(scratch));

  result_t results[SIZE_COUNT];
  memset(results, 0, sizeof results);
  int ok = 1;
  for (int i = 0; i < SIZE_COUNT; i++) {
    ok &= bench_size(stream, sizes[i], args.quick, &results[i]);
    printf("  N=%-5d raw %.3f us, off %.3f us, on %.3f us, check %.3f us\n", sizes[i],
           results[i].stats[0].median, results[i].stats[1].median, results[i].stats[2].median,
           results[i].stats[3].median);
    fflush(stdout);
  }
  print_table(results);
  int written = write_json(args.json_path, args.quick, ok, results);
  if (written) printf("\nresults: %s\n", args.json_path);

  BENCH_CUDA(cudaStreamDestroy(stream));
  BENCH_RECAP(recap_empty_cache());
  if (!ok) fprintf(stderr, NAME ": a correctness check failed (see above)\n");
  return ok && written ? 0 : 1;
}
