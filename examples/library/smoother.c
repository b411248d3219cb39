/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * smoother.c — the smoother library (smoother.h): what a library on recap does to serve
 * eager callers, its own graphs and its callers' captures with one function.
 *
 * - Its buffers come from recap's allocator before any capture, so their addresses are fixed
 *   and a graph of a run stays valid for the smoother's life.
 * - Its graph keeps its template (RECAP_GRAPH_KEEP): a replay inside a caller's capture embeds
 *   a copy of the template, and CUDA launches no executable into a capture.
 * - It enqueues the same kernels, in the same order, whichever way it runs, so every way
 *   computes the same bits.
 */
#include <stdlib.h>

#include "smoother.h"
#include "smoother_kernels.h"

struct smoother {
  size_t n;
  int sweeps;
  float *in, *out, *scratch;
  recap_graph_t graph; /* NULL until smoother_prepare */
  int replayed;
};

static recap_status_t cuda_status(cudaError_t err) {
  return err == cudaSuccess ? RECAP_SUCCESS : RECAP_ERROR_CUDA;
}

recap_status_t smoother_create(smoother_t **out, size_t n, int sweeps) {
  *out = NULL;
  if (n < 3 || sweeps < 1 || sweeps > 1000) return RECAP_ERROR_INVALID_ARGUMENT;
  smoother_t *s = calloc(1, sizeof *s);
  if (!s) return RECAP_ERROR_OUT_OF_MEMORY;
  s->n = n;
  s->sweeps = sweeps;
  size_t bytes = n * sizeof(float);
  recap_status_t st = recap_malloc((void **)&s->in, bytes, NULL);
  if (st == RECAP_SUCCESS) st = recap_malloc((void **)&s->out, bytes, NULL);
  if (st == RECAP_SUCCESS) st = recap_malloc((void **)&s->scratch, bytes, NULL);
  if (st != RECAP_SUCCESS) {
    smoother_destroy(s);
    return st;
  }
  *out = s;
  return RECAP_SUCCESS;
}

void smoother_destroy(smoother_t *s) {
  if (!s) return;
  if (s->graph) (void)recap_graph_destroy(s->graph);
  (void)recap_free(s->in);
  (void)recap_free(s->out);
  (void)recap_free(s->scratch);
  free(s);
}

float *smoother_input(smoother_t *s) { return s->in; }
const float *smoother_output(const smoother_t *s) { return s->out; }
int smoother_replayed(const smoother_t *s) { return s->replayed; }

/* One run's kernels: the input copied to where the sweeps start, chosen so that the last
 * sweep writes `out` (each sweep reads one of scratch and out and writes the other). */
static recap_status_t enqueue_run(smoother_t *s, cudaStream_t stream) {
  float *from = s->sweeps % 2 ? s->scratch : s->out, *to = s->sweeps % 2 ? s->out : s->scratch;
  cudaError_t err =
      cudaMemcpyAsync(from, s->in, s->n * sizeof(float), cudaMemcpyDeviceToDevice, stream);
  for (int k = 0; err == cudaSuccess && k < s->sweeps; k++) {
    err = smoother_sweep(to, from, s->n, stream);
    float *t = from;
    from = to;
    to = t;
  }
  return cuda_status(err);
}

recap_status_t smoother_prepare(smoother_t *s, cudaStream_t stream) {
  if (s->graph) return RECAP_SUCCESS;
  recap_graph_t g;
  recap_status_t st = recap_graph_create(&g, RECAP_GRAPH_KEEP);
  if (st != RECAP_SUCCESS) return st;
  st = recap_graph_capture_begin(g, NULL, (recap_stream_t)stream);
  if (st == RECAP_SUCCESS) {
    recap_status_t work = enqueue_run(s, stream);
    st = recap_graph_capture_end(g);
    if (st == RECAP_SUCCESS) st = work;
  }
  /* Instantiated now, so that the first replay outside a capture costs no instantiation. */
  if (st == RECAP_SUCCESS) st = recap_graph_instantiate(g);
  if (st != RECAP_SUCCESS) {
    (void)recap_graph_destroy(g);
    return st;
  }
  s->graph = g;
  return RECAP_SUCCESS;
}

recap_status_t smoother_run(smoother_t *s, cudaStream_t stream) {
  s->replayed = s->graph != NULL;
  return s->graph ? recap_graph_replay(s->graph, (recap_stream_t)stream) : enqueue_run(s, stream);
}
