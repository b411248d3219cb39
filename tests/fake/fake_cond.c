/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_cond.c — regions on the CPU fake device: pausing a capture and resuming it into a graph
 * (capture_pause, capture_to_graph), conditional handles and nodes whose bodies are fake graphs
 * owned by the node, what a graph launch does when it reaches a conditional node (as CUDA runs
 * IF, IF/ELSE, WHILE and SWITCH nodes), the condition kernels of cond_launch, and the knobs
 * tests set (fake.h).
 *
 * A condition's value lives where CUDA keeps it: per executable, in the executable's copy of
 * the conditional node (set to its default at each launch with assign_default, else at the
 * first launch only). A kernel that sets a condition during a launch finds the node by its
 * handle in the executable being run, which the launching thread names in a thread-local
 * variable while it holds the fake's lock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/host.h"
#include "fake/fake_state.h"

enum { FAKE_DEFAULT_ITERATION_LIMIT = 1000000 };
#define FAKE_COND_HANDLE_BASE 0xc0d0000000000000ull

/* The executable a graph launch of this thread is running (the fake's lock held), and the
 * handle a condition kernel set there that no conditional node of it holds. */
static _Thread_local fake_exec_t *tl_running;
static _Thread_local bool tl_stray;
static _Thread_local uint64_t tl_stray_handle;

/* ---- handles and nodes ------------------------------------------------------------------ */

static fake_handle_t *handle_find(uint64_t handle) {
  for (size_t i = 0; i < recap__fake.handle_count; i++)
    if (recap__fake.handles[i].handle == handle) return &recap__fake.handles[i];
  return NULL;
}

void recap__fake_cond_reset(void) {
  free(recap__fake.handles);
  recap__fake.handles = NULL;
  recap__fake.handle_count = recap__fake.handle_cap = 0;
  recap__fake.cond_unsupported = false;
  recap__fake.cond_iteration_limit = 0;
  recap__fake.cond_nodes_run = recap__fake.body_launches = recap__fake.cond_kernels_run = 0;
}

/* The conditional node holding handle among nodes and their bodies, or NULL. */
static fake_node_t *cond_node_of(fake_nodes_t *nodes, uint64_t handle) {
  for (size_t i = 0; i < nodes->count; i++) {
    fake_node_t *n = &nodes->v[i];
    if (n->type != RECAP_NODE_CONDITIONAL) continue;
    if (n->cond_handle == handle) return n;
    for (unsigned b = 0; b < n->branches; b++) {
      fake_node_t *inner = cond_node_of(&n->bodies[b]->nodes, handle);
      if (inner) return inner;
    }
  }
  return NULL;
}

size_t recap__fake_nodes_count_deep(const fake_nodes_t *nodes) {
  size_t count = nodes->count;
  for (size_t i = 0; i < nodes->count; i++)
    for (unsigned b = 0; b < nodes->v[i].branches; b++)
      count += recap__fake_nodes_count_deep(&nodes->v[i].bodies[b]->nodes);
  return count;
}

/* The index of the node whose handle is node in nodes, or SIZE_MAX. */
static size_t node_index(const fake_nodes_t *nodes, recap__graph_node_t node) {
  for (size_t i = 0; i < nodes->count; i++)
    if ((recap__graph_node_t)(uintptr_t)nodes->v[i].handle == node) return i;
  return SIZE_MAX;
}

/* Check deps (count of them) against g, as the node's dependency: *dep = 1 + the index of the
 * one node, or 0. The fake keeps one dependency per node. */
static recap_status_t deps_check(fake_failure_t *f, const char *call, const fake_graph_t *g,
                                 const recap__graph_node_t *deps, size_t count, size_t *dep) {
  *dep = 0;
  if (count > 0 && !deps)
    return recap__fake_note(f, RECAP_ERROR_INVALID_ARGUMENT,
                            "%s: %zu dependencies but deps is NULL", call, count);
  if (count > 1)
    return recap__fake_note(
        f, RECAP_ERROR_NOT_SUPPORTED,
        "%s: %zu dependencies; the fake device keeps one dependency per node (capture_pause "
        "hands out at most one)",
        call, count);
  if (count == 1) {
    size_t i = node_index(&g->nodes, deps[0]);
    if (i == SIZE_MAX)
      return recap__fake_note(f, RECAP_ERROR_INVALID_ARGUMENT,
                              "%s: invalid argument (cudaErrorInvalidValue): dependency %p is not "
                              "a node of graph %p",
                              call, (void *)deps[0], (const void *)g);
    *dep = i + 1;
  }
  return RECAP_SUCCESS;
}

/* A graph a conditional handle may be made for: a live graph, or the one a capture builds. */
static fake_graph_t *graph_or_building(recap_cuda_graph_t handle) {
  fake_graph_t *g = recap__fake_graph_find(handle);
  if (g) return g;
  for (fake_capture_t *c = recap__fake.captures; c; c = c->next)
    if ((recap_cuda_graph_t)c->graph == handle) return c->graph;
  return NULL;
}

/* Whether a capture appends to g itself. */
static bool captured_into(const fake_graph_t *g) {
  for (const fake_capture_t *c = recap__fake.captures; c; c = c->next)
    if (c->graph == g) return true;
  return false;
}

/* ---- setting conditions ----------------------------------------------------------------- */

/* Lock held. A flag is a device word; a handle's value is the running executable's, or the
 * handle's eager one outside a launch. */
static void cond_set_locked(uint64_t handle, uint32_t *flag, unsigned value) {
  if (flag) {
    *flag = value;
    return;
  }
  if (tl_running) {
    fake_node_t *n = cond_node_of(&tl_running->nodes, handle);
    if (n) {
      n->cond_value = value;
    } else if (!tl_stray) {
      tl_stray = true;
      tl_stray_handle = handle;
    }
    return;
  }
  fake_handle_t *h = handle_find(handle);
  if (h) h->value = value;
}

void recap__fake_cond_set(recap_cond_t cond, unsigned value) {
  /* Inside a launch this thread already holds the lock (the kernel runs under it). */
  if (tl_running) {
    cond_set_locked(cond.handle, cond.flag, value);
    return;
  }
  pthread_mutex_lock(&recap__fake.lock);
  cond_set_locked(cond.handle, cond.flag, value);
  pthread_mutex_unlock(&recap__fake.lock);
}

/* ---- launches --------------------------------------------------------------------------- */

void recap__fake_exec_conds_reset(fake_nodes_t *nodes) {
  for (size_t i = 0; i < nodes->count; i++) {
    fake_node_t *n = &nodes->v[i];
    if (n->type != RECAP_NODE_CONDITIONAL) continue;
    if (n->cond_assign_default || !n->cond_started) n->cond_value = n->cond_initial;
    n->cond_started = true;
    for (unsigned b = 0; b < n->branches; b++) recap__fake_exec_conds_reset(&n->bodies[b]->nodes);
  }
}

static bool run_nodes(fake_failure_t *f, fake_nodes_t *nodes, size_t top);

/* Run a node that blocks (a fake NCCL collective) with the lock released: it waits for the
 * other ranks' threads, which need the lock to launch theirs. Its argument words and name are
 * copied first; the executable itself must stay alive and unchanged meanwhile, which holds as
 * long as no other thread destroys, updates or patches it during its launch. */
static bool run_unlocked(fake_failure_t *f, fake_node_t *n, size_t where, bool nested) {
  enum { MAX_WORDS = 16 };
  void *words[MAX_WORDS];
  size_t count = n->arg_count < MAX_WORDS ? n->arg_count : MAX_WORDS;
  if (count) memcpy(words, n->args, count * sizeof *words);
  char name[96];
  snprintf(name, sizeof name, "%s", n->name ? n->name : "unnamed");
  char message[400] = "";
  recap_status_t (*fn)(void *const *, size_t, char *, size_t) = n->unlocked;
  pthread_mutex_unlock(&recap__fake.lock);
  recap_status_t st = fn(words, count, message, sizeof message);
  pthread_mutex_lock(&recap__fake.lock);
  if (st == RECAP_SUCCESS) return true;
  recap__fake_note(f, st, "cudaGraphLaunch: kernel node %zu%s (%s): %s", where,
                   nested ? " (inside a body)" : "", name, message);
  return false;
}

/* Run body b of conditional node n. */
static bool run_body(fake_failure_t *f, fake_node_t *n, unsigned b, size_t top) {
  recap__fake.body_launches++;
  return run_nodes(f, &n->bodies[b]->nodes, top);
}

static bool run_cond(fake_failure_t *f, fake_node_t *n, size_t top) {
  recap__fake.cond_nodes_run++;
  switch (n->cond_kind) {
    case RECAP__COND_IF:
      if (n->cond_value) return run_body(f, n, 0, top);
      if (n->branches == 2) return run_body(f, n, 1, top);
      return true;
    case RECAP__COND_SWITCH:
      if (n->cond_value < n->branches) return run_body(f, n, n->cond_value, top);
      return true;
    case RECAP__COND_WHILE: {
      uint64_t limit = recap__fake.cond_iteration_limit ? recap__fake.cond_iteration_limit
                                                        : FAKE_DEFAULT_ITERATION_LIMIT;
      /* The condition is checked before every iteration, the first included. */
      for (uint64_t done = 0; n->cond_value; done++) {
        if (done == limit) {
          recap__fake_note(
              f, RECAP_ERROR_CUDA,
              "cudaGraphLaunch: the WHILE conditional node (handle 0x%llx, in top-level node "
              "%zu) would start iteration %llu, past the fake device's iteration limit of %llu: "
              "its condition never became 0; set it to 0 in the body (or raise the limit with "
              "recap__fake_cond_iteration_limit); the launch stopped there",
              (unsigned long long)n->cond_handle, top, (unsigned long long)limit + 1,
              (unsigned long long)limit);
          return false;
        }
        if (!run_body(f, n, 0, top)) return false;
      }
      return true;
    }
  }
  return true;
}

/* Run nodes in node order (top: the index of the top-level node they lie in, for messages). */
static bool run_nodes(fake_failure_t *f, fake_nodes_t *nodes, size_t top) {
  bool nested = top != SIZE_MAX;
  for (size_t i = 0; i < nodes->count; i++) {
    fake_node_t *n = &nodes->v[i];
    size_t where = nested ? top : i;
    switch (n->type) {
      case RECAP_NODE_KERNEL:
        if (n->disabled) break;
        if (n->fn) n->fn((void *const *)n->args, n->arg_count);
        if (n->unlocked && !run_unlocked(f, n, where, nested)) return false;
        if (tl_stray) {
          recap__fake_note(
              f, RECAP_ERROR_CUDA,
              "cudaGraphLaunch: kernel node %zu%s (%s) set conditional handle 0x%llx, which no "
              "conditional node of this executable holds; a condition kernel must set a handle "
              "of the graph it was captured in",
              where, nested ? " (inside a body)" : "", n->name ? n->name : "unnamed",
              (unsigned long long)tl_stray_handle);
          return false;
        }
        break;
      case RECAP_NODE_MEMCPY:
        if (n->dst && n->src && n->bytes) memmove((void *)n->dst, n->src, n->bytes);
        break;
      case RECAP_NODE_MEMSET:
        if (n->dst && n->bytes) memset((void *)n->dst, n->value, n->bytes);
        break;
      case RECAP_NODE_CONDITIONAL:
        if (!run_cond(f, n, where)) return false;
        break;
      case RECAP_NODE_GRAPH:
        /* A child graph node runs its copy of the graph (fake_child.c). */
        if (n->child && !run_nodes(f, &n->child->nodes, where)) return false;
        break;
      default: break;
    }
  }
  return true;
}

fake_exec_t *recap__fake_running_exec(void) { return tl_running; }

bool recap__fake_exec_run(fake_failure_t *f, fake_exec_t *x) {
  recap__fake_exec_conds_reset(&x->nodes);
  tl_running = x;
  tl_stray = false;
  bool ok = run_nodes(f, &x->nodes, SIZE_MAX);
  tl_running = NULL;
  tl_stray = false;
  return ok;
}

/* ---- updates ---------------------------------------------------------------------------- */

/* Whether two lists of nodes have the same structure: counts, dependencies, types, and for
 * conditional nodes kinds, branch counts and bodies. */
static bool same_structure(const fake_nodes_t *a, const fake_nodes_t *b) {
  if (a->count != b->count) return false;
  for (size_t i = 0; i < a->count; i++) {
    const fake_node_t *x = &a->v[i], *y = &b->v[i];
    if (x->dep != y->dep || x->after != y->after || x->type != y->type) return false;
    if (x->type != RECAP_NODE_CONDITIONAL) continue;
    if (x->cond_kind != y->cond_kind || x->branches != y->branches) return false;
    for (unsigned k = 0; k < x->branches; k++)
      if (!same_structure(&x->bodies[k]->nodes, &y->bodies[k]->nodes)) return false;
  }
  return true;
}

recap_update_reason_t recap__fake_cond_update_refusal(const fake_nodes_t *x, const fake_nodes_t *g,
                                                      size_t *node) {
  for (size_t i = 0; i < g->count && i < x->count; i++) {
    const fake_node_t *a = &x->v[i], *b = &g->v[i];
    if (a->type != RECAP_NODE_CONDITIONAL || b->type != RECAP_NODE_CONDITIONAL) continue;
    *node = i;
    if (a->cond_kind != b->cond_kind) return RECAP_UPDATE_REASON_PARAMETERS_CHANGED;
    if (a->branches != b->branches) return RECAP_UPDATE_REASON_TOPOLOGY_CHANGED;
    for (unsigned k = 0; k < a->branches; k++)
      if (!same_structure(&a->bodies[k]->nodes, &b->bodies[k]->nodes))
        return RECAP_UPDATE_REASON_TOPOLOGY_CHANGED;
  }
  *node = SIZE_MAX;
  return RECAP_UPDATE_REASON_NONE;
}

/* ---- the seam's operations -------------------------------------------------------------- */

recap_status_t recap__fake_op_cond_supported(bool *supported) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  bool inject = recap__fake_count_call(RECAP__FAKE_FAULT_COND_SUPPORTED);
  if (inject)
    recap__fake_note_injected(&f, "cudaDriverGetVersion", RECAP__FAKE_FAULT_COND_SUPPORTED,
                              "conditional-node support query");
  else if (!supported)
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cond_supported: supported is NULL");
  else
    *supported = !recap__fake.cond_unsupported;
  return recap__fake_unlock_and_report(&f);
}

/* The side stream of c other than origin that still takes part in it, or NULL. */
static fake_stream_t *unjoined_side(const fake_capture_t *c) {
  for (fake_stream_t *t = recap__fake.streams; t; t = t->next)
    if (t->capture == c && t != c->origin) return t;
  return NULL;
}

recap_status_t recap__fake_op_capture_pause(recap_stream_t stream, recap_cuda_graph_t *graph,
                                            recap__graph_node_t **deps, size_t *count) {
  RECAP__ARG(graph && deps && count, "capture pause: an out-parameter is NULL");
  *graph = NULL;
  *deps = NULL;
  *count = 0;
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  bool inject = recap__fake_count_call(RECAP__FAKE_FAULT_CAPTURE_PAUSE);
  fake_stream_t *s = recap__fake_stream_of(stream);
  fake_capture_t *c = s ? s->capture : NULL;
  fake_stream_t *side = c ? unjoined_side(c) : NULL;
  if (inject) {
    /* Failed at its first step (cudaStreamGetCaptureInfo): the capture goes on unchanged. */
    recap__fake_note_injected(&f, "cudaStreamGetCaptureInfo", RECAP__FAKE_FAULT_CAPTURE_PAUSE,
                              "capture pause");
  } else if (!s) {
    recap__fake_note_bad_stream(&f, "cudaStreamGetCaptureInfo", stream);
  } else if (!c) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_USAGE,
                     "capture pause (cudaStreamEndCapture, stream %p): cudaErrorIllegalState: the "
                     "stream is not capturing",
                     (void *)stream);
  } else if (c->origin != s) {
    c->invalidated = true;
    recap__fake_note(
        &f, RECAP_ERROR_INVALID_USAGE,
        "capture pause (cudaStreamEndCapture, stream %p) failed: cudaErrorStreamCaptureUnmatched: "
        "capture %llu was not begun on this stream, which only joined it; pause it on the "
        "stream it began on (it is now invalidated)",
        (void *)stream, (unsigned long long)c->id);
  } else if (c->mode != RECAP__CAPTURE_MODE_RELAXED && !pthread_equal(c->thread, pthread_self())) {
    recap__fake_note(
        &f, RECAP_ERROR_INVALID_USAGE,
        "capture pause (cudaStreamEndCapture, stream %p) failed: "
        "cudaErrorStreamCaptureWrongThread: capture %llu was begun in %s mode by another thread",
        (void *)stream, (unsigned long long)c->id, recap__fake_mode_name(c->mode));
  } else if (c->invalidated) {
    uint64_t id = c->id;
    recap__fake_capture_finish(c, false);
    recap__fake_note(
        &f, RECAP_ERROR_CAPTURE_INVALIDATED,
        "capture pause (cudaStreamEndCapture, stream %p): capture %llu was invalidated "
        "(cudaErrorStreamCaptureInvalidated); no graph was made and the stream no longer "
        "captures",
        (void *)stream, (unsigned long long)id);
  } else if (side) {
    uint64_t id = c->id;
    recap__fake_capture_finish(c, false);
    recap__fake_note(
        &f, RECAP_ERROR_CAPTURE_INVALIDATED,
        "capture pause (cudaStreamEndCapture, stream %p): capture %llu has a side stream (%p) "
        "forked from it and not joined back (cudaErrorStreamCaptureUnjoined); join every side "
        "stream back into the capturing stream first. The capture is gone and no stream "
        "captures it any more",
        (void *)stream, (unsigned long long)id, (void *)side);
  } else {
    recap__graph_node_t *list = NULL;
    if (s->tail && !(list = recap__host_malloc(sizeof *list))) {
      recap__fake_note(&f, RECAP_ERROR_OUT_OF_MEMORY,
                       "capture pause: out of host memory; the capture goes on");
    } else {
      if (list) list[0] = (recap__graph_node_t)(uintptr_t)c->graph->nodes.v[s->tail - 1].handle;
      fake_graph_t *g = recap__fake_capture_finish(c, true);
      if (!g->listed) recap__fake_graph_list(g);
      *graph = (recap_cuda_graph_t)g;
      *deps = list;
      *count = list ? 1 : 0;
    }
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_capture_to_graph(recap_stream_t stream, recap_cuda_graph_t graph,
                                               const recap__graph_node_t *deps, size_t count,
                                               recap__capture_mode_t mode) {
  if (!stream)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "cudaStreamBeginCaptureToGraph: the legacy default stream cannot capture; "
                        "capture on a stream you created");
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  bool inject = recap__fake_count_call(RECAP__FAKE_FAULT_CAPTURE_TO_GRAPH);
  fake_stream_t *s = recap__fake_stream_of(stream);
  fake_graph_t *g = recap__fake_graph_find(graph);
  size_t dep = 0;
  fake_capture_t *c = NULL;
  if (inject) {
    recap__fake_note_injected(&f, "cudaStreamBeginCaptureToGraph",
                              RECAP__FAKE_FAULT_CAPTURE_TO_GRAPH, "capture to graph");
  } else if (mode != RECAP__CAPTURE_MODE_GLOBAL && mode != RECAP__CAPTURE_MODE_THREAD_LOCAL &&
             mode != RECAP__CAPTURE_MODE_RELAXED) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT,
                     "cudaStreamBeginCaptureToGraph: invalid argument (cudaErrorInvalidValue): %d "
                     "is not a capture mode",
                     (int)mode);
  } else if (!s) {
    recap__fake_note_bad_stream(&f, "cudaStreamBeginCaptureToGraph", stream);
  } else if (s->capture) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_USAGE,
                     "cudaStreamBeginCaptureToGraph(stream %p): the stream is already capturing "
                     "(capture %llu on the fake device); end or pause that capture first",
                     (void *)stream, (unsigned long long)s->capture->id);
  } else if (!g) {
    recap__fake_note_bad_graph(&f, "cudaStreamBeginCaptureToGraph", (const void *)graph, "graph");
  } else if (captured_into(g)) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_USAGE,
                     "cudaStreamBeginCaptureToGraph(stream %p): graph %p is already being "
                     "captured into by another capture",
                     (void *)stream, (void *)graph);
  } else if (deps_check(&f, "cudaStreamBeginCaptureToGraph", g, deps, count, &dep) !=
             RECAP_SUCCESS) {
    /* Noted. */
  } else if (!(c = recap__fake_capture_begin_locked(s, mode, g))) {
    recap__fake_note(&f, RECAP_ERROR_CUDA,
                     "cudaStreamBeginCaptureToGraph: out of memory (cudaErrorMemoryAllocation): "
                     "no host memory for a fake capture");
  } else {
    s->tail = dep; /* the first node captured waits for the dependency given */
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_cond_handle_create(recap_cuda_graph_t graph, unsigned initial,
                                                 bool assign_default, uint64_t *handle) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  bool inject = recap__fake_count_call(RECAP__FAKE_FAULT_COND_HANDLE);
  fake_graph_t *g = graph_or_building(graph);
  if (handle) *handle = 0;
  if (inject) {
    recap__fake_note_injected(&f, "cudaGraphConditionalHandleCreate", RECAP__FAKE_FAULT_COND_HANDLE,
                              "conditional handle creation");
  } else if (!handle) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT,
                     "cudaGraphConditionalHandleCreate: handle is NULL");
  } else if (recap__fake.cond_unsupported) {
    recap__fake_note(&f, RECAP_ERROR_NOT_SUPPORTED,
                     "cudaGraphConditionalHandleCreate: operation not supported "
                     "(cudaErrorNotSupported): the fake device's driver has no conditional "
                     "nodes (recap__fake_cond_supported(false))");
  } else if (!g) {
    recap__fake_note_bad_graph(&f, "cudaGraphConditionalHandleCreate", (const void *)graph,
                               "graph");
  } else {
    if (recap__fake.handle_count == recap__fake.handle_cap) {
      size_t cap = recap__fake.handle_cap ? recap__fake.handle_cap * 2 : 16;
      fake_handle_t *v = realloc(recap__fake.handles, cap * sizeof *v);
      if (v) {
        recap__fake.handles = v;
        recap__fake.handle_cap = cap;
      }
    }
    if (recap__fake.handle_count == recap__fake.handle_cap) {
      recap__fake_note(&f, RECAP_ERROR_CUDA,
                       "cudaGraphConditionalHandleCreate: out of memory "
                       "(cudaErrorMemoryAllocation): no host memory for a fake handle");
    } else {
      size_t n = recap__fake.handle_count++;
      recap__fake.handles[n] = (fake_handle_t){.handle = FAKE_COND_HANDLE_BASE + n + 1,
                                               .graph_id = g->id,
                                               .initial = initial,
                                               .assign_default = assign_default,
                                               .value = initial};
      *handle = recap__fake.handles[n].handle;
    }
  }
  return recap__fake_unlock_and_report(&f);
}

/* Why kind with branches bodies is not a conditional node CUDA makes, or NULL. */
static const char *branches_refusal(recap__cond_kind_t kind, unsigned branches) {
  switch (kind) {
    case RECAP__COND_WHILE: return branches == 1 ? NULL : "a WHILE node has 1 body";
    case RECAP__COND_IF:
      return branches == 1 || branches == 2 ? NULL : "an IF node has 1 or 2 bodies";
    case RECAP__COND_SWITCH:
      return branches >= 1 && branches <= RECAP_REGION_MAX_BRANCHES
                 ? NULL
                 : "a SWITCH node has 1 to RECAP_REGION_MAX_BRANCHES bodies";
  }
  return "the kind is none of IF, WHILE, SWITCH";
}

/* Append to g the conditional node; false when out of host memory (g unchanged). */
static bool cond_node_append(fake_graph_t *g, size_t dep, recap__cond_kind_t kind,
                             const fake_handle_t *h, unsigned branches, fake_node_t **out) {
  fake_nodes_t *nodes = &g->nodes;
  if (!recap__fake_nodes_reserve(nodes)) return false;
  fake_graph_t **bodies = calloc(branches, sizeof *bodies);
  if (!bodies) return false;
  for (unsigned b = 0; b < branches; b++)
    if (!(bodies[b] = recap__fake_graph_new())) {
      for (unsigned k = 0; k < b; k++) recap__fake_graph_free(bodies[k]);
      free(bodies);
      return false;
    }
  for (unsigned b = 0; b < branches; b++) {
    bodies[b]->owner = g;
    recap__fake_graph_list(bodies[b]);
  }
  fake_node_t *n = &nodes->v[nodes->count++];
  *n = (fake_node_t){.type = RECAP_NODE_CONDITIONAL,
                     .dep = dep,
                     .handle = recap__fake_node_handle_new(),
                     .cond_kind = kind,
                     .cond_handle = h->handle,
                     .cond_initial = h->initial,
                     .cond_assign_default = h->assign_default,
                     .branches = branches,
                     .bodies = bodies};
  *out = n;
  return true;
}

recap_status_t recap__fake_op_cond_node_add(recap_cuda_graph_t graph,
                                            const recap__graph_node_t *deps, size_t count,
                                            recap__cond_kind_t kind, uint64_t handle,
                                            unsigned branches, recap__graph_node_t *node,
                                            recap_cuda_graph_t *bodies) {
  RECAP__ARG(node && bodies, "cudaGraphAddNode: node or bodies is NULL");
  *node = NULL;
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  bool inject = recap__fake_count_call(RECAP__FAKE_FAULT_COND_NODE);
  fake_graph_t *g = recap__fake_graph_find(graph);
  fake_handle_t *h = handle_find(handle);
  const char *refusal = branches_refusal(kind, branches);
  size_t dep = 0;
  fake_node_t *n = NULL;
  if (inject) {
    recap__fake_note_injected(&f, "cudaGraphAddNode", RECAP__FAKE_FAULT_COND_NODE,
                              "conditional node addition");
  } else if (recap__fake.cond_unsupported) {
    recap__fake_note(
        &f, RECAP_ERROR_NOT_SUPPORTED,
        "cudaGraphAddNode: operation not supported (cudaErrorNotSupported): the fake "
        "device's driver has no conditional nodes (recap__fake_cond_supported(false))");
  } else if (!g) {
    recap__fake_note_bad_graph(&f, "cudaGraphAddNode", (const void *)graph, "graph");
  } else if (captured_into(g)) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_USAGE,
                     "cudaGraphAddNode: graph %p is being captured into; pause that capture "
                     "(capture_pause) first",
                     (void *)graph);
  } else if (refusal) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT,
                     "cudaGraphAddNode: invalid argument (cudaErrorInvalidValue): a conditional "
                     "node of kind %d with %u bodies: %s",
                     (int)kind, branches, refusal);
  } else if (!h) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT,
                     "cudaGraphAddNode: invalid argument (cudaErrorInvalidValue): 0x%llx is not a "
                     "conditional handle (cudaGraphConditionalHandleCreate)",
                     (unsigned long long)handle);
  } else if (h->graph_id != g->id) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT,
                     "cudaGraphAddNode: invalid argument (cudaErrorInvalidValue): conditional "
                     "handle 0x%llx was created for another graph than %p; create it for the "
                     "graph that holds the node",
                     (unsigned long long)handle, (void *)graph);
  } else if (h->used) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT,
                     "cudaGraphAddNode: invalid argument (cudaErrorInvalidValue): conditional "
                     "handle 0x%llx already serves a conditional node; a handle serves one node",
                     (unsigned long long)handle);
  } else if (deps_check(&f, "cudaGraphAddNode", g, deps, count, &dep) != RECAP_SUCCESS) {
    /* Noted. */
  } else if (!cond_node_append(g, dep, kind, h, branches, &n)) {
    recap__fake_note(&f, RECAP_ERROR_CUDA,
                     "cudaGraphAddNode: out of memory (cudaErrorMemoryAllocation): no host memory "
                     "for a fake conditional node");
  } else {
    h->used = true;
    *node = (recap__graph_node_t)(uintptr_t)n->handle;
    for (unsigned b = 0; b < branches; b++) bodies[b] = (recap_cuda_graph_t)n->bodies[b];
  }
  return recap__fake_unlock_and_report(&f);
}

/* ---- condition kernels ------------------------------------------------------------------
 * Each is a fake kernel of six argument words: {handle, flag, pointer, counter, packed, bits}:
 * pointer is from (SET_FROM), the counter (COUNTDOWN) or the operand (COMPARE); counter is
 * COMPARE's iteration counter; packed holds value (SET_VALUE) or max (COMPARE) in its low 32
 * bits, the dtype in bits 32-39 and the op in bits 40-47; bits is the threshold's 8 bytes. */

enum { COND_WORDS = 6 };

static void cond_kernel_set(void *const *args, unsigned value) {
  recap__fake.cond_kernels_run++;
  cond_set_locked((uint64_t)(uintptr_t)args[0], args[1], value);
}

static void cond_kernel_set_value(void *const *args, size_t n) {
  (void)n;
  cond_kernel_set(args, (uint32_t)(uintptr_t)args[4]);
}

static void cond_kernel_set_from(void *const *args, size_t n) {
  (void)n;
  cond_kernel_set(args, *(const uint32_t *)args[2]);
}

static void cond_kernel_countdown(void *const *args, size_t n) {
  (void)n;
  uint32_t *counter = args[2];
  *counter -= 1;
  cond_kernel_set(args, *counter != 0);
}

/* a op b, for any of the operand types. */
#define FAKE_COMPARE(a, op, b)          \
  ((op) == RECAP_COND_GT   ? (a) > (b)  \
   : (op) == RECAP_COND_GE ? (a) >= (b) \
   : (op) == RECAP_COND_LT ? (a) < (b)  \
   : (op) == RECAP_COND_LE ? (a) <= (b) \
   : (op) == RECAP_COND_EQ ? (a) == (b) \
                           : (a) != (b))

static void cond_kernel_compare(void *const *args, size_t n) {
  (void)n;
  uint64_t packed = (uint64_t)(uintptr_t)args[4];
  recap_cond_dtype_t dtype = (recap_cond_dtype_t)((packed >> 32) & 0xff);
  recap_cond_op_t op = (recap_cond_op_t)((packed >> 40) & 0xff);
  uint32_t max = (uint32_t)packed;
  uint64_t bits = (uint64_t)(uintptr_t)args[5];
  const void *operand = args[2];
  uint32_t *counter = args[3];
  bool hold = false;
  switch (dtype) {
    case RECAP_COND_F32: {
      float t, v = *(const float *)operand;
      uint32_t low = (uint32_t)bits;
      memcpy(&t, &low, sizeof t);
      hold = FAKE_COMPARE(v, op, t);
      break;
    }
    case RECAP_COND_F64: {
      double t, v = *(const double *)operand;
      memcpy(&t, &bits, sizeof t);
      hold = FAKE_COMPARE(v, op, t);
      break;
    }
    case RECAP_COND_I32: {
      int32_t v = *(const int32_t *)operand, t = (int32_t)(uint32_t)bits;
      hold = FAKE_COMPARE(v, op, t);
      break;
    }
    case RECAP_COND_U32: {
      uint32_t v = *(const uint32_t *)operand, t = (uint32_t)bits;
      hold = FAKE_COMPARE(v, op, t);
      break;
    }
    case RECAP_COND_I64: {
      int64_t v = *(const int64_t *)operand, t = (int64_t)bits;
      hold = FAKE_COMPARE(v, op, t);
      break;
    }
  }
  /* As the CUDA kernel: the counter counts only when the comparison holds (&& short-circuits). */
  cond_kernel_set(args, hold && (!counter || ++*counter < max));
}

static const char *cond_kernel_name(recap__cond_op_kind_t kind) {
  switch (kind) {
    case RECAP__COND_SET_VALUE: return "recap_cond_set_value";
    case RECAP__COND_SET_FROM: return "recap_cond_set_from";
    case RECAP__COND_COUNTDOWN: return "recap_cond_countdown";
    case RECAP__COND_COMPARE: return "recap_cond_compare";
  }
  return NULL;
}

static recap__fake_kernel_fn_t cond_kernel_fn(recap__cond_op_kind_t kind) {
  switch (kind) {
    case RECAP__COND_SET_VALUE: return cond_kernel_set_value;
    case RECAP__COND_SET_FROM: return cond_kernel_set_from;
    case RECAP__COND_COUNTDOWN: return cond_kernel_countdown;
    case RECAP__COND_COMPARE: return cond_kernel_compare;
  }
  return NULL;
}

/* Why l's operands do not fit its kind, or NULL. */
static const char *cond_launch_refusal(const recap__cond_launch_t *l) {
  if (!l->cond.flag && !l->cond.handle) return "the condition has neither a flag nor a handle";
  switch (l->kind) {
    case RECAP__COND_SET_VALUE: return NULL;
    case RECAP__COND_SET_FROM: return l->from ? NULL : "from is NULL";
    case RECAP__COND_COUNTDOWN: return l->counter ? NULL : "counter is NULL";
    case RECAP__COND_COMPARE:
      if (!l->operand) return "operand is NULL";
      if ((unsigned)l->dtype > RECAP_COND_I64) return "dtype is none of recap_cond_dtype_t";
      if ((unsigned)l->op > RECAP_COND_NE) return "op is none of recap_cond_op_t";
      return NULL;
  }
  return NULL;
}

recap_status_t recap__fake_op_cond_launch(const recap__cond_launch_t *l) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  bool inject = recap__fake_count_call(RECAP__FAKE_FAULT_COND_LAUNCH);
  fake_stream_t *s = l ? recap__fake_stream_of(l->stream) : NULL;
  const char *name = l ? cond_kernel_name(l->kind) : NULL;
  const char *refusal = name ? cond_launch_refusal(l) : NULL;
  if (inject) {
    recap__fake_note_injected(&f, "cudaLaunchKernel", RECAP__FAKE_FAULT_COND_LAUNCH,
                              "condition kernel launch");
  } else if (!l) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "condition kernel launch: launch is NULL");
  } else if (!name) {
    recap__fake_note(&f, RECAP_ERROR_INTERNAL, "condition kernel launch: unknown kind %d",
                     (int)l->kind);
  } else if (refusal) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "%s: %s", name, refusal);
  } else if (!s) {
    recap__fake_note_bad_stream(&f, name, l->stream);
  } else if (recap__fake_no_kernel_image(&f)) {
    /* Nothing is launched. */
  } else {
    const void *pointer = l->kind == RECAP__COND_SET_FROM    ? (const void *)l->from
                          : l->kind == RECAP__COND_COUNTDOWN ? (const void *)l->counter
                          : l->kind == RECAP__COND_COMPARE   ? l->operand
                                                             : NULL;
    uint32_t low = l->kind == RECAP__COND_COMPARE ? l->max : l->value;
    uint64_t packed =
        (uint64_t)low | (uint64_t)(l->dtype & 0xff) << 32 | (uint64_t)(l->op & 0xff) << 40;
    uint64_t bits = 0;
    if (l->kind == RECAP__COND_COMPARE) {
      if (l->dtype == RECAP_COND_F32) {
        uint32_t b32;
        memcpy(&b32, &l->threshold.f32, sizeof b32);
        bits = b32;
      } else if (l->dtype == RECAP_COND_F64) {
        memcpy(&bits, &l->threshold.f64, sizeof bits);
      } else if (l->dtype == RECAP_COND_I32) {
        bits = (uint32_t)l->threshold.i32;
      } else if (l->dtype == RECAP_COND_U32) {
        bits = l->threshold.u32;
      } else {
        bits = (uint64_t)l->threshold.i64;
      }
    }
    const void *words[COND_WORDS] = {(const void *)(uintptr_t)l->cond.handle,
                                     l->cond.flag,
                                     pointer,
                                     l->kind == RECAP__COND_COMPARE ? l->counter : NULL,
                                     (const void *)(uintptr_t)packed,
                                     (const void *)(uintptr_t)bits};
    recap__fake_enqueue_fn(&f, s, name, name, cond_kernel_fn(l->kind), words, COND_WORDS);
  }
  return recap__fake_unlock_and_report(&f);
}

/* ---- test controls ---------------------------------------------------------------------- */

void recap__fake_cond_supported(bool supported) {
  pthread_mutex_lock(&recap__fake.lock);
  recap__fake.cond_unsupported = !supported;
  pthread_mutex_unlock(&recap__fake.lock);
}

void recap__fake_cond_iteration_limit(uint64_t limit) {
  pthread_mutex_lock(&recap__fake.lock);
  recap__fake.cond_iteration_limit = limit;
  pthread_mutex_unlock(&recap__fake.lock);
}

bool recap__fake_cond_value(recap_cuda_graph_exec_t exec, uint64_t handle, unsigned *value) {
  bool found = false;
  pthread_mutex_lock(&recap__fake.lock);
  if (exec) {
    fake_exec_t *x = recap__fake_exec_find(exec);
    fake_node_t *n = x ? cond_node_of(&x->nodes, handle) : NULL;
    if (n && value) {
      *value = n->cond_value;
      found = true;
    }
  } else {
    fake_handle_t *h = handle_find(handle);
    if (h && value) {
      *value = h->value;
      found = true;
    }
  }
  pthread_mutex_unlock(&recap__fake.lock);
  return found;
}

bool recap__fake_capture_join_back(recap_stream_t side, recap_stream_t origin) {
  bool joined = false;
  pthread_mutex_lock(&recap__fake.lock);
  fake_stream_t *s = side ? recap__fake_stream_of(side) : NULL;
  fake_stream_t *o = recap__fake_stream_of(origin);
  if (s && o && s != o && o->capture && s->capture == o->capture && o->capture->origin == o) {
    if (s->tail > o->tail) o->tail = s->tail;
    s->capture = NULL;
    s->tail = 0;
    joined = true;
  }
  pthread_mutex_unlock(&recap__fake.lock);
  return joined;
}

/* Whether every conditional handle created on g, or on a body of its conditional nodes, is held
 * by a conditional node of the graph it was created on: CUDA refuses to instantiate a graph with
 * a handle no node holds (measured on an H200, driver 580: cudaErrorInvalidValue). *handle
 * receives the first one that is not. Called with the lock held. */
static bool handle_held(const fake_graph_t *g, uint64_t handle) {
  for (size_t i = 0; i < g->nodes.count; i++)
    if (g->nodes.v[i].type == RECAP_NODE_CONDITIONAL && g->nodes.v[i].cond_handle == handle)
      return true;
  return false;
}

bool recap__fake_cond_handles_held(const fake_graph_t *g, uint64_t *handle) {
  for (size_t h = 0; h < recap__fake.handle_count; h++) {
    const fake_handle_t *fh = &recap__fake.handles[h];
    if (fh->graph_id == g->id && !handle_held(g, fh->handle)) {
      *handle = fh->handle;
      return false;
    }
  }
  for (size_t i = 0; i < g->nodes.count; i++) {
    const fake_node_t *n = &g->nodes.v[i];
    if (n->type != RECAP_NODE_CONDITIONAL) continue;
    for (unsigned b = 0; b < n->branches; b++)
      if (n->bodies[b] && !recap__fake_cond_handles_held(n->bodies[b], handle)) return false;
  }
  return true;
}

recap_status_t recap__fake_op_graph_add_empty(recap_cuda_graph_t graph) {
  RECAP__FAKE_OP_BEGIN(f, RECAP__FAKE_FAULT_COND_NODE, "cudaGraphAddEmptyNode",
                       "empty node addition");
  fake_graph_t *g = recap__fake_graph_find(graph);
  if (!g) {
    recap__fake_note_bad_graph(&f, "cudaGraphAddEmptyNode", (const void *)graph, "graph");
  } else if (captured_into(g)) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_USAGE,
                     "cudaGraphAddEmptyNode: graph %p is being captured into", (void *)graph);
  } else {
    if (!recap__fake_nodes_reserve(&g->nodes))
      recap__fake_note(&f, RECAP_ERROR_CUDA,
                       "cudaGraphAddEmptyNode: out of memory (cudaErrorMemoryAllocation)");
    else
      g->nodes.v[g->nodes.count++] =
          (fake_node_t){.type = RECAP_NODE_EMPTY, .handle = recap__fake_node_handle_new()};
  }
  return recap__fake_unlock_and_report(&f);
}

/* Whether g, or a body nested in it, has a conditional node with an empty body: CUDA refuses to
 * instantiate such a graph (cudaErrorInvalidValue). Lock held. */
bool recap__fake_cond_body_empty(const fake_graph_t *g) {
  for (size_t i = 0; i < g->nodes.count; i++) {
    const fake_node_t *n = &g->nodes.v[i];
    if (n->type != RECAP_NODE_CONDITIONAL) continue;
    for (unsigned b = 0; b < n->branches; b++)
      if (!n->bodies[b] || n->bodies[b]->nodes.count == 0 ||
          recap__fake_cond_body_empty(n->bodies[b]))
        return true;
  }
  return false;
}
