/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * regions.c — loops and branches on the GPU (recap/region.h): conditions, regions, the ready
 * condition kernels, recap_loop_capture, and the path a capture takes.
 *
 * A region pauses the capture of its stream and resumes it elsewhere, on the same stream. On
 * the device path the paused graph gets a conditional node and the stream captures into the
 * node's bodies, then resumes the paused graph after the node: one template, one executable.
 * On the host path the paused graph becomes a segment of a program (region_state.c) and a
 * fresh capture takes each body and each stretch between regions; a replay runs the segments
 * and reads each condition back to decide. Either way CUDA gives the stream's capture a new id
 * at every resumption, so the graph's capture id, its registry entry and its allocator route
 * follow it: recap_malloc in a body routes to the graph's pool, and the layers that find a
 * graph from a stream (random numbers, annotations) find it.
 *
 * Failure rule: a check that fails before the capture is paused leaves it unharmed; once it is
 * paused, a failure abandons it (the graph is fresh again, as after an invalidated capture),
 * except where the paused graph can simply be resumed as it was (a conditional node the driver
 * refused to add).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/args.h"
#include "core/error.h"
#include "core/host.h"
#include "device/cond_launch.h"
#include "regions/region_internal.h"
#include "graph/registry.h"
#include "recap/alloc.h"

/* ------------------------------------------------------------------------------------------
 * Names, the path
 * ---------------------------------------------------------------------------------------- */

const char *recap_region_kind_name(recap_region_kind_t kind) {
  switch (kind) {
    case RECAP_REGION_WHILE: return "while";
    case RECAP_REGION_IF: return "if";
    case RECAP_REGION_IF_ELSE: return "if_else";
    case RECAP_REGION_SWITCH: return "switch";
  }
  return "unknown";
}

recap_status_t recap_device_conditional_nodes(int *supported) {
  RECAP__ARG(supported != NULL, "recap_device_conditional_nodes: supported is NULL");
  *supported = 0;
  const recap__device_ops_t *dev = recap__device();
  int count = 0;
  RECAP__CHECK(dev->device_count(&count));
  if (count == 0)
    return recap__error(RECAP_ERROR_NO_DEVICE, "recap_device_conditional_nodes: no CUDA device");
  bool answer = false;
  RECAP__CHECK(dev->cond_supported(&answer));
  *supported = answer;
  return RECAP_SUCCESS;
}

recap_status_t recap_graph_regions_on_device(recap_graph_t graph, int *on_device) {
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_regions_on_device"));
  RECAP__ARG(on_device != NULL, "recap_graph_regions_on_device: on_device is NULL");
  *on_device = 0;
  if (graph->state != RECAP__GRAPH_CAPTURING && graph->state != RECAP__GRAPH_CAPTURED)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_graph_regions_on_device: the graph holds no capture and makes none "
                        "(before its first capture, after a reset or a failed capture), and the "
                        "path is decided at capture_begin");
  *on_device = recap__regions_path_on_device(graph);
  return RECAP_SUCCESS;
}

recap_status_t recap__regions_decide(const recap_capture_options_t *opts, const char *function,
                                     bool *on_device) {
  RECAP__ARG(opts->regions >= RECAP_REGIONS_AUTO && opts->regions <= RECAP_REGIONS_HOST,
             "%s: options->regions %d is not one of RECAP_REGIONS_AUTO, RECAP_REGIONS_DEVICE, "
             "RECAP_REGIONS_HOST",
             function, (int)opts->regions);
  *on_device = false;
  if (opts->regions == RECAP_REGIONS_HOST) return RECAP_SUCCESS;
  bool supported = false;
  RECAP__CHECK(recap__device()->cond_supported(&supported));
  if (!supported && opts->regions == RECAP_REGIONS_DEVICE)
    return recap__error(RECAP_ERROR_NOT_SUPPORTED,
                        "%s: options->regions is RECAP_REGIONS_DEVICE, but this driver does not "
                        "run conditional nodes of all kinds (CUDA 12.8 or later needed); use "
                        "RECAP_REGIONS_AUTO or RECAP_REGIONS_HOST to run regions as a host loop",
                        function);
  *on_device = supported;
  return RECAP_SUCCESS;
}

recap__regions_t *recap__regions_get(recap_graph_t graph) {
  recap__regions_t *r = recap__regions_attached(graph);
  if (r) return r;
  r = recap__host_calloc(1, sizeof *r);
  if (!r) {
    recap__error(RECAP_ERROR_OUT_OF_MEMORY, "regions: out of host memory");
    return NULL;
  }
  r->graph = graph;
  r->on_device = recap__regions_path_on_device(graph);
  r->current = &r->top;
  if (recap__regions_attach(graph, r) != RECAP_SUCCESS) {
    recap__host_free(r);
    return NULL;
  }
  return r;
}

/* ------------------------------------------------------------------------------------------
 * The capture behind a stream
 * ---------------------------------------------------------------------------------------- */

static recap_status_t abandon(recap_graph_t g, recap_status_t status);

/* stream takes part in a recap graph's capture that CUDA invalidated (a call made during it
 * that capture does not permit): no region can be opened, closed or set in it any more, so the
 * call abandons it and says so, as a pause that finds the capture ended does. Nothing is left
 * capturing: the graph is as before the capture began (fresh; a recapture's graph holds the
 * capture it was to replace), the capture's pool reference released, the stream free to
 * capture again. RECAP_SUCCESS when stream's
 * capture is not such a capture. */
static recap_status_t abandon_invalidated(recap_stream_t stream, const char *function) {
  recap__capture_status_t status;
  uint64_t id = 0;
  RECAP__CHECK(recap__device()->stream_capture_info(stream, &status, &id));
  if (status != RECAP__CAPTURE_INVALIDATED) return RECAP_SUCCESS;
  recap_graph_t g = recap__registry_find(id);
  if (!g || g->state != RECAP__GRAPH_CAPTURING) return RECAP_SUCCESS;
  recap__error(RECAP_ERROR_CAPTURE_INVALIDATED,
               "%s: the capture under way on stream %p was invalidated by a call that capture "
               "does not permit (cudaErrorStreamCaptureInvalidated), with %u region%s open; the "
               "capture is abandoned, the graph left as before it began: capture the step "
               "again",
               function, (void *)stream, recap__graph_region_depth(g),
               recap__graph_region_depth(g) == 1 ? "" : "s");
  return abandon(g, RECAP_ERROR_CAPTURE_INVALIDATED);
}

recap_status_t recap__regions_find_graph(recap_stream_t stream, const char *function,
                                         recap_graph_t *graph) {
  RECAP__CHECK(recap__registry_find_stream(stream, graph));
  if (!*graph) RECAP__CHECK(abandon_invalidated(stream, function));
  if (!*graph || (*graph)->state != RECAP__GRAPH_CAPTURING)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: stream %p is not capturing into a recap graph (call "
                        "recap_graph_capture_begin on it first)",
                        function, (void *)stream);
  return RECAP_SUCCESS;
}

/* The stream captures again, under a new capture id (or the same): the graph's registry entry,
 * capture id and allocator route follow. */
static recap_status_t move_capture(recap_graph_t g, const char *function) {
  recap__capture_status_t status;
  uint64_t id = 0;
  RECAP__CHECK(recap__device()->stream_capture_id(g->capture_stream, &status, &id));
  if (status != RECAP__CAPTURE_ACTIVE)
    return recap__error(RECAP_ERROR_CAPTURE_INVALIDATED,
                        "%s: the capture was invalidated as it resumed; the graph is fresh "
                        "again",
                        function);
  /* Removed first, so that adding cannot need more room. */
  recap__registry_remove(g->capture_id);
  RECAP__CHECK(recap__registry_add(id, g));
  g->capture_id = id;
  return recap__pool_route_move(g->device, g->pool, id, g->capture_stream);
}

/* Abandon graph's capture after a failure (status, whose message stays the last error): the
 * graph is fresh again. */
static recap_status_t abandon(recap_graph_t g, recap_status_t status) {
  recap__saved_error_t cause;
  recap__error_save(&cause);
  recap__graph_abandon_capture(g);
  recap__error_restore(&cause);
  return status;
}

/* Pause the capture of g's stream: *paused the graph it was building, *deps (malloc'ed) what
 * came next would have depended on. An invalidated capture (unjoined side streams) is gone:
 * the graph is abandoned. Any other failure leaves the capture as it was. */
static recap_status_t pause_capture(recap_graph_t g, recap__regions_t *r, const char *function,
                                    recap_cuda_graph_t *paused, recap__graph_node_t **deps,
                                    size_t *count) {
  *paused = NULL;
  *deps = NULL;
  *count = 0;
  /* From here until move_capture names the resumed capture, the stream may capture nothing:
   * allocations on it ask the device again. */
  recap__pool_route_forget_stream(g->device, g->pool);
  recap_status_t s = recap__device()->capture_pause(g->capture_stream, paused, deps, count);
  if (s == RECAP_ERROR_CAPTURE_INVALIDATED) {
    /* The seam's message, copied: the new one is written where it lives. */
    char cause[512];
    snprintf(cause, sizeof cause, "%s", recap_last_error());
    recap__error(s,
                 "%s: the capture ended (%s); side streams forked from it must be joined back "
                 "into its stream before a region opens or closes; the graph is fresh again",
                 function, cause);
    r->paused = true;
    return abandon(g, s);
  }
  if (s == RECAP_SUCCESS) r->paused = true;
  return s;
}

/* Make the paused stream capture again: into `into` after deps (device path), or into a fresh
 * graph (into NULL: the host path's next segment); then the graph's capture id, registry entry
 * and route follow. A failure abandons the capture. */
static recap_status_t resume_capture(recap_graph_t g, recap__regions_t *r, recap_cuda_graph_t into,
                                     const recap__graph_node_t *deps, size_t count,
                                     const char *function) {
  recap__capture_mode_t mode = (recap__capture_mode_t)g->options.mode;
  recap_status_t s =
      into ? recap__device()->capture_to_graph(g->capture_stream, into, deps, count, mode)
           : recap__device()->stream_begin_capture(g->capture_stream, mode);
  if (s != RECAP_SUCCESS) return abandon(g, s);
  r->paused = false;
  s = move_capture(g, function);
  if (s != RECAP_SUCCESS) return abandon(g, s);
  return RECAP_SUCCESS;
}

/* Whether a kernel's function name is one of NCCL's ("ncclDevKernel_AllReduce_...", or its
 * C++-mangled form "_Z36ncclDevKernel_...", as cuFuncGetName may report it). */
static bool nccl_kernel(const char *name) {
  if (!name) return false;
  if (strncmp(name, "_Z", 2) == 0) {
    name += 2;
    if (*name == 'N') name++;
    while (*name >= '0' && *name <= '9') name++;
  }
  return strncmp(name, "nccl", 4) == 0;
}

/* Check the body just captured: CUDA runs only some node kinds inside a conditional body, and
 * would accept the others at capture and fail the instantiation much later. */
static recap_status_t scan_body(recap_cuda_graph_t body, const recap__region_frame_t *f,
                                unsigned depth, const char *function) {
  recap_graph_info_t info;
  memset(&info, 0, sizeof info);
  RECAP__CHECK(recap__device()->graph_inspect(body, &info));
  recap_status_t s = RECAP_SUCCESS;
  for (size_t i = 0; i < info.node_count && s == RECAP_SUCCESS; i++) {
    const recap_graph_node_t *n = &info.nodes[i];
    /* NCCL's kernels (a collective enqueued by a direct NCCL call, which recap_nccl_* would
     * have refused here) are kernel nodes that CUDA accepts at capture and refuses at
     * instantiation. */
    if (n->type == RECAP_NODE_KERNEL && nccl_kernel(n->kernel_name)) {
      s = recap__error(
          RECAP_ERROR_INVALID_USAGE,
          "%s: branch %u of the %s region opened %u deep holds node %zu of its body, kernel %s, "
          "an NCCL collective: CUDA fails the instantiation of a conditional body holding NCCL's "
          "work with a bare cudaErrorInvalidValue (pytorch #180960), and ranks whose regions run "
          "a different number of times would wait for each other forever; enqueue collectives "
          "before or after the region; the capture is abandoned and the graph is fresh again",
          function, f->branch, recap_region_kind_name(f->kind), depth, i, n->kernel_name);
      break;
    }
    switch (n->type) {
      case RECAP_NODE_KERNEL:
      case RECAP_NODE_MEMCPY:
      case RECAP_NODE_MEMSET:
      case RECAP_NODE_EMPTY:
      case RECAP_NODE_GRAPH:
      case RECAP_NODE_CONDITIONAL: continue;
      default: break;
    }
    s = recap__error(
        RECAP_ERROR_NOT_SUPPORTED,
        "%s: branch %u of the %s region opened %u deep holds node %zu of its body, of kind %s%s%s%s, "
        "which CUDA does not run inside a conditional body (only kernels, copies, memsets, empty "
        "nodes, child graphs and regions: allocate before the region, record events after it); "
        "the capture is abandoned and the graph is fresh again",
        function, f->branch, recap_region_kind_name(f->kind), depth, i,
        recap__node_type_name(n->type), n->kernel_name ? " (kernel " : "",
        n->kernel_name ? n->kernel_name : "", n->kernel_name ? ")" : "");
  }
  recap__graph_info_clear(&info);
  return s;
}

/* Room for n more steps in block, so that appending after a pause cannot fail. */
static recap_status_t block_reserve(recap__region_block_t *block, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!recap__region_block_append(block)) {
      block->count -= i;
      return RECAP_ERROR_OUT_OF_MEMORY;
    }
  block->count -= n;
  return RECAP_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Regions
 * ---------------------------------------------------------------------------------------- */

recap__region_cond_t *recap__regions_find_cond(recap__regions_t *r, recap_cond_t cond) {
  for (size_t i = 0; r && i < r->cond_count; i++)
    if (r->conds[i].cond.handle == cond.handle && r->conds[i].cond.flag == cond.flag)
      return &r->conds[i];
  return NULL;
}

static recap__cond_kind_t cuda_kind(recap_region_kind_t kind) {
  switch (kind) {
    case RECAP_REGION_WHILE: return RECAP__COND_WHILE;
    case RECAP_REGION_SWITCH: return RECAP__COND_SWITCH;
    default: return RECAP__COND_IF; /* IF, and IF_ELSE with two bodies */
  }
}

/* Checks of recap_region_begin that need no capture. */
static recap_status_t check_kind(recap_region_kind_t kind, unsigned *branches) {
  RECAP__ARG(kind >= RECAP_REGION_WHILE && kind <= RECAP_REGION_SWITCH,
             "recap_region_begin: kind %d is not one of RECAP_REGION_WHILE, RECAP_REGION_IF, "
             "RECAP_REGION_IF_ELSE, RECAP_REGION_SWITCH",
             (int)kind);
  unsigned want = kind == RECAP_REGION_IF_ELSE ? 2 : 1;
  if (kind == RECAP_REGION_SWITCH) {
    RECAP__ARG(*branches >= 1 && *branches <= RECAP_REGION_MAX_BRANCHES,
               "recap_region_begin: branches is %u, but a switch region has 1 to %d branches "
               "(there is no default)",
               *branches, (int)RECAP_REGION_MAX_BRANCHES);
    return RECAP_SUCCESS;
  }
  RECAP__ARG(*branches == 0 || *branches == want,
             "recap_region_begin: branches is %u, but a %s region has %u (pass 0 or %u)", *branches,
             recap_region_kind_name(kind), want, want);
  *branches = want;
  return RECAP_SUCCESS;
}

/* The checks that leave the capture unharmed; *cond_out the condition's entry. */
static recap_status_t check_begin(recap_graph_t g, recap_stream_t stream, recap_cond_t cond,
                                  recap__regions_t **r_out, recap__region_cond_t **cond_out) {
  static const char fn[] = "recap_region_begin";
  if (stream != g->capture_stream)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: stream %p takes part in the capture, but the capture was begun on "
                        "stream %p; open regions on the capture's own stream",
                        fn, (void *)stream, (void *)g->capture_stream);
  recap__regions_t *r = recap__regions_attached(g);
  recap__region_cond_t *c = recap__regions_find_cond(r, cond);
  if (!c)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s: cond was not made by recap_cond_create in the capture under way on "
                        "this stream",
                        fn);
  if (c->used)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: cond serves a region already; a condition serves one region (create "
                        "one per region with recap_cond_create)",
                        fn);
  if (c->context != r->context)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: cond was created in %s, but the region opens in %s; create the "
                        "condition where the region opens",
                        fn, c->context == 0 ? "the graph's top level" : "another region's body",
                        r->depth == 0 ? "the graph's top level" : "a region's body");
  if (r->depth >= RECAP_REGION_MAX_DEPTH)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: %d regions are open already, the most that nest", fn,
                        (int)RECAP_REGION_MAX_DEPTH);
  if (!r->on_device && (g->options.rebind != RECAP_REBIND_OFF || g->options.check_input_liveness))
    return recap__error(RECAP_ERROR_NOT_SUPPORTED,
                        "%s: the capture runs its regions as a host loop, which has no single "
                        "executable to %s; capture without %s, or on a driver with conditional "
                        "nodes (options->regions RECAP_REGIONS_AUTO or DEVICE)",
                        fn, g->options.rebind != RECAP_REBIND_OFF ? "rebind" : "check inputs of",
                        g->options.rebind != RECAP_REBIND_OFF ? "options->rebind"
                                                              : "options->check_input_liveness");
  *r_out = r;
  *cond_out = c;
  return RECAP_SUCCESS;
}

static recap_status_t begin_device(recap_graph_t g, recap__regions_t *r, recap__region_cond_t *c,
                                   recap_region_kind_t kind, unsigned branches) {
  static const char fn[] = "recap_region_begin";
  const recap__device_ops_t *dev = recap__device();
  recap_cuda_graph_t *bodies = recap__host_calloc(branches, sizeof *bodies);
  if (!bodies) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  recap_cuda_graph_t paused;
  recap__graph_node_t *deps;
  size_t count;
  recap_status_t s = pause_capture(g, r, fn, &paused, &deps, &count);
  if (s != RECAP_SUCCESS) {
    recap__host_free(bodies);
    return s;
  }
  /* At the top level the paused graph is the capture's own, the region layer's from now on
   * until a capture_end hands it out (region_internal.h). */
  if (r->depth == 0) r->top_graph = paused;
  recap__graph_node_t node = NULL;
  s = dev->cond_node_add(paused, deps, count, cuda_kind(kind), c->cond.handle, branches, &node,
                         bodies);
  if (s != RECAP_SUCCESS) {
    /* The node is not there: the capture goes on where it was. */
    recap__saved_error_t cause;
    recap__error_save(&cause);
    recap_status_t resumed = dev->capture_to_graph(g->capture_stream, paused, deps, count,
                                                   (recap__capture_mode_t)g->options.mode);
    free(deps);
    recap__host_free(bodies);
    if (resumed != RECAP_SUCCESS) return abandon(g, recap__error_restore(&cause));
    r->paused = false;
    if (move_capture(g, fn) != RECAP_SUCCESS) return abandon(g, recap__error_restore(&cause));
    return recap__error_restore(&cause);
  }
  free(deps);
  recap__region_frame_t *f = &r->frames[r->depth++];
  memset(f, 0, sizeof *f);
  f->kind = kind;
  f->branches = branches;
  f->stream = g->capture_stream;
  f->parent_context = r->context;
  f->parent_graph = paused;
  f->node = node;
  f->bodies = bodies;
  c->used = true;
  r->context = ++r->next_context;
  s = dev->capture_to_graph(g->capture_stream, bodies[0], NULL, 0,
                            (recap__capture_mode_t)g->options.mode);
  if (s != RECAP_SUCCESS) return abandon(g, s);
  r->paused = false;
  return RECAP_SUCCESS;
}

static recap_status_t begin_host(recap_graph_t g, recap__regions_t *r, recap__region_cond_t *c,
                                 recap_region_kind_t kind, unsigned branches) {
  static const char fn[] = "recap_region_begin";
  recap__region_block_t *bodies = recap__host_calloc(branches, sizeof *bodies);
  if (!bodies || block_reserve(r->current, 2) != RECAP_SUCCESS) {
    recap__host_free(bodies);
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  recap_cuda_graph_t paused;
  recap__graph_node_t *deps;
  size_t count;
  recap_status_t s = pause_capture(g, r, fn, &paused, &deps, &count);
  free(deps);
  if (s != RECAP_SUCCESS) {
    recap__host_free(bodies);
    return s;
  }
  recap__region_step_t *segment = recap__region_block_append(r->current);
  segment->graph = paused;
  /* Inside a body, the segment that ends here is part of that body: the device path checks a
   * whole body at its end, the host path each of its segments as it ends. */
  if (r->depth > 0) {
    s = scan_body(paused, &r->frames[r->depth - 1], r->depth, fn);
    if (s != RECAP_SUCCESS) {
      recap__host_free(bodies);
      return abandon(g, s);
    }
  }
  size_t index = r->current->count;
  recap__region_step_t *step = recap__region_block_append(r->current);
  step->is_region = true;
  step->kind = kind;
  step->flag = c->cond.flag;
  step->branches = branches;
  step->bodies = bodies;
  r->host_loop = true;
  recap__region_frame_t *f = &r->frames[r->depth++];
  memset(f, 0, sizeof *f);
  f->kind = kind;
  f->branches = branches;
  f->stream = g->capture_stream;
  f->parent_context = r->context;
  f->parent_block = r->current;
  f->step = index;
  c->used = true;
  r->context = ++r->next_context;
  r->current = &bodies[0];
  s = recap__device()->stream_begin_capture(g->capture_stream,
                                            (recap__capture_mode_t)g->options.mode);
  if (s != RECAP_SUCCESS) return abandon(g, s);
  r->paused = false;
  return RECAP_SUCCESS;
}

recap_status_t recap_region_begin(recap_region_kind_t kind, recap_cond_t cond, unsigned branches,
                                  recap_stream_t stream) {
  static const char fn[] = "recap_region_begin";
  RECAP__CHECK(check_kind(kind, &branches));
  recap_graph_t g;
  RECAP__CHECK(recap__regions_find_graph(stream, fn, &g));
  if (!recap__regions_get(g)) return recap_last_status();
  recap__regions_t *r = NULL;
  recap__region_cond_t *c = NULL;
  RECAP__CHECK(check_begin(g, stream, cond, &r, &c));
  RECAP__CHECK(r->on_device ? begin_device(g, r, c, kind, branches)
                            : begin_host(g, r, c, kind, branches));
  recap_status_t s = move_capture(g, fn);
  if (s == RECAP_SUCCESS) s = recap__graph_hooks_nested_capture_begin(g, r->depth);
  if (s != RECAP_SUCCESS) return abandon(g, s);
  return RECAP_SUCCESS;
}

/* The innermost region of the capture on stream, checked for a branch's end. */
static recap_status_t check_close(recap_stream_t stream, const char *function, recap_graph_t *g_out,
                                  recap__regions_t **r_out) {
  recap_graph_t g;
  RECAP__CHECK(recap__regions_find_graph(stream, function, &g));
  recap__regions_t *r = recap__regions_attached(g);
  if (!r || r->depth == 0)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: no region is open in the capture under way on stream %p (open one "
                        "with recap_region_begin)",
                        function, (void *)stream);
  const recap__region_frame_t *f = &r->frames[r->depth - 1];
  if (stream != f->stream)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: the innermost region (%s, %u deep) was opened on stream %p, not on "
                        "stream %p; close it on the stream it was opened on",
                        function, recap_region_kind_name(f->kind), r->depth, (void *)f->stream,
                        (void *)stream);
  *g_out = g;
  *r_out = r;
  return RECAP_SUCCESS;
}

/* End the branch being captured: the modules' nested_capture_end hooks, the pause, the scan of the body
 * (the host path keeps the body's last segment). On success the stream does not capture. */
static recap_status_t close_branch(recap_graph_t g, recap__regions_t *r, const char *function) {
  RECAP__CHECK(recap__graph_hooks_nested_capture_end(g, g->capture_stream, r->depth));
  if (!r->on_device && block_reserve(r->current, 1) != RECAP_SUCCESS)
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", function);
  recap_cuda_graph_t body;
  recap__graph_node_t *deps;
  size_t count;
  RECAP__CHECK(pause_capture(g, r, function, &body, &deps, &count));
  free(deps);
  /* Device path: body is the node's, owned by it; host path: a segment of the program. */
  if (!r->on_device) recap__region_block_append(r->current)->graph = body;
  recap_status_t s = scan_body(body, &r->frames[r->depth - 1], r->depth, function);
  if (s == RECAP_SUCCESS && r->on_device) s = recap__regions_hold_unused(r, r->context, body);
  if (s != RECAP_SUCCESS) return abandon(g, s);
  return RECAP_SUCCESS;
}

recap_status_t recap_region_next_branch(recap_stream_t stream) {
  static const char fn[] = "recap_region_next_branch";
  recap_graph_t g;
  recap__regions_t *r;
  RECAP__CHECK(check_close(stream, fn, &g, &r));
  recap__region_frame_t *f = &r->frames[r->depth - 1];
  if (f->branch + 1 >= f->branches)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: the innermost region (%s, %u deep) has %u branch%s, and branch %u "
                        "is its last; close it with recap_region_end",
                        fn, recap_region_kind_name(f->kind), r->depth, f->branches,
                        f->branches == 1 ? "" : "es", f->branch);
  RECAP__CHECK(close_branch(g, r, fn));
  f->branch++;
  r->context = ++r->next_context;
  if (!r->on_device) r->current = &f->parent_block->steps[f->step].bodies[f->branch];
  RECAP__CHECK(resume_capture(g, r, r->on_device ? f->bodies[f->branch] : NULL, NULL, 0, fn));
  recap_status_t s = recap__graph_hooks_nested_capture_begin(g, r->depth);
  if (s != RECAP_SUCCESS) return abandon(g, s);
  return RECAP_SUCCESS;
}

recap_status_t recap_region_end(recap_stream_t stream) {
  static const char fn[] = "recap_region_end";
  recap_graph_t g;
  recap__regions_t *r;
  RECAP__CHECK(check_close(stream, fn, &g, &r));
  RECAP__CHECK(close_branch(g, r, fn));
  recap__region_frame_t *f = &r->frames[r->depth - 1];
  recap_status_t s = RECAP_SUCCESS;
  if (r->on_device) {
    /* CUDA refuses to instantiate a conditional node with an empty body: a branch that holds no
     * node (never captured, or captured empty) gets an empty node. */
    for (unsigned b = 0; b < f->branches && s == RECAP_SUCCESS; b++) {
      size_t nodes = 0;
      s = recap__device()->graph_node_count(f->bodies[b], &nodes);
      if (s == RECAP_SUCCESS && nodes == 0) s = recap__device()->graph_add_empty(f->bodies[b]);
    }
    if (s != RECAP_SUCCESS) return abandon(g, s);
  }
  /* The stream captures the parent again (after the region's node): the frame goes. */
  recap_cuda_graph_t parent = r->on_device ? f->parent_graph : NULL;
  recap__graph_node_t node = f->node;
  if (!r->on_device) r->current = f->parent_block;
  r->context = f->parent_context;
  recap__host_free(f->bodies);
  memset(f, 0, sizeof *f);
  r->depth--;
  return resume_capture(g, r, parent, &node, 1, fn);
}

/* Whether a condition made in context has a handle that neither a region nor an empty IF node
 * holds yet. */
static bool unheld_in(const recap__regions_t *r, uint64_t context) {
  for (size_t i = 0; i < r->cond_count; i++) {
    const recap__region_cond_t *c = &r->conds[i];
    if (!c->used && !c->held && c->context == context && c->cond.handle) return true;
  }
  return false;
}

/* Whether the capture of graph's stream was invalidated (a failed query: not known to be). */
static bool capture_invalidated(recap_graph_t graph) {
  recap__capture_status_t status;
  uint64_t id = 0;
  recap__saved_error_t saved;
  recap__error_save(&saved);
  if (recap__device()->stream_capture_id(graph->capture_stream, &status, &id) != RECAP_SUCCESS) {
    recap__error_restore(&saved);
    return false;
  }
  return status == RECAP__CAPTURE_INVALIDATED;
}

recap_status_t recap__regions_check_end(recap_graph_t graph) {
  static const char fn[] = "recap_graph_capture_end";
  recap__regions_t *r = recap__regions_attached(graph);
  if (!r) return RECAP_SUCCESS;
  /* An invalidated capture goes on no more, and no region call could close its regions: the
   * end reports the invalidation, whatever regions are open, and throws the capture away as it
   * does without regions. */
  if (capture_invalidated(graph)) return RECAP_SUCCESS;
  if (r->depth > 0) {
    const recap__region_frame_t *f = &r->frames[r->depth - 1];
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: the %s region opened %u deep is still open (in its branch %u); "
                        "close it with recap_region_end (and every region around it), then end "
                        "the capture again, which goes on",
                        fn, recap_region_kind_name(f->kind), r->depth, f->branch);
  }
  if (!r->on_device || !unheld_in(r, 0)) return RECAP_SUCCESS;
  /* Top-level conditions no region used: their handles get empty IF nodes in the capture's
   * graph, added while the capture is paused (as a region's node is), before it ends. */
  recap_cuda_graph_t paused;
  recap__graph_node_t *deps;
  size_t count;
  RECAP__CHECK(pause_capture(graph, r, fn, &paused, &deps, &count));
  r->top_graph = paused;
  recap_status_t s = recap__regions_hold_unused(r, 0, paused);
  if (s == RECAP_SUCCESS)
    s = resume_capture(graph, r, paused, deps, count, fn);
  else
    (void)abandon(graph, s);
  free(deps);
  return s;
}

/* ------------------------------------------------------------------------------------------
 * Loops
 * ---------------------------------------------------------------------------------------- */

/* A step or check of the loop failed with status: the capture is abandoned (unless the failure
 * did it already) and status returned, its message kept. */
static recap_status_t loop_failed(recap_graph_t g, recap_status_t status) {
  if (g->state != RECAP__GRAPH_CAPTURING) return status;
  return abandon(g, status);
}

recap_status_t recap_loop_capture(const recap_loop_t *loop, recap_stream_t stream) {
  static const char fn[] = "recap_loop_capture";
  RECAP__ARG(loop != NULL, "%s: loop is NULL", fn);
  recap_loop_t l = RECAP_LOOP_INIT;
  RECAP__CHECK(RECAP__OPTIONS_COPY(&l, loop, recap_loop_t, initial, fn, "RECAP_LOOP_INIT"));
  RECAP__ARG(l.step != NULL, "%s: loop->step is NULL (the function that enqueues one step)", fn);
  RECAP__ARG(l.check != NULL, "%s: loop->check is NULL (the function that sets the condition)", fn);
  if (l.unroll == 0) l.unroll = 1;
  recap_graph_t g;
  RECAP__CHECK(recap__regions_find_graph(stream, fn, &g));
  recap_cond_t cond;
  RECAP__CHECK(recap_cond_create(&cond, l.initial, stream));
  RECAP__CHECK(recap_region_begin(RECAP_REGION_WHILE, cond, 1, stream));
  for (unsigned copy = 0; copy < l.unroll; copy++) {
    recap_status_t s = l.step(l.ctx, stream, copy);
    if (s != RECAP_SUCCESS) return loop_failed(g, s);
  }
  recap_status_t s = l.check(l.ctx, cond, stream);
  if (s != RECAP_SUCCESS) return loop_failed(g, s);
  return recap_region_end(stream);
}
