/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_nccl — NCCL collectives in recap graphs, on one GPU with a one-rank communicator
 * (docs/nccl.md):
 *
 * (a) the host cost of a step of K all-reduces (K = 1, 8, 32; 1024 floats each, from a buffer of
 *     their own into another: one rank's in-place all-reduce has nothing to move, and NCCL
 *     enqueues no work for it, where out of place it copies):
 *
 *       raw eager      K ncclAllReduce calls
 *       recap eager    K recap_nccl_all_reduce calls (the wrapper on an eager stream)
 *       raw graph      the K raw calls captured by cudaStreamBeginCapture, one cudaGraphLaunch
 *       recap graph    the K wrapper calls captured into a recap graph, one recap_graph_replay
 *
 *       raw g+event    the raw graph's launch and a cudaEventRecord after it: what ordering
 *                      replays across streams by hand costs, as recap's policy does
 *
 *     nanoseconds of host time per step (a batch of steps timed between two clock reads, the
 *     stream synchronised between batches, outside the timing), and the ratios recap/raw for
 *     each way (the graph's also against raw g+event) and graph/eager for each side;
 *
 * (b) the cost of recap_graph_check_collectives on a graph of 1, 8 and 32 all-reduces (the
 *     exchange of one rank: one all-gather of 16 bytes on the check's own stream, waited for),
 *     against a raw ncclAllGather of the same 16 bytes followed by cudaStreamSynchronize.
 *
 * After the timing, a replay's result is compared with the eager one (one rank's all-reduce
 * copies its input), so a benchmark that stopped doing the work would fail. Tables of figures
 * and ratios, never pass/fail on them; a failed call makes the exit status 1. Without a GPU or
 * without libnccl.so.2 it says "skipped" and exits 0. Nothing links NCCL: the raw calls come
 * from the library recap loads (RECAP_NCCL_LIBRARY, else libnccl.so.2), opened with dlopen.
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "recap/nccl.h"

#define NAME "bench_nccl"

enum { COUNT = 1024, MAX_K = 32, KINDS = 3 };
static const int step_sizes[KINDS] = {1, 8, 32};

/* NCCL's signatures with recap's types (its enums have NCCL's values, its comm is NCCL's). */
typedef int (*comm_init_all_fn)(recap_nccl_comm_t *comms, int ndev, const int *devlist);
typedef int (*comm_destroy_fn)(recap_nccl_comm_t comm);
typedef int (*all_reduce_fn)(const void *send, void *recv, size_t count, int type, int op,
                             recap_nccl_comm_t comm, cudaStream_t stream);
typedef int (*all_gather_fn)(const void *send, void *recv, size_t count, int type,
                             recap_nccl_comm_t comm, cudaStream_t stream);

static comm_init_all_fn comm_init_all;
static comm_destroy_fn comm_destroy;
static all_reduce_fn raw_all_reduce;
static all_gather_fn raw_all_gather;

static void take(void *library, const char *name, void *fn, size_t size) {
  void *symbol = dlsym(library, name);
  if (!symbol) {
    fprintf(stderr, NAME ": the NCCL library lacks %s\n", name);
    exit(1);
  }
  memcpy(fn, &symbol, size);
}

#define NCCL_OK(call)                                                                        \
  do {                                                                                       \
    int nccl_ = (call);                                                                      \
    if (nccl_ != 0) {                                                                        \
      fprintf(stderr, NAME ": %s failed: NCCL status %d at %s:%d\n", #call, nccl_, __FILE__, \
              __LINE__);                                                                     \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

typedef struct setup {
  recap_nccl_comm_t comm;
  cudaStream_t stream;
  float *send[MAX_K], *recv[MAX_K]; /* one pair per all-reduce of a step */
  cudaEvent_t event;                /* raw g+event's */
  int batches, steps_per_batch;
} setup_t;

/* ==========================================================================================
 * (a) the host cost of a step
 * ======================================================================================== */

/* raw g+event: the raw graph's launch and a cudaEventRecord after it, what ordering replays
 * across streams by hand costs (recap's policy records such an event after each replay). */
typedef enum way { RAW_EAGER, RECAP_EAGER, RAW_GRAPH, RECAP_GRAPH, RAW_GRAPH_EVENT, WAYS } way_t;
static const char *const way_names[WAYS] = {"raw eager", "recap eager", "raw graph", "recap graph",
                                            "raw g+event"};

static void enqueue_step(setup_t *s, way_t way, int k) {
  for (int i = 0; i < k; i++) {
    if (way == RAW_EAGER || way == RAW_GRAPH)
      NCCL_OK(raw_all_reduce(s->send[i], s->recv[i], COUNT, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM,
                             s->comm, s->stream));
    else
      BENCH_RECAP(recap_nccl_all_reduce(s->send[i], s->recv[i], COUNT, RECAP_NCCL_FLOAT32,
                                        RECAP_NCCL_SUM, s->comm, (recap_stream_t)s->stream));
  }
}

/* Host ns per step of one way: the median over batches. */
static bench_stats_t time_way(setup_t *s, way_t way, int k, cudaGraphExec_t raw_exec,
                              recap_graph_t graph) {
  double *samples = bench_calloc(NAME, (size_t)s->batches, sizeof *samples);
  for (int b = 0; b < s->batches; b++) {
    BENCH_CUDA(cudaStreamSynchronize(s->stream));
    const uint64_t t0 = bench_now_ns();
    for (int i = 0; i < s->steps_per_batch; i++) {
      if (way == RAW_GRAPH || way == RAW_GRAPH_EVENT) {
        BENCH_CUDA(cudaGraphLaunch(raw_exec, s->stream));
        if (way == RAW_GRAPH_EVENT) BENCH_CUDA(cudaEventRecord(s->event, s->stream));
      } else if (way == RECAP_GRAPH)
        BENCH_RECAP(recap_graph_replay(graph, (recap_stream_t)s->stream));
      else
        enqueue_step(s, way, k);
    }
    samples[b] = (double)(bench_now_ns() - t0) / s->steps_per_batch;
  }
  BENCH_CUDA(cudaStreamSynchronize(s->stream));
  bench_stats_t stats;
  bench_stats(samples, (size_t)s->batches, &stats);
  free(samples);
  return stats;
}

static recap_graph_t capture_recap(setup_t *s, int k) {
  recap_graph_t graph;
  BENCH_RECAP(recap_graph_create(&graph, 0));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.mode = RECAP_CAPTURE_MODE_THREAD_LOCAL;
  BENCH_RECAP(recap_graph_capture_begin(graph, &o, (recap_stream_t)s->stream));
  enqueue_step(s, RECAP_GRAPH, k);
  BENCH_RECAP(recap_graph_capture_end(graph));
  BENCH_RECAP(recap_graph_replay(graph, (recap_stream_t)s->stream)); /* the first launch uploads */
  return graph;
}

static cudaGraphExec_t capture_raw(setup_t *s, int k, cudaGraph_t *raw) {
  cudaGraphExec_t exec;
  BENCH_CUDA(cudaStreamBeginCapture(s->stream, cudaStreamCaptureModeThreadLocal));
  enqueue_step(s, RAW_GRAPH, k);
  BENCH_CUDA(cudaStreamEndCapture(s->stream, raw));
  BENCH_CUDA(cudaGraphInstantiate(&exec, *raw, 0));
  BENCH_CUDA(cudaGraphLaunch(exec, s->stream));
  return exec;
}

/* One rank's all-reduce copies its input: after a replay every output holds its input. */
static int replay_copies(setup_t *s, recap_graph_t graph, int k) {
  float *host = bench_calloc(NAME, COUNT, sizeof *host);
  int ok = 1;
  for (int i = 0; i < k && ok; i++) {
    for (int j = 0; j < COUNT; j++) host[j] = (float)(i * COUNT + j);
    BENCH_CUDA(cudaMemcpy(s->send[i], host, COUNT * sizeof *host, cudaMemcpyHostToDevice));
    BENCH_CUDA(cudaMemset(s->recv[i], 0, COUNT * sizeof *host));
  }
  BENCH_RECAP(recap_graph_replay(graph, (recap_stream_t)s->stream));
  BENCH_CUDA(cudaStreamSynchronize(s->stream));
  for (int i = 0; i < k && ok; i++) {
    BENCH_CUDA(cudaMemcpy(host, s->recv[i], COUNT * sizeof *host, cudaMemcpyDeviceToHost));
    for (int j = 0; j < COUNT && ok; j++) ok = host[j] == (float)(i * COUNT + j);
  }
  free(host);
  return ok;
}

/* ==========================================================================================
 * (b) the check
 * ======================================================================================== */

static bench_stats_t time_check(setup_t *s, recap_graph_t graph, int calls) {
  double *samples = bench_calloc(NAME, (size_t)calls, sizeof *samples);
  for (int c = 0; c < calls; c++) {
    const uint64_t t0 = bench_now_ns();
    BENCH_RECAP(recap_graph_check_collectives(graph, s->comm));
    samples[c] = (double)(bench_now_ns() - t0);
  }
  bench_stats_t stats;
  bench_stats(samples, (size_t)calls, &stats);
  free(samples);
  return stats;
}

static bench_stats_t time_raw_exchange(setup_t *s, int calls) {
  uint64_t *words = NULL;
  BENCH_CUDA(cudaMalloc((void **)&words, 4 * sizeof *words));
  double *samples = bench_calloc(NAME, (size_t)calls, sizeof *samples);
  for (int c = 0; c < calls; c++) {
    const uint64_t t0 = bench_now_ns();
    NCCL_OK(raw_all_gather(words, words + 2, 2, RECAP_NCCL_UINT64, s->comm, s->stream));
    BENCH_CUDA(cudaStreamSynchronize(s->stream));
    samples[c] = (double)(bench_now_ns() - t0);
  }
  bench_stats_t stats;
  bench_stats(samples, (size_t)calls, &stats);
  free(samples);
  BENCH_CUDA(cudaFree(words));
  return stats;
}

int main(int argc, char **argv) {
  bench_args_t args;
  int exit_code = 0;
  if (!bench_parse_args(argc, argv, NAME, "", &args, &exit_code)) return exit_code;
  if (!bench_have_device(NAME)) return 0;
  int version = 0;
  if (recap_nccl_version(&version) != RECAP_SUCCESS) {
    printf(NAME ": skipped: no NCCL (%s)\n", recap_last_error());
    return 0;
  }
  const char *path = getenv("RECAP_NCCL_LIBRARY");
  void *library = dlopen(path && *path ? path : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    fprintf(stderr, NAME ": dlopen: %s\n", dlerror());
    return 1;
  }
  take(library, "ncclCommInitAll", &comm_init_all, sizeof comm_init_all);
  take(library, "ncclCommDestroy", &comm_destroy, sizeof comm_destroy);
  take(library, "ncclAllReduce", &raw_all_reduce, sizeof raw_all_reduce);
  take(library, "ncclAllGather", &raw_all_gather, sizeof raw_all_gather);

  bench_banner(NAME, args.quick);
  printf("NCCL %d.%d.%d, one rank; all-reduces of %d floats, out of place\n", version / 10000,
         version / 100 % 100, version % 100, COUNT);
  setup_t s = {.batches = args.quick ? 20 : 100, .steps_per_batch = 50};
  NCCL_OK(comm_init_all(&s.comm, 1, NULL));
  BENCH_CUDA(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  BENCH_CUDA(cudaEventCreateWithFlags(&s.event, cudaEventDisableTiming));
  for (int i = 0; i < MAX_K; i++) {
    BENCH_CUDA(cudaMalloc((void **)&s.send[i], COUNT * sizeof(float)));
    BENCH_CUDA(cudaMalloc((void **)&s.recv[i], COUNT * sizeof(float)));
  }
  enqueue_step(&s, RAW_EAGER, MAX_K); /* NCCL sets up at a communicator's first collective */
  BENCH_CUDA(cudaStreamSynchronize(s.stream));

  FILE *json = bench_json_begin(args.json_path, NAME);
  if (json) fprintf(json, ",\n  \"nccl_version\": %d,\n  \"steps\": [", version);
  int ok = 1;
  printf("\n(a) host ns per step of K all-reduces (median of %d batches of %d steps)\n", s.batches,
         s.steps_per_batch);
  printf("%4s %11s %11s %11s %11s %11s %9s %9s %9s %9s %9s\n", "K", way_names[0], way_names[1],
         way_names[2], way_names[3], way_names[4], "eager r/r", "graph r/r", "g r/r+ev", "raw g/e",
         "recap g/e");
  recap_graph_t graphs[KINDS];
  for (int i = 0; i < KINDS; i++) {
    const int k = step_sizes[i];
    cudaGraph_t raw = NULL;
    cudaGraphExec_t raw_exec = capture_raw(&s, k, &raw);
    graphs[i] = capture_recap(&s, k);
    bench_stats_t t[WAYS];
    for (int w = 0; w < WAYS; w++) t[w] = time_way(&s, (way_t)w, k, raw_exec, graphs[i]);
    printf("%4d %11.0f %11.0f %11.0f %11.0f %11.0f %9.3f %9.3f %9.3f %9.3f %9.3f\n", k, t[0].median,
           t[1].median, t[2].median, t[3].median, t[4].median, t[1].median / t[0].median,
           t[3].median / t[2].median, t[3].median / t[4].median, t[2].median / t[0].median,
           t[3].median / t[1].median);
    if (!replay_copies(&s, graphs[i], k)) {
      fprintf(stderr, NAME ": the replay of %d all-reduces did not copy their inputs\n", k);
      ok = 0;
    }
    if (json) {
      fprintf(json, "%s\n    {\"k\": %d", i ? "," : "", k);
      for (int w = 0; w < WAYS; w++) {
        fprintf(json, ", \"%s\": ", way_names[w]);
        bench_stats_json(json, &t[w]);
      }
      fprintf(json, "}");
    }
    BENCH_CUDA(cudaGraphExecDestroy(raw_exec));
    BENCH_CUDA(cudaGraphDestroy(raw));
  }

  const int calls = args.quick ? 50 : 400;
  printf("\n(b) recap_graph_check_collectives, one rank (median of %d calls)\n", calls);
  bench_stats_t floor = time_raw_exchange(&s, calls);
  printf("%-34s %9.1f us\n", "raw ncclAllGather 16 B + sync", floor.median / 1e3);
  if (json) {
    fprintf(json, "\n  ],\n  \"raw_exchange\": ");
    bench_stats_json(json, &floor);
    fprintf(json, ",\n  \"check\": [");
  }
  for (int i = 0; i < KINDS; i++) {
    bench_stats_t t = time_check(&s, graphs[i], calls);
    char label[64];
    snprintf(label, sizeof label, "check, %d collective%s", step_sizes[i],
             step_sizes[i] == 1 ? "" : "s");
    printf("%-34s %9.1f us  %.2fx the raw exchange\n", label, t.median / 1e3,
           t.median / floor.median);
    if (json) {
      fprintf(json, "%s\n    {\"collectives\": %d, \"stats\": ", i ? "," : "", step_sizes[i]);
      bench_stats_json(json, &t);
      fprintf(json, "}");
    }
  }
  if (json) {
    fprintf(json, "\n  ]\n}\n");
    fclose(json);
  }
  for (int i = 0; i < KINDS; i++) BENCH_RECAP(recap_graph_destroy(graphs[i]));
  for (int i = 0; i < MAX_K; i++) {
    BENCH_CUDA(cudaFree(s.send[i]));
    BENCH_CUDA(cudaFree(s.recv[i]));
  }
  BENCH_CUDA(cudaEventDestroy(s.event));
  BENCH_CUDA(cudaStreamDestroy(s.stream));
  NCCL_OK(comm_destroy(s.comm));
  dlclose(library);
  return ok ? 0 : 1;
}
