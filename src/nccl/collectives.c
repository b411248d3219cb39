/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * collectives.c — the collectives through recap (recap/nccl.h): eagerly a call of NCCL through
 * the seam; during a recap capture also a record in the capturing graph, whose hooks apply the
 * communicators' replay policy.
 *
 * The graph is found from the stream as the random-number layer finds it (the capture registry).
 * A collective inside a region body is refused before anything is enqueued: the driver would
 * accept it at capture and fail the instantiation much later with a bare cudaErrorInvalidValue.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/host.h"
#include "device/device.h"
#include "graph/graph_internal.h"
#include "graph/registry.h"
#include "nccl/nccl_internal.h"
#include "regions/region_internal.h"

/* NCCL before 2.30.4 can deadlock replays of graphs that share a communicator (vllm #52504). */
enum { RECAP__NCCL_FIXED_VERSION = 23004 };

static atomic_bool warned;
/* recap_nccl_group_start's depth on this thread. */
static _Thread_local unsigned group_depth;

void recap__nccl_warning_reset(void) { atomic_store(&warned, false); }

/* ------------------------------------------------------------------------------------------
 * The per-graph record and its hooks
 * ---------------------------------------------------------------------------------------- */

static recap_status_t hook_before_replay(void *ctx, recap_graph_t graph, recap_stream_t stream) {
  (void)graph;
  recap__nccl_graph_t *g = ctx;
  RECAP__CHECK(recap__nccl_policy_before(g->comms, g->comm_count, stream, "recap_graph_replay",
                                         &g->admission));
  g->replay_stream = stream;
  return RECAP_SUCCESS;
}

static void hook_replay_failed(void *ctx, recap_graph_t graph) {
  (void)graph;
  recap__nccl_graph_t *g = ctx;
  recap__nccl_policy_after(&g->admission, g->replay_stream, false);
}

static void hook_replay_done(void *ctx, recap_graph_t graph) {
  (void)graph;
  recap__nccl_graph_t *g = ctx;
  recap__nccl_policy_after(&g->admission, g->replay_stream, true);
}

static void hook_capture_ended(void *ctx, recap_graph_t graph, bool succeeded) {
  (void)ctx, (void)graph, (void)succeeded;
}

static void hook_release(void *ctx, recap_graph_t graph) {
  (void)graph;
  recap__nccl_graph_t *g = ctx;
  recap__host_free(g->entries);
  recap__host_free(g->comms);
  recap__host_free(g);
}

/* Defined below the functions it names, which attach and detach it. */
static const recap__graph_hooks_t nccl_hooks;

recap__nccl_graph_t *recap__nccl_graph_find(recap_graph_t graph) {
  return recap__graph_hook_ctx(graph, &nccl_hooks);
}

static recap__nccl_graph_t *attach(recap_graph_t graph, const char *function) {
  recap__nccl_graph_t *g = recap__nccl_graph_find(graph);
  if (g) return g;
  g = recap__host_calloc(1, sizeof *g);
  if (!g) {
    recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", function);
    return NULL;
  }
  if (recap__graph_add_hook(graph, &nccl_hooks, g) != RECAP_SUCCESS) {
    recap__host_free(g);
    return NULL;
  }
  return g;
}

/* Room for one more entry and for c's communicator, so that recording after NCCL accepted the
 * collective cannot fail. *index: the communicator's index. */
static recap_status_t reserve(recap__nccl_graph_t *g, recap__nccl_comm_t comm, unsigned *index,
                              const char *function) {
  if (g->count == g->capacity) {
    size_t capacity = g->capacity ? g->capacity * 2 : 16;
    recap__nccl_entry_t *grown = recap__host_realloc(g->entries, capacity * sizeof *grown);
    if (!grown) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", function);
    g->entries = grown;
    g->capacity = capacity;
  }
  for (size_t i = 0; i < g->comm_count; i++)
    if (g->comms[i] == comm) {
      *index = (unsigned)i;
      return RECAP_SUCCESS;
    }
  if (g->comm_count == g->comm_capacity) {
    size_t capacity = g->comm_capacity ? g->comm_capacity * 2 : 4;
    recap__nccl_comm_t *grown = recap__host_realloc(g->comms, capacity * sizeof *grown);
    if (!grown) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", function);
    g->comms = grown;
    g->comm_capacity = capacity;
  }
  *index = (unsigned)g->comm_count;
  return RECAP_SUCCESS;
}

/* Take back what an embedding added to outer's record o (inner's embed_* fields). */
static void embed_undo(recap__nccl_graph_t *inner, recap_graph_t outer, recap__nccl_graph_t *o) {
  o->count = inner->embed_count;
  o->comm_count = inner->embed_comm_count;
  if (inner->embed_attached) {
    recap__graph_remove_hook(outer, &nccl_hooks, o);
    hook_release(o, outer);
  }
  inner->embed_attached = false;
}

/* Collectives are refused inside region bodies, embedded or not. */
static recap_status_t hook_embed_refused(void *ctx, recap_graph_t graph, recap_graph_t outer) {
  (void)ctx;
  (void)graph;
  unsigned depth = recap__graph_region_depth(outer);
  if (depth == 0) return RECAP_SUCCESS;
  return recap__error(RECAP_ERROR_INVALID_USAGE,
                      "recap_graph_replay: cannot embed the graph into the capture on this stream: "
                      "it records NCCL collectives, and the stream captures the body of a region "
                      "%u deep, where collectives are refused (docs/nccl.md); embed it before or "
                      "after the region",
                      depth);
}

/* The graph whose capture recorded collectives (inner) is embedded in outer's capture: outer's
 * record gains inner's entries, in order, after those recorded so far, with inner's
 * communicators among outer's (added in the order inner first used them when outer did not use
 * them yet). Outer's fingerprint then covers them, and its replays follow their communicators'
 * policies (hook_before_replay), as inner's replays do. */
static recap_status_t hook_embed_begin(void *ctx, recap_graph_t graph, recap_graph_t outer,
                                       recap_stream_t stream) {
  (void)graph;
  (void)stream;
  static const char fn[] = "recap_graph_replay";
  recap__nccl_graph_t *inner = ctx;
  RECAP__CHECK(hook_embed_refused(ctx, graph, outer));
  recap__nccl_graph_t *o = recap__nccl_graph_find(outer);
  bool attached = !o;
  if (!o && !(o = attach(outer, fn))) return recap_last_status();
  inner->embed_count = o->count;
  inner->embed_comm_count = o->comm_count;
  inner->embed_attached = attached;
  for (size_t i = 0; i < inner->count; i++) {
    recap__nccl_entry_t e = inner->entries[i];
    recap__nccl_comm_t comm = inner->comms[e.comm_index];
    recap_status_t s = reserve(o, comm, &e.comm_index, fn);
    if (s != RECAP_SUCCESS) {
      embed_undo(inner, outer, o);
      return s;
    }
    if (e.comm_index == o->comm_count) o->comms[o->comm_count++] = comm;
    o->entries[o->count++] = e;
  }
  return RECAP_SUCCESS;
}

static recap_status_t hook_embed_end(void *ctx, recap_graph_t graph, recap_graph_t outer,
                                     recap_stream_t stream, bool added) {
  (void)graph;
  (void)stream;
  recap__nccl_graph_t *inner = ctx, *o = recap__nccl_graph_find(outer);
  if (!added && o) embed_undo(inner, outer, o);
  inner->embed_attached = false;
  return RECAP_SUCCESS;
}

static const recap__graph_hooks_t nccl_hooks = {
    .name = "recorded NCCL collectives",
    .embed_refused = hook_embed_refused,
    .embed_begin = hook_embed_begin,
    .embed_end = hook_embed_end,
    .before_replay = hook_before_replay,
    .replay_failed = hook_replay_failed,
    .replay_done = hook_replay_done,
    .capture_ended = hook_capture_ended,
    .release = hook_release,
};

static void warn_old_version(int version) {
  if (version >= RECAP__NCCL_FIXED_VERSION || atomic_exchange(&warned, true)) return;
  RECAP__WARN(
      "NCCL %d.%d.%d has the graph deadlock of vllm #52504: replays of graphs that share "
      "a communicator on two streams can hang (fixed in NCCL 2.30.4); keep the "
      "communicator's policy at RECAP_NCCL_SERIALIZE (recap_nccl_comm_policy) or "
      "upgrade NCCL",
      version / 10000, version / 100 % 100, version % 100);
}

recap_status_t recap_nccl_version(int *version) {
  RECAP__ARG(version != NULL, "recap_nccl_version: version is NULL");
  *version = 0;
  int code = 0;
  RECAP__CHECK(recap__nccl()->load(&code));
  *version = code;
  return RECAP_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * The wrappers
 * ---------------------------------------------------------------------------------------- */

static bool dtype_valid(recap_nccl_dtype_t dtype) {
  return (int)dtype >= RECAP_NCCL_INT8 && (int)dtype <= RECAP_NCCL_FLOAT8E5M2;
}
static bool op_valid(recap_nccl_op_t op) {
  return (int)op >= RECAP_NCCL_SUM && (int)op <= RECAP_NCCL_AVG;
}

/* Enqueue c on stream, and record it when the stream captures into a recap graph. */
static recap_status_t enqueue(recap__coll_t *c, recap_stream_t stream, const char *function) {
  const recap__nccl_ops_t *nccl = recap__nccl();
  int version = 0;
  RECAP__CHECK(nccl->load(&version));
  recap_graph_t graph = NULL;
  if (recap__registry_active() > 0) {
    recap__capture_status_t status;
    uint64_t id = 0;
    RECAP__CHECK(recap__device()->stream_capture_info(stream, &status, &id));
    if (status == RECAP__CAPTURE_INVALIDATED)
      return recap__error(RECAP_ERROR_CAPTURE_INVALIDATED,
                          "%s: the stream's capture was invalidated; nothing was enqueued",
                          function);
    /* A capture that is not recap's is the caller's business: NCCL is called, nothing recorded. */
    if (status == RECAP__CAPTURE_ACTIVE) graph = recap__registry_find(id);
  }
  if (!graph) return nccl->collective(c, stream);

  unsigned depth = recap__graph_region_depth(graph);
  if (depth > 0)
    return recap__error(
        RECAP_ERROR_INVALID_USAGE,
        "%s: the stream captures the body of a region %u deep; a collective there is refused "
        "and nothing was enqueued: CUDA fails the instantiation of a conditional body holding "
        "NCCL's work with a bare cudaErrorInvalidValue (pytorch #180960), and ranks whose "
        "regions run a different number of times would wait for each other forever; enqueue "
        "the collective before or after the region",
        function, depth);
  warn_old_version(version);
  recap__nccl_graph_t *g = attach(graph, function);
  if (!g) return recap_last_status();
  int rank = 0, nranks = 0, device = 0;
  RECAP__CHECK(nccl->comm_info(c->comm, &rank, &nranks, &device));
  unsigned index = 0;
  RECAP__CHECK(reserve(g, c->comm, &index, function));
  RECAP__CHECK(nccl->collective(c, stream));
  if (index == g->comm_count) g->comms[g->comm_count++] = c->comm;
  g->entries[g->count++] = (recap__nccl_entry_t){.kind = c->kind,
                                                 .comm_index = index,
                                                 .nranks = nranks,
                                                 .count = c->count,
                                                 .dtype = c->dtype,
                                                 .op = c->op,
                                                 .peer = c->peer,
                                                 .root = c->root,
                                                 .group = group_depth};
  return RECAP_SUCCESS;
}

#define CHECK_COMMON(fn, dtype, comm)                                                     \
  do {                                                                                    \
    RECAP__ARG((comm) != NULL, fn ": comm is NULL");                                      \
    RECAP__ARG(dtype_valid(dtype),                                                        \
               fn ": dtype %d is not a recap_nccl_dtype_t (RECAP_NCCL_INT8..FLOAT8E5M2)", \
               (int)(dtype));                                                             \
  } while (0)

#define CHECK_OP(fn, op) \
  RECAP__ARG(op_valid(op), fn ": op %d is not a recap_nccl_op_t (RECAP_NCCL_SUM..AVG)", (int)(op))

recap_status_t recap_nccl_all_reduce(const void *send, void *recv, size_t count,
                                     recap_nccl_dtype_t dtype, recap_nccl_op_t op,
                                     recap_nccl_comm_t comm, recap_stream_t stream) {
  RECAP__ARG(send != NULL, "recap_nccl_all_reduce: send is NULL");
  RECAP__ARG(recv != NULL, "recap_nccl_all_reduce: recv is NULL");
  CHECK_COMMON("recap_nccl_all_reduce", dtype, comm);
  CHECK_OP("recap_nccl_all_reduce", op);
  recap__coll_t c = {RECAP__COLL_ALL_REDUCE, send, recv, count, (int)dtype, (int)op, -1, -1, comm};
  return enqueue(&c, stream, "recap_nccl_all_reduce");
}

recap_status_t recap_nccl_all_gather(const void *send, void *recv, size_t sendcount,
                                     recap_nccl_dtype_t dtype, recap_nccl_comm_t comm,
                                     recap_stream_t stream) {
  RECAP__ARG(send != NULL, "recap_nccl_all_gather: send is NULL");
  RECAP__ARG(recv != NULL, "recap_nccl_all_gather: recv is NULL");
  CHECK_COMMON("recap_nccl_all_gather", dtype, comm);
  recap__coll_t c = {RECAP__COLL_ALL_GATHER, send, recv, sendcount, (int)dtype, -1, -1, -1, comm};
  return enqueue(&c, stream, "recap_nccl_all_gather");
}

recap_status_t recap_nccl_reduce_scatter(const void *send, void *recv, size_t recvcount,
                                         recap_nccl_dtype_t dtype, recap_nccl_op_t op,
                                         recap_nccl_comm_t comm, recap_stream_t stream) {
  RECAP__ARG(send != NULL, "recap_nccl_reduce_scatter: send is NULL");
  RECAP__ARG(recv != NULL, "recap_nccl_reduce_scatter: recv is NULL");
  CHECK_COMMON("recap_nccl_reduce_scatter", dtype, comm);
  CHECK_OP("recap_nccl_reduce_scatter", op);
  recap__coll_t c = {
      RECAP__COLL_REDUCE_SCATTER, send, recv, recvcount, (int)dtype, (int)op, -1, -1, comm};
  return enqueue(&c, stream, "recap_nccl_reduce_scatter");
}

recap_status_t recap_nccl_broadcast(const void *send, void *recv, size_t count,
                                    recap_nccl_dtype_t dtype, int root, recap_nccl_comm_t comm,
                                    recap_stream_t stream) {
  RECAP__ARG(send != NULL, "recap_nccl_broadcast: send is NULL");
  RECAP__ARG(recv != NULL, "recap_nccl_broadcast: recv is NULL");
  CHECK_COMMON("recap_nccl_broadcast", dtype, comm);
  RECAP__ARG(root >= 0, "recap_nccl_broadcast: root %d is negative", root);
  recap__coll_t c = {RECAP__COLL_BROADCAST, send, recv, count, (int)dtype, -1, -1, root, comm};
  return enqueue(&c, stream, "recap_nccl_broadcast");
}

recap_status_t recap_nccl_reduce(const void *send, void *recv, size_t count,
                                 recap_nccl_dtype_t dtype, recap_nccl_op_t op, int root,
                                 recap_nccl_comm_t comm, recap_stream_t stream) {
  RECAP__ARG(send != NULL, "recap_nccl_reduce: send is NULL");
  RECAP__ARG(recv != NULL, "recap_nccl_reduce: recv is NULL");
  CHECK_COMMON("recap_nccl_reduce", dtype, comm);
  CHECK_OP("recap_nccl_reduce", op);
  RECAP__ARG(root >= 0, "recap_nccl_reduce: root %d is negative", root);
  recap__coll_t c = {RECAP__COLL_REDUCE, send, recv, count, (int)dtype, (int)op, -1, root, comm};
  return enqueue(&c, stream, "recap_nccl_reduce");
}

recap_status_t recap_nccl_send(const void *buf, size_t count, recap_nccl_dtype_t dtype, int peer,
                               recap_nccl_comm_t comm, recap_stream_t stream) {
  RECAP__ARG(buf != NULL, "recap_nccl_send: buf is NULL");
  CHECK_COMMON("recap_nccl_send", dtype, comm);
  RECAP__ARG(peer >= 0, "recap_nccl_send: peer %d is negative", peer);
  recap__coll_t c = {RECAP__COLL_SEND, buf, NULL, count, (int)dtype, -1, peer, -1, comm};
  return enqueue(&c, stream, "recap_nccl_send");
}

recap_status_t recap_nccl_recv(void *buf, size_t count, recap_nccl_dtype_t dtype, int peer,
                               recap_nccl_comm_t comm, recap_stream_t stream) {
  RECAP__ARG(buf != NULL, "recap_nccl_recv: buf is NULL");
  CHECK_COMMON("recap_nccl_recv", dtype, comm);
  RECAP__ARG(peer >= 0, "recap_nccl_recv: peer %d is negative", peer);
  recap__coll_t c = {RECAP__COLL_RECV, NULL, buf, count, (int)dtype, -1, peer, -1, comm};
  return enqueue(&c, stream, "recap_nccl_recv");
}

recap_status_t recap_nccl_group_start(void) {
  const recap__nccl_ops_t *nccl = recap__nccl();
  int version = 0;
  RECAP__CHECK(nccl->load(&version));
  RECAP__CHECK(nccl->group_start());
  group_depth++;
  return RECAP_SUCCESS;
}

recap_status_t recap_nccl_group_end(void) {
  if (group_depth == 0)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_nccl_group_end: no group is open on this thread; call "
                        "recap_nccl_group_start first");
  RECAP__CHECK(recap__nccl()->group_end());
  group_depth--;
  return RECAP_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Names
 * ---------------------------------------------------------------------------------------- */

const char *recap_nccl_dtype_name(recap_nccl_dtype_t dtype) {
  static const char *const names[] = {"int8",    "uint8",    "int32",      "uint32",
                                      "int64",   "uint64",   "float16",    "float32",
                                      "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  return dtype_valid(dtype) ? names[dtype] : "unknown";
}

const char *recap_nccl_op_name(recap_nccl_op_t op) {
  static const char *const names[] = {"sum", "prod", "max", "min", "avg"};
  return op_valid(op) ? names[op] : "unknown";
}

const char *recap_collective_kind_name(recap_collective_kind_t kind) {
  static const char *const names[] = {"all_reduce", "all_gather", "reduce_scatter",
                                      "broadcast",  "reduce",     "send",
                                      "recv"};
  return (int)kind >= 0 && (int)kind <= RECAP_COLLECTIVE_RECV ? names[kind] : "unknown";
}
