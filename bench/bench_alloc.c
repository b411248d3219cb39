/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_alloc — the allocator's hot path: a cached malloc + free pair, single thread.
 *
 * For request sizes of 512 B, 64 KiB and 4 MiB, the host time of one pair of
 *
 *   recap         recap_malloc(&p, size, s) + recap_free(p), served from recap's cache;
 *   async         cudaMallocFromPoolAsync + cudaFreeAsync on s, from a CUDA memory pool whose
 *                 release threshold is the maximum, so it keeps its memory cached too;
 *   routed        the recap pair while a recap capture is under way on s: the allocation is
 *                 routed to the graph's private pool, which is what the routing adds;
 *   other stream  the recap pair on a second stream while s is capturing: allocations there
 *                 must see that their stream is not part of the capture and use the default pool.
 *
 * Each figure is the median over rounds; a round times a batch of pairs of each variant at each
 * size, one after another, so drift (a slow start, another process) hits all alike. recap's targets: the recap pair <= 60 ns, and the
 * routed pair at most 100 ns dearer than the plain one. PyTorch's caching allocator is measured
 * on the same machine by bench/torch_alloc.py.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define NAME "bench_alloc"
#define PAIR_TARGET_NS 60.0
#define ROUTING_TARGET_NS 100.0
#define WARMUP_PAIRS 100

static const size_t sizes[] = {512, 64 << 10, 4 << 20};
enum { SIZE_COUNT = sizeof sizes / sizeof sizes[0] };

enum { V_RECAP, V_ASYNC, V_ROUTED, V_OTHER, V_COUNT };
static const char *const variant_names[V_COUNT] = {"recap", "cuda_async", "recap_routed",
                                                   "recap_other_stream_in_capture"};

typedef struct size_result {
  size_t size;
  bench_stats_t ns[V_COUNT];
} size_result_t;

/* Nanoseconds per pair over `pairs` recap pairs on stream. */
static double recap_pairs_ns(cudaStream_t stream, size_t size, int pairs) {
  void *p = NULL;
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < pairs; i++) {
    BENCH_RECAP(recap_malloc(&p, size, stream));
    BENCH_RECAP(recap_free(p));
  }
  uint64_t t1 = bench_now_ns();
  return (double)(t1 - t0) / pairs;
}

static double async_pairs_ns(cudaStream_t stream, cudaMemPool_t pool, size_t size, int pairs) {
  void *p = NULL;
  BENCH_CUDA(cudaStreamSynchronize(stream));
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < pairs; i++) {
    BENCH_CUDA(cudaMallocFromPoolAsync(&p, size, pool, stream));
    BENCH_CUDA(cudaFreeAsync(p, stream));
  }
  uint64_t t1 = bench_now_ns();
  BENCH_CUDA(cudaStreamSynchronize(stream));
  return (double)(t1 - t0) / pairs;
}

/* Which capture-time variants still work. A failure there (say, a call that a global-mode
 * capture forbids) is a finding to report, not a reason to lose the other figures: the variant
 * is reported once and dropped, and the benchmark exits 1 at the end. */
static int variant_ok[V_COUNT] = {1, 1, 1, 1};

static void drop_variant(int variant, recap_status_t status, const char *what) {
  if (!variant_ok[variant]) return;
  variant_ok[variant] = 0;
  fprintf(stderr, NAME ": %s FAILED (%s: %s); the variant is dropped\n", what,
          recap_status_name(status), recap_last_error());
}

/* recap_pairs_ns for a variant that may fail; -1 when it did (or had). */
static double try_recap_pairs_ns(int variant, cudaStream_t stream, size_t size, int pairs) {
  if (!variant_ok[variant]) return -1;
  void *p = NULL;
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < pairs; i++) {
    recap_status_t status = recap_malloc(&p, size, stream);
    if (status == RECAP_SUCCESS) status = recap_free(p);
    if (status != RECAP_SUCCESS) {
      drop_variant(variant, status, variant_names[variant]);
      return -1;
    }
  }
  uint64_t t1 = bench_now_ns();
  return (double)(t1 - t0) / pairs;
}

/* Round r at one size: samples[v][r] is variant v's ns per pair, -1 where it failed. */
static void bench_round(size_t size, int r, int pairs, cudaStream_t stream, cudaStream_t other,
                        cudaMemPool_t pool, int *counter, double *samples[V_COUNT]) {
  /* Plain pairs and stream-ordered pairs, in alternating order. The warm-up pairs fill the
   * caches (a segment of the right size, the stream's free list). */
  for (int k = 0; k < 2; k++) {
    if ((k == 0) == (r % 2 == 0)) {
      recap_pairs_ns(stream, size, WARMUP_PAIRS);
      samples[V_RECAP][r] = recap_pairs_ns(stream, size, pairs);
    } else {
      async_pairs_ns(stream, pool, size, WARMUP_PAIRS);
      samples[V_ASYNC][r] = async_pairs_ns(stream, pool, size, pairs);
    }
  }
  /* The other stream's cache must be warm before the capture: a new segment now would be a
   * cudaMalloc during a global-mode capture. */
  recap_pairs_ns(other, size, WARMUP_PAIRS);

  samples[V_ROUTED][r] = samples[V_OTHER][r] = -1;
  if (variant_ok[V_ROUTED] || variant_ok[V_OTHER]) {
    recap_graph_t graph = NULL;
    BENCH_RECAP(recap_graph_create(&graph, 0));
    BENCH_RECAP(recap_graph_capture_begin(graph, NULL, stream));
    BENCH_CUDA(bench_launch_increment(stream, counter));      /* so the graph is not empty */
    try_recap_pairs_ns(V_ROUTED, stream, size, WARMUP_PAIRS); /* the pool's first segment */
    if (r % 2 == 0) {
      samples[V_ROUTED][r] = try_recap_pairs_ns(V_ROUTED, stream, size, pairs);
      samples[V_OTHER][r] = try_recap_pairs_ns(V_OTHER, other, size, pairs);
    } else {
      samples[V_OTHER][r] = try_recap_pairs_ns(V_OTHER, other, size, pairs);
      samples[V_ROUTED][r] = try_recap_pairs_ns(V_ROUTED, stream, size, pairs);
    }
    recap_status_t status = recap_graph_capture_end(graph);
    if (status != RECAP_SUCCESS) {
      /* Something in the round broke the capture: its figures do not count. */
      samples[V_ROUTED][r] = samples[V_OTHER][r] = -1;
      drop_variant(V_OTHER, status, "the capture around the routed pairs");
      drop_variant(V_ROUTED, status, "the capture around the routed pairs");
    }
    BENCH_RECAP(recap_graph_destroy(graph));
  }
  /* The graph's pool is unreferenced now: give its segment back, so rounds do not pile up
   * memory. The default pool is warmed again at the next round's start. */
  BENCH_RECAP(recap_empty_cache());
}

/* The medians of one size's rounds (those a variant failed in left out); frees the samples. */
static void summarize(size_t size, int rounds, double *samples[V_COUNT], size_result_t *result) {
  result->size = size;
  for (int v = 0; v < V_COUNT; v++) {
    size_t kept = 0; /* the rounds a variant failed in are left out */
    for (int r = 0; r < rounds; r++)
      if (samples[v][r] >= 0) samples[v][kept++] = samples[v][r];
    bench_stats(samples[v], kept, &result->ns[v]);
    free(samples[v]);
  }
}

static const char *size_label(size_t size, char *buffer, size_t n) {
  if (size >= (1u << 20) && size % (1u << 20) == 0)
    snprintf(buffer, n, "%zu MiB", size >> 20);
  else if (size >= 1024 && size % 1024 == 0)
    snprintf(buffer, n, "%zu KiB", size >> 10);
  else
    snprintf(buffer, n, "%zu B", size);
  return buffer;
}

static int write_json(const char *path, int quick, int rounds, int pairs,
                      const size_result_t *results) {
  FILE *f = bench_json_begin(path, NAME);
  if (!f) return 0;
  int all_ok = 1;
  for (int v = 0; v < V_COUNT; v++) all_ok &= variant_ok[v];
  fprintf(f,
          ",\n  \"quick\": %s, \"checks_passed\": %s, \"rounds\": %d, \"pairs_per_batch\": %d, "
          "\"unit\": \"ns\",\n",
          quick ? "true" : "false", all_ok ? "true" : "false", rounds, pairs);
  fprintf(f, "  \"targets\": {\"pair_ns\": %.1f, \"routing_extra_ns\": %.1f},\n", PAIR_TARGET_NS,
          ROUTING_TARGET_NS);
  fprintf(f, "  \"sizes\": [\n");
  for (int i = 0; i < SIZE_COUNT; i++) {
    const size_result_t *r = &results[i];
    double extra = r->ns[V_ROUTED].median - r->ns[V_RECAP].median;
    double vs_async = r->ns[V_ASYNC].median > 0 ? r->ns[V_RECAP].median / r->ns[V_ASYNC].median : 0;
    int routed = r->ns[V_ROUTED].count > 0;
    fprintf(f, "    {\"size\": %zu, \"recap_vs_cuda_async\": %.4f, \"meets_pair_target\": %s, ",
            r->size, vs_async, r->ns[V_RECAP].median <= PAIR_TARGET_NS ? "true" : "false");
    if (routed)
      fprintf(f, "\"routing_extra_ns\": %.2f, \"meets_routing_target\": %s", extra,
              extra <= ROUTING_TARGET_NS ? "true" : "false");
    else
      fprintf(f, "\"routing_extra_ns\": null, \"meets_routing_target\": null");
    for (int v = 0; v < V_COUNT; v++) {
      fprintf(f, ",\n     \"%s_ns\": ", variant_names[v]);
      if (r->ns[v].count)
        bench_stats_json(f, &r->ns[v]);
      else
        fprintf(f, "null");
    }
    fprintf(f, "}%s\n", i + 1 < SIZE_COUNT ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
  return fclose(f) == 0;
}

static void print_table(int rounds, int pairs, const size_result_t *results) {
  printf(
      "\nallocator: host time of one malloc + free pair, ns (median of %d batches of %d)\n"
      "targets: recap <= %.0f ns; routed - recap <= %.0f ns\n",
      rounds, pairs, PAIR_TARGET_NS, ROUTING_TARGET_NS);
  printf("%8s %8s %4s %10s %9s | %8s %9s %4s | %12s\n", "size", "recap", "met", "cudaAsync",
         "recap/cu", "routed", "+routing", "met", "other stream");
  for (int i = 0; i < SIZE_COUNT; i++) {
    const size_result_t *r = &results[i];
    char label[32];
    double plain = r->ns[V_RECAP].median, async = r->ns[V_ASYNC].median;
    double extra = r->ns[V_ROUTED].median - plain;
    printf("%8s %8.1f %4s %10.1f %9.3f | ", size_label(r->size, label, sizeof label), plain,
           plain <= PAIR_TARGET_NS ? "yes" : "NO", async, async > 0 ? plain / async : 0.0);
    if (r->ns[V_ROUTED].count)
      printf("%8.1f %9.1f %4s | ", r->ns[V_ROUTED].median, extra,
             extra <= ROUTING_TARGET_NS ? "yes" : "NO");
    else
      printf("%8s %9s %4s | ", "failed", "-", "-");
    if (r->ns[V_OTHER].count)
      printf("%12.1f\n", r->ns[V_OTHER].median);
    else
      printf("%12s\n", "failed");
  }
}

int main(int argc, char **argv) {
  bench_args_t args;
  int started = bench_start(argc, argv, NAME, &args);
  if (started >= 0) return started;

  int device = 0;
  BENCH_CUDA(cudaGetDevice(&device));
  cudaStream_t stream, other;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  BENCH_CUDA(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  int *counter = NULL;
  BENCH_CUDA(cudaMalloc((void **)&counter, sizeof(int)));
  BENCH_CUDA(bench_launch_increment(stream, counter));
  BENCH_CUDA(cudaStreamSynchronize(stream));

  /* A pool of our own, so the process's default pool keeps its settings. */
  cudaMemPool_t pool;
  struct cudaMemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  BENCH_CUDA(cudaMemPoolCreate(&pool, &props));
  uint64_t threshold = UINT64_MAX;
  BENCH_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));

  int rounds = args.quick ? 7 : 31;
  int pairs = args.quick ? 2000 : 20000;
  size_result_t results[SIZE_COUNT];
  double *samples[SIZE_COUNT][V_COUNT];
  for (int i = 0; i < SIZE_COUNT; i++)
    for (int v = 0; v < V_COUNT; v++)
      samples[i][v] = bench_calloc(NAME, (size_t)rounds, sizeof(double));
  for (int r = 0; r < rounds; r++)
    for (int i = 0; i < SIZE_COUNT; i++)
      bench_round(sizes[i], r, pairs, stream, other, pool, counter, samples[i]);
  for (int i = 0; i < SIZE_COUNT; i++) {
    char label[32];
    summarize(sizes[i], rounds, samples[i], &results[i]);
    printf(
        "  %-8s recap %.1f ns, cudaMallocAsync %.1f ns, routed %.1f ns, other stream %.1f ns"
        " (0: failed)\n",
        size_label(sizes[i], label, sizeof label), results[i].ns[V_RECAP].median,
        results[i].ns[V_ASYNC].median, results[i].ns[V_ROUTED].median,
        results[i].ns[V_OTHER].median);
    fflush(stdout);
  }

  print_table(rounds, pairs, results);
  int written = write_json(args.json_path, args.quick, rounds, pairs, results);
  if (written) printf("\nresults: %s\n", args.json_path);

  BENCH_CUDA(cudaMemPoolDestroy(pool));
  BENCH_CUDA(cudaFree(counter));
  BENCH_CUDA(cudaStreamDestroy(other));
  BENCH_CUDA(cudaStreamDestroy(stream));
  BENCH_RECAP(recap_empty_cache());
  int all_ok = 1;
  for (int v = 0; v < V_COUNT; v++) all_ok &= variant_ok[v];
  if (!all_ok) fprintf(stderr, NAME ": a variant failed during capture (see above)\n");
  return written && all_ok ? 0 : 1;
}
