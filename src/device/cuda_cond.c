/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_cond.c — regions on the CUDA runtime: whether the driver runs conditional nodes,
 * pausing a capture (the graph being built and the stream's dependencies, then
 * cudaStreamEndCapture) and resuming it into a graph (cudaStreamBeginCaptureToGraph),
 * conditional handles and nodes, and the record of the conditional nodes recap added
 * (cuda_cond.h), which inspection reads since CUDA 13.0 cannot tell a node's bodies.
 */
#include "device/cuda_cond.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host.h"
#include "device/cuda_error.h"

/* The seam's kinds are CUDA's numbering. */
_Static_assert((int)cudaGraphCondTypeIf == RECAP__COND_IF, "conditional node types");
_Static_assert((int)cudaGraphCondTypeWhile == RECAP__COND_WHILE, "conditional node types");
_Static_assert((int)cudaGraphCondTypeSwitch == RECAP__COND_SWITCH, "conditional node types");
_Static_assert(sizeof(cudaGraphConditionalHandle) == sizeof(uint64_t), "handles are 64 bits");

/* IF/ELSE and SWITCH nodes came with CUDA 12.8 (WHILE and one-body IF with 12.4). */
enum { COND_DRIVER_VERSION = 12080 };

/* ---- the record of conditional nodes ------------------------------------------------------ */

typedef struct cond_entry {
  cudaGraphNode_t node;
  cudaGraph_t graph; /* the graph holding the node */
  recap__cond_kind_t kind;
  unsigned branches;
  cudaGraph_t *bodies; /* malloc'ed: the C library's, as the record is no one's but the seam's */
} cond_entry_t;

static pthread_mutex_t record_lock = PTHREAD_MUTEX_INITIALIZER;
static cond_entry_t *record;
static size_t record_count, record_cap;

static cond_entry_t *entry_of(cudaGraphNode_t node) {
  for (size_t i = 0; i < record_count; i++)
    if (record[i].node == node) return &record[i];
  return NULL;
}

/* Record a node (a node at the address of one forgotten without a destroy replaces it); false
 * when out of host memory. Lock held. */
static bool record_add(cudaGraphNode_t node, cudaGraph_t graph, recap__cond_kind_t kind,
                       unsigned branches, const cudaGraph_t *bodies) {
  cudaGraph_t *copy = malloc(branches * sizeof *copy);
  if (!copy) return false;
  memcpy(copy, bodies, branches * sizeof *copy);
  cond_entry_t *e = entry_of(node);
  if (e) {
    free(e->bodies);
  } else {
    if (record_count == record_cap) {
      size_t cap = record_cap ? record_cap * 2 : 16;
      cond_entry_t *grown = realloc(record, cap * sizeof *grown);
      if (!grown) {
        free(copy);
        return false;
      }
      record = grown;
      record_cap = cap;
    }
    e = &record[record_count++];
  }
  *e = (cond_entry_t){node, graph, kind, branches, copy};
  return true;
}

bool recap__cuda_cond_find(recap__graph_node_t node, recap__cond_kind_t *kind, unsigned *branches,
                           recap_cuda_graph_t **bodies) {
  *bodies = NULL;
  *branches = 0;
  pthread_mutex_lock(&record_lock);
  const cond_entry_t *e = entry_of((cudaGraphNode_t)node);
  bool found = false;
  if (e && (*bodies = recap__host_malloc(e->branches * sizeof **bodies)) != NULL) {
    memcpy(*bodies, e->bodies, e->branches * sizeof **bodies);
    *kind = e->kind;
    *branches = e->branches;
    found = true;
  }
  pthread_mutex_unlock(&record_lock);
  return found;
}

bool recap__cuda_cond_any_in(recap_cuda_graph_t graph) {
  pthread_mutex_lock(&record_lock);
  bool any = false;
  for (size_t i = 0; i < record_count && !any; i++) any = record[i].graph == (cudaGraph_t)graph;
  pthread_mutex_unlock(&record_lock);
  return any;
}

/* Lock held. Entries are removed by moving the last one into their place, so the scan goes on
 * from the same index. */
static void forget_locked(cudaGraph_t graph, int depth) {
  for (size_t i = 0; i < record_count;) {
    if (record[i].graph != graph) {
      i++;
      continue;
    }
    cond_entry_t e = record[i];
    record[i] = record[--record_count];
    /* Bodies nest no deeper than regions do; the bound guards the recursion. */
    if (depth < 2 * RECAP_REGION_MAX_DEPTH)
      for (unsigned b = 0; b < e.branches; b++) forget_locked(e.bodies[b], depth + 1);
    free(e.bodies);
  }
}

void recap__cuda_cond_forget(recap_cuda_graph_t graph) {
  if (!graph) return;
  pthread_mutex_lock(&record_lock);
  forget_locked((cudaGraph_t)graph, 0);
  if (record_count == 0) {
    free(record);
    record = NULL;
    record_cap = 0;
  }
  pthread_mutex_unlock(&record_lock);
}

/* ---- the seam's operations ---------------------------------------------------------------- */

recap_status_t recap__cuda_cond_supported(bool *supported) {
  RECAP__ARG(supported != NULL, "cond_supported: supported is NULL");
  *supported = false;
  /* The runtime is linked statically: the driver's version is what decides. It cannot change
   * while the process runs, and every capture asks (the regions' path), so it is read once. */
  static _Atomic int driver_version;
  int version = atomic_load_explicit(&driver_version, memory_order_relaxed);
  if (version == 0) {
    CUDA_TRY(cudaDriverGetVersion(&version));
    atomic_store_explicit(&driver_version, version, memory_order_relaxed);
  }
  *supported = version >= COND_DRIVER_VERSION;
  return RECAP_SUCCESS;
}

/* The failure of cudaStreamEndCapture at a pause, worded as device.h says. */
static recap_status_t pause_failure(cudaError_t err, recap_stream_t stream) {
  switch (err) {
    case cudaErrorStreamCaptureInvalidated:
      return RECAP__ERROR_AT(
          RECAP_ERROR_CAPTURE_INVALIDATED,
          "capture pause: cudaStreamEndCapture(stream %p): the capture was invalidated "
          "(cudaErrorStreamCaptureInvalidated): an illegal call was made while it ran (a "
          "synchronisation, a synchronous copy, cudaMalloc under a global-mode capture, ...); "
          "the capture is gone and the stream no longer captures",
          (void *)stream);
    case cudaErrorStreamCaptureUnjoined:
      return RECAP__ERROR_AT(
          RECAP_ERROR_CAPTURE_INVALIDATED,
          "capture pause: cudaStreamEndCapture(stream %p) failed: "
          "cudaErrorStreamCaptureUnjoined: a side stream forked from the capture was not "
          "joined back into the capturing stream; join every side stream back first (record an "
          "event on it and wait for it on the capturing stream). The capture is gone and no "
          "stream captures it any more",
          (void *)stream);
    case cudaErrorStreamCaptureWrongThread:
      return RECAP__ERROR_AT(RECAP_ERROR_INVALID_USAGE,
                             "capture pause: cudaStreamEndCapture(stream %p) failed: "
                             "cudaErrorStreamCaptureWrongThread: a capture begun in global or "
                             "thread-local mode must be paused by the thread that began it",
                             (void *)stream);
    case cudaErrorStreamCaptureUnmatched:
      return RECAP__ERROR_AT(RECAP_ERROR_INVALID_USAGE,
                             "capture pause: cudaStreamEndCapture(stream %p) failed: "
                             "cudaErrorStreamCaptureUnmatched: the capture was not begun on "
                             "this stream (a side stream joined to it); pause it on the stream "
                             "it began on",
                             (void *)stream);
    default:
      return recap__cuda_fail((int)err, __FILE__, __LINE__,
                              "capture pause: cudaStreamEndCapture(stream %p)", (void *)stream);
  }
}

recap_status_t recap__cuda_capture_pause(recap_stream_t stream, recap_cuda_graph_t *graph,
                                         recap__graph_node_t **deps, size_t *count) {
  RECAP__ARG(graph && deps && count, "capture pause: an out-parameter is NULL");
  *graph = NULL;
  *deps = NULL;
  *count = 0;
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t *current = NULL;
  size_t n = 0;
  CUDA_TRY_F(cudaStreamGetCaptureInfo(stream, &status, NULL, NULL, &current, NULL, &n),
             "capture pause: cudaStreamGetCaptureInfo(stream %p)", (void *)stream);
  if (status == cudaStreamCaptureStatusNone)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_USAGE,
                           "capture pause (stream %p): the stream is not capturing",
                           (void *)stream);
  /* The dependencies belong to the capture: copy them before it ends. */
  recap__graph_node_t *list = NULL;
  if (status == cudaStreamCaptureStatusActive && n > 0) {
    if (!(list = recap__host_malloc(n * sizeof *list)))
      return RECAP__ERROR_AT(RECAP_ERROR_OUT_OF_MEMORY,
                             "capture pause: out of host memory for %zu dependencies; the "
                             "capture goes on",
                             n);
    for (size_t i = 0; i < n; i++) list[i] = (recap__graph_node_t)current[i];
  }
  cudaGraph_t g = NULL;
  cudaError_t err = cudaStreamEndCapture(stream, &g);
  if (err == cudaSuccess && g && status == cudaStreamCaptureStatusActive) {
    *graph = g;
    *deps = list;
    *count = list ? n : 0;
    return RECAP_SUCCESS;
  }
  recap__host_free(list);
  /* A graph handed back for a capture found invalidated is left alone: after a resume it is the
   * parent graph the caller already holds (cudaStreamBeginCaptureToGraph captures into the
   * caller's graph), which the caller destroys. The conditional nodes recorded in such a graph
   * stay recorded until then; a first capture, whose graph CUDA drops, holds none. */
  if (err == cudaSuccess) err = cudaErrorStreamCaptureInvalidated;
  (void)cudaGetLastError();
  return pause_failure(err, stream);
}

recap_status_t recap__cuda_capture_to_graph(recap_stream_t stream, recap_cuda_graph_t graph,
                                            const recap__graph_node_t *deps, size_t count,
                                            recap__capture_mode_t mode) {
  if (stream == NULL || stream == cudaStreamLegacy)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_USAGE,
                           "cudaStreamBeginCaptureToGraph: the legacy default stream (handle %p) "
                           "cannot capture; capture on a stream you created",
                           (void *)stream);
  if (mode != RECAP__CAPTURE_MODE_GLOBAL && mode != RECAP__CAPTURE_MODE_THREAD_LOCAL &&
      mode != RECAP__CAPTURE_MODE_RELAXED)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                           "cudaStreamBeginCaptureToGraph: %d is not a capture mode", (int)mode);
  RECAP__ARG(graph != NULL, "cudaStreamBeginCaptureToGraph: graph is NULL");
  RECAP__ARG(count == 0 || deps != NULL,
             "cudaStreamBeginCaptureToGraph: %zu dependencies but deps is NULL", count);
  enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  CUDA_TRY_F(cudaStreamIsCapturing(stream, &st), "cudaStreamIsCapturing(stream %p)",
             (void *)stream);
  if (st != cudaStreamCaptureStatusNone)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_USAGE,
                           "cudaStreamBeginCaptureToGraph(stream %p): the stream is already "
                           "capturing%s; end or pause that capture first",
                           (void *)stream,
                           st == cudaStreamCaptureStatusInvalidated ? " (invalidated)" : "");
  cudaError_t err =
      cudaStreamBeginCaptureToGraph(stream, (cudaGraph_t)graph, (const cudaGraphNode_t *)deps, NULL,
                                    count, (enum cudaStreamCaptureMode)mode);
  if (err == cudaErrorIllegalState) {
    (void)cudaGetLastError();
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_USAGE,
                           "cudaStreamBeginCaptureToGraph(stream %p, graph %p) failed: "
                           "cudaErrorIllegalState (the stream is already capturing)",
                           (void *)stream, (void *)graph);
  }
  if (err != cudaSuccess)
    return recap__cuda_fail((int)err, __FILE__, __LINE__,
                            "cudaStreamBeginCaptureToGraph(stream %p, graph %p, %zu dependencies)",
                            (void *)stream, (void *)graph, count);
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_cond_handle_create(recap_cuda_graph_t graph, unsigned initial,
                                              bool assign_default, uint64_t *handle) {
  RECAP__ARG(handle != NULL, "cudaGraphConditionalHandleCreate: handle is NULL");
  *handle = 0;
  RECAP__ARG(graph != NULL, "cudaGraphConditionalHandleCreate: graph is NULL");
  cudaGraphConditionalHandle h = 0;
  CUDA_TRY_F(cudaGraphConditionalHandleCreate(&h, (cudaGraph_t)graph, initial,
                                              assign_default ? cudaGraphCondAssignDefault : 0),
             "cudaGraphConditionalHandleCreate(graph %p, default %u, %s)", (void *)graph, initial,
             assign_default ? "cudaGraphCondAssignDefault" : "no flags");
  *handle = (uint64_t)h;
  return RECAP_SUCCESS;
}

static const char *cond_kind_text(recap__cond_kind_t kind) {
  switch (kind) {
    case RECAP__COND_IF: return "cudaGraphCondTypeIf";
    case RECAP__COND_WHILE: return "cudaGraphCondTypeWhile";
    case RECAP__COND_SWITCH: return "cudaGraphCondTypeSwitch";
  }
  return "an unknown type";
}

recap_status_t recap__cuda_cond_node_add(recap_cuda_graph_t graph, const recap__graph_node_t *deps,
                                         size_t count, recap__cond_kind_t kind, uint64_t handle,
                                         unsigned branches, recap__graph_node_t *node,
                                         recap_cuda_graph_t *bodies) {
  RECAP__ARG(node && bodies, "cudaGraphAddNode: node or bodies is NULL");
  *node = NULL;
  RECAP__ARG(graph != NULL, "cudaGraphAddNode: graph is NULL");
  RECAP__ARG(count == 0 || deps != NULL, "cudaGraphAddNode: %zu dependencies but deps is NULL",
             count);
  bool fits =
      (kind == RECAP__COND_WHILE && branches == 1) ||
      (kind == RECAP__COND_IF && (branches == 1 || branches == 2)) ||
      (kind == RECAP__COND_SWITCH && branches >= 1 && branches <= RECAP_REGION_MAX_BRANCHES);
  RECAP__ARG(fits,
             "cudaGraphAddNode: a conditional node of %s with %u bodies (WHILE has 1, IF 1 or "
             "2, SWITCH 1 to %d)",
             cond_kind_text(kind), branches, RECAP_REGION_MAX_BRANCHES);
  struct cudaGraphNodeParams p;
  memset(&p, 0, sizeof p);
  p.type = cudaGraphNodeTypeConditional;
  p.conditional.handle = (cudaGraphConditionalHandle)handle;
  p.conditional.type = (enum cudaGraphConditionalNodeType)kind;
  p.conditional.size = branches;
  cudaGraphNode_t n = NULL;
  CUDA_TRY_F(cudaGraphAddNode(&n, (cudaGraph_t)graph, (const cudaGraphNode_t *)deps, NULL, count,
                              &p),
             "cudaGraphAddNode(graph %p, %zu dependencies, conditional %s, handle 0x%llx, "
             "%u bodies)",
             (void *)graph, count, cond_kind_text(kind), (unsigned long long)handle, branches);
  pthread_mutex_lock(&record_lock);
  bool recorded = record_add(n, (cudaGraph_t)graph, kind, branches, p.conditional.phGraph_out);
  pthread_mutex_unlock(&record_lock);
  if (!recorded) {
    /* Without the record, inspection would miss the bodies: take the node out again. */
    (void)cudaGraphDestroyNode(n);
    return RECAP__ERROR_AT(RECAP_ERROR_OUT_OF_MEMORY,
                           "cudaGraphAddNode: out of host memory to record the conditional node; "
                           "it was removed again");
  }
  /* The body graphs are CUDA's, valid while the node lives: copy their handles out. */
  for (unsigned k = 0; k < branches; k++) bodies[k] = p.conditional.phGraph_out[k];
  *node = (recap__graph_node_t)n;
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_graph_add_empty(recap_cuda_graph_t graph) {
  RECAP__ARG(graph != NULL, "cudaGraphAddEmptyNode: graph is NULL");
  cudaGraphNode_t n = NULL;
  CUDA_TRY_F(cudaGraphAddEmptyNode(&n, (cudaGraph_t)graph, NULL, 0),
             "cudaGraphAddEmptyNode(graph %p)", (void *)graph);
  return RECAP_SUCCESS;
}
