/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_buckets — the memory of 8 bucket graphs (a serving loop's batch sizes b = 512, 256, ..,
 * 4), each capturing three temporaries of b x 4096 floats allocated and freed inside its capture
 * and four small kernels using them, done five ways:
 *
 *   nodes          CUDA's graph memory nodes: cudaMallocAsync / cudaFreeAsync inside a raw
 *                  capture; the footprint is the driver's reserved graph memory
 *                  (cudaGraphMemAttrReservedMemCurrent) after instantiating and launching all 8;
 *   shared         recap captures sharing one pool (recap_pool_handle), classic segments;
 *   shared vmm     the same with expandable_segments=1 (the small class's temporaries, b <= 64,
 *                  take the large segment's free blocks: docs/allocator.md, "Small requests in
 *                  a graph pool's large segment");
 *   private        recap captures with a private pool each (classic);
 *   private vmm    the same with expandable_segments=1.
 *
 * For each: the bytes reserved (recap_pool_memory's reserved_bytes, summed over the pools),
 * against the ideal (the largest bucket's three temporaries, 24 MiB) and against the driver's;
 * capture + instantiate of the 8 graphs (ms); and the host cost of a replay (µs per launch,
 * launches cycling through the 8 graphs, batches of the raw and the recap way alternating).
 * Every way computes the same outputs: they are compared bit for bit with the first way's.
 *
 * Goal: recap's shared pool with VMM segments reserves <= the driver's footprint and
 * <= 1.1x the ideal, while its replay stays cheaper than the memory nodes'. Reported, never
 * failed; a call that fails or outputs that differ make the exit status 1.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "memory_kernels.h"

#define NAME "bench_buckets"
#define IDEAL_GOAL 1.1

enum { BUCKETS = 8, TEMPS = 3, WIDTH = 4096, LAUNCHES_PER_BATCH = 64 };
static const int buckets[BUCKETS] = {512, 256, 128, 64, 32, 16, 8, 4};
static const size_t MiB = (size_t)1 << 20;

enum { W_NODES, W_SHARED, W_SHARED_VMM, W_PRIVATE, W_PRIVATE_VMM, W_COUNT };
static const char *const way_names[W_COUNT] = {"nodes", "shared", "shared_vmm", "private",
                                               "private_vmm"};
static const char *const way_labels[W_COUNT] = {"graph memory nodes", "recap shared pool",
                                                "recap shared pool, VMM", "recap private pools",
                                                "recap private pools, VMM"};

typedef struct way_result {
  int done;
  const char *skipped;
  int64_t reserved_bytes;  /* nodes: the driver's reserved graph memory */
  int64_t used_high_bytes; /* nodes: cudaGraphMemAttrUsedMemHigh; recap: the pools' peak */
  int64_t segments;        /* recap: segments of the pools */
  double capture_ms;       /* capture + instantiate of the 8 graphs */
  bench_stats_t replay_us; /* host µs per launch */
  bench_stats_t raw_us;    /* the memory nodes' launches, timed in the same rounds */
  int outputs_match;
} way_result_t;

static int all_ok = 1;

/* The work of one bucket on its three temporaries; out holds the result. */
static void enqueue_bucket(int b, float *const t[TEMPS], float *out, cudaStream_t s) {
  size_t n = (size_t)b * WIDTH;
  BENCH_CUDA(bench_mem_affine(t[0], NULL, n, 1e-3f, 1.0f, s));
  BENCH_CUDA(bench_mem_affine(t[1], t[0], n, 2.0f, 0.0f, s));
  BENCH_CUDA(bench_mem_mul(t[2], t[0], t[1], n, s));
  BENCH_CUDA(bench_mem_affine(out, t[2], n, 1.0f, (float)b, s));
}

static size_t temp_bytes(int b) { return (size_t)b * WIDTH * sizeof(float); }

/* ---- graph memory nodes ------------------------------------------------------------------ */

static void capture_nodes(cudaGraphExec_t *execs, float *out, cudaStream_t s) {
  for (int k = 0; k < BUCKETS; k++) {
    float *t[TEMPS];
    cudaGraph_t graph = NULL;
    BENCH_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int j = 0; j < TEMPS; j++)
      BENCH_CUDA(cudaMallocAsync((void **)&t[j], temp_bytes(buckets[k]), s));
    enqueue_bucket(buckets[k], t, out, s);
    for (int j = 0; j < TEMPS; j++) BENCH_CUDA(cudaFreeAsync(t[j], s));
    BENCH_CUDA(cudaStreamEndCapture(s, &graph));
    BENCH_CUDA(cudaGraphInstantiateWithFlags(&execs[k], graph, 0));
    BENCH_CUDA(cudaGraphDestroy(graph));
  }
}

static void launch_all_nodes(cudaGraphExec_t *execs, cudaStream_t s) {
  for (int k = 0; k < BUCKETS; k++) BENCH_CUDA(cudaGraphLaunch(execs[k], s));
  BENCH_CUDA(cudaStreamSynchronize(s));
}

static int64_t graph_mem(int device, enum cudaGraphMemAttributeType attr) {
  uint64_t v = 0;
  BENCH_CUDA(cudaDeviceGetGraphMemAttribute(device, attr, &v));
  return (int64_t)v;
}

/* ---- recap ------------------------------------------------------------------------------- */

/* Capture the 8 graphs into pool (or a private pool each when pool is the default id). */
static int capture_recap(recap_graph_t *graphs, recap_pool_id_t pool, float *out, cudaStream_t s) {
  for (int k = 0; k < BUCKETS; k++) {
    float *t[TEMPS];
    BENCH_RECAP(recap_graph_create(&graphs[k], 0));
    recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
    opts.pool = pool;
    BENCH_RECAP(recap_graph_capture_begin(graphs[k], &opts, s));
    recap_status_t st = RECAP_SUCCESS;
    for (int j = 0; j < TEMPS && st == RECAP_SUCCESS; j++)
      st = recap_malloc((void **)&t[j], temp_bytes(buckets[k]), s);
    if (st == RECAP_SUCCESS) enqueue_bucket(buckets[k], t, out, s);
    for (int j = 0; j < TEMPS && st == RECAP_SUCCESS; j++) st = recap_free(t[j]);
    recap_status_t end = recap_graph_capture_end(graphs[k]);
    if (st == RECAP_SUCCESS) st = end;
    if (st != RECAP_SUCCESS) {
      fprintf(stderr, NAME ": capture of bucket %d FAILED: %s: %s\n", buckets[k],
              recap_status_name(st), recap_last_error());
      for (int i = 0; i <= k; i++) BENCH_RECAP(recap_graph_destroy(graphs[i]));
      return 0;
    }
  }
  return 1;
}

static void launch_all_recap(recap_graph_t *graphs, cudaStream_t s) {
  for (int k = 0; k < BUCKETS; k++) BENCH_RECAP(recap_graph_replay(graphs[k], s));
  BENCH_CUDA(cudaStreamSynchronize(s));
}

/* The bytes reserved by the graphs' pools (each counted once) and their segments. */
static void recap_footprint(recap_graph_t *graphs, int64_t *reserved, int64_t *peak,
                            int64_t *segments) {
  recap_pool_id_t seen[BUCKETS];
  int n = 0;
  *reserved = *peak = *segments = 0;
  for (int k = 0; k < BUCKETS; k++) {
    recap_pool_id_t pool;
    BENCH_RECAP(recap_graph_pool(graphs[k], &pool));
    int dup = 0;
    for (int i = 0; i < n; i++) dup |= seen[i].a == pool.a && seen[i].b == pool.b;
    if (dup) continue;
    seen[n++] = pool;
    recap_pool_memory_t pm = RECAP_POOL_MEMORY_INIT;
    recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
    BENCH_RECAP(recap_pool_memory(pool, &pm));
    BENCH_RECAP(recap_pool_memory(pool, &info));
    *reserved += pm.reserved_bytes;
    *peak += pm.capture_peak_max_bytes;
    *segments += info.segments;
  }
}

/* ---- replay timing ----------------------------------------------------------------------- */

static double nodes_batch_us(cudaGraphExec_t *execs, cudaStream_t s) {
  BENCH_CUDA(cudaStreamSynchronize(s));
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < LAUNCHES_PER_BATCH; i++) BENCH_CUDA(cudaGraphLaunch(execs[i % BUCKETS], s));
  uint64_t t1 = bench_now_ns();
  BENCH_CUDA(cudaStreamSynchronize(s));
  return (double)(t1 - t0) / 1e3 / LAUNCHES_PER_BATCH;
}

static double recap_batch_us(recap_graph_t *graphs, cudaStream_t s) {
  BENCH_CUDA(cudaStreamSynchronize(s));
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < LAUNCHES_PER_BATCH; i++)
    BENCH_RECAP(recap_graph_replay(graphs[i % BUCKETS], s));
  uint64_t t1 = bench_now_ns();
  BENCH_CUDA(cudaStreamSynchronize(s));
  return (double)(t1 - t0) / 1e3 / LAUNCHES_PER_BATCH;
}

/* Batches of the two ways alternating A B B A.., so drift hits both alike. */
static void time_replays(cudaGraphExec_t *execs, recap_graph_t *graphs, int batches, cudaStream_t s,
                         way_result_t *out) {
  double *raw = bench_calloc(NAME, (size_t)batches, sizeof *raw);
  double *rec = bench_calloc(NAME, (size_t)batches, sizeof *rec);
  nodes_batch_us(execs, s); /* warm-up */
  recap_batch_us(graphs, s);
  for (int r = 0; r < batches; r++) {
    if (r % 2 == 0) {
      raw[r] = nodes_batch_us(execs, s);
      rec[r] = recap_batch_us(graphs, s);
    } else {
      rec[r] = recap_batch_us(graphs, s);
      raw[r] = nodes_batch_us(execs, s);
    }
  }
  bench_stats(raw, (size_t)batches, &out->raw_us);
  bench_stats(rec, (size_t)batches, &out->replay_us);
  free(raw);
  free(rec);
}

/* ---- one run ----------------------------------------------------------------------------- */

static size_t out_bytes(void) { return temp_bytes(buckets[0]); }

/* out's contents into host (for the comparison of the ways). */
static void read_out(const float *out, float *host) {
  BENCH_CUDA(cudaDeviceSynchronize());
  BENCH_CUDA(cudaMemcpy(host, out, out_bytes(), cudaMemcpyDeviceToHost));
}

static int set_vmm(int on) {
  recap_status_t st = recap_option_set("expandable_segments", on ? "1" : "0");
  if (st != RECAP_SUCCESS) {
    fprintf(stderr, NAME ": recap_option_set(expandable_segments, %d) FAILED: %s: %s\n", on,
            recap_status_name(st), recap_last_error());
    all_ok = 0;
    return 0;
  }
  return 1;
}

static void run_recap_way(int way, cudaGraphExec_t *execs, float *out, const float *reference,
                          float *host, int batches, cudaStream_t s, way_result_t *r) {
  int vmm = way == W_SHARED_VMM || way == W_PRIVATE_VMM;
  int shared = way == W_SHARED || way == W_SHARED_VMM;
  BENCH_RECAP(recap_empty_cache());
  if (!set_vmm(vmm)) {
    r->skipped = "option refused";
    return;
  }
  recap_graph_t graphs[BUCKETS];
  recap_pool_id_t pool = {0, 0};
  if (shared) pool = recap_pool_handle();
  BENCH_CUDA(cudaMemsetAsync(out, 0, out_bytes(), s));
  BENCH_CUDA(cudaStreamSynchronize(s));
  uint64_t t0 = bench_now_ns();
  if (!capture_recap(graphs, pool, out, s)) {
    r->skipped = "capture failed";
    all_ok = 0;
    BENCH_RECAP(recap_empty_cache());
    return;
  }
  r->capture_ms = (double)(bench_now_ns() - t0) / 1e6;
  launch_all_recap(graphs, s);
  read_out(out, host);
  r->outputs_match = memcmp(host, reference, out_bytes()) == 0;
  if (!r->outputs_match) all_ok = 0;
  recap_footprint(graphs, &r->reserved_bytes, &r->used_high_bytes, &r->segments);
  time_replays(execs, graphs, batches, s, r);
  r->done = 1;
  for (int k = 0; k < BUCKETS; k++) BENCH_RECAP(recap_graph_destroy(graphs[k]));
  BENCH_RECAP(recap_empty_cache());
  printf(
      "  %-26s reserved %6.1f MiB in %lld segment(s), capture + instantiate %.1f ms, replay "
      "%.2f us (nodes %.2f us), outputs match: %s\n",
      way_labels[way], (double)r->reserved_bytes / (double)MiB, (long long)r->segments,
      r->capture_ms, r->replay_us.median, r->raw_us.median, r->outputs_match ? "yes" : "NO");
  fflush(stdout);
}

/* ---- output ------------------------------------------------------------------------------ */

static double ratio(double a, double b) { return b > 0 ? a / b : 0; }

static int64_t ideal_bytes(void) { return (int64_t)(TEMPS * temp_bytes(buckets[0])); }

static int goal_met(const way_result_t *r) {
  const way_result_t *vmm = &r[W_SHARED_VMM], *nodes = &r[W_NODES];
  return vmm->done && vmm->reserved_bytes <= nodes->reserved_bytes &&
         (double)vmm->reserved_bytes <= IDEAL_GOAL * (double)ideal_bytes();
}

static void print_table(const way_result_t *r, int batches) {
  double ideal = (double)ideal_bytes(), driver = (double)r[W_NODES].reserved_bytes;
  printf(
      "\n8 bucket graphs (b = 512 .. 4, three temporaries of b x %d floats each): reserved "
      "bytes against the ideal (%.0f MiB) and the driver's; replay host us per launch "
      "(median of %d batches of %d)\n",
      WIDTH, ideal / (double)MiB, batches, LAUNCHES_PER_BATCH);
  printf("%-26s %9s %8s %9s %9s %10s %9s %9s %8s\n", "way", "MiB", "/ideal", "/driver", "capt. ms",
         "replay us", "nodes us", "/nodes", "outputs");
  for (int w = 0; w < W_COUNT; w++) {
    const way_result_t *x = &r[w];
    if (!x->done) {
      printf("%-26s %9s\n", way_labels[w], x->skipped ? x->skipped : "not run");
      continue;
    }
    double mib = (double)x->reserved_bytes / (double)MiB;
    if (w == W_NODES)
      printf("%-26s %9.1f %8.2f %9.2f %9.1f %10.2f %9s %9s %8s\n", way_labels[w], mib,
             ratio((double)x->reserved_bytes, ideal), 1.0, x->capture_ms, x->replay_us.median, "-",
             "-", "ref");
    else
      printf("%-26s %9.1f %8.2f %9.2f %9.1f %10.2f %9.2f %9.3f %8s\n", way_labels[w], mib,
             ratio((double)x->reserved_bytes, ideal), ratio((double)x->reserved_bytes, driver),
             x->capture_ms, x->replay_us.median, x->raw_us.median,
             ratio(x->replay_us.median, x->raw_us.median), x->outputs_match ? "same" : "DIFFER");
  }
  printf(
      "goal: recap's shared pool with VMM segments <= the driver's footprint and <= %.1fx the "
      "ideal: %s\n",
      IDEAL_GOAL, goal_met(r) ? "yes" : "NO");
}

static int write_json(const char *path, int quick, int batches, const way_result_t *r) {
  FILE *f = bench_json_begin(path, NAME);
  if (!f) return 0;
  fprintf(f,
          ",\n  \"quick\": %s, \"checks_passed\": %s, \"batches\": %d, \"launches_per_batch\": "
          "%d,\n",
          quick ? "true" : "false", all_ok ? "true" : "false", batches, LAUNCHES_PER_BATCH);
  fprintf(f, "  \"ideal_bytes\": %lld, \"goal_ideal_ratio\": %.2f, \"goal_met\": %s,\n",
          (long long)ideal_bytes(), IDEAL_GOAL, goal_met(r) ? "true" : "false");
  fprintf(f, "  \"ways\": [");
  double driver = (double)r[W_NODES].reserved_bytes;
  for (int w = 0; w < W_COUNT; w++) {
    const way_result_t *x = &r[w];
    fprintf(f, "%s\n    {\"way\": \"%s\", ", w ? "," : "", way_names[w]);
    if (!x->done) {
      fprintf(f, "\"skipped\": \"%s\"}", x->skipped ? x->skipped : "not run");
      continue;
    }
    fprintf(f,
            "\"reserved_bytes\": %lld, \"high_bytes\": %lld, \"segments\": %lld, "
            "\"vs_ideal\": %.4f, \"vs_driver\": %.4f, \"capture_ms\": %.4f, ",
            (long long)x->reserved_bytes, (long long)x->used_high_bytes, (long long)x->segments,
            ratio((double)x->reserved_bytes, (double)ideal_bytes()),
            ratio((double)x->reserved_bytes, driver), x->capture_ms);
    fprintf(f, "\"outputs_match\": %s,\n     \"replay_us\": ", x->outputs_match ? "true" : "false");
    bench_stats_json(f, &x->replay_us);
    if (w != W_NODES) {
      fprintf(f, ", \"nodes_replay_us\": ");
      bench_stats_json(f, &x->raw_us);
      fprintf(f, ", \"replay_vs_nodes\": %.4f", ratio(x->replay_us.median, x->raw_us.median));
    }
    fprintf(f, "}");
  }
  fprintf(f, "\n  ]\n}\n");
  return fclose(f) == 0;
}

int main(int argc, char **argv) {
  bench_args_t args;
  int exit_code = 0;
  if (!bench_parse_args(argc, argv, NAME,
                        "Without a CUDA device it prints \"skipped: no GPU\" and exits 0.\n", &args,
                        &exit_code))
    return exit_code;
  if (!bench_have_device(NAME)) return 0;
  bench_banner(NAME, args.quick);

  int device = 0;
  BENCH_CUDA(cudaGetDevice(&device));
  cudaStream_t s;
  BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float *out = NULL;
  BENCH_CUDA(cudaMalloc((void **)&out, out_bytes()));
  float *reference = bench_calloc(NAME, out_bytes(), 1);
  float *host = bench_calloc(NAME, out_bytes(), 1);
  int batches = args.quick ? 11 : 41;
  way_result_t results[W_COUNT];
  memset(results, 0, sizeof results);

  /* The driver's graph memory starts empty, its high watermark at zero. */
  BENCH_CUDA(cudaDeviceSynchronize());
  BENCH_CUDA(cudaDeviceGraphMemTrim(device));
  uint64_t zero = 0;
  BENCH_CUDA(cudaDeviceSetGraphMemAttribute(device, cudaGraphMemAttrUsedMemHigh, &zero));
  BENCH_CUDA(cudaDeviceSetGraphMemAttribute(device, cudaGraphMemAttrReservedMemHigh, &zero));

  way_result_t *nodes = &results[W_NODES];
  cudaGraphExec_t execs[BUCKETS];
  BENCH_CUDA(cudaMemsetAsync(out, 0, out_bytes(), s));
  uint64_t t0 = bench_now_ns();
  capture_nodes(execs, out, s);
  nodes->capture_ms = (double)(bench_now_ns() - t0) / 1e6;
  launch_all_nodes(execs, s);
  read_out(out, reference);
  nodes->reserved_bytes = graph_mem(device, cudaGraphMemAttrReservedMemCurrent);
  nodes->used_high_bytes = graph_mem(device, cudaGraphMemAttrUsedMemHigh);
  nodes->outputs_match = 1;
  nodes->done = 1;
  printf("  %-26s reserved %6.1f MiB (used high %.1f MiB), capture + instantiate %.1f ms\n",
         way_labels[W_NODES], (double)nodes->reserved_bytes / (double)MiB,
         (double)nodes->used_high_bytes / (double)MiB, nodes->capture_ms);
  fflush(stdout);

  for (int w = W_SHARED; w < W_COUNT; w++)
    run_recap_way(w, execs, out, reference, host, batches, s, &results[w]);
  /* The memory nodes' own replay figure: the median over every recap way's rounds. */
  {
    double medians[W_COUNT];
    size_t n = 0;
    for (int w = W_SHARED; w < W_COUNT; w++)
      if (results[w].done) medians[n++] = results[w].raw_us.median;
    bench_stats(medians, n, &nodes->replay_us);
  }

  print_table(results, batches);
  int written = write_json(args.json_path, args.quick, batches, results);
  if (written) printf("\nresults: %s\n", args.json_path);

  for (int k = 0; k < BUCKETS; k++) BENCH_CUDA(cudaGraphExecDestroy(execs[k]));
  BENCH_CUDA(cudaDeviceSynchronize());
  BENCH_CUDA(cudaDeviceGraphMemTrim(device));
  BENCH_CUDA(cudaFree(out));
  BENCH_CUDA(cudaStreamDestroy(s));
  BENCH_RECAP(recap_option_set("expandable_segments", "0"));
  free(reference);
  free(host);
  if (!all_ok) fprintf(stderr, NAME ": a way failed or its outputs differed (see above)\n");
  return written && all_ok ? 0 : 1;
}
