/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_capture.c — the CPU fake device's captures and graphs. Work launched on a capturing
 * stream becomes a node of the capture (a chain per stream; a joined stream's first node waits
 * for the origin's last node at the join), and CUDA's rules on which calls a capture forbids
 * are enforced. Ending the capture turns the nodes into a fake graph; instantiating it gives a
 * fake executable with its own copy of the nodes, and launching that enqueues one work item per
 * node and runs its function kernels, copies and memsets (fake.h).
 */
#include <stdlib.h>
#include <string.h>

#include "fake/fake_state.h"

/* ---- what a capture forbids ------------------------------------------------------------- */

/* The captures that forbid a potentially unsafe call (cudaMalloc, cudaFree, device-wide
 * synchronisation) from the calling thread, per cudaThreadExchangeStreamCaptureMode: in global
 * mode, any global capture of any thread and any unrelaxed capture of this thread; in
 * thread-local mode, only the unrelaxed captures of this thread; in relaxed mode, none. The
 * rule knows no devices, as CUDA's does not: a global capture on device 0 forbids cudaMalloc on
 * device 1 in every thread. With invalidate, they are marked invalidated, as CUDA does.
 * Returns how many, and the first. */
int recap__fake_forbidding_captures(bool invalidate, fake_capture_t **first) {
  *first = NULL;
  if (recap__fake_tl_capture_mode == RECAP__CAPTURE_MODE_RELAXED) return 0;
  pthread_t self = pthread_self();
  int n = 0;
  for (fake_capture_t *c = recap__fake.captures; c; c = c->next) {
    if (c->mode == RECAP__CAPTURE_MODE_RELAXED) continue;
    bool mine = pthread_equal(c->thread, self) != 0;
    bool forbids = mine || (recap__fake_tl_capture_mode == RECAP__CAPTURE_MODE_GLOBAL &&
                            c->mode == RECAP__CAPTURE_MODE_GLOBAL);
    if (!forbids) continue;
    if (invalidate) c->invalidated = true;
    if (!*first) *first = c;
    n++;
  }
  return n;
}

recap_status_t recap__fake_note_forbidden(fake_failure_t *f, const char *call) {
  fake_capture_t *first;
  int n = recap__fake_forbidding_captures(true, &first);
  return recap__fake_note(
      f, RECAP_ERROR_CAPTURE_INVALIDATED,
      "%s: operation not permitted when stream is capturing "
      "(cudaErrorStreamCaptureUnsupported) on the fake device: capture %llu (%s mode, on device "
      "%d)%s forbids it in this thread's %s capture mode, on device %d; %s now invalidated",
      call, (unsigned long long)first->id, recap__fake_mode_name(first->mode), first->device,
      n > 1 ? " and others" : "", recap__fake_mode_name(recap__fake_tl_capture_mode),
      recap__fake_tl_device, n > 1 ? "they are" : "it is");
}

bool recap__fake_refuse_forbidden(fake_failure_t *f, const char *call) {
  fake_capture_t *first;
  if (recap__fake_forbidding_captures(false, &first) == 0) return false;
  recap__fake_note_forbidden(f, call);
  return true;
}

recap_status_t recap__fake_note_capturing_stream(fake_failure_t *f, const char *call,
                                                 const fake_stream_t *s, bool invalidates) {
  return recap__fake_note(
      f, RECAP_ERROR_CAPTURE_INVALIDATED,
      "%s: operation not permitted when stream is capturing "
      "(cudaErrorStreamCaptureUnsupported): the stream takes part in capture %llu "
      "on the fake device%s",
      call, (unsigned long long)s->capture->id, invalidates ? ", which is now invalidated" : "");
}

/* ---- captures --------------------------------------------------------------------------- */

void recap__fake_nodes_free(fake_nodes_t *nodes) {
  for (size_t i = 0; i < nodes->count; i++) {
    free(nodes->v[i].name);
    free(nodes->v[i].args);
    if (nodes->v[i].bodies) {
      for (unsigned b = 0; b < nodes->v[i].branches; b++)
        if (nodes->v[i].bodies[b]) recap__fake_graph_free(nodes->v[i].bodies[b]);
      free(nodes->v[i].bodies);
    }
    if (nodes->v[i].child) recap__fake_graph_free(nodes->v[i].child);
  }
  free(nodes->v);
  memset(nodes, 0, sizeof *nodes);
}

bool recap__fake_nodes_copy(fake_nodes_t *dst, const fake_nodes_t *src) {
  memset(dst, 0, sizeof *dst);
  if (src->count == 0) return true;
  dst->v = calloc(src->count, sizeof *dst->v);
  if (!dst->v) return false;
  dst->cap = src->count;
  for (size_t i = 0; i < src->count; i++) {
    const fake_node_t *from = &src->v[i];
    fake_node_t *to = &dst->v[i];
    *to = *from;
    to->name = NULL;
    to->args = NULL;
    to->arg_count = 0;
    to->bodies = NULL;
    to->child = NULL;
    dst->count = i + 1; /* what recap__fake_nodes_free releases if a copy below fails */
    if (from->name) {
      size_t n = strlen(from->name) + 1;
      if (!(to->name = malloc(n))) goto fail;
      memcpy(to->name, from->name, n);
    }
    if (from->arg_count) {
      if (!(to->args = malloc(from->arg_count * sizeof *to->args))) goto fail;
      memcpy(to->args, from->args, from->arg_count * sizeof *to->args);
      to->arg_count = from->arg_count;
    }
    if (from->bodies) {
      /* Bodies are copied deeply: an executable owns its own, which no graph handle names. */
      if (!(to->bodies = calloc(from->branches, sizeof *to->bodies))) goto fail;
      for (unsigned b = 0; b < from->branches; b++) {
        fake_graph_t *body = recap__fake_graph_new();
        if (!body) goto fail;
        to->bodies[b] = body;
        body->id = from->bodies[b]->id;
        if (!recap__fake_nodes_copy(&body->nodes, &from->bodies[b]->nodes)) goto fail;
      }
    }
    if (from->child) {
      if (!(to->child = recap__fake_graph_new())) goto fail;
      to->child->id = from->child->id;
      if (!recap__fake_nodes_copy(&to->child->nodes, &from->child->nodes)) goto fail;
    }
  }
  return true;
fail:
  recap__fake_nodes_free(dst);
  return false;
}

/* Append a node for work launched on s, which takes part in a capture: it waits for the
 * stream's previous node in the capture. An invalidated capture records nothing more, as CUDA
 * refuses further work into it. False when out of host memory. */
bool recap__fake_nodes_reserve(fake_nodes_t *nodes) {
  if (nodes->count < nodes->cap) return true;
  size_t cap = nodes->cap ? nodes->cap * 2 : 16;
  fake_node_t *v = realloc(nodes->v, cap * sizeof *v);
  if (!v) return false;
  nodes->v = v;
  nodes->cap = cap;
  return true;
}

uint64_t recap__fake_node_handle_new(void) {
  /* Handles look like pointers (aligned, far from 0) and are never reused. */
  recap__fake.next_node_handle += 0x10;
  return FAKE_NODE_HANDLE_BASE + recap__fake.next_node_handle;
}

bool recap__fake_capture_append(fake_stream_t *s, recap_node_type_t type, const char *name) {
  fake_capture_t *c = s->capture;
  if (c->invalidated) return true;
  fake_nodes_t *nodes = &c->graph->nodes;
  if (!recap__fake_nodes_reserve(nodes)) return false;
  /* The C library's memory, not recap's host seam: the fake's own objects must not fail when a
   * test makes recap's host allocations fail. */
  char *copy = NULL;
  if (name) {
    size_t n = strlen(name) + 1;
    if (!(copy = malloc(n))) return false;
    memcpy(copy, name, n);
  }
  nodes->v[nodes->count] = (fake_node_t){.type = type,
                                         .name = copy,
                                         .dep = s->tail,
                                         .handle = recap__fake_node_handle_new()};
  nodes->count++;
  s->tail = nodes->count;
  return true;
}

/* The id is given at once: a conditional handle made on a graph still being captured names it. */
fake_graph_t *recap__fake_graph_new(void) {
  fake_graph_t *g = calloc(1, sizeof *g);
  if (g) g->id = ++recap__fake.next_graph_id;
  return g;
}

void recap__fake_graph_list(fake_graph_t *g) {
  g->listed = true;
  g->next = recap__fake.graphs;
  recap__fake.graphs = g;
  if (!g->owner) recap__fake.live_graphs++;
}

void recap__fake_graph_free(fake_graph_t *g) {
  if (g->listed) {
    fake_graph_t **link = &recap__fake.graphs;
    while (*link && *link != g) link = &(*link)->next;
    if (*link) *link = g->next;
    if (!g->owner) recap__fake.live_graphs--;
  }
  recap__fake_nodes_free(&g->nodes);
  free(g);
}

bool recap__fake_graph_capturing(const fake_graph_t *g) {
  for (const fake_capture_t *c = recap__fake.captures; c; c = c->next)
    for (const fake_graph_t *t = c->graph; t; t = t->owner)
      if (t == g) return true;
  return false;
}

fake_capture_t *recap__fake_capture_begin_locked(fake_stream_t *s, recap__capture_mode_t mode,
                                                 fake_graph_t *into) {
  fake_capture_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->graph = into ? into : recap__fake_graph_new();
  if (!c->graph) {
    free(c);
    return NULL;
  }
  c->into_graph = into != NULL;
  c->id = ++recap__fake.next_capture_id;
  c->mode = mode;
  c->thread = pthread_self();
  c->device = s->device;
  c->origin = s;
  c->next = recap__fake.captures;
  recap__fake.captures = c;
  s->capture = c;
  s->tail = 0;
  return c;
}

fake_graph_t *recap__fake_capture_finish(fake_capture_t *c, bool keep) {
  for (fake_stream_t *t = recap__fake.streams; t; t = t->next)
    if (t->capture == c) {
      t->capture = NULL;
      t->tail = 0;
    }
  fake_capture_t **link = &recap__fake.captures;
  while (*link != c) link = &(*link)->next;
  *link = c->next;
  fake_graph_t *g = c->graph;
  /* A graph given to capture_to_graph stays its owner's, with what was captured into it. */
  if (!keep && !c->into_graph) recap__fake_graph_free(g);
  free(c);
  return keep ? g : NULL;
}

fake_graph_t *recap__fake_graph_find(recap_cuda_graph_t handle) {
  for (fake_graph_t *g = recap__fake.graphs; g; g = g->next)
    if ((recap_cuda_graph_t)g == handle) return g;
  return NULL;
}

fake_exec_t *recap__fake_exec_find(recap_cuda_graph_exec_t handle) {
  for (fake_exec_t *x = recap__fake.execs; x; x = x->next)
    if ((recap_cuda_graph_exec_t)x == handle) return x;
  return NULL;
}

/* what: "graph" or "executable graph". */
recap_status_t recap__fake_note_bad_graph(fake_failure_t *f, const char *call, const void *graph,
                                          const char *what) {
  return recap__fake_note(f, RECAP_ERROR_CUDA,
                          "%s: invalid argument (cudaErrorInvalidValue): %p is not a live fake %s",
                          call, graph, what);
}

/* ---- graphs ----------------------------------------------------------------------------- */

/* recap__fake_after_capture_begin's hook, guarded by the fake's lock. */
static recap__fake_capture_hook_t begin_hook;
static void *begin_hook_ctx;

void recap__fake_after_capture_begin(recap__fake_capture_hook_t fn, void *ctx) {
  pthread_mutex_lock(&recap__fake.lock);
  begin_hook = fn;
  begin_hook_ctx = ctx;
  pthread_mutex_unlock(&recap__fake.lock);
}

recap_status_t recap__fake_op_stream_begin_capture(recap_stream_t stream,
                                                   recap__capture_mode_t mode) {
  /* Refused before anything reaches the device, as in the CUDA seam. */
  if (!stream)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "cudaStreamBeginCapture: the legacy default stream cannot capture; "
                        "capture on a stream you created (cudaStreamCreate, or "
                        "cudaStreamCreateWithFlags with cudaStreamNonBlocking)");
  RECAP__FAKE_OP_BEGIN(f, RECAP__FAKE_FAULT_CAPTURE_BEGIN, "cudaStreamBeginCapture",
                       "capture begin");
  fake_stream_t *s = recap__fake_stream_of(stream);
  if (mode != RECAP__CAPTURE_MODE_GLOBAL && mode != RECAP__CAPTURE_MODE_THREAD_LOCAL &&
      mode != RECAP__CAPTURE_MODE_RELAXED) {
    recap__fake_note(
        &f, RECAP_ERROR_INVALID_ARGUMENT,
        "cudaStreamBeginCapture: invalid argument (cudaErrorInvalidValue): %d is not a capture "
        "mode",
        (int)mode);
  } else if (!s) {
    recap__fake_note_bad_stream(&f, "cudaStreamBeginCapture", stream);
  } else if (s->capture) {
    recap__fake_note(
        &f, RECAP_ERROR_INVALID_USAGE,
        "cudaStreamBeginCapture(stream %p): the stream is already capturing (capture %llu on "
        "the fake device, %s)%s; end that capture first",
        (void *)stream, (unsigned long long)s->capture->id,
        s->capture->origin == s ? "begun on it" : "joined by an event wait",
        s->capture->invalidated ? ", now invalidated" : "");
  } else if (!recap__fake_capture_begin_locked(s, mode, NULL)) {
    recap__fake_note(
        &f, RECAP_ERROR_CUDA,
        "cudaStreamBeginCapture: out of memory (cudaErrorMemoryAllocation): no host memory for "
        "a fake capture");
  }
  recap__fake_capture_hook_t hook = f.status == RECAP_SUCCESS ? begin_hook : NULL;
  void *hook_ctx = begin_hook_ctx;
  if (hook) begin_hook = NULL;
  recap_status_t status = recap__fake_unlock_and_report(&f);
  /* Unlocked: the hook calls into recap, which calls the fake. */
  if (hook) hook(hook_ctx, stream);
  return status;
}

void recap__fake_strict_joins(bool on) {
  pthread_mutex_lock(&recap__fake.lock);
  recap__fake.strict_joins = on;
  pthread_mutex_unlock(&recap__fake.lock);
}

/* A stream other than c's origin that still takes part in c, or NULL (lock held). */
static fake_stream_t *side_still_joined(const fake_capture_t *c) {
  for (fake_stream_t *t = recap__fake.streams; t; t = t->next)
    if (t->capture == c && t != c->origin) return t;
  return NULL;
}

recap_status_t recap__fake_op_stream_end_capture(recap_stream_t stream, recap_cuda_graph_t *graph) {
  fake_failure_t f = {0};
  fake_stream_t *side = NULL;
  if (graph) *graph = NULL;
  pthread_mutex_lock(&recap__fake.lock);
  bool inject = recap__fake_count_call(RECAP__FAKE_FAULT_CAPTURE_END);
  fake_stream_t *s = recap__fake_stream_of(stream);
  fake_capture_t *c = s ? s->capture : NULL;
  if (inject) {
    /* A failed end leaves the stream not capturing, as the seam promises. */
    if (c && c->origin == s) recap__fake_capture_finish(c, false);
    recap__fake_note_injected(&f, "cudaStreamEndCapture", RECAP__FAKE_FAULT_CAPTURE_END,
                              "capture end");
  } else if (!graph) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaStreamEndCapture: graph is NULL");
  } else if (!s) {
    recap__fake_note_bad_stream(&f, "cudaStreamEndCapture", stream);
  } else if (!c) {
    recap__fake_note(
        &f, RECAP_ERROR_INVALID_USAGE,
        "cudaStreamEndCapture(stream %p) failed: cudaErrorIllegalState: the stream is not "
        "capturing",
        (void *)stream);
  } else if (c->origin != s) {
    /* As recap__fake_capture_end: this invalidates the capture, which stays under way. */
    c->invalidated = true;
    recap__fake_note(
        &f, RECAP_ERROR_INVALID_USAGE,
        "cudaStreamEndCapture(stream %p) failed: cudaErrorStreamCaptureUnmatched: capture %llu "
        "was not begun on this stream, which only joined it; end it on the stream it began on "
        "(it is now invalidated)",
        (void *)stream, (unsigned long long)c->id);
  } else if (c->mode != RECAP__CAPTURE_MODE_RELAXED && !pthread_equal(c->thread, pthread_self())) {
    recap__fake_note(
        &f, RECAP_ERROR_INVALID_USAGE,
        "cudaStreamEndCapture(stream %p) failed: cudaErrorStreamCaptureWrongThread: capture %llu "
        "was begun in %s mode by another thread, which must end it (or begin it in relaxed "
        "mode)",
        (void *)stream, (unsigned long long)c->id, recap__fake_mode_name(c->mode));
  } else if (recap__fake.strict_joins && !c->invalidated && (side = side_still_joined(c)) != NULL) {
    /* As CUDA: the end fails, the capture is ended and thrown away. */
    uint64_t id = c->id;
    recap__fake_capture_finish(c, false);
    recap__fake_note(
        &f, RECAP_ERROR_CAPTURE_INVALIDATED,
        "cudaStreamEndCapture(stream %p): capture %llu has a side stream (%p) forked from it and "
        "not joined back (cudaErrorStreamCaptureUnjoined); join every side stream back to the "
        "origin (an event recorded on it and waited for on the origin) before the end; no graph "
        "was made and the stream no longer captures",
        (void *)stream, (unsigned long long)id, (void *)side);
  } else if (c->invalidated) {
    uint64_t id = c->id;
    recap__fake_capture_finish(c, false);
    recap__fake_note(
        &f, RECAP_ERROR_CAPTURE_INVALIDATED,
        "cudaStreamEndCapture(stream %p): capture %llu was invalidated "
        "(cudaErrorStreamCaptureInvalidated): an illegal call was made while it ran (a "
        "synchronous copy, a synchronisation, cudaMalloc under global mode...); no graph was "
        "made and the stream no longer captures",
        (void *)stream, (unsigned long long)id);
  } else {
    /* The graph made at the begin (or the one captured into since a capture_to_graph). */
    fake_graph_t *g = recap__fake_capture_finish(c, true);
    if (!g->listed) recap__fake_graph_list(g);
    *graph = (recap_cuda_graph_t)g;
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_graph_instantiate(recap_cuda_graph_exec_t *exec,
                                                recap_cuda_graph_t graph) {
  fake_failure_t f = {0};
  if (exec) *exec = NULL;
  pthread_mutex_lock(&recap__fake.lock);
  bool inject = recap__fake_count_call(RECAP__FAKE_FAULT_INSTANTIATE);
  fake_graph_t *g = recap__fake_graph_find(graph);
  uint64_t unheld = 0;
  if (inject) {
    recap__fake_note_injected(&f, "cudaGraphInstantiateWithFlags", RECAP__FAKE_FAULT_INSTANTIATE,
                              "graph instantiation");
  } else if (!exec) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT,
                     "cudaGraphInstantiateWithFlags: exec is NULL");
  } else if (!g) {
    recap__fake_note_bad_graph(&f, "cudaGraphInstantiateWithFlags", (const void *)graph, "graph");
  } else if (!recap__fake_cond_handles_held(g, &unheld)) {
    recap__fake_note(&f, RECAP_ERROR_CUDA,
                     "cudaGraphInstantiateWithFlags: invalid argument (cudaErrorInvalidValue): "
                     "conditional handle %#llx was created on the graph (or a body of it) and no "
                     "conditional node there holds it",
                     (unsigned long long)unheld);
  } else if (recap__fake_cond_body_empty(g)) {
    recap__fake_note(&f, RECAP_ERROR_CUDA,
                     "cudaGraphInstantiateWithFlags: invalid argument (cudaErrorInvalidValue): a "
                     "conditional node of the graph has a body with no node");
  } else if (recap__fake_nodes_count_deep(&g->nodes) >
             recap__fake_free_bytes(recap__fake_tl_device) / RECAP__FAKE_EXEC_BYTES_PER_NODE) {
    recap__fake_note(&f, RECAP_ERROR_OUT_OF_MEMORY,
                     "cudaGraphInstantiateWithFlags: out of memory (cudaErrorMemoryAllocation): "
                     "the executable of %zu nodes needs %zu bytes of fake device %d, which has "
                     "%zu free",
                     recap__fake_nodes_count_deep(&g->nodes),
                     recap__fake_nodes_count_deep(&g->nodes) * RECAP__FAKE_EXEC_BYTES_PER_NODE,
                     recap__fake_tl_device, recap__fake_free_bytes(recap__fake_tl_device));
  } else {
    fake_exec_t *x = calloc(1, sizeof *x);
    if (x && !recap__fake_nodes_copy(&x->nodes, &g->nodes)) {
      free(x);
      x = NULL;
    }
    if (!x) {
      recap__fake_note(
          &f, RECAP_ERROR_CUDA,
          "cudaGraphInstantiateWithFlags: out of memory (cudaErrorMemoryAllocation): no host "
          "memory for a fake executable graph");
    } else {
      x->origin_id = g->id;
      x->device = recap__fake_tl_device;
      x->bytes = recap__fake_nodes_count_deep(&g->nodes) * RECAP__FAKE_EXEC_BYTES_PER_NODE;
      recap__fake.exec_bytes[x->device] += x->bytes;
      x->next = recap__fake.execs;
      recap__fake.execs = x;
      recap__fake.live_execs++;
      *exec = (recap_cuda_graph_exec_t)x;
    }
  }
  return recap__fake_unlock_and_report(&f);
}

/* Enqueue work on s: in a capture, one node of the given type and name (it does not run);
 * otherwise `items` work items. *eager says which (false on failure too). Called with the lock
 * held. */
recap_status_t recap__fake_enqueue(fake_failure_t *f, fake_stream_t *s, const char *call,
                                   recap_node_type_t type, const char *name, uint64_t items,
                                   bool *eager) {
  *eager = false;
  if (s->capture && s->capture->invalidated)
    return recap__fake_note(
        f, RECAP_ERROR_CAPTURE_INVALIDATED,
        "%s: operation failed due to a previous error during capture "
        "(cudaErrorStreamCaptureInvalidated): the stream takes part in capture %llu on "
        "the fake device, which was invalidated",
        call, (unsigned long long)s->capture->id);
  if (s->capture) {
    if (!recap__fake_capture_append(s, type, name))
      return recap__fake_note(
          f, RECAP_ERROR_CUDA,
          "%s: out of memory (cudaErrorMemoryAllocation): no host memory for a node of "
          "capture %llu",
          call, (unsigned long long)s->capture->id);
    return RECAP_SUCCESS;
  }
  recap__fake_work(s, items);
  *eager = true;
  return RECAP_SUCCESS;
}

recap_status_t recap__fake_enqueue_fn(fake_failure_t *f, fake_stream_t *s, const char *call,
                                      const char *name, recap__fake_kernel_fn_t fn,
                                      const void *const *args, size_t n) {
  bool eager = false;
  recap_status_t st = recap__fake_enqueue(f, s, call, RECAP_NODE_KERNEL, name, 1, &eager);
  if (st != RECAP_SUCCESS) return st;
  if (eager) {
    fn((void *const *)args, n);
    return RECAP_SUCCESS;
  }
  fake_node_t *node = &s->capture->graph->nodes.v[s->tail - 1];
  node->fn = fn;
  if (n > 0) {
    if (!(node->args = malloc(n * sizeof *node->args)))
      return recap__fake_note(
          f, RECAP_ERROR_CUDA,
          "%s: out of memory (cudaErrorMemoryAllocation): no host memory for the arguments of a "
          "node of capture %llu",
          call, (unsigned long long)s->capture->id);
    memcpy(node->args, args, n * sizeof *node->args);
    node->arg_count = n;
  }
  return RECAP_SUCCESS;
}

_Thread_local recap_stream_t recap__fake_tl_launch_stream;

recap_status_t recap__fake_op_graph_launch(recap_cuda_graph_exec_t exec, recap_stream_t stream) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  bool inject = recap__fake_count_call(RECAP__FAKE_FAULT_LAUNCH);
  fake_exec_t *x = recap__fake_exec_find(exec);
  fake_stream_t *s = recap__fake_stream_of(stream);
  bool host_set = false;
  if (inject) {
    recap__fake_note_injected(&f, "cudaGraphLaunch", RECAP__FAKE_FAULT_LAUNCH, "graph launch");
  } else if (!x) {
    recap__fake_note_bad_graph(&f, "cudaGraphLaunch", (const void *)exec, "executable graph");
  } else if (!s) {
    recap__fake_note_bad_stream(&f, "cudaGraphLaunch", stream);
  } else if (recap__fake_exec_device_nodes(x, &host_set) && (!x->uploaded || host_set)) {
    recap__fake_note(&f, RECAP_ERROR_CUDA,
                     "cudaGraphLaunch: the executable holds device-updatable kernel nodes and "
                     "was not uploaded (cudaGraphUpload) since %s",
                     x->uploaded ? "the host set one of them" : "its instantiation");
  } else {
    /* Launched into a capture, the graph becomes a child graph node; it does not run. */
    bool eager;
    recap_status_t st = recap__fake_enqueue(&f, s, "cudaGraphLaunch", RECAP_NODE_GRAPH, NULL,
                                            x->nodes.count, &eager);
    if (st == RECAP_SUCCESS && eager) {
      /* The timing model: an updated executable runs `updated_slowdown` times as long. */
      double factor = x->updated ? recap__fake.updated_slowdown : 1.0;
      if (recap__fake.changed_after && x->changes >= recap__fake.changed_after)
        factor = recap__fake.changed_slowdown;
      s->clock_us += (double)x->nodes.count * (factor - 1.0);
      /* A launch that fails while it runs (a loop past the fake's limit) is not counted. */
      recap__fake_tl_launch_stream = stream;
      bool ran = recap__fake_exec_run(&f, x);
      recap__fake_tl_launch_stream = NULL;
      if (ran) {
        x->launches++;
        recap__fake.graph_launches++;
      }
    }
  }
  return recap__fake_unlock_and_report(&f);
}

/* An upload is counted and enqueues nothing: the timing model gives it no time, so that events
 * around a launch after it measure the launch alone. */
recap_status_t recap__fake_op_graph_upload(recap_cuda_graph_exec_t exec, recap_stream_t stream) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  bool inject = recap__fake_count_call(RECAP__FAKE_FAULT_UPLOAD);
  if (inject)
    recap__fake_note_injected(&f, "cudaGraphUpload", RECAP__FAKE_FAULT_UPLOAD, "graph upload");
  else if (!recap__fake_exec_find(exec))
    recap__fake_note_bad_graph(&f, "cudaGraphUpload", (const void *)exec, "executable graph");
  else if (!recap__fake_stream_of(stream))
    recap__fake_note_bad_stream(&f, "cudaGraphUpload", stream);
  else {
    recap__fake.graph_uploads++;
    /* What the host set in device-updatable nodes reaches the device now. */
    fake_exec_t *x = recap__fake_exec_find(exec);
    x->uploaded = true;
    for (size_t i = 0; i < x->nodes.count; i++) x->nodes.v[i].host_set = false;
  }
  return recap__fake_unlock_and_report(&f);
}

/* Destroying NULL is a no-op, as in the CUDA seam. */
recap_status_t recap__fake_op_graph_destroy(recap_cuda_graph_t graph) {
  if (!graph) return RECAP_SUCCESS;
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  fake_graph_t *g = recap__fake_graph_find(graph);
  if (!g) {
    recap__fake_note_bad_graph(&f, "cudaGraphDestroy", (const void *)graph, "graph");
  } else if (g->owner) {
    recap__fake_note(
        &f, RECAP_ERROR_INVALID_USAGE,
        "cudaGraphDestroy: invalid argument (cudaErrorInvalidValue): graph %p is a body of a "
        "conditional node of graph %p, which owns it; destroy that graph instead",
        (void *)graph, (void *)g->owner);
  } else if (recap__fake_graph_capturing(g)) {
    recap__fake_note(
        &f, RECAP_ERROR_INVALID_USAGE,
        "cudaGraphDestroy: graph %p (or a body inside it) is being captured into; end or pause "
        "that capture first",
        (void *)graph);
  } else {
    recap__fake_graph_free(g);
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_graph_exec_destroy(recap_cuda_graph_exec_t exec) {
  if (!exec) return RECAP_SUCCESS;
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  fake_exec_t **link = &recap__fake.execs;
  while (*link && (recap_cuda_graph_exec_t)*link != exec) link = &(*link)->next;
  fake_exec_t *x = *link;
  if (!x) {
    recap__fake_note_bad_graph(&f, "cudaGraphExecDestroy", (const void *)exec, "executable graph");
  } else {
    *link = x->next;
    recap__fake.exec_bytes[x->device] -= x->bytes;
    recap__fake_nodes_free(&x->nodes);
    free(x);
    recap__fake.live_execs--;
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_graph_node_count(recap_cuda_graph_t graph, size_t *count) {
  fake_failure_t f = {0};
  if (count) *count = 0;
  pthread_mutex_lock(&recap__fake.lock);
  fake_graph_t *g = recap__fake_graph_find(graph);
  if (!count)
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaGraphGetNodes: count is NULL");
  else if (!g)
    recap__fake_note_bad_graph(&f, "cudaGraphGetNodes", (const void *)graph, "graph");
  else
    *count = recap__fake_nodes_count_deep(&g->nodes);
  return recap__fake_unlock_and_report(&f);
}

/* ---- test controls: captures ------------------------------------------------------------ */

uint64_t recap__fake_capture_begin(recap_stream_t stream, recap__capture_mode_t mode) {
  if (!stream) return 0;
  if (mode != RECAP__CAPTURE_MODE_GLOBAL && mode != RECAP__CAPTURE_MODE_THREAD_LOCAL &&
      mode != RECAP__CAPTURE_MODE_RELAXED)
    return 0;
  uint64_t id = 0;
  pthread_mutex_lock(&recap__fake.lock);
  fake_stream_t *s = recap__fake_stream_of(stream);
  fake_capture_t *c;
  if (s && !s->capture && (c = recap__fake_capture_begin_locked(s, mode, NULL)) != NULL) id = c->id;
  pthread_mutex_unlock(&recap__fake.lock);
  return id;
}

bool recap__fake_capture_join(recap_stream_t side, recap_stream_t origin) {
  if (!side) return false; /* the legacy stream never captures */
  bool joined = false;
  pthread_mutex_lock(&recap__fake.lock);
  fake_stream_t *s = recap__fake_stream_of(side);
  fake_stream_t *o = recap__fake_stream_of(origin);
  if (s && o && o->capture && !s->capture) {
    s->capture = o->capture;
    s->tail = o->tail; /* its first node waits for the origin's work so far */
    joined = true;
  }
  pthread_mutex_unlock(&recap__fake.lock);
  return joined;
}

bool recap__fake_capture_end(recap_stream_t origin) {
  bool ok = false;
  pthread_mutex_lock(&recap__fake.lock);
  fake_stream_t *s = recap__fake_stream_of(origin);
  fake_capture_t *c = s ? s->capture : NULL;
  if (c && c->origin != s) {
    /* Ending from a joined stream is cudaErrorStreamCaptureUnmatched, which invalidates the
     * capture; it stays under way until its origin ends it. */
    c->invalidated = true;
  } else if (c) {
    ok = !c->invalidated;
    recap__fake_capture_finish(c, false); /* the captured nodes are thrown away */
  }
  pthread_mutex_unlock(&recap__fake.lock);
  return ok;
}

void recap__fake_capture_invalidate(recap_stream_t stream) {
  pthread_mutex_lock(&recap__fake.lock);
  fake_stream_t *s = recap__fake_stream_of(stream);
  if (s && s->capture) s->capture->invalidated = true;
  pthread_mutex_unlock(&recap__fake.lock);
}
