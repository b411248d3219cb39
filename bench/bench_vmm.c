/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_vmm — VMM segments (expandable_segments=1) against classic ones (cudaMalloc per
 * segment), both in one run; the option is switched with recap_option_set and the cache
 * emptied in between, so each mode starts from nothing:
 *
 *   pair           host ns of a cached recap_malloc + recap_free pair at 512 B, 64 KiB and
 *                  4 MiB (as bench_alloc), the rounds of the two modes alternating;
 *   capture        recap_graph_create + capture_begin + 100 one-thread kernels with 8
 *                  temporaries (256 KiB to 32 MiB) allocated and freed inside + capture_end
 *                  (which instantiates), µs; each capture makes its private pool's segments;
 *   replay         host µs of recap_graph_replay of that graph, batches of the two modes'
 *                  graphs alternating;
 *   fragmentation  a growing workload on the default pool: requests of 1, 2, 3 .. N MiB (and a
 *                  64 KiB one beside each), every request's predecessor freed unless it is one
 *                  of every fourth kept, so holes open between live blocks as the requests
 *                  grow; at the end, reserved / allocated bytes (1.0 is no waste), and the
 *                  peaks' ratio.
 *
 * Reported, never failed; a call that fails makes the exit status 1. Takes --steps N (the
 * fragmentation's largest request in MiB, default 128).
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "memory_kernels.h"

#define NAME "bench_vmm"

enum { MODE_CLASSIC, MODE_VMM, MODES };
static const char *const mode_names[MODES] = {"classic", "vmm"};

static const size_t pair_sizes[] = {512, 64 << 10, 4 << 20};
enum { PAIR_SIZES = sizeof pair_sizes / sizeof pair_sizes[0], WARMUP_PAIRS = 100 };

enum { KERNELS = 100, TEMPS = 8, REPLAYS_PER_BATCH = 20 };
static const size_t temp_sizes[TEMPS] = {256 << 10, 512 << 10, 1 << 20,  2 << 20,
                                         4 << 20,   8 << 20,   16 << 20, 32 << 20};
static const size_t MiB = (size_t)1 << 20;

typedef struct frag_result {
  int64_t reserved, allocated, peak_reserved, peak_allocated, device_allocs;
  double ms;
} frag_result_t;

typedef struct results {
  bench_stats_t pair_ns[PAIR_SIZES][MODES];
  bench_stats_t capture_us[MODES];
  bench_stats_t replay_us[MODES];
  frag_result_t frag[MODES];
  int steps;
} results_t;

static void set_mode(int mode) {
  BENCH_CUDA(cudaDeviceSynchronize());
  BENCH_RECAP(recap_empty_cache());
  BENCH_RECAP(recap_option_set("expandable_segments", mode == MODE_VMM ? "1" : "0"));
}

/* ---- pair --------------------------------------------------------------------------------- */

static double pairs_ns(cudaStream_t s, size_t size, int pairs) {
  void *p = NULL;
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < pairs; i++) {
    BENCH_RECAP(recap_malloc(&p, size, s));
    BENCH_RECAP(recap_free(p));
  }
  return (double)(bench_now_ns() - t0) / pairs;
}

static void bench_pairs(cudaStream_t s, int rounds, int pairs, results_t *res) {
  for (int i = 0; i < PAIR_SIZES; i++) {
    double *samples[MODES];
    for (int m = 0; m < MODES; m++) samples[m] = bench_calloc(NAME, (size_t)rounds, sizeof(double));
    for (int r = 0; r < rounds; r++) {
      for (int k = 0; k < MODES; k++) {
        int m = r % 2 == 0 ? k : MODES - 1 - k; /* A B, then B A */
        set_mode(m);
        pairs_ns(s, pair_sizes[i], WARMUP_PAIRS); /* the mode's first segment */
        samples[m][r] = pairs_ns(s, pair_sizes[i], pairs);
      }
    }
    for (int m = 0; m < MODES; m++) {
      bench_stats(samples[m], (size_t)rounds, &res->pair_ns[i][m]);
      free(samples[m]);
    }
    printf("  pair %8zu B: classic %.1f ns, vmm %.1f ns\n", pair_sizes[i],
           res->pair_ns[i][MODE_CLASSIC].median, res->pair_ns[i][MODE_VMM].median);
    fflush(stdout);
  }
}

/* ---- capture and replay ------------------------------------------------------------------- */

static void capture_graph(recap_graph_t *graph, cudaStream_t s, int *counter) {
  void *t[TEMPS];
  BENCH_RECAP(recap_graph_create(graph, 0));
  BENCH_RECAP(recap_graph_capture_begin(*graph, NULL, s));
  for (int i = 0; i < KERNELS; i++) {
    if (i % (KERNELS / TEMPS) == 0 && i / (KERNELS / TEMPS) < TEMPS)
      BENCH_RECAP(recap_malloc(&t[i / (KERNELS / TEMPS)], temp_sizes[i / (KERNELS / TEMPS)], s));
    BENCH_CUDA(bench_launch_increment(s, counter));
  }
  for (int j = 0; j < TEMPS; j++) BENCH_RECAP(recap_free(t[j]));
  BENCH_RECAP(recap_graph_capture_end(*graph));
}

static void bench_capture(cudaStream_t s, int *counter, int reps, results_t *res) {
  double *samples[MODES];
  for (int m = 0; m < MODES; m++) samples[m] = bench_calloc(NAME, (size_t)reps, sizeof(double));
  for (int r = 0; r < reps; r++) {
    for (int k = 0; k < MODES; k++) {
      int m = r % 2 == 0 ? k : MODES - 1 - k;
      set_mode(m);
      recap_graph_t g = NULL;
      uint64_t t0 = bench_now_ns();
      capture_graph(&g, s, counter);
      samples[m][r] = (double)(bench_now_ns() - t0) / 1e3;
      BENCH_RECAP(recap_graph_destroy(g));
    }
  }
  for (int m = 0; m < MODES; m++) {
    bench_stats(samples[m], (size_t)reps, &res->capture_us[m]);
    free(samples[m]);
  }
  printf("  capture + instantiate (%d kernels, %d temporaries): classic %.1f us, vmm %.1f us\n",
         KERNELS, TEMPS, res->capture_us[MODE_CLASSIC].median, res->capture_us[MODE_VMM].median);
  fflush(stdout);
}

static double replay_batch_us(recap_graph_t g, cudaStream_t s) {
  BENCH_CUDA(cudaStreamSynchronize(s));
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < REPLAYS_PER_BATCH; i++) BENCH_RECAP(recap_graph_replay(g, s));
  uint64_t t1 = bench_now_ns();
  BENCH_CUDA(cudaStreamSynchronize(s));
  return (double)(t1 - t0) / 1e3 / REPLAYS_PER_BATCH;
}

static void bench_replay(cudaStream_t s, int *counter, int batches, results_t *res) {
  recap_graph_t graphs[MODES];
  /* Each graph's pool is made under its mode; both stay for the alternating batches. */
  for (int m = 0; m < MODES; m++) {
    set_mode(m);
    capture_graph(&graphs[m], s, counter);
  }
  BENCH_CUDA(cudaMemset(counter, 0, sizeof *counter));
  double *samples[MODES];
  for (int m = 0; m < MODES; m++) {
    samples[m] = bench_calloc(NAME, (size_t)batches, sizeof(double));
    replay_batch_us(graphs[m], s); /* warm-up */
  }
  for (int r = 0; r < batches; r++)
    for (int k = 0; k < MODES; k++) {
      int m = r % 2 == 0 ? k : MODES - 1 - k;
      samples[m][r] = replay_batch_us(graphs[m], s);
    }
  /* Every replay adds KERNELS: the graphs ran all their kernels. */
  int count = 0;
  BENCH_CUDA(cudaMemcpy(&count, counter, sizeof count, cudaMemcpyDeviceToHost));
  long expected = (long)KERNELS * REPLAYS_PER_BATCH * (batches + 1) * MODES;
  if (count != expected) {
    fprintf(stderr, NAME ": the replays counted %d, expected %ld\n", count, expected);
    exit(1);
  }
  for (int m = 0; m < MODES; m++) {
    bench_stats(samples[m], (size_t)batches, &res->replay_us[m]);
    free(samples[m]);
    BENCH_RECAP(recap_graph_destroy(graphs[m]));
  }
  printf("  replay (%d kernels): classic %.2f us, vmm %.2f us\n", KERNELS,
         res->replay_us[MODE_CLASSIC].median, res->replay_us[MODE_VMM].median);
  fflush(stdout);
}

/* ---- fragmentation ------------------------------------------------------------------------ */

static void bench_frag(int mode, int steps, cudaStream_t s, frag_result_t *out) {
  set_mode(mode);
  BENCH_RECAP(recap_memory_reset_peak(-1));
  recap_memory_stats_t before = RECAP_MEMORY_STATS_INIT;
  BENCH_RECAP(recap_memory_stats(-1, &before));
  void **big = bench_calloc(NAME, (size_t)steps, sizeof(void *));
  void **small = bench_calloc(NAME, (size_t)steps, sizeof(void *));
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < steps; i++) {
    BENCH_RECAP(recap_malloc(&big[i], (size_t)(i + 1) * MiB, s));
    BENCH_RECAP(recap_malloc(&small[i], 64 << 10, s));
    if (i > 0 && (i - 1) % 4 != 0) {
      BENCH_RECAP(recap_free(big[i - 1]));
      BENCH_RECAP(recap_free(small[i - 1]));
      big[i - 1] = small[i - 1] = NULL;
    }
  }
  out->ms = (double)(bench_now_ns() - t0) / 1e6;
  recap_memory_stats_t st = RECAP_MEMORY_STATS_INIT;
  BENCH_RECAP(recap_memory_stats(-1, &st));
  out->reserved = st.reserved_bytes[RECAP_STAT_ALL].current;
  out->allocated = st.allocated_bytes[RECAP_STAT_ALL].current;
  out->peak_reserved = st.reserved_bytes[RECAP_STAT_ALL].peak;
  out->peak_allocated = st.allocated_bytes[RECAP_STAT_ALL].peak;
  out->device_allocs = st.num_device_alloc - before.num_device_alloc;
  for (int i = 0; i < steps; i++) {
    BENCH_RECAP(recap_free(big[i]));
    BENCH_RECAP(recap_free(small[i]));
  }
  free(big);
  free(small);
  BENCH_CUDA(cudaStreamSynchronize(s));
  BENCH_RECAP(recap_empty_cache());
  printf(
      "  fragmentation (%s, requests 1 .. %d MiB): reserved %.1f MiB for %.1f MiB allocated "
      "(%.3f), %lld device allocations, %.1f ms\n",
      mode_names[mode], steps, (double)out->reserved / (double)MiB,
      (double)out->allocated / (double)MiB,
      out->allocated ? (double)out->reserved / (double)out->allocated : 0.0,
      (long long)out->device_allocs, out->ms);
  fflush(stdout);
}

/* ---- output ------------------------------------------------------------------------------- */

static double ratio(double a, double b) { return b > 0 ? a / b : 0; }

static void print_tables(const results_t *res) {
  printf("\nVMM segments against classic ones (vmm/classic: below 1 means VMM is cheaper)\n");
  printf("%-34s %12s %12s %12s\n", "figure", "classic", "vmm", "vmm/classic");
  for (int i = 0; i < PAIR_SIZES; i++) {
    char label[64];
    snprintf(label, sizeof label, "malloc + free pair %zu B, ns", pair_sizes[i]);
    double c = res->pair_ns[i][MODE_CLASSIC].median, v = res->pair_ns[i][MODE_VMM].median;
    printf("%-34s %12.1f %12.1f %12.3f\n", label, c, v, ratio(v, c));
  }
  double c = res->capture_us[MODE_CLASSIC].median, v = res->capture_us[MODE_VMM].median;
  printf("%-34s %12.1f %12.1f %12.3f\n", "capture + instantiate, us", c, v, ratio(v, c));
  c = res->replay_us[MODE_CLASSIC].median;
  v = res->replay_us[MODE_VMM].median;
  printf("%-34s %12.2f %12.2f %12.3f\n", "replay, us", c, v, ratio(v, c));
  const frag_result_t *fc = &res->frag[MODE_CLASSIC], *fv = &res->frag[MODE_VMM];
  double rc = ratio((double)fc->reserved, (double)fc->allocated);
  double rv = ratio((double)fv->reserved, (double)fv->allocated);
  printf("%-34s %12.3f %12.3f %12.3f\n", "growing: reserved / allocated", rc, rv, ratio(rv, rc));
  rc = ratio((double)fc->peak_reserved, (double)fc->peak_allocated);
  rv = ratio((double)fv->peak_reserved, (double)fv->peak_allocated);
  printf("%-34s %12.3f %12.3f %12.3f\n", "growing: peak reserved / allocated", rc, rv,
         ratio(rv, rc));
  printf("%-34s %12lld %12lld\n", "growing: device allocations", (long long)fc->device_allocs,
         (long long)fv->device_allocs);
}

static void json_frag(FILE *f, const frag_result_t *x) {
  fprintf(f,
          "{\"reserved_bytes\": %lld, \"allocated_bytes\": %lld, \"peak_reserved_bytes\": %lld, "
          "\"peak_allocated_bytes\": %lld, \"device_allocs\": %lld, \"ms\": %.4f, "
          "\"reserved_vs_allocated\": %.4f}",
          (long long)x->reserved, (long long)x->allocated, (long long)x->peak_reserved,
          (long long)x->peak_allocated, (long long)x->device_allocs, x->ms,
          ratio((double)x->reserved, (double)x->allocated));
}

static int write_json(const char *path, int quick, const results_t *res) {
  FILE *f = bench_json_begin(path, NAME);
  if (!f) return 0;
  fprintf(f, ",\n  \"quick\": %s, \"checks_passed\": true, \"steps\": %d,\n",
          quick ? "true" : "false", res->steps);
  fprintf(f, "  \"pairs\": [");
  for (int i = 0; i < PAIR_SIZES; i++) {
    fprintf(f, "%s\n    {\"size\": %zu, \"classic_ns\": ", i ? "," : "", pair_sizes[i]);
    bench_stats_json(f, &res->pair_ns[i][MODE_CLASSIC]);
    fprintf(f, ", \"vmm_ns\": ");
    bench_stats_json(f, &res->pair_ns[i][MODE_VMM]);
    fprintf(f, ", \"vmm_vs_classic\": %.4f}",
            ratio(res->pair_ns[i][MODE_VMM].median, res->pair_ns[i][MODE_CLASSIC].median));
  }
  fprintf(f, "\n  ],\n  \"capture_us\": {\"classic\": ");
  bench_stats_json(f, &res->capture_us[MODE_CLASSIC]);
  fprintf(f, ", \"vmm\": ");
  bench_stats_json(f, &res->capture_us[MODE_VMM]);
  fprintf(f, ", \"vmm_vs_classic\": %.4f},\n  \"replay_us\": {\"classic\": ",
          ratio(res->capture_us[MODE_VMM].median, res->capture_us[MODE_CLASSIC].median));
  bench_stats_json(f, &res->replay_us[MODE_CLASSIC]);
  fprintf(f, ", \"vmm\": ");
  bench_stats_json(f, &res->replay_us[MODE_VMM]);
  fprintf(f, ", \"vmm_vs_classic\": %.4f},\n  \"fragmentation\": {\"classic\": ",
          ratio(res->replay_us[MODE_VMM].median, res->replay_us[MODE_CLASSIC].median));
  json_frag(f, &res->frag[MODE_CLASSIC]);
  fprintf(f, ", \"vmm\": ");
  json_frag(f, &res->frag[MODE_VMM]);
  fprintf(f, "}\n}\n");
  return fclose(f) == 0;
}

int main(int argc, char **argv) {
  const char *value = NULL;
  int steps = 128;
  if (bench_take_option(&argc, argv, "steps", &value)) {
    steps = atoi(value);
    if (steps < 2 || steps > 4096) {
      fprintf(stderr, NAME ": --steps '%s': give a number of steps from 2 to 4096\n", value);
      return 1;
    }
  }
  bench_args_t args;
  int exit_code = 0;
  if (!bench_parse_args(argc, argv, NAME,
                        "  --steps N    the growing workload's largest request, MiB "
                        "(default 128)\n"
                        "Without a CUDA device it prints \"skipped: no GPU\" and exits 0.\n",
                        &args, &exit_code))
    return exit_code;
  if (!bench_have_device(NAME)) return 0;
  bench_banner(NAME, args.quick);

  cudaStream_t s;
  BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int *counter = NULL;
  BENCH_CUDA(cudaMalloc((void **)&counter, sizeof *counter));

  results_t res;
  memset(&res, 0, sizeof res);
  res.steps = steps;
  bench_pairs(s, args.quick ? 5 : 21, args.quick ? 2000 : 20000, &res);
  bench_capture(s, counter, args.quick ? 5 : 21, &res);
  bench_replay(s, counter, args.quick ? 11 : 41, &res);
  for (int m = 0; m < MODES; m++) bench_frag(m, steps, s, &res.frag[m]);

  set_mode(MODE_CLASSIC);
  print_tables(&res);
  int written = write_json(args.json_path, args.quick, &res);
  if (written) printf("\nresults: %s\n", args.json_path);
  BENCH_CUDA(cudaFree(counter));
  BENCH_CUDA(cudaStreamDestroy(s));
  return written ? 0 : 1;
}
